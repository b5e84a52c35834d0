"""The digest of every variant the test suite built equals the one kernels 0.19.1 computes.

scripts/test.sh sets `KERNEL_BUILDER_RECORD_VARIANTS` (to `target/tmp/recorded-variants`,
emptied first) for the Rust tests and the Python tests, so every variant `kernel-builder` builds
in them (`build-and-copy`, `assemble`, `verify`'s rebuilds; see src/assemble/record.rs) is also
copied there, whatever temporary directory the test built it in. This file runs after them,
named on pytest's command line (its name keeps it out of the directory's own collection, which
runs before the trees are all there), and checks each copy: the `digest` in its `metadata.json`
is `Digest.hash_variant(DigestAlgorithm.SHA256, variant)` of kernels 0.19.1, the digest the
loader enforces since 0.18. An empty or missing record is a failure, not a pass.

The oracle is kernels 0.19.1 as test_loaders.py installs it (`.venv/kernels-loaders/0.19.1`).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import sys

from conftest import REPO
from test_loaders import loader_env

ORACLE_VERSION = "0.19.1"

RECORD = Path(os.environ.get("KERNEL_BUILDER_RECORD_VARIANTS") or REPO / "target" / "tmp" / "recorded-variants")

HASH = r"""
import json, sys
from importlib.metadata import version
from kernels._rust import Digest, DigestAlgorithm
assert version("kernels") == sys.argv[1], version("kernels")
out = {}
for d in json.load(sys.stdin):
    try:
        out[d] = Digest.hash_variant(DigestAlgorithm.SHA256, d).files
    except Exception as e:
        out[d] = f"{type(e).__name__}: {e}"
json.dump(out, sys.stdout)
"""


def recorded() -> list[Path]:
    """Every whole copy (`<slot>/<variant>/`; `.partial-*` ones were interrupted)."""
    if not RECORD.is_dir():
        return []
    return sorted(v for slot in RECORD.iterdir() if slot.is_dir()
                  for v in slot.iterdir() if v.is_dir() and not v.name.startswith("."))


def test_every_recorded_variant_has_the_loaders_digest() -> None:
    variants = recorded()
    assert variants, (
        f"no variant was recorded in {RECORD}: run the suite with KERNEL_BUILDER_RECORD_VARIANTS set "
        "(scripts/test.sh does) before this check"
    )
    r = subprocess.run([sys.executable, "-c", HASH, ORACLE_VERSION], input=json.dumps([str(v) for v in variants]),
                       capture_output=True, text=True, env=loader_env(ORACLE_VERSION), check=True)
    theirs = json.loads(r.stdout)
    wrong = []
    for v in variants:
        ours = json.loads((v / "metadata.json").read_text())["digest"]
        want = {"algorithm": "sha256", "files": theirs[str(v)]}
        if ours != want:
            wrong.append(f"{v}:\n  ours:   {ours}\n  0.19.1: {theirs[str(v)]}")
    assert not wrong, f"{len(wrong)} of {len(variants)} recorded variants differ from kernels {ORACLE_VERSION}:\n" + "\n".join(wrong)
    kinds = sorted({v.name for v in variants})
    print(f"{len(variants)} recorded variants, {len(kinds)} names, every digest the loader's: {', '.join(kinds)}")
