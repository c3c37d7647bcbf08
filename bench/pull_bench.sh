#!/usr/bin/env bash
# Pull figures against the local docker-registry (scripts/test-registry):
#  - cold pull of test/big (debian-python's 207 MB layer + a 64 MB random layer)
#    into an empty home, against `skopeo copy docker://... oci:...` of the same
#    image in the same run (both: every blob over http from 127.0.0.1);
#  - warm pull (every layer already in the store: one manifest round trip);
#  - building the ext4 base of that image (`boxlite create --engine vm`, which
#    unpacks every layer and runs mkfs.ext4 -d; the box is removed again).
# Usage: bench/pull_bench.sh [runs] [--no-ext4]   (--no-ext4: the pulls only, for bench/check)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-3}
ext4=1
[ "${2:-}" = --no-ext4 ] && ext4=0
work=$(mktemp -d /tmp/blt-pull-XXXXXX)
reg=$work/registry
trap '"$root/scripts/test-registry" stop "$reg"; rm -rf "$work"' EXIT
b=$root/build/boxlite
port=$("$root/scripts/test-registry" start "$reg" --variant http)
"$root/scripts/test-registry" push "$reg" --big
ref=127.0.0.1:$port/test/big:latest
# Configured as what it is (plain http): an unconfigured loopback registry costs an
# https attempt first (docker's rule), ~60 ms of CA-bundle loading on this host.
b="$b --registry 127.0.0.1:$port,transport=http"
export BOXLITE_ACCEL=tcg
hyperfine -N --runs "$runs" --export-json "$work/cold.json" \
  --prepare "rm -rf $work/home $work/skopeo" \
  -n "boxlite pull (cold)" "$b --home $work/home pull -q $ref" \
  -n "skopeo copy (cold)" "skopeo copy --quiet --src-tls-verify=false docker://$ref oci:$work/skopeo:latest" >&2
$b --home "$work/home" pull -q "$ref" >/dev/null
hyperfine -N --warmup 2 --runs 20 --export-json "$work/warm.json" -n "boxlite pull (warm)" "$b --home $work/home pull -q $ref" >&2
if [ "$ext4" = 1 ]; then
  hyperfine -N --runs "$runs" --export-json "$work/ext4.json" \
    --prepare "sh -c '$b --home $work/home rm -f -a >/dev/null 2>&1; rm -rf $work/home/images/disk-images/*'" \
    -n "ext4 base build (create --engine vm)" "$b --home $work/home create --engine vm $ref" >&2
fi
size=$(du -sb "$reg/images/big/blobs" | cut -f1)
python3 - "$work" "$size" <<'PY'
import json, os, sys
w = sys.argv[1]
r = {}
for f in ("cold", "warm", "ext4"):
    if not os.path.exists(f"{w}/{f}.json"):
        continue
    for x in json.load(open(f"{w}/{f}.json"))["results"]:
        r[x["command"]] = x
mb = int(sys.argv[2]) / 1e6
b, s = r["boxlite pull (cold)"]["median"], r["skopeo copy (cold)"]["median"]
print(f"image: {mb:.0f} MB of blobs")
print(f"cold pull: boxlite {b:.2f} s ({mb/b:.0f} MB/s), skopeo {s:.2f} s, ratio {b/s:.2f}x")
print(f"warm pull: median {r['boxlite pull (warm)']['median']*1000:.1f} ms (max {r['boxlite pull (warm)']['max']*1000:.1f})")
if "ext4 base build (create --engine vm)" in r:
    print(f"ext4 base build: median {r['ext4 base build (create --engine vm)']['median']:.2f} s")
PY
