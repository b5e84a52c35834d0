//! The toolchain cache: pinned wheels, content-addressed, under `<cache>/toolchain-v1/`.
//!
//! - `wheels/<sha256>.whl`: a wheel, stored only once its bytes have the pinned sha256 (it is
//!   written as `<sha256>.part` and renamed), so a file there is always whole and right. An
//!   interrupted download leaves the `.part`, which the next fetch resumes (HTTP `Range`).
//! - `trees/<key>/`: wheels unpacked together (never installed: no pip, no RECORD run), `key`
//!   derived from their hashes; unpacked into a temporary directory and renamed, so a tree
//!   there is complete. A file in a `bin/` directory is made executable (NVIDIA's wheels
//!   carry no modes).
//! - `locks/`: one `flock` per wheel and per tree, so concurrent builds download and unpack
//!   each once and wait for each other; and `in-use.lock`, held shared by every build that
//!   uses trees and exclusively by a prune, so a prune never removes what a build compiles
//!   with.
//!
//! A wheel comes from a `--find-links` directory holding a file of that name, else from its
//! pinned URL (never with `--offline`). Entries are used least recently first when the cache
//! is pruned to its size bound ([`max_bytes`], `KERNEL_BUILDER_TOOLCHAIN_CACHE_MAX_SIZE`).

use std::io::{Read, Write};

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
}

/// One entry, for `native-cache`.
#[derive(Debug, Clone)]
pub struct Entry {
    pub path: Utf8PathBuf,
    /// What it holds: the wheel's file name, or the wheels a tree was unpacked from.
    pub what: String,
    pub size: u64,
    pub used: std::time::SystemTime,
}

