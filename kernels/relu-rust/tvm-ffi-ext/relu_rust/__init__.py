"""relu for torch CPU tensors, computed by this kernel's Rust TVM-FFI library.

`relu(x, out=None)` returns `out` (a new tensor like `x` when not given) holding `max(x, 0)`.
The tensors are handed to the library as they are: tvm-ffi takes torch tensors through
DLPack, without a copy, so `out` is written in place.
"""

from typing import Optional

import torch

from ._ops import add_op_namespace_prefix, ops

__all__ = ["relu", "add_op_namespace_prefix", "ops"]


def relu(x: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """max(x, 0) elementwise; float32 or float64, contiguous, on the CPU."""
    if x.device.type != "cpu":
        raise NotImplementedError(f"relu_rust has no kernel for device type {x.device.type!r}")
    if out is None:
        out = torch.empty_like(x)
    ops.relu_cpu(out, x)
    return out
