#!/usr/bin/env bash
set -euo pipefail
cat > sales.csv <<'T1_EOF'
order_id,date,region,product,units,unit_price
1749,2024-02-02,east,pliers,18,5.54
1751,2024-02-11,central,bucket,20,82.85
1753,2024-02-25,lowland,pliers,19,5.54
1754,2024-02-27,highland,bucket,6,82.85
1756,2024-02-24,east,hammer,14,63.93
1758,2024-02-12,highland,hammer,4,63.93
1759,2024-02-06,highland,rivet,10,87.68
1760,2024-01-04,east,hammer,,63.93
1762,2024-02-16,highland,hammer,14,63.93
1764,2024-02-17,lowland,bucket,18,82.85
1765,2024-02-12,east,rivet,13,87.68
1766,2024-02-24,lowland,mallet,19,71.72
1769,2024-02-09,lowland,hammer,11,63.93
1771,2024-02-10,central,bucket,,82.85
1772,2024-02-28,east,pliers,17,5.54
1774,2024-02-08,highland,pliers,4,5.54
1777,2024-02-20,central,bucket,,82.85
1778,2024-02-18,central,hammer,6,63.93
1780,2024-02-16,central,mallet,11,71.72
1782,2024-02-23,lowland,mallet,17,71.72
1783,2024-02-19,lowland,pliers,19,5.54
1784,2024-02-25,east,rivet,14,87.68
1786,2024-01-16,highland,pliers,2,5.54
1787,2024-02-04,highland,hammer,14,63.93
1789,2024-01-13,lowland,pliers,20,5.54
T1_EOF
