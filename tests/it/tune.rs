//! `kernel-builder tune`'s failure paths, none of which needs a GPU: a missing or misplaced
//! bench script, a Python without helion, a machine without a GPU, a bench script that calls
//! no kernel or fails, and an interrupted run. Each asserts the exact message and that the
//! kernel directory (with its earlier heuristic) is byte-for-byte unchanged.
//!
//! The tuning Python is the real `python3` on PATH run over stub packages (`torch`,
//! `triton`, `helion`, and a small stand-in for helion's AOT runner that runs the bench
//! script's collect phase the way the real one does): the probe and the runner protocol are
//! exercised for real; only the GPU and the search are absent.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use assert_cmd::Command;
use camino::{Utf8Path, Utf8PathBuf};

const BUILD_TOML: &str = r#"[general]
name = "toy-helion"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cuda"]
python-depends = ["helion"]

[torch-noarch]
"#;

/// The heuristic an earlier tune left; every failure must keep it.
const OLD_HEURISTIC: &str = "# earlier tune\ndef key_op(*args):\n    return 0\n\n\ndef autotune_op(*args):\n    return {'block_sizes': [64]}\n";

/// torch without a GPU (or with one, when `FAKE_GPU=1`).
const TORCH_STUB: &str = r#"import os
__version__ = "2.11.0+cu130"
class version:
    cuda = "13.0"
    hip = None
class cuda:
    @staticmethod
    def is_available():
        return os.environ.get("FAKE_GPU") == "1"
    @staticmethod
    def get_device_name():
        return "Fake GPU"
"#;

const HARDWARE_STUB: &str = r#"class HardwareInfo:
    device_kind = "cuda"
    compute_capability = "sm90"
    hardware_id = "cuda_Fake_GPU_13.0"
def get_hardware_info():
    return HardwareInfo()
"#;

/// A stand-in for `python -m helion.autotuner.aot_runner`: the real runner's arguments and
/// protocol (run the benchmark command with HELION_AOT_MODE=<phase> and the data dir; fail
/// when it fails or the collect phase recorded nothing; exit 128 + n on signal n after
/// stopping it). The build phase writes `_helion_aot_<stem>_cuda_sm90.py` next to each
/// recorded source file, headed by `--file-header @FILE`, as the real one does.
const RUNNER_STUB: &str = r#"import argparse, json, os, signal, subprocess, sys
from pathlib import Path
p = argparse.ArgumentParser()
p.add_argument("--output-dir"); p.add_argument("--run-id"); p.add_argument("--phase")
p.add_argument("--goal"); p.add_argument("--threshold"); p.add_argument("--max-configs")
p.add_argument("--kernel", action="append"); p.add_argument("--file-header", default="")
p.add_argument("--no-score-matrix", action="store_true")
p.add_argument("cmd", nargs=argparse.REMAINDER)
a = p.parse_args()
cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
run_dir = Path(a.output_dir) / a.run_id
run_dir.mkdir(parents=True, exist_ok=True)
configs = run_dir / "tuned_configs_cuda_Fake_GPU_13.0.json"
child = None
def on_signal(signum, frame):
    print(f"WARNING - Received {signal.Signals(signum).name}, terminating...", flush=True)
    if child is not None:
        child.terminate()
    sys.exit(128 + signum)
signal.signal(signal.SIGINT, on_signal)
signal.signal(signal.SIGTERM, on_signal)
if a.phase == "build":
    tuned = json.loads(configs.read_text())
    header = Path(a.file_header[1:]).read_text() if a.file_header.startswith("@") else a.file_header
    for kernel, entries in tuned.items():
        src = Path(entries[0]["kernel_source_file"])
        out = src.parent / f"_helion_aot_{src.stem}_cuda_sm90.py"
        out.write_text(header + f"def key_{kernel}(*args):\n    return 0\n\n\ndef autotune_{kernel}(*args):\n    return {entries[0]['config']!r}\n")
        print(f"INFO - Saved combined heuristic for 1 kernel(s) to: {out}", flush=True)
    (run_dir / "heuristic_summary_cuda_Fake_GPU_13.0.json").write_text(json.dumps(
        {k: {"num_configs": 1, "performance_stats": {"max_slowdown": 1.0}} for k in tuned}))
    sys.exit(0)
env = dict(os.environ, HELION_AOT_MODE=a.phase, HELION_AOT_DATA_DIR=str(run_dir))
child = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
for line in child.stdout:
    print(line, end="", flush=True)
code = child.wait()
child = None
if code != 0:
    print(f"ERROR - {a.phase.capitalize()} phase failed with return code {code}", flush=True)
    sys.exit(1)
if a.phase == "collect" and not configs.exists():
    print("ERROR - No configs were collected", flush=True)
    sys.exit(1)
sys.exit(0)
"#;

/// helion.aot_kernel and the parts of helion's runtime that `tune`'s timing harness uses. In
/// collect mode a call records (or, when the data dir already has one for the shape, reuses)
/// the config `{"block_sizes": [64]}`; in evaluate mode the config comes from the heuristic
/// file next to the kernel's source. A compiled config "takes" 64 / block_sizes[0] ms.
const HELION_INIT_STUB: &str = r#"__version__ = "1.4.0"
from helion.runtime.kernel import Kernel
def aot_kernel(**settings):
    return Kernel
