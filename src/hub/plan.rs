//! The local side of an upload and its comparison with a remote tree: which files to add,
//! update, leave alone or delete. Pure functions over lists, so the rules are tested without a
//! server.
//!
//! Rules:
//! - a local file is *unchanged* when the remote file at the same path has the same content
//!   id: the LFS SHA-256 (`lfs.oid`) for an LFS file, the git blob SHA-1 (`oid`) otherwise;
//!   *updated* when a remote file is there with another id; *added* when none is;
//! - a remote file is *deleted* when it lies under one of the given prefixes (the
//!   `build/<variant>/` of the variants being uploaded) and no local file has its path. Only
//!   files are deleted, never directories, and nothing outside those prefixes.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::Read;

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};
use sha1::Sha1;
use sha2::{Digest as _, Sha256};

use super::client::TreeEntry;

/// Files larger than this go through LFS whatever their content (10 MiB).
pub const LFS_THRESHOLD: u64 = 10 * 1024 * 1024;

/// How many leading bytes preupload sees of each file.
pub const SAMPLE_LEN: usize = 512;

/// One local file to publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalFile {
    /// Path in the repository, `/`-separated (`build/torch-cpu/__init__.py`).
    pub repo_path: String,
    /// Where it is on disk.
    pub disk_path: Utf8PathBuf,
    /// Bytes.
    pub size: u64,
    /// SHA-256 of the content, lower-case hex (the LFS object id).
    pub sha256: String,
    /// Git blob id (SHA-1 of `blob <size>\0` + content), lower-case hex.
    pub git_oid: String,
    /// Contains a NUL byte or is not UTF-8.
    pub binary: bool,
    /// The first [`SAMPLE_LEN`] bytes.
    pub sample: Vec<u8>,
}

