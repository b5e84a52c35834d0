//! Issue 31: kernel dependencies against the Hub stand-in (tests/hub_server/server.py). A Hub
//! tree holding bytecode matches its lock and is not downloaded again; bytecode put into a
//! cached tree never survives to be run; a closure that never ends stops at its bound, after
//! a progress line per download; `native-cache` shows and prunes the kernel-dependency cache.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::upload::Server;

fn post(server: &Server, path: &str, body: Value) -> Value {
    let mut resp = ureq::post(&format!("{}{path}", server.url))
        .header("Content-Type", "application/json")
        .send(body.to_string())
        .unwrap();
    serde_json::from_str(&resp.body_mut().read_to_string().unwrap()).unwrap()
}

/// Requests the server answered for `endpoint` so far.
fn requests(server: &Server, endpoint: &str) -> u64 {
    server.get("/_admin/stats")["requests"][endpoint].as_u64().unwrap_or(0)
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

/// kernel-builder `args` against `server`, its cache under `tmp/cache`, no token.
fn kb(server: &Server, tmp: &Path, args: &[&str]) -> Out {
    let out = crate::util::kb_std()
        .args(args)
        .env("HF_ENDPOINT", &server.url)
        .env("HF_HOME", tmp.join("hf"))
        .env_remove("HF_TOKEN")
        .env("KERNEL_BUILDER_CACHE_DIR", tmp.join("cache"))
        .output()
        .unwrap();
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The files below `dir`, relative, sorted.
fn files(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = walkdir::WalkDir::new(dir)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| e.path().strip_prefix(dir).unwrap().display().to_string())
        .collect();
    out.sort();
    out
}

/// Write `text` at `rel` in the read-only cached tree `dir`, as a root process (or anyone who
/// opens the directories) can.
fn plant(dir: &Path, rel: &str, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(rel);
    let mut opened = Vec::new();
    for a in path.parent().unwrap().ancestors().take_while(|a| a.starts_with(dir)) {
        if a.exists() {
            std::fs::set_permissions(a, std::fs::Permissions::from_mode(0o755)).unwrap();
            opened.push(a.to_owned());
        }
    }
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    for a in opened {
        std::fs::set_permissions(a, std::fs::Permissions::from_mode(0o555)).unwrap();
    }
}

fn depending_on(tmp: &Path, repo: &str) -> PathBuf {
    crate::hostile::relu_depending(
        tmp,
        &format!("kernel-depends = [{{ repo-id = \"{repo}\", version = 1 }}]\n"),
    )
}

#[test]
fn bytecode_never_counts_and_never_survives_in_the_dependency_cache() {
    let hub = Server::start();
    let t = tempfile::tempdir().unwrap();
    let tmp = t.path();
    let put = post(
        &hub,
        "/_admin/put",
        json!({"repo_id": "test-org/dep", "branch": "v1", "files": {
            "build/torch-cpu/metadata.json": "{\"name\": \"dep\", \"kernel-depends\": []}",
            "build/torch-cpu/dep/__init__.py": "SCALE = 2\n",
            "build/torch-cpu/dep/__pycache__/__init__.cpython-313.pyc": "bytecode",
            "build/torch-cpu/old.pyc": "bytecode",
            "build/torch-cpu/notes.pyo": "not bytecode to kernels",
        }}),
    );
    let commit = put["commit"].as_str().unwrap().to_owned();
    let kernel = depending_on(tmp, "test-org/dep");

    let out = kb(&hub, tmp, &["lock-kernel-deps", kernel.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let cached = tmp.join(format!("cache/kernel-deps/test-org--dep--{commit}"));
    let kept =
        ["build/torch-cpu/dep/__init__.py", "build/torch-cpu/metadata.json", "build/torch-cpu/notes.pyo"];
    assert_eq!(files(&cached), kept);
    // The lock's hash is the NAR hash of exactly what is kept.
    let hash = kernel_builder::hash::nar::nar_hash_sri(&cached).unwrap();
    let lock: Value =
        serde_json::from_str(&std::fs::read_to_string(kernel.join("kernels.lock")).unwrap()).unwrap();
    assert_eq!(lock[0]["lock"], json!({"commit": commit, "hash": hash}));
    assert_eq!(
        out.stderr,
        format!(
            "downloading kernel dependency 1: test-org/dep (version 1) at {}\nlocked test-org/dep (version 1) at {commit} ({hash})\n",
            &commit[..12]
        )
    );
    assert_eq!(out.stdout, format!("wrote {}/kernels.lock (1 kernel(s))\n", kernel.display()));
    let asked = requests(&hub, "resolve");
    assert_eq!(asked, 3, "only the three files that are not bytecode are downloaded");
    let listed = requests(&hub, "tree");

    // The cached tree matches its lock: nothing is downloaded again.
    let get = || kb(&hub, tmp, &["get-kernel-deps", kernel.to_str().unwrap()]);
    let out = get();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, format!("test-org/dep={}\n", cached.display()));
    let line = format!("kernel dependency test-org/dep (version 1) at {} ({hash}): ", &commit[..12]);
    assert_eq!(out.stderr, format!("{line}cached, hash checked\n"));
    assert_eq!((requests(&hub, "resolve"), requests(&hub, "tree")), (asked, listed));

    // Bytecode put into the cached tree (Python running as root writes it there) is removed
    // before the tree is used, and said; the tree is the locked one again.
    plant(&cached, "build/torch-cpu/dep/__pycache__/__init__.cpython-313.pyc", "planted");
    plant(&cached, "build/torch-cpu/evil.pyc", "planted");
    let out = get();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stderr,
        format!(
            "note: removed Python bytecode from the cached tree `{}`, written after it was cached (a kernel dependency holds none): build/torch-cpu/dep/__pycache__, build/torch-cpu/evil.pyc\n{line}cached, bytecode removed, hash checked\n",
            cached.display()
        )
    );
    assert_eq!(files(&cached), kept);
    assert_eq!((requests(&hub, "resolve"), requests(&hub, "tree")), (asked, listed));

    // native-cache shows the tree and prunes it.
    let size: u64 = kept.iter().map(|f| std::fs::metadata(cached.join(f)).unwrap().len()).sum();
    let out = kb(&hub, tmp, &["native-cache"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let cache = tmp.join("cache/kernel-deps");
    let section = format!(
        "{}\n  test-org--dep--{commit}  {size:>8} B\n1 kernel-dependency entry, {size} B (`native-cache prune --kernel-deps-max-size SIZE` prunes them; builds never do)\n",
        cache.display()
    );
    assert!(out.stdout.contains(&section), "{}", out.stdout);
    let out = kb(&hub, tmp, &["native-cache", "prune", "--kernel-deps-max-size", "0"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .starts_with(&format!("removed 1 kernel-dependency entry ({size} B) from {}\n", cache.display())),
        "{}",
        out.stdout
    );
    assert!(!cached.exists());
}

#[test]
fn a_closure_that_never_ends_stops_at_its_bound_after_a_line_per_download() {
    let hub = Server::start();
    let t = tempfile::tempdir().unwrap();
    post(&hub, "/_admin/generate", json!({"prefix": "test-org/deep", "fanout": 1, "depth": null}));
    let kernel = depending_on(t.path(), "test-org/deep");
    let out = kb(&hub, t.path(), &["lock-kernel-deps", kernel.to_str().unwrap()]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let name = |level: usize| format!("test-org/deep{} (version 1)", "-0".repeat(level));
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 17, "{}", out.stderr);
    for (i, l) in lines[..16].iter().enumerate() {
        let want = format!("downloading kernel dependency {}: {} at ", i + 1, name(i));
        assert!(l.starts_with(&want), "{l}");
        if i > 0 {
            assert!(l.ends_with(&format!(" (needed by {})", name(i - 1))), "{l}");
        }
    }
    let chain: Vec<String> = (0..=16).map(name).collect();
    assert_eq!(
        lines[16],
        format!("error: kernel dependencies nest more than 16 levels deep: {}; kernel-builder follows at most 16 levels of kernel-depends (is each kernel's metadata.json naming another without end?)", chain.join(" -> "))
    );
    assert_eq!(requests(&hub, "tree"), 16);
    assert!(!kernel.join("kernels.lock").exists());

    // As wide as it likes, one level deep: the 101st kernel is not downloaded.
    post(&hub, "/_admin/generate", json!({"prefix": "test-org/wide", "fanout": 150, "depth": 1}));
    let kernel = depending_on(&t.path().join("wide"), "test-org/wide");
    let out = kb(&hub, t.path(), &["lock-kernel-deps", kernel.to_str().unwrap()]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let mut children: Vec<String> = (0..150).map(|i| format!("test-org/wide-{i}")).collect();
    children.sort();
    assert_eq!(
        out.stderr.lines().last().unwrap(),
        format!("error: the kernel dependencies hold more than 100 kernels (the next one is test-org/wide (version 1) -> {} (version 1)); kernel-builder locks at most 100", children[99])
    );
    assert_eq!(out.stderr.lines().filter(|l| l.starts_with("downloading kernel dependency ")).count(), 100);
    assert_eq!(requests(&hub, "tree"), 116);
}
