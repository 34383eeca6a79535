#!/usr/bin/env bash
set -euo pipefail
cat > sales.csv <<'T1_EOF'
order_id,date,region,product,units,unit_price
3729,2024-03-28,west,ladder,2,58.13
3732,2024-03-18,lowland,rivet,15,70.88
3733,2024-03-05,highland,hammer,10,46.29
3734,2024-03-03,west,wrench,4,12.27
3737,2024-03-23,highland,rivet,1,70.88
3740,2024-03-13,west,ladder,6,58.13
3741,2024-03-22,lowland,trowel,7,54.19
3744,2024-03-25,lowland,rivet,10,70.88
3745,2024-03-26,lowland,trowel,15,54.19
3746,2024-03-16,highland,trowel,8,54.19
3748,2024-03-14,highland,rivet,20,70.88
3749,2024-03-09,highland,hammer,11,46.29
T1_EOF
