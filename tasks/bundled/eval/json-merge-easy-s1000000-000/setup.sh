#!/usr/bin/env bash
set -euo pipefail
mkdir -p config
cat > config/defaults.json <<'T1_EOF'
{
  "service": {
    "name": "steady-ledger",
    "region": "west",
    "replicas": 4
  },
  "server": {
    "host": "0.0.0.0",
    "port": 8833,
    "tls": {
      "enabled": false,
      "cert": "/etc/ssl/zephyr.pem",
      "min_version": "1.2"
    }
  },
  "database": {
    "url": "postgres://db.harbor.internal:5432/app",
    "pool": {
      "min": 4,
      "max": 14,
      "idle_seconds": 261
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
      "glacier",
      "nectar",
      "cedar"
    ],
    "beta": false
  }
}
T1_EOF
cat > config/overrides.json <<'T1_EOF'
{
  "database": {
    "pool": {
      "max": 52
    }
  },
  "service": {
    "replicas": 7
  },
  "features": {
    "flags": [
      "orbit",
      "saddle"
    ]
  },
  "cache": {
    "url": "redis://forest.internal:6379"
  },
  "server": {
    "tls": {
      "hsts": true
    }
  }
}
T1_EOF
