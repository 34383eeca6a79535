#!/usr/bin/env bash
set -euo pipefail
mkdir -p config
cat > config/defaults.json <<'T1_EOF'
{
  "service": {
    "name": "proud-ember",
    "region": "south",
    "replicas": 1
  },
  "server": {
    "host": "0.0.0.0",
    "port": 8119,
    "tls": {
      "enabled": false,
      "cert": "/etc/ssl/zephyr.pem",
      "min_version": "1.2"
    }
  },
  "database": {
    "url": "postgres://db.otter.internal:5432/app",
    "pool": {
      "min": 2,
      "max": 13,
      "idle_seconds": 83
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
      "copper",
      "marble",
      "velvet"
    ],
    "beta": false
  }
}
T1_EOF
cat > config/overrides.json <<'T1_EOF'
{
  "server": {
    "tls": {
      "enabled": true,
      "hsts": true,
      "min_version": null
    },
    "port": 9886
  },
  "database": {
    "pool": {
      "max": 64,
      "timeout_ms": 649
    }
  },
  "features": {
    "flags": [
      "coral",
      "orbit"
    ],
    "beta": null
  },
  "cache": {
    "ttl": 230
  }
}
T1_EOF
cat > config/local.json <<'T1_EOF'
{
  "server": {
    "port": 10914
  },
  "logging": {
    "format": "json"
  },
  "service": {
    "region": "lowland"
  }
}
T1_EOF
