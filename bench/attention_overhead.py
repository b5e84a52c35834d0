"""Where the time of one small Helion attention call goes on the GPU machine: host (Python)
dispatch against GPU execution, layer by layer.

    python bench/attention_overhead.py BUILD_DIR --out OVERHEAD.json [--calls N] [--profile]

BUILD_DIR is the tree `kernel-builder build-and-copy` wrote (loaded with
`kernels.get_local_kernel`, as bench/attention_h200.py does). For a few shapes, for each callable
below, three per-call figures in microseconds:

  eager_us  CUDA events around each call, one call after another (what attention_h200.py
            reports): the larger of host dispatch and GPU time
  gpu_us    the same events while a `torch.cuda._sleep` at the head of the stream keeps the GPU
            busy until every call is queued, so the events time the kernels alone
  host_us   wall-clock time per call (time.perf_counter) while the GPU is kept busy the same way,
            so no call waits for the GPU: the host's dispatch cost

Callables: `attention` (the package's function: checks, contiguous, Helion), `kernel` (the Helion
Kernel object, `causal_attention_fwd(q, k, v)` or `attention_fwd(q, k, v)`), `bound_run` (the
compiled host function Helion's dispatch cache ends in), and SDPA with no backend chosen.
--profile adds a cProfile of `attention` calls (the 25 costliest functions by own time) to the
JSON. Inputs are reused across calls (this is about dispatch, not cache effects).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import sys
import time
from pathlib import Path

SHAPES = [
    # (batch, heads, seq, head_dim, causal, dtype): the shapes below 0.9x FLASH in slice 7.
    (16, 16, 512, 64, False, "bf16"),
    (16, 32, 256, 128, False, "bf16"),
    (24, 8, 512, 64, True, "fp16"),
    (8, 8, 1000, 64, False, "bf16"),
    # and one large shape for contrast
    (4, 32, 2048, 128, False, "bf16"),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build_dir", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()

    import torch
    import torch.nn.functional as F
    from kernels import get_local_kernel

    module = get_local_kernel(args.build_dir.resolve())
    impl = sys.modules[module.attention.__module__]
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16}

    def measure(fn, calls: int) -> dict:
        for _ in range(10):
            fn()
        torch.cuda.synchronize()
        # eager: back to back, as the main benchmark does
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
        for i in range(calls):
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize()
        eager = statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) * 1e3
        # gpu and host: the GPU sleeps long enough that every call is queued before it wakes
        torch.cuda._sleep(int(5e8))  # about 0.25 s at H200 clocks, far above calls x dispatch
        t0 = time.perf_counter()
        for i in range(calls):
            starts[i].record()
            fn()
            ends[i].record()
        host = (time.perf_counter() - t0) / calls * 1e6
        torch.cuda.synchronize()
        gpu = statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) * 1e3
        return {"eager_us": round(eager, 2), "gpu_us": round(gpu, 2), "host_us": round(host, 2)}

    rows = []
    for b, h, s, d, causal, dt in SHAPES:
        q, k, v = (
            torch.randn(b, h, s, d, device="cuda", dtype=dtypes[dt]) for _ in range(3)
        )
        kernel = impl.causal_attention_fwd if causal else impl.attention_fwd
        kernel(q, k, v)
        bound = kernel.bind((q, k, v))
        run = bound._run
        fns = {
            "attention": lambda: module.attention(q, k, v, causal=causal),
            "kernel": lambda: kernel(q, k, v),
            "bound_run": lambda: run(q, k, v),
            "sdpa_default": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
        }
        row = {"shape": [b, h, s, d, causal, dt]}
        for name, fn in fns.items():
            row[name] = measure(fn, args.calls)
        label = f"B{b} H{h} S{s} D{d} {'causal' if causal else 'full'} {dt}"
        print(label, json.dumps({k: v for k, v in row.items() if k != "shape"}), flush=True)
        rows.append(row)

    result = {"calls": args.calls, "shapes": rows}
    if args.profile:
        b, h, s, d, causal, dt = SHAPES[0]
        q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=dtypes[dt]) for _ in range(3))
        torch.cuda._sleep(int(5e8))
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.calls):
            module.attention(q, k, v, causal=causal)
        prof.disable()
        torch.cuda.synchronize()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(25)
        result["profile"] = text.getvalue()
        print(result["profile"])
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
