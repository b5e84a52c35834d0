//! NAR serialisation and NAR hashes, byte-for-byte what Nix produces.
//!
//! The NAR ("Nix ARchive") format is the one Nix uses for store paths: `nix hash path P` prints
//! the SHA-256 of `P`'s NAR serialisation, and `nix-store --dump P` writes the archive itself.
//! Grammar (every `str` is a little-endian `u64` byte length, the bytes, then zero padding to a
//! multiple of 8):
//!
//! ```text
//! archive   = str("nix-archive-1") node
//! node      = str("(") str("type") body str(")")
//! body      = str("regular") [str("executable") str("")] str("contents") str(<file bytes>)
//!           | str("symlink") str("target") str(<link target bytes>)
//!           | str("directory") entry*
//! entry     = str("entry") str("(") str("name") str(<name bytes>) str("node") node str(")")
//! ```
//!
//! Directory entries are sorted by the raw bytes of their names; symlinks are recorded, never
//! followed; a file is executable when its owner-execute mode bit (`S_IXUSR`) is set; no other
//! metadata (times, owners, other mode bits) is recorded. Sockets, FIFOs and device nodes are
//! errors, as in Nix.
//!
//! # Why a hand-written writer rather than the `nix-nar` crate
//!
//! `nix-nar` (0.4/0.5) was considered. Its `Encoder` is an `io::Read` that produces the
//! archive through an internal buffer, so hashing with it costs an extra copy of every byte;
//! its README states that only UTF-8 paths are supported, while a NAR must carry any name Unix
//! allows; and it decides executability through the `is_executable` crate, while Nix looks only
//! at the owner-execute bit. The format is small and fixed (the grammar above), so this module
//! writes it directly into SHA-256: with more than one CPU a second thread walks the tree and
//! writes the archive into eight rotating 1 MiB buffers, reading file contents straight into them
//! (one copy, out of the page cache), while the calling thread does nothing but hash; only the
//! sorted listing of each directory on the current path is held in memory, and the archive
//! itself is never built. Tests compare
//! the result with real Nix on fixed and generated trees (feature `nix-tests`).
//!
//! Names are handled as raw bytes (`OsStr`), not UTF-8: a store path may hold any name Unix
//! allows, and the hash must not depend on whether a name happens to be valid UTF-8.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use base64::Engine;
use sha2::{Digest, Sha256};

/// Size of one buffer of the archive stream, and of the largest single read from a file: large
/// enough that syscalls and hand-offs between the threads cost almost nothing (about 1,100
/// buffers for 1 GiB), small enough to stay in the last-level cache between the copy out of the
/// page cache and the hashing.
const CHUNK: usize = 1 << 20;

/// Buffers in rotation between the archive writer and the hasher: the writer fills one while
/// the hasher consumes another, and the spares (8 MiB in all, within the last-level cache)
/// absorb the writer's stalls: opening small files, or losing its CPU on a busy machine. With
/// four, the hasher of `bench/hash.sh`'s tree waited 120–260 ms for data on a shared machine;
/// with eight, about 10 ms.
const BUFFERS: usize = 8;

/// Whether this process may run on more than one CPU (read once): with one CPU a second thread
/// cannot overlap with hashing and only adds switches.
fn several_cpus() -> bool {
    static SEVERAL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SEVERAL.get_or_init(|| std::thread::available_parallelism().is_ok_and(|n| n.get() > 1))
}

/// The SHA-256 of the NAR serialisation of `path`, exactly as `nix hash path` computes it.
///
/// `path` itself is not followed if it is a symlink (the archive then holds one symlink).
///
/// With more than one CPU the archive is written on a second thread (directory listings,
/// opening and reading every file, into rotating buffers) while this thread only hashes, so the
/// whole hash costs about the SHA-256 time of the archive rather than that plus the I/O. The
/// hash itself is one sequential stream either way.
///
/// # Errors
/// Any I/O error while walking or reading (the message names the path that failed), an entry
/// that is not a regular file, directory or symlink, or a file that changed size while it was
/// being read.
pub fn nar_hash(path: &Path) -> io::Result<[u8; 32]> {
    hash_archive(path, keep_all)
}

/// Which directory entries an archive holds: `keep(name, kind)`.
type Keep = fn(&std::ffi::OsStr, std::fs::FileType) -> bool;

fn keep_all(_: &std::ffi::OsStr, _: std::fs::FileType) -> bool {
    true
}

fn keep_variant_files(name: &std::ffi::OsStr, kind: std::fs::FileType) -> bool {
    !crate::layout::is_bytecode(name, kind.is_dir())
}

