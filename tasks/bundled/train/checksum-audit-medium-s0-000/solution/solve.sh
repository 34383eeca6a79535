#!/usr/bin/env bash
set -euo pipefail
export LC_ALL=C
mkdir -p audit
{ sha256sum -c MANIFEST.sha256 2>/dev/null || true; } > /tmp/check.txt
{ grep ': FAILED$' /tmp/check.txt || true; } | sed 's/: FAILED$//' | sort > audit/corrupted.txt
{ grep ': FAILED open or read$' /tmp/check.txt || true; } | sed 's/: FAILED open or read$//' | sort > audit/missing.txt
comm -13 <(awk '{print $2}' MANIFEST.sha256 | sort) <(find files -type f | sort) > audit/untracked.txt
{
  echo "ok=$(grep -c ': OK$' /tmp/check.txt || true)"
  echo "corrupted=$(wc -l < audit/corrupted.txt)"
  echo "missing=$(wc -l < audit/missing.txt)"
} > audit/summary.txt
cat audit/corrupted.txt audit/missing.txt | while IFS= read -r p; do
  mkdir -p "$(dirname "$p")"
  cp "backup/${p#files/}" "$p"
done
