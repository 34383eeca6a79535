#!/usr/bin/env bash
set -euo pipefail
mkdir -p files files/raw/2024 files/raw files/docs backup backup/raw backup/raw/2024 backup/docs
cat > files/anchor.dat <<'T1_EOF'
raven paints 11694
garden writes 78924
T1_EOF
cat > files/tundra.txt <<'T1_EOF'
feather opens 40356
T1_EOF
cat > files/raw/2024/cipher.dat <<'T1_EOF'
saddle holds 13139
badger draws 12670
T1_EOF
cat > files/raw/2024/raven.dat <<'T1_EOF'
forest finds 52090
meadow moves 72417
T1_EOF
cat > files/walnut.txt <<'T1_EOF'
falcon sends 51649
summit paints 92166
T1_EOF
cat > files/raw/basalt.txt <<'T1_EOF'
walnut shows 88666
T1_EOF
cat > files/docs/pillar.dat <<'T1_EOF'
ember draws 53533
T1_EOF
cat > files/raw/2024/otter.csv <<'T1_EOF'
orbit carries 62644
signal sends 34137
signal opens 63287
T1_EOF
cat > files/kernel.csv <<'T1_EOF'
island writes 3493
orbit collects 79772
jasper collects 44042
T1_EOF
cat > files/zephyr.txt <<'T1_EOF'
lantern reads 82771
basalt reads 91513
T1_EOF
cat > files/planet.dat <<'T1_EOF'
lemon starts 98934
fjord carries 62182
T1_EOF
cat > files/docs/falcon.csv <<'T1_EOF'
feather opens 44653
ribbon checks 70179
T1_EOF
cat > files/raw/2024/quartz.dat <<'T1_EOF'
feather finds 42924
quartz finds 69463
pebble writes 69183
T1_EOF
cat > files/raw/2024/cedar.dat <<'T1_EOF'
basalt shapes 97563
jasper marks 52734
marble starts 26967
falcon reads 9353
T1_EOF
cat > files/raw/maple.csv <<'T1_EOF'
cipher writes 60119
fjord turns 58179
island collects 97136
planet writes 23080
T1_EOF
cat > backup/zephyr.txt <<'T1_EOF'
lantern reads 72771
basalt reads 91513
T1_EOF
cat > backup/raw/ribbon.txt <<'T1_EOF'
bridge writes 65686
coral writes 26897
T1_EOF
cat > backup/raw/2024/cipher.dat <<'T1_EOF'
saddle holds 13139
badger draws 12670
T1_EOF
cat > backup/kernel.csv <<'T1_EOF'
island writes 3493
orbit collects 79772
jasper collects 44042
T1_EOF
cat > backup/planet.dat <<'T1_EOF'
lemon starts 88934
fjord carries 62182
T1_EOF
cat > backup/raw/basalt.txt <<'T1_EOF'
walnut shows 88666
T1_EOF
cat > backup/tundra.txt <<'T1_EOF'
feather opens 30356
T1_EOF
cat > backup/docs/pillar.dat <<'T1_EOF'
ember draws 53533
T1_EOF
cat > backup/anchor.dat <<'T1_EOF'
raven paints 11694
garden writes 78924
T1_EOF
cat > backup/meteor.dat <<'T1_EOF'
beacon opens 26556
ember carries 85205
T1_EOF
cat > backup/raw/2024/quartz.dat <<'T1_EOF'
feather finds 42924
quartz finds 69463
pebble writes 69183
T1_EOF
cat > backup/raw/2024/otter.csv <<'T1_EOF'
orbit carries 62644
signal sends 34137
signal opens 63287
T1_EOF
cat > backup/raw/maple.csv <<'T1_EOF'
cipher writes 60119
fjord turns 58179
island collects 97136
planet writes 23080
T1_EOF
cat > backup/docs/falcon.csv <<'T1_EOF'
feather opens 44653
ribbon checks 70179
T1_EOF
cat > MANIFEST.sha256 <<'T1_EOF'
775f1887bce949a056777bd6361aa0e66599ab64716ebe47ffed8d299291b6de  files/meteor.dat
9b4fc425d45e7cc4aea628f0ac1356361a3a9098ee7895c69a6c94daf717f454  files/docs/falcon.csv
c3597df0a9f7215fa90464e91b1383a700701515157a4198d976b1f312bc6e4b  files/raw/maple.csv
3110578c33d4401e50ce43d7bc3887c23fe0161e9684a7fd925550e40e1dc509  files/planet.dat
13ea3972d5e5162334d4cf33d3f677313cec450628ecc1fdb6d6172a024f0612  files/anchor.dat
08c584378aa50c8b7d6dde1372cd58dd4487bbe385bdd01b957b3c7217db0a6b  files/kernel.csv
fb669f8ea2dc778ceaaacdc1a0a5d0baf9ad332f2c693f6a879aa3b6be616fb9  files/raw/2024/cipher.dat
af3d462f199f930ad13051c473a3ce2e4ca623ec20a4a6438fa0692ee7c6f0cf  files/zephyr.txt
a100b1e3ae4f2a0ba2e76936f50e654a282ae8b38f67effeb65735641f0c06d0  files/raw/basalt.txt
c12e68d49a7f13b810c8c30a9176778f76fba28a6f4f57312f2debe166eccff1  files/tundra.txt
b5d11abfab3851fdaa9bcbb1672959dc0a13cd090b6a5bfdf0eeea3b30578703  files/raw/2024/otter.csv
963bec61b702feae47c432bd5722bca8072fe3fe0d97581523a3bc326acea1e6  files/docs/pillar.dat
dcaab7301e14569522dfa0de155e40b0dec08e0719932d02417eba742b2291c2  files/raw/2024/quartz.dat
0144537bcb26b1d2b211c1644bc1846195b9faebbcd80367c1dbe4f468ed5fe8  files/raw/ribbon.txt
T1_EOF
