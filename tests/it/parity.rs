//! Parity with upstream's generated build: every class of fault that kept a real
//! kernels-community kernel from compiling here (while upstream's build compiled it) is a
//! `[kernel.*]` of `tests/fixtures/parity`, compiled for one capability with the venv's PyPI
//! nvcc and torch (`.venv`, made by `scripts/setup-venv.sh`; without a CUDA torch there the
//! compile test says SKIPPED). A quick check's tree (`--cuda-capabilities`) records what it
//! left out, and `upload` / `build-and-upload` refuse it.

use std::fs;
use std::path::{Path, PathBuf};

use super::nix::copy_dir;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The venv's interpreter and the CUDA cell its torch gives, or `None` (SKIPPED) without a
/// CUDA torch there.
pub(crate) fn venv_cuda_cell() -> Option<(PathBuf, String)> {
    let py = repo().join(".venv/bin/python");
    let out = std::process::Command::new(&py)
        .args(["-c", "import torch; print(torch.__version__.split('+')[0], torch.version.cuda)"])
        .output()
        .ok()
        .filter(|o| o.status.success());
    let Some(out) = out else {
        eprintln!(
            "SKIPPED: no torch in {} (run scripts/setup-venv.sh); the parity compile did not run",
            py.display()
        );
        return None;
    };
    let out = String::from_utf8(out.stdout).unwrap();
    let (version, cuda) = out.trim().split_once(' ').unwrap();
    if cuda == "None" {
        eprintln!("SKIPPED: the venv's torch is a CPU build; the parity compile did not run");
        return None;
    }
    let mut v = version.split('.');
    let (major, minor) = (v.next().unwrap(), v.next().unwrap());
    Some((
        py,
        format!("torch{major}{minor}-cxx11-cu{}-{}-linux", cuda.replace('.', ""), std::env::consts::ARCH),
    ))
}

/// A stand-in for a CUTLASS checkout: the layout `find_checkout` wants, with one header.
fn dep_stub(dir: &Path) -> PathBuf {
    let d = dir.join("cutlass-stub");
    fs::create_dir_all(d.join("include")).unwrap();
    fs::create_dir_all(d.join("tools/util/include")).unwrap();
    fs::write(d.join("include/parity_dep.h"), "#pragma once\n#define PARITY_DEP 0\n").unwrap();
    d
}

/// The fixture, copied to `t/parity` and changed by `edit` (its build.toml text), built for
/// the CUDA cell `cell` with `--cuda-capabilities 9.0`: the kernel directory and the output.
fn build_fixture(
    t: &Path,
    py: &Path,
    cell: &str,
    edit: impl Fn(String) -> String,
) -> (PathBuf, std::process::Output) {
    let k = t.join("parity");
    copy_dir(&repo().join("tests/fixtures/parity"), &k);
    let toml = fs::read_to_string(k.join("build.toml")).unwrap();
    fs::write(k.join("build.toml"), edit(toml)).unwrap();
    let out = crate::util::kb()
        .args(["build-and-copy", "--nix", "never", "--python", py.to_str().unwrap(), "--variant", cell])
        .args(["--cuda-capabilities", "9.0"])
        .arg(&k)
        .env("KERNEL_BUILDER_CACHE_DIR", t.join("cache"))
        .env("KERNEL_BUILDER_DEP_CUTLASS_3_8", dep_stub(t))
        .env_remove("KERNEL_BUILDER_CUDA_CAPABILITIES")
        .output()
        .unwrap();
    (k, out)
}

/// The fixture compiles, each source checking with `#error` what upstream's build gives it
/// (nvcc's extended lambdas and relaxed constexpr, ENABLE_FP8, `<registration.h>`, csrc/ and
/// the directories of listed headers on the include path, a dependency's headers for the
/// binding, per-kernel flags scoped to their kernel and language). `--cuda-capabilities 9.0`
/// narrows the kernel that publishes the default list, and metadata.json records it; a kernel
/// for other GPUs only (10.0a) keeps its own capability, since the binding calls it; the
/// capability CUDA 13 lacks (7.0) is skipped with a note naming it. The module imports and
/// its ops answer. About 2 minutes on 2 cores.
#[test]
fn every_fault_class_compiles_for_one_capability() {
    let Some((py, cell)) = venv_cuda_cell() else { return };
    let t = tempfile::tempdir().unwrap();
    let (k, out) = build_fixture(t.path(), &py, &cell, |toml| toml);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.starts_with(&format!("built {cell} ")), "{stdout}");
    assert!(
        stderr.contains(&format!(
            "cannot build CUDA capability 7.0 of `cuda-capabilities`; `{cell}` holds 9.0 only"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "[kernel.uses_dep]: compiled for CUDA capability 9.0 only (--cuda-capabilities / KERNEL_BUILDER_CUDA_CAPABILITIES), not 7.5, 8.0, 8.6, 8.7, 8.9, 10.0, 11.0, 12.0, 12.1+PTX; `{cell}` is for checks, and upload refuses it"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "[kernel.other_gpus] builds none of 9.0 asked for with --cuda-capabilities / KERNEL_BUILDER_CUDA_CAPABILITIES: compiled for its own 10.0a"
        ),
        "{stderr}"
    );
    let variant = k.join("build").join(&cell);
    let meta: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(variant.join("metadata.json")).unwrap()).unwrap();
    assert_eq!(meta.pointer("/build/capabilities-only"), Some(&serde_json::json!(["9.0"])));
    assert_eq!(meta.pointer("/backend/archs"), Some(&serde_json::json!(["9.0", "10.0a"])));

    // The package imports (a link named after it to the variant) and every op answers; the
    // kernels launch nothing on a null pointer without a GPU, and the ops return n.
    let pkg_root = t.path().join("pkgs");
    fs::create_dir_all(&pkg_root).unwrap();
    std::os::unix::fs::symlink(&variant, pkg_root.join("parity")).unwrap();
    let run = std::process::Command::new(&py)
        .args([
            "-c",
            "import parity; o = parity.ops; print([o.lambda_op(1), o.constexpr_call_op(2), o.flagged_op(3), o.uses_dep_op(4), o.other_gpus_op(5)])",
        ])
        .env("PYTHONPATH", &pkg_root)
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    assert_eq!(String::from_utf8_lossy(&run.stdout).trim(), "[1, 2, 3, 4, 5]");

    // That tree is a quick check's: upload refuses it, whatever --force says, before any
    // request (a token is given, since upload asks for one before it reads the variants).
    let up = crate::util::kb()
        .args(["upload", "--repo-id", "test-org/parity", "--force"])
        .arg(&k)
        .env("HF_ENDPOINT", "http://127.0.0.1:9")
        .env("HF_TOKEN", "hf_test")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&up.stderr);
    assert_eq!(up.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "variant `{cell}` was compiled for CUDA capability 9.0 only (`build.capabilities-only` in `"
        )),
        "{err}"
    );
    assert!(err.contains("rebuild it without that option before uploading"), "{err}");
}

