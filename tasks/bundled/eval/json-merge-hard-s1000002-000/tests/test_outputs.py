import json
import os
import stat
import subprocess
from pathlib import Path

APP = Path("/app")

WANT = {"service": {"name": "proud-ember", "region": "lowland", "replicas": 1}, "server": {"host": "0.0.0.0", "port": 10914, "tls": {"enabled": True, "cert": "/etc/ssl/zephyr.pem", "hsts": True}}, "database": {"url": "postgres://db.otter.internal:5432/app", "pool": {"min": 2, "max": 64, "idle_seconds": 83, "timeout_ms": 649}, "read_only": False}, "logging": {"level": "info", "format": "json", "targets": ["stdout"]}, "features": {"flags": ["coral", "orbit"]}, "cache": {"ttl": 230}}


def effective():
    return json.loads((APP / "config" / "effective.json").read_text())


def test_effective_has_the_right_sections():
    "config/effective.json is an object with the merged top-level keys"
    got = effective()
    assert isinstance(got, dict)
    assert sorted(got) == ["cache", "database", "features", "logging", "server", "service"]


def test_section_cache():
    "the cache section is merged correctly"
    assert effective().get("cache") == WANT["cache"]


def test_section_database():
    "the database section is merged correctly"
    assert effective().get("database") == WANT["database"]


def test_section_features():
    "the features section is merged correctly"
    assert effective().get("features") == WANT["features"]


def test_section_logging():
    "the logging section is merged correctly"
    assert effective().get("logging") == WANT["logging"]


def test_section_server():
    "the server section is merged correctly"
    assert effective().get("server") == WANT["server"]


def test_section_service():
    "the service section is merged correctly"
    assert effective().get("service") == WANT["service"]


def test_arrays_are_replaced():
    "arrays from the override replace the default arrays instead of being concatenated"
    got = effective()
    assert got["features"]["flags"] == WANT["features"]["flags"]


def test_null_removes_keys():
    "keys set to null in the override are absent from the result"
    got = effective()
    assert "beta" not in got["features"]
    assert "min_version" not in got["server"]["tls"]


def test_changed_paths():
    "config/changed.txt lists the dotted paths that differ from the defaults"
    lines = [l.strip() for l in (APP / "config" / "changed.txt").read_text().splitlines() if l.strip()]
    assert lines == ["cache.ttl", "database.pool.max", "database.pool.timeout_ms", "features.beta", "features.flags", "logging.format", "server.port", "server.tls.enabled", "server.tls.hsts", "server.tls.min_version", "service.region"]


def test_local_wins_over_overrides():
    "values from config/local.json win over config/overrides.json"
    got = effective()
    assert got["server"]["port"] == WANT["server"]["port"]
    assert got["service"]["region"] == WANT["service"]["region"]
    assert got["logging"]["format"] == "json"
