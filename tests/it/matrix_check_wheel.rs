//! `kernel-builder matrix check-wheel`: what needs no Python environment (bad input, an
//! unknown matrix, a wheel-shaped zip written here). The checks on the torch wheel CI installs
//! are `tests/python/test_matrix_check_wheel.py` (they run after `scripts/setup-venv.sh`).

use std::io::Write;
use std::path::{Path, PathBuf};

fn check_wheel(args: &[&str]) -> (i32, String, String) {
    let out = crate::util::kb().args(["matrix", "check-wheel"]).args(args).output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// A wheel-shaped zip with these members.
fn zip_with(dir: &Path, name: &str, members: &[(&str, &str)]) -> PathBuf {
    let path = dir.join(name);
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    for (member, text) in members {
        zip.start_file(*member, zip::write::SimpleFileOptions::default()).unwrap();
        zip.write_all(text.as_bytes()).unwrap();
    }
    zip.finish().unwrap();
    path
}

const METADATA: &str = "Metadata-Version: 2.4\nName: torch\nVersion: 2.15.0\nRequires-Python: >=3.11\n\n";
const WHEEL: &str = "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp313-cp313-manylinux_2_28_aarch64\n";
const VERSION_PY: &str =
    "__version__ = '2.15.0+cu132'\ncuda: Optional[str] = '13.2'\nhip: Optional[str] = None\n";

#[test]
fn a_2_15_cu132_aarch64_wheel_has_its_bundle_cell() {
    let t = tempfile::tempdir().unwrap();
    let wheel = zip_with(
        t.path(),
        "torch-2.15.0-cp313-cp313-manylinux_2_28_aarch64.whl",
        &[
            ("torch-2.15.0.dist-info/METADATA", METADATA),
            ("torch-2.15.0.dist-info/WHEEL", WHEEL),
            ("torch/version.py", VERSION_PY),
        ],
    );
    let (code, out, err) = check_wheel(&[wheel.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        out,
        "wheel: torch 2.15.0 (torch.__version__ 2.15.0+cu132)
backend: cuda 13.2
python: >=3.11 (the builder's CPython 3.13 satisfies it)
tags: cp313-cp313-manylinux_2_28_aarch64
matrix: 2026-12 (revision 2026-12-01)
  manylinux_2_28_aarch64 (aarch64-linux): torch215-cxx11-cu132-aarch64-linux (bundle)
the matrix agrees with this wheel
"
    );
    // Both spellings of the cell (`--names`, as list-variants), and the 0.19 one in the JSON.
    let (code, out, _) = check_wheel(&[wheel.to_str().unwrap(), "--names", "both"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("  manylinux_2_28_aarch64 (aarch64-linux): torch215-cxx11-cu132-aarch64-linux\ttorch-2.15-cxx11-cuda-13.2-cpython-3.9-abi3-aarch64-linux (bundle)\n"),
        "{out}"
    );
    let (code, out, _) = check_wheel(&[wheel.to_str().unwrap(), "--names", "0.19"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("  manylinux_2_28_aarch64 (aarch64-linux): torch-2.15-cxx11-cuda-13.2-cpython-3.9-abi3-aarch64-linux (bundle)\n"),
        "{out}"
    );
    let (code, out, _) = check_wheel(&[wheel.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        report["systems"][0]["cell_0_19"],
        "torch-2.15-cxx11-cuda-13.2-cpython-3.9-abi3-aarch64-linux"
    );
    // The August snapshot has no torch 2.15.
    let (code, out, _) = check_wheel(&[wheel.to_str().unwrap(), "--matrix", "upstream-2026-08"]);
    assert_eq!(code, 1);
    assert!(
        out.contains("MISSING: no build set of matrix upstream-2026-08 has torch 2.15 cuda 13.2 on aarch64-linux: it has no torch 2.15 there"),
        "{out}"
    );
}

#[test]
fn bad_input_is_a_clear_error() {
    let t = tempfile::tempdir().unwrap();
    let not_zip = t.path().join("torch.whl");
    std::fs::write(&not_zip, b"not a zip").unwrap();
    let (code, _, err) = check_wheel(&[not_zip.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("is not a wheel (zip archive)"), "{err}");
    let (code, _, err) = check_wheel(&["/nonexistent.whl"]);
    assert_eq!(code, 1);
    assert!(err.contains("cannot open `/nonexistent.whl`"), "{err}");
    let no_version = zip_with(
        t.path(),
        "a.whl",
        &[("torch-2.15.0.dist-info/METADATA", METADATA), ("torch-2.15.0.dist-info/WHEEL", WHEEL)],
    );
    let (code, _, err) = check_wheel(&[no_version.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("has no `torch/version.py`; is it a torch wheel?"), "{err}");
    let (code, _, err) = check_wheel(&[no_version.to_str().unwrap(), "--matrix", "nope"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("unknown build matrix `nope`; this kernel-builder knows 2026-12, upstream-2026-08"),
        "{err}"
    );
}
