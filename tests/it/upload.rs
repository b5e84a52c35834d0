//! `kernel-builder upload` and `build-and-upload` against the local Hub-API test server
//! (`tests/hub_server/server.py`, started with `python3` on a free port): first upload and
//! branch creation, the no-change re-upload (zero bytes), replacing one variant, failures in
//! the middle, pull requests, refusals that send nothing, dry runs, and the token's secrecy.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

use assert_cmd::Command;
use serde_json::{json, Value};
use sha2::{Digest as _, Sha256};

/// The token the tests use; no output may contain it.
pub(crate) const SECRET: &str = "secret-hf_TestTokenValue0123456789";

const BUILD_TOML: &str = r#"[general]
name = "relu"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cpu", "cuda"]

[general.hub]
repo-id = "test-org/relu"

[torch-noarch]
pyext = ["py", "bin"]
"#;

const INIT_PY: &str = "from .op import relu\n\n__all__ = [\"relu\"]\n";
const OP_PY: &str = "import torch\n\n\ndef relu(x):\n    return torch.relu(x)\n";
const EXTRA_PY: &str = "HELPER = 1\n";

/// A binary data file (NUL bytes): goes through LFS.
fn table_bin(seed: u8) -> Vec<u8> {
    (0..3000u32).map(|i| (i as u8).wrapping_mul(seed)).collect()
}

fn write(path: &Path, bytes: &[u8]) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, bytes).unwrap();
}

/// Write the fixture kernel into `dir`.
fn fixture(dir: &Path, build_toml: &str) {
    write(&dir.join("build.toml"), build_toml.as_bytes());
    let pkg = dir.join("torch-ext/relu");
    write(&pkg.join("__init__.py"), INIT_PY.as_bytes());
    write(&pkg.join("op.py"), OP_PY.as_bytes());
    write(&pkg.join("extra.py"), EXTRA_PY.as_bytes());
    write(&pkg.join("table.bin"), &table_bin(7));
}

/// The local Hub test server, killed when dropped.
pub(crate) struct Server {
    child: Child,
    pub(crate) url: String,
}

