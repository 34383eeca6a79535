#!/usr/bin/env bash
set -euo pipefail
cat > inventory.json <<'T1_EOF'
{
  "warehouse": "basalt-9",
  "items": [
    {
      "sku": "FOR-7107",
      "name": "vivid easel",
      "category": "kitchen",
      "qty": 1,
      "price": 42.8,
      "discontinued": false
    },
    {
      "sku": "EMB-1281",
      "name": "bold candle",
      "category": "garden",
      "qty": 34,
      "price": 162.69,
      "discontinued": true
    },
    {
      "sku": "CAN-8207",
      "name": "keen trowel",
      "category": "kitchen",
      "qty": 46,
      "price": 95.53,
      "discontinued": false
    },
    {
      "sku": "WAL-9833",
      "name": "amber nozzle",
      "category": "garden",
      "qty": 40,
      "price": 75.14,
      "discontinued": false
    },
    {
      "sku": "DEL-7656",
      "name": "noble hammer",
      "category": "kitchen",
      "qty": 5,
      "price": 110.21,
      "discontinued": false
    },
    {
      "sku": "EMB-3904",
      "name": "tidy funnel",
      "category": "garden",
      "qty": 42,
      "price": 137.73,
      "discontinued": true
    },
    {
      "sku": "COM-2120",
      "name": "plain shovel",
      "category": "garden",
      "qty": 33,
      "price": 9.66,
      "discontinued": false
    },
    {
      "sku": "BAS-9793",
      "name": "calm shovel",
      "category": "outdoor",
      "qty": 3,
      "price": 173.24,
      "discontinued": false
    },
    {
      "sku": "FJO-7328",
      "name": "quiet funnel",
      "category": "outdoor",
      "qty": 0,
      "price": 46.49,
      "discontinued": true
    },
    {
      "sku": "ORB-4055",
      "name": "steady bucket",
      "category": "kitchen",
      "qty": 38,
      "price": 138.63,
      "discontinued": true
    },
    {
      "sku": "CRY-7654",
      "name": "rapid candle",
      "category": "kitchen",
      "qty": 5,
      "price": 70.99,
      "discontinued": false
    },
    {
      "sku": "PLA-1773",
      "name": "eager drill",
      "category": "kitchen",
      "qty": 9,
      "price": 7.3,
      "discontinued": false
    },
    {
      "sku": "OTT-3791",
      "name": "hidden funnel",
      "category": "outdoor",
      "qty": 7,
      "price": 189.7,
      "discontinued": false
    },
    {
      "sku": "PEB-8994",
      "name": "keen funnel",
      "category": "garden",
      "qty": 48,
      "price": 18.05,
      "discontinued": true
    }
  ]
}
T1_EOF
