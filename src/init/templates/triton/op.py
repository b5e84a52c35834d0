"""The `{{python_name}}` op, written in Triton."""

import contextlib

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024


@triton.jit
def _{{python_name}}_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def {{python_name}}(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Element-wise `x + y` of two tensors with the same shape, dtype and device."""
    if x.shape != y.shape:
        raise ValueError(f"{{python_name}}: shapes differ: {tuple(x.shape)} and {tuple(y.shape)}")
    if x.dtype != y.dtype:
        raise ValueError(f"{{python_name}}: dtypes differ: {x.dtype} and {y.dtype}")
    if x.device != y.device:
        raise ValueError(f"{{python_name}}: devices differ: {x.device} and {y.device}")
    x = x.contiguous()
    y = y.contiguous()
    out = torch.empty_like(x)
    n_elements = out.numel()
    if n_elements == 0:
        return out
    grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
    # Launch on the tensors' device, not on the current one. CPU tensors only run under
    # Triton's interpreter (TRITON_INTERPRET=1), which needs no device context.
    on_device = x.device.type != "cpu"
    with torch.get_device_module(x.device).device(x.device) if on_device else contextlib.nullcontext():
        _{{python_name}}_kernel[grid](x, y, out, n_elements, BLOCK_SIZE=BLOCK_SIZE)
    return out
