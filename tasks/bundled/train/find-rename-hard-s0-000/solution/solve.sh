#!/usr/bin/env bash
set -euo pipefail
find photos -type f -name '*.tmp' -mtime +30 -delete
find photos -type f -iname '*.jpeg' -print0 | while IFS= read -r -d '' f; do mv -- "$f" "${f%.*}.jpg"; done
find photos -type f -name '* *' -print0 | while IFS= read -r -d '' f; do
  b="${f##*/}"
  mv -- "$f" "${f%/*}/${b// /_}"
done
find photos -type f -print0 | while IFS= read -r -d '' f; do
  b="${f##*/}"
  l="${b,,}"
  [ "$b" = "$l" ] || mv -- "$f" "${f%/*}/$l"
done
find photos -type f -size +10k | LC_ALL=C sort > large_files.txt
