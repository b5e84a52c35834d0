"""The README's kernel-dependencies recipe, run as written (bash, from the repository root),
with README's `kb` pointing at the CLI under test instead of `cargo run --release`."""

from __future__ import annotations

import os
import re
import subprocess

from conftest import REPO, kernel_builder


def recipe() -> str:
    text = (REPO / "README.md").read_text()
    section = text.split("## Kernel dependencies\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    assert len(blocks) == 1, blocks
    return blocks[0]


def test_readme_kernel_deps_recipe_runs_as_written(tmp_path):
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HF_", "LOCAL_KERNELS")) and k.lower() not in ("http_proxy", "https_proxy")
    }
    env.update(HF_HOME=str(tmp_path / "hf"), KERNEL_BUILDER_CACHE_DIR=str(tmp_path / "cache"), TMPDIR=str(tmp_path))
    script = f'kb() {{ "{kernel_builder()}" "$@"; }}\nset -o pipefail\n' + recipe()
    proc = subprocess.run(
        ["bash", "-c", script], cwd=REPO, env=env, capture_output=True, text=True, check=False, timeout=900
    )
    assert proc.returncode == 0, proc.stderr
    assert "is not locked: there is no kernels.lock beside build.toml" in proc.stderr
    assert "kernel dependency test-org/kdeps-scale (version 1) at" in proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "tensor([3., 3.])"
