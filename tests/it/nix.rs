//! The Nix library (`flake.nix`, `nix/lib/`) and the CLI's Nix driver, against real Nix.
//!
//! Tests marked `nix-tests` need Nix with flakes and the sandbox on, offline, and the static
//! orchestrator that `scripts/setup-nix.sh` builds (its directory is
//! `$KERNEL_BUILDER_ORCHESTRATOR`, default `target/nix-orchestrator`). Run:
//! `scripts/setup-nix.sh && cargo test --features nix-tests nix::`.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use camino::Utf8Path;
use serde_json::Value;

pub(crate) use super::util::{copy_dir, git, repo};

const REPO: &str = env!("CARGO_MANIFEST_DIR");
const FIXTURE: &str = "tests/fixtures/nix-kernel";

/// The error of `nixdrv::build` of the kernel flake at `kernel` (its bundle, the static
/// orchestrator), as text; panics when the build succeeds.
fn nix_build_error(kernel: &Path) -> String {
    kernel_builder::nixdrv::build(Utf8Path::from_path(kernel).unwrap(), &[], &override_orchestrator(), false)
        .unwrap_err()
        .to_string()
}

/// The static orchestrator directory (holds `bin/kernel-builder`).
pub(crate) fn orchestrator() -> PathBuf {
    let dir = std::env::var_os("KERNEL_BUILDER_ORCHESTRATOR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/nix-orchestrator"));
    assert!(
        dir.join("bin/kernel-builder").is_file(),
        "no static orchestrator in {}: run scripts/setup-nix.sh first",
        dir.display()
    );
    dir
}

pub(crate) fn stub_nixpkgs() -> String {
    format!("path:{}", repo().join("tests/fixtures/nixpkgs-stub").display())
}

/// Run `nix ARGS` in `cwd`, capturing both streams; never fails on Nix's exit status.
fn nix_output(cwd: &Path, args: &[&str]) -> std::process::Output {
    nix_output_env(cwd, args, &[])
}

/// [`nix_output`] with the variables `env` set as well.
pub(crate) fn nix_output_env(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    env.iter()
        .fold(duct::cmd("nix", args), |c, (k, v)| c.env(k, v))
        .dir(cwd)
        .stdout_capture()
        .stderr_capture()
        .unchecked()
        .run()
        .expect("cannot run nix")
}

/// Run `nix ARGS` in `cwd`; returns stdout, panics with Nix's stderr on failure.
pub(crate) fn nix(cwd: &Path, args: &[&str]) -> String {
    let out = nix_output(cwd, args);
    assert!(out.status.success(), "nix {} failed:\n{}", args.join(" "), String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Every file under `root`: relative path → (bytes, executable). Directories are implied.
pub(crate) fn tree(root: &Path) -> BTreeMap<String, (Vec<u8>, bool)> {
    walkdir::WalkDir::new(root)
        .sort_by_file_name()
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            let rel = e.path().strip_prefix(root).unwrap().display().to_string();
            let exec = e.metadata().unwrap().permissions().mode() & 0o111 != 0;
            (rel, (fs::read(e.path()).unwrap(), exec))
        })
        .collect()
}

/// A fresh, committed git repository holding the root flake (flake.nix, flake.lock, nix/,
/// Cargo.toml) and the kernel directory `kernel_rel` at the same relative path, as a clean
/// checkout has them. Returns (temp dir, repository path).
pub(crate) fn clean_repo_with(kernel_rel: &str) -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let r = t.path().join("repo");
    fs::create_dir_all(&r).unwrap();
    for f in ["flake.nix", "flake.lock", "Cargo.toml", "Cargo.lock"] {
        fs::copy(repo().join(f), r.join(f)).unwrap();
    }
    copy_dir(&repo().join("nix"), &r.join("nix"));
    copy_dir(&repo().join(kernel_rel), &r.join(kernel_rel));
    fs::write(r.join(".gitignore"), "build/\nresult\n").unwrap();
    git(&r, &["init", "-q", "."]);
    git(&r, &["add", "-A"]);
    git(&r, &["commit", "-q", "-m", "fixture"]);
    (t, r)
}

pub(crate) fn override_orchestrator() -> Vec<String> {
    vec![
        "--override-input".into(),
        "kernel-builder/orchestrator".into(),
        format!("path:{}", orchestrator().display()),
        "--no-write-lock-file".into(),
    ]
}

/// Lock the kernel flake at `kernel_rel` of repository `r` to the static orchestrator and
/// commit the lock. Nix 2.8 gives a flake its `rev` (recorded as the kernel commit) only when
/// the tree is clean and the lock needs no change: an `--override-input` or a missing lock
/// drops it. A real kernel repository commits its flake.lock the same way.
pub(crate) fn commit_orchestrator_lock(r: &Path, kernel_rel: &str) {
    let mut args: Vec<String> = vec!["flake".into(), "lock".into()];
    args.extend(override_orchestrator().into_iter().filter(|a| a != "--no-write-lock-file"));
    nix(&r.join(kernel_rel), &args.iter().map(String::as_str).collect::<Vec<_>>());
    git(r, &["add", "-A"]);
    git(r, &["commit", "-q", "-m", "lock the kernel flake"]);
}

