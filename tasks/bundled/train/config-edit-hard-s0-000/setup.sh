#!/usr/bin/env bash
set -euo pipefail
cat > app.conf <<'T1_EOF'
# configuration for copper service

[server]
port = 8360
workers = 16
log_level = warn
public_url = https://www.pillar-old.internal
debug_toolbar = true

[auth]
issuer = https://auth.pillar-old.internal
token_ttl = 78291
allow_signup = false
# legacy_mode = off

[database]
db_host = db.pillar-old.internal
db_port = 3306
db_name = ledger
pool_size = 34

[mail]
smtp_host = smtp.pillar-old.internal
mail_from = noreply@pillar-old.internal
retries = 2

T1_EOF
