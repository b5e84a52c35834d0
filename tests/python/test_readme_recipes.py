"""Every shell recipe README.md shows, in README order: run on a scratch copy of the repository
when a CI machine can run it (no GPU, no network but PyPI), else named below with the reason it
is not run here.

A recipe is a command of a ```sh block as bash reads it (scripts/readme-commands.py). Each one
is a key of RECIPES, written exactly as README has it: a recipe added to README, or one whose
text changed, fails this test until someone classifies it, so none is skipped unnoticed; an
entry whose recipe left README fails it too. `kb` is the binary under test, as README says it
is the binary its main command built (README's own `kb()` would compile again in the copy).

Options in brackets (`[--json]`) run without them and with them all (each alternative of
`a|b|c` once). A placeholder (`path/to/kernel`, `SYSTEM=LABEL`) is replaced by a stated value.
The copy shares the toolchain cache the suite fills (target/tmp/toolchain-cache) and overlays
`.venv` (what a recipe installs there stays in the copy); its Hub is tests/hub_server/server.py,
which accepts README's token `hf_...`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from conftest import REPO, kernel_builder

_spec = importlib.util.spec_from_file_location("readme_commands", REPO / "scripts" / "readme-commands.py")
readme_commands = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(readme_commands)

TOOLCHAIN_CACHE = REPO / "target" / "tmp" / "toolchain-cache"
SILU_REPO = "kernel-builder-examples/silu-and-mul"


@dataclass
class Run:
    """Run the recipe (each of its forms) in the copy's root; it must exit 0."""

    subst: dict[str, str] = field(default_factory=dict)
    # With [options]: "both" (without, then with them), "base" or "full" (and why, in `why`).
    forms: str = "both"
    why: str = ""
    # A toolchain cache of the recipe's own instead of the suite's shared one (for a prune).
    own_toolchain_cache: bool = False
    # Text the output (stdout and stderr) of the last form holds.
    expect: tuple[str, ...] = ()
    # A check of the copy (and the last form's stdout) after the recipe.
    check: Callable[[Path, str], None] | None = None


@dataclass
class Skip:
    reason: str


def _json_valid(root: Path, out: str) -> None:
    assert json.loads(out)["valid"] is True, out


def _completion(root: Path, out: str) -> None:
    script = (root.parent / "home/.local/share/bash-completion/completions/kernel-builder").read_text()
    assert "complete -F" in script and "kernel-builder" in script, script[:400]


def _hash_is_recorded(root: Path, out: str) -> None:
    recorded = json.loads((root / "kernels/vector-add-helion/build/hashes.json").read_text())
    assert out.strip() == recorded["variants"]["torch-cuda"], (out, recorded)


def _initialized(root: Path, out: str) -> None:
    made = root.parent / "my-kernels/vector-add-helion"
    assert (made / "build.toml").is_file() and (made / "flake.nix").is_file(), sorted(made.rglob("*"))


def _updated(root: Path, out: str) -> None:
    text = (root / "tests/fixtures/update-build/v4-cuda-bounds/build.toml").read_text()
    assert "edition = 6" in text, text


def _card(root: Path, out: str) -> None:
    card = (root / "kernels/vector-add-helion/build/CARD.md").read_text()
    assert "## Build variants" in card, card


def _torch_215(root: Path, out: str) -> None:
    assert out.strip().startswith("2.15.0"), out


def _mlx(root: Path, out: str) -> None:
    meta = json.loads((root / "tests/fixtures/edition6/mlx/build/mlx-metal/metadata.json").read_text())
    assert meta["backend"] == {"type": "metal"} and meta["kernels-minver"] == "0.19.0", meta


def _uploaded(root: Path, out: str) -> None:
    outcome = json.loads((root / "outcome.json").read_text())
    assert outcome["status"] == "uploaded" and outcome["files"]["added"] > 0, outcome
    assert outcome["repo_id"] == SILU_REPO and outcome["branch"] == "v1", outcome


