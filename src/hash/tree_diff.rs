//! The first difference between two trees, in NAR order: what `verify` reports when a rebuilt
//! variant's NAR hash differs from the one on record.
//!
//! Only what the NAR serialisation records is compared (entry names, kinds, the owner-execute
//! bit, symlink targets, file bytes), so two trees have equal NAR hashes exactly when
//! [`first_difference`] finds nothing (barring changes while comparing). Entries are visited in
//! the order the archive lists them: names sorted by raw bytes, depth first.

use std::cmp::Ordering;
use std::ffi::OsString;
use std::fmt;
use std::fs::{File, FileType};
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The kind of a tree entry, as NAR records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link (never followed).
    Symlink,
    /// Anything else (socket, FIFO, device node); NAR cannot hold it.
    Other,
}

impl fmt::Display for EntryKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EntryKind::File => "a regular file",
            EntryKind::Directory => "a directory",
            EntryKind::Symlink => "a symlink",
            EntryKind::Other => "a special file",
        })
    }
}

impl From<FileType> for EntryKind {
    fn from(t: FileType) -> Self {
        if t.is_symlink() {
            EntryKind::Symlink
        } else if t.is_file() {
            EntryKind::File
        } else if t.is_dir() {
            EntryKind::Directory
        } else {
            EntryKind::Other
        }
    }
}

/// The first way the `actual` tree differs from the `expected` one. Each `path` is relative
/// to the two roots (empty for the roots themselves; shown as `.`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeDifference {
    /// Present in `expected`, absent from `actual`.
    Missing { path: PathBuf },
    /// Present in `actual`, absent from `expected`.
    Extra { path: PathBuf },
    /// The same name holds different kinds of entry.
    Kind { path: PathBuf, expected: EntryKind, actual: EntryKind },
    /// A regular file's owner-execute bit differs; `expected` is the bit in `expected`.
    Executable { path: PathBuf, expected: bool },
    /// A symlink points elsewhere.
    SymlinkTarget { path: PathBuf, expected: PathBuf, actual: PathBuf },
    /// A regular file's bytes differ, first at byte `offset` (which equals the shorter length
    /// when one file is a prefix of the other).
    Contents { path: PathBuf, offset: u64, expected_len: u64, actual_len: u64 },
}

impl TreeDifference {
    /// The path (relative to the roots) where the trees first differ.
    pub fn path(&self) -> &Path {
        match self {
            TreeDifference::Missing { path }
            | TreeDifference::Extra { path }
            | TreeDifference::Kind { path, .. }
            | TreeDifference::Executable { path, .. }
            | TreeDifference::SymlinkTarget { path, .. }
            | TreeDifference::Contents { path, .. } => path,
        }
    }
}

fn shown(path: &Path) -> String {
    if path.as_os_str().is_empty() {
        ".".to_owned()
    } else {
        path.display().to_string()
    }
}

impl fmt::Display for TreeDifference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = shown(self.path());
        match self {
            TreeDifference::Missing { .. } => write!(f, "`{p}` is missing"),
            TreeDifference::Extra { .. } => write!(f, "`{p}` is unexpected"),
            TreeDifference::Kind { expected, actual, .. } => {
                write!(f, "`{p}` is {actual}, expected {expected}")
            }
            TreeDifference::Executable { expected: true, .. } => {
                write!(f, "`{p}` is not executable, expected executable")
            }
            TreeDifference::Executable { expected: false, .. } => {
                write!(f, "`{p}` is executable, expected not executable")
            }
            TreeDifference::SymlinkTarget { expected, actual, .. } => {
                write!(f, "`{p}` points to `{}`, expected `{}`", actual.display(), expected.display())
            }
            TreeDifference::Contents { offset, expected_len, actual_len, .. } => {
                write!(f, "`{p}` differs from byte {offset}")?;
                if expected_len != actual_len {
                    write!(f, " ({actual_len} bytes, expected {expected_len})")?;
                }
                Ok(())
            }
        }
    }
}

/// Compare two trees (files, directories or symlinks; roots are not followed) and return the
/// first difference in NAR order, or `None` when their NAR serialisations are equal.
///
/// # Errors
/// An entry of either tree cannot be read; the message names it.
pub fn first_difference(expected: &Path, actual: &Path) -> io::Result<Option<TreeDifference>> {
    let e = lstat(expected)?;
    let a = lstat(actual)?;
    compare(expected, actual, PathBuf::new(), e, a, false)
}

