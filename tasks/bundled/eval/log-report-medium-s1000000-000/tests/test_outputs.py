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
    assert report("status_counts.txt") == ["200 21", "201 3", "204 5", "304 7", "400 8", "401 6", "403 7", "404 12", "500 6", "502 2", "503 5"]


def test_top_ips():
    "top_ips.txt has the three busiest clients with their counts"
    assert report("top_ips.txt") == ["35 192.90.223.248", "17 192.15.5.19", "11 10.124.74.38"]


def test_error_paths():
    "error_paths.txt lists the paths that got a 5xx"
    assert report("error_paths.txt") == ["/about", "/api/orders", "/api/users", "/health", "/login", "/search", "/static/app.js", "/static/site.css"]


def test_total_bytes():
    "bytes.txt has the total response size"
    assert report("bytes.txt") == ["1868208"]


def test_busiest_hour():
    "busiest_hour.txt names the hour with the most requests"
    assert report("busiest_hour.txt") == ["17"]


def test_rotated_logs_are_included():
    "the counts cover the rotated log files too"
    total = sum(int(l.split()[1]) for l in report("status_counts.txt"))
    assert total == 82