/// `KERNEL_BUILDER_TOOLCHAIN_CACHE_MAX_SIZE`, else [`DEFAULT_MAX`].
pub fn max_bytes() -> anyhow::Result<u64> {
    match crate::env::TOOLCHAIN_CACHE_MAX_SIZE.get() {
        Some(v) if !v.trim().is_empty() => {
            crate::fsutil::parse_size(v.trim()).map_err(|e| anyhow::anyhow!("{MAX_SIZE_VAR} is `{v}`: {e}"))
        }
        _ => Ok(DEFAULT_MAX),
    }
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

/// [`lock`] (exclusive), saying `waiting` on stderr first when another process holds it, so
/// a long wait (another shell making the same environment) is not silent.
pub(crate) fn lock_or_say(path: &Utf8Path, waiting: &str) -> anyhow::Result<std::fs::File> {
    let f = open_lock_file(path)?;
    match rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(f),
        Err(rustix::io::Errno::WOULDBLOCK) => {
            crate::printer::stderr!("{waiting}");
            drop(f);
            lock(path, false)
        }
        Err(e) => Err(e).with_context(|| format!("cannot lock `{path}`")),
    }
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
        Ok(Store { root, options, agent, _in_use: in_use })
    }

    /// The user's toolchain cache: `$KERNEL_BUILDER_TOOLCHAIN_CACHE_DIR`, else
    /// `<cache root>/toolchain-v1` (one toolchain cache can serve several cell caches, e.g.
    /// every test of a run).
    pub fn user(options: FetchOptions) -> anyhow::Result<Store> {
        let dir = match crate::env::TOOLCHAIN_CACHE_DIR.non_empty() {
            Some(d) => Utf8PathBuf::from(d),
            None => crate::fsutil::cache_root()?.join(DIR_NAME),
        };
        Store::open(&dir, options)
    }

    pub fn root(&self) -> &Utf8Path {
        &self.root
    }

    /// The wheel `w`, whole and with its pinned hash: from the cache, a `--find-links`
    /// directory, or its URL. Returns its path in the cache.
    ///
    /// Errors (the message names the wheel and what to do): offline and not cached, the
    /// download failing, the bytes not having the pinned sha256 (the file is removed).
    pub fn wheel(&self, w: &ResolvedWheel) -> Result<Utf8PathBuf, String> {
        self.wheel_inner(w).map_err(|e| format!("{e:#}"))
    }

    fn wheel_inner(&self, w: &ResolvedWheel) -> anyhow::Result<Utf8PathBuf> {
        anyhow::ensure!(
            w.sha256.len() == 64 && w.sha256.bytes().all(|b| b.is_ascii_hexdigit()),
            "the pinned sha256 of {} is not 64 hex digits",
            w.file
        );
        let dest = self.root.join("wheels").join(format!("{}.whl", w.sha256));
        if dest.is_file() {
            touch(&dest);
            return Ok(dest);
        }
        let _l = lock(&self.root.join("locks").join(format!("{}.lock", w.sha256)), false)?;
        if dest.is_file() {
            return Ok(dest); // another build fetched it while this one waited
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
                let _ = std::fs::remove_file(&part);
                let mut from = std::fs::File::open(&src).with_context(|| format!("cannot open `{src}`"))?;
                let len = from.metadata().map(|m| m.len()).unwrap_or(0);
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
        std::fs::rename(&part, &dest).with_context(|| format!("cannot move `{part}` to `{dest}`"))?;
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
    pub fn tree(&self, wheels: &[ResolvedWheel]) -> Result<Utf8PathBuf, String> {
        self.tree_inner(wheels).map_err(|e| format!("{e:#}"))
    }

    fn tree_inner(&self, wheels: &[ResolvedWheel]) -> anyhow::Result<Utf8PathBuf> {
        let mut hashes: Vec<&str> = wheels.iter().map(|w| w.sha256.as_str()).collect();
        hashes.sort();
        let key = &hex(sha2::Sha256::digest(hashes.join("\n").as_bytes()))[..32];
        let dest = self.root.join("trees").join(key);
        if dest.is_dir() {
            touch(&dest);
            return Ok(dest);
        }
        let files: Vec<Utf8PathBuf> =
            wheels.iter().map(|w| self.wheel_inner(w)).collect::<anyhow::Result<_>>()?;
        let _l = lock(&self.root.join("locks").join(format!("tree-{key}.lock")), false)?;
        if dest.is_dir() {
            return Ok(dest);
        }
        let tmp = self.root.join("trees").join(format!(".tmp-{key}"));
        let _ = std::fs::remove_dir_all(&tmp);
        let _registered = crate::interrupt::remove_on_interrupt(&tmp, crate::interrupt::Removal::All);
        for (f, w) in files.iter().zip(wheels) {
            unpack(f, &tmp).with_context(|| format!("cannot unpack {} (`{f}`)", w.file))?;
        }
        let names: Vec<&str> = wheels.iter().map(|w| w.file.as_str()).collect();
        std::fs::write(tmp.join(TREE_NAMES), names.join("\n") + "\n")
            .with_context(|| format!("cannot write `{tmp}/{TREE_NAMES}`"))?;
        std::fs::rename(&tmp, &dest).with_context(|| format!("cannot move `{tmp}` to `{dest}`"))?;
        Ok(dest)
    }

    /// Every wheel and tree, least recently used first.
    pub fn entries(&self) -> anyhow::Result<Vec<Entry>> {
        entries_in(&self.root)
    }

    /// Remove the least recently used entries until the cache holds at most `max` bytes.
    /// Builds using the cache hold the in-use lock: with `wait`, wait for them to finish;
    /// without, return `None` when one is running. Returns what was removed.
    pub fn prune(self, max: u64, wait: bool) -> anyhow::Result<Option<Vec<Entry>>> {
        let root = self.root.clone();
        drop(self); // its own shared lock
        let path = root.join("locks/in-use.lock");
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("cannot open the lock file `{path}`"))?;
        let how = if wait {
            rustix::fs::FlockOperation::LockExclusive
        } else {
            rustix::fs::FlockOperation::NonBlockingLockExclusive
        };
        match rustix::fs::flock(&f, how) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) if !wait => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("cannot lock `{path}`")),
        }
        let store_entries = entries_in(&root)?;
        let mut total: u64 = store_entries.iter().map(|e| e.size).sum();
        let mut removed = Vec::new();
        for e in store_entries {
            if total <= max {
                break;
            }
            let r = if e.path.is_dir() {
                std::fs::remove_dir_all(&e.path)
            } else {
                std::fs::remove_file(&e.path)
            };
            r.with_context(|| format!("cannot remove `{}`", e.path))?;
            total -= e.size;
            removed.push(e);
        }
        Ok(Some(removed))
    }
}

