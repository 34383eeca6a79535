#!/usr/bin/env bash
set -euo pipefail
cp app.conf app.conf.bak
sed -i 's/^db_port = .*/db_port = 3356/' app.conf
sed -i 's/^db_name = /# &/' app.conf
sed -i 's/^# \(legacy_mode = \)/\1/' app.conf
sed -i '/^allow_signup = /d' app.conf
sed -i '/^\[server\]$/a max_body_kb = 17' app.conf
printf '%s\n' '[features]' 'beta = true' >> app.conf
