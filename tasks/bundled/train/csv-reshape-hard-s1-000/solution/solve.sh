#!/usr/bin/env bash
set -euo pipefail
mkdir -p out
python3 - <<'PY'
import csv

with open("people.csv", newline="") as f:
    people = list(csv.DictReader(f, delimiter=";"))
seen, rows = set(), []
for p in people:
    if p["id"] in seen or p["department"] != "legal" or int(p["salary"]) < 113000:
        continue
    seen.add(p["id"])
    p["email"] = p["email"].lower()
    rows.append(p)
rows.sort(key=lambda p: (-int(p["salary"]), p["last_name"]))
with open("out/legal.csv", "w", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["email", "last_name", "annual_salary"])
    for p in rows:
        w.writerow([p[c] for c in ["email", "last_name", "salary"]])
PY