impl Server {
    pub(crate) fn start() -> Server {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hub_server/server.py");
        let mut child = std::process::Command::new("python3")
            .arg(&script)
            .args(["--token", SECRET, "--page-size", "5"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 must be on PATH to run the Hub test server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port = line
            .trim()
            .strip_prefix("PORT ")
            .unwrap_or_else(|| panic!("test server said {line:?}"))
            .to_owned();
        Server { child, url: format!("http://127.0.0.1:{port}") }
    }

    pub(crate) fn get(&self, path: &str) -> Value {
        let mut resp = ureq::get(&format!("{}{path}", self.url)).call().unwrap();
        serde_json::from_str(&resp.body_mut().read_to_string().unwrap()).unwrap()
    }

    fn stats(&self) -> Value {
        self.get("/_admin/stats")
    }

    /// Repository `test-org/relu` (kernel): branch → path → {sha256, size, lfs}.
    fn repo_state(&self) -> Value {
        self.get("/_admin/state").get("kernel:test-org/relu").cloned().unwrap_or(Value::Null)
    }

    /// Make the `nth` next request to `endpoint` fail, and the `times - 1` after it.
    fn fail(&self, endpoint: &str, nth: u32, times: u32, status: u16, message: &str, echo_auth: bool) {
        ureq::post(&format!("{}/_admin/fail", self.url))
            .header("Content-Type", "application/json")
            .send(
                json!({"endpoint": endpoint, "nth": nth, "times": times, "status": status,
                       "message": message, "echo_auth": echo_auth})
                .to_string(),
            )
            .unwrap();
    }
}

impl Server {
    /// Make the next `times` requests to `endpoint` answer as a hostile server would (`spec`
    /// holds `hostile` or `link_next`, see server.py's /_admin/fail).
    fn hostile(&self, endpoint: &str, times: u32, spec: Value) {
        let mut spec = spec;
        spec["endpoint"] = json!(endpoint);
        spec["nth"] = json!(1);
        spec["times"] = json!(times);
        ureq::post(&format!("{}/_admin/fail", self.url))
            .header("Content-Type", "application/json")
            .send(spec.to_string())
            .unwrap();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The binary, with a clean Hub environment: endpoint `endpoint`, HF_HOME in `home`, no token
/// unless `token`.
fn kb(endpoint: &str, home: &Path, token: Option<&str>) -> Command {
    Command::from_std(kb_std(endpoint, home, token))
}

/// [`kb`] as a `std::process::Command` (which can be spawned and signalled).
fn kb_std(endpoint: &str, home: &Path, token: Option<&str>) -> std::process::Command {
    let mut c = crate::util::kb_std();
    for v in [
        "HF_TOKEN",
        "HF_TOKEN_PATH",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ] {
        c.env_remove(v);
    }
    c.env("HF_ENDPOINT", endpoint).env("HF_HOME", home);
    if let Some(t) = token {
        c.env("HF_TOKEN", t);
    }
    c
}

/// Output of one run, checked to never contain the token.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
    json: Option<Value>,
}

fn run(cmd: &mut Command, json_path: Option<&Path>) -> Run {
    if let Some(p) = json_path {
        let _ = fs::remove_file(p);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    let json_text = json_path.and_then(|p| fs::read_to_string(p).ok());
    for (what, text) in
        [("stdout", &stdout), ("stderr", &stderr), ("json", json_text.as_ref().unwrap_or(&String::new()))]
    {
        assert!(!text.contains(SECRET), "the token appears in {what}:\n{text}");
    }
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout,
        stderr,
        json: json_text.map(|t| serde_json::from_str(&t).unwrap()),
    }
}

struct Env {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    server: Server,
}

impl Env {
    fn new() -> Env {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_owned();
        fs::create_dir_all(root.join("hf")).unwrap();
        Env { _tmp: tmp, root, server: Server::start() }
    }

    /// A fixture kernel in `root/<name>`, built with `build-and-copy --nix never` (and
    /// `extra` arguments).
    fn kernel(&self, name: &str, extra: &[&str]) -> PathBuf {
        let dir = self.root.join(name);
        fixture(&dir, BUILD_TOML);
        self.build(&dir, extra);
        dir
    }

    fn build(&self, dir: &Path, extra: &[&str]) {
        let out = kb(&self.server.url, &self.root.join("hf"), None)
            .arg("build-and-copy")
            .arg(dir)
            .args(["--nix", "never"])
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "build failed:\n{}", String::from_utf8_lossy(&out.stderr));
    }

    fn upload(&self, dir: &Path, args: &[&str]) -> Run {
        let json_path = self.root.join("outcome.json");
        run(
            kb(&self.server.url, &self.root.join("hf"), Some(SECRET))
                .arg("upload")
                .arg(dir)
                .arg("--output-json")
                .arg(&json_path)
                .args(args),
            Some(&json_path),
        )
    }

    fn upload_ok(&self, dir: &Path, args: &[&str]) -> Run {
        let r = self.upload(dir, args);
        assert_eq!(r.code, 0, "upload failed:\n{}\n{}", r.stdout, r.stderr);
        r
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// What the remote branch should hold for the local bundle in `dir/build`: every file of
/// every variant, `build/<variant>/<path>` → {sha256, size, lfs}, plus `.gitattributes`.
fn expected_branch(dir: &Path, remote_gitattributes: &Value) -> Value {
    let mut files = BTreeMap::new();
    files.insert(".gitattributes".to_owned(), remote_gitattributes.clone());
    let build = dir.join("build");
    for e in walkdir::WalkDir::new(&build).sort_by_file_name() {
        let e = e.unwrap();
        if !e.file_type().is_file() || e.depth() < 2 {
            continue;
        }
        let rel = e.path().strip_prefix(&build).unwrap().to_str().unwrap();
        let bytes = fs::read(e.path()).unwrap();
        files.insert(
            format!("build/{rel}"),
            json!({"sha256": sha256_hex(&bytes), "size": bytes.len(),
                   "lfs": bytes.contains(&0)}),
        );
    }
    serde_json::to_value(files).unwrap()
}

/// Total size of the files under `dir/build/<variant>/`, and of those that are binary.
fn sizes(dir: &Path) -> (u64, u64) {
    let mut total = 0;
    let mut binary = 0;
    for e in walkdir::WalkDir::new(dir.join("build")).min_depth(2) {
        let e = e.unwrap();
        if e.file_type().is_file() {
            let bytes = fs::read(e.path()).unwrap();
            total += bytes.len() as u64;
            if bytes.contains(&0) {
                binary += bytes.len() as u64;
            }
        }
    }
    (total, binary)
}

const FILES_PER_VARIANT: usize = 7; // __init__.py _ops.py extra.py metadata.json op.py symbols.json table.bin

#[test]
fn first_upload_creates_the_branch_and_the_second_sends_nothing() {
    let env = Env::new();
    let dir = env.kernel("k", &[]);
    let r = env.upload_ok(&dir, &[]);
    let url = &env.server.url;

    let (total, binary) = sizes(&dir);
    // The same table.bin in both variants is one LFS object, sent once.
    let sent = total - binary / 2;
    // Progress while hashing and sending.
    for line in [
        "hashing build/torch-cpu/ …\n",
        "hashing build/torch-cuda/ …\n",
        "hashed 14 files (",
        "sending build/torch-",
        "LFS object 1 of 1) …\n",
        "committing 14 operation(s) to `v1` …\n",
    ] {
        assert!(r.stderr.contains(line), "{line:?} not in:\n{}", r.stderr);
    }
    let mut j = r.json.unwrap();
    let commits = j.as_object_mut().unwrap().remove("commits").unwrap();
    let commits = commits.as_array().unwrap();
    assert_eq!(commits.len(), 1, "{commits:?}");
    assert_eq!(commits[0]["branch"], "v1");
    assert_eq!(commits[0]["commit"].as_str().unwrap().len(), 40, "{commits:?}");
    assert!(commits[0]["url"].as_str().unwrap().starts_with(url.as_str()), "{commits:?}");
    assert_eq!(
        j,
        json!({
            "status": "uploaded",
            "repo_id": "test-org/relu",
            "branch": "v1",
            "url": format!("{url}/kernels/test-org/relu/tree/v1"),
            "pull_requests": [],
            "bytes_sent": sent,
            "files": {"added": 2 * FILES_PER_VARIANT, "updated": 0, "unchanged": 0, "deleted": 0},
        })
    );
    assert!(
        r.stderr.contains("note: created repository test-org/relu\n")
            && r.stderr.contains("note: created branch v1 from main\n"),
        "{}",
        r.stderr
    );
    assert_eq!(
        r.stdout,
        format!(
            "Kernel uploaded: {url}/kernels/test-org/relu/tree/v1 (14 added, 0 updated, 0 \
             unchanged, 0 deleted; {sent} bytes sent)\n"
        )
    );

    let state = env.server.repo_state();
    let branches: Vec<&String> = state.as_object().unwrap().keys().collect();
    assert_eq!(branches, ["main", "v1"]);
    let gitattributes = state["main"][".gitattributes"].clone();
    assert_eq!(state["v1"], expected_branch(&dir, &gitattributes));
    assert_eq!(state["main"].as_object().unwrap().len(), 1, "main is untouched");

    let stats = env.server.stats();
    assert_eq!(stats["commits"], 1);
    assert_eq!(stats["lfs_bytes"], binary / 2);
    assert_eq!(stats["inline_bytes"], total - binary);
    assert_eq!(stats["requests"]["lfs_upload"], 1);

    // Again: nothing to send, no commit.
    let r = env.upload_ok(&dir, &[]);
    assert_eq!(
        r.json.unwrap(),
        json!({
            "status": "no_changes",
            "repo_id": "test-org/relu",
            "branch": "v1",
            "url": format!("{url}/kernels/test-org/relu/tree/v1"),
            "pull_requests": [],
            "commits": [],
            "bytes_sent": 0,
            "files": {"added": 0, "updated": 0, "unchanged": 2 * FILES_PER_VARIANT, "deleted": 0},
        })
    );
    assert!(r.stderr.contains("No changes to upload"), "{}", r.stderr);
    let after = env.server.stats();
    assert_eq!(after["commits"], 1);
    assert_eq!(after["lfs_bytes"], stats["lfs_bytes"]);
    assert_eq!(after["inline_bytes"], stats["inline_bytes"]);
    assert_eq!(after["requests"]["lfs_upload"], 1);
    assert_eq!(after["requests"].get("lfs_batch"), stats["requests"].get("lfs_batch"));
    assert_eq!(env.server.repo_state(), state);
}

/// A second copy of the kernel with `op.py` and `table.bin` changed and `extra.py` gone,
/// built for `torch-cpu` only.
fn changed_cpu_only(env: &Env, name: &str) -> PathBuf {
    let dir = env.root.join(name);
    fixture(&dir, BUILD_TOML);
    let pkg = dir.join("torch-ext/relu");
    fs::remove_file(pkg.join("extra.py")).unwrap();
    write(&pkg.join("op.py"), b"import torch\n\n\ndef relu(x):\n    return x.clamp(min=0)\n");
    write(&pkg.join("table.bin"), &table_bin(11));
    env.build(&dir, &["--variant", "torch-cpu"]);
    dir
}

#[test]
fn replacing_one_variant_deletes_only_its_stale_files() {
    let env = Env::new();
    let full = env.kernel("k", &[]);
    env.upload_ok(&full, &[]);
    let before = env.server.repo_state();

    let cpu = changed_cpu_only(&env, "k2");
    let r = env.upload_ok(&cpu, &[]);
    let j = r.json.unwrap();
    assert_eq!(j["status"], "uploaded");
    // __init__.py is the same; _ops.py, metadata.json, symbols.json (new op namespace), op.py,
    // table.bin changed; extra.py is stale.
    assert_eq!(j["files"], json!({"added": 0, "updated": 5, "unchanged": 1, "deleted": 1}));
    let after = env.server.repo_state();
    let v1 = after["v1"].as_object().unwrap();
    assert!(!v1.contains_key("build/torch-cpu/extra.py"));
    // The other variant keeps every file, extra.py included, byte for byte.
    for (path, rec) in before["v1"].as_object().unwrap() {
        if !path.starts_with("build/torch-cpu/") {
            assert_eq!(&v1[path], rec, "{path} changed");
        }
    }
    let mut expected = expected_branch(&cpu, &before["v1"][".gitattributes"]);
    for (path, rec) in before["v1"].as_object().unwrap() {
        if path.starts_with("build/torch-cuda/") {
            expected[path] = rec.clone();
        }
    }
    assert_eq!(after["v1"], expected);
}

#[test]
fn a_failure_in_the_middle_leaves_the_remote_unchanged() {
    let env = Env::new();
    let full = env.kernel("k", &[]);
    env.upload_ok(&full, &[]);
    let before = env.server.repo_state();
    let cpu = changed_cpu_only(&env, "k2");

    // The LFS upload of the new table.bin fails, three times: every attempt. The server
    // echoes the Authorization header it got: none, since the token never goes to an LFS
    // upload URL.
    env.server.fail("lfs_upload", 1, 3, 503, "storage is unavailable", true);
    let r = env.upload(&cpu, &["--json"]);
    assert_eq!(r.code, 1);
    // --json: the shared failure document (tests/it/json_failure.rs) with the outcome's keys.
    let doc: Value = serde_json::from_str(&r.stdout).unwrap();
    let mut keys: Vec<&str> = doc.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "branch",
            "bytes_sent",
            "command",
            "commits",
            "error",
            "files",
            "ok",
            "pull_requests",
            "repo_id",
            "status",
            "url"
        ]
    );
    assert_eq!(
        (&doc["ok"], &doc["command"], &doc["status"]),
        (&json!(false), &json!("upload"), &json!("failed"))
    );
    assert_eq!(doc["commits"], json!([]));
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(
        message.ends_with(
            " failed: HTTP 503: storage is unavailable (request had Authorization: ) (after 3 attempts)"
        ),
        "{doc}"
    );
    assert_eq!((&doc["error"]["causes"], &doc["error"]["hints"]), (&json!([]), &json!([])));
    assert!(
        r.stderr
            .contains("HTTP 503: storage is unavailable (request had Authorization: ) (after 3 attempts)\n"),
        "{}",
        r.stderr
    );
    let j = r.json.expect("the outcome of a failed upload is written too");
    assert_eq!(j["status"], "failed");
    assert_eq!(j["commits"], json!([]));
    assert!(j["error"].as_str().unwrap().contains("HTTP 503: storage is unavailable"), "{j}");
    assert!(r.stderr.contains("Upload failed: nothing was committed to test-org/relu\n"), "{}", r.stderr);
    assert_eq!(env.server.repo_state(), before);

    // The commit fails after the LFS content went up. The server echoes the Authorization
    // header in its message, which must come out redacted.
    let commits_before = env.server.stats()["requests"]["commit"].clone();
    env.server.fail("commit", 1, 1, 500, "commit backend exploded", true);
    let r = env.upload(&cpu, &[]);
    assert_eq!(r.code, 1);
    let api = format!("POST {}/api/kernels/test-org/relu/commit/v1", env.server.url);
    assert!(
        r.stderr
            .contains(&format!("error: the commit to `v1` failed\n  caused by: {api} failed: HTTP 500: commit backend exploded (request had Authorization: Bearer <redacted>)\n")),
        "{}",
        r.stderr
    );
    assert_eq!(env.server.repo_state(), before);
    // A commit is never sent twice (its answer may have been lost after it landed).
    assert_eq!(env.server.stats()["requests"]["commit"], commits_before.as_u64().unwrap() + 1);

    // Nothing stuck: the next run succeeds, through one transient failure each of the tree
    // listing and the preupload (tried again), and the LFS object is not sent again.
    env.server.fail("tree", 1, 1, 502, "bad gateway", false);
    env.server.fail("preupload", 1, 1, 503, "busy", false);
    let lfs_before = env.server.stats()["lfs_bytes"].clone();
    let r = env.upload_ok(&cpu, &[]);
    assert_eq!(r.json.unwrap()["status"], "uploaded");
    assert_eq!(env.server.stats()["lfs_bytes"], lfs_before);
    assert_ne!(env.server.repo_state(), before);
}

#[test]
fn a_commit_racing_another_writer_is_refused_and_loses_nothing() {
    let env = Env::new();
    let full = env.kernel("k", &[]);
    env.upload_ok(&full, &[]);
    let cpu = changed_cpu_only(&env, "k2");
    let before = env.server.repo_state();
    ureq::post(&format!("{}/_admin/fail", env.server.url))
        .header("Content-Type", "application/json")
        .send(json!({"endpoint": "commit", "nth": 1, "race": true}).to_string())
        .unwrap();
    let r = env.upload(&cpu, &[]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains(
            "error: `v1` changed while uploading (another commit landed first), so this \
             commit was refused; run the upload again\n"
        ) && r.stderr.contains("HTTP 412: A commit has happened since. Please refresh and try again."),
        "{}",
        r.stderr
    );
    // Only the other writer's file was added; the upload changed nothing.
    let mut expected = before.clone();
    expected["v1"]["race.txt"] = json!({"sha256": sha256_hex(b"other writer\n"), "size": 13, "lfs": false});
    assert_eq!(env.server.repo_state(), expected);
    // Run again: it plans against the new head and keeps the other writer's file.
    let r = env.upload_ok(&cpu, &[]);
    assert_eq!(r.json.unwrap()["files"]["deleted"], 1);
    assert_eq!(env.server.repo_state()["v1"]["race.txt"], expected["v1"]["race.txt"]);
}

#[test]
fn create_pr_opens_a_pull_request_and_leaves_the_branch() {
    let env = Env::new();
    let full = env.kernel("k", &[]);
    env.upload_ok(&full, &[]);
    let before = env.server.repo_state();
    let cpu = changed_cpu_only(&env, "k2");
    let r = env.upload_ok(&cpu, &["--create-pr"]);
    let j = r.json.unwrap();
    assert_eq!(j["status"], "pull_request_created");
    assert_eq!(j["url"], Value::Null);
    assert_eq!(
        j["pull_requests"],
        json!([{"branch": "v1",
                "url": format!("{}/kernels/test-org/relu/discussions/1", env.server.url)}])
    );
    assert_eq!(env.server.repo_state(), before);

    // A pull request cannot target a branch that does not exist.
    let r = env.upload(&cpu, &["--create-pr", "--branch", "v9"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("branch `v9` does not exist in `test-org/relu`"), "{}", r.stderr);
}

#[test]
fn token_from_the_login_file_and_no_token_at_all() {
    let env = Env::new();
    let dir = env.kernel("k", &[]);
    let json_path = env.root.join("o.json");

    // No token anywhere: refused before any request, and (issue 31) before the tree is hashed
    // or an "Uploading …" line is printed: the error is all that is said.
    let r = run(kb(&env.server.url, &env.root.join("hf"), None).arg("upload").arg(&dir), None);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stderr,
        format!("error: no Hub token: HF_TOKEN is not set, and there is no token file `{}`\n", env.root.join("hf/token").display()) + "\
         hint: set HF_TOKEN, or log in with `hf auth login` (the token file is read from $HF_TOKEN_PATH, else $HF_HOME/token)\n\
         hint: `--dry-run` works without one\n"
    );
    assert_eq!(env.server.stats()["requests"], json!({}));

    // HF_TOKEN set but empty is said to be so, not "not set".
    let r = run(kb(&env.server.url, &env.root.join("hf"), Some("")).arg("upload").arg(&dir), None);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.starts_with("error: no Hub token: HF_TOKEN is empty, and there is no token file `"),
        "{}",
        r.stderr
    );

    // An empty token file is said to be one.
    fs::create_dir_all(env.root.join("hf")).unwrap();
    fs::write(env.root.join("hf/token"), "\n").unwrap();
    let r = run(kb(&env.server.url, &env.root.join("hf"), None).arg("upload").arg(&dir), None);
    assert_eq!(r.code, 1);
    let empty = format!(
        "error: no Hub token: HF_TOKEN is not set, and the token file `{}` is empty\n",
        env.root.join("hf/token").display()
    );
    assert!(r.stderr.starts_with(&empty), "{}", r.stderr);

    // The file `hf auth login` writes, under HF_HOME.
    fs::write(env.root.join("hf/token"), format!("{SECRET}\n")).unwrap();
    let r = run(
        kb(&env.server.url, &env.root.join("hf"), None)
            .arg("upload")
            .arg(&dir)
            .arg("--output-json")
            .arg(&json_path),
        Some(&json_path),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json.unwrap()["status"], "uploaded");

    // HF_TOKEN_PATH wins over HF_HOME; a wrong token is refused by the server (401).
    let other = env.root.join("other-token");
    fs::write(&other, "wrong-token").unwrap();
    let r = run(
        kb(&env.server.url, &env.root.join("hf"), None).env("HF_TOKEN_PATH", &other).arg("upload").arg(&dir),
        None,
    );
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains(
            "error: cannot create repository `test-org/relu`: the Hub does not accept the token; \
             log in again (`hf auth login`) or set HF_TOKEN\n  caused by: POST "
        ) && r.stderr.contains("HTTP 401: Invalid credentials in Authorization header"),
        "{}",
        r.stderr
    );
}

