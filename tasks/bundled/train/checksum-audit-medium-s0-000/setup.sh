#!/usr/bin/env bash
set -euo pipefail
mkdir -p files backup
cat > files/planet.txt <<'T1_EOF'
valley shows 45364
hazel checks 15249
T1_EOF
cat > files/saddle.dat <<'T1_EOF'
walnut sends 87186
pepper watches 58072
T1_EOF
cat > files/timber.dat <<'T1_EOF'
glacier writes 83881
zephyr moves 86923
anchor starts 77329
tundra covers 6421
T1_EOF
cat > files/hazel.dat <<'T1_EOF'
pepper keeps 68882
fjord builds 96152
summit collects 14301
summit finds 41541
T1_EOF
cat > files/ember.dat <<'T1_EOF'
velvet collects 30011
jasper marks 89156
T1_EOF
cat > files/pepper.csv <<'T1_EOF'
pebble paints 56306
anchor shapes 25219
badger sends 69774
T1_EOF
cat > files/kernel.txt <<'T1_EOF'
anchor paints 19296
falcon follows 90834
pebble opens 63296
jasper writes 21833
T1_EOF
cat > files/coral.csv <<'T1_EOF'
crystal opens 03574
island writes 17728
walnut takes 81454
T1_EOF
cat > files/glacier.csv <<'T1_EOF'
harbor covers 63950
summit covers 49490
comet opens 13965
ledger lifts 5547
T1_EOF
cat > files/nectar.dat <<'T1_EOF'
beacon collects 81120
harbor draws 62596
falcon takes 14946
lantern sends 68211
T1_EOF
cat > backup/timber.dat <<'T1_EOF'
glacier writes 83881
zephyr moves 86923
anchor starts 77329
tundra covers 6421
T1_EOF
cat > backup/tundra.txt <<'T1_EOF'
crystal marks 24352
walnut lifts 48101
bridge finds 59204
T1_EOF
cat > backup/coral.csv <<'T1_EOF'
crystal opens 93574
island writes 17728
walnut takes 81454
T1_EOF
cat > backup/kernel.txt <<'T1_EOF'
anchor paints 19296
falcon follows 90834
pebble opens 63296
jasper writes 21833
T1_EOF
cat > backup/nectar.dat <<'T1_EOF'
beacon collects 81120
harbor draws 62596
falcon takes 14946
lantern sends 68211
T1_EOF
cat > backup/ribbon.dat <<'T1_EOF'
island finds 14521
T1_EOF
cat > backup/pepper.csv <<'T1_EOF'
pebble paints 56306
anchor shapes 25219
badger sends 69774
T1_EOF
cat > backup/glacier.csv <<'T1_EOF'
harbor covers 63950
summit covers 49490
comet opens 13965
ledger lifts 5547
T1_EOF
cat > backup/ember.dat <<'T1_EOF'
velvet collects 30011
jasper marks 89156
T1_EOF
cat > backup/planet.txt <<'T1_EOF'
valley shows 35364
hazel checks 15249
T1_EOF
cat > MANIFEST.sha256 <<'T1_EOF'
747edf14048550a841e4a2c54cf968e4765602ef7e9d367118ec00ef850dd8e4  files/ember.dat
b66717cae12ebb7838edf2dbf3390fdf5ccb3b5151b2211c0088ac4cca88be6b  files/kernel.txt
ee025fc7a3ba7d2d03d0c90f1a8551e85d3e62ab14c4a628c1f34a7e76a9b3ea  files/tundra.txt
83de843236c629f10aa6487568f8e1cdb7cc5602bbe0ac727d1dc936f52a7638  files/pepper.csv
970f54dac595d79307b81fd23d17605eff019c8cf70e0e79e9ba8b02a78c476e  files/ribbon.dat
39f976b08a5ca6338cdd390bcbe75a0fa8c0695b08017b656c2c737ad44c70b5  files/planet.txt
6547d4bc99f4cc73b2cc32801fa9779df0faf9442505f6b5298fa511d9df155e  files/glacier.csv
aa7a31037691efcf38ef7657d8f35e90205dbd8eda0dff2822394e9e248e517e  files/timber.dat
c2f95c58ab83e979c3c0d4608b09bc28eee8e7a956e9f01ae93e066926f51a76  files/nectar.dat
1b9ad025c37768d08cf230aa8d6243b26929de72c5aa533a31f8cb04e3399c7d  files/coral.csv
T1_EOF
