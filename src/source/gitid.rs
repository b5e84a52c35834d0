//! Git object ids (SHA-1), computed without git: blob ids of files and the tree id of a set of
//! files, exactly as `git hash-object` and `git write-tree` would compute them.
//!
//! Object format (git's, see `git help format` / "Git objects"): a blob's id is
//! `sha1("blob <len>\0" <content>)`; a tree's id is `sha1("tree <len>\0" <entries>)`, each entry
//! `<mode> <name>\0<20-byte id>` with mode `100644` (regular file), `100755` (executable file)
//! or `40000` (subtree). Entries are sorted by name bytes, a subtree's name compared as if it
//! ended in `/` (so `a.py` < `a/` < `a0`). Empty trees never appear: only files are listed.

use std::collections::BTreeMap;
use std::io::Read;

use sha1::{Digest, Sha1};

/// A git object id: 20 bytes of SHA-1.
pub type ObjectId = [u8; 20];

/// The mode git records for a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileMode {
    /// `100644`.
    Regular,
    /// `100755`: git records this when the owner's execute bit is set.
    Executable,
}

impl FileMode {
    fn git_mode(self) -> &'static str {
        match self {
            FileMode::Regular => "100644",
            FileMode::Executable => "100755",
        }
    }
}

/// The blob id of `content`, as `git hash-object` prints it (in bytes).
pub fn blob_id(content: &[u8]) -> ObjectId {
    let mut h = Sha1::new();
    h.update(format!("blob {}\0", content.len()).as_bytes());
    h.update(content);
    h.finalize().into()
}

/// The blob id of a stream of exactly `len` bytes, read without holding it in memory.
///
/// Errors: the reader fails, or yields a different number of bytes than `len` (the file
/// changed while it was read).
pub fn blob_id_of_reader(len: u64, mut reader: impl Read) -> std::io::Result<ObjectId> {
    let mut h = Sha1::new();
    h.update(format!("blob {len}\0").as_bytes());
    let mut buf = vec![0u8; 64 * 1024];
    let mut seen: u64 = 0;
    loop {
        let n = reader.read(&mut buf)?;
        if n == 0 {
            break;
        }
        seen += n as u64;
        h.update(&buf[..n]);
    }
    if seen != len {
        return Err(std::io::Error::other(format!(
            "the file changed while it was read ({len} bytes expected, {seen} read)"
        )));
    }
    Ok(h.finalize().into())
}

/// Lowercase hex of an id (40 characters).
pub fn to_hex(id: &ObjectId) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// One file of a tree: its `/`-separated path relative to the tree's root, its mode and its
/// blob id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeFile {
    pub path: String,
    pub mode: FileMode,
    pub blob: ObjectId,
}

enum Node {
    File(FileMode, ObjectId),
    Dir(BTreeMap<String, Node>),
}

/// The id of the tree holding exactly `files` (with the subtrees their paths imply), as git
/// would compute it for a commit containing those files at those paths.
///
/// Errors: two files at the same path, a path that is both a file and a directory, or an empty
/// path component (`a//b`, leading or trailing `/`).
pub fn tree_id(files: &[TreeFile]) -> anyhow::Result<ObjectId> {
    let mut root = BTreeMap::new();
    for f in files {
        let parts: Vec<&str> = f.path.split('/').collect();
        anyhow::ensure!(
            !parts.iter().any(|p| p.is_empty() || *p == "." || *p == ".."),
            "`{}` is not a normalised relative path",
            f.path
        );
        let Some((last, dirs)) = parts.split_last() else { anyhow::bail!("empty path") };
        let mut level = &mut root;
        for d in dirs {
            let node = level.entry((*d).to_owned()).or_insert_with(|| Node::Dir(BTreeMap::new()));
            level = match node {
                Node::Dir(m) => m,
                Node::File(..) => anyhow::bail!("`{}` is below a file named `{d}`", f.path),
            };
        }
        anyhow::ensure!(
            level.insert((*last).to_owned(), Node::File(f.mode, f.blob)).is_none(),
            "`{}` is listed twice or is also a directory",
            f.path
        );
    }
    Ok(write_tree(&root))
}

fn write_tree(level: &BTreeMap<String, Node>) -> ObjectId {
    // git's order: names compared bytewise, a subtree's name as if followed by '/'.
    let mut entries: Vec<(Vec<u8>, &str, ObjectId, &str)> = level
        .iter()
        .map(|(name, node)| match node {
            Node::File(mode, id) => (name.as_bytes().to_vec(), name.as_str(), *id, mode.git_mode()),
            Node::Dir(sub) => {
                let mut key = name.as_bytes().to_vec();
                key.push(b'/');
                (key, name.as_str(), write_tree(sub), "40000")
            }
        })
        .collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let mut body = Vec::new();
    for (_, name, id, mode) in entries {
        body.extend_from_slice(mode.as_bytes());
        body.push(b' ');
        body.extend_from_slice(name.as_bytes());
        body.push(0);
        body.extend_from_slice(&id);
    }
    let mut h = Sha1::new();
    h.update(format!("tree {}\0", body.len()).as_bytes());
    h.update(&body);
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_ids_match_git_hash_object() {
        // `printf '' | git hash-object --stdin` and `printf 'hello\n' | git hash-object --stdin`.
        assert_eq!(to_hex(&blob_id(b"")), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
        assert_eq!(to_hex(&blob_id(b"hello\n")), "ce013625030ba8dba906f756967f9e9ca394464a");
        let streamed = blob_id_of_reader(6, &b"hello\n"[..]).unwrap();
        assert_eq!(streamed, blob_id(b"hello\n"));
        assert!(blob_id_of_reader(7, &b"hello\n"[..]).is_err());
    }

    #[test]
    fn empty_tree_id_is_gits() {
        assert_eq!(to_hex(&tree_id(&[]).unwrap()), "4b825dc642cb6eb9a060e54bf8d69288fbee4904");
    }

    #[test]
    fn conflicting_paths_are_rejected() {
        let f = |p: &str| TreeFile { path: p.to_owned(), mode: FileMode::Regular, blob: blob_id(b"") };
        assert!(tree_id(&[f("a"), f("a/b")]).is_err());
        assert!(tree_id(&[f("a/b"), f("a")]).is_err());
        assert!(tree_id(&[f("a"), f("a")]).is_err());
        assert!(tree_id(&[f("a//b")]).is_err());
        assert!(tree_id(&[f("../a")]).is_err());
    }
}
