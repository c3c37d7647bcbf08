#!/usr/bin/env bash
# Cold start of `boxlite run --rm --engine jail BUSYBOX true` against bwrap running
# `true` in the same unpacked rootfs (the box's overlay layers, merged read-only)
# with the equivalent --unshare-* flags, in the same run: hyperfine -N, in rounds of
# 10 runs of each command, the rounds' samples pooled (these machines drift within a
# minute; alternating rounds keeps that out of the ratio).
# Usage: bench/jail_cold_start.sh [runs per command]   (as root, after ./scripts/setup)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-40}
rounds=$(( (runs + 9) / 10 ))
work=$(mktemp -d /tmp/blt-bench-XXXXXX)
cleanup() { umount "$work/merged" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
export BOXLITE_HOME=$work/home
img=$root/build/test-images/busybox
"$root/build/boxlite" run --rm --engine jail "$img" true   # unpack the layers once
lowers=$(ls -d "$BOXLITE_HOME"/images/layers/*-* | grep -v boxlite- | tac | paste -sd:)
mkdir -p "$work/merged" "$work/upper" "$work/ovl-work"
mount -t overlay overlay -o "lowerdir=$lowers,upperdir=$work/upper,workdir=$work/ovl-work" "$work/merged"
for i in $(seq "$rounds"); do
  hyperfine -N -i --warmup 2 --runs 10 --export-json "$work/out-$i.json" \
    -n bwrap "bwrap --unshare-user --unshare-pid --unshare-net --unshare-uts --unshare-ipc --unshare-cgroup --bind $work/merged / --proc /proc --dev /dev --tmpfs /tmp /bin/true" \
    -n "boxlite run --engine jail" "$root/build/boxlite run --rm --engine jail $img true" \
    -n "boxlite run --engine jail --network disabled" "$root/build/boxlite run --rm --engine jail --network disabled $img true" >/dev/null
done
python3 - "$work" <<'PY'
import glob, json, statistics, sys
pooled = {}
for f in sorted(glob.glob(sys.argv[1] + "/out-*.json")):
    for r in json.load(open(f))["results"]:
        pooled.setdefault(r["command"], []).extend(r["times"])
med = {k: statistics.median(v) * 1000 for k, v in pooled.items()}
n = len(pooled["bwrap"])
f, b, nn = med["bwrap"], med["boxlite run --engine jail"], med["boxlite run --engine jail --network disabled"]
print(f"bwrap --unshare-all-equivalent true:          median {f:.1f} ms ({n} runs)")
print(f"boxlite run --rm --engine jail busybox true:  median {b:.1f} ms")
print(f"  ... with --network disabled:                 median {nn:.1f} ms")
print(f"ratio: {b / f:.2f}x (network disabled: {nn / f:.2f}x)")
PY
