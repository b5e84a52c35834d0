"""kernels.lock in the Nix library: `lib.kernelDeps` turns each entry into a fixed-output
derivation pinned by the lock's NAR hash, named like kernel-builder's dependency cache entry,
so the tree `lock-kernel-deps` downloaded, added to the store by Nix itself
(`nix-store --add-fixed --recursive sha256`), is exactly that derivation's output, and
realising the derivation then needs no download. Skipped when `nix` is not on PATH.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from conftest import REPO
from test_hub_roundtrip import hub  # noqa: F401 (the Hub stand-in fixture)
from test_kernel_deps import DEP, FIXTURES, env_for, kb, ok, publish_dep

NIX = shutil.which("nix")
FLAGS = ["--extra-experimental-features", "nix-command flakes"]


@pytest.mark.skipif(NIX is None, reason="nix is not on PATH")
def test_locked_dependency_is_a_fixed_output_derivation_of_the_lock_hash(hub, tmp_path):  # noqa: F811
    env = env_for(hub, tmp_path)
    commit = publish_dep(env, tmp_path, "2.0")
    consumer = tmp_path / "kdeps-consumer"
    shutil.copytree(FIXTURES / "kdeps-consumer", consumer)
    ok(kb(env, "lock-kernel-deps", str(consumer)))
    lock = json.loads((consumer / "kernels.lock").read_text())

    expr = f"""
      let
        lib = import {REPO}/nix/lib {{ }};
        deps = lib.kernelDeps {{ path = {consumer}; orchestrator = "/orchestrator"; system = "x86_64-linux"; }};
        src = lib.kernelSource {{ path = {consumer}; config = lib.readKernelConfig {consumer}; }};
      in {{
        trees = map (t: {{
          inherit (t) dependency;
          inherit (t.tree) name outputHash outputHashMode args drvPath;
          # (an attribute set with `outPath` would print as that string)
          out = t.tree.outPath;
        }}) deps.trees;
        paths = deps.paths.args;
        source = builtins.attrNames (builtins.readDir src);
        # The bundle takes the trees as inputs: building it fetches and checks them.
        bundleDeps = (lib.genKernelFlakeOutputs {{
          path = {consumer}; systems = [ "x86_64-linux" ]; kernelBuilder = s: "/orchestrator";
        }}).packages.x86_64-linux.bundle.kernelDeps;
      }}
    """
    out = subprocess.run(
        [NIX, *FLAGS, "eval", "--json", "--impure", "--expr", expr], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    name = f"test-org--kdeps-scale--{commit}"
    [tree] = got["trees"]
    assert tree["dependency"] == {"repo-id": DEP, "version": 1}
    assert tree["name"] == name
    assert tree["outputHash"] == lock[0]["lock"]["hash"]
    assert tree["outputHashMode"] == "recursive"
    assert tree["args"] == ["nix-support", "fetch-kernel-tree", "--out", tree["args"][3], "--repo-id", DEP, "--commit", commit]
    assert got["paths"][-1] == f"{DEP}=version:1={tree['out']}"
    assert got["bundleDeps"] == [tree["out"]]
    # The filtered source the cells build from carries the lock (assemble checks it).
    assert sorted(got["source"]) == ["build.toml", "kernels.lock", "torch-ext"]

    # Nix hashes the downloaded tree itself: the same store path as the derivation's output.
    cached = tmp_path / "cache" / "kernel-deps" / name
    added = subprocess.run(
        ["nix-store", "--add-fixed", "--recursive", "sha256", str(cached)], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert added == tree["out"]
    realised = subprocess.run(
        ["nix-store", "--realise", tree["drvPath"]], capture_output=True, text=True, check=False
    )
    assert realised.returncode == 0, realised.stderr
    assert realised.stdout.strip() == tree["out"]
