#!/usr/bin/env bash
set -euo pipefail
mkdir -p project project/cache project/docs project/logs project/src
cat > project/README.md <<'T1_EOF'
# cipher
copper shapes crystal 859
T1_EOF
cat > project/cache/copper.bin <<'T1_EOF'
walnut checks jasper 786
T1_EOF
cat > project/cache/hazel.bin <<'T1_EOF'
timber collects falcon 447
T1_EOF
cat > project/docs/coral.md <<'T1_EOF'
kernel follows valley 182
T1_EOF
cat > project/logs/forest.log <<'T1_EOF'
valley writes beacon 477
willow finds garden 549
harbor takes ribbon 656
T1_EOF
cat > project/logs/harbor.log <<'T1_EOF'
harbor collects jasper 618
meteor keeps river 455
anchor covers forest 246
T1_EOF
cat > project/logs/maple.log <<'T1_EOF'
badger checks copper 974
quartz writes badger 591
fjord marks planet 306
T1_EOF
cat > project/src/feather.sh <<'T1_EOF'
zephyr shapes copper 7
beacon checks meadow 85
T1_EOF
cat > project/src/valley.txt <<'T1_EOF'
comet draws otter 256
glacier builds island 177
T1_EOF
cat > project/src/zephyr.py <<'T1_EOF'
harbor marks tundra 829
ribbon follows orbit 100
T1_EOF
