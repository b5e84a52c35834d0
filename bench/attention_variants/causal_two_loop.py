"""A candidate causal kernel for kernels/attention-helion, measured by bench/attention_configs.py
before it is shipped: two key loops per query block, FlashAttention-2's split. The blocks left
of the diagonal run without a mask; only the diagonal stretch (keys of the query block itself)
is masked. The shipped kernel masks every block it visits.

Same arguments and result as ``attention_helion.attention.causal_attention_fwd``. Its config has
three block sizes (queries, keys left of the diagonal, keys on it) and two inner loops.
"""

from __future__ import annotations

import math

import helion
import helion.language as hl
import torch

_TMA = "tensor_descriptor"
# The shipped kernel's seeds (attention_helion.attention.SEED_CONFIGS), with the key block size
# repeated for the diagonal loop.
SEED_CONFIGS = [
    helion.Config(block_sizes=[128, 64, 64], num_warps=8, num_stages=3, indexing=_TMA),
    helion.Config(block_sizes=[128, 128, 128], num_warps=8, num_stages=3, indexing=_TMA),
    helion.Config(block_sizes=[128, 64, 64], num_warps=4, num_stages=3, indexing=_TMA),
    helion.Config(block_sizes=[64, 64, 64], num_warps=4, num_stages=3, indexing=_TMA),
    helion.Config(
        block_sizes=[128, 64, 64], num_warps=8, num_stages=3, indexing=_TMA, pid_type="persistent_interleaved"
    ),
]


@helion.kernel(static_shapes=True, autotune_seed_configs=SEED_CONFIGS)
def causal_attention_fwd(q_in: torch.Tensor, k_in: torch.Tensor, v_in: torch.Tensor) -> torch.Tensor:
    """Causal attention, ``[batch, heads, seq, head_dim]`` in and out (see the module doc)."""
    m_dim = q_in.size(-2)
    n_dim = k_in.size(-2)
    head_dim = hl.specialize(q_in.size(-1))
    q_view = q_in.reshape([-1, m_dim, head_dim])
    k_view = k_in.reshape([-1, n_dim, head_dim])
    v_view = v_in.reshape([-1, n_dim, head_dim])
    out = torch.empty_like(q_view)
    qk_scale = 1.4426950408889634 / math.sqrt(head_dim)
    for tile_b, tile_m in hl.tile([q_view.size(0), m_dim], block_size=[1, None]):
        bh = tile_b.begin
        m_i = hl.full([tile_m], float("-inf"), dtype=torch.float32)
        l_i = hl.full([tile_m], 1.0, dtype=torch.float32)
        acc = hl.zeros([tile_m, head_dim], dtype=torch.float32)
        q = q_view[bh, tile_m, :]
        # Left of the diagonal: every query sees every key; empty for the first query block.
        for tile_n in hl.tile(0, tile_m.begin):
            k = k_view[bh, tile_n, :]
            qk = hl.dot(q, k.T, out_dtype=torch.float32)
            m_ij = torch.maximum(m_i, torch.amax(qk, -1) * qk_scale)
            p = torch.exp2(qk * qk_scale - m_ij[:, None])
            alpha = torch.exp2(m_i - m_ij)
            l_i = l_i * alpha + torch.sum(p, -1)
            acc = acc * alpha[:, None]
            v = v_view[bh, tile_n, :]
            acc = hl.dot(p.to(v.dtype), v, acc=acc)
            m_i = m_ij
        # The diagonal stretch, masked. Its first key is the query block's first query, which
        # every query of the block sees, so no running maximum stays -inf. The index is spelled
        # `begin + arange(block_size)`: `tile_m.index` made Helion 1.4 size the masked
        # reductions by head_dim.
        for tile_n in hl.tile(tile_m.begin, tile_m.end):
            k = k_view[bh, tile_n, :]
            qk = hl.dot(q, k.T, out_dtype=torch.float32)
            qk = torch.where(
                (tile_m.begin + hl.arange(tile_m.block_size))[:, None]
                >= (tile_n.begin + hl.arange(tile_n.block_size))[None, :],
                qk * qk_scale,
                float("-inf"),
            )
            m_ij_keepdim = torch.maximum(m_i[:, None], torch.amax(qk, -1, keepdim=True))
            p = torch.exp2(qk - m_ij_keepdim)
            m_ij = m_ij_keepdim.squeeze(-1)
            alpha = torch.exp2(m_i - m_ij)
            l_i = l_i * alpha + torch.sum(p, -1)
            acc = acc * alpha[:, None]
            v = v_view[bh, tile_n, :]
            acc = hl.dot(p.to(v.dtype), v, acc=acc)
            m_i = m_ij
        out[bh, tile_m, :] = (acc / l_i[:, None]).to(out.dtype)
    return out.view(q_in.size())
