#!/usr/bin/env bash
set -euo pipefail
mkdir -p raw
cat > changes.txt <<'T1_EOF'
remove signal shapes
fix pebble hazel
add valley saddle
T1_EOF
cat > raw/events.log <<'T1_EOF'
2024-06-10 WARN user=maya marks bridge walnut
2024-04-11 ERROR user=mei falcon valley shapes
2024-01-12 INFO user=maya opens reads island
2024-09-13 INFO user=priya sends glacier starts
2024-05-14 ERROR user=carla timber reads signal
2024-09-15 INFO user=dara garden signal starts
2024-05-16 ERROR user=priya willow tundra thistle
2024-09-17 ERROR user=dara paints garden comet
2024-04-18 INFO user=dara opens finds checks
2024-01-19 WARN user=dara follows falcon anchor
2024-08-10 ERROR user=maya shapes planet watches
2024-07-11 WARN user=maya nectar timber saddle
2024-05-12 WARN user=maya jasper pillar writes
2024-01-13 ERROR user=mei marks timber pebble
2024-09-14 ERROR user=carla sends keeps paints
T1_EOF
cat > raw/metrics.tsv <<'T1_EOF'
metric	value	unit
meteor_total	3040	ms
saddle_total	2851	bytes
nectar_total	990	ms
fjord_total	5163	ms
beacon_total	3418	count
cedar_total	5999	ms
T1_EOF
