"""`kernel-builder matrix check-wheel` on the torch wheel this venv installed (torch 2.11.0 from
PyPI, the CUDA 13.0 build; scripts/setup-venv.sh).

An installed distribution keeps the wheel's `METADATA`, `WHEEL` and `torch/version.py` byte
for byte, so each test zips those three into a wheel-shaped file named as the wheel was. A
real wheel file is checked too when one is on the machine (`$KERNEL_BUILDER_TORCH_WHEEL`, or
a `torch-*.whl` under pip's cache); otherwise that test is skipped, with the reason shown by
`pytest -ra`.
"""

from __future__ import annotations

import json
import os
import subprocess
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from conftest import kernel_builder

TORCH = metadata.distribution("torch")
VERSION_PY = Path(TORCH.locate_file("torch/version.py"))


def wheel_from_venv(tmp: Path, version_py: str | None = None) -> Path:
    """The wheel-shaped zip of the installed torch, `version_py` replacing the real file."""
    info = Path(TORCH.locate_file(f"torch-{TORCH.version}.dist-info"))
    assert (info / "METADATA").is_file(), info
    wheel_text = (info / "WHEEL").read_text()
    tag = next(line.split(":", 1)[1].strip() for line in wheel_text.splitlines() if line.startswith("Tag:"))
    path = tmp / f"torch-{TORCH.version}-{tag}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(f"{info.name}/METADATA", (info / "METADATA").read_bytes())
        z.writestr(f"{info.name}/WHEEL", wheel_text)
        z.writestr("torch/version.py", version_py if version_py is not None else VERSION_PY.read_bytes())
    return path


def check_wheel(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(kernel_builder()), "matrix", "check-wheel", *args], capture_output=True, text=True, check=False
    )


def test_the_installed_torch_2_11_cu130_has_no_cell_in_either_matrix(tmp_path):
    wheel = str(wheel_from_venv(tmp_path))
    r = check_wheel(wheel)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout == (
        "wheel: torch 2.11.0 (torch.__version__ 2.11.0+cu130)\n"
        "backend: cuda 13.0\n"
        "python: >=3.10 (the builder's CPython 3.13 satisfies it)\n"
        "tags: cp311-cp311-manylinux_2_28_x86_64\n"
        "matrix: 2026-12 (revision 2026-12-01)\n"
        "  manylinux_2_28_x86_64 (x86_64-linux): MISSING: no build set of matrix 2026-12 has torch 2.11 "
        "cuda 13.0 on x86_64-linux; for torch 2.11 it has cpu, tpu\n"
        "the matrix does NOT agree with this wheel\n"
    )
    r = check_wheel(wheel, "--matrix", "upstream-2026-08", "--json")
    assert r.returncode == 1
    report = json.loads(r.stdout)
    assert (report["matrix"], report["matrix_revision"], report["torch"]) == ("upstream-2026-08", "2026-08-20", "2.11")
    assert report["wheel"]["toolkit"] == "13.0"
    assert report["wheel"]["requires_python"] == ">=3.10"
    assert report["agrees"] is False


def test_the_same_wheel_relabelled_2_14_agrees_and_2_15_names_the_toolkit(tmp_path):
    real = VERSION_PY.read_text()
    assert "'2.11.0+cu130'" in real, real
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    r = check_wheel(str(wheel_from_venv(tmp_path / "a", real.replace("'2.11.0+cu130'", "'2.14.0+cu130'"))))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "  manylinux_2_28_x86_64 (x86_64-linux): torch214-cxx11-cu130-x86_64-linux (bundle)\n" in r.stdout
    assert r.stdout.endswith("the matrix agrees with this wheel\n")
    r = check_wheel(str(wheel_from_venv(tmp_path / "b", real.replace("'2.11.0+cu130'", "'2.15.0+cu130'"))))
    assert r.returncode == 1
    assert "MISSING: matrix 2026-12 builds torch 2.15 cuda on x86_64-linux with cuda 13.2, not 13.0" in r.stdout


def real_wheel() -> Path | None:
    if os.environ.get("KERNEL_BUILDER_TORCH_WHEEL"):
        return Path(os.environ["KERNEL_BUILDER_TORCH_WHEEL"])
    cache = Path(os.environ.get("PIP_CACHE_DIR", Path.home() / ".cache" / "pip"))
    return next(iter(sorted(cache.rglob("torch-*.whl"))), None) if cache.is_dir() else None


def test_a_real_torch_wheel_reads_as_the_installed_copy(tmp_path):
    wheel = real_wheel()
    if wheel is None:
        pytest.skip(
            "no real torch wheel here (set KERNEL_BUILDER_TORCH_WHEEL, or "
            "`pip download torch==2.11.0 --no-deps -d DIR`); the wheel-shaped copy was checked instead"
        )
    r = check_wheel(str(wheel), "--json")
    assert r.returncode in (0, 1), r.stdout + r.stderr
    report = json.loads(r.stdout)
    assert report["wheel"]["name"] == "torch" and report["wheel"]["tags"]
    assert report["agrees"] == (r.returncode == 0)
    copy = json.loads(check_wheel(str(wheel_from_venv(tmp_path)), "--json").stdout)
    if (copy["wheel"]["torch_version"], copy["wheel"]["tags"]) == (report["wheel"]["torch_version"], report["wheel"]["tags"]):
        assert report == copy
