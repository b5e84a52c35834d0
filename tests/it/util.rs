//! The shared test harness: the binary runner, the git fixture and the kernel copier that the
//! integration modules call instead of keeping private copies.
use std::fs;
use std::path::Path;

use assert_cmd::Command;

/// The repository root (the checkout the tests run in).
pub(crate) fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `kernel-builder`, with plain (uncoloured, ASCII) diagnostics and no inherited `GIT_DIR`,
/// `GIT_WORK_TREE` or `GIT_INDEX_FILE` (set when the tests run from a git hook), which would
/// point its git calls at the wrong repository.
pub(crate) fn kb() -> Command {
    Command::from_std(kb_std())
}

/// Run [`kb`] with `args` to the end: its output (any exit status).
pub(crate) fn kb_output(args: &[&str]) -> std::process::Output {
    kb().args(args).output().unwrap()
}

/// The `kernel-builder` binary under test, for a test that hands its path to a script or Nix.
pub(crate) fn kb_path() -> std::path::PathBuf {
    assert_cmd::cargo::cargo_bin("kernel-builder")
}

/// [`kb`] as a `std::process::Command`, for a test that spawns it (to signal it, to feed its
/// stdin, to wait with a limit). It starts with SIGINT at its default disposition: a suite run
/// as a shell's background job (`scripts/test.sh &`) inherits SIGINT ignored, which
/// kernel-builder rightly keeps ignoring, and the tests that send it SIGINT would then test
/// nothing. (A test that wants it ignored sets that in its own `pre_exec`, which runs after.)
pub(crate) fn kb_std() -> std::process::Command {
    use std::os::unix::process::CommandExt as _;
    let mut c = std::process::Command::new(kb_path());
    c.env("KERNEL_BUILDER_PLAIN", "1")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE");
    // The signals kernel-builder handles start at their default, however the tests were run
    // (a background job ignores SIGINT, `nohup` SIGHUP, and kernel-builder keeps an ignored
    // signal ignored): a test that sends one gets the handler.
    // SAFETY: between fork and exec, only `signal`, which is async-signal-safe.
    unsafe {
        c.pre_exec(|| {
            for sig in [libc::SIGINT, libc::SIGHUP, libc::SIGTERM] {
                libc::signal(sig, libc::SIG_DFL);
            }
            Ok(())
        });
    }
    c
}

/// Run `git ARGS` in `dir` as a fixed author at a fixed date (so commits are reproducible), on a
/// `main` branch; its trimmed stdout, asserting success.
pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .current_dir(dir)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
        .args(["-c", "init.defaultBranch=main"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// Copy the tree `from` to `to`, leaving out build outputs (`build/`, Nix's `result*` links,
/// `__pycache__`) and symbolic links.
pub(crate) fn copy_dir(from: &Path, to: &Path) {
    let output = |e: &walkdir::DirEntry| {
        let n = e.file_name().to_string_lossy();
        e.depth() > 0
            && (n == "build" || n.starts_with("result") || n == "__pycache__" || e.path_is_symlink())
    };
    for e in walkdir::WalkDir::new(from).sort_by_file_name().into_iter().filter_entry(|e| !output(e)) {
        let e = e.unwrap();
        let dest = to.join(e.path().strip_prefix(from).unwrap());
        if e.file_type().is_dir() {
            fs::create_dir_all(&dest).unwrap();
        } else {
            fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// Copy the example kernel `kernels/<name>` to `dest` ([`copy_dir`]).
pub(crate) fn copy_kernel(name: &str, dest: &Path) {
    copy_dir(&repo().join("kernels").join(name), dest);
}

/// The venv's Python (`.venv/bin/python`, made by scripts/setup-venv.sh) when it has torch and
/// kernels; otherwise `None`, after saying on stderr that `what` did not run.
pub(crate) fn venv_with_kernels(what: &str) -> Option<std::path::PathBuf> {
    let py = repo().join(".venv/bin/python");
    let ok = std::process::Command::new(&py)
        .args(["-c", "import torch, kernels"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!(
            "SKIPPED: no torch and kernels in {} (run scripts/setup-venv.sh); {what} did not run",
            py.display()
        );
        return None;
    }
    Some(py)
}

/// `kernel-builder ARGS` (a shell command line) on a terminal: in a pty from util-linux's
/// `script`, with `env` set (and `TERM=xterm`, no proxy variables); what the terminal showed,
/// asserting success.
pub(crate) fn kb_in_pty(args: &str, env: &[(&str, &std::ffi::OsStr)]) -> String {
    let exe = assert_cmd::cargo::cargo_bin("kernel-builder");
    let mut script = std::process::Command::new("script");
    for v in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"] {
        script.env_remove(v);
    }
    let out = script
        .args(["-qec", &format!("{} {args}", exe.display()), "/dev/null"])
        .envs(env.iter().copied())
        .env("TERM", "xterm")
        .output()
        .expect("script (util-linux) runs the command in a pty");
    let tty = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "script: {:?}\n{tty}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    tty
}

/// Held by the tests that build heavy cells (CUDA, pinned toolchains, Nix cells) or fill
/// gigabytes of their own, so that they run one at a time however many test threads there are.
/// A CI machine with more cores runs more tests at once: stop 37's CI failed three such tests
/// together, each in its CMake compiler check, as a full disk or memory makes it fail.
pub(crate) fn heavy_build() -> std::sync::MutexGuard<'static, ()> {
    static HEAVY: std::sync::Mutex<()> = std::sync::Mutex::new(());
    HEAVY.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
