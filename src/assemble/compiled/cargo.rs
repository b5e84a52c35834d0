//! A Rust kernel's cell (`language = "rust-cpu"`): cargo builds the crate of its
//! `cargo-manifest` as a C dynamic library that exports TVM-FFI functions (the `tvm-ffi`
//! crate's `tvm_ffi_dll_export_typed_func!`), and that library is the variant's
//! `<op namespace>.so`, opened by `_ops.py` with `tvm_ffi.load_module` as a C++ tvm-ffi
//! cell's is. The 0.19 loader takes Rust kernels in `[tvm-ffi]` kernels only, so the tree is a
//! tvm-ffi tree (`tvm-ffi01-cpu-x86_64-linux`) and everything after the compile is
//! [`super::write_variant`].
//!
//! How the crate is built, and why:
//!
//! - from a mirror of the source set in the cell's work directory (`cargo-v1/<kernel
//!   hash>/<variant>/src` in the cache root, or a fresh temporary directory), never in the
//!   user's checkout: cargo sees exactly the files `build.toml` lists (plus the manifest and its
//!   `Cargo.lock`), and writes nothing beside them; `CARGO_TARGET_DIR` is in the work directory
//!   too, kept between `build-and-copy` runs so an unchanged rebuild compiles nothing;
//! - `--locked`: the lock file decides every dependency; `cargo fetch --offline` first, so a
//!   build whose locked crates are already in cargo's cache never touches the network, then
//!   `cargo fetch` (the registry) only for what is missing, then `cargo build --frozen`;
//! - `tvm-ffi-sys`'s build script links the `libtvm_ffi` that `tvm-ffi-config --libdir`
//!   prints: a `tvm-ffi-config` of the cell's own, first on `PATH`, answers with the tvm_ffi
//!   package the cell was planned with, so the library links what the variant is named for;
//! - reproducible bytes: the source mirror, the target directory and cargo's home are mapped
//!   away (`--remap-path-prefix`), rustc links with the cell's C++ compiler (`-C linker`), and
//!   release builds carry no timestamps, so a rebuild is byte for byte the same.

use std::collections::{BTreeMap, VecDeque};

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};
use serde::Deserialize;

use super::{
    remove_unwanted, sync_copy, sync_file, write_variant, CargoTools, CellBuilt, CompiledCell, WorkDir,
};
use crate::assemble::build_layout::BuildLayout;
use crate::config::BuildConfig;
use crate::source::provenance::BuildIds;
use crate::source::{SourceSet, Warning};
use crate::toolchain::host::CellFramework;

/// The directory in the cache root holding Rust cells' work directories.
pub const CARGO_WORK_DIR: &str = "cargo-v1";

/// Lines of cargo's own output (not its JSON messages) an error shows.
const TAIL_LINES: usize = 40;

