#!/usr/bin/env python3
"""Per-exec overhead of the Python package, in one process and one box.

Run by run, alternately, `true` to completion through
  (a) SimpleBox.exec (buffered, asyncio, drain thread),
  (b) native Box.exec + Execution.wait,
  (c) the C API called directly through ctypes (boxlite_box_exec_streamed +
      boxlite_execution_wait, the callback setting a threading.Event): the C
      path with no asyncio layer.
Then the C++ bench (bench/capi_exec_overhead.cpp) runs on the same image right
after, for the C++ core's and the C API's figures on this machine in this run.
Usage: python_exec_overhead.py IMAGE_DIR [runs] [path/to/boxlite_bench_capi_exec]
(BOXLITE_ENGINE picks the engine; BOXLITE_LIB the library.)"""
import asyncio
import ctypes
import os
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import boxlite  # noqa: E402
from boxlite import _bridge, _ffi  # noqa: E402


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * q))]


def direct_exec(box_ptr):
    """`true` through the C API with the least Python possible."""
    done = threading.Event()
    key = _bridge.register(lambda code, err: done.set())
    c = _ffi.BoxliteCommand(b"true", None, 0, None, 0, None, None, 0.0, 0)
    out = ctypes.c_void_p()
    err = _ffi.CBoxliteError()
    ok = _ffi.lib.boxlite_box_exec_streamed(box_ptr, ctypes.byref(c), _bridge.stdout_cb, _bridge.stderr_cb, 0,
                                            ctypes.byref(out), ctypes.byref(err))
    _bridge.check(ok, err)
    _bridge.check(_ffi.lib.boxlite_execution_wait(out.value, _bridge._wait_cb, key, ctypes.byref(err)), err)
    done.wait()
    _ffi.lib.boxlite_execution_free(out.value)


async def main(image, runs):
    with boxlite.Boxlite(boxlite.Options()) as rt:
        async with boxlite.SimpleBox(image=image, runtime=rt) as sb:
            box = sb._box
            loop = asyncio.get_running_loop()
            for _ in range(20):  # warm up
                await sb.exec("true")
            simple, native, direct = [], [], []
            for _ in range(runs):
                t = time.perf_counter()
                await sb.exec("true")
                simple.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                ex = await box.exec("true")
                await ex.wait()
                native.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                await loop.run_in_executor(None, direct_exec, box._ptr)
                direct.append((time.perf_counter() - t) * 1000)
    for name, v in (("SimpleBox.exec", simple), ("Box.exec+wait", native), ("C API via ctypes", direct)):
        print(f"{name:18s} median {statistics.median(v):.3f} ms  p99 {pct(v, 0.99):.3f} ms  (n={len(v)})")
    print(f"added by SimpleBox over the C API (median): {statistics.median(simple) - statistics.median(direct):.3f} ms")
    print(f"added by Box.exec over the C API (median):  {statistics.median(native) - statistics.median(direct):.3f} ms")


if __name__ == "__main__":
    image = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    asyncio.run(main(image, runs))
    if len(sys.argv) > 3:
        print("--- C++ bench, same image, right after:", flush=True)
        subprocess.run([sys.argv[3], image, str(runs)], check=True)
