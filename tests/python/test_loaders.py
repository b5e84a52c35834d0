"""Every kind of tree this project builds, in both build layouts, under every `kernels` loader
users have (0.17.2, 0.18.3, 0.19.1): loaded through `get_local_kernel` and run.

The trees, each built once by `kernel-builder assemble` (what a cell runs) with this venv's
Python, in the `files` and the `zip` layout:

- noarch: kernels/silu-and-mul (`torch-cpu`);
- compiled CPU: kernels/relu (`torch<XY>-cxx11-cpu-…`), with a `layers` module added so that
  symbols.json has a layer;
- stable-ABI: kernels/relu-stable-abi (`torch-stable-abi<XY>-cpu-…`);
- tvm-ffi: kernels/relu-tvm-ffi (`tvm-ffi<XY>-cpu-…`);
- rust-cpu: kernels/relu-rust, a Rust crate built by cargo (`tvm-ffi<XY>-cpu-…` too: the
  loaders take Rust kernels as tvm-ffi kernels, so every loader that loads a tvm-ffi tree loads
  it, 0.17.2 included; nothing in the tree says Rust).

Files-layout trees load and run under all three loaders. Zip-layout trees load and run under
0.19.1 (through zipimport: `__file__` is inside the archive), and 0.17.2 and 0.18.3 refuse
them with the `kernels-minver` message. Every tree's digest is what 0.19.1's
`Digest.hash_variant` computes; a rebuild of the zip trees is the same bytes; `kernels
describe-api --json` (0.19.1) prints the expected API of each tree.

The loaders share this venv's torch: 0.17.2 is the venv's own `kernels` (scripts/setup-venv.sh),
0.18.3 and 0.19.1 are installed without their dependencies (which the venv has) into
`.venv/kernels-loaders/<version>/` (about 9 MB each, once; PyPI is needed the first time) and
put first on `PYTHONPATH` for the processes that use them.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import zipfile
from pathlib import Path

import kernels
import pytest
import torch
import tvm_ffi

from conftest import REPO, copy_kernel, kernel_builder, snapshot

LOADERS = ["0.17.2", "0.18.3", "0.19.1"]
ZIP_MINVER = "0.19.0"
ARCH = platform.machine()
TORCH = "".join(torch.__version__.split("+")[0].split(".")[:2])
TVM = "".join(tvm_ffi.__version__.split(".")[:2])

# kind -> (kernel directory, variant, op input, expected output)
KINDS = {
    "noarch": ("silu-and-mul", "torch-cpu"),
    "compiled": ("relu", f"torch{TORCH}-cxx11-cpu-{ARCH}-linux"),
    "stable-abi": ("relu-stable-abi", f"torch-stable-abi{TORCH}-cpu-{ARCH}-linux"),
    "tvm-ffi": ("relu-tvm-ffi", f"tvm-ffi{TVM}-cpu-{ARCH}-linux"),
    "rust-cpu": ("relu-rust", f"tvm-ffi{TVM}-cpu-{ARCH}-linux"),
}

LAYERS_PY = '''"""Layers of relu."""

import torch
from torch import nn


class ReLU(nn.Module):
    """`max(x, 0)` as a layer."""

    has_backward = False
    can_torch_compile = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from . import relu

        return relu(x)


__all__ = ["ReLU"]
'''

# Run by each loader: load every tree given, run its op, report.
RUN = r'''
import json, sys, traceback
from pathlib import Path
import torch, kernels
from kernels import get_local_kernel

out = {"kernels": kernels.__version__, "trees": {}}
x = torch.tensor([[-1.0, 2.0, -3.0, 0.5]])
for kind, path in json.loads(sys.argv[1]).items():
    try:
        k = get_local_kernel(Path(path), backend="cpu")
        if kind == "noarch":
            got, want = k.silu_and_mul(x), torch.nn.functional.silu(x[..., :2]) * x[..., 2:]
        else:
            got, want = k.relu(x), torch.relu(x)
            if hasattr(k, "layers"):
                assert torch.equal(k.layers.ReLU()(x), want)
        out["trees"][kind] = {"name": k.__name__, "file": k.__file__, "got": got.tolist(), "want": want.tolist()}
    except Exception as e:
        out["trees"][kind] = {"error": f"{type(e).__name__}: {e}"}
print(json.dumps(out))
'''


def loader_env(version: str) -> dict[str, str]:
    """The environment of a process that uses kernels `version`: this venv's own for 0.17.2,
    else this venv with `.venv/kernels-loaders/<version>` first on PYTHONPATH (installed on
    first use, without dependencies)."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if version == kernels.__version__:
        return env
    target = REPO / ".venv" / "kernels-loaders" / version
    if not (target / f"kernels-{version}.dist-info").is_dir():
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-cache-dir", "--upgrade",
             "--target", str(target), f"kernels=={version}"],
            capture_output=True, text=True, check=False,
        )
        assert proc.returncode == 0, f"cannot install kernels {version} into {target}:\n{proc.stderr}"
    env["PYTHONPATH"] = str(target)
    return env