/// Build the Rust cell `cell` (its crate named by `tools`) into `out_variant_dir`, which must
/// not exist. Errors: no `Cargo.lock` beside the manifest, cargo failing (the error names the
/// manifest and shows cargo's first errors and last lines), a crate that builds no cdylib,
/// and everything [`super::write_variant`] refuses.
#[allow(clippy::too_many_arguments)] // build_cell's arguments, plus the cargo tools
pub(super) fn build(
    source: &SourceSet,
    config: &BuildConfig,
    cell: &CompiledCell,
    tools: &CargoTools,
    ids: &BuildIds,
    out_variant_dir: &Utf8Path,
    work: &WorkDir,
    layout: BuildLayout,
) -> anyhow::Result<CellBuilt> {
    let CellFramework::TvmFfi(tvm_ffi) = &cell.framework else {
        anyhow::bail!(
            "`[kernel.{}]` is a Rust kernel, which builds in a `[tvm-ffi]` kernel only",
            tools.kernel
        );
    };
    let root = source.root().canonicalize_utf8().unwrap_or_else(|_| source.root().to_owned());
    let manifest_shown = root.join(&tools.manifest);
    let lock_rel = Utf8Path::new(&tools.manifest).with_file_name("Cargo.lock");
    if !source.files().iter().any(|f| f.rel == lock_rel) {
        anyhow::bail!(
            "`{}` has no `Cargo.lock` beside it (`{}`): a Rust kernel builds `--locked`, so that every build uses the same dependency versions; run `cargo generate-lockfile --manifest-path {manifest_shown}` and keep Cargo.lock with the kernel",
            manifest_shown,
            root.join(&lock_rel)
        );
    }

    let _fresh;
    let work_dir: Utf8PathBuf = match work {
        WorkDir::Cache { kernel_dir, .. } => {
            super::kernel_work_dir(kernel_dir, CARGO_WORK_DIR, &cell.variant)?.0
        }
        WorkDir::Fresh => {
            let (p, fresh) = super::fresh_work_dir("kernel-builder-cargo-")?;
            _fresh = fresh;
            p
        }
    };
    let _work_lock = crate::assemble::workdirs::lock_work_dir(&work_dir)?;
    let src_dir = work_dir.join("src");
    let target_dir = work_dir.join("target");
    let bin_dir = work_dir.join("bin");
    let tmp_dir = work_dir.join("tmp");
    std::fs::create_dir_all(&tmp_dir).with_context(|| format!("cannot create `{tmp_dir}`"))?;

    // The crate's files, exactly the source set.
    let mut wanted = Vec::new();
    for f in source.files() {
        sync_copy(&f.abs, &src_dir.join(&f.rel))?;
        wanted.push(f.rel.clone());
    }
    remove_unwanted(&src_dir, &wanted)?;
    let config_script = bin_dir.join("tvm-ffi-config");
    sync_file(
        &config_script,
        tvm_ffi_config_script(&tvm_ffi.package_dir.join("lib"), &tvm_ffi.include_dir()).as_bytes(),
    )?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&config_script, std::fs::Permissions::from_mode(0o755))
            .with_context(|| format!("cannot make `{config_script}` executable"))?;
    }

    let manifest = src_dir.join(&tools.manifest);
    let cargo_home = crate::env::CARGO_HOME
        .non_empty()
        .map(Utf8PathBuf::from)
        .or_else(|| crate::env::HOME.non_empty().map(|h| Utf8PathBuf::from(h).join(".cargo")));
    let mut rustflags = vec![
        "-C".to_owned(),
        format!("linker={}", cell.cxx.path),
        format!("--remap-path-prefix={src_dir}=/kernel"),
        format!("--remap-path-prefix={target_dir}=/target"),
    ];
    if let Some(home) = &cargo_home {
        rustflags.push(format!("--remap-path-prefix={home}=/cargo"));
    }
    let path = match crate::env::PATH.non_empty() {
        Some(p) => format!("{bin_dir}:{p}"),
        None => bin_dir.to_string(),
    };
    let env: Vec<(String, String)> = vec![
        ("PATH".into(), path),
        ("CARGO_TARGET_DIR".into(), target_dir.to_string()),
        ("RUSTC".into(), tools.rustc.path.to_string()),
        // Unit-separated, so that a path with a space stays one flag.
        ("CARGO_ENCODED_RUSTFLAGS".into(), rustflags.join("\u{1f}")),
        ("CARGO_TERM_COLOR".into(), "never".into()),
        ("CARGO_INCREMENTAL".into(), "0".into()),
    ];
    let what = format!("`[kernel.{}]` (`{manifest_shown}`)", tools.kernel);
    let shown = |text: String| text.replace(&format!("{src_dir}/"), &format!("{root}/"));
    let manifest_arg = ["--manifest-path".to_owned(), manifest.to_string()];

    // The locked crates: from cargo's cache when it has them all, else the registry.
    let fetch = |offline: bool| {
        let mut args = vec!["fetch".to_owned()];
        args.extend(manifest_arg.iter().cloned());
        args.push("--locked".into());
        if offline {
            args.push("--offline".into());
        }
        run_cargo(&tools.cargo.path, &args, &env, &tmp_dir, |_| {})
    };
    if fetch(true)?.is_err() {
        if let Err(failed) = fetch(false)? {
            anyhow::bail!(
                "cargo could not fetch the dependencies of {what} locked in its Cargo.lock (offline from cargo's cache, then from the registry): {}",
                shown(failed)
            );
        }
    }

    let mut args = vec!["build".to_owned()];
    args.extend(manifest_arg.iter().cloned());
    args.extend(
        ["--release", "--frozen", "--lib", "--message-format=json-render-diagnostics"].map(String::from),
    );
    let mut cdylibs: Vec<Utf8PathBuf> = Vec::new();
    let built = run_cargo(&tools.cargo.path, &args, &env, &tmp_dir, |msg| {
        if let Some(files) = cdylib_of(msg, &manifest) {
            cdylibs.extend(files);
        }
    })?;
    if let Err(failed) = built {
        anyhow::bail!("cargo could not build {what}: {}", shown(failed));
    }
    let module = match cdylibs.as_slice() {
        [one] => one.clone(),
        [] => anyhow::bail!(
            "`{manifest_shown}` builds no C dynamic library for the variant to load: add `[lib] crate-type = [\"cdylib\"]` to it"
        ),
        many => anyhow::bail!(
            "`{manifest_shown}` builds {} shared libraries ({}); a Rust kernel's crate builds one cdylib",
            many.len(),
            many.iter().map(|p| format!("`{p}`")).collect::<Vec<_>>().join(", ")
        ),
    };

    let ops_name =
        crate::assemble::noarch::op_namespace(&config.general.python_name(), cell.backend, &ids.uid);
    let mut toolchain = BTreeMap::new();
    toolchain.insert("cargo".to_owned(), tools.cargo.version.clone());
    toolchain.insert("rustc".to_owned(), tools.rustc.version.clone());
    toolchain.insert("linker".to_owned(), cell.cxx.version.clone());
    let warnings: Vec<Warning> =
        write_variant(source, config, cell, ids, out_variant_dir, layout, &ops_name, &module, toolchain)?;
    let _ = std::fs::remove_dir_all(&tmp_dir);
    Ok(CellBuilt { warnings, compiles: None, parallel: None, phases: None })
}

