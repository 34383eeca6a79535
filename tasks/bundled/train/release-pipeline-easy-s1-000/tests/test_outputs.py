import json
import os
import stat
import subprocess
from pathlib import Path

APP = Path("/app")

VERSION = "1.10.7"


def test_step_01_folders():
    "step 1: Create the folders `release/bin`, `release/docs` and `release/data`."
    for d in ["bin", "docs", "data"]:
        assert (APP / "release" / d).is_dir(), d


def test_step_02_metrics_csv():
    "step 2: Convert the tab-separated `raw/metrics.tsv` into the comma-separated `release/data/metrics.csv` (same rows, header included)."
    assert (APP / "release" / "data" / "metrics.csv").read_text().splitlines() == ["metric,value,unit", "meteor_total,3040,ms", "saddle_total,2851,bytes", "nectar_total,990,ms", "fjord_total,5163,ms", "beacon_total,3418,count", "cedar_total,5999,ms"]


def test_step_03_sample_log():
    "step 3: Put the first 3 lines of `raw/events.log` into `release/data/sample.log`."
    assert (APP / "release" / "data" / "sample.log").read_text().splitlines() == ["2024-06-10 WARN user=maya marks bridge walnut", "2024-04-11 ERROR user=mei falcon valley shapes", "2024-01-12 INFO user=maya opens reads island"]


def test_step_04_changelog():
    "step 4: Write `release/docs/CHANGELOG.md`: a first line `## 1.10.7`, then each line of `changes.txt` prefixed with `- `."
    got = [l.rstrip() for l in (APP / "release" / "docs" / "CHANGELOG.md").read_text().splitlines() if l.strip()]
    assert got == ["## 1.10.7", "- remove signal shapes", "- fix pebble hazel", "- add valley saddle"]


def test_step_05_checksums():
    "step 5: Write `release/SHA256SUMS` with a `sha256sum` line for every file in `release/data/`, paths relative to `release/` (e.g. `data/metrics.csv`), sorted by path."
    import hashlib
    lines = [l.split() for l in (APP / "release" / "SHA256SUMS").read_text().splitlines() if l.strip()]
    files = sorted(str(p.relative_to(APP / "release")) for p in (APP / "release" / "data").rglob("*") if p.is_file())
    assert [p.lstrip("*") for _, p in lines] == files
    for digest, path in lines:
        assert hashlib.sha256((APP / "release" / path.lstrip("*")).read_bytes()).hexdigest() == digest, path
