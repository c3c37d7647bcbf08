#!/usr/bin/env bash
# Time from create to running, and from stop to start, through the CLI, for one
# engine. Usage: bench/lifecycle_bench.sh ENGINE [runs]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
engine=${1:-jail}
runs=${2:-10}
work=$(mktemp -d /tmp/blt-bench-XXXXXX)
export BOXLITE_HOME=$work/home BOXLITE_ACCEL=tcg
trap '"$root/build/boxlite" rm -f -a >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
b=$root/build/boxlite
img=$root/build/test-images/busybox
$b run --rm --engine "$engine" "$img" true 2>/dev/null   # warm the image caches
$b create --engine "$engine" --name keep "$img" >/dev/null
hyperfine -N --warmup 1 --runs "$runs" --export-json "$work/a.json" \
  --prepare "sh -c '$b rm -f fresh >/dev/null 2>&1 || true'" -n "create+start" "sh -c '$b create --engine $engine --name fresh $img && $b start fresh'" \
  --prepare "sh -c '$b stop keep >/dev/null 2>&1 || true'" -n "start (stopped box)" "$b start keep" >&2 2>/dev/null
python3 - "$work/a.json" "$engine" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
for name in ("create+start", "start (stopped box)"):
    x = r[name]
    print(f"{sys.argv[2]}: {name}: median {x['median']*1000:.1f} ms (min {x['min']*1000:.1f}, max {x['max']*1000:.1f})")
PY
