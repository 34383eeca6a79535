#!/usr/bin/env bash
set -euo pipefail
mkdir -p bin
cat > bin/scramble <<'T1_TOOL'
#!/usr/bin/env python3
import re
import sys

args = sys.argv[1:]
decode = bool(args) and args[0] == "-d"
if decode:
    args = args[1:]
if len(args) != 1 or not re.fullmatch(r"-?\d+", args[0]):
    print("usage: scramble [-d] SHIFT", file=sys.stderr)
    sys.exit(2)
k = int(args[0]) * (-1 if decode else 1)

def shift(c):
    for base in (ord('a'), ord('A')):
        if base <= ord(c) < base + 26:
            return chr(base + (ord(c) - base + k) % 26)
    return c

sys.stdout.write("".join(shift(c) if c.isascii() else c for c in sys.stdin.read()))
T1_TOOL
chmod +x bin/scramble
