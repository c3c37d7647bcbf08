#!/bin/sh
# Runs a C API test program in a fresh BOXLITE_HOME (short path: unix sockets are
# limited to 107 bytes), then checks that nothing of that home is left: no process
# mentioning it, no box directory. Usage: run-in-home.sh PROGRAM [ARGS...]
set -u
home=$(mktemp -d /tmp/blc-XXXXXX)
export BOXLITE_HOME="$home"
export BOXLITE_ACCEL="${BOXLITE_ACCEL:-tcg}"  # KVM is unusable on these machines (DESIGN.md)
"$@"
rc=$?
leftover=""
for i in $(seq 1 50); do
  leftover=$(pgrep -f "$home" || true)
  [ -z "$leftover" ] && break
  sleep 0.1
done
if [ -n "$leftover" ]; then
  echo "run-in-home: processes of $home still running: $leftover" >&2
  pkill -9 -f "$home"
  rc=1
fi
if [ -d "$home/boxes" ] && [ -n "$(ls -A "$home/boxes")" ]; then
  echo "run-in-home: box directories left in $home/boxes: $(ls "$home/boxes")" >&2
  rc=1
fi
rm -rf "$home"
exit $rc
