//! Filesystem helpers shared by every module: path-aware errors, atomic writes, streaming
//! reads (a file is never held whole in memory to copy or check it: sources may be hundreds
//! of megabytes), and the one way to read a file the user names: [`open_regular`] and the
//! bounded readers built on it ([`read_bounded`], [`read_to_string_bounded`]), which refuse
//! a FIFO, a device or a directory by name before reading a byte (a FIFO never blocks them)
//! and never read more than a stated limit.

use std::io::{Read, Write};

use anyhow::Context;
use camino::Utf8Path;

/// The most bytes [`read_to_string`] reads: far above any text file the tool reads whole
/// (manifests, tuning records, cards), and a bound on the memory a wrong file can take.
pub const MAX_TEXT_BYTES: u64 = 64 << 20;

/// Read a UTF-8 regular file of at most [`MAX_TEXT_BYTES`] ([`read_to_string_bounded`]); the
/// error names the path.
pub fn read_to_string(path: &Utf8Path) -> anyhow::Result<String> {
    read_to_string_bounded(path, MAX_TEXT_BYTES, "a text file")
}

/// What a file that is not a regular file is, in words (`None` for a regular file).
fn not_regular(ft: std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_file() {
        None
    } else if ft.is_dir() {
        Some("a directory")
    } else if ft.is_fifo() {
        Some("a FIFO (named pipe)")
    } else if ft.is_char_device() {
        Some("a character device")
    } else if ft.is_block_device() {
        Some("a block device")
    } else if ft.is_socket() {
        Some("a socket")
    } else {
        Some("not a regular file")
    }
}

/// Open `path` (links followed) for reading, refusing anything but a regular file by name.
///
/// The file is opened with `O_NONBLOCK`, so a FIFO with no writer does not block the open,
/// and then checked on the descriptor itself (no race with a rename); reads of a regular file
/// are unaffected by the flag.
///
/// Errors: the file cannot be opened, or is a FIFO, device, socket or directory.
pub fn open_regular(path: &Utf8Path) -> anyhow::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .with_context(|| format!("cannot read `{path}`"))?;
    let meta = file.metadata().with_context(|| format!("cannot read `{path}`"))?;
    if let Some(what) = not_regular(meta.file_type()) {
        anyhow::bail!("`{path}` is {what}, not a regular file; give the path of a file");
    }
    Ok(file)
}

/// Read at most `limit` + 1 bytes of the regular file `path` ([`open_regular`]): a result
/// longer than `limit` means the file is larger (the caller says so without reading the rest).
pub fn read_upto(path: &Utf8Path, limit: u64) -> anyhow::Result<Vec<u8>> {
    let file = open_regular(path)?;
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes).with_context(|| format!("cannot read `{path}`"))?;
    Ok(bytes)
}

/// Read the regular file `path`, `what` it is (e.g. `the matrix file`) and at most `limit`
/// bytes.
///
/// Errors: as [`open_regular`], or the file is larger than `limit` (the message names the
/// file, the limit and what it was read as).
pub fn read_bounded(path: &Utf8Path, limit: u64, what: &str) -> anyhow::Result<Vec<u8>> {
    let bytes = read_upto(path, limit)?;
    if bytes.len() as u64 > limit {
        anyhow::bail!(
            "`{path}` is larger than {}, the most kernel-builder reads of {what}; check that this is the right file",
            size_words(limit)
        );
    }
    Ok(bytes)
}

/// [`read_bounded`] as UTF-8 text.
pub fn read_to_string_bounded(path: &Utf8Path, limit: u64, what: &str) -> anyhow::Result<String> {
    String::from_utf8(read_bounded(path, limit, what)?)
        .map_err(|e| anyhow::anyhow!("`{path}` ({what}) is not UTF-8 text: {}", e.utf8_error()))
}

/// `n` bytes in words: `1 MiB`, `64 KiB`, `1000 bytes`.
pub fn size_words(n: u64) -> String {
    match n {
        n if n >= 1 << 30 && n % (1 << 30) == 0 => format!("{} GiB", n >> 30),
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

/// Write `contents` to `path` atomically: a temporary file in the same directory, flushed,
/// then renamed over `path`. Readers see the old file or the new one, never half of it.
pub fn write_atomic(path: &Utf8Path, contents: &[u8]) -> anyhow::Result<()> {
    let dir = path.parent().filter(|p| !p.as_str().is_empty()).unwrap_or(Utf8Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".kernel-builder-")
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a temporary file in `{dir}`"))?;
    tmp.write_all(contents).with_context(|| format!("cannot write `{path}`"))?;
    tmp.as_file().sync_all().with_context(|| format!("cannot write `{path}`"))?;
    // Keep the permissions of the file being replaced (a fresh temp file is 0600).
    if let Ok(meta) = std::fs::metadata(path) {
        std::fs::set_permissions(tmp.path(), meta.permissions())
            .with_context(|| format!("cannot set permissions on `{path}`"))?;
    } else {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o644))
            .with_context(|| format!("cannot set permissions on `{path}`"))?;
    }
    tmp.persist(path).with_context(|| format!("cannot replace `{path}`"))?;
    Ok(())
}

