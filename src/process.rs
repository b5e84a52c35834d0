//! The one way to run a child process ([`Cmd`]), and the guarantees every child gets: it dies
//! with the tool, and a build never shares its work directory with the processes of an earlier
//! one that outlived it.
//!
//! [`Cmd`] runs a command captured ([`Cmd::output`], [`Cmd::run`]), streamed line by line
//! ([`Cmd::stream`]) or on the terminal ([`Cmd::status`]); `git` comes with the variables that
//! would redirect it removed ([`Cmd::git`]). A failure is an [`Error`] that carries the command
//! line, the exit status and the end of stderr.
//!
//! Every child goes through [`dies_with_parent`] (a duct expression elsewhere:
//! `.before_spawn(crate::process::before_spawn)`): on Linux the child gets SIGTERM when this
//! process ends, however it ends (`kill -9` included; `PR_SET_PDEATHSIG`). SIGTERM rather
//! than SIGKILL so the tools that start processes of their own (Ninja, CMake, Nix) stop those
//! too; a process that ignores it, or a grandchild that is not told, is what
//! [`crate::assemble::workdirs::lock_work_dir`] is for: the lock it takes is inherited by
//! every child, so it is held until the last process of a build is gone, and the next build
//! waits for that.
//!
//! Caveat of the mechanism: the signal fires when the *thread* that spawned the child ends,
//! so a child must be spawned by a thread that outlives it (every site here waits for its
//! child on the thread that started it).

use std::os::unix::process::CommandExt;

use camino::{Utf8Path, Utf8PathBuf};