/// `nix build <kernel>#bundle` offline in the sandbox, then the native build of a clone of the
/// same commit: the two trees are identical, byte for byte and in their executable bits.
fn assert_bundle_equals_native(kernel_rel: &str, expected_variants: &[&str]) {
    let (t, r) = clean_repo_with(kernel_rel);
    commit_orchestrator_lock(&r, kernel_rel);
    let kernel = r.join(kernel_rel);
    let installable = format!("{}#bundle", kernel.display());
    let json = nix(&r, &["build", "--no-link", "--json", "-L", &installable]);
    let built: Value = serde_json::from_str(&json).unwrap();
    let bundle = PathBuf::from(built[0]["outputs"]["out"].as_str().unwrap());

    let variants: Vec<String> = fs::read_dir(&bundle)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n != "hashes.json")
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(variants, expected_variants);
    // The bundle carries the same reproducibility manifest as a native build (compared below).
    assert!(bundle.join("hashes.json").is_file());

    let clone = t.path().join("clone");
    git(t.path(), &["clone", "-q", r.to_str().unwrap(), clone.to_str().unwrap()]);
    let native_kernel = clone.join(kernel_rel);
    Command::new(orchestrator().join("bin/kernel-builder"))
        .args(["build-and-copy", native_kernel.to_str().unwrap(), "--nix", "never"])
        .assert()
        .success();
    let nix_tree = tree(&bundle);
    let native_tree = tree(&native_kernel.join("build"));
    assert_eq!(
        nix_tree.keys().collect::<Vec<_>>(),
        native_tree.keys().collect::<Vec<_>>(),
        "file lists differ"
    );
    for (path, nix_file) in &nix_tree {
        assert!(
            nix_file == &native_tree[path],
            "{path} differs between nix build and --nix never:\n--- nix\n{}\n--- native\n{}",
            String::from_utf8_lossy(&nix_file.0),
            String::from_utf8_lossy(&native_tree[path].0)
        );
    }
    // A clean checkout records no kernel commit: the bytes depend on the source alone.
    let meta: Value =
        serde_json::from_slice(&fs::read(bundle.join(expected_variants[0]).join("metadata.json")).unwrap())
            .unwrap();
    assert_eq!(meta["provenance"]["kernel"], Value::Null, "{meta}");
    assert!(meta["provenance"]["kernel-builder"]["version"].is_string(), "{meta}");
}

#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn fixture_bundle_builds_offline_and_equals_the_native_build() {
    assert_bundle_equals_native(FIXTURE, &["torch-cpu", "torch-cuda", "torch-rocm", "torch-xpu"]);
}

#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn vector_add_helion_bundle_builds_offline_and_equals_the_native_build() {
    let dir = "kernels/vector-add-helion";
    assert!(
        repo().join(dir).join("build.toml").is_file(),
        "{dir}/build.toml is missing (it comes with the `kernels` branch)"
    );
    let config = kernel_builder::kernel::load(Utf8Path::new(REPO).join(dir).as_ref()).unwrap().config;
    let expected: Vec<String> =
        kernel_builder::matrix::cells(&config, "x86_64-linux", kernel_builder::matrix::Scope::Bundle)
            .into_iter()
            .map(|c| c.name)
            .collect();
    assert_bundle_equals_native(dir, &expected.iter().map(String::as_str).collect::<Vec<_>>());
}

#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn root_flake_check_passes_offline() {
    let orch = format!("path:{}", orchestrator().display());
    let stub = stub_nixpkgs();
    nix(
        repo(),
        &[
            "flake",
            "check",
            "--no-write-lock-file",
            "--override-input",
            "nixpkgs",
            &stub,
            "--override-input",
            "orchestrator",
            &orch,
            ".",
        ],
    );
    // What nixpkgs' rustPlatform would build from: the crate and nothing else at the top.
    let src = nix(
        repo(),
        &[
            "eval",
            "--raw",
            "--no-write-lock-file",
            "--override-input",
            "nixpkgs",
            &stub,
            ".#packages.x86_64-linux.kernel-builder.src",
        ],
    );
    let mut top: Vec<String> =
        fs::read_dir(src.trim()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    top.sort();
    assert_eq!(top, ["Cargo.lock", "Cargo.toml", "nix", "src", "tests"]);
}

#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn kernel_flake_check_builds_and_checks_every_cell_offline() {
    for dir in [FIXTURE, "kernels/vector-add-helion"] {
        assert!(repo().join(dir).join("flake.nix").is_file(), "{dir}/flake.nix is missing");
        let orch = format!("path:{}", orchestrator().display());
        let stub = stub_nixpkgs();
        nix(
            &repo().join(dir),
            &[
                "flake",
                "check",
                "-L",
                "--no-write-lock-file",
                "--override-input",
                "kernel-builder/nixpkgs",
                &stub,
                "--override-input",
                "kernel-builder/orchestrator",
                &orch,
                ".",
            ],
        );
    }
}

