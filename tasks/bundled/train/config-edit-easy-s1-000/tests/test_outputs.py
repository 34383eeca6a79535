import json
import os
import stat
import subprocess
from pathlib import Path

APP = Path("/app")

ORIGINAL = "# configuration for basalt service\n\n[server]\nport = 8449\nworkers = 4\n# log_level = info\npublic_url = https://www.island-old.internal\ndebug_toolbar = false\n\n[cache]\ncache_url = redis://cache.island-old.internal:6379\nttl_seconds = 146\nmax_entries = 59941\n\n[database]\ndb_host = db.island-old.internal\ndb_port = 3306\ndb_name = pebble\npool_size = 32\n\n"
EXPECTED = "# configuration for basalt service\n\n[server]\nport = 8449\nworkers = 4\nlog_level = info\npublic_url = https://www.island-old.internal\ndebug_toolbar = false\n\n[cache]\ncache_url = redis://cache.island-old.internal:6379\nttl_seconds = 146\nmax_entries = 59941\n\n[database]\ndb_host = db.island-old.internal\ndb_port = 3306\ndb_name = pebble\n# pool_size = 32\n\n"


def norm(line):
    return " ".join(line.replace("=", " = ").split())


def conf_lines():
    return (APP / "app.conf").read_text().splitlines()


def test_backup_is_the_original():
    "app.conf.bak is an untouched copy of the original file"
    assert (APP / "app.conf.bak").read_text() == ORIGINAL


def test_pool_size_is_commented_out():
    "the pool_size line is commented out, not deleted"
    got = [norm(l) for l in conf_lines()]
    assert "# pool_size = 32" in got
    assert "pool_size = 32" not in got


def test_log_level_is_enabled():
    "the log_level line is no longer commented out"
    got = [norm(l) for l in conf_lines()]
    assert "log_level = info" in got
    assert "# log_level = info" not in got


def test_whole_file_is_as_expected():
    "apart from the requested edits, app.conf is unchanged"
    got = [l.rstrip() for l in conf_lines()]
    want = EXPECTED.splitlines()
    while got and not got[-1]:
        got.pop()
    while want and not want[-1]:
        want.pop()
    assert got == want
