#!/usr/bin/env python3
"""Where a build's time went, from Ninja's `.ninja_log` (the figures BENCHMARKS.md quotes for
the heavy kernels): the steps, the span, the seconds of all steps together, the bound those
give on CORES cores (a perfect packing; each step counted as one core, since the log does
not show nvcc's threads or cicc's splits), how busy the cores were over the span, how many steps
ran at each moment, and the slowest steps with when they started.

    python3 scripts/ninja_log.py bench/results/heavy-gpu-2026-12-06/ninja-flash-attn2.log --cores 16

A log holds every build run in its directory; a step built more than once counts with its last
run (Ninja's own rule for `ninja -t` tools). Lines are `start end mtime output hash`, times in ms.
"""

import argparse
import sys


def read(path: str) -> dict[str, tuple[float, float]]:
    steps: dict[str, tuple[float, float]] = {}
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if line.startswith("#") or not line.strip():
                continue
            fields = line.rstrip("\n").split("\t")
            if len(fields) < 4:
                sys.exit(f"{path}:{number}: not a .ninja_log line (start, end, mtime, output, hash)")
            try:
                start, end = int(fields[0]) / 1000, int(fields[1]) / 1000
            except ValueError:
                sys.exit(f"{path}:{number}: start and end must be whole milliseconds")
            steps[fields[3]] = (start, end)
    if not steps:
        sys.exit(f"{path}: no steps")
    return steps


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("log")
    p.add_argument("--cores", type=int, default=16, help="cores of the machine that built (default 16)")
    p.add_argument("--every", type=float, default=50.0, help="seconds between the running-step counts")
    p.add_argument("--slowest", type=int, default=5)
    a = p.parse_args()
    steps = read(a.log)
    span = max(end for _, end in steps.values())
    total = sum(end - start for start, end in steps.values())
    print(f"{len(steps)} steps; span {span:.1f} s; all steps {total:.1f} s; "
          f"bound on {a.cores} cores {total / a.cores:.1f} s; cores busy {total / (span * a.cores):.0%} of the span "
          "(a step counted as one core: nvcc's threads and cicc's splits are not in the log)")
    counts = []
    t = a.every / 2  # mid-interval, clear of the first steps' starting millisecond
    while t < span:
        counts.append(f"{t:.0f} s: {sum(1 for s, e in steps.values() if s <= t < e)}")
        t += a.every
    print("running: " + ", ".join(counts))
    print("slowest (seconds, start, end, output):")
    for out, (s, e) in sorted(steps.items(), key=lambda kv: kv[1][0] - kv[1][1])[: a.slowest]:
        print(f"  {e - s:7.1f} {s:7.1f} {e:7.1f} {out.rsplit('/', 1)[-1]}")


if __name__ == "__main__":
    main()