TOUR_KB = "kb() { cargo run -q --release -- \"$@\"; }"
PINNED_RELU = "kb build-and-copy --nix never kernels/relu"
PYTHON_RELU = "kb build-and-copy --nix never --python .venv/bin/python kernels/relu"
RELU_211_CPU = (
    "kb build-and-copy --nix never --python .venv/bin/python --variant torch211-cxx11-cpu-x86_64-linux kernels/relu"
)
KDEPS = "tests/python/test_readme_kernel_deps.py runs this block as written, against the same Hub stand-in"
NIX_OFFLINE = "tests/it/nix.rs's readme_offline_recipe_runs_as_written runs this block as written"
NIX_HOST = (
    "needs the host test package set made by hand (README: copy tests/fixtures/host-toolchain, add the "
    "wheels, write host.json); tests/it/nix_compiled.rs builds this cell so and compares it with the native build"
)
PYPI_RELEASE = "installs the published release, not this checkout (scripts/test-wheel.sh installs this checkout's wheel with pip and uvx)"

RECIPES: dict[str, Run | Skip] = {
    # Install
    "uvx kernel-builder --help              # run it without installing (uv keeps it cached)": Skip(PYPI_RELEASE),
    "pip install kernel-builder             # or into the active venv; `python -m kernel_builder` runs it too": Skip(
        PYPI_RELEASE
    ),
    "nix run github:kernel-builder/kernel-builder -- --help": Skip("needs github.com"),
    "cargo install --locked --path .": Skip(
        "compiles the release build a second time (the main job's `cargo run --release` is the same build), "
        "about 10 min on 2 cores"
    ),
    "cargo install --locked --git https://github.com/kernel-builder/kernel-builder kernel-builder": Skip(
        "needs github.com"
    ),
    "python3 -m venv target/wheel-venv && target/wheel-venv/bin/pip install maturin==1.16.0 ziglang==0.17.1": Skip(
        "only for the --zig wheel below; scripts/test-wheel.sh builds, checks and installs the wheel with pinned maturin"
    ),
    'PATH="$PWD/target/wheel-venv/bin:$PATH" scripts/build-wheel.sh --zig': Skip(
        "another release build (zig's linker), about 10 min on 2 cores; scripts/test-wheel.sh packs the wheel "
        "from the static release build with the same script"
    ),
    # The two commands
    "cargo run --release -- build-and-copy --nix never kernels/vector-add-helion": Skip(
        ".ci/run runs it verbatim on a fresh clone, first"
    ),
    "./scripts/test.sh": Skip(".ci/run runs it verbatim on that clone, second; this test is part of it"),
    # A tour
    TOUR_KB: Skip("defines kb; here kb is the binary under test (README: the binary the main command built)"),
    "kb init --name myorg/vector-add-helion --backends cuda rocm xpu -- ../my-kernels/vector-add-helion": Run(check=_initialized),
    "kb check-config kernels/vector-add-helion [--json]": Run(check=_json_valid),
    "kb update-build path/to/kernel [--check] [--license Apache-2.0]": Run(
        subst={"path/to/kernel": "tests/fixtures/update-build/v4-cuda-bounds"},
        check=_updated,
    ),
    "kb list-variants kernels/vector-add-helion --all-systems [--all] [--json] [--names both]": Run(),
    "kb ci-matrix kernels/relu --format github [--group-by cell|backend|system] [--runner SYSTEM=LABEL]": Run(
        subst={"SYSTEM=LABEL": "x86_64-linux=ubuntu-24.04"}, expect=('"ubuntu-24.04"',)
    ),
    "kb --version": Run(expect=("2026-12",)),
    "mkdir -p ~/.local/share/bash-completion/completions": Run(),
    "kb completions bash > ~/.local/share/bash-completion/completions/kernel-builder": Run(check=_completion),
    "kb matrix check-wheel wheels/torch-2.15.0-*.whl [--matrix upstream-2026-08] [--json] [--names legacy|0.19|both]": Skip(
        "needs a torch wheel downloaded by hand (900 MB, `pip download`); tests/python/test_matrix_check_wheel.py "
        "runs check-wheel on real wheels"
    ),
    "kb matrix pin --index https://pypi.org/simple": Skip(
        "rewrites nix/torch-wheels.json from PyPI's index and exits 1 for the wheels only PyTorch's index has; "
        "tests/it/pinned.rs's matrix_pin_resolves_entries_from_a_local_index_and_is_stable runs it against a local index"
    ),
    # No network; rewrites only the scratch copy's pins, and only where a tree gives a hash.
    "kb matrix pin-unpacked": Run(expect=("nix/torch-wheels.json: ", " recorded, ")),
    "kb build-and-copy --nix never --variant torch-cuda kernels/vector-add-helion": Run(
        expect=("torch-cuda",)
    ),
    "kb build-and-copy --nix never --jobs 2 kernels/vector-add-helion": Run(expect=("reused torch-cuda",)),
    "KERNEL_BUILDER_JOBS=1 kb build-and-copy --nix never kernels/relu": Run(
        expect=("torch215-cxx11-cu132-x86_64-linux",)
    ),
    "kb native-cache [show]": Run(),
    "kb native-cache prune --max-size 1G": Run(),
    # The toolchain cache the suite shares (and later tests use) is not pruned: this prunes one of its own.
    "kb native-cache prune --max-size 1G --toolchain-max-size 10G": Run(own_toolchain_cache=True),
    "kb native-cache prune --max-size 1G --kernel-deps-max-size 2G": Run(),
    "kb native-cache prune-work [--all]": Run(),
    "kb build-and-copy kernels/relu --nix always --builders 'ssh-ng://me@big x86_64-linux ~/.ssh/id_big 8'": Skip(
        "needs the remote builder `big`; tests/it/nix_remote.rs runs --builders against a second sshd and store on 127.0.0.1"
    ),
    "kb cache push kernels/relu --to file:///srv/kernel-cache --key-file secret.key": Skip(
        "needs a signing key and relu's cells built in Nix (nixpkgs); tests/it/nix_cache.rs pushes and pulls a signed cache"
    ),
    'kb cache pull kernels/relu --from file:///srv/kernel-cache --public-key "$(cat public.key)"': Skip(
        "needs the cache the push above makes; tests/it/nix_cache.rs"
    ),
    "kb verify kernels/vector-add-helion": Run(expect=("torch-cuda: same",)),
    "kb check-builds kernels/vector-add-helion [--system x86_64-linux] [--all] [--json]": Run(),
    "kb fill-card kernels/vector-add-helion [--check]": Run(check=_card),
    "kb devshell kernels/relu --python .venv/bin/python -- sh -c 'command -v cmake; command -v ninja'": Run(
        expect=("/cmake\n", "/ninja\n")
    ),
    "kb devshell kernels/relu --variant torch215-cxx11-cpu-x86_64-linux -- python -c 'import importlib.metadata as m; print(m.version(\"torch\"))'": Run(check=_torch_215),
    RELU_211_CPU: Run(expect=("torch211-cxx11-cpu-x86_64-linux",)),
    "kb testshell kernels/relu --python .venv/bin/python -- python -m pytest kernels/relu/tests": Run(
        expect=(" passed",)
    ),
    "kb build-and-copy --nix never --variant torch215-cxx11-cpu-x86_64-linux kernels/relu": Run(
        expect=("reused torch215-cxx11-cpu-x86_64-linux",)
    ),
    "kb testshell kernels/relu --variant torch215-cxx11-cpu-x86_64-linux -- python -m pytest kernels/relu/tests": Skip(
        "makes the cell's 5 GB test environment; tests/python/test_pinned_cpu_cells.py runs relu's tests in this "
        "testshell for torch 2.14 and 2.15"
    ),
    "kb hash kernels/vector-add-helion/build/torch-cuda": Run(check=_hash_is_recorded),
    "kb check-abi kernels/relu [--manylinux 2_28] [--python-abi 3.9] [--torch-stable-abi 2.11] [--json]": Run(
        forms="base",
        why="all options at once hold relu (a host-compiled, non-stable-ABI kernel) to the torch stable ABI: exit 1 by design",
    ),
    "HELION_AUTOTUNE_BUDGET_SECONDS=90 kb tune kernels/attention-helion --effort quick -- --shapes 0-3": Skip(
        "needs a GPU and helion"
    ),
    "kb tune kernels/attention-helion --effort full --max-configs 8   # all of bench.py's shapes": Skip(
        "needs a GPU and helion"
    ),
    "kb tune kernels/attention-helion --effort quick --retune -- --shapes 5,12   # search two again": Skip(
        "needs a GPU and helion"
    ),
    # MLX kernels
    "kb build-and-copy --nix never tests/fixtures/edition6/mlx   # -> tests/fixtures/edition6/mlx/build/mlx-metal": Run(
        check=_mlx
    ),
    # Compiled kernels
    PINNED_RELU: Run(expect=("reused torch214-cxx11-cu130-x86_64-linux", "reused torch215-cxx11-cu132-x86_64-linux")),
    "kb build-and-copy --nix never --offline --find-links wheelhouse/ kernels/relu": Skip(
        "needs a wheelhouse of the pinned files by name; tests/it/pinned.rs's "
        "relu_bundle_cells_build_from_pinned_wheels_online_and_from_a_wheelhouse builds relu so"
    ),
    PYTHON_RELU: Run(expect=("torch211-cxx11-cu130-x86_64-linux",)),
    "kb verify --python .venv/bin/python kernels/relu      # a fresh rebuild is byte-identical": Run(
        expect=("torch211-cxx11-cpu-x86_64-linux: same", "torch215-cxx11-cu132-x86_64-linux: same")
    ),
    "kb build-and-copy --nix never --python .venv/bin/python kernels/relu-rust": Run(expect=("tvm-ffi", "-cpu-")),
    "kb build-and-copy --nix never --python .venv/bin/python --cuda-capabilities 9.0 kernels/relu": Run(),
    "KERNEL_BUILDER_CUDA_CAPABILITIES=9.0,10.0 kb build-and-copy --nix never --python .venv/bin/python kernels/relu": Run(),
    # Build layouts and symbols.json
    ".venv/bin/python -m pip install -q --no-deps --target .venv/kernels-loaders/0.19.1 kernels==0.19.1": Run(),
    "PYTHONPATH=.venv/kernels-loaders/0.19.1 .venv/bin/python -c 'from kernels._internals.cli import main; main()' \\\n"
    "  describe-api kernels/silu-and-mul/build/torch-cpu": Run(expect=("silu_and_mul",)),
    # Kernel dependencies
    "python3 tests/hub_server/server.py --token secret > /tmp/hub.out & hub=$!": Skip(KDEPS),
    "sleep 1; export HF_ENDPOINT=http://127.0.0.1:$(sed -n 's/^PORT //p' /tmp/hub.out) HF_HUB_DISABLE_XET=1": Skip(KDEPS),
    "work=$(mktemp -d); cp -r tests/fixtures/kernel-deps/. $work/": Skip(KDEPS),
    "kb build $work/kdeps-scale --nix never && HF_TOKEN=secret kb upload $work/kdeps-scale": Skip(KDEPS),
    "kb check-config $work/kdeps-consumer || true   # error: not locked, run lock-kernel-deps": Skip(KDEPS),
    "kb lock-kernel-deps $work/kdeps-consumer       # writes $work/kdeps-consumer/kernels.lock": Skip(KDEPS),
    "kb build $work/kdeps-consumer --nix never      # fetches the locked tree, checks its hash": Skip(KDEPS),
    "LOCAL_KERNELS=$(kb get-kernel-deps $work/kdeps-consumer) .venv/bin/python -c '\n"
    "import pathlib, sys, torch, kernels\n"
    'm = kernels.get_local_kernel(pathlib.Path(sys.argv[1]), backend="cpu")\n'
    "print(m.scale_plus_one(torch.ones(2)))' $work/kdeps-consumer/build   # tensor([3., 3.])": Skip(KDEPS),
    "kill $hub": Skip(KDEPS),
    # Publishing to the Hub (against the stand-in, which takes README's token)
    "kb build-and-copy --nix never kernels/silu-and-mul": Run(),
    "kb upload kernels/silu-and-mul --dry-run": Run(),
    "HF_TOKEN=hf_... kb upload kernels/silu-and-mul --output-json outcome.json": Run(check=_uploaded),
    "kb build-and-upload kernels/silu-and-mul": Run(),
    # With Nix
    "orch=$(./scripts/setup-nix.sh)": Skip(NIX_OFFLINE),
    "cd kernels/vector-add-helion": Skip(NIX_OFFLINE),
    "nix build .#bundle --override-input kernel-builder/orchestrator path:$orch   # ./result -> the bundle": Skip(
        NIX_OFFLINE
    ),
    "nix run .#build-and-copy --override-input kernel-builder/orchestrator path:$orch": Skip(NIX_OFFLINE),
    "nix flake check --override-input kernel-builder/orchestrator path:$orch \\\n"
    "  --override-input kernel-builder/nixpkgs path:$PWD/../../tests/fixtures/nixpkgs-stub": Skip(NIX_OFFLINE),
    # Compiled cells in Nix
    "nix build ./kernels/relu#torch215-cxx11-cpu-x86_64-linux --option sandbox relaxed \\\n"
    "  --override-input kernel-builder/orchestrator path:$orch \\\n"
    "  --override-input kernel-builder/toolchain path:/tmp/host-toolchain": Skip(NIX_HOST),
    "PATH=$path CXX=$cxx $orch/bin/kernel-builder build-and-copy kernels/relu --nix never \\\n"
    "  --package-set host-test --variant torch215-cxx11-cpu-x86_64-linux": Skip(NIX_HOST),
}


