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
    assert report("status_counts.txt") == ["200 20", "201 6", "204 13", "301 7", "304 8", "400 13", "401 4", "403 5", "404 20", "500 10", "502 10", "503 6"]


def test_top_ips():
    "top_ips.txt has the three busiest clients with their counts"
    assert report("top_ips.txt") == ["50 203.33.237.28", "32 10.35.66.176", "20 172.247.26.97"]


def test_error_paths():
    "error_paths.txt lists the paths that got a 5xx"
    assert report("error_paths.txt") == ["/", "/about", "/api/items", "/api/users", "/cart", "/checkout", "/health", "/index.html", "/logout", "/search", "/static/app.js", "/static/site.css"]


def test_total_bytes():
    "bytes.txt has the total response size"
    assert report("bytes.txt") == ["2792199"]


def test_busiest_hour():
    "busiest_hour.txt names the hour with the most requests"
    assert report("busiest_hour.txt") == ["18"]


def test_requests_per_day():
    "per_day.csv counts requests per calendar day"
    assert report("per_day.csv") == ["date,requests", "2023-11-01,40", "2023-11-02,43", "2023-11-03,39"]


def test_rotated_logs_are_included():
    "the counts cover the rotated log files too"
    total = sum(int(l.split()[1]) for l in report("status_counts.txt"))
    assert total == 122
