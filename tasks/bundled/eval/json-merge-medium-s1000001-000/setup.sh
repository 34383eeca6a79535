#!/usr/bin/env bash
set -euo pipefail
mkdir -p config
cat > config/defaults.json <<'T1_EOF'
{
  "service": {
    "name": "hidden-jasper",
    "region": "highland",
    "replicas": 2
  },
  "server": {
    "host": "0.0.0.0",
    "port": 8709,
    "tls": {
      "enabled": false,
      "cert": "/etc/ssl/planet.pem",
      "min_version": "1.2"
    }
  },
  "database": {
    "url": "postgres://db.copper.internal:5432/app",
    "pool": {
      "min": 3,
      "max": 38,
      "idle_seconds": 98
    },
    "read_only": false
  },
  "logging": {
    "level": "info",
    "format": "text",
    "targets": [
      "stdout"
    ]
  },
  "features": {
    "flags": [
      "harbor",
      "orbit",
      "timber"
    ],
    "beta": false
  }
}
T1_EOF
cat > config/overrides.json <<'T1_EOF'
{
  "logging": {
    "level": "debug"
  },
  "server": {
    "port": 9379,
    "tls": {
      "enabled": true,
      "min_version": null
    }
  },
  "service": {
    "replicas": 6
  },
  "cache": {
    "url": "redis://river.internal:6379",
    "ttl": 306
  },
  "database": {
    "pool": {
      "timeout_ms": 352
    }
  }
}
T1_EOF
