#!/usr/bin/env bash
set -euo pipefail
mkdir -p docs
cat > docs/island.txt <<'T1_EOF'
holds forest badger feather delta lifts
reads dusty walnut mellow fjord signal
brisk shows harbor nectar jasper sunny gathers
swift watches brisk near rapid
gentle valley marble with mellow crystal.
calm with quiet copper lifts amber
finds amber cedar covers willow
raven copper rusty shapes signal
thistle rapid ribbon river calm.
T1_EOF
cat > docs/ribbon.txt <<'T1_EOF'
witty vivid garden velvet marks
summit misty falcon steady swift shapes.
watches plain lantern dusty.
velvet tundra comet turns vivid.
summit lantern humble basalt rapid meadow kernel golden
river ledger misty witty lucky rapid.
misty feather follows CANYON bridge draws bold glacier
T1_EOF
cat > docs/zephyr.txt <<'T1_EOF'
moves amber crisp timber thistle comet quiet
lifts noble rusty delta zephyr draws checks bridge
young canyon collects plain delta summit
island kernel reads orbit anchor
pebble ribbon clever wild Canyon.
near near copper pepper summit gathers quartz.
takes thistle and cedar tidy glacier meteor.
canyon lifts kernel thistle velvet mellow
T1_EOF
cat > docs/velvet.txt <<'T1_EOF'
canyon brisk humble crystal keeps.
timber badger falcon lively canyon velvet
nectar keeps near quartz delta lucky swift rusty
eager lemon finds thistle Canyon
thistle holds canyon moves beacon shows delta shapes orbit
brisk bridge silver swift pepper reads rusty
crisp opens shows canyon checks harbor copper
finds lifts young garden and CANYON writes
T1_EOF
cat > docs/timber.txt <<'T1_EOF'
plain pillar covers builds hidden silent
brisk tundra keen planet coral watches.
island finds young valley timber
raven plain bold watches
tidy basalt covers takes
vivid gentle badger and basalt meadow
otter shows carries lemon starts
T1_EOF
