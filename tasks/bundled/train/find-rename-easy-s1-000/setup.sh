#!/usr/bin/env bash
set -euo pipefail
mkdir -p photos/garden/lucky photos/saddle photos/2024 photos
cat > photos/garden/lucky/vivid_badger_20.JPEG <<'T1_EOF'
vivid_badger_20.JPEG willow 8177
T1_EOF
cat > photos/saddle/clever_copper_81.jpg <<'T1_EOF'
clever_copper_81.jpg zephyr 2446
T1_EOF
cat > photos/2024/cache-new-1-meadow.tmp <<'T1_EOF'
fresh
T1_EOF
cat > photos/brisk_velvet_10.gif <<'T1_EOF'
brisk_velvet_10.gif forest 4963
T1_EOF
cat > photos/cache-old-1-timber.tmp <<'T1_EOF'
stale
T1_EOF
cat > photos/cache-new-0-kernel.tmp <<'T1_EOF'
fresh
T1_EOF
cat > photos/saddle/rusty_velvet_25.jpg <<'T1_EOF'
rusty_velvet_25.jpg quartz 1129
T1_EOF
cat > photos/2024/cache-old-0-hazel.tmp <<'T1_EOF'
stale
T1_EOF
cat > photos/sunny_delta_31.JPEG <<'T1_EOF'
sunny_delta_31.JPEG delta 184
T1_EOF
cat > photos/garden/lucky/humble_ledger_21.JPEG <<'T1_EOF'
humble_ledger_21.JPEG quartz 1853
T1_EOF
cat > photos/saddle/lively_thistle_57.JPEG <<'T1_EOF'
lively_thistle_57.JPEG lantern 1547
T1_EOF
cat > photos/saddle/amber_valley_92.JPEG <<'T1_EOF'
amber_valley_92.JPEG island 1004
T1_EOF
touch -d '2019-04-14 12:00:00' photos/cache-old-1-timber.tmp
touch -d '2021-06-12 12:00:00' photos/2024/cache-old-0-hazel.tmp
