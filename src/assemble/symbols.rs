//! `symbols.json` of a variant: the kernel's public functions and layers with their
//! signatures, in the schema `kernels describe-api` (kernels ≥ 0.18.3) reads (`schema_version`
//! 1: `module`, `functions` and `layers`, each symbol with `name`, `qualname`, `module`,
//! `kind`, `doc`, `signature` and, for layers, the `has_backward` / `can_torch_compile`
//! attributes).
//!
//! # How, and for which variants
//!
//! Every variant gets the file, made one of two ways:
//!
//! - **imported** ([`write_symbols`]), for a compiled variant built with `--python` (whose torch
//!   or tvm_ffi built it): `symbols.py` (beside this file, embedded) imports the variant
//!   directory as the package named for its metadata `id` (the name the loader gives it) with
//!   the Python of the cell, and inspects `__all__` of the package and of its `layers` module
//!   without calling anything, so it shows what a user's import shows (inherited signatures and
//!   docs, annotations as the interpreter formats them);
//! - **read from the sources** ([`write_static_symbols`], [`super::static_symbols`]), for the
//!   rest: noarch variants (`torch-<backend>`, Helion's, MLX's `mlx-metal`: a noarch Nix cell
//!   runs no Python, and their bytes must not depend on the machine's torch, Helion or MLX),
//!   compiled variants built from pinned wheels (importing the pinned torch would need its
//!   unpinned runtime libraries; `symbols.py` exits with status 3 when the interpreter's
//!   framework is not the cell's), variants with `kernel-depends` (their package asks the
//!   loader for its dependencies while it is imported) and packages that raise while they are
//!   imported (the build warns, naming the exception).
//!
//! A computed `__all__` leaves a variant read from its sources without the file, with a
//! warning; `kernels describe-api` then says "No symbols.json found".
//!
//! The file is written before the digest, which covers it (the loader's digest lists every file
//! but `metadata.json`), and outside a zip layout's archive. Memory addresses in reprs are
//! removed so that a rebuild writes the same bytes.

use anyhow::Context;
use camino::Utf8Path;

use crate::toolchain::host::CellFramework;

/// The file name in the variant directory.
pub const FILE_NAME: &str = "symbols.json";

/// The inspection program run with the cell's Python.
const PROGRAM: &str = include_str!("symbols.py");

/// Its exit status when the interpreter's framework is not the cell's.
const NOT_THIS_FRAMEWORK: i32 = 3;
/// Its exit status when the package raised while it was imported.
const DOES_NOT_IMPORT: i32 = 4;

/// The largest `symbols.json` read back (a kernel's API is kilobytes).
const MAX_BYTES: u64 = 16 << 20;

/// What [`write_symbols`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// `symbols.json` was written.
    Written,
    /// None was written: the interpreter's framework is not the cell's (pinned wheels); why.
    Skipped(String),
    /// None was written: the package raised while it was imported; the exception.
    DoesNotImport(String),
}

/// Write `variant_dir/symbols.json` for the package in `variant_dir` (package files at its
/// top), imported as `module_name` by the interpreter of `framework`.
///
/// Errors: the package's `__all__` is malformed (the end of Python's output is shown), the
/// program cannot run, or what it wrote is not schema version 1. A package that raises while
/// it is imported is [`Outcome::DoesNotImport`]: the build goes on without the file (a kernel
/// may need a device, or a module the build's Python lacks, to import), and says so.
pub fn write_symbols(
    variant_dir: &Utf8Path,
    module_name: &str,
    framework: &CellFramework,
) -> anyhow::Result<Outcome> {
    let (name, dir) = match framework {
        CellFramework::Torch(t) => ("torch", t.torch_dir.as_path()),
        CellFramework::TvmFfi(f) => ("tvm_ffi", f.package_dir.as_path()),
    };
    let tmp = tempfile::Builder::new()
        .prefix("kernel-builder-symbols-")
        .tempdir()
        .context("cannot create a temporary directory for symbols.json")?;
    let tmp_dir = Utf8Path::from_path(tmp.path()).context("the temporary directory's path is not UTF-8")?;
    let program = tmp_dir.join("symbols.py");
    std::fs::write(&program, PROGRAM).with_context(|| format!("cannot write `{program}`"))?;
    let out = tmp_dir.join(FILE_NAME);
    let python = framework.executable();
    let cmd = crate::process::Cmd::new(python.as_str())
        .args(["-B", program.as_str(), variant_dir.as_str(), module_name, name, dir.as_str(), out.as_str()])
        .dir(tmp_dir)
        .env("PYTHONDONTWRITEBYTECODE", "1");
    let run = cmd
        .stream(40, |_| {}, |_| {})
        .map_err(|e| anyhow::anyhow!("cannot describe the kernel's API: {e}"))?;
    let said = run.tail.iter().cloned().collect::<Vec<_>>().join("\n");
    match run.status.code() {
        Some(0) => {}
        Some(NOT_THIS_FRAMEWORK) => return Ok(Outcome::Skipped(said)),
        Some(DOES_NOT_IMPORT) => {
            return Ok(Outcome::DoesNotImport(run.tail.back().cloned().unwrap_or_default()));
        }
        _ => anyhow::bail!(
            "cannot describe the kernel's API for symbols.json with `{python}` ({}); fix the package:\n{said}",
            run.status
        ),
    }
    let bytes = crate::fsutil::read_bounded(&out, MAX_BYTES, "symbols.json")?;
    check(&bytes).map_err(|why| anyhow::anyhow!("the symbols.json written for `{variant_dir}` {why}"))?;
    super::write::write_file(&variant_dir.join(FILE_NAME), &bytes)?;
    Ok(Outcome::Written)
}

