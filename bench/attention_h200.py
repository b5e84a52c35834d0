"""Helion attention (the built kernels/attention-helion tree, loaded through `kernels`) against
`torch.nn.functional.scaled_dot_product_attention` on one GPU.

    python bench/attention_h200.py BUILD_DIR --out RESULTS.json [--shapes tuned|held-out|all]
        [--repeats N] [--warmup N] [--deadline SECONDS] [--dry-run]

BUILD_DIR is the `build/` directory that `kernel-builder build-and-copy` wrote; the kernel is
loaded with `kernels.get_local_kernel(BUILD_DIR)` (kernels 0.17.2), as a user loads it, so the
shipped heuristic picks the config. Shapes come from the kernel's own bench.py (TUNED and
HELD_OUT), found beside BUILD_DIR. `--repeats` must be at least 1 and `--warmup` at least 0
(else argparse's usage error, exit status 2).

Per shape, each implementation is timed with CUDA events around one call, after `--warmup`
calls, over `--repeats` calls; the median is reported. An SDPA baseline's backend is chosen by
entering `sdpa_kernel(backend)` once around all of its warm-up and timed calls (both passes
below), so every timed call, Helion's and SDPA's alike, is one bare call: no implementation's
figure holds the Python of entering and leaving a context. Two timings per implementation:
  eager (`*_ms`)   calls issued one after another, as a Python loop issues them: each figure is
                   the larger of the GPU time and the host's time to issue the call, so small
                   calls are paced by the host (Helion and Triton's Python launch path against
                   SDPA's C++ dispatch). `speedup` is computed from these; issue 14's goal is
                   judged on the kernels' time (the GPU pass, and bench/attention_do_bench.py),
                   BENCHMARKS.md says why.
  GPU (`*_gpu_ms`) the same calls queued behind a `torch.cuda._sleep` that keeps the GPU busy
                   until all of them are issued, so the events time the kernels alone (what
                   `triton.testing.do_bench`-style harnesses report for small calls). The sleep
                   grows with --repeats (SLEEP_CYCLES_*), and an event recorded after it shows
                   whether it was long enough: if that event is already complete when the host
                   has issued the last call, the sleep ran out first and the pass is redone
                   with a sleep 4 times longer (3 passes at most). The GPU's idle time between
                   the sleep and the first call and between consecutive calls is summed too
                   (`gpu_pass`: idle_fraction, sleep_cycles, sleep_ran_out). A figure whose last
                   pass still ran out, or idled more than 5% of the calls' summed time, was
                   paced by the host: it is flagged (`gpu_host_paced`, and a warning on
                   stderr), and GPU speedups that use it are left out of the summary.
The calls rotate through enough input sets (q, k, v) to exceed the L2 cache several times over,
so no implementation is timed on data the previous call left in the cache; every implementation
sees the same rotation. Compared:
  helion        the kernel's `attention(q, k, v, causal=...)`
  sdpa_flash    SDPA under sdpa_kernel(SDPBackend.FLASH_ATTENTION)   ("sdpa_ms", the goal)
  sdpa_cudnn    SDPA under sdpa_kernel(SDPBackend.CUDNN_ATTENTION)
  sdpa_default  SDPA with no backend chosen (what a plain call runs)
Correctness first: on fresh inputs, each output is compared with a float64 reference (SDPA's
math on upcast inputs, computed on the GPU) by ||out - ref|| / ||ref||; bf16/fp16 pass below
1e-2, and NaN never passes. Helion is then called a second time with the caching allocator's
free block of the output's size holding NaN (every earlier output freed, the cache emptied, a
NaN-filled tensor of that size allocated and freed): that output must hold no NaN and also pass
below 1e-2, so elements the kernel leaves unwritten fail (`poisoned`; `block_reused` says
whether the output really landed in the poisoned block). A shape is `"correct": true` only when
both Helion outputs pass; otherwise, or when Helion (or the harness around it) raised for it
(`error`), it is `"correct": false` with no speedup. A baseline that raises (cuDNN declining a
shape, say), or whose output fails the same tolerance, is recorded in the row's
`baseline_errors` ({name: message}); that row then has no time for it and no speedup against
it, and Helion's own figures stay. A Helion output that is a view at an offset still counts as
landing in the poisoned block (storages are compared, not data pointers).

Writes RESULTS.json: {"device", "versions", "method", "shapes": [{"shape", "label", "held_out",
"helion_ms", "sdpa_ms", "speedup", "sdpa_cudnn_ms", "sdpa_default_ms", "speedup_vs_cudnn",
"speedup_vs_default", "helion_gpu_ms", "sdpa_gpu_ms", "sdpa_cudnn_gpu_ms", "sdpa_default_gpu_ms",
"speedup_gpu", "speedup_gpu_vs_cudnn", "speedup_gpu_vs_default", "gpu_pass", "gpu_host_paced",
"tflops", "rel_err", "poisoned", "correct", "baseline_errors", "error", "first_call_s"}],
"summary"}; a key whose figure could not be measured is absent. Times in ms,
speedup = sdpa_ms / helion_ms (eager), speedup_gpu = sdpa_gpu_ms / helion_gpu_ms. The summary's
geomeans and minima are over the correct rows that have the figure (`rows_with` counts them).
The file is rewritten after every shape, so a run cut short still leaves what it measured.
Exit status 1 when any measured shape is not correct (after the file is written), so a driving
script notices; baseline failures alone do not fail the run. --dry-run lists the plan and needs
no GPU.
"""