"#;
const KERNEL_STUB: &str = r#"import csv, importlib.util, json, os
from pathlib import Path
from helion.autotuner.aot_kernel import extract_shape_features
TIMES = []
class Kernel:
    def __init__(self, fn):
        self.fn = fn
        self.name = fn.__name__
    def normalize_args(self, *args, **kwargs):
        return args
    def bind(self, args):
        return Bound(self, args)
    def __call__(self, *args):
        mode = os.environ.get("HELION_AOT_MODE", "evaluate")
        if mode == "collect":
            f = Path(os.environ["HELION_AOT_DATA_DIR"]) / "tuned_configs_cuda_Fake_GPU_13.0.json"
            data = json.loads(f.read_text()) if f.exists() else {}
            entries = data.setdefault(self.name, [])
            features = extract_shape_features(args)
            if any(e["shape_features"] == features for e in entries):
                print(f"stub: reusing the recorded config for {features}", flush=True)
            else:
                print(f"stub: tuning {features}", flush=True)
                entries.append({"config": {"block_sizes": [64]}, "shape_features": features,
                                "kernel_source_file": self.fn.__code__.co_filename})
            f.write_text(json.dumps(data))
        elif mode == "measure":
            # As helion's AOTAutotuneCache does: one row per recorded config timed on this call.
            d = Path(os.environ["HELION_AOT_DATA_DIR"])
            tuned = json.loads((d / "tuned_configs_cuda_Fake_GPU_13.0.json").read_text())
            m = d / "measurements_cuda_Fake_GPU_13.0.csv"
            new = not m.exists()
            with m.open("a", newline="") as out:
                w = csv.writer(out)
                if new:
                    w.writerow(["kernel_name", "shape_hash", "config_hash", "config", "shape_features", "timing_ms"])
                for e in tuned.get(self.name, []):
                    w.writerow([self.name, "h", "c", json.dumps(e["config"]), json.dumps(extract_shape_features(args)), 0.5])
        return self.fn(*args)
class Spec:
    def default_config(self):
        return {"block_sizes": [16]}
class Bound:
    config_spec = Spec()
    def __init__(self, kernel, args):
        self._config = None
        if os.environ.get("HELION_AOT_MODE") == "evaluate":
            src = Path(kernel.fn.__code__.co_filename)
            h = src.parent / f"_helion_aot_{src.stem}_cuda_sm90.py"
            spec = importlib.util.spec_from_file_location("h", h)
            m = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(m)
            self._config = getattr(m, f"autotune_{kernel.name}")(*args)
    def compile_config(self, config, allow_print=True):
        def run(*args):
            TIMES.append(64 / config["block_sizes"][0])
        return run
"#;
const AOT_KERNEL_STUB: &str = r#"def extract_shape_features(args):
    return {f"arg{i}_scalar": a for i, a in enumerate(args)}
"#;
const AOT_CACHE_STUB: &str = r#"from pathlib import Path
def find_heuristic_file(source, kernel_name=None):
    p = Path(source).parent / f"_helion_aot_{Path(source).stem}_cuda_sm90.py"
    return p if p.exists() else None
"#;
const TRITON_TESTING_STUB: &str = r#"from helion.runtime.kernel import TIMES
def do_bench(fn, warmup=25, rep=100, return_mode="mean"):
    fn()
    return TIMES[-1]
"#;

/// What the stub environment provides.
#[derive(Clone, Copy, PartialEq)]
enum Stubs {
    /// torch only.
    TorchOnly,
    /// torch, triton and helion (with the runner stand-in).
    Full,
}

struct Fixture {
    _tmp: tempfile::TempDir,
    root: Utf8PathBuf,
    kernel: Utf8PathBuf,
    python: Utf8PathBuf,
    /// TMPDIR of the command: the scratch directory must be gone from it afterwards.
    tmpdir: Utf8PathBuf,
}