/// Run `upload` expecting a refusal whose stderr contains `message`, with nothing sent.
fn refused(env: &Env, dir: &Path, args: &[&str], message: &str) {
    let r = env.upload(dir, args);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(r.stderr.contains(message), "expected {message:?} in:\n{}", r.stderr);
    assert_eq!(env.server.stats()["requests"], json!({}), "a request was sent");
}

#[test]
fn refusals_send_nothing() {
    let env = Env::new();

    // No repository id anywhere: never a default organisation.
    let no_hub = env.root.join("nohub");
    fixture(&no_hub, &BUILD_TOML.replace("[general.hub]\nrepo-id = \"test-org/relu\"\n", ""));
    env.build(&no_hub, &[]);
    refused(&env, &no_hub, &[], "error: no repository to upload to: `");
    refused(
        &env,
        &no_hub,
        &["--repo-id", "just-a-name"],
        "repository id `just-a-name` is not of the form `owner/name`",
    );

    let dir = env.kernel("k", &[]);
    // A variant directory without metadata.json.
    write(&dir.join("build/torch-extra/x.py"), b"x = 1\n");
    refused(&env, &dir, &[], "variant directory `torch-extra` in `");
    fs::remove_dir_all(dir.join("build/torch-extra")).unwrap();

    // The manifest does not match the tree: refused, unless --force.
    let manifest_path = dir.join("build/hashes.json");
    let good = fs::read_to_string(&manifest_path).unwrap();
    let mut m: Value = serde_json::from_str(&good).unwrap();
    m["variants"]["torch-cpu"] = json!("sha256-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=");
    fs::write(&manifest_path, serde_json::to_string_pretty(&m).unwrap()).unwrap();
    refused(
        &env,
        &dir,
        &[],
        "variant `torch-cpu` differs: expected sha256-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
    );
    fs::remove_file(&manifest_path).unwrap();
    refused(&env, &dir, &[], "/build/hashes.json` is missing");

    // A variant's files do not match its metadata digest: refused even with --force.
    fs::write(&manifest_path, &good).unwrap();
    let op = dir.join("build/torch-cpu/op.py");
    let original = fs::read(&op).unwrap();
    fs::write(&op, b"tampered\n").unwrap();
    refused(&env, &dir, &["--force"], "variant `torch-cpu`: its files do not match the digest in");
    fs::write(&op, &original).unwrap();

    // Variants of different versions: no branch can be chosen for them.
    let meta_path = dir.join("build/torch-cuda/metadata.json");
    let meta = fs::read_to_string(&meta_path).unwrap();
    assert!(meta.contains("\"version\": 1,"));
    fs::write(&meta_path, meta.replace("\"version\": 1,", "\"version\": 2,")).unwrap();
    refused(
        &env,
        &dir,
        &["--force"],
        "have different versions (version 1: torch-cpu; version 2: torch-cuda); rebuild them, or pass --branch",
    );
    // With a branch given the versions do not matter, but the manifest sees the change.
    refused(&env, &dir, &["--branch", "v1"], "variant `torch-cuda` differs: expected sha256-");
    fs::write(&meta_path, &meta).unwrap();

    // --force uploads a tree whose manifest is missing, with a warning.
    fs::remove_file(&manifest_path).unwrap();
    let r = env.upload_ok(&dir, &["--force"]);
    assert!(
        r.stderr.contains("warning: hash manifest: `") && r.stderr.contains("uploading anyway (--force)"),
        "{}",
        r.stderr
    );
    assert_eq!(r.json.unwrap()["status"], "uploaded");
}

