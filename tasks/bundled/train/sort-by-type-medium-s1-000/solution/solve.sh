#!/usr/bin/env bash
set -euo pipefail
mkdir -p sorted/images sorted/code sorted/data sorted/other
find incoming -type f -empty -delete
find incoming -type f -print0 | while IFS= read -r -d '' f; do
  name="${f##*/}"
  ext="${name##*.}"
  case "${ext,,}" in
    png|jpg|gif) dest=images ;;
    py|sh) dest=code ;;
    csv|json) dest=data ;;
    *) dest=other ;;
  esac
  mv -- "$f" "sorted/$dest/$name"
done
(cd sorted && find . -mindepth 2 -type f | sed 's|^\./||' | LC_ALL=C sort) > sorted/manifest.txt.tmp
mv sorted/manifest.txt.tmp sorted/manifest.txt
