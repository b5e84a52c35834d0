"""Fixed-config sweep of kernels/attention-helion's kernels on one GPU: which launch configs and
which causal kernel are worth a tuning slice, measured directly (no search, no heuristic).

    python bench/attention_configs.py KERNEL_DIR --out SWEEP.json [--shapes 3,8,12]
        [--variant FILE]... [--repeats N] [--warmup N] [--deadline SECONDS] [--dry-run]

KERNEL_DIR is the kernel's source directory (bench.py beside torch-ext/). Shapes are indices
into its bench.py TUNED list (default: all). For each shape the kernel that serves it
(``attention_fwd`` or ``causal_attention_fwd`` of torch-ext/attention_helion/attention.py), and
for causal shapes each ``--variant FILE`` that defines its own ``causal_attention_fwd``, is
compiled by Helion with each candidate config as a fixed ``config=`` (so nothing is tuned):
the module's SEED_CONFIGS, and for the shipped kernels the config the shipped heuristic picks
for that shape. Each is timed as bench/attention_h200.py times (CUDA events around one call,
median of --repeats after --warmup calls, inputs rotated over sets totalling >= 4x L2) beside
SDPA with the FLASH and cuDNN backends, after a correctness check against SDPA FLASH's output
(relative L2 error < 1e-2; a config that fails, or does not compile, is recorded with its
error and no time).

Writes SWEEP.json: {"device", "versions", "method", "rows": [{"shape", "label", "kernel",
"config", "source", "ms", "sdpa_ms", "sdpa_cudnn_ms", "speedup", "rel_err", "compile_s",
"error"}], "best": {label: row}}; times in ms, speedup = sdpa_ms / ms. Rewritten after every
row, so a run cut short keeps what it measured. --dry-run lists the plan and needs no GPU.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

L2_MULTIPLE = 4


def load(path: Path, name: str):
    """Import a Python file as module `name`."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kernel_dir", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--shapes", default="", help="comma-separated TUNED indices (default: all)")
    parser.add_argument("--variant", type=Path, action="append", default=[])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--deadline", type=float, default=0.0, help="start no new row after this many seconds")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()
    t_start = time.perf_counter()

    bench = load(args.kernel_dir / "bench.py", "attention_bench")
    picks = [int(i) for i in args.shapes.split(",") if i.strip()] or list(range(len(bench.TUNED)))
    for i in picks:
        if not 0 <= i < len(bench.TUNED):
            raise SystemExit(f"attention_configs: shape {i} is not in bench.py's TUNED (0..{len(bench.TUNED) - 1})")
    sys.path.insert(0, str(args.kernel_dir / "torch-ext"))
    import attention_helion  # noqa: F401  (registers the package; `attention` below is the module)

    shipped = sys.modules["attention_helion.attention"]
    variants = [(p.stem, load(p, f"attention_variant_{p.stem}")) for p in args.variant]
    heuristics = sorted((args.kernel_dir / "torch-ext" / "attention_helion").glob("_helion_aot_attention_*.py"))
    heuristic = load(heuristics[0], "attention_shipped_heuristic") if heuristics else None

    def candidates(shape, qkv):
        """(kernel label, source, Helion function, config) to try for one shape."""
        name = "causal_attention_fwd" if shape.causal else "attention_fwd"
        out = []
        base = getattr(shipped, name)
        if heuristic is not None:
            out.append(("shipped", "heuristic", base.fn, dict(getattr(heuristic, f"autotune_{name}")(*qkv))))
        out += [("shipped", f"seed {i}", base.fn, dict(c)) for i, c in enumerate(shipped.SEED_CONFIGS)]
        if shape.causal:
            for stem, mod in variants:
                out += [(stem, f"seed {i}", mod.causal_attention_fwd.fn, dict(c)) for i, c in enumerate(mod.SEED_CONFIGS)]
        return out

    if args.dry_run:
        for i in picks:
            s = bench.TUNED[i]
            print(f"{i:2} {s.label():34} shipped kernel{' + ' + ', '.join(v for v, _ in variants) if s.causal and variants else ''}")
        return 0

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import helion
    from importlib import metadata

    props = torch.cuda.get_device_properties(0)
    l2_bytes = getattr(props, "L2_cache_size", 50 * 2**20)
    result = {
        "device": torch.cuda.get_device_name(),
        "versions": {n: metadata.version(n) for n in ("torch", "triton", "helion")},
        "method": (
            f"fixed Helion configs (no search); CUDA events around each call, median of {args.repeats} "
            f"after {args.warmup} warm-up calls; inputs rotated over >= {L2_MULTIPLE}x L2; "
            "correct = rel. L2 error vs SDPA FLASH < 1e-2"
        ),
        "rows": [],
        "best": {},
    }

    def save():
        best = {}
        for r in result["rows"]:
            if r.get("ms") and (r["label"] not in best or r["ms"] < best[r["label"]]["ms"]):
                best[r["label"]] = r
        result["best"] = best
        args.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(result, indent=2) + "\n")
        os.replace(tmp, args.out)

    def time_ms(fn, sets) -> float:
        for i in range(args.warmup):
            fn(*sets[i % len(sets)])
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(args.repeats)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(args.repeats)]
        torch.cuda.synchronize()
        for i in range(args.repeats):
            q, k, v = sets[(args.warmup + i) % len(sets)]
            starts[i].record()
            fn(q, k, v)
            ends[i].record()
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))

    gen = torch.Generator(device="cuda").manual_seed(1234)
    for i in picks:
        shape = bench.TUNED[i]
        q, k, v = bench.make_inputs(shape, "cuda", gen)
        per_set = 3 * q.numel() * q.element_size()
        n_sets = min(64, max(2, math.ceil(L2_MULTIPLE * l2_bytes / per_set)))
        sets = [(q, k, v)] + [bench.make_inputs(shape, "cuda", gen) for _ in range(n_sets - 1)]

        def sdpa(backend):
            def run(q, k, v):
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=shape.causal)
            return run

        ref = sdpa(SDPBackend.FLASH_ATTENTION)(q, k, v).float()
        sdpa_ms = time_ms(sdpa(SDPBackend.FLASH_ATTENTION), sets)
        cudnn_ms = time_ms(sdpa(SDPBackend.CUDNN_ATTENTION), sets)
        print(f"== {i} {shape.label()}: flash {sdpa_ms:.4f} ms, cudnn {cudnn_ms:.4f} ms", flush=True)
        for kernel, source, fn, cfg in candidates(shape, (q, k, v)):
            if args.deadline and time.perf_counter() - t_start > args.deadline:
                result.setdefault("skipped", []).append(f"{shape.label()} {kernel} {source}")
                continue
            row = {"shape": shape.as_json(), "label": shape.label(), "index": i, "kernel": kernel,
                   "source": source, "config": cfg, "sdpa_ms": round(sdpa_ms, 5), "sdpa_cudnn_ms": round(cudnn_ms, 5)}
            try:
                compiled = helion.kernel(fn, config=helion.Config(**cfg), static_shapes=True)
                t0 = time.perf_counter()
                out = compiled(q, k, v)
                torch.cuda.synchronize()
                row["compile_s"] = round(time.perf_counter() - t0, 2)
                err = ((out.float() - ref).norm() / ref.norm()).item()
                row["rel_err"] = float(f"{err:.3e}")
                if not (math.isfinite(err) and err < 1e-2):
                    raise RuntimeError(f"wrong result: rel. error {err:.3e}")
                ms = time_ms(compiled, sets)
                row["ms"] = round(ms, 5)
                row["speedup"] = round(sdpa_ms / ms, 4)
            except Exception as e:  # a config that does not compile or run is a result too
                row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
            result["rows"].append(row)
            save()
            got = f"{row['ms']:.4f} ms  x{row['speedup']:.3f}" if "ms" in row else row["error"][:100]
            print(f"   {kernel:16} {source:10} {got}", flush=True)
        del sets, ref
        torch.cuda.empty_cache()
    save()
    for label, r in result["best"].items():
        print(f"best {label:34} {r['kernel']:16} {r['source']:10} x{r['speedup']:.3f} (cudnn x{r['sdpa_ms'] / r['sdpa_cudnn_ms']:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
