import json
import os
import stat
import subprocess
from pathlib import Path

APP = Path("/app")

ORIGINAL = "# configuration for copper service\n\n[server]\nport = 8360\nworkers = 16\nlog_level = warn\npublic_url = https://www.pillar-old.internal\ndebug_toolbar = true\n\n[auth]\nissuer = https://auth.pillar-old.internal\ntoken_ttl = 78291\nallow_signup = false\n# legacy_mode = off\n\n[database]\ndb_host = db.pillar-old.internal\ndb_port = 3306\ndb_name = ledger\npool_size = 34\n\n[mail]\nsmtp_host = smtp.pillar-old.internal\nmail_from = noreply@pillar-old.internal\nretries = 2\n\n"
EXPECTED = "# configuration for copper service\n\n[server]\nmax_body_kb = 17\nport = 8360\nworkers = 16\nlog_level = warn\npublic_url = https://www.pillar-old.internal\ndebug_toolbar = true\n\n[auth]\nissuer = https://auth.pillar-old.internal\ntoken_ttl = 78291\nlegacy_mode = off\n\n[database]\ndb_host = db.pillar-old.internal\ndb_port = 3356\n# db_name = ledger\npool_size = 34\n\n[mail]\nsmtp_host = smtp.pillar-old.internal\nmail_from = noreply@pillar-old.internal\nretries = 2\n\n[features]\nbeta = true\n"


def norm(line):
    return " ".join(line.replace("=", " = ").split())


def conf_lines():
    return (APP / "app.conf").read_text().splitlines()


def test_backup_is_the_original():
    "app.conf.bak is an untouched copy of the original file"
    assert (APP / "app.conf.bak").read_text() == ORIGINAL


def test_db_port_is_changed():
    "db_port now has the value 3356"
    assert "db_port = 3356" in [norm(l) for l in conf_lines()]
    assert "db_port = 3306" not in [norm(l) for l in conf_lines()]


def test_db_name_is_commented_out():
    "the db_name line is commented out, not deleted"
    got = [norm(l) for l in conf_lines()]
    assert "# db_name = ledger" in got
    assert "db_name = ledger" not in got


def test_legacy_mode_is_enabled():
    "the legacy_mode line is no longer commented out"
    got = [norm(l) for l in conf_lines()]
    assert "legacy_mode = off" in got
    assert "# legacy_mode = off" not in got


def test_allow_signup_is_removed():
    "no line mentions allow_signup any more"
    keys = [l.lstrip("# ").split("=")[0].strip() for l in conf_lines()]
    assert len(keys) > 0
    assert "allow_signup" not in keys


def test_line_added_to_server():
    "max_body_kb = 17 is the first line of [server]"
    got = conf_lines()
    at = got.index("[server]")
    assert norm(got[at + 1]) == "max_body_kb = 17"


def test_features_section_appended():
    "the file ends with the [features] section"
    got = [l for l in conf_lines() if l.strip()]
    assert [norm(l) for l in got[-2:]] == ["[features]", "beta = true"]


def test_whole_file_is_as_expected():
    "apart from the requested edits, app.conf is unchanged"
    got = [l.rstrip() for l in conf_lines()]
    want = EXPECTED.splitlines()
    while got and not got[-1]:
        got.pop()
    while want and not want[-1]:
        want.pop()
    assert got == want
