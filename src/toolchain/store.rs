//! The toolchain cache: pinned wheels, content-addressed, under `<cache>/toolchain-v1/`.
//!
//! - `wheels/<sha256>.whl`: a wheel, stored only once its bytes have the pinned sha256 (it is
//!   written as `<sha256>.part` and renamed), read-only. An interrupted download leaves the
//!   `.part`, which the next fetch resumes (HTTP `Range`). `<sha256>.checked` records the size
//!   and modification time the wheel had when its sha256 was last checked (its modification
//!   time is the wheel's last use): a use whose stat differs hashes it again, and a wheel is
//!   always hashed again before it is unpacked. One whose bytes are not the pinned ones
//!   (corrupted, truncated, replaced) is removed and fetched again, with a warning.
//! - `trees/<key>/`: wheels unpacked together (never installed: no pip, no RECORD run), `key`
//!   derived from their hashes; unpacked into a temporary directory (`.tmp-<key>`) and renamed,
//!   so a tree there is complete. A file in a `bin/` directory is made executable (NVIDIA's
//!   wheels carry no modes). A tree is sealed ([`super::seal`]): read-only, with a manifest of
//!   its files and their sha256s, checked on every use; one that differs is unpacked again,
//!   with a warning. A `.tmp-` tree that a failed unpack (a full disk) left is listed and
//!   pruned first.
//! - `test-envs/<key>/`: testshell's environments ([`super::test_env`]), sealed the same way.
//! - `locks/`: one `flock` per wheel and per tree, so concurrent builds download and unpack
//!   each once and wait for each other; and `in-use.lock`, held shared by every build that
//!   uses trees and exclusively by a prune, so a prune never removes what a build compiles
//!   with.
//!
//! A wheel comes from a `--find-links` directory holding a file of that name, else from its
//! pinned URL (never with `--offline`); a `--find-links` file is hashed where it lies, and
//! copied only when it has the pinned sha256. Entries are used least recently first when the
//! cache is pruned to its size bound ([`max_bytes`], `KERNEL_BUILDER_TOOLCHAIN_CACHE_MAX_SIZE`);
//! a build's own prune keeps what that build used, and says so when that alone is over the bound.

use std::collections::{BTreeSet, HashMap};
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::sync::Mutex;

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};
use sha2::Digest as _;

use super::pins::ResolvedWheel;

/// The cache's directory name below the cache root.
pub const DIR_NAME: &str = "toolchain-v1";
/// The file in a tree naming the wheels it was unpacked from, one a line.
const TREE_NAMES: &str = ".kernel-builder-wheels";
/// The file in one of testshell's environments (`test-envs/<key>/`) saying it is whole:
/// written last, it holds where the environment's torch came from.
pub(super) const TEST_ENV_READY: &str = ".kernel-builder-ready";
/// The environment variable that puts the toolchain cache elsewhere.
pub const DIR_VAR: &str = crate::env::TOOLCHAIN_CACHE_DIR.name;
/// The environment variable bounding the toolchain cache.
pub const MAX_SIZE_VAR: &str = crate::env::TOOLCHAIN_CACHE_MAX_SIZE.name;
/// The default bound: two torch releases with their toolkits, unpacked, fit.
pub const DEFAULT_MAX: u64 = 30 << 30;

/// Where wheels come from, and how a download is shown.
#[derive(Debug, Clone, Default)]
pub struct FetchOptions {
    /// Never use the network.
    pub offline: bool,
    /// Directories looked in first for a wheel's file name (a wheelhouse).
    pub find_links: Vec<Utf8PathBuf>,
    /// Draw a byte progress bar on stderr (only when it is a terminal).
    pub progress: bool,
}

/// The toolchain cache.
#[derive(Debug)]
pub struct Store {
    root: Utf8PathBuf,
    options: FetchOptions,
    agent: ureq::Agent,
    _in_use: std::fs::File,
    /// Every entry this process used (wheels, trees, test environments): a build's prune
    /// keeps them.
    used: Mutex<BTreeSet<Utf8PathBuf>>,
    /// Every warning and waiting note said on stderr, also kept for tests.
    said: Mutex<Vec<String>>,
}

/// What [`Store::prune`] did.
#[derive(Debug, Clone, Default)]
pub struct Pruned {
    /// The entries removed.
    pub removed: Vec<Entry>,
    /// The entries this process used, kept though the cache was still over its bound.
    pub kept_in_use: Vec<Entry>,
    /// Bytes left in the cache.
    pub left: u64,
}

impl Pruned {
    /// A warning when what a build used alone is over the bound `max`: nothing it used was
    /// removed, and the bound should be raised.
    pub fn over_bound(&self, max: u64) -> Option<String> {
        if self.kept_in_use.is_empty() || self.left <= max {
            return None;
        }
        let used: u64 = self.kept_in_use.iter().map(|e| e.size).sum();
        Some(format!(
            "the toolchain cache holds {} after pruning, over its bound of {} ({MAX_SIZE_VAR}): the {} entr{} this build used ({}) were kept; set {MAX_SIZE_VAR} to at least {} so that builds stop downloading and unpacking them again",
            crate::fsutil::human_size(self.left),
            crate::fsutil::human_size(max),
            self.kept_in_use.len(),
            if self.kept_in_use.len() == 1 { "y" } else { "ies" },
            crate::fsutil::human_size(used),
            crate::fsutil::human_size(used),
        ))
    }
}

/// `wheels/<sha256>.checked`: the wheel's size and modification time when its sha256 was
/// last found right.
#[derive(Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Checked {
    len: u64,
    mtime_ns: u64,
}

fn checked_of(path: &Utf8Path) -> Option<Checked> {
    let m = std::fs::metadata(path).ok()?;
    let mtime_ns = m.modified().ok()?.duration_since(std::time::UNIX_EPOCH).ok()?.as_nanos();
    Some(Checked { len: m.len(), mtime_ns: u64::try_from(mtime_ns).ok()? })
}

/// The sha256 (hex) of the file `path`, read where it lies in 1 MiB pieces.
fn sha256_of(path: &Utf8Path) -> anyhow::Result<String> {
    let mut f = std::fs::File::open(path).with_context(|| format!("cannot open `{path}`"))?;
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        anyhow::ensure!(!crate::interrupt::interrupted(), "interrupted while hashing `{path}`");
        let n = f.read(&mut buf).with_context(|| format!("cannot read `{path}`"))?;
        if n == 0 {
            return Ok(hex(h.finalize()));
        }
        h.update(&buf[..n]);
    }
}

