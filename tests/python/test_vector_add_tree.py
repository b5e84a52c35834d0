"""The vector-add-helion tree: exactly the three noarch variants, helion in each variant's
python-depends, and the sm90 heuristic only where it applies (`torch-cuda`)."""

from __future__ import annotations

import importlib.util
import json

import kernels
import pytest
import torch
from conftest import KERNELS

SOURCE = KERNELS / "vector-add-helion" / "torch-ext" / "vector_add_helion"
HEURISTIC = "_helion_aot_vector_add_cuda_sm90.py"
PACKAGE_FILES = ["__init__.py", "_ops.py", "metadata.json", "symbols.json", "vector_add.py"]


@pytest.fixture(scope="module")
def build(built_tree):
    return built_tree("vector-add-helion")


def test_exactly_three_noarch_variants(build):
    assert sorted(p.name for p in build.iterdir() if p.is_dir()) == ["torch-cuda", "torch-rocm", "torch-xpu"]
    assert sorted(p.name for p in build.iterdir() if not p.is_dir()) == ["hashes.json"]


def test_each_variant_depends_on_helion(build):
    for variant in ["torch-cuda", "torch-rocm", "torch-xpu"]:
        metadata = kernels.Metadata.read_from_file(build / variant / "metadata.json")
        assert metadata.python_depends == ["helion"], variant


def test_sm90_heuristic_only_in_torch_cuda(build):
    files = {v: sorted(p.name for p in (build / v).iterdir()) for v in ["torch-cuda", "torch-rocm", "torch-xpu"]}
    assert files == {
        "torch-cuda": sorted(PACKAGE_FILES + [HEURISTIC]),
        "torch-rocm": PACKAGE_FILES,
        "torch-xpu": PACKAGE_FILES,
    }
    # Shipped exactly as the AOT runner generated it.
    assert (build / "torch-cuda" / HEURISTIC).read_bytes() == (SOURCE / HEURISTIC).read_bytes()
    for module in ["__init__.py", "vector_add.py"]:
        for variant in ["torch-cuda", "torch-rocm", "torch-xpu"]:
            assert (build / variant / module).read_bytes() == (SOURCE / module).read_bytes()


def test_no_archs_restrict_where_the_loader_accepts_it(build):
    # Helion falls back to older heuristics or its default config on other GPUs, so the
    # tree must not make the loader refuse them (see src/assemble/noarch.rs).
    metadata = kernels.Metadata.read_from_file(build / "torch-cuda" / "metadata.json")
    assert metadata.backend.archs is None


@pytest.mark.skipif(torch.version.cuda is None, reason="torch here is not a CUDA build, so the loader would not pick torch-cuda")
def test_loader_imports_torch_cuda_or_names_the_missing_helion(build):
    """Import only: no GPU here, so the kernel is not called (scripts/gpu-check.sh does)."""
    if importlib.util.find_spec("helion") is None:
        # setup-venv.sh leaves helion out when it does not import with this torch; then the
        # loader must refuse with its own message rather than fail inside the import.
        with pytest.raises(ImportError, match="requires Python dependency `helion`"):
            kernels.get_local_kernel(build.parent, backend="cuda")
        return
    module = kernels.get_local_kernel(build.parent, backend="cuda")
    metadata = kernels.Metadata.read_from_file(build / "torch-cuda" / "metadata.json")
    assert module.__name__ == metadata.id
    assert module.__all__ == ["vector_add"]
    # The decorated function: a Helion kernel whose source file is the shipped vector_add.py,
    # next to which Helion looks for the heuristic.
    assert type(module.vector_add).__module__.startswith("helion")
    source = module.vector_add.fn.__code__.co_filename
    assert source == str(build / "torch-cuda" / "vector_add.py")


def test_describe_api_reads_the_helion_trees_symbols(build):
    # symbols.json of a noarch tree is read from its sources (src/assemble/static_symbols.rs):
    # the `@helion.aot_kernel()` function is described by its own signature (importing it
    # would show a Helion kernel object, not a function). vector_add.py has `from __future__
    # import annotations`, so its annotations are strings, shown as their repr.
    from test_loaders import describe_api

    for variant in ["torch-cuda", "torch-rocm", "torch-xpu"]:
        ident = json.loads((build / variant / "metadata.json").read_text())["id"]
        proc = describe_api(build / variant)
        assert proc.returncode == 0, proc.stderr
        tensor = {"kind": "POSITIONAL_OR_KEYWORD", "default": None, "annotation": "'torch.Tensor'"}
        assert json.loads(proc.stdout) == {
            "schema_version": 1,
            "module": ident,
            "functions": [{
                "name": "vector_add",
                "qualname": "vector_add",
                "module": f"{ident}.vector_add",
                "kind": "function",
                "doc": (
                    "Return ``x + y`` for two 1-D tensors of the same length, dtype and device.\n\n"
                    "Args:\n"
                    "    x: 1-D tensor of ``n`` elements on a GPU.\n"
                    "    y: 1-D tensor of ``n`` elements, same dtype and device as ``x``.\n\n"
                    "Returns:\n"
                    "    A new 1-D tensor of ``n`` elements holding the element-wise sum."
                ),
                "signature": {
                    "parameters": [{"name": "x", **tensor}, {"name": "y", **tensor}],
                    "return_annotation": "'torch.Tensor'",
                },
            }],
            "layers": [],
            "path": str(build / variant),
            "variant": variant,
        }