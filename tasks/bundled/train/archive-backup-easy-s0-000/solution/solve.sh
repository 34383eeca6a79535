#!/usr/bin/env bash
set -euo pipefail
mkdir -p backup
tar -czf backup/project.tar.gz --exclude='*.log' --exclude='*.log.gz' --exclude=project/cache project