fn write(path: &Utf8Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

impl Fixture {
    fn new(stubs: Stubs, bench: &str) -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let root = Utf8PathBuf::from_path_buf(tmp.path().to_owned()).unwrap();
        let kernel = root.join("toy-helion");
        write(&kernel.join("build.toml"), BUILD_TOML);
        write(&kernel.join("torch-ext/toy_helion/__init__.py"), "from .op import op\n");
        write(&kernel.join("torch-ext/toy_helion/op.py"), OP_PY);
        write(&kernel.join("torch-ext/toy_helion/_helion_aot_op_cuda_sm90.py"), OLD_HEURISTIC);
        write(&kernel.join("bench.py"), bench);
        let site = root.join("site");
        write(&site.join("torch/__init__.py"), TORCH_STUB);
        if stubs == Stubs::Full {
            write(&site.join("triton/__init__.py"), "__version__ = '3.6.0'\n");
            write(&site.join("triton/testing.py"), TRITON_TESTING_STUB);
            write(&site.join("helion/__init__.py"), HELION_INIT_STUB);
            write(&site.join("helion/_hardware.py"), HARDWARE_STUB);
            write(&site.join("helion/runtime/__init__.py"), "");
            write(&site.join("helion/runtime/kernel.py"), KERNEL_STUB);
            write(&site.join("helion/autotuner/__init__.py"), "");
            write(&site.join("helion/autotuner/aot_runner.py"), RUNNER_STUB);
            write(&site.join("helion/autotuner/aot_kernel.py"), AOT_KERNEL_STUB);
            write(&site.join("helion/autotuner/aot_cache.py"), AOT_CACHE_STUB);
        }
        let python = root.join("python");
        write(&python, &format!("#!/bin/sh\nPYTHONPATH='{site}' exec python3 \"$@\"\n"));
        std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
        let smi = root.join("bin/nvidia-smi");
        write(&smi, "#!/bin/sh\necho 999.01\n");
        std::fs::set_permissions(&smi, std::fs::Permissions::from_mode(0o755)).unwrap();
        let tmpdir = root.join("tmp");
        std::fs::create_dir(&tmpdir).unwrap();
        Fixture { _tmp: tmp, root, kernel, python, tmpdir }
    }

    fn kb(&self) -> Command {
        let mut c = crate::util::kb();
        c.current_dir(&self.root)
            .env("TMPDIR", &self.tmpdir)
            .env("FAKE_GPU", "1")
            .env("PATH", format!("{}:{}", self.root.join("bin"), std::env::var("PATH").unwrap()))
            .env_remove("KERNEL_BUILDER_PYTHON")
            .args(["tune", "toy-helion", "--effort", "quick", "--python"])
            .arg(self.python.as_str());
        c
    }

    /// `tune` with extra arguments, expected to succeed: its stderr.
    fn succeeds(&self, extra: &[&str]) -> String {
        let out = self.kb().args(extra).output().unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(out.status.success(), "tune failed; stderr:\n{stderr}");
        stderr
    }

    /// `tune` with extra arguments, expected to fail: (exit code, stderr).
    fn fails(&self, extra: &[&str], gpu: bool) -> (i32, String) {
        let out = self.kb().args(extra).env("FAKE_GPU", if gpu { "1" } else { "0" }).output().unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(!out.status.success(), "tune should have failed; stderr:\n{stderr}");
        (out.status.code().unwrap(), stderr)
    }

    /// Every file of the kernel directory with its contents.
    fn snapshot(&self) -> BTreeMap<String, String> {
        walkdir::WalkDir::new(&self.kernel)
            .into_iter()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().is_file())
            .map(|e| {
                let rel = e.path().strip_prefix(&self.kernel).unwrap().to_string_lossy().into_owned();
                (rel, std::fs::read_to_string(e.path()).unwrap())
            })
            .collect()
    }

    /// The kernel directory holds exactly what the fixture wrote (the old heuristic
    /// included), and no scratch directory is left in TMPDIR.
    fn assert_untouched(&self, before: &BTreeMap<String, String>) {
        assert_eq!(&self.snapshot(), before);
        assert_eq!(
            self.snapshot().get("torch-ext/toy_helion/_helion_aot_op_cuda_sm90.py").unwrap(),
            OLD_HEURISTIC
        );
        let left: Vec<_> = std::fs::read_dir(&self.tmpdir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert!(left.is_empty(), "scratch left behind in TMPDIR: {left:?}");
    }
}

const OP_PY: &str = "import helion\n\n\n@helion.aot_kernel()\ndef op(x):\n    return x\n";

/// Calls `op` once per command-line argument (default: `op(1)`).
const CALLING_BENCH: &str = r#"import os, sys
from pathlib import Path
print("bench env:", os.environ.get("HELION_AOT_MODE"), os.environ.get("HELION_AUTOTUNE_EFFORT"), flush=True)
sys.path.insert(0, str(Path(__file__).resolve().parent / "torch-ext"))
from toy_helion.op import op
calls = [int(a) for a in sys.argv[1:]] or [1]
# As kernels/attention-helion/bench.py does: the measure phase calls a wider list than the search.
if os.environ.get("HELION_AOT_MODE") == "measure":
    calls.append(9)
for n in calls:
    op(n)
"#;

const NO_KERNEL_BENCH: &str = "print('bench: nothing to call')\n";

#[test]
fn bench_script_missing() {
    let f = Fixture::new(Stubs::Full, NO_KERNEL_BENCH);
    let before = f.snapshot();
    let (code, stderr) = f.fails(&["--bench", "toy-helion/nope.py"], true);
    assert_eq!(code, 1);
    assert_eq!(
        stderr,
        "error: bench script `toy-helion/nope.py` does not exist: pass --bench FILE, or write the \
         calls to tune for in DIR/bench.py (`kernel-builder init --template helion` writes one)\n"
    );
    f.assert_untouched(&before);
}

/// A compiled kernel (kernels/relu's build.toml) is not a Helion kernel: `tune` says so,
/// instead of asking for a bench script, and changes nothing.
#[test]
fn compiled_kernel_is_not_a_helion_kernel() {
    let f = Fixture::new(Stubs::Full, NO_KERNEL_BENCH);
    std::fs::remove_dir_all(&f.kernel).unwrap();
    let relu = Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels/relu");
    for e in walkdir::WalkDir::new(&relu).into_iter().map(|e| e.unwrap()) {
        let rel = e.path().strip_prefix(&relu).unwrap();
        if e.file_type().is_file() && !rel.starts_with("build") && !rel.starts_with("gpu-check") {
            write(&f.kernel.join(rel.to_str().unwrap()), &std::fs::read_to_string(e.path()).unwrap());
        }
    }
    let before = f.snapshot();
    let (code, stderr) = f.fails(&[], true);
    assert_eq!(code, 1);
    assert_eq!(
        stderr,
        "error: `toy-helion/build.toml` is a compiled `[torch]` kernel, not a Helion kernel: `tune` pre-tunes the \
         Helion kernels of a `[torch-noarch]` kernel (Python with `@helion.kernel` functions, as `kernel-builder \
         init --template helion` writes) and a compiled kernel has nothing for it to tune\n"
    );
    assert_eq!(f.snapshot(), before);
}