/// [`first_difference`] of two variant directories as [`crate::layout`] defines a variant:
/// Python bytecode below either root is not compared (the trees then differ exactly when
/// [`crate::hash::variant_nar_hash_sri`] differs).
///
/// # Errors
/// As for [`first_difference`].
pub fn first_variant_difference(expected: &Path, actual: &Path) -> io::Result<Option<TreeDifference>> {
    let e = lstat(expected)?;
    let a = lstat(actual)?;
    compare(expected, actual, PathBuf::new(), e, a, true)
}

fn at(path: &Path, what: &str, err: io::Error) -> io::Error {
    io::Error::new(err.kind(), format!("cannot {what} `{}`: {err}", path.display()))
}

fn lstat(path: &Path) -> io::Result<FileType> {
    std::fs::symlink_metadata(path).map(|m| m.file_type()).map_err(|e| at(path, "read metadata of", e))
}

fn compare(
    expected: &Path,
    actual: &Path,
    rel: PathBuf,
    e_kind: FileType,
    a_kind: FileType,
    variant: bool,
) -> io::Result<Option<TreeDifference>> {
    let (ek, ak) = (EntryKind::from(e_kind), EntryKind::from(a_kind));
    if ek != ak {
        return Ok(Some(TreeDifference::Kind { path: rel, expected: ek, actual: ak }));
    }
    match ek {
        EntryKind::Symlink => {
            let et = std::fs::read_link(expected).map_err(|e| at(expected, "read symlink", e))?;
            let at_ = std::fs::read_link(actual).map_err(|e| at(actual, "read symlink", e))?;
            // Raw bytes: `Path` equality would call `sub` and `sub/` equal; NAR does not.
            let differ = et.as_os_str().as_bytes() != at_.as_os_str().as_bytes();
            Ok(differ.then_some(TreeDifference::SymlinkTarget { path: rel, expected: et, actual: at_ }))
        }
        EntryKind::File => files(expected, actual, rel),
        EntryKind::Directory => {
            let es = entries(expected, variant)?;
            let as_ = entries(actual, variant)?;
            let (mut i, mut j) = (0, 0);
            while i < es.len() || j < as_.len() {
                let order = match (es.get(i), as_.get(j)) {
                    (Some(x), Some(y)) => x.0.as_bytes().cmp(y.0.as_bytes()),
                    (Some(_), None) => Ordering::Less,
                    _ => Ordering::Greater,
                };
                match order {
                    Ordering::Less => return Ok(Some(TreeDifference::Missing { path: rel.join(&es[i].0) })),
                    Ordering::Greater => {
                        return Ok(Some(TreeDifference::Extra { path: rel.join(&as_[j].0) }))
                    }
                    Ordering::Equal => {
                        let name = &es[i].0;
                        let found = compare(
                            &expected.join(name),
                            &actual.join(name),
                            rel.join(name),
                            es[i].1,
                            as_[j].1,
                            variant,
                        )?;
                        if found.is_some() {
                            return Ok(found);
                        }
                        i += 1;
                        j += 1;
                    }
                }
            }
            Ok(None)
        }
        EntryKind::Other => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "`{}` is not a regular file, directory or symlink (NAR cannot hold sockets, \
                 FIFOs or device nodes)",
                expected.display()
            ),
        )),
    }
}

/// The entries of `dir` sorted by raw name; with `variant`, Python bytecode is left out.
fn entries(dir: &Path, variant: bool) -> io::Result<Vec<(OsString, FileType)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| at(dir, "read directory", e))? {
        let entry = entry.map_err(|e| at(dir, "read directory", e))?;
        let kind = entry.file_type().map_err(|e| at(&entry.path(), "read metadata of", e))?;
        if variant && crate::layout::is_bytecode(&entry.file_name(), kind.is_dir()) {
            continue;
        }
        out.push((entry.file_name(), kind));
    }
    out.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    Ok(out)
}

fn files(expected: &Path, actual: &Path, rel: PathBuf) -> io::Result<Option<TreeDifference>> {
    let mut ef = File::open(expected).map_err(|e| at(expected, "open", e))?;
    let mut af = File::open(actual).map_err(|e| at(actual, "open", e))?;
    let em = ef.metadata().map_err(|e| at(expected, "read metadata of", e))?;
    let am = af.metadata().map_err(|e| at(actual, "read metadata of", e))?;
    let e_exec = em.permissions().mode() & 0o100 != 0;
    let a_exec = am.permissions().mode() & 0o100 != 0;
    if e_exec != a_exec {
        return Ok(Some(TreeDifference::Executable { path: rel, expected: e_exec }));
    }
    const CHUNK: usize = 256 << 10;
    let (mut eb, mut ab) = (vec![0u8; CHUNK], vec![0u8; CHUNK]);
    let mut offset = 0u64;
    loop {
        let en = read_full(&mut ef, &mut eb).map_err(|e| at(expected, "read", e))?;
        let an = read_full(&mut af, &mut ab).map_err(|e| at(actual, "read", e))?;
        let common = en.min(an);
        if let Some(k) = eb[..common].iter().zip(&ab[..common]).position(|(x, y)| x != y) {
            return Ok(Some(contents(rel, offset + k as u64, &em, &am)));
        }
        if en != an {
            return Ok(Some(contents(rel, offset + common as u64, &em, &am)));
        }
        if en == 0 {
            return Ok(None);
        }
        offset += en as u64;
    }
}

