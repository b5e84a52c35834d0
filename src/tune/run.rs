//! Running the tuning Python: output streamed to stderr as it comes (a phase can take many
//! minutes) and its tail kept for the error; SIGINT, SIGTERM and SIGHUP caught so that an
//! interrupted run ends as [`TuneError::Interrupted`] with the scratch directory removed,
//! instead of killing this process with the kernel directory half-written.

use std::collections::VecDeque;
use std::io::IsTerminal;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};

use super::TuneError;

/// Lines of output kept for an error message.
const TAIL_LINES: usize = 40;

/// Environment variables that would change what the runner does behind our back: a fixed
/// AOT mode or data directory, another heuristic directory, forced or forbidden searches.
const SCRUBBED_ENV: &[&str] = &[
    "HELION_AOT_MODE",
    "HELION_AOT_DATA_DIR",
    "HELION_HEURISTIC_DIR",
    "HELION_AOT_KERNELS",
    "HELION_FORCE_AUTOTUNE",
    "HELION_SKIP_CACHE",
    "HELION_DISALLOW_AUTOTUNING",
    "HELION_AUTOTUNE_EFFORT",
];

/// Signal bookkeeping shared with the watcher thread.
struct Signals {
    /// Set once any of the watched signals arrived.
    interrupted: AtomicBool,
    /// The signal that arrived first.
    first: AtomicU32,
    /// The running child's pid (0: none).
    child: AtomicU32,
}

fn signals() -> anyhow::Result<&'static Arc<Signals>> {
    static STATE: OnceLock<Arc<Signals>> = OnceLock::new();
    if let Some(s) = STATE.get() {
        return Ok(s);
    }
    let state = Arc::new(Signals {
        interrupted: AtomicBool::new(false),
        first: AtomicU32::new(0),
        child: AtomicU32::new(0),
    });
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut watched = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
        .context("cannot install signal handlers")?;
    let shared = Arc::clone(&state);
    // A terminal sends SIGINT to the whole foreground group, the child included: forwarding
    // it would interrupt the child twice. Outside a terminal only we got it: pass it on.
    let terminal = std::io::stdin().is_terminal();
    std::thread::spawn(move || {
        for sig in watched.forever() {
            let _ = shared.first.compare_exchange(0, sig as u32, Ordering::SeqCst, Ordering::SeqCst);
            shared.interrupted.store(true, Ordering::SeqCst);
            let pid = shared.child.load(Ordering::SeqCst);
            if pid != 0 && !(sig == SIGINT && terminal) {
                if let (Some(pid), Some(signal)) =
                    (rustix::process::Pid::from_raw(pid as i32), rustix::process::Signal::from_named_raw(sig))
                {
                    let _ = rustix::process::kill_process(pid, signal);
                }
            }
        }
    });
    Ok(STATE.get_or_init(|| state))
}

fn signal_name(sig: u32) -> String {
    match sig as i32 {
        signal_hook::consts::SIGINT => "SIGINT".into(),
        signal_hook::consts::SIGTERM => "SIGTERM".into(),
        signal_hook::consts::SIGHUP => "SIGHUP".into(),
        signal_hook::consts::SIGKILL => "SIGKILL".into(),
        n => format!("signal {n}"),
    }
}

/// The largest file [`same_bytes`] compares (a traceback names source files, which are small;
/// an error message should not wait on comparing large data files).
const COMPARED_BYTES: u64 = 16 << 20;

/// Whether `a` and `b` are both regular files with the same contents
/// ([`crate::fsutil::same_contents`]), at most [`COMPARED_BYTES`] long; a longer file counts
/// as different.
fn same_bytes(a: &Utf8Path, b: &Utf8Path) -> bool {
    std::fs::metadata(a).is_ok_and(|m| m.len() <= COMPARED_BYTES) && crate::fsutil::same_contents(a, b)
}

/// A finished child: its exit status and the last lines it printed.
pub(super) struct Finished {
    status: ExitStatus,
    tail: VecDeque<String>,
    /// The scratch copy of the kernel the child ran in, and the user's kernel directory that
    /// it copies: [`Finished::tail`] names the user's files instead of the copies.
    work: Utf8PathBuf,
    dir: Utf8PathBuf,
}

impl Finished {
    /// The exit code; `None` when a signal ended it.
    pub(super) fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// `exit status 1` / `killed by SIGKILL`.
    pub(super) fn status_text(&self) -> String {
        match (self.status.code(), self.status.signal()) {
            (Some(c), _) => format!("exit status {c}"),
            (None, Some(s)) => format!("killed by {}", signal_name(s as u32)),
            _ => self.status.to_string(),
        }
    }

