//! Sealed directories of the toolchain cache (an unpacked tree, a test environment): made
//! read-only, with a manifest of their files written when they are made, and checked against
//! it on every use.
//!
//! The manifest (`.kernel-builder-manifest-v1.json` in the directory) lists every file and
//! symbolic link: path, size, modification time, mode, a link's target, and, for a tree unpacked
//! from wheels, the file's sha256 (taken while it was unpacked, from the wheel whose own sha256
//! was checked first). The sha256s give the tree's recorded hash ([`Sealed::tree_hash`]), which
//! a cell's key holds.
//!
//! The check on use compares sizes, modification times, modes and the set of paths, never the
//! bytes: a torch tree of ~15,000 files is stat'ed in well under a second where hashing its
//! gigabytes takes seconds on every build (see the README's figures). Read-only modes keep a
//! non-root user's tests and tools from writing; root (CI containers) ignores modes, so the
//! check is what finds an edit, an appended header, a truncated library or a planted file
//! (`sitecustomize.py`, a `.pyc`). An edit that restores the size and the modification time
//! itself is not found; that is deliberate tampering, not an accident this guards against.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};
use serde::{Deserialize, Serialize};
use sha2::Digest as _;

/// The manifest's file name in a sealed directory; the version changes with its format.
pub const MANIFEST: &str = ".kernel-builder-manifest-v1.json";

/// One file or link as the manifest records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Stamp {
    len: u64,
    mtime_ns: u64,
    mode: u32,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    link: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    sha256: Option<String>,
}

/// The manifest file.
#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    /// The tree's recorded hash, when every file's sha256 is known.
    tree_hash: Option<String>,
    files: std::collections::BTreeMap<String, Stamp>,
}

/// A sealed directory, as its manifest says.
#[derive(Debug, Clone)]
pub struct Sealed {
    /// SHA-256 (hex) over every path with its mode and sha256 (a link: its target), when the
    /// directory was sealed with its files' hashes (an unpacked tree); `None` otherwise.
    pub tree_hash: Option<String>,
}

/// How a sealed directory differs from its manifest ([`check`]): a few words naming up to
/// three paths (`` `lib/x.so` changed size (…) ``, `has no manifest (…)`). The directory is
/// made again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Differs(pub String);

fn stamp_of(path: &Utf8Path, meta: &std::fs::Metadata) -> anyhow::Result<Stamp> {
    let mtime_ns = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0);
    let link = if meta.file_type().is_symlink() {
        let target = std::fs::read_link(path).with_context(|| format!("cannot read the link `{path}`"))?;
        Some(target.to_string_lossy().into_owned())
    } else {
        None
    };
    Ok(Stamp { len: meta.len(), mtime_ns, mode: meta.permissions().mode() & 0o7777, link, sha256: None })
}

/// Every file and link under `dir` but the manifest, keyed by its path relative to `dir`.
/// Directories are not listed (an empty directory changes nothing a build reads).
fn walk(dir: &Utf8Path) -> anyhow::Result<Vec<(String, Utf8PathBuf, std::fs::Metadata)>> {
    let mut out = Vec::new();
    for e in walkdir::WalkDir::new(dir).follow_links(false).min_depth(1) {
        let e = e.with_context(|| format!("cannot list `{dir}`"))?;
        if e.file_type().is_dir() {
            continue;
        }
        let path = Utf8Path::from_path(e.path())
            .with_context(|| format!("`{}` is not UTF-8", e.path().display()))?
            .to_owned();
        let rel = path.strip_prefix(dir).unwrap_or(&path).to_string();
        if rel == MANIFEST {
            continue;
        }
        let meta = e.metadata().with_context(|| format!("cannot read `{path}`"))?;
        out.push((rel, path, meta));
    }
    Ok(out)
}

