"""kernels/relu-stable-abi, built for real: a CPU (and CUDA) kernel written against torch's stable ABI only
(`torch/csrc/stable/library.h`, `STABLE_TORCH_LIBRARY`, `torch::stable::Tensor`), compiled by
`kernel-builder build-and-copy --nix never` with this venv's torch against the stable headers
and the C shim alone, named for its ABI target (`torch-stable-abi211-cpu-<arch>-linux`, not
for the torch that built it), passing `check-abi`'s torch rule, and loaded through
`kernels.get_local_kernel`, equal to `torch.relu`.

The counter-cases: a stable-ABI kernel that includes an ATen header does not compile (the
build says which header is outside the stable API), and one that reaches a libtorch C++ symbol
without any torch header is refused by the build's ABI check, leaving build/ as it was.

The CUDA cell (compiled here without a GPU, with the venv's nvcc) is checked the same way: only
the shim's libraries (libtorch_cpu.so, libtorch_cuda.so), the torch rule, exactly the SASS the
capability list asks for. `scripts/gpu-relu-check.sh` runs it on an H200.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import torch

from conftest import copy_kernel, kernel_builder

VARIANT = f"torch-stable-abi211-cpu-{platform.machine()}-linux"
CUDA_ROOT = Path(sysconfig.get_paths()["purelib"]) / "nvidia" / "cu13"


def kb(args: list[str], env: dict[str, str], ok: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(kernel_builder()), *args], capture_output=True, text=True, check=False, env=env)
    if ok:
        assert proc.returncode == 0, f"kernel-builder {' '.join(args)}\n{proc.stdout}\n{proc.stderr}"
    return proc


def build_args(kernel: Path, variant: str = VARIANT) -> list[str]:
    # One named cell: with nvcc about, a plain build would also compile the CUDA cell.
    return ["build-and-copy", str(kernel), "--nix", "never", "--python", sys.executable, "--variant", variant]


@pytest.fixture(scope="module")
def stable_build(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("relu-stable-abi")
    kernel = copy_kernel("relu-stable-abi", tmp)
    # Ninja's jobs fixed, so the build line is the same on every machine.
    env = dict(os.environ, KERNEL_BUILDER_CACHE_DIR=str(tmp / "cache"), KERNEL_BUILDER_JOBS="2")
    first = kb(build_args(kernel), env)
    return kernel, env, first


def test_builds_the_one_stable_abi_cell(stable_build) -> None:
    kernel, _, first = stable_build
    assert sorted(p.name for p in (kernel / "build").iterdir()) == ["hashes.json", VARIANT]
    variant = kernel / "build" / VARIANT
    meta = json.loads((variant / "metadata.json").read_text())
    ops_name = meta["id"]
    assert ops_name.startswith("_relu_stable_abi_cpu_") and len(ops_name) == len("_relu_stable_abi_cpu_") + 7
    assert sorted(p.name for p in variant.iterdir()) == sorted(
        ["__init__.py", "_ops.py", f"{ops_name}.abi3.so", "metadata.json", "symbols.json"]
    )
    assert first.stdout == f"built {VARIANT} (5 files, id {ops_name}, 2 jobs) -> {kernel}/build/{VARIANT}\n"
    assert meta["backend"] == {"type": "cpu"}
    assert meta["build"]["native"] is True
    assert meta["build"]["toolchain"]["torch"] == torch.__version__


def test_links_only_the_c_shim_library(stable_build) -> None:
    kernel, _, _ = stable_build
    so = next((kernel / "build" / VARIANT).glob("*.abi3.so"))
    dynamic = subprocess.run(["readelf", "-d", str(so)], capture_output=True, text=True, check=True).stdout
    needed = sorted(line.split("[", 1)[1].rstrip("]") for line in dynamic.splitlines() if "(NEEDED)" in line)
    torch_libs = [n for n in needed if n.startswith(("libtorch", "libc10"))]
    assert torch_libs == ["libtorch_cpu.so"], needed
    # What it takes from libtorch_cpu.so is C: the shim's aoti_torch_*/torch_* functions.
    undefined = subprocess.run(
        ["nm", "-D", "--undefined-only", str(so)], capture_output=True, text=True, check=True
    ).stdout.split()
    assert "torch_library_impl" in undefined and "aoti_torch_get_numel" in undefined
    demangled = subprocess.run(["c++filt"], input="\n".join(undefined), capture_output=True, text=True).stdout
    assert not [s for s in demangled.splitlines() if s.startswith(("c10::", "at::", "torch::"))]


def test_check_abi_applies_the_torch_rule(stable_build) -> None:
    kernel, env, _ = stable_build
    variant = kernel / "build" / VARIANT
    for extra in (["--torch-stable-abi", "2.11"], []):
        (report,) = json.loads(kb(["check-abi", "--json", *extra, str(variant)], env).stdout)
        # Without the flag the target comes from the variant's name.
        assert report["torch_stable_abi"] == "2.11"
        (lib,) = report["libraries"]
        assert lib["violations"] == []
    text = kb(["check-abi", str(kernel)], env).stdout
    assert text.endswith(" and the torch stable ABI 2.11 (C shim only)\n"), text
    # The rule really runs: built for 2.11, the library calls shim functions that 2.10 lacks.
    kb(["check-abi", "--torch-stable-abi", "2.12", str(variant)], env)
    proc = kb(["check-abi", "--torch-stable-abi", "2.10", str(variant)], env, ok=False)
    assert proc.returncode == 1
    assert "torch stable ABI 2.10: torch_dtype_float8_e8m0fnu was added to the C shim in torch 2.11" in proc.stdout


def test_loads_with_kernels_and_equals_torch_relu(stable_build) -> None:
    from kernels import get_local_kernel

    kernel, *_ = stable_build
    relu = get_local_kernel(kernel / "build", backend="cpu")
    torch.manual_seed(0)
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        for shape in ((1,), (4099,), (32, 1027)):
            x = torch.randn(shape, dtype=dtype)
            assert torch.equal(relu.relu(x), torch.relu(x)), (dtype, shape)
    x = torch.tensor([-1.0, 0.0, 2.0, float("nan")])
    out = torch.empty_like(x)
    assert relu.relu(x, out=out) is out
    assert torch.equal(out[:3], torch.tensor([0.0, 0.0, 2.0])) and torch.isnan(out[3])
    with pytest.raises(RuntimeError, match="same shape"):
        relu.relu(torch.randn(8), out=torch.empty(9))
    with pytest.raises(RuntimeError, match="unsupported dtype Int"):
        relu.relu(torch.ones(3, dtype=torch.int32))


def test_unchanged_rebuild_is_byte_identical_and_verify_says_same(stable_build) -> None:
    kernel, env, _ = stable_build
    so = next((kernel / "build" / VARIANT).glob("*.abi3.so"))
    before = so.read_bytes()
    kb(build_args(kernel), env)
    assert so.read_bytes() == before
    out = kb(["verify", str(kernel), "--python", sys.executable], env)
    assert out.stdout.startswith(f"{VARIANT}: same (sha256-"), out.stdout


def _variant_files(kernel: Path) -> dict[str, bytes]:
    return {str(p.relative_to(kernel)): p.read_bytes() for p in sorted((kernel / "build").rglob("*")) if p.is_file()}


def test_a_header_outside_the_stable_api_does_not_compile(stable_build) -> None:
    kernel, env, _ = stable_build
    before = _variant_files(kernel)
    src = kernel / "relu_cpu" / "relu.cpp"
    original = src.read_text()
    try:
        src.write_text("#include <ATen/core/Tensor.h>\n" + original)
        proc = kb(build_args(kernel), env, ok=False)
    finally:
        src.write_text(original)
    assert proc.returncode == 1, proc.stderr
    assert "fatal error: ATen/core/Tensor.h: No such file or directory" in proc.stderr, proc.stderr
    assert (
        "`ATen/core/Tensor.h` is not part of torch's stable ABI: this kernel sets `[torch] stable-abi`, so it "
        "compiles against the stable headers only (torch/csrc/stable/, torch/headeronly/, "
        "torch/csrc/inductor/aoti_torch/c/, torch/csrc/inductor/aoti_torch/generated/)"
    ) in proc.stderr, proc.stderr
    assert _variant_files(kernel) == before


def test_a_libtorch_cxx_symbol_fails_the_build(stable_build) -> None:
    """No torch header reaches c10's C++ ABI here, but a declaration does: the build's ABI
    check refuses the library, naming the symbol, and nothing is swapped into build/."""
    kernel, env, _ = stable_build
    before = _variant_files(kernel)
    src = kernel / "relu_cpu" / "relu.cpp"
    original = src.read_text()
    try:
        src.write_text(
            original
            + "\nnamespace c10 { void set_thread_name(const char *); }\n"
            + "extern \"C\" void relu_stable_name_thread() { c10::set_thread_name(\"relu\"); }\n"
        )
        proc = kb(build_args(kernel), env, ok=False)
    finally:
        src.write_text(original)
    assert proc.returncode == 1, proc.stderr
    assert f"the ABI check of `{VARIANT}` failed; nothing was swapped into build/:" in proc.stderr, proc.stderr
    assert (
        "torch stable ABI: _ZN3c1015set_thread_nameEPKc [c10::set_thread_name] is a libtorch C++ symbol; "
        "use the C shim or torch::stable"
    ) in proc.stderr, proc.stderr
    assert _variant_files(kernel) == before


@pytest.mark.skipif(torch.version.cuda is None, reason="needs a CUDA build of torch (the CUDA cell is named after it)")
def test_the_cuda_cell_uses_the_shim_only_and_holds_the_requested_sass(tmp_path: Path) -> None:
    cuobjdump = CUDA_ROOT / "bin" / "cuobjdump"
    if not cuobjdump.is_file():
        pytest.fail(f"{cuobjdump} is missing: run scripts/setup-venv.sh (nvidia-cuda-cuobjdump)")
    kernel = copy_kernel("relu-stable-abi", tmp_path)
    env = dict(os.environ, KERNEL_BUILDER_CACHE_DIR=str(tmp_path / "cache"))
    cuda = f"torch-stable-abi211-cu{torch.version.cuda.replace('.', '')}-{platform.machine()}-linux"
    out = kb(build_args(kernel, cuda), env)
    assert sorted(p.name for p in (kernel / "build").iterdir()) == ["hashes.json", cuda], out.stdout
    variant = kernel / "build" / cuda
    meta = json.loads((variant / "metadata.json").read_text())
    assert meta["id"].startswith("_relu_stable_abi_cuda_")
    assert meta["backend"]["type"] == "cuda"
    so = variant / f"{meta['id']}.abi3.so"
    dynamic = subprocess.run(["readelf", "-d", str(so)], capture_output=True, text=True, check=True).stdout
    needed = [line.split("[", 1)[1].rstrip("]") for line in dynamic.splitlines() if "(NEEDED)" in line]
    assert [n for n in needed if n.startswith(("libtorch", "libc10"))] == ["libtorch_cpu.so", "libtorch_cuda.so"], needed
    undefined = subprocess.run(["nm", "-D", "--undefined-only", str(so)], capture_output=True, text=True, check=True)
    assert "aoti_torch_get_current_cuda_stream" in undefined.stdout.split()
    (report,) = json.loads(kb(["check-abi", "--json", str(variant)], env).stdout)
    assert report["torch_stable_abi"] == "2.11"
    assert [lib["violations"] for lib in report["libraries"]] == [[]]
    listed = subprocess.run([str(cuobjdump), "--list-elf", str(so)], capture_output=True, text=True, check=True)
    assert re.findall(r"\.(sm_\w+)\.cubin$", listed.stdout, re.M) == ["sm_90"], listed.stdout
