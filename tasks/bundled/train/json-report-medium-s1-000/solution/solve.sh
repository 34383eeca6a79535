#!/usr/bin/env bash
set -euo pipefail
python3 - <<'PY'
import json

doc = json.load(open("inventory.json"))
items = doc["items"]
active = [i for i in items if not i.get("discontinued", False)]
value = lambda i: i["qty"] * i.get("price", 0)
cats = sorted({i["category"] for i in active})
report = {
    "total_items": len(active),
    "total_quantity": sum(i["qty"] for i in active),
    "categories": cats,
    "low_stock": sorted(i["sku"] for i in active if i["qty"] < 13),
    "value_by_category": {c: round(sum(value(i) for i in active if i["category"] == c), 2) for c in cats},
}
json.dump(report, open("report.json", "w"), indent=2)
PY
