"""The `{{python_name}}` op, written with PyTorch operations (runs on every backend)."""

import torch


def {{python_name}}(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Element-wise `x + y` of two tensors with the same shape, dtype and device."""
    if x.shape != y.shape:
        raise ValueError(f"{{python_name}}: shapes differ: {tuple(x.shape)} and {tuple(y.shape)}")
    if x.dtype != y.dtype:
        raise ValueError(f"{{python_name}}: dtypes differ: {x.dtype} and {y.dtype}")
    if x.device != y.device:
        raise ValueError(f"{{python_name}}: devices differ: {x.device} and {y.device}")
    return torch.add(x, y)
