#!/usr/bin/env python3
"""scripts/gen-hot-text's counter: `perf script -F event,ip,sym,dso` of cpu-clock samples
and page faults (with call chains) on stdin; writes OUTDIR/<executable>.txt for boxlite,
boxlite-shim and boxlite-guest, most sampled first.

Usage: hot_text.py OUTDIR ARCHIVE...
A function of an archive built without a section per function brings its whole object
file's text where it is named: those in a text section over 16 KiB (SQLite's) go last,
so that they do not split the dense part.
"""
import collections
import os
import subprocess
import sys

EXECUTABLES = ("boxlite", "boxlite-shim", "boxlite-guest")


def frame(text):
    """'<ip> <symbol> (<dso>)' -> (symbol, dso's file name), or (None, None)."""
    text = text.strip()
    if not text.endswith(")") or "(" not in text:
        return None, None
    left, dso = text[:-1].rsplit("(", 1)
    parts = left.split(None, 1)
    return (parts[1].strip() if len(parts) > 1 else ""), os.path.basename(dso)


def count_samples(lines):
    counts = collections.Counter()
    want_fault_frame = False
    for line in lines:
        if not line.strip():
            continue
        if not line[0].isspace() or "cpu-clock:" in line:
            want_fault_frame = "page_fault_user" in line
            if "cpu-clock:" not in line:
                continue
            sym, dso = frame(line.split("cpu-clock:", 1)[1])
        elif want_fault_frame:
            sym, dso = frame(line)
            if dso == "[kernel.kallsyms]":
                continue
            want_fault_frame = False  # the first user frame only
        else:
            continue
        if dso in EXECUTABLES and sym and sym != "[unknown]":
            counts[(dso, sym)] += 1
    return counts


def lumped_functions(archives):
    lumped = set()
    for archive in archives:
        out = subprocess.run(["readelf", "-SsW", archive], capture_output=True, text=True).stdout
        sizes = {}
        for line in out.splitlines():
            f = line.replace("[ ", "[").split()
            if line.startswith("File: "):
                sizes = {}
            elif len(f) > 5 and f[0].startswith("[") and f[0] != "[Nr]":
                if f[1] == ".text" and f[2] == "PROGBITS":
                    sizes[f[0].strip("[]")] = int(f[5], 16)
            elif len(f) == 8 and f[3] == "FUNC" and sizes.get(f[6], 0) > 16384:
                lumped.add(f[7])
    return lumped


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    outdir = sys.argv[1]
    counts = count_samples(sys.stdin)
    lumped = lumped_functions(sys.argv[2:])
    for exe in EXECUTABLES:
        order = [sym for (dso, sym), _ in counts.most_common() if dso == exe]
        with open(os.path.join(outdir, exe + ".txt"), "w") as f:
            print(f"# scripts/gen-hot-text: the functions of {exe} a jail `run --rm` runs or first", file=f)
            print("# touches, most sampled first; those of archives without a section per function last.", file=f)
            for sym in [s for s in order if s not in lumped] + [s for s in order if s in lumped]:
                print(sym, file=f)


if __name__ == "__main__":
    main()
