#!/usr/bin/env bash
# Cold start of `boxlite run --rm BUSYBOX true` against the floor measured in the
# same run: bare qemu-system-x86_64 booting the same kernel to an initramfs whose
# /init powers off at once (same machine type, memory, cpus and kernel command line).
# Usage: bench/cold_start.sh [runs]   (needs ./scripts/setup first)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-10}
work=$(mktemp -d /tmp/blt-bench-XXXXXX); trap 'rm -rf "$work"' EXIT
export BOXLITE_HOME=$work/home BOXLITE_ACCEL=tcg
img=$root/build/test-images/busybox
kernel=$root/build/kernel/vmlinux

gcc -static -O2 -o "$work/init" "$root/bench/floor_init.c"
(cd "$work" && mkdir -p rd/dev && cp init rd/init && cd rd && echo init | cpio -o -H newc --quiet > ../floor.cpio)
khz=$(awk -F: '/cpu MHz/ {printf "%d", $2*1000; exit}' /proc/cpuinfo)
floor="qemu-system-x86_64 -M microvm,acpi=off,x-option-roms=off,isa-serial=on,rtc=on -accel tcg -cpu max -smp 1 -m 1024 \
 -nodefaults -no-user-config -nographic -no-reboot -kernel $kernel -initrd $work/floor.cpio \
 -append 'console=ttyS0 quiet reboot=t panic=-1 lpj=1000000 tsc=reliable no_timer_check i8042.noaux tsc_early_khz=$khz' -serial null"

"$root/build/boxlite" run --rm "$img" true 2>/dev/null   # warm the image and initramfs caches
hyperfine --warmup 1 --runs "$runs" --export-json "$work/out.json" \
  -n floor "$floor" \
  -n "boxlite run" "$root/build/boxlite run --rm $img true" >&2
python3 - "$work/out.json" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
f, b = r["floor"], r["boxlite run"]
print(f"floor (bare QEMU, same kernel, init powers off): median {f['median']:.3f} s")
print(f"boxlite run --rm busybox true:                   median {b['median']:.3f} s")
print(f"ratio: {b['median'] / f['median']:.2f}x")
PY