/// The `tvm-ffi-config` tvm-ffi-sys's build script runs: `--libdir` and `--includedir` of
/// the cell's tvm_ffi package; any other question fails, saying so.
fn tvm_ffi_config_script(libdir: &Utf8Path, includedir: &Utf8Path) -> String {
    let quote = |p: &Utf8Path| format!("'{}'", p.as_str().replace('\'', r"'\''"));
    format!(
        "#!/bin/sh\n# Written by kernel-builder: the tvm-ffi of this cell, for tvm-ffi-sys's build script.\ncase \"$1\" in\n  --libdir) echo {} ;;\n  --includedir) echo {} ;;\n  *) echo \"tvm-ffi-config (kernel-builder): only --libdir and --includedir are answered, not $1\" >&2; exit 2 ;;\nesac\n",
        quote(libdir),
        quote(includedir)
    )
}

/// One JSON message of `cargo --message-format=json…` (the fields read here).
#[derive(Deserialize)]
struct Message {
    reason: String,
    #[serde(default)]
    manifest_path: Option<Utf8PathBuf>,
    #[serde(default)]
    target: Option<Target>,
    #[serde(default)]
    filenames: Vec<Utf8PathBuf>,
}

#[derive(Deserialize)]
struct Target {
    #[serde(default)]
    kind: Vec<String>,
}

/// The shared libraries of a `compiler-artifact` message for the cdylib target of the crate
/// whose manifest is `manifest`; `None` for any other message.
fn cdylib_of(line: &str, manifest: &Utf8Path) -> Option<Vec<Utf8PathBuf>> {
    let m: Message = serde_json::from_str(line).ok()?;
    let cdylib = m.reason == "compiler-artifact"
        && m.manifest_path.as_deref() == Some(manifest)
        && m.target.is_some_and(|t| t.kind.iter().any(|k| k == "cdylib"));
    cdylib.then(|| m.filenames.into_iter().filter(|f| f.extension() == Some("so")).collect())
}

