#!/usr/bin/env bash
set -euo pipefail
export LC_ALL=C
mkdir -p report
{ zcat logs/access.log.2.gz; cat logs/access.log.1; cat logs/access.log; } > /tmp/all.log
awk '{print $9}' /tmp/all.log | sort -n | uniq -c | awk '{print $2, $1}' > report/status_counts.txt
awk '{print $1}' /tmp/all.log | sort | uniq -c | sort -k1,1nr -k2,2 | awk 'NR <= 3 {print $1, $2}' > report/top_ips.txt
awk '$9 >= 500 {split($7, p, "?"); print p[1]}' /tmp/all.log | sort -u > report/error_paths.txt
awk '{s += ($10 == "-" ? 0 : $10)} END {printf "%d\n", s}' /tmp/all.log > report/bytes.txt
awk '{split($4, t, ":"); print t[2]}' /tmp/all.log | sort | uniq -c | sort -k1,1nr | awk 'NR == 1 {print $2}' > report/busiest_hour.txt
{
  echo date,requests
  awk 'BEGIN {split("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec", m, " "); for (i in m) num[m[i]] = sprintf("%02d", i)}
    {split(substr($4, 2, 11), d, "/"); print d[3] "-" num[d[2]] "-" d[1]}' /tmp/all.log | sort | uniq -c | awk '{print $2 "," $1}'
} > report/per_day.csv
