"""{{name}}: {{summary}}"""

from typing import Optional

import torch

from ._ops import ops


def {{python_name}}(x: torch.Tensor, y: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Element-wise `x + y` of two contiguous tensors with the same shape, dtype and device.

    The result is written to `out` when given (same shape, dtype and device), else to a new
    tensor.
    """
    if out is None:
        out = torch.empty_like(x)
    ops.{{python_name}}(out, x, y)
    return out


__all__ = ["{{python_name}}"]
