#!/usr/bin/env bash
set -euo pipefail
cat > inventory.json <<'T1_EOF'
{
  "warehouse": "delta-3",
  "items": [
    {
      "sku": "CAN-2192",
      "name": "wild rivet",
      "category": "lighting",
      "qty": 15,
      "price": 140.42,
      "discontinued": true
    },
    {
      "sku": "LEM-9485",
      "name": "amber candle",
      "category": "garden",
      "qty": 15,
      "price": 156.64,
      "discontinued": true
    },
    {
      "sku": "SUM-2760",
      "name": "steady drill",
      "category": "lighting",
      "qty": 49,
      "price": 174.54,
      "discontinued": false
    },
    {
      "sku": "BRI-9584",
      "name": "swift pliers",
      "category": "garden",
      "qty": 11,
      "price": 182.77,
      "discontinued": false
    },
    {
      "sku": "VAL-9024",
      "name": "proud mallet",
      "category": "garden",
      "qty": 23,
      "price": 120.17,
      "discontinued": false
    },
    {
      "sku": "HAR-2095",
      "name": "sunny gasket",
      "category": "storage",
      "qty": 0,
      "price": 197.58,
      "discontinued": true
    },
    {
      "sku": "CRY-4204",
      "name": "plain easel",
      "category": "lighting",
      "qty": 15,
      "price": 188.96,
      "discontinued": false
    },
    {
      "sku": "PEB-6317",
      "name": "bold wrench",
      "category": "storage",
      "qty": 37,
      "price": 94.58,
      "discontinued": true
    }
  ]
}
T1_EOF
