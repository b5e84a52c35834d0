#!/usr/bin/env python3
"""Print, for each failed Rust test in a `cargo test` log, the lines that say why.

CI shows only the last part of a run's output, and a failed build test prints a long stderr
(CMake's whole log) before its panic message: the cause sits in the middle, where it is cut.
`.ci/run` calls this on failure so that the end of the output names each failed test with its
error, hint and panic lines (at most LINES_PER_TEST each).

Usage: failed-tests.py LOG...
"""
import re
import sys

LINES_PER_TEST = 14
# The lines worth seeing: compiler and CMake errors, a machine fault, our hints, the panic.
WANTED = re.compile(
    r"error:|: error|error #|^\s*FAILED:|CMake Error|No space left on device|Killed|died due to signal"
    r"|^\s*hint:|panicked at|^assertion|^\s*(left|right):"
)
SECTION = re.compile(r"^---- (\S+) stdout ----$")


def failures(lines):
    """(test name, its wanted lines) for each `---- name stdout ----` section."""
    name, picked = None, []
    for line in lines:
        line = line.rstrip("\n")
        m = SECTION.match(line)
        if m or line == "failures:" or line.startswith("test result:"):
            if name is not None:
                yield name, picked
            name, picked = (m.group(1) if m else None), []
            continue
        if name is not None and WANTED.search(line) and len(picked) < LINES_PER_TEST:
            picked.append(line[:300])
    if name is not None:
        yield name, picked


def main(paths):
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                found = list(failures(f))
        except OSError as e:
            print(f"failed-tests: cannot read {path}: {e}")
            continue
        for name, picked in found:
            print(f"=== {name} (from {path})")
            for line in picked:
                print(f"    {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