/// kernel-builder's own bookkeeping in a toolchain tree of the toolchain cache: the seal's
/// manifest and the list of wheels (`.kernel-builder-manifest-v1.json`,
/// `.kernel-builder-wheels`). No wheel holds a name of that form.
fn keep_unpacked_tree_files(name: &std::ffi::OsStr, _: std::fs::FileType) -> bool {
    !name.as_bytes().starts_with(b".kernel-builder-")
}

/// The NAR hash (SRI) of a toolchain tree of the toolchain cache as Nix's unpack derivation
/// holds the same wheels (`kernel-builder nix-support unpack-wheels`): the cache's own
/// bookkeeping files (`.kernel-builder-*`) left out. What `matrix pin-unpacked` records in the
/// pins, so Nix can make the tree a fixed-output path.
///
/// # Errors
/// As for [`nar_hash`].
pub fn unpacked_tree_nar_hash_sri(path: &Path) -> io::Result<String> {
    hash_archive(path, keep_unpacked_tree_files).map(|h| sri(&h))
}

/// The NAR hash of the variant directory `path` as [`crate::layout`] defines a variant: Python
/// bytecode below it (`__pycache__/`, `*.pyc`, written when the variant is imported) is left
/// out. Equal to `nix hash path` of the same directory without the bytecode; this is the hash
/// `hashes.json`, `verify` and `upload` use.
///
/// # Errors
/// As for [`nar_hash`].
pub fn variant_nar_hash_sri(path: &Path) -> io::Result<String> {
    hash_archive(path, keep_variant_files).map(|h| sri(&h))
}

/// [`nar_hash`] in SRI form, as `nix hash path` prints it: `sha256-<standard base64 with =>`.
///
/// # Errors
/// As for [`nar_hash`].
pub fn nar_hash_sri(path: &Path) -> io::Result<String> {
    nar_hash(path).map(|h| sri(&h))
}

/// The SRI form of a SHA-256 digest: `sha256-` followed by the standard base64 encoding (with
/// `=` padding) of the 32 raw bytes, e.g. `sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=`
/// for the empty input.
pub fn sri(hash: &[u8; 32]) -> String {
    format!("sha256-{}", base64::engine::general_purpose::STANDARD.encode(hash))
}

/// Write the NAR serialisation of `path` to `out` (the bytes `nix-store --dump` writes).
///
/// Meant for tests and debugging: to hash, use [`nar_hash`], which skips the `Write` layer.
///
/// # Errors
/// As for [`nar_hash`], plus any error from `out`.
pub fn dump_to(path: &Path, out: &mut dyn Write) -> io::Result<()> {
    dump(path, &mut WriteSink { out, buf: vec![0u8; CHUNK] }, keep_all)
}

/// The SHA-256 of the archive of `path` (entries chosen by `keep`): written on a second thread
/// into [`BUFFERS`] rotating buffers of [`CHUNK`] bytes and hashed on this one, or both on this
/// thread when there is one CPU, or the buffers or the thread cannot be had.
fn hash_archive(path: &Path, keep: Keep) -> io::Result<[u8; 32]> {
    if !several_cpus() {
        return hash_archive_inline(path, keep);
    }
    match hash_archive_threaded(path, keep) {
        Some(result) => result,
        // Everything of the attempt is freed by now, so the inline hash has its memory.
        None => hash_archive_inline(path, keep),
    }
}

/// A zeroed [`CHUNK`]-byte buffer, or `None` when the memory cannot be had (a process under
/// `ulimit -v`, say): the caller then uses fewer buffers or none, instead of aborting.
fn try_buffer() -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    buf.try_reserve_exact(CHUNK).ok()?;
    buf.resize(CHUNK, 0);
    Some(buf)
}

/// [`hash_archive`] on two threads; `None` when the buffers (at least two) or the thread
/// cannot be had, before anything was read.
fn hash_archive_threaded(path: &Path, keep: Keep) -> Option<io::Result<[u8; 32]>> {
    let mut buffers: Vec<Vec<u8>> = std::iter::from_fn(try_buffer).take(BUFFERS).collect();
    if buffers.len() < 2 {
        return None;
    }
    let first = buffers.pop()?;
    // Full buffers (with the number of bytes used) travel writer → hasher, empty ones back.
    // Both channels can hold every buffer, so no send ever blocks: only the receives wait.
    let (full_tx, full_rx) = mpsc::sync_channel::<(Vec<u8>, usize)>(BUFFERS);
    let (empty_tx, empty_rx) = mpsc::sync_channel::<Vec<u8>>(BUFFERS);
    for buf in buffers {
        // Cannot fail: the receiver is alive and the channel has room.
        let _ = empty_tx.send(buf);
    }
    std::thread::scope(|scope| {
        let writer = std::thread::Builder::new()
            // Half the main thread's stack: the walk recurses once per directory level, and a
            // path of at most 4,096 bytes has at most 2,048 of them.
            .stack_size(4 << 20)
            .spawn_scoped(scope, move || {
                let mut sink = ChunkSink { buf: first, used: 0, full: full_tx, empty: empty_rx };
                dump(path, &mut sink, keep)?;
                sink.send_current()
            });
        // On failure the closure, its channel ends and its buffer are dropped here; the
        // buffers still in `empty_rx`'s channel go when this scope ends.
        let writer = writer.ok()?;
        let mut hasher = Sha256::new();
        // Ends when the writer drops its sender: the archive is complete, or it failed.
        for (buf, used) in &full_rx {
            hasher.update(&buf[..used]);
            // The writer may have finished already; then the buffer is simply dropped.
            let _ = empty_tx.send(buf);
        }
        Some(match writer.join() {
            Ok(Ok(())) => Ok(hasher.finalize().into()),
            Ok(Err(e)) => Err(e),
            Err(panic) => std::panic::resume_unwind(panic),
        })
    })
}

