#!/usr/bin/env bash
set -euo pipefail
mkdir -p incoming
printf '%s' '' > incoming/tundra_74.csv
cat > incoming/coral_82.jpg <<'T1_EOF'
coral_82.jpg: the wild canyon follows 684
T1_EOF
cat > incoming/cipher_53.jpg <<'T1_EOF'
cipher_53.jpg: the rusty fjord shows 368
T1_EOF
cat > incoming/glacier_89.txt <<'T1_EOF'
glacier_89.txt: the rapid badger checks 465
T1_EOF
printf '%s' '' > incoming/walnut_18.py
cat > incoming/nectar_85.png <<'T1_EOF'
nectar_85.png: the amber fjord watches 443
T1_EOF
cat > incoming/nectar_19.jpg <<'T1_EOF'
nectar_19.jpg: the swift willow writes 524
T1_EOF
cat > incoming/glacier_88.txt <<'T1_EOF'
glacier_88.txt: the noble zephyr draws 734
T1_EOF
cat > incoming/pillar_75.bin <<'T1_EOF'
pillar_75.bin: the sunny comet holds 828
T1_EOF
cat > incoming/coral_19.json <<'T1_EOF'
coral_19.json: the quiet zephyr moves 72
T1_EOF
cat > incoming/planet_77.json <<'T1_EOF'
planet_77.json: the humble kernel sends 390
T1_EOF
cat > incoming/badger_62.py <<'T1_EOF'
badger_62.py: the silent walnut gathers 226
T1_EOF
