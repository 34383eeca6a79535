#!/usr/bin/env bash
set -euo pipefail
mkdir -p out
python3 - <<'PY'
import csv

with open("people.csv", newline="") as f:
    people = list(csv.DictReader(f, delimiter=","))
seen, rows = set(), []
for p in people:
    if p["id"] in seen or p["department"] != "research" or int(p["salary"]) < 113500:
        continue
    seen.add(p["id"])
    p["email"] = p["email"].lower()
    rows.append(p)
rows.sort(key=lambda p: (-int(p["salary"]), p["last_name"]))
with open("out/research.csv", "w", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["annual_salary", "email", "first_name"])
    for p in rows:
        w.writerow([p[c] for c in ["salary", "email", "first_name"]])
PY