def assemble(kernel: Path, out: Path, layout: str) -> Path:
    args = [str(kernel_builder()), "assemble", "--source", str(kernel), "--backend", "cpu",
            "--out", str(out), "--python", sys.executable, "--build-layout", layout]
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"{' '.join(args)}\n{proc.stdout}\n{proc.stderr}"
    return Path(proc.stdout.strip())


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path]:
    """(kind, layout) -> the variant directory built."""
    src = tmp_path_factory.mktemp("src")
    kernels_src = {}
    for kind, (name, _) in KINDS.items():
        kernels_src[kind] = copy_kernel(name, src)
    pkg = kernels_src["compiled"] / "torch-ext" / "relu"
    (pkg / "layers.py").write_text(LAYERS_PY)
    init = (pkg / "__init__.py").read_text()
    (pkg / "__init__.py").write_text(init.replace("from ._ops import ops\n", "from . import layers  # noqa: F401\nfrom ._ops import ops\n"))
    out = {}
    for layout in ["files", "zip"]:
        for kind, (_, variant) in KINDS.items():
            built = assemble(kernels_src[kind], tmp_path_factory.mktemp(f"{kind}-{layout}"), layout)
            assert built.name == variant
            out[(kind, layout)] = built
    out["sources"] = kernels_src  # type: ignore[index]
    return out


def metadata(variant: Path) -> dict:
    return json.loads((variant / "metadata.json").read_text())


def test_zip_trees_hold_an_archive_the_native_module_and_the_metadata(trees) -> None:
    for kind in KINDS:
        files, zipped = trees[(kind, "files")], trees[(kind, "zip")]
        meta, zmeta = metadata(files), metadata(zipped)
        ident = zmeta["id"]
        assert ident == meta["id"], "the layout does not change the id"
        assert "build-layout" not in meta and meta.get("kernels-minver") is None, kind
        assert zmeta["build-layout"] == "zip" and zmeta["kernels-minver"] == ZIP_MINVER, kind
        native = {"noarch": [], "compiled": [f"{ident}.abi3.so"], "stable-abi": [f"{ident}.abi3.so"],
                  "tvm-ffi": [f"{ident}.so"], "rust-cpu": [f"{ident}.so"]}[kind]
        symbols = [] if kind == "noarch" else ["symbols.json"]
        assert sorted(p.name for p in zipped.iterdir()) == sorted([f"{ident}.zip", "metadata.json", *native, *symbols])
        # What the files layout holds beside those files is what the archive holds.
        with zipfile.ZipFile(zipped / f"{ident}.zip") as z:
            names = z.namelist()
            assert names == sorted(names)
            assert all(i.date_time == (1980, 1, 1, 0, 0, 0) and i.compress_type == zipfile.ZIP_DEFLATED for i in z.infolist())
            outside = {"metadata.json", "symbols.json", *native}
            in_files = sorted(p.relative_to(files).as_posix() for p in files.rglob("*") if p.is_file() and p.name not in outside)
            assert names == in_files, kind
            for n in names:
                if kind in ("tvm-ffi", "rust-cpu") and n == "_ops.py":
                    # It finds the module through the package's search path, not beside itself.
                    assert b"ops = tvm_ffi.load_module(_module_path())" in z.read(n)
                    continue
                assert z.read(n) == (files / n).read_bytes(), n


