#!/usr/bin/env bash
set -euo pipefail
find photos -type f -name '*.tmp' -mtime +30 -delete
find photos -type f -iname '*.jpeg' -print0 | while IFS= read -r -d '' f; do mv -- "$f" "${f%.*}.jpg"; done
