//! The native cell cache: a variant directory built once is reused by every later native
//! build of the same cell from the same sources with the same toolchain.
//!
//! # Where
//!
//! `<cache root>/native-cells-v1/` ([`DIR_NAME`]; the cache root is
//! [`crate::fsutil::cache_root`]: `$KERNEL_BUILDER_CACHE_DIR`, else
//! `$XDG_CACHE_HOME/kernel-builder`, else `~/.cache/kernel-builder`). The `v1` changes when the
//! layout of an entry or of the key changes, so an older binary's entries are never read.
//!
//! ```text
//! native-cells-v1/
//!   <key: 64 hex digits>/
//!     entry.json   {"format", "variant", "nar_hash", "size", "warnings", "inputs"}
//!     tree/        the variant directory, as the build wrote it
//!   .tmp-*/        an entry being written (renamed to <key> when complete)
//! ```
//!
//! # The key
//!
//! SHA-256 of a JSON document ([`CellKey::inputs`], also kept in `entry.json` to show why two
//! builds did or did not share an entry) holding everything the variant's bytes depend on:
//!
//! - the source: the git tree id of the exact source set ([`SourceSet::tree_id`], computed from
//!   the files' contents, so an edited, uncommitted tree keys by what it holds, not by `HEAD`),
//!   and a digest of the configuration model read from `build.toml`;
//! - the cell: the variant name, the backend, noarch or compiled, and the kernel revision as
//!   `metadata.json` records it (only a dirty one is recorded, see
//!   [`crate::source::provenance`]);
//! - kernel-builder itself: its version, the commit and dirty flag baked in, the matrix data
//!   version, and the size and modification time of the running executable (a rebuilt binary,
//!   whose assembly or code generation may differ, never reuses an older one's cells);
//! - compiled cells also: every fact the compile uses ([`crate::assemble::compiled::cell_facts`], computed
//!   with fixed placeholder work directories, which the binaries never see: defines, include
//!   directories, libraries, `-gencode` pairs, compiler flags, dependency checkouts by path),
//!   the generated CMake project's files, the toolchain (path, `--version` line, size and
//!   modification time of CMake, Ninja, the C++ compiler and nvcc; for a cell provisioned from
//!   pins, every wheel's pinned sha256 and each unpacked tree's recorded hash (the toolchain
//!   cache checks the trees against it on every use, [`crate::toolchain::seal`]); the host's
//!   `Python.h` and `patchlevel.h` (size and modification time); torch's version, directory,
//!   CUDA/HIP/XPU build, C++ ABI, its `version.py` size and modification time, or for a
//!   tvm-ffi cell tvm_ffi's version and package directory with the size and modification time
//!   of its `_version.py`, `libtvm_ffi.so` and every file under its `include/` (path, size,
//!   modification time); the Python version and interpreter; the package
//!   set, hermetic flag and manylinux policy), and the
//!   environment variables CMake and the compilers read ([`crate::assemble::compiled::BUILD_ENV`]).
//!
//! Not in the key: the kernel directory's path (two checkouts of one source share entries),
//! `KERNEL_BUILDER_JOBS` and `--jobs` (they change how fast, not what), `PATH` (every tool the
//! build runs is in the key by its resolved path).
//!
//! # Trust
//!
//! An entry is written into a temporary directory beside the others and renamed into place
//! once complete, so a reader never sees half an entry; of two builds storing the same key at
//! once, the first rename wins and the other entry is dropped. On reuse the entry's tree is
//! copied out and the NAR hash of the copy is checked against the hash recorded when it was
//! stored: a corrupt entry (edited, truncated, unreadable, or with a broken `entry.json`) is
//! never used; it is removed and the cell rebuilt, with a warning. `verify` never reads the
//! cache.
//!
//! # Size
//!
//! Each reuse marks the entry as used (the modification time of its `entry.json`).
//! [`CellCache::prune`] removes the least recently used entries until the cache holds at most
//! a given number of bytes (`kernel-builder native-cache prune --max-size SIZE`); a build that
//! stored cells prunes to [`DEFAULT_MAX_BYTES`] (or `$KERNEL_BUILDER_NATIVE_CACHE_MAX_SIZE`)
//! afterwards.

use std::os::unix::fs::PermissionsExt;
use std::time::SystemTime;

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::Digest as _;

use crate::assemble::compiled::{cell_facts, CompiledCell, PlannedVariant, BUILD_ENV};
use crate::config::BuildConfig;
use crate::source::provenance::{builder_provenance, BuildIds};
use crate::source::{SourceSet, Warning};
use crate::toolchain::host::{CellFramework, Tool};

