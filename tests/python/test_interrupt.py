"""Ctrl-C during `kernel-builder build-and-copy`: SIGINT (or SIGTERM) sent to a real compiled
build (kernels/relu-stable-abi's CPU cell, while CMake/Ninja/g++ run) ends it with status
128 + signal, the temporary directory in build/ removed, build/ exactly as it was (or gone
again when this run created it), and the compile it started stopped too; the next build then
finds nothing left over.
"""

from __future__ import annotations

import os
import platform
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import copy_kernel, kernel_builder


def children_of(pid: int) -> list[int]:
    """Direct children of `pid`, from /proc."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(entry.name))
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def snapshot(build: Path) -> dict[str, bytes]:
    return {str(p.relative_to(build)): p.read_bytes() for p in sorted(build.rglob("*")) if p.is_file()}


def tmp_dirs(build: Path) -> list[str]:
    return sorted(p.name for p in build.iterdir() if p.name.startswith(".kernel-builder-tmp-")) if build.is_dir() else []


def args(kernel: Path) -> list[str]:
    # The CPU cell only: with nvcc about, a plain build would also compile the CUDA cell.
    cell = f"torch-stable-abi211-cpu-{platform.machine()}-linux"
    return [str(kernel_builder()), "build-and-copy", str(kernel), "--nix", "never", "--python", sys.executable, "--variant", cell]


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def interrupt_while_compiling(kernel: Path, env: dict[str, str], sig: int, child: str | None = None) -> tuple[int, str]:
    """Start a build, wait until its temporary directory exists and it runs a child (`child`:
    `cmake` configuring, `ninja` compiling; None: either), send `sig` to the build alone, and
    return its status and stderr. Also checks that the child it ran is gone soon after."""
    proc = subprocess.Popen(args(kernel), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    build = kernel / "build"
    deadline = time.monotonic() + 120
    kids: list[int] = []
    while time.monotonic() < deadline and proc.poll() is None:
        kids = [k for k in children_of(proc.pid) if child is None or comm(k) == child]
        if tmp_dirs(build) and kids:
            break
        time.sleep(0.01)
    assert proc.poll() is None and kids, "the build ended before it could be interrupted"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    deadline = time.monotonic() + 30
    while any(alive(k) for k in kids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(k) for k in kids), f"the build's children {kids} still run"
    return proc.returncode, err


@pytest.fixture
def kernel(tmp_path: Path):
    k = copy_kernel("relu-stable-abi", tmp_path)
    env = dict(os.environ, KERNEL_BUILDER_CACHE_DIR=str(tmp_path / "cache"))
    return k, env


def test_sigint_on_a_first_build_removes_the_build_dir_it_made(kernel) -> None:
    k, env = kernel
    code, err = interrupt_while_compiling(k, env, signal.SIGINT)
    assert code == 130, err
    assert err.splitlines()[-1].startswith("interrupted (SIGINT); removed `"), err
    assert ".kernel-builder-tmp-" in err.splitlines()[-1] and err.splitlines()[-1].endswith(f", `{k}/build`"), err
    assert not (k / "build").exists()


def test_sigint_and_sigterm_leave_build_as_it_was(kernel) -> None:
    k, env = kernel
    first = subprocess.run(args(k), capture_output=True, text=True, env=env)
    assert first.returncode == 0, first.stderr
    build = k / "build"
    before = snapshot(build)
    src = k / "relu_cpu" / "relu.cpp"
    # Interrupted while CMake configures (the next build must configure again, not reuse the
    # old build.ninja), then while Ninja compiles.
    for sig, code, child in ((signal.SIGINT, 130, "cmake"), (signal.SIGTERM, 143, "ninja")):
        # A changed source, so that the build configures and compiles again (an unchanged
        # one is instant).
        src.write_text(src.read_text() + f"// changed before {sig.name}\n")
        got, err = interrupt_while_compiling(k, env, sig, child)
        assert got == code, err
        (tmp,) = [line for line in err.splitlines() if line.startswith(f"interrupted ({sig.name}); removed `")]
        # Newest first: the compilers' TMPDIR in the cell's work directory in the cache (unless
        # the build thread removed it already, as its child failed), then the temporary
        # directory in build/.
        cell = args(k)[-1]
        work = Path(env["KERNEL_BUILDER_CACHE_DIR"]) / "cmake-v1"
        assert list(work.glob(f"*/{cell}/tmp")) == [], err
        assert re.fullmatch(
            rf"interrupted \({sig.name}\); removed (`{re.escape(str(work))}/[0-9a-f]{{16}}/{cell}/tmp`, )?`{re.escape(str(build))}/\.kernel-builder-tmp-[^`]+`",
            tmp,
        ), tmp
        assert tmp_dirs(build) == []
        assert snapshot(build) == before
    # Nothing left over for the next build to clean up (it would warn "left by an interrupted build").
    again = subprocess.run(args(k), capture_output=True, text=True, env=env)
    assert again.returncode == 0, again.stderr
    assert "interrupted build" not in again.stderr, again.stderr
    assert tmp_dirs(build) == []


def scratch_dirs(tmp: Path) -> list[str]:
    """What `verify` leaves in its temporary directory: its scratch directory
    (`kernel-builder-verify-*`) and the cells' work directories (`kernel-builder-cell-*`)."""
    return sorted(p.name for p in tmp.iterdir() if p.name.startswith("kernel-builder-"))