#[test]
fn dry_run_needs_no_token_and_sends_nothing() {
    let env = Env::new();
    let dir = env.kernel("k", &[]);
    let dry = |endpoint: &str| {
        run(kb(endpoint, &env.root.join("hf"), None).arg("upload").arg(&dir).arg("--dry-run"), None)
    };
    let meta = |v: &str| fs::metadata(dir.join("build").join(v).join("metadata.json")).unwrap().len();
    let size = |v: &str, f: &str| fs::metadata(dir.join("build").join(v).join(f)).unwrap().len();
    let r = dry(&env.server.url);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let mut expected = String::from(
        "create repository test-org/relu (type kernel)\ncreate branch v1 from main\ncommit to v1:\n",
    );
    for v in ["torch-cpu", "torch-cuda"] {
        for f in ["__init__.py", "_ops.py", "extra.py", "metadata.json", "op.py", "symbols.json", "table.bin"]
        {
            let n = if f == "metadata.json" { meta(v) } else { size(v, f) };
            let lfs = if f == "table.bin" { ", lfs" } else { "" };
            expected.push_str(&format!("  add build/{v}/{f} ({n} bytes{lfs})\n"));
        }
    }
    expected.push_str("Dry run: would add 14, update 0, delete 0, leave 0 unchanged; nothing was sent\n");
    assert_eq!(r.stdout, expected);
    // A token file it cannot read (a directory, found by a fresh user) does not stop a dry run:
    // it is a warning, and the Hub is read without a token.
    fs::create_dir_all(env.root.join("hf/token")).unwrap();
    let unreadable = dry(&env.server.url);
    assert_eq!(unreadable.code, 0, "{}", unreadable.stderr);
    assert_eq!(unreadable.stdout, expected);
    assert!(unreadable.stderr.starts_with("warning: cannot read the token file"), "{}", unreadable.stderr);
    assert!(
        unreadable.stderr.contains("; the dry run reads the Hub without a token\n"),
        "{}",
        unreadable.stderr
    );
    fs::remove_dir(env.root.join("hf/token")).unwrap();
    let stats = env.server.stats();
    assert_eq!(stats["requests"], json!({"refs": 2}), "one read per dry run, nothing sent");

    // After a real upload and a change, the dry run shows updates and deletions.
    env.upload_ok(&dir, &[]);
    let cpu = changed_cpu_only(&env, "k2");
    let r =
        run(kb(&env.server.url, &env.root.join("hf"), None).arg("upload").arg(&cpu).arg("--dry-run"), None);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.starts_with("commit to v1:\n"), "{}", r.stdout);
    assert!(r.stdout.contains("  delete build/torch-cpu/extra.py (11 bytes)\n"), "{}", r.stdout);
    assert!(r.stdout.contains("  unchanged build/torch-cpu/__init__.py ("), "{}", r.stdout);
    assert!(!r.stdout.contains("torch-cuda"), "{}", r.stdout);

    // The Hub cannot be reached: no plan against an imagined empty repository; say so, exit 1.
    let r = dry("http://127.0.0.1:9");
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains(
            "error: cannot plan the dry run: the Hub at http://127.0.0.1:9 was not reached; nothing was sent"
        ),
        "{}",
        r.stderr
    );
    assert!(r.stdout.is_empty(), "{}", r.stdout);
}

/// A token in `HF_ENDPOINT`'s user information (`http://user:hf_…@host`) is never shown:
/// not in the progress line, the URLs of the outcome, or errors (`run` checks every stream
/// and the JSON for the secret).
#[test]
fn userinfo_in_hf_endpoint_is_never_shown() {
    let env = Env::new();
    let dir = env.kernel("k", &[]);
    let with_userinfo = env.server.url.replacen("http://", &format!("http://user:{SECRET}@"), 1);
    let json_path = env.root.join("o.json");
    let r = run(
        kb(&with_userinfo, &env.root.join("hf"), Some(SECRET))
            .arg("upload")
            .arg(&dir)
            .arg("--output-json")
            .arg(&json_path),
        Some(&json_path),
    );
    assert!(r.stderr.contains("at http://<redacted>@127.0.0.1:"), "{}", r.stderr);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.json.unwrap()["url"].as_str().unwrap().starts_with("http://<redacted>@127.0.0.1:"));
    // Unreachable, with user information: the error names the host, not the secret.
    let r = run(
        kb(&format!("http://user:{SECRET}@127.0.0.1:9"), &env.root.join("hf"), Some("t"))
            .arg("upload")
            .arg(&dir),
        None,
    );
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("no answer from the Hub at http://<redacted>@127.0.0.1:9 ("), "{}", r.stderr);
}

/// A refused connection says that nothing answered, and an endpoint without a scheme is
/// refused before anything is tried: neither reads "the Hub refused to create it".
#[test]
fn unreachable_hub_and_endpoint_without_scheme_say_what_happened() {
    let env = Env::new();
    let dir = env.kernel("k", &[]);
    let r = run(kb("http://127.0.0.1:9", &env.root.join("hf"), Some("t")).arg("upload").arg(&dir), None);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains(
            "error: cannot create repository `test-org/relu`: no answer from the Hub at http://127.0.0.1:9 ("
        ) && r.stderr.contains("check HF_ENDPOINT and the network"),
        "{}",
        r.stderr
    );
    let host = env.server.url.trim_start_matches("http://").to_owned();
    for args in [&["upload"][..], &["upload", "--dry-run"]] {
        let r = run(kb(&host, &env.root.join("hf"), Some("t")).args(args).arg(&dir), None);
        assert_eq!(r.code, 1);
        assert!(
            r.stderr.contains(&format!(
                "error: HF_ENDPOINT is `{host}`, which is not an http(s) URL: write it with its scheme, e.g. `https://{host}`"
            )),
            "{}",
            r.stderr
        );
    }
    assert_eq!(env.server.stats()["requests"], json!({}), "nothing was sent");
}

#[test]
fn build_and_upload_builds_verifies_and_uploads() {
    let env = Env::new();
    let dir = env.root.join("k");
    fixture(&dir, BUILD_TOML);
    let json_path = env.root.join("o.json");
    let r = run(
        kb(&env.server.url, &env.root.join("hf"), Some(SECRET))
            .arg("build-and-upload")
            .arg(&dir)
            .args(["--variant", "torch-cpu", "--output-json"])
            .arg(&json_path),
        Some(&json_path),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("verified 1 variant(s) against build/hashes.json"), "{}", r.stderr);
    let j = r.json.unwrap();
    assert_eq!(j["status"], "uploaded");
    assert_eq!(j["files"]["added"], FILES_PER_VARIANT);
    let state = env.server.repo_state();
    assert_eq!(state["v1"], expected_branch(&dir, &state["main"][".gitattributes"]));
}

/// Found by a fresh user: build-and-upload without a repository (no `--repo-id`, no
/// `[general.hub] repo-id`) built and verified every cell before saying so; it says so first.
#[test]
fn build_and_upload_without_a_repository_builds_nothing() {
    let env = Env::new();
    let dir = env.root.join("k");
    fixture(&dir, &BUILD_TOML.replace("[general.hub]\nrepo-id = \"test-org/relu\"\n", ""));
    let r = run(
        kb(&env.server.url, &env.root.join("hf"), Some(SECRET))
            .args(["build-and-upload", "--dry-run"])
            .arg(&dir),
        None,
    );
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stderr,
        format!(
            "error: no repository to upload to: `{}` has no `[general.hub] repo-id`; add it, or pass --repo-id OWNER/NAME\n",
            dir.join("build.toml").display()
        )
    );
    assert!(!dir.join("build").exists());
    assert_eq!(env.server.stats()["requests"], json!({}));
}