/// The cache's directory name below the cache root; the version changes with the entry layout
/// or the key.
pub const DIR_NAME: &str = "native-cells-v1";

/// The format number written in every `entry.json`.
const ENTRY_FORMAT: u32 = 1;

/// The bound a build prunes the cache to after storing cells: 5 GiB.
pub const DEFAULT_MAX_BYTES: u64 = 5 << 30;

/// The bound a build prunes the cache to after storing cells:
/// `$KERNEL_BUILDER_NATIVE_CACHE_MAX_SIZE` ([`crate::fsutil::parse_size`]) when set, else
/// [`DEFAULT_MAX_BYTES`].
///
/// Errors: the variable is set and is not a size (the message names it).
pub fn build_max_bytes() -> anyhow::Result<u64> {
    crate::env::NATIVE_CACHE_MAX_SIZE.size(DEFAULT_MAX_BYTES)
}

/// The key of one cell: what went into it, and its SHA-256.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellKey {
    /// 64 lowercase hex digits: the SHA-256 of [`CellKey::inputs`] serialised as JSON.
    pub hex: String,
    /// Everything the variant's bytes depend on (see the module doc).
    pub inputs: serde_json::Value,
}

impl CellKey {
    /// The key of `variant` built from `source` (read as `config`) with `ids`.
    ///
    /// Errors: a fact of a compiled cell cannot be computed (a missing CUDA runtime, a
    /// dependency without a checkout, the project cannot be generated). The build then
    /// runs without the cache and reports the same problem.
    pub fn of(
        source: &SourceSet,
        config: &BuildConfig,
        variant: &PlannedVariant,
        ids: &BuildIds,
    ) -> anyhow::Result<CellKey> {
        let builder = builder_provenance();
        let exe = std::env::current_exe().ok().and_then(|p| Utf8PathBuf::from_path_buf(p).ok());
        let mut inputs = json!({
            "cache": DIR_NAME,
            "source": source.tree_id(),
            "config": config_digest(config),
            "variant": variant.name,
            "backend": variant.backend.as_str(),
            "compiled": variant.is_compiled(),
            "uid": ids.uid,
            "kernel": ids.kernel.clone().filter(|k| k.dirty),
            "kernel-builder": {
                "version": builder.version,
                "commit": builder.commit,
                "dirty": builder.dirty,
                "matrix": crate::matrix::data::version_line(),
                "executable": exe.as_deref().map(stamp),
            },
        });
        // The layout changes the variant's files; `files` adds nothing, so the keys of
        // files-layout cells stay what they were.
        let layout = crate::assemble::build_layout::layout_of(config);
        if layout != crate::assemble::BuildLayout::Files {
            inputs["build-layout"] = json!(layout.as_str());
        }
        if variant.is_compiled() {
            let cell = variant
                .cell
                .as_ref()
                .with_context(|| format!("variant `{}` has no toolchain", variant.name))?;
            inputs["cell"] = compiled_inputs(source, config, cell, ids)?;
        }
        let text = serde_json::to_vec(&inputs).context("cannot serialise a cell key")?;
        let hex = sha2::Sha256::digest(&text).iter().map(|b| format!("{b:02x}")).collect();
        Ok(CellKey { hex, inputs })
    }
}

/// SHA-256 (hex) of the configuration model, without the path it was read from.
fn config_digest(config: &BuildConfig) -> String {
    let text = format!(
        "{:?}\n{:?}\n{:?}\n{:?}",
        config.generation, config.general, config.framework, config.kernels
    );
    sha2::Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// A file's identity without reading it: `{path, len, mtime_ns}` (null fields when it cannot
/// be read).
fn stamp(path: &Utf8Path) -> serde_json::Value {
    let meta = std::fs::metadata(path).ok();
    let mtime = meta
        .as_ref()
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos().to_string());
    json!({"path": path, "len": meta.map(|m| m.len()), "mtime_ns": mtime})
}

/// Every file under `dir` (symlinks followed), sorted by path: `{path (relative to dir), len,
/// mtime_ns}` each, so that an edited, added or removed header (an editable or source install
/// of tvm-ffi keeps the same version) is another key. An entry that cannot be read is kept as
/// `{path, error}`; a missing `dir` gives `[]`.
fn tree_stamps(dir: &Utf8Path) -> serde_json::Value {
    let mut out = Vec::new();
    if !dir.exists() {
        return json!(out);
    }
    for entry in walkdir::WalkDir::new(dir).follow_links(true).sort_by_file_name() {
        match entry {
            Ok(e) if e.file_type().is_dir() => {}
            Ok(e) => {
                let path = Utf8Path::from_path(e.path()).map(Utf8Path::to_owned);
                match path {
                    Some(p) => {
                        let mut s = stamp(&p);
                        s["path"] = json!(p.strip_prefix(dir).unwrap_or(&p));
                        out.push(s);
                    }
                    None => out.push(json!({"path": e.path().to_string_lossy(), "error": "not UTF-8"})),
                }
            }
            Err(e) => out.push(json!({
                "path": e.path().map(|p| p.to_string_lossy().into_owned()),
                "error": e.to_string(),
            })),
        }
    }
    json!(out)
}