/// [`hash_archive`] on this thread alone.
fn hash_archive_inline(path: &Path, keep: Keep) -> io::Result<[u8; 32]> {
    let mut hasher = Sha256::new();
    dump(path, &mut HashSink { hasher: &mut hasher, buf: vec![0u8; CHUNK] }, keep)?;
    Ok(hasher.finalize().into())
}

/// Where archive bytes go: small framing strings through [`Sink::put`], file contents through
/// [`Sink::contents`], so each sink reads a file the cheapest way it can.
trait Sink {
    fn put(&mut self, bytes: &[u8]) -> io::Result<()>;

    /// Append the contents of `file` (expected `len` bytes). Returns the bytes read, which
    /// differs from `len` only if the file changed; reading stops at `len + 1` bytes.
    fn contents(&mut self, file: &mut File, len: u64) -> io::Result<u64>;
}

/// Hashing on this thread, reading through one reused buffer.
struct HashSink<'a> {
    hasher: &'a mut Sha256,
    buf: Vec<u8>,
}

impl Sink for HashSink<'_> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.hasher.update(bytes);
        Ok(())
    }

    fn contents(&mut self, file: &mut File, len: u64) -> io::Result<u64> {
        let hasher = &mut *self.hasher;
        read_through(file, len, &mut self.buf, |b| {
            hasher.update(b);
            Ok(())
        })
    }
}

struct WriteSink<'a> {
    out: &'a mut dyn Write,
    buf: Vec<u8>,
}

impl Sink for WriteSink<'_> {
    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.out.write_all(bytes)
    }

    fn contents(&mut self, file: &mut File, len: u64) -> io::Result<u64> {
        let out = &mut *self.out;
        read_through(file, len, &mut self.buf, |b| out.write_all(b))
    }
}

/// Read `file` (expected `len` bytes) through `buf`, handing each piece to `each`. Returns the
/// bytes read; stops once past `len`.
fn read_through(
    file: &mut File,
    len: u64,
    buf: &mut [u8],
    mut each: impl FnMut(&[u8]) -> io::Result<()>,
) -> io::Result<u64> {
    let mut total = 0u64;
    loop {
        let n = match file.read(buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        total += n as u64;
        if total > len {
            return Ok(total);
        }
        each(&buf[..n])?;
    }
}

/// The archive as a stream of [`CHUNK`]-byte buffers for the hashing thread: framing strings
/// are copied in, file contents are read straight into the buffer (one copy, out of the page
/// cache), and a full buffer is sent and replaced by an empty one.
struct ChunkSink {
    buf: Vec<u8>,
    /// Bytes of `buf` that hold archive data.
    used: usize,
    full: mpsc::SyncSender<(Vec<u8>, usize)>,
    empty: mpsc::Receiver<Vec<u8>>,
}

impl ChunkSink {
    /// Send the current buffer (if it holds anything) and take an empty one.
    fn send_current(&mut self) -> io::Result<()> {
        if self.used == 0 {
            return Ok(());
        }
        // The hasher only stops receiving when it panicked.
        let gone = || io::Error::other("the hashing thread stopped");
        let next = self.empty.recv().map_err(|_| gone())?;
        let full = std::mem::replace(&mut self.buf, next);
        self.full.send((full, self.used)).map_err(|_| gone())?;
        self.used = 0;
        Ok(())
    }
}

impl Sink for ChunkSink {
    fn put(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            if self.used == CHUNK {
                self.send_current()?;
            }
            let n = bytes.len().min(CHUNK - self.used);
            self.buf[self.used..self.used + n].copy_from_slice(&bytes[..n]);
            self.used += n;
            bytes = &bytes[n..];
        }
        Ok(())
    }

    fn contents(&mut self, file: &mut File, len: u64) -> io::Result<u64> {
        let mut total = 0u64;
        loop {
            if self.used == CHUNK {
                self.send_current()?;
            }
            // Never more than one byte past `len`, so a grown file is seen without reading
            // (or sending) the rest of it.
            let want = (CHUNK - self.used).min(usize::try_from(len + 1 - total).unwrap_or(usize::MAX));
            let n = match file.read(&mut self.buf[self.used..self.used + want]) {
                Ok(0) => return Ok(total),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            total += n as u64;
            if total > len {
                return Ok(total);
            }
            self.used += n;
        }
    }
}

const PADDING: [u8; 8] = [0; 8];

/// Zero bytes that follow a string of `len` bytes.
fn padding(len: u64) -> &'static [u8] {
    &PADDING[..((8 - len % 8) % 8) as usize]
}

