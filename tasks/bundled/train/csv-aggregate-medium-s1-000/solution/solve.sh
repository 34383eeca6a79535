#!/usr/bin/env bash
set -euo pipefail
{
  echo region,orders,units,revenue
  awk -F, 'NR > 1 && $2 ~ /^2024-02-/ && $5 != "" { o[$3]++; u[$3] += $5; c[$3] += $5 * $6 }
    END { for (r in o) printf "%s,%d,%d,%.2f\n", r, o[r], u[r], c[r] }' sales.csv | LC_ALL=C sort
} > summary.csv
