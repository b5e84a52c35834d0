"""bench/attention_h200.py and kernels/attention-helion/bench.py without a GPU.

The benchmark's GPU path runs here with `torch.cuda` faked on the CPU: a simulated GPU clock
that every kernel (SDPA, the fake Helion) advances by KERNEL_S once the host has issued it,
CUDA events that stamp that clock, `_sleep` that pushes it ahead, and a one-block model of the
caching allocator (a freed NaN-filled `torch.full` is what the fake Helion's next output of that
size gets). What is tested is the harness's bookkeeping: which figures a row gets, what makes it
incorrect, the exit status and the summary; the real timings come from the H200.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from conftest import KERNELS, REPO

torch = pytest.importorskip("torch")

KERNEL = KERNELS / "attention-helion"
SCRIPT = REPO / "bench" / "attention_h200.py"
KERNEL_S = 20e-6


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def h200():
    return load("attention_h200_under_test", SCRIPT)


# --- kernels/attention-helion/bench.py ---------------------------------------------------


@pytest.mark.parametrize("mode", ["collect", "measure", "evaluate", " Evaluate "])
def test_kernel_bench_refuses_held_out_shapes_under_the_aot_runner(monkeypatch, capsys, mode):
    bench = load("attention_bench_under_test", KERNEL / "bench.py")
    monkeypatch.setenv("HELION_AOT_MODE", mode)
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--shapes", "held-out", "--list"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--shapes held-out: the held-out shapes are never tuned on" in err
    assert f"HELION_AOT_MODE={mode.strip().lower()}" in err
    # Tuned shapes are still fine in that phase.
    assert bench.main(["--shapes", "0,2", "--list"]) == 0


@pytest.mark.parametrize("mode", [None, "compile", "disabled"])
def test_kernel_bench_lists_held_out_shapes_outside_the_runner(monkeypatch, capsys, mode):
    bench = load("attention_bench_under_test", KERNEL / "bench.py")
    if mode is None:
        monkeypatch.delenv("HELION_AOT_MODE", raising=False)
    else:
        monkeypatch.setenv("HELION_AOT_MODE", mode)
    assert bench.main(["--shapes", "held-out", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["label"] for line in lines] == [s.label() for s in bench.HELD_OUT]


# --- bench/attention_h200.py: arguments and the parts that need no GPU ---------------------


def run_script(*args):
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(KERNEL / "build"), "--out", os.devnull, *args],
        capture_output=True, text=True, timeout=120,
    )


def test_dry_run_needs_no_gpu():
    done = run_script("--dry-run", "--repeats", "1", "--warmup", "0")
    assert done.returncode == 0, done.stderr
    assert "0 warm-up and 1 timed calls each" in done.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["--repeats", "0"], "argument --repeats: must be at least 1; got 0"),
        (["--warmup", "-1"], "argument --warmup: must be at least 0; got -1"),
        (["--repeats", "many"], "argument --repeats: `many` is not an integer"),
        (["--deadline", "-5"], "argument --deadline: must be at least 0; got -5"),
    ],
)
def test_bad_counts_are_usage_errors(args, message):
    done = run_script("--dry-run", *args)
    assert done.returncode == 2 and message in done.stderr


def test_the_sleep_grows_with_the_calls(h200):
    assert h200.sleep_cycles(1) == h200.SLEEP_CYCLES_MIN
    assert h200.sleep_cycles(1000) == 1000 * h200.SLEEP_CYCLES_PER_CALL > h200.SLEEP_CYCLES_MIN


def test_idle_fraction(h200):
    assert h200.idle_fraction([1.0, 1.0], [0.0, 0.1]) == pytest.approx(0.05)
    assert h200.idle_fraction([1.0, 1.0], [-0.001, 0.0]) == 0.0  # timestamp jitter
    assert h200.idle_fraction([0.0], [0.0]) == float("inf")


def row(label, held_out=False, correct=True, **figures):
    return {"label": label, "held_out": held_out, "correct": correct, **figures}


def test_summary_uses_only_rows_that_have_the_figure(h200):
    rows = [
        row("a", helion_ms=1.0, sdpa_ms=2.0, sdpa_cudnn_ms=4.0, sdpa_default_ms=1.0,
            helion_gpu_ms=1.0, sdpa_gpu_ms=1.0, sdpa_cudnn_gpu_ms=2.0, sdpa_default_gpu_ms=1.0,
            gpu_host_paced={"helion": False}),
        # cuDNN raised: no figure for it, the rest stays.
        row("b", helion_ms=1.0, sdpa_ms=0.5, sdpa_default_ms=1.0, helion_gpu_ms=1.0,
            sdpa_gpu_ms=4.0, sdpa_default_gpu_ms=1.0,
            baseline_errors={"sdpa_cudnn": "RuntimeError: no"},
            gpu_host_paced={"helion": False, "sdpa_flash": True}),
        row("c", correct=False, helion_ms=1.0, sdpa_ms=100.0, error="RuntimeError: helion"),
        row("d", held_out=True, correct=False),  # failed before any figure
    ]
    for r in rows:
        h200.add_speedups(r)
    assert rows[0]["speedup_vs_cudnn"] == 4.0 and "speedup_vs_cudnn" not in rows[1]
    assert "speedup" not in rows[2]  # not correct: no speedup
    s = h200.summarize(rows)
    tuned = s["tuned"]
    assert (tuned["shapes"], tuned["correct"], tuned["not_correct"]) == (3, 2, ["c"])
    assert tuned["geomean_vs_flash"] == pytest.approx(1.0)  # 2.0 and 0.5
    assert tuned["min_vs_flash"] == 0.5 and tuned["below_0.9_vs_flash"] == ["b"]
    assert tuned["geomean_vs_cudnn"] == 4.0
    # b's GPU flash figure was host-paced: left out of the GPU flash figures only.
    assert tuned["gpu_geomean_vs_flash"] == 1.0 and tuned["gpu_below_0.9_vs_flash"] == []
    assert tuned["gpu_geomean_vs_default"] == 1.0
    assert tuned["rows_with"] == {"vs_flash": 2, "gpu_vs_flash": 1, "vs_cudnn": 1,
                                  "gpu_vs_cudnn": 1, "vs_default": 2, "gpu_vs_default": 2}
    assert tuned["baseline_errors"] == {"sdpa_cudnn": ["b"]}
    assert tuned["gpu_host_paced"] == ["b"]
    held = s["held_out"]
    assert held["correct"] == 0 and held["geomean_vs_flash"] is None
    assert held["min_vs_flash"] is None and held["gpu_min_vs_flash"] is None
    assert h200.summarize([])["tuned"]["shapes"] == 0


# --- bench/attention_h200.py's GPU path, on a simulated GPU ------------------------------


class FakeGPU:
    """The simulated device: a GPU clock (seconds) that runs ahead of the host's when work is
    queued behind a sleep; `synchronize` lets the host's clock jump to it instead of waiting."""

    def __init__(self):
        self.gpu = 0.0
        self.skew = 0.0
        self.pool = {}  # (numel, dtype) -> the freed NaN block
        self.backend = None  # the SDPA backend the current sdpa_kernel context chose
        self.enters = {}
        self.calls = {}  # Helion calls per shape
        self.helion = "right"
        self.cudnn_fails_batch = None
        self.cudnn_wrong_batch = None
        self.host_s = 0.0  # extra host time per Helion call

    def now(self):
        return time.perf_counter() + self.skew

    def kernel(self):
        self.gpu = max(self.gpu, self.now()) + KERNEL_S

    def synchronize(self, *args):
        self.skew += max(0.0, self.gpu - self.now())

    def sleep(self, cycles):
        self.gpu = max(self.gpu, self.now()) + cycles / 2e9


