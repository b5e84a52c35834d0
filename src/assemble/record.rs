//! A copy of every variant this process builds, kept for an independent check after the fact:
//! with `KERNEL_BUILDER_RECORD_VARIANTS=DIR`, each variant [`super::assemble_variant`] writes is
//! also copied to `DIR/<variant>-<random>/<variant>/`.
//!
//! The test suite sets it (scripts/test.sh) so that the digest of every tree the suite builds,
//! in whatever temporary directory a test builds it and removes it, can be checked against the
//! loader's own `Digest.hash_variant` at the end (tests/python/recorded_digests_check.py). A
//! copy, not a hard link: tests tamper with built trees on purpose afterwards.
//!
//! The copy is written as `.partial-<variant>` and renamed, so a process killed half-way leaves
//! nothing that looks whole. What is built is copied, not what is reused: a variant taken from
//! the native cell cache is a copy of an earlier build (and a cache test serves a tampered entry
//! on purpose, to show that `verify` catches it); Nix cells, whose builder sees no outside
//! environment, are not copied either (the parity tests compare them with the native build).

use anyhow::Context;
use camino::Utf8Path;

/// Copy the finished variant directory `variant_dir` under the directory named by
/// `KERNEL_BUILDER_RECORD_VARIANTS`, when set (else nothing).
///
/// Errors: that directory cannot be created, or the copy cannot be written (the build fails:
/// whoever set the variable relies on every variant being there).
pub fn record(variant_dir: &Utf8Path) -> anyhow::Result<()> {
    match crate::env::RECORD_VARIANTS.setting()? {
        Some(dir) => record_into(Utf8Path::new(&dir), variant_dir),
        None => Ok(()),
    }
}

fn record_into(dir: &Utf8Path, variant_dir: &Utf8Path) -> anyhow::Result<()> {
    let name = variant_dir.file_name().with_context(|| format!("`{variant_dir}` has no name"))?;
    let fail = || format!("cannot record `{variant_dir}` in `{dir}` (KERNEL_BUILDER_RECORD_VARIANTS)");
    std::fs::create_dir_all(dir).with_context(fail)?;
    let slot =
        tempfile::Builder::new().prefix(&format!("{name}-")).tempdir_in(dir).with_context(fail)?.keep();
    let slot = Utf8Path::from_path(&slot).with_context(fail)?;
    let partial = slot.join(format!(".partial-{name}"));
    crate::fsutil::copy_tree(variant_dir, &partial).with_context(fail)?;
    std::fs::rename(&partial, slot.join(name)).with_context(fail)
}

#[cfg(test)]
mod tests {
    #[test]
    fn copies_the_tree_under_a_fresh_slot() {
        let tmp = tempfile::tempdir().unwrap();
        let root = camino::Utf8Path::from_path(tmp.path()).unwrap();
        let variant = root.join("src").join("torch-cpu");
        std::fs::create_dir_all(variant.join("sub")).unwrap();
        std::fs::write(variant.join("__init__.py"), "x = 1\n").unwrap();
        std::fs::write(variant.join("sub").join("a.py"), "").unwrap();
        let out = root.join("recorded");
        super::record_into(&out, &variant).unwrap();
        super::record_into(&out, &variant).unwrap();
        let mut slots: Vec<_> = std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().path()).collect();
        slots.sort();
        assert_eq!(slots.len(), 2);
        for slot in slots {
            let names: Vec<_> = std::fs::read_dir(&slot).unwrap().map(|e| e.unwrap().file_name()).collect();
            assert_eq!(names, ["torch-cpu"]);
            assert!(slot.file_name().unwrap().to_str().unwrap().starts_with("torch-cpu-"));
            assert_eq!(std::fs::read_to_string(slot.join("torch-cpu/__init__.py")).unwrap(), "x = 1\n");
            assert_eq!(std::fs::read_to_string(slot.join("torch-cpu/sub/a.py")).unwrap(), "");
        }
    }
}