/// A noarch kernel that does not use Helion (no `helion` in python-depends, no Python file of
/// its package imports it) is not a Helion kernel: `tune` says so instead of asking for the
/// bench script it lacks, and changes nothing.
#[test]
fn noarch_kernel_without_helion_is_not_a_helion_kernel() {
    let f = Fixture::new(Stubs::Full, NO_KERNEL_BENCH);
    write(&f.kernel.join("build.toml"), &BUILD_TOML.replace("python-depends = [\"helion\"]\n", ""));
    write(&f.kernel.join("torch-ext/toy_helion/op.py"), "import torch\n\n\ndef op(x):\n    return x\n");
    std::fs::remove_file(f.kernel.join("bench.py")).unwrap();
    let before = f.snapshot();
    let (code, stderr) = f.fails(&[], true);
    assert_eq!(code, 1);
    assert_eq!(
        stderr,
        "error: `toy-helion/build.toml` is a noarch kernel that does not use Helion, not a Helion kernel: no \
         Python file under `toy-helion/torch-ext/toy_helion` imports helion and `helion` is not in \
         `general.python-depends`; `tune` pre-tunes `@helion.kernel` functions (as `kernel-builder init \
         --template helion` writes), and this kernel has none to tune\n"
    );
    f.assert_untouched(&before);
    // Importing helion is enough to be one (the missing dependency is then a warning).
    write(&f.kernel.join("torch-ext/toy_helion/op.py"), OP_PY);
    let (_, stderr) = f.fails(&[], true);
    assert!(stderr.starts_with("warning: toy-helion/build.toml does not list `helion`"), "{stderr}");
    assert!(stderr.contains("error: bench script `toy-helion/bench.py` does not exist"), "{stderr}");
}

/// `--bench` is taken relative to the current directory, or else to DIR; a script outside DIR,
/// a directory, and a script under a part of DIR the scratch copy leaves out are refused
/// before anything runs.
#[test]
fn bench_paths_inside_outside_and_relative_to_the_kernel_directory() {
    let f = Fixture::new(Stubs::Full, NO_KERNEL_BENCH);
    write(&f.root.join("elsewhere.py"), NO_KERNEL_BENCH);
    write(&f.kernel.join("build/bench_old.py"), NO_KERNEL_BENCH);
    let before = f.snapshot();
    let (_, stderr) = f.fails(&["--bench", "elsewhere.py"], true);
    assert_eq!(
        stderr,
        "error: bench script `elsewhere.py` is not inside the kernel directory `toy-helion`: tune \
         runs it from a scratch copy of that directory, so move it there\n"
    );
    // From the parent of DIR, `bench.py` is DIR's: the run gets as far as the script itself.
    let (_, stderr) = f.fails(&["--bench", "bench.py"], true);
    assert!(stderr.contains("bench: nothing to call\n"), "{stderr}");
    assert!(stderr.contains("error: the bench script `bench.py` called no Helion kernel"), "{stderr}");
    let (code, stderr) = f.fails(&["--bench", "torch-ext"], true);
    assert_eq!(code, 1);
    assert_eq!(
        stderr,
        "error: `--bench toy-helion/torch-ext` is a directory: give the bench script, a Python file \
         inside `toy-helion`\n"
    );
    let (code, stderr) = f.fails(&["--bench", "toy-helion/build/bench_old.py"], true);
    assert_eq!(code, 1);
    assert_eq!(
        stderr,
        "error: bench script `toy-helion/build/bench_old.py` is under `build/`, which tune does not copy \
         into its scratch directory (build outputs and tuning records are left out): keep the bench \
         script beside build.toml or in a directory of its own\n"
    );
    f.assert_untouched(&before);
}

/// A relative `--python` path (a virtual environment's `.venv/bin/python`) still names the same
/// Python when the runner and the bench script run from the scratch directory.
#[test]
fn a_relative_python_path_works_in_every_phase() {
    let f = Fixture::new(Stubs::Full, CALLING_BENCH);
    let out = crate::util::kb()
        .current_dir(&f.root)
        .env("TMPDIR", &f.tmpdir)
        .env("FAKE_GPU", "1")
        .env("PATH", format!("{}:{}", f.root.join("bin"), std::env::var("PATH").unwrap()))
        .env_remove("KERNEL_BUILDER_PYTHON")
        .args(["tune", "toy-helion", "--effort", "quick", "--python", "./python"])
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("stub: tuning {'arg0_scalar': 1}\n"), "{stderr}");
}

/// Negative values reach the flags' own checks (clap would otherwise take `-1` for a flag and
/// suggest `-- -1`, which hands it to the bench script).
#[test]
fn negative_threshold_and_max_configs_get_the_flags_messages() {
    let f = Fixture::new(Stubs::Full, NO_KERNEL_BENCH);
    let (code, stderr) = f.fails(&["--threshold", "-1"], true);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("invalid value '-1' for '--threshold <THRESHOLD>': the threshold is a slowdown factor, at least 1.0 (got -1)"),
        "{stderr}"
    );
    assert!(!stderr.contains("tip:"), "{stderr}");
    for (value, message) in [
        ("-3", "a heuristic holds at least one config (got -3)"),
        ("0", "a heuristic holds at least one config (got 0)"),
        ("two", "`two` is not a whole number"),
    ] {
        let (code, stderr) = f.fails(&["--max-configs", value], true);
        assert_eq!(code, 2);
        assert!(
            stderr.contains(&format!("invalid value '{value}' for '--max-configs <N>': {message}")),
            "{stderr}"
        );
    }
}

