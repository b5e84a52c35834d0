"""The built silu-and-mul tree loads through `kernels.get_local_kernel` and computes exactly
what the torch reference computes.

PyPI's torch is the CUDA build even without a GPU, and `kernels` 0.17.2 then detects the
backend as "cuda" and would pick `torch-cuda`; `backend="cpu"` selects `torch-cpu`.
"""

from __future__ import annotations

import subprocess

import kernels
import pytest
import torch
import torch.nn.functional as F
from conftest import kernel_builder


def reference(x: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1] // 2
    return F.silu(x[..., :d]) * x[..., d:]


@pytest.fixture(scope="module")
def build(built_tree):
    return built_tree("silu-and-mul")


@pytest.mark.parametrize("where", ["kernel dir", "build dir", "variant dir"])
def test_get_local_kernel_loads_the_cpu_variant(build, where):
    path = {
        "kernel dir": build.parent,
        "build dir": build,
        "variant dir": build / "torch-cpu",
    }[where]
    module = kernels.get_local_kernel(path, backend="cpu")
    metadata = kernels.Metadata.read_from_file(build / "torch-cpu" / "metadata.json")
    # The loader imports the variant as a package named after metadata `id`.
    assert module.__name__ == metadata.id
    assert module.__all__ == ["silu_and_mul"]
    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(module.silu_and_mul(x), reference(x), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("shape", [(1, 2), (3, 7, 256), (128, 11008)])
def test_result_equals_the_torch_reference(build, dtype, shape):
    module = kernels.get_local_kernel(build.parent, backend="cpu")
    gen = torch.Generator().manual_seed(sum(shape))
    x = torch.randn(shape, generator=gen).to(dtype)
    got = module.silu_and_mul(x)
    assert got.shape == (*shape[:-1], shape[-1] // 2)
    assert got.dtype == dtype
    torch.testing.assert_close(got, reference(x), rtol=0, atol=0)
    out = torch.empty_like(got)
    assert module.silu_and_mul(x, out=out) is out
    torch.testing.assert_close(out, reference(x), rtol=0, atol=0)


def test_odd_last_dimension_is_a_clear_error(build):
    module = kernels.get_local_kernel(build.parent, backend="cpu")
    with pytest.raises(ValueError, match="last dimension must be even, got 5"):
        module.silu_and_mul(torch.zeros(2, 5))


def test_get_kernel_by_repo_id_through_local_kernels(build, monkeypatch):
    """How users load it: `get_kernel(<hub repo id>, version=1)`; `LOCAL_KERNELS` points the
    repo id (from build.toml's `[general.hub] repo-id`) at the built tree, so no Hub is used."""
    import tomllib

    config = tomllib.loads((build.parent / "build.toml").read_text())
    repo_id = config["general"]["hub"]["repo-id"]
    assert repo_id == "kernel-builder-examples/silu-and-mul"
    monkeypatch.setenv("LOCAL_KERNELS", f"{repo_id}={build.parent}")
    module = kernels.get_kernel(repo_id, version=1, backend="cpu")
    x = torch.randn(5, 32, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(module.silu_and_mul(x), reference(x), rtol=0, atol=0)


def test_loading_the_build_writes_bytecode_that_verify_ignores(build):
    """`get_local_kernel` on `build/` writes `__pycache__/` there (as the scaffold's own tests
    do); `verify` still finds every variant the same as a rebuild."""
    module = kernels.get_local_kernel(build.parent, backend="cpu")
    assert module.silu_and_mul(torch.ones(1, 2)).shape == (1, 1)
    assert list((build / "torch-cpu").rglob("__pycache__")), "the loader wrote no bytecode"
    proc = subprocess.run(
        [str(kernel_builder()), "verify", str(build.parent)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "torch-cpu: same" in proc.stdout, proc.stdout
