"""Every built `metadata.json` is accepted by the `kernels` loader's own parser and checks.

The parser is `kernels.Metadata` (Rust, `kernels._rust`), which the loader calls through
`Metadata.read_from_file` for every variant it resolves; the checks are the loader's
`default_metadata_validators()`, run on every load. The variant directory names go through
the loader's own `kernels.variants.parse_variant`.
"""

from __future__ import annotations

import importlib.util
import json

import kernels
from kernels._rust import Backend
import pytest
from kernels.validate import default_metadata_validators
from kernels.variants import NoarchVariant, parse_variant

# kernel -> (expected variants, expected python-depends of each)
EXPECTED = {
    "silu-and-mul": (["torch-cpu", "torch-cuda"], []),
    "vector-add-helion": (["torch-cuda", "torch-rocm", "torch-xpu"], ["helion"]),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_metadata_json_parses_with_the_loaders_parser(built_tree, name):
    build = built_tree(name)
    variants, python_depends = EXPECTED[name]
    # build/ holds one directory per variant and the bundle's hash manifest, nothing else.
    assert sorted(p.name for p in build.iterdir() if p.is_dir()) == variants
    assert sorted(p.name for p in build.iterdir() if not p.is_dir()) == ["hashes.json"]
    manifest = json.loads((build / "hashes.json").read_text())
    assert sorted(manifest["variants"]) == variants
    python_name = name.replace("-", "_")
    ids = set()
    for variant in variants:
        metadata = kernels.Metadata.read_from_file(build / variant / "metadata.json")
        backend = variant.removeprefix("torch-")
        assert str(metadata.name) == name
        assert metadata.name.python_name == python_name
        assert metadata.version == 1
        assert metadata.license == "Apache-2.0"
        assert metadata.python_depends == python_depends
        assert metadata.kernel_depends == []
        assert metadata.backend.backend_type == Backend.from_str(backend)
        # Computed by the builder from what the variant uses: helion needs kernels 0.17.0.
        minver = json.loads((build / variant / "metadata.json").read_text()).get("kernels-minver")
        assert minver == ("0.17.0" if "helion" in python_depends else None), (variant, minver)
        assert str(metadata.kernels_minver) == "0.17.0" if minver else metadata.kernels_minver is None
        # The loader imports the variant under `id`; it is also the op namespace.
        assert metadata.id.startswith(f"_{python_name}_{backend}_"), metadata.id
        ids.add(metadata.id)
        parsed = parse_variant(variant)
        assert isinstance(parsed, NoarchVariant)
        assert parsed.variant_str == variant
    assert len(ids) == len(variants), "each variant needs its own module id"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_metadata_json_passes_the_loaders_validators(built_tree, name):
    build = built_tree(name)
    helion_here = importlib.util.find_spec("helion") is not None
    for variant in EXPECTED[name][0]:
        metadata = kernels.Metadata.read_from_file(build / variant / "metadata.json")
        for validator in default_metadata_validators():
            if "helion" in metadata.python_depends and not helion_here:
                # The one refusal allowed: the dependency is known to the loader (so no
                # "unsupported kernel dependency") but not installed in this environment.
                try:
                    validator.validate_metadata(metadata=metadata, variant=variant)
                except ImportError as err:
                    assert "requires Python dependency `helion`" in str(err)
                continue
            validator.validate_metadata(metadata=metadata, variant=variant)


def test_metadata_parser_rejects_what_the_loader_rejects():
    """The parser used above is strict: it is not a check that accepts everything."""
    good = (
        b'{"name":"vector-add","id":"_vector_add_cuda_abc1234","version":1,'
        b'"license":"apache-2.0","python-depends":["helion"],"backend":{"type":"cuda"}}'
    )
    assert kernels.Metadata.from_bytes(good).python_depends == ["helion"]
    for bad in (
        good.replace(b'"vector-add"', b'"vector_add"'),  # name must be kebab-case
        good.replace(b'"cuda"}', b'"universal"}'),  # not a backend type
        good.replace(b'"version":1,', b""),  # version is required
    ):
        with pytest.raises(ValueError):
            kernels.Metadata.from_bytes(bad)
