//! `kernel-builder list-variants`: names, JSON cells, systems and exit codes.

use assert_cmd::Command;
use camino::{Utf8Path, Utf8PathBuf};

/// A kernel directory with `build_toml` and an empty file at each of `files`.
fn kernel_dir(build_toml: &str, files: &[&str]) -> (tempfile::TempDir, Utf8PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = Utf8Path::from_path(tmp.path()).unwrap().to_owned();
    std::fs::write(root.join("build.toml"), build_toml).unwrap();
    for f in files {
        let p = root.join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, b"").unwrap();
    }
    (tmp, root)
}

const RELU: &str = r#"[general]
name = "relu"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cpu", "cuda", "metal", "rocm", "xpu"]

[torch]
src = ["torch-ext/torch_binding.cpp"]

[kernel.relu_cpu]
backend = "cpu"
depends = ["torch"]
src = ["relu_cpu/relu.cpp"]

[kernel.relu_cuda]
backend = "cuda"
depends = ["torch"]
cuda-capabilities = ["8.0", "9.0a", "10.0f"]
src = ["relu_cuda/relu.cu"]

[kernel.relu_metal]
backend = "metal"
depends = ["torch"]
src = ["relu_metal/relu.mm"]

[kernel.relu_rocm]
backend = "rocm"
depends = ["torch"]
rocm-archs = ["gfx90a", "gfx942"]
src = ["relu_rocm/relu.hip"]

[kernel.relu_xpu]
backend = "xpu"
depends = ["torch"]
src = ["relu_xpu/relu.cpp"]
"#;

const RELU_FILES: &[&str] = &[
    "torch-ext/torch_binding.cpp",
    "relu_cpu/relu.cpp",
    "relu_cuda/relu.cu",
    "relu_metal/relu.mm",
    "relu_rocm/relu.hip",
    "relu_xpu/relu.cpp",
];

const TRITON: &str = r#"[general]
name = "relu-triton"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cuda", "rocm", "xpu"]

[torch-noarch]
cuda_capabilities = ["9.0"]
"#;

fn list_variants() -> Command {
    let mut cmd = crate::util::kb();
    cmd.arg("list-variants").env("KERNEL_BUILDER_PLAIN", "1");
    cmd
}

#[test]
fn relu_all_variants_on_x86_64_linux() {
    let (_tmp, dir) = kernel_dir(RELU, RELU_FILES);
    let out = list_variants().arg(&dir).args(["--system", "x86_64-linux", "--all"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "torch211-cxx11-cpu-x86_64-linux
torch212-cxx11-cpu-x86_64-linux
torch212-cxx11-cu126-x86_64-linux
torch212-cxx11-cu130-x86_64-linux
torch212-cxx11-cu132-x86_64-linux
torch212-cxx11-rocm71-x86_64-linux
torch212-cxx11-rocm72-x86_64-linux
torch212-cxx11-xpu20253-x86_64-linux
torch213-cxx11-cpu-x86_64-linux
torch213-cxx11-cu126-x86_64-linux
torch213-cxx11-cu130-x86_64-linux
torch213-cxx11-cu132-x86_64-linux
torch213-cxx11-rocm71-x86_64-linux
torch213-cxx11-rocm72-x86_64-linux
torch213-cxx11-xpu20260-x86_64-linux
torch214-cxx11-cpu-x86_64-linux
torch214-cxx11-cu126-x86_64-linux
torch214-cxx11-cu130-x86_64-linux
torch214-cxx11-cu132-x86_64-linux
torch214-cxx11-rocm72-x86_64-linux
torch215-cxx11-cpu-x86_64-linux
torch215-cxx11-cu132-x86_64-linux
"
    );
}

#[test]
fn relu_bundle_on_darwin_and_every_system() {
    let (_tmp, dir) = kernel_dir(RELU, RELU_FILES);
    let out = list_variants().arg(&dir).args(["--system", "aarch64-darwin"]).output().unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "torch214-cpu-aarch64-darwin\ntorch214-metal-aarch64-darwin\ntorch215-cpu-aarch64-darwin\ntorch215-metal-aarch64-darwin\n"
    );
    let out = list_variants().arg(&dir).arg("--all-systems").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 4 + 6 + 10);
    assert!(text.starts_with("aarch64-darwin\ttorch214-cpu-aarch64-darwin\n"), "{text}");
    assert!(text.ends_with("x86_64-linux\ttorch215-cxx11-cu132-x86_64-linux\n"), "{text}");
}