def test_digests_are_the_loaders_own(trees) -> None:
    env = loader_env("0.19.1")
    prog = (
        "import json, sys\nfrom kernels._rust import Digest, DigestAlgorithm\n"
        "print(json.dumps({p: Digest.hash_variant(DigestAlgorithm.SHA256, p).files for p in sys.argv[1:]}))"
    )
    paths = [str(v) for k, v in trees.items() if k != "sources"]
    proc = subprocess.run([sys.executable, "-c", prog, *paths], capture_output=True, text=True, env=env, check=True)
    theirs = json.loads(proc.stdout)
    for p in paths:
        assert metadata(Path(p))["digest"] == {"algorithm": "sha256", "files": theirs[p]}, p


def test_zip_trees_rebuild_to_the_same_bytes(trees, tmp_path: Path) -> None:
    for kind in ["noarch", "compiled"]:
        again = assemble(trees["sources"][kind], tmp_path / kind, "zip")
        assert snapshot(again) == snapshot(trees[(kind, "zip")]), kind


@pytest.mark.parametrize("layout", ["files", "zip"])
@pytest.mark.parametrize("loader", LOADERS)
def test_every_tree_loads_and_runs_where_the_layout_allows(trees, loader: str, layout: str) -> None:
    paths = {kind: str(trees[(kind, layout)]) for kind in KINDS}
    proc = subprocess.run([sys.executable, "-c", RUN, json.dumps(paths)], capture_output=True, text=True,
                          env=loader_env(loader), check=False)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["kernels"] == loader
    for kind, path in paths.items():
        got = report["trees"][kind]
        variant = Path(path)
        if layout == "zip" and loader != "0.19.1":
            assert got == {"error": (
                f"RuntimeError: Kernel '{metadata(variant)['name']}' variant '{variant.name}' requires "
                f"kernels>={ZIP_MINVER}, but version {loader} is installed. Upgrade with: pip install --upgrade kernels"
            )}, kind
            continue
        assert "error" not in got, f"{kind}: {got}"
        assert got["name"] == metadata(variant)["id"]
        assert got["got"] == got["want"], kind
        if layout == "zip":
            assert got["file"] == f"{variant}/{metadata(variant)['id']}.zip/__init__.py"
        else:
            assert got["file"] == f"{variant}/__init__.py"
        if layout == "zip":
            assert not (variant / "__pycache__").exists(), "zipimport writes no bytecode"


def describe_api(variant: Path) -> subprocess.CompletedProcess[str]:
    prog = "import sys\nfrom kernels._internals.cli import main\nsys.argv = ['kernels', *sys.argv[1:]]\nmain()"
    return subprocess.run([sys.executable, "-c", prog, "describe-api", "--json", str(variant)],
                          capture_output=True, text=True, env=loader_env("0.19.1"), check=False)


def relu_function(module: str, doc: str) -> dict:
    return {
        "name": "relu",
        "qualname": "relu",
        "module": module,
        "kind": "function",
        "doc": doc,
        "signature": {
            "parameters": [
                {"name": "x", "kind": "POSITIONAL_OR_KEYWORD", "default": None, "annotation": "torch.Tensor"},
                {"name": "out", "kind": "POSITIONAL_OR_KEYWORD", "default": "None", "annotation": "Optional[torch.Tensor]"},
            ],
            "return_annotation": "torch.Tensor",
        },
    }


