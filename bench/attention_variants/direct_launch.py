"""The direct Triton launch measured in BENCHMARKS.md ("call C") and not shipped: a launcher for
the compiled host function Helion chose (its ``_launcher`` keyword, the protocol of
``helion.runtime.default_launcher``) that keeps each launch's compiled Triton kernel and calls
``CompiledKernel[grid](*args)`` (Triton 3.6) directly, skipping ``JITFunction.run``'s argument
binding, specialization and cache key on every call.

It was wired into ``attention_helion.attention.attention`` as

    _COMPILED[key] = lambda q, k, v: run(q, k, v, _launcher=launch)

and ran no faster than the shipped tree in a paired call on the H200 (held out 1.119x and 1.150x
FLASH with it, 1.152x and 1.125x without), so the kernel does not depend on Triton internals.
Kept to make that measurement repeatable.
"""

from __future__ import annotations

from typing import Callable

import torch
from helion.runtime import default_launcher

# By everything Triton specializes a launch on: the kernel object, grid, warps and stages, the
# current device, and per argument its dtype and 16-byte alignment (tensors) or its type and
# value (the rest).
_LAUNCHES: dict[tuple, tuple[object, Callable[..., object]]] = {}


def launch(triton_kernel, grid, *args, num_warps: int, num_stages: int, **kwargs):
    """``default_launcher``'s arguments; a launch seen before goes to the compiled kernel.
    Other options (cooperative grids, PTX options) and arguments other than tensors and numbers
    always take the default launcher."""
    plain = all(isinstance(a, (torch.Tensor, int, float, bool)) for a in args)
    if kwargs or not plain:
        return default_launcher(
            triton_kernel, grid, *args, num_warps=num_warps, num_stages=num_stages, **kwargs
        )
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    device = torch.cuda.current_device() if tensors and tensors[0].is_cuda else None
    key = (
        id(triton_kernel), tuple(grid), num_warps, num_stages, device,
        tuple(
            (a.dtype, a.data_ptr() % 16 == 0) if isinstance(a, torch.Tensor) else (type(a), a)
            for a in args
        ),
    )  # fmt: skip
    hit = _LAUNCHES.get(key)
    if hit is not None and hit[0] is triton_kernel:
        return hit[1](*args)
    compiled = default_launcher(
        triton_kernel, grid, *args, num_warps=num_warps, num_stages=num_stages
    )
    if compiled is not None and hasattr(compiled, "__getitem__"):
        grid3 = (tuple(grid) + (1, 1, 1))[:3]  # the compiled runner indexes three dimensions
        _LAUNCHES[key] = (triton_kernel, compiled[grid3])
    return compiled
