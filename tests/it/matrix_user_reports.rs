//! Users' reports about capabilities and gfx targets, each kept as a test, end to end: a
//! build.toml on disk, `kernel::load` (config, then the matrix checks), and `check-config`.

use camino::{Utf8Path, Utf8PathBuf};
use kernel_builder::config::{Problem, Severity};
use kernel_builder::kernel;

fn kernel_dir(build_toml: &str) -> (tempfile::TempDir, Utf8PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = Utf8Path::from_path(tmp.path()).unwrap().to_owned();
    std::fs::write(root.join("build.toml"), build_toml).unwrap();
    for f in ["torch-ext/torch_binding.cpp", "relu_cuda/relu.cu", "relu_rocm/relu.hip"] {
        let p = root.join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, b"").unwrap();
    }
    (tmp, root)
}

/// A relu kernel for CUDA and ROCm with these extra lines in `[kernel.relu_cuda]` and
/// `[kernel.relu_rocm]`, plus `general_extra` in `[general]`.
fn relu(cuda_extra: &str, rocm_extra: &str, general_extra: &str) -> String {
    format!(
        r#"[general]
name = "relu"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cuda", "rocm"]
{general_extra}

[torch]
src = ["torch-ext/torch_binding.cpp"]

[kernel.relu_cuda]
backend = "cuda"
depends = ["torch"]
src = ["relu_cuda/relu.cu"]
{cuda_extra}

[kernel.relu_rocm]
backend = "rocm"
depends = ["torch"]
src = ["relu_rocm/relu.hip"]
{rocm_extra}
"#
    )
}

/// Every problem `kernel::load` reports for the file: errors, or warnings when it loads.
fn problems(toml: &str) -> (bool, Vec<Problem>) {
    let (_tmp, dir) = kernel_dir(toml);
    match kernel::load(&dir) {
        Ok(l) => (true, l.warnings),
        Err(e) => (false, e.problems),
    }
}

fn by_rule<'p>(ps: &'p [Problem], rule: &str) -> Vec<&'p Problem> {
    ps.iter().filter(|p| p.rule == rule).collect()
}

