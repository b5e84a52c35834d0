"""Cold start of the Helion attention kernel: the time from `kernels.get_local_kernel` to the
first result, with the shipped heuristic against Helion autotuning on the first call.

    python bench/attention_cold_start.py BUILD_DIR --out RESULTS.json [--timeout SECONDS]

BUILD_DIR is the `build/` directory that `kernel-builder build-and-copy` wrote. Each mode runs
in its own Python process with an empty Triton cache (`TRITON_CACHE_DIR` in a fresh temporary
directory), so nothing compiled by an earlier run is reused:

  shipped   `get_local_kernel(BUILD_DIR)`, then one `attention(q, k, v)` call; the shipped
            heuristic picks the config, Triton compiles it once.
  autotune  the same load, then the same call through the kernel's function wrapped in a plain
            `helion.kernel` with no config (`HELION_AUTOTUNE_EFFORT=quick`): what a user who
            ships no heuristic waits for on the first call.

The shape is B8 H32 S1024 D64 bf16, non-causal (the first tuned shape). Times are wall-clock
seconds around `get_local_kernel` (load) and around the first call up to
`torch.cuda.synchronize()` (first_call); total = load + first_call. Writes RESULTS.json:
{"device", "versions", "shape", "modes": {"shipped": {...}, "autotune": {...}}}. A mode that
exceeds --timeout (default 540 s) is reported with "timed_out": true and the time it ran.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SHAPE = (8, 32, 1024, 64)

CHILD = r"""
import json, sys, time
t_import = time.perf_counter()
import torch, kernels
from pathlib import Path
import_s = time.perf_counter() - t_import
mode, build_dir = sys.argv[1], sys.argv[2]
shape = tuple(int(x) for x in sys.argv[3].split(","))
torch.manual_seed(0)
q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(3))
torch.cuda.synchronize()
t0 = time.perf_counter()
module = kernels.get_local_kernel(Path(build_dir))
load_s = time.perf_counter() - t0
if mode == "shipped":
    fn = lambda: module.attention(q, k, v)
else:
    import helion
    impl = sys.modules[module.__name__ + ".attention"]
    tuned_on_call = helion.kernel(impl.attention_fwd.fn, static_shapes=True)
    fn = lambda: tuned_on_call(q.contiguous(), k.contiguous(), v.contiguous())
t1 = time.perf_counter()
out = fn()
torch.cuda.synchronize()
first_call_s = time.perf_counter() - t1
ref = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double())
rel_err = float((out.double() - ref).norm() / ref.norm())
print(json.dumps({"import_s": round(import_s, 3), "load_s": round(load_s, 3),
                  "first_call_s": round(first_call_s, 3),
                  "total_s": round(load_s + first_call_s, 3), "rel_err": rel_err}))
"""


def run_mode(mode: str, build_dir: Path, timeout: float) -> dict:
    """One mode in a fresh process with an empty Triton cache; the child's JSON line."""
    with tempfile.TemporaryDirectory(prefix="cold-start-triton-") as cache:
        env = dict(os.environ, TRITON_CACHE_DIR=cache, HELION_AUTOTUNE_EFFORT="quick")
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(
                [sys.executable, "-c", CHILD, mode, str(build_dir), ",".join(map(str, SHAPE))],
                env=env, capture_output=True, text=True, timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return {"timed_out": True, "ran_s": round(time.perf_counter() - t0, 1)}
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        raise SystemExit(f"cold start: mode {mode} failed (exit {proc.returncode})")
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    row["process_s"] = round(time.perf_counter() - t0, 3)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build_dir", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--timeout", type=float, default=540.0)
    args = parser.parse_args()
    import torch

    result = {
        "device": torch.cuda.get_device_name(),
        "versions": {"torch": torch.__version__},
        "shape": {"batch": SHAPE[0], "heads": SHAPE[1], "seq_len": SHAPE[2],
                  "head_dim": SHAPE[3], "causal": False, "dtype": "bf16"},
        "modes": {},
    }
    for mode in ("shipped", "autotune"):
        result["modes"][mode] = run_mode(mode, args.build_dir.resolve(), args.timeout)
        print(mode, json.dumps(result["modes"][mode]), flush=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
