"""The kernels 0.19.1 loader as the oracle of what a `build.toml` may say.

`kernels._rust.Build.open` of kernels 0.19.1 (the loader's embedded config reader, which reads
edition 6) and `kernel-builder check-config` are run over the same files:

- the real corpus (`$KERNEL_BUILDER_CORPUS`, else `../shared/corpus` beside the repository, when
  present), each materialised as the Rust tests do (its `build.toml` and empty files for the
  paths in `files.txt`);
- this repository's kernels and fixtures (`kernels/`, `tests/fixtures/edition6`,
  `tests/fixtures/update-build`, `nix/checks/fixtures`);
- generated edition-6 files: every corpus file and fixture rewritten by `update-build`, and
  one file per (language, key) pair, adding each key to each language and leaving out each
  required key.

Every edition-5 or edition-6 file that kernel-builder accepts must be accepted by the loader, and
every file the loader rejects must be rejected by kernel-builder, except the deliberate
differences in `DELIBERATE` (each with its reason). The test fails on any other difference, and
on a deliberate difference that no longer occurs (so the list stays true).

The loader runs in its own environment, `target/tmp/kernels-0.19.1-venv` (made once with
`python3 -m venv` and `pip install kernels==0.19.1`, about 40 MB; PyPI is needed the first
time), because the suite's `.venv` has kernels 0.17.2.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import REPO, kernel_builder

ORACLE_VERSION = "0.19.1"
VENV = REPO / "target" / "tmp" / f"kernels-{ORACLE_VERSION}-venv"


def oracle_python() -> Path:
    """The Python of the kernels 0.19.1 environment, made when missing. Concurrent runs take
    turns on a lock; the environment is made in a temporary directory and renamed into place,
    so a run killed half-way leaves nothing that looks finished."""
    python = VENV / "bin" / "python"
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(VENV.parent / f"{VENV.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if python.is_file():
            return python
        # Made under another name and renamed when complete: `bin/python -m …` finds its
        # packages from its own location, so the rename keeps it working.
        if VENV.exists():
            shutil.rmtree(VENV)
        partial = VENV.parent / f"{VENV.name}.partial"
        if partial.exists():
            shutil.rmtree(partial)
        subprocess.run([sys.executable, "-m", "venv", str(partial)], check=True)
        subprocess.run(
            [str(partial / "bin" / "python"), "-m", "pip", "install", "--quiet", f"kernels=={ORACLE_VERSION}"],
            check=True,
        )
        partial.rename(VENV)
        return python


ORACLE = r"""
import json, sys, warnings
from importlib.metadata import version
from kernels._rust import Build
assert version("kernels") == sys.argv[1], version("kernels")
out = {}
for d in json.load(sys.stdin):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            Build.open(d)
            out[d] = None
        except Exception as e:
            out[d] = str(e).replace(d, "<dir>")
json.dump(out, sys.stdout)
"""


def oracle(python: Path, dirs: list[Path]) -> dict[str, str | None]:
    """`Build.open` of each directory: None when accepted, else its message."""
    r = subprocess.run(
        [str(python), "-c", ORACLE, ORACLE_VERSION],
        input=json.dumps([str(d) for d in dirs]),
        capture_output=True, text=True, check=True,
    )
    return json.loads(r.stdout)


def ours(d: Path) -> tuple[bool, str, str]:
    """kernel-builder's verdict on `d`: accepted, the generation, and the error rules."""
    r = subprocess.run(
        [str(kernel_builder()), "check-config", "--json", str(d)],
        capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"}, check=False,
    )
    try:
        report = json.loads(r.stdout)
    except json.JSONDecodeError:
        report = {}
    generation = report.get("generation") or sniff_generation(d)
    return r.returncode == 0, generation, r.stderr


def sniff_generation(d: Path) -> str:
    text = (d / "build.toml").read_text(errors="replace")
    for line in text.splitlines():
        s = line.replace(" ", "")
        if s.startswith("edition="):
            return "edition " + s.split("=", 1)[1].split("#")[0]
    return "legacy"


