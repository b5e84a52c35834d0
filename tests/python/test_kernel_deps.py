"""Kernel dependencies end to end, against the Hub stand-in (tests/hub_server/server.py):

a dependency kernel (tests/fixtures/kernel-deps/kdeps-scale, `scale(x) = x * FACTOR`) is built
and uploaded to branch v1; the consumer (kdeps-consumer, whose op calls the dependency through
`kernels.get_kernel_dep`) fails check-config until `kernel-builder lock-kernel-deps` writes
kernels.lock; the lock is what kernels 0.17.2 reads (`NixKernelLocks`), byte for byte; the build
fetches exactly the locked tree, also after v1 moved on, offline from the cache, and refuses a
tree whose NAR hash is not the lock's; kernels 0.17.2 loads the built consumer with the
dependency resolved to the locked tree (LOCAL_KERNELS from `get-kernel-deps`).
"""

from __future__ import annotations

import importlib._bootstrap_external
import importlib.util
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from conftest import REPO, kernel_builder
from test_hub_roundtrip import TOKEN, hub  # noqa: F401 (the Hub stand-in fixture)

FIXTURES = REPO / "tests" / "fixtures" / "kernel-deps"
DEP = "test-org/kdeps-scale"


def dead_endpoint() -> str:
    """An http URL on which nothing listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def env_for(endpoint: str, tmp: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HF_", "KERNEL_BUILDER_CACHE", "LOCAL_KERNELS", "XDG_CACHE"))
        and k.lower() not in ("http_proxy", "https_proxy", "all_proxy")
    }
    env.update(
        HF_ENDPOINT=endpoint,
        HF_HOME=str(tmp / "hf-home"),
        HF_HUB_DISABLE_XET="1",
        KERNEL_BUILDER_CACHE_DIR=str(tmp / "cache"),
    )
    return env


def kb(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(kernel_builder()), *args], env=env, capture_output=True, text=True, check=False)


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, f"exit {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    return proc


def publish_dep(env: dict[str, str], tmp: Path, factor: str) -> str:
    """Build kdeps-scale with FACTOR = `factor`, upload it to v1; return v1's new head."""
    src = tmp / f"kdeps-scale-{factor}"
    shutil.copytree(FIXTURES / "kdeps-scale", src)
    (src / "torch-ext" / "kdeps_scale" / "factor.py").write_text(f"FACTOR = {factor}\n")
    ok(kb(env, "build-and-copy", str(src), "--nix", "never"))
    ok(kb({**env, "HF_TOKEN": TOKEN}, "upload", str(src)))
    return head(env["HF_ENDPOINT"])


def head(endpoint: str) -> str:
    with urllib.request.urlopen(f"{endpoint}/api/kernels/{DEP}/refs") as r:
        refs = json.load(r)
    return next(b["targetCommit"] for b in refs["branches"] if b["name"] == "v1")


LOADER = r"""
import json, sys
from pathlib import Path
import torch, kernels
m = kernels.get_local_kernel(Path(sys.argv[1]), backend="cpu")
print(json.dumps({"out": m.scale_plus_one(torch.ones(2)).tolist(), "dep": m._scale.__file__}))
"""


def plant_bytecode(source: Path, code: str) -> Path:
    """Write, where this Python looks for `source`'s bytecode, the bytecode of `code` with a
    header that matches `source` (its mtime and size), opening the read-only directories on
    the way; return its path."""
    st = source.stat()
    data = importlib._bootstrap_external._code_to_timestamp_pyc(
        compile(code, str(source), "exec"), int(st.st_mtime), st.st_size
    )
    pyc = Path(importlib.util.cache_from_source(str(source)))
    source.parent.chmod(0o755)
    pyc.parent.mkdir(exist_ok=True)
    pyc.parent.chmod(0o755)
    pyc.write_bytes(data)
    pyc.parent.chmod(0o555)
    source.parent.chmod(0o555)
    return pyc