fn tool(t: &Tool) -> serde_json::Value {
    json!({"version": t.version, "file": stamp(&t.path)})
}

/// What the cell compiles against: torch, or tvm-ffi (its version, where it lies, and its
/// version file and library, so that a reinstall of the same version is another key).
fn framework_inputs(cell: &CompiledCell) -> serde_json::Value {
    match &cell.framework {
        CellFramework::Torch(t) => json!({
            "torch": {
                "facts": t,
                "version.py": stamp(&t.torch_dir.join("version.py")),
            }
        }),
        CellFramework::TvmFfi(f) => json!({
            "tvm-ffi": {
                "facts": f,
                "_version.py": stamp(&f.version_file()),
                "library": stamp(&f.library()),
                "headers": tree_stamps(&f.include_dir()),
            }
        }),
    }
}

/// The key inputs of a Rust cell: its framework, cargo, rustc, the linker and the crate (its
/// Cargo.lock and sources are in the source tree id); cargo's cache of registry crates is
/// checked against the lock's checksums by cargo itself.
fn cargo_inputs(cell: &CompiledCell, c: &crate::assemble::compiled::CargoTools) -> serde_json::Value {
    json!({
        "kind": format!("{:?}", cell.kind),
        "kernels": cell.kernels,
        "package-set": cell.package_set,
        "hermetic": cell.hermetic,
        "manylinux": cell.manylinux,
        "outside-bundle": cell.outside_bundle,
        "framework": framework_inputs(cell),
        "linker": tool(&cell.cxx),
        "cargo": tool(&c.cargo),
        "rustc": tool(&c.rustc),
        "crate": {"kernel": c.kernel, "manifest": c.manifest},
        "environment": {"CARGO_HOME": crate::env::CARGO_HOME.get()},
    })
}

/// The key inputs only a compiled cell has (see the module doc).
fn compiled_inputs(
    source: &SourceSet,
    config: &BuildConfig,
    cell: &CompiledCell,
    ids: &BuildIds,
) -> anyhow::Result<serde_json::Value> {
    if let Some(c) = &cell.cargo {
        return Ok(cargo_inputs(cell, c));
    }
    // Placeholder work directories: the binaries never see them (-ffile-prefix-map).
    let facts = cell_facts(
        config,
        cell,
        &ids.uid,
        Utf8Path::new("/kernel-builder-work/src"),
        Utf8Path::new("/kernel-builder-work/build"),
        // Where the compiles run changes how the prefix maps are given, not the binary.
        crate::assemble::compiled::CompilesRun::Here,
    )?;
    let project = crate::codegen::generate(config, source.root(), &crate::codegen::Layout::default())?;
    let mut generated = sha2::Sha256::new();
    for f in &project.files {
        generated.update(f.path.as_str().as_bytes());
        generated.update([0]);
        generated.update(f.contents.as_bytes());
        generated.update([0]);
    }
    let generated: String = generated.finalize().iter().map(|b| format!("{b:02x}")).collect();
    let env: serde_json::Map<String, serde_json::Value> = BUILD_ENV
        .iter()
        .map(|k| ((*k).to_owned(), json!(crate::env::recorded(k).map(|v| v.to_string_lossy().into_owned()))))
        .collect();
    let framework = framework_inputs(cell);
    Ok(json!({
        "kind": format!("{:?}", cell.kind),
        "backend-version": cell.backend_version,
        "kernels": cell.kernels,
        "cuda-capabilities": cell.cuda_capabilities,
        "package-set": cell.package_set,
        "hermetic": cell.hermetic,
        "manylinux": cell.manylinux,
        // Names the interpreter as given; the reused cell replays this warning.
        "outside-bundle": cell.outside_bundle,
        "framework": framework,
        "cmake": tool(&cell.cmake),
        "ninja": tool(&cell.ninja),
        "cxx": tool(&cell.cxx),
        "nvcc": cell.nvcc.as_ref().map(tool),
        // A pinned cell: every wheel's sha256 and each unpacked tree's recorded hash (the
        // trees are checked against it on use), so another toolchain is another key.
        "pins": cell.pins,
        // The host's Python headers (the module's init function includes them).
        "python-headers": cell.framework.torch().map(|t| {
            json!([stamp(&t.python_include.join("Python.h")), stamp(&t.python_include.join("patchlevel.h"))])
        }),
        "facts": {"cache": facts.cache, "gencode": facts.gencode, "env": facts.env},
        "generated-project": generated,
        "environment": env,
    }))
}