/// The file a write of the user's file `path` replaces: where `path` points when it is a
/// symbolic link (the link stays a link), else `path` itself. With [`write_atomic`], which
/// would otherwise put a regular file in the link's place.
pub fn link_target(path: &Utf8Path) -> camino::Utf8PathBuf {
    match path.canonicalize_utf8() {
        Ok(p) if path.is_symlink() => p,
        _ => path.to_owned(),
    }
}

/// `root.join(rel)`, checked to resolve inside `root`: the deepest part of it that exists is
/// resolved (links followed) and must lie in `root` (resolved too); what follows does not
/// exist yet, so creating it creates it there. `rel` must be relative, without `..` (callers
/// check that when `rel` comes from a file).
///
/// Used before every write or removal in a directory the tool owns, so that a symbolic link
/// (`cmake -> ../victim`) never makes it write or delete elsewhere.
///
/// Errors: the path leads out of `root` (the message names the path, where it leads and the
/// link to remove), or it cannot be resolved (a dangling link: named too).
pub fn inside(root: &Utf8Path, rel: &Utf8Path) -> anyhow::Result<camino::Utf8PathBuf> {
    if std::fs::symlink_metadata(root).is_err() {
        return Ok(root.join(rel)); // nothing there yet, so no link either
    }
    let root_real = root.canonicalize_utf8().with_context(|| format!("cannot resolve `{root}`"))?;
    let path = root.join(rel);
    let mut existing = path.as_path();
    while std::fs::symlink_metadata(existing).is_err() {
        match existing.parent() {
            Some(p) if p.starts_with(root) => existing = p,
            _ => return Ok(path),
        }
    }
    let link = || {
        let mut at = root.to_owned();
        for c in rel.components() {
            at.push(c);
            if std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
                return at;
            }
        }
        path.clone()
    };
    let real = existing.canonicalize_utf8().with_context(|| {
        format!("cannot resolve `{existing}`: is `{}` a symbolic link to nothing? remove it", link())
    })?;
    if !real.starts_with(&root_real) {
        let leads = match path.strip_prefix(existing) {
            Ok(rest) if !rest.as_str().is_empty() => real.join(rest),
            _ => real,
        };
        anyhow::bail!(
            "`{path}` leads to `{leads}`, outside `{root}`: kernel-builder writes and removes files only inside it; remove the symbolic link `{}`",
            link()
        );
    }
    Ok(path)
}

/// A directory the tool owns, opened once, in which every read, write and removal is made
/// relative to directory handles opened without following links (`openat` with `O_NOFOLLOW`,
/// `unlinkat`, `renameat`, through `rustix`). A path checked by [`inside`] can still be
/// changed before it is used (a directory swapped for a link to `../victim` in between); here
/// each directory on the way is opened as it is at that moment, a link on the way is an error,
/// and what is removed or replaced is the entry in the directory opened, never what a link
/// names. The root itself is opened as named (the user chose it).
pub struct Anchored {
    root: camino::Utf8PathBuf,
    fd: std::os::fd::OwnedFd,
}

