"""Tests of the built `{{name}}` kernel.

Build the kernel first (`kernel-builder build-and-copy .`), then run `python -m pytest tests`.
The kernel is loaded from build/ through the `kernels` library, the way users load it from
the Hub, and compared with plain PyTorch.
"""

from pathlib import Path

import pytest
import torch
from kernels import get_local_kernel

BUILD_DIR = Path(__file__).parent.parent / "build"

# general.backends in build.toml.
BACKENDS = [{{backends_py}}]

# The torch device type of each backend.
DEVICES = {"cpu": "cpu", "cuda": "cuda", "metal": "mps", "rocm": "cuda", "xpu": "xpu"}


def _backend() -> str:
    """The backend of this machine, named as in build.toml."""
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

pytestmark = pytest.mark.skipif(
    BACKEND not in BACKENDS, reason=f"{{name}} is not built for this machine's backend ({BACKEND})"
)


@pytest.fixture(scope="module")
def kernel():
    if not BUILD_DIR.is_dir():
        pytest.fail(f"{BUILD_DIR} does not exist: run `kernel-builder build-and-copy` first")
    # Name the backend: a CUDA build of torch on a machine without a GPU would otherwise ask
    # for the CUDA variant.
    return get_local_kernel(BUILD_DIR, backend=BACKEND)


class Test{{class_name}}:
    def test_exports(self, kernel):
        assert kernel.__all__ == ["{{python_name}}"]

    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
    @pytest.mark.parametrize("shape", [(1,), (1000,), (65539,), (32, 1027)])
    def test_matches_torch(self, kernel, dtype, shape):
        device = DEVICES[BACKEND]
        torch.manual_seed(0)
        x = torch.randn(shape, dtype=dtype, device=device)
        y = torch.randn(shape, dtype=dtype, device=device)
        torch.testing.assert_close(kernel.{{python_name}}(x, y), x + y)

    def test_rejects_mismatched_shapes(self, kernel):
        device = DEVICES[BACKEND]
        x = torch.randn(8, device=device)
        y = torch.randn(9, device=device)
        with pytest.raises((ValueError, RuntimeError)):
            kernel.{{python_name}}(x, y)
