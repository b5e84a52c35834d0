"""The Helion kernels behind ``attention``: flash attention (online softmax), forward only.

Keep this file's name: Helion looks up the shipped heuristic by the source file's stem
(``_helion_aot_attention_<kind>_<capability>.py`` in this directory), and both kernels'
decision trees live in that one file (``key_attention_fwd`` / ``autotune_attention_fwd`` and
``key_causal_attention_fwd`` / ``autotune_causal_attention_fwd``).

Layout: ``q``, ``k`` and ``v`` are ``[batch, heads, seq, head_dim]``; batch and heads are
flattened into one dimension that the outer tile loop (the launch grid) walks, one (batch,
head) pair and one block of queries per program. Scores and the running softmax state stay in float32; ``p`` is cast to the
input dtype before the ``p @ v`` product, as FlashAttention does. The softmax runs in base 2:
the scores are scaled by ``log2(e) / sqrt(head_dim)`` inside the exponent (one multiply-add per
score, in float32), so the result equals ``softmax(q k^T / sqrt(head_dim)) v``.
"""

from __future__ import annotations

import math
from typing import Callable

import helion
import helion.language as hl
import torch

# Inside the kernels, log2(e) (exp(x) == exp2(x * log2(e))) is written as a literal: Helion's
# generated code reaches module globals through `import attention_helion.attention`, which
# names the `attention` function re-exported by the package, not this module.


# Where Helion's search starts (autotune_seed_configs, tried before any random config): the tile
# shapes and pipelining depths that FlashAttention-2 and Triton's fused-attention tutorial use on
# Hopper, with TMA (tensor descriptors) for q, k, v and the store, a persistent schedule, and
# three for short sequences (below).
# The search still explores around them, and a seed that does not fit a GPU (shared memory) is
# dropped by the autotuner; the shipped heuristic, not these, picks the config at run time.
_TMA = "tensor_descriptor"
SEED_CONFIGS = [
    helion.Config(block_sizes=[128, 64], num_warps=8, num_stages=3, indexing=_TMA),
    helion.Config(block_sizes=[128, 128], num_warps=8, num_stages=3, indexing=_TMA),
    helion.Config(block_sizes=[128, 64], num_warps=4, num_stages=3, indexing=_TMA),
    helion.Config(block_sizes=[64, 64], num_warps=4, num_stages=3, indexing=_TMA),
    helion.Config(
        block_sizes=[128, 64], num_warps=8, num_stages=3, indexing=_TMA, pid_type="persistent_interleaved"
    ),
    # For short sequences (a few query blocks per head): 64-row blocks on a persistent grid,
    # and plain pointer loads, which need no per-launch descriptor scratch from the allocator.
    helion.Config(
        block_sizes=[64, 64], num_warps=4, num_stages=3, indexing=_TMA, pid_type="persistent_blocked"
    ),
    helion.Config(block_sizes=[64, 64], num_warps=4, num_stages=3, indexing="pointer"),
    helion.Config(block_sizes=[128, 64], num_warps=8, num_stages=3, indexing="pointer"),
]


# static_shapes=True: every (batch, heads, seq, head_dim) compiles its own Triton kernel with
# the sizes as constants (no bound masks where blocks divide the sequence, constant strides
# for the tensor descriptors). Helion's own attention examples do the same; the price is one
# compilation (about a second) per new shape, not a new search: the heuristic still picks the
# configuration.
#
# Each program owns one (batch, head) pair (block size 1 on the flattened dimension) and one
# block of queries, so every tile is 2-D: [queries, head_dim], [queries, keys].
@helion.aot_kernel(static_shapes=True, autotune_seed_configs=SEED_CONFIGS)
def attention_fwd(q_in: torch.Tensor, k_in: torch.Tensor, v_in: torch.Tensor) -> torch.Tensor:
    """Non-causal attention: ``softmax(q k^T / sqrt(d)) v``.

    Args:
        q_in: ``[batch, heads, seq_q, head_dim]``, float16 or bfloat16, on a GPU.
        k_in: ``[batch, heads, seq_k, head_dim]``, same dtype and device.
        v_in: ``[batch, heads, seq_k, head_dim]``, same dtype and device.

    Returns:
        ``[batch, heads, seq_q, head_dim]`` in the input dtype.
    """
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
        for tile_n in hl.tile(n_dim):
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
        out[bh, tile_m, :] = (acc / l_i[:, None]).to(out.dtype)
    return out.view(q_in.size())


