"""kernels/relu's CPU bundle cells built from pinned wheels (`build-and-copy --nix never`
without `--python`) load through kernels 0.17.2 under the torch they were built for, each in
its own environment, and equal `torch.relu`.

The environments hold PyPI's torch 2.1X.0 with the requirements it declares but Triton (loading
a CPU cell never imports it; a gigabyte per environment) and kernels 0.17.2, installed without
pip's cache. PyPI's torch pulls NVIDIA's CUDA libraries, about 4.4 GB per environment, so they
are made once under `target/tmp/torch-envs/` and kept, unless
`KERNEL_BUILDER_TEST_DISCARD_TORCH_ENVS=1` (CI's setting, for its small disk) removes each one
after its test. The toolchain cache is the one the Rust tests share
(`target/tmp/toolchain-cache`).
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, copy_kernel, kernel_builder

TMP = REPO / "target" / "tmp"
TORCHES = ["2.14", "2.15"]


def variant(torch: str) -> str:
    return f"torch{torch.replace('.', '')}-cxx11-cpu-{platform.machine()}-linux"


def torch_env(torch: str) -> Path:
    """The interpreter of an environment with PyPI's torch `torch`.0 and kernels 0.17.2."""
    env = TMP / "torch-envs" / f"torch-{torch}.0"
    python = env / "bin" / "python"
    done = env / ".ready"
    if not done.is_file():
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(env)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q", "--no-cache-dir"]
        subprocess.run([*pip, "--no-deps", f"torch=={torch}.0"], check=True)
        subprocess.run([*pip, *torch_requirements_but_triton(python), "kernels==0.17.2"], check=True)
        done.write_text("")
        print(f"made {env} in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return python


def torch_requirements_but_triton(python: Path) -> list[str]:
    """The requirements the installed torch declares (markers kept, extras left out), Triton's
    apart: torch imports without it, and the CPU cell never needs it."""
    listed = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(*m.requires('torch'), sep='\\n')"],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()
    return [r for r in listed if "extra ==" not in r and not r.lower().startswith("triton")]


def discard_torch_envs() -> bool:
    return os.environ.get("KERNEL_BUILDER_TEST_DISCARD_TORCH_ENVS") == "1"


@pytest.fixture(scope="module")
def relu_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if platform.machine() != "x86_64":
        pytest.skip("the pinned CPU cells built here are x86_64-linux ones")
    tmp = tmp_path_factory.mktemp("pinned")
    kernel = copy_kernel("relu", tmp)
    env = dict(
        os.environ,
        KERNEL_BUILDER_CACHE_DIR=str(tmp / "cache"),
        KERNEL_BUILDER_TOOLCHAIN_CACHE_DIR=str(TMP / "toolchain-cache"),
    )
    args = ["build-and-copy", str(kernel), "--nix", "never"]
    for t in TORCHES:
        args += ["--variant", variant(t)]
    proc = subprocess.run([str(kernel_builder()), *args], capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    built = [line.split(" (")[0] for line in proc.stdout.splitlines()]
    assert built == [f"built {variant(t)}" for t in TORCHES]
    return kernel / "build"


LOAD = """
import sys
from pathlib import Path
import torch, kernels
relu = kernels.get_local_kernel(Path(sys.argv[1]), backend="cpu")
x = torch.randn(4096)
out = torch.empty_like(x)
assert torch.equal(relu.relu(x), torch.relu(x))
print(torch.__version__, kernels.__version__, Path(relu.__file__).parent.name)
"""


@pytest.mark.parametrize("torch", TORCHES)
def test_cpu_cell_loads_under_its_torch_and_equals_torch_relu(relu_build: Path, torch: str) -> None:
    python = torch_env(torch)
    try:
        proc = subprocess.run([str(python), "-c", LOAD, str(relu_build)], capture_output=True, text=True, check=False)
    finally:
        if discard_torch_envs():
            shutil.rmtree(python.parent.parent)
    assert proc.returncode == 0, proc.stderr
    version, kernels_version, loaded = proc.stdout.split()
    assert version.startswith(f"{torch}.0")
    assert kernels_version == "0.17.2"
    assert loaded == variant(torch)
