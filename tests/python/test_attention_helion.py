"""kernels/attention-helion without a GPU: its shipped sm90 heuristic is the AOT runner's output
over the recorded tuning run, and `attention`'s own dispatch cache sends a repeated call to
the compiled host function Helion chose, and nothing else there.

The Helion kernels themselves need a GPU; here they are replaced by recording fakes, so what is
tested is the Python around them (bench/attention_h200.py measures the real thing on the H200).
"""

from __future__ import annotations

import csv
import importlib.util
import json
import sys

import pytest

from conftest import KERNELS

KERNEL = KERNELS / "attention-helion"
PACKAGE = KERNEL / "torch-ext" / "attention_helion"
TUNING = KERNEL / "tuning" / "cuda_sm90"

torch = pytest.importorskip("torch")


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def all_bench_shapes():
    bench = load("attention_bench", KERNEL / "bench.py")
    return bench.TUNED + bench.HELD_OUT


def test_every_heuristic_pick_was_tuned_and_measured_on_every_tuned_shape():
    heuristic = load("attention_heuristic", PACKAGE / "_helion_aot_attention_cuda_sm90.py")
    tuned = json.loads((TUNING / "tuned_configs.json").read_text())
    with (TUNING / "measurements.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    bench = load("attention_bench", KERNEL / "bench.py")
    for kernel, causal in (("attention_fwd", False), ("causal_attention_fwd", True)):
        tuned_configs = [entry["config"] for entry in tuned[kernel]]
        measured = [json.loads(r["config"]) for r in rows if r["kernel_name"] == kernel]
        # The measure phase timed every recorded config on every tuned shape of this kernel
        # (bench.py calls all of TUNED when HELION_AOT_MODE=measure), not only on the slice.
        measured_shapes = {
            tuple(json.loads(r["shape_features"])[f"arg0_dim{j}"] for j in range(4))
            for r in rows
            if r["kernel_name"] == kernel
        }
        assert measured_shapes == {
            (s.batch, s.heads, s.seq_len, s.head_dim) for s in bench.TUNED if s.causal == causal
        }
        for shape in all_bench_shapes():
            if shape.causal != causal:
                continue
            size = (shape.batch, shape.heads, shape.seq_len, shape.head_dim)
            q = torch.empty(size, dtype=shape.dtype, device="meta")
            config = getattr(heuristic, f"autotune_{kernel}")(q, q, q)
            assert config in tuned_configs, shape.label()
            assert config in measured, shape.label()
    summary = json.loads((TUNING / "heuristic_summary.json").read_text())
    for kernel in ("attention_fwd", "causal_attention_fwd"):
        assert summary[kernel]["performance_stats"]["max_slowdown"] <= 1.01


class FakeKernel:
    """Stands in for a Helion kernel: records calls, and `bind` hands out a bound kernel whose
    `_run` records its calls too (as Helion's compiled host function would run)."""

    def __init__(self, name, has_run=True):
        self.name = name
        self.calls = []
        self.run_calls = []
        self.has_run = has_run

    def __call__(self, q, k, v):
        self.calls.append((q, k, v))
        return ("kernel", self.name)

    def bind(self, args):
        fake = self

        class Bound:
            pass

        bound = Bound()
        if self.has_run:

            def run(q, k, v):
                fake.run_calls.append((q, k, v))
                return ("run", fake.name)

            bound._run = run
        return bound


@pytest.fixture
def attention_module(monkeypatch):
    pytest.importorskip("helion", reason="the kernel module imports helion at import time")
    monkeypatch.syspath_prepend(str(KERNEL / "torch-ext"))
    for name in [n for n in sys.modules if n.startswith("attention_helion")]:
        monkeypatch.delitem(sys.modules, name)
    # Each test imports the kernel module afresh, but Dynamo remembers the module a trace
    # reached, once per process (a cached import, and an `__import_...` alias among the traced
    # function's globals): a second test's trace would guard on the first test's module.
    convert = getattr(torch._dynamo, "symbolic_convert", None)
    import_module = getattr(convert, "_import_module", None)
    if hasattr(import_module, "cache_clear"):
        import_module.cache_clear()
    for name in [n for n in globals() if n.startswith("__import_attention_helion")]:
        monkeypatch.delitem(globals(), name)
    # The package re-exports the function `attention`, which hides the submodule of that name.
    module = importlib.import_module("attention_helion.attention")

    full, causal = FakeKernel("attention_fwd"), FakeKernel("causal_attention_fwd")
    monkeypatch.setattr(module, "attention_fwd", full)
    monkeypatch.setattr(module, "causal_attention_fwd", causal)
    monkeypatch.setattr(module, "_COMPILED", {})
    # The fakes run on the CPU, as the kernels do only under Helion's interpreter.
    monkeypatch.setattr(module, "DEVICE_TYPES", ("cuda", "cpu"))
    return module, full, causal


def qkv(shape=(2, 4, 128, 64), dtype=None):
    dtype = dtype or torch.bfloat16
    return tuple(torch.zeros(shape, dtype=dtype) for _ in range(3))


def test_a_repeated_call_goes_to_the_compiled_function(attention_module):
    module, full, causal = attention_module
    q, k, v = qkv()
    assert module.attention(q, k, v) == ("kernel", "attention_fwd")
    assert module.attention(q, k, v) == ("run", "attention_fwd")
    assert module.attention(*qkv()) == ("run", "attention_fwd")  # same shapes, new tensors
    assert (len(full.calls), len(full.run_calls), len(causal.calls)) == (1, 2, 0)
    # The mask is part of the key: causal goes to the causal kernel, then to its own entry.
    assert module.attention(q, k, v, causal=True) == ("kernel", "causal_attention_fwd")
    assert module.attention(q, k, v, causal=True) == ("run", "causal_attention_fwd")
    assert module.attention(q, k, v, causal=False) == ("run", "attention_fwd")
    # Another shape or dtype is another entry, through the kernel first.
    assert module.attention(*qkv((2, 4, 256, 64))) == ("kernel", "attention_fwd")
    assert module.attention(*qkv(dtype=torch.float16)) == ("kernel", "attention_fwd")
    assert len(module._COMPILED) == 4


def test_non_contiguous_inputs_are_made_contiguous_and_never_cached(attention_module):
    module, full, _ = attention_module
    q, k, v = (t.transpose(1, 2) for t in qkv((2, 128, 4, 64)))
    assert not q.is_contiguous()
    for _ in range(2):
        assert module.attention(q, k, v) == ("kernel", "attention_fwd")
    assert len(full.calls) == 2 and not full.run_calls
    assert all(t.is_contiguous() for t in full.calls[0])
    assert module._COMPILED == {}


def test_a_cached_shape_does_not_let_bad_calls_through(attention_module):
    module, full, _ = attention_module
    q, k, v = qkv()
    module.attention(q, k, v)
    with pytest.raises(ValueError, match="head_dim must be one of"):
        module.attention(*qkv((2, 4, 128, 32)))
    with pytest.raises(ValueError, match="all be float16 or all bfloat16"):
        module.attention(q, k.to(torch.float16), v)
    with pytest.raises(ValueError, match=r"causal=True needs seq_q == seq_k"):
        module.attention(qkv((2, 4, 64, 64))[0], k, v, causal=True)
    with pytest.raises(TypeError, match="must be torch.Tensor; got ndarray, Tensor, Tensor"):
        module.attention(q.float().numpy(), k, v)
    with pytest.raises(ValueError, match="must be on one device"):
        module.attention(q, k.to("meta"), v)
    assert len(full.calls) == 1 and len(module._COMPILED) == 1


def test_tensor_subclasses_are_never_cached(attention_module):
    # A subclass whose .contiguous() hands back a plain tensor: the key holds the caller's type,
    # so the call must not be cached under it (found by review).
    module, full, _ = attention_module

    class Plainify(torch.Tensor):
        def contiguous(self, *args, **kwargs):
            return torch.Tensor.contiguous(self.as_subclass(torch.Tensor))

    q, k, v = (t.as_subclass(Plainify) for t in qkv())
    for _ in range(2):
        assert module.attention(q, k, v) == ("kernel", "attention_fwd")
    assert len(full.calls) == 2 and module._COMPILED == {}


def test_no_cache_while_torch_compile_traces(attention_module, monkeypatch):
    module, full, _ = attention_module
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    q, k, v = qkv()
    for _ in range(2):
        assert module.attention(q, k, v) == ("kernel", "attention_fwd")
    assert len(full.calls) == 2 and module._COMPILED == {}


def test_torch_compile_traces_attention_whole(attention_module, monkeypatch):
    # A real trace (Dynamo, eager backend, one graph): the checks and the call of Helion's
    # kernel are traced, nothing in attention() breaks the graph, and the cache stays empty.
    module, _, _ = attention_module

    class TensorKernel:  # a Helion kernel stand-in Dynamo can trace: returns a tensor
        def __call__(self, q, k, v):
            return q * 2 + k + v

        def bind(self, args):
            raise AssertionError("bind is never reached while tracing")

    monkeypatch.setattr(module, "attention_fwd", TensorKernel())
    torch._dynamo.reset()
    compiled = torch.compile(lambda q, k, v: module.attention(q, k, v) + 1, backend="eager", fullgraph=True)
    base = torch.ones(2 * 4 * 128 * 64 + 1, dtype=torch.bfloat16)
    q = base[1:].view(2, 4, 128, 64)  # misaligned: traced as written
    _, k, v = qkv()
    for _ in range(2):
        assert torch.equal(compiled(q, k, v), torch.full((2, 4, 128, 64), 3.0, dtype=torch.bfloat16))
    assert module._COMPILED == {}
    torch._dynamo.reset()


def test_without_a_compiled_function_every_call_goes_through_helion(attention_module, monkeypatch):
    module, _, _ = attention_module
    bare = FakeKernel("attention_fwd", has_run=False)
    monkeypatch.setattr(module, "attention_fwd", bare)
    q, k, v = qkv()
    for _ in range(3):
        assert module.attention(q, k, v) == ("kernel", "attention_fwd")
    assert len(bare.calls) == 3 and module._COMPILED == {}


def test_a_misaligned_address_is_copied_and_never_served_from_the_cache(attention_module):
    # The tuned configs load through TMA descriptors, which need 16-byte aligned addresses; a
    # contiguous view at an odd offset has the shapes and strides of a cached call.
    module, full, _ = attention_module
    q, k, v = qkv()
    module.attention(q, k, v)
    base = torch.zeros(2 * 4 * 128 * 64 + 1, dtype=torch.bfloat16)
    odd = base[1:].view(2, 4, 128, 64)
    assert odd.is_contiguous() and odd.data_ptr() % 16 != 0
    for _ in range(2):
        assert module.attention(odd, k, v) == ("kernel", "attention_fwd")
    assert len(full.calls) == 3 and full.run_calls == []
    for got in full.calls[1:]:
        assert all(t.data_ptr() % 16 == 0 for t in got)
        assert got[0].stride() == q.stride() and got[1] is k and got[2] is v
    assert module.attention(q, k, v) == ("run", "attention_fwd")  # aligned again: the cache


def test_cpu_tensors_are_a_value_error_before_helion(attention_module, monkeypatch):
    # Compiled (no interpreter), Helion itself fails on CPU tensors with a RuntimeError about
    # finding no GPU; attention() says so first, as its docstring promises (found by review).
    module, full, _ = attention_module
    monkeypatch.setattr(module, "DEVICE_TYPES", ("cuda",))
    with pytest.raises(ValueError, match=r"must be on a CUDA GPU; got cpu \(the CPU only under"):
        module.attention(*qkv())
    with pytest.raises(ValueError, match="must be on a CUDA GPU; got meta$"):
        module.attention(*(t.to("meta") for t in qkv()))
    # The one-device check still comes first for mixed devices.
    q, k, v = qkv()
    with pytest.raises(ValueError, match="must be on one device"):
        module.attention(q, k.to("meta"), v)
    assert full.calls == [] and module._COMPILED == {}


def test_the_cpu_is_accepted_only_under_helions_interpreter(attention_module, monkeypatch):
    module, _, _ = attention_module
    assert not module._interpreting()  # the fakes have no Helion settings

    class Settings:
        def __init__(self, mode):
            self.ref_mode = type("RefMode", (), {"name": mode})()

    for mode, expected in (("OFF", False), ("EAGER", True)):
        kernel = FakeKernel("attention_fwd")
        kernel.settings = Settings(mode)
        monkeypatch.setattr(module, "attention_fwd", kernel)
        assert module._interpreting() is expected


@pytest.mark.parametrize(
    "q_shape, kv_shape, causal",
    [
        ((0, 4, 128, 64), (0, 4, 128, 64), False),  # batch 0
        ((0, 4, 128, 64), (0, 4, 128, 64), True),
        ((2, 0, 128, 64), (2, 0, 128, 64), False),  # heads 0
        ((2, 4, 0, 64), (2, 4, 0, 64), False),  # seq 0
        ((2, 4, 0, 128), (2, 4, 0, 128), True),
        ((2, 4, 0, 64), (2, 4, 16, 64), False),  # no queries, some keys
        ((0, 4, 16, 64), (0, 4, 0, 64), False),  # no batch and no keys: still empty
    ],
)
def test_an_empty_output_is_returned_empty_without_a_kernel(
    attention_module, q_shape, kv_shape, causal
):
    # Helion's kernels fail on these (reshape of an empty tensor to [-1, seq, d], unpacking
    # an empty grid); SDPA returns an empty tensor of q's shape, and so does attention().
    module, full, causal_kernel = attention_module
    q, k, v = qkv(q_shape)[0], *qkv(kv_shape)[1:]
    for _ in range(2):  # and the second call is not served from a cache entry
        out = module.attention(q, k, v, causal=causal)
        assert out.shape == q.shape and out.dtype == q.dtype and out.device == q.device
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert ref.shape == out.shape
    assert full.calls == [] and causal_kernel.calls == [] and module._COMPILED == {}


def test_no_keys_for_some_queries_is_a_value_error(attention_module):
    # SDPA's math backend returns zeros (a softmax over no scores); the kernels would fail.
    module, full, _ = attention_module
    q, (k, v) = qkv((2, 4, 16, 64))[0], qkv((2, 4, 0, 64))[1:]
    with pytest.raises(ValueError, match=r"seq_k is 0: no keys to attend to; got q \(2, 4, 16,"):
        module.attention(q, k, v)
    with pytest.raises(ValueError, match="causal=True needs seq_q == seq_k; got 16 and 0"):
        module.attention(q, k, v, causal=True)
    assert full.calls == [] and module._COMPILED == {}


def test_torch_compile_traces_an_empty_call_whole(attention_module):
    module, full, _ = attention_module
    torch._dynamo.reset()
    compiled = torch.compile(
        lambda q, k, v: module.attention(q, k, v) + 1, backend="eager", fullgraph=True
    )
    q, k, v = qkv((0, 4, 128, 64))
    assert compiled(q, k, v).shape == (0, 4, 128, 64)
    assert full.calls == [] and module._COMPILED == {}
    torch._dynamo.reset()
