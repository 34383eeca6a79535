#!/usr/bin/env bash
set -euo pipefail
cat > corpus.txt <<'T1_EOF'
marble otter wild feather wild otter steady feather
feather otter otter marble otter quiet ember marble
steady otter wild meadow otter otter
feather steady otter ember wild marble
otter marble ember wild meadow feather otter
quiet marble feather marble ember
ember feather ember wild ember otter meadow feather ember
otter marble feather steady ember ember marble wild marble feather
marble meadow steady feather quiet feather
feather otter ember feather feather feather
otter meadow steady marble wild wild feather marble steady
T1_EOF
