#!/usr/bin/env python3
"""Interleaved A/B timing of whole commands, for comparing two builds on a noisy machine.

Usage: bench/ab.py [--block K] RUNS 'NAME|VAR=VALUE,VAR2=VALUE2|COMMAND ARGS' ...

Each variant runs three times to warm up, then RUNS times, the variants alternating (and
reversing order every other round) so that the machine's drift hits them alike. Prints
each variant's median, quartiles and minimum in ms. The times include Python's own
subprocess overhead (~1 ms here), so compare variants of one invocation with each other,
not with hyperfine's figures.

With --block K the variants alternate in blocks of K+1 runs, the first of each block not
counted (RUNS rounds up to a multiple of K). Work the kernel defers past a command's exit (a network namespace dismantled by a
kworker, RCU callbacks) lands on whichever run comes next: alternating every run charges
about half of it to the other variant, so a change to deferred work measures half its
size or less (a jail box with and without its network: 0.48 ms apart alternating every
run, 0.92 ms in blocks of 10, in one sitting). Blocks follow the machine's drift less
closely: use them for changes to what a box leaves behind, with more runs.

Example, two builds each in its own home:
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
    args = sys.argv[1:]
    block = 0
    if args[:1] == ["--block"]:
        if len(args) < 2 or not args[1].isdigit() or int(args[1]) < 1:
            sys.exit("--block takes a positive number of runs\n" + __doc__)
        block = int(args[1])
        args = args[2:]
    if len(args) < 2:
        sys.exit(__doc__)
    runs = int(args[0])
    variants = []
    for spec in args[1:]:
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
    counted = block or 1  # runs counted per turn of a variant
    uncounted = 1 if block else 0  # a block's first run carries the other variant's leftovers
    for i in range((runs + counted - 1) // counted):
        for name, env, command in variants if i % 2 == 0 else variants[::-1]:
            for k in range(uncounted + counted):
                start = time.perf_counter()
                subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
                if k >= uncounted:
                    times[name].append((time.perf_counter() - start) * 1000)
    for name, t in times.items():
        t.sort()
        print(f"{name:12s} median {statistics.median(t):6.2f} ms  p25 {t[len(t) // 4]:6.2f}  "
              f"p75 {t[3 * len(t) // 4]:6.2f}  min {t[0]:6.2f}")


if __name__ == "__main__":
    main()
