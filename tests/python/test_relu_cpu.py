"""kernels/relu's CPU cell, built for real: `kernel-builder build-and-copy --nix never` runs the
generated CMake project with this venv's torch, cmake, ninja and the system C++ compiler, and
the result loads through `kernels.get_local_kernel` and equals `torch.relu`.

The variant is the one this venv's torch gives (`torch<XY>-cxx11-cpu-<arch>-linux`), and a
second build with nothing changed is byte-identical, as `verify` (a fresh rebuild) confirms.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import copy_kernel, kernel_builder

MAJOR, MINOR = torch.__version__.split(".")[:2]
CPU_VARIANT = f"torch{MAJOR}{MINOR}-cxx11-cpu-{platform.machine()}-linux"


def kb(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(kernel_builder()), *args], capture_output=True, text=True, check=False, env=env)
    assert proc.returncode == 0, f"kernel-builder {' '.join(args)}\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def relu_build(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("relu")
    kernel = copy_kernel("relu", tmp)
    # Ninja's jobs fixed, so the build line is the same on every machine.
    env = dict(os.environ, KERNEL_BUILDER_CACHE_DIR=str(tmp / "cache"), KERNEL_BUILDER_JOBS="2")
    args = ["build-and-copy", str(kernel), "--nix", "never", "--python", sys.executable, "--variant", CPU_VARIANT]
    first = kb(args, env)
    return kernel, env, args, first


def test_builds_the_cpu_cell_the_venv_gives(relu_build) -> None:
    kernel, _, _, first = relu_build
    variant = kernel / "build" / CPU_VARIANT
    meta = json.loads((variant / "metadata.json").read_text())
    ops_name = meta["id"]
    assert ops_name.startswith("_relu_cpu_") and len(ops_name) == len("_relu_cpu_") + 7
    assert sorted(p.name for p in variant.iterdir()) == sorted(
        ["__init__.py", "_ops.py", f"{ops_name}.abi3.so", "metadata.json", "symbols.json"]
    )
    assert first.stdout == f"built {CPU_VARIANT} (5 files, id {ops_name}, 2 jobs) -> {kernel}/build/{CPU_VARIANT}\n"
    assert meta["backend"] == {"type": "cpu"}
    assert meta["build"]["native"] is True and meta["build"]["hermetic"] is False
    assert meta["build"]["toolchain"]["torch"] == torch.__version__
    assert set(meta["build"]["toolchain"]) == {"cmake", "cxx", "ninja", "python", "torch"}
    assert f"from . import {ops_name}" in (variant / "_ops.py").read_text()


def test_loads_with_kernels_and_equals_torch_relu(relu_build) -> None:
    from kernels import get_local_kernel

    kernel, *_ = relu_build
    relu = get_local_kernel(kernel / "build", backend="cpu")
    torch.manual_seed(0)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        x = torch.randn(4099, dtype=dtype)
        assert torch.equal(relu.relu(x), torch.relu(x))


def test_unchanged_rebuild_is_byte_identical_and_verify_says_same(relu_build) -> None:
    kernel, env, args, _ = relu_build
    so = next((kernel / "build" / CPU_VARIANT).glob("*.abi3.so"))
    before = so.read_bytes()
    kb(args, env)
    assert so.read_bytes() == before
    out = kb(["verify", str(kernel), "--python", sys.executable, "--variant", CPU_VARIANT], env)
    assert out.stdout.startswith(f"{CPU_VARIANT}: same (sha256-"), out.stdout


def test_the_project_tests_pass(relu_build) -> None:
    kernel, *_ = relu_build
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=kernel, capture_output=True, text=True, check=False, env=dict(os.environ, RELU_BACKEND="cpu"),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1].startswith("14 passed")


def test_the_hidden_assemble_builds_the_same_bytes(relu_build, tmp_path: Path) -> None:
    """`kernel-builder assemble` (what a Nix cell runs over its source, with an explicit
    toolchain and output directory) writes exactly the variant build-and-copy wrote."""
    from conftest import snapshot

    kernel, env, _, _ = relu_build
    out = tmp_path / "out"
    proc = kb(["assemble", "--source", str(kernel), "--backend", "cpu", "--out", str(out), "--python", sys.executable], env)
    assert proc.stdout == f"{out / CPU_VARIANT}\n"
    assert snapshot(out / CPU_VARIANT) == snapshot(kernel / "build" / CPU_VARIANT)


def test_abi_check_records_the_policy_met_and_a_requested_policy_is_enforced(relu_build) -> None:
    """The build runs the ABI check on the module: metadata.json records the oldest manylinux
    policy it meets (the same answer as `kernel-builder check-abi`), a host build that misses
    manylinux_2_28 warns with the symbol, and `--manylinux 2_28` then fails the build naming
    the library and the symbol, leaving build/ as it was."""
    kernel, env, args, first = relu_build
    variant = kernel / "build" / CPU_VARIANT
    meta = json.loads((variant / "metadata.json").read_text())
    (report,) = json.loads(kb(["check-abi", "--json", str(variant)], env).stdout)
    assert report["manylinux_met"] == meta["build"]["manylinux"]
    libs = report["libraries"]
    assert len(libs) == 1 and libs[0]["path"].endswith(".abi3.so")
    assert meta["build"]["manylinux"] == libs[0]["manylinux"]
    met = meta["build"]["manylinux"]
    assert met is not None and met.startswith("manylinux_2_")

    so = next(variant.glob("*.abi3.so"))
    before = {p.name: p.read_bytes() for p in variant.iterdir() if p.is_file()}
    if int(met.split("_")[2]) > 28:
        assert f"`{so.name}` is not manylinux_2_28: " in first.stderr, first.stderr
        proc = subprocess.run(
            [str(kernel_builder()), *args, "--manylinux", "2_28"], capture_output=True, text=True, check=False, env=env
        )
        assert proc.returncode == 1, proc.stderr
        assert "(asked for manylinux_2_28); nothing was swapped into build/" in proc.stderr, proc.stderr
        assert f"`{so.name}`: not manylinux_2_28: " in proc.stderr, proc.stderr
        assert {p.name: p.read_bytes() for p in variant.iterdir() if p.is_file()} == before
    # The policy it meets is accepted, and the bytes do not change.
    kb([*args, "--manylinux", met], env)
    assert {p.name: p.read_bytes() for p in variant.iterdir() if p.is_file()} == before


def test_a_relative_python_path_finds_its_tools(relu_build) -> None:
    """`--python .venv/bin/python` (README's recipe) is relative to where the command runs; the
    CMake and Ninja found beside it must still run from CMake's own build directory
    (regression: CMake failed with "Running '.venv/bin/ninja' '--version' failed")."""
    kernel, env, args, _ = relu_build
    rel = os.path.relpath(sys.executable, kernel.parent)
    assert not os.path.isabs(rel)
    rel_args = [a if a != sys.executable else rel for a in args]
    env = dict(env, KERNEL_BUILDER_CACHE_DIR=str(kernel.parent / "cache-relative"))
    proc = subprocess.run(
        [str(kernel_builder()), *rel_args], capture_output=True, text=True, check=False, env=env, cwd=kernel.parent
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"built {CPU_VARIANT} (5 files, id _relu_cpu_"), proc.stdout


def test_the_generated_setup_py_builds_the_kernel(relu_build, tmp_path: Path) -> None:
    """create-pyproject's Python build entry: `python setup.py build_kernel -- --variant V`, run
    from anywhere, builds the kernel with this interpreter's torch through kernel-builder."""
    kernel, env, _, _ = relu_build
    out_dir = tmp_path / "project"
    out_dir.mkdir()
    kb(["create-pyproject", str(kernel), "--out", str(out_dir)], env)
    assert (out_dir / "setup.py").read_text().startswith("# generated by kernel-builder; do not edit.\n")
    proc = subprocess.run(
        [sys.executable, str(out_dir / "setup.py"), "build_kernel", "--", "--variant", CPU_VARIANT],
        capture_output=True, text=True, check=False, cwd=tmp_path,
        env=dict(env, KERNEL_BUILDER=str(kernel_builder())),
    )
    assert proc.returncode == 0, proc.stderr
    # The module's first build stored the cell in the same cache: this build reuses it.
    assert proc.stdout.startswith(f"reused {CPU_VARIANT} (5 files, id _relu_cpu_"), proc.stdout + proc.stderr
    bad = subprocess.run([sys.executable, str(out_dir / "setup.py"), "install"], capture_output=True, text=True, check=False)
    assert bad.returncode == 1 and "usage: python setup.py build_kernel" in bad.stderr


def test_a_cudacxx_that_is_not_nvcc_is_refused_not_passed_over(relu_build) -> None:
    """`CUDACXX=/nonexistent` names a toolkit: the build refuses it instead of silently using the
    nvcc on PATH or in the venv (as `CXX=/nonexistent` is refused)."""
    kernel, env, _, _ = relu_build
    cuda_variant = f"torch{MAJOR}{MINOR}-cxx11-cu{torch.version.cuda.replace('.', '')}-{platform.machine()}-linux"
    proc = subprocess.run(
        [str(kernel_builder()), "build-and-copy", str(kernel), "--nix", "never", "--python", sys.executable,
         "--variant", cuda_variant],
        capture_output=True, text=True, check=False, env=dict(env, CUDACXX="/nonexistent"),
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "`CUDACXX` names `/nonexistent`, which is not an executable nvcc" in proc.stderr, proc.stderr