@helion.aot_kernel(static_shapes=True, autotune_seed_configs=SEED_CONFIGS)
def causal_attention_fwd(
    q_in: torch.Tensor, k_in: torch.Tensor, v_in: torch.Tensor
) -> torch.Tensor:
    """Causal attention (query ``i`` sees keys ``0..=i``; ``seq_q == seq_k``).

    The key loop stops at the end of the query block, so key blocks entirely above the
    diagonal are never loaded. Same arguments and result as :func:`attention_fwd`.
    """
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
        # Keys 0 .. end of this query block. The first key block holds key 0, which every
        # query sees, so no row's running maximum stays -inf.
        for tile_n in hl.tile(0, tile_m.end):
            k = k_view[bh, tile_n, :]
            qk = hl.dot(q, k.T, out_dtype=torch.float32)
            qk = torch.where(
                (tile_m.begin + hl.arange(tile_m.block_size))[:, None]
                >= (tile_n.begin + hl.arange(tile_n.block_size))[None, :],
                qk * qk_scale,
                float("-inf"),
            )
            # keepdim: a plain amax of the masked scores is rejected by Helion 1.4's check
            # that a reduction is broadcast back along the axis it reduced.
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


HEAD_DIMS = (64, 128)
DTYPES = (torch.float16, torch.bfloat16)


def _interpreting() -> bool:
    # Helion's interpreter (HELION_INTERPRET=1, read when the kernels above were defined) runs
    # the kernels' bodies eagerly in PyTorch, on the CPU too. Compiled, they run on a GPU only;
    # handed CPU tensors, Helion fails inside (a RuntimeError: no GPU found, on a machine
    # without one).
    ref_mode = getattr(getattr(attention_fwd, "settings", None), "ref_mode", None)
    return ref_mode is not None and getattr(ref_mode, "name", "OFF") != "OFF"


# torch.device.type values the inputs may have: CUDA GPUs, and the CPU under the interpreter.
DEVICE_TYPES = ("cuda", "cpu") if _interpreting() else ("cuda",)

# Compiled host functions of calls already seen, keyed as Helion's own fast path keys a call: the
# mask and, per tensor, its type, shape, strides, dtype and device (static shapes: Helion
# specializes on all of them). Helion's key also records whether the call is distributed
# (symmetric-memory tensors), which these kernels never take; and under torch.compile the cache
# is not used, so Helion's traced path stays the one compiled. A hit skips the checks below and
# Helion's dispatch (its fast-path key and the heuristic's key function, run on every call),
# 10-38 us of a 60-120 us host path measured on the H200 machine for small shapes, where the
# host, not the GPU, sets the pace (bench/attention_overhead.py). Entries are added only for
# plain, contiguous tensors that passed the checks, and a hit also needs 16-byte aligned
# addresses, so a hit is a call that would have passed them too. Like Helion's own caches it
# holds one entry per distinct shape.
_COMPILED: dict[tuple, Callable[..., torch.Tensor]] = {}


def _aligned(t: torch.Tensor) -> bool:
    # The tuned configs load through TMA tensor descriptors, whose global address must be
    # 16-byte aligned. A contiguous view at an odd offset (`buf[1:]`) is not; a copy is (the
    # caching allocator hands out 512-byte aligned blocks).
    return t.data_ptr() % 16 == 0


