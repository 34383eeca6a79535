import json
import os
import stat
import subprocess
from pathlib import Path

APP = Path("/app")

import csv

OUT = APP / "out/research.csv"
HEADER = ["annual_salary", "email", "first_name"]
ROWS = [["179000", "emil.patel@corp.example", "emil"], ["176000", "jonas.abbott@corp.example", "jonas"], ["170000", "chen.walsh@corp.example", "chen"], ["139000", "zoe.kowalski@corp.example", "zoe"], ["134500", "jonas.okafor@corp.example", "jonas"], ["113500", "hana.nakamura@corp.example", "hana"]]
KEY = 1


def table():
    with open(OUT, newline="") as f:
        return [[c.strip() for c in r] for r in csv.reader(f) if r]


def test_header():
    "out/research.csv has the requested header"
    assert table()[0] == HEADER


def test_right_people_selected():
    "exactly the requested people are in the output"
    got = sorted(r[KEY].lower() for r in table()[1:])
    assert got == sorted(r[KEY].lower() for r in ROWS)


def test_column_values():
    "each row carries the right values in the requested column order"
    want = {r[KEY].lower(): r for r in ROWS}
    got = table()[1:]
    assert len(got) > 0
    for r in got:
        assert [c.lower() for c in r] == [c.lower() for c in want.get(r[KEY].lower(), [])], r


def test_row_order():
    "rows are ordered by salary, highest first"
    assert [r[KEY].lower() for r in table()[1:]] == [r[KEY].lower() for r in ROWS]


def test_salary_threshold():
    "no row has a salary below 113500"
    header, *body = table()
    at = header.index("annual_salary")
    assert len(body) > 0
    assert all(int(r[at]) >= 113500 for r in body)
