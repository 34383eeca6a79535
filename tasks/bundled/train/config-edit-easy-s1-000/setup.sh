#!/usr/bin/env bash
set -euo pipefail
cat > app.conf <<'T1_EOF'
# configuration for basalt service

[server]
port = 8449
workers = 4
# log_level = info
public_url = https://www.island-old.internal
debug_toolbar = false

[cache]
cache_url = redis://cache.island-old.internal:6379
ttl_seconds = 146
max_entries = 59941

[database]
db_host = db.island-old.internal
db_port = 3306
db_name = pebble
pool_size = 32

T1_EOF
