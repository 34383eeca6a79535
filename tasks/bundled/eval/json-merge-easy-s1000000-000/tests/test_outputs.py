import json
import os
import stat
import subprocess
from pathlib import Path

APP = Path("/app")

WANT = {"service": {"name": "steady-ledger", "region": "west", "replicas": 7}, "server": {"host": "0.0.0.0", "port": 8833, "tls": {"enabled": False, "cert": "/etc/ssl/zephyr.pem", "min_version": "1.2", "hsts": True}}, "database": {"url": "postgres://db.harbor.internal:5432/app", "pool": {"min": 4, "max": 52, "idle_seconds": 261}, "read_only": False}, "logging": {"level": "info", "format": "text", "targets": ["stdout"]}, "features": {"flags": ["orbit", "saddle"], "beta": False}, "cache": {"url": "redis://forest.internal:6379"}}


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