#[test]
fn python_without_helion() {
    let f = Fixture::new(Stubs::TorchOnly, NO_KERNEL_BENCH);
    let before = f.snapshot();
    let (code, stderr) = f.fails(&[], true);
    assert_eq!(code, 1);
    assert_eq!(
        stderr,
        format!(
            "error: `{}` cannot import helion: ModuleNotFoundError: No module named 'helion'\n\
             hint: install it into that Python (pip install helion; with torch 2.11 use \
             helion==1.4.0), or pass --python PATH to one that has torch, triton and helion\n",
            f.python
        )
    );
    f.assert_untouched(&before);
}

#[test]
fn python_that_does_not_exist() {
    let f = Fixture::new(Stubs::Full, NO_KERNEL_BENCH);
    let before = f.snapshot();
    let out = crate::util::kb()
        .current_dir(&f.root)
        .env("TMPDIR", &f.tmpdir)
        .args(["tune", "toy-helion", "--python", "/nonexistent/python3"])
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr.starts_with("error: cannot run `/nonexistent/python3` to probe the tuning environment: "),
        "{stderr}"
    );
    f.assert_untouched(&before);
}

#[test]
fn machine_without_a_gpu() {
    let f = Fixture::new(Stubs::Full, NO_KERNEL_BENCH);
    let before = f.snapshot();
    let (code, stderr) = f.fails(&[], false);
    assert_eq!(code, 1);
    assert_eq!(
        stderr,
        "error: no GPU: torch 2.11.0+cu130 sees no GPU (torch.cuda.is_available() is False, CUDA \
         build 13.0, no XPU)\nhint: Helion tunes on the GPU it measures; run `tune` on a \
         machine with the GPU you are tuning for\n"
    );
    f.assert_untouched(&before);
}

#[test]
fn bench_script_that_calls_no_kernel() {
    let f = Fixture::new(Stubs::Full, NO_KERNEL_BENCH);
    let before = f.snapshot();
    let (code, stderr) = f.fails(&[], true);
    assert_eq!(code, 1);
    // The runner's and the bench script's output is streamed first, then the error.
    assert!(stderr.contains("tune: collect phase\nbench: nothing to call\n"), "{stderr}");
    assert!(
        stderr.ends_with(
            "error: the bench script `bench.py` called no Helion kernel: the collect phase \
             recorded no configuration\nhint: the script must call the kernel (an \
             `@helion.aot_kernel` or `@helion.kernel` function) with the shapes to tune for \
             when run as `python bench.py`\n"
        ),
        "{stderr}"
    );
    f.assert_untouched(&before);
}

#[test]
fn bench_script_that_calls_no_kernel_of_that_name() {
    let f = Fixture::new(Stubs::Full, NO_KERNEL_BENCH);
    let before = f.snapshot();
    let (_, stderr) = f.fails(&["--kernel", "op", "--kernel", "other"], true);
    assert!(
        stderr.contains("error: the bench script `bench.py` called no Helion kernel named op, other:"),
        "{stderr}"
    );
    f.assert_untouched(&before);
}

#[test]
fn bench_script_that_fails() {
    let f = Fixture::new(Stubs::Full, "import sys\nprint('bench: out of memory')\nsys.exit(2)\n");
    let before = f.snapshot();
    let (_, stderr) = f.fails(&["--", "--shapes", "0"], true);
    assert!(
        stderr.contains(
            "error: the bench script failed in the collect phase (exit status 2); its last lines:\n"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("  | bench: out of memory\n"), "{stderr}");
    f.assert_untouched(&before);
}

/// The error is printed after the scratch directory is removed: a path into its copy of the
/// kernel is shown as the user's file when that file is the same, and stays a scratch path with
/// a note otherwise (this GPU's heuristic, which the scratch copy dropped) or when it is not in
/// the kernel at all (found by review: the tail quoted files that no longer existed, then
/// pointed at the user's old heuristic for lines of the new one). TMPDIR is a symbolic link
/// here: Python prints resolved paths.
#[test]
fn a_failed_bench_names_the_users_files_not_the_scratch_copy() {
    let f = Fixture::new(
        Stubs::Full,
        "import os, sys\n\
         print('bench file:', os.path.abspath(__file__))\n\
         print('source:', os.path.abspath('torch-ext/toy_helion/op.py') + ':3')\n\
         print('heuristic:', os.path.abspath('torch-ext/toy_helion/_helion_aot_op_cuda_sm90.py'))\n\
         print('data dir:', os.path.join(os.path.dirname(os.getcwd()), 'aot'))\n\
         sys.exit(3)\n",
    );
    let link = f.root.join("tmp-link");
    std::os::unix::fs::symlink(&f.tmpdir, &link).unwrap();
    let out = f.kb().env("TMPDIR", &link).args(["--", "--shapes", "0"]).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    let error = &stderr[stderr.find("error: the bench script failed").expect(&stderr)..];
    assert!(error.contains("  | bench file: toy-helion/bench.py\n"), "{error}");
    assert!(error.contains("  | source: toy-helion/torch-ext/toy_helion/op.py:3\n"), "{error}");
    let value = |label: &str| {
        let line = error.lines().find(|l| l.starts_with(&format!("  | {label}: "))).expect(error);
        line[format!("  | {label}: ").len()..].to_owned()
    };
    let scratch = value("data dir").strip_suffix("/aot").expect(error).to_owned();
    assert!(scratch.starts_with(f.tmpdir.canonicalize_utf8().unwrap().as_str()), "{scratch}");
    assert_eq!(
        value("heuristic"),
        format!("{scratch}/kernel/torch-ext/toy_helion/_helion_aot_op_cuda_sm90.py")
    );
    assert!(
        error.contains(&format!(
            "  (paths under `{scratch}` were in tune's scratch directory, removed when it stopped)\n"
        )),
        "{error}"
    );
    assert!(!Utf8Path::new(&scratch).exists());
}

#[test]
fn bench_arguments_reach_the_script() {
    let f = Fixture::new(Stubs::Full, "import sys\nprint('bench args:', sys.argv[1:])\n");
    let (_, stderr) = f.fails(&["--", "--shapes", "0-3"], true);
    assert!(stderr.contains("bench args: ['--shapes', '0-3']\n"), "{stderr}");
}

/// A run that calls only some of the kernels the installed heuristic tunes would install a
/// heuristic without the others (Helion's runner writes the kernels a run calls), sending them
/// back to the default config; `tune` refuses and names them, unless `--fresh`. (Seen on the
/// H200: a causal-only slice dropped the non-causal kernel's heuristic.)
#[test]
fn a_run_that_would_drop_a_tuned_kernel_is_refused() {
    let f = Fixture::new(Stubs::Full, CALLING_BENCH);
    let heuristic = f.kernel.join("torch-ext/toy_helion/_helion_aot_op_cuda_sm90.py");
    let two_kernels = format!(
        "{OLD_HEURISTIC}\n\ndef key_other(*args):\n    return 0\n\n\ndef autotune_other(*args):\n    return {{}}\n"
    );
    write(&heuristic, &two_kernels);
    let before = f.snapshot();
    let (code, stderr) = f.fails(&[], true);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(
            "the new heuristic would drop `other`, which the installed heuristic tunes: the bench \
             run called only `op`"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("or pass --fresh to replace the heuristic"), "{stderr}");
    assert_eq!(f.snapshot(), before);
    let left: Vec<_> = std::fs::read_dir(&f.tmpdir).unwrap().collect();
    assert!(left.is_empty(), "scratch left behind");

    let out = f.kb().env("FAKE_GPU", "1").arg("--fresh").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&heuristic).unwrap();
    assert!(text.contains("def key_op(") && !text.contains("def key_other("), "{text}");
}

