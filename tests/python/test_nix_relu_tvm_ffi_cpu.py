"""kernels/relu-tvm-ffi's CPU cell as `nix build` made it (with the offline, non-hermetic
host-test package set and its pinned apache-tvm-ffi wheel), loaded through the real `kernels`
loader: equal to `torch.relu`.

`KERNEL_BUILDER_NIX_RELU_TVM_FFI_CPU` is the cell's store path (holding
`tvm-ffi01-cpu-…/`); the Rust test
`nix_compiled::relu_tvm_ffi_cpu_cell_builds_in_nix_equals_the_native_build_and_loads` builds
it and runs this file. Run alone without it, the test is skipped, saying so.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

CELL = os.environ.get("KERNEL_BUILDER_NIX_RELU_TVM_FFI_CPU")


@pytest.mark.skipif(CELL is None, reason="set KERNEL_BUILDER_NIX_RELU_TVM_FFI_CPU to the Nix-built cell")
def test_nix_built_tvm_ffi_cpu_cell_loads_and_equals_torch_relu(monkeypatch: pytest.MonkeyPatch) -> None:
    # The kernel is imported from a Nix store path: as root, Python would write __pycache__/
    # into it (root ignores the store's read-only mode) and corrupt the output for every later
    # build.
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    import tvm_ffi
    from kernels import get_local_kernel

    relu = get_local_kernel(Path(CELL), backend="cpu")
    major, minor = tvm_ffi.__version__.split(".")[:2]
    assert Path(relu.__file__).parent.name == f"tvm-ffi{major}{minor}-cpu-x86_64-linux"
    torch.manual_seed(0)
    for dtype in (torch.float32, torch.float64):
        for shape in ((1,), (4099,), (32, 1027), (0,)):
            x = torch.randn(shape, dtype=dtype)
            assert torch.equal(relu.relu(x), torch.relu(x)), (dtype, shape)
    # Signed zeros, infinities and NaN; `out=` is written in place.
    x = torch.tensor([-1.0, -0.0, 0.0, 2.0, float("inf"), float("-inf"), float("nan")])
    out = torch.empty_like(x)
    assert relu.relu(x, out=out) is out
    assert torch.equal(out[:6], torch.tensor([0.0, 0.0, 0.0, 2.0, float("inf"), 0.0])) and torch.isnan(out[6])
    with pytest.raises(TypeError, match="relu takes float32 or float64 tensors"):
        relu.relu(torch.ones(3, dtype=torch.float16))
