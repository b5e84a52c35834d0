//! The per-file digest of a variant directory, in the format of the `kernels` loader's
//! `metadata.json` `digest` field (reference: kernel-builder-cli.md §4.6).
//!
//! ```json
//! {"algorithm": "sha256", "files": {"<relative/path>": "<base64 of the raw digest>"}}
//! ```
//!
//! Keys are `/`-separated paths relative to the variant directory, sorted (a `BTreeMap`); each
//! value is the standard base64 encoding, with `=` padding, of the digest of the file's bytes.
//! The walk follows symlinks and counts only regular files. It skips `metadata.json` and
//! `metadata.json.sigstore` at the top level only (the digest lives inside `metadata.json`,
//! and the signature covers it), and Python bytecode ([`crate::layout`]: `__pycache__/`,
//! `*.pyc`), because Python writes those at import time.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::Read;

use anyhow::Context;
use base64::Engine;
use camino::{Utf8Path, Utf8PathBuf};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256, Sha512};

/// The hash function of a [`Digest`]. Serialised in lower case (`"sha256"`), displayed in upper
/// case (`SHA256`), as the loader does in its messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Algorithm {
    /// SHA-256; what kernel-builder writes.
    Sha256,
    /// SHA-512; accepted when checking a digest written by another tool.
    Sha512,
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Algorithm::Sha256 => "SHA256",
            Algorithm::Sha512 => "SHA512",
        })
    }
}

/// The `digest` field of `metadata.json`: one hash per file of a variant directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Digest {
    /// Which hash function produced `files`.
    pub algorithm: Algorithm,
    /// `/`-separated path relative to the variant directory → base64 (with padding) of the raw
    /// digest of the file's contents.
    pub files: BTreeMap<String, String>,
}

/// The SHA-256 digest of every file in the variant directory `dir`, with the skip rules of the
/// module docs.
///
/// # Errors
/// `dir` or an entry in it cannot be read, a symlink dangles or loops, or a path under `dir` is
/// not valid UTF-8 (the loader's keys are strings); each error names the path.
pub fn variant_digest(dir: &Utf8Path) -> anyhow::Result<Digest> {
    variant_digest_with(Algorithm::Sha256, dir)
}

/// [`variant_digest`] with a chosen hash function (to check a reference written with SHA-512).
///
/// # Errors
/// As for [`variant_digest`].
pub fn variant_digest_with(algorithm: Algorithm, dir: &Utf8Path) -> anyhow::Result<Digest> {
    let meta = std::fs::metadata(dir).with_context(|| format!("cannot read `{dir}`"))?;
    anyhow::ensure!(meta.is_dir(), "`{dir}` is not a directory");
    let mut files = BTreeMap::new();
    let mut buf = vec![0u8; 1 << 20];
    let walk = walkdir::WalkDir::new(dir)
        .follow_links(true)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| !skipped(e.depth(), e.file_name().as_encoded_bytes(), e.file_type()));
    for entry in walk {
        let entry = entry.with_context(|| format!("cannot walk `{dir}`"))?;
        if !entry.file_type().is_file() {
            continue;
        }
        let path = Utf8PathBuf::from_path_buf(entry.path().to_owned()).map_err(|p| {
            anyhow::anyhow!(
                "`{}` is not a valid UTF-8 path; rename it (metadata.json digests key files by \
                 UTF-8 names)",
                p.display()
            )
        })?;
        let rel = path.strip_prefix(dir).with_context(|| format!("`{path}` is outside `{dir}`"))?;
        let key = rel.components().map(|c| c.as_str()).collect::<Vec<_>>().join("/");
        let hash = hash_file(algorithm, &path, &mut buf)?;
        files.insert(key, hash);
    }
    Ok(Digest { algorithm, files })
}

/// Whether the walk leaves out an entry (and, for a directory, everything below it).
fn skipped(depth: usize, name: &[u8], kind: std::fs::FileType) -> bool {
    if depth > 0 && crate::layout::is_bytecode_name(name, kind.is_dir()) {
        return true;
    }
    kind.is_file() && depth == 1 && (name == b"metadata.json" || name == b"metadata.json.sigstore")
}

fn hash_file(algorithm: Algorithm, path: &Utf8Path, buf: &mut [u8]) -> anyhow::Result<String> {
    let mut file = File::open(path).with_context(|| format!("cannot open `{path}`"))?;
    let mut sha256 = Sha256::new();
    let mut sha512 = Sha512::new();
    loop {
        let n = match file.read(buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot read `{path}`")),
        };
        match algorithm {
            Algorithm::Sha256 => sha256.update(&buf[..n]),
            Algorithm::Sha512 => sha512.update(&buf[..n]),
        }
    }
    let b64 = &base64::engine::general_purpose::STANDARD;
    Ok(match algorithm {
        Algorithm::Sha256 => b64.encode(sha256.finalize()),
        Algorithm::Sha512 => b64.encode(sha512.finalize()),
    })
}

/// Compare the digest on record (`reference`, e.g. from `metadata.json`) with a freshly
/// computed one (`actual`), as the loader does.
///
/// Returns every problem, one message each, in this order: an algorithm mismatch (then nothing
/// else is compared), then for each reference file in path order `Missing file: p` or
/// `File hash mismatch for p: expected: a, got: b`, then `Unknown file: p` for each file only
/// in `actual`.
///
/// # Errors
/// The list of problems, never empty; [`mismatch_message`] turns it into the loader's message.
pub fn check(reference: &Digest, actual: &Digest) -> Result<(), Vec<String>> {
    if reference.algorithm != actual.algorithm {
        return Err(vec![format!(
            "Algorithm mismatch: expected: {}, got: {}",
            reference.algorithm, actual.algorithm
        )]);
    }
    let mut problems = Vec::new();
    for (path, expected) in &reference.files {
        match actual.files.get(path) {
            None => problems.push(format!("Missing file: {path}")),
            Some(got) if got != expected => {
                problems.push(format!("File hash mismatch for {path}: expected: {expected}, got: {got}"))
            }
            Some(_) => {}
        }
    }
    for path in actual.files.keys() {
        if !reference.files.contains_key(path) {
            problems.push(format!("Unknown file: {path}"));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// The loader's whole message for a failed [`check`]: `kernel does not match the expected
/// digest:` and then one problem per line.
pub fn mismatch_message(problems: &[String]) -> String {
    let mut msg = String::from("kernel does not match the expected digest:");
    for p in problems {
        msg.push('\n');
        msg.push_str(p);
    }
    msg
}
