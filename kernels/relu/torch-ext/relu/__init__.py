"""relu: `max(x, 0)` element-wise, a compiled torch op for CPU, CUDA, ROCm, XPU and Metal."""

from typing import Optional

import torch

from ._ops import ops


def relu(x: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """`max(x, 0)` of a contiguous tensor, as `torch.relu` (NaN stays NaN).

    The result is written to `out` when given (same shape, dtype and device as `x`), else to a
    new tensor.
    """
    if out is None:
        out = torch.empty_like(x)
    ops.relu(out, x)
    return out


__all__ = ["relu"]