def load_consumer(env: dict[str, str], consumer: Path) -> dict:
    local = ok(kb(env, "get-kernel-deps", str(consumer))).stdout.strip()
    proc = subprocess.run(
        [sys.executable, "-c", LOADER, str(consumer / "build")],
        env={**env, "LOCAL_KERNELS": local},
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_lock_build_and_load_the_locked_dependency(hub, tmp_path):
    env = env_for(hub, tmp_path)
    first = publish_dep(env, tmp_path, "2.0")
    consumer = tmp_path / "kdeps-consumer"
    shutil.copytree(FIXTURES / "kdeps-consumer", consumer)

    # No lock: check-config and the build name the entry, its line, and the command.
    proc = kb(env, "check-config", str(consumer))
    assert proc.returncode == 1
    assert f"{DEP} (version 1) is not locked: there is no kernels.lock beside build.toml" in proc.stderr
    assert f"[{consumer}/build.toml:9:19]" in proc.stderr
    assert f"run `kernel-builder lock-kernel-deps {consumer}` to write kernels.lock" in proc.stderr
    assert kb(env, "build-and-copy", str(consumer), "--nix", "never").returncode == 1

    ok(kb(env, "lock-kernel-deps", str(consumer)))
    text = (consumer / "kernels.lock").read_text()
    lock = json.loads(text)
    assert [e["dependency"] for e in lock] == [{"repo-id": DEP, "version": 1}]
    assert lock[0]["lock"]["commit"] == first
    cached = tmp_path / "cache" / "kernel-deps" / f"test-org--kdeps-scale--{first}"
    hashed = ok(kb(env, "hash", str(cached))).stdout.split()
    assert lock[0]["lock"]["hash"] in hashed
    # Exactly what kernels 0.17.2 reads and writes for a build.toml lock.
    from kernels._rust import KernelLocks, NixKernelLocks

    assert NixKernelLocks.from_json(text).to_json() + "\n" == text
    with pytest.raises(ValueError, match="unknown field `hash`"):
        KernelLocks.from_json(text)
    # Deterministic: the same Hub state gives the same bytes.
    ok(kb(env, "lock-kernel-deps", str(consumer)))
    assert (consumer / "kernels.lock").read_text() == text
    assert ok(kb(env, "check-config", str(consumer))).returncode == 0

    # v1 moves on; the build and the loader still get the locked commit.
    second = publish_dep(env, tmp_path, "3.0")
    assert second != first
    build = ok(kb(env, "build-and-copy", str(consumer), "--nix", "never"))
    assert f"{DEP} (version 1) at {first[:12]}" in build.stderr
    assert "cached, hash checked" in build.stderr
    meta = json.loads((consumer / "build" / "torch-cpu" / "metadata.json").read_text())
    assert meta["kernel-depends"] == [{"repo-id": DEP, "version": 1}]
    loaded = load_consumer(env, consumer)
    assert loaded["out"] == [3.0, 3.0]  # 1 * 2.0 + 1: the locked FACTOR, not v1's 3.0
    assert Path(loaded["dep"]).is_relative_to(cached)
    # Offline: with the tree cached, no request is made (nothing listens at the endpoint); the
    # bytecode that loading may have written into the cached tree (Python running as root
    # writes it through read-only modes) is removed, so it neither counts nor survives.
    offline = env_for(dead_endpoint(), tmp_path)
    proc = ok(kb(offline, "build-and-copy", str(consumer), "--nix", "never"))
    assert re.search(r"\): cached, (bytecode removed, )?hash checked$", proc.stderr, re.M), proc.stderr
    assert not list(cached.rglob("__pycache__")) and not list(cached.rglob("*.pyc"))

    # Issue 31: bytecode planted in the cached tree, valid for the locked source (same mtime
    # and size) but of other code, passed the check and ran in the loader. It is removed first.
    factor = cached / "build" / "torch-cpu" / "factor.py"
    planted = plant_bytecode(factor, "FACTOR = 9.0\n")
    assert load_consumer(env, consumer)["out"] == [3.0, 3.0]  # not 1 * 9.0 + 1
    plant_bytecode(factor, "FACTOR = 9.0\n")
    proc = ok(kb(offline, "get-kernel-deps", str(consumer)))
    rel = planted.relative_to(cached).parent
    assert proc.stderr.splitlines() == [
        f"note: removed Python bytecode from the cached tree `{cached}`, written after it was cached (a kernel dependency holds none): {rel}",
        f"kernel dependency {DEP} (version 1) at {first[:12]} ({lock[0]['lock']['hash']}): cached, bytecode removed, hash checked",
    ]
    assert not planted.exists()

    # A changed cached tree is not used: offline that is an error, online it is fetched again.
    factor.chmod(0o644)
    factor.write_text("FACTOR = 5.0\n")
    proc = kb(offline, "build-and-copy", str(consumer), "--nix", "never")
    assert proc.returncode == 1
    assert f"has NAR hash" in proc.stderr and lock[0]["lock"]["hash"] in proc.stderr
    assert f"cannot fetch {DEP} (version 1) at the locked commit {first}" in proc.stderr
    proc = ok(kb(env, "build-and-copy", str(consumer), "--nix", "never"))
    assert "downloaded, hash checked" in proc.stderr
    assert factor.read_text() == "FACTOR = 2.0\n"
    assert stat.S_IMODE(factor.stat().st_mode) == 0o444


def test_stale_or_wrong_lock_is_an_error(hub, tmp_path):
    env = env_for(hub, tmp_path)
    publish_dep(env, tmp_path, "2.0")
    consumer = tmp_path / "kdeps-consumer"
    shutil.copytree(FIXTURES / "kdeps-consumer", consumer)
    ok(kb(env, "lock-kernel-deps", str(consumer)))

    # A dependency added after locking: the lock is stale, at the new entry's line.
    toml = consumer / "build.toml"
    toml.write_text(
        toml.read_text()
        + '\n[general.cuda]\nkernel-depends = [{ repo-id = "test-org/other", revision = "main" }]\n'
    )
    proc = kb(env, "check-config", str(consumer))
    assert proc.returncode == 1
    assert "test-org/other (revision main) is not in kernels.lock: the lock is stale" in proc.stderr
    assert f"[{consumer}/build.toml:17:19]" in proc.stderr
    assert f"run `kernel-builder lock-kernel-deps {consumer}`" in proc.stderr
    shutil.copy(FIXTURES / "kdeps-consumer" / "build.toml", toml)

    # A lock whose hash is not the tree's: the download is refused, nothing is cached.
    lock = json.loads((consumer / "kernels.lock").read_text())
    lock[0]["lock"]["hash"] = "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
    (consumer / "kernels.lock").write_text(json.dumps(lock))
    shutil.rmtree(tmp_path / "cache")
    proc = kb(env, "build-and-copy", str(consumer), "--nix", "never")
    assert proc.returncode == 1
    assert "but kernels.lock says sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=" in proc.stderr
    assert not (consumer / "build").exists()
    # Nothing cached but the cache's in-use lock.
    assert [p.name for p in (tmp_path / "cache" / "kernel-deps").iterdir()] == [".in-use.lock"]

    # A lock kernels cannot read is named as such, with the fix.
    (consumer / "kernels.lock").write_text('[{"dependency": {"repo-id": "x/y", "version": 1}}]')
    proc = kb(env, "check-config", str(consumer))
    assert proc.returncode == 1
    assert "is not a kernels.lock that kernels 0.17 reads" in proc.stderr
    assert "missing field `lock`" in proc.stderr


def test_dependencies_of_dependencies_and_revision_pins_are_locked(hub, tmp_path):
    env = env_for(hub, tmp_path)
    # test-org/kdeps-base (a copy of kdeps-scale under another name) on branch v1.
    base = tmp_path / "kdeps-base"
    shutil.copytree(FIXTURES / "kdeps-scale", base)
    (base / "torch-ext" / "kdeps_scale").rename(base / "torch-ext" / "kdeps_base")
    (base / "build.toml").write_text((base / "build.toml").read_text().replace("kdeps-scale", "kdeps-base"))
    ok(kb(env, "build-and-copy", str(base), "--nix", "never"))
    ok(kb({**env, "HF_TOKEN": TOKEN}, "upload", str(base)))
    # kdeps-scale depends on it by revision; it is locked, built and published in turn.
    scale = tmp_path / "kdeps-scale"
    shutil.copytree(FIXTURES / "kdeps-scale", scale)
    toml = scale / "build.toml"
    toml.write_text(
        toml.read_text().replace(
            'backends = ["cpu", "cuda"]\n',
            'backends = ["cpu", "cuda"]\nkernel-depends = [{ repo-id = "test-org/kdeps-base", revision = "v1" }]\n',
        )
    )
    ok(kb(env, "lock-kernel-deps", str(scale)))
    ok(kb(env, "build-and-copy", str(scale), "--nix", "never"))
    ok(kb({**env, "HF_TOKEN": TOKEN}, "upload", str(scale)))
    with urllib.request.urlopen(f"{hub}/api/kernels/test-org/kdeps-base/revision/v1") as r:
        base_commit = json.load(r)["sha"]

    consumer = tmp_path / "kdeps-consumer"
    shutil.copytree(FIXTURES / "kdeps-consumer", consumer)
    ok(kb(env, "lock-kernel-deps", str(consumer)))
    lock = json.loads((consumer / "kernels.lock").read_text())
    assert [(e["dependency"], e["lock"]["commit"]) for e in lock] == [
        ({"repo-id": "test-org/kdeps-base", "revision": "v1"}, base_commit),
        ({"repo-id": DEP, "version": 1}, head(hub)),
    ]
    ok(kb(env, "build-and-copy", str(consumer), "--nix", "never"))
    # kernels resolves kdeps-scale's own kernel-depends from the locked trees too.
    assert load_consumer(env, consumer)["out"] == [3.0, 3.0]
