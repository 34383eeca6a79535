import json
import os
import stat
import subprocess
from pathlib import Path

APP = Path("/app")

import gzip
import tarfile

KEPT = {"project/README.md": "# cipher\ncopper shapes crystal 859\n", "project/docs/coral.md": "kernel follows valley 182\n", "project/src/feather.sh": "zephyr shapes copper 7\nbeacon checks meadow 85\n", "project/src/valley.txt": "comet draws otter 256\nglacier builds island 177\n", "project/src/zephyr.py": "harbor marks tundra 829\nribbon follows orbit 100\n"}


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
