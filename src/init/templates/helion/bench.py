"""The calls to pre-tune `{{python_name}}` for, run by Helion's AOT runner through

    kernel-builder tune . --effort quick

The runner runs this script once per phase: it records the shapes the kernel is called with,
tunes a configuration for each, measures every configuration on every shape, and writes a
heuristic file that picks among them, torch-ext/{{python_name}}/_helion_aot_op_<device>_<compute>.py.
List the shapes and dtypes your users run: the heuristic is only as good as these calls.
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent / "torch-ext"))

from {{python_name}} import {{python_name}}  # noqa: E402

# Sizes (number of elements) and dtypes to tune for.
SIZES = [1 << 16, 1 << 20, 1 << 24]
DTYPES = [torch.float32]


def _device() -> str:
    if torch.cuda.is_available():
        return "cuda"
    if hasattr(torch, "xpu") and torch.xpu.is_available():
        return "xpu"
    raise SystemExit("bench.py needs a GPU: Helion tunes kernels on the device they run on")


def main() -> None:
    device = _device()
    for dtype in DTYPES:
        for size in SIZES:
            x = torch.randn(size, dtype=dtype, device=device)
            y = torch.randn(size, dtype=dtype, device=device)
            torch.testing.assert_close({{python_name}}(x, y), x + y)


if __name__ == "__main__":
    main()