#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn nix_run_build_and_copy_replaces_only_the_bundle_variants() {
    let (_t, r) = clean_repo_with(FIXTURE);
    let kernel = r.join(FIXTURE);
    fs::create_dir_all(kernel.join("build/torch-cuda")).unwrap();
    fs::write(kernel.join("build/torch-cuda/stale.py"), "old").unwrap();
    fs::create_dir_all(kernel.join("build/torch-metal")).unwrap();
    fs::write(kernel.join("build/torch-metal/keep.py"), "mine").unwrap();
    let mut args: Vec<String> = vec!["run".into(), ".#build-and-copy".into()];
    args.extend(override_orchestrator());
    nix(&kernel, &args.iter().map(String::as_str).collect::<Vec<_>>());
    let build = tree(&kernel.join("build"));
    assert_eq!(build["torch-metal/keep.py"].0, b"mine");
    assert!(!build.contains_key("torch-cuda/stale.py"));
    let top: std::collections::BTreeSet<&str> = build.keys().map(|k| k.split('/').next().unwrap()).collect();
    assert_eq!(
        top.into_iter().collect::<Vec<_>>(),
        ["hashes.json", "torch-cpu", "torch-cuda", "torch-metal", "torch-rocm", "torch-xpu"]
    );
    // Writable copies, not read-only store files.
    let mode = fs::metadata(kernel.join("build/torch-cuda/__init__.py")).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o644);
}

#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn cli_build_and_copy_through_nix_equals_the_bundle() {
    let (_t, r) = clean_repo_with(FIXTURE);
    let kernel = r.join(FIXTURE);
    let mut cmd = crate::util::kb();
    cmd.args(["build-and-copy", kernel.to_str().unwrap(), "--nix", "always", "--"]);
    cmd.args(override_orchestrator());
    cmd.assert().success();
    let built = tree(&kernel.join("build"));
    let mut variants: Vec<&str> = built.keys().map(|k| k.split('/').next().unwrap()).collect();
    variants.dedup();
    assert_eq!(variants, ["hashes.json", "torch-cpu", "torch-cuda", "torch-rocm", "torch-xpu"]);

    // One variant only: `build/torch-rocm` is replaced, the rest stays.
    fs::write(kernel.join("build/torch-cuda/extra.py"), "kept").unwrap();
    fs::write(kernel.join("build/torch-rocm/extra.py"), "dropped").unwrap();
    let mut cmd = crate::util::kb();
    cmd.args([
        "build-and-copy",
        kernel.to_str().unwrap(),
        "--nix",
        "always",
        "--variant",
        "torch-rocm",
        "--",
    ]);
    cmd.args(override_orchestrator());
    cmd.assert().success();
    assert!(kernel.join("build/torch-cuda/extra.py").is_file());
    assert!(!kernel.join("build/torch-rocm/extra.py").exists());
}