fn put_str(sink: &mut dyn Sink, s: &[u8]) -> io::Result<()> {
    sink.put(&(s.len() as u64).to_le_bytes())?;
    sink.put(s)?;
    sink.put(padding(s.len() as u64))
}

/// An I/O error whose message names the path, keeping the original kind.
fn at(path: &Path, what: &str, err: io::Error) -> io::Error {
    io::Error::new(err.kind(), format!("cannot {what} `{}`: {err}", path.display()))
}

fn dump(path: &Path, sink: &mut dyn Sink, keep: Keep) -> io::Result<()> {
    put_str(sink, b"nix-archive-1")?;
    let meta = std::fs::symlink_metadata(path).map_err(|e| at(path, "read metadata of", e))?;
    node(path, meta.file_type(), sink, keep)
}

fn node(path: &Path, kind: std::fs::FileType, sink: &mut dyn Sink, keep: Keep) -> io::Result<()> {
    put_str(sink, b"(")?;
    put_str(sink, b"type")?;
    if kind.is_symlink() {
        put_str(sink, b"symlink")?;
        put_str(sink, b"target")?;
        let target = std::fs::read_link(path).map_err(|e| at(path, "read symlink", e))?;
        put_str(sink, target.as_os_str().as_bytes())?;
    } else if kind.is_file() {
        regular(path, sink)?;
    } else if kind.is_dir() {
        put_str(sink, b"directory")?;
        for (name, child, child_kind) in sorted_entries(path)? {
            if !keep(&name, child_kind) {
                continue;
            }
            put_str(sink, b"entry")?;
            put_str(sink, b"(")?;
            put_str(sink, b"name")?;
            put_str(sink, name.as_bytes())?;
            put_str(sink, b"node")?;
            node(&child, child_kind, sink, keep)?;
            put_str(sink, b")")?;
        }
    } else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "`{}` is not a regular file, directory or symlink (NAR cannot hold sockets, \
                 FIFOs or device nodes)",
                path.display()
            ),
        ));
    }
    put_str(sink, b")")
}

/// The entries of one directory, sorted by raw name bytes (Nix's order).
fn sorted_entries(dir: &Path) -> io::Result<Vec<(OsString, PathBuf, std::fs::FileType)>> {
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| at(dir, "read directory", e))? {
        let entry = entry.map_err(|e| at(dir, "read directory", e))?;
        let child = entry.path();
        let kind = entry.file_type().map_err(|e| at(&child, "read metadata of", e))?;
        entries.push((entry.file_name(), child, kind));
    }
    entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    Ok(entries)
}

fn regular(path: &Path, sink: &mut dyn Sink) -> io::Result<()> {
    let mut file = File::open(path).map_err(|e| at(path, "open", e))?;
    let meta = file.metadata().map_err(|e| at(path, "read metadata of", e))?;
    if !meta.is_file() {
        // Replaced by something else between the directory listing and the open.
        return Err(io::Error::other(format!("`{}` changed while it was being hashed", path.display())));
    }
    put_str(sink, b"regular")?;
    if meta.permissions().mode() & 0o100 != 0 {
        put_str(sink, b"executable")?;
        put_str(sink, b"")?;
    }
    put_str(sink, b"contents")?;
    let len = meta.len();
    sink.put(&len.to_le_bytes())?;
    let read = sink.contents(&mut file, len).map_err(|e| at(path, "read", e))?;
    if read != len {
        return Err(io::Error::other(format!(
            "`{}` changed size while it was being hashed ({len} bytes expected, {read} read)",
            path.display()
        )));
    }
    sink.put(padding(len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_rounds_up_to_eight() {
        assert_eq!(padding(0).len(), 0);
        assert_eq!(padding(1).len(), 7);
        assert_eq!(padding(7).len(), 1);
        assert_eq!(padding(8).len(), 0);
        assert_eq!(padding(13).len(), 3);
    }

    #[test]
    fn sri_of_empty_input() {
        let h: [u8; 32] = Sha256::digest(b"").into();
        assert_eq!(sri(&h), "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=");
    }
}
