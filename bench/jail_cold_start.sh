#!/usr/bin/env bash
# Cold start of `boxlite run --rm --engine jail BUSYBOX true` against bwrap running
# `true` in the same unpacked rootfs (the box's overlay layers, merged read-only)
# with the equivalent --unshare-* flags, in the same run.
# Usage: bench/jail_cold_start.sh [runs]   (as root, after ./scripts/setup)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-30}
work=$(mktemp -d /tmp/blt-bench-XXXXXX)
cleanup() { umount "$work/merged" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
export BOXLITE_HOME=$work/home
img=$root/build/test-images/busybox
"$root/build/boxlite" run --rm --engine jail "$img" true   # unpack the layers once
lowers=$(ls -d "$BOXLITE_HOME"/images/layers/*-* | tac | paste -sd:)
mkdir -p "$work/merged" "$work/upper" "$work/ovl-work"
mount -t overlay overlay -o "lowerdir=$lowers,upperdir=$work/upper,workdir=$work/ovl-work" "$work/merged"
hyperfine -N -i --warmup 3 --runs "$runs" --export-json "$work/out.json" \
  -n bwrap "bwrap --unshare-user --unshare-pid --unshare-net --unshare-uts --unshare-ipc --unshare-cgroup --bind $work/merged / --proc /proc --dev /dev --tmpfs /tmp /bin/true" \
  -n "boxlite run --engine jail" "$root/build/boxlite run --rm --engine jail $img true" \
  -n "boxlite run --engine jail --network disabled" "$root/build/boxlite run --rm --engine jail --network disabled $img true" >&2
python3 - "$work/out.json" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
f, b, nn = r["bwrap"], r["boxlite run --engine jail"], r["boxlite run --engine jail --network disabled"]
print(f"bwrap --unshare-all-equivalent true:          median {f['median']*1000:.1f} ms")
print(f"boxlite run --rm --engine jail busybox true:  median {b['median']*1000:.1f} ms")
print(f"  ... with --network disabled:                 median {nn['median']*1000:.1f} ms")
print(f"ratio: {b['median'] / f['median']:.2f}x (network disabled: {nn['median'] / f['median']:.2f}x)")
PY