#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn bad_build_toml_fails_the_cell_with_check_config_diagnostics() {
    let (_t, r) = clean_repo_with(FIXTURE);
    let kernel = r.join(FIXTURE);
    let toml = fs::read_to_string(kernel.join("build.toml")).unwrap();
    // Evaluation is fine (Nix only reads backends and versions); the orchestrator refuses it.
    fs::write(
        kernel.join("build.toml"),
        toml.replace("license = \"apache-2.0\"\n", "license = \"apache-2.0\"\nlicence = \"typo\"\n"),
    )
    .unwrap();
    git(&r, &["commit", "-q", "-am", "typo"]);
    let native = Command::new(orchestrator().join("bin/kernel-builder"))
        .args(["check-config", kernel.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(native.status.code(), Some(1));
    let err = nix_build_error(&kernel);
    assert!(err.contains("licence"), "{err}");
    assert!(err.contains("Nix's build log"), "{err}");
}

/// A stand-in `nix` that reports the sandbox as off.
#[test]
fn build_and_copy_refuses_nix_with_the_sandbox_off() {
    let t = tempfile::tempdir().unwrap();
    let fake = t.path().join("nix");
    fs::write(
        &fake,
        "#!/bin/sh\ncase \"$1\" in\n  --version) echo 'nix (Nix) 2.8.0' ;;\n  show-config) echo '{\"sandbox\":{\"value\":false}}' ;;\n  *) echo \"unexpected: $*\" >&2; exit 3 ;;\nesac\n",
    )
    .unwrap();
    fs::set_permissions(&fake, fs::Permissions::from_mode(0o755)).unwrap();
    let kernel = t.path().join("k");
    copy_dir(&repo().join(FIXTURE), &kernel);
    let out = crate::util::kb()
        .env(kernel_builder::nixdrv::NIX_ENV, &fake)
        .args(["build-and-copy", kernel.to_str().unwrap(), "--nix", "always"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("sandbox = false"), "{stderr}");
    assert!(stderr.contains("add `sandbox = true`"), "{stderr}");
    assert!(!kernel.join("build").exists());
}

/// A `[tvm-ffi]` kernel whose `cuda` has no `[kernel.*]`: Nix gives that backend no cell (it
/// used to give a pure-Python `torch-cuda`), as the Rust cells do (and check-config refuses the
/// file).
#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn a_tvm_ffi_backend_without_a_kernel_has_no_nix_cell() {
    let t = tempfile::tempdir().unwrap();
    let k = t.path().join("k");
    copy_dir(&repo().join("kernels/relu-tvm-ffi"), &k);
    let toml = fs::read_to_string(k.join("build.toml")).unwrap();
    let cut = toml.find("[kernel.relu_cuda]").unwrap();
    fs::write(k.join("build.toml"), &toml[..cut]).unwrap();
    let expr = format!(
        r#"let
  lib = import {REPO}/nix/lib {{ }};
  config = lib.readKernelConfig (/. + "{dir}");
in map (c: c.name) (lib.kernelCells {{ inherit config; buildSets = lib.buildSetsForSystem {{ system = "x86_64-linux"; matrix = config.matrix; }}; }})"#,
        dir = k.display()
    );
    let names: Vec<String> =
        serde_json::from_str(&nix(repo(), &["eval", "--json", "--impure", "--expr", &expr])).unwrap();
    assert_eq!(names, ["tvm-ffi01-cpu-x86_64-linux"]);
}

/// What [`compare_nix_and_rust_cells`] saw: kernels compared, cells compared, legacy files
/// Nix refused (as it must), files the orchestrator rejected (not compared).
struct CellComparison {
    compared: usize,
    cells_compared: usize,
    refused_legacy: usize,
    rust_rejected: usize,
}

/// The cells Nix computes (`kernelCells` over `buildSetsForSystem`, from nix/lib) equal the Rust
/// cells (`list-variants --json --all`) for each of `kernels` (name → directory) and every
/// system, under the matrix the file pins (else the default) and under the August snapshot.
/// Nix reads editions 6 and 5 and v4 only; it must refuse exactly the older generations. Files Rust
/// rejects are not compared (Nix leaves validation to the orchestrator, which fails those cells).
fn compare_nix_and_rust_cells(
    kernels: &[(String, camino::Utf8PathBuf)],
    load: impl Fn(&camino::Utf8Path) -> Option<kernel_builder::config::BuildConfig>,
) -> CellComparison {
    use kernel_builder::config::Generation;
    // Rust first: only files the orchestrator accepts are handed to Nix (a file that is not
    // TOML at all would stop the whole batch evaluation, and tryEval cannot catch that).
    let mut loaded_all = Vec::new();
    let mut rust_rejected = 0;
    for (name, dir) in kernels {
        let (name, dir) = (name.clone(), dir.clone());
        match load(&dir) {
            Some(config) => loaded_all.push((name, dir, config)),
            None => rust_rejected += 1,
        }
    }
    let dirs: Vec<String> =
        loaded_all.iter().map(|(n, d, _)| format!("{{ name = {n:?}; dir = {:?}; }}", d.as_str())).collect();
    let expr = format!(
        r#"let
  lib = import {repo}/nix/lib {{ }};
  systems = (builtins.fromJSON (builtins.readFile {repo}/nix/build-matrix.json)).systems;
  cellsIn = pin: dir: let config = lib.readKernelConfig (/. + dir); in builtins.listToAttrs (map (system: {{
    name = system;
    value = lib.kernelCells {{ inherit config; buildSets = lib.buildSetsForSystem {{ inherit system; matrix = if pin == null then config.matrix else pin; }}; }};
  }}) systems);
  cells = dir: {{ default = cellsIn null dir; august = cellsIn "upstream-2026-08" dir; }};
  one = dir: let r = builtins.tryEval (builtins.deepSeq (cells dir) (cells dir)); in if r.success then {{ cells = r.value; }} else {{ refused = true; }};
in builtins.listToAttrs (map (e: {{ inherit (e) name; value = one e.dir; }}) [ {dirs} ])"#,
        repo = REPO,
        dirs = dirs.join(" ")
    );
    let json = nix(repo(), &["eval", "--json", "--impure", "--expr", &expr]);
    let from_nix: Value = serde_json::from_str(&json).unwrap();
    let systems = &kernel_builder::matrix::data::matrix().systems;

    let (mut compared, mut cells_compared, mut refused_legacy) = (0, 0, 0);
    for (name, _dir, config) in &loaded_all {
        let nix_result = &from_nix[name];
        let generation = config.generation;
        if nix_result.get("refused").is_some() {
            assert!(
                generation < Generation::V4,
                "{name}: Nix refused a {} file that it should read",
                generation.label()
            );
            refused_legacy += 1;
            continue;
        }
        assert!(
            generation >= Generation::V4,
            "{name}: Nix read a {} file; it must refuse it",
            generation.label()
        );
        let august = kernel_builder::matrix::data::named("upstream-2026-08").unwrap();
        for (which, system) in ["default", "august"].iter().flat_map(|w| systems.iter().map(move |s| (*w, s)))
        {
            let m = if which == "august" { august } else { kernel_builder::matrix::data::for_config(config) };
            let rust: Vec<Value> =
                kernel_builder::matrix::cells_in(m, config, system, kernel_builder::matrix::Scope::All)
                    .iter()
                    .map(|c| {
                        let mut v = serde_json::to_value(c).unwrap();
                        // Compiled cells' architectures are resolved by the orchestrator inside
                        // the cell; Nix leaves them null.
                        if !c.noarch {
                            v["cuda_capabilities"] = Value::Null;
                            v["rocm_archs"] = Value::Null;
                        }
                        v
                    })
                    .collect();
            let nix_cells = nix_result["cells"][which][system].as_array().cloned().unwrap_or_default();
            assert_eq!(nix_cells, rust, "{name} on {system} ({which} matrix): Nix and Rust cells differ");
            cells_compared += rust.len();
        }
        compared += 1;
    }
    CellComparison { compared, cells_compared, refused_legacy, rust_rejected }
}

/// [`compare_nix_and_rust_cells`] for every corpus file.
#[test]
#[cfg_attr(
    not(all(feature = "nix-tests", feature = "corpus-tests")),
    ignore = "needs Nix and the corpus: cargo test --features nix-tests,corpus-tests (KERNEL_BUILDER_CORPUS or ../shared/corpus)"
)]
fn nix_variants_equal_rust_cells_for_every_corpus_file() {
    let t = tempfile::tempdir().unwrap();
    let entries = crate::corpus::names();
    assert!(entries.len() >= 100, "corpus has {} entries", entries.len());
    let mut kernels = Vec::new();
    for name in &entries {
        crate::corpus::materialize_into(name, &t.path().join(name));
        kernels.push((name.clone(), camino::Utf8PathBuf::from_path_buf(t.path().join(name)).unwrap()));
    }
    let CellComparison { compared, cells_compared, refused_legacy, rust_rejected } =
        compare_nix_and_rust_cells(&kernels, |dir| kernel_builder::kernel::load(dir).ok().map(|l| l.config));
    eprintln!(
        "corpus: {} files; {compared} compared ({cells_compared} cells), {refused_legacy} legacy refused by Nix, {rust_rejected} rejected by the orchestrator",
        entries.len()
    );
    assert!(compared >= 50, "only {compared} files compared");
    assert!(cells_compared > 500);
}

