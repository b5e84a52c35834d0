"""kernels/relu's CPU bundle cells built from pinned wheels (`build-and-copy --nix never`
without `--python`) pass relu's own tests in `kernel-builder testshell --variant CELL`, and
load through kernels 0.17.2 under the torch they were built for.

testshell makes each cell's test environment once, in the toolchain cache the Rust tests share
(`target/tmp/toolchain-cache/test-envs/`): the pinned torch wheel itself when the pins' CPython
(3.13) is here (a link to pyenv's goes on PATH, as in tests/it/shells.rs), else the same torch
release from PyPI for `python3`; with torch's dependencies (NVIDIA's CUDA libraries among them,
about 4 GB), kernels 0.17.2 and pytest. The environments are kept, unless
`KERNEL_BUILDER_TEST_DISCARD_TORCH_ENVS=1` (CI's setting, for its small disk) removes each one
after its test.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, copy_kernel, kernel_builder

TMP = REPO / "target" / "tmp"
TOOLCHAIN_CACHE = TMP / "toolchain-cache"
TORCHES = ["2.14", "2.15"]


def variant(torch: str) -> str:
    return f"torch{torch.replace('.', '')}-cxx11-cpu-{platform.machine()}-linux"


def shell_env(tmp: Path) -> dict[str, str]:
    """The environment of the kernel-builder runs: the shared toolchain cache, a cell cache of
    the test's own, and the pins' CPython on PATH when pyenv has it."""
    env = dict(
        os.environ,
        KERNEL_BUILDER_CACHE_DIR=str(tmp / "cache"),
        KERNEL_BUILDER_TOOLCHAIN_CACHE_DIR=str(TOOLCHAIN_CACHE),
    )
    for probe in ({}, {"PYENV_VERSION": "3.13.0"}):
        found = subprocess.run(
            ["python3.13", "-c", "import sys; print(sys.executable)"],
            capture_output=True, text=True, env={**os.environ, **probe}, check=False,
        )
        if found.returncode == 0:
            links = tmp / "py313"
            links.mkdir(exist_ok=True)
            link = links / "python3.13"
            if not link.exists():
                link.symlink_to(found.stdout.strip())
            env["PATH"] = f"{links}:{env['PATH']}"
            break
    return env


@pytest.fixture(scope="module")
def relu_built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    if platform.machine() != "x86_64":
        pytest.skip("the pinned CPU cells built here are x86_64-linux ones")
    tmp = tmp_path_factory.mktemp("pinned")
    kernel = copy_kernel("relu", tmp)
    env = shell_env(tmp)
    args = ["build-and-copy", str(kernel), "--nix", "never"]
    for t in TORCHES:
        args += ["--variant", variant(t)]
    proc = subprocess.run([str(kernel_builder()), *args], capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    built = [line.split(" (")[0] for line in proc.stdout.splitlines()]
    assert built == [f"built {variant(t)}" for t in TORCHES]
    return kernel, env


LOAD = """
import sys
from pathlib import Path
import os, torch, kernels
import relu as linked  # testshell links the cell's variant as the package
print(os.path.realpath(os.path.dirname(linked.__file__)))
relu = kernels.get_local_kernel(Path(sys.argv[1]), backend="cpu")
x = torch.randn(4096)
assert torch.equal(relu.relu(x), torch.relu(x))
print(torch.__version__, kernels.__version__, Path(relu.__file__).parent.name)
"""


@pytest.mark.parametrize("torch", TORCHES)
def test_cpu_cell_passes_its_own_tests_in_its_testshell(relu_built: tuple[Path, dict[str, str]], torch: str) -> None:
    kernel, env = relu_built
    shell = [str(kernel_builder()), "testshell", str(kernel), "--variant", variant(torch), "--"]
    try:
        loaded = subprocess.run([*shell, "python", "-c", LOAD, "build"], cwd=kernel, capture_output=True, text=True, env=env, check=False)
        tests = subprocess.run(
            # The console script, as a user types it: its shebang names the environment's
            # interpreter by absolute path, so the environment must live where it was made.
            [*shell, "pytest", "-q", "-p", "no:cacheprovider", "tests"],
            cwd=kernel, capture_output=True, text=True, env=env, check=False,
        )
    finally:
        if os.environ.get("KERNEL_BUILDER_TEST_DISCARD_TORCH_ENVS") == "1":
            for made in (TOOLCHAIN_CACHE / "test-envs").glob(f"torch-{torch}.0-*"):
                # Sealed read-only: removing its entries needs its directories writable.
                for parent, _, _ in os.walk(made):
                    os.chmod(parent, 0o755)
                shutil.rmtree(made)
    assert loaded.returncode == 0, loaded.stderr
    summary = f"testshell: the pinned toolchain of cell {variant(torch)}; `python` is the test environment `{TOOLCHAIN_CACHE.resolve()}/test-envs/torch-{torch}.0-"
    assert summary in loaded.stderr, loaded.stderr
    linked, version, kernels_version, name = loaded.stdout.split()
    assert linked == str((kernel / "build" / variant(torch)).resolve())
    assert version.startswith(f"{torch}.0")
    assert kernels_version == "0.17.2"
    assert name == variant(torch)
    # relu's own suite: every shape and dtype against torch.relu, NaN, `out=`, on the CPU cell.
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert tests.stdout.strip().splitlines()[-1].startswith("14 passed"), tests.stdout