/// Make every file and directory under `dir` (and `dir`) read-only, then write the manifest.
/// `hashes`: every file's sha256 by its path relative to `dir` (an unpacked tree), giving the
/// tree's hash; a file without one leaves the tree without a hash.
pub fn seal(dir: &Utf8Path, hashes: Option<&HashMap<String, String>>) -> anyhow::Result<Sealed> {
    let mut files = std::collections::BTreeMap::new();
    for (rel, path, meta) in walk(dir)? {
        if meta.is_file() {
            let mode = meta.permissions().mode() & !0o222;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
                .with_context(|| format!("cannot make `{path}` read-only"))?;
        }
        let meta = std::fs::symlink_metadata(&path).with_context(|| format!("cannot read `{path}`"))?;
        let mut s = stamp_of(&path, &meta)?;
        s.sha256 = hashes.and_then(|h| h.get(&rel).cloned());
        files.insert(rel, s);
    }
    let tree_hash = hashes.is_some().then(|| tree_hash(&files)).flatten();
    let manifest = Manifest { tree_hash: tree_hash.clone(), files };
    let path = dir.join(MANIFEST);
    let tmp = dir.join(format!("{MANIFEST}.tmp"));
    let text = serde_json::to_vec(&manifest).context("cannot serialise a manifest")?;
    std::fs::write(&tmp, text).with_context(|| format!("cannot write `{tmp}`"))?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o444))
        .with_context(|| format!("cannot make `{tmp}` read-only"))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("cannot move `{tmp}` to `{path}`"))?;
    set_dirs_writable(dir, false)?;
    Ok(Sealed { tree_hash })
}

/// SHA-256 over every path with its mode and sha256 (a link: its target), in path order;
/// `None` when a file's sha256 is unknown.
fn tree_hash(files: &std::collections::BTreeMap<String, Stamp>) -> Option<String> {
    let mut h = sha2::Sha256::new();
    for (path, s) in files {
        let what = match (&s.link, &s.sha256) {
            (Some(target), _) => format!("link {target}"),
            (None, Some(sha)) => format!("file {sha}"),
            (None, None) => return None,
        };
        h.update(format!("{path}\0{:o}\0{what}\n", s.mode).as_bytes());
    }
    Some(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// Add (`writable`) or remove the owner's write bit of `dir` and every directory under it.
fn set_dirs_writable(dir: &Utf8Path, writable: bool) -> anyhow::Result<()> {
    // Parents first when opening up (so the walk can enter), children first when closing.
    let walker = walkdir::WalkDir::new(dir).follow_links(false).contents_first(!writable);
    for e in walker {
        let Ok(e) = e else { continue };
        if !e.file_type().is_dir() {
            continue;
        }
        let Ok(meta) = e.metadata() else { continue };
        let mode = meta.permissions().mode();
        let mode = if writable { mode | 0o700 } else { mode & !0o222 };
        std::fs::set_permissions(e.path(), std::fs::Permissions::from_mode(mode))
            .with_context(|| format!("cannot change the mode of `{}`", e.path().display()))?;
    }
    Ok(())
}

/// `dir` as its manifest describes it, or how it differs from it ([`Differs`]); a missing or
/// unreadable manifest is a difference.
///
/// Errors: a file of `dir` cannot be examined.
pub fn check(dir: &Utf8Path) -> anyhow::Result<Result<Sealed, Differs>> {
    let differs = |why: String| Ok(Err(Differs(why)));
    let text = match std::fs::read(dir.join(MANIFEST)) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return differs(format!(
                "has no manifest ({MANIFEST}: an older kernel-builder made it, or it was removed)"
            ))
        }
        Err(e) => return differs(format!("has an unreadable manifest ({e})")),
    };
    let Ok(manifest) = serde_json::from_slice::<Manifest>(&text) else {
        return differs(format!("has a broken manifest ({MANIFEST})"));
    };
    let mut expected: HashMap<&str, &Stamp> = manifest.files.iter().map(|(p, s)| (p.as_str(), s)).collect();
    let mut found: Vec<String> = Vec::new();
    for (rel, path, meta) in walk(dir)? {
        let now = stamp_of(&path, &meta)?;
        match expected.remove(rel.as_str()) {
            None => found.push(format!("`{rel}` was added")),
            Some(s) if now.len != s.len => {
                found.push(format!("`{rel}` changed size ({} bytes, recorded {})", now.len, s.len))
            }
            Some(s) if now.link != s.link => found.push(format!("`{rel}` links elsewhere")),
            Some(s) if now.mtime_ns != s.mtime_ns => found.push(format!("`{rel}` was modified")),
            Some(s) if now.mode != s.mode => {
                found.push(format!("`{rel}` changed mode ({:o}, recorded {:o})", now.mode, s.mode))
            }
            Some(_) => {}
        }
    }
    let mut missing: Vec<&str> = expected.into_keys().collect();
    missing.sort_unstable();
    found.extend(missing.into_iter().map(|p| format!("`{p}` is missing")));
    if found.is_empty() {
        return Ok(Ok(Sealed { tree_hash: manifest.tree_hash }));
    }
    found.sort();
    let more = found.len().saturating_sub(3);
    found.truncate(3);
    let mut text = found.join(", ");
    if more > 0 {
        text.push_str(&format!(" and {more} more"));
    }
    differs(text)
}

