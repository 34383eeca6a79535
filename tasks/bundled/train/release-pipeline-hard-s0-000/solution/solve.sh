#!/usr/bin/env bash
set -euo pipefail
mkdir -p release/bin release/docs release/data
echo 2.0.2 > release/VERSION
cp src/*.sh release/bin/
chmod 755 release/bin/*.sh
cat $(ls notes/*.md | LC_ALL=C sort) > release/docs/NOTES.md
tr '\t' ',' < raw/metrics.tsv > release/data/metrics.csv
grep -c ERROR raw/events.log > release/data/error_count.txt
grep -o 'user=[a-z]*' raw/events.log | cut -d= -f2 | LC_ALL=C sort -u > release/data/users.txt
python3 -c 'import json; c = json.load(open("config/app.json")); c.update(debug=False, version="2.0.2"); json.dump(c, open("release/config.json", "w"), indent=2)'
mkdir -p release/logs
touch release/logs/.keep
{ echo '## 2.0.2'; sed 's/^/- /' changes.txt; } > release/docs/CHANGELOG.md
python3 -c 'import json, os; json.dump({"name": "gentle-marble", "version": "2.0.2", "scripts": sorted(os.listdir("release/bin"))}, open("release/manifest.json", "w"))'
ln -sfn release current
(cd release && sha256sum $(find data -type f | LC_ALL=C sort)) > release/SHA256SUMS
chmod 444 release/data/*
mkdir -p dist
tar -czf dist/gentle-marble-2.0.2.tar.gz release
