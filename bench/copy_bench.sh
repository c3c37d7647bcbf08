#!/usr/bin/env bash
# copy_in throughput (issue 5): `boxlite cp FILE BOX:/data/big` of one large file
# into a running box, against `tar -c | tar -x` of the same file into a directory on
# the same disk, alternating, in the same run. From the second run on both replace
# the previous run's copy (unlink, then write), as cp and tar -x do. The box's
# writable layer lives in $BOXLITE_HOME (jail: the overlay's upper directory; vm: the
# qcow2 overlay), on the same filesystem as the tar destination. Neither side syncs.
# Usage: bench/copy_bench.sh [engine] [size_mib] [runs]   (as root, after ./scripts/setup)
#   defaults: jail 1024 3. The vm engine's root disk has about 256 MiB free (the
#   image's ext4 plus slack), so give it a size of at most ~128 MiB.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
engine=${1:-jail}
size_mib=${2:-1024}
runs=${3:-3}
boxlite=$root/build/boxlite
img=$root/build/test-images/busybox
work=$(mktemp -d /var/tmp/blt-copy-bench-XXXXXX)
export BOXLITE_HOME=$work/home
box_pid=""
cleanup() {
  if [ -n "${id:-}" ]; then "$boxlite" rm -f "$id" >/dev/null 2>&1 || true; fi
  if [ -n "$box_pid" ]; then kill "$box_pid" 2>/dev/null || true; wait "$box_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/src" "$work/tar-dst"
# Incompressible and never sparse: the same bytes through both paths.
head -c "$((size_mib << 20))" /dev/urandom > "$work/src/big"
cat "$work/src/big" > /dev/null   # in the page cache for both sides

# A box that stays up while the CLI copies into it from outside (cp attaches by id).
"$boxlite" run --rm --engine "$engine" "$img" sh -c 'mkdir -p /data && exec sleep 100000' \
  >"$work/run.log" 2>&1 &
box_pid=$!
id=""
for _ in $(seq 600); do
  id=$(ls "$BOXLITE_HOME/boxes" 2>/dev/null | head -1 || true)
  if [ -n "$id" ] && echo probe > "$work/probe" && "$boxlite" cp "$work/probe" "$id:/data/probe" 2>/dev/null; then break; fi
  id=""
  sleep 0.1
done
[ -n "$id" ] || { echo "box did not come up: $(cat "$work/run.log")" >&2; exit 1; }

now() { date +%s.%N; }
tar_times=() box_times=()
for i in $(seq "$runs"); do
  sync
  t0=$(now)
  tar -C "$work/src" -cf - big | tar -C "$work/tar-dst" -xf -
  t1=$(now)
  tar_times+=("$(python3 -c "print($t1 - $t0)")")
  sync
  t0=$(now)
  "$boxlite" cp "$work/src/big" "$id:/data/big"
  t1=$(now)
  box_times+=("$(python3 -c "print($t1 - $t0)")")
  echo "run $i: tar ${tar_times[-1]} s, boxlite cp ${box_times[-1]} s" >&2
done

python3 - "$size_mib" "$engine" "${tar_times[*]}" "${box_times[*]}" <<'PY'
import statistics, sys
mib, engine = int(sys.argv[1]), sys.argv[2]
tar = statistics.median(float(x) for x in sys.argv[3].split())
box = statistics.median(float(x) for x in sys.argv[4].split())
print(f"file: {mib} MiB, medians of {len(sys.argv[3].split())} runs")
print(f"tar -c | tar -x, same disk:         {tar:7.2f} s  {mib / tar:8.1f} MiB/s")
print(f"boxlite cp FILE BOX:/data ({engine}): {box:7.2f} s  {mib / box:8.1f} MiB/s")
print(f"ratio (boxlite throughput / tar):   {tar / box:.2f}")
PY