/// One entry, for `native-cache`.
#[derive(Debug, Clone)]
pub struct Entry {
    pub path: Utf8PathBuf,
    /// What it holds: the wheel's file name, or the wheels a tree was unpacked from.
    pub what: String,
    pub size: u64,
    pub used: std::time::SystemTime,
    /// A tree a failed or interrupted unpack left (`trees/.tmp-*`): every prune removes it.
    pub unfinished: bool,
}

/// `KERNEL_BUILDER_TOOLCHAIN_CACHE_MAX_SIZE`, else [`DEFAULT_MAX`].
pub fn max_bytes() -> anyhow::Result<u64> {
    crate::env::TOOLCHAIN_CACHE_MAX_SIZE.size(DEFAULT_MAX)
}

/// The lock file `path`, made when missing (its bytes are never read).
fn open_lock_file(path: &Utf8Path) -> anyhow::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .with_context(|| format!("cannot open the lock file `{path}`"))
}

pub(crate) fn lock(path: &Utf8Path, shared: bool) -> anyhow::Result<std::fs::File> {
    let f = open_lock_file(path)?;
    let how = if shared {
        rustix::fs::FlockOperation::LockShared
    } else {
        rustix::fs::FlockOperation::LockExclusive
    };
    rustix::fs::flock(&f, how).with_context(|| format!("cannot lock `{path}`"))?;
    Ok(f)
}

/// An exclusive lock on `path`: with `wait`, once its holder lets go; without, `None` while
/// another process holds it (a prune that must not wait for a running build).
pub(crate) fn lock_exclusive(path: &Utf8Path, wait: bool) -> anyhow::Result<Option<std::fs::File>> {
    if wait {
        return lock(path, false).map(Some);
    }
    let f = open_lock_file(path)?;
    match rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(Some(f)),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot lock `{path}`")),
    }
}

/// [`lock`] (exclusive), calling `say_waiting` first when another process holds it, so a long
/// wait is not silent.
fn lock_saying(path: &Utf8Path, say_waiting: impl FnOnce()) -> anyhow::Result<std::fs::File> {
    match lock_exclusive(path, false)? {
        Some(f) => Ok(f),
        None => {
            say_waiting();
            lock(path, false)
        }
    }
}

/// [`lock`] (exclusive), saying `waiting` on stderr first when another process holds it, so
/// a long wait (another shell making the same environment) is not silent.
pub(crate) fn lock_or_say(path: &Utf8Path, waiting: &str) -> anyhow::Result<std::fs::File> {
    lock_saying(path, || crate::printer::stderr!("{waiting}"))
}

fn touch(path: &Utf8Path) {
    if let Ok(f) = std::fs::File::open(path) {
        let _ = f.set_modified(std::time::SystemTime::now());
    }
}