impl LocalFile {
    /// Read and hash the file at `disk_path`, to be published as `repo_path`.
    ///
    /// # Errors
    /// The file cannot be read; the error names it.
    pub fn read(disk_path: &Utf8Path, repo_path: String) -> anyhow::Result<LocalFile> {
        let mut file = File::open(disk_path).with_context(|| format!("cannot open `{disk_path}`"))?;
        let size = file.metadata().with_context(|| format!("cannot read `{disk_path}`"))?.len();
        let mut sha256 = Sha256::new();
        let mut sha1 = Sha1::new();
        sha1.update(format!("blob {size}\0").as_bytes());
        let mut sample = Vec::new();
        let mut binary = false;
        // UTF-8 is checked across buffer boundaries by carrying an incomplete tail.
        let mut tail: Vec<u8> = Vec::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut total = 0u64;
        loop {
            let n = match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e).with_context(|| format!("cannot read `{disk_path}`")),
            };
            let chunk = &buf[..n];
            total += n as u64;
            sha256.update(chunk);
            sha1.update(chunk);
            if sample.len() < SAMPLE_LEN {
                let take = (SAMPLE_LEN - sample.len()).min(n);
                sample.extend_from_slice(&chunk[..take]);
            }
            if !binary {
                if chunk.contains(&0) {
                    binary = true;
                } else {
                    tail.extend_from_slice(chunk);
                    match std::str::from_utf8(&tail) {
                        Ok(_) => tail.clear(),
                        Err(e) if e.error_len().is_none() => {
                            let keep = tail.split_off(e.valid_up_to());
                            tail = keep;
                        }
                        Err(_) => binary = true,
                    }
                }
            }
        }
        if !tail.is_empty() {
            binary = true;
        }
        anyhow::ensure!(total == size, "`{disk_path}` changed while it was read; run the upload again");
        Ok(LocalFile {
            repo_path,
            disk_path: disk_path.to_owned(),
            size,
            sha256: hex(&sha256.finalize()),
            git_oid: hex(&sha1.finalize()),
            binary,
            sample,
        })
    }

    /// Whether the content must go through LFS by local rules: binary or larger than
    /// [`LFS_THRESHOLD`]. Empty files never do (an LFS object cannot be empty).
    pub fn needs_lfs(&self) -> bool {
        self.size > 0 && (self.binary || self.size > LFS_THRESHOLD)
    }

    /// Whether `entry` (the remote file at the same path) has this content.
    pub fn matches(&self, entry: &TreeEntry) -> bool {
        match &entry.lfs {
            Some(lfs) => lfs.oid.eq_ignore_ascii_case(&self.sha256),
            None => entry.oid.eq_ignore_ascii_case(&self.git_oid),
        }
    }
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether a file is left out of an upload: anything under `__pycache__`, and `*.pyc` (Python
/// writes them at import time; the metadata digest leaves them out too).
fn skipped(name: &[u8], is_dir: bool) -> bool {
    crate::layout::is_bytecode_name(name, is_dir)
}

/// Every regular file under `root` (symlinks followed), published as `<prefix>/<relative
/// path>`, sorted by repository path. `__pycache__` directories and `*.pyc` files are left
/// out.
///
/// # Errors
/// A directory or file cannot be read, a symlink dangles, or a path is not UTF-8.
pub fn collect_files(root: &Utf8Path, prefix: &str) -> anyhow::Result<Vec<LocalFile>> {
    let mut out = Vec::new();
    let walk =
        walkdir::WalkDir::new(root).follow_links(true).sort_by_file_name().into_iter().filter_entry(|e| {
            e.depth() == 0 || !skipped(e.file_name().as_encoded_bytes(), e.file_type().is_dir())
        });
    for entry in walk {
        let entry = entry.with_context(|| format!("cannot walk `{root}`"))?;
        if !entry.file_type().is_file() {
            continue;
        }
        let path = Utf8PathBuf::from_path_buf(entry.path().to_owned()).map_err(|p| {
            anyhow::anyhow!("`{}` is not a valid UTF-8 path; Hub paths are UTF-8, rename it", p.display())
        })?;
        let rel = path.strip_prefix(root).with_context(|| format!("`{path}` is outside `{root}`"))?;
        let rel = rel.components().map(|c| c.as_str()).collect::<Vec<_>>().join("/");
        out.push(LocalFile::read(&path, format!("{prefix}/{rel}"))?);
    }
    out.sort_by(|a, b| a.repo_path.cmp(&b.repo_path));
    Ok(out)
}

/// What happens to one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Action {
    Add,
    Update,
    Unchanged,
    Delete,
}

impl Action {
    /// `add`, `update`, `unchanged`, `delete`.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Add => "add",
            Action::Update => "update",
            Action::Unchanged => "unchanged",
            Action::Delete => "delete",
        }
    }
}

/// One path of a plan: for add/update/unchanged the index of the local file, for delete the
/// remote size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub path: String,
    pub action: Action,
    /// Index into the local list (`None` for a deletion).
    pub local: Option<usize>,
    /// Bytes: the local file's, or for a deletion the remote one's.
    pub size: u64,
}