/// Issue 31: without a token, build-and-upload built every cell before saying so. It now says
/// so first, and builds nothing.
#[test]
fn build_and_upload_without_a_token_builds_nothing() {
    let env = Env::new();
    let dir = env.root.join("k");
    fixture(&dir, BUILD_TOML);
    let r = run(kb(&env.server.url, &env.root.join("hf"), None).arg("build-and-upload").arg(&dir), None);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stderr,
        format!("error: no Hub token: HF_TOKEN is not set, and there is no token file `{}`\n", env.root.join("hf/token").display()) + "\
         hint: set HF_TOKEN, or log in with `hf auth login` (the token file is read from $HF_TOKEN_PATH, else $HF_HOME/token)\n\
         hint: `--dry-run` works without one\n"
    );
    assert!(!dir.join("build").exists());
    assert_eq!(env.server.stats()["requests"], json!({}));
}

/// From a user's trial: `build-and-upload --variant` with a name the kernel lacks asked for the
/// Hub token first, so a typo cost a login. The name is refused first, with the kernel's
/// variants, the token not asked for and nothing built.
#[test]
fn build_and_upload_refuses_an_unknown_variant_before_asking_for_a_token() {
    let env = Env::new();
    let dir = env.root.join("k");
    fixture(&dir, BUILD_TOML);
    let r = run(
        kb(&env.server.url, &env.root.join("hf"), None)
            .args(["build-and-upload", "--variant", "torch-cdua"])
            .arg(&dir),
        None,
    );
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stderr,
        "error: unknown variant `torch-cdua`; this kernel's variants are: torch-cpu, torch-cuda\nhint: did you mean `torch-cuda`?\n"
    );
    assert!(!dir.join("build").exists());
    assert_eq!(env.server.stats()["requests"], json!({}));
}

/// From a user's trial: the early refusal above took the matrix's cells for the kernel's
/// variants, so the cell of a `--python` torch outside the matrix, which build-and-copy builds,
/// was called unknown. The check is the build's own plan: such a cell passes it, and the
/// command goes on to ask for the token (nothing built without one).
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn build_and_upload_takes_a_cell_of_the_python_given_before_asking_for_a_token() {
    let Some((py, cell)) = crate::cellcache::venv_cpu_cell() else { return };
    let env = Env::new();
    let dir = env.root.join("relu");
    crate::util::copy_kernel("relu", &dir);
    let r = run(
        kb(&env.server.url, &env.root.join("hf"), None)
            .args(["build-and-upload", "--repo-id", "test-org/relu", "--python"])
            .arg(&py)
            .args(["--variant", &cell])
            .arg(&dir),
        None,
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.starts_with("error: no Hub token: HF_TOKEN is not set"), "{}", r.stderr);
    assert!(!dir.join("build").exists());
    assert_eq!(env.server.stats()["requests"], json!({}));
}

#[test]
fn card_goes_to_main_as_readme_and_benchmarks_to_the_branch() {
    let env = Env::new();
    let dir = env.kernel("k", &[]);
    write(&dir.join("build/CARD.md"), b"# relu\n\nA kernel card.\n");
    write(&dir.join("benchmarks/benchmark_relu.py"), b"def bench():\n    pass\n");
    // Text, but over 10 MiB: through LFS.
    let big = "0123456789abcde\n".repeat(10 * 65536 + 1);
    write(&dir.join("benchmarks/data.txt"), big.as_bytes());
    let r = env.upload_ok(&dir, &[]);
    let j = r.json.unwrap();
    assert_eq!(j["status"], "uploaded");
    assert_eq!(
        j["files"],
        json!({"added": 2 * FILES_PER_VARIANT + 3, "updated": 0, "unchanged": 0, "deleted": 0})
    );
    let state = env.server.repo_state();
    let card = b"# relu\n\nA kernel card.\n";
    assert_eq!(
        state["main"]["README.md"],
        json!({"sha256": sha256_hex(card), "size": card.len(), "lfs": false})
    );
    assert!(state["v1"].get("README.md").is_none(), "the card goes to main only");
    let bench = b"def bench():\n    pass\n";
    assert_eq!(
        state["v1"]["benchmarks/benchmark_relu.py"],
        json!({"sha256": sha256_hex(bench), "size": bench.len(), "lfs": false})
    );
    assert_eq!(
        state["v1"]["benchmarks/data.txt"],
        json!({"sha256": sha256_hex(big.as_bytes()), "size": 10 * 1024 * 1024 + 16, "lfs": true})
    );
    assert_eq!(env.server.stats()["commits"], 2);

    // A new card only: one commit to main, nothing to the branch.
    let better = b"# relu\n\nA better card.\n";
    write(&dir.join("build/CARD.md"), better);
    let r = env.upload_ok(&dir, &[]);
    let j = r.json.unwrap();
    assert_eq!(
        j["files"],
        json!({"added": 0, "updated": 1, "unchanged": 2 * FILES_PER_VARIANT + 2, "deleted": 0})
    );
    assert_eq!(j["bytes_sent"], better.len());
    assert_eq!(env.server.stats()["commits"], 3);
    assert_eq!(env.server.repo_state()["v1"], state["v1"]);
}

#[test]
fn branch_and_repo_from_flags_then_build_toml_then_version() {
    let env = Env::new();
    let dir = env.root.join("k");
    fixture(
        &dir,
        &BUILD_TOML
            .replace("repo-id = \"test-org/relu\"\n", "repo-id = \"test-org/relu\"\nbranch = \"stable\"\n"),
    );
    env.build(&dir, &["--variant", "torch-cpu"]);
    let j = env.upload_ok(&dir, &[]).json.unwrap();
    assert_eq!((&j["repo_id"], &j["branch"]), (&json!("test-org/relu"), &json!("stable")));
    let j = env.upload_ok(&dir, &["--branch", "v1-test"]).json.unwrap();
    assert_eq!(j["branch"], "v1-test");
    let j = env.upload_ok(&dir, &["--repo-id", "other-org/relu2"]).json.unwrap();
    assert_eq!((&j["repo_id"], &j["branch"]), (&json!("other-org/relu2"), &json!("stable")));
    let state = env.server.repo_state();
    let branches: Vec<&String> = state.as_object().unwrap().keys().collect();
    assert_eq!(branches, ["main", "stable", "v1-test"]);
    assert!(env.server.get("/_admin/state").get("kernel:other-org/relu2").is_some());

    // No build/ at all.
    let empty = env.root.join("empty");
    fixture(&empty, BUILD_TOML);
    let r = env.upload(&empty, &[]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("build the kernel first (`kernel-builder build-and-copy`)"), "{}", r.stderr);

    // A dry run's --output-json says so.
    let r = env.upload_ok(&dir, &["--dry-run"]);
    let j = r.json.unwrap();
    assert_eq!(j["status"], "dry_run");
    assert_eq!(j["bytes_sent"], 0);
    assert_eq!(j["files"]["unchanged"], FILES_PER_VARIANT);
}

#[test]
fn the_kernels_own_card_is_used_when_build_has_none() {
    let env = Env::new();
    let dir = env.kernel("k", &[]);
    // What `kernel-builder init` writes: CARD.md beside build.toml, none in build/.
    let card = b"# k\n\nThe kernel's own card.\n";
    write(&dir.join("CARD.md"), card);
    let r = env.upload_ok(&dir, &[]);
    assert_eq!(r.json.unwrap()["status"], "uploaded");
    assert_eq!(
        env.server.repo_state()["main"]["README.md"],
        json!({"sha256": sha256_hex(card), "size": card.len(), "lfs": false})
    );
    // A rendered card in build/ wins over the kernel's own.
    let rendered = b"# k\n\nRendered for the bundle.\n";
    write(&dir.join("build/CARD.md"), rendered);
    env.upload_ok(&dir, &[]);
    assert_eq!(
        env.server.repo_state()["main"]["README.md"],
        json!({"sha256": sha256_hex(rendered), "size": rendered.len(), "lfs": false})
    );
}

#[test]
fn uploading_to_main_with_a_card_makes_both_commits() {
    // Regression (second fresh-user review): with `--branch main`, the card commit named the
    // head of main from before the build commit and was refused with HTTP 412.
    let env = Env::new();
    let dir = env.kernel("k", &[]);
    let card = b"# k\n\nCard.\n";
    write(&dir.join("CARD.md"), card);
    let r = env.upload_ok(&dir, &["--branch", "main"]);
    assert_eq!(r.json.unwrap()["status"], "uploaded");
    let state = env.server.repo_state();
    assert_eq!(
        state["main"]["README.md"],
        json!({"sha256": sha256_hex(card), "size": card.len(), "lfs": false})
    );
    assert!(state["main"].as_object().unwrap().keys().any(|k| k.starts_with("build/")), "{state}");
    assert_eq!(env.server.stats()["commits"], 2);
}

