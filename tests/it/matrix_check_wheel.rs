//! `kernel-builder matrix check-wheel` on the torch wheel CI installs (`scripts/setup-venv.sh`:
//! torch 2.11.0 from PyPI, the CUDA 13.0 build). The installed distribution keeps the wheel's
//! METADATA, WHEEL and `torch/version.py` byte for byte, so the test zips those three into a
//! wheel-shaped file; a real wheel file, when one is found (`$KERNEL_BUILDER_TORCH_WHEEL`, or
//! a `torch-*.whl` in pip's cache), is checked too, and the test says so when there is none.

use std::io::Write;
use std::path::{Path, PathBuf};

use assert_cmd::Command;

/// `site-packages` of the test venv (`$KERNEL_BUILDER_VENV`, default `<repo>/.venv`).
fn site_packages() -> PathBuf {
    let venv = std::env::var_os("KERNEL_BUILDER_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv"));
    let lib = venv.join("lib");
    let found = std::fs::read_dir(&lib)
        .unwrap_or_else(|e| panic!("no venv at {} ({e}): run scripts/setup-venv.sh", venv.display()))
        .map(|e| e.unwrap().path().join("site-packages"))
        .find(|p| p.join("torch/version.py").is_file());
    found.unwrap_or_else(|| panic!("no torch in {}: run scripts/setup-venv.sh", lib.display()))
}

/// A wheel-shaped zip of the installed torch: `<dist-info>/METADATA`, `<dist-info>/WHEEL`
/// and `torch/version.py`, with `version_py` in place of the real version file when given.
fn wheel_from_venv(dir: &Path, version_py: Option<&str>) -> PathBuf {
    let sp = site_packages();
    let dist = std::fs::read_dir(&sp)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .find(|n| n.starts_with("torch-") && n.ends_with(".dist-info"))
        .expect("torch-*.dist-info in site-packages");
    let version = dist.trim_start_matches("torch-").trim_end_matches(".dist-info").to_owned();
    let wheel_text = std::fs::read_to_string(sp.join(&dist).join("WHEEL")).unwrap();
    let tag = wheel_text.lines().find_map(|l| l.strip_prefix("Tag: ")).expect("a Tag line").trim().to_owned();
    let path = dir.join(format!("torch-{version}-{tag}.whl"));
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    let opts = zip::write::SimpleFileOptions::default();
    for (member, bytes) in [
        (format!("{dist}/METADATA"), std::fs::read(sp.join(&dist).join("METADATA")).unwrap()),
        (format!("{dist}/WHEEL"), wheel_text.into_bytes()),
        (
            "torch/version.py".to_owned(),
            match version_py {
                Some(text) => text.as_bytes().to_vec(),
                None => std::fs::read(sp.join("torch/version.py")).unwrap(),
            },
        ),
    ] {
        zip.start_file(member, opts).unwrap();
        zip.write_all(&bytes).unwrap();
    }
    zip.finish().unwrap();
    path
}

