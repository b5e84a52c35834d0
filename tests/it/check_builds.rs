//! `kernel-builder check-builds`: build/ against the variants the matrix says the kernel needs,
//! on a tree `build-and-copy` really built (vector-add-helion: noarch, builds in a second).

use camino::{Utf8Path, Utf8PathBuf};

use crate::util::kb_output as kb;

/// A copy of kernels/vector-add-helion with build/ filled by `build-and-copy` (also fill-card's).
pub(crate) fn built_vector_add() -> (tempfile::TempDir, Utf8PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = Utf8Path::from_path(tmp.path()).unwrap().join("vector-add-helion");
    // Never the example's own build/ (README's main command fills it): only its sources.
    crate::util::copy_kernel("vector-add-helion", dir.as_std_path());
    let out = crate::util::kb()
        .args(["build-and-copy", dir.as_str(), "--nix", "never"])
        .env("KERNEL_BUILDER_CACHE_DIR", tmp.path().join("cache"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    (tmp, dir)
}

#[test]
fn a_fresh_build_matches_and_missing_or_extra_variants_fail() {
    let (_t, dir) = built_vector_add();
    let ok = kb(&["check-builds", dir.as_str()]);
    assert_eq!(ok.status.code(), Some(0), "{}", String::from_utf8_lossy(&ok.stderr));
    assert_eq!(
        String::from_utf8_lossy(&ok.stdout),
        "build/ holds exactly the 3 expected variants (matrix 2026-12)\n"
    );

    std::fs::remove_dir_all(dir.join("build/torch-rocm")).unwrap();
    std::fs::create_dir(dir.join("build/torch212-cxx11-cu126-x86_64-linux")).unwrap();
    // A variant of another system: extra when every system is checked, ignored with --system.
    std::fs::create_dir(dir.join("build/torch215-cxx11-cpu-aarch64-linux")).unwrap();
    let bad = kb(&["check-builds", dir.as_str()]);
    assert_eq!(bad.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&bad.stdout),
        "missing: torch-rocm\nextra:   torch212-cxx11-cu126-x86_64-linux\nextra:   torch215-cxx11-cpu-aarch64-linux\n"
    );
    assert!(String::from_utf8_lossy(&bad.stderr).contains("(1 missing, 2 extra of 3 expected)"));

    let json = kb(&["check-builds", dir.as_str(), "--system", "x86_64-linux", "--json"]);
    assert_eq!(json.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(
        v,
        serde_json::json!({
            "matrix": "2026-12",
            "systems": ["x86_64-linux"],
            "expected": ["torch-cuda", "torch-rocm", "torch-xpu"],
            "present": ["torch-cuda", "torch-xpu", "torch212-cxx11-cu126-x86_64-linux"],
            "missing": ["torch-rocm"],
            "extra": ["torch212-cxx11-cu126-x86_64-linux"],
            "ok": false
        })
    );
}

#[test]
fn no_build_directory_and_an_unknown_system_are_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = Utf8Path::from_path(tmp.path()).unwrap().join("k");
    crate::util::copy_kernel("vector-add-helion", dir.as_std_path());
    let out = kb(&["check-builds", dir.as_str()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("build` does not exist: build the variants first"));
    let out = kb(&["check-builds", dir.as_str(), "--system", "riscv64-linux"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("`riscv64-linux` is not a system of build matrix 2026-12"));
}
