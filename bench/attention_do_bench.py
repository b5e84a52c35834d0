"""A cross-check of bench/attention_h200.py with the field's usual harness: the same built tree
and shapes, timed with `triton.testing.do_bench` (or, with --cudagraph, `do_bench_cudagraph`).

    python bench/attention_do_bench.py BUILD_DIR --out RESULTS.json [--shapes tuned|held-out|all]
        [--warmup MS] [--rep MS] [--cudagraph]

`do_bench` (Triton's benchmark helper, which Helion's autotuner and tritonbench use) times each
call with CUDA events after zeroing a 256 MiB buffer, larger than the L2 cache, so no call reads
what the previous one left there; while the GPU zeroes it, the host issues the next call. Where
the host needs less time to issue a call than the GPU needs for the zeroing, the figure is the
kernel's own time, as attention_h200.py's GPU pass (`*_gpu_ms`) is; where it needs more (a
Helion call on the smallest shapes, 67-97 us of host time on the H200 machine), some host time
stays in the figure, against Helion. The inputs stay the same across calls (the cache is flushed
instead of rotating inputs), and the median of do_bench's timed calls is reported
(`return_mode="median"`); `--warmup` and `--rep` are do_bench's own budgets in milliseconds (25
and 100 by default, do_bench's defaults; --warmup 0 to 10000, --rep 1 to 10000).

--cudagraph times what a caller that replays CUDA graphs sees: `do_bench_cudagraph` captures as
many calls as fit in --rep (its default here too: 100 ms) into one graph and times its replays,
so no host work is left in the figure at all. It does not flush L2 (--warmup is not used): a
shape whose q, k and v fit in the cache is read from it by every implementation alike.

Compared, as in attention_h200.py: `helion` (the kernel's `attention`, loaded with
`kernels.get_local_kernel(BUILD_DIR)`), `sdpa_flash` and `sdpa_cudnn` (SDPA with
`sdpa_kernel(backend)` entered once around all of that backend's calls) and `sdpa_default` (SDPA
with no backend chosen). Before timing, every output is compared with attention_h200.py's float64
reference (relative L2 error below 1e-2; NaN fails). This checks values only: attention_h200.py's
second check, of elements left unwritten over a NaN-filled block, is not repeated here, so run
that script for correctness. Helion failing the check, or raising in it or while it is timed,
makes the shape `"correct": false` (with `error` when it raised) and leaves it without times and
speedups; a baseline that raises or is wrong is recorded in `baseline_errors` and left out. The
other shapes are still measured.

Writes RESULTS.json: {"device", "versions", "method", "shapes": [{"shape", "label", "held_out",
"helion_ms", "sdpa_ms", "sdpa_cudnn_ms", "sdpa_default_ms", "speedup", "speedup_vs_cudnn",
"speedup_vs_default", "rel_err", "correct", "baseline_errors", "error"}], "summary"}, rewritten
after every shape. Times in ms, speedup = sdpa_ms / helion_ms; a key whose figure was not
measured is absent, and a `rel_err` that is not finite is null. The summary is attention_h200.py's
(its `gpu_*` figures stay empty here). Exit status: 0 when Helion was correct on every shape, 1
when it was not on some shape (after the file is written), when no CUDA GPU is present, or when
the harness itself fails (a traceback: making the inputs or the reference ran out of memory,
say); 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import attention_h200 as h200  # noqa: E402  (this directory; shares the shapes and the checks)


MAX_BUDGET_MS = 10_000.0


def milliseconds(minimum: float):
    """An argparse type: a budget in ms from `minimum` to MAX_BUDGET_MS (do_bench turns the
    budget into a number of calls, so infinity or a huge value would never end)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"`{text}` is not a number") from None
        if not minimum <= value <= MAX_BUDGET_MS:  # NaN too
            raise argparse.ArgumentTypeError(
                f"must be from {minimum:g} to {MAX_BUDGET_MS:g} ms; got {text}"
            )
        return value

    return parse


