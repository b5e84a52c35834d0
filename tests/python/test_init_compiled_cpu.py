"""The compiled template's CPU source and torch binding are real, working code (issue 4).

It predates native compiled builds (tests/python/test_relu_cpu.py builds through the CLI): it compiles the generated
`torch-ext/torch_binding.cpp` and `<name>_cpu/<name>.cpp` itself with
`torch.utils.cpp_extension` (the op namespace and `registration.h` stand in for what the build
generates), lays the module out as a build variant, and runs the project's generated tests on
it through `kernels`.

Compiling takes minutes and needs ninja and a C++ compiler, so the test runs only with
`KERNEL_BUILDER_COMPILE_TESTS=1`.
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

from test_init_projects import REPO, _cli, _run, _summary

pytestmark = pytest.mark.skipif(
    os.environ.get("KERNEL_BUILDER_COMPILE_TESTS") != "1",
    reason="compiles C++ for minutes: set KERNEL_BUILDER_COMPILE_TESTS=1 to run",
)

# A stand-in for the registration.h that the build generates: the op library in the
# extension's namespace, and a Python module so the shared object imports as one.
REGISTRATION_H = """\
#pragma once
#include <Python.h>
#define KB_CONCAT_(A, B) A##B
#define KB_CONCAT(A, B) KB_CONCAT_(A, B)
#define KB_STRINGIFY_(A) #A
#define KB_STRINGIFY(A) KB_STRINGIFY_(A)
#define TORCH_LIBRARY_EXPAND(NAME, MODULE) TORCH_LIBRARY(NAME, MODULE)
#define REGISTER_EXTENSION(NAME)                                                  \\
  PyMODINIT_FUNC KB_CONCAT(PyInit_, NAME)() {                                     \\
    static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, KB_STRINGIFY(NAME), \\
                                        nullptr, 0, nullptr};                     \\
    return PyModule_Create(&module);                                              \\
  }
"""


def test_compiled_cpu_kernel_builds_and_passes_its_tests(tmp_path: Path) -> None:
    from torch.utils.cpp_extension import load

    name = "add-compiled"
    py = name.replace("-", "_")
    _run(
        [str(_cli()), "init", "--name", f"myorg/{name}", "--template", "compiled", "--flake-ref",
         f"path:{REPO}", "--backends", "cpu", "--", name],
        cwd=tmp_path,
    )
    project = tmp_path / name
    stub = tmp_path / "stub"
    stub.mkdir()
    (stub / "registration.h").write_text(REGISTRATION_H)

    ops_name = f"_{py}_cpu_0000000"
    build_dir = tmp_path / "ext"
    build_dir.mkdir()
    load(
        name=ops_name,
        sources=[str(project / "torch-ext" / "torch_binding.cpp"), str(project / f"{py}_cpu" / f"{py}.cpp")],
        extra_include_paths=[str(stub)],
        extra_cflags=["-DCPU_KERNEL", "-O2", "-Wall", "-Werror"],
        build_directory=str(build_dir),
        is_python_module=True,
    )

    major, minor = torch.__version__.split(".")[:2]
    variant = project / "build" / f"torch{major}{minor}-cxx11-cpu-{platform.machine()}-linux"
    variant.mkdir(parents=True)
    shutil.copy(build_dir / f"{ops_name}.so", variant / f"{ops_name}.abi3.so")
    shutil.copy(project / "torch-ext" / py / "__init__.py", variant / "__init__.py")
    (variant / "_ops.py").write_text(f"import torch\n\nfrom . import {ops_name}\n\nops = torch.ops.{ops_name}\n")
    (variant / "metadata.json").write_text(
        json.dumps(
            {"name": name, "id": ops_name, "version": 1, "license": "Apache-2.0", "python-depends": [],
             "kernel-depends": [], "backend": {"type": "cpu"}}
        )
    )

    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=project, capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _summary(proc) == "14 passed"
