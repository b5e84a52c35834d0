"""Round trip through a Hub endpoint: `kernel-builder upload` publishes the built silu-and-mul
bundle to the local Hub-API test server (tests/hub_server/server.py), and the real `kernels`
loader, pointed at that server with `HF_ENDPOINT`, finds branch `v1` with `version=1`,
downloads the `torch-cpu` variant and runs it.

The loader runs in a child process: huggingface_hub reads `HF_ENDPOINT` when it is imported,
and this process has imported it already. `HF_HUB_DISABLE_XET=1` keeps huggingface_hub on the
plain HTTP paths the server speaks; `HF_HUB_DISABLE_TELEMETRY` must stay unset (kernels 0.17.2
builds a malformed User-Agent with it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from conftest import REPO, build, copy_kernel, kernel_builder

TOKEN = "secret-hf_RoundTripToken42"
SERVER = REPO / "tests" / "hub_server" / "server.py"


@pytest.fixture
def hub():
    """The test server on a free port; yields its URL."""
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--token", TOKEN],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("PORT "), f"test server said {line!r}"
        yield f"http://127.0.0.1:{int(line.split()[1])}"
    finally:
        proc.kill()
        proc.wait()


def clean_env(endpoint: str, home: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("HF_") and k.lower() not in ("http_proxy", "https_proxy", "all_proxy")
    }
    env.update(HF_ENDPOINT=endpoint, HF_HOME=str(home), HF_HUB_DISABLE_XET="1")
    return env


LOADER = r"""
import json, sys
import torch, torch.nn.functional as F
import kernels
module = kernels.get_kernel(
    "kernel-builder-examples/silu-and-mul", version=1, backend="cpu", trust_remote_code=True
)
x = torch.randn(4, 64, generator=torch.Generator().manual_seed(3))
d = x.shape[-1] // 2
torch.testing.assert_close(module.silu_and_mul(x), F.silu(x[..., :d]) * x[..., d:], rtol=0, atol=0)
print(json.dumps({"name": module.__name__, "file": module.__file__}))
"""


def test_get_kernel_loads_what_upload_published(hub, tmp_path):
    kernel = copy_kernel("silu-and-mul", tmp_path)
    bundle = build(kernel)
    env = clean_env(hub, tmp_path / "hf-home")
    outcome_path = tmp_path / "outcome.json"
    up = subprocess.run(
        [str(kernel_builder()), "upload", str(kernel), "--output-json", str(outcome_path)],
        env={**env, "HF_TOKEN": TOKEN},
        capture_output=True,
        text=True,
        check=False,
    )
    assert up.returncode == 0, up.stderr
    assert TOKEN not in up.stdout + up.stderr + outcome_path.read_text()
    outcome = json.loads(outcome_path.read_text())
    assert outcome["status"] == "uploaded"
    assert outcome["repo_id"] == "kernel-builder-examples/silu-and-mul"
    assert outcome["branch"] == "v1"

    # A fresh HF_HOME for the loader: nothing cached, no token.
    load = subprocess.run(
        [sys.executable, "-c", LOADER],
        env=clean_env(hub, tmp_path / "loader-home"),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert load.returncode == 0, load.stderr
    loaded = json.loads(load.stdout.strip().splitlines()[-1])
    metadata = json.loads((bundle / "torch-cpu" / "metadata.json").read_text())
    assert loaded["name"] == metadata["id"]
    # Loaded from the loader's download cache, not from the local build.
    snapshot = Path(loaded["file"]).parent
    assert snapshot.is_relative_to(tmp_path / "loader-home")
    assert snapshot.parts[-2:] == ("build", "torch-cpu")
    for f in (bundle / "torch-cpu").rglob("*"):
        if f.is_file() and "__pycache__" not in f.parts:
            rel = f.relative_to(bundle / "torch-cpu")
            assert (snapshot / rel).read_bytes() == f.read_bytes(), rel

    with urllib.request.urlopen(f"{hub}/_admin/stats") as r:
        stats = json.load(r)
    assert stats["requests"]["resolve"] >= 4