/// Every wheel and tree under `root`, least recently used first.
fn entries_in(root: &Utf8Path) -> anyhow::Result<Vec<Entry>> {
    let mut out = Vec::new();
    for d in ["wheels", "trees", "test-envs"] {
        let dir = root.join(d);
        if d == "test-envs" && !dir.is_dir() {
            continue;
        }
        for e in dir.read_dir_utf8().with_context(|| format!("cannot list `{dir}`"))? {
            let e = e.with_context(|| format!("cannot list `{dir}`"))?;
            if e.file_name().starts_with('.') {
                continue;
            }
            let used = e.metadata().and_then(|m| m.modified()).unwrap_or(std::time::UNIX_EPOCH);
            let size = walkdir::WalkDir::new(e.path())
                .into_iter()
                .filter_map(Result::ok)
                .filter_map(|f| f.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum();
            let what = if d == "wheels" {
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
            out.push(Entry { path: e.path().to_owned(), what, size, used });
        }
    }
    out.sort_by(|a, b| a.used.cmp(&b.used).then_with(|| a.path.cmp(&b.path)));
    Ok(out)
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

/// Unpack the wheel `file` into `dir` (files only; each path checked to stay inside). A file
/// whose mode has an execute bit, or which lies in a `bin/` directory, is 0o755; others 0o644.
/// Unpack the wheels `files` together into the new directory `dir`, as the cache unpacks a
/// tree (the same layout and modes; no tree-names file): what a Nix cell's unpack derivation
/// runs (`kernel-builder nix-support unpack-wheels`), so that Nix and native builds compile
/// against the same files.
pub fn unpack_into(files: &[Utf8PathBuf], dir: &Utf8Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create `{dir}`"))?;
    for f in files {
        unpack(f, dir).with_context(|| format!("cannot unpack `{f}`"))?;
    }
    Ok(())
}

fn unpack(file: &Utf8Path, dir: &Utf8Path) -> anyhow::Result<()> {
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
        std::io::copy(&mut e, &mut out)?;
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
        assert_eq!(mode(&tree.join("nvidia/cu13/bin/nvcc")), 0o755);
        assert_eq!(mode(&tree.join("nvidia/cu13/include/a.h")), 0o644);
        assert!(root.join(format!("cache/wheels/{}.whl", w.sha256)).is_file());

        // A wheelhouse file with other bytes is refused and nothing is kept.
        let other = ResolvedWheel { sha256: "0".repeat(64), ..w.clone() };
        let err = store.wheel(&other).unwrap_err();
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
            store.wheel(&gone).unwrap_err(),
            "m-1-py3-none-any.whl is not in the toolchain cache and --offline forbids downloading it; put it in a --find-links directory, or build once without --offline"
        );
        // A wheelhouse entry that is a link to a device (or a FIFO) is named as such, never read.
        std::os::unix::fs::symlink("/dev/zero", house.join("z-1-py3-none-any.whl")).unwrap();
        let zero = ResolvedWheel { file: "z-1-py3-none-any.whl".into(), ..gone };
        assert_eq!(
            store.wheel(&zero).unwrap_err(),
            format!("`{house}/z-1-py3-none-any.whl` is not a regular file (a FIFO, a device or a dangling link); put the wheel z-1-py3-none-any.whl itself in the --find-links directory")
        );
        // Prune to nothing empties it.
        let removed = store.prune(0, true).unwrap().unwrap();
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
}