/// [`compare_nix_and_rust_cells`] for the example kernels (`kernels/`), the Nix check
/// fixtures (`nix/checks/fixtures`) and the edition-6 fixtures (`tests/fixtures/edition6`:
/// every C++ language, Rust kernels in `[tvm-ffi]` with a cuTile CUDA bound, `[mlx-noarch]`,
/// `build-layout`, and `[torch-noarch]` capabilities in their hyphenated spelling): needs no corpus, so it runs in every CI run with Nix and
/// guards the naming rules both languages read from build-matrix.json's `naming`.
#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn nix_variants_equal_rust_cells_for_the_example_kernels_and_fixtures() {
    let mut kernels = Vec::new();
    for parent in ["kernels", "nix/checks/fixtures", "tests/fixtures/edition6"] {
        for e in fs::read_dir(repo().join(parent)).unwrap() {
            let dir = e.unwrap().path();
            if dir.join("build.toml").is_file() {
                let name =
                    format!("{}-{}", parent.replace('/', "-"), dir.file_name().unwrap().to_str().unwrap());
                kernels.push((name, camino::Utf8PathBuf::from_path_buf(dir).unwrap()));
            }
        }
    }
    kernels.sort();
    assert_eq!(kernels.len(), 16, "{kernels:?}");
    // The fixtures test Nix alone and fail the orchestrator's validation (no SPDX licence, a
    // legacy file): their cells are compared all the same, from the parsed model.
    let r = compare_nix_and_rust_cells(&kernels, |dir| {
        let (path, text) = kernel_builder::config::read_kernel_build_toml(dir).ok()?;
        let style = kernel_builder::config::diagnostics::RenderStyle::Plain;
        Some(kernel_builder::config::parse_str(&path, &text, Some(dir), style).ok()?.config)
    });
    // The legacy fixture is refused by Nix, as it must be; every other file is compared.
    assert_eq!((r.compared, r.refused_legacy, r.rust_rejected), (15, 1, 0));
    assert!(r.cells_compared > 50, "only {} cells compared", r.cells_compared);
}

/// A legacy build.toml (no edition, not the v4 shape) stops evaluation with the migration
/// command in the message; an unsupported edition names the edition.
#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn nix_refuses_legacy_files_with_the_migration_command() {
    let t = tempfile::tempdir().unwrap();
    let cases = [
        ("legacy", "[general]\nname = \"relu\"\nbackends = [\"cuda\"]\n\n[torch]\nsrc = [\"b.cpp\"]\n", "run `kernel-builder update-build "),
        ("edition7", "[general]\nname = \"relu\"\nedition = 7\nversion = 1\nlicense = \"mit\"\nbackends = [\"cuda\"]\n\n[torch-noarch]\n", "unsupported build edition 7"),
    ];
    for (name, toml, expected) in cases {
        let dir = t.path().join(name);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("build.toml"), toml).unwrap();
        let expr =
            format!("(import {REPO}/nix/lib {{ }}).readKernelConfig (/. + {:?})", dir.display().to_string());
        let expr = format!("({expr}).name");
        let out = duct::cmd("nix", ["eval", "--impure", "--expr", &expr])
            .stdout_capture()
            .stderr_capture()
            .unchecked()
            .run()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name}: Nix accepted it");
        assert!(stderr.contains(expected), "{name}: {stderr}");
    }
}

