"""The calls to pre-tune ``attention`` for, run by Helion's AOT runner (``kernel-builder tune``).

    kernel-builder tune kernels/attention-helion                 # all 19 TUNED shapes
    kernel-builder tune kernels/attention-helion -- --shapes 0,2  # search a slice of them

The runner runs this script once per phase (collect: autotune each distinct call; measure: time
every tuned configuration on every call; evaluate: the heuristic picks). ``--shapes`` picks the
calls of the collect and evaluate phases; in the measure phase (``HELION_AOT_MODE=measure``) the
script calls ``--measure-shapes`` instead, all of TUNED unless told otherwise, so the decision
tree is trained on every tuned shape even when a slice searched only a few. The shapes below are
what the shipped heuristic was trained on. ``HELD_OUT`` are shapes tuning never sees, so
``--shapes held-out`` is refused (usage error) when ``HELION_AOT_MODE`` is collect, measure or
evaluate, as the runner sets it; the benchmark (bench/attention_h200.py in kernel-builder)
measures both lists and reports them apart.

A shape is ``(batch, heads, seq_len, head_dim, causal, dtype)``; ``q``, ``k`` and ``v`` are
``[batch, heads, seq_len, head_dim]``.

Usage: ``python bench.py [--shapes all|held-out|I,J,...] [--measure-shapes SPEC] [--list]`` on
a machine with a CUDA GPU and helion installed. ``--list`` prints the selected shapes as JSON lines and needs no GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import NamedTuple

import torch


class Shape(NamedTuple):
    """One attention call: sizes, mask and dtype."""

    batch: int
    heads: int
    seq_len: int
    head_dim: int
    causal: bool
    dtype: torch.dtype

    def label(self) -> str:
        """``B8 H32 S1024 D64 causal bf16``-style name, stable across runs."""
        mask = "causal" if self.causal else "full"
        dtype = {torch.bfloat16: "bf16", torch.float16: "fp16"}[self.dtype]
        return f"B{self.batch} H{self.heads} S{self.seq_len} D{self.head_dim} {mask} {dtype}"

    def as_json(self) -> dict:
        """The shape as plain JSON values (dtype as ``bf16``/``fp16``)."""
        d = self._asdict()
        d["dtype"] = self.label().rsplit(" ", 1)[1]
        d["label"] = self.label()
        return d


BF16, FP16 = torch.bfloat16, torch.float16

# What the heuristic is trained on: both masks, both dtypes, both head dims; sequence lengths
# 256-16384 and batch x heads from 16 to 1024 (prefill of small and large models, BERT-like
# encoders). The first six are the SDPA baselines measured on the H200 in the reference notes.
TUNED: list[Shape] = [
    Shape(8, 32, 1024, 64, False, BF16),
    Shape(8, 32, 1024, 64, True, BF16),
    Shape(4, 32, 2048, 128, False, BF16),
    Shape(4, 32, 2048, 128, True, BF16),
    Shape(1, 32, 8192, 128, False, BF16),
    Shape(16, 16, 512, 64, False, BF16),
    Shape(2, 16, 4096, 128, True, BF16),
    Shape(1, 16, 16384, 128, True, BF16),
    Shape(32, 16, 512, 128, True, FP16),
    Shape(4, 8, 4096, 64, False, FP16),
    Shape(8, 16, 2048, 64, True, FP16),
    Shape(2, 32, 4096, 64, True, BF16),
    Shape(16, 32, 256, 128, False, BF16),
    Shape(4, 16, 1024, 128, False, FP16),
    Shape(1, 8, 8192, 64, False, FP16),
    Shape(8, 32, 2048, 128, False, FP16),
    Shape(2, 24, 3072, 128, True, BF16),
    Shape(16, 12, 1024, 64, False, BF16),
    Shape(1, 40, 4096, 128, True, FP16),
]

# Never tuned: other sequence lengths (one not a multiple of 128), head counts and batches.
HELD_OUT: list[Shape] = [
    Shape(12, 16, 768, 64, False, BF16),
    Shape(6, 24, 1536, 128, True, FP16),
    Shape(3, 32, 2560, 64, False, BF16),
    Shape(1, 32, 6144, 128, True, BF16),
    Shape(24, 8, 512, 64, True, FP16),
    Shape(2, 40, 2048, 128, False, BF16),
    Shape(8, 8, 1000, 64, False, BF16),
    Shape(1, 16, 12288, 64, True, BF16),
    Shape(4, 20, 1280, 128, False, FP16),
    Shape(10, 16, 2048, 64, True, BF16),
]


# HELION_AOT_MODE values under which Helion's AOT runner runs this script (its phases).
AOT_RUNNER_MODES = ("collect", "measure", "evaluate")


def select(spec: str, option: str = "--shapes") -> list[Shape]:
    """Shapes named by ``option`` (``--shapes`` or ``--measure-shapes``): ``all`` (the tuned
    list), ``held-out`` (``--shapes`` only), or comma-separated indices into the tuned list
    (``0,2,5``; ranges ``0-3`` too).

    Raises:
        ValueError: an index out of range, an empty range, ``held-out`` for the measure phase
            (its shapes are what the decision tree learns from, and the held-out ones must stay
            unseen), or a word that is none of these. The message names ``option``.
    """
    if spec == "all":
        return list(TUNED)
    if spec == "held-out":
        if option != "--shapes":
            raise ValueError(f"{option}: the held-out shapes are never tuned on; use all or indices")
        return list(HELD_OUT)
    chosen: list[Shape] = []
    for part in spec.split(","):
        part = part.strip()
        lo, _, hi = part.partition("-")
        try:
            first, last = int(lo), int(hi or lo)
        except ValueError:
            raise ValueError(
                f"{option}: `{part}` is not an index; use all, held-out or indices like 0,2,5-7"
            ) from None
        if last < first:
            raise ValueError(f"{option}: `{part}` is an empty range; write it low-high")
        for i in range(first, last + 1):
            if not 0 <= i < len(TUNED):
                raise ValueError(f"{option}: index {i} is out of range 0..{len(TUNED) - 1}")
            chosen.append(TUNED[i])
    return chosen


def make_inputs(shape: Shape, device: str, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
    """Random ``q``, ``k``, ``v`` for ``shape`` (standard normal, then cast)."""
    size = (shape.batch, shape.heads, shape.seq_len, shape.head_dim)
    return tuple(
        torch.randn(size, device=device, generator=generator, dtype=torch.float32).to(shape.dtype)
        for _ in range(3)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default="all", help="all, held-out, or indices like 0,2,5-7")
    parser.add_argument(
        "--measure-shapes",
        default="all",
        help="the shapes called instead of --shapes when HELION_AOT_MODE=measure (default all)",
    )
    parser.add_argument("--list", action="store_true", help="print the shapes as JSON and exit")
    args = parser.parse_args(argv)
    aot_mode = os.environ.get("HELION_AOT_MODE", "").strip().lower()
    measuring = aot_mode == "measure"
    # Under the AOT runner every call is tuning data (collect searches it, measure times the
    # configs on it, evaluate scores the heuristic on it), so held-out shapes would stop being
    # unseen; select() already refuses them for --measure-shapes.
    if args.shapes == "held-out" and aot_mode in AOT_RUNNER_MODES:
        parser.error(
            f"--shapes held-out: the held-out shapes are never tuned on, and HELION_AOT_MODE="
            f"{aot_mode} means Helion's AOT runner (kernel-builder tune) is running this script; "
            f"use all or indices, or run held-out shapes without HELION_AOT_MODE set"
        )
    # Both are checked in every phase: a bad --measure-shapes fails the collect phase at once,
    # not after its search.
    try:
        searched = select(args.shapes)
        measured = select(args.measure_shapes, "--measure-shapes")
    except ValueError as err:
        parser.error(str(err))
    shapes = measured if measuring else searched
    if args.list:
        for s in shapes:
            print(json.dumps(s.as_json()))
        return 0
    if not torch.cuda.is_available():
        print("bench.py needs a CUDA GPU (torch.cuda.is_available() is False)", file=sys.stderr)
        return 1

    # The kernel's package lives in torch-ext/ (not installed); import it from there.
    sys.path.insert(0, str(Path(__file__).resolve().parent / "torch-ext"))
    from attention_helion import attention

    gen = torch.Generator(device="cuda").manual_seed(0)
    for shape in shapes:
        q, k, v = make_inputs(shape, "cuda", gen)
        out = attention(q, k, v, causal=shape.causal)
        ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=shape.causal)
        err = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
        # bf16/fp16 outputs: both sides round to the input dtype; 2e-2 catches wrong masking
        # or scaling (errors of order 1) while allowing rounding.
        status = "ok" if err < 2e-2 else "WRONG"
        print(f"{shape.label()}: relative error vs SDPA {err:.2e} {status}", flush=True)
        if status != "ok":
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
