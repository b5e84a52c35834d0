#!/usr/bin/env python3
"""README.md's shell recipes, read the one way both of their checks read them.

With no option: print the commands of README.md's "## The two commands" block, one per line,
in order. The CI entry point (.ci/run) runs exactly these, so what README promises a new user is
what CI checks: the main job first, then the test command, on the same clean clone.

With `--all`: print every command of every ```sh block of README.md, in README order, as JSON
lines `{"section": …, "command": …}`; tests/python/test_readme_recipes.py runs them (or says why
not) from `recipes()`.

A command is a non-comment line of a ```sh fence, joined with the lines after it while it ends
in a backslash or a quotation is still open (a `python -c '…'` over several lines), as bash
reads it. Exits 1 naming the problem when the section or its fence is missing.
"""
import json
import pathlib
import re
import shlex
import sys


def _split(block: str) -> list[str]:
    """The commands of one fence's text."""
    out, pending = [], ""
    for line in block.splitlines():
        if not pending and (not line.strip() or line.strip().startswith("#")):
            continue
        pending += line + "\n"
        text = pending.rstrip("\n")
        if text.endswith("\\"):
            continue
        try:
            shlex.split(text, comments=True)
        except ValueError:  # a quotation still open: the command goes on
            continue
        out.append(text.strip())
        pending = ""
    if pending:
        raise SystemExit(f"README.md: a ```sh block ends inside a command: {pending!r}")
    return out


def commands(readme: str) -> list[str]:
    """The commands of the "## The two commands" block, each on one line."""
    heading = "## The two commands"
    start = readme.find(f"\n{heading}\n")
    if start < 0:
        raise SystemExit(f"README.md has no `{heading}` section")
    fence = readme.find("```sh\n", start)
    end = readme.find("\n```", fence + 1)
    next_heading = readme.find("\n## ", start + 1)
    if fence < 0 or end < 0 or (0 <= next_heading < fence):
        raise SystemExit(f"README.md's `{heading}` section has no ```sh block")
    return [re.sub(r"\\\n\s*", " ", c) for c in _split(readme[fence + len("```sh\n") : end])]


def recipes(readme: str) -> list[tuple[str, str]]:
    """Every command of every ```sh block, in README order, with the heading it is under."""
    out, heading = [], ""
    fence = re.compile(r"^```sh\n(.*?)^```$", re.M | re.S)
    pos = 0
    for m in fence.finditer(readme):
        for h in re.finditer(r"^#{1,6} (.+)$", readme[pos : m.start()], re.M):
            heading = h.group(1).strip()
        pos = m.end()
        out.extend((heading, c) for c in _split(m.group(1)))
    return out


if __name__ == "__main__":
    args = sys.argv[1:]
    every = "--all" in args
    args = [a for a in args if a != "--all"]
    path = pathlib.Path(args[0] if args else "README.md")
    text = path.read_text()
    if every:
        for section, command in recipes(text):
            print(json.dumps({"section": section, "command": command}))
    else:
        for c in commands(text):
            print(c)