#[test]
fn capability_99999_is_an_error_naming_kernel_and_value() {
    let (ok, ps) = problems(&relu(r#"cuda-capabilities = ["8.0", "99999.0"]"#, "", ""));
    assert!(!ok);
    let found = by_rule(&ps, "capability-out-of-range");
    assert_eq!(found.len(), 1, "{ps:#?}");
    assert_eq!(found[0].severity, Severity::Error);
    assert_eq!(found[0].key_path, "kernel.relu_cuda.cuda-capabilities[1]");
    assert_eq!(
        found[0].message,
        "kernel `relu_cuda`: capability `99999.0` cannot be built by CUDA 12.6, 13.0, 13.2; they build 5.0 to 12.1"
    );
}

#[test]
fn gfx99999_is_an_error_naming_kernel_and_value() {
    let (ok, ps) = problems(&relu("", r#"rocm-archs = ["gfx942", "gfx99999"]"#, ""));
    assert!(!ok);
    let found = by_rule(&ps, "unknown-rocm-arch");
    assert_eq!(found.len(), 1, "{ps:#?}");
    assert_eq!(found[0].key_path, "kernel.relu_rocm.rocm-archs[1]");
    assert_eq!(
        found[0].message,
        "kernel `relu_rocm`: `gfx99999` is not a gfx target that any ROCm release of build matrix 2026-12 knows"
    );
    // The help names what the kernel's ROCm releases do build, gfx1151 included (kernels #834).
    let help = found[0].help.as_deref().unwrap();
    assert!(help.starts_with("ROCm 7.1, 7.2 builds: gfx900, gfx906,"), "{help}");
    assert!(help.contains("gfx1151"), "{help}");
}

#[test]
fn empty_capability_list_is_an_error() {
    let (ok, ps) = problems(&relu("cuda-capabilities = []", "", ""));
    assert!(!ok);
    assert_eq!(by_rule(&ps, "empty-capabilities").len(), 1, "{ps:#?}");
}

#[test]
fn family_capability_beyond_the_cuda_bounds_leaves_nothing_to_build() {
    let (ok, ps) =
        problems(&relu(r#"cuda-capabilities = ["10.0f"]"#, "", "[general.cuda]\nmaxver = \"12.6\""));
    assert!(!ok);
    let found = by_rule(&ps, "capability-needs-newer-cuda");
    assert_eq!(found.len(), 1, "{ps:#?}");
    assert_eq!(found[0].severity, Severity::Warning);
    assert_eq!(
        found[0].help.as_deref(),
        Some("the `f` suffix needs CUDA 12.9 or newer; raise general.cuda.maxver to build it, or drop it")
    );
    let found = by_rule(&ps, "no-buildable-capability");
    assert_eq!(found.len(), 1, "{ps:#?}");
    assert_eq!(found[0].severity, Severity::Error);
}

/// `12.0a` beyond CUDA 12.6: the `a` suffix exists from CUDA 12.0, but sm_120 itself needs
/// 12.8; the help must not say the suffix needs 12.0 while the message says 12.8.
#[test]
fn arch_specific_capability_help_agrees_with_the_cuda_it_needs() {
    let (_, ps) =
        problems(&relu(r#"cuda-capabilities = ["9.0", "12.0a"]"#, "", "[general.cuda]\nmaxver = \"12.6\""));
    let found = by_rule(&ps, "capability-needs-newer-cuda");
    assert_eq!(found.len(), 1, "{ps:#?}");
    assert!(
        found[0].message.starts_with("kernel `relu_cuda`: capability `12.0a` needs CUDA 12.8 or newer,"),
        "{}",
        found[0].message
    );
    assert_eq!(found[0].help.as_deref(), Some("raise general.cuda.maxver to build it, or remove it"));
}

#[test]
fn newer_toolkit_capability_is_a_warning_naming_the_cells_that_skip_it() {
    let (ok, ps) = problems(&relu(
        r#"cuda-capabilities = ["8.0", "9.0", "12.0"]"#,
        "",
        "[general.cuda]\nmaxver = \"12.6\"",
    ));
    assert!(ok, "{ps:#?}");
    let found = by_rule(&ps, "capability-needs-newer-cuda");
    assert_eq!(found.len(), 1, "{ps:#?}");
    assert_eq!(found[0].key_path, "kernel.relu_cuda.cuda-capabilities[2]");
    assert!(found[0].message.contains("capability `12.0` needs CUDA 12.8 or newer"), "{}", found[0].message);
    assert!(
        found[0].message.ends_with("torch214-cxx11-cu126-x86_64-linux build 8.0, 9.0"),
        "{}",
        found[0].message
    );
}

#[test]
fn family_capability_skips_older_cuda_with_a_warning() {
    let (ok, ps) = problems(&relu(r#"cuda-capabilities = ["10.0f"]"#, "", ""));
    assert!(ok, "{ps:#?}");
    let found = by_rule(&ps, "kernel-skipped");
    assert_eq!(found.len(), 1, "{ps:#?}");
    assert_eq!(found[0].severity, Severity::Warning);
    assert!(found[0].message.contains("CUDA 12.6;"), "{}", found[0].message);
}

#[test]
fn cuda_bounds_matching_no_build_set_warn_naming_the_bounds() {
    let (ok, ps) = problems(&relu("", "", "[general.cuda]\nminver = \"12.4\"\nmaxver = \"12.4\""));
    assert!(ok, "{ps:#?}");
    let found = by_rule(&ps, "backend-without-variants");
    assert_eq!(found.len(), 1, "{ps:#?}");
    assert_eq!(found[0].key_path, "general.backends[0]");
    assert!(found[0].message.contains("general.cuda.minver = \"12.4\" and general.cuda.maxver = \"12.4\""));
}

#[test]
fn check_config_points_at_the_bad_capability() {
    let (_tmp, dir) = kernel_dir(&relu(r#"cuda-capabilities = ["8.0", "3.5"]"#, "", ""));
    let out = crate::util::kb()
        .args(["check-config", dir.as_str()])
        .env("KERNEL_BUILDER_PLAIN", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("capability-out-of-range"), "{err}");
    assert!(err.contains("kernel `relu_cuda`: capability `3.5` cannot be built"), "{err}");
    assert!(err.contains("build.toml:16:"), "{err}");
}

#[test]
fn check_config_points_at_an_unknown_matrix_pin_and_lists_the_known_ones() {
    let (_tmp, dir) = kernel_dir(&relu("", "", "matrix = \"upstream-2025-03\""));
    let out = crate::util::kb()
        .args(["check-config", dir.as_str()])
        .env("KERNEL_BUILDER_PLAIN", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("build.toml:7:"), "{err}");
    assert!(err.contains("[unknown-matrix]") || err.contains("unknown-matrix"), "{err}");
    assert!(err.contains("`general.matrix` pins the build matrix `upstream-2025-03`"), "{err}");
    assert!(
        err.contains(
            "`2026-12` (the default, revision 2026-12-01), `upstream-2026-08` (revision 2026-08-20)"
        ),
        "{err}"
    );
    // A known pin loads, and a wrong type is an error at the same line.
    let (ok, ps) = problems(&relu("", "", "matrix = \"upstream-2026-08\""));
    assert!(ok, "{ps:#?}");
    let (ok, ps) = problems(&relu("", "", "matrix = 2026"));
    assert!(!ok);
    assert_eq!(ps.iter().filter(|p| p.key_path == "general.matrix").count(), 1, "{ps:#?}");
}
