#!/usr/bin/env bash
set -euo pipefail
mkdir -p incoming
cat > incoming/badger_58.iso <<'T1_EOF'
badger_58.iso: the noble cedar starts 795
T1_EOF
cat > incoming/nectar_15.json <<'T1_EOF'
nectar_15.json: the eager saddle covers 969
T1_EOF
cat > incoming/quartz_54.gif <<'T1_EOF'
quartz_54.gif: the crisp delta builds 14
T1_EOF
cat > incoming/badger_24.json <<'T1_EOF'
badger_24.json: the quiet marble lifts 961
T1_EOF
cat > incoming/otter_7.mkv <<'T1_EOF'
otter_7.mkv: the noble walnut takes 939
T1_EOF
cat > incoming/canyon_36.mkv <<'T1_EOF'
canyon_36.mkv: the young willow gathers 901
T1_EOF