from __future__ import annotations

import argparse
import contextlib
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
# Relative L2 error below which a bf16/fp16 output passes (rounding is ~1e-3; a wrong mask or
# scale is of order 1).
TOLERANCE = 1e-2
# GPU pass: the sleep spins at least SLEEP_CYCLES_MIN cycles (about 50 ms at the H200's 1.98
# GHz) and SLEEP_CYCLES_PER_CALL (about 2 ms, several times what the host needs to issue one
# call) for every timed call, so more --repeats get a longer sleep.
SLEEP_CYCLES_MIN = int(1e8)
SLEEP_CYCLES_PER_CALL = int(4e6)
# A GPU pass whose sleep ran out before the host had issued every call is redone with a sleep
# SLEEP_GROWTH times longer, SLEEP_TRIES passes at most.
SLEEP_GROWTH = 4
SLEEP_TRIES = 3
# Idle GPU time, as a fraction of the timed calls' summed time, above which the GPU pass was
# paced by the host rather than by the kernels.
HOST_PACED_FRACTION = 0.05

IMPLS = ("helion", "sdpa_flash", "sdpa_cudnn", "sdpa_default")
BASELINES = IMPLS[1:]
# Row keys per implementation: eager ms, GPU ms, and (baselines) the speedups against them.
EAGER_KEY = {"helion": "helion_ms", "sdpa_flash": "sdpa_ms", "sdpa_cudnn": "sdpa_cudnn_ms",
             "sdpa_default": "sdpa_default_ms"}
GPU_KEY = {name: key[: -len("_ms")] + "_gpu_ms" for name, key in EAGER_KEY.items()}
SPEEDUP_KEY = {"sdpa_flash": "speedup", "sdpa_cudnn": "speedup_vs_cudnn",
               "sdpa_default": "speedup_vs_default"}
GPU_SPEEDUP_KEY = {"sdpa_flash": "speedup_gpu", "sdpa_cudnn": "speedup_gpu_vs_cudnn",
                   "sdpa_default": "speedup_gpu_vs_default"}


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


def rel_err(out, ref) -> float:
    """||out - ref|| / ||ref|| in float64 (NaN when out holds NaN)."""
    return ((out.double() - ref).norm() / ref.norm()).item()


def rounded(err: float) -> float | None:
    """`err` to 4 significant digits for the JSON; None for NaN or infinity (not JSON)."""
    return float(f"{err:.3e}") if math.isfinite(err) else None


def idle_text(fraction: float | None) -> str:
    """A pass's idle fraction as a percentage (None, from no busy time at all: "n/a")."""
    return "n/a" if fraction is None else f"{fraction:.0%}"


def passes(err: float) -> bool:
    """A relative error that passes: finite and below TOLERANCE."""
    return math.isfinite(err) and err < TOLERANCE


def sleep_cycles(repeats: int) -> int:
    """GPU cycles the GPU pass sleeps before `repeats` timed calls."""
    return max(SLEEP_CYCLES_MIN, repeats * SLEEP_CYCLES_PER_CALL)


