"""The ``silu_and_mul`` operation, in plain torch operations (runs on any torch device)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def silu_and_mul(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Gate the second half of the last dimension by the SiLU of the first half.

    Args:
        x: tensor of shape ``(..., 2 * d)``, any floating dtype and device.
        out: optional tensor of shape ``(..., d)`` with ``x``'s dtype and device; the result
            is written into it and it is returned.

    Returns:
        ``silu(x[..., :d]) * x[..., d:]``, shape ``(..., d)``.

    Raises:
        ValueError: if the last dimension of ``x`` is odd, or ``out`` has the wrong shape.
    """
    width = x.shape[-1]
    if width % 2 != 0:
        raise ValueError(f"silu_and_mul: the last dimension must be even, got {width}")
    d = width // 2
    gate, up = x[..., :d], x[..., d:]
    if out is None:
        return F.silu(gate) * up
    expected = (*x.shape[:-1], d)
    if tuple(out.shape) != expected:
        raise ValueError(
            f"silu_and_mul: out has shape {tuple(out.shape)}, expected {expected}"
        )
    return torch.mul(F.silu(gate), up, out=out)