/// SIGINT to `tune` alone (not from a terminal, so it forwards it): the runner stops its
/// bench script and exits 130, `tune` says so and leaves everything as it was.
#[test]
fn interrupted_run_keeps_the_earlier_heuristic() {
    let f = Fixture::new(Stubs::Full, "import time\nprint('bench: tuning', flush=True)\ntime.sleep(60)\n");
    let before = f.snapshot();
    // The exit status is 128 + signal, as for an interrupted build.
    for (signal, name, code) in
        [(rustix::process::Signal::INT, "SIGINT", 130), (rustix::process::Signal::TERM, "SIGTERM", 143)]
    {
        interrupt_once(&f, signal, name, code);
        f.assert_untouched(&before);
    }
}

fn interrupt_once(f: &Fixture, signal: rustix::process::Signal, name: &str, code: i32) {
    let mut child = crate::util::kb_std()
        .current_dir(&f.root)
        .env("TMPDIR", &f.tmpdir)
        .env("FAKE_GPU", "1")
        .args(["tune", "toy-helion", "--python", f.python.as_str()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    let start = Instant::now();
    while !seen.contains("bench: tuning\n") {
        assert!(start.elapsed() < Duration::from_secs(30), "the bench never started:\n{seen}");
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap() == 0 {
            panic!("tune ended before the bench started:\n{seen}");
        }
        seen.push_str(&line);
    }
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, signal).unwrap();
    // Never hang the suite: whatever happens, the run is over 45 s from now.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watchdog_done = done.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(45));
        if !watchdog_done.load(std::sync::atomic::Ordering::SeqCst) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    });
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    let status = child.wait().unwrap();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(start.elapsed() < Duration::from_secs(30), "tune did not stop promptly");
    assert_eq!(status.code(), Some(code), "stderr:\n{seen}{rest}");
    let expected = format!(
        "error: tuning was interrupted ({name}) in the collect phase; `toy-helion` is \
         unchanged (an earlier heuristic there stays as it was)\n"
    );
    assert!(rest.ends_with(&expected), "{rest}");
}

#[test]
fn help_names_where_the_files_go() {
    let out = crate::util::kb().args(["tune", "--help"]).output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success());
    for needle in [
        "torch-ext/<package>/_helion_aot_<source stem>_<kind>_<compute>.py",
        "DIR/tuning/<kind>_<compute>/",
        "--effort <EFFORT>",
        "[default: 1.01]",
        "- max_slowdown:     No tuned shape slower than `threshold` times its own best config",
        "- geomean_slowdown: ",
        "- avg_slowdown: ",
    ] {
        assert!(help.contains(needle), "missing {needle:?} in:\n{help}");
    }
}