def test_interrupted_verify_removes_its_scratch_and_stops_the_compile(kernel, tmp_path: Path) -> None:
    """`verify` rebuilds in `$TMPDIR`: SIGINT, SIGTERM or SIGHUP while CMake or Ninja runs
    there ends it with 128 + signal, its scratch and work directories removed, the child
    stopped, and build/ as it was."""
    k, env = kernel
    first = subprocess.run(args(k), capture_output=True, text=True, env=env)
    assert first.returncode == 0, first.stderr
    build = k / "build"
    before = snapshot(build)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(env, TMPDIR=str(tmp))
    verify = [str(kernel_builder()), "verify", str(k), "--python", sys.executable]
    for sig, code, child in (
        (signal.SIGINT, 130, "cmake"),
        (signal.SIGTERM, 143, "ninja"),
        (signal.SIGHUP, 129, None),
    ):
        proc = subprocess.Popen(
            verify, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        deadline = time.monotonic() + 120
        kids: list[int] = []
        while time.monotonic() < deadline and proc.poll() is None:
            kids = [c for c in children_of(proc.pid) if child is None or comm(c) == child]
            if kids and len(scratch_dirs(tmp)) == 2:
                break
            time.sleep(0.01)
        assert proc.poll() is None and kids, f"verify ended before it could be interrupted: {proc.communicate()}"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == code, err
        last = err.splitlines()[-1]
        # Newest first: the cell's work directory, then the scratch directory.
        assert last.startswith(f"interrupted ({sig.name}); removed `{tmp}/kernel-builder-cell-"), last
        assert f", `{tmp}/kernel-builder-verify-" in last, last
        assert scratch_dirs(tmp) == [], err
        deadline = time.monotonic() + 30
        while any(alive(c) for c in kids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(alive(c) for c in kids), f"verify's children {kids} still run"
        assert snapshot(build) == before
    # And an uninterrupted verify still passes, leaving nothing behind.
    done = subprocess.run(verify, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert scratch_dirs(tmp) == []


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (children, their children, …), from /proc."""
    parent: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        found.extend(kids)
        todo.extend(kids)
    return found


def test_signals_ignored_at_start_stay_ignored(kernel) -> None:
    """`nohup kernel-builder build-and-copy … &`: SIGHUP (nohup) and SIGINT (a shell's
    background job) are ignored when the build starts, and stay so: sent while the compiler
    runs, the build carries on and succeeds."""
    k, env = kernel

    def ignore() -> None:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    proc = subprocess.Popen(
        args(k), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, preexec_fn=ignore
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        # The compiler itself runs (seconds before the build can end), not only Ninja.
        if any(comm(c) == "cc1plus" for c in descendants(proc.pid)):
            break
        time.sleep(0.01)
    assert proc.poll() is None, f"the build ended before the signals: {proc.communicate()}"
    proc.send_signal(signal.SIGHUP)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert "interrupted" not in err, err
    cell = f"torch-stable-abi211-cpu-{platform.machine()}-linux"
    assert sorted(p.name for p in (k / "build").iterdir()) == ["hashes.json", cell]
    assert out.startswith(f"built {cell}"), out


def cuda_cell() -> str | None:
    """The stable-ABI CUDA cell's name when the venv's torch is a CUDA build and nvcc is there."""
    import sysconfig

    import torch

    nvcc = Path(sysconfig.get_paths()["purelib"]) / "nvidia" / "cu13" / "bin" / "nvcc"
    if torch.version.cuda is None or not nvcc.is_file():
        return None
    return f"torch-stable-abi211-cu{torch.version.cuda.replace('.', '')}-{platform.machine()}-linux"


@pytest.mark.skipif(cuda_cell() is None, reason="needs a CUDA build of torch and nvcc (scripts/setup-venv.sh)")
def test_sigterm_during_a_cuda_compile_stops_nvcc_and_leaves_nothing_in_tmpdir(kernel, tmp_path: Path) -> None:
    """SIGTERM while nvcc compiles the CUDA cell: every process the compile started (ninja,
    nvcc, cudafe++/cicc/ptxas) is stopped before kernel-builder exits with 143, and nvcc's
    `tmpxft_*` files are not left in $TMPDIR (they go to the cell's own temporary directory,
    removed with it)."""
    k, env = kernel
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(env, TMPDIR=str(tmp))
    cmd = args(k)[:-1] + [cuda_cell()]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    compilers = {"cudafe++", "cicc", "ptxas", "fatbinary", "nvlink"}
    deadline = time.monotonic() + 180
    below: list[int] = []
    while time.monotonic() < deadline and proc.poll() is None:
        below = descendants(proc.pid)
        if any(comm(p) in compilers for p in below):
            break
        time.sleep(0.01)
    assert proc.poll() is None and below, f"the build ended before nvcc's compilers ran: {proc.communicate()}"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    # Stopped before kernel-builder exited: nothing of the compile is left at that moment.
    still = [(p, comm(p)) for p in below if alive(p)]
    assert still == [], f"the compile's processes outlived kernel-builder: {still}"
    assert sorted(p.name for p in tmp.iterdir()) == [], err
    assert not (k / "build").exists()