/// Only the source set reaches the cells: editing a file outside it (docs/NOTES.md, a `.txt`
/// under the package, bytecode) leaves every cell's derivation unchanged; editing a package
/// file changes them.
#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn cells_depend_on_the_source_set_only() {
    let (_t, r) = clean_repo_with(FIXTURE);
    let kernel = r.join(FIXTURE);
    let drv = || {
        let mut args: Vec<String> =
            vec!["eval".into(), "--raw".into(), ".#packages.x86_64-linux.torch-cuda.drvPath".into()];
        args.extend(override_orchestrator());
        nix(&kernel, &args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let before = drv();
    fs::write(kernel.join("docs/NOTES.md"), "changed").unwrap();
    fs::write(kernel.join("torch-ext/nix_fixture/notes.txt"), "not in pyext").unwrap();
    // The copy leaves bytecode out; a user's checkout may have it.
    fs::create_dir_all(kernel.join("torch-ext/nix_fixture/__pycache__")).unwrap();
    fs::write(kernel.join("torch-ext/nix_fixture/__pycache__/x.cpython-313.pyc"), "bytecode").unwrap();
    git(&r, &["add", "-A"]);
    assert_eq!(drv(), before, "a file outside the source set changed a cell");
    fs::write(kernel.join("torch-ext/nix_fixture/configs/tuned.json"), r#"{"block_size": 256}"#).unwrap();
    assert_ne!(drv(), before, "a package file did not change the cell");
}

/// `build-and-copy --variant` with a name the kernel does not build lists the ones it does.
#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn unknown_variant_is_refused_with_the_kernels_variants() {
    let (_t, r) = clean_repo_with(FIXTURE);
    let kernel = r.join(FIXTURE);
    let err = kernel_builder::nixdrv::build(
        Utf8Path::from_path(&kernel).unwrap(),
        &["torch-metal".to_owned()],
        &override_orchestrator(),
        false,
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.ends_with("has no variant `torch-metal` on x86_64-linux; its variants are: torch-cpu, torch-cuda, torch-rocm, torch-xpu"),
        "{err}"
    );
    // Another system's variant is said to be one, as the native path says it (a user's trial
    // found the Nix path without the hint).
    let other = "torch215-cxx11-cpu-aarch64-linux".to_owned();
    let err = kernel_builder::nixdrv::build(
        Utf8Path::from_path(&kernel).unwrap(),
        &[other],
        &override_orchestrator(),
        false,
    )
    .unwrap_err();
    let err = kernel_builder::error::failure_lines(&err).join("\n");
    assert!(
        err.ends_with("\nhint: `torch215-cxx11-cpu-aarch64-linux` is a name for aarch64-linux, and this machine builds x86_64-linux's variants: one of aarch64-linux is built on such a machine, or through Nix with a remote builder of that system (`--builders`)"),
        "{err}"
    );
}

/// A statically linked kernel-builder hands itself to the flake as the orchestrator, so
/// `build-and-copy --nix always` works offline with no extra arguments; a dynamically linked
/// one does not qualify (it would not run in the sandbox).
#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn a_static_kernel_builder_hands_itself_to_the_flake() {
    let static_exe = orchestrator().join("bin/kernel-builder");
    assert!(kernel_builder::nixdrv::is_static_elf(&fs::read(&static_exe).unwrap()));
    let dynamic_exe = crate::util::kb_path();
    assert!(!kernel_builder::nixdrv::is_static_elf(&fs::read(dynamic_exe).unwrap()));

    let (t, r) = clean_repo_with(FIXTURE);
    let kernel = r.join(FIXTURE);
    let home = t.path().join("home");
    fs::create_dir_all(&home).unwrap();
    Command::new(&static_exe)
        .env_remove(kernel_builder::nixdrv::ORCHESTRATOR_ENV)
        .env("HOME", &home)
        .env_remove("XDG_CACHE_HOME")
        .args(["build-and-copy", kernel.to_str().unwrap(), "--nix", "always", "--", "--no-write-lock-file"])
        .assert()
        .success();
    let staged: Vec<_> =
        fs::read_dir(home.join(".cache/kernel-builder")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(staged.len(), 1, "{staged:?}");
    assert_eq!(
        fs::read(home.join(".cache/kernel-builder").join(&staged[0]).join("bin/kernel-builder")).unwrap(),
        fs::read(&static_exe).unwrap()
    );
    let mut variants: Vec<String> = fs::read_dir(kernel.join("build"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    variants.sort();
    assert_eq!(variants, ["hashes.json", "torch-cpu", "torch-cuda", "torch-rocm", "torch-xpu"]);
}

/// Each cell and the bundle are deterministic: `nix build --rebuild` builds them again in the
/// sandbox and fails if the output differs from the one in the store.
#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn cells_rebuild_bit_for_bit() {
    let (_t, r) = clean_repo_with(FIXTURE);
    let kernel = r.join(FIXTURE);
    let attrs = ["torch-cpu", "torch-cuda", "torch-rocm", "torch-xpu", "bundle"];
    let installables: Vec<String> = attrs.iter().map(|a| format!(".#{a}")).collect();
    let mut args: Vec<String> = vec!["build".into(), "--no-link".into()];
    args.extend(installables.iter().cloned());
    args.extend(override_orchestrator());
    nix(&kernel, &args.iter().map(String::as_str).collect::<Vec<_>>());
    args.insert(1, "--rebuild".into());
    nix(&kernel, &args.iter().map(String::as_str).collect::<Vec<_>>());
}

/// Nix sees only the files git tracks: an untracked package file is named in a warning, an
/// untracked build.toml stops the build before Nix runs.
#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn untracked_files_are_reported_before_nix_runs() {
    let (_t, r) = clean_repo_with(FIXTURE);
    let kernel = r.join(FIXTURE);
    fs::write(kernel.join("torch-ext/nix_fixture/new_op.py"), "x = 1\n").unwrap();
    let mut cmd = crate::util::kb();
    cmd.args(["build-and-copy", kernel.to_str().unwrap(), "--nix", "always", "--"]);
    cmd.args(override_orchestrator());
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("1 file(s) in") && stderr.contains("torch-ext/nix_fixture/new_op.py"),
        "{stderr}"
    );
    assert!(!kernel.join("build/torch-cuda/new_op.py").exists());

    git(&r, &["rm", "-q", "--cached", &format!("{FIXTURE}/build.toml")]);
    let err = nix_build_error(&kernel);
    assert!(err.contains("build.toml in ") && err.contains("is not tracked by git"), "{err}");
}

