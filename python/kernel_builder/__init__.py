"""kernel-builder: reproducible builds of PyTorch compute kernels into Hub-ready trees.

The wheel's work is done by the `kernel-builder` executable that pip or uv installs into the
environment's scripts directory; this package only finds it, so that `python -m kernel_builder`
runs it too.
"""

from __future__ import annotations

import os
import sys
import sysconfig

__all__ = ["find_kernel_builder_bin"]


def find_kernel_builder_bin() -> str:
    """Return the path of the installed `kernel-builder` executable.

    The wheel puts it into the scripts directory of whichever scheme installed it, so each one
    is tried: this interpreter's environment, the base interpreter's, the user scheme
    (`pip install --user`), and the `bin/` that `pip install --prefix` or `--target` creates
    next to this package. Raises FileNotFoundError naming every directory tried.
    """
    exe = "kernel-builder" + (sysconfig.get_config_var("EXE") or "")
    candidates = [
        sysconfig.get_path("scripts"),
        sysconfig.get_path("scripts", vars={"base": sys.base_prefix}),
        sysconfig.get_path("scripts", scheme=_user_scheme()),
        _prefix_scripts(),
        _target_scripts(),
    ]
    tried: list[str] = []
    for directory in candidates:
        if not directory or directory in tried:
            continue
        tried.append(directory)
        path = os.path.join(directory, exe)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(
        f"the `{exe}` executable of the kernel-builder wheel is not in any of: "
        + ", ".join(tried)
        + "; reinstall it with `pip install --force-reinstall kernel-builder`"
    )


def _package_dir() -> str:
    return os.path.dirname(os.path.abspath(__file__))


def _strip_tail(path: str, depth: int) -> str:
    for _ in range(depth):
        path = os.path.dirname(path)
    return path


def _prefix_scripts() -> str | None:
    """`pip install --prefix P`: this package is P/lib/pythonX.Y/site-packages/kernel_builder
    (P/Lib/site-packages on Windows) and the executable is in P/bin (P/Scripts)."""
    site = os.path.dirname(_package_dir())
    if os.path.basename(site).lower() != "site-packages":
        return None
    lib = os.path.dirname(site)
    if os.name == "nt":
        return os.path.join(os.path.dirname(lib), "Scripts")
    if not os.path.basename(lib).startswith("python"):
        return None
    return os.path.join(_strip_tail(lib, 2), "bin")


def _target_scripts() -> str:
    """`pip install --target T`: this package is T/kernel_builder and the executable T/bin."""
    return os.path.join(os.path.dirname(_package_dir()), "Scripts" if os.name == "nt" else "bin")


def _user_scheme() -> str:
    if sys.version_info >= (3, 10):
        return sysconfig.get_preferred_scheme("user")
    if os.name == "nt":
        return "nt_user"
    if sys.platform == "darwin" and getattr(sys, "_framework", None):
        return "osx_framework_user"
    return "posix_user"
