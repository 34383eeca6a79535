import json
import os
import stat
import subprocess
from pathlib import Path

APP = Path("/app")

import csv

OUT = APP / "out/legal.csv"
HEADER = ["email", "last_name", "annual_salary"]
ROWS = [["amara.dalton@corp.example", "dalton", "163500"], ["kai.garcia@corp.example", "garcia", "158000"], ["priya.walsh@corp.example", "walsh", "152500"], ["yara.rossi@corp.example", "rossi", "146000"], ["maya.xu@corp.example", "xu", "136500"], ["grace.young@corp.example", "young", "134000"], ["kai.rossi@corp.example", "rossi", "118500"], ["alan.tanaka@corp.example", "tanaka", "116000"], ["maya.zimmer@corp.example", "zimmer", "113000"]]
KEY = 0


def table():
    with open(OUT, newline="") as f:
        return [[c.strip() for c in r] for r in csv.reader(f) if r]


def test_header():
    "out/legal.csv has the requested header"
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
    "no row has a salary below 113000"
    header, *body = table()
    at = header.index("annual_salary")
    assert len(body) > 0
    assert all(int(r[at]) >= 113000 for r in body)


def test_no_duplicates():
    "each person appears once"
    keys = [r[KEY].lower() for r in table()[1:]]
    assert len(keys) > 0
    assert len(keys) == len(set(keys))


def test_comma_separated():
    "the output uses commas, not semicolons"
    text = OUT.read_text()
    assert ";" not in text
    assert text.splitlines()[0] == ",".join(HEADER)


def test_emails_lower_case():
    "email addresses are written in lower case"
    emails = [r[KEY] for r in table()[1:]]
    assert len(emails) > 0
    assert all(e == e.lower() for e in emails)