/// Without a package set (no `toolchainFor`, as when nix/lib is imported bare), a compiled
/// kernel's cells are still listed, and building one stops with a message naming the cell and
/// the argument to pass (the flake passes nixpkgs' by default; see nix_compiled.rs).
#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn compiled_cell_without_a_toolchain_fails_with_a_clear_message() {
    let t = tempfile::tempdir().unwrap();
    let k = t.path().join("relu");
    fs::create_dir_all(k.join("relu_cuda")).unwrap();
    fs::create_dir_all(k.join("torch-ext/relu")).unwrap();
    fs::write(
        k.join("build.toml"),
        "[general]\nname = \"relu\"\nversion = 1\nedition = 5\nlicense = \"mit\"\nbackends = [\"cuda\"]\n\n[torch]\n\n[kernel.relu]\nbackend = \"cuda\"\ndepends = [\"torch\"]\nsrc = [\"relu_cuda/relu.cu\"]\n",
    )
    .unwrap();
    fs::write(k.join("relu_cuda/relu.cu"), "").unwrap();
    fs::write(k.join("torch-ext/relu/__init__.py"), "").unwrap();
    let expr = format!(
        "((import {REPO}/nix/lib {{ }}).genKernelFlakeOutputs {{ path = /. + {:?}; kernelBuilder = _: /. + {:?}; mkShell = _: _: {{ }}; }}).packages.x86_64-linux",
        k.display().to_string(),
        orchestrator().display().to_string()
    );
    let names =
        nix(repo(), &["eval", "--impure", "--json", "--expr", &format!("builtins.attrNames ({expr})")]);
    assert_eq!(
        names.trim(),
        r#"["build-and-copy","bundle","default","torch212-cxx11-cu126-x86_64-linux","torch212-cxx11-cu130-x86_64-linux","torch212-cxx11-cu132-x86_64-linux","torch213-cxx11-cu126-x86_64-linux","torch213-cxx11-cu130-x86_64-linux","torch213-cxx11-cu132-x86_64-linux","torch214-cxx11-cu126-x86_64-linux","torch214-cxx11-cu130-x86_64-linux","torch214-cxx11-cu132-x86_64-linux","torch215-cxx11-cu132-x86_64-linux"]"#
    );
    let out = duct::cmd(
        "nix",
        [
            "build",
            "--impure",
            "--no-link",
            "-L",
            "--expr",
            &format!("({expr}).torch213-cxx11-cu130-x86_64-linux"),
        ],
    )
    .stdout_capture()
    .stderr_capture()
    .unchecked()
    .run()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("compiled cell torch213-cxx11-cu130-x86_64-linux needs a toolchain; pass `toolchainFor = cell: <toolchain record>;` (see nix/API.md)"),
        "{stderr}"
    );
}

