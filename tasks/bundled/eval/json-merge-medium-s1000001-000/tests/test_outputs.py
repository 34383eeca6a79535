import json
import os
import stat
import subprocess
from pathlib import Path

APP = Path("/app")

WANT = {"service": {"name": "hidden-jasper", "region": "highland", "replicas": 6}, "server": {"host": "0.0.0.0", "port": 9379, "tls": {"enabled": True, "cert": "/etc/ssl/planet.pem"}}, "database": {"url": "postgres://db.copper.internal:5432/app", "pool": {"min": 3, "max": 38, "idle_seconds": 98, "timeout_ms": 352}, "read_only": False}, "logging": {"level": "debug", "format": "text", "targets": ["stdout"]}, "features": {"flags": ["harbor", "orbit", "timber"], "beta": False}, "cache": {"url": "redis://river.internal:6379", "ttl": 306}}


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


def test_null_removes_keys():
    "keys set to null in the override are absent from the result"
    got = effective()
    assert "min_version" not in got["server"]["tls"]


def test_changed_paths():
    "config/changed.txt lists the dotted paths that differ from the defaults"
    lines = [l.strip() for l in (APP / "config" / "changed.txt").read_text().splitlines() if l.strip()]
    assert lines == ["cache.ttl", "cache.url", "database.pool.timeout_ms", "logging.level", "server.port", "server.tls.enabled", "server.tls.min_version", "service.replicas"]