/// Compare `local` with the files of a remote revision (see the module docs for the rules).
/// Returns one change per local file (in `local` order) followed by the deletions (sorted).
pub fn diff(local: &[LocalFile], remote: &[TreeEntry], delete_prefixes: &[String]) -> Vec<Change> {
    let remote_by_path: BTreeMap<&str, &TreeEntry> =
        remote.iter().filter(|e| e.kind == "file").map(|e| (e.path.as_str(), e)).collect();
    let local_paths: BTreeSet<&str> = local.iter().map(|f| f.repo_path.as_str()).collect();
    let mut changes: Vec<Change> = local
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let action = match remote_by_path.get(f.repo_path.as_str()) {
                None => Action::Add,
                Some(e) if f.matches(e) => Action::Unchanged,
                Some(_) => Action::Update,
            };
            Change { path: f.repo_path.clone(), action, local: Some(i), size: f.size }
        })
        .collect();
    for (path, entry) in &remote_by_path {
        let under = delete_prefixes.iter().any(|p| path.starts_with(p.as_str()) && path.len() > p.len());
        if under && !local_paths.contains(path) {
            changes.push(Change {
                path: (*path).to_owned(),
                action: Action::Delete,
                local: None,
                size: entry.lfs.as_ref().map_or(entry.size, |l| l.size),
            });
        }
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hub::client::LfsInfo;

    fn local(path: &str, content: &[u8]) -> LocalFile {
        let dir = tempfile::tempdir().unwrap();
        let p = Utf8Path::from_path(dir.path()).unwrap().join("f");
        std::fs::write(&p, content).unwrap();
        LocalFile::read(&p, path.to_owned()).unwrap()
    }

    fn remote(path: &str, oid: &str, lfs: Option<&str>) -> TreeEntry {
        TreeEntry {
            kind: "file".into(),
            path: path.into(),
            oid: oid.into(),
            size: 7,
            lfs: lfs.map(|o| LfsInfo { oid: o.into(), size: 7 }),
        }
    }

    #[test]
    fn ids_match_git_and_lfs() {
        let f = local("a", b"hello\n");
        // `printf 'hello\n' | git hash-object --stdin`
        assert_eq!(f.git_oid, "ce013625030ba8dba906f756967f9e9ca394464a");
        // `printf 'hello\n' | sha256sum`
        assert_eq!(f.sha256, "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03");
        assert!(!f.binary && !f.needs_lfs());
        assert_eq!(f.sample, b"hello\n");
    }

    #[test]
    fn binary_detection() {
        assert!(local("a", b"ab\0cd").binary);
        assert!(local("a", &[0xff, 0xfe]).binary);
        assert!(!local("a", "naïve ✓".as_bytes()).binary);
        assert!(!local("a", b"").needs_lfs());
    }

    #[test]
    fn diff_adds_updates_keeps_and_deletes_only_under_prefixes() {
        let files = vec![
            local("build/torch-cpu/a.py", b"hello\n"),
            local("build/torch-cpu/b.py", b"new"),
            local("build/torch-cpu/c.so", b"\0bin"),
            local("build/torch-cpu/d.py", b"d"),
        ];
        let c_sha = files[2].sha256.clone();
        let remote = vec![
            remote("build/torch-cpu/a.py", "ce013625030ba8dba906f756967f9e9ca394464a", None),
            remote("build/torch-cpu/b.py", "0000", None),
            remote("build/torch-cpu/c.so", "1111", Some(&c_sha)),
            remote("build/torch-cpu/old/stale.py", "2222", None),
            remote("build/torch-cuda/keep.py", "3333", None),
            remote("build/torch-cpu-other/keep.py", "4444", None),
            remote("README.md", "5555", None),
            TreeEntry {
                kind: "directory".into(),
                path: "build/torch-cpu/old".into(),
                oid: "6666".into(),
                size: 0,
                lfs: None,
            },
        ];
        let changes = diff(&files, &remote, &["build/torch-cpu/".to_owned()]);
        let got: Vec<(&str, Action)> = changes.iter().map(|c| (c.path.as_str(), c.action)).collect();
        assert_eq!(
            got,
            vec![
                ("build/torch-cpu/a.py", Action::Unchanged),
                ("build/torch-cpu/b.py", Action::Update),
                ("build/torch-cpu/c.so", Action::Unchanged),
                ("build/torch-cpu/d.py", Action::Add),
                ("build/torch-cpu/old/stale.py", Action::Delete),
            ]
        );
    }

    #[test]
    fn collect_skips_bytecode() {
        let dir = tempfile::tempdir().unwrap();
        let root = Utf8Path::from_path(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("pkg/__pycache__")).unwrap();
        std::fs::write(root.join("pkg/__pycache__/x.cpython-312.pyc"), "c").unwrap();
        std::fs::write(root.join("pkg/y.pyc"), "c").unwrap();
        std::fs::write(root.join("pkg/z.py"), "z").unwrap();
        std::fs::write(root.join("metadata.json"), "{}").unwrap();
        let files = collect_files(root, "build/v").unwrap();
        let paths: Vec<&str> = files.iter().map(|f| f.repo_path.as_str()).collect();
        assert_eq!(paths, vec!["build/v/metadata.json", "build/v/pkg/z.py"]);
    }
}
