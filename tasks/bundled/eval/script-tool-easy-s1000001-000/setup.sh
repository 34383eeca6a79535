#!/usr/bin/env bash
set -euo pipefail
mkdir -p bin
mkdir -p examples
cat > examples/countoff.txt <<'T1_EOF'
$ bin/countoff 10
1
walnut
3
walnut
planet
walnut
7
walnut
9
walnutplanet
T1_EOF