/// Regression (second fresh-user review): after a source edit without a rebuild, `upload`
/// published the old build/ and said "No changes to upload".
#[test]
fn a_build_of_other_sources_is_refused_unless_forced() {
    let env = Env::new();
    let dir = env.kernel("k", &[]);
    let op = dir.join("torch-ext/relu/op.py");
    let mut text = fs::read_to_string(&op).unwrap();
    text.push_str("\n# edited after the build\n");
    fs::write(&op, text).unwrap();
    refused(&env, &dir, &[], "`build/` was built from other sources (source `");
    let r = env.upload_ok(&dir, &["--force"]);
    assert!(
        r.stderr.contains("the sources changed since the last build; uploading anyway (--force)"),
        "{}",
        r.stderr
    );
    // After a rebuild the upload goes through without --force.
    env.build(&dir, &[]);
    let r = env.upload_ok(&dir, &[]);
    assert!(!r.stderr.contains("other sources"), "{}", r.stderr);
}

/// Regression (second fresh-user review): a variant the kernel no longer builds stays on the
/// branch (only uploaded variants are pruned); the upload now says so.
#[test]
fn variants_left_on_the_branch_are_reported() {
    let env = Env::new();
    let dir = env.kernel("k", &[]);
    env.upload_ok(&dir, &[]);
    // The kernel drops cuda: build/torch-cuda goes, torch-cpu is uploaded again.
    let toml = fs::read_to_string(dir.join("build.toml")).unwrap();
    assert!(toml.contains("backends = [\"cpu\", \"cuda\"]"), "{toml}");
    fs::write(dir.join("build.toml"), toml.replace("backends = [\"cpu\", \"cuda\"]", "backends = [\"cpu\"]"))
        .unwrap();
    fs::remove_dir_all(dir.join("build")).unwrap();
    env.build(&dir, &[]);
    let r = env.upload_ok(&dir, &[]);
    assert!(
        r.stderr.contains("note: `build/torch-cuda` on branch `v1` is not in this upload and stays there"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("`build/torch-cpu` on branch"), "{}", r.stderr);
}

/// Python writes `__pycache__/` and `*.pyc` into `build/` when the kernel is loaded from it
/// (`kernels.get_local_kernel`). They are not part of a variant ([`kernel_builder::layout`]):
/// `verify` finds the tree the same, `upload` neither refuses it nor sends them.
#[test]
fn bytecode_written_by_loading_the_build_is_not_part_of_a_variant() {
    let env = Env::new();
    let dir = env.kernel("k", &[]);
    let hashes = fs::read_to_string(dir.join("build/hashes.json")).unwrap();
    for v in ["torch-cpu", "torch-cuda"] {
        write(&dir.join(format!("build/{v}/__pycache__/op.cpython-313.pyc")), b"bytecode");
        write(&dir.join(format!("build/{v}/stray.pyc")), b"bytecode");
    }
    let out = kb(&env.server.url, &env.root.join("hf"), None).arg("verify").arg(&dir).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("torch-cpu: same") && stdout.contains("torch-cuda: same"), "{stdout}");

    let r = env.upload_ok(&dir, &[]);
    assert_eq!(r.json.unwrap()["files"]["added"], 2 * FILES_PER_VARIANT);
    let state = env.server.repo_state();
    let paths: Vec<&String> = state["v1"].as_object().unwrap().keys().collect();
    assert!(paths.iter().all(|p| !p.contains("__pycache__") && !p.ends_with(".pyc")), "{paths:?}");

    // A rebuild drops them with the old variant and writes the same hashes.
    env.build(&dir, &[]);
    assert!(!dir.join("build/torch-cpu/__pycache__").exists());
    assert_eq!(fs::read_to_string(dir.join("build/hashes.json")).unwrap(), hashes);
}

