#!/usr/bin/env bash
set -euo pipefail
mkdir -p config notes raw src
cat > changes.txt <<'T1_EOF'
remove reads lifts
fix maple watches
fix bridge keeps
speed up comet lifts
fix writes finds
T1_EOF
cat > config/app.json <<'T1_EOF'
{
  "name": "gentle-marble",
  "version": "0.0.0-dev",
  "debug": true,
  "workers": 5,
  "region": "ledger"
}
T1_EOF
cat > notes/1-jasper.md <<'T1_EOF'
## jasper
thistle thistle velvet hazel sends @VERSION@
T1_EOF
cat > notes/2-fjord.md <<'T1_EOF'
## fjord
shapes collects anchor coral moves @VERSION@
T1_EOF
cat > notes/3-quartz.md <<'T1_EOF'
## quartz
kernel raven signal fjord draws @VERSION@
T1_EOF
cat > notes/4-cedar.md <<'T1_EOF'
## cedar
kernel river saddle meteor reads @VERSION@
T1_EOF
cat > raw/events.log <<'T1_EOF'
2024-01-10 WARN user=vera kernel carries badger
2024-04-11 INFO user=omar crystal saddle opens
2024-03-12 ERROR user=omar jasper draws sends
2024-07-13 WARN user=carla velvet basalt carries
2024-04-14 INFO user=mei gathers coral basalt
2024-07-15 WARN user=wen jasper moves covers
2024-09-16 ERROR user=mei reads planet feather
2024-08-17 WARN user=wen hazel garden lemon
2024-06-18 INFO user=omar island writes checks
2024-06-19 ERROR user=wen sends builds signal
2024-01-10 WARN user=omar paints saddle lemon
2024-08-11 ERROR user=mei ribbon thistle thistle
2024-07-12 INFO user=mei beacon ribbon holds
2024-09-13 INFO user=mei paints forest marks
2024-09-14 ERROR user=mei orbit copper reads
2024-03-15 INFO user=mei copper opens coral
2024-03-16 ERROR user=alan marble glacier follows
2024-08-17 WARN user=alan orbit planet covers
2024-04-18 INFO user=wen canyon kernel finds
2024-08-19 WARN user=omar jasper comet fjord
2024-03-10 WARN user=wen orbit falcon saddle
T1_EOF
cat > raw/metrics.tsv <<'T1_EOF'
metric	value	unit
summit_total	3602	ms
quartz_total	5066	ms
hazel_total	210	ms
basalt_total	1256	ms
garden_total	5775	count
T1_EOF
cat > src/cipher.sh <<'T1_EOF'
#!/bin/sh
# cipher
echo collects falcon
echo nectar checks
echo reads lemon
T1_EOF
cat > src/feather.sh <<'T1_EOF'
#!/bin/sh
# feather
echo carries meteor
echo badger pebble
echo willow turns
echo coral canyon
T1_EOF
cat > src/pillar.sh <<'T1_EOF'
#!/bin/sh
# pillar
echo paints watches
T1_EOF
cat > src/river.txt <<'T1_EOF'
bridge marble hazel quartz
T1_EOF
