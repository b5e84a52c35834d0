//! `kernel-builder cache push` and `cache pull` against real Nix: a `file://` binary cache
//! signed with a key from `nix key generate-secret`, pulled into a fresh store (an empty
//! directory mounted on /nix in a private mount namespace, so Nix there has nothing built and
//! no other substituter).
//!
//! Needs what the other `nix-tests` need (scripts/setup-nix.sh) and root (the mount namespace).

use std::fs;
use std::path::{Path, PathBuf};

use super::nix::{clean_repo_with, git, orchestrator, override_orchestrator, tree};

use crate::util::kb_path as kb;

/// Run `prog ARGS` with /nix replaced by `fresh_nix` (created empty when missing): stdout and
/// stderr together, and whether it succeeded.
fn in_fresh_store(fresh_nix: &Path, prog: &Path, args: &[String]) -> (bool, String) {
    fs::create_dir_all(fresh_nix).unwrap();
    let mut a: Vec<String> = vec![
        "--mount".into(),
        "--propagation".into(),
        "private".into(),
        "--".into(),
        "sh".into(),
        "-c".into(),
        "mount --bind \"$1\" /nix && shift && exec \"$@\"".into(),
        "sh".into(),
        fresh_nix.display().to_string(),
        prog.display().to_string(),
    ];
    a.extend(args.iter().cloned());
    let out = duct::cmd("unshare", a)
        .env(kernel_builder::nixdrv::ORCHESTRATOR_ENV, orchestrator())
        .stderr_to_stdout()
        .stdout_capture()
        .unchecked()
        .run()
        .expect("cannot run unshare (util-linux)");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
}