/// A quick check whose capabilities no `[kernel.*]` of the cell builds has nothing to check:
/// refused before anything compiles, naming each kernel's own capabilities.
#[test]
fn a_quick_check_no_kernel_can_build_is_refused() {
    let Some((py, cell)) = venv_cuda_cell() else { return };
    let t = tempfile::tempdir().unwrap();
    let (_, out) = build_fixture(t.path(), &py, &cell, |toml| {
        let head = &toml[..toml.find("# A __device__ lambda").unwrap()];
        let tail = &toml[toml.find("[kernel.other_gpus]").unwrap()..];
        format!("{head}{tail}")
    });
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("no `[kernel.*]` of this cell builds any of 9.0 asked for with --cuda-capabilities / KERNEL_BUILDER_CUDA_CAPABILITIES: [kernel.other_gpus] (10.0a); ask for one of those"),
        "{err}"
    );
}

/// `build-and-upload` with KERNEL_BUILDER_CUDA_CAPABILITIES set refuses before building
/// anything: a quick check is never published.
#[test]
fn build_and_upload_refuses_a_capability_subset_before_building() {
    let t = tempfile::tempdir().unwrap();
    let k = t.path().join("parity");
    copy_dir(&repo().join("tests/fixtures/parity"), &k);
    let out = crate::util::kb()
        .args(["build-and-upload", "--repo-id", "test-org/parity", "--python", "/nonexistent/python3"])
        .arg(&k)
        .env("KERNEL_BUILDER_CUDA_CAPABILITIES", "9.0,10.0")
        .env("KERNEL_BUILDER_CACHE_DIR", t.path().join("cache"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("build-and-upload publishes every CUDA capability the kernel publishes, and --cuda-capabilities / KERNEL_BUILDER_CUDA_CAPABILITIES asks for 9.0, 10.0 only (a quick check, which upload refuses); unset it, or use `build-and-copy` for the check"),
        "{err}"
    );
    assert!(!k.join("build").exists());
}

/// A header the binding includes that sits in the kernel directory but no `src` lists (so
/// the build never sees it): the compile fails as before (the first compiler error with file
/// and line, then where the log is) and a `hint:` says which `src` entry to add.
#[test]
fn a_header_no_src_lists_fails_with_a_hint_naming_it() {
    let Some((py, cell)) = venv_cuda_cell() else { return };
    let t = tempfile::tempdir().unwrap();
    let (k, out) =
        build_fixture(t.path(), &py, &cell, |toml| toml.replace("src = [\"ops/beside.h\", ", "src = ["));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let first = err.split("--- first errors ---\n").nth(1).expect("the first errors");
    assert!(
        first.contains(&format!(
            "{}/torch-ext/torch_binding.cpp:12:10: fatal error: beside.h: No such file or directory",
            k.canonicalize().unwrap().display()
        )),
        "{err}"
    );
    assert!(
        err.contains("\nhint: `beside.h` is the kernel's `ops/beside.h`, which no `src` lists, so the build does not see it: add `\"ops/beside.h\"` to `src` of the [kernel.*] whose sources include it"),
        "{err}"
    );
    assert!(!k.join("build").exists(), "nothing written");
}

/// A Nix build cannot narrow capabilities: `--cuda-capabilities` with `--nix always` is an
/// error saying to build natively, before anything runs.
#[test]
fn a_capability_subset_with_nix_is_refused() {
    let out = crate::util::kb()
        .args(["build-and-copy", "--nix", "always", "--cuda-capabilities", "9.0"])
        .arg(repo().join("tests/fixtures/parity"))
        .env_remove("KERNEL_BUILDER_CUDA_CAPABILITIES")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err,
        "error: --cuda-capabilities / KERNEL_BUILDER_CUDA_CAPABILITIES narrows a native build only, and this build uses Nix; add `--nix never`\n"
    );
    assert!(!repo().join("tests/fixtures/parity/build").exists());
}
