#!/usr/bin/env bash
# Cold start of `boxlite run --rm BUSYBOX true` against the floor measured in the
# same run: bare qemu-system-x86_64 booting the same kernel to an initramfs whose
# /init powers off at once (same machine type, memory, cpus and kernel command line).
# Usage: bench/cold_start.sh [runs]   (needs ./scripts/setup first; 3 warm-up runs of each)
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
# The two alternate run by run (bench/ab.py), so the machine's drift hits both alike:
# all of one and then all of the other moved the ratio by half under load.
"$root/bench/ab.py" "$runs" "floor||$floor" "boxlite||$root/build/boxlite run --rm $img true" > "$work/out.txt"
python3 - "$work/out.txt" <<'PY'
import re, sys
med = {m.group(1): float(m.group(2)) / 1000
       for m in re.finditer(r"^(\S+)\s+median\s+([0-9.]+) ms", open(sys.argv[1]).read(), re.M)}
f, b = med["floor"], med["boxlite"]
print(f"floor (bare QEMU, same kernel, init powers off): median {f:.3f} s")
print(f"boxlite run --rm busybox true:                   median {b:.3f} s")
print(f"ratio: {b / f:.2f}x")
PY
