#!/usr/bin/env bash
set -euo pipefail
cd docs
{ grep -i -w -- otter *.txt | grep -v '^[^:]*:#' || true; } > ../matches.txt
wc -l < ../matches.txt | tr -d ' ' > ../count.txt
ls *.txt | LC_ALL=C sort | comm -23 - <(cut -d: -f1 ../matches.txt | LC_ALL=C sort -u) > ../no_match.txt
cut -d: -f1 ../matches.txt | uniq -c | awk '{print $2, $1}' > ../per_file.txt
