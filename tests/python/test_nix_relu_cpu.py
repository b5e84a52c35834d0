"""kernels/relu's CPU cell as `nix build` made it (with the offline, non-hermetic host-test
package set), loaded through the real `kernels` loader: equal to `torch.relu`.

`KERNEL_BUILDER_NIX_RELU_CPU` is the cell's store path (holding `torch211-cxx11-cpu-…/`); the
Rust test `nix_compiled::relu_cpu_cell_builds_in_nix_equals_the_native_build_and_loads` builds
it and runs this file. Run alone without it, the test is skipped, saying so.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

CELL = os.environ.get("KERNEL_BUILDER_NIX_RELU_CPU")


@pytest.mark.skipif(CELL is None, reason="set KERNEL_BUILDER_NIX_RELU_CPU to the Nix-built cell")
def test_nix_built_cpu_cell_loads_and_equals_torch_relu(monkeypatch: pytest.MonkeyPatch) -> None:
    # The kernel is imported from a Nix store path: as root, Python would write __pycache__/
    # into it (root ignores the store's read-only mode) and corrupt the output for every later
    # build. Only for this test: the others check that loading a build/ tree writes bytecode.
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    from kernels import get_local_kernel

    relu = get_local_kernel(Path(CELL), backend="cpu")
    torch.manual_seed(0)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        x = torch.randn(4099, dtype=dtype)
        assert torch.equal(relu.relu(x), torch.relu(x))
    # NaN stays NaN, and `out=` is written in place.
    x = torch.tensor([float("nan"), -1.0, 2.0])
    out = torch.empty_like(x)
    assert relu.relu(x, out=out) is out
    assert torch.equal(out.isnan(), torch.tensor([True, False, False]))
    assert out[1:].tolist() == [0.0, 2.0]
