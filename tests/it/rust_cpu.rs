//! Native builds of a Rust kernel (`language = "rust-cpu"`, `kernels/relu-rust`): cargo builds
//! the crate against the venv's tvm_ffi into a `tvm-ffi<XY>-cpu-…` variant; the tree is exactly
//! the tvm-ffi tree (package, `_ops.py`, `<id>.so`, metadata, symbols), nothing is written into
//! the checkout, a fresh rebuild has the same NAR hash, and cargo's failures name the manifest.
//! The variant is loaded and run under every loader in `tests/python/test_loaders.py`.
//!
//! Needs the repository's venv (apache-tvm-ffi) and cargo; without them it says SKIPPED. The
//! first build compiles the tvm-ffi crates (about 30 s on 1 core).

use std::fs;
use std::path::{Path, PathBuf};

use super::util::{copy_kernel, kb, repo};

/// The venv's Python and its tvm-ffi `major.minor` tag (`01`), or `None` with a SKIPPED line.
fn venv_tvm_ffi_and_cargo() -> Option<(PathBuf, String)> {
    let py = repo().join(".venv/bin/python");
    let out = std::process::Command::new(&py)
        .args(["-c", "import tvm_ffi; print(''.join(tvm_ffi.__version__.split('.')[:2]))"])
        .output()
        .ok()
        .filter(|o| o.status.success());
    let has_cargo =
        std::process::Command::new("cargo").arg("--version").output().is_ok_and(|o| o.status.success());
    match out {
        Some(o) if has_cargo => Some((py, String::from_utf8(o.stdout).unwrap().trim().to_owned())),
        _ => {
            eprintln!(
                "SKIPPED: no apache-tvm-ffi in {} (run scripts/setup-venv.sh) or no cargo on PATH; the rust-cpu build test did not run",
                py.display()
            );
            None
        }
    }
}

/// Every file under `dir` (relative, sorted).
fn files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = walkdir::WalkDir::new(dir)
        .into_iter()
        .map(Result::unwrap)
        .filter(|e| e.file_type().is_file())
        .map(|e| e.path().strip_prefix(dir).unwrap().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn build(py: &Path, kernel: &Path, cache: &Path) -> Run {
    let o = kb()
        .env("KERNEL_BUILDER_CACHE_DIR", cache)
        .args(["build-and-copy", "--nix", "never", "--python"])
        .arg(py)
        .arg(kernel)
        .output()
        .unwrap();
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8(o.stdout).unwrap(),
        stderr: String::from_utf8(o.stderr).unwrap(),
    }
}

