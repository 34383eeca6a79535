import json
import os
import stat
import subprocess
from pathlib import Path

APP = Path("/app")

VERSION = "2.0.2"


def test_step_01_folders():
    "step 1: Create the folders `release/bin`, `release/docs` and `release/data`."
    for d in ["bin", "docs", "data"]:
        assert (APP / "release" / d).is_dir(), d


def test_step_02_version_file():
    "step 2: Write the version `2.0.2` into `release/VERSION` (just the version and a newline)."
    assert (APP / "release" / "VERSION").read_text().strip() == "2.0.2"


def test_step_03_copy_scripts():
    "step 3: Copy every `.sh` file from `src/` into `release/bin/` (only the `.sh` files)."
    want = {"cipher.sh": "#!/bin/sh\n# cipher\necho collects falcon\necho nectar checks\necho reads lemon\n", "feather.sh": "#!/bin/sh\n# feather\necho carries meteor\necho badger pebble\necho willow turns\necho coral canyon\n", "pillar.sh": "#!/bin/sh\n# pillar\necho paints watches\n"}
    got = {p.name: p.read_text() for p in (APP / "release" / "bin").iterdir() if p.is_file()}
    assert got == want


def test_step_04_scripts_executable():
    "step 4: Make the scripts in `release/bin/` executable with mode `755`."
    for name in ["cipher.sh", "feather.sh", "pillar.sh"]:
        assert stat.S_IMODE(os.stat(APP / "release" / "bin" / name).st_mode) == 0o755, name


def test_step_05_notes():
    "step 5: Concatenate the files `notes/*.md`, in file-name order, into `release/docs/NOTES.md`."
    want = "## jasper\nthistle thistle velvet hazel sends @VERSION@\n## fjord\nshapes collects anchor coral moves @VERSION@\n## quartz\nkernel raven signal fjord draws @VERSION@\n## cedar\nkernel river saddle meteor reads @VERSION@\n"
    got = (APP / "release" / "docs" / "NOTES.md").read_text()
    # a later step may fill in the version
    assert got.replace(VERSION, "@VERSION@") == want


def test_step_06_metrics_csv():
    "step 6: Convert the tab-separated `raw/metrics.tsv` into the comma-separated `release/data/metrics.csv` (same rows, header included)."
    assert (APP / "release" / "data" / "metrics.csv").read_text().splitlines() == ["metric,value,unit", "summit_total,3602,ms", "quartz_total,5066,ms", "hazel_total,210,ms", "basalt_total,1256,ms", "garden_total,5775,count"]


def test_step_07_error_count():
    "step 7: Write the number of lines of `raw/events.log` that contain `ERROR` into `release/data/error_count.txt` (a bare integer)."
    assert (APP / "release" / "data" / "error_count.txt").read_text().strip() == "6"


def test_step_08_users():
    "step 8: List the distinct user names from the `user=<name>` fields of `raw/events.log`, sorted, one per line, in `release/data/users.txt`."
    assert (APP / "release" / "data" / "users.txt").read_text().split() == ["alan", "carla", "mei", "omar", "vera", "wen"]


def test_step_09_config():
    "step 9: Write `release/config.json`: the JSON from `config/app.json` with `debug` set to `false` and `version` set to `\"2.0.2\"`, every other key unchanged."
    got = json.loads((APP / "release" / "config.json").read_text())
    assert got == {"name": "gentle-marble", "version": "2.0.2", "debug": False, "workers": 5, "region": "ledger"}


def test_step_10_logs_keep():
    "step 10: Create an empty file `release/logs/.keep`."
    p = APP / "release" / "logs" / ".keep"
    assert p.is_file()
    assert p.stat().st_size == 0


def test_step_11_changelog():
    "step 11: Write `release/docs/CHANGELOG.md`: a first line `## 2.0.2`, then each line of `changes.txt` prefixed with `- `."
    got = [l.rstrip() for l in (APP / "release" / "docs" / "CHANGELOG.md").read_text().splitlines() if l.strip()]
    assert got == ["## 2.0.2", "- remove reads lifts", "- fix maple watches", "- fix bridge keeps", "- speed up comet lifts", "- fix writes finds"]


def test_step_12_manifest():
    "step 12: Write `release/manifest.json`: an object with `name` (`\"gentle-marble\"`), `version` (`\"2.0.2\"`) and `scripts` (the file names in `release/bin/`, sorted)."
    got = json.loads((APP / "release" / "manifest.json").read_text())
    assert got == {"name": "gentle-marble", "version": "2.0.2", "scripts": ["cipher.sh", "feather.sh", "pillar.sh"]}


def test_step_13_current_link():
    "step 13: Create a symbolic link `current` (in /app) that points to `release`."
    link = APP / "current"
    assert link.is_symlink()
    assert link.resolve() == (APP / "release").resolve()


def test_step_14_checksums():
    "step 14: Write `release/SHA256SUMS` with a `sha256sum` line for every file in `release/data/`, paths relative to `release/` (e.g. `data/metrics.csv`), sorted by path."
    import hashlib
    lines = [l.split() for l in (APP / "release" / "SHA256SUMS").read_text().splitlines() if l.strip()]
    files = sorted(str(p.relative_to(APP / "release")) for p in (APP / "release" / "data").rglob("*") if p.is_file())
    assert [p.lstrip("*") for _, p in lines] == files
    for digest, path in lines:
        assert hashlib.sha256((APP / "release" / path.lstrip("*")).read_bytes()).hexdigest() == digest, path


def test_step_15_data_readonly():
    "step 15: Make every file in `release/data/` read-only for everybody (mode `444`)."
    files = [p for p in (APP / "release" / "data").iterdir() if p.is_file()]
    assert len(files) > 0
    for p in files:
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o444, p.name


def test_step_16_tarball():
    "step 16: Last, pack the `release/` folder into `dist/gentle-marble-2.0.2.tar.gz` (gzip-compressed tar; member paths start with `release/`)."
    import tarfile
    with tarfile.open(APP / "dist" / "gentle-marble-2.0.2.tar.gz", "r:gz") as tar:
        got = {m.name.removeprefix("./"): tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    want = {str(p.relative_to(APP)): p.read_bytes() for p in (APP / "release").rglob("*") if p.is_file()}
    assert len(got) > 0
    assert got == want
