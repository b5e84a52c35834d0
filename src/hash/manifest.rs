//! The reproducibility manifest: one NAR hash per variant directory of a bundle, written beside
//! the variant directories (`build/hashes.json`) so a rebuild can be compared with it.
//!
//! Format `kernel-builder-hashes-v1` (pretty JSON, keys in this order, variants sorted, a
//! trailing newline):
//!
//! ```json
//! {
//!   "format": "kernel-builder-hashes-v1",
//!   "kernel_builder": "0.1.0",
//!   "source": "<source id given by the caller, e.g. a git tree id>",
//!   "variants": {
//!     "torch-cuda": "sha256-…",
//!     "torch29-cxx11-cu128-x86_64-linux": "sha256-…"
//!   }
//! }
//! ```
//!
//! Each variant hash is exactly what `nix hash path build/<variant>` prints. The manifest file
//! sits next to the variant directories, never inside one, so it does not change any hash.
//! Changing the layout or meaning of any field requires a new format name (`…-v2`); update
//! [`FORMAT`], the reader, and the manifest tests in `tests/it/hash.rs` together.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};
use serde::{Deserialize, Serialize};

/// The format name this version writes and reads.
pub const FORMAT: &str = "kernel-builder-hashes-v1";

/// The manifest's file name inside the bundle directory (the directory holding the variants).
pub const FILE_NAME: &str = "hashes.json";

/// A bundle's reproducibility manifest. See the module docs for the JSON form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Always [`FORMAT`].
    pub format: String,
    /// The version of kernel-builder that wrote the manifest (informational: not compared).
    pub kernel_builder: String,
    /// The kernel source id given by the caller (e.g. the git tree id of the kernel sources).
    pub source: String,
    /// Variant directory name → NAR hash of that directory in SRI form (`sha256-…`).
    pub variants: BTreeMap<String, String>,
}

impl Manifest {
    /// Hash each variant directory `bundle_dir/<variant>` and build the manifest.
    ///
    /// `variants` may come in any order and repeat names; the manifest is sorted. Directories
    /// are hashed on several threads (one per CPU, at most one per variant).
    ///
    /// # Errors
    /// A variant name that is not a single path component, a variant directory that is missing
    /// or not a directory (a symlink does not count), or any error while hashing; the error
    /// names the variant and its path.
    pub fn for_bundle(
        bundle_dir: &Utf8Path,
        variants: &[String],
        source_id: &str,
    ) -> anyhow::Result<Manifest> {
        let mut names: Vec<&str> = variants.iter().map(String::as_str).collect();
        names.sort_unstable();
        names.dedup();
        for name in &names {
            let single = !name.is_empty()
                && *name != "."
                && *name != ".."
                && !name.contains('/')
                && !name.contains('\0');
            anyhow::ensure!(single, "`{name}` is not a variant directory name");
            let dir = bundle_dir.join(name);
            let meta = std::fs::symlink_metadata(&dir)
                .with_context(|| format!("cannot read variant `{name}` at `{dir}`"))?;
            anyhow::ensure!(meta.is_dir(), "variant `{name}` at `{dir}` is not a directory");
        }

        let threads =
            std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).min(names.len()).max(1);
        let next = AtomicUsize::new(0);
        let results: Mutex<Vec<(usize, std::io::Result<String>)>> = Mutex::new(Vec::new());
        let work = || loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(name) = names.get(i) else { break };
            let hash = super::variant_nar_hash_sri(bundle_dir.join(name).as_std_path());
            // A poisoned lock means another worker panicked; the scope re-raises that.
            if let Ok(mut r) = results.lock() {
                r.push((i, hash));
            }
        };
        std::thread::scope(|scope| {
            for _ in 1..threads {
                // A worker that cannot start is no loss: this thread works through the list too.
                let _ = std::thread::Builder::new().spawn_scoped(scope, work);
            }
            work();
        });
        let mut results = results.into_inner().unwrap_or_else(|p| p.into_inner());
        results.sort_unstable_by_key(|(i, _)| *i);
        let mut hashes = BTreeMap::new();
        for (i, hash) in results {
            let name = names[i];
            let hash =
                hash.with_context(|| format!("cannot hash variant `{name}` at `{}`", bundle_dir.join(name)))?;
            hashes.insert(name.to_owned(), hash);
        }
        Ok(Manifest {
            format: FORMAT.to_owned(),
            kernel_builder: env!("CARGO_PKG_VERSION").to_owned(),
            source: source_id.to_owned(),
            variants: hashes,
        })
    }

    /// Record `self` (the variants just built into `bundle_dir`) in `bundle_dir/hashes.json`,
    /// keeping the entries of the manifest already there for variants built from the same
    /// source that are still present and were not rebuilt. They are carried over as recorded,
    /// not re-hashed, so an edit made to them since is not blessed; entries of another source
    /// are dropped, since a manifest names one source. Written atomically.
    ///
    /// Returns the manifest as written. Errors: the manifest cannot be written.
    pub fn update_in(mut self, bundle_dir: &Utf8Path) -> anyhow::Result<Manifest> {
        let path = Self::path_in(bundle_dir);
        if let Ok(old) = Manifest::read(&path) {
            if old.source == self.source {
                for (v, hash) in old.variants {
                    if !self.variants.contains_key(&v) && bundle_dir.join(&v).is_dir() {
                        self.variants.insert(v, hash);
                    }
                }
            }
        }
        self.write(&path).with_context(|| format!("cannot write the hash manifest `{path}`"))?;
        Ok(self)
    }

    /// Where a bundle's manifest lives: `bundle_dir/hashes.json`.
    pub fn path_in(bundle_dir: &Utf8Path) -> Utf8PathBuf {
        bundle_dir.join(FILE_NAME)
    }

    /// The manifest as written to disk: pretty JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        // Cannot fail: strings and string maps always serialise.
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }

    /// Write the manifest to `path` atomically (temporary file, then rename).
    ///
    /// # Errors
    /// The file cannot be written; the error names it.
    pub fn write(&self, path: &Utf8Path) -> anyhow::Result<()> {
        crate::fsutil::write_atomic(path, self.to_json().as_bytes())
    }

    /// Read a manifest written by [`Manifest::write`].
    ///
    /// # Errors
    /// The file cannot be read, is not JSON, has another `format` (named in the error), or has
    /// missing or unknown fields (with line and column).
    pub fn read(path: &Utf8Path) -> anyhow::Result<Manifest> {
        let text = crate::fsutil::read_to_string(path)?;
        #[derive(Deserialize)]
        struct Header {
            format: Option<serde_json::Value>,
        }
        let header: Header = serde_json::from_str(&text)
            .with_context(|| format!("`{path}` is not a kernel-builder hash manifest"))?;
        match header.format {
            Some(serde_json::Value::String(f)) if f == FORMAT => {}
            Some(other) => anyhow::bail!(
                "`{path}` has hash manifest format {other}, but this kernel-builder reads only \
                 \"{FORMAT}\"; use the kernel-builder version that wrote it"
            ),
            None => {
                anyhow::bail!("`{path}` is not a kernel-builder hash manifest: it has no \"format\" field")
            }
        }
        serde_json::from_str(&text)
            .with_context(|| format!("`{path}` is not a valid \"{FORMAT}\" hash manifest"))
    }
}