/// Run `nix` and return (success, stderr).
fn nix_status(cwd: &Path, args: &[&str]) -> (bool, String) {
    let out = nix_output(cwd, args);
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn flake_check_compares_the_bundle_with_a_committed_manifest() {
    let (_t, r) = clean_repo_with(FIXTURE);
    let kernel = r.join(FIXTURE);
    // A native build writes build/hashes.json; the author commits it (build/ is ignored).
    crate::util::kb().args(["build-and-copy", "--nix", "never", kernel.to_str().unwrap()]).assert().success();
    git(&r, &["add", "-f", &format!("{FIXTURE}/build/hashes.json")]);
    git(&r, &["commit", "-q", "-m", "manifest"]);
    let stub = stub_nixpkgs();
    let mut check: Vec<String> =
        ["flake", "check", "-L", "--override-input", "kernel-builder/nixpkgs", &stub]
            .map(String::from)
            .to_vec();
    check.extend(override_orchestrator());
    check.push(".".into());
    let args: Vec<&str> = check.iter().map(String::as_str).collect();
    let (ok, log) = nix_status(&kernel, &args);
    assert!(ok, "flake check with the committed manifest failed:\n{log}");

    // Tamper with one recorded hash: the check names the variant and both hashes.
    let path = kernel.join("build/hashes.json");
    let text = fs::read_to_string(&path).unwrap();
    let m: Value = serde_json::from_str(&text).unwrap();
    let good = m["variants"]["torch-cuda"].as_str().unwrap().to_owned();
    let bad = "sha256-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    fs::write(&path, text.replace(&good, bad)).unwrap();
    git(&r, &["add", "-f", &format!("{FIXTURE}/build/hashes.json")]);
    git(&r, &["commit", "-q", "-m", "tampered manifest"]);
    let (ok, log) = nix_status(&kernel, &args);
    assert!(!ok, "flake check passed with a wrong manifest");
    assert!(log.contains(&format!("variant `torch-cuda` differs: expected {bad}, got {good}")), "{log}");
}

/// README's offline recipe ("With Nix"), run as written in a copy of this repository's
/// tracked files (a git work tree, as a clone is), except its first line: `scripts/setup-nix.sh` has already run (test.sh runs
/// it; its output is `$KERNEL_BUILDER_ORCHESTRATOR`), so `orch` is set from that instead of
/// rebuilding the static orchestrator in the copy.
#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn readme_offline_recipe_runs_as_written() {
    let readme = fs::read_to_string(repo().join("README.md")).unwrap();
    let first = "orch=$(./scripts/setup-nix.sh)\n";
    let start = readme.find(&format!("```sh\n{first}")).expect("README has the offline recipe") + 6;
    let end = start + readme[start..].find("```").unwrap();
    let script = readme[start..end].replacen(first, "orch=$KERNEL_BUILDER_ORCHESTRATOR\n", 1);
    assert!(script.contains("nix flake check"), "{script}");

    let t = tempfile::tempdir().unwrap();
    let copy = t.path().join("kernel-builder");
    let files = git(repo(), &["ls-files", "-z"]);
    for rel in files.split('\0').filter(|f| !f.is_empty()) {
        let (from, to) = (repo().join(rel), copy.join(rel));
        if from.is_file() {
            fs::create_dir_all(to.parent().unwrap()).unwrap();
            fs::copy(&from, &to).unwrap();
        }
    }
    // A clone is a git work tree; the kernel's `path:../..` input resolves inside it.
    git(&copy, &["init", "-q"]);
    git(&copy, &["add", "-A"]);
    let out = duct::cmd("bash", ["-euo", "pipefail", "-c", &script])
        .dir(&copy)
        .env("KERNEL_BUILDER_ORCHESTRATOR", orchestrator())
        .stdout_capture()
        .stderr_capture()
        .unchecked()
        .run()
        .unwrap();
    assert!(
        out.status.success(),
        "README's recipe failed:\n{script}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let kernel = copy.join("kernels/vector-add-helion");
    for v in ["torch-cuda", "torch-rocm", "torch-xpu"] {
        assert!(kernel.join("result").join(v).join("metadata.json").is_file(), "nix build made no {v}");
        assert!(kernel.join("build").join(v).join("metadata.json").is_file(), "nix run made no build/{v}");
    }
}

/// `build-and-copy` through Nix, run four times on sources new to the store (so Nix builds):
/// outside a terminal Nix's log comes as it is, with no progress line; with `--json` nothing of
/// it; in a terminal (a pty from `script`) the progress line is drawn under the log, and with
/// `--json` there only the document comes.
#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn nix_build_progress_only_on_a_terminal_and_nothing_with_json() {
    let (_t, r) = clean_repo_with(FIXTURE);
    commit_orchestrator_lock(&r, FIXTURE);
    let kernel = r.join(FIXTURE);
    let k = kernel.to_str().unwrap();
    let orch = orchestrator();
    // New bytes on every run of this test too, or Nix finds the cells in the store and says nothing.
    let nonce = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let touch = |n: u32| {
        let init = kernel.join("torch-ext/nix_fixture/__init__.py");
        let text = fs::read_to_string(&init).unwrap();
        fs::write(&init, format!("{text}# build {nonce}-{n}\n")).unwrap();
        git(&r, &["commit", "-q", "-am", "new sources"]);
    };
    let run = |json: bool| {
        let mut cmd = crate::util::kb();
        cmd.args(["build-and-copy", k, "--nix", "always"]).env("KERNEL_BUILDER_ORCHESTRATOR", &orch);
        if json {
            cmd.arg("--json");
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stderr).unwrap()
    };

    touch(1);
    let plain = run(false);
    assert!(plain.lines().any(|l| l.starts_with("building '/nix/store/")), "{plain}");
    assert!(!plain.contains("nix build: "), "{plain}");

    touch(2);
    let json = run(true);
    assert!(!json.contains("building '"), "{json}");
    assert!(!json.contains("nix build: "), "{json}");

    touch(3);
    let orch_env = [("KERNEL_BUILDER_ORCHESTRATOR", orch.as_os_str())];
    let tty = crate::util::kb_in_pty(&format!("build-and-copy {k} --nix always"), &orch_env);
    assert!(tty.contains("nix build: evaluating"), "{tty}");
    assert!(tty.contains("building '/nix/store/"), "{tty}");

    // --json on a terminal: the document only.
    touch(4);
    let tty = crate::util::kb_in_pty(&format!("build-and-copy {k} --nix always --json"), &orch_env);
    assert!(tty.trim_start().starts_with('{') && tty.contains("\"variants\""), "{tty}");
    assert!(!tty.contains("nix build: ") && !tty.contains("building '"), "{tty}");
}
