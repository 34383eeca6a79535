#!/usr/bin/env bash
set -euo pipefail
mkdir -p bin
mkdir -p examples
cat > examples/scramble.txt <<'T1_EOF'
$ echo 'Hello, World!' | bin/scramble 3
Khoor, Zruog!
T1_EOF
