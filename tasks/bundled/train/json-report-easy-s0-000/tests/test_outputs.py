import json
import os
import stat
import subprocess
from pathlib import Path

APP = Path("/app")

WANT = {"total_items": 4, "total_quantity": 98, "categories": ["garden", "lighting"], "low_stock": ["BRI-9584"], "value_by_category": {"garden": 4774.38, "lighting": 11386.86}, "most_valuable": "SUM-2760", "discontinued": ["CAN-2192", "HAR-2095", "LEM-9485", "PEB-6317"]}


def report():
    return json.loads((APP / "report.json").read_text())


def test_report_has_exactly_the_keys():
    "report.json is a JSON object with exactly the requested keys"
    got = report()
    assert isinstance(got, dict)
    assert sorted(got) == ["categories", "total_items", "total_quantity"]


def test_total_items():
    "report.json has the right total_items"
    assert report()["total_items"] == WANT["total_items"]


def test_total_quantity():
    "report.json has the right total_quantity"
    assert report()["total_quantity"] == WANT["total_quantity"]


def test_categories():
    "report.json has the right categories"
    assert report()["categories"] == WANT["categories"]