/// Make the process `cmd` starts receive SIGTERM when this process dies (Linux; elsewhere
/// nothing is done). If this process is already gone by the time the child starts, the child
/// does not run.
pub fn dies_with_parent(cmd: &mut std::process::Command) {
    #[cfg(target_os = "linux")]
    {
        let parent = rustix::process::getpid();
        // SAFETY: the hook makes two system calls and allocates nothing, which is what may run
        // between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::TERM))?;
                // The parent may have died between fork and prctl: then no signal would come.
                if rustix::process::getppid() != Some(parent) {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cmd;
}

/// [`dies_with_parent`] in the shape duct's `before_spawn` takes.
pub fn before_spawn(cmd: &mut std::process::Command) -> std::io::Result<()> {
    dies_with_parent(cmd);
    Ok(())
}

/// Variables that point `git` at another repository than the one its working directory is in
/// (set, for example, under `git rebase --exec`); [`Cmd::git`] removes them.
pub const GIT_REDIRECTS: [&str; 8] = [
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
];

/// Lines of a failed command's stderr that [`Error::Failed`] keeps.
pub const STDERR_TAIL_LINES: usize = 100;

/// One external command: program, arguments, working directory and environment changes. Every
/// way of running it ([`Cmd::output`], [`Cmd::run`], [`Cmd::stream`], [`Cmd::status`]) gives the
/// child [`dies_with_parent`] and stdin from `/dev/null` (but [`Cmd::status`], which hands the
/// terminal over), and reports a failure as an [`Error`] that names the command.
#[derive(Debug, Clone)]
pub struct Cmd {
    program: String,
    args: Vec<String>,
    dir: Option<Utf8PathBuf>,
    /// In the order given; the last change of a variable wins (`None`: removed).
    env: Vec<(String, Option<String>)>,
    stdout_file: Option<std::path::PathBuf>,
    /// Start it in a process group of its own ([`Cmd::own_process_group`]).
    own_group: bool,
}

/// What a command that ran to its end printed, as text (invalid UTF-8 replaced).
#[derive(Debug, Clone)]
pub struct Output {
    pub status: std::process::ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// Whether the command exited 0.
    pub fn success(&self) -> bool {
        self.status.success()
    }
}

/// The longest line [`Cmd::stream`] passes on in one piece (bytes).
pub const MAX_LINE: u64 = 64 * 1024;

/// What a streamed command ([`Cmd::stream`]) left: its status and the last lines of its output.
#[derive(Debug, Clone)]
pub struct Streamed {
    pub status: std::process::ExitStatus,
    /// The last lines (at most the number asked for), without their line ends.
    pub tail: std::collections::VecDeque<String>,
    /// How many lines it printed in all.
    pub lines: usize,
}

/// Why a command did not give its result: it could not be started, it failed (the evidence:
/// status and the end of its stderr), or its output could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The program could not be started (not installed, not on `PATH`, not executable).
    #[error("cannot run `{command}`")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    /// It ran and exited non-zero or was killed by a signal.
    #[error("`{command}` failed ({status}){}", stderr_block(stderr_tail))]
    Failed { command: String, status: std::process::ExitStatus, stderr_tail: String },
    /// Its output could not be read, or it could not be waited for.
    #[error("cannot read the output of `{command}`")]
    Read {
        command: String,
        #[source]
        source: std::io::Error,
    },
}

fn stderr_block(tail: &str) -> String {
    if tail.is_empty() {
        String::new()
    } else {
        format!(":\n{tail}")
    }
}

impl Error {
    /// The command line, as shown in the message.
    pub fn command(&self) -> &str {
        match self {
            Error::Spawn { command, .. } | Error::Failed { command, .. } | Error::Read { command, .. } => {
                command
            }
        }
    }

    /// The message with its cause on one line (`cannot run `git init`: No such file or
    /// directory (os error 2)`), for a message that embeds it.
    pub fn one_line(&self) -> String {
        match std::error::Error::source(self) {
            Some(cause) => format!("{self}: {cause}"),
            None => self.to_string(),
        }
    }

    /// What to do about it: a program that cannot be started is looked for on `PATH`.
    pub fn hints(&self) -> Vec<String> {
        match self {
            Error::Spawn { command, source } if source.kind() == std::io::ErrorKind::NotFound => {
                let program = command.split(' ').next().unwrap_or(command);
                vec![format!("is `{program}` installed and on PATH?")]
            }
            _ => Vec::new(),
        }
    }
}

/// The last `n` lines of `text`, trimmed at the end; `(last n lines)` first when some were cut.
pub fn tail_lines(text: &str, n: usize) -> String {
    let text = text.trim_end();
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() <= n {
        return text.to_owned();
    }
    format!("(last {n} lines)\n{}", lines[lines.len() - n..].join("\n"))
}

impl Cmd {
    /// `program` with no arguments, run in the current directory with this process's
    /// environment.
    pub fn new(program: impl Into<String>) -> Cmd {
        Cmd {
            program: program.into(),
            args: Vec::new(),
            dir: None,
            env: Vec::new(),
            stdout_file: None,
            own_group: false,
        }
    }

    /// `git`, with [`GIT_REDIRECTS`] removed so that it works on the repository of its working
    /// directory (or of `-C DIR`) and no other.
    pub fn git() -> Cmd {
        GIT_REDIRECTS.iter().fold(Cmd::new("git"), |c, v| c.env_remove(*v))
    }

    /// Add one argument.
    pub fn arg(mut self, arg: impl Into<String>) -> Cmd {
        self.args.push(arg.into());
        self
    }

    /// Add arguments.
    pub fn args<I, S>(mut self, args: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Run in `dir`.
    pub fn dir(mut self, dir: &Utf8Path) -> Cmd {
        self.dir = Some(dir.to_owned());
        self
    }

    /// Set `key` to `value` in the child's environment.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Cmd {
        self.env.push((key.into(), Some(value.into())));
        self
    }

    /// Remove `key` from the child's environment.
    pub fn env_remove(mut self, key: impl Into<String>) -> Cmd {
        self.env.push((key.into(), None));
        self
    }

    /// Start the child in a process group of its own, so that an interruption can stop it and
    /// everything it started (Ninja's compilers, nvcc's `cudafe++`, `cicc`, `ptxas`) by
    /// signalling the group ([`crate::interrupt`] passes every signal on to such a group; the
    /// terminal's Ctrl-C no longer reaches it directly).
    pub fn own_process_group(mut self) -> Cmd {
        self.own_group = true;
        self
    }

    /// Send the child's stdout to the file `path` (created or truncated) instead of capturing
    /// it; [`Cmd::stream`] then streams stderr alone.
    pub fn stdout_file(mut self, path: &std::path::Path) -> Cmd {
        self.stdout_file = Some(path.to_owned());
        self
    }

    /// The command line as messages show it: the program and its arguments, an argument with
    /// a space or nothing in it quoted.
    pub fn display(&self) -> String {
        let quote = |s: &str| {
            if s.is_empty() || s.contains([' ', '\t', '\n', '\'', '"']) {
                format!("'{}'", s.replace('\'', r"'\''"))
            } else {
                s.to_owned()
            }
        };
        std::iter::once(self.program.as_str())
            .chain(self.args.iter().map(String::as_str))
            .map(quote)
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The environment changes with the last change of each variable only.
    fn final_env(&self) -> Vec<(&str, Option<&str>)> {
        let mut out: Vec<(&str, Option<&str>)> = Vec::new();
        for (k, v) in &self.env {
            out.retain(|(seen, _)| seen != k);
            out.push((k.as_str(), v.as_deref()));
        }
        out
    }

    fn expression(&self) -> duct::Expression {
        crate::printer::verbose_line(format_args!("+ {}", crate::printer::escape_controls(&self.display())));
        let own_group = self.own_group;
        let mut e = duct::cmd(&self.program, &self.args)
            .before_spawn(move |c| {
                if own_group {
                    std::os::unix::process::CommandExt::process_group(c, 0);
                }
                before_spawn(c)
            })
            .unchecked();
        if let Some(dir) = &self.dir {
            e = e.dir(dir);
        }
        for (k, v) in self.final_env() {
            e = match v {
                Some(v) => e.env(k, v),
                None => e.env_remove(k),
            };
        }
        if let Some(f) = &self.stdout_file {
            e = e.stdout_path(f);
        }
        e
    }

    fn spawn_error(&self, source: std::io::Error) -> Error {
        Error::Spawn { command: self.display(), source }
    }

    /// Run to the end with stdin empty and stdout and stderr captured (both drained at once);
    /// any exit status is a result.
    ///
    /// # Errors
    /// [`Error::Spawn`].
    pub fn output(&self) -> Result<Output, Error> {
        let mut e = self.expression().stdin_null().stderr_capture();
        if self.stdout_file.is_none() {
            e = e.stdout_capture();
        }
        let out = e.run().map_err(|source| self.spawn_error(source))?;
        Ok(Output {
            status: out.status,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }

    /// [`Cmd::output`] of a command that must succeed.
    ///
    /// # Errors
    /// [`Error::Spawn`]; [`Error::Failed`] (with the last [`STDERR_TAIL_LINES`] of its stderr)
    /// when it exits non-zero.
    pub fn run(&self) -> Result<Output, Error> {
        let out = self.output()?;
        if !out.success() {
            return Err(Error::Failed {
                command: self.display(),
                status: out.status,
                stderr_tail: tail_lines(&out.stderr, STDERR_TAIL_LINES),
            });
        }
        Ok(out)
    }

    /// Whether the command runs and exits 0 (its output thrown away): for questions such as
    /// `git check-ignore`.
    pub fn succeeds(&self) -> bool {
        self.expression().stdin_null().stdout_null().stderr_null().run().is_ok_and(|o| o.status.success())
    }

    /// Run with stdout and stderr merged (stderr alone with [`Cmd::stdout_file`]), calling
    /// `on_line` with each line as it comes (line end removed) and keeping the last `keep`.
    /// `on_spawn` gets the child's process id once it runs (to forward signals to it).
    ///
    /// # Errors
    /// [`Error::Spawn`]; [`Error::Read`] when the output cannot be read (the child is killed).
    /// A non-zero status is a result: the caller says what it means.
    pub fn stream(
        &self,
        keep: usize,
        on_spawn: impl FnOnce(&[u32]),
        mut on_line: impl FnMut(&str),
    ) -> Result<Streamed, Error> {
        use std::io::BufRead;
        let reader = self
            .expression()
            .stdin_null()
            .stderr_to_stdout()
            .reader()
            .map_err(|source| self.spawn_error(source))?;
        on_spawn(&reader.pids());
        let read_error = |source| Error::Read { command: self.display(), source };
        let mut tail = std::collections::VecDeque::new();
        let mut lines = 0usize;
        let mut buf = Vec::new();
        let mut input = std::io::BufReader::new(&reader);
        loop {
            buf.clear();
            // A line longer than MAX_LINE comes in pieces: memory stays bounded whatever it prints.
            match std::io::Read::take(&mut input, MAX_LINE).read_until(b'\n', &mut buf) {
                Ok(0) => break,
                Ok(_) => {
                    let line = String::from_utf8_lossy(&buf);
                    let line = line.trim_end_matches(['\n', '\r']);
                    on_line(line);
                    lines += 1;
                    if keep > 0 {
                        if tail.len() == keep {
                            tail.pop_front();
                        }
                        tail.push_back(line.to_owned());
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let _ = reader.kill();
                    return Err(read_error(e));
                }
            }
        }
        let status =
            reader.try_wait().map_err(read_error)?.map(|o| o.status).ok_or_else(|| {
                read_error(std::io::Error::other("it closed its output but has not exited"))
            })?;
        Ok(Streamed { status, tail, lines })
    }

    /// Run with the terminal (stdin, stdout, stderr inherited) and wait: for an interactive
    /// command the user drives.
    ///
    /// # Errors
    /// [`Error::Spawn`].
    pub fn status(&self) -> Result<std::process::ExitStatus, Error> {
        self.expression().run().map(|o| o.status).map_err(|source| self.spawn_error(source))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Cmd {
        Cmd::new("sh").args(["-c", script])
    }

    #[test]
    fn a_failure_carries_the_command_the_status_and_the_end_of_stderr() {
        let script = format!(
            "i=0; while [ $i -lt {} ]; do echo line$i >&2; i=$((i+1)); done; exit 3",
            STDERR_TAIL_LINES + 5
        );
        let err = sh(&script).run().unwrap_err();
        let Error::Failed { command, status, stderr_tail } = &err else { panic!("{err:?}") };
        assert_eq!(command, &format!("sh -c '{script}'"));
        assert_eq!(status.code(), Some(3));
        let lines: Vec<&str> = stderr_tail.lines().collect();
        assert_eq!(lines.len(), STDERR_TAIL_LINES + 1);
        assert_eq!(lines[0], format!("(last {STDERR_TAIL_LINES} lines)"));
        assert_eq!(lines[1], "line5");
        assert_eq!(lines[STDERR_TAIL_LINES], format!("line{}", STDERR_TAIL_LINES + 4));
        assert!(
            err.to_string().starts_with(&format!("`{command}` failed (exit status: 3):\n(last ")),
            "{err}"
        );
        assert!(err.hints().is_empty());
    }

    #[test]
    fn output_captures_both_streams_and_any_status() {
        let out = sh("echo out; echo err >&2; exit 1").output().unwrap();
        assert_eq!(
            (out.stdout.as_str(), out.stderr.as_str(), out.status.code()),
            ("out\n", "err\n", Some(1))
        );
        assert!(!out.success());
        assert_eq!(sh("echo ok").run().unwrap().stdout, "ok\n");
    }

    #[test]
    fn a_missing_program_is_a_spawn_error_with_a_hint() {
        let err = Cmd::new("kernel-builder-no-such-program").arg("--version").output().unwrap_err();
        assert!(matches!(err, Error::Spawn { .. }), "{err:?}");
        assert_eq!(err.to_string(), "cannot run `kernel-builder-no-such-program --version`");
        assert_eq!(err.hints(), ["is `kernel-builder-no-such-program` installed and on PATH?"]);
    }

    #[test]
    fn the_last_change_of_a_variable_wins_and_git_is_scrubbed() {
        let c = sh("echo ${KB_T-unset}").env("KB_T", "a").env_remove("KB_T");
        assert_eq!(c.run().unwrap().stdout, "unset\n");
        let c = sh("echo ${KB_T-unset}").env_remove("KB_T").env("KB_T", "b");
        assert_eq!(c.run().unwrap().stdout, "b\n");
        let git = Cmd::git();
        for v in GIT_REDIRECTS {
            assert_eq!(git.final_env().iter().find(|(k, _)| *k == v), Some(&(v, None)), "{v}");
        }
        let t = tempfile::tempdir().unwrap();
        let d = Utf8Path::from_path(t.path()).unwrap();
        assert_eq!(sh("pwd").dir(d).run().unwrap().stdout.trim(), d.canonicalize_utf8().unwrap());
    }

    #[test]
    fn stream_calls_back_per_line_and_keeps_the_tail() {
        let mut seen = Vec::new();
        let mut pid = 0;
        let s = sh("echo a; echo b >&2; printf c; exit 2")
            .stream(2, |p| pid = p[0], |l| seen.push(l.to_owned()))
            .unwrap();
        assert!(pid > 0);
        assert_eq!(seen, ["a", "b", "c"]);
        assert_eq!(s.tail, ["b", "c"]);
        assert_eq!((s.lines, s.status.code()), (3, Some(2)));
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("out");
        let mut seen = Vec::new();
        let s = sh("echo to-file; echo to-stream >&2")
            .stdout_file(&f)
            .stream(10, |_| {}, |l| seen.push(l.to_owned()))
            .unwrap();
        assert_eq!((seen, s.status.code()), (vec!["to-stream".to_owned()], Some(0)));
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "to-file\n");
    }

    /// A child that prints one endless line cannot make the reader hold it whole: it comes in
    /// pieces of at most MAX_LINE bytes.
    #[test]
    fn stream_cuts_an_overlong_line_into_bounded_pieces() {
        let mut pieces = Vec::new();
        let s = sh("head -c 200000 /dev/zero | tr '\\0' x; echo; echo end")
            .stream(1, |_| {}, |l| pieces.push(l.len()))
            .unwrap();
        assert_eq!(pieces, [65536, 65536, 65536, 200000 - 3 * 65536, 3]);
        assert_eq!((s.lines, s.tail.back().map(String::as_str)), (5, Some("end")));
    }

    /// `own_process_group` starts the child as the leader of a group of its own.
    #[test]
    fn own_process_group_makes_the_child_a_group_leader() {
        let mine = sh("ps -o pgid= -p $$").run().unwrap().stdout.trim().to_owned();
        let own = sh("echo $$; ps -o pgid= -p $$").own_process_group().run().unwrap().stdout;
        let (pid, pgid) = own.split_once('\n').unwrap();
        assert_eq!(pid.trim(), pgid.trim());
        assert_ne!(mine, pgid.trim());
    }

    #[test]
    fn display_quotes_what_a_shell_would_split() {
        assert_eq!(
            Cmd::new("nix").args(["eval", "a b", "", "it's"]).display(),
            r"nix eval 'a b' '' 'it'\''s'"
        );
    }

    /// A child of a thread that ends gets SIGTERM: the signal is armed (this is the caveat in
    /// the module doc, used here as the observable effect).
    #[test]
    #[cfg(target_os = "linux")]
    fn the_child_is_told_when_its_parent_goes() {
        let child = std::thread::spawn(|| {
            let mut cmd = std::process::Command::new("sleep");
            cmd.arg("30");
            dies_with_parent(&mut cmd);
            cmd.spawn().unwrap()
        })
        .join()
        .unwrap();
        let mut child = child;
        let started = std::time::Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(started.elapsed() < std::time::Duration::from_secs(10), "the child was not told");
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGTERM));
    }
}