/// A warning as `entry.json` keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredWarning {
    path: Option<Utf8PathBuf>,
    message: String,
}

/// `entry.json`.
#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    format: u32,
    variant: String,
    /// NAR hash (SRI) of `tree/`, taken when the entry was stored.
    nar_hash: String,
    /// Bytes of the files in `tree/`.
    size: u64,
    /// The warnings the build of this cell gave, replayed on reuse.
    warnings: Vec<StoredWarning>,
    inputs: serde_json::Value,
}

/// What [`CellCache::fetch`] found.
#[derive(Debug)]
pub enum Fetched {
    /// The entry was copied out and matched its recorded hash; the build's warnings.
    Hit(Vec<Warning>),
    /// No entry for the key.
    Miss,
    /// There was an entry, and it could not be used (why); it has been removed.
    Corrupt(String),
}

/// One entry, as [`CellCache::entries`] lists it.
#[derive(Debug, Clone)]
pub struct EntryInfo {
    pub dir: Utf8PathBuf,
    /// The variant it holds; `None` when `entry.json` cannot be read.
    pub variant: Option<String>,
    /// Bytes on disk (the files of the tree and `entry.json`).
    pub size: u64,
    /// When it was stored or last reused.
    pub last_used: SystemTime,
}

/// What [`CellCache::prune`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PruneReport {
    pub removed: usize,
    pub removed_bytes: u64,
    pub kept: usize,
    pub kept_bytes: u64,
}

/// The native cell cache in one directory (see the module doc).
#[derive(Debug, Clone)]
pub struct CellCache {
    dir: Utf8PathBuf,
}

impl CellCache {
    /// The cache in `dir` (created when the first entry is stored).
    pub fn at(dir: impl Into<Utf8PathBuf>) -> CellCache {
        CellCache { dir: dir.into() }
    }

    /// The cache in the user's cache directory: `<cache root>/native-cells-v1`.
    ///
    /// Errors: no cache root can be found (see [`crate::fsutil::cache_root`]).
    pub fn user() -> anyhow::Result<CellCache> {
        Ok(CellCache::at(crate::fsutil::cache_root()?.join(DIR_NAME)))
    }

    /// Its directory.
    pub fn dir(&self) -> &Utf8Path {
        &self.dir
    }

    /// The directory of `key`'s entry.
    pub fn entry_dir(&self, key: &CellKey) -> Utf8PathBuf {
        self.dir.join(&key.hex)
    }

    /// Copy the entry of `key` to `dest` (which must not exist; its parent must) and check it.
    /// On [`Fetched::Corrupt`] and [`Fetched::Miss`] nothing is left at `dest`.
    pub fn fetch(&self, key: &CellKey, variant: &str, dest: &Utf8Path) -> Fetched {
        let dir = self.entry_dir(key);
        let entry_file = dir.join("entry.json");
        let text = match std::fs::read(&entry_file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !dir.exists() => return Fetched::Miss,
            Err(e) => return self.reject(&dir, dest, format!("cannot read `{entry_file}`: {e}")),
        };
        let entry: Entry = match serde_json::from_slice(&text) {
            Ok(e) => e,
            Err(e) => return self.reject(&dir, dest, format!("`{entry_file}` is not a cache entry ({e})")),
        };
        if entry.format != ENTRY_FORMAT || entry.variant != variant {
            return self.reject(
                &dir,
                dest,
                format!(
                    "`{entry_file}` is format {} for `{}`, not format {ENTRY_FORMAT} for `{variant}`",
                    entry.format, entry.variant
                ),
            );
        }
        if let Err(e) = copy_tree(&dir.join("tree"), dest) {
            return self.reject(&dir, dest, format!("cannot copy it out: {e:#}"));
        }
        match crate::hash::nar_hash_sri(dest.as_std_path()) {
            Ok(h) if h == entry.nar_hash => {}
            Ok(h) => {
                return self.reject(
                    &dir,
                    dest,
                    format!(
                        "its tree has NAR hash {h}, but {} was recorded when it was stored",
                        entry.nar_hash
                    ),
                )
            }
            Err(e) => return self.reject(&dir, dest, format!("cannot hash the copy: {e}")),
        }
        // Mark it used (for pruning); a read-only cache still serves.
        if let Ok(f) = std::fs::OpenOptions::new().append(true).open(&entry_file) {
            let _ = f.set_modified(SystemTime::now());
        }
        Fetched::Hit(
            entry.warnings.into_iter().map(|w| Warning { path: w.path, message: w.message }).collect(),
        )
    }

