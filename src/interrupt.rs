//! SIGINT, SIGTERM and SIGHUP during a build: temporary directories are removed and the process
//! exits with `128 + signal` (130 for Ctrl-C), instead of dying with `build/.kernel-builder-tmp-*`
//! left for the next build to clean up.
//!
//! A build registers what an interruption must remove ([`remove_on_interrupt`], which installs
//! the handler the first time) and holds [`hold`] while it does what must not be cut in two
//! (swapping variants into `build/`, rewriting `build/hashes.json`). When a signal arrives:
//!
//! 1. it is passed on to this process's direct children (found in `/proc` by parent pid): to
//!    the whole process group of each build step (CMake, Ninja and the compilers they run,
//!    started in a group of their own, [`crate::process::Cmd::own_process_group`]), which is then waited for; to
//!    another child (Nix) unless it is a terminal's SIGINT, which that child got itself;
//! 2. if a [`hold`] is active, that section is let finish first;
//! 3. every registered path still registered is removed, newest first
//!    ([`Removal::All`]: the directory and everything in it, or the file; [`Removal::IfEmpty`]:
//!    a directory only when nothing was moved into it), and one line on stderr says what was
//!    removed;
//! 4. the process exits with status `128 + signal`.
//!
//! A build thread that meanwhile unwinds (its child was interrupted too and failed) stops when
//! it drops its [`Registered`], so the exit status is always the signal's. Nothing is done for
//! a signal while nothing is registered but exiting the same way. The
//! handler runs on a thread of its own ([`signal_hook::iterator::Signals`]), so it may take
//! locks and touch the filesystem.
//!
//! A signal whose disposition was "ignore" when the process started (`nohup` for SIGHUP, a
//! shell's background job for SIGINT) is left ignored: no handler is installed for it.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use camino::{Utf8Path, Utf8PathBuf};

/// What to do with a registered path on interruption.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    /// Remove the directory and everything below it (or the file, for a registered file).
    All,
    /// Remove the directory only if it is empty (e.g. a `build/` created by this run).
    IfEmpty,
}

#[derive(Debug)]
struct Entry {
    id: u64,
    path: Utf8PathBuf,
    removal: Removal,
}

#[derive(Debug, Default)]
struct Registry {
    next: u64,
    entries: Vec<Entry>,
}

fn registry() -> &'static Mutex<Registry> {
    static REG: OnceLock<Mutex<Registry>> = OnceLock::new();
    REG.get_or_init(|| Mutex::new(Registry::default()))
}

