#!/usr/bin/env bash
set -euo pipefail
cp app.conf app.conf.bak
sed -i 's/^pool_size = /# &/' app.conf
sed -i 's/^# \(log_level = \)/\1/' app.conf