/// Run cargo with `args` and `env` (a process group of its own, `TMPDIR` the cell's): each
/// JSON message goes to `on_message`; other lines are cargo's and the compiler's text, of
/// which the first errors and the last [`TAIL_LINES`] are kept (memory stays bounded).
/// `Ok(Err(text))`: cargo failed, `text` says how (the command, the status, those lines).
fn run_cargo(
    cargo: &Utf8Path,
    args: &[String],
    env: &[(String, String)],
    tmp_dir: &Utf8Path,
    mut on_message: impl FnMut(&str),
) -> anyhow::Result<Result<(), String>> {
    anyhow::ensure!(!crate::interrupt::interrupted(), "cargo not started: interrupted");
    let cmd = super::cmake::tool_command(cargo, args, env, tmp_dir);
    let mut first_errors: Vec<String> = Vec::new();
    let mut tail: VecDeque<String> = VecDeque::new();
    let streamed = cmd
        .stream(
            0,
            |_| {},
            |line| {
                if line.starts_with('{') {
                    on_message(line);
                    return;
                }
                if first_errors.len() < crate::output::FIRST_ERRORS && crate::output::is_error_line(line) {
                    first_errors.push(line.to_owned());
                }
                if tail.len() == TAIL_LINES {
                    tail.pop_front();
                }
                tail.push_back(line.to_owned());
            },
        )
        .with_context(|| format!("cannot run `{cargo}`"))?;
    if streamed.status.success() {
        return Ok(Ok(()));
    }
    let command: Vec<String> = std::iter::once(cargo.to_string()).chain(args.iter().cloned()).collect();
    let last: Vec<String> = tail.into_iter().collect();
    Ok(Err(format!(
        "{}: `{}`\n{}--- last lines of its output ---\n{}\n---",
        streamed.status,
        command.join(" "),
        crate::output::first_errors_block(&first_errors),
        last.join("\n")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_script_answers_the_cells_tvm_ffi() {
        let s = tvm_ffi_config_script(Utf8Path::new("/v/tvm_ffi/lib"), Utf8Path::new("/v/it's/include"));
        assert_eq!(
            s,
            "#!/bin/sh\n# Written by kernel-builder: the tvm-ffi of this cell, for tvm-ffi-sys's build script.\ncase \"$1\" in\n  --libdir) echo '/v/tvm_ffi/lib' ;;\n  --includedir) echo '/v/it'\\''s/include' ;;\n  *) echo \"tvm-ffi-config (kernel-builder): only --libdir and --includedir are answered, not $1\" >&2; exit 2 ;;\nesac\n"
        );
    }

    #[test]
    fn only_the_crates_cdylib_artifact_is_taken() {
        let m = Utf8Path::new("/w/src/Cargo.toml");
        let art = |manifest: &str, kind: &str, files: &str| {
            format!(
                r#"{{"reason":"compiler-artifact","package_id":"x","manifest_path":"{manifest}","target":{{"kind":["{kind}"],"name":"x"}},"filenames":[{files}],"fresh":false}}"#
            )
        };
        assert_eq!(
            cdylib_of(&art("/w/src/Cargo.toml", "cdylib", r#""/t/release/librelu.so""#), m),
            Some(vec![Utf8PathBuf::from("/t/release/librelu.so")])
        );
        assert_eq!(cdylib_of(&art("/w/src/Cargo.toml", "lib", r#""/t/release/librelu.rlib""#), m), None);
        assert_eq!(cdylib_of(&art("/cargo/tvm-ffi/Cargo.toml", "cdylib", r#""/t/x.so""#), m), None);
        assert_eq!(cdylib_of(r#"{"reason":"build-finished","success":true}"#, m), None);
        assert_eq!(cdylib_of("error: not json", m), None);
    }
}
