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
//! writes it directly into SHA-256: file contents go from the kernel to the hasher through one
//! reusable 1 MiB buffer (files of 8 MiB or more are read on a second thread into three
//! rotating buffers, so reading overlaps hashing), only the sorted listing of each directory
//! on the current path is held in memory, and the archive itself is never built. Tests compare
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

/// Size of one read from a file: large enough that syscall overhead vanishes, small enough to
/// stay in L2/L3 cache while the hasher consumes it.
const CHUNK: usize = 1 << 20;

/// Files at least this large are read on a helper thread so that reading overlaps hashing.
const PIPELINE_MIN: u64 = 8 << 20;

/// Whether this process may run on more than one CPU (read once): with one CPU a reader thread
/// cannot overlap with hashing and only adds switches.
fn several_cpus() -> bool {
    static SEVERAL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SEVERAL.get_or_init(|| std::thread::available_parallelism().is_ok_and(|n| n.get() > 1))
}

/// The SHA-256 of the NAR serialisation of `path`, exactly as `nix hash path` computes it.
///
/// `path` itself is not followed if it is a symlink (the archive then holds one symlink).
///
/// # Errors
/// Any I/O error while walking or reading (the message names the path that failed), an entry
/// that is not a regular file, directory or symlink, or a file that changed size while it was
/// being read.
pub fn nar_hash(path: &Path) -> io::Result<[u8; 32]> {
    let mut hasher = Sha256::new();
    dump(path, &mut HashSink(&mut hasher), keep_all)?;
    Ok(hasher.finalize().into())
}

/// Which directory entries an archive holds: `keep(name, kind)`.
type Keep = fn(&std::ffi::OsStr, std::fs::FileType) -> bool;

fn keep_all(_: &std::ffi::OsStr, _: std::fs::FileType) -> bool {
    true
}

fn keep_variant_files(name: &std::ffi::OsStr, kind: std::fs::FileType) -> bool {
    !crate::layout::is_bytecode(name, kind.is_dir())
}

/// The NAR hash of the variant directory `path` as [`crate::layout`] defines a variant: Python
/// bytecode below it (`__pycache__/`, `*.pyc`, written when the variant is imported) is left
/// out. Equal to `nix hash path` of the same directory without the bytecode; this is the hash
/// `hashes.json`, `verify` and `upload` use.
///
/// # Errors
/// As for [`nar_hash`].
pub fn variant_nar_hash_sri(path: &Path) -> io::Result<String> {
    let mut hasher = Sha256::new();
    dump(path, &mut HashSink(&mut hasher), keep_variant_files)?;
    let hash: [u8; 32] = hasher.finalize().into();
    Ok(sri(&hash))
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
    dump(path, &mut WriteSink(out), keep_all)
}

/// Where archive bytes go. Hashing gets its own impl so no `io::Write` indirection or error
/// plumbing sits between a file buffer and the compression function.
trait Sink {
    fn put(&mut self, bytes: &[u8]) -> io::Result<()>;
}

struct HashSink<'a>(&'a mut Sha256);

impl Sink for HashSink<'_> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.0.update(bytes);
        Ok(())
    }
}

struct WriteSink<'a>(&'a mut dyn Write);

impl Sink for WriteSink<'_> {
    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.0.write_all(bytes)
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
    let mut buf = vec![0u8; CHUNK];
    let meta = std::fs::symlink_metadata(path).map_err(|e| at(path, "read metadata of", e))?;
    node(path, meta.file_type(), sink, &mut buf, keep)
}

fn node(
    path: &Path,
    kind: std::fs::FileType,
    sink: &mut dyn Sink,
    buf: &mut Vec<u8>,
    keep: Keep,
) -> io::Result<()> {
    put_str(sink, b"(")?;
    put_str(sink, b"type")?;
    if kind.is_symlink() {
        put_str(sink, b"symlink")?;
        put_str(sink, b"target")?;
        let target = std::fs::read_link(path).map_err(|e| at(path, "read symlink", e))?;
        put_str(sink, target.as_os_str().as_bytes())?;
    } else if kind.is_file() {
        regular(path, sink, buf)?;
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
            node(&child, child_kind, sink, buf, keep)?;
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

fn regular(path: &Path, sink: &mut dyn Sink, buf: &mut [u8]) -> io::Result<()> {
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
    let read = if len >= PIPELINE_MIN && several_cpus() {
        contents_pipelined(&mut file, len, sink, buf)
    } else {
        contents_inline(&mut file, len, sink, buf)
    }
    .map_err(|e| at(path, "read", e))?;
    if read != len {
        return Err(io::Error::other(format!(
            "`{}` changed size while it was being hashed ({len} bytes expected, {read} read)",
            path.display()
        )));
    }
    sink.put(padding(len))
}

/// Read `file` (expected `len` bytes) into `sink` on this thread. Returns the bytes read, which
/// differs from `len` only if the file changed; reading stops at `len + 1` bytes.
fn contents_inline(file: &mut File, len: u64, sink: &mut dyn Sink, buf: &mut [u8]) -> io::Result<u64> {
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
        sink.put(&buf[..n])?;
    }
}

/// Like [`contents_inline`], but a scoped thread reads into rotating buffers while this thread
/// hashes the previous one, so a large file costs max(read, hash) rather than the sum. Falls
/// back to [`contents_inline`] when no thread can be started.
fn contents_pipelined(file: &mut File, len: u64, sink: &mut dyn Sink, buf: &mut [u8]) -> io::Result<u64> {
    // The reader gets its own descriptor (same open file, same offset), so `file` stays usable
    // here if the thread cannot start.
    let Ok(mut reader) = file.try_clone() else {
        return contents_inline(file, len, sink, buf);
    };
    // Full buffers travel reader → hasher, empty ones travel back.
    let (full_tx, full_rx) = mpsc::sync_channel::<io::Result<(Vec<u8>, usize)>>(2);
    let (empty_tx, empty_rx) = mpsc::sync_channel::<Vec<u8>>(3);
    for _ in 0..3 {
        // Cannot fail: the receiver is alive and the channel has room for three.
        let _ = empty_tx.send(vec![0u8; CHUNK]);
    }
    std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new().spawn_scoped(scope, move || {
            let mut total = 0u64;
            while let Ok(mut b) = empty_rx.recv() {
                let n = loop {
                    match reader.read(&mut b) {
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        other => break other,
                    }
                };
                let done = !matches!(n, Ok(k) if k > 0);
                if let Ok(k) = n {
                    total += k as u64;
                }
                // Stop once past `len`: the hasher reports the size change.
                let done = done || total > len;
                if full_tx.send(n.map(|k| (b, k))).is_err() || done {
                    return;
                }
            }
        });
        if spawned.is_err() {
            return contents_inline(file, len, sink, buf);
        }
        let mut total = 0u64;
        let mut result = Ok(());
        for msg in &full_rx {
            match msg {
                Err(e) => {
                    result = Err(e);
                    break;
                }
                Ok((_, 0)) => break,
                Ok((b, n)) => {
                    total += n as u64;
                    if total > len {
                        break;
                    }
                    if let Err(e) = sink.put(&b[..n]) {
                        result = Err(e);
                        break;
                    }
                    // The reader may have stopped already; then the buffer is simply dropped.
                    let _ = empty_tx.send(b);
                }
            }
        }
        // Dropping our ends stops the reader if it is still waiting.
        drop(full_rx);
        drop(empty_tx);
        result.map(|()| total)
    })
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