fn check_wheel(args: &[&str]) -> (i32, String, String) {
    let out = Command::cargo_bin("kernel-builder")
        .unwrap()
        .args(["matrix", "check-wheel"])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn the_installed_torch_2_11_cu130_has_no_cell_in_either_matrix() {
    let t = tempfile::tempdir().unwrap();
    let wheel = wheel_from_venv(t.path(), None);
    let wheel = wheel.to_str().unwrap();
    let (code, out, err) = check_wheel(&[wheel]);
    assert_eq!(code, 1, "{out}{err}");
    assert_eq!(
        out,
        "wheel: torch 2.11.0 (torch.__version__ 2.11.0+cu130)
backend: cuda 13.0
python: >=3.10 (the builder's CPython 3.13 satisfies it)
tags: cp311-cp311-manylinux_2_28_x86_64
matrix: 2026-12 (revision 2026-12-01)
  manylinux_2_28_x86_64 (x86_64-linux): MISSING: no build set of matrix 2026-12 has torch 2.11 cuda 13.0 on x86_64-linux; for torch 2.11 it has cpu, tpu
the matrix does NOT agree with this wheel
"
    );
    let (code, out, _) = check_wheel(&[wheel, "--matrix", "upstream-2026-08", "--json"]);
    assert_eq!(code, 1);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["matrix"], "upstream-2026-08");
    assert_eq!(report["torch"], "2.11");
    assert_eq!(report["wheel"]["toolkit"], "13.0");
    assert_eq!(report["wheel"]["requires_python"], ">=3.10");
    assert_eq!(report["agrees"], false);
}

#[test]
fn the_same_wheel_relabelled_2_14_agrees_and_2_15_names_the_toolkit() {
    let t = tempfile::tempdir().unwrap();
    let real = std::fs::read_to_string(site_packages().join("torch/version.py")).unwrap();
    assert!(real.contains("'2.11.0+cu130'"), "{real}");
    let v214 = real.replace("'2.11.0+cu130'", "'2.14.0+cu130'");
    let wheel = wheel_from_venv(t.path(), Some(&v214));
    let (code, out, err) = check_wheel(&[wheel.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("  manylinux_2_28_x86_64 (x86_64-linux): torch214-cxx11-cu130-x86_64-linux (bundle)\n"),
        "{out}"
    );
    assert!(out.ends_with("the matrix agrees with this wheel\n"), "{out}");

    let t2 = tempfile::tempdir().unwrap();
    let wheel = wheel_from_venv(t2.path(), Some(&real.replace("'2.11.0+cu130'", "'2.15.0+cu130'")));
    let (code, out, _) = check_wheel(&[wheel.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        out.contains(
            "MISSING: matrix 2026-12 builds torch 2.15 cuda on x86_64-linux with cuda 13.2, not 13.0"
        ),
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
    let wheel = wheel_from_venv(t.path(), None);
    let (code, _, err) = check_wheel(&[wheel.to_str().unwrap(), "--matrix", "nope"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("unknown build matrix `nope`; this kernel-builder knows 2026-12, upstream-2026-08"),
        "{err}"
    );
}

/// A real torch wheel file, if one is on this machine.
fn real_wheel() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KERNEL_BUILDER_TORCH_WHEEL") {
        return Some(PathBuf::from(p));
    }
    let cache = std::env::var_os("PIP_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/pip")))?;
    walkdir::WalkDir::new(cache)
        .into_iter()
        .filter_map(Result::ok)
        .find(|e| {
            let n = e.file_name().to_string_lossy();
            n.starts_with("torch-") && n.ends_with(".whl")
        })
        .map(|e| e.into_path())
}

#[test]
fn a_real_torch_wheel_when_there_is_one() {
    let Some(wheel) = real_wheel() else {
        // Written to the process's stderr directly, past the test harness's capture, so that
        // the skip shows in a normal run.
        let _ = std::io::stderr().write_all(
            b"matrix_check_wheel: SKIPPED the real-wheel check: no torch-*.whl here (set KERNEL_BUILDER_TORCH_WHEEL, or `pip download torch==2.11.0 --no-deps -d DIR`); the wheel-shaped copy of the installed torch was checked instead\n",
        );
        return;
    };
    let (code, out, err) = check_wheel(&[wheel.to_str().unwrap(), "--json"]);
    assert!(code == 0 || code == 1, "{out}{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    assert_eq!(report["wheel"]["name"], "torch");
    assert!(report["wheel"]["tags"].as_array().is_some_and(|t| !t.is_empty()), "{out}");
    // The verdict follows from the facts: a cell exists exactly when the report says it agrees.
    let cells = report["systems"].as_array().unwrap().iter().filter(|s| s["cell"].is_string()).count();
    assert_eq!(report["agrees"] == true, code == 0);
    assert!(code == 1 || cells > 0);
    // The installed torch came from a wheel: the same release reads the same from both.
    let t = tempfile::tempdir().unwrap();
    let copy = wheel_from_venv(t.path(), None);
    let (_, copy_out, _) = check_wheel(&[copy.to_str().unwrap(), "--json"]);
    let copy_report: serde_json::Value = serde_json::from_str(&copy_out).unwrap();
    if copy_report["wheel"]["torch_version"] == report["wheel"]["torch_version"]
        && copy_report["wheel"]["tags"] == report["wheel"]["tags"]
    {
        assert_eq!(report, copy_report);
    }
}
