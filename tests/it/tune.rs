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
use std::process::{Command as StdCommand, Stdio};
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
/// protocol for the collect phase (run the benchmark command with HELION_AOT_MODE=collect and
/// the data dir; fail when it fails or records nothing; exit 130 on SIGINT after stopping it).
const RUNNER_STUB: &str = r#"import argparse, os, signal, subprocess, sys
from pathlib import Path
p = argparse.ArgumentParser()
p.add_argument("--output-dir"); p.add_argument("--run-id"); p.add_argument("--phase")
p.add_argument("--goal"); p.add_argument("--threshold"); p.add_argument("--max-configs")
p.add_argument("--kernel", action="append"); p.add_argument("--file-header")
p.add_argument("--no-score-matrix", action="store_true")
p.add_argument("cmd", nargs=argparse.REMAINDER)
a = p.parse_args()
cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
run_dir = Path(a.output_dir) / a.run_id
run_dir.mkdir(parents=True, exist_ok=True)
child = None
def on_signal(signum, frame):
    print(f"WARNING - Received {signal.Signals(signum).name}, terminating...", flush=True)
    if child is not None:
        child.terminate()
    sys.exit(128 + signum)
signal.signal(signal.SIGINT, on_signal)
signal.signal(signal.SIGTERM, on_signal)
env = dict(os.environ, HELION_AOT_MODE=a.phase, HELION_AOT_DATA_DIR=str(run_dir))
child = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
for line in child.stdout:
    print(line, end="", flush=True)
code = child.wait()
child = None
if code != 0:
    print(f"ERROR - Collect phase failed with return code {code}", flush=True)
    sys.exit(1)
if not (run_dir / "tuned_configs_cuda_Fake_GPU_13.0.json").exists():
    print("ERROR - No configs were collected", flush=True)
    sys.exit(1)
sys.exit(0)
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
        write(&kernel.join("torch-ext/toy_helion/op.py"), "def op(x):\n    return x\n");
        write(&kernel.join("torch-ext/toy_helion/_helion_aot_op_cuda_sm90.py"), OLD_HEURISTIC);
        write(&kernel.join("bench.py"), bench);
        let site = root.join("site");
        write(&site.join("torch/__init__.py"), TORCH_STUB);
        if stubs == Stubs::Full {
            write(&site.join("triton/__init__.py"), "__version__ = '3.6.0'\n");
            write(&site.join("helion/__init__.py"), "");
            write(&site.join("helion/_hardware.py"), HARDWARE_STUB);
            write(&site.join("helion/autotuner/__init__.py"), "");
            write(&site.join("helion/autotuner/aot_runner.py"), RUNNER_STUB);
        }
        let python = root.join("python");
        write(&python, &format!("#!/bin/sh\nPYTHONPATH='{site}' exec python3 \"$@\"\n"));
        std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
        let tmpdir = root.join("tmp");
        std::fs::create_dir(&tmpdir).unwrap();
        Fixture { _tmp: tmp, root, kernel, python, tmpdir }
    }

    fn kb(&self) -> Command {
        let mut c = Command::cargo_bin("kernel-builder").unwrap();
        c.current_dir(&self.root)
            .env("TMPDIR", &self.tmpdir)
            .env("FAKE_GPU", "1")
            .env_remove("KERNEL_BUILDER_PYTHON")
            .args(["tune", "toy-helion", "--effort", "quick", "--python"])
            .arg(self.python.as_str());
        c
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

#[test]
fn bench_script_outside_the_kernel_directory() {
    let f = Fixture::new(Stubs::Full, NO_KERNEL_BENCH);
    write(&f.root.join("elsewhere.py"), NO_KERNEL_BENCH);
    let before = f.snapshot();
    let (_, stderr) = f.fails(&["--bench", "elsewhere.py"], true);
    assert_eq!(
        stderr,
        "error: bench script `elsewhere.py` is not inside the kernel directory `toy-helion`: tune \
         runs it from a scratch copy of that directory, so move it there\n"
    );
    f.assert_untouched(&before);
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
            "error: `{}` cannot import helion: ModuleNotFoundError: No module named 'helion'\n  \
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
    let out = Command::cargo_bin("kernel-builder")
        .unwrap()
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
         build 13.0, no XPU)\n  hint: Helion tunes on the GPU it measures; run `tune` on a \
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
             recorded no configuration\n  hint: the script must call the kernel (an \
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

#[test]
fn bench_arguments_reach_the_script() {
    let f = Fixture::new(Stubs::Full, "import sys\nprint('bench args:', sys.argv[1:])\n");
    let (_, stderr) = f.fails(&["--", "--shapes", "0-3"], true);
    assert!(stderr.contains("bench args: ['--shapes', '0-3']\n"), "{stderr}");
}

/// SIGINT to `tune` alone (not from a terminal, so it forwards it): the runner stops its
/// bench script and exits 130, `tune` says so and leaves everything as it was.
#[test]
fn interrupted_run_keeps_the_earlier_heuristic() {
    let f = Fixture::new(Stubs::Full, "import time\nprint('bench: tuning', flush=True)\ntime.sleep(60)\n");
    let before = f.snapshot();
    let mut child = StdCommand::new(assert_cmd::cargo::cargo_bin("kernel-builder"))
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
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
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
    assert_eq!(status.code(), Some(1), "stderr:\n{seen}{rest}");
    assert!(
        rest.ends_with(
            "error: tuning was interrupted (SIGINT) in the collect phase; `toy-helion` is \
             unchanged (an earlier heuristic there stays as it was)\n"
        ),
        "{rest}"
    );
    f.assert_untouched(&before);
}

#[test]
fn help_names_where_the_files_go() {
    let out = Command::cargo_bin("kernel-builder").unwrap().args(["tune", "--help"]).output().unwrap();
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
