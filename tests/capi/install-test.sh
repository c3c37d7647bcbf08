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
# The reference's Native quickstart, with the image string pointed at the local
# layout, and a probe that prints which shim boots its box.
sed "s|\"alpine:3.19\"|\"$image\"|" "$src" > "$work/prog.c"
cp "$(dirname "$src")/install_probe.c" "$(dirname "$src")/capi_test.h" "$work/"
cd "$work"
# The system libraries come from boxlite.pc (Libs.private), so the test follows the .pc.
static_libs="-Wl,-Bstatic -lboxlite -Wl,-Bdynamic $(pkg-config --static --libs-only-l boxlite | sed "s/-lboxlite//")"
for p in prog install_probe; do
  cc -std=c11 -Wall -Wextra -Werror -D_POSIX_C_SOURCE=200809L $p.c -o $p-shared $(pkg-config --cflags --libs boxlite) -lpthread
  cc -std=c11 -Wall -Wextra -Werror -D_POSIX_C_SOURCE=200809L $p.c -o $p-static $(pkg-config --cflags boxlite) \
    $(pkg-config --libs-only-L boxlite) $static_libs
  if ldd $p-static | grep -q libboxlite; then echo "install-test: $p-static links libboxlite.so" >&2; exit 1; fi
done
unset BOXLITE_LIBEXEC_DIR
home=$(mktemp -d /tmp/blh-XXXXXX)
export BOXLITE_HOME="$home"
LD_LIBRARY_PATH="$libdir" ./prog-shared > out-shared.txt
LD_LIBRARY_PATH="$libdir" ./install_probe-shared "$image" > probe-shared.txt
# A static program cannot find its prefix: it is told where the runtime's files are.
export BOXLITE_LIBEXEC_DIR="$libdir/boxlite"
./prog-static > out-static.txt
./install_probe-static "$image" > probe-static.txt
rm -rf "$home"
grep -q "exit_code = 0" out-shared.txt
grep -q "exit_code = 0" out-static.txt
cat probe-shared.txt probe-static.txt
grep -qx "shim: $libdir/boxlite/boxlite-shim" probe-shared.txt
grep -qx "shim: $libdir/boxlite/boxlite-shim" probe-static.txt
echo "install-test: ok"
