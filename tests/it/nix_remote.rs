//! `build-and-copy --builders` against a real Nix remote builder on this machine: a second
//! sshd on 127.0.0.1 (its own host key, key-only login) whose sessions see their own Nix store
//! (`scripts/remote-builder.sh`: a mount namespace puts `<dir>/nix` on /nix), reached as
//! `ssh-ng://root@127.0.0.1`.
//!
//! Needs what the other `nix-tests` need (scripts/setup-nix.sh), root, and openssh-server
//! (`scripts/remote-builder.sh setup` installs it with apt; only when that fails do these tests
//! say SKIPPED and check nothing). Each builder's store gets the cells' inputs copied in (for
//! relu's CPU cell, the unpacked torch wheel of the host package set, about 1.1 GB); it is a
//! tmpfs (`KB_REMOTE_TMPFS=4g`, memory, not disk), and the tests take turns.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::nix::{clean_repo_with, orchestrator, override_orchestrator, repo, tree};
use super::nix_compiled::{host_args, host_toolchain, relu_repo, CPU_CELL};

/// One builder store at a time: each one holds a copy of the cells' inputs.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const BUILDER_URI: &str = "ssh-ng://root@127.0.0.1";

fn script(args: &[&str]) -> (bool, String, String) {
    let out = duct::cmd(repo().join("scripts/remote-builder.sh"), args)
        .stdout_capture()
        .stderr_capture()
        .unchecked()
        .run()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A running test builder; stopped (every process of it, by id) and removed when dropped.
struct RemoteBuilder {
    dir: tempfile::TempDir,
    /// The `--builders` spec line.
    spec: String,
    /// `NIX_SSHOPTS` for its port.
    sshopts: String,
    /// The sshd's process id.
    pid: u32,
    /// Its store, as files on this machine (`<dir>/nix/store`).
    store: PathBuf,
}

impl RemoteBuilder {
    /// Start one; `None` (saying SKIPPED) only when openssh-server cannot be installed.
    fn start() -> Option<Self> {
        let (ok, _, err) = script(&["setup"]);
        if !ok && !Path::new("/usr/sbin/sshd").exists() {
            eprintln!("SKIPPED: openssh-server cannot be installed (`scripts/remote-builder.sh setup`: {err}); the remote builder test did not run");
            return None;
        }
        assert!(ok, "scripts/remote-builder.sh setup failed:\n{err}");
        let dir = tempfile::Builder::new().prefix("kb-remote-builder-").tempdir().unwrap();
        let out =
            duct::cmd(repo().join("scripts/remote-builder.sh"), ["start", dir.path().to_str().unwrap()])
                .env("KB_REMOTE_TMPFS", "4g")
                .stdout_capture()
                .stderr_capture()
                .unchecked()
                .run()
                .unwrap();
        let (ok, out, err) = (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        assert!(ok, "scripts/remote-builder.sh start failed:\n{err}");
        let vars: BTreeMap<&str, &str> = out.lines().filter_map(|l| l.split_once('=')).collect();
        Some(RemoteBuilder {
            spec: vars["BUILDER"].to_owned(),
            sshopts: vars["NIX_SSHOPTS"].to_owned(),
            pid: vars["PID"].parse().unwrap(),
            store: PathBuf::from(vars["STORE"]),
            dir,
        })
    }

    /// Kill its sshd and every process under it (sessions, nix-daemon, builds).
    fn kill(&self) {
        let (ok, _, err) = script(&["stop", self.dir.path().to_str().unwrap()]);
        assert!(ok, "{err}");
    }

    /// Whether its store holds `path` (a `/nix/store/…` path).
    fn has(&self, path: &Path) -> bool {
        self.store.join(path.file_name().unwrap()).exists()
    }

    /// The `/proc` command names of the processes under its sshd.
    fn descendant_commands(&self) -> Vec<String> {
        let mut parent: BTreeMap<u32, u32> = BTreeMap::new();
        let mut comm: BTreeMap<u32, String> = BTreeMap::new();
        for e in fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
            let Ok(stat) = fs::read_to_string(e.path().join("stat")) else { continue };
            // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
            let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else { continue };
            let ppid = stat[close + 2..].split_whitespace().nth(1).and_then(|p| p.parse().ok());
            if let Some(ppid) = ppid {
                parent.insert(pid, ppid);
                comm.insert(pid, stat[open + 1..close].to_owned());
            }
        }
        let under = |mut p: u32| loop {
            match parent.get(&p) {
                Some(&q) if q == self.pid => return true,
                Some(&q) if q > 1 => p = q,
                _ => return false,
            }
        };
        comm.iter().filter(|(p, _)| under(**p)).map(|(_, c)| c.clone()).collect()
    }
}

impl Drop for RemoteBuilder {
    fn drop(&mut self) {
        let _ = script(&["stop", self.dir.path().to_str().unwrap()]);
    }
}

fn nix(args: &[String]) -> (bool, String, String) {
    let out = duct::cmd("nix", args).stdout_capture().stderr_capture().unchecked().run().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn nar_hash(path: &Path) -> String {
    let (ok, out, err) = nix(&["hash".into(), "path".into(), path.display().to_string()]);
    assert!(ok, "{err}");
    out.trim().to_owned()
}

/// The output path of `installable`, already built (`--max-jobs 0`: never builds).
fn built_path(installable: &str, args: &[String]) -> PathBuf {
    let mut a: Vec<String> =
        ["build", "--no-link", "--json", "--max-jobs", "0", installable].map(String::from).to_vec();
    a.extend(args.iter().cloned());
    let (ok, out, err) = nix(&a);
    assert!(ok, "{installable} is not built:\n{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    PathBuf::from(v[0]["outputs"]["out"].as_str().unwrap())
}

/// `kernel-builder build-and-copy DIR --nix always --builders SPEC -- --max-jobs 0 ARGS`:
/// nothing may build here, so every cell has to go to the builder.
fn build_remotely(b: &RemoteBuilder, kernel: &Path, args: &[String]) -> duct::Expression {
    let mut a: Vec<String> = vec![
        "build-and-copy".into(),
        kernel.display().to_string(),
        "--nix".into(),
        "always".into(),
        "--builders".into(),
        b.spec.clone(),
        "--".into(),
        "--max-jobs".into(),
        "0".into(),
    ];
    a.extend(args.iter().cloned());
    let exe = crate::util::kb_path().into_os_string();
    duct::cmd(exe, a)
        .env("NIX_SSHOPTS", &b.sshopts)
        .env(kernel_builder::nixdrv::ORCHESTRATOR_ENV, orchestrator())
        .stderr_to_stdout()
        .stdout_capture()
        .unchecked()
}

/// A line that makes `path`'s content (and so every derivation built from it) new, so that
/// the store has none of this run's cells yet.
fn nonce() -> String {
    format!("{:?}-{}", std::time::SystemTime::now(), std::process::id())
}

/// The noarch fixture (four cells and the bundle) and relu's CPU cell (compiled with the host
/// package set), built with `--max-jobs 0 --builders <the test builder>`: the log says every
/// cell was built on it, its store has every output, `build/` holds them; then each is rebuilt
/// here (outputs deleted, no builders) and the NAR hashes of the remote build, the local
/// rebuild and `build/<variant>` are equal.
#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn cells_build_on_a_remote_builder_and_equal_a_local_build() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(b) = RemoteBuilder::start() else { return };

    let (_t, noarch_repo) = clean_repo_with("tests/fixtures/nix-kernel");
    let noarch = noarch_repo.join("tests/fixtures/nix-kernel");
    fs::write(noarch.join("torch-ext/nix_fixture/_nonce.py"), format!("NONCE = {:?}\n", nonce())).unwrap();
    super::nix::git(&noarch_repo, &["add", "-A"]);
    super::nix::git(&noarch_repo, &["commit", "-q", "-m", "nonce"]);
    let n = nonce();
    let (_t2, relu_r) = relu_repo(|t| format!("{t}\n# {n}\n"));
    let relu = relu_r.join("kernels/relu");
    let tc = host_toolchain("2_34");

    let kernels: [(&Path, Vec<String>, Vec<&str>); 2] = [
        (&noarch, override_orchestrator(), vec!["torch-cpu", "torch-cuda", "torch-rocm", "torch-xpu"]),
        (&relu, host_args(tc.path()), vec![CPU_CELL]),
    ];
    for (kernel, args, variants) in &kernels {
        let out = build_remotely(&b, kernel, args).run().unwrap();
        let log = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "the remote build of {} failed:\n{log}", kernel.display());
        assert!(log.contains(&format!("note: remote builders: {BUILDER_URI} (2 jobs)")), "{log}");
        let k = kernel.display();
        let mut paths = vec![built_path(&format!("{k}#bundle"), args)];
        for v in variants {
            assert!(
                log.lines().any(|l| l.starts_with("note: ")
                    && l.contains(v)
                    && l.ends_with(&format!("was built on {BUILDER_URI}"))),
                "the log does not name the builder of {v}:\n{log}"
            );
            assert!(log.contains(&format!("' on '{BUILDER_URI}'...")), "{log}");
            paths.push(built_path(&format!("{k}#{v}"), args));
        }
        let mut remote_hashes = Vec::new();
        for p in &paths {
            assert!(b.has(p), "the builder's store has no {}", p.display());
            remote_hashes.push(nar_hash(&b.store.join(p.file_name().unwrap())));
        }
        let mut top: Vec<String> = fs::read_dir(kernel.join("build"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        top.sort();
        let mut want: Vec<String> = variants.iter().map(|v| v.to_string()).collect();
        want.push("hashes.json".into());
        want.sort();
        assert_eq!(top, want);

        // The same derivations built here, from scratch.
        let mut delete: Vec<String> = vec!["store".into(), "delete".into()];
        delete.extend(paths.iter().map(|p| p.display().to_string()));
        let (ok, _, err) = nix(&delete);
        assert!(ok, "{err}");
        assert!(!paths[0].exists());
        let mut local: Vec<String> =
            ["build", "--no-link", "-L", "--builders", ""].map(String::from).to_vec();
        local.push(format!("{k}#bundle"));
        local.extend(args.iter().cloned());
        let (ok, _, err) = nix(&local);
        assert!(ok, "{err}");
        assert!(!err.contains(&format!("on '{BUILDER_URI}'")), "the local rebuild used the builder:\n{err}");
        for (p, remote) in paths.iter().zip(&remote_hashes) {
            assert_eq!(&nar_hash(p), remote, "{} differs between the builder and here", p.display());
        }
        for v in variants {
            assert_eq!(
                nar_hash(&kernel.join("build").join(v)),
                nar_hash(&paths[0].join(v)),
                "build/{v} is not the bundle's {v}"
            );
        }
    }
}

/// relu's CPU cell sent to the builder, whose sshd and every process under it (nix-daemon,
/// the compiler) are killed once the compiler runs there: the build fails, the error names the
/// cell and the builder, and `build/` is exactly as it was.
#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn a_builder_that_dies_mid_build_fails_naming_it_and_leaves_build_alone() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(b) = RemoteBuilder::start() else { return };
    let n = nonce();
    let (_t, r) = relu_repo(|t| format!("{t}\n# {n}\n"));
    let kernel = r.join("kernels/relu");
    fs::create_dir_all(kernel.join(format!("build/{CPU_CELL}"))).unwrap();
    fs::write(kernel.join(format!("build/{CPU_CELL}/old.py")), "an earlier build").unwrap();
    fs::create_dir_all(kernel.join("build/torch-mine")).unwrap();
    fs::write(kernel.join("build/torch-mine/keep.py"), "mine").unwrap();
    fs::write(kernel.join("build/hashes.json"), "{}\n").unwrap();
    let before = tree(&kernel.join("build"));
    let tc = host_toolchain("2_34");

    let handle = build_remotely(&b, &kernel, &host_args(tc.path())).start().unwrap();
    let compilers = ["cc1plus", "cmake", "ninja", "g++", "c++", "as", "ld"];
    let started = Instant::now();
    loop {
        if let Some(out) = handle.try_wait().unwrap() {
            panic!(
                "the build ended before the compiler ran on the builder:\n{}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        if b.descendant_commands().iter().any(|c| compilers.contains(&c.as_str())) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(900), "the compiler never ran on the builder");
        std::thread::sleep(Duration::from_millis(100));
    }
    b.kill();
    let out = handle.wait().unwrap();
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "the build succeeded although its builder died:\n{log}");
    let last = log.lines().rfind(|l| l.contains("remote build failed:"));
    let last = last.unwrap_or_else(|| panic!("no `remote build failed` line:\n{log}"));
    assert!(last.contains(&format!("{CPU_CELL} on {BUILDER_URI}")), "{last}");
    assert!(last.contains("the connection to the builder ended"), "{last}");
    assert_eq!(tree(&kernel.join("build")), before, "build/ changed");
}

/// A builder that cannot be reached (nothing listens on port 1) is an error naming it before
/// anything is built: Nix itself would skip it and build everything here. `--builders` with
/// `--nix never` is refused, and so are a missing `@FILE` and a spec naming no machine.
#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn an_unreachable_builder_is_named_before_the_build() {
    let (_t, r) = clean_repo_with("tests/fixtures/nix-kernel");
    let kernel = r.join("tests/fixtures/nix-kernel");
    let exe = crate::util::kb_path().into_os_string();
    let mut args: Vec<String> = vec![
        "build-and-copy".into(),
        kernel.display().to_string(),
        "--nix".into(),
        "always".into(),
        "--builders".into(),
        format!("{BUILDER_URI} x86_64-linux - 1 1"),
        "--".into(),
    ];
    args.extend(override_orchestrator());
    let out = duct::cmd(&exe, &args)
        .env("NIX_SSHOPTS", "-p 1 -o BatchMode=yes")
        .env(kernel_builder::nixdrv::ORCHESTRATOR_ENV, orchestrator())
        .stderr_to_stdout()
        .stdout_capture()
        .unchecked()
        .run()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{log}");
    assert!(log.contains(&format!("error: remote builder `{BUILDER_URI}` cannot be reached")), "{log}");
    assert!(log.contains("port 1: Connection refused"), "{log}");
    assert!(!log.contains("building '"), "{log}");
    assert!(!kernel.join("build").exists());

    let out = duct::cmd(
        &exe,
        ["build-and-copy", kernel.to_str().unwrap(), "--nix", "never", "--builders", "ssh://x"],
    )
    .stderr_to_stdout()
    .stdout_capture()
    .unchecked()
    .run()
    .unwrap();
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{log}");
    assert!(log.contains("--builders spreads a build through Nix, but this build does not use Nix"), "{log}");
    assert!(!kernel.join("build").exists());

    // A machines file that does not exist, and a spec of only separators, are errors too (Nix
    // would build everything here).
    for (spec, says) in [
        (
            "@/nonexistent/machines",
            "error: cannot read the builders file `/nonexistent/machines` (named by `@/nonexistent/machines` in the builders spec)",
        ),
        (
            ";;;",
            "error: --builders `;;;` names no machine; give one as `URI [SYSTEMS [SSH-KEY [MAX-JOBS …]]]` (e.g. `ssh-ng://me@big x86_64-linux`), or `--builders ''` to build everything here",
        ),
    ] {
        let mut a = args.clone();
        a[5] = spec.to_owned();
        let out = duct::cmd(&exe, &a)
            .env(kernel_builder::nixdrv::ORCHESTRATOR_ENV, orchestrator())
            .stderr_to_stdout()
            .stdout_capture()
            .unchecked()
            .run()
            .unwrap();
        let log = String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success(), "{log}");
        assert_eq!(log.lines().find(|l| l.starts_with("error: ")), Some(says), "{log}");
        if spec.starts_with('@') {
            assert!(log.contains("caused by: No such file or directory (os error 2)"), "{log}");
        }
        assert!(!log.contains("building '"), "{log}");
        assert!(!kernel.join("build").exists());
    }
}
