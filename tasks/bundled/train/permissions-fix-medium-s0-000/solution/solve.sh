#!/usr/bin/env bash
set -euo pipefail
find site -type d -exec chmod 755 {} +
find site -type f -exec chmod 644 {} +
chmod 755 site/bin/*.sh
chmod 700 site/secrets
chmod 600 site/secrets/*.key
chmod 444 site/data/readonly/*
