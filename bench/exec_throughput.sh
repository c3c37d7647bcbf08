#!/usr/bin/env bash
# Exec stdout throughput (issue 35): `boxlite exec BOX -- head -c N /dev/zero > /dev/null`
# against a host pipe moving the same bytes, alternating in the same run (these
# machines are noisy: compare the ratio). Two host pipes run:
#   - the peer: the box's own `head` (its image's busybox, copied out of the box)
#     piped to cat on the host: the same producer, so the ratio is what the exec's
#     transport costs. busybox head writes 4 KiB at a time from a getc loop and is
#     about ten times slower than coreutils' head; no transport can beat it.
#   - coreutils `head -c N /dev/zero | cat > /dev/null`, the issue's "1 GB/s", for
#     reference only.
# The box is made once and kept running; each exec's own start (a few ms on jail,
# ~10 ms on vm) is inside its time. Prints medians, MB/s, the ratios and the
# machine's load average.
# Usage: bench/exec_throughput.sh [engine] [bytes] [runs]
#   defaults: jail 300000000 10. Run as root after ./scripts/setup.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
engine=${1:-jail}
bytes=${2:-300000000}
runs=${3:-10}
boxlite=${BOXLITE_BIN:-$root/build/boxlite}
img=$root/build/test-images/busybox
work=$(mktemp -d /tmp/blt-exec-tp-XXXXXX)
export BOXLITE_HOME=$work/home
box=""
cleanup() {
  if [ -n "$box" ]; then "$boxlite" rm -f "$box" >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

box=$("$boxlite" create --engine "$engine" "$img" sleep 100000)
"$boxlite" start "$box" >/dev/null
"$boxlite" cp "$box:/bin/busybox" "$work/busybox"

python3 - "$boxlite" "$box" "$bytes" "$runs" "$work/busybox" <<'PY'
import os, statistics, subprocess, sys, time
boxlite, box, n, runs, busybox = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
cmds = {
    "peer": ["bash", "-c", f"{busybox} head -c {n} /dev/zero | cat > /dev/null"],
    "coreutils": ["bash", "-c", f"head -c {n} /dev/zero | cat > /dev/null"],
    "exec": [boxlite, "exec", box, "--", "head", "-c", str(n), "/dev/zero"],
}
def once(cmd):
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0
# The exec's byte count is checked once, outside the timing.
count = subprocess.run(["bash", "-c", '"$0" "$@" | wc -c'] + cmds["exec"], stdout=subprocess.PIPE, check=True).stdout
if int(count) != n: sys.exit(f"exec delivered {int(count)} bytes, expected {n}")
load0 = os.getloadavg()[0]
for cmd in cmds.values(): once(cmd)  # warm-up
times = {name: [] for name in cmds}
order = list(cmds)
for i in range(runs):
    for name in order if i % 2 == 0 else order[::-1]:
        times[name].append(once(cmds[name]))
med = {name: statistics.median(t) for name, t in times.items()}
mb = n / 1e6
def line(label, name):
    t = times[name]
    print(f"{label}: median {med[name]:.3f} s ({mb / med[name]:.0f} MB/s), range {min(t):.3f}-{max(t):.3f}")
line(f"host pipe, the box's busybox (busybox head -c {n} /dev/zero | cat > /dev/null)", "peer")
line(f"host pipe, coreutils (head -c {n} /dev/zero | cat > /dev/null)", "coreutils")
line(f"boxlite exec BOX -- head -c {n} /dev/zero > /dev/null", "exec")
print(f"ratio (exec throughput / busybox pipe throughput): {med['peer'] / med['exec']:.2f}")
print(f"ratio (exec throughput / coreutils pipe throughput): {med['coreutils'] / med['exec']:.2f}")
print(f"load average (1 min) before/after: {load0:.2f}/{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
PY
