"""The vector-add-helion tree: exactly the three noarch variants, helion in each variant's
python-depends, and the sm90 heuristic only where it applies (`torch-cuda`)."""

from __future__ import annotations

import importlib.util

import kernels
import pytest
import torch
from conftest import KERNELS

SOURCE = KERNELS / "vector-add-helion" / "torch-ext" / "vector_add_helion"
HEURISTIC = "_helion_aot_vector_add_cuda_sm90.py"
PACKAGE_FILES = ["__init__.py", "_ops.py", "metadata.json", "vector_add.py"]


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


def test_describe_api_says_a_noarch_tree_has_no_symbols(build):
    # A noarch tree is built without Python (src/assemble/symbols.rs says why), so kernels
    # 0.19.1's `describe-api` names the missing file, for each of the three Helion variants.
    from test_loaders import describe_api

    for variant in ["torch-cuda", "torch-rocm", "torch-xpu"]:
        proc = describe_api(build / variant)
        assert proc.returncode == 1
        assert proc.stderr == (
            f"Error: No symbols.json found in {build / variant} (variant: {variant}). "
            "Rebuild the kernel with a recent kernel-builder and the get_kernel check enabled.\n"
        )