def main() -> int:
    parser = h200.shape_parser(__doc__)
    parser.add_argument("--warmup", type=milliseconds(0.0), default=25.0,
                        help="do_bench's warm-up budget in ms (0 to 10000)")
    parser.add_argument("--rep", type=milliseconds(1.0), default=100.0,
                        help="do_bench's timing budget in ms (1 to 10000)")
    parser.add_argument("--cudagraph", action="store_true",
                        help="time with do_bench_cudagraph (replayed CUDA graphs, no L2 flush)")
    args = parser.parse_args()

    bench = h200.load_bench(args.build_dir)
    shapes = h200.plan(bench, args.shapes)

    import torch
    import torch.nn.functional as F
    import triton.testing
    import kernels
    from importlib import metadata

    if not torch.cuda.is_available():
        print("attention_do_bench: needs a CUDA GPU", file=sys.stderr)
        return 1
    module = kernels.get_local_kernel(args.build_dir)
    result = {
        "device": torch.cuda.get_device_name(),
        "versions": {n: metadata.version(n) for n in ("torch", "triton", "helion", "kernels")},
        "method": (
            f"triton.testing.do_bench_cudagraph(rep={args.rep:g} ms, return_mode='median'): "
            f"calls captured into one CUDA graph, its replays timed, L2 not flushed"
            if args.cudagraph else
            f"triton.testing.do_bench(warmup={args.warmup:g} ms, rep={args.rep:g} ms, "
            f"return_mode='median'): CUDA events per call, L2 flushed before each"
        ) + "; SDPA backends chosen by sdpa_kernel entered once around all of a backend's calls",
        "shapes": [],
    }
    def call(name, q, k, v, causal):
        if name == "helion":
            return module.attention(q, k, v, causal=causal)
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def save():
        h200.write_results(result, args.out)

    def time_call(fn) -> float:
        if args.cudagraph:
            return triton.testing.do_bench_cudagraph(fn, rep=args.rep, return_mode="median")
        return triton.testing.do_bench(fn, warmup=args.warmup, rep=args.rep,
                                       return_mode="median")

    gen = torch.Generator(device="cuda").manual_seed(1234)
    for shape, held_out in shapes:
        row = {"shape": shape.as_json(), "label": shape.label(), "held_out": held_out,
               "baseline_errors": {}}
        q, k, v = bench.make_inputs(shape, "cuda", gen)
        ref = h200.reference(q, k, v, shape.causal)
        errs = {}
        for name in h200.IMPLS:
            try:
                with h200.backend(name):
                    errs[name] = h200.rel_err(call(name, q, k, v, shape.causal), ref)
            except Exception as err:
                if name == "helion":
                    row["error"] = h200.error_text(err)
                    break
                row["baseline_errors"][name] = h200.error_text(err, 500)
                continue
            if name != "helion" and not h200.passes(errs[name]):
                row["baseline_errors"][name] = f"wrong output: relative error {errs[name]:.3e}"
        del ref
        row["rel_err"] = {n: h200.rounded(e) for n, e in errs.items()}
        row["correct"] = "helion" in errs and h200.passes(errs["helion"])
        for name in h200.IMPLS if row["correct"] else ():
            if name in row["baseline_errors"]:
                continue
            try:
                with h200.backend(name):
                    ms = time_call(lambda: call(name, q, k, v, shape.causal))
            except Exception as err:  # a failure here loses this figure, not the run
                if name == "helion":
                    row["correct"] = False
                    row["error"] = h200.error_text(err)
                    break
                row["baseline_errors"][name] = h200.error_text(err, 500)
                continue
            row[h200.EAGER_KEY[name]] = round(ms, 4)
        if not row["correct"]:  # Helion failed while timed: no figures for the row
            for key in h200.EAGER_KEY.values():
                row.pop(key, None)
        h200.add_speedups(row)
        r = row.get
        print(f"{shape.label():34} {'held-out' if held_out else 'tuned':8} "
              + " ".join(f"{r(h200.EAGER_KEY[n], float('nan')):8.4f}" for n in h200.IMPLS)
              + f"  x flash {r('speedup', float('nan')):.3f}"
              + ("" if row["correct"] else "  NOT CORRECT"), flush=True)
        result["shapes"].append(row)
        del q, k, v
        torch.cuda.empty_cache()
        save()
    save()
    for part in ("tuned", "held_out"):
        p = result["summary"][part]
        fmt = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
        print(f"{part}: {p['correct']}/{p['shapes']} correct; do_bench geomean vs FLASH "
              f"{fmt(p['geomean_vs_flash'])}, min {fmt(p['min_vs_flash'])}, vs cuDNN "
              f"{fmt(p['geomean_vs_cudnn'])}, vs default {fmt(p['geomean_vs_default'])}")
    failed = [r["label"] for r in result["shapes"] if not r.get("correct")]
    if failed:
        print(f"attention_do_bench: Helion was not correct on {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