/// Held by the build during sections that must complete once begun; the handler takes it
/// before it removes anything.
fn section() -> &'static Mutex<()> {
    static SECTION: Mutex<()> = Mutex::new(());
    &SECTION
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding it leaves the data as consistent as it was: keep going.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A registration from [`remove_on_interrupt`]; dropping it unregisters the path (it was
/// removed or kept by the build itself).
#[must_use = "the path is unregistered when this is dropped"]
#[derive(Debug)]
pub struct Registered {
    id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        // Interrupted: the build is unwinding because its child was interrupted too. Leave the
        // path to the handler, which removes it and exits; this thread does nothing more, so
        // the exit status is the signal's, whichever thread saw the interruption first.
        // Inside a [`Hold`] the section finishes first (the handler waits for it).
        while interrupted() && !HELD.load(Ordering::SeqCst) {
            std::thread::park();
        }
        lock(registry()).entries.retain(|e| e.id != self.id);
    }
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Whether a signal arrived (the handler is then cleaning up and about to exit).
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Remove `path` (per `removal`) if the process is interrupted while the returned guard
/// lives. Installs the signal handler on first use; if it cannot be installed, interruption
/// keeps its default effect (the next build still removes leftovers) and this is a no-op.
pub fn remove_on_interrupt(path: &Utf8Path, removal: Removal) -> Registered {
    install();
    let mut reg = lock(registry());
    reg.next += 1;
    let id = reg.next;
    reg.entries.push(Entry { id, path: path.to_owned(), removal });
    Registered { id }
}

/// Pass SIGINT, SIGTERM and SIGHUP on to this process's children and exit with `128 + signal`
/// (after removing what is registered), for a command whose children (Nix) must not outlive
/// it. Installs the handler, as [`remove_on_interrupt`] does; a no-op when it cannot be.
pub fn stop_children_on_interrupt() {
    install();
}

/// While a shell runs a user's command (devshell, testshell): SIGINT is the command's alone (a
/// terminal's Ctrl-C reaches it; this process goes on waiting for it, as a shell waits for its
/// job), while SIGTERM and SIGHUP are passed on to it and end this process as usual, removing
/// what is registered. Installs the handler, as [`remove_on_interrupt`] does.
pub fn run_as_shell() {
    SHELL.store(true, Ordering::SeqCst);
    install();
}

/// Set by [`run_as_shell`].
static SHELL: AtomicBool = AtomicBool::new(false);

/// For the command's thread when the command is done, before it exits with its own status:
/// if a signal arrived, the handler is cleaning up and about to exit with `128 + signal`, so
/// wait for it (the command most likely failed because its child was stopped).
pub fn finish() {
    while interrupted() {
        std::thread::park();
    }
}

/// A section that an interruption lets finish before it cleans up and exits. Do not nest.
/// When it ends after a signal arrived, the thread that held it goes no further (the handler
/// exits the process).
#[must_use = "the section ends when this is dropped"]
pub struct Hold {
    guard: Option<MutexGuard<'static, ()>>,
}

impl Drop for Hold {
    fn drop(&mut self) {
        HELD.store(false, Ordering::SeqCst);
        drop(self.guard.take());
        while interrupted() {
            std::thread::park();
        }
    }
}

/// Whether a [`Hold`] is active.
static HELD: AtomicBool = AtomicBool::new(false);

/// Begin a section that must not be cut in two (see [`Hold`]).
pub fn hold() -> Hold {
    let guard = lock(section());
    HELD.store(true, Ordering::SeqCst);
    Hold { guard: Some(guard) }
}

fn install() {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        // A signal ignored when the process started stays ignored (`nohup` ignores SIGHUP; a
        // POSIX shell starts a background job with SIGINT ignored): handling it would undo
        // what the user asked for.
        let wanted: Vec<i32> =
            [SIGINT, SIGTERM, SIGHUP].into_iter().filter(|&s| !ignored_at_start(s)).collect();
        if wanted.is_empty() {
            return true;
        }
        let Ok(mut signals) = signal_hook::iterator::Signals::new(&wanted) else {
            return false;
        };
        let terminal = std::io::stdin().is_terminal();
        std::thread::spawn(move || {
            let mut interruptions =
                signals.forever().filter(|&s| !(s == SIGINT && SHELL.load(Ordering::SeqCst)));
            if let Some(sig) = interruptions.next() {
                INTERRUPTED.store(true, Ordering::SeqCst);
                let groups = forward_to_children(sig, !(sig == SIGINT && terminal));
                wait_for_groups(&groups);
                on_signal(sig);
            }
        });
        true
    });
}