/// The identity of a file (device and inode), to remove only the file that was checked.
/// What to say of `path`, found where kernel-builder needs a directory of its own, and `why`
/// it needs one: a symbolic link is named as such, with where it points and the two ways out
/// (the directory it points to moved in its place, or the link removed); anything else is
/// "not a directory".
pub fn in_the_way(path: &Utf8Path, why: &str) -> String {
    match std::fs::read_link(path) {
        Ok(target) => {
            let resolved = match path.parent() {
                Some(parent) if target.is_relative() && !matches!(parent.as_str(), "" | ".") => {
                    parent.as_std_path().join(&target)
                }
                _ => target.clone(),
            };
            format!(
                "`{path}` is a symbolic link to `{}`; {why}: move the directory it points to in its place (`rm {path} && mv {} {path}`), or remove the link (`rm {path}`) to start afresh",
                target.display(),
                resolved.display()
            )
        }
        Err(_) => format!("`{path}` exists and is not a directory; {why}: move it away"),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId(u64, u64);

impl Anchored {
    /// Open the directory `root`.
    pub fn open(root: &Utf8Path) -> anyhow::Result<Anchored> {
        use rustix::fs::{Mode, OFlags};
        let fd = rustix::fs::open(
            root.as_str(),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(std::io::Error::from)
        .with_context(|| format!("cannot open the directory `{root}`"))?;
        Ok(Anchored { root: root.to_owned(), fd })
    }

    /// The directory that holds `rel` and `rel`'s last component: each directory on the way
    /// opened with `O_NOFOLLOW`, created (0755) when `create`. `Ok(None)` when one is missing
    /// and not created.
    ///
    /// Errors: `rel` is not a plain relative path, or a component on the way is a link or not
    /// a directory (named).
    fn parent<'r>(
        &self,
        rel: &'r Utf8Path,
        create: bool,
    ) -> anyhow::Result<Option<(std::os::fd::OwnedFd, &'r str)>> {
        use rustix::fs::{Mode, OFlags};
        let parts: Vec<&str> = rel
            .components()
            .map(|c| match c {
                camino::Utf8Component::Normal(n) => Ok(n),
                _ => Err(anyhow::anyhow!("`{rel}` is not a plain path inside `{}`", self.root)),
            })
            .collect::<anyhow::Result<_>>()?;
        let Some((last, dirs)) = parts.split_last() else {
            anyhow::bail!("`{rel}` is not a plain path inside `{}`", self.root)
        };
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mut at = rustix::io::dup(&self.fd)
            .map_err(std::io::Error::from)
            .context("cannot duplicate a descriptor")?;
        let mut shown = self.root.clone();
        for d in dirs {
            shown.push(d);
            let opened = match rustix::fs::openat(&at, *d, flags, Mode::empty()) {
                Err(rustix::io::Errno::NOENT) if create => {
                    match rustix::fs::mkdirat(&at, *d, Mode::from_raw_mode(0o755)) {
                        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                        Err(e) => {
                            return Err(std::io::Error::from(e))
                                .with_context(|| format!("cannot create `{shown}`"))
                        }
                    }
                    rustix::fs::openat(&at, *d, flags, Mode::empty())
                }
                other => other,
            };
            at = match opened {
                Ok(fd) => fd,
                Err(rustix::io::Errno::NOENT) => return Ok(None),
                Err(rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => anyhow::bail!(
                    "{}",
                    in_the_way(
                        &shown,
                        &format!("kernel-builder writes and removes files in `{}` only through its own directories", self.root)
                    )
                ),
                Err(e) => return Err(std::io::Error::from(e)).with_context(|| format!("cannot open `{shown}`")),
            };
        }
        Ok(Some((at, *last)))
    }

    /// The regular file `rel`, opened without following a link, and its identity; `Ok(None)`
    /// when nothing is there.
    ///
    /// Errors: a link or anything but a regular file is there (named), or a link on the way.
    pub fn open_file(&self, rel: &Utf8Path) -> anyhow::Result<Option<(std::fs::File, FileId)>> {
        use rustix::fs::{Mode, OFlags};
        let Some((dir, name)) = self.parent(rel, false)? else { return Ok(None) };
        let path = self.root.join(rel);
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let fd = match rustix::fs::openat(&dir, name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => return Ok(None),
            Err(rustix::io::Errno::LOOP) => {
                anyhow::bail!("`{path}` is a symbolic link, not a file kernel-builder wrote; remove it")
            }
            Err(e) => return Err(std::io::Error::from(e)).with_context(|| format!("cannot read `{path}`")),
        };
        let file = std::fs::File::from(fd);
        let meta = file.metadata().with_context(|| format!("cannot read `{path}`"))?;
        if let Some(what) = not_regular(meta.file_type()) {
            anyhow::bail!("`{path}` is {what}, not a regular file; give the path of a file");
        }
        use std::os::unix::fs::MetadataExt;
        Ok(Some((file, FileId(meta.dev(), meta.ino()))))
    }

    /// [`Anchored::open_file`] read to the end, at most `limit` bytes (`what` it is, for the
    /// error).
    pub fn read(&self, rel: &Utf8Path, limit: u64, what: &str) -> anyhow::Result<Option<(Vec<u8>, FileId)>> {
        let Some((file, id)) = self.open_file(rel)? else { return Ok(None) };
        let path = self.root.join(rel);
        let mut bytes = Vec::new();
        file.take(limit + 1).read_to_end(&mut bytes).with_context(|| format!("cannot read `{path}`"))?;
        if bytes.len() as u64 > limit {
            anyhow::bail!(
                "`{path}` is larger than {}, the most kernel-builder reads of {what}; check that this is the right file",
                size_words(limit)
            );
        }
        Ok(Some((bytes, id)))
    }

    /// Create the directory `rel` (0755) and those on the way; an existing one is kept.
    pub fn create_dir_all(&self, rel: &Utf8Path) -> anyhow::Result<()> {
        let Some((dir, name)) = self.parent(rel, true)? else { return Ok(()) };
        match rustix::fs::mkdirat(&dir, name, rustix::fs::Mode::from_raw_mode(0o755)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => Ok(()),
            Err(e) => Err(std::io::Error::from(e))
                .with_context(|| format!("cannot create `{}`", self.root.join(rel))),
        }
    }

    /// Write `contents` to `rel` atomically (a temporary file beside it, renamed over it),
    /// keeping the permissions of a regular file it replaces (else 0644). A link at `rel` is
    /// replaced, never followed; the directories on the way must exist. Returns the identity
    /// of the file written.
    pub fn write_atomic(&self, rel: &Utf8Path, contents: &[u8]) -> anyhow::Result<FileId> {
        self.write_with_mode(rel, contents, None)
    }

    /// [`Anchored::write_atomic`] with the permission bits `mode` whatever was there before.
    pub fn write_atomic_mode(&self, rel: &Utf8Path, contents: &[u8], mode: u32) -> anyhow::Result<FileId> {
        self.write_with_mode(rel, contents, Some(mode))
    }

    fn write_with_mode(&self, rel: &Utf8Path, contents: &[u8], mode: Option<u32>) -> anyhow::Result<FileId> {
        use rustix::fs::{AtFlags, Mode, OFlags};
        let path = self.root.join(rel);
        let Some((dir, name)) = self.parent(rel, false)? else {
            anyhow::bail!("cannot write `{path}`: its directory does not exist")
        };
        let mode = mode.unwrap_or_else(|| match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st)
                if rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::RegularFile =>
            {
                st.st_mode & 0o7777
            }
            _ => 0o644,
        });
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let tmp = format!(
            ".kernel-builder-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&dir, tmp.as_str(), flags, Mode::from_raw_mode(0o600))
            .map_err(std::io::Error::from)
            .with_context(|| format!("cannot create a temporary file beside `{path}`"))?;
        let mut file = std::fs::File::from(fd);
        let written = file
            .write_all(contents)
            .and_then(|_| file.sync_all())
            .and_then(|_| rustix::fs::fchmod(&file, Mode::from_raw_mode(mode)).map_err(std::io::Error::from))
            .and_then(|_| rustix::fs::renameat(&dir, tmp.as_str(), &dir, name).map_err(std::io::Error::from));
        if let Err(e) = written {
            let _ = rustix::fs::unlinkat(&dir, tmp.as_str(), AtFlags::empty());
            return Err(e).with_context(|| format!("cannot write `{path}`"));
        }
        let meta = file.metadata().with_context(|| format!("cannot write `{path}`"))?;
        use std::os::unix::fs::MetadataExt;
        Ok(FileId(meta.dev(), meta.ino()))
    }

    /// Whether anything (a link included, never followed) is at `rel`; a missing directory
    /// on the way is "nothing".
    ///
    /// Errors: a link or non-directory on the way (named).
    pub fn exists(&self, rel: &Utf8Path) -> anyhow::Result<bool> {
        let Some((dir, name)) = self.parent(rel, false)? else { return Ok(false) };
        Ok(rustix::fs::statat(&dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).is_ok())
    }

    /// Create the directory `rel` and those missing on the way (0755), each through the
    /// directory opened before it; the paths created, outermost first (for a rollback).
    ///
    /// Errors: a link or non-directory on the way or at `rel` (named).
    pub fn create_dirs(&self, rel: &Utf8Path) -> anyhow::Result<Vec<camino::Utf8PathBuf>> {
        let mut created = Vec::new();
        let mut at = camino::Utf8PathBuf::new();
        for part in rel.components() {
            at.push(part.as_str());
            if !self.exists(&at)? {
                self.create_dir_all(&at)?;
                created.push(at.clone());
            }
        }
        // The last one opened as a directory without following a link: refuses a link there.
        if !rel.as_str().is_empty() {
            self.parent(&rel.join("x"), false)?;
        }
        Ok(created)
    }

    /// Remove the file `rel` when it is still the file `id` (as [`Anchored::open_file`] saw
    /// it): `Ok(false)` when it is gone or another file is there now (left alone).
    pub fn remove_file(&self, rel: &Utf8Path, id: FileId) -> anyhow::Result<bool> {
        use rustix::fs::AtFlags;
        let Some((dir, name)) = self.parent(rel, false)? else { return Ok(false) };
        match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            // The casts are for systems whose `dev_t`/`ino_t` are narrower than Linux's.
            #[allow(clippy::unnecessary_cast)]
            Ok(st) if FileId(st.st_dev as u64, st.st_ino as u64) == id => {}
            _ => return Ok(false),
        }
        rustix::fs::unlinkat(&dir, name, AtFlags::empty())
            .map_err(std::io::Error::from)
            .with_context(|| format!("cannot remove `{}`", self.root.join(rel)))?;
        Ok(true)
    }

    /// Remove the directory `rel` when it is empty (never a link): `Ok(false)` when it is not
    /// empty, not a directory, or gone.
    pub fn remove_empty_dir(&self, rel: &Utf8Path) -> anyhow::Result<bool> {
        let Some((dir, name)) = self.parent(rel, false)? else { return Ok(false) };
        match rustix::fs::unlinkat(&dir, name, rustix::fs::AtFlags::REMOVEDIR) {
            Ok(()) => Ok(true),
            Err(
                rustix::io::Errno::NOTEMPTY
                | rustix::io::Errno::EXIST
                | rustix::io::Errno::NOTDIR
                | rustix::io::Errno::NOENT,
            ) => Ok(false),
            Err(e) => Err(std::io::Error::from(e))
                .with_context(|| format!("cannot remove `{}`", self.root.join(rel))),
        }
    }
}

/// For tests of races: a thread that swaps the directory entries `a` and `b` (an atomic
/// exchange) as fast as it can, until [`Swapper::stop`], which says how many swaps it made.
#[cfg(all(test, target_os = "linux"))]
pub(crate) struct Swapper(std::sync::Arc<std::sync::atomic::AtomicBool>, std::thread::JoinHandle<u64>);

#[cfg(all(test, target_os = "linux"))]
impl Swapper {
    pub(crate) fn start(a: camino::Utf8PathBuf, b: camino::Utf8PathBuf) -> Swapper {
        use rustix::fs::{RenameFlags, CWD};
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s = stop.clone();
        Swapper(
            stop,
            std::thread::spawn(move || {
                let mut swaps = 0;
                while !s.load(std::sync::atomic::Ordering::Relaxed) {
                    rustix::fs::renameat_with(CWD, a.as_str(), CWD, b.as_str(), RenameFlags::EXCHANGE)
                        .unwrap();
                    swaps += 1;
                }
                swaps
            }),
        )
    }

    pub(crate) fn stop(self) -> u64 {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        self.1.join().unwrap()
    }
}

/// The size of the buffer every streaming read in this crate uses.
pub const STREAM_BUFFER: usize = 256 * 1024;

/// Copy `src` to the new file `dest` (which must not exist) with permission bits `mode`,
/// streaming: memory use does not grow with the file (`std::io::copy`, which uses
/// `copy_file_range` on Linux). Returns the number of bytes copied.
///
/// Errors: `src` cannot be read, `dest` exists or cannot be written; each names its path.
pub fn copy_new_file(src: &Utf8Path, dest: &Utf8Path, mode: u32) -> anyhow::Result<u64> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut from = std::fs::File::open(src).with_context(|| format!("cannot read `{src}`"))?;
    let mut to = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(dest)
        .with_context(|| format!("cannot create `{dest}`"))?;
    let n = std::io::copy(&mut from, &mut to).with_context(|| format!("cannot copy `{src}` to `{dest}`"))?;
    // The umask may have cleared bits of `mode`.
    to.set_permissions(std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("cannot set permissions on `{dest}`"))?;
    Ok(n)
}

