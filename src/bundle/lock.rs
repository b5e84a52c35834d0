//! Builds of one kernel take turns on `build/`: an advisory `flock` on the directory itself,
//! exclusive while a build swaps variants and writes the manifest, shared while `verify`
//! compares. Nothing is written into `build/` for it; a run that has to wait says who holds
//! the lock (from `/proc/locks`).

use anyhow::Context;
use camino::Utf8Path;

/// How [`lock_dir`] locks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lock {
    /// Readers (`verify`): many at once, none while a build swaps variants.
    Shared,
    /// A build replacing variants and the manifest.
    Exclusive,
}

/// Take an advisory lock (`flock`) on the directory `dir` itself, held until the returned
/// file is dropped; waits while another process holds a conflicting lock. Nothing is written
/// into `dir` for it.
///
/// Errors: `dir` cannot be opened or locked.
pub fn lock_dir(dir: &Utf8Path, how: Lock) -> anyhow::Result<std::fs::File> {
    use rustix::fs::FlockOperation as Op;
    let file = std::fs::File::open(dir).with_context(|| format!("cannot open `{dir}` to lock it"))?;
    let (now, wait) = match how {
        Lock::Shared => (Op::NonBlockingLockShared, Op::LockShared),
        Lock::Exclusive => (Op::NonBlockingLockExclusive, Op::LockExclusive),
    };
    match rustix::fs::flock(&file, now) {
        Ok(()) => return Ok(file),
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => {}
        Err(e) => return Err(std::io::Error::from(e)).with_context(|| format!("cannot lock `{dir}`")),
    }
    // Someone else holds it: say who, then wait.
    let who = lock_holder(&file).unwrap_or_else(|| "another process".to_owned());
    let what = match how {
        Lock::Shared => "to finish writing it",
        Lock::Exclusive => "to finish with it",
    };
    crate::printer::stderr!(
        "note: `{dir}` is locked by {who}; waiting for it {what} (builds of one kernel take turns)"
    );
    rustix::fs::flock(&file, wait).with_context(|| format!("cannot lock `{dir}`"))?;
    Ok(file)
}

/// Who holds an `flock` on the file `file` refers to, from `/proc/locks` (Linux): `pid N
/// (command line)`. `None` where that cannot be told.
fn lock_holder(file: &std::fs::File) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let meta = file.metadata().ok()?;
    let (dev, ino) = (meta.dev(), meta.ino());
    let (major, minor) = (rustix::fs::major(dev), rustix::fs::minor(dev));
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    let me = std::process::id();
    for line in locks.lines() {
        // `1: FLOCK  ADVISORY  WRITE 12345 08:01:123456 0 EOF` (blocked waiters have `->`).
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 || f[1] != "FLOCK" || f.contains(&"->") {
            continue;
        }
        let mut id = f[5].split(':');
        let (Some(ma), Some(mi), Some(i)) = (id.next(), id.next(), id.next()) else { continue };
        let same = u32::from_str_radix(ma, 16).ok() == Some(major)
            && u32::from_str_radix(mi, 16).ok() == Some(minor)
            && i.parse::<u64>().ok() == Some(ino);
        let Ok(pid) = f[4].parse::<u32>() else { continue };
        if same && pid != me {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|b| {
                    String::from_utf8_lossy(&b)
                        .split('\0')
                        .filter(|s| !s.is_empty())
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default();
            return Some(if cmd.is_empty() { format!("pid {pid}") } else { format!("pid {pid} (`{cmd}`)") });
        }
    }
    None
}
