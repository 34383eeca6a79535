import json
import os
import stat
import subprocess
from pathlib import Path

APP = Path("/app")

WANT = {"total_items": 9, "total_quantity": 149, "categories": ["garden", "kitchen", "outdoor"], "low_stock": ["BAS-9793", "CRY-7654", "DEL-7656", "FOR-7107", "OTT-3791", "PLA-1773"], "value_by_category": {"garden": 3324.38, "kitchen": 5408.88, "outdoor": 1847.62}, "most_valuable": "CAN-8207", "discontinued": ["EMB-1281", "EMB-3904", "FJO-7328", "ORB-4055", "PEB-8994"]}


def report():
    return json.loads((APP / "report.json").read_text())


def test_report_has_exactly_the_keys():
    "report.json is a JSON object with exactly the requested keys"
    got = report()
    assert isinstance(got, dict)
    assert sorted(got) == ["categories", "low_stock", "total_items", "total_quantity", "value_by_category"]


def test_total_items():
    "report.json has the right total_items"
    assert report()["total_items"] == WANT["total_items"]


def test_total_quantity():
    "report.json has the right total_quantity"
    assert report()["total_quantity"] == WANT["total_quantity"]


def test_categories():
    "report.json has the right categories"
    assert report()["categories"] == WANT["categories"]


def test_low_stock():
    "report.json has the right low_stock"
    assert report()["low_stock"] == WANT["low_stock"]


def test_value_by_category():
    "report.json has the right value_by_category"
    got = report()["value_by_category"]
    assert sorted(got) == sorted(WANT["value_by_category"])
    for k, v in WANT["value_by_category"].items():
        assert abs(float(got[k]) - v) < 0.011, k
