#!/usr/bin/env python3
"""Print the commands of README.md's "## The two commands" block, one per line, in order.

The CI entry point (.ci/run) runs exactly these, so what README promises a new user is what CI
checks: the main job first, then the test command, on the same clean clone. A command is a
non-empty line of the block's ```sh fence that is not a comment; a line ending in a backslash
continues on the next. Exits 1 naming the problem when the section or its fence is missing.
"""
import pathlib
import sys


def commands(readme: str) -> list[str]:
    heading = "## The two commands"
    start = readme.find(f"\n{heading}\n")
    if start < 0:
        raise SystemExit(f"README.md has no `{heading}` section")
    fence = readme.find("```sh\n", start)
    end = readme.find("\n```", fence + 1)
    next_heading = readme.find("\n## ", start + 1)
    if fence < 0 or end < 0 or (0 <= next_heading < fence):
        raise SystemExit(f"README.md's `{heading}` section has no ```sh block")
    out, pending = [], ""
    for line in readme[fence + len("```sh\n") : end].splitlines():
        line = line.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        out.append(pending + line)
        pending = ""
    return out


if __name__ == "__main__":
    path = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "README.md")
    for c in commands(path.read_text()):
        print(c)
