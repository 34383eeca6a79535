#!/usr/bin/env bash
set -euo pipefail
mkdir -p bin
cat > bin/countoff <<'T1_TOOL'
#!/usr/bin/env bash
usage() { echo "usage: countoff N" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 1 ] || usage
[[ $1 =~ ^[0-9]+$ ]] || usage
start="${2:-1}"
[[ $start =~ ^[0-9]+$ ]] || usage
for ((i = start; i <= $1; i++)); do
  out=""
  if (( i % 2 == 0 )); then out+=walnut; fi
  if (( i % 5 == 0 )); then out+=planet; fi
  echo "${out:-$i}"
done
T1_TOOL
chmod +x bin/countoff
