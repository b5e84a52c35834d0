"""relu_stable_abi: `max(x, 0)` element-wise, a CPU and CUDA torch op built against torch's
stable ABI.

One build per backend (`torch-stable-abi211-cpu-<arch>-linux`,
`torch-stable-abi211-cu<ver>-<arch>-linux`) serves every torch from 2.11 on: the op is registered through torch's C shim (`STABLE_TORCH_LIBRARY`), not its C++ API.
"""

from typing import Optional

import torch

from ._ops import ops


def relu(x: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """`max(x, 0)` of a contiguous CPU or CUDA tensor (float32/64, float16, bfloat16), as `torch.relu`
    (NaN stays NaN).

    The result is written to `out` when given (same shape, dtype and device as `x`), else to a
    new tensor.
    """
    if out is None:
        out = torch.empty_like(x)
    ops.relu(out, x)
    return out


__all__ = ["relu"]
