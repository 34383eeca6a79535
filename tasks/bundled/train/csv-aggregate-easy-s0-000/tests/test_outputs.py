import json
import os
import stat
import subprocess
from pathlib import Path

APP = Path("/app")

import csv

SUMMARY = [{"region": "highland", "orders": 5, "units": 50, "revenue": "2894.09"}, {"region": "lowland", "orders": 4, "units": 47, "revenue": "2964.18"}, {"region": "west", "orders": 3, "units": 12, "revenue": "514.12"}]


def rows():
    with open(APP / "summary.csv", newline="") as f:
        return [r for r in csv.reader(f) if r]


def by_region(column):
    header, *body = rows()
    at = [h.strip() for h in header].index(column)
    return {r[0].strip(): r[at].strip() for r in body}


def test_header():
    "summary.csv starts with the header region,orders,units,revenue"
    assert [h.strip() for h in rows()[0]] == ["region", "orders", "units", "revenue"]


def test_one_row_per_region():
    "summary.csv has one row for each region with counted orders"
    got = [r[0].strip() for r in rows()[1:]]
    assert sorted(got) == sorted(s["region"] for s in SUMMARY)


def test_order_counts():
    "the orders column counts the orders of each region"
    assert by_region("orders") == {s["region"]: str(s["orders"]) for s in SUMMARY}


def test_unit_totals():
    "the units column sums the units of each region"
    assert by_region("units") == {s["region"]: str(s["units"]) for s in SUMMARY}


def test_revenue_totals():
    "the revenue column is the sum of units x unit_price, to the cent"
    got = {k: float(v) for k, v in by_region("revenue").items()}
    want = {s["region"]: float(s["revenue"]) for s in SUMMARY}
    assert got.keys() == want.keys()
    for k in want:
        assert abs(got[k] - want[k]) < 0.005, k


def test_revenue_has_two_decimals():
    "revenue values are written with exactly two decimals"
    import re
    values = list(by_region("revenue").values())
    assert len(values) > 0
    assert all(re.fullmatch(r"\d+\.\d\d", v) for v in values), values


def test_row_order():
    "rows are ordered by region name"
    assert [r[0].strip() for r in rows()[1:]] == [s["region"] for s in SUMMARY]