/// A kernel that pins the August snapshot lists upstream's 8ac69fc5 variants; the JSON cells
/// name the matrix and its revision.
#[test]
fn a_pinned_snapshot_lists_its_variants() {
    let pinned = RELU.replace("backends = [", "matrix = \"upstream-2026-08\"\nbackends = [");
    let (_tmp, dir) = kernel_dir(&pinned, RELU_FILES);
    let out = list_variants().arg(&dir).args(["--system", "aarch64-darwin"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "torch212-cpu-aarch64-darwin\ntorch212-metal-aarch64-darwin\ntorch213-cpu-aarch64-darwin\ntorch213-metal-aarch64-darwin\n"
    );
    let out = list_variants().arg(&dir).args(["--system", "x86_64-linux", "--json"]).output().unwrap();
    let cells: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let cells = cells.as_array().unwrap();
    assert_eq!(cells.len(), 14);
    assert!(cells.iter().all(|c| c["matrix"] == "upstream-2026-08" && c["matrix_revision"] == "2026-08-20"));
}

#[test]
fn an_unknown_snapshot_is_refused_with_the_known_ones() {
    let pinned = RELU.replace("backends = [", "matrix = \"upstream-2025-01\"\nbackends = [");
    let (_tmp, dir) = kernel_dir(&pinned, RELU_FILES);
    let out = list_variants().arg(&dir).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("build.toml:6:"), "{err}");
    assert!(err.contains("unknown-matrix"), "{err}");
    assert!(
        err.contains("known matrices: `2026-12` (the default, revision 2026-12-01), `upstream-2026-08` (revision 2026-08-20)"),
        "{err}"
    );
}

#[test]
fn version_names_the_matrix_revision() {
    let out = crate::util::kb().arg("--version").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!(
            "kernel-builder {} (matrix 2026-12, revision 2026-12-01; snapshots: upstream-2026-08 (2026-08-20))\n",
            env!("CARGO_PKG_VERSION")
        )
    );
}