def _dispatch_key(causal: bool, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple:
    return (
        causal,
        type(q), q.shape, q.stride(), q.dtype, q.device,
        type(k), k.shape, k.stride(), k.dtype, k.device,
        type(v), v.shape, v.stride(), v.dtype, v.device,
    )  # fmt: skip


def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False
) -> torch.Tensor:
    """Scaled dot-product attention, as ``F.scaled_dot_product_attention(q, k, v,
    is_causal=causal)`` with the default scale ``1 / sqrt(head_dim)``.

    Args:
        q: ``[batch, heads, seq_q, head_dim]``, float16 or bfloat16, on a CUDA GPU;
            ``head_dim`` is 64 or 128.
        k: ``[batch, heads, seq_k, head_dim]``, same dtype and device as ``q``.
        v: same shape as ``k``, same dtype and device.
        causal: mask key ``j > i`` for query ``i`` (needs ``seq_q == seq_k``).

    Returns:
        ``[batch, heads, seq_q, head_dim]``, dtype of ``q``. When ``batch``, ``heads`` or
        ``seq_q`` is 0 that is an empty tensor, as SDPA returns, and no kernel runs.

    Raises:
        TypeError: q, k or v is not a tensor.
        ValueError: shapes, dtypes or devices that the kernels do not cover: not 4-D, k and v
            not matching q, ``head_dim`` not 64 or 128, not all float16 or all bfloat16, not
            all on one CUDA device (the CPU is accepted only under Helion's interpreter,
            ``HELION_INTERPRET=1``), causal with ``seq_q != seq_k``, or ``seq_k`` 0 for a
            non-empty output (attention over no keys is undefined).
    """
    causal = bool(causal)
    tracing = torch.compiler.is_compiling()
    try:
        key = None if tracing else _dispatch_key(causal, q, k, v)
    except AttributeError:  # not tensors (a NumPy array has no stride())
        key = None
    compiled = None if key is None else _COMPILED.get(key)
    if compiled is not None and _aligned(q) and _aligned(k) and _aligned(v):  # key is None if tracing
        return compiled(q, k, v)
    if not all(isinstance(t, torch.Tensor) for t in (q, k, v)):
        raise TypeError(
            f"attention: q, k and v must be torch.Tensor; got {type(q).__name__}, "
            f"{type(k).__name__}, {type(v).__name__}"
        )
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(
            f"attention: q, k and v must be 4-D [batch, heads, seq, head_dim]; got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if k.shape != v.shape or q.shape[:2] != k.shape[:2] or q.shape[3] != k.shape[3]:
        raise ValueError(
            f"attention: k and v must be [batch, heads, seq_k, head_dim] matching q's batch, "
            f"heads and head_dim; got q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    if q.shape[3] not in HEAD_DIMS:
        raise ValueError(f"attention: head_dim must be one of {HEAD_DIMS}; got {q.shape[3]}")
    if q.dtype not in DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(
            f"attention: q, k and v must all be float16 or all bfloat16; got "
            f"{q.dtype}, {k.dtype}, {v.dtype}"
        )
    if k.device != q.device or v.device != q.device:
        raise ValueError(
            f"attention: q, k and v must be on one device; got {q.device}, {k.device}, {v.device}"
        )
    if q.device.type not in DEVICE_TYPES:
        raise ValueError(
            f"attention: q, k and v must be on a CUDA GPU; got {q.device}"
            + (" (the CPU only under Helion's interpreter, HELION_INTERPRET=1)"
               if q.device.type == "cpu" else "")
        )
    if causal and q.shape[2] != k.shape[2]:
        raise ValueError(
            f"attention: causal=True needs seq_q == seq_k; got {q.shape[2]} and {k.shape[2]}"
        )
    if q.numel() == 0:
        # No batch, head or query: nothing to compute, and the kernels cannot take it (their
        # reshape of an empty tensor to [-1, seq, head_dim] is ambiguous). SDPA returns this.
        return q.new_empty(q.shape)
    if k.shape[2] == 0:
        # SDPA's math backend returns zeros here (a softmax over no scores), a value of no
        # meaning; the kernels would fail inside Helion.
        raise ValueError(
            f"attention: seq_k is 0: no keys to attend to; got q {tuple(q.shape)}, "
            f"k {tuple(k.shape)}"
        )
    kernel = causal_attention_fwd if causal else attention_fwd
    # Judged on the caller's tensors, which the key describes (not on what .contiguous() made).
    cacheable = key is not None and all(
        type(t) is torch.Tensor and t.is_contiguous() for t in (q, k, v)
    )
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    if not tracing:
        # Not while torch.compile traces: an address is not known then (Dynamo cannot trace
        # data_ptr()), and the compiled graph calls Helion's kernel as the caller wrote it.
        q, k, v = (t if _aligned(t) else t.clone() for t in (q, k, v))
    out = kernel(q, k, v)
    if cacheable:
        # Helion keeps the compiled host function of the config it chose for these arguments
        # on the bound kernel (helion 1.4 and 1.5: ``_run``); without it, calls keep going
        # through Helion's dispatch.
        run = getattr(kernel.bind((q, k, v)), "_run", None)
        if callable(run):
            _COMPILED[key] = run
    return out