/// Whether the files `a` and `b` have the same bytes, compared in [`STREAM_BUFFER`] chunks
/// (false when either cannot be read, or their lengths differ).
pub fn same_contents(a: &Utf8Path, b: &Utf8Path) -> bool {
    let (Ok(ma), Ok(mb)) = (std::fs::metadata(a), std::fs::metadata(b)) else { return false };
    if !ma.is_file() || !mb.is_file() || ma.len() != mb.len() {
        return false;
    }
    let (Ok(mut fa), Ok(mut fb)) = (std::fs::File::open(a), std::fs::File::open(b)) else { return false };
    let (mut ba, mut bb) = (vec![0u8; STREAM_BUFFER], vec![0u8; STREAM_BUFFER]);
    loop {
        let n = match fa.read(&mut ba) {
            Ok(n) => n,
            Err(_) => return false,
        };
        if n == 0 {
            return true;
        }
        if fb.read_exact(&mut bb[..n]).is_err() || ba[..n] != bb[..n] {
            return false;
        }
    }
}

/// Where a stream stops being UTF-8: the 1-based line of the first invalid byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotUtf8 {
    /// 1-based line number of the first byte that is not part of valid UTF-8.
    pub line: usize,
}

/// Check that `reader` yields UTF-8 text, reading it in [`STREAM_BUFFER`] chunks (a sequence
/// split between two chunks is carried over). `Ok(Err(_))` names the line of the first
/// invalid byte; `Err` is a read error.
pub fn check_utf8(mut reader: impl Read) -> std::io::Result<Result<(), NotUtf8>> {
    let mut buf = vec![0u8; STREAM_BUFFER];
    let mut carried = 0usize; // bytes of an incomplete sequence kept at the start of `buf`
    let mut lines = 1usize;
    loop {
        let n = match reader.read(&mut buf[carried..]) {
            Ok(0) => return Ok(if carried == 0 { Ok(()) } else { Err(NotUtf8 { line: lines }) }),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let chunk = &buf[..carried + n];
        match std::str::from_utf8(chunk) {
            Ok(_) => {
                lines += chunk.iter().filter(|b| **b == b'\n').count();
                carried = 0;
            }
            Err(e) => {
                let good = e.valid_up_to();
                lines += chunk[..good].iter().filter(|b| **b == b'\n').count();
                if e.error_len().is_some() {
                    return Ok(Err(NotUtf8 { line: lines }));
                }
                // An incomplete sequence at the end of the chunk: keep it for the next read.
                let rest = chunk.len() - good;
                buf.copy_within(good..good + rest, 0);
                carried = rest;
            }
        }
    }
}

/// The user's cache directory, the root of every cache and work directory kernel-builder
/// keeps between runs: `$KERNEL_BUILDER_CACHE_DIR`, `$XDG_CACHE_HOME/kernel-builder`, or
/// `~/.cache/kernel-builder`.
pub fn cache_root() -> anyhow::Result<camino::Utf8PathBuf> {
    if let Some(d) = crate::env::CACHE_DIR.dir()? {
        return Ok(d);
    }
    let var = |v: &crate::env::Var| v.non_empty().map(camino::Utf8PathBuf::from);
    if let Some(d) = var(&crate::env::XDG_CACHE_HOME) {
        return Ok(d.join("kernel-builder"));
    }
    let home = var(&crate::env::HOME).context("neither KERNEL_BUILDER_CACHE_DIR, XDG_CACHE_HOME nor HOME is set: set KERNEL_BUILDER_CACHE_DIR to a directory for build work files")?;
    Ok(home.join(".cache/kernel-builder"))
}

/// Bytes of the regular files below `dir`.
pub fn dir_size(dir: &Utf8Path) -> u64 {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}

/// `1.5 MiB`-style size for people.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[i])
    }
}

