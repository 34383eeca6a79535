import json
import os
import stat
import subprocess
from pathlib import Path

APP = Path("/app")

import gzip
import tarfile

KEPT = {"project/README.md": "# anchor\npebble lifts delta 392\n", "project/docs/harbor.md": "canyon sends otter 864\n", "project/src/badger.sh": "nectar lifts river 119\nbasalt gathers pillar 114\n", "project/src/coral.py": "anchor lifts signal 629\nlemon takes meadow 918\n", "project/src/feather.sh": "cipher draws beacon 319\ntundra opens valley 951\n", "project/src/planet.txt": "quartz carries forest 935\npepper collects jasper 496\n"}


def archive_files():
    with tarfile.open(APP / "backup" / "project.tar.gz", "r:gz") as tar:
        return {m.name.removeprefix("./"): tar.extractfile(m).read().decode() for m in tar.getmembers() if m.isfile()}


def test_backup_is_a_gzipped_tar():
    "backup/project.tar.gz is a gzip-compressed tar archive"
    path = APP / "backup" / "project.tar.gz"
    assert path.read_bytes()[:2] == b"\x1f\x8b"
    assert tarfile.is_tarfile(path)


def test_backup_has_the_project_files():
    "every file that should be kept is in the archive under project/"
    got = archive_files()
    assert all(p in got for p in KEPT), sorted(got)


def test_backup_excludes_logs():
    "no log file is in the archive"
    got = archive_files()
    assert len(got) > 0
    assert not [p for p in got if p.endswith(".log") or p.endswith(".log.gz")]


def test_backup_excludes_cache():
    "project/cache is not in the archive"
    got = archive_files()
    assert len(got) > 0
    assert not [p for p in got if p.startswith("project/cache")]


def test_backup_contents_match():
    "the archived files have the original contents and nothing else is archived"
    assert archive_files() == KEPT


def test_bundle_is_extracted():
    "incoming/bundle.tar.gz is extracted under restored/"
    want = {"data/tundra.txt": "velvet finds zephyr 677\n", "notes/ember.txt": "marble draws hazel 414\n"}
    for path, content in want.items():
        assert (APP / "restored" / path).read_text() == content, path
