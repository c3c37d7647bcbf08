#!/usr/bin/env bash
# Network (issue 7): TCP throughput from the guest to the host over a forwarded port,
# against the same transfer over the host's loopback, in the same run; and the median
# setup latency of a connection from the host through a forwarded port to a guest
# service (connect + one HTTP GET of a small file), against a host loopback server.
# Guest side: busybox `dd | nc -l` (sender) and `httpd`; host side: one Python client
# for both paths. Usage: bench/net_bench.sh [engine] [size_mib] [connects]
#   defaults: jail 256 50. Run as root after ./scripts/setup.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
engine=${1:-jail}
size_mib=${2:-256}
connects=${3:-50}
boxlite=$root/build/boxlite
img=$root/build/test-images/busybox
work=$(mktemp -d /tmp/blt-net-XXXXXX)
export BOXLITE_HOME=$work/home
box=""
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -n "$box" ] && "$boxlite" rm -f "$box" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
send_port=$(free_port); http_port=$(free_port)
box=$("$boxlite" create --engine "$engine" -p "127.0.0.1:$send_port:5001" -p "127.0.0.1:$http_port:8080" "$img" sleep 100000)
"$boxlite" start "$box" >/dev/null
"$boxlite" exec "$box" sh -c 'echo hello > /tmp/small; httpd -p 0.0.0.0:8080 -h /tmp'

# Reads everything from host:port, prints MB/s.
receive() {
  python3 - "$1" "$2" <<'PY'
import socket, sys, time
host, port = sys.argv[1], int(sys.argv[2])
for attempt in range(100):
    try:
        s = socket.create_connection((host, port)); break
    except OSError:
        time.sleep(0.05)
t0 = time.monotonic(); n = 0
while True:
    b = s.recv(1 << 20)
    if not b: break
    if n == 0: t0 = time.monotonic()   # from the first byte: setup is measured separately
    n += len(b)
dt = time.monotonic() - t0
print(f"{n / dt / 1e6:.1f} MB/s ({n >> 20} MiB in {dt:.2f} s)")
PY
}

count=$((size_mib * 16))   # 64 KiB blocks
# Guest -> host over the forwarded port (busybox nc serves one connection, then exits).
"$boxlite" exec "$box" sh -c "dd if=/dev/zero bs=64k count=$count 2>/dev/null | nc -l -p 5001" &
pids+=($!)
sleep 1
box_rate=$(receive 127.0.0.1 "$send_port")
wait "${pids[-1]}" || true
# The same over the host's loopback: the same sender (busybox dd | nc), on the host.
lo_port=$(free_port)
(dd if=/dev/zero bs=64k count=$count 2>/dev/null | busybox nc -l -p "$lo_port") &
pids+=($!)
sleep 0.5
lo_rate=$(receive 127.0.0.1 "$lo_port")

# Connection setup: connect + GET /small + full response, median of N, both paths.
mkdir -p "$work/www" && echo hello > "$work/www/small"
lo_http=$(free_port)
python3 -m http.server "$lo_http" --bind 127.0.0.1 --directory "$work/www" >/dev/null 2>&1 &
pids+=($!)
sleep 1
latency() {
  python3 - "$1" "$2" <<'PY'
import socket, statistics, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
times = []
for i in range(n + 3):
    t0 = time.monotonic()
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"GET /small HTTP/1.0\r\nHost: x\r\n\r\n")
    data = b""
    while True:
        b = s.recv(65536)
        if not b: break
        data += b
    s.close()
    assert b"hello" in data, data
    if i >= 3: times.append((time.monotonic() - t0) * 1000)
print(f"{statistics.median(times):.2f} ms (p90 {sorted(times)[int(len(times) * 0.9)]:.2f} ms, n={n})")
PY
}
box_lat=$(latency "$http_port" "$connects")
lo_lat=$(latency "$lo_http" "$connects")

echo "engine=$engine size=${size_mib}MiB"
echo "throughput guest->host via forwarded port: $box_rate"
echo "throughput host loopback (same sender):    $lo_rate"
echo "connection setup via forwarded port (median): $box_lat"
echo "connection setup host loopback (median):      $lo_lat"