@pytest.fixture
def fake_gpu(monkeypatch, h200):
    import kernels
    import torch.nn.attention as tna
    import torch.nn.functional as F
    from importlib import metadata

    sim = FakeGPU()

    class Event:
        def __init__(self, enable_timing=False):
            self.t = None

        def record(self):
            self.t = sim.gpu = max(sim.gpu, sim.now())

        def query(self):
            return self.t <= sim.now()

        def elapsed_time(self, other):
            return (other.t - self.t) * 1e3

    real_generator = torch.Generator

    class Generator:  # the script asks for a CUDA generator
        def __new__(cls, device=None):
            return real_generator(device="cpu")

    real_full = torch.full

    def full(size, fill_value, *args, **kwargs):
        t = real_full(size, fill_value, *args, **kwargs)
        if isinstance(fill_value, float) and fill_value != fill_value:
            sim.pool[(t.numel(), t.dtype)] = t  # freed, its block still holding NaN
        return t

    real_sdpa = F.scaled_dot_product_attention

    def sdpa(q, k, v, *args, **kwargs):
        if sim.backend == tna.SDPBackend.CUDNN_ATTENTION and q.shape[0] == sim.cudnn_fails_batch:
            raise RuntimeError("No available kernel. Aborting execution.")
        out = real_sdpa(q, k, v, *args, **kwargs)
        sim.kernel()
        if sim.backend == tna.SDPBackend.CUDNN_ATTENTION and q.shape[0] == sim.cudnn_wrong_batch:
            return out * 2
        return out

    real_sdpa_kernel = tna.sdpa_kernel

    @contextlib.contextmanager
    def sdpa_kernel(backend, *args, **kwargs):
        sim.enters[backend.name] = sim.enters.get(backend.name, 0) + 1
        outer, sim.backend = sim.backend, backend
        cpu_backend = tna.SDPBackend.MATH if backend == tna.SDPBackend.CUDNN_ATTENTION else backend
        try:
            with real_sdpa_kernel(cpu_backend, *args, **kwargs):
                yield
        finally:
            sim.backend = outer

    def attention(q, k, v, causal=False):
        key = (tuple(q.shape), causal)
        sim.calls[key] = sim.calls.get(key, 0) + 1
        right = real_sdpa(q, k, v, is_causal=causal)
        time.sleep(sim.host_s)
        if sim.helion == "raise" and q.shape[0] == 2:
            raise RuntimeError("helion failed")
        # The caching allocator's block: the freed NaN one if there is one, else one that
        # happens to hold the right answer (a freed SDPA output, say).
        block = sim.pool.pop((q.numel(), q.dtype), None)
        out = right.clone() if block is None else block.view(q.shape)
        if sim.helion == "wrong" and q.shape[0] == 2:
            out.zero_()
        elif sim.helion == "partial":  # the second half of every head's rows never written
            out[:, :, : q.shape[2] // 2] = right[:, :, : q.shape[2] // 2]
        elif sim.helion == "second-wrong" and sim.calls[key] > 1:
            out.zero_()
        else:
            out.copy_(right)
        sim.kernel()
        return out

    def get_local_kernel(path, **kwargs):
        module = types.ModuleType("fake_attention")
        module.__file__ = str(Path(path) / "torch-cuda" / "__init__.py")
        module.attention = attention
        return module

    real_version = metadata.version

    def version(name):
        try:
            return real_version(name)
        except metadata.PackageNotFoundError:
            return "absent"

    for name, value in {
        "is_available": lambda: True,
        "get_device_properties": lambda *a: types.SimpleNamespace(L2_cache_size=2**20),
        "get_device_name": lambda *a: "fake GPU",
        "synchronize": sim.synchronize,
        "_sleep": sim.sleep,
        "empty_cache": lambda: None,
        "Event": Event,
    }.items():
        monkeypatch.setattr(torch.cuda, name, value, raising=False)
    monkeypatch.setattr(torch, "Generator", Generator)
    monkeypatch.setattr(torch, "full", full)
    monkeypatch.setattr(F, "scaled_dot_product_attention", sdpa)
    monkeypatch.setattr(tna, "sdpa_kernel", sdpa_kernel)
    monkeypatch.setattr(kernels, "get_local_kernel", get_local_kernel)
    monkeypatch.setattr(metadata, "version", version)

    real_load = h200.load_bench

    def load_bench(build_dir):
        bench = real_load(build_dir)
        S, BF, FP = bench.Shape, torch.bfloat16, torch.float16
        bench.TUNED = [S(1, 2, 128, 64, False, BF), S(2, 2, 128, 64, True, FP)]
        bench.HELD_OUT = [S(1, 2, 100, 64, False, BF)]
        make_inputs = bench.make_inputs
        bench.make_inputs = lambda shape, device, gen: make_inputs(shape, "cpu", gen)
        return bench

    monkeypatch.setattr(h200, "load_bench", load_bench)

    def run(tmp_path, *args):
        out = tmp_path / "results.json"
        monkeypatch.setattr(sys, "argv", ["attention_h200.py", str(KERNEL / "build"),
                                          "--out", str(out), "--repeats", "4", "--warmup", "1",
                                          *args])
        rc = h200.main()
        return rc, json.loads(out.read_text())

    sim.run = run
    return sim


def rows_by_batch(result):
    return {r["shape"]["batch"]: r for r in result["shapes"] if not r["held_out"]}


def test_a_normal_run(fake_gpu, tmp_path):
    rc, result = fake_gpu.run(tmp_path)
    assert rc == 0
    assert [r["correct"] for r in result["shapes"]] == [True, True, True]
    for r in result["shapes"]:
        assert r["baseline_errors"] == {}
        assert r["poisoned"]["nan_free"] and r["poisoned"]["block_reused"]
        assert r["poisoned"]["rel_err"] < 1e-2
        for key in ("helion_ms", "sdpa_ms", "sdpa_cudnn_ms", "sdpa_default_ms", "speedup",
                    "speedup_vs_cudnn", "speedup_vs_default", "speedup_gpu", "tflops"):
            assert key in r, key
        # Queued behind the sleep, the GPU pass times the kernels alone.
        assert r["helion_gpu_ms"] == pytest.approx(KERNEL_S * 1e3, rel=0.01)
        assert not any(r["gpu_host_paced"].values())
    # Each SDPA backend's context is entered once per shape for the correctness check and once
    # around all of its timed calls, never per timed call.
    assert fake_gpu.enters["FLASH_ATTENTION"] == fake_gpu.enters["CUDNN_ATTENTION"] == 2 * 3
    assert result["summary"]["tuned"]["rows_with"]["vs_cudnn"] == 2


def test_a_baseline_that_raises_keeps_helions_figures(fake_gpu, tmp_path):
    fake_gpu.cudnn_fails_batch = 2
    rc, result = fake_gpu.run(tmp_path)
    assert rc == 0  # a baseline failing alone does not fail the run
    rows = rows_by_batch(result)
    failed = rows[2]
    assert failed["correct"] is True and "error" not in failed
    assert failed["baseline_errors"] == {
        "sdpa_cudnn": "RuntimeError: No available kernel. Aborting execution."
    }
    assert "sdpa_cudnn" not in failed["rel_err"]
    for key in ("sdpa_cudnn_ms", "sdpa_cudnn_gpu_ms", "speedup_vs_cudnn", "speedup_gpu_vs_cudnn"):
        assert key not in failed, key
    assert {"helion_ms", "helion_gpu_ms", "speedup", "speedup_vs_default"} <= failed.keys()
    tuned = result["summary"]["tuned"]
    assert tuned["correct"] == 2 and tuned["baseline_errors"] == {"sdpa_cudnn": [failed["label"]]}
    assert tuned["rows_with"]["vs_cudnn"] == 1 and tuned["rows_with"]["vs_flash"] == 2


def test_a_baseline_with_a_wrong_output_is_not_timed(fake_gpu, tmp_path):
    fake_gpu.cudnn_wrong_batch = 2
    rc, result = fake_gpu.run(tmp_path)
    assert rc == 0
    wrong = rows_by_batch(result)[2]
    assert wrong["correct"] is True
    assert wrong["baseline_errors"]["sdpa_cudnn"].startswith("wrong output: relative error ")
    assert wrong["rel_err"]["sdpa_cudnn"] > 1e-2
    for key in ("sdpa_cudnn_ms", "sdpa_cudnn_gpu_ms", "speedup_vs_cudnn", "speedup_gpu_vs_cudnn"):
        assert key not in wrong, key
    assert {"sdpa_ms", "speedup", "speedup_vs_default"} <= wrong.keys()


@pytest.mark.parametrize("mode", ["wrong", "raise"])
def test_a_wrong_or_failing_helion_fails_the_run(fake_gpu, tmp_path, mode):
    fake_gpu.helion = mode
    rc, result = fake_gpu.run(tmp_path)
    assert rc == 1  # after the file was written
    rows = rows_by_batch(result)
    assert rows[1]["correct"] is True and rows[2]["correct"] is False
    assert "speedup" not in rows[2] and "speedup_gpu" not in rows[2]
    if mode == "raise":
        assert rows[2]["error"] == "RuntimeError: helion failed"
    else:
        assert rows[2]["rel_err"]["helion"] == 1.0 and "helion_ms" in rows[2]
    assert result["summary"]["tuned"]["not_correct"] == [rows[2]["label"]]


def test_unwritten_elements_fail_the_poisoned_check(fake_gpu, tmp_path):
    # The first output lands in a block holding the right answer, so only the poisoned call
    # can tell that half of every head's rows is never written.
    fake_gpu.helion = "partial"
    rc, result = fake_gpu.run(tmp_path)
    assert rc == 1
    for r in result["shapes"]:
        assert r["rel_err"]["helion"] < 1e-2
        assert r["poisoned"] == {"nan_free": False, "rel_err": None, "block_reused": True}
        assert r["correct"] is False and "speedup" not in r


def test_a_wrong_second_output_fails_the_poisoned_check(fake_gpu, tmp_path):
    fake_gpu.helion = "second-wrong"
    rc, result = fake_gpu.run(tmp_path)
    assert rc == 1
    for r in result["shapes"]:
        assert r["poisoned"]["nan_free"] and r["poisoned"]["rel_err"] == 1.0
        assert r["correct"] is False


def test_a_sleep_too_short_for_the_host_is_flagged(fake_gpu, tmp_path, h200, monkeypatch):
    # A Helion host path of 2 ms a call against a sleep of 0.1 ms, grown 4x twice: the GPU
    # catches up with the host in every pass.
    monkeypatch.setattr(h200, "SLEEP_CYCLES_MIN", 200_000)
    monkeypatch.setattr(h200, "SLEEP_CYCLES_PER_CALL", 0)
    fake_gpu.host_s = 2e-3
    rc, result = fake_gpu.run(tmp_path, "--shapes", "held-out")
    assert rc == 0
    (r,) = result["shapes"]
    assert r["gpu_host_paced"]["helion"] is True
    assert r["gpu_pass"]["helion"]["sleep_ran_out"] is True
    longest = 200_000 * h200.SLEEP_GROWTH ** (h200.SLEEP_TRIES - 1)
    assert r["gpu_pass"]["helion"]["sleep_cycles"] == longest
    assert "speedup_gpu" in r  # kept in the row, flagged, and left out of the summary
    held = result["summary"]["held_out"]
    assert held["gpu_host_paced"] == [r["label"]] and held["rows_with"]["gpu_vs_flash"] == 0
    assert held["gpu_geomean_vs_flash"] is None and held["geomean_vs_flash"] is not None


# --- bench/attention_do_bench.py, on the same simulated GPU ------------------------------

DO_BENCH_SCRIPT = REPO / "bench" / "attention_do_bench.py"


@pytest.fixture
def do_bench_run(fake_gpu, h200, monkeypatch):
    """Runs attention_do_bench.main() against the fake GPU; do_bench is faked too: it calls the
    function twice and reports a time per implementation from `times_ms` (by SDPA backend)."""
    import torch.nn.attention as tna

    triton_testing = pytest.importorskip("triton.testing")
    # The script imports attention_h200 by name: give it the fixture's patched module.
    monkeypatch.setitem(sys.modules, "attention_h200", h200)
    script = load("attention_do_bench_under_test", DO_BENCH_SCRIPT)
    times_ms = {"helion": 0.05, None: 0.05, tna.SDPBackend.FLASH_ATTENTION: 0.06,
                tna.SDPBackend.CUDNN_ATTENTION: 0.04}
    seen = []  # (harness, implementation, warmup, rep) per timing
    fake_gpu.timing_raises = None  # the implementation whose timing raises ("helion" or a backend)

    def timed(harness, fn, warmup, rep):
        before = sum(fake_gpu.calls.values())
        fn(), fn()
        who = "helion" if sum(fake_gpu.calls.values()) > before else fake_gpu.backend
        seen.append((harness, who, warmup, rep))
        if fake_gpu.timing_raises is not None and fake_gpu.timing_raises == who:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return times_ms[who]

    def do_bench(fn, warmup=25, rep=100, return_mode="mean", **kwargs):
        assert return_mode == "median"
        return timed("do_bench", fn, warmup, rep)

    def do_bench_cudagraph(fn, rep=20, return_mode="mean", **kwargs):
        assert return_mode == "median"
        return timed("cudagraph", fn, None, rep)

    monkeypatch.setattr(triton_testing, "do_bench", do_bench)
    monkeypatch.setattr(triton_testing, "do_bench_cudagraph", do_bench_cudagraph)

    def run(tmp_path, *args):
        out = tmp_path / "do-bench.json"
        monkeypatch.setattr(sys, "argv", ["attention_do_bench.py", str(KERNEL / "build"),
                                          "--out", str(out), *args])
        rc = script.main()
        return rc, json.loads(out.read_text())

    fake_gpu.do_bench_seen = seen
    return run


def test_do_bench_cross_check(fake_gpu, do_bench_run, tmp_path):
    rc, result = do_bench_run(tmp_path, "--rep", "50")
    assert rc == 0
    assert "do_bench(warmup=25 ms, rep=50 ms, return_mode='median')" in result["method"]
    assert [r["correct"] for r in result["shapes"]] == [True, True, True]
    for r in result["shapes"]:
        # Helion and SDPA's default dispatch run outside any sdpa_kernel context (0.05 ms in
        # the fake do_bench), FLASH at 0.06 ms and cuDNN at 0.04 ms.
        assert (r["helion_ms"], r["sdpa_ms"], r["sdpa_cudnn_ms"]) == (0.05, 0.06, 0.04)
        assert (r["speedup"], r["speedup_vs_cudnn"], r["speedup_vs_default"]) == (1.2, 0.8, 1.0)
        assert r["rel_err"]["helion"] < 1e-2
    assert {(harness, warmup, rep) for harness, _, warmup, rep in fake_gpu.do_bench_seen} == {
        ("do_bench", 25.0, 50.0)
    }
    assert len(fake_gpu.do_bench_seen) == 3 * 4
    tuned = result["summary"]["tuned"]
    assert tuned["geomean_vs_flash"] == pytest.approx(1.2) and tuned["gpu_geomean_vs_flash"] is None


def test_do_bench_cross_check_fails_on_a_wrong_helion(fake_gpu, do_bench_run, tmp_path):
    fake_gpu.helion = "wrong"
    fake_gpu.cudnn_fails_batch = 1
    rc, result = do_bench_run(tmp_path, "--shapes", "tuned")
    assert rc == 1
    rows = rows_by_batch(result)
    assert rows[2]["correct"] is False and "helion_ms" not in rows[2] and "speedup" not in rows[2]
    assert rows[1]["correct"] is True and "sdpa_cudnn_ms" not in rows[1]
    assert rows[1]["baseline_errors"] == {
        "sdpa_cudnn": "RuntimeError: No available kernel. Aborting execution."
    }
    assert result["summary"]["tuned"]["not_correct"] == [rows[2]["label"]]


def test_do_bench_cross_check_with_cuda_graphs(fake_gpu, do_bench_run, tmp_path):
    rc, result = do_bench_run(tmp_path, "--cudagraph", "--warmup", "7", "--shapes", "held-out")
    assert rc == 0
    assert result["method"].startswith("triton.testing.do_bench_cudagraph(rep=100 ms, ")
    assert [(h, w, r) for h, _, w, r in fake_gpu.do_bench_seen] == [("cudagraph", None, 100.0)] * 4
    (r,) = result["shapes"]
    assert r["correct"] is True and r["speedup"] == 1.2


def test_do_bench_warmup_reaches_do_bench(fake_gpu, do_bench_run, tmp_path):
    rc, _ = do_bench_run(tmp_path, "--warmup", "7", "--shapes", "held-out")
    assert rc == 0
    assert {w for _, _, w, _ in fake_gpu.do_bench_seen} == {7.0}


def test_helion_failing_while_timed_loses_its_rows_not_the_run(fake_gpu, do_bench_run, tmp_path):
    fake_gpu.timing_raises = "helion"
    rc, result = do_bench_run(tmp_path)
    assert rc == 1
    assert len(result["shapes"]) == 3  # every shape was still measured
    for r in result["shapes"]:
        assert r["correct"] is False
        assert r["error"] == "RuntimeError: CUDA error: an illegal memory access was encountered"
        assert not {"helion_ms", "sdpa_ms", "speedup"} & r.keys(), r
    assert result["summary"]["tuned"]["not_correct"] == [r["label"] for r in result["shapes"][:2]]


def test_a_baseline_failing_while_timed_is_left_out(fake_gpu, do_bench_run, tmp_path):
    import torch.nn.attention as tna

    fake_gpu.timing_raises = tna.SDPBackend.CUDNN_ATTENTION
    rc, result = do_bench_run(tmp_path, "--shapes", "tuned")
    assert rc == 0
    for r in result["shapes"]:
        assert r["correct"] is True and r["speedup"] == 1.2
        assert "sdpa_cudnn_ms" not in r and "speedup_vs_cudnn" not in r
        assert r["baseline_errors"] == {
            "sdpa_cudnn": "RuntimeError: CUDA error: an illegal memory access was encountered"
        }


def test_helion_raising_in_the_check_is_not_timed(fake_gpu, do_bench_run, tmp_path):
    fake_gpu.helion = "raise"  # batch 2 only
    rc, result = do_bench_run(tmp_path, "--shapes", "tuned")
    assert rc == 1
    rows = rows_by_batch(result)
    assert rows[2]["error"] == "RuntimeError: helion failed" and rows[2]["correct"] is False
    assert rows[2]["rel_err"] == {} and "helion_ms" not in rows[2]
    assert rows[1]["correct"] is True and rows[1]["speedup"] == 1.2
    assert len(fake_gpu.do_bench_seen) == 4  # only batch 1's four implementations were timed


def test_a_wrong_baseline_is_not_timed_by_do_bench(fake_gpu, do_bench_run, tmp_path):
    fake_gpu.cudnn_wrong_batch = 2
    rc, result = do_bench_run(tmp_path, "--shapes", "tuned")
    assert rc == 0
    wrong = rows_by_batch(result)[2]
    assert wrong["baseline_errors"]["sdpa_cudnn"].startswith("wrong output: relative error ")
    assert "sdpa_cudnn_ms" not in wrong and wrong["speedup"] == 1.2


@pytest.mark.parametrize(
    "args, message",
    [(["--rep", "0"], "must be from 1 to 10000 ms; got 0"),
     (["--rep", "inf"], "must be from 1 to 10000 ms; got inf"),
     (["--rep", "1e12"], "must be from 1 to 10000 ms; got 1e12"),
     (["--warmup", "-1"], "must be from 0 to 10000 ms; got -1"),
     (["--warmup", "nan"], "must be from 0 to 10000 ms; got nan"),
     (["--rep", "x"], "`x` is not a number")],
)
def test_do_bench_budgets_are_checked(args, message):
    out = subprocess.run(
        [sys.executable, str(DO_BENCH_SCRIPT), str(KERNEL / "build"), "--out", os.devnull, *args],
        capture_output=True, text=True,
    )
    assert out.returncode == 2, out
    assert message in out.stderr, out.stderr