/// The Hub fails the second commit (the card to `main`) after the version branch's landed:
/// the tool says exactly which commit is on the Hub, exits 1, and writes the JSON outcome
/// with it.
#[test]
fn a_partial_upload_reports_the_commit_that_landed() {
    let env = Env::new();
    let dir = env.kernel("k", &[]);
    write(&dir.join("CARD.md"), b"# k\n\nCard.\n");
    env.server.fail("commit", 2, 1, 500, "main is read-only today", false);
    let r = env.upload(&dir, &[]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let j = r.json.expect("the outcome of a partial upload is written");
    assert_eq!(j["status"], "partly_uploaded");
    let commits = j["commits"].as_array().unwrap();
    assert_eq!(commits.len(), 1, "{j}");
    assert_eq!(commits[0]["branch"], "v1");
    let oid = commits[0]["commit"].as_str().unwrap();
    assert!(
        r.stderr.contains(&format!(
            "error: the upload to `test-org/relu` is incomplete: committed to `v1` (commit {oid}, "
        )) && r
            .stderr
            .contains("run the upload again to finish it\n  caused by: the commit to `main` failed\n"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("Upload incomplete: committed to v1 ("), "{}", r.stderr);
    assert!(j["error"].as_str().unwrap().contains("main is read-only today"), "{j}");
    let state = env.server.repo_state();
    assert!(state["v1"].as_object().unwrap().len() > 1, "the v1 commit landed");
    assert!(state["main"].get("README.md").is_none(), "the card did not");
}

/// A `--output-json` path that cannot be written fails before anything is sent.
#[test]
fn a_bad_output_json_path_fails_before_the_first_commit() {
    let env = Env::new();
    let dir = env.kernel("k", &[]);
    let bad = env.root.join("no-such-dir/outcome.json");
    let r = run(
        kb(&env.server.url, &env.root.join("hf"), Some(SECRET))
            .arg("upload")
            .arg(&dir)
            .arg("--output-json")
            .arg(&bad),
        None,
    );
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains(&format!(
            "--output-json `{}` cannot be written (checked before uploading anything)",
            bad.display()
        )),
        "{}",
        r.stderr
    );
    assert_eq!(env.server.stats()["commits"], 0);
    assert_eq!(
        env.server.repo_state().as_object().map_or(0, |o| o.len()),
        0,
        "no repository was even created"
    );
}

/// `upload --json` prints the outcome on stdout (the plan and summary go to stderr), the same
/// document `--output-json` writes; build-and-upload prints its build lines as build-and-copy does.
#[test]
fn upload_json_prints_the_outcome_on_stdout() {
    let env = Env::new();
    let dir = env.kernel("k", &[]);
    let r = run(
        kb(&env.server.url, &env.root.join("hf"), None).arg("upload").arg(&dir).args(["--dry-run", "--json"]),
        None,
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["status"], "dry_run");
    assert!(r.stderr.contains("commit to v1:"), "{}", r.stderr);

    let dir2 = env.root.join("k2");
    fixture(&dir2, BUILD_TOML);
    let r = run(
        kb(&env.server.url, &env.root.join("hf"), Some(SECRET)).arg("build-and-upload").arg(&dir2).args([
            "--variant",
            "torch-cpu",
            "--no-cache",
        ]),
        None,
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.starts_with("built torch-cpu (7 files, id _relu_cpu_"), "{}", r.stdout);
}

/// A Helion kernel's card goes to `main` with its "Tuned for" section: the GPU and figures
/// of `tuning/cuda_sm90/tune.json`, rendered into the README.md that is committed (the
/// kernel's CARD.md itself is left as it is).
#[test]
fn a_helion_kernels_card_is_published_with_its_tuning() {
    let env = Env::new();
    let dir = env.root.join("h");
    fixture(
        &dir,
        &BUILD_TOML
            .replace("[\"cpu\", \"cuda\"]", "[\"cuda\"]")
            .replace("[general.hub]", "python-depends = [\"helion\"]\n\n[general.hub]"),
    );
    write(
        &dir.join("torch-ext/relu/_helion_aot_op_cuda_sm90.py"),
        b"# Tuned 2026-12-01 11:45:35 UTC on 1 shapes:\n#   relu: fp32[1048576]\ndef key_relu(*args):\n    return 0\n\n\ndef autotune_relu(*args):\n    return {}\n",
    );
    let record = json!({
        "format": 1,
        "command": "kernel-builder tune h --effort quick",
        "kernel_builder": "0.1.0",
        "environment": {
            "python": "3.12.3", "torch": "2.11.0+cu130", "triton": "3.6.0", "helion": "1.4.0",
            "cuda": "13.0", "driver": "580.159.04", "device_name": "NVIDIA H200", "device_kind": "cuda",
            "compute": "sm90", "hardware_id": "cuda_NVIDIA_H200_13.0", "utc": "2026-12-01 11:45:35"
        },
        "bench": ["bench.py"], "effort": "quick", "goal": "max_slowdown", "threshold": 1.01, "max_configs": null,
        "heuristic_files": ["relu/_helion_aot_op_cuda_sm90.py"],
        "shapes": [{"kernel": "relu", "shape": "fp32[1048576]", "default_ms": 0.02, "tuned_ms": 0.01, "speedup": 2.0}],
        "geomean_speedup": 2.0,
        "runner_summary": {}
    });
    write(&dir.join("tuning/cuda_sm90/tune.json"), serde_json::to_string_pretty(&record).unwrap().as_bytes());
    let card = "# relu\n\nA Helion card.\n";
    write(&dir.join("CARD.md"), card.as_bytes());
    env.build(&dir, &[]);
    env.upload_ok(&dir, &[]);

    let udir = camino::Utf8PathBuf::from_path_buf(dir.clone()).unwrap();
    let loaded = kernel_builder::kernel::load(&udir).unwrap();
    let published = kernel_builder::tune::card::with_tuning(&udir, &loaded.config, card).unwrap();
    assert!(
        published.contains(
            "| NVIDIA H200 | cuda sm90 | sm90, sm100, sm103, sm110, sm120, sm121 | 580.159.04 | 13.0 | 2.11.0+cu130 | \
             3.6.0 | 1.4.0 | 2026-12-01 11:45:35 | 1 | 2.00x (1 shape) |\n"
        ) && published.contains("| relu | fp32[1048576] | 0.0200 | 0.0100 | 2.00x |\n"),
        "{published}"
    );
    let state = env.server.repo_state();
    assert_eq!(
        state["main"]["README.md"],
        json!({"sha256": sha256_hex(published.as_bytes()), "size": published.len(), "lfs": false})
    );
    assert_eq!(fs::read_to_string(dir.join("CARD.md")).unwrap(), card);
    // Nothing changed: a second upload sends no new card.
    let r = env.upload_ok(&dir, &[]);
    assert_eq!(r.json.unwrap()["status"], "no_changes", "{}", r.stderr);
}

/// An upload interrupted while it waits for the Hub (a server that accepts and never answers)
/// removes the rendered card's temporary file (a Helion kernel's card gets its "Tuned for"
/// section in `$TMPDIR/kernel-builder-card-*.md`) and exits with 128 + signal, instead of
/// dying with the file left behind.
#[test]
fn interrupted_upload_removes_the_rendered_card() {
    use std::os::unix::process::ExitStatusExt;
    let env = Env::new();
    let dir = env.root.join("k");
    fixture(
        &dir,
        &BUILD_TOML.replace(
            "backends = [\"cpu\", \"cuda\"]\n",
            "backends = [\"cpu\"]\npython-depends = [\"helion\"]\n",
        ),
    );
    env.build(&dir, &[]);
    write(&dir.join("CARD.md"), b"# relu\n\nA card without its tuning section.\n");
    // Accepts every connection and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming() {
            held.push(s);
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let tmp = env.root.join("tmp");
    fs::create_dir(&tmp).unwrap();
    let cards = || -> Vec<String> {
        fs::read_dir(&tmp).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()
    };
    for (sig, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGINT, "SIGINT")] {
        let mut cmd = kb_std(&url, &env.root.join("hf"), Some(SECRET));
        let child = cmd
            .arg("upload")
            .arg(&dir)
            .env("TMPDIR", &tmp)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let before = accepted.load(std::sync::atomic::Ordering::SeqCst);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while cards().is_empty() || accepted.load(std::sync::atomic::Ordering::SeqCst) == before {
            assert!(
                std::time::Instant::now() < deadline,
                "the upload never waited: {:?}",
                child.wait_with_output()
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let card = tmp.join(&cards()[0]);
        assert!(card.file_name().unwrap().to_str().unwrap().starts_with("kernel-builder-card-"), "{card:?}");
        // SAFETY: a pid this test started, a valid signal.
        assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code().or_else(|| out.status.signal().map(|n| -n)),
            Some(128 + sig),
            "{stderr}"
        );
        assert_eq!(
            stderr.lines().last(),
            Some(format!("interrupted ({name}); removed `{}`", card.display()).as_str())
        );
        assert_eq!(cards(), Vec::<String>::new(), "{name}");
    }
}

/// [`super::hostile::run_bounded`], checked to never show the token: the output, whether it
/// was killed, and how long it ran.
fn run_bounded(cmd: std::process::Command, limit: std::time::Duration) -> (Run, bool, std::time::Duration) {
    let b = super::hostile::run_bounded(cmd, limit);
    assert!(
        !b.stdout.contains(SECRET) && !b.stderr.contains(SECRET),
        "the token appears:\n{}\n{}",
        b.stdout,
        b.stderr
    );
    (Run { code: b.code, stdout: b.stdout, stderr: b.stderr, json: None }, b.killed, b.took)
}

/// Issue 25, case 1: an endless answer made `upload` grow to 20 GB. Under a 2 GiB address
/// space limit it now stops at the listing limit with a message naming the request.
#[test]
fn an_endless_answer_is_cut_at_its_limit() {
    let env = Env::new();
    let dir = env.kernel("relu", &[]);
    env.server.hostile("refs", 3, json!({"hostile": "endless", "seconds": 60}));
    let mut cmd = kb_std(&env.server.url, &env.root.join("hf"), Some(SECRET));
    cmd.arg("upload").arg(&dir);
    super::hostile::limit_memory(&mut cmd, 2 << 30);
    let (r, killed, _) = run_bounded(cmd, std::time::Duration::from_secs(90));
    assert!(!killed, "upload still ran after 90 s:\n{}", r.stderr);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let want = format!(
        "GET {}/api/kernels/test-org/relu/refs failed: HTTP 200: the answer is larger than 32 MiB, the limit for a JSON listing",
        env.server.url
    );
    assert!(r.stderr.contains(&want), "{}", r.stderr);
    assert!(!r.stderr.contains("trying again"), "a too large answer is not tried again:\n{}", r.stderr);
    assert_eq!(env.server.repo_state()["main"].as_object().map(|m| m.len()), Some(1), "nothing committed");
}

/// Issue 25, case 2: a server that accepts and never answers left `upload` silent for up to
/// half an hour. Now each attempt waits $KERNEL_BUILDER_HUB_TIMEOUT, says so while it waits,
/// and says when it tries again.
#[test]
fn a_silent_hub_is_given_up_on_and_the_wait_is_shown() {
    let env = Env::new();
    let dir = env.kernel("relu", &[]);
    env.server.hostile("refs", 3, json!({"hostile": "silent", "seconds": 90}));
    let mut cmd = kb_std(&env.server.url, &env.root.join("hf"), Some(SECRET));
    cmd.arg("upload").arg(&dir).env("KERNEL_BUILDER_HUB_TIMEOUT", "6");
    let (r, killed, took) = run_bounded(cmd, std::time::Duration::from_secs(60));
    assert!(!killed, "upload still ran after 60 s:\n{}", r.stderr);
    assert_eq!(r.code, 1, "{}", r.stderr);
    // 3 attempts of 6 s each, 1.5 s between them.
    assert!(took >= std::time::Duration::from_secs(18), "gave up after {took:?}:\n{}", r.stderr);
    let refs = format!("GET {}/api/kernels/test-org/relu/refs", env.server.url);
    let notices = r.stderr.matches(&format!("note: {refs}: no complete answer after 5 s")).count();
    assert_eq!(notices, 3, "one notice per attempt:\n{}", r.stderr);
    assert!(r.stderr.contains("(attempt 2 of 3)") && r.stderr.contains("(attempt 3 of 3)"), "{}", r.stderr);
    assert!(
        r.stderr.contains(
            "kernel-builder waits 6 s for an answer, KERNEL_BUILDER_HUB_TIMEOUT sets it) (after 3 attempts)"
        ),
        "{}",
        r.stderr
    );
}

/// A server on 127.0.0.1 that records the head of every request it gets (for at most
/// `limit`), answering each with an empty JSON list.
struct Thief {
    url: String,
    seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Thief {
    fn start(limit: std::time::Duration) -> Thief {
        use std::io::{Read, Write};
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (s, st) = (seen.clone(), stop.clone());
        std::thread::spawn(move || {
            let started = std::time::Instant::now();
            while !st.load(Ordering::Relaxed) && started.elapsed() < limit {
                let Ok((mut conn, _)) = listener.accept() else {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    continue;
                };
                let _ = conn.set_nonblocking(false);
                let _ = conn.set_read_timeout(Some(std::time::Duration::from_secs(5)));
                let mut head = Vec::new();
                let mut b = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n")
                    && head.len() < 65536
                    && conn.read(&mut b).is_ok_and(|n| n == 1)
                {
                    head.push(b[0]);
                }
                s.lock().unwrap().push(String::from_utf8_lossy(&head).into_owned());
                let _ =
                    conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n[]");
            }
        });
        Thief { url, seen, stop }
    }
}

impl Drop for Thief {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Issue 25, case 3: a `Link: rel="next"` to another host got the token. A listing that
/// continues on another origin is now refused, and that origin gets no request at all.
#[test]
fn a_next_page_on_another_host_is_not_followed() {
    let env = Env::new();
    let dir = env.kernel("relu", &[]);
    env.upload_ok(&dir, &[]);
    let thief = Thief::start(std::time::Duration::from_secs(60));
    env.server.hostile("tree", 10, json!({"link_next": format!("{}/steal?cursor=5", thief.url)}));
    let r = env.upload(&dir, &[]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let seen = thief.seen.lock().unwrap().clone();
    assert!(
        seen.iter().all(|h| !h.to_ascii_lowercase().contains("authorization")),
        "the token went to {seen:?}"
    );
    assert_eq!(seen.len(), 0, "{seen:?}");
    let want = format!(
        "the next page of the listing is on another server (`{}/steal?cursor=5`); kernel-builder follows listings only on {}",
        thief.url, env.server.url
    );
    assert!(r.stderr.contains(&want), "{}", r.stderr);
}

/// Attacking the bounds again: a redirect to another host is not followed (it was, without
/// the token, and its answer believed: minor c of the second attack review), and a listing of
/// endless empty pages is refused at its first empty page with a next link.
#[test]
fn a_redirect_elsewhere_is_refused_and_empty_pages_do_not_go_on() {
    let env = Env::new();
    let dir = env.kernel("relu", &[]);
    let thief = Thief::start(std::time::Duration::from_secs(60));
    env.server.hostile("refs", 1, json!({"hostile": "redirect", "location": format!("{}/steal", thief.url)}));
    let r = env.upload(&dir, &[]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let seen = thief.seen.lock().unwrap().clone();
    assert_eq!(seen, Vec::<String>::new(), "the redirect was followed");
    let want = format!(
        "GET {}/api/kernels/test-org/relu/refs failed: HTTP 307: the answer is a redirect (HTTP 307) to another server (`{}/steal`); kernel-builder takes this answer only from {}",
        env.server.url, thief.url, env.server.url
    );
    assert!(r.stderr.contains(&want), "{}", r.stderr);

    env.upload_ok(&dir, &[]);
    env.server.hostile("tree", 1000, json!({"hostile": "empty_pages"}));
    let before = env.server.stats()["requests"]["tree"].as_u64().unwrap();
    let r = env.upload(&dir, &[]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("failed: the listing goes on after an empty page, or at the page itself"),
        "{}",
        r.stderr
    );
    assert_eq!(env.server.stats()["requests"]["tree"].as_u64().unwrap() - before, 1, "one page asked for");
}

/// A token file that is a FIFO (`HF_TOKEN_PATH`) blocked `upload` forever; it is now refused
/// by name, before anything is sent.
#[test]
fn a_token_file_that_is_a_fifo_is_refused() {
    let env = Env::new();
    let dir = env.kernel("relu", &[]);
    let fifo = env.root.join("token-fifo");
    super::hostile::mkfifo(&fifo);
    let mut cmd = kb_std(&env.server.url, &env.root.join("hf"), None);
    cmd.arg("upload").arg(&dir).env("HF_TOKEN_PATH", &fifo);
    let (r, killed, _) = run_bounded(cmd, std::time::Duration::from_secs(30));
    assert!(!killed, "upload blocked on the FIFO:\n{}", r.stderr);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "error: cannot read the token file: `{}` is a FIFO (named pipe), not a regular file",
            fifo.display()
        )),
        "{}",
        r.stderr
    );
    assert_eq!(env.server.stats()["requests"], json!({}), "nothing was sent");
}

/// Outside a terminal (every other test here) the upload draws no byte bar; in a terminal (a
/// pty from `script`) it does, above which the `sending …` lines still come; with `--json`
/// it does not, on a terminal either.
#[test]
fn upload_draws_a_byte_bar_on_a_terminal_only() {
    let env = Env::new();
    let dir = env.kernel("k", &[]);
    let r = env.upload_ok(&dir, &[]);
    assert!(r.stderr.contains("sending build/torch-") && !r.stderr.contains("upload: "), "{}", r.stderr);

    fs::write(dir.join("torch-ext/relu/table.bin"), table_bin(9)).unwrap();
    env.build(&dir, &[]);
    let hf = env.root.join("hf");
    let vars = [
        ("HF_ENDPOINT", std::ffi::OsStr::new(&env.server.url)),
        ("HF_HOME", hf.as_os_str()),
        ("HF_TOKEN", std::ffi::OsStr::new(SECRET)),
    ];
    let tty = crate::util::kb_in_pty(&format!("upload {}", dir.display()), &vars);
    assert!(!tty.contains(SECRET));
    assert!(tty.contains("sending build/torch-"), "{tty}");
    assert!(tty.contains("upload: sending build/torch-"), "{tty}");

    // --json: no bar, on a terminal too.
    fs::write(dir.join("torch-ext/relu/table.bin"), table_bin(11)).unwrap();
    env.build(&dir, &[]);
    let tty = crate::util::kb_in_pty(&format!("upload {} --json", dir.display()), &vars);
    assert!(tty.contains("\"status\": \"uploaded\""), "{tty}");
    assert!(!tty.contains("upload: "), "{tty}");
}

/// A zip-layout variant (the package in `<id>.zip`, which kernels 0.19 imports): uploaded with
/// its archive through LFS, and refused, before anything is sent, when its metadata.json would
/// let an older loader try it.
#[test]
fn a_zip_layout_variant_is_uploaded_and_one_older_loaders_would_try_is_refused() {
    let env = Env::new();
    let dir = env.kernel("k", &["--variant", "torch-cpu"]);
    let zipped = env.root.join("zipped");
    let out = kb(&env.server.url, &env.root.join("hf"), None)
        .args(["assemble", "--backend", "cpu", "--build-layout", "zip", "--source"])
        .arg(&dir)
        .arg("--out")
        .arg(&zipped)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let variant = dir.join("build/torch-cpu");
    fs::remove_dir_all(&variant).unwrap();
    fs::rename(zipped.join("torch-cpu"), &variant).unwrap();
    let meta_path = variant.join("metadata.json");
    let meta: Value = serde_json::from_slice(&fs::read(&meta_path).unwrap()).unwrap();
    let id = meta["id"].as_str().unwrap().to_owned();
    let mut names: Vec<String> =
        fs::read_dir(&variant).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(names, [format!("{id}.zip"), "metadata.json".to_owned(), "symbols.json".to_owned()]);

    // Without `kernels-minver`, kernels 0.17/0.18 would look for an __init__.py that is not there.
    let mut old = meta.clone();
    old.as_object_mut().unwrap().remove("kernels-minver");
    fs::write(&meta_path, serde_json::to_vec_pretty(&old).unwrap()).unwrap();
    refused(
        &env,
        &dir,
        &["--force"],
        &format!(
            "variant `torch-cpu`: `{}` says `\"build-layout\": \"zip\"` without `\"kernels-minver\"` 0.19.0 or newer, so older loaders would try it and fail; rebuild the variant",
            meta_path.display()
        ),
    );

    // As built: uploaded (--force: build/hashes.json records the files layout it replaced).
    fs::write(&meta_path, serde_json::to_vec_pretty(&meta).unwrap()).unwrap();
    env.upload_ok(&dir, &["--force"]);
    let state = env.server.repo_state();
    let mut uploaded: Vec<(&String, bool)> = state["v1"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(p, _)| p.starts_with("build/torch-cpu/"))
        .map(|(p, f)| (p, f["lfs"].as_bool().unwrap()))
        .collect();
    uploaded.sort();
    let archive = format!("build/torch-cpu/{id}.zip");
    assert_eq!(
        uploaded.iter().map(|(p, l)| (p.as_str(), *l)).collect::<Vec<_>>(),
        [
            (archive.as_str(), true),
            ("build/torch-cpu/metadata.json", false),
            ("build/torch-cpu/symbols.json", false)
        ]
    );
    assert_eq!(
        state["v1"][&archive]["sha256"],
        json!(sha256_hex(&fs::read(variant.join(format!("{id}.zip"))).unwrap()))
    );
}
