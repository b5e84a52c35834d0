//! `kernel-builder fill-card`: the card from CARD.md, build.toml and build/*/metadata.json, on
//! a tree `build-and-copy` really built (vector-add-helion: noarch, builds in a second) and on
//! relu with a fixture build/ (compiled variants: capabilities and torch from metadata.json).

use assert_cmd::Command;
use camino::{Utf8Path, Utf8PathBuf};

fn kb(args: &[&str]) -> std::process::Output {
    Command::cargo_bin("kernel-builder").unwrap().args(args).output().unwrap()
}

fn copy_kernel(tmp: &tempfile::TempDir, name: &str) -> Utf8PathBuf {
    let dir = Utf8Path::from_path(tmp.path()).unwrap().join(name);
    let src = Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels").join(name);
    let cp = std::process::Command::new("cp").args(["-r", src.as_str(), dir.as_str()]).status().unwrap();
    assert!(cp.success());
    dir
}

fn card(dir: &Utf8Path) -> String {
    std::fs::read_to_string(dir.join("build/CARD.md")).unwrap()
}

#[test]
fn a_built_noarch_kernel_gets_its_variants_and_tuned_for_sections() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = copy_kernel(&tmp, "vector-add-helion");
    let out = Command::cargo_bin("kernel-builder")
        .unwrap()
        .args(["build-and-copy", dir.as_str(), "--nix", "never"])
        .env("KERNEL_BUILDER_CACHE_DIR", tmp.path().join("cache"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // Before fill-card, --check fails and names the command to run.
    let stale = kb(&["fill-card", "--check", dir.as_str()]);
    assert_eq!(stale.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&stale.stderr),
        format!("`{dir}/build/CARD.md` does not exist: run `kernel-builder fill-card {dir}`\n")
    );

    let out = kb(&["fill-card", dir.as_str()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("wrote `{dir}/build/CARD.md` (upload publishes it as README.md)\n")
    );
    let first = card(&dir);
    insta::assert_snapshot!(first);

    // Deterministic: a second run rewrites nothing and --check passes.
    let again = kb(&["fill-card", dir.as_str()]);
    assert_eq!(String::from_utf8_lossy(&again.stdout), format!("`{dir}/build/CARD.md` is up to date\n"));
    assert_eq!(card(&dir), first);
    assert_eq!(kb(&["fill-card", "--check", dir.as_str()]).status.code(), Some(0));

    // A variant removed from build/: the card is stale, and refilling drops its row only.
    std::fs::remove_dir_all(dir.join("build/torch-rocm")).unwrap();
    let stale = kb(&["fill-card", "--check", dir.as_str()]);
    assert_eq!(stale.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&stale.stderr),
        format!("`{dir}/build/CARD.md` is stale: run `kernel-builder fill-card {dir}`\n")
    );
    assert_eq!(kb(&["fill-card", dir.as_str()]).status.code(), Some(0));
    let rocm_row = "| `torch-rocm` | rocm | any | `_vector_add_helion_rocm_d363fde` | any (noarch) |\n";
    assert!(first.contains(rocm_row));
    assert_eq!(card(&dir), first.replace(rocm_row, ""));
}

/// A variant's metadata.json as build-and-copy writes it (the fields the card reads, and more).
fn metadata(id: &str, backend: &str, archs: Option<&[&str]>, torch: &str) -> String {
    let mut b = serde_json::json!({"type": backend});
    if let Some(a) = archs {
        b["archs"] = serde_json::json!(a);
    }
    serde_json::to_string_pretty(&serde_json::json!({
        "name": "relu", "id": id, "version": 1, "license": "Apache-2.0",
        "python-depends": [], "kernel-depends": [], "backend": b,
        "build": {"native": true, "hermetic": false, "toolchain": {"torch": torch, "python": "3.11"}}
    }))
    .unwrap()
}

#[test]
fn the_authors_card_keeps_its_text_and_compiled_variants_show_capabilities() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = copy_kernel(&tmp, "relu");
    let author = "---\nlicense: apache-2.0\n---\n\n# relu\n\nHand-written text.\n\n## Benchmarks\n\nKept.\n";
    std::fs::write(dir.join("CARD.md"), author).unwrap();
    for (v, id, backend, archs, torch) in [
        (
            "torch211-cxx11-cu130-x86_64-linux",
            "_relu_cuda_8a40449",
            "cuda",
            Some(&["9.0", "10.0"][..]),
            "2.11.0+cu130",
        ),
        ("torch211-cxx11-cpu-x86_64-linux", "_relu_cpu_8a40449", "cpu", None, "2.11.0+cpu"),
    ] {
        std::fs::create_dir_all(dir.join("build").join(v)).unwrap();
        std::fs::write(dir.join("build").join(v).join("metadata.json"), metadata(id, backend, archs, torch))
            .unwrap();
    }
    // Not a variant: a file in build/ is ignored.
    std::fs::write(dir.join("build/hashes.json"), "{}").unwrap();
    let out = kb(&["fill-card", dir.as_str()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let section = "<!-- kernel-builder: build-variants (generated by `kernel-builder fill-card` from build.toml and build/*/metadata.json; edits here are replaced) -->
## Build variants

`relu` version 1 (branch `v1`), license `Apache-2.0`, for `cpu`, `cuda`, `metal`, `rocm`, `xpu`. The package `relu` exports `relu`.

The `kernels` loader picks the variant that matches the installed torch and device:

| variant | backend | capabilities | op namespace | built with torch |
| --- | --- | --- | --- | --- |
| `torch211-cxx11-cpu-x86_64-linux` | cpu | any | `_relu_cpu_8a40449` | 2.11.0+cpu |
| `torch211-cxx11-cu130-x86_64-linux` | cuda | 9.0, 10.0 | `_relu_cuda_8a40449` | 2.11.0+cu130 |
<!-- /kernel-builder: build-variants -->
";
    assert_eq!(card(&dir), format!("{}\n\n{section}", author.trim_end()));

    // The author moves the section above Benchmarks: refilling replaces it in place.
    let moved = format!("---\nlicense: apache-2.0\n---\n\n# relu\n\n{section}\n## Benchmarks\n\nKept.\n");
    std::fs::write(dir.join("CARD.md"), &moved).unwrap();
    assert_eq!(kb(&["fill-card", "--check", dir.as_str()]).status.code(), Some(1));
    assert_eq!(kb(&["fill-card", dir.as_str()]).status.code(), Some(0));
    assert_eq!(card(&dir), moved);

    // A variant without metadata.json: an error naming it, and the card is left as it was.
    std::fs::create_dir_all(dir.join("build/torch-cpu")).unwrap();
    let out = kb(&["fill-card", dir.as_str()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "variant `torch-cpu` has no readable metadata.json: rebuild it (`kernel-builder build-and-copy {dir}`)"
        )),
        "{err}"
    );
    assert_eq!(card(&dir), moved);
}

#[test]
fn no_build_directory_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = copy_kernel(&tmp, "relu");
    let out = kb(&["fill-card", dir.as_str()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("error: `{dir}/build` does not exist: build the variants first (`kernel-builder build-and-copy {dir}`)\n")
    );
    assert!(!dir.join("build").exists());
}