    /// The kept output, indented, for an error message. The error is shown after the scratch
    /// directory is gone, so a path into its copy of the kernel (a traceback's `File
    /// "…/kernel/torch-ext/…"`) is written as the same path in the user's kernel directory
    /// when that file holds the same bytes as the copy did; a path to a file that differs (this
    /// GPU's heuristic, which the run rewrote) or that the user does not have, and any other
    /// path into the scratch directory (Helion's data directory), stays as it was, and one note
    /// at the end says that those paths are gone.
    pub(super) fn tail(&self) -> String {
        let scratch = self.work.parent().map(Utf8Path::as_str).filter(|s| !s.is_empty());
        let mut s = String::new();
        let mut removed = false;
        for l in &self.tail {
            let l = self.user_paths(l);
            removed |= scratch.is_some_and(|scratch| l.contains(scratch));
            s.push_str("  | ");
            s.push_str(&l);
            s.push('\n');
        }
        if let Some(scratch) = scratch.filter(|_| removed) {
            s.push_str(&format!(
                "  (paths under `{scratch}` were in tune's scratch directory, removed when it stopped)\n"
            ));
        }
        s
    }

    /// `line` with each `<work>/<rel>` whose file is the user's `<dir>/<rel>`, byte for byte,
    /// written as `<dir>/<rel>`. A path ends at white space, a quote, a bracket, `,` or `:`
    /// (`bench.py:12`), so one with a space in it is left as it was.
    fn user_paths(&self, line: &str) -> String {
        let prefix = format!("{}/", self.work);
        let shown = match self.dir.as_str().trim_end_matches('/') {
            "" if self.dir.as_str().starts_with('/') => "",
            "" => ".",
            d => d,
        };
        let mut out = String::new();
        let mut rest = line;
        while let Some(at) = rest.find(&prefix) {
            out.push_str(&rest[..at]);
            let after = &rest[at + prefix.len()..];
            let end =
                after.find(|c: char| c.is_whitespace() || "\"'`,:()[]<>".contains(c)).unwrap_or(after.len());
            let rel = &after[..end];
            if !rel.is_empty() && same_bytes(&self.work.join(rel), &self.dir.join(rel)) {
                out.push_str(shown);
                out.push('/');
            } else {
                out.push_str(&prefix);
            }
            out.push_str(rel);
            rest = &after[end..];
        }
        out.push_str(rest);
        out
    }

    /// The bench script's exit code when the runner logged `<marker> N` (the runner's own
    /// report of a failed benchmark command).
    pub(super) fn failed_bench_code(&self, marker: &str) -> Option<i32> {
        self.tail.iter().find_map(|l| {
            let rest = &l[l.find(marker)? + marker.len()..];
            rest.trim().split(|c: char| !c.is_ascii_digit() && c != '-').next()?.parse().ok()
        })
    }
}

/// Runs the tuning Python in the scratch copy of the kernel.
pub(super) struct Runner<'r> {
    python: String,
    /// Where the phases and the runner's output lines go.
    report: &'r dyn crate::report::Reporter,
    cwd: Utf8PathBuf,
    /// The user's kernel directory, named in [`TuneError::Interrupted`].
    dir: Utf8PathBuf,
    signals: &'static Arc<Signals>,
}

