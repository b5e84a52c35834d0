//! The kernel-dependency cache as `native-cache` shows and prunes it: `<cache root>/kernel-deps/`
//! holds one tree per locked commit (`<owner>--<name>--<commit>/`, read-only), and what an
//! interrupted download left (`.download-*`, `.stale-*`).
//!
//! `.in-use.lock` is held shared while a command fetches or checks trees (`lock-kernel-deps`,
//! `get-kernel-deps`, a build) and exclusively by a prune, so a prune never removes a tree
//! being downloaded or checked, nor a download under way. A tree's modification time is when a
//! build last used it: prunes remove the least recently used first. Builds never prune.

use std::time::SystemTime;

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};

/// The lock file in the cache.
const IN_USE: &str = ".in-use.lock";

/// The cache's in-use lock, held shared (by a fetch) until dropped; creates the cache.
pub fn in_use(cache: &Utf8Path) -> anyhow::Result<std::fs::File> {
    std::fs::create_dir_all(cache).with_context(|| format!("cannot create `{cache}`"))?;
    crate::toolchain::store::lock(&cache.join(IN_USE), true)
}

/// One entry of the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub dir: Utf8PathBuf,
    /// The bytes of its files.
    pub size: u64,
    /// When a build last used it (a leftover: when it was left).
    pub used: SystemTime,
    /// What an interrupted download or replacement left, never used by a build.
    pub leftover: bool,
}

/// Every entry of `cache` (none when it does not exist): leftovers first, then trees least
/// recently used first.
pub fn entries(cache: &Utf8Path) -> anyhow::Result<Vec<Entry>> {
    let mut out = Vec::new();
    let list = match cache.read_dir_utf8() {
        Ok(l) => l,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e).with_context(|| format!("cannot list `{cache}`")),
    };
    for e in list {
        let e = e.with_context(|| format!("cannot list `{cache}`"))?;
        let name = e.file_name();
        if name == IN_USE {
            continue;
        }
        let meta = e.path().symlink_metadata().with_context(|| format!("cannot read `{}`", e.path()))?;
        let size = crate::fsutil::dir_size(e.path());
        out.push(Entry {
            dir: e.path().to_owned(),
            size,
            used: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            leftover: name.starts_with('.') || !meta.is_dir(),
        });
    }
    out.sort_by(|a, b| (!a.leftover, a.used, &a.dir).cmp(&(!b.leftover, b.used, &b.dir)));
    Ok(out)
}

/// Remove every leftover, then the least recently used trees until the cache holds at most
/// `max` bytes; waits for the commands using the cache (saying so on stderr). Returns what
/// was removed.
pub fn prune(cache: &Utf8Path, max: u64) -> anyhow::Result<Vec<Entry>> {
    if !cache.is_dir() {
        return Ok(Vec::new());
    }
    let path = cache.join(IN_USE);
    let _lock = crate::toolchain::store::lock_or_say(
        &path,
        &format!("waiting for the commands using the kernel-dependency cache `{cache}` to finish"),
    )?;
    let all = entries(cache)?;
    let mut total: u64 = all.iter().map(|e| e.size).sum();
    let mut removed = Vec::new();
    for e in all {
        if !e.leftover && total <= max {
            break;
        }
        remove(&e.dir)?;
        total -= e.size;
        removed.push(e);
    }
    Ok(removed)
}

/// Remove `path`, a read-only tree (or a file), opening its directories first.
fn remove(path: &Utf8Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let meta = path.symlink_metadata().with_context(|| format!("cannot read `{path}`"))?;
    if !meta.is_dir() {
        return std::fs::remove_file(path).with_context(|| format!("cannot remove `{path}`"));
    }
    for d in walkdir::WalkDir::new(path).into_iter().filter_entry(|e| e.file_type().is_dir()) {
        let d = d.with_context(|| format!("cannot read `{path}`"))?;
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755))
            .with_context(|| format!("cannot set permissions on `{}`", d.path().display()))?;
    }
    std::fs::remove_dir_all(path).with_context(|| format!("cannot remove `{path}`"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A read-only tree of `bytes` bytes named `name`, last used `age` seconds ago.
    fn tree(cache: &Utf8Path, name: &str, bytes: usize, age: u64) -> Utf8PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let dir = cache.join(name);
        std::fs::create_dir_all(dir.join("build/torch-cpu")).unwrap();
        std::fs::write(dir.join("build/torch-cpu/x.py"), vec![b'x'; bytes]).unwrap();
        for d in [dir.join("build/torch-cpu"), dir.join("build"), dir.clone()] {
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o555)).unwrap();
            let when = SystemTime::now() - std::time::Duration::from_secs(age);
            std::fs::File::open(&d).unwrap().set_modified(when).unwrap();
        }
        dir
    }

    #[test]
    fn prune_removes_leftovers_then_the_least_recently_used_trees() {
        let t = tempfile::tempdir().unwrap();
        let cache = Utf8Path::from_path(t.path()).unwrap().join("kernel-deps");
        assert_eq!(entries(&cache).unwrap(), []);
        assert_eq!(prune(&cache, 0).unwrap(), []);
        let c = "0123456789abcdef0123456789abcdef01234567";
        let old = tree(&cache, &format!("o--old--{c}"), 3000, 300);
        let new = tree(&cache, &format!("o--new--{c}"), 2000, 10);
        let mid = tree(&cache, &format!("o--mid--{c}"), 1000, 100);
        let left = tree(&cache, ".download-x1", 10, 0);
        drop(in_use(&cache).unwrap());
        let shown: Vec<(Utf8PathBuf, u64, bool)> =
            entries(&cache).unwrap().into_iter().map(|e| (e.dir, e.size, e.leftover)).collect();
        assert_eq!(
            shown,
            [
                (left.clone(), 10, true),
                (old.clone(), 3000, false),
                (mid.clone(), 1000, false),
                (new.clone(), 2000, false)
            ]
        );
        let removed: Vec<Utf8PathBuf> = prune(&cache, 3500).unwrap().into_iter().map(|e| e.dir).collect();
        assert_eq!(removed, [left, old]);
        let kept: Vec<Utf8PathBuf> = entries(&cache).unwrap().into_iter().map(|e| e.dir).collect();
        assert_eq!(kept, [mid.clone(), new.clone()]);
        let removed: Vec<Utf8PathBuf> = prune(&cache, 0).unwrap().into_iter().map(|e| e.dir).collect();
        assert_eq!(removed, [mid, new]);
        assert_eq!(entries(&cache).unwrap(), []);
    }
}
