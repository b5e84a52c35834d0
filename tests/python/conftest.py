"""Shared fixtures: build the example kernels with the `kernel-builder` CLI into temporary
copies (the repository stays clean) and hand the built trees to the tests.

The CLI is `$KERNEL_BUILDER` when set, else `target/debug/kernel-builder` at the repository
root (`cargo build` makes it; scripts/test.sh runs that first). A missing CLI is an error,
not a skip: these tests exist to exercise it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KERNELS = REPO / "kernels"

# Users' Python writes bytecode next to what it imports, into `build/` too; a machine that sets
# PYTHONDONTWRITEBYTECODE would hide what that does to `verify` and `upload`. So these tests
# always write it, here and in every subprocess they start.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

# A suite run as a shell's background job (`scripts/test.sh &`) starts with SIGINT ignored, and
# every kernel-builder it spawns would inherit that and rightly keep ignoring it: the tests that
# send SIGINT would test nothing. Python's own handler is reset to the default in a child.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def is_bytecode(path: Path) -> bool:
    """Python bytecode, which is never part of a variant (the rule of `src/layout.rs`): a
    `__pycache__` entry with everything under it, or a non-directory named `*.pyc`."""
    return "__pycache__" in path.parts or (path.suffix == ".pyc" and not path.is_dir())

# What never belongs in a copy of a kernel's source: caches anywhere, and the output of an
# earlier build (`build/` at the kernel's top level only).
_CACHES = shutil.ignore_patterns("__pycache__", ".helion_aot", "*.pyc")


def _ignored_in(root: Path):
    def ignore(directory: str, names: list[str]) -> set[str]:
        ignored = set(_CACHES(directory, names))
        if Path(directory) == root and "build" in names:
            ignored.add("build")
        return ignored

    return ignore


def kernel_builder() -> Path:
    """Path of the `kernel-builder` executable under test."""
    override = os.environ.get("KERNEL_BUILDER")
    exe = Path(override) if override else REPO / "target" / "debug" / "kernel-builder"
    if not exe.is_file() or not os.access(exe, os.X_OK):
        pytest.fail(
            f"kernel-builder CLI not found at {exe}: run `cargo build` first or set KERNEL_BUILDER",
            pytrace=False,
        )
    return exe


def copy_kernel(name: str, dest: Path) -> Path:
    """Copy `kernels/<name>/` (source only) to `dest/<name>` and return the copy."""
    target = dest / name
    shutil.copytree(KERNELS / name, target, ignore=_ignored_in(KERNELS / name))
    return target


def build(kernel_dir: Path) -> Path:
    """Run `kernel-builder build-and-copy DIR --nix never`; return DIR/build.

    Fails the test with the CLI's own output when it exits non-zero.
    """
    proc = subprocess.run(
        [str(kernel_builder()), "build-and-copy", str(kernel_dir), "--nix", "never"],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        pytest.fail(
            f"kernel-builder build-and-copy {kernel_dir} exited {proc.returncode}\n"
            f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}",
            pytrace=False,
        )
    out = kernel_dir / "build"
    assert out.is_dir(), f"build-and-copy succeeded but wrote no {out}"
    return out


def snapshot(tree: Path) -> dict[str, tuple[int, bytes]]:
    """Every file and directory under `tree`: relative path -> (permission bits, bytes).

    Directories map to (mode, b"") so that an extra empty directory is a difference too.
    Symbolic links are reported as such, never followed. Python bytecode (written when a test
    loads the tree) is not part of a variant and is left out.
    """
    result: dict[str, tuple[int, bytes]] = {}
    for path in sorted(tree.rglob("*")):
        if is_bytecode(path.relative_to(tree)):
            continue
        rel = path.relative_to(tree).as_posix()
        mode = path.lstat().st_mode & 0o7777
        if path.is_symlink():
            result[rel] = (mode, b"symlink -> " + os.readlink(path).encode())
        elif path.is_dir():
            result[rel] = (mode, b"")
        else:
            result[rel] = (mode, path.read_bytes())
    return result


@pytest.fixture(scope="session")
def built_tree(tmp_path_factory: pytest.TempPathFactory):
    """`built_tree(name)`: the `build/` directory of a fresh build of `kernels/<name>`.

    Built once per session and kernel; tests must not modify it.
    """
    cache: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in cache:
            cache[name] = build(copy_kernel(name, tmp_path_factory.mktemp(name)))
        return cache[name]

    return get


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Never let a run that tested nothing look green.

    pytest already exits 5 when it collects no test; a run in which tests were collected but
    none passed (all skipped or deselected) is made a failure (exit 1) too.
    """
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    passed = len(reporter.stats.get("passed", [])) if reporter else 0
    if exitstatus == 0 and passed == 0:
        if reporter:
            reporter.write_line("error: no test passed (all skipped or deselected)", red=True)
        session.exitstatus = 1