def ours_batch(dirs: list[Path]) -> dict[str, tuple[bool, str, list[str]]]:
    """[`ours`] of each directory: accepted, the generation, and the rules of its errors."""
    out = {}
    for d in dirs:
        r = subprocess.run(
            [str(kernel_builder()), "check-config", "--json", str(d)],
            capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"}, check=False,
        )
        report = json.loads(r.stdout)
        rules = sorted({p["rule"] for p in report.get("problems", []) if p["severity"] == "error"})
        generation = report.get("generation") or sniff_generation(d)
        out[str(d)] = (r.returncode == 0, generation, rules)
    return out


def corpus_dir() -> Path | None:
    env = os.environ.get("KERNEL_BUILDER_CORPUS")
    d = Path(env) if env else REPO.parent / "shared" / "corpus"
    return d if (d / "expected.json").is_file() else None


def materialize(src: Path, dest: Path, extra: list[str]) -> None:
    """A corpus entry as a kernel directory: its build.toml and an empty file for each path of
    files.txt (and of `sources_missing_from_files_txt`), as tests/it/corpus.rs does."""
    lines = (src / "files.txt").read_text().splitlines() if (src / "files.txt").is_file() else []
    paths = [l.strip().rstrip("/") for l in lines] + extra
    paths = [p for p in paths if p and p != "build.toml" and not p.startswith("/") and ".." not in p.split("/")]
    is_dir = lambda p: any(q.startswith(p + "/") for q in paths)
    dest.mkdir(parents=True)
    for p in paths:
        if not is_dir(p):
            (dest / p).parent.mkdir(parents=True, exist_ok=True)
            (dest / p).touch()
    shutil.copy(src / "build.toml", dest / "build.toml")


LANG_KEYS = {
    "cpp-cpu": ["depends", "src", "include", "cxx-flags"],
    "cpp-cuda": ["depends", "src", "include", "cxx-flags", "cuda-capabilities", "cuda-flags", "cuda-minver"],
    "cpp-metal": ["depends", "src", "include", "cxx-flags"],
    "cpp-rocm": ["depends", "src", "include", "cxx-flags", "rocm-archs", "hip-flags"],
    "cpp-xpu": ["depends", "src", "include", "cxx-flags", "sycl-flags"],
    "rust-cpu": ["cargo-manifest", "src"],
    "rust-cuda-oxide": ["cargo-manifest", "src", "cuda-capabilities"],
    "rust-cutile": ["cargo-manifest", "src", "tileiras-minver"],
}
LANG_BACKEND = {
    "cpp-cpu": "cpu", "cpp-cuda": "cuda", "cpp-metal": "metal", "cpp-rocm": "rocm", "cpp-xpu": "xpu",
    "rust-cpu": "cpu", "rust-cuda-oxide": "cuda", "rust-cutile": "cuda",
}
REQUIRED = {"cpp": ["depends", "src"], "rust-cpu": ["cargo-manifest", "src"], "rust-cuda-oxide": ["cargo-manifest", "src"], "rust-cutile": ["cargo-manifest", "src", "tileiras-minver"]}
VALUES = {
    "depends": "[]", "src": '["k/k.cpp"]', "include": '["k"]', "cxx-flags": '["-O2"]',
    "cuda-capabilities": '["8.0"]', "cuda-flags": '["-lineinfo"]', "cuda-minver": '"12.8"',
    "rocm-archs": '["gfx942"]', "hip-flags": "[]", "sycl-flags": "[]",
    "cargo-manifest": '"k/Cargo.toml"', "tileiras-minver": '"13.2"',
}


def generated_language_files(root: Path) -> list[Path]:
    """One edition-6 kernel per (language, key): each key added to each language's minimal
    kernel, and each required key left out. Rust kernels sit in `[tvm-ffi]` (the loader wants
    it), C++ ones in `[torch]`."""
    out = []
    for lang, keys in LANG_KEYS.items():
        required = REQUIRED.get(lang, REQUIRED["cpp"])
        framework = '[tvm-ffi]\nsrc = ["k/b.cpp"]\n' if lang.startswith("rust") else '[torch]\nsrc = ["k/b.cpp"]\n'
        variants = [(lang, required)]
        variants += [(f"{lang}+{k}", required + [k]) for k in VALUES if k not in required]
        variants += [(f"{lang}-{k}", [r for r in required if r != k]) for k in required]
        for name, ks in variants:
            d = root / "languages" / name
            (d / "k").mkdir(parents=True)
            for f in ["k.cpp", "b.cpp", "Cargo.toml"]:
                (d / "k" / f).touch()
            table = "".join(f"{k} = {VALUES[k]}\n" for k in ks)
            (d / "build.toml").write_text(
                '[general]\nname = "lang-case"\nversion = 1\nedition = 6\nlicense = "Apache-2.0"\n'
                f'backends = ["{LANG_BACKEND[lang]}"]\n\n'
                f'{framework}\n[kernel.k]\nlanguage = "{lang}"\n{table}'
            )
            out.append(d)
    return out


