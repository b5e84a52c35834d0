//! Interrupting the commands that run Nix: `build-and-copy --nix always`, `cache pull` and
//! `cache push`, with `KERNEL_BUILDER_NIX` a fake Nix that answers `--version` and
//! `show-config` and otherwise records its pid and sleeps (as a long `nix build` would). A
//! SIGTERM, SIGINT or SIGHUP sent to kernel-builder alone (not from a terminal) stops that Nix
//! process too, removes the temporary file of `nix build --json` from TMPDIR, and ends with
//! status 128 + signal, as a native build does ([`kernel_builder::interrupt`]).

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

const FAKE_NIX: &str = r#"#!/bin/sh
case "$1" in
  --version) echo 'nix (Nix) 2.8.0' ;;
  show-config) echo '{"sandbox": {"value": true}}' ;;
  *) echo "$*" > "$FAKE_NIX_PIDS/$$"; exec sleep 120 ;;
esac
"#;

struct Setup {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    kernel: PathBuf,
    nix: PathBuf,
    pids: PathBuf,
    tmpdir: PathBuf,
}

fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_owned();
    let kernel = root.join("kk");
    std::fs::create_dir_all(kernel.join("torch-ext/kk")).unwrap();
    std::fs::write(kernel.join("torch-ext/kk/__init__.py"), "").unwrap();
    std::fs::write(
        kernel.join("build.toml"),
        "[general]\nname = \"kk\"\nversion = 1\nedition = 5\nlicense = \"MIT\"\nbackends = [\"cpu\"]\n\n[torch-noarch]\n",
    )
    .unwrap();
    std::fs::write(kernel.join("flake.nix"), "{ outputs = _: { }; }\n").unwrap();
    let nix = root.join("bin/nix");
    std::fs::create_dir_all(nix.parent().unwrap()).unwrap();
    std::fs::write(&nix, FAKE_NIX).unwrap();
    std::fs::set_permissions(&nix, std::fs::Permissions::from_mode(0o755)).unwrap();
    let pids = root.join("pids");
    let tmpdir = root.join("tmp");
    for d in [&pids, &tmpdir] {
        std::fs::create_dir(d).unwrap();
    }
    std::fs::create_dir_all(root.join("cache")).unwrap();
    std::fs::write(root.join("cache/nix-cache-info"), "StoreDir: /nix/store\n").unwrap();
    std::fs::write(root.join("secret.key"), "kb-test-1:c2VjcmV0\n").unwrap();
    Setup { _tmp: tmp, root, kernel, nix, pids, tmpdir }
}

/// Whether process `pid` still runs (a zombie does not).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit_once(')').and_then(|(_, r)| r.split_whitespace().next()) != Some("Z"),
        Err(_) => false,
    }
}

/// Run kernel-builder with `args`, wait until the fake Nix sleeps, send `sig` to kernel-builder
/// alone; returns its exit code, stderr and the fake Nix's pid and command line.
fn interrupt(s: &Setup, args: &[&str], sig: i32) -> (Option<i32>, String, i32, String) {
    for e in std::fs::read_dir(&s.pids).unwrap() {
        std::fs::remove_file(e.unwrap().path()).unwrap();
    }
    let child = crate::util::kb_std()
        .args(args)
        .current_dir(&s.root)
        .env("KERNEL_BUILDER_NIX", &s.nix)
        .env("FAKE_NIX_PIDS", &s.pids)
        .env("TMPDIR", &s.tmpdir)
        .env_remove("KERNEL_BUILDER_ORCHESTRATOR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let (pid, nix_args) = loop {
        let found = std::fs::read_dir(&s.pids).unwrap().next().map(|e| e.unwrap().path());
        if let Some(p) = found {
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            if !text.is_empty() {
                break (
                    p.file_name().unwrap().to_str().unwrap().parse::<i32>().unwrap(),
                    text.trim().to_owned(),
                );
            }
        }
        assert!(Instant::now() < deadline, "the fake Nix was never run: {:?}", child.wait_with_output());
        std::thread::sleep(Duration::from_millis(10));
    };
    // SAFETY: `kill` with a pid this test started and a valid signal number.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
    let out = child.wait_with_output().unwrap();
    let code = out.status.code().or_else(|| out.status.signal().map(|n| -n));
    let deadline = Instant::now() + Duration::from_secs(30);
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    (code, String::from_utf8_lossy(&out.stderr).into_owned(), pid, nix_args)
}

