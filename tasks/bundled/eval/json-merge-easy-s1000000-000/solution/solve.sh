#!/usr/bin/env bash
set -euo pipefail
python3 - <<'PY'
import json

def merge(a, b):
    out = dict(a)
    for k, v in b.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out

def leaves(d, prefix=''):
    out = {}
    for k, v in d.items():
        p = f'{prefix}.{k}' if prefix else k
        out.update(leaves(v, p) if isinstance(v, dict) else {p: v})
    return out

load = lambda name: json.load(open(f'config/{name}.json'))
defaults = load('defaults')
result = merge(defaults, load('overrides'))
json.dump(result, open('config/effective.json', 'w'), indent=2)
PY
