#!/bin/sh
# cmake --install into a temporary prefix; build a C program there with
# `pkg-config --cflags --libs boxlite` (shared) and `--static` (static), and run
# both on a real box. The box's shim must come from the prefix (<libdir>/boxlite),
# not from the build tree.
# Usage: install-test.sh BUILD_DIR PROGRAM.c IMAGE_DIR
set -eu
build=$1 src=$2 image=$3
prefix=$(mktemp -d /tmp/blp-XXXXXX)
work=$(mktemp -d /tmp/blw-XXXXXX)
trap 'rm -rf "$prefix" "$work"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
pc=$(dirname "$(find "$prefix" -name boxlite.pc)")
export PKG_CONFIG_PATH="$pc"
for f in include/boxlite.h; do test -f "$prefix/$f"; done
libdir=$(realpath "$(pkg-config --variable=libdir boxlite)")
for f in libboxlite.so libboxlite.a boxlite/boxlite-shim boxlite/boxlite-guest boxlite/kernel/vmlinux; do
  test -e "$libdir/$f" || { echo "install-test: missing $libdir/$f" >&2; exit 1; }
done
# The program under test, with the image string pointed at the local layout.
sed "s|\"alpine:3.19\"|\"$image\"|" "$src" > "$work/prog.c"
cd "$work"
cc -std=c11 -Wall -Wextra -Werror prog.c -o prog-shared $(pkg-config --cflags --libs boxlite)
cc -std=c11 -Wall -Wextra -Werror prog.c -o prog-static $(pkg-config --cflags boxlite) \
  -Wl,-Bstatic -lboxlite -Wl,-Bdynamic $(pkg-config --static --libs-only-other --libs-only-L boxlite) \
  -lprotobuf-lite -larchive -lcrypto -lseccomp -lsqlite3 -lstdc++ -lpthread -lm
if ldd prog-static | grep -q libboxlite; then echo "install-test: prog-static links libboxlite.so" >&2; exit 1; fi
unset BOXLITE_LIBEXEC_DIR
home=$(mktemp -d /tmp/blh-XXXXXX)
export BOXLITE_HOME="$home"
# Record which shim boots the box: it must be the installed one.
( while :; do for p in $(pgrep -f "boxlite-shim $home" || true); do readlink "/proc/$p/exe"; done; sleep 0.05; done ) > shims.txt 2>/dev/null &
watcher=$!
LD_LIBRARY_PATH="$libdir" ./prog-shared > out-shared.txt
BOXLITE_LIBEXEC_DIR="$libdir/boxlite" ./prog-static > out-static.txt  # a static program cannot find its prefix
kill $watcher
rm -rf "$home"
grep -q "exit_code = 0" out-shared.txt && grep -q "exit_code = 0" out-static.txt
sort -u shims.txt -o shims.txt; cat shims.txt
test -s shims.txt
if grep -v "^$libdir/boxlite/boxlite-shim" shims.txt; then echo "install-test: a shim outside the prefix ran" >&2; exit 1; fi
echo "install-test: ok ($prefix)"