fn nix(args: &[&str]) -> String {
    let out = duct::cmd("nix", args).stdout_capture().stderr_capture().unchecked().run().unwrap();
    assert!(out.status.success(), "nix {args:?}:\n{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Push the noarch fixture (four cells and the bundle, made new by a nonce) to a `file://`
/// cache signed with a fresh key: the cache holds every cell and the bundle with its
/// signature. A fresh store given that cache and the public key would fetch, not build (the
/// dry run lists the bundle to fetch and no derivation to build), and `cache pull` fills
/// `build/` with exactly the pushed bundle while its log builds nothing. A wrong key of the
/// same name, another key, a missing cache and an empty cache each fail before anything is
/// built, saying why, with `build/` untouched.
#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn a_signed_cache_fills_a_fresh_store_by_substitution_only() {
    let (t, r) = clean_repo_with("tests/fixtures/nix-kernel");
    let kernel = r.join("tests/fixtures/nix-kernel");
    let nonce = format!("{:?}-{}", std::time::SystemTime::now(), std::process::id());
    fs::write(kernel.join("torch-ext/nix_fixture/_nonce.py"), format!("NONCE = {nonce:?}\n")).unwrap();
    git(&r, &["add", "-A"]);
    git(&r, &["commit", "-q", "-m", "nonce"]);
    let keys = t.path().join("keys");
    fs::create_dir_all(&keys).unwrap();
    let secret = keys.join("secret");
    fs::write(&secret, nix(&["key", "generate-secret", "--key-name", "kb-test-cache-1"])).unwrap();
    let public = duct::cmd!("nix", "key", "convert-secret-to-public")
        .stdin_path(&secret)
        .read()
        .unwrap()
        .trim()
        .to_owned();
    let cache = t.path().join("cache");
    let uri = format!("file://{}", cache.display());
    let mut nix_args = vec!["--".to_owned()];
    nix_args.extend(override_orchestrator());

    // Push.
    let mut push: Vec<String> = vec!["cache".into(), "push".into(), kernel.display().to_string()];
    push.extend(["--to".into(), uri.clone(), "--key-file".into(), secret.display().to_string()]);
    push.extend(nix_args.iter().cloned());
    let out = duct::cmd(kb(), &push)
        .env(kernel_builder::nixdrv::ORCHESTRATOR_ENV, orchestrator())
        .stderr_to_stdout()
        .stdout_capture()
        .unchecked()
        .run()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{log}");
    let pushed: Vec<PathBuf> = log
        .lines()
        .filter_map(|l| {
            l.strip_prefix("pushed ")?.split_once(" (signed by kb-test-cache-1) -> ").map(|(p, _)| p.into())
        })
        .collect();
    let names: Vec<String> = pushed
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().split_once('-').unwrap().1.to_owned())
        .collect();
    assert_eq!(
        names,
        [
            "nix-fixture-bundle",
            "nix-fixture-torch-cpu",
            "nix-fixture-torch-cuda",
            "nix-fixture-torch-rocm",
            "nix-fixture-torch-xpu"
        ]
    );
    for p in &pushed {
        let info: serde_json::Value = serde_json::from_str(&nix(&[
            "path-info",
            "--json",
            "--sigs",
            "--store",
            &uri,
            p.to_str().unwrap(),
        ]))
        .unwrap();
        let sigs = info[0]["signatures"].as_array().unwrap();
        assert!(sigs.iter().any(|s| s.as_str().unwrap().starts_with("kb-test-cache-1:")), "{info}");
    }
    let bundle = &pushed[0];

    // A fresh store would fetch the bundle and build nothing.
    let fresh = t.path().join("fresh/nix");
    let mut dry: Vec<String> = ["build", "--dry-run", "--no-link"].map(String::from).to_vec();
    dry.push(format!("{}#bundle", kernel.display()));
    dry.extend(override_orchestrator());
    dry.extend(["--option".into(), "substituters".into(), uri.clone()]);
    dry.extend(["--option".into(), "trusted-public-keys".into(), public.clone()]);
    let (ok, log) = in_fresh_store(&fresh, Path::new("/usr/bin/nix"), &dry);
    assert!(ok, "{log}");
    let (built, fetched) = kernel_builder::nixdrv::cache::dry_run_lists(&log);
    assert_eq!(built, Vec::<String>::new(), "{log}");
    assert_eq!(fetched, [bundle.display().to_string()], "{log}");
    assert!(!fresh.join("store").join(bundle.file_name().unwrap()).exists());

    // Errors first: nothing is built and build/ is not touched.
    let pull = |from: &str, key: &str| {
        let mut a: Vec<String> = vec!["cache".into(), "pull".into(), kernel.display().to_string()];
        a.extend(["--from".into(), from.to_owned(), "--public-key".into(), key.to_owned()]);
        a.extend(nix_args.iter().cloned());
        in_fresh_store(&fresh, &kb(), &a)
    };
    let (_, key) = public.split_once(':').unwrap();
    let mut wrong: Vec<char> = key.chars().collect();
    wrong[0] = if wrong[0] == 'A' { 'B' } else { 'A' };
    let wrong_same_name = format!("kb-test-cache-1:{}", wrong.into_iter().collect::<String>());
    let empty = t.path().join("empty-cache");
    fs::create_dir_all(&empty).unwrap();
    fs::write(empty.join("nix-cache-info"), "StoreDir: /nix/store\n").unwrap();
    let missing = format!("file://{}", t.path().join("no-cache").display());
    let cases: [(&str, String, &str); 4] = [
        (&uri, wrong_same_name, "signed by `kb-test-cache-1`, but not with the public key given"),
        (
            &uri,
            format!("someone-else-1:{key}"),
            "signed by `kb-test-cache-1`, not by the key given (`someone-else-1`)",
        ),
        (&missing, public.clone(), "no binary cache at"),
        (&format!("file://{}", empty.display()), public.clone(), "the cache has no"),
    ];
    for (from, key, says) in &cases {
        let (ok, log) = pull(from, key);
        assert!(!ok, "pull from {from} with {key} succeeded:\n{log}");
        let error = log.lines().find(|l| l.starts_with("error: ")).unwrap_or_else(|| panic!("{log}"));
        assert!(error.contains(says), "{error}");
        assert!(!log.contains("building '"), "{log}");
        assert!(!kernel.join("build").exists(), "{log}");
    }

    // The pull.
    let (ok, log) = pull(&uri, &public);
    assert!(ok, "{log}");
    assert!(!log.contains("building '"), "the pull built something:\n{log}");
    assert!(log.contains(&format!("copying path '{}' from '{uri}'", bundle.display())), "{log}");
    let said: Vec<&str> =
        log.lines().filter(|l| l.starts_with("fetched ") || l.starts_with("copied ")).collect();
    let build_dir = kernel.join("build");
    let variants = ["torch-cpu", "torch-cuda", "torch-rocm", "torch-xpu"];
    let expected: Vec<String> = variants
        .iter()
        .map(|v| format!("fetched {v} from {uri} -> {}", build_dir.join(v).display()))
        .collect();
    assert_eq!(said, expected, "{log}");
    assert!(fresh.join("store").join(bundle.file_name().unwrap()).is_dir());
    let build = tree(&kernel.join("build"));
    let pushed_tree = tree(bundle);
    assert_eq!(build, pushed_tree, "build/ is not the pushed bundle");

    // Now the bundle is in the (fresh) local store, so Nix would fetch nothing: the cache and
    // the key are still checked, and every bad one still fails with `build/` unchanged.
    let mut again: Vec<(String, String, String)> =
        cases.iter().map(|(from, key, says)| (from.to_string(), key.clone(), says.to_string())).collect();
    again.push((
        "not a uri".into(),
        public.clone(),
        "error: `not a uri` is not a binary cache URI: give a Nix store URI with one of the schemes".into(),
    ));
    again.push((
        "https://nonexistent.invalid".into(),
        public.clone(),
        "no binary cache at `https://nonexistent.invalid`".into(),
    ));
    for (from, key, says) in &again {
        let (ok, log) = pull(from, key);
        assert!(!ok, "pull from {from} with {key} succeeded with the bundle already local:\n{log}");
        let error = log.lines().find(|l| l.starts_with("error: ")).unwrap_or_else(|| panic!("{log}"));
        assert!(error.contains(says.as_str()), "{error}");
        assert!(!log.contains("building '"), "{log}");
        assert_eq!(tree(&kernel.join("build")), pushed_tree, "build/ changed");
    }
    // A good pull with the bundle already local fetches nothing and says so: the local copy,
    // checked against the cache, is what fills build/.
    let (ok, log) = pull(&uri, &public);
    assert!(ok, "{log}");
    assert!(!log.contains("copying path"), "{log}");
    let said: Vec<&str> = log
        .lines()
        .filter(|l| {
            l.starts_with("fetched ") || l.starts_with("copied ") || l.contains("already in the local")
        })
        .collect();
    let mut expected = vec![format!(
        "{} was already in the local Nix store; {uri} has it, signed by the key given, so that copy was used",
        bundle.display()
    )];
    expected.extend(
        variants
            .iter()
            .map(|v| format!("copied {v} from the local Nix store -> {}", build_dir.join(v).display())),
    );
    assert_eq!(said, expected, "{log}");
    assert_eq!(tree(&kernel.join("build")), pushed_tree);
}

