"""Helion attention (the built kernels/attention-helion tree, loaded through `kernels`) against
`torch.nn.functional.scaled_dot_product_attention` on one GPU.

    python bench/attention_h200.py BUILD_DIR --out RESULTS.json [--shapes tuned|held-out|all]
        [--repeats N] [--warmup N] [--deadline SECONDS] [--dry-run]

BUILD_DIR is the `build/` directory that `kernel-builder build-and-copy` wrote; the kernel is
loaded with `kernels.get_local_kernel(BUILD_DIR)` (kernels 0.17.2), as a user loads it, so the
shipped heuristic picks the config. Shapes come from the kernel's own bench.py (TUNED and
HELD_OUT), found beside BUILD_DIR.

Per shape, each implementation is timed with CUDA events around one call, after `--warmup`
calls, over `--repeats` calls; the median is reported. Two timings per implementation:
  eager (`*_ms`)   calls issued one after another, as a Python loop issues them: each figure is
                   the larger of the GPU time and the host's time to issue the call, so small
                   calls are paced by the host (Helion and Triton's Python launch path against
                   SDPA's C++ dispatch). `speedup` and the goal are computed from these.
  GPU (`*_gpu_ms`) the same calls queued behind a `torch.cuda._sleep` that keeps the GPU busy
                   until all of them are issued, so the events time the kernels alone (what
                   `triton.testing.do_bench`-style harnesses report for small calls). The calls rotate through enough input
sets (q, k, v) to exceed the L2 cache several times over, so no implementation is timed on data
the previous call left in the cache; every implementation sees the same rotation. Compared:
  helion        the kernel's `attention(q, k, v, causal=...)`
  sdpa_flash    SDPA under sdpa_kernel(SDPBackend.FLASH_ATTENTION)   ("sdpa_ms", the goal)
  sdpa_cudnn    SDPA under sdpa_kernel(SDPBackend.CUDNN_ATTENTION)
  sdpa_default  SDPA with no backend chosen (what a plain call runs)
Correctness first: on fresh inputs, each output is compared with a float64 reference (SDPA's
math on upcast inputs, computed on the GPU) by ||out - ref|| / ||ref||; bf16/fp16 pass below
1e-2, NaN never passes, and the output buffer is poisoned with NaN first so unwritten elements
fail. A shape whose Helion output fails is reported with "correct": false and no speedup.

Writes RESULTS.json: {"device", "versions", "method", "shapes": [{"shape", "label", "held_out",
"helion_ms", "sdpa_ms", "speedup", "sdpa_cudnn_ms", "sdpa_default_ms", "speedup_vs_cudnn",
"speedup_vs_default", "helion_gpu_ms", "sdpa_gpu_ms", "sdpa_cudnn_gpu_ms", "sdpa_default_gpu_ms",
"speedup_gpu", "speedup_gpu_vs_cudnn", "speedup_gpu_vs_default", "tflops", "rel_err", "correct",
"first_call_s"}], "summary"}; times in ms, speedup = sdpa_ms / helion_ms (eager), speedup_gpu =
sdpa_gpu_ms / helion_gpu_ms. The file is rewritten after every shape, so a run cut short still
leaves what it measured. --dry-run lists the plan and needs no GPU.
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

# Inputs per rotation: the sets together must be at least this many times the L2 cache.
L2_MULTIPLE = 4


def load_bench(build_dir: Path):
    """The kernel's bench.py module (for TUNED, HELD_OUT, make_inputs), from beside build/."""
    bench_path = build_dir.resolve().parent / "bench.py"
    if not bench_path.is_file():
        raise SystemExit(f"attention_h200: no bench.py beside {build_dir} (looked for {bench_path})")
    spec = importlib.util.spec_from_file_location("attention_bench", bench_path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["attention_bench"] = module
    spec.loader.exec_module(module)
    return module


def plan(bench, which: str) -> list[tuple[object, bool]]:
    """(shape, held_out) pairs for --shapes."""
    out: list[tuple[object, bool]] = []
    if which in ("tuned", "all"):
        out += [(s, False) for s in bench.TUNED]
    if which in ("held-out", "all"):
        out += [(s, True) for s in bench.HELD_OUT]
    return out


def flops(shape) -> float:
    """4 * B * H * S^2 * D, halved when causal (the two matrix products)."""
    f = 4.0 * shape.batch * shape.heads * shape.seq_len**2 * shape.head_dim
    return f / 2 if shape.causal else f


def reference(q, k, v, causal: bool):
    """SDPA's math in float64 on upcast inputs, a few heads at a time (the score matrix of a
    whole long sequence would not fit)."""
    import torch
    import torch.nn.functional as F

    b, h, s, d = q.shape
    out = torch.empty((b, h, s, d), dtype=torch.float64, device=q.device)
    step = max(1, (2 * 2**30) // (s * s * 8))  # about 2 GiB of scores per chunk
    for bi in range(b):
        for h0 in range(0, h, step):
            sl = (bi, slice(h0, h0 + step))
            with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
                out[sl] = F.scaled_dot_product_attention(
                    q[sl].double(), k[sl].double(), v[sl].double(), is_causal=causal
                )
    return out


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v is not None and v > 0]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build_dir", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--shapes", choices=["tuned", "held-out", "all"], default="all")
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--deadline", type=float, default=0.0,
                        help="stop starting new shapes after this many seconds (0: none)")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()
    t_start = time.perf_counter()

    bench = load_bench(args.build_dir)
    shapes = plan(bench, args.shapes)
    if args.dry_run:
        for shape, held_out in shapes:
            print(f"{'held-out' if held_out else 'tuned   '} {shape.label()}  "
                  f"{flops(shape) / 1e12:.3f} TFLOP")
        print(f"{len(shapes)} shapes, {args.warmup} warm-up and {args.repeats} timed calls each, "
              f"4 implementations; results to {args.out}")
        return 0

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import kernels
    from importlib import metadata

    if not torch.cuda.is_available():
        print("attention_h200: needs a CUDA GPU", file=sys.stderr)
        return 1
    t0 = time.perf_counter()
    module = kernels.get_local_kernel(args.build_dir)
    load_s = time.perf_counter() - t0
    props = torch.cuda.get_device_properties(0)
    l2_bytes = getattr(props, "L2_cache_size", 50 * 2**20)
    result = {
        "device": torch.cuda.get_device_name(),
        "versions": {n: metadata.version(n) for n in ("torch", "triton", "helion", "kernels")},
        "cuda": torch.version.cuda,
        "kernel_module": module.__name__,
        "kernel_dir": str(Path(module.__file__).resolve().parent),
        "get_local_kernel_s": round(load_s, 3),
        # The Helion heuristics the loaded variant ships (none: Helion's default config runs).
        "heuristic_files": sorted(
            p.name for p in Path(module.__file__).resolve().parent.glob("_helion_aot_*.py")
        ),
        "method": (
            f"CUDA events around each call; median of {args.repeats} after {args.warmup} "
            f"warm-up calls, eager (calls issued one after another) and GPU (the same calls "
            f"queued behind a torch.cuda._sleep, so the host's issue time is hidden); "
            f"inputs rotated over sets totalling >= {L2_MULTIPLE}x L2 "
            f"({l2_bytes // 2**20} MiB); correctness vs float64 SDPA math, rel. L2 error < 1e-2"
        ),
        "shapes": [],
    }

    def sdpa_with(backend):
        def run(q, k, v, causal):
            if backend is None:
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return run

    impls = {
        "helion": lambda q, k, v, causal: module.attention(q, k, v, causal=causal),
        "sdpa_flash": sdpa_with(SDPBackend.FLASH_ATTENTION),
        "sdpa_cudnn": sdpa_with(SDPBackend.CUDNN_ATTENTION),
        "sdpa_default": sdpa_with(None),
    }

    def time_impl(fn, sets, causal) -> tuple[float, float]:
        """(eager ms, GPU ms): medians over --repeats calls, as the module docstring says."""
        for i in range(args.warmup):
            q, k, v = sets[i % len(sets)]
            fn(q, k, v, causal)
        medians = []
        for hide_host in (False, True):
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(args.repeats)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(args.repeats)]
            torch.cuda.synchronize()
            if hide_host:
                # About 50 ms at H200 clocks: longer than the host needs to issue the calls
                # (--repeats x at most a few hundred us), so none of them waits for the host.
                torch.cuda._sleep(int(1e8))
            for i in range(args.repeats):
                q, k, v = sets[(args.warmup + i) % len(sets)]
                starts[i].record()
                fn(q, k, v, causal)
                ends[i].record()
            torch.cuda.synchronize()
            medians.append(statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)))
        return medians[0], medians[1]

    def save():
        rows = result["shapes"]
        ok = [r for r in rows if r.get("correct")]
        summary = {}
        for name, held in (("tuned", False), ("held_out", True)):
            part = [r for r in ok if r["held_out"] == held]
            summary[name] = {
                "shapes": len([r for r in rows if r["held_out"] == held]),
                "correct": len(part),
                "geomean_vs_flash": geomean([r["speedup"] for r in part]),
                "geomean_vs_cudnn": geomean([r["speedup_vs_cudnn"] for r in part]),
                "geomean_vs_default": geomean([r["speedup_vs_default"] for r in part]),
                "min_vs_flash": min((r["speedup"] for r in part), default=None),
                "below_0.9_vs_flash": [r["label"] for r in part if r["speedup"] < 0.9],
                "gpu_geomean_vs_flash": geomean([r["speedup_gpu"] for r in part]),
                "gpu_geomean_vs_cudnn": geomean([r["speedup_gpu_vs_cudnn"] for r in part]),
                "gpu_geomean_vs_default": geomean([r["speedup_gpu_vs_default"] for r in part]),
                "gpu_min_vs_flash": min((r["speedup_gpu"] for r in part), default=None),
                "gpu_below_0.9_vs_flash": [r["label"] for r in part if r["speedup_gpu"] < 0.9],
            }
        result["summary"] = summary
        args.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(result, indent=2) + "\n")
        os.replace(tmp, args.out)

    gen = torch.Generator(device="cuda").manual_seed(1234)
    print(f"{'shape':34} {'set':8} {'helion':>8} {'flash':>8} {'cudnn':>8} {'default':>8} "
          f"{'x flash':>7} {'x cudnn':>7} {'x dflt':>7} {'TFLOP/s':>7} {'err':>8}", flush=True)
    for shape, held_out in shapes:
        if args.deadline and time.perf_counter() - t_start > args.deadline:
            result.setdefault("skipped", []).append(shape.label())
            continue
        row = {"shape": shape.as_json(), "label": shape.label(), "held_out": held_out}
        try:
            # Correctness on its own fresh inputs, against float64.
            q, k, v = bench.make_inputs(shape, "cuda", gen)
            ref = reference(q, k, v, shape.causal)
            t0 = time.perf_counter()
            out = module.attention(q, k, v, causal=shape.causal)
            torch.cuda.synchronize()
            row["first_call_s"] = round(time.perf_counter() - t0, 3)
            errs = {}
            for name, fn in impls.items():
                o = out if name == "helion" else fn(q, k, v, shape.causal)
                errs[name] = ((o.double() - ref).norm() / ref.norm()).item()
            # Poisoned output: every element written, no NaN.
            out.fill_(float("nan"))
            out2 = module.attention(q, k, v, causal=shape.causal)
            written = not torch.isnan(out2).any().item()
            del ref, out, out2
            row["rel_err"] = {n: float(f"{e:.3e}") for n, e in errs.items()}
            row["correct"] = bool(written and math.isfinite(errs["helion"]) and errs["helion"] < 1e-2)

            per_set = 3 * q.numel() * q.element_size()
            n_sets = max(2, math.ceil(L2_MULTIPLE * l2_bytes / per_set))
            n_sets = min(n_sets, 64)
            sets = [(q, k, v)] + [bench.make_inputs(shape, "cuda", gen) for _ in range(n_sets - 1)]
            row["input_sets"] = n_sets
            both = {name: time_impl(fn, sets, shape.causal) for name, fn in impls.items()}
            del sets, q, k, v
            times = {name: t[0] for name, t in both.items()}
            gpu = {name: t[1] for name, t in both.items()}
            row["helion_ms"] = round(times["helion"], 4)
            row["sdpa_ms"] = round(times["sdpa_flash"], 4)
            row["sdpa_cudnn_ms"] = round(times["sdpa_cudnn"], 4)
            row["sdpa_default_ms"] = round(times["sdpa_default"], 4)
            if row["correct"]:
                row["speedup"] = round(times["sdpa_flash"] / times["helion"], 3)
                row["speedup_vs_cudnn"] = round(times["sdpa_cudnn"] / times["helion"], 3)
                row["speedup_vs_default"] = round(times["sdpa_default"] / times["helion"], 3)
            for name, key in (("helion", "helion_gpu_ms"), ("sdpa_flash", "sdpa_gpu_ms"),
                              ("sdpa_cudnn", "sdpa_cudnn_gpu_ms"),
                              ("sdpa_default", "sdpa_default_gpu_ms")):
                row[key] = round(gpu[name], 4)
            if row["correct"]:
                row["speedup_gpu"] = round(gpu["sdpa_flash"] / gpu["helion"], 3)
                row["speedup_gpu_vs_cudnn"] = round(gpu["sdpa_cudnn"] / gpu["helion"], 3)
                row["speedup_gpu_vs_default"] = round(gpu["sdpa_default"] / gpu["helion"], 3)
            row["tflops"] = round(flops(shape) / (times["helion"] * 1e-3) / 1e12, 1)
            row["tflops_flash"] = round(flops(shape) / (times["sdpa_flash"] * 1e-3) / 1e12, 1)
            print(f"{shape.label():34} {'held-out' if held_out else 'tuned':8} "
                  f"{row['helion_ms']:8.4f} {row['sdpa_ms']:8.4f} {row['sdpa_cudnn_ms']:8.4f} "
                  f"{row['sdpa_default_ms']:8.4f} {row.get('speedup', float('nan')):7.3f} "
                  f"{row.get('speedup_vs_cudnn', float('nan')):7.3f} "
                  f"{row.get('speedup_vs_default', float('nan')):7.3f} {row['tflops']:7.1f} "
                  f"{errs['helion']:8.1e}  gpu x flash {row.get('speedup_gpu', float('nan')):.3f}",
                  flush=True)
        except Exception as err:  # record the failure, keep measuring the other shapes
            import traceback
            traceback.print_exc()
            row["correct"] = False
            row["error"] = f"{type(err).__name__}: {err}"[:2000]
            print(f"{shape.label():34} FAILED {row['error'][:200]}", flush=True)
        result["shapes"].append(row)
        torch.cuda.empty_cache()
        save()
    save()
    s = result["summary"]
    for name in ("tuned", "held_out"):
        p = s[name]
        fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
        print(f"{name}: {p['correct']}/{p['shapes']} correct; geomean vs FLASH "
              f"{fmt(p['geomean_vs_flash'])}, vs cuDNN {fmt(p['geomean_vs_cudnn'])}, vs default "
              f"{fmt(p['geomean_vs_default'])}; min vs FLASH {fmt(p['min_vs_flash'])}; GPU time: "
              f"geomean vs FLASH {fmt(p['gpu_geomean_vs_flash'])}, vs cuDNN "
              f"{fmt(p['gpu_geomean_vs_cudnn'])}, min vs FLASH {fmt(p['gpu_min_vs_flash'])}")
    if result.get("skipped"):
        print(f"skipped (deadline): {len(result['skipped'])} shapes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
