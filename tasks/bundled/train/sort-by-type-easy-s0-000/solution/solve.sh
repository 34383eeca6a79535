#!/usr/bin/env bash
set -euo pipefail
mkdir -p sorted/data sorted/images sorted/other
find incoming -type f -print0 | while IFS= read -r -d '' f; do
  name="${f##*/}"
  ext="${name##*.}"
  case "${ext,,}" in
    csv|json) dest=data ;;
    png|jpg|gif) dest=images ;;
    *) dest=other ;;
  esac
  mv -- "$f" "sorted/$dest/$name"
done