/// `cache push` and `cache pull` of a directory without flake.nix (inside a repository whose
/// root has one) stop with the same message as `build-and-copy --nix always`, before any Nix
/// runs, instead of Nix evaluating the repository's root flake.
#[test]
fn cache_push_and_pull_refuse_a_kernel_without_flake_nix() {
    let t = tempfile::tempdir().unwrap();
    fs::write(t.path().join("flake.nix"), "{ outputs = _: { }; }\n").unwrap();
    let kernel = t.path().join("kernels/plain");
    fs::create_dir_all(&kernel).unwrap();
    fs::write(kernel.join("build.toml"), "[general]\nname = \"plain\"\n").unwrap();
    let key = t.path().join("secret");
    fs::write(&key, "kb-test-1:c2VjcmV0\n").unwrap();
    let k = kernel.display().to_string();
    let says = format!(
        "error: `{k}` has no flake.nix; a kernel flake calls `kernel-builder.lib.genKernelFlakeOutputs {{ inherit self; path = ./.; }}` (see `kernel-builder init`)"
    );
    let push = ["cache", "push", &k, "--to", "file:///tmp/kb-no-cache", "--key-file", key.to_str().unwrap()];
    let pull =
        ["cache", "pull", &k, "--from", "file:///tmp/kb-no-cache", "--public-key", "kb-test-1:cHVibGlj"];
    for args in [&push[..], &pull[..]] {
        let out = duct::cmd(kb(), args).stderr_to_stdout().stdout_capture().unchecked().run().unwrap();
        let log = String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success(), "{log}");
        assert_eq!(log.lines().find(|l| l.starts_with("error: ")), Some(says.as_str()), "{log}");
    }
    assert!(!Path::new("/tmp/kb-no-cache").exists());
}

/// Issue 25, case 8: `cache pull` (here of a cache that lacks the bundle) created the kernel's
/// flake.lock and staged it in git. Nix is now told never to write the lock: the repository is
/// left exactly as it was.
#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn cache_pull_writes_no_lock_file_and_stages_nothing() {
    let (t, r) = clean_repo_with("tests/fixtures/nix-kernel");
    let kernel = r.join("tests/fixtures/nix-kernel");
    assert!(!kernel.join("flake.lock").exists());
    let cache = t.path().join("cache");
    fs::create_dir_all(&cache).unwrap();
    fs::write(cache.join("nix-cache-info"), "StoreDir: /nix/store\nWantMassQuery: 1\nPriority: 30\n")
        .unwrap();
    let uri = format!("file://{}", cache.display());
    let k = kernel.display().to_string();
    // No orchestrator override: Nix locks the flake's inputs as they are (what a user without
    // the static orchestrator gets), and fails on the nixpkgs it cannot fetch offline.
    let out = duct::cmd(kb(), ["cache", "pull", &k, "--from", &uri, "--public-key", "kb-test-1:cHVibGlj"])
        .env_remove(kernel_builder::nixdrv::ORCHESTRATOR_ENV)
        .stderr_to_stdout()
        .stdout_capture()
        .unchecked()
        .run()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "the empty cache has no bundle:\n{log}");
    assert!(!kernel.join("flake.lock").exists(), "flake.lock written:\n{log}");
    let status = git(&r, &["status", "--porcelain", "--untracked-files=all"]);
    assert_eq!(status, "", "{log}");
}