/// Write `variant_dir/symbols.json` read from the package's sources without importing them
/// ([`super::static_symbols`]), for the variants no Python imports while they are built.
/// `Ok(Some(warning))` when `__all__` is computed, so no file is written (the warning names
/// the line).
pub fn write_static_symbols(
    variant_dir: &Utf8Path,
    module_name: &str,
    variant: &str,
) -> anyhow::Result<Option<String>> {
    use super::static_symbols::{extract, Extracted};
    match extract(variant_dir, module_name).with_context(|| format!("cannot write symbols.json of `{variant}`"))? {
        Extracted::Document(bytes) => {
            check(&bytes).map_err(|why| anyhow::anyhow!("the symbols.json read for `{variant_dir}` {why}"))?;
            super::write::write_file(&variant_dir.join(FILE_NAME), &bytes)?;
            Ok(None)
        }
        Extracted::Dynamic { file, line } => Ok(Some(format!(
            "`{variant}` has no symbols.json (`kernels describe-api` cannot list its API): `__all__` at `{file}` line {line} is computed; write it as a literal list of names"
        ))),
    }
}

/// Check `bytes` as `kernels describe-api` does: a JSON object with `schema_version` 1,
/// `functions` and `layers` lists of objects with a string `name`, each layer's `attributes` an
/// object of booleans or nulls. The error completes "the symbols.json … ".
pub fn check(bytes: &[u8]) -> anyhow::Result<()> {
    let v: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| anyhow::anyhow!("is not JSON ({e})"))?;
    anyhow::ensure!(
        v.get("schema_version").and_then(|s| s.as_u64()) == Some(1),
        "does not say `schema_version` 1"
    );
    for group in ["functions", "layers"] {
        let named = |s: &serde_json::Value| s.get("name").is_some_and(|n| n.is_string());
        match v.get(group).and_then(|g| g.as_array()) {
            Some(list) if list.iter().all(named) => {}
            _ => anyhow::bail!("has `{group}` that is not a list of named symbols"),
        }
    }
    for layer in v["layers"].as_array().into_iter().flatten() {
        let ok = layer
            .get("attributes")
            .and_then(|a| a.as_object())
            .is_some_and(|a| a.values().all(|x| x.is_boolean() || x.is_null()));
        anyhow::ensure!(ok, "has a layer `{}` whose attributes are not booleans or null", layer["name"]);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn check_reads_what_describe_api_reads() {
        let check = |bytes: &[u8]| super::check(bytes).map_err(|e| e.to_string());
        assert_eq!(check(br#"{"schema_version": 1, "functions": [], "layers": []}"#), Ok(()));
        assert_eq!(
            check(br#"{"schema_version": 1, "functions": [{"name": "relu"}], "layers": [{"name": "ReLU", "attributes": {"has_backward": true, "can_torch_compile": null}}]}"#),
            Ok(())
        );
        assert_eq!(
            check(br#"{"schema_version": 2, "functions": [], "layers": []}"#),
            Err("does not say `schema_version` 1".into())
        );
        assert_eq!(
            check(br#"{"schema_version": 1, "functions": [{"qualname": "x"}], "layers": []}"#),
            Err("has `functions` that is not a list of named symbols".into())
        );
        assert_eq!(
            check(br#"{"schema_version": 1, "functions": [], "layers": [{"name": "L", "attributes": {"has_backward": 1}}]}"#),
            Err("has a layer `\"L\"` whose attributes are not booleans or null".into())
        );
        assert!(check(b"[").unwrap_err().starts_with("is not JSON ("));
    }
}