fn left_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()
}

#[test]
fn nix_commands_stop_nix_clean_up_and_exit_128_plus_the_signal() {
    let s = setup();
    let kernel = s.kernel.to_str().unwrap().to_owned();
    let from = format!("file://{}", s.root.join("cache").display());
    let key = s.root.join("secret.key").display().to_string();
    let build: Vec<&str> = vec!["build-and-copy", "--nix", "always", &kernel];
    let pull: Vec<&str> =
        vec!["cache", "pull", &kernel, "--from", &from, "--public-key", "kb-test-1:cHVibGlj"];
    let push: Vec<&str> = vec!["cache", "push", &kernel, "--to", &from, "--key-file", &key];
    for (args, sig, name, runs) in [
        (&build, libc::SIGTERM, "SIGTERM", "build --no-link --json"),
        (&build, libc::SIGINT, "SIGINT", "build --no-link --json"),
        (&build, libc::SIGHUP, "SIGHUP", "build --no-link --json"),
        (&pull, libc::SIGTERM, "SIGTERM", "build --dry-run"),
        (&push, libc::SIGTERM, "SIGTERM", "eval --json"),
    ] {
        let (code, stderr, pid, nix_args) = interrupt(&s, args, sig);
        let what = format!("{} ({name})", args[..2].join(" "));
        assert!(nix_args.starts_with(runs), "{what}: the fake Nix ran `{nix_args}`");
        assert_eq!(code, Some(128 + sig), "{what}: {stderr}");
        let last = stderr.lines().last().unwrap_or_default();
        if args[0] == "build-and-copy" {
            // The file `nix build --json` writes into.
            assert!(
                last.starts_with(&format!("interrupted ({name}); removed `{}/", s.tmpdir.display())),
                "{what}: {stderr}"
            );
        } else {
            assert_eq!(last, format!("interrupted ({name})"), "{what}: {stderr}");
        }
        assert!(!stderr.contains("error:"), "{what}: {stderr}");
        assert!(!alive(pid), "{what}: the Nix process {pid} still runs");
        assert_eq!(left_in(&s.tmpdir), Vec::<String>::new(), "{what}");
        assert!(!s.kernel.join("build").exists(), "{what}");
    }
}

/// `nohup kernel-builder build-and-copy … &`: SIGHUP ignored when the process starts stays
/// ignored (no handler replaces it), so a SIGHUP leaves the build (and its Nix) running; a
/// SIGTERM, which was not ignored, still stops and cleans up as before.
#[test]
fn a_signal_ignored_at_start_stays_ignored() {
    use std::os::unix::process::CommandExt;
    let s = setup();
    let mut cmd = crate::util::kb_std();
    cmd.args(["build-and-copy", "--nix", "always", s.kernel.to_str().unwrap()])
        .current_dir(&s.root)
        .env("KERNEL_BUILDER_NIX", &s.nix)
        .env("FAKE_NIX_PIDS", &s.pids)
        .env("TMPDIR", &s.tmpdir)
        .env_remove("KERNEL_BUILDER_ORCHESTRATOR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: between fork and exec, only `signal`, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGHUP, libc::SIG_IGN);
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let pid = loop {
        let found = std::fs::read_dir(&s.pids).unwrap().next().map(|e| e.unwrap().path());
        if let Some(p) = found.filter(|p| std::fs::read_to_string(p).is_ok_and(|t| !t.is_empty())) {
            break p.file_name().unwrap().to_str().unwrap().parse::<i32>().unwrap();
        }
        assert!(Instant::now() < deadline, "the fake Nix was never run");
        std::thread::sleep(Duration::from_millis(10));
    };
    // SAFETY: `kill` with a pid this test started and a valid signal number.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGHUP) }, 0);
    std::thread::sleep(Duration::from_millis(500));
    assert!(child.try_wait().unwrap().is_none(), "kernel-builder ended on an ignored SIGHUP");
    assert!(alive(pid), "its Nix was stopped by an ignored SIGHUP");
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(128 + libc::SIGTERM), "{stderr}");
    assert!(
        stderr.lines().last().unwrap_or_default().starts_with("interrupted (SIGTERM); removed `"),
        "{stderr}"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!alive(pid));
    assert_eq!(left_in(&s.tmpdir), Vec::<String>::new());
}
