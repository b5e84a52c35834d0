"""symbols.json read from a variant's sources (src/assemble/static_symbols.rs) against the one
made by importing it (src/assemble/symbols.py), for the example kernels, and what kernels
0.19.1's `describe-api` prints for a pinned-wheel tree.

- kernels/silu-and-mul, vector-add-helion and attention-helion (noarch): built natively, their
  symbols.json is read from the sources; symbols.py, run here with this venv's Python (torch
  and Helion), imports the same tree. The documents are the same bytes, except that
  vector-add-helion's `@helion.aot_kernel()` function is a Helion kernel object once imported,
  which symbols.py (like upstream's builder) does not list as a function.
- kernels/relu: its torch 2.14 CPU cell built from pinned wheels (no `--python`: read from the
  sources) and its CPU cell built with `--python` (imported) hold the same document but for the
  package name.
- A rebuild writes the same symbols.json bytes.

relu-stable-abi and relu-tvm-ffi always build with `--python` (their cells need the Python's
torch or tvm_ffi), so their symbols.json is always the imported one (test_loaders.py).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import REPO, copy_kernel, kernel_builder
from test_loaders import describe_api, silu_and_mul_function

SYMBOLS_PY = REPO / "src" / "assemble" / "symbols.py"
TORCH = "".join(torch.__version__.split("+")[0].split(".")[:2])
ARCH = platform.machine()


def build(kernel: Path, *args: str) -> str:
    env = dict(os.environ, KERNEL_BUILDER_TOOLCHAIN_CACHE_DIR=os.environ.get(
        "KERNEL_BUILDER_TOOLCHAIN_CACHE_DIR", str(REPO / "target" / "tmp" / "toolchain-cache")))
    proc = subprocess.run([str(kernel_builder()), "build-and-copy", "--nix", "never", *args, str(kernel)],
                          capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def ident(variant: Path) -> str:
    return json.loads((variant / "metadata.json").read_text())["id"]


def imported(variant: Path, tmp: Path) -> bytes:
    """symbols.json as symbols.py writes it, importing `variant` with this Python's torch."""
    out = tmp / f"imported-{variant.parent.parent.name}-{variant.name}.json"
    proc = subprocess.run(
        [sys.executable, "-B", str(SYMBOLS_PY), str(variant), ident(variant), "torch",
         os.path.dirname(torch.__file__), str(out)],
        capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out.read_bytes()


@pytest.fixture(scope="module")
def noarch(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    src = tmp_path_factory.mktemp("noarch")
    out = {}
    for name in ["silu-and-mul", "vector-add-helion", "attention-helion"]:
        kernel = copy_kernel(name, src)
        build(kernel)
        out[name] = kernel
    return out


def test_noarch_kernels_read_as_imported(noarch: dict[str, Path], tmp_path: Path) -> None:
    for name, variant in [("silu-and-mul", "torch-cpu"), ("silu-and-mul", "torch-cuda"),
                          ("attention-helion", "torch-cuda")]:
        tree = noarch[name] / "build" / variant
        assert (tree / "symbols.json").read_bytes() == imported(tree, tmp_path), (name, variant)
    tree = noarch["silu-and-mul"] / "build" / "torch-cpu"
    assert json.loads((tree / "symbols.json").read_text())["functions"] == [silu_and_mul_function(ident(tree))]

    # The one difference: the decorated Helion function, listed from the source only.
    tree = noarch["vector-add-helion"] / "build" / "torch-cuda"
    static = json.loads((tree / "symbols.json").read_text())
    from_import = json.loads(imported(tree, tmp_path))
    assert [f["name"] for f in static["functions"]] == ["vector_add"]
    assert from_import == {**static, "functions": []}


def test_a_rebuild_writes_the_same_symbols(noarch: dict[str, Path], tmp_path: Path) -> None:
    again = copy_kernel("vector-add-helion", tmp_path)
    build(again)
    for variant in ["torch-cuda", "torch-rocm", "torch-xpu"]:
        first = noarch["vector-add-helion"] / "build" / variant
        assert (again / "build" / variant / "symbols.json").read_bytes() == (first / "symbols.json").read_bytes()
    assert (again / "build" / "hashes.json").read_text() == (noarch["vector-add-helion"] / "build" / "hashes.json").read_text()


@pytest.mark.skipif(ARCH != "x86_64", reason="the pinned CPU cells built here are x86_64-linux ones")
def test_pinned_and_imported_relu_agree_and_describe_api_reads_them(tmp_path: Path) -> None:
    pinned_variant = f"torch214-cxx11-cpu-{ARCH}-linux"
    pinned = copy_kernel("relu", tmp_path / "pinned")
    build(pinned, "--variant", pinned_variant)
    venv_variant = f"torch{TORCH}-cxx11-cpu-{ARCH}-linux"
    venv = copy_kernel("relu", tmp_path / "venv")
    build(venv, "--python", sys.executable, "--variant", venv_variant)

    static_tree, imported_tree = pinned / "build" / pinned_variant, venv / "build" / venv_variant
    static = (static_tree / "symbols.json").read_text()
    assert static.replace(ident(static_tree), "ID") == (imported_tree / "symbols.json").read_text().replace(ident(imported_tree), "ID")

    proc = describe_api(static_tree)
    assert proc.returncode == 0, proc.stderr
    i = ident(static_tree)
    assert json.loads(proc.stdout) == {
        "schema_version": 1,
        "module": i,
        "functions": [{
            "name": "relu",
            "qualname": "relu",
            "module": i,
            "kind": "function",
            "doc": (
                "`max(x, 0)` of a contiguous tensor, as `torch.relu` (NaN stays NaN).\n\n"
                "The result is written to `out` when given (same shape, dtype and device as `x`), else to a\nnew tensor."
            ),
            "signature": {
                "parameters": [
                    {"name": "x", "kind": "POSITIONAL_OR_KEYWORD", "default": None, "annotation": "torch.Tensor"},
                    {"name": "out", "kind": "POSITIONAL_OR_KEYWORD", "default": "None", "annotation": "Optional[torch.Tensor]"},
                ],
                "return_annotation": "torch.Tensor",
            },
        }],
        "layers": [],
        "path": str(static_tree),
        "variant": pinned_variant,
    }
