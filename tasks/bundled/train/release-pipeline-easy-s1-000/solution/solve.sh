#!/usr/bin/env bash
set -euo pipefail
mkdir -p release/bin release/docs release/data
tr '\t' ',' < raw/metrics.tsv > release/data/metrics.csv
head -n 3 raw/events.log > release/data/sample.log
{ echo '## 1.10.7'; sed 's/^/- /' changes.txt; } > release/docs/CHANGELOG.md
(cd release && sha256sum $(find data -type f | LC_ALL=C sort)) > release/SHA256SUMS
