#!/usr/bin/env bash
set -euo pipefail
export LC_ALL=C
mkdir -p report
{ cat logs/access.log; } > /tmp/all.log
awk '{print $9}' /tmp/all.log | sort -n | uniq -c | awk '{print $2, $1}' > report/status_counts.txt
awk '{print $1}' /tmp/all.log | sort | uniq -c | sort -k1,1nr -k2,2 | awk 'NR <= 3 {print $1, $2}' > report/top_ips.txt
awk '$9 >= 500 {split($7, p, "?"); print p[1]}' /tmp/all.log | sort -u > report/error_paths.txt
awk '{s += ($10 == "-" ? 0 : $10)} END {printf "%d\n", s}' /tmp/all.log > report/bytes.txt