/// Parse a size: a number of bytes with an optional unit `K`, `M`, `G`, `T` (powers of 1024;
/// `KiB`, `MiB`, … and `KB`, `MB`, … mean the same; `B` is bytes), e.g. `500M`, `2GiB`, `1.5G`.
///
/// Errors: anything else (a unit spelled twice, a fraction of a byte, a number with a unit that
/// comes to less than one byte), with the accepted forms; the message does not repeat the value,
/// which the caller names with where it came from.
pub fn parse_size(s: &str) -> anyhow::Result<u64> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = unit.trim().to_ascii_uppercase();
    let not_a_size =
        || anyhow::anyhow!("not a size; write bytes or a number with K, M, G or T (e.g. 500M, 2G)");
    // One unit, spelled once (`1BB` and `1iB` are typos, not sizes).
    let shift = match unit.as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        _ => return Err(not_a_size()),
    };
    // A fraction of a byte is no size (`1.9999999999` was taken as 1).
    anyhow::ensure!(shift > 0 || !num.contains('.'), not_a_size());
    let out_of_range = || anyhow::anyhow!("out of range: at most 16777215T (2^64 - 1 bytes)");
    // A whole number exactly (f64 would round one past 2^53 and take 2^64 for 2^64 - 1);
    // `num` holds only digits and dots, so a whole number that does not parse is too large.
    if !num.is_empty() && !num.contains('.') {
        return num.parse::<u64>().ok().and_then(|n| n.checked_mul(1u64 << shift)).ok_or_else(out_of_range);
    }
    let n = num.parse::<f64>().map_err(|_| not_a_size())?;
    let bytes = n * (1u64 << shift) as f64;
    // 2^64 as f64 is exact; a fraction of bytes is dropped.
    anyhow::ensure!(bytes.is_finite() && bytes < 18_446_744_073_709_551_616.0, out_of_range());
    // What is under a byte would be taken as 0, which a bound reads as "keep nothing".
    // Read from the digits: a nonzero number may round to 0.0 itself (`0.` and 400 zeros, `1`).
    let nonzero = num.bytes().any(|b| (b'1'..=b'9').contains(&b));
    anyhow::ensure!(
        !nonzero || bytes >= 1.0,
        "less than one byte; write 0 for none, or a whole number of bytes"
    );
    Ok(bytes as u64)
}

