import json
import os
import stat
import subprocess
from pathlib import Path

APP = Path("/app")


def report(name):
    return [" ".join(l.split()) for l in (APP / "report" / name).read_text().splitlines() if l.strip()]


def test_status_counts():
    "status_counts.txt counts each status code, in status order"
    assert report("status_counts.txt") == ["200 11", "201 4", "204 2", "301 2", "304 1", "400 4", "401 1", "403 1", "404 4", "500 4", "502 4", "503 4"]


def test_top_ips():
    "top_ips.txt has the three busiest clients with their counts"
    assert report("top_ips.txt") == ["18 203.90.209.2", "16 203.152.55.172", "5 203.74.114.68"]


def test_error_paths():
    "error_paths.txt lists the paths that got a 5xx"
    assert report("error_paths.txt") == ["/api/items", "/api/orders", "/api/users", "/cart", "/checkout", "/health"]


def test_total_bytes():
    "bytes.txt has the total response size"
    assert report("bytes.txt") == ["1088733"]
