#!/usr/bin/env python3
"""The real-kernel compatibility run: public kernels-community kernels through our native build.

Builds kernels of huggingface/kernels-community with `kernel-builder build-and-copy --nix never`
and runs each kernel's own `tests/` against the variant it built, recording per kernel: the
kernels-community commit, the check-config result, the cells built, compile seconds, the first
error of a failed build, and the tests passed/failed/skipped. Not a CI step: the CUDA half needs
the GPU machine (reached through the `device` tool, not a shell), so the run has three verbs:

  compat_run.py prepare --repo KC [--kernels a,b | --backend cuda|cpu] STAGE
      here: copy the kernels (git archive of KC's HEAD; KC is a clone or the bare mirror that
      `fetch github:huggingface/kernels-community` gives), the headers of every C++ dependency
      they name (CUTLASS per version, from --cutlass, a clone or mirror of NVIDIA/cutlass, at the
      commit nix/cpp-deps.json pins), a statically linked kernel-builder (--kb) and this script
      into STAGE, an ignored folder of the checkout the device tool sends.
  compat_run.py run STAGE --out DIR [--python PY | --pins] [--slice NAME] [--parallel N] [-- BUILD-ARGS]
      where the build happens (the GPU machine, or here for CPU cells): builds every staged
      kernel, runs its tests, appends one JSON object per kernel to DIR/compat-<slice>.jsonl.
      BUILD-ARGS go to build-and-copy (for example a cut-down CUDA capability list).
  compat_run.py report RESULTS.jsonl... > COMPAT-TABLE.md
      the table for COMPAT.md.

How a kernel's tests find the kernel: most import the package by name, so a link named after the
package points at the variant directory and is put on PYTHONPATH; others load it with
`kernels.get_kernel(repo_id)`, so LOCAL_KERNELS maps the kernel's Hub repo id to its build/.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD_TIMEOUT_S = int(os.environ.get("COMPAT_BUILD_TIMEOUT", "1500"))
TEST_TIMEOUT_S = int(os.environ.get("COMPAT_TEST_TIMEOUT", "600"))


def git(repo: Path, *args: str, capture: bool = True) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=capture, text=True
    ).stdout.strip()


def build_toml(kernel_dir: Path) -> dict:
    with open(kernel_dir / "build.toml", "rb") as f:
        return tomllib.load(f)


def compiled_backends(config: dict) -> set[str]:
    return {k.get("backend", "") for k in config.get("kernel", {}).values()}


def declared_backends(config: dict) -> set[str]:
    return set(config.get("general", {}).get("backends", [])) | compiled_backends(config)


def cpp_deps(config: dict) -> set[str]:
    deps: set[str] = set()
    for kernel in config.get("kernel", {}).values():
        deps.update(d for d in kernel.get("depends", []) if d != "torch")
    return deps


# --------------------------------------------------------------------------- prepare


def prepare(args: argparse.Namespace) -> None:
    stage = Path(args.stage).resolve()
    repo = Path(args.repo).resolve()
    commit = git(repo, "rev-parse", "HEAD")
    names = git(repo, "ls-tree", "--name-only", "HEAD").split("\n")
    listing = {}
    for name in names:
        try:
            text = git(repo, "show", f"HEAD:{name}/build.toml")
        except subprocess.CalledProcessError:
            continue
        listing[name] = tomllib.loads(text)
    if args.kernels:
        wanted = args.kernels.split(",")
        unknown = [k for k in wanted if k not in listing]
        if unknown:
            sys.exit(f"compat_run: no build.toml for {', '.join(unknown)} at {commit[:12]}")
    else:
        wanted = sorted(k for k, c in listing.items() if args.backend in declared_backends(c))
    (stage / "kernels").mkdir(parents=True, exist_ok=True)
    deps_needed: set[str] = set()
    for name in wanted:
        dest = stage / "kernels" / name
        shutil.rmtree(dest, ignore_errors=True)
        archive = subprocess.run(
            ["git", "-C", str(repo), "archive", "HEAD", name], check=True, capture_output=True
        ).stdout
        with tempfile.TemporaryFile() as tmp:
            tmp.write(archive)
            tmp.seek(0)
            with tarfile.open(fileobj=tmp) as tar:
                tar.extractall(stage / "kernels", filter="data")
        deps_needed |= cpp_deps(listing[name])
    pins = json.loads((ROOT / "nix" / "cpp-deps.json").read_text())["deps"]
    (stage / "deps").mkdir(exist_ok=True)
    deps_env = {}
    for dep in sorted(deps_needed):
        pin = pins.get(dep)
        if not pin or not pin.get("commit") or "cutlass" not in pin["url"]:
            print(f"compat_run: dependency {dep} is not staged (no CUTLASS pin)", file=sys.stderr)
            continue
        if not args.cutlass:
            sys.exit(f"compat_run: {dep} is needed: pass --cutlass (a clone or mirror of NVIDIA/cutlass)")
        out = stage / "deps" / f"{dep}.tar.gz"
        if not out.exists():
            data = subprocess.run(
                ["git", "-C", args.cutlass, "archive", "--format=tar.gz", pin["commit"],
                 "include", "tools/util/include"],
                check=True, capture_output=True,
            ).stdout
            out.write_bytes(data)
        deps_env[dep] = pin["env"]
    kb = Path(args.kb).resolve()
    shutil.copy2(kb, stage / "kernel-builder")
    shutil.copy2(Path(__file__), stage / "compat_run.py")
    manifest = {"kernels_community_commit": commit, "kernels": wanted, "deps": deps_env}
    (stage / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    size = sum(p.stat().st_size for p in stage.rglob("*") if p.is_file())
    print(f"compat_run: staged {len(wanted)} kernels at {commit[:12]} in {stage} ({size / 2**20:.1f} MiB)")


# --------------------------------------------------------------------------- run


def first_error(log: str) -> str:
    """The first line that reads as a compiler or tool error, else the last non-empty line."""
    lines = [l.strip() for l in log.splitlines() if l.strip()]
    for pattern in (r"error[:(]", r"fatal error", r"^error\b", r"Error"):
        for line in lines:
            if re.search(pattern, line):
                return line[:400]
    return lines[-1][:400] if lines else ""


# A failure whose message says there is no GPU: a test written for CUDA only that does not skip
# on a machine without one. Counted apart, so a CPU run's table tells them from real failures.
NO_GPU = re.compile(r"Found no NVIDIA driver|Torch not compiled with CUDA|No CUDA GPUs are available")


def pytest_counts(junit: Path) -> dict:
    counts = {"passed": 0, "failed": 0, "skipped": 0, "errors": 0, "no_gpu": 0}
    if not junit.exists():
        return counts
    root = ET.parse(junit).getroot()
    for case in root.iter("testcase"):
        for outcome in case:
            if outcome.tag in ("failure", "error") and NO_GPU.search(
                (outcome.get("message") or "") + (outcome.text or "")
            ):
                counts["no_gpu"] += 1
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    for s in suites:
        tests = int(s.get("tests", 0))
        failures = int(s.get("failures", 0))
        errors = int(s.get("errors", 0))
        skipped = int(s.get("skipped", 0))
        counts["failed"] += failures
        counts["errors"] += errors
        counts["skipped"] += skipped
        counts["passed"] += tests - failures - errors - skipped
    return counts


def progress_counts(stdout: str) -> dict:
    """Passed/failed/skipped of a pytest -v run stopped before its summary, from its per-test
    lines (`tests/test_x.py::test_y[a] PASSED  [ 12%]`): what ran before the time limit, and the
    first failures by name."""
    counts = {"passed": 0, "failed": 0, "skipped": 0, "errors": 0, "no_gpu": 0, "stopped_at_limit": True}
    failed = []
    for line in stdout.splitlines():
        m = re.match(r"^(\S+::\S+).*? (PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)\b", line)
        if not m:
            continue
        key = {"PASSED": "passed", "XPASS": "passed", "FAILED": "failed", "ERROR": "errors",
               "SKIPPED": "skipped", "XFAIL": "skipped"}[m.group(2)]
        counts[key] += 1
        if key in ("failed", "errors") and len(failed) < 20:
            failed.append(m.group(1))
    if failed:
        counts["first_failures"] = failed
    return counts


def run_logged(cmd: list[str], env: dict, timeout: int, stem: Path) -> tuple[int | str, str, str]:
    """Run `cmd` with its output in files (`stem`.out/.err), so that a build stopped at its
    time limit still shows how far it got; on that limit its whole process group (CMake,
    Ninja, every nvcc) is killed, so that nothing of it competes with the next kernel.
    Returns (exit status or "timeout", stdout, stderr)."""
    out_path, err_path = stem.with_suffix(".out"), stem.with_suffix(".err")
    with open(out_path, "w") as out, open(err_path, "w") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, start_new_session=True)
        try:
            status: int | str = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            # Ctrl-C first, as a user would: kernel-builder then stops its compile cache's
            # server cleanly, so every translation unit that finished stays in the cache for
            # the next attempt; whatever is left after the grace period is killed.
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            status = "timeout"
    texts = out_path.read_text(errors="replace"), err_path.read_text(errors="replace")
    out_path.unlink()
    err_path.unlink()
    return status, texts[0], texts[1][-200_000:]


def compile_cache_counts(stdout: str) -> dict | None:
    """Per built cell of a `build-and-copy --json` summary: its compile cache's counts
    (`compile-cache`) and its parallelism (`parallel`: Ninja jobs, nvcc threads, cicc splits),
    or None where the output is no summary."""
    try:
        doc = json.loads(stdout)
    except json.JSONDecodeError:
        return None
    cells = doc.get("variants") if isinstance(doc, dict) else None
    if not isinstance(cells, list):
        return None
    return {c.get("name"): {"compile-cache": c.get("compile-cache"), "parallel": c.get("parallel")}
            for c in cells if isinstance(c, dict)}


def run_kernel(name: str, stage: Path, work: Path, args: argparse.Namespace, env: dict) -> dict:
    src = stage / "kernels" / name
    kdir = work / name
    shutil.rmtree(kdir, ignore_errors=True)
    shutil.copytree(src, kdir, symlinks=True)
    kb = str(stage / "kernel-builder")
    config = build_toml(kdir)
    general = config.get("general", {})
    record: dict = {"kernel": name, "slice": args.slice, "backend": args.backend}

    check = subprocess.run([kb, "check-config", str(kdir), "--json"], capture_output=True, text=True, env=env)
    try:
        doc = json.loads(check.stdout)
        # The summary, or the --json failure document ("ok": false) with the file's problems.
        record["check_config"] = {
            "valid": doc.get("valid", check.returncode == 0),
            "warnings": len(doc.get("warnings", [])),
            "errors": doc.get("error_count", 0),
        }
        if not doc.get("valid", True):
            record["check_config"]["first"] = (doc.get("problems") or [{}])[0].get("message", "")[:300]
    except json.JSONDecodeError:
        record["check_config"] = {"valid": check.returncode == 0, "raw": (check.stdout + check.stderr)[-300:]}

    # One cell per kernel: the compiled cell of the run's torch and backend, or the noarch one.
    # A stable-ABI kernel's cell of the same compute and system has its own name
    # (`torch-stable-abi210-cu130-x86_64-linux`): list-variants says which the kernel has.
    variant = args.compiled_variant if args.backend in compiled_backends(config) else f"torch-{args.backend}"
    listed = subprocess.run([kb, "list-variants", str(kdir), "--all", "--json"], capture_output=True, text=True, env=env)
    try:
        names = {v["name"] for v in json.loads(listed.stdout)}
    except (json.JSONDecodeError, TypeError, KeyError):
        names = set()
    if names and variant not in names:
        compute_system = variant.split("-", 2)[-1]  # cu130-x86_64-linux
        stable = sorted(n for n in names if n.startswith("torch-stable-abi") and n.endswith(compute_system))
        variant = stable[-1] if stable else variant
    # --pins: the cell's torch and CUDA toolkit from nix/torch-wheels.json, no --python at all.
    toolchain = [] if args.pins else ["--python", args.python]
    cmd = [kb, "build-and-copy", str(kdir), "--nix", "never", *toolchain, "--json",
           "--variant", variant, *args.build_args]
    start = time.monotonic()
    status, out, err = run_logged(cmd, env, BUILD_TIMEOUT_S, work / f"{name}.build")
    record["build_seconds"] = round(time.monotonic() - start, 1)
    (work / f"{name}.build.log").write_text(f"$ {' '.join(cmd)}\n{out}\n--- stderr\n{err}")
    record["compile_cache"] = compile_cache_counts(out)
    # The build is over (its tests may follow): a driver that runs one build at a time on the
    # machine's cores (scripts/gpu-queue.sh) starts the next kernel's build on this mark.
    (work / f"{name}.built").touch()
    # (A build stopped midway leaves its scratch directory, `.kernel-builder-tmp-…`: no variant.)
    variants = sorted(p.name for p in (kdir / "build").iterdir() if p.is_dir() and not p.name.startswith(".")) \
        if (kdir / "build").is_dir() else []
    record["variants"] = variants
    record["built"] = status == 0
    if status != 0:
        record["build_status"] = status
        record["first_error"] = first_error(err + "\n" + out)
        if status == "timeout":
            steps = re.findall(r"\[\d+/\d+\]", err + out)
            record["first_error"] = f"build stopped at the run's {BUILD_TIMEOUT_S} s limit" + (
                f", at compile step {steps[-1]}" if steps else "")
        return record

    tests = kdir / "tests"
    # From the pins, only a CPU cell's tests run here: in the pinned cell's own test environment
    # (`testshell --variant`: the pinned torch wheel, kernels 0.17.2, pytest). A CUDA cell's
    # need the GPU machine, whose torch is not the pinned one.
    if args.no_tests or (args.pins and args.backend != "cpu"):
        record["tests"] = "not run (compile-only run)"
        return record
    if not tests.is_dir():
        record["tests"] = "none"
        return record
    if variant not in variants:
        record["tests"] = f"{variant} not built"
        return record
    cell = variant
    variant = kdir / "build" / variant
    package = general.get("name", name).replace("-", "_")
    links = work / f"{name}.pythonpath"
    shutil.rmtree(links, ignore_errors=True)
    links.mkdir()
    if (variant / "__init__.py").exists():
        (links / package).symlink_to(variant)
    else:
        links = variant
    test_env = dict(env)
    paths = [str(links)]
    if args.backend == "cpu":
        # PyPI's torch is a CUDA build even on a machine without a GPU, and the loader then picks
        # a cuXY variant; the CPU run makes torch report no CUDA, as the +cpu wheel of PyTorch's
        # own index (unreachable here) would, so that the kernel's CPU cell is the one loaded.
        shim = work / "cpu-shim"
        shim.mkdir(exist_ok=True)
        (shim / "sitecustomize.py").write_text("import torch\ntorch.version.cuda = None\n")
        paths.append(str(shim))
    paths += args.test_path
    test_env["PYTHONPATH"] = os.pathsep.join(p for p in (*paths, env.get("PYTHONPATH", "")) if p)
    repo_id = general.get("hub", {}).get("repo-id") or f"kernels-community/{name}"
    test_env["LOCAL_KERNELS"] = f"{repo_id}={kdir / 'build'}"
    test_env["PYTHONDONTWRITEBYTECODE"] = "1"
    junit = work / f"{name}.junit.xml"
    start = time.monotonic()
    # The output goes to files, not pipes: a suite stopped at the time limit still shows how far
    # it got (pytest -v's per-test lines, counted by `progress_counts`).
    test_cmd = [args.python, "-X", "faulthandler", "-P", "-m", "pytest", "-v", "-rfE", "-p", "no:cacheprovider", "-x" if args.exitfirst else "-v",
                f"--junitxml={junit}", *args.pytest_arg, "tests"]
    if args.pins:
        # testshell sets PYTHONPATH (the package) and LOCAL_KERNELS itself; the CPU shim and
        # --test-path go in front of its PYTHONPATH.
        front = os.pathsep.join(paths[1:])
        pytest = " ".join(shlex.quote(a) for a in ["python", *test_cmd[1:]])
        test_cmd = [str(stage / "kernel-builder"), "testshell", str(kdir), "--variant", cell, "--",
                    "sh", "-c", f'PYTHONPATH={shlex.quote(front)}:"$PYTHONPATH" exec {pytest}']
    # -P: not the kernel's own directory first on sys.path, where a source copy of the
    # package (flash-mla's `flash_mla/`, for its setup.py) would shadow the built one.
    # -X faulthandler: a test process that dies of a signal prints where it was.
    with open(work / f"{name}.pytest.out", "w+") as out, open(work / f"{name}.pytest.err", "w+") as err_f:
        proc = subprocess.Popen(test_cmd, cwd=kdir, stdout=out, stderr=err_f, text=True, env=test_env,
                                start_new_session=True)
        try:
            record["tests_status"] = proc.wait(timeout=TEST_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            record["tests_status"] = "timeout"
        out.seek(0)
        err_f.seek(0)
        stdout, stderr = out.read(), err_f.read()
    tail = stdout[-3000:] + stderr[-2000:]
    log = stdout[-200_000:] + "\n--- stderr\n" + stderr[:100_000]
    record["test_seconds"] = round(time.monotonic() - start, 1)
    record["tests"] = pytest_counts(junit) if record["tests_status"] != "timeout" else progress_counts(stdout)
    if record["tests_status"] not in (0, 5):
        record["tests_tail"] = tail[-1500:]
    (work / f"{name}.tests.log").write_text(log)
    return record


def run(args: argparse.Namespace) -> None:
    stage = Path(args.stage).resolve()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    manifest = json.loads((stage / "manifest.json").read_text())
    kernels = args.kernels.split(",") if args.kernels else manifest["kernels"]
    work = Path(args.work or tempfile.mkdtemp(prefix="compat-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    deps_dir = work / "deps"
    for dep, var in manifest["deps"].items():
        target = deps_dir / dep
        if not target.exists():
            target.mkdir(parents=True)
            with tarfile.open(stage / "deps" / f"{dep}.tar.gz") as tar:
                tar.extractall(target, filter="data")
        env[var] = str(target)
    results = out / f"compat-{args.slice}.jsonl"
    print(f"compat_run: {len(kernels)} kernels, {args.parallel} at a time, work in {work}", flush=True)

    def one(name: str) -> dict:
        try:
            rec = run_kernel(name, stage, work, args, env)
        except Exception as e:  # a broken kernel must not end the run
            rec = {"kernel": name, "slice": args.slice, "built": False, "first_error": f"compat_run: {e!r}"}
        rec["kernels_community_commit"] = manifest["kernels_community_commit"]
        line = json.dumps(rec)
        with lock:
            with open(results, "a") as f:
                f.write(line + "\n")
            if args.keep_logs:
                # One archive, rewritten after each kernel: a run stopped at its time limit still
                # brings back the logs of every kernel it finished (and few files travel back).
                with tarfile.open(out / f"logs-{args.slice}.tar.gz.tmp", "w:gz") as tar:
                    for log in sorted(work.glob("*.log")):
                        tar.add(log, arcname=log.name)
                os.replace(out / f"logs-{args.slice}.tar.gz.tmp", out / f"logs-{args.slice}.tar.gz")
        print(line, flush=True)
        return rec

    lock = threading.Lock()

    with concurrent.futures.ThreadPoolExecutor(max_workers=args.parallel) as pool:
        list(pool.map(one, kernels))


# --------------------------------------------------------------------------- report


def report(args: argparse.Namespace) -> None:
    rows = {}
    for path in args.results:
        for line in Path(path).read_text().splitlines():
            if line.strip():
                rec = json.loads(line)
                rows[(rec["kernel"], rec.get("backend", ""))] = rec
    print("| kernel | backend | commit | check-config | built (cells) | build s | tests passed / failed / skipped | notes |")
    print("|---|---|---|---|---|---|---|---|")
    for (kernel, backend), r in sorted(rows.items()):
        cc = r.get("check_config", {})
        cc_s = "ok" if cc.get("valid") else "errors"
        if cc.get("warnings"):
            cc_s += f", {cc['warnings']} warnings"
        built = ("yes: " + ", ".join(r.get("variants", []))) if r.get("built") else "**no**"
        tests = r.get("tests")
        if isinstance(tests, dict):
            t = f"{tests['passed']} / {tests['failed'] + tests['errors']} / {tests['skipped']}"
            if tests.get("no_gpu"):
                t += f" ({tests['no_gpu']} failed for want of a GPU)"
        else:
            t = tests or "—"
        notes = r.get("first_error", "") if not r.get("built") else ""
        if r.get("build_status") == "timeout" and not notes:
            notes = f"build stopped at the run's time limit ({r.get('build_seconds')} s)"
        if r.get("tests_status") == "timeout":
            notes = "tests timed out"
        elif isinstance(r.get("tests_status"), int) and r["tests_status"] < 0:
            notes = f"the test process died of signal {-r['tests_status']}"
        notes = notes.replace("|", "\\|")
        print(f"| {kernel} | {backend} | {r.get('kernels_community_commit', '')[:8]} | {cc_s} | {built} | "
              f"{r.get('build_seconds', '—')} | {t} | {notes} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="verb", required=True)
    pp = sub.add_parser("prepare")
    pp.add_argument("stage")
    pp.add_argument("--repo", required=True)
    pp.add_argument("--kernels")
    pp.add_argument("--backend", default="cuda")
    pp.add_argument("--cutlass")
    pp.add_argument("--kb", default=str(ROOT / "target" / "release" / "kernel-builder"))
    pr = sub.add_parser("run")
    pr.add_argument("stage")
    pr.add_argument("--out", required=True)
    pr.add_argument("--python", default="python3")
    pr.add_argument("--backend", default="cuda")
    pr.add_argument("--compiled-variant", required=True,
                    help="the variant a compiled kernel builds (e.g. torch211-cxx11-cu130-x86_64-linux)")
    pr.add_argument("--kernels")
    pr.add_argument("--slice", default="all")
    pr.add_argument("--parallel", type=int, default=1)
    pr.add_argument("--work")
    pr.add_argument("--exitfirst", action="store_true")
    pr.add_argument("--keep-logs", action="store_true")
    pr.add_argument("--no-tests", action="store_true", help="build only (CUDA cells on a machine without a GPU)")
    pr.add_argument("--pins", action="store_true",
                    help="build the cell from its pinned wheels (no --python): the COMPAT 'from the pins' column; "
                         "a CPU cell's tests then run in its pinned test environment (testshell --variant), "
                         "a CUDA cell is built only")
    pr.add_argument("--pytest-arg", action="append", default=[],
                    help="passed to pytest before `tests`, e.g. `-m kernels_ci`, the selection "
                         "kernels-community's own CI runs (`nix run .#ci-test`)")
    pr.add_argument("--test-path", action="append", default=[],
                    help="a directory of Python packages the kernels' tests need (pip install --target)")
    rp = sub.add_parser("report")
    rp.add_argument("results", nargs="+")
    argv = sys.argv[1:]
    build_args = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = p.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    args.build_args = build_args
    {"prepare": prepare, "run": run, "report": report}[args.verb](args)


if __name__ == "__main__":
    main()
