"""A cross-check of bench/attention_h200.py with the field's usual harness: the same built tree
and shapes, timed with `triton.testing.do_bench`.

    python bench/attention_do_bench.py BUILD_DIR --out RESULTS.json [--shapes tuned|held-out|all]
        [--warmup MS] [--rep MS]

`do_bench` (Triton's benchmark helper, which Helion's autotuner and tritonbench use) times each
call with CUDA events after zeroing a buffer larger than the L2 cache, so no call reads what the
previous one left there, and the GPU is busy with that zeroing while the host issues the next
call. Its figure is therefore the kernels' own time, as attention_h200.py's GPU pass
(`*_gpu_ms`) is, and not the host's issue time (attention_h200.py's eager `*_ms`). Here the
inputs stay the same across calls (the cache is flushed instead of rotating inputs), and the
median of do_bench's timed calls is reported (`return_mode="median"`); `--warmup` and `--rep`
are do_bench's own budgets in milliseconds (25 and 100 by default, do_bench's defaults).

Compared, as in attention_h200.py: `helion` (the kernel's `attention`, loaded with
`kernels.get_local_kernel(BUILD_DIR)`), `sdpa_flash` and `sdpa_cudnn` (SDPA with
`sdpa_kernel(backend)` entered once around all of that backend's calls) and `sdpa_default` (SDPA
with no backend chosen). Before timing, Helion's output is compared with the float64 reference
of attention_h200.py (relative L2 error below 1e-2); a shape that fails is `"correct": false`
and gets no speedup, a baseline that raises or is wrong is left out (`baseline_errors`).

Writes RESULTS.json: {"device", "versions", "method", "shapes": [{"shape", "label", "held_out",
"helion_ms", "sdpa_ms", "sdpa_cudnn_ms", "sdpa_default_ms", "speedup", "speedup_vs_cudnn",
"speedup_vs_default", "rel_err", "correct", "baseline_errors"}], "summary"} (times in ms,
speedup = sdpa_ms / helion_ms; the summary is attention_h200.py's, whose `gpu_*` figures stay
empty here). Exit status 1 when Helion is not correct on some shape. Needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import attention_h200 as h200  # noqa: E402  (this directory; shares the shapes and the checks)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build_dir", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--shapes", choices=["tuned", "held-out", "all"], default="all")
    parser.add_argument("--warmup", type=h200.seconds, default=25.0,
                        help="do_bench's warm-up budget in ms")
    parser.add_argument("--rep", type=h200.seconds, default=100.0,
                        help="do_bench's timing budget in ms")
    args = parser.parse_args()

    bench = h200.load_bench(args.build_dir)
    shapes = h200.plan(bench, args.shapes)

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from triton.testing import do_bench
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
            f"triton.testing.do_bench(warmup={args.warmup:g} ms, rep={args.rep:g} ms, "
            f"return_mode='median'): CUDA events per call, L2 flushed before each; SDPA "
            f"backends chosen by sdpa_kernel entered once around all of a backend's calls"
        ),
        "shapes": [],
    }
    backends = {"sdpa_flash": SDPBackend.FLASH_ATTENTION,
                "sdpa_cudnn": SDPBackend.CUDNN_ATTENTION}

    def backend(name):
        chosen = backends.get(name)
        return contextlib.nullcontext() if chosen is None else sdpa_kernel(chosen)

    def call(name, q, k, v, causal):
        if name == "helion":
            return module.attention(q, k, v, causal=causal)
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def save():
        result["summary"] = h200.summarize(result["shapes"])
        args.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(result, indent=2) + "\n")
        os.replace(tmp, args.out)

    gen = torch.Generator(device="cuda").manual_seed(1234)
    for shape, held_out in shapes:
        row = {"shape": shape.as_json(), "label": shape.label(), "held_out": held_out,
               "baseline_errors": {}}
        q, k, v = bench.make_inputs(shape, "cuda", gen)
        ref = h200.reference(q, k, v, shape.causal)
        errs = {}
        for name in h200.IMPLS:
            try:
                with backend(name):
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
        if row["correct"]:
            for name in h200.IMPLS:
                if name in row["baseline_errors"]:
                    continue
                with backend(name):
                    ms = do_bench(lambda: call(name, q, k, v, shape.causal),
                                  warmup=args.warmup, rep=args.rep, return_mode="median")
                row[h200.EAGER_KEY[name]] = round(ms, 4)
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
