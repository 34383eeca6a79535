#!/usr/bin/env bash
set -euo pipefail
mkdir -p docs
cat > docs/copper.txt <<'T1_EOF'
young delta mellow OTTER forest pepper keeps shows zephyr
# thistle otter crisp moves young raven
OTTER cipher cedar hazel marks lucky turns silver lucky.
lantern fjord OTTER velvet delta shapes hidden.
anchor mellow harbor garden plain ledger
velvet lemon comet holds thistle carries Otter.
the checks collects keen pepper fancy pillar.
nectar falcon nectar thistle
T1_EOF
cat > docs/meteor.txt <<'T1_EOF'
paints eager subotter collects holds follows falcon nectar comet.
lifts nectar misty river shapes collects follows paints
amber young hazel lemon golden otter copper river.
bridge glacier canyon signal
delta otters delta badger basalt marble
otter2 bold basalt glacier pillar island.
proud sends coral glacier zephyr timber
brisk lantern quartz zephyr OTTER lemon marks
vivid marble noble turns clever harbor Otter the.
sunny tundra pebble clever turns jasper a
young fjord raven otter anchor forest
eager gathers forest lantern
T1_EOF
cat > docs/fjord.txt <<'T1_EOF'
amber lantern copper builds velvet
# golden beacon a Otter raven builds saddle
carries covers lively jasper
# opens vivid cedar island otter the witty
otter_id delta humble sunny coral lucky keeps
basalt jasper shows with OTTER carries carries.
T1_EOF
cat > docs/harbor.txt <<'T1_EOF'
# noble thistle takes otter crystal witty quiet timber island
falcon near ledger moves
meteor paints island ledger eager meteor
falcon paints builds maple bridge glacier
delta quartz pepper starts checks plain
opens maple rapid fjord hazel.
lantern mellow velvet willow sends near island covers
builds near shapes orbit
cedar harbor bold feather ribbon rusty.
garden humble witty amber delta pillar brisk sends
keeps kernel forest lucky ledger meadow.
reads anchor and badger bridge badger humble harbor
T1_EOF
cat > docs/quartz.txt <<'T1_EOF'
silver ribbon keeps gathers fjord
wild cedar jasper quiet anchor otter
raven fjord tidy tidy otter2 lemon sends
bridge shapes cipher OTTER takes.
summit carries proud shapes cedar otters lively
reads plain rapid lemon raven watches starts
otter draws gathers a eager finds saddle fancy
shapes otter harbor follows plain jasper golden gathers
bridge zephyr fancy lucky lucky walnut otter bold finds.
meteor nectar and carries the misty
comet thistle the comet pebble shapes swift beacon otter.
T1_EOF
cat > docs/velvet.txt <<'T1_EOF'
# otter with ember keeps reads orbit vivid
pillar falcon rusty thistle and
pillar marble raven silent.
builds near and quartz quiet
keeps rapid covers watches forest moves
crisp island moves orbit fancy young comet
shows covers steady witty basalt crisp.
builds pebble harbor jasper proud sunny witty.
T1_EOF
cat > docs/canyon.txt <<'T1_EOF'
tidy raven starts glacier opens follows wild summit
delta finds reads otters timber anchor.
ember OTTER covers near walnut
otter harbor holds summit pepper badger
harbor follows river gathers willow writes hazel tundra.
turns humble checks feather forest clever
nectar checks shapes silent lemon OTTER.
garden dusty otter golden young timber quartz
subotter clever lucky walnut crisp young fancy garden.
# quartz otter steady shapes finds garden beacon lantern.
OTTER covers wild bold harbor cipher rapid river
T1_EOF
