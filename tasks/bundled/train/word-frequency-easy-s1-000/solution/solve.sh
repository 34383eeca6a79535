#!/usr/bin/env bash
set -euo pipefail
export LC_ALL=C
tr 'A-Z' 'a-z' < corpus.txt | tr -cs 'a-z' '\n' | sed '/^$/d' > /tmp/words.txt
cp /tmp/words.txt /tmp/kept.txt
sort /tmp/kept.txt | uniq -c | sort -k1,1nr -k2,2 | awk 'NR <= 3 {print $1, $2}' > top.txt
{
  echo "lines=$(wc -l < corpus.txt)"
  echo "words=$(wc -l < /tmp/words.txt)"
  echo "unique=$(sort -u /tmp/words.txt | wc -l)"
} > stats.txt