def idle_fraction(call_ms: list[float], gaps_ms: list[float]) -> float:
    """The GPU's idle time in the GPU pass (`gaps_ms`: sleep end to the first call's start, then
    each call's end to the next one's start) over the calls' summed time (`call_ms`). A
    negative gap (events are stamped to about half a microsecond) counts as 0."""
    busy = sum(call_ms)
    idle = sum(max(0.0, g) for g in gaps_ms)
    return idle / busy if busy > 0 else math.inf


def error_text(err: BaseException, limit: int = 2000) -> str:
    """`Type: message`, cut to `limit` characters, for the JSON."""
    return f"{type(err).__name__}: {err}"[:limit]


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v is not None and v > 0]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def add_speedups(row: dict) -> None:
    """Fill `row`'s speedups from the times it has: a correct row only, and only against
    baselines that have the figure; a GPU speedup also when either side was flagged host-paced
    (the summary leaves those out)."""
    if not row.get("correct"):
        return
    for name in BASELINES:
        for times, speedups in ((EAGER_KEY, SPEEDUP_KEY), (GPU_KEY, GPU_SPEEDUP_KEY)):
            mine, theirs = row.get(times["helion"]), row.get(times[name])
            if mine and theirs:
                row[speedups[name]] = round(theirs / mine, 3)


def gpu_pair_paced(row: dict, name: str) -> bool:
    """Whether Helion's or baseline `name`'s GPU figure in `row` was flagged host-paced."""
    paced = row.get("gpu_host_paced", {})
    return bool(paced.get("helion") or paced.get(name))


def summarize(rows: list[dict]) -> dict:
    """Per part (tuned, held_out): counts, and geomeans and minima of the speedups over the
    correct rows that have them (GPU speedups also without a host-paced side). Never raises on
    a missing figure: a row without one is left out of that figure, and `rows_with` says how
    many rows each figure is over."""
    summary = {}
    for part_name, held in (("tuned", False), ("held_out", True)):
        rows_here = [r for r in rows if r["held_out"] == held]
        part = [r for r in rows_here if r.get("correct")]

        def values(key: str, name: str, gpu: bool) -> list[tuple[str, float]]:
            return [
                (r["label"], r[key]) for r in part
                if r.get(key) is not None and not (gpu and gpu_pair_paced(r, name))
            ]

        figures = {}
        rows_with = {}
        for name, short in (("sdpa_flash", "flash"), ("sdpa_cudnn", "cudnn"),
                            ("sdpa_default", "default")):
            for gpu, keys, prefix in ((False, SPEEDUP_KEY, ""), (True, GPU_SPEEDUP_KEY, "gpu_")):
                got = values(keys[name], name, gpu)
                figures[f"{prefix}geomean_vs_{short}"] = geomean([v for _, v in got])
                rows_with[f"{prefix}vs_{short}"] = len(got)
                if name == "sdpa_flash":
                    figures[f"{prefix}min_vs_flash"] = min((v for _, v in got), default=None)
                    figures[f"{prefix}below_0.9_vs_flash"] = [lab for lab, v in got if v < 0.9]
        errors: dict[str, list[str]] = {}
        for r in rows_here:
            for name in r.get("baseline_errors", {}):
                errors.setdefault(name, []).append(r["label"])
        summary[part_name] = {
            "shapes": len(rows_here),
            "correct": len(part),
            "not_correct": [r["label"] for r in rows_here if not r.get("correct")],
            **figures,
            "rows_with": rows_with,
            "baseline_errors": errors,
            "gpu_host_paced": [
                r["label"] for r in rows_here if any(r.get("gpu_host_paced", {}).values())
            ],
        }
    return summary


def backend(name: str):
    """The context that picks implementation `name`'s SDPA backend (`sdpa_flash`, `sdpa_cudnn`);
    none for Helion and SDPA's default dispatch. Looked up when called, so a test's patched
    `torch.nn.attention.sdpa_kernel` is the one used."""
    from torch.nn.attention import SDPBackend, sdpa_kernel


    chosen = {"sdpa_flash": SDPBackend.FLASH_ATTENTION,
              "sdpa_cudnn": SDPBackend.CUDNN_ATTENTION}.get(name)
    return contextlib.nullcontext() if chosen is None else sdpa_kernel(chosen)