/// Copy the tree at `from` to `to` (which must not exist), in sorted order, following no
/// symlinks (they are copied as links). Files get mode 0644, or 0755 when executable;
/// directories 0755.
pub fn copy_tree(from: &Utf8Path, to: &Utf8Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::symlink_metadata(from).with_context(|| format!("cannot read `{from}`"))?;
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(from).with_context(|| format!("cannot read link `{from}`"))?;
        std::os::unix::fs::symlink(&target, to).with_context(|| format!("cannot create link `{to}`"))?;
    } else if meta.is_dir() {
        std::fs::create_dir(to).with_context(|| format!("cannot create directory `{to}`"))?;
        let mut names = Vec::new();
        for e in from.read_dir_utf8().with_context(|| format!("cannot read directory `{from}`"))? {
            let e = e.with_context(|| format!("cannot read directory `{from}`"))?;
            names.push(e.file_name().to_owned());
        }
        names.sort();
        for name in names {
            copy_tree(&from.join(&name), &to.join(&name))?;
        }
        std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755))
            .with_context(|| format!("cannot set permissions on `{to}`"))?;
    } else {
        std::fs::copy(from, to).with_context(|| format!("cannot copy `{from}` to `{to}`"))?;
        let mode = if meta.permissions().mode() & 0o111 != 0 { 0o755 } else { 0o644 };
        std::fs::set_permissions(to, std::fs::Permissions::from_mode(mode))
            .with_context(|| format!("cannot set permissions on `{to}`"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("0").unwrap(), 0);
        assert_eq!(parse_size("1234").unwrap(), 1234);
        assert_eq!(parse_size("500M").unwrap(), 500 << 20);
        assert_eq!(parse_size("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_size("2 gb").unwrap(), 2 << 30);
        assert_eq!(parse_size("1.5K").unwrap(), 1536);
        // Under a byte is refused, not taken as 0; a fraction of a byte past one is dropped.
        assert!(parse_size("0.0000001K").unwrap_err().to_string().contains("less than one byte"));
        assert_eq!(parse_size("0.0K").unwrap(), 0);
        let tiny = format!("0.{}1K", "0".repeat(400));
        assert!(parse_size(&tiny).unwrap_err().to_string().contains("less than one byte"));
        assert_eq!(parse_size("0.1K").unwrap(), 102);
        assert!(parse_size("lots").unwrap_err().to_string().contains("not a size"));
        assert!(parse_size("5X").is_err());
        assert!(parse_size("").is_err());
        // Whole numbers are exact up to 2^64 - 1, and one past it is out of range, as a unit
        // that takes a number past it is (f64 had taken 2^64 and rounded past 2^53).
        assert_eq!(parse_size("18446744073709551615").unwrap(), u64::MAX);
        assert_eq!(parse_size("9007199254740993").unwrap(), 9_007_199_254_740_993);
        assert_eq!(parse_size("16777215T").unwrap(), 16_777_215 << 40);
        for big in ["18446744073709551616", "16777216T", "99999999T", "18446744073709551616.0", "1e30"] {
            let e = parse_size(big).unwrap_err().to_string();
            assert!(e.contains("out of range") || e.contains("not a size"), "{big}: {e}");
        }
        assert!(parse_size("18446744073709551616").unwrap_err().to_string().contains("out of range"));
        assert!(parse_size("16777216T").unwrap_err().to_string().contains("out of range"));
        assert!(parse_size("1.5.2G").unwrap_err().to_string().contains("not a size"));
        assert!(parse_size(".").unwrap_err().to_string().contains("not a size"));
        // One unit, spelled once; no fraction of a byte (a user's trial found `1BB` taken as 1
        // byte, `1GIBIB` as 1 GiB and `1.9999999999` as 1).
        assert_eq!(parse_size("7B").unwrap(), 7);
        assert_eq!(parse_size("3 kib").unwrap(), 3 << 10);
        assert_eq!(parse_size("1TB").unwrap(), 1 << 40);
        for typo in ["1BB", "1iB", "1IB", "1KBBB", "1GIBIB", "1KIBB", "1.9999999999", "0.0000001", "2.5B"] {
            assert!(parse_size(typo).unwrap_err().to_string().contains("not a size"), "{typo}");
        }
    }

    /// A reader that yields at most `step` bytes per call, to split sequences across reads.
    struct Trickle<'a>(&'a [u8], usize);
    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = self.1.min(self.0.len()).min(out.len());
            out[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn bounded_readers_refuse_what_is_not_a_regular_file_and_stop_at_the_limit() {
        let t = tempfile::tempdir().unwrap();
        let d = Utf8Path::from_path(t.path()).unwrap();
        std::fs::write(d.join("f"), b"12345").unwrap();
        assert_eq!(read_bounded(&d.join("f"), 5, "x").unwrap(), b"12345");
        assert_eq!(read_upto(&d.join("f"), 3).unwrap(), b"1234");
        let e = read_bounded(&d.join("f"), 4, "a test file").unwrap_err().to_string();
        assert_eq!(e, format!("`{d}/f` is larger than 4 bytes, the most kernel-builder reads of a test file; check that this is the right file"));
        let fifo = std::ffi::CString::new(d.join("p").as_str()).unwrap();
        // SAFETY: a valid C string; mkfifo only creates the node.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        let e = read_bounded(&d.join("p"), 4, "x").unwrap_err().to_string();
        assert_eq!(e, format!("`{d}/p` is a FIFO (named pipe), not a regular file; give the path of a file"));
        let e = read_to_string(d).unwrap_err().to_string();
        assert_eq!(e, format!("`{d}` is a directory, not a regular file; give the path of a file"));
        let e = read_to_string(Utf8Path::new("/dev/zero")).unwrap_err().to_string();
        assert!(e.contains("is a character device"), "{e}");
        assert_eq!(size_words(1 << 20), "1 MiB");
        assert_eq!(size_words(64 << 10), "64 KiB");
        assert_eq!(size_words(1000), "1000 bytes");
    }

    #[test]
    fn inside_follows_links_and_refuses_those_leading_out() {
        let t = tempfile::tempdir().unwrap();
        let d = Utf8Path::from_path(t.path()).unwrap();
        let root = d.join("root");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir_all(d.join("out")).unwrap();
        std::os::unix::fs::symlink("sub", root.join("in-link")).unwrap();
        std::os::unix::fs::symlink("../out", root.join("out-link")).unwrap();
        std::os::unix::fs::symlink("../nowhere", root.join("dangling")).unwrap();
        assert_eq!(inside(&root, Utf8Path::new("new/deeper")).unwrap(), root.join("new/deeper"));
        assert_eq!(inside(&root, Utf8Path::new("in-link/f")).unwrap(), root.join("in-link/f"));
        let e = inside(&root, Utf8Path::new("out-link/a/b")).unwrap_err().to_string();
        let out = d.join("out").canonicalize_utf8().unwrap();
        assert_eq!(e, format!("`{root}/out-link/a/b` leads to `{out}/a/b`, outside `{root}`: kernel-builder writes and removes files only inside it; remove the symbolic link `{root}/out-link`"));
        let e = inside(&root, Utf8Path::new("dangling")).unwrap_err().to_string();
        assert_eq!(e, format!("cannot resolve `{root}/dangling`: is `{root}/dangling` a symbolic link to nothing? remove it"));
        assert_eq!(inside(&d.join("missing"), Utf8Path::new("x")).unwrap(), d.join("missing/x"));
    }

    #[test]
    fn check_utf8_agrees_with_from_utf8_across_chunk_boundaries() {
        let cases: [&[u8]; 6] = [
            b"",
            b"plain\nascii\n",
            "h\u{e9}llo\n\u{1f600}\n".as_bytes(),
            b"a\nb\n\xff\n",
            b"ok\n\xe2\x82",
            b"\xc3",
        ];
        for case in cases {
            let want = std::str::from_utf8(case).map(|_| ()).map_err(|e| NotUtf8 {
                line: case[..e.valid_up_to()].iter().filter(|b| **b == b'\n').count() + 1,
            });
            for step in [1, 2, 3, 7, 1 << 20] {
                assert_eq!(check_utf8(Trickle(case, step)).unwrap(), want, "{case:?} step {step}");
            }
        }
    }
}