@pytest.mark.parametrize("layout", ["files", "zip"])
def test_describe_api_reads_our_symbols(trees, layout: str) -> None:
    # Compiled CPU relu, with its layer.
    variant = trees[("compiled", layout)]
    ident = metadata(variant)["id"]
    proc = describe_api(variant)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {
        "schema_version": 1,
        "module": ident,
        "functions": [relu_function(ident, (
            "`max(x, 0)` of a contiguous tensor, as `torch.relu` (NaN stays NaN).\n\n"
            "The result is written to `out` when given (same shape, dtype and device as `x`), else to a\nnew tensor."
        ))],
        "layers": [{
            "name": "ReLU",
            "qualname": "ReLU",
            "module": f"{ident}.layers",
            "kind": "class",
            "doc": "`max(x, 0)` as a layer.",
            "signature": {
                "parameters": [
                    # torch.nn.Module.__init__(self, *args: Any, **kwargs: Any) -> None
                    {"name": "args", "kind": "VAR_POSITIONAL", "default": None, "annotation": "Any"},
                    {"name": "kwargs", "kind": "VAR_KEYWORD", "default": None, "annotation": "Any"},
                ],
                "return_annotation": "None",
            },
            "attributes": {"has_backward": False, "can_torch_compile": True},
        }],
        "path": str(variant),
        "variant": variant.name,
    }

    # Stable-ABI relu: the same function, its own docstring.
    variant = trees[("stable-abi", layout)]
    ident = metadata(variant)["id"]
    proc = describe_api(variant)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)["functions"][0]["doc"]
    assert json.loads(proc.stdout) == {
        "schema_version": 1, "module": ident, "functions": [relu_function(ident, doc)], "layers": [],
        "path": str(variant), "variant": variant.name,
    }
    assert doc.startswith("`max(x, 0)`"), doc

    # tvm-ffi relu: `__all__` names relu, add_op_namespace_prefix (a function of `_ops`) and
    # `ops` (a tvm_ffi module, not a function: left out).
    variant = trees[("tvm-ffi", layout)]
    ident = metadata(variant)["id"]
    proc = describe_api(variant)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert [(f["name"], f["module"]) for f in got["functions"]] == [("relu", ident), ("add_op_namespace_prefix", f"{ident}._ops")]
    assert got["functions"][1]["signature"] == {
        "parameters": [{"name": "op_name", "kind": "POSITIONAL_OR_KEYWORD", "default": None, "annotation": "str"}],
        "return_annotation": "str",
    }
    assert got["layers"] == []

    # rust-cpu relu: the same package shape as tvm-ffi's, its own docstring.
    variant = trees[("rust-cpu", layout)]
    ident = metadata(variant)["id"]
    proc = describe_api(variant)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["functions"][0] == relu_function(ident, "max(x, 0) elementwise; float32 or float64, contiguous, on the CPU.")
    assert [(f["name"], f["module"]) for f in got["functions"]] == [("relu", ident), ("add_op_namespace_prefix", f"{ident}._ops")]
    assert got["layers"] == []

    # Noarch: no symbols.json (a noarch build has no Python; see src/assemble/symbols.rs).
    variant = trees[("noarch", layout)]
    proc = describe_api(variant)
    assert proc.returncode == 1
    assert proc.stderr == (
        f"Error: No symbols.json found in {variant} (variant: torch-cpu). "
        "Rebuild the kernel with a recent kernel-builder and the get_kernel check enabled.\n"
    )


# Run by 0.19.1: the Rust relu on float32 and float64, in place, and its refusals.
RUST_CHECKS = r'''
import json, sys
from pathlib import Path
import torch
from kernels import get_local_kernel

k = get_local_kernel(Path(sys.argv[1]), backend="cpu")
out = {}
x64 = torch.tensor([-2.0, float("nan"), 0.0, 3.5], dtype=torch.float64)
got = k.relu(x64)
out["f64"] = [got.dtype == torch.float64, torch.equal(got.isnan(), torch.relu(x64).isnan()), got.nan_to_num().tolist()]
x = torch.randn(64, 33)
want = torch.relu(x)
k.relu(x, out=x)
out["in_place"] = torch.equal(x, want)
for name, call in [("shape", lambda: k.relu(torch.ones(3), out=torch.empty(4))),
                   ("dtype", lambda: k.relu(torch.ones(3, dtype=torch.int32))),
                   ("strided", lambda: k.relu(torch.ones(4, 4).t()[::2]))]:
    try:
        call()
        out[name] = None
    except Exception as e:
        out[name] = f"{type(e).__name__}: {str(e).splitlines()[0]}"
print(json.dumps(out))
'''


def test_rust_relu_computes_and_refuses_under_0_19_1(trees) -> None:
    variant = trees[("rust-cpu", "files")]
    proc = subprocess.run([sys.executable, "-c", RUST_CHECKS, str(variant.parent)], capture_output=True, text=True,
                          env=loader_env("0.19.1"), check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {
        "f64": [True, True, [0.0, 0.0, 0.0, 3.5]],
        "in_place": True,
        "shape": "ValueError: out has shape [4], x has shape [3]",
        "dtype": "TypeError: relu takes float32 or float64 tensors",
        "strided": "ValueError: out and x must be contiguous",
    }