def write_results(result: dict, out: Path) -> None:
    """Add `result`'s summary and write it to `out` through a temporary file, so a run cut short
    leaves the last complete file."""
    result["summary"] = summarize(result["shapes"])
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    os.replace(tmp, out)


def count_at_least(minimum: int):
    """An argparse type: an integer >= `minimum` (else argparse's usage error, exit 2)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"`{text}` is not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}; got {value}")
        return value

    return parse


def seconds(text: str) -> float:
    """An argparse type: a number of seconds >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"`{text}` is not a number") from None
    if not value >= 0:  # NaN too
        raise argparse.ArgumentTypeError(f"must be at least 0; got {text}")
    return value


def shape_parser(doc: str) -> argparse.ArgumentParser:
    """The arguments this script and bench/attention_do_bench.py share: BUILD_DIR, --out and
    --shapes; the description is the first paragraph of `doc`."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("build_dir", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--shapes", choices=["tuned", "held-out", "all"], default="all")
    return parser


def main() -> int:
    parser = shape_parser(__doc__)
    parser.add_argument("--repeats", type=count_at_least(1), default=50,
                        help="timed calls per implementation and pass (at least 1)")
    parser.add_argument("--warmup", type=count_at_least(0), default=10,
                        help="untimed calls before them (at least 0)")
    parser.add_argument("--deadline", type=seconds, default=0.0,
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
              f"{len(IMPLS)} implementations; GPU pass sleeps {sleep_cycles(args.repeats):.2g} "
              f"cycles; results to {args.out}")
        return 0

    import torch
    import torch.nn.functional as F
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
            f"queued behind a torch.cuda._sleep of {sleep_cycles(args.repeats):.2g} cycles, so "
            f"the host's issue time is hidden; redone with a {SLEEP_GROWTH}x longer sleep where "
            f"it ran out first, {SLEEP_TRIES} passes at most; flagged gpu_host_paced where the "
            f"last still ran out or the GPU idled more than {HOST_PACED_FRACTION:.0%} of the "
            f"calls' time); SDPA backends chosen by "
            f"sdpa_kernel entered once around all of an implementation's calls; "
            f"inputs rotated over sets totalling >= {L2_MULTIPLE}x L2 "
            f"({l2_bytes // 2**20} MiB); correctness vs float64 SDPA math, rel. L2 error < "
            f"{TOLERANCE:g}, also for a second Helion output written over a NaN-filled block"
        ),
        "shapes": [],
    }

    def helion(q, k, v, causal):
        return module.attention(q, k, v, causal=causal)

    def sdpa(q, k, v, causal):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    calls = {"helion": helion, "sdpa_flash": sdpa, "sdpa_cudnn": sdpa, "sdpa_default": sdpa}

    def time_impl(name, sets, causal) -> tuple[float, float, dict]:
        """(eager ms, GPU ms, GPU-pass facts) for implementation `name`: medians over --repeats
        calls, as the module docstring says, with its backend context entered once around the
        warm-up and both passes. The facts: `idle_fraction`, `sleep_cycles` (of the pass
        reported), `sleep_ran_out` and `host_paced`."""
        fn = calls[name]

        def issue(starts, ends):
            for i in range(args.repeats):
                q, k, v = sets[(args.warmup + i) % len(sets)]
                starts[i].record()
                fn(q, k, v, causal)
                ends[i].record()

        def events():
            return [torch.cuda.Event(enable_timing=True) for _ in range(args.repeats)]

        with backend(name):
            for i in range(args.warmup):
                q, k, v = sets[i % len(sets)]
                fn(q, k, v, causal)
            starts, ends = events(), events()
            torch.cuda.synchronize()
            issue(starts, ends)
            torch.cuda.synchronize()
            eager = statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))

            cycles = sleep_cycles(args.repeats)
            for attempt in range(SLEEP_TRIES):
                starts, ends, slept = events(), events(), torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize()
                torch.cuda._sleep(cycles)
                slept.record()
                issue(starts, ends)
                # Complete already: the GPU got past the sleep before the host had queued every
                # call, so some may have waited on the host. That wait falls inside the calls'
                # own event windows (the host issues a call between its two events), where the
                # gaps below cannot see it; so the pass is redone with a longer sleep.
                ran_out = slept.query()
                torch.cuda.synchronize()
                if not ran_out or attempt == SLEEP_TRIES - 1:
                    break
                cycles *= SLEEP_GROWTH
            call_ms = [s.elapsed_time(e) for s, e in zip(starts, ends)]
            # The GPU's idle time between the sleep and the first call and between calls.
            gaps = [slept.elapsed_time(starts[0])] + [
                ends[i].elapsed_time(starts[i + 1]) for i in range(args.repeats - 1)
            ]
            idle = idle_fraction(call_ms, gaps)
        facts = {
            "idle_fraction": round(idle, 4) if math.isfinite(idle) else None,
            "sleep_cycles": cycles,
            "sleep_ran_out": ran_out,
            "host_paced": bool(ran_out or idle > HOST_PACED_FRACTION),
        }
        return eager, statistics.median(call_ms), facts

    def measure(shape, row) -> None:
        """Fill `row` for `shape`. Raises what Helion (or the harness) raised; a baseline's
        exception is recorded in row["baseline_errors"] instead."""
        baseline_errors = row.setdefault("baseline_errors", {})
        # Correctness on its own fresh inputs, against float64.
        q, k, v = bench.make_inputs(shape, "cuda", gen)
        ref = reference(q, k, v, shape.causal)
        torch.cuda.synchronize()  # the reference's kernels are not the first call's time
        t0 = time.perf_counter()
        out = helion(q, k, v, shape.causal)
        torch.cuda.synchronize()
        row["first_call_s"] = round(time.perf_counter() - t0, 3)
        errs = {"helion": rel_err(out, ref)}
        out_shape, out_dtype = out.shape, out.dtype
        del out
        for name in BASELINES:
            try:
                with backend(name):
                    o = sdpa(q, k, v, shape.causal)
                errs[name] = rel_err(o, ref)
                del o
            except Exception as err:  # this baseline does not take the shape; Helion's figures stay
                baseline_errors[name] = error_text(err, 500)
                continue
            if not passes(errs[name]):  # a wrong baseline is no baseline: not timed, no speedup
                baseline_errors[name] = f"wrong output: relative error {errs[name]:.3e}"
        row["rel_err"] = {n: rounded(e) for n, e in errs.items()}
        # Poisoned output: with every earlier output freed and the cache emptied, the free
        # block of the output's size holds NaN, and the caching allocator (best fit over the
        # same free blocks as when it placed the NaN tensor) hands Helion's output, the next
        # allocation of that size, that block: unwritten elements stay NaN. `block_reused`
        # says whether it did.
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        poison = torch.full(out_shape, float("nan"), dtype=out_dtype, device=q.device)
        # Storage, not data_ptr: an output that is a view at an offset still sits in the block.
        poison_ptr = poison.untyped_storage().data_ptr()
        del poison
        out2 = helion(q, k, v, shape.causal)
        nan_free = not torch.isnan(out2).any().item()
        err2 = rel_err(out2, ref)
        row["poisoned"] = {
            "nan_free": nan_free,
            "rel_err": rounded(err2),
            "block_reused": out2.untyped_storage().data_ptr() == poison_ptr,
        }
        del ref, out2
        if not row["poisoned"]["block_reused"]:
            print(f"note: {shape.label()}: Helion's second output did not land in the "
                  f"NaN-filled block; the unwritten-element check is weaker there",
                  file=sys.stderr, flush=True)
        row["correct"] = bool(passes(errs["helion"]) and nan_free and passes(err2))

        per_set = 3 * q.numel() * q.element_size()
        n_sets = max(2, math.ceil(L2_MULTIPLE * l2_bytes / per_set))
        n_sets = min(n_sets, 64)
        sets = [(q, k, v)] + [bench.make_inputs(shape, "cuda", gen) for _ in range(n_sets - 1)]
        row["input_sets"] = n_sets
        gpu_pass, paced = {}, {}
        for name in IMPLS:
            if name in baseline_errors:
                continue
            try:
                eager_ms, gpu_ms, facts = time_impl(name, sets, shape.causal)
            except Exception as err:
                if name == "helion":
                    raise
                baseline_errors[name] = error_text(err, 500)
                continue
            row[EAGER_KEY[name]] = round(eager_ms, 4)
            row[GPU_KEY[name]] = round(gpu_ms, 4)
            gpu_pass[name] = facts
            paced[name] = facts.pop("host_paced")
            if paced[name]:
                why = (f"the sleep ran out before the host had issued the calls, even at "
                       f"{facts['sleep_cycles']:.2g} cycles" if facts["sleep_ran_out"] else
                       f"the GPU idled {idle_text(facts['idle_fraction'])} of the calls' time")
                print(f"warning: {shape.label()} {name}: {why}; its {GPU_KEY[name]} is "
                      f"host-paced, not the kernels' time", file=sys.stderr, flush=True)
        row["gpu_pass"] = gpu_pass
        row["gpu_host_paced"] = paced
        add_speedups(row)
        row["tflops"] = round(flops(shape) / (row["helion_ms"] * 1e-3) / 1e12, 1)
        if "sdpa_ms" in row:
            row["tflops_flash"] = round(flops(shape) / (row["sdpa_ms"] * 1e-3) / 1e12, 1)

    def save():
        write_results(result, args.out)

    def cell(value, width: int, digits: int, fmt: str = "f") -> str:
        return f"{'-':>{width}}" if value is None else f"{value:{width}.{digits}{fmt}}"

    gen = torch.Generator(device="cuda").manual_seed(1234)
    print(f"{'shape':34} {'set':8} {'helion':>8} {'flash':>8} {'cudnn':>8} {'default':>8} "
          f"{'x flash':>7} {'x cudnn':>7} {'x dflt':>7} {'TFLOP/s':>7} {'err':>8}", flush=True)
    for shape, held_out in shapes:
        if args.deadline and time.perf_counter() - t_start > args.deadline:
            result.setdefault("skipped", []).append(shape.label())
            continue
        row = {"shape": shape.as_json(), "label": shape.label(), "held_out": held_out}
        try:
            measure(shape, row)
            r = row.get
            print(f"{shape.label():34} {'held-out' if held_out else 'tuned':8} "
                  f"{cell(r('helion_ms'), 8, 4)} {cell(r('sdpa_ms'), 8, 4)} "
                  f"{cell(r('sdpa_cudnn_ms'), 8, 4)} {cell(r('sdpa_default_ms'), 8, 4)} "
                  f"{cell(r('speedup'), 7, 3)} {cell(r('speedup_vs_cudnn'), 7, 3)} "
                  f"{cell(r('speedup_vs_default'), 7, 3)} {cell(r('tflops'), 7, 1)} "
                  f"{cell(row['rel_err']['helion'], 8, 1, 'e')}  gpu x flash "
                  f"{cell(r('speedup_gpu'), 0, 3)}"
                  + ("" if row["correct"] else "  NOT CORRECT")
                  + "".join(f"  [{n} failed]" for n in row["baseline_errors"]),
                  flush=True)
        except Exception as err:  # record the failure, keep measuring the other shapes
            import traceback
            traceback.print_exc()
            row["correct"] = False
            row["error"] = error_text(err)
            print(f"{shape.label():34} FAILED {row['error'][:200]}", flush=True)
        result["shapes"].append(row)
        torch.cuda.empty_cache()
        save()
    save()
    s = result["summary"]
    fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
    for name in ("tuned", "held_out"):
        p = s[name]
        print(f"{name}: {p['correct']}/{p['shapes']} correct; geomean vs FLASH "
              f"{fmt(p['geomean_vs_flash'])}, vs cuDNN {fmt(p['geomean_vs_cudnn'])}, vs default "
              f"{fmt(p['geomean_vs_default'])}; min vs FLASH {fmt(p['min_vs_flash'])}; GPU time: "
              f"geomean vs FLASH {fmt(p['gpu_geomean_vs_flash'])}, vs cuDNN "
              f"{fmt(p['gpu_geomean_vs_cudnn'])}, min vs FLASH {fmt(p['gpu_min_vs_flash'])}")
        for base, labels in p["baseline_errors"].items():
            print(f"  {base} raised on {len(labels)} shapes (no figure there): {', '.join(labels)}")
        if p["gpu_host_paced"]:
            print(f"  GPU figures host-paced (left out of the GPU geomeans): "
                  f"{', '.join(p['gpu_host_paced'])}")
    if result.get("skipped"):
        print(f"skipped (deadline): {len(result['skipped'])} shapes")
    failed = [r["label"] for r in result["shapes"] if not r.get("correct")]
    if failed:
        print(f"attention_h200: Helion was not correct on {len(failed)} shapes: "
              f"{', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
