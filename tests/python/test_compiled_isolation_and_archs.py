"""Compiled cells built by `kernel-builder build-and-copy --nix never` from small generated
kernels (the CLI, the generated CMake project, real compilers):

- two kernels that each keep a same-named function-local static counter, loaded in one
  process, count independently (they are built with `-fno-gnu-unique`: without it the dynamic
  loader merges the two counters and the second kernel continues the first one's count);
- the CUDA cell compiles without a GPU with PyPI's nvcc, and `cuobjdump` lists exactly the
  SASS and PTX targets that `cuda-capabilities` asks for (`7.5 8.0 9.0a`, `10.0f`,
  `12.0+PTX`). Each list is one small `.cu` without torch headers, so a compile is seconds.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import torch

from conftest import kernel_builder

BINDING_H = """\
#pragma once
#include <cstdint>
// Shared by both kernels, name for name: the function-local static is the same symbol in each.
inline int64_t next_count() {
  static int64_t count = 0;
  return count++;
}
"""

BINDING_CPP = """\
#include <torch/library.h>

#include "registration.h"
#include "counter.h"

int64_t count() { return next_count(); }

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) { ops.def("count() -> int", &count); }

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
"""


def write_kernel(root: Path, name: str, backend: str, kernel_src: dict[str, str], extra: str = "") -> Path:
    """A kernel `name` with `[torch] src` = the binding, one `[kernel.k]` of `backend`."""
    py = name.replace("-", "_")
    d = root / name
    (d / "torch-ext" / py).mkdir(parents=True)
    (d / "torch-ext" / py / "__init__.py").write_text("from ._ops import ops\n\n__all__ = ['ops']\n")
    (d / "torch-ext" / "torch_binding.cpp").write_text(BINDING_CPP)
    (d / "torch-ext" / "counter.h").write_text(BINDING_H)
    for rel, text in kernel_src.items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_text(text)
    srcs = ", ".join(f'"{s}"' for s in kernel_src)
    (d / "build.toml").write_text(
        f'[general]\nname = "{name}"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["{backend}"]\n\n'
        f'[torch]\nsrc = ["torch-ext/torch_binding.cpp", "torch-ext/counter.h"]\n\n'
        f'[kernel.k]\nbackend = "{backend}"\ndepends = ["torch"]\nsrc = [{srcs}]\n{extra}'
    )
    return d


def build(kernel: Path, env: dict[str, str]) -> Path:
    proc = subprocess.run(
        [str(kernel_builder()), "build-and-copy", str(kernel), "--nix", "never", "--python", sys.executable],
        capture_output=True, text=True, check=False, env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    variants = [p for p in (kernel / "build").iterdir() if p.is_dir()]
    assert len(variants) == 1, variants
    return variants[0]


def test_two_kernels_keep_their_own_function_static_counters(tmp_path: Path) -> None:
    from kernels import get_local_kernel

    env = dict(os.environ, KERNEL_BUILDER_CACHE_DIR=str(tmp_path / "cache"))
    cpu_src = {"k/k.cpp": "// the op is in the binding\n"}
    a = build(write_kernel(tmp_path, "counter-a", "cpu", cpu_src), env)
    b = build(write_kernel(tmp_path, "counter-b", "cpu", cpu_src), env)
    for variant in (a, b):
        so = next(variant.glob("*.abi3.so"))
        syms = subprocess.run(["readelf", "-W", "--dyn-syms", str(so)], capture_output=True, text=True, check=True)
        assert " UNIQUE " not in syms.stdout, f"{so} has STB_GNU_UNIQUE symbols"
    ka = get_local_kernel(a.parent, backend="cpu")
    kb = get_local_kernel(b.parent, backend="cpu")
    assert [ka.ops.count(), ka.ops.count()] == [0, 1]
    assert [kb.ops.count(), kb.ops.count()] == [0, 1]
    assert ka.ops.count() == 2


CUDA_ROOT = Path(sysconfig.get_paths()["purelib"]) / "nvidia" / "cu13"
CUOBJDUMP = CUDA_ROOT / "bin" / "cuobjdump"

CUDA_SRC = """\
#include <cuda_runtime.h>
#include <cstdint>
__global__ void scale(float *x, int64_t n) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= 2.0f;
}
void launch_scale(float *x, int64_t n) { scale<<<static_cast<unsigned>((n + 255) / 256), 256>>>(x, n); }
"""


def cuobjdump(*args: str) -> str:
    return subprocess.run([str(CUOBJDUMP), *args], capture_output=True, text=True, check=True).stdout


def targets(so: Path) -> tuple[list[str], list[str]]:
    """(SASS architectures, PTX architectures) of a module, from cuobjdump's summary: each
    entry is `Fatbin elf code:` or `Fatbin ptx code:` followed by `arch = <arch>` (a family
    cubin says `sm_100f` there; `--list-elf` names it `sm_100`; PTX is listed as `sm_120` and
    reported here as `compute_120`). The counts are checked
    against `--list-elf` and `--list-ptx`."""
    entries = re.findall(r"^Fatbin (elf|ptx) code:\n(?:.*\n)*?arch = (\S+)$", cuobjdump(str(so)), re.M)
    sass = sorted(a for kind, a in entries if kind == "elf")
    ptx = sorted(a.replace("sm_", "compute_") for kind, a in entries if kind == "ptx")
    assert len(re.findall(r"\.cubin$", cuobjdump("--list-elf", str(so)), re.M)) == len(sass)
    listed_ptx = re.findall(r"\.(\w+)\.ptx$", cuobjdump("--list-ptx", str(so)), re.M)
    assert sorted(a.replace("sm_", "compute_") for a in listed_ptx) == ptx
    return sass, ptx


@pytest.mark.skipif(torch.version.cuda is None, reason="needs a CUDA build of torch (the CUDA cell is named after it)")
@pytest.mark.parametrize(
    "caps, elf, ptx",
    [
        (["7.5", "8.0", "9.0a"], ["sm_75", "sm_80", "sm_90a"], []),
        (["10.0f"], ["sm_100f"], []),
        (["12.0+PTX"], ["sm_120"], ["compute_120"]),
    ],
)
def test_cuda_cell_holds_exactly_the_requested_targets(tmp_path: Path, caps, elf, ptx) -> None:
    if not CUOBJDUMP.is_file():
        pytest.fail(f"{CUOBJDUMP} is missing: run scripts/setup-venv.sh (nvidia-cuda-cuobjdump)")
    env = dict(os.environ, KERNEL_BUILDER_CACHE_DIR=str(tmp_path / "cache"))
    caps_toml = ", ".join(f'"{c}"' for c in caps)
    kernel = write_kernel(tmp_path, "scale", "cuda", {"k/scale.cu": CUDA_SRC}, f"cuda-capabilities = [{caps_toml}]\n")
    variant = build(kernel, env)
    cu = torch.version.cuda.replace(".", "")
    assert variant.name == f"torch{''.join(torch.__version__.split('.')[:2])}-cxx11-cu{cu}-x86_64-linux"
    so = next(variant.glob("*.abi3.so"))
    assert targets(so) == (elf, ptx)


def test_a_compile_failure_shows_the_command_and_the_error_and_leaves_build_as_it_was(tmp_path: Path) -> None:
    env = dict(os.environ, KERNEL_BUILDER_CACHE_DIR=str(tmp_path / "cache"))
    kernel = write_kernel(tmp_path, "broken", "cpu", {"k/k.cpp": "// fine for now\n"})
    variant = build(kernel, env)
    before = {p.name: p.read_bytes() for p in variant.iterdir()}
    (kernel / "k" / "k.cpp").write_text("int f() { return undeclared_name; }\n")
    proc = subprocess.run(
        [str(kernel_builder()), "build-and-copy", str(kernel), "--nix", "never", "--python", sys.executable],
        capture_output=True, text=True, check=False, env=env,
    )
    assert proc.returncode == 1
    err = proc.stderr
    assert err.startswith(f"error: cannot build variant `{variant.name}`\n  caused by: the compile (ninja) failed (exit status: 1): `"), err
    assert "--- first errors ---\nFAILED: " in err, err
    assert "k/k.cpp:1:18: error: 'undeclared_name' was not declared in this scope" in err, err
    assert "--- last lines of its output ---" in err, err
    assert {p.name: p.read_bytes() for p in variant.iterdir()} == before
    assert sorted(p.name for p in (kernel / "build").iterdir()) == sorted([variant.name, "hashes.json"])
