#!/usr/bin/env bash
# `boxlite list -a` with 1,000 boxes in the database (target < 50 ms), against
# the sqlite3 CLI's select of the same rows in the same run.
# Usage: bench/list_bench.sh [boxes] [runs]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
n=${1:-1000}
runs=${2:-30}
work=$(mktemp -d /tmp/blt-bench-XXXXXX); trap 'rm -rf "$work"' EXIT
export BOXLITE_HOME=$work/home
"$root/build/boxlite" list -a >/dev/null   # creates the database
python3 - "$BOXLITE_HOME/db/boxlite.db" "$n" <<'PY'
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1])
now = int(time.time() * 1000)
rows = [(f"bench{i:07d}", f"box-{i}", "busybox", "jail", "stopped", "stop requested", now - i, 0, 0, 0, 0, 1, "{}")
        for i in range(int(sys.argv[2]))]
db.executemany("INSERT INTO boxes (id, name, image, engine, state, stop_reason, created_at_ms, started_at_ms,"
               " stopped_at_ms, shim_pid, auto_remove, detach, options_json) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
db.commit()
PY
hyperfine -N --warmup 3 --runs "$runs" --export-json "$work/out.json" \
  -n "boxlite list -a" "$root/build/boxlite list -a" \
  -n "sqlite3 select" "sqlite3 $BOXLITE_HOME/db/boxlite.db 'SELECT * FROM boxes ORDER BY created_at_ms DESC'" >&2
python3 - "$work/out.json" "$n" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
b, p = r["boxlite list -a"], r["sqlite3 select"]
print(f"boxlite list -a, {sys.argv[2]} boxes: median {b['median']*1000:.1f} ms")
print(f"sqlite3 CLI select of the same rows:  median {p['median']*1000:.1f} ms")
print(f"ratio: {b['median'] / p['median']:.2f}x")
PY
