//! `symbols.json` of a variant: the kernel's public functions and layers with their
//! signatures, in the schema `kernels describe-api` (kernels ≥ 0.18.3) reads (`schema_version`
//! 1: `module`, `functions` and `layers`, each symbol with `name`, `qualname`, `module`,
//! `kind`, `doc`, `signature` and, for layers, the `has_backward` / `can_torch_compile`
//! attributes).
//!
//! # How, and for which variants
//!
//! The symbols are what the built package exports, so they are read from it: `symbols.py`
//! (beside this file, embedded) imports the variant directory as the package named for its
//! metadata `id` (the name the loader gives it) with the Python of the cell that built it, and
//! inspects `__all__` of the package and of its `layers` module without calling anything.
//! Reading the source instead would miss what only importing shows (re-exports, inherited
//! signatures and docs, annotations as the interpreter formats them).
//!
//! Importing needs the framework the variant was built against in that Python, so:
//!
//! - a compiled variant built with `--python` (whose torch or tvm_ffi built it) gets
//!   `symbols.json`; when the package raises while it is imported (it needs a device, or a
//!   module that Python lacks: a tvm-ffi kernel importing torch in a Python with tvm_ffi only)
//!   the build warns, naming the exception, and goes on without it;
//! - a compiled variant built from pinned wheels (the interpreter only supplies `Python.h`; a
//!   Nix cell: importing the pinned torch would need its runtime dependencies, NVIDIA's
//!   libraries among them, which are not pinned) and a variant with `kernel-depends` (its
//!   package asks the loader for its dependencies while it is imported) get none; `symbols.py`
//!   finds the first case itself (it exits with status 3 when the interpreter's torch is not
//!   the cell's);
//! - a noarch variant (`torch-<backend>`, Helion's, MLX's `mlx-metal`) gets none: a noarch
//!   build has no Python at all (a Nix noarch cell runs without one), and its bytes must not
//!   depend on whether the machine has torch, Helion or MLX.
//!
//! `kernels describe-api` on a variant without the file says "No symbols.json found".
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
    super::noarch::write_file(&variant_dir.join(FILE_NAME), &bytes)?;
    Ok(Outcome::Written)
}

/// Check `bytes` as `kernels describe-api` does: a JSON object with `schema_version` 1,
/// `functions` and `layers` lists of objects with a string `name`, each layer's `attributes` an
/// object of booleans or nulls. The error completes "the symbols.json … ".
pub fn check(bytes: &[u8]) -> Result<(), String> {
    let v: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| format!("is not JSON ({e})"))?;
    if v.get("schema_version").and_then(|s| s.as_u64()) != Some(1) {
        return Err("does not say `schema_version` 1".to_owned());
    }
    for group in ["functions", "layers"] {
        let named = |s: &serde_json::Value| s.get("name").is_some_and(|n| n.is_string());
        match v.get(group).and_then(|g| g.as_array()) {
            Some(list) if list.iter().all(named) => {}
            _ => return Err(format!("has `{group}` that is not a list of named symbols")),
        }
    }
    for layer in v["layers"].as_array().into_iter().flatten() {
        let ok = layer
            .get("attributes")
            .and_then(|a| a.as_object())
            .is_some_and(|a| a.values().all(|x| x.is_boolean() || x.is_null()));
        if !ok {
            return Err(format!("has a layer `{}` whose attributes are not booleans or null", layer["name"]));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_reads_what_describe_api_reads() {
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
