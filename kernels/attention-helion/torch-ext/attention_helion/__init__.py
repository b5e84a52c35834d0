"""Flash attention (forward) written in Helion, pre-tuned for the H200.

``attention(q, k, v, causal=False)`` computes ``F.scaled_dot_product_attention(q, k, v,
is_causal=causal)`` for ``[batch, heads, seq, head_dim]`` float16/bfloat16 tensors with head
dim 64 or 128. Helion compiles the kernel on first use for each shape; the launch
configuration comes from the heuristic shipped next to ``attention.py``
(``_helion_aot_attention_<device>.py``), so nothing is autotuned on the user's machine.
"""

from .attention import attention

__all__ = ["attention"]
