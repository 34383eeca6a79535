import json
import os
import stat
import subprocess
from pathlib import Path

APP = Path("/app")

DIRS = {"site": 493, "site/bin": 493, "site/data": 493, "site/data/readonly": 493, "site/public": 493, "site/secrets": 448}


def mode(path):
    return stat.S_IMODE(os.stat(APP / path).st_mode)


def assert_modes(paths, want):
    assert len(paths) > 0
    for p in paths:
        assert mode(p) == want, f"{p}: {oct(mode(p))}"


def test_scripts_are_executable():
    "the scripts in site/bin are 755"
    assert_modes(["site/bin/beacon.sh", "site/bin/willow.sh"], 0o755)


def test_keys_are_private():
    "the .key files are 600"
    assert_modes(["site/secrets/basalt.key", "site/secrets/copper.key"], 0o600)


def test_secrets_dir_is_private():
    "site/secrets is 700"
    assert mode("site/secrets") == 0o700


def test_public_files_are_readable():
    "public files are 644"
    assert_modes(["site/public/nectar.html", "site/public/pillar.html"], 0o644)


def test_other_files_are_644():
    "the remaining files are 644"
    assert_modes(["site/README.txt", "site/data/saddle.csv"], 0o644)


def test_directories():
    "directories have their required modes"
    for d, want in DIRS.items():
        assert mode(d) == want, f"{d}: {oct(mode(d))}"


def test_nothing_world_writable():
    "no file or directory is world-writable (the sticky tmp excepted)"
    paths = [APP / "site", *(APP / "site").rglob("*")]
    bad = [str(p) for p in paths if os.stat(p).st_mode & stat.S_IWOTH and not os.stat(p).st_mode & stat.S_ISVTX]
    assert bad == []


def test_readonly_data():
    "files in site/data/readonly are 444"
    assert_modes(["site/data/readonly/feather.csv", "site/data/readonly/velvet.csv"], 0o444)
