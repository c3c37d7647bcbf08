#!/bin/sh
# Starts the local test registry (scripts/test-registry, http variant), pushes the
# test images, runs PROGRAM ARGS... with {REGISTRY} in the arguments (and
# $BOXLITE_TEST_REGISTRY) set to its host:port, then stops it.
# Usage: with-registry.sh SOURCE_DIR PROGRAM [ARGS...]
set -u
src=$1
shift
dir=$(mktemp -d /tmp/blreg-XXXXXX)
port=$("$src/scripts/test-registry" start "$dir" --variant http) || { rm -rf "$dir"; exit 1; }
trap '"$src/scripts/test-registry" stop "$dir" >/dev/null 2>&1; rm -rf "$dir"' EXIT
"$src/scripts/test-registry" push "$dir" >/dev/null || exit 1
export BOXLITE_TEST_REGISTRY="127.0.0.1:$port"
prog=$1
shift
args=""
for a in "$@"; do
  [ "$a" = "{REGISTRY}" ] && a="$BOXLITE_TEST_REGISTRY"
  set -- "$@" "$a"
  shift
done
"$prog" "$@"