fn contents(path: PathBuf, offset: u64, em: &std::fs::Metadata, am: &std::fs::Metadata) -> TreeDifference {
    TreeDifference::Contents { path, offset, expected_len: em.len(), actual_len: am.len() }
}

/// Fill `buf` as far as the file allows; returns the bytes read (less than `buf.len()` only at
/// the end of the file).
fn read_full(file: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// A short, printable view of where two files' contents part, for reports such as `verify`'s.
///
/// `offset` is the first differing byte ([`TreeDifference::Contents`]). When the lines around
/// it are text in both files, the result names the line and shows it from each file:
///
/// ```text
/// line 3, byte 17:
/// - expected line
/// + actual line
/// ```
///
/// Otherwise it shows up to 16 bytes from `offset` in hex (`byte 4096:` then `- 7f 45 …` and
/// `+ 7f 46 …`). A side that has ended shows `(end of file)`. Lines are cut at 120 characters.
///
/// # Errors
/// Either file cannot be read; the message names it.
pub fn contents_excerpt(expected: &Path, actual: &Path, offset: u64) -> io::Result<String> {
    const BEFORE: u64 = 512;
    const AFTER: usize = 512;
    let start = offset.saturating_sub(BEFORE);
    let e = window(expected, start, (offset - start) as usize + AFTER)?;
    let a = window(actual, start, (offset - start) as usize + AFTER)?;
    let at_ = (offset - start) as usize;
    let (el, al) = (line_around(&e, at_), line_around(&a, at_));
    let text = |l: &Option<&[u8]>| l.is_none_or(|b| std::str::from_utf8(b).is_ok() && !b.contains(&0));
    if text(&el) && text(&al) && (el.is_some() || al.is_some()) {
        let line = 1 + count_newlines(expected, offset)?;
        let show = |l: Option<&[u8]>| match l {
            None => "(end of file)".to_owned(),
            Some(b) => cut(&String::from_utf8_lossy(b), 120),
        };
        return Ok(format!("line {line}, byte {offset}:\n- {}\n+ {}", show(el), show(al)));
    }
    let hex = |w: &[u8]| {
        if w.len() <= at_ {
            return "(end of file)".to_owned();
        }
        let end = (at_ + 16).min(w.len());
        w[at_..end].iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" ")
    };
    Ok(format!("byte {offset}:\n- {}\n+ {}", hex(&e), hex(&a)))
}

/// Up to `len` bytes of `path` from `start` (fewer at the end of the file).
fn window(path: &Path, start: u64, len: usize) -> io::Result<Vec<u8>> {
    use std::io::{Seek, SeekFrom};
    let mut f = File::open(path).map_err(|e| at(path, "open", e))?;
    f.seek(SeekFrom::Start(start)).map_err(|e| at(path, "read", e))?;
    let mut buf = vec![0u8; len];
    let n = read_full(&mut f, &mut buf).map_err(|e| at(path, "read", e))?;
    buf.truncate(n);
    Ok(buf)
}

/// The line of `w` holding byte `at` (without its newline), or `None` if `w` ends before `at`.
fn line_around(w: &[u8], at: usize) -> Option<&[u8]> {
    if at >= w.len() {
        return None;
    }
    let begin = w[..at].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let end = w[at..].iter().position(|&b| b == b'\n').map_or(w.len(), |i| at + i);
    Some(&w[begin..end])
}

fn count_newlines(path: &Path, upto: u64) -> io::Result<u64> {
    let mut f = File::open(path).map_err(|e| at(path, "open", e))?.take(upto);
    let mut buf = vec![0u8; 64 << 10];
    let mut count = 0u64;
    loop {
        let n = read_full_take(&mut f, &mut buf).map_err(|e| at(path, "read", e))?;
        if n == 0 {
            return Ok(count);
        }
        count += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
    }
}

fn read_full_take(f: &mut io::Take<File>, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match f.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            other => return other,
        }
    }
}

fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_owned()
    } else {
        let mut out: String = s.chars().take(max).collect();
        out.push('…');
        out
    }
}
