#!/usr/bin/env bash
set -euo pipefail
mkdir -p project project/cache project/docs project/logs project/src
cat > project/README.md <<'T1_EOF'
# anchor
pebble lifts delta 392
T1_EOF
cat > project/cache/jasper.bin <<'T1_EOF'
zephyr paints hazel 561
T1_EOF
cat > project/cache/lantern.bin <<'T1_EOF'
zephyr shapes ribbon 368
T1_EOF
cat > project/docs/harbor.md <<'T1_EOF'
canyon sends otter 864
T1_EOF
cat > project/logs/signal.log <<'T1_EOF'
otter takes coral 984
raven gathers orbit 377
garden gathers falcon 261
T1_EOF
cat > project/logs/summit.log <<'T1_EOF'
badger collects ribbon 150
comet carries forest 119
timber sends summit 794
T1_EOF
cat > project/src/badger.sh <<'T1_EOF'
nectar lifts river 119
basalt gathers pillar 114
T1_EOF
cat > project/src/coral.py <<'T1_EOF'
anchor lifts signal 629
lemon takes meadow 918
T1_EOF
cat > project/src/feather.sh <<'T1_EOF'
cipher draws beacon 319
tundra opens valley 951
T1_EOF
cat > project/src/island.log <<'T1_EOF'
coral writes anchor 486
T1_EOF
cat > project/src/planet.txt <<'T1_EOF'
quartz carries forest 935
pepper collects jasper 496
T1_EOF
staging=$(mktemp -d)
(
  cd "$staging"
mkdir -p data notes
cat > data/tundra.txt <<'T1_EOF'
velvet finds zephyr 677
T1_EOF
cat > notes/ember.txt <<'T1_EOF'
marble draws hazel 414
T1_EOF
)
mkdir -p incoming
tar -czf incoming/bundle.tar.gz -C "$staging" data notes
rm -rf "$staging"
