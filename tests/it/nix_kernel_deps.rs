//! A kernel dependency through Nix, for real: kdeps-scale is uploaded to the local Hub test
//! server, kdeps-consumer (whose op calls it) is locked against that server, and `nix build`
//! of the consumer's flake, offline but for the server on 127.0.0.1, runs the fixed-output
//! fetcher (`lib.fetchKernelDep`) in the sandbox: the locked tree arrives in the store with
//! the lock's NAR hash (a lock with another hash is refused), and kernels 0.17.2 (the venv's) loads the built consumer with the
//! dependency resolved to that store path (`kernel-deps`' `local-kernels`).

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::nix::{clean_repo_with, commit_orchestrator_lock, nix_output_env};
use crate::upload::{Server, SECRET};
use crate::util::{copy_dir, git, kb, repo};

const CONSUMER: &str = "tests/fixtures/kernel-deps/kdeps-consumer";
const DEP: &str = "test-org/kdeps-scale";

/// `kernel-builder ARGS` against `hub`, with its own HF_HOME and kernel caches under `tmp`.
fn kb_hub(hub: &Server, tmp: &Path, token: bool, args: &[&str]) -> String {
    let mut c = kb();
    for v in ["HF_TOKEN", "HF_TOKEN_PATH", "LOCAL_KERNELS", "http_proxy", "https_proxy", "all_proxy"] {
        c.env_remove(v);
    }
    c.env("HF_ENDPOINT", &hub.url)
        .env("HF_HOME", tmp.join("hf-home"))
        .env("HF_HUB_DISABLE_XET", "1")
        .env("KERNEL_BUILDER_CACHE_DIR", tmp.join("cache"));
    if token {
        c.env("HF_TOKEN", SECRET);
    }
    let out = c.args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "kernel-builder {args:?}:\n{stderr}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn a_locked_kernel_dependency_is_fetched_in_the_sandbox_and_the_built_kernel_loads_it() {
    let hub = Server::start();
    let t = tempfile::tempdir().unwrap();
    // A factor of this run's own, so the dependency's tree (and its store path) is new and
    // Nix has to run the fetcher rather than find the path already in the store.
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let factor = 2 + (nanos % 9973) as u64;
    let dep = t.path().join("kdeps-scale");
    copy_dir(&repo().join("tests/fixtures/kernel-deps/kdeps-scale"), &dep);
    fs::write(dep.join("torch-ext/kdeps_scale/factor.py"), format!("FACTOR = {factor}.0  # run {nanos}\n"))
        .unwrap();
    let d = dep.to_str().unwrap();
    kb_hub(&hub, t.path(), false, &["build-and-copy", d, "--nix", "never"]);
    kb_hub(&hub, t.path(), true, &["upload", d]);
    let refs = hub.get(&format!("/api/kernels/{DEP}/refs"));
    let commit = refs["branches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "v1")
        .and_then(|b| b["targetCommit"].as_str())
        .unwrap_or_else(|| panic!("no branch v1: {refs}"))
        .to_owned();

    // The consumer in a clean repository beside the root flake, locked against the server.
    let (_rt, r) = clean_repo_with(CONSUMER);
    let consumer = r.join(CONSUMER);
    fs::write(
        consumer.join("flake.nix"),
        "{\n  inputs.kernel-builder.url = \"path:../../../..\";\n  outputs = { self, kernel-builder }:\n    kernel-builder.lib.genKernelFlakeOutputs { inherit self; path = ./.; };\n}\n",
    )
    .unwrap();
    kb_hub(&hub, &t.path().join("lock"), false, &["lock-kernel-deps", consumer.to_str().unwrap()]);
    let lock: Value = serde_json::from_slice(&fs::read(consumer.join("kernels.lock")).unwrap()).unwrap();
    assert_eq!(lock[0]["lock"]["commit"], commit.as_str(), "{lock}");
    let hash = lock[0]["lock"]["hash"].as_str().unwrap().to_owned();
    git(&r, &["add", "-A"]);
    git(&r, &["commit", "-q", "-m", "the consumer's flake and lock"]);
    commit_orchestrator_lock(&r, CONSUMER);

    // The fetcher reads HF_ENDPOINT from the environment of the build (an impure variable of
    // the fixed-output derivation, which alone may reach the network).
    let installables =
        [format!("{}#bundle", consumer.display()), format!("{}#kernel-deps", consumer.display())];
    let out = nix_output_env(
        &r,
        &["build", "--no-link", "--json", "-L", &installables[0], &installables[1]],
        &[("HF_ENDPOINT", hub.url.as_str())],
    );
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "nix build failed:\n{log}");
    let name = format!("test-org--kdeps-scale--{commit}");
    assert!(
        log.lines().any(|l| l.contains(&format!("-{name}.drv")) && l.starts_with("building ")),
        "Nix did not run the fetcher of {name}:\n{log}"
    );
    let built: Value = serde_json::from_slice(&out.stdout).unwrap();
    let bundle = PathBuf::from(built[0]["outputs"]["out"].as_str().unwrap());
    let paths = PathBuf::from(built[1]["outputs"]["out"].as_str().unwrap());

    // The tree Nix fetched is the locked one: its store path is named after the commit and its
    // NAR hash is the lock's (Nix refused it otherwise; checked here once more).
    let local = fs::read_to_string(paths.join("local-kernels")).unwrap();
    let (repo_id, tree) = local.trim().split_once('=').unwrap_or_else(|| panic!("{local:?}"));
    assert_eq!(repo_id, DEP);
    let tree = PathBuf::from(tree);
    assert!(tree.starts_with("/nix/store") && tree.to_str().unwrap().ends_with(&name), "{local}");
    assert_eq!(kernel_builder::hash::nar_hash_sri(&tree).unwrap(), hash);
    let kernel_paths: Value =
        serde_json::from_slice(&fs::read(paths.join("kernel-paths.json")).unwrap()).unwrap();
    assert!(kernel_paths.to_string().contains(tree.to_str().unwrap()), "{kernel_paths}");
    let mut variants: Vec<String> =
        fs::read_dir(&bundle).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    variants.sort();
    assert_eq!(variants, ["hashes.json", "torch-cpu", "torch-cuda"]);

    // A lock whose hash is not the tree's: Nix runs the fetcher and refuses what it got.
    let wrong = kernel_builder::hash::nar_hash_sri(&paths.join("kernel-paths.json")).unwrap();
    let lock_path = consumer.join("kernels.lock");
    fs::write(&lock_path, fs::read_to_string(&lock_path).unwrap().replace(&hash, &wrong)).unwrap();
    git(&r, &["commit", "-q", "-am", "a lock with a wrong hash"]);
    let refused =
        nix_output_env(&r, &["build", "--no-link", &installables[1]], &[("HF_ENDPOINT", hub.url.as_str())]);
    let log = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "a wrong hash was accepted:\n{log}");
    assert!(log.contains("hash mismatch in fixed-output derivation"), "{log}");
    assert!(
        log.contains(&format!("specified: {wrong}")) && log.contains(&format!("got:    {hash}")),
        "{log}"
    );

    // kernels 0.17.2 loads the consumer built by Nix, its dependency from the store.
    let Some(py) = crate::util::venv_with_kernels("the load through kernels 0.17.2") else { return };
    const LOADER: &str = "import json, sys\nfrom pathlib import Path\nimport torch, kernels\nm = kernels.get_local_kernel(Path(sys.argv[1]), backend='cpu')\nprint(json.dumps({'out': m.scale_plus_one(torch.ones(2)).tolist(), 'dep': m._scale.__file__, 'version': kernels.__version__}))\n";
    let loaded = std::process::Command::new(&py)
        .args(["-c", LOADER])
        .arg(&bundle)
        .env("LOCAL_KERNELS", local.trim())
        .env("HF_HUB_OFFLINE", "1")
        .env_remove("HF_ENDPOINT")
        .output()
        .unwrap();
    assert!(loaded.status.success(), "{}", String::from_utf8_lossy(&loaded.stderr));
    let stdout = String::from_utf8(loaded.stdout).unwrap();
    let got: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let want = (factor + 1) as f64;
    assert_eq!(got["out"], serde_json::json!([want, want]), "{got}");
    assert!(got["dep"].as_str().unwrap().starts_with(tree.to_str().unwrap()), "{got}");
    assert_eq!(got["version"], "0.17.2");
}