/// Remove the sealed (or half-made) directory `dir`: its directories are made writable
/// first, which removing their entries needs (for anyone but root).
pub fn remove(dir: &Utf8Path) -> anyhow::Result<()> {
    if std::fs::symlink_metadata(dir).is_err() {
        return Ok(());
    }
    set_dirs_writable(dir, true)?;
    std::fs::remove_dir_all(dir).with_context(|| format!("cannot remove `{dir}`"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp() -> (tempfile::TempDir, Utf8PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let p = Utf8Path::from_path(t.path()).unwrap().join("tree");
        std::fs::create_dir_all(p.join("torch/include")).unwrap();
        std::fs::write(p.join("torch/include/a.h"), "int a;\n").unwrap();
        std::fs::write(p.join("torch/version.py"), "v = 1\n").unwrap();
        (t, p)
    }

    #[test]
    fn a_sealed_directory_is_read_only_and_every_change_is_named() {
        let (_t, dir) = tmp();
        let hashes: HashMap<String, String> = [("torch/include/a.h", "aa"), ("torch/version.py", "bb")]
            .map(|(p, h)| (p.into(), h.into()))
            .into();
        let sealed = seal(&dir, Some(&hashes)).unwrap();
        let expected = {
            let mut h = sha2::Sha256::new();
            h.update(b"torch/include/a.h\x00644\x00file aa\ntorch/version.py\x00644\x00file bb\n".as_slice());
            h.finalize().iter().map(|b| format!("{b:02x}")).collect::<String>()
        };
        // 0o644 files became 0o444: the hash holds the sealed mode.
        let expected_sealed = {
            let mut h = sha2::Sha256::new();
            h.update(b"torch/include/a.h\x00444\x00file aa\ntorch/version.py\x00444\x00file bb\n".as_slice());
            h.finalize().iter().map(|b| format!("{b:02x}")).collect::<String>()
        };
        assert_ne!(sealed.tree_hash.as_deref(), Some(expected.as_str()));
        assert_eq!(sealed.tree_hash.as_deref(), Some(expected_sealed.as_str()));
        let mode = |p: &Utf8Path| std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir.join("torch/include/a.h")), 0o444);
        assert_eq!(mode(&dir.join("torch/include")), 0o555);
        assert_eq!(mode(&dir), 0o555);
        assert_eq!(check(&dir).unwrap().unwrap().tree_hash, sealed.tree_hash);

        // What a test run as root can still do (modes do not stop root): change a header,
        // plant a file, remove one.
        let header = dir.join("torch/include/a.h");
        std::fs::set_permissions(&header, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::write(&header, "int a;\n// appended\n").unwrap();
        std::fs::set_permissions(&header, std::fs::Permissions::from_mode(0o444)).unwrap();
        set_dirs_writable(&dir, true).unwrap();
        std::fs::write(dir.join("sitecustomize.py"), "import os\n").unwrap();
        std::fs::remove_file(dir.join("torch/version.py")).unwrap();
        assert_eq!(
            check(&dir).unwrap().unwrap_err().to_string(),
            "`sitecustomize.py` was added, `torch/include/a.h` changed size (19 bytes, recorded 7), `torch/version.py` is missing"
        );
        remove(&dir).unwrap();
        assert!(!dir.exists());
    }

    #[test]
    fn a_same_size_rewrite_and_a_missing_manifest_are_differences() {
        let (_t, dir) = tmp();
        seal(&dir, None).unwrap();
        let header = dir.join("torch/include/a.h");
        set_dirs_writable(&dir, true).unwrap();
        std::fs::set_permissions(&header, std::fs::Permissions::from_mode(0o644)).unwrap();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        let f = std::fs::OpenOptions::new().write(true).open(&header).unwrap();
        f.set_modified(old).unwrap();
        drop(f);
        std::fs::set_permissions(&header, std::fs::Permissions::from_mode(0o444)).unwrap();
        assert_eq!(check(&dir).unwrap().unwrap_err(), Differs("`torch/include/a.h` was modified".into()));
        std::fs::remove_file(dir.join(MANIFEST)).unwrap();
        assert_eq!(
            check(&dir).unwrap().unwrap_err().to_string(),
            format!("has no manifest ({MANIFEST}: an older kernel-builder made it, or it was removed)")
        );
    }
}
