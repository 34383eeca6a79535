#!/usr/bin/env bash
set -euo pipefail
mkdir -p photos/garden photos/2023 photos/nectar/proud photos
cat > photos/garden/cache-old-1-fjord.tmp <<'T1_EOF'
stale
T1_EOF
cat > 'photos/2023/GENTLE RAVEN 43.JPEG' <<'T1_EOF'
GENTLE RAVEN 43.JPEG orbit 9965
T1_EOF
cat > photos/2023/RAPID_GARDEN_54.gif <<'T1_EOF'
RAPID_GARDEN_54.gif timber 9579
T1_EOF
cat > photos/nectar/proud/cache-new-0-pillar.tmp <<'T1_EOF'
fresh
T1_EOF
cat > photos/nectar/proud/BRISK_QUARTZ_68.png <<'T1_EOF'
BRISK_QUARTZ_68.png falcon 3548
T1_EOF
cat > photos/2023/IMG_3263.jpeg <<'T1_EOF'
IMG_3263.jpeg forest 4800
T1_EOF
cat > photos/2023/dusty_island_69.jpg <<'T1_EOF'
dusty_island_69.jpg otter 6290
T1_EOF
cat > photos/IMG_9008.JPEG <<'T1_EOF'
IMG_9008.JPEG beacon 6483
T1_EOF
cat > photos/2023/IMG_8196.jpeg <<'T1_EOF'
IMG_8196.jpeg glacier 5985
T1_EOF
cat > photos/NOBLE_CIPHER_56.gif <<'T1_EOF'
NOBLE_CIPHER_56.gif nectar 5959
T1_EOF
cat > photos/garden/BRISK_GARDEN_71.jpeg <<'T1_EOF'
BRISK_GARDEN_71.jpeg willow 405
T1_EOF
cat > photos/swift_glacier_47.jpeg <<'T1_EOF'
swift_glacier_47.jpeg meteor 5363
T1_EOF
cat > photos/nectar/proud/cache-old-0-feather.tmp <<'T1_EOF'
stale
T1_EOF
cat > 'photos/2023/calm valley 56.gif' <<'T1_EOF'
calm valley 56.gif comet 9992
T1_EOF
cat > photos/nectar/proud/crisp_cedar_93.JPEG <<'T1_EOF'
crisp_cedar_93.JPEG badger 4449
T1_EOF
touch -d '2021-02-15 12:00:00' photos/garden/cache-old-1-fjord.tmp
touch -d '2021-07-18 12:00:00' photos/nectar/proud/cache-old-0-feather.tmp
head -c 15663 /dev/zero | tr '\0' 'x' > photos/garden/GENTLE_RIVER_27.JPEG
head -c 58081 /dev/zero | tr '\0' 'x' > 'photos/2023/brisk planet 78.JPEG'
head -c 35234 /dev/zero | tr '\0' 'x' > 'photos/garden/IMG 1419.gif'
head -c 46640 /dev/zero | tr '\0' 'x' > 'photos/garden/bold hazel 29.JPEG'