fn hex(d: impl AsRef<[u8]>) -> String {
    d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

impl Store {
    /// The cache under `root` (`<cache>/toolchain-v1`), created when missing; holds the
    /// in-use lock (shared) until dropped.
    pub fn open(root: &Utf8Path, options: FetchOptions) -> anyhow::Result<Store> {
        for d in ["wheels", "trees", "locks"] {
            std::fs::create_dir_all(root.join(d))
                .with_context(|| format!("cannot create `{}`", root.join(d)))?;
        }
        // The trees' paths reach the compile (include directories, `-ffile-prefix-map`): a root
        // reached through a symbolic link would give the compiler one spelling of a header's
        // path and the prefix map another, and the unmapped one would land in the binary.
        let root = root.canonicalize_utf8().with_context(|| format!("cannot resolve `{root}`"))?;
        let in_use = lock(&root.join("locks/in-use.lock"), true)?;
        let agent = super::http::agent(None);
        Ok(Store {
            root,
            options,
            agent,
            _in_use: in_use,
            used: Mutex::new(BTreeSet::new()),
            said: Mutex::new(Vec::new()),
        })
    }

    /// Say `msg` on stderr (a warning, a waiting note), keeping it for [`Store::said`].
    fn say(&self, msg: String) {
        crate::printer::stderr!("{msg}");
        self.said.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(msg);
    }

    /// Everything this store said on stderr, in order.
    pub fn said(&self) -> Vec<String> {
        self.said.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Mark `path` (an entry) as used by this process: a build's prune keeps it.
    pub(super) fn mark_used(&self, path: &Utf8Path) {
        self.used.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(path.to_owned());
    }

    /// [`lock`] (exclusive) on `locks/<name>.lock`, saying `waiting` (a warning-free note)
    /// first when another process holds it.
    pub(super) fn lock_named(&self, name: &str, waiting: &str) -> anyhow::Result<std::fs::File> {
        let path = self.root.join("locks").join(format!("{name}.lock"));
        lock_saying(&path, || self.say(format!("{waiting} (it holds `{path}`)")))
    }

    /// The user's toolchain cache: `$KERNEL_BUILDER_TOOLCHAIN_CACHE_DIR`, else
    /// `<cache root>/toolchain-v1` (one toolchain cache can serve several cell caches, e.g.
    /// every test of a run).
    pub fn user(options: FetchOptions) -> anyhow::Result<Store> {
        Store::open(&user_root()?, options)
    }

    pub fn root(&self) -> &Utf8Path {
        &self.root
    }

    /// The wheel `w`, whole and with its pinned hash: from the cache, a `--find-links`
    /// directory, or its URL. Returns its path in the cache.
    ///
    /// Errors (the message names the wheel and what to do): offline and not cached, the
    /// download failing, the bytes not having the pinned sha256 (the file is removed).
    ///
    /// A cached wheel is trusted while its size and modification time are those it had when
    /// its sha256 was last checked; otherwise it is hashed again, and when its bytes are not
    /// the pinned ones it is removed and fetched again, with a warning.
    pub fn wheel(&self, w: &ResolvedWheel) -> anyhow::Result<Utf8PathBuf> {
        self.wheel_inner(w, false)
    }

    /// Whether the cached `dest` holds `w`: by its `.checked` stamp, or (`hash`, or no stamp,
    /// or another stamp) by hashing it, which renews the stamp. Touches the stamp (the wheel's
    /// last use). `Err`: why not, for the warning.
    fn cached_ok(
        &self,
        w: &ResolvedWheel,
        dest: &Utf8Path,
        hash: bool,
    ) -> anyhow::Result<Result<(), String>> {
        let checked = self.root.join("wheels").join(format!("{}.checked", w.sha256));
        let recorded: Option<Checked> =
            std::fs::read(&checked).ok().and_then(|t| serde_json::from_slice(&t).ok());
        let now = checked_of(dest);
        if !hash && recorded.is_some() && recorded == now {
            touch(&checked);
            return Ok(Ok(()));
        }
        let sha = sha256_of(dest)?;
        if sha != w.sha256 {
            let len = now.map(|c| c.len).unwrap_or(0);
            return Ok(Err(format!(
                "has sha256 {sha} ({len} bytes), not the pinned {}: corrupted, truncated or replaced",
                w.sha256
            )));
        }
        self.write_checked(dest, &checked)?;
        Ok(Ok(()))
    }

    /// Record `dest`'s stamp in `checked` (written to a temporary file and renamed: two builds
    /// may check the same wheel at once).
    fn write_checked(&self, dest: &Utf8Path, checked: &Utf8Path) -> anyhow::Result<()> {
        let text = serde_json::to_vec(&checked_of(dest)).context("cannot serialise a wheel's stamp")?;
        let dir = self.root.join("wheels");
        let mut tmp =
            tempfile::NamedTempFile::new_in(&dir).with_context(|| format!("cannot write in `{dir}`"))?;
        tmp.write_all(&text).with_context(|| format!("cannot write in `{dir}`"))?;
        tmp.persist(checked).with_context(|| format!("cannot write `{checked}`"))?;
        Ok(())
    }

    /// The wheel `w`'s path in the cache, fetched when missing or wrong; `hash`: check its
    /// sha256 even when its stamp is unchanged (before unpacking it).
    fn wheel_inner(&self, w: &ResolvedWheel, hash: bool) -> anyhow::Result<Utf8PathBuf> {
        anyhow::ensure!(
            w.sha256.len() == 64 && w.sha256.bytes().all(|b| b.is_ascii_hexdigit()),
            "the pinned sha256 of {} is not 64 hex digits",
            w.file
        );
        let dest = self.root.join("wheels").join(format!("{}.whl", w.sha256));
        self.mark_used(&dest);
        if dest.is_file() && self.cached_ok(w, &dest, hash)?.is_ok() {
            return Ok(dest);
        }
        let _l = self.lock_named(
            &w.sha256,
            &format!("waiting for another build's download of {} into the toolchain cache", w.file),
        )?;
        if dest.is_file() {
            // Another build fetched it while this one waited, or the copy here is wrong.
            match self.cached_ok(w, &dest, hash)? {
                Ok(()) => return Ok(dest),
                Err(why) => {
                    self.say(format!(
                        "warning: the cached wheel {} (`{dest}`) {why}; removed, fetching it again",
                        w.file
                    ));
                    std::fs::remove_file(&dest).with_context(|| format!("cannot remove `{dest}`"))?;
                }
            }
        }
        let part = self.root.join("wheels").join(format!("{}.part", w.sha256));
        let local =
            self.options.find_links.iter().map(|d| d.join(&w.file)).find(|p| p.symlink_metadata().is_ok());
        if let Some(src) = local.as_ref().filter(|p| !p.is_file()) {
            anyhow::bail!(
                "`{src}` is not a regular file (a FIFO, a device or a dangling link); put the wheel {} itself in the --find-links directory",
                w.file
            );
        }
        let sha = match local {
            Some(src) => {
                // Hashed where it lies first: a file of other bytes (a wrong build, a huge
                // sparse file) is never copied into the cache.
                let sha = sha256_of(&src)?;
                if sha != w.sha256 {
                    anyhow::bail!(
                        "{} has sha256 {sha}, but {} pins {}; the file `{src}` was not used (nothing was copied into the toolchain cache). A wheelhouse holding another build of it gives this: put the pinned file there",
                        w.file,
                        super::pins::PINS_FILE,
                        w.sha256
                    );
                }
                let _ = std::fs::remove_file(&part);
                let mut from = std::fs::File::open(&src).with_context(|| format!("cannot open `{src}`"))?;
                let len = from.metadata().map(|m| m.len()).unwrap_or(0);
                // Hashed again while copied: the file may change in between.
                self.copy_hashing(&mut from, &part, sha2::Sha256::new(), false, len, &w.file)?
            }
            None if self.options.offline => anyhow::bail!(
                "{} is not in the toolchain cache and --offline forbids downloading it; put it in a --find-links directory, or build once without --offline",
                w.file
            ),
            None => self.download(w, &part)?,
        };
        if sha != w.sha256 {
            let _ = std::fs::remove_file(&part);
            anyhow::bail!(
                "{} has sha256 {sha}, but {} pins {}; the file was not used (its copy in the toolchain cache was removed). A wheelhouse holding another build of it, or a changed index, gives this: fetch the pinned file",
                w.file,
                super::pins::PINS_FILE,
                w.sha256
            );
        }
        std::fs::set_permissions(&part, std::fs::Permissions::from_mode(0o444))
            .with_context(|| format!("cannot make `{part}` read-only"))?;
        std::fs::rename(&part, &dest).with_context(|| format!("cannot move `{part}` to `{dest}`"))?;
        self.write_checked(&dest, &self.root.join("wheels").join(format!("{}.checked", w.sha256)))?;
        Ok(dest)
    }

    /// Download `w.url` into `part`, resuming what a killed download left there; the sha256 of
    /// the whole file.
    fn download(&self, w: &ResolvedWheel, part: &Utf8Path) -> anyhow::Result<String> {
        let have = std::fs::metadata(part).map(|m| m.len()).unwrap_or(0);
        let mut req = self.agent.get(&w.url);
        if have > 0 {
            req = req.header("Range", format!("bytes={have}-"));
        }
        let resp = req.call().with_context(|| {
            format!(
                "cannot download {} ({}); check the network, or use --find-links DIR with the wheel",
                w.file, w.url
            )
        })?;
        let status = resp.status().as_u16();
        let resume = status == 206 && have > 0;
        if status == 416 && have > 0 {
            // The partial file is not a prefix the server knows: start again.
            let _ = std::fs::remove_file(part);
            return self.download(w, part);
        }
        anyhow::ensure!(
            status == 200 || resume,
            "cannot download {}: {} answered HTTP {status}",
            w.file,
            w.url
        );
        let len = resp
            .headers()
            .get("content-length")
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
            .unwrap_or(0);
        let mut hasher = sha2::Sha256::new();
        if resume {
            let mut f = std::fs::File::open(part).with_context(|| format!("cannot read `{part}`"))?;
            std::io::copy(&mut f, &mut hasher).with_context(|| format!("cannot read `{part}`"))?;
        }
        let mut body = resp.into_body().into_reader();
        let total = if resume { have + len } else { len };
        self.copy_hashing(&mut body, part, hasher, resume, total, &w.file)
    }

    /// Copy `from` into `part` (appending when `append`), feeding `hasher`, with a byte bar
    /// when asked for and stderr is a terminal; the hex digest.
    fn copy_hashing(
        &self,
        from: &mut dyn Read,
        part: &Utf8Path,
        mut hasher: sha2::Sha256,
        append: bool,
        total: u64,
        name: &str,
    ) -> anyhow::Result<String> {
        let mut out = std::fs::OpenOptions::new()
            .create(true)
            .append(append)
            .write(true)
            .truncate(!append)
            .open(part)
            .with_context(|| format!("cannot write `{part}`"))?;
        let start = if append { out.metadata().map(|m| m.len()).unwrap_or(0) } else { 0 };
        let bar = crate::printer::bar(
            self.options.progress,
            Some(total),
            "{msg} {bytes}/{total_bytes} {binary_bytes_per_sec} {wide_bar} {eta}",
        );
        bar.set_message(name.to_owned());
        bar.set_position(start);
        let mut buf = vec![0u8; 1 << 20];
        loop {
            anyhow::ensure!(!crate::interrupt::interrupted(), "the download of {name} was interrupted");
            let n = from
                .read(&mut buf)
                .with_context(|| format!("reading {name} failed (run again to resume)"))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            out.write_all(&buf[..n]).with_context(|| format!("cannot write `{part}`"))?;
            bar.inc(n as u64);
        }
        out.sync_all().with_context(|| format!("cannot write `{part}`"))?;
        bar.finish_and_clear();
        Ok(hex(hasher.finalize()))
    }

    /// The wheels `wheels` unpacked together into one directory (fetched first when missing),
    /// named by their hashes.
    ///
    /// A tree is checked against its manifest on every use ([`super::seal::check`]); one
    /// that differs (edited, truncated, added to) is unpacked again, with a warning.
    ///
    /// Errors: [`Store::wheel`]'s, and the tree failing to unpack or to be sealed.
    pub fn tree(&self, wheels: &[ResolvedWheel]) -> anyhow::Result<Utf8PathBuf> {
        self.tree_and_hash(wheels).map(|(p, _)| p)
    }

    /// [`Store::tree`] with the tree's recorded hash ([`super::seal::Sealed::tree_hash`]).
    pub fn tree_and_hash(&self, wheels: &[ResolvedWheel]) -> anyhow::Result<(Utf8PathBuf, String)> {
        let key = &super::pins::set_id(wheels.iter().map(|w| w.sha256.as_str()));
        let dest = self.root.join("trees").join(key);
        self.mark_used(&dest);
        let names: Vec<&str> = wheels.iter().map(|w| w.file.as_str()).collect();
        if dest.is_dir() {
            if let Ok(sealed) = super::seal::check(&dest)? {
                touch(&dest);
                if let Some(h) = sealed.tree_hash {
                    return Ok((dest, h));
                }
            }
        }
        let _l = self.lock_named(
            &format!("tree-{key}"),
            &format!("waiting for another build unpacking {}", names.join(", ")),
        )?;
        if dest.is_dir() {
            match super::seal::check(&dest)? {
                Ok(super::seal::Sealed { tree_hash: Some(h) }) => return Ok((dest, h)),
                Ok(_) => self.say(format!(
                    "warning: the unpacked tree `{dest}` ({}) has no recorded hash (an older kernel-builder unpacked it); unpacking it again",
                    names.join(", ")
                )),
                Err(why) => self.say(format!(
                    "warning: the unpacked tree `{dest}` ({}) differs from what was unpacked: {why}; unpacking it again",
                    names.join(", ")
                )),
            }
            // Renamed away first, so the tree's path never holds a half-removed tree.
            let old = self.root.join("trees").join(format!(".old-{key}-{}", std::process::id()));
            std::fs::rename(&dest, &old).with_context(|| format!("cannot move `{dest}` to `{old}`"))?;
            super::seal::remove(&old)?;
        }
        // Each wheel's sha256 is checked again right before it is unpacked.
        let files: Vec<Utf8PathBuf> =
            wheels.iter().map(|w| self.wheel_inner(w, true)).collect::<anyhow::Result<_>>()?;
        let tmp = self.root.join("trees").join(format!(".tmp-{key}"));
        super::seal::remove(&tmp)?;
        let _registered = crate::interrupt::remove_on_interrupt(&tmp, crate::interrupt::Removal::All);
        let mut file_hashes = HashMap::new();
        for (f, w) in files.iter().zip(wheels) {
            unpack(f, &tmp, Some(&mut file_hashes))
                .with_context(|| format!("cannot unpack {} (`{f}`)", w.file))?;
        }
        let list = names.join("\n") + "\n";
        std::fs::write(tmp.join(TREE_NAMES), &list)
            .with_context(|| format!("cannot write `{tmp}/{TREE_NAMES}`"))?;
        file_hashes.insert(TREE_NAMES.to_owned(), hex(sha2::Sha256::digest(list.as_bytes())));
        let sealed = super::seal::seal(&tmp, Some(&file_hashes))?;
        let hash = sealed.tree_hash.context("an unpacked tree has every file's sha256")?;
        std::fs::rename(&tmp, &dest).with_context(|| format!("cannot move `{tmp}` to `{dest}`"))?;
        Ok((dest, hash))
    }

    /// Every wheel and tree, least recently used first.
    pub fn entries(&self) -> anyhow::Result<Vec<Entry>> {
        entries_in(&self.root)
    }

    /// Remove the least recently used entries until the cache holds at most `max` bytes,
    /// an unfinished unpack (`trees/.tmp-*`) first, and never what this store was used for
    /// (the build that prunes keeps its own toolchain; [`Pruned::over_bound`] says when that
    /// alone is over `max`). Builds using the cache hold the in-use lock: with `wait`, wait for
    /// them to finish; without, return `None` when one is running.
    pub fn prune(self, max: u64, wait: bool) -> anyhow::Result<Option<Pruned>> {
        let root = self.root.clone();
        let used = std::mem::take(&mut *self.used.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        drop(self); // its own shared lock
        let Some(_in_use) = lock_exclusive(&root.join("locks/in-use.lock"), wait)? else {
            return Ok(None);
        };
        let store_entries = entries_in(&root)?;
        let mut total: u64 = store_entries.iter().map(|e| e.size).sum();
        let mut out = Pruned::default();
        for e in store_entries {
            if total <= max && !e.unfinished {
                break;
            }
            if used.contains(&e.path) {
                out.kept_in_use.push(e);
                continue;
            }
            if e.path.is_dir() {
                super::seal::remove(&e.path)?;
            } else {
                std::fs::remove_file(&e.path).with_context(|| format!("cannot remove `{}`", e.path))?;
                let checked = e.path.with_extension("checked");
                if e.path.extension() == Some("whl") {
                    let _ = std::fs::remove_file(&checked);
                }
            }
            total -= e.size;
            out.removed.push(e);
        }
        out.left = total;
        Ok(Some(out))
    }
}

/// Every wheel and tree under `root`, least recently used first; an unfinished tree
/// (`trees/.tmp-*`, `trees/.old-*`: a failed or interrupted unpack) before all.
fn entries_in(root: &Utf8Path) -> anyhow::Result<Vec<Entry>> {
    let mut out = Vec::new();
    for d in ["wheels", "trees", "test-envs"] {
        let dir = root.join(d);
        if d == "test-envs" && !dir.is_dir() {
            continue;
        }
        for e in dir.read_dir_utf8().with_context(|| format!("cannot list `{dir}`"))? {
            let e = e.with_context(|| format!("cannot list `{dir}`"))?;
            let name = e.file_name();
            let unfinished = d == "trees" && (name.starts_with(".tmp-") || name.starts_with(".old-"));
            if (name.starts_with('.') && !unfinished) || name.ends_with(".checked") || name.ends_with(".tmp")
            {
                continue;
            }
            // A wheel's last use is its stamp's modification time (the wheel's own is checked).
            let used_of = if d == "wheels" && name.ends_with(".whl") {
                e.path().with_extension("checked")
            } else {
                e.path().to_owned()
            };
            let used = if unfinished {
                std::time::UNIX_EPOCH
            } else {
                std::fs::metadata(&used_of)
                    .or_else(|_| e.metadata())
                    .and_then(|m| m.modified())
                    .unwrap_or(std::time::UNIX_EPOCH)
            };
            let size = crate::fsutil::dir_size(e.path());
            let what = if unfinished {
                "an unfinished unpack (a failed or interrupted build left it; pruned first)".to_owned()
            } else if d == "wheels" {
                let sha = e.file_name().split('.').next().unwrap_or_default();
                super::pins::file_of(sha).unwrap_or_else(|| "(not pinned by this version)".to_owned())
            } else if d == "test-envs" {
                match std::fs::read_to_string(e.path().join(TEST_ENV_READY)) {
                    Ok(from) => format!("testshell's environment: {}", from.trim()),
                    Err(_) => "testshell's environment, unfinished (made again when next used)".to_owned(),
                }
            } else {
                let names = std::fs::read_to_string(e.path().join(TREE_NAMES)).unwrap_or_default();
                names.lines().collect::<Vec<_>>().join(", ")
            };
            out.push(Entry { path: e.path().to_owned(), what, size, used, unfinished });
        }
    }
    out.sort_by(|a, b| {
        (!a.unfinished, a.used).cmp(&(!b.unfinished, b.used)).then_with(|| a.path.cmp(&b.path))
    });
    Ok(out)
}

/// The modification time of every unpacked file: 1 s after the epoch, as in the Nix store.
fn unpacked_mtime() -> std::time::SystemTime {
    std::time::UNIX_EPOCH + std::time::Duration::from_secs(1)
}

/// The directories below `nvidia/` of NVIDIA's CUDA 12 library wheels (`nvidia-cublas-cu12`
/// lies in `nvidia/cublas/`, …), which a toolkit root merges like the `cuda_*` components.
const CU12_LIBRARIES: [&str; 7] = ["cublas", "cufft", "curand", "cusolver", "cusparse", "nvjitlink", "nvtx"];

/// NVIDIA's CUDA 12 wheels each lie in `nvidia/cuda_<component>/` (the libraries in
/// `nvidia/<library>/`); CUDA 13's share `nvidia/cu13/`. Merged into `nvidia/cu12/`, a CUDA 12
/// toolkit has the same one-root layout (`bin/nvcc`, `include/`, `lib/`, `nvvm/`) as CUDA 13's.
fn cu12_merged(rel: &std::path::Path) -> std::path::PathBuf {
    let mut parts = rel.components();
    match (parts.next(), parts.next()) {
        (Some(a), Some(b))
            if a.as_os_str() == "nvidia"
                && b.as_os_str()
                    .to_str()
                    .is_some_and(|s| s.starts_with("cuda_") || CU12_LIBRARIES.contains(&s)) =>
        {
            std::path::Path::new("nvidia/cu12").join(parts.as_path())
        }
        _ => rel.to_owned(),
    }
}

/// Where the user's toolchain cache is ([`Store::user`] opens it there):
/// `KERNEL_BUILDER_TOOLCHAIN_CACHE_DIR`, else `toolchain-v1/` in the cache root. Nothing is
/// created.
pub fn user_root() -> anyhow::Result<Utf8PathBuf> {
    Ok(match crate::env::TOOLCHAIN_CACHE_DIR.dir()? {
        Some(d) => d,
        None => crate::fsutil::cache_root()?.join(DIR_NAME),
    })
}

/// Unpack the wheels `files` together into the new directory `dir`, as the cache unpacks a
/// tree (the same layout and modes; no tree-names file): what a Nix cell's unpack derivation
/// runs (`kernel-builder nix-support unpack-wheels`), so that Nix and native builds compile
/// against the same files.
pub fn unpack_into(files: &[Utf8PathBuf], dir: &Utf8Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create `{dir}`"))?;
    for f in files {
        unpack(f, dir, None).with_context(|| format!("cannot unpack `{f}`"))?;
    }
    Ok(())
}

/// Unpack the wheel `file` into `dir` (files only; each path checked to stay inside). A file
/// whose mode has an execute bit, or which lies in a `bin/` directory, is 0o755; others 0o644.
/// `hashes`: each file's sha256, by its path relative to `dir` (a later wheel's file of the
/// same path replaces an earlier one's, here as on disk).
fn unpack(
    file: &Utf8Path,
    dir: &Utf8Path,
    mut hashes: Option<&mut HashMap<String, String>>,
) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let f = std::fs::File::open(file).with_context(|| format!("cannot open `{file}`"))?;
    let mut zip = zip::ZipArchive::new(std::io::BufReader::new(f)).context("not a zip archive")?;
    for i in 0..zip.len() {
        let mut e = zip.by_index(i)?;
        let Some(rel) = e.enclosed_name() else {
            anyhow::bail!("the member `{}` would land outside the directory", e.name());
        };
        let path = dir.as_std_path().join(cu12_merged(&rel));
        if e.is_dir() {
            std::fs::create_dir_all(&path)?;
            continue;
        }
        if let Some(p) = path.parent() {
            std::fs::create_dir_all(p)?;
        }
        let mut out =
            std::fs::File::create(&path).with_context(|| format!("cannot write `{}`", path.display()))?;
        let mut h = sha2::Sha256::new();
        let mut buf = [0u8; 64 << 10];
        loop {
            let n = e.read(&mut buf)?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
            out.write_all(&buf[..n]).with_context(|| format!("cannot write `{}`", path.display()))?;
        }
        // A fixed modification time, as in the Nix store: a tree unpacked again from the same
        // wheels is the same tree to the cell key's file stamps (so its cells are reused), and
        // an edit still moves it (the check on use).
        out.set_modified(unpacked_mtime())
            .with_context(|| format!("cannot set the time of `{}`", path.display()))?;
        if let Some(hashes) = hashes.as_deref_mut() {
            let rel = path.strip_prefix(dir.as_std_path()).unwrap_or(&path).to_string_lossy().into_owned();
            hashes.insert(rel, hex(h.finalize()));
        }
        let in_bin = rel.parent().and_then(|p| p.file_name()).is_some_and(|n| n == "bin");
        let exec = in_bin || e.unix_mode().is_some_and(|m| m & 0o111 != 0);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(if exec { 0o755 } else { 0o644 }))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_or_say_waits_for_the_holder_and_then_holds_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = Utf8Path::from_path(dir.path()).unwrap().join("x.lock");
        let held = lock(&path, false).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let p = path.clone();
        let waiter = std::thread::spawn(move || {
            let got = lock_or_say(&p, "waiting in the test").unwrap();
            tx.send(()).unwrap();
            got
        });
        // Still held: the waiter has not got it.
        assert!(rx.recv_timeout(std::time::Duration::from_millis(300)).is_err());
        drop(held);
        rx.recv_timeout(std::time::Duration::from_secs(30))
            .expect("the waiter gets the lock once it is free");
        let got = waiter.join().unwrap();
        // The waiter holds it exclusively now.
        let f = std::fs::File::open(path.as_std_path()).unwrap();
        assert!(rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_err());
        drop(got);
        assert!(rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_ok());
    }

    fn wheel_bytes(files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut buf = std::io::Cursor::new(Vec::new());
        let mut z = zip::ZipWriter::new(&mut buf);
        for (name, data) in files {
            z.start_file(*name, zip::write::SimpleFileOptions::default()).unwrap();
            z.write_all(data).unwrap();
        }
        z.finish().unwrap();
        buf.into_inner()
    }

    #[test]
    fn a_wheelhouse_wheel_is_checked_unpacked_and_its_tools_made_executable() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let root = Utf8Path::from_path(t.path()).unwrap();
        let house = root.join("house");
        std::fs::create_dir_all(&house).unwrap();
        let bytes =
            wheel_bytes(&[("nvidia/cu13/bin/nvcc", b"#!/bin/sh\n"), ("nvidia/cu13/include/a.h", b"x")]);
        std::fs::write(house.join("n-1-py3-none-any.whl"), &bytes).unwrap();
        let w = ResolvedWheel {
            file: "n-1-py3-none-any.whl".into(),
            url: "http://127.0.0.1:9/unreachable".into(),
            sha256: hex(sha2::Sha256::digest(&bytes)),
        };
        let opts = FetchOptions { offline: true, find_links: vec![house.clone()], progress: false };
        let store = Store::open(&root.join("cache"), opts.clone()).unwrap();
        let tree = store.tree(std::slice::from_ref(&w)).unwrap();
        let mode = |p: &Utf8Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        // Executable as unpacked (0o755, 0o644), then sealed read-only.
        assert_eq!(mode(&tree.join("nvidia/cu13/bin/nvcc")), 0o555);
        assert_eq!(mode(&tree.join("nvidia/cu13/include/a.h")), 0o444);
        assert!(root.join(format!("cache/wheels/{}.whl", w.sha256)).is_file());

        // A wheelhouse file with other bytes is refused and nothing is kept.
        let other = ResolvedWheel { sha256: "0".repeat(64), ..w.clone() };
        let err = store.wheel(&other).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!(
                "n-1-py3-none-any.whl has sha256 {}, but nix/torch-wheels.json pins {}",
                w.sha256, other.sha256
            )),
            "{err}"
        );
        assert!(!root.join(format!("cache/wheels/{}.part", other.sha256)).exists());
        // Offline without it: says what to do.
        let gone = ResolvedWheel { file: "m-1-py3-none-any.whl".into(), ..other };
        assert_eq!(
            store.wheel(&gone).unwrap_err().to_string(),
            "m-1-py3-none-any.whl is not in the toolchain cache and --offline forbids downloading it; put it in a --find-links directory, or build once without --offline"
        );
        // A wheelhouse entry that is a link to a device (or a FIFO) is named as such, never read.
        std::os::unix::fs::symlink("/dev/zero", house.join("z-1-py3-none-any.whl")).unwrap();
        let zero = ResolvedWheel { file: "z-1-py3-none-any.whl".into(), ..gone };
        assert_eq!(
            store.wheel(&zero).unwrap_err().to_string(),
            format!("`{house}/z-1-py3-none-any.whl` is not a regular file (a FIFO, a device or a dangling link); put the wheel z-1-py3-none-any.whl itself in the --find-links directory")
        );
        // Prune to nothing empties it.
        let removed = store.prune(0, true).unwrap().unwrap();
        // What this store used is kept (the prune of the build that used it).
        assert_eq!(removed.removed.len(), 0);
        assert_eq!(removed.kept_in_use.len(), 2);
        let store = Store::open(&root.join("cache"), opts.clone()).unwrap();
        let removed = store.prune(0, true).unwrap().unwrap().removed;
        assert_eq!(removed.len(), 2);
        let s = Store::open(&root.join("cache"), opts).unwrap();
        assert!(s.entries().unwrap().is_empty());
    }

    #[test]
    fn cuda_12_components_and_libraries_merge_into_one_root_and_cuda_13_stays() {
        let m = |p: &str| cu12_merged(std::path::Path::new(p)).to_str().unwrap().to_owned();
        assert_eq!(m("nvidia/cuda_nvcc/bin/nvcc"), "nvidia/cu12/bin/nvcc");
        assert_eq!(m("nvidia/cusparse/include/cusparse.h"), "nvidia/cu12/include/cusparse.h");
        assert_eq!(m("nvidia/cublas/lib/libcublas.so.12"), "nvidia/cu12/lib/libcublas.so.12");
        assert_eq!(m("nvidia/nvtx/include/nvtx3/nvToolsExt.h"), "nvidia/cu12/include/nvtx3/nvToolsExt.h");
        assert_eq!(m("nvidia/cu13/include/cusparse.h"), "nvidia/cu13/include/cusparse.h");
        // Not a CUDA toolkit part: left where the wheel puts it.
        assert_eq!(m("nvidia/cudnn/include/cudnn.h"), "nvidia/cudnn/include/cudnn.h");
        assert_eq!(m("torch/include/ATen/ATen.h"), "torch/include/ATen/ATen.h");
    }

    /// A wheelhouse of small wheels, a store over it, and the wheels' pins.
    struct Fixture {
        _t: tempfile::TempDir,
        root: Utf8PathBuf,
        house: Utf8PathBuf,
        store: Store,
    }

    fn fixture() -> Fixture {
        let t = tempfile::tempdir().unwrap();
        let root = Utf8Path::from_path(t.path()).unwrap().to_owned();
        let house = root.join("house");
        std::fs::create_dir_all(&house).unwrap();
        let opts = FetchOptions { offline: true, find_links: vec![house.clone()], progress: false };
        let store = Store::open(&root.join("cache"), opts).unwrap();
        let root = store.root().to_owned();
        Fixture { _t: t, root, house, store }
    }

    /// `file` with `members` in the wheelhouse; its pin.
    fn put(house: &Utf8Path, file: &str, members: &[(&str, &[u8])]) -> ResolvedWheel {
        let bytes = wheel_bytes(members);
        std::fs::write(house.join(file), &bytes).unwrap();
        ResolvedWheel {
            file: file.into(),
            url: "http://127.0.0.1:9/unreachable".into(),
            sha256: hex(sha2::Sha256::digest(&bytes)),
        }
    }

    const TORCH_H: &[u8] = b"#pragma once\nint torch_api();\n";

    fn torch_wheel(house: &Utf8Path) -> ResolvedWheel {
        put(
            house,
            "torch-9.9.9-cp313-cp313-linux_x86_64.whl",
            &[("torch/include/torch/api.h", TORCH_H), ("torch/version.py", b"__version__ = '9.9.9'\n")],
        )
    }

    /// Write `bytes` over the read-only `path` (as a root user's tool can), keeping its mode.
    fn overwrite(path: &Utf8Path, bytes: &[u8]) {
        let mode = std::fs::metadata(path).unwrap().permissions().mode();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::write(path, bytes).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// Issue 31: a cached wheel was trusted by its name. One replaced by other bytes (a changed
    /// header), or truncated, is found, removed and fetched again with a warning, both on a
    /// plain use (its stat changed) and before it is unpacked (even with its stat restored).
    #[test]
    fn a_replaced_or_truncated_cached_wheel_is_removed_and_fetched_again() {
        let f = fixture();
        let w = torch_wheel(&f.house);
        let cached = f.store.wheel(&w).unwrap();
        assert_eq!(std::fs::metadata(&cached).unwrap().permissions().mode() & 0o777, 0o444);
        let good = std::fs::read(&cached).unwrap();

        // Truncated: its size changed, so the next use hashes it.
        overwrite(&cached, &good[..good.len() / 2]);
        assert_eq!(f.store.wheel(&w).unwrap(), cached);
        assert_eq!(std::fs::read(&cached).unwrap(), good);
        let said = f.store.said();
        assert_eq!(said.len(), 1, "{said:?}");
        let half_sha = hex(sha2::Sha256::digest(&good[..good.len() / 2]));
        assert_eq!(
            said[0],
            format!(
                "warning: the cached wheel {} (`{cached}`) has sha256 {half_sha} ({} bytes), not the pinned {}: corrupted, truncated or replaced; removed, fetching it again",
                w.file,
                good.len() / 2,
                w.sha256
            )
        );

        // Replaced by a wheel with a changed header, its size and modification time put back:
        // a plain use trusts the stamp, but unpacking hashes it first.
        let bad = wheel_bytes(&[
            ("torch/include/torch/api.h", b"#pragma once\nint torch_apX();\n"),
            ("torch/version.py", b"__version__ = '9.9.9'\n"),
        ]);
        assert_eq!(bad.len(), good.len());
        let mtime = std::fs::metadata(&cached).unwrap().modified().unwrap();
        overwrite(&cached, &bad);
        std::fs::File::open(&cached).unwrap().set_modified(mtime).unwrap();
        let tree = f.store.tree(std::slice::from_ref(&w)).unwrap();
        assert_eq!(std::fs::read(tree.join("torch/include/torch/api.h")).unwrap(), TORCH_H);
        assert_eq!(std::fs::read(&cached).unwrap(), good);
        let said = f.store.said();
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(
            said[1].starts_with(&format!(
                "warning: the cached wheel {} (`{cached}`) has sha256 {}",
                w.file,
                hex(sha2::Sha256::digest(&bad))
            )),
            "{}",
            said[1]
        );
    }

    /// Issue 31: an unpacked tree was trusted by its existence. It is read-only, and one
    /// changed since it was unpacked (a header appended to, a file planted) is unpacked again,
    /// with a warning naming what changed; its recorded hash is the same before and after.
    #[test]
    fn a_changed_tree_is_unpacked_again_with_a_warning() {
        let f = fixture();
        let w = torch_wheel(&f.house);
        let (tree, hash) = f.store.tree_and_hash(std::slice::from_ref(&w)).unwrap();
        let header = tree.join("torch/include/torch/api.h");
        let mode = |p: &Utf8Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&header), 0o444);
        assert_eq!(mode(&tree.join("torch/include")), 0o555);
        let mtime = |p: &Utf8Path| std::fs::metadata(p).unwrap().modified().unwrap();
        assert_eq!(mtime(&header), unpacked_mtime());
        assert_eq!(f.store.tree_and_hash(std::slice::from_ref(&w)).unwrap(), (tree.clone(), hash.clone()));
        assert!(f.store.said().is_empty());

        overwrite(&header, b"#pragma once\nint torch_api();\n// appended by a test\n");
        let (again, hash2) = f.store.tree_and_hash(std::slice::from_ref(&w)).unwrap();
        assert_eq!((&again, &hash2), (&tree, &hash));
        assert_eq!(std::fs::read(&header).unwrap(), TORCH_H);
        assert_eq!(mode(&header), 0o444);
        assert_eq!(mtime(&header), unpacked_mtime(), "the same stamps as before: its cells are reused");
        assert_eq!(
            f.store.said(),
            [format!(
                "warning: the unpacked tree `{tree}` (torch-9.9.9-cp313-cp313-linux_x86_64.whl) differs from what was unpacked: `torch/include/torch/api.h` changed size (52 bytes, recorded 30); unpacking it again"
            )]
        );
        // Nothing but the tree is left behind.
        let names: Vec<String> = tree
            .parent()
            .unwrap()
            .read_dir_utf8()
            .unwrap()
            .map(|e| e.unwrap().file_name().to_owned())
            .collect();
        assert_eq!(names, [tree.file_name().unwrap()]);
    }

    /// Issue 31: a `--find-links` file was copied whole before its hash was checked (a 3 GB
    /// sparse file filled the disk). It is hashed where it lies: one of other bytes writes
    /// nothing into the cache.
    #[test]
    fn a_wheelhouse_file_is_hashed_where_it_lies() {
        let f = fixture();
        let w = torch_wheel(&f.house);
        let wrong = ResolvedWheel { sha256: "1".repeat(64), ..w.clone() };
        let wheels = f.root.join("wheels");
        std::fs::File::open(&wheels).unwrap().set_modified(std::time::UNIX_EPOCH).unwrap();
        let err = f.store.wheel(&wrong).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "{} has sha256 {}, but nix/torch-wheels.json pins {}; the file `{}/{}` was not used (nothing was copied into the toolchain cache). A wheelhouse holding another build of it gives this: put the pinned file there",
                w.file, w.sha256, wrong.sha256, f.house, w.file
            )
        );
        // Nothing was written there, not even for a moment.
        assert_eq!(std::fs::metadata(&wheels).unwrap().modified().unwrap(), std::time::UNIX_EPOCH);
        assert_eq!(wheels.read_dir_utf8().unwrap().count(), 0);
    }

    /// Issue 31: a disk-full unpack left a hidden `trees/.tmp-*` that nothing listed or
    /// pruned. It is listed as unfinished and every prune removes it.
    #[test]
    fn an_unfinished_unpack_is_listed_and_pruned() {
        let f = fixture();
        let tmp = f.root.join("trees/.tmp-0123");
        std::fs::create_dir_all(tmp.join("torch")).unwrap();
        std::fs::write(tmp.join("torch/half.so"), vec![0u8; 1000]).unwrap();
        let entries = f.store.entries().unwrap();
        let listed: Vec<(&str, u64, &str, bool)> =
            entries.iter().map(|e| (e.path.as_str(), e.size, e.what.as_str(), e.unfinished)).collect();
        assert_eq!(
            listed,
            [(
                tmp.as_str(),
                1000,
                "an unfinished unpack (a failed or interrupted build left it; pruned first)",
                true
            )]
        );
        let pruned = f.store.prune(u64::MAX, true).unwrap().unwrap();
        assert_eq!(pruned.removed.iter().map(|e| e.path.as_str()).collect::<Vec<_>>(), [tmp.as_str()]);
        assert!(!tmp.exists());
    }

    /// Issue 31: a size bound smaller than one build pruned everything after each build,
    /// silently. A build's prune keeps what it used and says so; what it did not use goes.
    #[test]
    fn a_bound_smaller_than_a_build_keeps_its_toolchain_and_says_so() {
        let f = fixture();
        let other = put(&f.house, "other-1-py3-none-any.whl", &[("o/x.txt", b"x")]);
        let opts = f.store.options.clone();
        Store::open(&f.root, opts.clone()).unwrap().wheel(&other).unwrap();
        let w = torch_wheel(&f.house);
        let tree = f.store.tree(std::slice::from_ref(&w)).unwrap();
        let Fixture { _t, root, store, .. } = f;
        let used_bytes: u64 = store
            .entries()
            .unwrap()
            .iter()
            .filter(|e| !e.path.as_str().contains(&other.sha256))
            .map(|e| e.size)
            .sum();
        let pruned = store.prune(10, false).unwrap().unwrap();
        let names =
            |es: &[Entry]| es.iter().map(|e| e.path.to_string()).collect::<std::collections::BTreeSet<_>>();
        assert_eq!(
            names(&pruned.removed),
            [root.join(format!("wheels/{}.whl", other.sha256)).to_string()].into()
        );
        assert_eq!(
            names(&pruned.kept_in_use),
            [root.join(format!("wheels/{}.whl", w.sha256)).to_string(), tree.to_string()].into()
        );
        assert_eq!(pruned.left, used_bytes);
        assert_eq!(
            pruned.over_bound(10).unwrap(),
            format!(
                "the toolchain cache holds {} after pruning, over its bound of 10 B (KERNEL_BUILDER_TOOLCHAIN_CACHE_MAX_SIZE): the 2 entries this build used ({}) were kept; set KERNEL_BUILDER_TOOLCHAIN_CACHE_MAX_SIZE to at least {} so that builds stop downloading and unpacking them again",
                crate::fsutil::human_size(used_bytes),
                crate::fsutil::human_size(used_bytes),
                crate::fsutil::human_size(used_bytes)
            )
        );
        assert!(tree.is_dir());
        assert_eq!(pruned.over_bound(1 << 30), None);
        // The prune of `native-cache` (no build's store) removes them too.
        let s = Store::open(&root, opts).unwrap();
        assert_eq!(s.prune(0, true).unwrap().unwrap().removed.len(), 2);
    }

    /// Issue 31: the second of two builds on an empty cache waited on the wheel's lock in
    /// silence. It says whose download it waits for.
    #[test]
    fn the_second_build_says_it_waits_for_the_first_ones_download() {
        let f = fixture();
        let w = torch_wheel(&f.house);
        let lock_path = f.root.join(format!("locks/{}.lock", w.sha256));
        let held = lock(&lock_path, false).unwrap();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| f.store.wheel(&w));
            let start = std::time::Instant::now();
            while f.store.said().is_empty() && start.elapsed() < std::time::Duration::from_secs(30) {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            assert!(!waiter.is_finished());
            drop(held);
            waiter.join().unwrap().unwrap();
        });
        assert_eq!(
            f.store.said(),
            [format!(
                "waiting for another build's download of {} into the toolchain cache (it holds `{lock_path}`)",
                w.file
            )]
        );
    }
}