def collect(root: Path) -> list[Path]:
    """Every directory the test compares (module docs), materialised under `root`."""
    dirs = []
    corpus = corpus_dir()
    if corpus is not None:
        expected = json.loads((corpus / "expected.json").read_text())
        for src in sorted(p for p in corpus.iterdir() if (p / "build.toml").is_file()):
            extra = (expected.get(src.name) or {}).get("sources_missing_from_files_txt") or []
            materialize(src, root / "corpus" / src.name, extra)
            dirs.append(root / "corpus" / src.name)
    for parent in ["kernels", "tests/fixtures/edition6", "tests/fixtures/update-build", "nix/checks/fixtures"]:
        for src in sorted((REPO / parent).iterdir()):
            if (src / "build.toml").is_file():
                dest = root / "ours" / f"{parent.replace('/', '-')}-{src.name}"
                shutil.copytree(src, dest, ignore=shutil.ignore_patterns("build", "__pycache__"))
                dirs.append(dest)
    # Every file above rewritten by update-build (edition 6), where it can be.
    for d in list(dirs):
        dest = root / "updated" / f"{d.parent.name}-{d.name}"
        shutil.copytree(d, dest)
        r = subprocess.run(
            [str(kernel_builder()), "update-build", "--license", "Apache-2.0", str(dest)],
            capture_output=True, text=True, check=False,
        )
        if r.returncode == 0:
            dirs.append(dest)
        else:
            shutil.rmtree(dest)
    return dirs + generated_language_files(root)


# Edition-6 files on which kernel-builder and the loader disagree on purpose, one per
# deliberate difference below (an edit of a valid edition-6 base file).
STRICTER_BASE = (
    '[general]\nname = "strict"\nversion = 1\nedition = 6\nlicense = "Apache-2.0"\nbackends = ["cpu", "cuda"]\n'
    "{general}\n[{framework}]\nsrc = [\"k/b.cpp\"]\n\n"
    '[kernel.k_cpu]\nlanguage = "{cpu_language}"\n{cpu_keys}\n'
    '[kernel.k_cuda]\nlanguage = "cpp-cuda"\ndepends = []\nsrc = ["k/k.cu"]\n{cuda_keys}'
)
STRICTER = {
    "matrix-pin": dict(general='matrix = "upstream-2026-08"\n'),
    "empty-capabilities": dict(cuda_keys="cuda-capabilities = []\n"),
    "capability-without-minor": dict(cuda_keys='cuda-capabilities = ["8"]\n'),
    "missing-source": dict(cuda_keys="", cuda_src='["k/absent.cu"]'),
    "rust-no-sources": dict(framework="tvm-ffi", cpu_language="rust-cpu", cpu_keys='cargo-manifest = "k/Cargo.toml"\nsrc = []\n'),
    "cargo-manifest-outside": dict(framework="tvm-ffi", cpu_language="rust-cpu", cpu_keys='cargo-manifest = "../Cargo.toml"\nsrc = ["k"]\n'),
    "tvm-ffi-backend-without-kernel": dict(framework="tvm-ffi", cpu_language="cpp-cuda", cpu_keys='depends = []\nsrc = ["k/k.cu"]\n'),
}


