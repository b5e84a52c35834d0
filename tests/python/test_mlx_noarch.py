"""An `[mlx-noarch]` kernel's `mlx-metal` tree, as the kernels loaders see it.

tests/fixtures/edition6/mlx (a Metal ReLU through `mlx.core.fast.metal_kernel`) is built by
`kernel-builder build-and-copy --nix never`, in the `files` layout and, through `assemble`, in
the `zip` layout. kernels 0.19.1 (`.venv/kernels-loaders/0.19.1`, see test_loaders.py):

- reads its metadata (`Metadata.from_bytes`: backend metal, `kernels-minver` 0.19.0) and
  computes the digest metadata.json records (`Digest.hash_variant`);
- parses the name `mlx-metal` as its MLX noarch variant, and its variant selection accepts it
  for a Metal machine with `mlx` installed and refuses it, naming why, without `mlx` or on
  another backend;
- `kernels describe-api` finds no `symbols.json` in it (a noarch build runs no Python).

kernels 0.17.2 refuses the tree through `kernels-minver`. What is not exercised: importing the
package and running the op, which need `mlx` and a Metal GPU (macOS on Apple silicon).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from kernels import get_local_kernel

from conftest import REPO, kernel_builder
from test_loaders import describe_api, loader_env

FIXTURE = REPO / "tests" / "fixtures" / "edition6" / "mlx"

PROBE = r'''
import json, sys
from pathlib import Path
from packaging.version import Version
import kernels
from kernels._rust import Digest, DigestAlgorithm, Metadata
from kernels._internals import variants
from kernels._internals.backends import CPU, Metal

out = {"kernels": kernels.__version__, "trees": {}}
for path in sys.argv[1:]:
    m = Metadata.from_bytes((Path(path) / "metadata.json").read_bytes())
    v = variants.parse_variant(Path(path).name)
    def decide(backend, has_mlx):
        [d] = variants._check_variants([v], backend, "aarch64", "darwin", None, None, None,
                                       macos_version=Version("26.0"), has_mlx=has_mlx)
        return getattr(d, "reason", "accepted")
    out["trees"][path] = {
        "id": m.id,
        "backend": str(m.backend.backend_type),
        "kernels-minver": str(m.kernels_minver),
        "build-layout": str(m.build_layout),
        "digest": Digest.hash_variant(DigestAlgorithm.SHA256, path).files,
        "variant": repr(v),
        "metal with mlx": decide(Metal(), True),
        "metal without mlx": decide(Metal(), False),
        "cpu with mlx": decide(CPU(), True),
    }
print(json.dumps(out))
'''


def build(tmp: Path) -> dict[str, Path]:
    kernel = tmp / "relu-mlx"
    subprocess.run(["cp", "-r", str(FIXTURE), str(kernel)], check=True)
    proc = subprocess.run([str(kernel_builder()), "build-and-copy", "--nix", "never", str(kernel)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    args = [str(kernel_builder()), "assemble", "--source", str(kernel), "--backend", "metal",
            "--out", str(tmp / "zip"), "--build-layout", "zip"]
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return {"files": kernel / "build" / "mlx-metal", "zip": Path(proc.stdout.strip())}


def test_kernels_0_19_1_reads_and_selects_the_mlx_metal_tree(tmp_path: Path) -> None:
    trees = build(tmp_path)
    assert trees["zip"].name == "mlx-metal"
    meta = {k: json.loads((v / "metadata.json").read_text()) for k, v in trees.items()}
    ident = meta["files"]["id"]
    assert meta["zip"]["id"] == ident
    assert sorted(p.name for p in trees["files"].iterdir()) == ["__init__.py", "_ops.py", "metadata.json", "relu.metal"]
    assert sorted(p.name for p in trees["zip"].iterdir()) == [f"{ident}.zip", "metadata.json"]

    proc = subprocess.run([sys.executable, "-c", PROBE, *map(str, trees.values())], capture_output=True, text=True,
                          env=loader_env("0.19.1"), check=False)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["kernels"] == "0.19.1"
    for layout, path in trees.items():
        got = report["trees"][str(path)]
        assert got == {
            "id": ident,
            "backend": "metal",
            "kernels-minver": "0.19.0",
            "build-layout": layout,
            "digest": meta[layout]["digest"]["files"],
            "variant": "NoarchVariant(framework=MlxNoarch(), backend=Noarch(backend_name='metal'))",
            "metal with mlx": "accepted",
            "metal without mlx": "MLX is not installed in the environment",
            "cpu with mlx": "backend (metal) does not match system backend (cpu) and is not universal",
        }, layout
        assert meta[layout]["digest"]["algorithm"] == "sha256"
        # No symbols.json: the build runs no Python, and this one would need mlx (README).
        proc = describe_api(path)
        assert (proc.returncode, proc.stderr) == (1, (
            f"Error: No symbols.json found in {path} (variant: mlx-metal). "
            "Rebuild the kernel with a recent kernel-builder and the get_kernel check enabled.\n"
        )), layout


def test_kernels_0_17_2_refuses_it_by_kernels_minver(tmp_path: Path) -> None:
    variant = build(tmp_path)["files"]
    try:
        get_local_kernel(variant, backend="cpu")
    except RuntimeError as e:
        assert str(e) == (
            "Kernel 'relu-mlx' variant 'mlx-metal' requires kernels>=0.19.0, but version 0.17.2 is installed. "
            "Upgrade with: pip install --upgrade kernels"
        )
    else:
        raise AssertionError("kernels 0.17.2 loaded an MLX variant")