/// One way two manifests differ. `Display` gives a one-line message for users.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Difference {
    /// The `format` fields differ.
    Format { expected: String, actual: String },
    /// The source ids differ: the two manifests describe different sources.
    Source { expected: String, actual: String },
    /// A variant of `expected` is absent from `actual`.
    MissingVariant { variant: String, expected: String },
    /// A variant of `actual` is absent from `expected`.
    ExtraVariant { variant: String, actual: String },
    /// A variant's NAR hashes differ.
    Hash { variant: String, expected: String, actual: String },
}

impl Difference {
    /// The variant this difference is about, if it is about one.
    pub fn variant(&self) -> Option<&str> {
        match self {
            Difference::Format { .. } | Difference::Source { .. } => None,
            Difference::MissingVariant { variant, .. }
            | Difference::ExtraVariant { variant, .. }
            | Difference::Hash { variant, .. } => Some(variant),
        }
    }
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Difference::Format { expected, actual } => {
                write!(f, "manifest format differs: expected `{expected}`, got `{actual}`")
            }
            Difference::Source { expected, actual } => {
                write!(f, "source differs: expected `{expected}`, got `{actual}`")
            }
            Difference::MissingVariant { variant, expected } => {
                write!(f, "variant `{variant}` is missing (expected {expected})")
            }
            Difference::ExtraVariant { variant, actual } => {
                write!(f, "variant `{variant}` is not in the expected manifest (got {actual})")
            }
            Difference::Hash { variant, expected, actual } => {
                write!(f, "variant `{variant}` differs: expected {expected}, got {actual}")
            }
        }
    }
}

/// Every difference between `expected` (e.g. the committed manifest) and `actual` (e.g. a
/// rebuild's), in this order: format, source, then variants by name. The `kernel_builder`
/// version is not compared: a newer orchestrator that builds the same bytes is reproducible.
/// An empty list means the manifests agree.
pub fn compare(expected: &Manifest, actual: &Manifest) -> Vec<Difference> {
    let mut diffs = Vec::new();
    if expected.format != actual.format {
        diffs.push(Difference::Format { expected: expected.format.clone(), actual: actual.format.clone() });
    }
    if expected.source != actual.source {
        diffs.push(Difference::Source { expected: expected.source.clone(), actual: actual.source.clone() });
    }
    let mut names: Vec<&String> = expected.variants.keys().chain(actual.variants.keys()).collect();
    names.sort_unstable();
    names.dedup();
    for name in names {
        let variant = name.clone();
        match (expected.variants.get(name), actual.variants.get(name)) {
            (Some(e), Some(a)) if e != a => {
                diffs.push(Difference::Hash { variant, expected: e.clone(), actual: a.clone() })
            }
            (Some(e), None) => diffs.push(Difference::MissingVariant { variant, expected: e.clone() }),
            (None, Some(a)) => diffs.push(Difference::ExtraVariant { variant, actual: a.clone() }),
            _ => {}
        }
    }
    diffs
}