def stricter_files(root: Path) -> list[Path]:
    out = []
    for name, edits in STRICTER.items():
        d = root / "stricter" / name
        (d / "k").mkdir(parents=True)
        for f in ["k.cpp", "k.cu", "b.cpp", "Cargo.toml"]:
            (d / "k" / f).touch()
        fields = dict(general="", framework="torch", cpu_language="cpp-cpu", cpu_keys='depends = []\nsrc = ["k/k.cpp"]\n', cuda_keys="")
        fields.update({k: v for k, v in edits.items() if k != "cuda_src"})
        text = STRICTER_BASE.format(**fields)
        if "cuda_src" in edits:
            text = text.replace('src = ["k/k.cu"]', f"src = {edits['cuda_src']}", 1)
        (d / "build.toml").write_text(text)
        out.append(d)
    return out


def legacy(generation: str) -> bool:
    return not generation.startswith("edition")


# Where kernel-builder and the loader differ on purpose: (name, applies to a difference, reason).
# Each entry must explain at least one difference of a run (else it is stale and the test fails).
DELIBERATE = [
    (
        "older generations",
        lambda d, gen, rules, msg: legacy(gen) and not rules and msg is not None
        and ("legacy format" in msg or "did not match v4" in msg),
        "kernel-builder reads every older form (v1-v4) through its in-memory upgrade, which "
        "`update-build` writes as edition 6; the loader reads only the v4 shape",
    ),
    (
        "hyphenated [torch-noarch] keys",
        lambda d, gen, rules, msg: not rules and msg is not None and "Unknown field cuda-capabilities. Expected one of pyext, cuda_capabilities" in msg,
        "upstream's documentation writes `cuda-capabilities`, its parser reads `cuda_capabilities`; "
        "kernel-builder reads both (and refuses a file with both), and update-build writes the underscore one",
    ),
    (
        "[general] matrix",
        lambda d, gen, rules, msg: not rules and msg is not None and "Unknown field matrix" in msg,
        "`matrix` pins the build matrix a kernel is built against, a kernel-builder extension the loader "
        "never needs (it is not in metadata.json)",
    ),
    (
        "kernels.lock",
        lambda d, gen, rules, msg: msg is None and rules == ["kernel-lock-unreadable"],
        "check-config requires every `kernel-depends` to be pinned by a kernels.lock; the corpus copy has an empty one",
    ),
    (
        "sources on disk",
        lambda d, gen, rules, msg: msg is None and rules == ["missing-path"],
        "kernel-builder checks that every `src`/`include` path exists in the kernel directory; the loader "
        "reads build.toml alone",
    ),
    (
        "capabilities",
        lambda d, gen, rules, msg: msg is None and rules in (["empty-capabilities"], ["bad-capability"]),
        "an empty or malformed `cuda-capabilities` builds for no GPU or fails in the compiler; kernel-builder "
        "says so at the line, the loader does not look",
    ),
    (
        "Rust kernel sources and manifest",
        lambda d, gen, rules, msg: msg is None and rules in (["no-sources"], ["path-outside-kernel"]),
        "a Rust kernel with `src = []`, or a `cargo-manifest` outside the kernel directory, cannot be built "
        "from the kernel's source set",
    ),
    (
        "tvm-ffi backends without a kernel",
        lambda d, gen, rules, msg: msg is None and rules == ["tvm-ffi-backend-without-kernel"],
        "a `[tvm-ffi]` kernel has no pure-Python variant, so such a backend would build nothing a loader can open",
    ),
]

# The differences that only files of the corpus show (none of our fixtures has a kernels.lock).
CORPUS_ONLY = {"kernels.lock"}


def test_kernel_builder_and_the_0_19_1_loader_agree(tmp_path: Path) -> None:
    dirs = collect(tmp_path) + stricter_files(tmp_path)
    verdict = oracle(oracle_python(), dirs)
    mine = ours_batch(dirs)
    used = {name: 0 for name, _, _ in DELIBERATE}
    unexplained = []
    for d in dirs:
        accepted, generation, rules = mine[str(d)]
        message = verdict[str(d)]
        if accepted == (message is None):
            continue
        reason = next((n for n, applies, _ in DELIBERATE if applies(d, generation, rules, message)), None)
        if reason is None:
            unexplained.append(f"{d.relative_to(tmp_path)} ({generation}): kernel-builder {'accepts' if accepted else rules}, the loader {'accepts' if message is None else 'says ' + message}")
        else:
            used[reason] += 1
    assert unexplained == []
    # Without the corpus (a fresh clone) the differences only its files show cannot occur.
    stale = [n for n, c in used.items() if c == 0 and (corpus_dir() is not None or n not in CORPUS_ONLY)]
    assert stale == [], "deliberate differences that no longer occur"
    # What was compared: the generated language files always, the corpus when present.
    languages = [d for d in dirs if d.parent.name == "languages"]
    assert len(languages) == 8 + sum(len(VALUES) for _ in LANG_KEYS), len(languages)
    assert sum(1 for d in languages if verdict[str(d)] is None) >= 9  # each language's base and its optional keys
    if corpus_dir() is not None:
        assert sum(1 for d in dirs if d.parent.name == "corpus") >= 100
        # Every corpus file and fixture that kernel-builder could rewrite was compared as edition 6 too.
        assert sum(1 for d in dirs if d.parent.name == "updated") >= 100