    /// Remove a bad entry and whatever was copied out of it.
    fn reject(&self, dir: &Utf8Path, dest: &Utf8Path, why: String) -> Fetched {
        let _ = std::fs::remove_dir_all(dest);
        remove_entry(&self.dir, dir);
        Fetched::Corrupt(why)
    }

    /// Store the variant directory `built` (as the build just wrote it) under `key`, with the
    /// warnings its build gave. A complete entry for `key` that is already there is kept.
    ///
    /// Errors: the cache directory cannot be created or written; the caller warns and goes on
    /// (the cache only ever saves work).
    pub fn store(
        &self,
        key: &CellKey,
        variant: &str,
        built: &Utf8Path,
        warnings: &[Warning],
    ) -> anyhow::Result<()> {
        std::fs::create_dir_all(&self.dir).with_context(|| format!("cannot create `{}`", self.dir))?;
        let tmp = tempfile::Builder::new()
            .prefix(".tmp-")
            .tempdir_in(&self.dir)
            .with_context(|| format!("cannot create a temporary directory in `{}`", self.dir))?;
        let tmp_path = Utf8Path::from_path(tmp.path()).context("non-UTF-8 temporary path")?.to_owned();
        let tree = tmp_path.join("tree");
        let size = copy_tree(built, &tree)?;
        // The hash of what was stored (what a reuse will compare with).
        let nar_hash =
            crate::hash::nar_hash_sri(tree.as_std_path()).with_context(|| format!("cannot hash `{tree}`"))?;
        let entry = Entry {
            format: ENTRY_FORMAT,
            variant: variant.to_owned(),
            nar_hash,
            size,
            warnings: warnings
                .iter()
                .map(|w| StoredWarning { path: w.path.clone(), message: w.message.clone() })
                .collect(),
            inputs: key.inputs.clone(),
        };
        let text = serde_json::to_vec_pretty(&entry).context("cannot serialise a cache entry")?;
        std::fs::write(tmp_path.join("entry.json"), text)
            .with_context(|| format!("cannot write `{tmp_path}/entry.json`"))?;
        let target = self.entry_dir(key);
        match std::fs::rename(&tmp_path, &target) {
            Ok(()) => {
                // Renamed: nothing left for the guard to remove.
                let _ = tmp.keep();
                Ok(())
            }
            // Another build stored it first (a non-empty directory is never replaced).
            Err(_) if target.join("entry.json").is_file() => Ok(()),
            Err(e) => Err(anyhow::Error::new(e).context(format!("cannot rename `{tmp_path}` to `{target}`"))),
        }
    }

