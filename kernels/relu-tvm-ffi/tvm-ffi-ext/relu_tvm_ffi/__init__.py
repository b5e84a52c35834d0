"""relu for torch tensors, computed by this kernel's TVM-FFI library.

`relu(x, out=None)` returns `out` (a new tensor like `x` when not given) holding
`max(x, 0)`. The tensors are handed to the library as they are: tvm-ffi takes torch tensors
through DLPack, without a copy, so `out` is written in place. CPU tensors run `relu_cpu`,
CUDA tensors `relu_cuda` (on torch's current stream); the variant loaded has the function of
its own backend only.
"""

from __future__ import annotations

from typing import Optional

import torch

from ._ops import add_op_namespace_prefix, ops

__all__ = ["relu", "add_op_namespace_prefix", "ops"]


def relu(x: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """max(x, 0) elementwise; float32 or float64, contiguous, on the CPU or a CUDA device."""
    if out is None:
        out = torch.empty_like(x)
    name = {"cpu": "relu_cpu", "cuda": "relu_cuda"}.get(x.device.type)
    if name is None:
        raise NotImplementedError(f"relu_tvm_ffi has no kernel for device type {x.device.type!r}")
    try:
        fn = getattr(ops, name)
    except AttributeError:
        raise NotImplementedError(
            f"this variant of relu_tvm_ffi has no `{name}`: load the variant of the {x.device.type} backend"
        ) from None
    fn(out, x)
    return out
