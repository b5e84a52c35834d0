"""Rebuilding an unchanged kernel gives a byte-identical tree (same files, modes and bytes),
both in place and from a fresh copy of the same source."""

from __future__ import annotations

import pytest
from conftest import build, copy_kernel, snapshot


@pytest.mark.parametrize("name", ["silu-and-mul", "vector-add-helion"])
def test_rebuild_is_byte_identical(tmp_path, name):
    first_dir = copy_kernel(name, tmp_path / "first")
    first = snapshot(build(first_dir))
    assert first, "the build wrote nothing"

    again = snapshot(build(first_dir))
    assert sorted(again) == sorted(first)
    assert again == first

    fresh = snapshot(build(copy_kernel(name, tmp_path / "second")))
    assert sorted(fresh) == sorted(first)
    assert fresh == first


def test_changed_source_changes_the_tree(tmp_path):
    """The comparison above can fail: editing a source file changes the built bytes."""
    kernel = copy_kernel("silu-and-mul", tmp_path)
    before = snapshot(build(kernel))
    op = kernel / "torch-ext" / "silu_and_mul" / "op.py"
    op.write_text(op.read_text() + "\n# changed\n")
    after = snapshot(build(kernel))
    assert after != before
    assert after["torch-cpu/op.py"] != before["torch-cpu/op.py"]