NAMES = r"""
import dataclasses, json, sys
try:
    from kernels._internals.variants import parse_variant, Python
except ImportError:  # kernels 0.17
    from kernels.variants import parse_variant
    Python = None
out = []
for legacy, new in json.load(sys.stdin):
    try:
        row = {"legacy": type(parse_variant(legacy)).__name__}
    except Exception:
        out.append({"legacy": "refused", "new": "refused"})
        continue
    try:
        row["new"] = type(parse_variant(new)).__name__
        row["same"] = parse_variant(new) == parse_variant(legacy)
    except Exception as e:
        row["new"] = "refused"
    if Python is not None:
        v = parse_variant(legacy)
        if getattr(v, "python", None) is not None:
            fw = dataclasses.replace(v.framework, legacy=False)
            be = v.backend
            if any(f.name == "legacy" for f in dataclasses.fields(be)):
                be = dataclasses.replace(be, legacy=False)
            row["loader_new"] = dataclasses.replace(v, framework=fw, backend=be, python=Python(legacy=False)).variant_str
        else:
            row["loader_new"] = v.variant_str
    out.append(row)
json.dump(out, sys.stdout)
"""


def test_variant_names_legacy_for_every_loader_and_the_0_19_spelling_matches_the_loader() -> None:
    """The names kernel-builder writes (legacy grammar) are read by kernels 0.17.2 (this
    suite's .venv) and 0.19.1 alike; `list-variants --names both` gives the 0.19 spelling the
    0.19.1 loader itself writes for the same variant. kernels 0.17.2 reads a compiled cell's
    0.19 name as a noarch variant or refuses it, which is why legacy names are written."""
    pairs = []
    for d in [*sorted((REPO / "kernels").iterdir()), *sorted((REPO / "tests/fixtures/edition6").iterdir())]:
        if not (d / "build.toml").is_file():
            continue
        r = subprocess.run(
            [str(kernel_builder()), "list-variants", "--all", "--all-systems", "--names", "both", str(d)],
            capture_output=True, text=True, check=True,
        )
        pairs += [line.split("\t")[1:] for line in r.stdout.splitlines()]
    assert len(pairs) > 100
    assert {p[1] for p in pairs} >= {"mlx-metal", "torch-cpu"}
    compiled = [p for p in pairs if p[0] != p[1]]
    for python in [oracle_python(), Path(sys.executable)]:
        r = subprocess.run([str(python), "-c", NAMES], input=json.dumps(pairs), capture_output=True, text=True, check=True)
        rows = json.loads(r.stdout)
        if python == Path(sys.executable):
            # kernels 0.17.2: every legacy name parses (mlx-metal is 0.19's own and is refused
            # by it, as any MLX kernel is); no compiled 0.19 name parses as the same variant.
            for (legacy, new), row in zip(pairs, rows):
                if legacy == new:
                    assert row["legacy"] == ("refused" if legacy.startswith("mlx-") else "NoarchVariant"), (legacy, row)
                    continue
                assert row["legacy"] == "ArchVariant", (legacy, row)
                assert row["new"] in ("refused", "NoarchVariant"), (new, row)
        else:
            for (legacy, new), row in zip(pairs, rows):
                if legacy == "mlx-metal":
                    assert row["legacy"] == "NoarchVariant"
                assert row.get("same", False), (legacy, new, row)
                assert row["loader_new"] == new, (legacy, new, row)
    assert len(compiled) > 80
