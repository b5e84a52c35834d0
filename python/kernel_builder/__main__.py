"""`python -m kernel_builder ARGS`: runs the installed `kernel-builder ARGS`."""

import os
import sys

from kernel_builder import find_kernel_builder_bin


def main() -> None:
    exe = find_kernel_builder_bin()
    if sys.platform == "win32":
        # Windows has no exec: run it as a child and pass its exit status on.
        import subprocess

        sys.exit(subprocess.run([exe, *sys.argv[1:]]).returncode)
    # Replace this process, so signals and the exit status are the executable's own.
    os.execv(exe, [exe, *sys.argv[1:]])


if __name__ == "__main__":
    main()