    /// Every entry, least recently used first. Temporary directories are not listed.
    ///
    /// Errors: the cache directory exists and cannot be listed. A missing one has no entries.
    pub fn entries(&self) -> anyhow::Result<Vec<EntryInfo>> {
        let rd = match self.dir.read_dir_utf8() {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e).with_context(|| format!("cannot list `{}`", self.dir)),
        };
        let mut out = Vec::new();
        for e in rd.flatten() {
            if e.file_name().starts_with('.') || !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let dir = e.path().to_owned();
            let entry_file = dir.join("entry.json");
            let meta = std::fs::metadata(&entry_file).ok();
            let entry: Option<Entry> =
                std::fs::read(&entry_file).ok().and_then(|t| serde_json::from_slice(&t).ok());
            let size = match &entry {
                Some(en) => en.size + meta.as_ref().map_or(0, |m| m.len()),
                None => crate::fsutil::dir_size(&dir),
            };
            let last_used = meta.and_then(|m| m.modified().ok()).unwrap_or(std::time::UNIX_EPOCH);
            out.push(EntryInfo { dir, variant: entry.map(|e| e.variant), size, last_used });
        }
        out.sort_by(|a, b| a.last_used.cmp(&b.last_used).then_with(|| a.dir.cmp(&b.dir)));
        Ok(out)
    }

    /// Remove the least recently used entries until the rest hold at most `max_bytes`, and
    /// every temporary directory older than an hour (a killed build's).
    ///
    /// Errors: the cache directory cannot be listed.
    pub fn prune(&self, max_bytes: u64) -> anyhow::Result<PruneReport> {
        let entries = self.entries()?;
        let mut total: u64 = entries.iter().map(|e| e.size).sum();
        let mut report = PruneReport::default();
        for e in &entries {
            if total > max_bytes {
                remove_entry(&self.dir, &e.dir);
                total -= e.size;
                report.removed += 1;
                report.removed_bytes += e.size;
            } else {
                report.kept += 1;
                report.kept_bytes += e.size;
            }
        }
        if let Ok(rd) = self.dir.read_dir_utf8() {
            let hour_ago = SystemTime::now() - std::time::Duration::from_secs(3600);
            for e in rd.flatten() {
                let old = e.metadata().ok().and_then(|m| m.modified().ok()).is_some_and(|t| t < hour_ago);
                if (e.file_name().starts_with(".tmp-") && old) || e.file_name().starts_with(".trash-") {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        Ok(report)
    }
}

/// Remove an entry directory: first renamed aside (so no reader finds half of it), then
/// deleted.
fn remove_entry(cache_dir: &Utf8Path, dir: &Utf8Path) {
    let aside =
        cache_dir.join(format!(".trash-{}-{}", std::process::id(), dir.file_name().unwrap_or("entry")));
    if std::fs::rename(dir, &aside).is_ok() {
        let _ = std::fs::remove_dir_all(&aside);
    } else {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Copy the variant tree `from` to the new directory `to` (its parent must exist): directories
/// and regular files only, each with the permission bits it has. Returns the bytes copied.
///
/// Errors: anything else in the tree (a symlink, a device), or an I/O failure; each names
/// the path.
fn copy_tree(from: &Utf8Path, to: &Utf8Path) -> anyhow::Result<u64> {
    let mut bytes = 0;
    for e in walkdir::WalkDir::new(from).sort_by_file_name() {
        let e = e.with_context(|| format!("cannot list `{from}`"))?;
        let src =
            Utf8Path::from_path(e.path()).with_context(|| format!("a non-UTF-8 path below `{from}`"))?;
        let rel = src.strip_prefix(from).expect("below the root");
        let dest = if rel.as_str().is_empty() { to.to_owned() } else { to.join(rel) };
        let meta = e.metadata().with_context(|| format!("cannot read `{src}`"))?;
        let mode = meta.permissions().mode() & 0o7777;
        if meta.is_dir() {
            std::fs::create_dir(&dest).with_context(|| format!("cannot create `{dest}`"))?;
            std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(mode))
                .with_context(|| format!("cannot set permissions on `{dest}`"))?;
        } else if meta.is_file() {
            bytes += crate::fsutil::copy_new_file(src, &dest, mode)?;
        } else {
            anyhow::bail!("`{src}` is neither a file nor a directory");
        }
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tvm-ffi cell's key holds tvm_ffi's version, where it lies and its files' stamps, so
    /// another tvm_ffi (or a reinstall) is another entry; a torch cell's key has no tvm-ffi.
    #[test]
    fn a_tvm_ffi_cells_key_holds_tvm_ffi() {
        use crate::assemble::compiled::CompiledCell;
        use crate::config::Backend;
        use crate::toolchain::tvm_ffi::TvmFfiFacts;

        let kernel = Utf8PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("kernels/relu-tvm-ffi");
        let (loaded, source) = crate::kernel::load_with_sources(&kernel).unwrap();
        let config = loaded.config;
        let t = tempfile::tempdir().unwrap();
        let root = Utf8Path::from_path(t.path()).unwrap();
        let install = |name: &str, version: &str| {
            let pkg = root.join(name).join("tvm_ffi");
            std::fs::create_dir_all(pkg.join("lib")).unwrap();
            std::fs::write(pkg.join("_version.py"), format!("__version__ = '{version}'\n")).unwrap();
            std::fs::write(pkg.join("lib/libtvm_ffi.so"), "not really").unwrap();
            TvmFfiFacts {
                version: version.into(),
                package_dir: pkg,
                purelib: root.join(name),
                executable: "/venv/bin/python".into(),
                python_version: "3.11".into(),
            }
        };
        let cell = |f: TvmFfiFacts| {
            CompiledCell::tvm_ffi_for_tests(
                "tvm-ffi01-cpu-x86_64-linux",
                Backend::Cpu,
                f,
                None,
                &["relu_cpu"],
            )
        };
        let ids = BuildIds { uid: source.uid(), kernel: None };
        let key = |f: TvmFfiFacts| {
            let v = PlannedVariant {
                name: "tvm-ffi01-cpu-x86_64-linux".into(),
                backend: Backend::Cpu,
                cell: Some(Box::new(cell(f))),
            };
            CellKey::of(&source, &config, &v, &ids).unwrap()
        };
        let installed = install("a", "0.1.15");
        let a = key(installed.clone());
        let tvm = &a.inputs["cell"]["framework"]["tvm-ffi"];
        assert_eq!(tvm["facts"]["version"], "0.1.15");
        assert_eq!(tvm["facts"]["package_dir"], root.join("a/tvm_ffi").as_str());
        assert_eq!(tvm["library"]["len"], 10);
        assert!(a.inputs["cell"]["framework"].get("torch").is_none());
        // The library is linked and its headers compiled in: both are facts of the compile.
        let facts = a.inputs["cell"]["facts"]["cache"].clone();
        assert_eq!(facts["KB_LINK_LIBRARIES"], root.join("a/tvm_ffi/lib/libtvm_ffi.so").as_str());
        assert_eq!(facts["KB_MODULE_SUFFIX"], ".so");
        assert_eq!(facts["KB_CXX_STANDARD"], "17");
        assert!(facts["KB_DEFINES"]
            .as_str()
            .unwrap()
            .starts_with("TVM_FFI_EXTENSION_NAME=_relu_tvm_ffi_cpu_"));

        assert_eq!(key(installed.clone()).hex, a.hex, "the same install, the same key");
        assert_ne!(key(install("b", "0.1.15")).hex, a.hex, "another place");
        assert_ne!(
            key(TvmFfiFacts { version: "0.1.16".into(), ..installed.clone() }).hex,
            a.hex,
            "another version"
        );
        // The same version reinstalled in the same place (new files): another key.
        assert_ne!(key(install("a", "0.1.15")).hex, a.hex);

        // Headers: each file under include/ by path, size and mtime; an edited header (an
        // editable install keeps its version and library) is another key, as is a new one.
        let installed = install("c", "0.1.15");
        let header = installed.include_dir().join("tvm/ffi/c_api.h");
        std::fs::create_dir_all(header.parent().unwrap()).unwrap();
        std::fs::write(&header, "int a;\n").unwrap();
        std::fs::write(installed.include_dir().join("dlpack.h"), "").unwrap();
        let before = key(installed.clone());
        let headers = &before.inputs["cell"]["framework"]["tvm-ffi"]["headers"];
        let listed: Vec<&str> =
            headers.as_array().unwrap().iter().map(|h| h["path"].as_str().unwrap()).collect();
        assert_eq!(listed, ["dlpack.h", "tvm/ffi/c_api.h"]);
        assert_eq!(headers[1]["len"], 7);
        assert_eq!(key(installed.clone()).hex, before.hex, "nothing changed");
        let f = std::fs::OpenOptions::new().append(true).open(&header).unwrap();
        f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000)).unwrap();
        drop(f);
        let touched = key(installed.clone());
        assert_ne!(touched.hex, before.hex, "a touched header");
        std::fs::write(installed.include_dir().join("tvm/ffi/extra.h"), "").unwrap();
        assert_ne!(key(installed.clone()).hex, touched.hex, "a new header");
    }

    /// Issue 31: a changed toolchain was `reused`. A pinned cell's key holds every wheel's
    /// sha256 and each unpacked tree's recorded hash: another torch wheel, or a tree unpacked
    /// from other bytes, is another key.
    #[test]
    fn a_pinned_cells_key_holds_its_wheels_and_trees() {
        use crate::assemble::compiled::CompiledCell;
        use crate::config::Backend;
        use crate::toolchain::host::PinnedInputs;
        use crate::toolchain::tvm_ffi::TvmFfiFacts;

        let kernel = Utf8PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("kernels/relu-tvm-ffi");
        let (loaded, source) = crate::kernel::load_with_sources(&kernel).unwrap();
        let ids = BuildIds { uid: source.uid(), kernel: None };
        let facts = TvmFfiFacts {
            version: "0.1.15".into(),
            package_dir: "/nonexistent/tvm_ffi".into(),
            purelib: "/nonexistent".into(),
            executable: "/venv/bin/python".into(),
            python_version: "3.11".into(),
        };
        let key = |pins: Option<PinnedInputs>| {
            let mut cell = CompiledCell::tvm_ffi_for_tests(
                "tvm-ffi01-cpu-x86_64-linux",
                Backend::Cpu,
                facts.clone(),
                None,
                &["relu_cpu"],
            );
            cell.pins = pins;
            let v = PlannedVariant {
                name: "tvm-ffi01-cpu-x86_64-linux".into(),
                backend: Backend::Cpu,
                cell: Some(Box::new(cell)),
            };
            CellKey::of(&source, &loaded.config, &v, &ids).unwrap()
        };
        let pins = |wheel: &str, tree: &str| PinnedInputs {
            wheels: [("torch-2.15.0-cp313-cp313-manylinux_2_28_x86_64.whl".to_owned(), wheel.to_owned())]
                .into(),
            trees: [("torch".to_owned(), tree.to_owned())].into(),
        };
        let a = key(Some(pins("aa", "t1")));
        assert_eq!(
            a.inputs["cell"]["pins"],
            json!({"wheels": {"torch-2.15.0-cp313-cp313-manylinux_2_28_x86_64.whl": "aa"}, "trees": {"torch": "t1"}})
        );
        assert_eq!(key(Some(pins("aa", "t1"))).hex, a.hex);
        assert_ne!(key(Some(pins("bb", "t1"))).hex, a.hex, "another wheel");
        assert_ne!(key(Some(pins("aa", "t2"))).hex, a.hex, "a tree unpacked from other bytes");
        assert_ne!(key(None).hex, a.hex, "the host's toolchain");
    }

    #[test]
    fn store_fetch_and_corruption() {
        let t = tempfile::tempdir().unwrap();
        let root = Utf8Path::from_path(t.path()).unwrap();
        let built = root.join("built");
        std::fs::create_dir_all(built.join("sub")).unwrap();
        std::fs::write(built.join("a.py"), "a = 1\n").unwrap();
        std::fs::write(built.join("sub/b.json"), "{}\n").unwrap();
        let cache = CellCache::at(root.join("cache"));
        let key = CellKey { hex: "ab".repeat(32), inputs: json!({"x": 1}) };
        let w = vec![Warning { path: None, message: "careful".into() }];
        assert!(matches!(cache.fetch(&key, "torch-cpu", &root.join("out0")), Fetched::Miss));
        cache.store(&key, "torch-cpu", &built, &w).unwrap();
        // Stored twice: the first entry stays.
        cache.store(&key, "torch-cpu", &built, &[]).unwrap();
        match cache.fetch(&key, "torch-cpu", &root.join("out1")) {
            Fetched::Hit(got) => assert_eq!(got, w),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            crate::hash::nar_hash_sri(root.join("out1").as_std_path()).unwrap(),
            crate::hash::nar_hash_sri(built.as_std_path()).unwrap()
        );
        // Another variant's name never matches.
        assert!(matches!(cache.fetch(&key, "torch-cuda", &root.join("out2")), Fetched::Corrupt(_)));
        assert!(!root.join("out2").exists());
        assert!(matches!(cache.fetch(&key, "torch-cpu", &root.join("out2")), Fetched::Miss));

        // One byte changed in the stored tree: refused, removed.
        cache.store(&key, "torch-cpu", &built, &w).unwrap();
        std::fs::write(cache.entry_dir(&key).join("tree/a.py"), "a = 2\n").unwrap();
        match cache.fetch(&key, "torch-cpu", &root.join("out3")) {
            Fetched::Corrupt(why) => assert!(why.contains("was recorded when it was stored"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert!(!root.join("out3").exists());
        assert!(!cache.entry_dir(&key).exists());
        assert_eq!(cache.entries().unwrap().len(), 0);
    }

    #[test]
    fn prune_removes_the_least_recently_used() {
        let t = tempfile::tempdir().unwrap();
        let root = Utf8Path::from_path(t.path()).unwrap();
        let built = root.join("built");
        std::fs::create_dir_all(&built).unwrap();
        std::fs::write(built.join("a.py"), vec![b'x'; 1000]).unwrap();
        let cache = CellCache::at(root.join("cache"));
        let keys: Vec<CellKey> =
            (0..3).map(|i| CellKey { hex: format!("{i:064x}"), inputs: json!(i) }).collect();
        for (i, k) in keys.iter().enumerate() {
            cache.store(k, "torch-cpu", &built, &[]).unwrap();
            let f =
                std::fs::OpenOptions::new().append(true).open(cache.entry_dir(k).join("entry.json")).unwrap();
            f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1000 + i as u64)).unwrap();
        }
        // Reusing the oldest makes it the newest.
        assert!(matches!(cache.fetch(&keys[0], "torch-cpu", &root.join("o")), Fetched::Hit(_)));
        let sizes: Vec<u64> = cache.entries().unwrap().iter().map(|e| e.size).collect();
        let one = sizes[0];
        let report = cache.prune(one * 2).unwrap();
        assert_eq!((report.removed, report.kept), (1, 2));
        let left: Vec<String> =
            cache.entries().unwrap().iter().map(|e| e.dir.file_name().unwrap().to_owned()).collect();
        assert_eq!(left, [keys[2].hex.clone(), keys[0].hex.clone()]);
        assert_eq!(cache.prune(0).unwrap().removed, 2);
        assert!(cache.entries().unwrap().is_empty());
    }
}