/// The whole flow against the runner stand-in: the heuristic replaces the old one with the
/// provenance header, the records and `tune.json` land in tuning/cuda_sm90/, the table is
/// printed; a second run starts from the recorded shapes, `--fresh` does not.
#[test]
fn successful_tune_installs_heuristic_records_and_table() {
    let f = Fixture::new(Stubs::Full, CALLING_BENCH);
    // What the user's environment says about modes and effort does not reach the runner.
    let out = f
        .kb()
        .env("HELION_AOT_MODE", "disabled")
        .env("HELION_AUTOTUNE_EFFORT", "none")
        .args(["--", "1", "2"])
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let report_text =
        std::fs::read_to_string(f.kernel.join("tuning/cuda_sm90/tune.json")).unwrap_or_default();
    assert_eq!(
        stdout,
        "kernel  shape  default ms    tuned ms  speedup\n\
         op      1          4.0000      1.0000    4.00x\n\
         op      2          4.0000      1.0000    4.00x\n\
         geomean speedup over Helion's default config: 4.00x\n\
         wrote toy-helion/torch-ext/toy_helion/_helion_aot_op_cuda_sm90.py\n\
         wrote toy-helion/tuning/cuda_sm90/ (tune.json: the table above as JSON, with the runner's records)\n",
        "{report_text}"
    );
    assert!(
        stderr.contains("stub: tuning {'arg0_scalar': 1}\nstub: tuning {'arg0_scalar': 2}\n"),
        "{stderr}"
    );
    let envs: Vec<&str> = stderr.lines().filter(|l| l.starts_with("bench env:")).collect();
    assert_eq!(envs, ["bench env: collect quick", "bench env: measure quick", "bench env: evaluate None"]);

    let heuristic = f.kernel.join("torch-ext/toy_helion/_helion_aot_op_cuda_sm90.py");
    let text = std::fs::read_to_string(&heuristic).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[..4],
        [
            "# Generated by `kernel-builder tune` through helion 1.4.0's AOT runner. Do not edit: re-run",
            "# the command below on the same kind of GPU.",
            &format!("# Command: kernel-builder tune toy-helion --effort quick --python {} -- 1 2", f.python),
            "# GPU: Fake GPU (cuda sm90, hardware id cuda_Fake_GPU_13.0), driver 999.01, CUDA 13.0",
        ]
    );
    assert!(lines[4].starts_with("# Software: python 3."), "{}", lines[4]);
    assert!(lines[4].ends_with(", torch 2.11.0+cu130, triton 3.6.0, helion 1.4.0"), "{}", lines[4]);
    assert_eq!(
        lines[5],
        "# Search: effort quick, goal max_slowdown <= 1.01, at most 10 (Helion's default) configs per kernel"
    );
    assert!(lines[6].starts_with("# Tuned ") && lines[6].ends_with(" UTC on 2 shapes:"), "{}", lines[6]);
    assert_eq!(
        lines[7..],
        [
            "#   op: 1",
            "#   op: 2",
            "# Also measured, not searched (the decision trees learn from these too):",
            "#   op: 9",
            "def key_op(*args):",
            "    return 0",
            "",
            "",
            "def autotune_op(*args):",
            "    return {'block_sizes': [64]}",
        ]
    );

    let records = f.kernel.join("tuning/cuda_sm90");
    let mut names: Vec<String> =
        std::fs::read_dir(&records).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "heuristic_summary.json",
            "measurements.csv",
            "run_metadata.json",
            "tune.json",
            "tuned_configs.json"
        ]
        .iter()
        .filter(|n| **n != "run_metadata.json")
        .map(|s| s.to_string())
        .collect::<Vec<_>>()
    );
    let tuned: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(records.join("tuned_configs.json")).unwrap()).unwrap();
    assert_eq!(tuned["op"][0]["kernel_source_file"], "torch-ext/toy_helion/op.py");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(records.join("tune.json")).unwrap()).unwrap();
    assert_eq!(report["format"], 1);
    assert_eq!(report["bench"], serde_json::json!(["bench.py", "1", "2"]));
    assert_eq!(report["heuristic_files"], serde_json::json!(["toy_helion/_helion_aot_op_cuda_sm90.py"]));
    assert_eq!(report["shapes"][1]["shape"], "2");
    assert_eq!(report["shapes"][1]["default_ms"], 4.0);
    assert_eq!(report["shapes"][1]["tuned_ms"], 1.0);
    assert_eq!(report["shapes"][1]["speedup"], 4.0);
    assert_eq!(report["shapes"][1]["heuristic_used"], true);
    assert_eq!(report["shapes"][1]["tuned_config"], serde_json::json!({"block_sizes": [64]}));
    assert_eq!(report["geomean_speedup"], 4.0);
    let named = |ns: &[&str]| -> serde_json::Value {
        ns.iter().map(|n| serde_json::json!({"kernel": "op", "shape": n})).collect()
    };
    assert_eq!(report["searched_shapes"], named(&["1", "2"]));
    assert_eq!(report["measured_shapes"], named(&["1", "2", "9"]));
    // The card says which shapes the trees learned from beyond those searched.
    let loaded = kernel_builder::kernel::load(&f.kernel).unwrap();
    let card = kernel_builder::tune::card::with_tuning(&f.kernel, &loaded.config, "# card\n").unwrap();
    assert!(
        card.contains(
            "tuned on 2 shapes:\n\n- op: 1\n- op: 2\n\nEvery config was also timed on 1 more shape that no \
             search ran on; the decision trees learn from it too:\n\n- op: 9\n"
        ),
        "{card}"
    );
    assert_eq!(report["environment"]["driver"], "999.01");
    let left: Vec<_> = std::fs::read_dir(&f.tmpdir).unwrap().collect();
    assert!(left.is_empty(), "scratch left behind");

    // A second slice: shapes 1 and 2 come from the records, only 3 is searched.
    let stderr = f.succeeds(&["--", "1", "2", "3"]);
    assert!(
        stderr.contains(
            "tune: starting from the 2 shapes recorded in `toy-helion/tuning/cuda_sm90/tuned_configs.json`"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "stub: reusing the recorded config for {'arg0_scalar': 1}\n\
             stub: reusing the recorded config for {'arg0_scalar': 2}\n\
             stub: tuning {'arg0_scalar': 3}\n"
        ),
        "{stderr}"
    );
    let text = std::fs::read_to_string(&heuristic).unwrap();
    assert!(text.contains(" UTC on 3 shapes:\n#   op: 1\n#   op: 2\n#   op: 3\n# Also measured"), "{text}");

    // --retune: the shapes this run calls are searched again, the other records are kept.
    let stderr = f.succeeds(&["--retune", "--", "2", "4"]);
    assert!(!stderr.contains("starting from"), "{stderr}");
    assert!(
        stderr.contains("stub: tuning {'arg0_scalar': 2}\nstub: tuning {'arg0_scalar': 4}\n"),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "tune: searched the 2 shapes this run calls again (--retune); kept the records of 2 other \
             shapes from `toy-helion/tuning/cuda_sm90/tuned_configs.json`"
        ),
        "{stderr}"
    );
    let text = std::fs::read_to_string(&heuristic).unwrap();
    assert!(
        text.contains(" UTC on 4 shapes:\n#   op: 1\n#   op: 2\n#   op: 3\n#   op: 4\n# Also measured"),
        "{text}"
    );
    let tuned: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(records.join("tuned_configs.json")).unwrap()).unwrap();
    let args: Vec<&serde_json::Value> =
        tuned["op"].as_array().unwrap().iter().map(|e| &e["shape_features"]["arg0_scalar"]).collect();
    assert_eq!(args, [1, 2, 3, 4]);
    assert!(tuned["op"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["kernel_source_file"] == "torch-ext/toy_helion/op.py"));
    let (code, stderr) = f.fails(&["--retune", "--fresh"], true);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("'--retune' cannot be used with '--fresh'"), "{stderr}");

    // --fresh: everything searched again.
    let stderr = f.succeeds(&["--fresh", "--", "1"]);
    assert!(!stderr.contains("starting from"), "{stderr}");
    assert!(stderr.contains("stub: tuning {'arg0_scalar': 1}\n"), "{stderr}");
    let text = std::fs::read_to_string(&heuristic).unwrap();
    assert!(
        text.contains(" UTC on 1 shapes:\n#   op: 1\n# Also measured, not searched (the decision trees learn from these too):\n#   op: 9\ndef key_op"),
        "{text}"
    );
}

