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
}
json.dump(report, open("report.json", "w"), indent=2)
PY
