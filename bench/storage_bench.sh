#!/usr/bin/env bash
# Storage figures (issue 8), vm engine (TCG here):
#  1. snapshot create and clone of a stopped box that has written DATA_MIB of
#     incompressible data to its disk (target < 1 s each: both are O(1) qcow2 chain
#     operations, not copies), then of the same box RUNNING (the agent syncs, QMP
#     stop, a new top overlay by blockdev-snapshot-sync, cont), against the peer
#     `cp --reflink=never` of the layer holding that data (what a copying snapshot costs);
#  2. export (flatten the chain + tar) and import throughput, in MB of the .boxlite file/s;
#  3. 9p read throughput: `dd` of a host file through a volume inside the box,
#     against `dd` of the same file on the host (page cache warm for both).
# Usage: bench/storage_bench.sh [data_mib] [read_mib]   (as root, after ./scripts/setup)
#   defaults: 1024 256.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
data_mib=${1:-1024}
read_mib=${2:-256}
boxlite=$root/build/boxlite
img=$root/build/test-images/busybox
work=$(mktemp -d /var/tmp/blt-storage-bench-XXXXXX)
export BOXLITE_HOME=$work/home BOXLITE_ENGINE=vm BOXLITE_ACCEL=tcg
cleanup() {
  for b in $("$boxlite" ls -a -q 2>/dev/null); do "$boxlite" rm -f "$b" >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT
ms() { echo $(( $(date +%s%N) / 1000000 )); }

mkdir -p "$work/vol" "$work/out"
head -c "$((read_mib << 20))" /dev/urandom > "$work/vol/big"

box=$("$boxlite" create --name src -v "$work/vol:/vol:ro" "$img" sh)
"$boxlite" start src >/dev/null
# 1 GiB of incompressible data, written in the box (urandom once, then copies: fast under TCG).
"$boxlite" exec src sh -c "dd if=/dev/urandom of=/chunk bs=1M count=64 2>/dev/null; \
  for i in \$(seq 1 $((data_mib / 64))); do cat /chunk; done > /data; rm /chunk; sync; ls -l /data"

# 9p read vs host read: dd's own figures (busybox dd in the box, coreutils on the host).
cat "$work/vol/big" > /dev/null
host=$(dd if="$work/vol/big" of=/dev/null bs=1M 2>&1 | tail -1)
# Timed inside the box by /proc/uptime (10 ms resolution): busybox dd prints no rate.
in_box_ms() {
  "$boxlite" exec src sh -c "$1 >/dev/null 2>&1; a=\$(cut -d' ' -f1 /proc/uptime); $1 >/dev/null 2>&1; b=\$(cut -d' ' -f1 /proc/uptime); echo \$a \$b" |
    awk '{printf "%d", ($2 - $1) * 1000}'
}
guest_ms=$(in_box_ms "dd if=/vol/big of=/dev/null bs=1M")
guest_disk_ms=$(in_box_ms "dd if=/data of=/dev/null bs=1M count=$read_mib")
"$boxlite" stop src >/dev/null

t0=$(ms); "$boxlite" snapshot create src s1 >/dev/null; t1=$(ms)
snap_ms=$((t1 - t0))
t0=$(ms); "$boxlite" clone src --name c1 >/dev/null; t1=$(ms)
clone_ms=$((t1 - t0))
# The same on the running box (started by another process: the CLI reaches it
# through its shim and QEMU's monitor), which must go on accepting execs.
"$boxlite" start src >/dev/null
t0=$(ms); "$boxlite" snapshot create src s2 >/dev/null; t1=$(ms)
live_snap_ms=$((t1 - t0))
t0=$(ms); "$boxlite" clone src --name c2 >/dev/null; t1=$(ms)
live_clone_ms=$((t1 - t0))
live_ok=$("$boxlite" exec src sh -c 'ls -l /data >/dev/null && echo running')
"$boxlite" stop src >/dev/null
# The peer: copying the layer that holds the data, as a copying snapshot would.
layer=$(ls -S "$BOXLITE_HOME"/boxes/*/snapshots/*.qcow2 | head -1)
sync; t0=$(ms); cp --reflink=never "$layer" "$work/copy.qcow2"; sync; t1=$(ms)
cp_ms=$((t1 - t0))
cp_mib=$(( $(stat -c %s "$work/copy.qcow2") >> 20 ))
rm -f "$work/copy.qcow2"

t0=$(ms); file=$("$boxlite" export src -o "$work/out"); t1=$(ms)
export_ms=$((t1 - t0))
size=$(stat -c %s "$file")
t0=$(ms); "$boxlite" import "$file" --name imp >/dev/null; t1=$(ms)
import_ms=$((t1 - t0))
mb() { awk -v b="$1" -v m="$2" 'BEGIN { if (m == 0) m = 1; printf "%.1f", b / 1e6 / (m / 1000) }'; }
echo "data written in the box: ${data_mib} MiB; export file: $((size >> 20)) MiB"
echo "snapshot create: ${snap_ms} ms"
echo "clone: ${clone_ms} ms"
echo "snapshot create, running box: ${live_snap_ms} ms; clone, running box: ${live_clone_ms} ms (box after: ${live_ok})"
echo "peer: cp --reflink=never of the ${cp_mib} MiB layer + sync: ${cp_ms} ms" \
  "(running snapshot $(awk -v a="$live_snap_ms" -v b="$cp_ms" 'BEGIN { printf "%.3f", a / (b ? b : 1) }')x, " \
  "running clone $(awk -v a="$live_clone_ms" -v b="$cp_ms" 'BEGIN { printf "%.3f", a / (b ? b : 1) }')x of it)"
echo "export: ${export_ms} ms ($(mb "$size" "$export_ms") MB/s)"
echo "import: ${import_ms} ms ($(mb "$size" "$import_ms") MB/s)"
echo "9p read of ${read_mib} MiB in the box (warm host cache): ${guest_ms} ms ($(mb $((read_mib << 20)) "$guest_ms") MB/s)"
echo "the same size from the box's own disk (virtio-blk, warm guest cache): ${guest_disk_ms} ms ($(mb $((read_mib << 20)) "$guest_disk_ms") MB/s)"
echo "host read of the same file: ${host}"
