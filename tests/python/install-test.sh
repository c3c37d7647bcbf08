#!/bin/sh
# The documented offline install (python3 -m pip install --no-build-isolation),
# from a copy of python/ into a temporary target, then a box through the
# installed package with no BOXLITE_LIB: it finds the build tree's library.
# Usage: install-test.sh SOURCE_DIR BUILD_DIR IMAGE_DIR
set -eu
src=$1 build=$2 image=$3
tmp=$(mktemp -d /tmp/blpy-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cp -r "$src/python" "$tmp/pkg"
BOXLITE_BUILD_DIR="$build" /usr/bin/python3 -m pip install -q --no-build-isolation --no-index \
  --target "$tmp/site" "$tmp/pkg"
cd "$tmp"
unset BOXLITE_LIB
PYTHONPATH="$tmp/site" /usr/bin/python3 - "$image" <<'PY'
import asyncio, sys
import boxlite
print("boxlite", boxlite.__version__, "from", boxlite.__file__)
assert boxlite.__file__.startswith(sys.path[0] or "/tmp") or "/site/" in boxlite.__file__

async def main():
    async with boxlite.SimpleBox(image=sys.argv[1]) as box:
        r = await box.exec("echo", "installed")
        print(r.stdout, end="")
        assert r.stdout == "installed\n"
asyncio.run(main())
PY
