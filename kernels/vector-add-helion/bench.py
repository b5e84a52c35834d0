"""Representative calls of ``vector_add``, for Helion's AOT runner and for a quick timing.

The AOT runner (scripts/gpu-tune.sh) runs this script once per phase: in ``collect`` mode
every distinct input shape and dtype is autotuned, in ``measure`` mode every tuned config is
timed on every shape, and in ``evaluate`` mode the generated heuristic picks the config. So
the sizes below are the shapes the shipped heuristic was trained on.

Usage: ``python bench.py`` on a machine with a CUDA (or ROCm/XPU) GPU and helion installed.
"""

from __future__ import annotations

import pathlib
import sys
import time

import torch

# The kernel's package lives in torch-ext/ (not installed); import it from there.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "torch-ext"))

from vector_add_helion import vector_add  # noqa: E402

# (number of elements, dtype): 4 MiB and 64 MiB of float32 per operand, and the large size
# in bfloat16 (the dtype is one of the heuristic's features).
SHAPES: list[tuple[int, torch.dtype]] = [
    (2**20, torch.float32),
    (2**24, torch.float32),
    (2**24, torch.bfloat16),
]


def _median_ms(fn, repeats: int = 20) -> float:
    """Median wall time of ``fn()`` in milliseconds, synchronising the device each time."""
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    times.sort()
    return times[len(times) // 2]


def main() -> int:
    if not torch.cuda.is_available():
        print("bench.py needs a GPU (torch.cuda.is_available() is False)", file=sys.stderr)
        return 1
    gen = torch.Generator(device="cuda").manual_seed(0)
    for n, dtype in SHAPES:
        x = torch.randn(n, device="cuda", dtype=dtype, generator=gen)
        y = torch.randn(n, device="cuda", dtype=dtype, generator=gen)
        out = vector_add(x, y)
        torch.testing.assert_close(out, x + y, rtol=0, atol=0)
        helion_ms = _median_ms(lambda: vector_add(x, y))
        torch_ms = _median_ms(lambda: x + y)
        print(f"n={n} dtype={dtype}: helion {helion_ms:.3f} ms, torch {torch_ms:.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
