"""kernels/relu-tvm-ffi, built for real: a `[tvm-ffi]` kernel compiled by `kernel-builder
build-and-copy --nix never` against this venv's tvm_ffi (apache-tvm-ffi, no torch headers),
named for tvm_ffi's major.minor (`tvm-ffi01-cpu-<arch>-linux`), linked to libtvm_ffi.so only,
loaded through `kernels.get_local_kernel` (whose variant choice compares that major.minor with
the installed `tvm_ffi.__version__`) and equal to `torch.relu`. The CUDA cell is compiled in
`tests/it/tvm_ffi.rs`.

The counter-case: a Python environment without tvm_ffi is refused with what to install, and
build/ is left as it was.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import tvm_ffi

from conftest import copy_kernel, kernel_builder

MAJOR, MINOR = tvm_ffi.__version__.split(".")[:2]
VARIANT = f"tvm-ffi{MAJOR}{MINOR}-cpu-{platform.machine()}-linux"


def kb(args: list[str], env: dict[str, str], ok: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(kernel_builder()), *args], capture_output=True, text=True, check=False, env=env)
    if ok:
        assert proc.returncode == 0, f"kernel-builder {' '.join(args)}\n{proc.stdout}\n{proc.stderr}"
    return proc


def build_args(kernel: Path, python: str = sys.executable) -> list[str]:
    return ["build-and-copy", str(kernel), "--nix", "never", "--python", python, "--variant", VARIANT]


@pytest.fixture(scope="module")
def tvm_build(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("relu-tvm-ffi")
    kernel = copy_kernel("relu-tvm-ffi", tmp)
    # Ninja's jobs fixed, so the build line is the same on every machine.
    env = dict(os.environ, KERNEL_BUILDER_CACHE_DIR=str(tmp / "cache"), KERNEL_BUILDER_JOBS="2")
    first = kb(build_args(kernel), env)
    return kernel, env, first


def test_builds_the_cpu_cell_named_for_tvm_ffi(tvm_build) -> None:
    kernel, _, first = tvm_build
    assert sorted(p.name for p in (kernel / "build").iterdir()) == ["hashes.json", VARIANT]
    variant = kernel / "build" / VARIANT
    meta = json.loads((variant / "metadata.json").read_text())
    ops_name = meta["id"]
    assert ops_name.startswith("_relu_tvm_ffi_cpu_") and len(ops_name) == len("_relu_tvm_ffi_cpu_") + 7
    # `<op namespace>.so`: no `lib` prefix, no `abi3` (a library tvm_ffi opens, not a Python module).
    assert sorted(p.name for p in variant.iterdir()) == sorted(
        ["__init__.py", "_ops.py", f"{ops_name}.so", "metadata.json", "symbols.json"]
    )
    assert first.stdout == f"built {VARIANT} (5 files, id {ops_name}, 2 jobs) -> {kernel}/build/{VARIANT}\n"
    assert meta["backend"] == {"type": "cpu"}
    assert meta["python-depends"] == ["tvm-ffi"]
    assert meta["build"]["native"] is True
    toolchain = meta["build"]["toolchain"]
    assert toolchain["tvm-ffi"] == tvm_ffi.__version__
    assert "torch" not in toolchain
    assert toolchain["python"] == "%d.%d" % sys.version_info[:2]
    hashes = json.loads((kernel / "build" / "hashes.json").read_text())
    nar = kb(["hash", str(variant)], dict(os.environ)).stdout.strip()
    assert hashes["variants"] == {VARIANT: nar}
    ops_py = (variant / "_ops.py").read_text()
    assert f'tvm_ffi.load_module(str(Path(__file__).resolve().parent / "{ops_name}.so"))' in ops_py


def test_links_libtvm_ffi_and_nothing_of_torch_or_python(tvm_build) -> None:
    kernel, _, _ = tvm_build
    (so,) = (kernel / "build" / VARIANT).glob("*.so")
    dynamic = subprocess.run(["readelf", "-d", str(so)], capture_output=True, text=True, check=True).stdout
    needed = sorted(line.split("[", 1)[1].rstrip("]") for line in dynamic.splitlines() if "(NEEDED)" in line)
    assert "libtvm_ffi.so" in needed, needed
    assert not [n for n in needed if n.startswith(("libtorch", "libc10", "libpython"))], needed
    assert "RPATH" not in dynamic and "RUNPATH" not in dynamic
    symbols = subprocess.run(["nm", "-D", str(so)], capture_output=True, text=True, check=True).stdout.split("\n")
    exported = {line.split()[-1] for line in symbols if " T " in line}
    assert "__tvm_ffi_relu_cpu" in exported and "__tvm_ffi_relu_cuda" not in exported
    undefined = [line.split()[-1] for line in symbols if line.strip().startswith("U ")]
    assert "TVMFFIErrorSetRaised" in undefined
    # No CPython symbol: the abi3 rule the build applies has nothing to judge.
    assert not [s for s in undefined if s.startswith(("Py", "_Py"))], undefined


def test_check_abi_passes(tvm_build) -> None:
    kernel, env, _ = tvm_build
    (report,) = json.loads(kb(["check-abi", "--json", str(kernel / "build" / VARIANT)], env).stdout)
    (lib,) = report["libraries"]
    assert lib["violations"] == []


def test_loads_with_kernels_and_equals_torch_relu(tvm_build) -> None:
    from kernels import get_local_kernel

    kernel, *_ = tvm_build
    relu = get_local_kernel(kernel / "build", backend="cpu")
    assert Path(relu.__file__).parent.name == VARIANT
    torch.manual_seed(0)
    for dtype in (torch.float32, torch.float64):
        for shape in ((1,), (4099,), (32, 1027), (0,)):
            x = torch.randn(shape, dtype=dtype)
            assert torch.equal(relu.relu(x), torch.relu(x)), (dtype, shape)
    x = torch.tensor([-1.0, -0.0, 0.0, 2.0, float("inf"), float("-inf"), float("nan")])
    out = torch.empty_like(x)
    assert relu.relu(x, out=out) is out
    assert torch.equal(out[:6], torch.tensor([0.0, 0.0, 0.0, 2.0, float("inf"), 0.0])) and torch.isnan(out[6])
    with pytest.raises(ValueError, match=r"out and x differ in dimension 0 \(9 vs 8\)"):
        relu.relu(torch.randn(8), out=torch.empty(9))
    with pytest.raises(TypeError, match="relu takes float32 or float64 tensors"):
        relu.relu(torch.ones(3, dtype=torch.float16))
    with pytest.raises(ValueError, match="must be contiguous"):
        relu.relu(torch.randn(4, 3).t())
    with pytest.raises(NotImplementedError, match="has no kernel for device type 'meta'"):
        relu.relu(torch.empty(3, device="meta"))


def test_unchanged_rebuild_is_reused_and_verify_says_same(tvm_build) -> None:
    kernel, env, _ = tvm_build
    (so,) = (kernel / "build" / VARIANT).glob("*.so")
    before = so.read_bytes()
    again = kb(build_args(kernel), env)
    assert again.stdout.startswith(f"reused {VARIANT} (5 files, id "), again.stdout
    assert so.read_bytes() == before
    out = kb(["verify", str(kernel), "--python", sys.executable, "--variant", VARIANT], env)
    assert out.stdout.startswith(f"{VARIANT}: same (sha256-"), out.stdout


def test_a_python_without_tvm_ffi_says_what_to_install(tvm_build, tmp_path: Path) -> None:
    kernel, env, _ = tvm_build
    before = {str(p.relative_to(kernel)): p.read_bytes() for p in sorted((kernel / "build").rglob("*")) if p.is_file()}
    # The system's Python without site-packages (-S) and isolated (-I): no tvm_ffi to find.
    python3 = shutil.which("python3", path="/usr/bin:/bin") or shutil.which("python3")
    assert python3, "no python3"
    bare = tmp_path / "python"
    bare.write_text(f'#!/bin/sh\nexec "{python3}" -I -S "$@"\n')
    bare.chmod(0o755)
    proc = kb(build_args(kernel, str(bare)), env, ok=False)
    assert proc.returncode == 1, proc.stderr
    assert (
        f"`{bare}` has no tvm_ffi, which a `[tvm-ffi]` kernel is built against; install it there "
        f"(`{bare} -m pip install apache-tvm-ffi`) or pass --python PATH to a Python that has it"
    ) in proc.stderr, proc.stderr
    after = {str(p.relative_to(kernel)): p.read_bytes() for p in sorted((kernel / "build").rglob("*")) if p.is_file()}
    assert after == before
