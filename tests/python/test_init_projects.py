"""Projects made by `kernel-builder init` build, load through the `kernels` library, and pass
their own generated tests (issue 4).

Each test runs the real CLI: `init` into a temporary directory (with this repository as the
flake reference, so nothing is fetched), `build-and-copy --nix never`, then loads `build/`
with `kernels.get_local_kernel` and runs the project's generated pytest with this interpreter.

The CLI is `$KERNEL_BUILDER` when set, else `target/debug/kernel-builder` at the repository
root (`cargo build` makes it).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from kernels import get_local_kernel

REPO = Path(__file__).resolve().parents[2]


def _cli() -> Path:
    override = os.environ.get("KERNEL_BUILDER")
    exe = Path(override) if override else REPO / "target" / "debug" / "kernel-builder"
    if not (exe.is_file() and os.access(exe, os.X_OK)):
        pytest.fail(f"kernel-builder CLI not found at {exe}: run `cargo build` first or set KERNEL_BUILDER", pytrace=False)
    return exe


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        pytest.fail(
            f"{' '.join(args)} exited {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}",
            pytrace=False,
        )
    return proc


def _init_and_build(tmp: Path, name: str, template: str, backends: list[str]) -> Path:
    """`init` a project named `name` in `tmp`, build it natively; return the project dir."""
    cli = str(_cli())
    _run(
        [cli, "init", "--name", f"myorg/{name}", "--template", template, "--flake-ref", f"path:{REPO}",
         "--backends", *backends, "--", name],
        cwd=tmp,
    )
    project = tmp / name
    _run([cli, "build-and-copy", str(project), "--nix", "never"], cwd=tmp)
    return project


def _generated_tests(project: Path) -> subprocess.CompletedProcess[str]:
    """Run the project's own tests with this interpreter (its torch and kernels)."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
    )


def _summary(proc: subprocess.CompletedProcess[str]) -> str:
    """The last line of pytest's output, e.g. `14 passed in 3.2s` without the timing."""
    last = proc.stdout.strip().splitlines()[-1]
    return last.split(" in ")[0]


def test_torch_cpu_project_builds_loads_and_passes_its_tests(tmp_path: Path) -> None:
    project = _init_and_build(tmp_path, "add-torch", "torch", ["cpu"])
    assert sorted(p.name for p in (project / "build").iterdir() if p.is_dir()) == ["torch-cpu"]

    # A CUDA build of torch on a machine without a GPU would ask for torch-cuda: name the backend.
    kernel = get_local_kernel(project / "build", backend="cpu")
    assert kernel.__all__ == ["add_torch"]
    x = torch.arange(10, dtype=torch.float32)
    y = torch.full((10,), 0.5)
    assert torch.equal(kernel.add_torch(x, y), x + 0.5)
    with pytest.raises(ValueError, match=r"add_torch: shapes differ: \(10,\) and \(3,\)"):
        kernel.add_torch(x, torch.ones(3))

    proc = _generated_tests(project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _summary(proc) == "14 passed"


def test_generated_tests_catch_a_wrong_kernel(tmp_path: Path) -> None:
    """The generated test compares against torch: a built kernel computing x - y fails it."""
    project = _init_and_build(tmp_path, "add-torch", "torch", ["cpu"])
    op = project / "build" / "torch-cpu" / "op.py"
    op.write_text(op.read_text().replace("torch.add(x, y)", "torch.sub(x, y)"))
    proc = _generated_tests(project)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert _summary(proc) == "12 failed, 2 passed"


def _has_gpu() -> bool:
    return torch.cuda.is_available() and torch.version.cuda is not None


@pytest.mark.parametrize("template", ["triton", "helion"])
def test_gpu_projects_load_here(tmp_path: Path, template: str) -> None:
    """Triton and Helion projects (backend cuda) load through `kernels` even without a GPU;
    their generated tests run on a CUDA GPU and are skipped elsewhere."""
    name = f"add-{template}"
    project = _init_and_build(tmp_path, name, template, ["cuda"])
    assert sorted(p.name for p in (project / "build").iterdir() if p.is_dir()) == ["torch-cuda"]
    if template == "helion" and importlib.util.find_spec("helion") is None:
        # The loader refuses a kernel whose python-depends are missing.
        with pytest.raises(Exception, match="helion"):
            get_local_kernel(project / "build", backend="cuda")
        return
    kernel = get_local_kernel(project / "build", backend="cuda")
    assert kernel.__all__ == [name.replace("-", "_")]

    proc = _generated_tests(project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _summary(proc) == ("14 passed" if _has_gpu() else "14 skipped")


# Run in a fresh interpreter: the interpreter switches are read when triton / helion load.
_INTERPRETED_CHECK = """
import sys
from pathlib import Path

import torch
from kernels import get_local_kernel

build, name, dtypes = Path(sys.argv[1]), sys.argv[2], sys.argv[3].split(",")
kernel = get_local_kernel(build, backend="cuda")
op = getattr(kernel, name)
torch.manual_seed(0)
checked = 0
for dtype in [getattr(torch, d) for d in dtypes]:
    for shape in [(1,), (1000,), (65539,), (32, 1027)]:
        x = torch.randn(shape, dtype=dtype)
        y = torch.randn(shape, dtype=dtype)
        torch.testing.assert_close(op(x, y), x + y)
        checked += 1
print(f"checked {checked}")
"""


@pytest.mark.parametrize(
    ("template", "switch", "dtypes"),
    [
        # Triton's interpreter computes bfloat16 wrongly (numpy has no bfloat16): GPUs only.
        ("triton", "TRITON_INTERPRET", "float32,float16"),
        ("helion", "HELION_INTERPRET", "float32,float16,bfloat16"),
    ],
)
def test_gpu_kernels_compute_right_in_the_interpreter(tmp_path: Path, template: str, switch: str, dtypes: str) -> None:
    """Without a GPU, the built Triton and Helion kernels still run, on CPU tensors, under their
    interpreters; loaded through `kernels`, they match `x + y`."""
    if template == "helion" and importlib.util.find_spec("helion") is None:
        pytest.skip("helion is not installed in this environment")
    name = f"add-{template}"
    project = _init_and_build(tmp_path, name, template, ["cuda"])
    env = dict(os.environ, **{switch: "1"})
    proc = subprocess.run(
        [sys.executable, "-c", _INTERPRETED_CHECK, str(project / "build"), name.replace("-", "_"), dtypes],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == f"checked {4 * len(dtypes.split(','))}"