impl<'r> Runner<'r> {
    /// A runner of `python` in `cwd` saying what it runs to `report`; installs the signal
    /// watcher.
    pub(super) fn new(
        python: &str,
        cwd: &Utf8Path,
        dir: &Utf8Path,
        report: &'r dyn crate::report::Reporter,
    ) -> anyhow::Result<Runner<'r>> {
        Ok(Runner { python: python.into(), report, cwd: cwd.into(), dir: dir.into(), signals: signals()? })
    }

    /// Where the runner's lines go.
    pub(super) fn report(&self) -> &'r dyn crate::report::Reporter {
        self.report
    }

    /// One phase of Helion's AOT runner (`args` start with `-m helion.autotuner.aot_runner`).
    pub(super) fn run(
        &self,
        phase: &'static str,
        args: &[String],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Finished> {
        self.report.status(&format!("tune: {phase} phase"));
        self.run_python(phase, args, env)
    }

    /// `python ARGS…` in the scratch kernel directory, with [`SCRUBBED_ENV`] removed, then
    /// `env` set. Its stdout and stderr are streamed to our stderr.
    ///
    /// # Errors
    /// [`TuneError::Interrupted`] when a signal arrived or ended the child;
    /// [`TuneError::PythonNotRunnable`] when it cannot be started.
    pub(super) fn run_python(
        &self,
        phase: &'static str,
        args: &[String],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Finished> {
        let interrupted =
            |how: String, signal: i32| TuneError::Interrupted { phase, how, dir: self.dir.clone(), signal };
        let ours = || {
            let sig = self.signals.first.load(Ordering::SeqCst);
            interrupted(signal_name(sig), sig as i32)
        };
        if self.signals.interrupted.load(Ordering::SeqCst) {
            return Err(ours().into());
        }
        // Only what is not set here is removed (the last change of a variable wins in any case).
        let cmd = SCRUBBED_ENV
            .iter()
            .filter(|k| !env.iter().any(|(set, _)| set == *k))
            .fold(crate::process::Cmd::new(&self.python).args(args.iter().cloned()).dir(&self.cwd), |c, k| {
                c.env_remove(*k)
            })
            .env("PYTHONUNBUFFERED", "1");
        let cmd = env.iter().fold(cmd, |c, (k, v)| c.env(*k, *v));
        let streamed = cmd.stream(
            TAIL_LINES,
            |pids| {
                if let Some(pid) = pids.first() {
                    self.signals.child.store(*pid, Ordering::SeqCst);
                }
            },
            |line| self.report.status(line),
        );
        let streamed = match streamed {
            Ok(s) => s,
            Err(crate::process::Error::Spawn { source, .. }) => {
                return Err(TuneError::PythonNotRunnable {
                    python: self.python.clone(),
                    detail: source.to_string(),
                }
                .into())
            }
            Err(e) => {
                self.signals.child.store(0, Ordering::SeqCst);
                return Err(e.into());
            }
        };
        let (status, tail) = (streamed.status, streamed.tail);
        self.signals.child.store(0, Ordering::SeqCst);
        let fin = Finished { status, tail, work: self.cwd.clone(), dir: self.dir.clone() };
        if self.signals.interrupted.load(Ordering::SeqCst) {
            return Err(ours().into());
        }
        // A child killed by a signal, or one that reports it (the runner exits 130 on SIGINT,
        // 128 + n on signal n).
        let by_signal = match (fin.status.signal(), fin.status.code()) {
            (Some(s), _) if [libc_sigint(), libc_sigterm(), libc_sighup()].contains(&s) => {
                Some((signal_name(s as u32), s))
            }
            (_, Some(130)) => Some(("the child exited 130, SIGINT".into(), libc_sigint())),
            (_, Some(143)) => Some(("the child exited 143, SIGTERM".into(), libc_sigterm())),
            _ => None,
        };
        if let Some((how, signal)) = by_signal {
            return Err(interrupted(how, signal).into());
        }
        Ok(fin)
    }
}

fn libc_sigint() -> i32 {
    signal_hook::consts::SIGINT
}
fn libc_sigterm() -> i32 {
    signal_hook::consts::SIGTERM
}
fn libc_sighup() -> i32 {
    signal_hook::consts::SIGHUP
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finished(work: &Utf8Path, dir: &Utf8Path, lines: &[&str]) -> Finished {
        Finished {
            status: ExitStatus::from_raw(0),
            tail: lines.iter().map(|l| (*l).to_owned()).collect(),
            work: work.to_owned(),
            dir: dir.to_owned(),
        }
    }

    #[test]
    fn quoted_paths_name_the_users_file_once_per_slash() {
        let tmp = tempfile::tempdir().unwrap();
        let root = Utf8Path::from_path(tmp.path()).unwrap();
        let (work, user) = (root.join("scratch/kernel"), root.join("k"));
        for d in [&work, &user] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(d.join("bench.py"), "same\n").unwrap();
        }
        std::fs::write(work.join("new.py"), "rewritten\n").unwrap();
        std::fs::write(user.join("new.py"), "old\n").unwrap();
        let line = format!("File \"{work}/bench.py\", line 2; {work}/new.py:7 ({work}/gone.py)");
        let trailing = Utf8PathBuf::from(format!("{user}/"));
        let got = finished(&work, &trailing, &[&line]).tail();
        assert_eq!(
            got,
            format!(
                "  | File \"{user}/bench.py\", line 2; {work}/new.py:7 ({work}/gone.py)\n  (paths under \
                 `{root}/scratch` were in tune's scratch directory, removed when it stopped)\n"
            )
        );
        // Nothing left in the scratch directory: no note.
        let got = finished(&work, &user, &[&format!("at {work}/bench.py")]).tail();
        assert_eq!(got, format!("  | at {user}/bench.py\n"));
    }
}
