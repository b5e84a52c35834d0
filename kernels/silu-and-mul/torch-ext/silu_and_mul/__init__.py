"""SwiGLU-style gating: ``silu(x[..., :d]) * x[..., d:]`` with ``d = x.shape[-1] // 2``."""

from .op import silu_and_mul

__all__ = ["silu_and_mul"]
