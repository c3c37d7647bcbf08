#!/usr/bin/env python3
"""Interleaved A/B timing of whole commands, for comparing two builds on a noisy machine.

Usage: bench/ab.py RUNS 'NAME|VAR=VALUE,VAR2=VALUE2|COMMAND ARGS' ...

Each variant runs three times to warm up, then RUNS times, the variants alternating (and
reversing order every other round) so that the machine's drift hits them alike. Prints
each variant's median, quartiles and minimum in ms. The times include Python's own
subprocess overhead (~1 ms here), so compare variants of one invocation with each other,
not with hyperfine's figures. Example, two builds each in its own home:
  bench/ab.py 300 'old|BOXLITE_HOME=/tmp/h-old|/tmp/old/build/boxlite run --rm --engine jail IMG true' \\
                  'new|BOXLITE_HOME=/tmp/h-new|build/boxlite run --rm --engine jail IMG true'
"""
import os
import shlex
import statistics
import subprocess
import sys
import time


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    runs = int(sys.argv[1])
    variants = []
    for spec in sys.argv[2:]:
        name, env_spec, command = spec.split("|", 2)
        env = dict(os.environ)
        for kv in filter(None, env_spec.split(",")):
            key, value = kv.split("=", 1)
            env[key] = value
        variants.append((name, env, shlex.split(command)))
    times = {name: [] for name, _, _ in variants}
    for name, env, command in variants:
        for _ in range(3):
            subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
    for i in range(runs):
        for name, env, command in variants if i % 2 == 0 else variants[::-1]:
            start = time.perf_counter()
            subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
            times[name].append((time.perf_counter() - start) * 1000)
    for name, t in times.items():
        t.sort()
        print(f"{name:12s} median {statistics.median(t):6.2f} ms  p25 {t[len(t) // 4]:6.2f}  "
              f"p75 {t[3 * len(t) // 4]:6.2f}  min {t[0]:6.2f}")


if __name__ == "__main__":
    main()