fn nar_hash(path: &Path) -> String {
    let o = kb().arg("hash").arg(path).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// relu-rust builds into the tvm-ffi tree, reproducibly, without writing into the checkout;
/// a compile error is reported with the manifest and rustc's error, and leaves build/ as it was.
#[test]
fn relu_rust_builds_with_cargo_into_a_reproducible_tvm_ffi_tree() {
    let Some((py, tag)) = venv_tvm_ffi_and_cargo() else { return };
    let t = tempfile::tempdir().unwrap();
    let kernel = t.path().join("relu-rust");
    copy_kernel("relu-rust", &kernel);
    let source_files = files(&kernel);
    assert_eq!(
        source_files,
        [
            "Cargo.lock",
            "Cargo.toml",
            "README.md",
            "build.toml",
            "src/lib.rs",
            "tvm-ffi-ext/relu_rust/__init__.py"
        ]
    );
    let cache = t.path().join("cache");
    let cell = format!("tvm-ffi{tag}-cpu-{}-linux", std::env::consts::ARCH);

    let first = build(&py, &kernel, &cache);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let variant = kernel.join("build").join(&cell);
    let meta: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(variant.join("metadata.json")).unwrap()).unwrap();
    let id = meta["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("_relu_rust_cpu_") && id.len() == "_relu_rust_cpu_".len() + 7, "{id}");
    assert_eq!(first.stdout, format!("built {cell} (5 files, id {id}) -> {}\n", variant.display()));
    assert_eq!(
        files(&kernel.join("build")),
        [
            "hashes.json".to_owned(),
            format!("{cell}/__init__.py"),
            format!("{cell}/_ops.py"),
            format!("{cell}/{id}.so"),
            format!("{cell}/metadata.json"),
            format!("{cell}/symbols.json"),
        ]
    );
    // cargo wrote nothing beside the crate: no target/, and Cargo.lock as it was.
    let mut after: Vec<String> = files(&kernel).into_iter().filter(|f| !f.starts_with("build/")).collect();
    after.sort();
    assert_eq!(after, source_files);
    assert_eq!(
        fs::read(kernel.join("Cargo.lock")).unwrap(),
        fs::read(repo().join("kernels/relu-rust/Cargo.lock")).unwrap()
    );
    assert_eq!(meta["backend"], serde_json::json!({"type": "cpu"}));
    let toolchain = meta["build"]["toolchain"].as_object().unwrap();
    let keys: Vec<&str> = toolchain.keys().map(String::as_str).collect();
    assert_eq!(keys, ["cargo", "linker", "python", "rustc", "tvm-ffi"]);
    assert!(toolchain["cargo"].as_str().unwrap().starts_with("cargo 1."), "{toolchain:?}");
    assert!(toolchain["rustc"].as_str().unwrap().starts_with("rustc 1."), "{toolchain:?}");
    // The module opens through tvm_ffi: it links libtvm_ffi, and exports `relu_cpu`.
    let so = fs::read(variant.join(format!("{id}.so"))).unwrap();
    let text = String::from_utf8_lossy(&so);
    assert!(text.contains("libtvm_ffi.so") && text.contains("__tvm_ffi_relu_cpu"));
    // No path of the work directory, cargo's home or the checkout is in it.
    for leaked in [t.path().to_str().unwrap(), "/.cargo/registry", "/kernel-builder-cargo-"] {
        assert!(!text.contains(leaked), "the module holds `{leaked}`");
    }
    let hash = nar_hash(&variant);

    // Unchanged, the cell comes from the native cell cache.
    let reused = build(&py, &kernel, &cache);
    assert_eq!(reused.code, 0, "{}", reused.stderr);
    assert_eq!(reused.stdout, format!("reused {cell} (5 files, id {id}) -> {}\n", variant.display()));
    // A fresh rebuild (no build/, no cell cache, no work directory) is the same bytes.
    fs::remove_dir_all(kernel.join("build")).unwrap();
    fs::remove_dir_all(&cache).unwrap();
    let again = build(&py, &kernel, &cache);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(again.stdout, first.stdout);
    assert_eq!(nar_hash(&variant), hash);

    // A compile error: the manifest and rustc's error are named, build/ keeps the last tree.
    let lib = kernel.join("src/lib.rs");
    fs::write(&lib, fs::read_to_string(&lib).unwrap().replace("Ok(())\n}", "Ok(()\n}")).unwrap();
    let broken = build(&py, &kernel, &cache);
    assert_eq!(broken.code, 1, "{}", broken.stderr);
    let manifest = kernel.canonicalize().unwrap().join("Cargo.toml");
    assert!(
        broken.stderr.contains(&format!(
            "cargo could not build `[kernel.relu]` (`{}`): exit status: 101: `",
            manifest.display()
        )),
        "{}",
        broken.stderr
    );
    assert!(broken.stderr.contains("error: mismatched closing delimiter"), "{}", broken.stderr);
    assert_eq!(nar_hash(&variant), hash);
}

/// Without Cargo.lock the build stops before cargo runs, saying how to make one.
#[test]
fn a_rust_kernel_without_cargo_lock_is_refused_with_the_command_that_makes_one() {
    let Some((py, _)) = venv_tvm_ffi_and_cargo() else { return };
    let t = tempfile::tempdir().unwrap();
    let kernel = t.path().join("relu-rust");
    copy_kernel("relu-rust", &kernel);
    fs::remove_file(kernel.join("Cargo.lock")).unwrap();
    let run = build(&py, &kernel, &t.path().join("cache"));
    assert_eq!(run.code, 1, "{}", run.stderr);
    let dir = kernel.canonicalize().unwrap();
    let d = dir.display();
    assert!(
        run.stderr.contains(&format!(
            "`{d}/Cargo.toml` has no `Cargo.lock` beside it (`{d}/Cargo.lock`): a Rust kernel builds `--locked`, so that every build uses the same dependency versions; run `cargo generate-lockfile --manifest-path {d}/Cargo.toml` and keep Cargo.lock with the kernel"
        )),
        "{}",
        run.stderr
    );
    assert!(!kernel.join("build").exists());
    assert!(!kernel.join("Cargo.lock").exists(), "cargo wrote a lock file into the checkout");
}

/// check-config and list-variants of a rust-cpu kernel: its language and the tvm-ffi cell it
/// plans. `[tvm-ffi] src` may be left out when every kernel is a crate (the loader agrees), and
/// stays required beside a C++ kernel.
#[test]
fn check_config_and_list_variants_show_the_rust_cpu_cell() {
    let dir = repo().join("kernels/relu-rust");
    let out = kb().arg("check-config").arg(&dir).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "name: relu-rust\ngeneration: edition 6\nbackends: cpu\nframework: tvm-ffi\nkernels:\n  relu (rust-cpu) -> cpu\nmatrix: 2026-12 (revision 2026-12-01)\n"
    );
    let out = kb().args(["list-variants", "--all-systems"]).arg(&dir).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "aarch64-darwin\ttvm-ffi01-cpu-aarch64-darwin\naarch64-linux\ttvm-ffi01-cpu-aarch64-linux\nx86_64-linux\ttvm-ffi01-cpu-x86_64-linux\n"
    );

    let t = tempfile::tempdir().unwrap();
    let kernel = t.path().join("relu-rust");
    copy_kernel("relu-rust", &kernel);
    fs::create_dir_all(kernel.join("cpp")).unwrap();
    fs::write(kernel.join("cpp/relu.cpp"), "").unwrap();
    let toml = fs::read_to_string(kernel.join("build.toml")).unwrap();
    fs::write(
        kernel.join("build.toml"),
        format!(
            "{toml}\n[kernel.relu_cpp]\nlanguage = \"cpp-cpu\"\ndepends = []\nsrc = [\"cpp/relu.cpp\"]\n"
        ),
    )
    .unwrap();
    let out = kb().env("KERNEL_BUILDER_PLAIN", "1").arg("check-config").arg(&kernel).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("`tvm-ffi.src` is required"), "{stderr}");

    // With a binding the file is valid, but one cell cannot hold the crate and the C++ kernel.
    let Some((py, _)) = venv_tvm_ffi_and_cargo() else { return };
    fs::write(kernel.join("cpp/binding.cpp"), "").unwrap();
    let toml = fs::read_to_string(kernel.join("build.toml")).unwrap();
    fs::write(
        kernel.join("build.toml"),
        toml.replace("[tvm-ffi]\n", "[tvm-ffi]\nsrc = [\"cpp/binding.cpp\"]\n"),
    )
    .unwrap();
    let run = build(&py, &kernel, &t.path().join("cache"));
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "`[kernel.relu]` (rust-cpu) and `[kernel.relu_cpp]` (cpp-cpu) both compile for `cpu` in `{}`; a Rust kernel's crate is the whole module of its cell, so a cell has one Rust kernel and nothing else: put the other code in the crate, or give it a backend of its own",
            kernel.join("build.toml").display()
        )),
        "{}",
        run.stderr
    );
}

/// What a Nix cell runs (`assemble` with a package set) refuses a rust-cpu kernel, saying why
/// and what builds it, and writes nothing.
#[test]
fn a_nix_cell_refuses_a_rust_cpu_kernel() {
    let Some((py, tag)) = venv_tvm_ffi_and_cargo() else { return };
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("out");
    let cell = format!("tvm-ffi{tag}-cpu-{}-linux", std::env::consts::ARCH);
    let o = kb()
        .args(["assemble", "--source"])
        .arg(repo().join("kernels/relu-rust"))
        .args(["--backend", "cpu", "--out"])
        .arg(&out)
        .arg("--python")
        .arg(&py)
        .args(["--package-set", "test-set", "--expect-variant", &cell])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(o.stderr).unwrap(),
        "error: cannot build `cpu`: `[kernel.relu]` is a rust-cpu kernel, which Nix cells (package set `test-set`) do not build yet: a cell's derivation gets no cargo from its package set and cannot fetch the locked crates in the sandbox; build it natively with `kernel-builder build-and-copy --nix never`\n"
    );
    assert!(!out.exists());
}