/// Whether `sig`'s disposition is "ignore" (`SIG_IGN`, inherited through `exec`). Asked
/// before any handler of this process is installed, so it is the disposition at start.
fn ignored_at_start(sig: i32) -> bool {
    // SAFETY: `sigaction` with a null new action only reads the current one into `old`,
    // a zeroed `sigaction` this function owns.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        signal_hook::consts::SIGINT => "SIGINT",
        signal_hook::consts::SIGTERM => "SIGTERM",
        signal_hook::consts::SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

/// Clean up after signal `sig` and exit with `128 + sig`.
fn on_signal(sig: i32) -> ! {
    let _section = lock(section());
    let entries: Vec<Entry> = std::mem::take(&mut lock(registry()).entries);
    let mut removed = Vec::new();
    let mut kept = Vec::new();
    for e in entries.iter().rev() {
        match remove(&e.path, e.removal) {
            Ok(true) => removed.push(format!("`{}`", e.path)),
            Ok(false) => {}
            Err(err) => kept.push(format!("`{}` ({err}); delete it", e.path)),
        }
    }
    let mut msg = format!("interrupted ({})", signal_name(sig));
    if !removed.is_empty() {
        msg.push_str(&format!("; removed {}", removed.join(", ")));
    }
    if !kept.is_empty() {
        msg.push_str(&format!("; could not remove {}", kept.join(", ")));
    }
    crate::printer::problem!("{msg}");
    std::process::exit(128 + sig);
}

/// Remove `path` per `removal`; `Ok(false)` when there was nothing to remove (gone, or not
/// empty for [`Removal::IfEmpty`]). A directory that the build thread was still writing into
/// can be non-empty after one pass: a few passes are made.
fn remove(path: &Utf8Path, removal: Removal) -> std::io::Result<bool> {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(false);
    };
    if !meta.is_dir() {
        // A registered file (a temporary file of this run); `IfEmpty` is for directories only.
        if removal == Removal::IfEmpty {
            return Ok(false);
        }
        return match std::fs::remove_file(path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        };
    }
    match removal {
        Removal::IfEmpty => Ok(std::fs::remove_dir(path).is_ok()),
        Removal::All => {
            let mut last = None;
            for _ in 0..5 {
                match std::fs::remove_dir_all(path) {
                    Ok(()) => return Ok(true),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(true),
                    Err(e) => last = Some(e),
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(last.unwrap_or_else(|| std::io::Error::other("cannot remove")))
        }
    }
}

/// Send `sig` to this process's direct children (Linux: `/proc/<pid>/stat` whose parent pid is
/// ours). A child that leads a process group of its own ([`crate::process::Cmd::own_process_group`]) gets it sent to
/// its whole group, always (no terminal signal reaches that group); any other child gets it
/// only when `direct` (not a terminal's SIGINT, which it got itself). Returns the process
/// groups signalled. Elsewhere than Linux, nothing: the children keep running into the work
/// directory in the cache, which the next build reuses.
fn forward_to_children(sig: i32, direct: bool) -> Vec<i32> {
    let me = std::process::id();
    let mut groups = Vec::new();
    let Some(signal) = rustix::process::Signal::from_named_raw(sig) else { return groups };
    for (pid, ppid, pgrp, _) in processes() {
        let Some(p) = rustix::process::Pid::from_raw(pid).filter(|_| ppid == me) else { continue };
        if pgrp == pid {
            let _ = rustix::process::kill_process_group(p, signal);
            groups.push(pid);
        } else if direct {
            let _ = rustix::process::kill_process(p, signal);
        }
    }
    groups
}

/// `(pid, ppid, pgrp, state)` of each process in `/proc`.
fn processes() -> Vec<(i32, u32, i32, char)> {
    let Ok(rd) = std::fs::read_dir("/proc") else { return Vec::new() };
    let mut out = Vec::new();
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // `pid (comm) state ppid pgrp …`; comm may hold spaces and parentheses: split after the
        // last `)`.
        let fields: Vec<&str> =
            stat.rsplit_once(')').map(|(_, r)| r.split_whitespace().collect()).unwrap_or_default();
        if let (Some(state), Some(ppid), Some(pgrp)) = (
            fields.first().and_then(|f| f.chars().next()),
            fields.get(1).and_then(|f| f.parse::<u32>().ok()),
            fields.get(2).and_then(|f| f.parse::<i32>().ok()),
        ) {
            out.push((pid, ppid, pgrp, state));
        }
    }
    out
}

/// Wait until no live process (zombies do not count) of `groups` is left, so that nothing
/// writes into a directory after it is removed. After 20 s what is left gets SIGKILL.
fn wait_for_groups(groups: &[i32]) {
    let left = || processes().into_iter().filter(|p| groups.contains(&p.2) && p.3 != 'Z').count();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while left() > 0 {
        if std::time::Instant::now() > deadline {
            for &g in groups {
                if let Some(g) = rustix::process::Pid::from_raw(g) {
                    let _ = rustix::process::kill_process_group(g, rustix::process::Signal::KILL);
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registrations_end_with_their_guard_and_removal_kinds_differ() {
        let t = tempfile::tempdir().unwrap();
        let d = Utf8Path::from_path(t.path()).unwrap();
        let full = d.join("full");
        std::fs::create_dir_all(full.join("a/b")).unwrap();
        std::fs::write(full.join("a/b/f"), "x").unwrap();
        let g = remove_on_interrupt(&full, Removal::All);
        assert!(lock(registry()).entries.iter().any(|e| e.path == full));
        drop(g);
        assert!(!lock(registry()).entries.iter().any(|e| e.path == full));
        assert!(!remove(&full, Removal::IfEmpty).unwrap(), "not empty: kept");
        assert!(full.is_dir());
        assert!(remove(&full, Removal::All).unwrap());
        assert!(!full.exists());
        assert!(!remove(&full, Removal::All).unwrap(), "gone: nothing to do");
        std::fs::create_dir(&full).unwrap();
        assert!(remove(&full, Removal::IfEmpty).unwrap());
        // A registered file (the rendered card, Nix's JSON output) goes with `All` only.
        let file = d.join("f.json");
        std::fs::write(&file, "{}").unwrap();
        assert!(!remove(&file, Removal::IfEmpty).unwrap());
        assert!(file.is_file());
        assert!(remove(&file, Removal::All).unwrap());
        assert!(!file.exists());
        assert!(!remove(&file, Removal::All).unwrap());
    }
}