#[test]
fn json_cells_of_a_compiled_cuda_variant() {
    let (_tmp, dir) = kernel_dir(RELU, RELU_FILES);
    let out = list_variants().arg(&dir).args(["--system", "aarch64-linux", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let cells: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let cells = cells.as_array().unwrap();
    assert_eq!(cells.len(), 6);
    let cu126 = cells.iter().find(|c| c["name"] == "torch214-cxx11-cu126-aarch64-linux").unwrap();
    assert_eq!(
        cu126,
        &serde_json::json!({
            "name": "torch214-cxx11-cu126-aarch64-linux",
            "system": "aarch64-linux",
            "backend": "cuda",
            "backend_version": "12.6",
            "torch_version": "2.14",
            "noarch": false,
            "bundle": true,
            "kind": "torch",
            "arch_variant": "torch214-cxx11-cu126-aarch64-linux",
            "cuda_capabilities": ["8.0", "9.0a"],
            "rocm_archs": null,
            "matrix": "2026-12",
            "matrix_revision": "2026-12-01"
        })
    );
    let cu130 = cells.iter().find(|c| c["name"] == "torch214-cxx11-cu130-aarch64-linux").unwrap();
    assert_eq!(cu130["cuda_capabilities"], serde_json::json!(["8.0", "9.0a", "10.0f"]));
}

#[test]
fn json_noarch_cells() {
    let (_tmp, dir) = kernel_dir(TRITON, &[]);
    let out = list_variants().arg(&dir).args(["--system", "x86_64-linux", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let cells: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let summary: Vec<(String, String, String, serde_json::Value)> = cells
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_owned(),
                c["kind"].as_str().unwrap().to_owned(),
                c["arch_variant"].as_str().unwrap().to_owned(),
                c["cuda_capabilities"].clone(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                "torch-cuda".into(),
                "noarch".into(),
                "torch214-cxx11-cu126-x86_64-linux".into(),
                serde_json::json!(["9.0"])
            ),
            (
                "torch-rocm".into(),
                "noarch".into(),
                "torch213-cxx11-rocm71-x86_64-linux".into(),
                serde_json::Value::Null
            ),
            (
                "torch-xpu".into(),
                "noarch".into(),
                "torch213-cxx11-xpu20260-x86_64-linux".into(),
                serde_json::Value::Null
            ),
        ]
    );
}

#[test]
fn unknown_system_is_a_command_line_error() {
    let (_tmp, dir) = kernel_dir(TRITON, &[]);
    let out = list_variants().arg(&dir).args(["--system", "x86_64-windows"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("expected one of: aarch64-darwin, aarch64-linux, x86_64-linux"), "{err}");
    let out = list_variants().arg(&dir).args(["--system", "x86_64-linux", "--all-systems"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn missing_build_toml_fails_with_exit_1() {
    let tmp = tempfile::tempdir().unwrap();
    let out = list_variants().arg(tmp.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8(out.stderr).unwrap().contains("build.toml"));
}

#[test]
fn help_describes_every_option() {
    let out = crate::util::kb().args(["list-variants", "--help"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    insta::assert_snapshot!(String::from_utf8(out.stdout).unwrap(), @r"
    List the build variants (matrix cells) of a kernel

    Usage: kernel-builder list-variants [OPTIONS] [DIR]

    Arguments:
      [DIR]  Kernel directory containing build.toml (default: the current directory)

    Options:
          --json                Print a JSON array of cells (name, system, backend, backend_version,
                                torch_version, noarch, bundle, kind, arch_variant, cuda_capabilities,
                                rocm_archs, matrix, matrix_revision) instead of names. The matrix is the
                                one build.toml pins (`[general] matrix`), else the default
                                (`kernel-builder --version` names it)
          --system <SYSTEM>     List the variants of this Nix system instead of the host's (e.g.
                                `aarch64-darwin`)
          --all-systems         List the variants of every system of the matrix; text output prefixes
                                each name with its system and a tab
          --all                 Include variants outside the default bundle (for example torch 2.11 CPU
                                and `torch-tpu`), as Nix's `redistributable` outputs do
          --names <NAMES>       Which variant-name grammar the text output uses: `legacy` (the names
                                kernel-builder writes, read by kernels 0.17.2, 0.18.3 and 0.19.1),
                                `0.19` (the grammar of kernels 0.19, which also reads the legacy names),
                                or `both` (legacy, a tab, the 0.19 name) [default: legacy] [possible
                                values: legacy, 0.19, both]
          --matrix-file <FILE>  Take the cells from this matrix file (the schema of
                                nix/build-matrix.json: a draft of the next matrix, or a generated one)
                                instead of the matrix build.toml pins or the default. Nix does not read
                                it; the flake uses nix/build-matrix.json
      -q, --quiet               Say on stderr only what is wrong (warnings, errors, hints, why a command
                                failed): no notes or progress; results on stdout stay. Before or after
                                the command's name
      -v, --verbose             Also say each command kernel-builder runs (`+ cmake -G Ninja …`) on
                                stderr. Not with --quiet
      -h, --help                Print help
    ");
}

#[test]
fn an_empty_listing_says_why() {
    let (_tmp, dir) = kernel_dir(TRITON, &[]);
    let out = list_variants().arg(&dir).args(["--system", "aarch64-darwin"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("no variant of this kernel is built on aarch64-darwin"), "{stderr}");
}

/// kernels/relu-tvm-ffi pins no matrix: the default bundle has its tvm-ffi cells (a tvm-ffi
/// variant carries no torch version, so the sets offering tvm-ffi are its bundle).
#[test]
fn relu_tvm_ffi_gets_bundle_variants_without_a_matrix_pin() {
    let dir = Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels/relu-tvm-ffi");
    assert!(!std::fs::read_to_string(dir.join("build.toml")).unwrap().contains("matrix ="));
    let out =
        crate::util::kb().args(["list-variants", dir.as_str(), "--system", "x86_64-linux"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "tvm-ffi01-cpu-x86_64-linux\ntvm-ffi01-cu126-x86_64-linux\ntvm-ffi01-cu130-x86_64-linux\ntvm-ffi01-cu132-x86_64-linux\n"
    );
}

/// `list-variants` and `ci-matrix` list what the kernel's flake builds: a flake.nix whose
/// `torchVersions` keeps only the CUDA build sets and whose `systems` keeps x86_64-linux
/// gives exactly build.toml's cells of that backend and system (the flake's `variants`,
/// evaluated by Nix, with the compiled cells' capabilities resolved as for any cell); without
/// those arguments the listing is build.toml's own, Nix or not (issue 23).
#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn list_variants_and_ci_matrix_follow_the_flakes_torch_versions_and_systems() {
    let (_t, r) = crate::nix::clean_repo_with("kernels/relu");
    let kernel = r.join("kernels/relu");
    let list = |extra: &[&str]| -> String {
        let out = crate::util::kb().arg("list-variants").arg(&kernel).args(extra).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let before: Vec<serde_json::Value> =
        serde_json::from_str(&list(&["--all-systems", "--all", "--json"])).unwrap();
    assert!(
        before.iter().any(|c| c["backend"] == "cpu") && before.iter().any(|c| c["system"] == "aarch64-linux")
    );
    let expected: Vec<&serde_json::Value> =
        before.iter().filter(|c| c["backend"] == "cuda" && c["system"] == "x86_64-linux").collect();
    assert!(
        expected.len() >= 2 && expected.iter().all(|c| c["cuda_capabilities"].is_array()),
        "{expected:?}"
    );

    let flake = std::fs::read_to_string(kernel.join("flake.nix")).unwrap();
    let filtered = flake.replace(
        "path = ./.;",
        "path = ./.;\n      systems = [ \"x86_64-linux\" ];\n      torchVersions = defaults: builtins.filter (e: e ? cudaVersion) defaults;",
    );
    assert_ne!(flake, filtered);
    std::fs::write(kernel.join("flake.nix"), filtered).unwrap();
    crate::util::git(&r, &["commit", "-qam", "filter the matrix"]);

    let after: Vec<serde_json::Value> =
        serde_json::from_str(&list(&["--all-systems", "--all", "--json"])).unwrap();
    assert_eq!(after.iter().collect::<Vec<_>>(), expected);
    let bundle: Vec<&str> =
        expected.iter().filter(|c| c["bundle"] == true).map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(
        list(&["--all-systems"]),
        bundle.iter().map(|n| format!("x86_64-linux\t{n}\n")).collect::<String>()
    );

    let out = crate::util::kb().arg("ci-matrix").arg(&kernel).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut jobs: Vec<&str> =
        doc["jobs"].as_array().unwrap().iter().map(|j| j["id"].as_str().unwrap()).collect();
    jobs.sort();
    assert_eq!(jobs, bundle);
}