OPTION = re.compile(r" \[([-a-z][^\[\]]*)\]")


def forms(command: str, how: str) -> list[str]:
    """The command without its bracketed options and with all of them (one form per value of
    an `a|b|c` among them: `[--group-by cell|backend|system]` gives `--group-by cell`, …), as
    `how` asks."""
    groups = OPTION.findall(command)
    if not groups:
        return [command]
    base = OPTION.sub("", command)
    values = []
    for g in groups:
        head, _, last = g.rpartition(" ")
        values.append([f"{head} {v}".strip() for v in last.split("|")])
    full = []
    for i in range(max(map(len, values))):
        chosen = iter([v[min(i, len(v) - 1)] for v in values])
        full.append(OPTION.sub(lambda m: " " + next(chosen), command))
    return {"both": [base, *full], "base": [base], "full": full}[how]


def scratch_copy(tmp: Path) -> Path:
    """The repository's tracked files in `tmp/kernel-builder` (a git work tree of one commit),
    with `.venv` overlaid: its bin, lib and pyvenv.cfg linked, `kernels-loaders/` its own."""
    root = tmp / "kernel-builder"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for rel in filter(None, files.decode().split("\0")):
        src = REPO / rel
        if src.is_file() and not src.is_symlink():
            dest = root / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest)
    venv = root / ".venv"
    venv.mkdir()
    for entry in (REPO / ".venv").iterdir():
        if entry.name != "kernels-loaders":
            (venv / entry.name).symlink_to(entry)
    (venv / "kernels-loaders").mkdir()
    git = ["git", "-c", "user.name=readme", "-c", "user.email=readme@kernel-builder.invalid"]
    subprocess.run([*git, "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "README recipes"], cwd=root, check=True)
    return root


def test_readme_recipes_run_in_readme_order(tmp_path: Path) -> None:
    found = readme_commands.recipes((REPO / "README.md").read_text())
    commands = [c for _, c in found]
    unclassified = [f"[{s}] {c}" for s, c in found if c not in RECIPES]
    assert not unclassified, (
        "README recipes nobody classified: add each to RECIPES in tests/python/test_readme_recipes.py, "
        "as Run(...) or Skip(reason):\n  " + "\n  ".join(unclassified)
    )
    gone = [c for c in RECIPES if c not in commands]
    assert not gone, "RECIPES entries README no longer has (remove them):\n  " + "\n  ".join(gone)

    root = scratch_copy(tmp_path)
    home = tmp_path / "home"
    hf = tmp_path / "hf"
    for d in (home, hf, tmp_path / "tmp"):
        d.mkdir()
    (hf / "token").write_text("hf_...")
    hub = subprocess.Popen(
        ["python3", str(REPO / "tests/hub_server/server.py"), "--token", "hf_..."],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        port = hub.stdout.readline().split()[1]
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("HF_", "LOCAL_KERNELS", "KERNEL_BUILDER_")) and k.lower() not in ("http_proxy", "https_proxy")
        }
        # HOME is the copy's own (completions are written there); Rust's toolchain and cargo's
        # registry cache stay the user's, as they are for a user whose HOME they are in.
        for var, default in (("RUSTUP_HOME", ".rustup"), ("CARGO_HOME", ".cargo")):
            env.setdefault(var, str(Path.home() / default))
        env.update(
            HOME=str(home),
            HF_HOME=str(hf),
            HF_ENDPOINT=f"http://127.0.0.1:{port}",
            HF_HUB_DISABLE_XET="1",
            KERNEL_BUILDER_CACHE_DIR=str(tmp_path / "cache"),
            KERNEL_BUILDER_TOOLCHAIN_CACHE_DIR=str(TOOLCHAIN_CACHE),
            TMPDIR=str(tmp_path / "tmp"),
            NO_COLOR="1",
        )
        timings = []
        for section, command in found:
            how = RECIPES[command]
            if isinstance(how, Skip):
                print(f"not run: [{section}] {command.splitlines()[0]}: {how.reason}")
                continue
            text = command
            for k, v in how.subst.items():
                assert k in text, (command, k)
                text = text.replace(k, v)
            assert how.forms == "both" or how.why, f"say why only some forms of `{command}` run"
            run_env = dict(env)
            if how.own_toolchain_cache:
                run_env["KERNEL_BUILDER_TOOLCHAIN_CACHE_DIR"] = str(tmp_path / "toolchains")
            for form in forms(text, how.forms):
                script = f'set -o pipefail\nkb() {{ "{kernel_builder()}" "$@"; }}\n{form}\n'
                start = time.monotonic()
                proc = subprocess.run(
                    ["bash", "-c", script], cwd=root, env=run_env, capture_output=True, text=True, timeout=1200
                )
                timings.append((time.monotonic() - start, form))
                out = proc.stdout + proc.stderr
                assert proc.returncode == 0, f"[{section}] `{form}` exited {proc.returncode}:\n{out[-6000:]}"
            for e in how.expect:
                assert e in out, f"[{section}] `{form}` printed no {e!r}:\n{out[-6000:]}"
            if how.check:
                how.check(root, proc.stdout)
        for seconds, form in sorted(timings, reverse=True)[:8]:
            print(f"{seconds:7.1f} s  {form}")
        print(f"{sum(t for t, _ in timings):7.1f} s  in all, {len(timings)} runs")
    finally:
        hub.terminate()
        hub.wait()
