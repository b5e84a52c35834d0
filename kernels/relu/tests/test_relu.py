"""Tests of the built relu kernel: build it first (`kernel-builder build-and-copy --nix never .`),
then `python -m pytest tests`. The kernel is loaded from build/ through `kernels`, as users load
it from the Hub, and compared with torch.relu."""

import os
from pathlib import Path

import pytest
import torch
from kernels import get_local_kernel

BUILD_DIR = Path(__file__).parent.parent / "build"
DEVICES = {"cpu": "cpu", "cuda": "cuda", "metal": "mps", "rocm": "cuda", "xpu": "xpu"}


def _backend() -> str:
    if "RELU_BACKEND" in os.environ:
        return os.environ["RELU_BACKEND"]
    if torch.version.cuda is not None and torch.cuda.is_available():
        return "cuda"
    if torch.version.hip is not None and torch.cuda.is_available():
        return "rocm"
    if hasattr(torch, "xpu") and torch.xpu.is_available():
        return "xpu"
    if torch.backends.mps.is_available():
        return "metal"
    return "cpu"


BACKEND = _backend()


@pytest.fixture(scope="module")
def kernel():
    if not BUILD_DIR.is_dir():
        pytest.fail(f"{BUILD_DIR} does not exist: run `kernel-builder build-and-copy --nix never` first")
    return get_local_kernel(BUILD_DIR, backend=BACKEND)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(1,), (1000,), (65539,), (32, 1027)])
def test_matches_torch_relu(kernel, dtype, shape):
    torch.manual_seed(0)
    x = torch.randn(shape, dtype=dtype, device=DEVICES[BACKEND])
    assert torch.equal(kernel.relu(x), torch.relu(x))


def test_nan_stays_nan_and_out_is_written(kernel):
    x = torch.tensor([-1.0, 0.0, 2.0, float("nan")], device=DEVICES[BACKEND])
    out = torch.empty_like(x)
    assert kernel.relu(x, out=out) is out
    assert torch.equal(out[:3], torch.tensor([0.0, 0.0, 2.0], device=x.device))
    assert torch.isnan(out[3])


def test_rejects_mismatched_shapes(kernel):
    x = torch.randn(8, device=DEVICES[BACKEND])
    with pytest.raises(RuntimeError, match="same shape"):
        kernel.relu(x, out=torch.empty(9, device=x.device))