/// A kernel tuned by hand with Helion's runner keeps its records in Helion's own layout
/// (`tuning/tuned_configs_<hardware id>.json`, naming the source file by its path on the machine
/// that tuned it): `tune` starts from the records of this exact GPU, rebases their source path
/// onto this kernel directory, writes its own layout, and leaves Helion's file as it was.
#[test]
fn records_in_helions_own_layout_are_a_starting_point() {
    let f = Fixture::new(Stubs::Full, CALLING_BENCH);
    let flat = f.kernel.join("tuning/tuned_configs_cuda_Fake_GPU_13.0.json");
    let foreign = r#"{"op": [{"config": {"block_sizes": [32]}, "shape_features": {"arg0_scalar": 1},
        "kernel_source_file": "/elsewhere/kernels/toy-helion/torch-ext/toy_helion/op.py"}]}"#;
    write(&flat, foreign);
    // Another GPU model's file is not a starting point on this one.
    let other = f.kernel.join("tuning/tuned_configs_cuda_Other_GPU_13.0.json");
    let other_text = r#"{"op": [{"config": {"block_sizes": [8]}, "shape_features": {"arg0_scalar": 2},
        "kernel_source_file": "/elsewhere/op.py"}]}"#;
    write(&other, other_text);

    let stderr = f.succeeds(&["--", "1", "2"]);
    for needle in [
        "tune: starting from the 1 shapes recorded in `toy-helion/tuning/tuned_configs_cuda_Fake_GPU_13.0.json`",
        "tune: `toy-helion/tuning/tuned_configs_cuda_Fake_GPU_13.0.json` is in Helion's own data-directory \
         layout; this tune's records go to `toy-helion/tuning/cuda_sm90` and that file is left as it is",
        "stub: reusing the recorded config for {'arg0_scalar': 1}\nstub: tuning {'arg0_scalar': 2}\n",
    ] {
        assert!(stderr.contains(needle), "missing {needle:?} in:\n{stderr}");
    }
    let tuned: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(f.kernel.join("tuning/cuda_sm90/tuned_configs.json")).unwrap(),
    )
    .unwrap();
    let records: Vec<(serde_json::Value, serde_json::Value, serde_json::Value)> = tuned["op"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["config"]["block_sizes"].clone(),
                e["shape_features"]["arg0_scalar"].clone(),
                e["kernel_source_file"].clone(),
            )
        })
        .collect();
    let src = serde_json::json!("torch-ext/toy_helion/op.py");
    assert_eq!(
        records,
        [
            (serde_json::json!([32]), serde_json::json!(1), src.clone()),
            (serde_json::json!([64]), serde_json::json!(2), src)
        ]
    );
    assert_eq!(std::fs::read_to_string(&flat).unwrap(), foreign);
    assert_eq!(std::fs::read_to_string(&other).unwrap(), other_text);

    // From now on `tune`'s own records are the starting point.
    let stderr = f.succeeds(&["--", "1", "2"]);
    assert!(
        stderr.contains(
            "tune: starting from the 2 shapes recorded in `toy-helion/tuning/cuda_sm90/tuned_configs.json`"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("data-directory layout"), "{stderr}");
}
