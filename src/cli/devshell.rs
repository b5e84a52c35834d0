//! `kernel-builder devshell DIR` and `testshell DIR`: run `$SHELL` (or the command after `--`)
//! in the environment [`crate::shell::prepare`] makes (a cell's toolchain on PATH; testshell:
//! the built variant importable), and exit with its status.

use std::process::ExitCode;

use anyhow::Context;
use camino::Utf8PathBuf;

use crate::shell::{prepare, ShellOptions};

/// Arguments of both shells.
///
/// Exit status: the command's (or the shell's) own; 1 when the toolchain or (testshell) the
/// variant is missing; 2 for a bad command line.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Kernel directory containing build.toml.
    pub dir: Utf8PathBuf,
    /// The Python environment whose torch the shell is for (e.g. `.venv/bin/python`); its bin
    /// directory goes first on PATH. Without it, a pinned cell's toolchain (`--variant`).
    #[arg(long, value_name = "PY")]
    pub python: Option<Utf8PathBuf>,
    /// Without --python: the pinned bundle cell whose toolchain the shell gets (a CPU or CUDA
    /// cell of a [torch] kernel, see `list-variants`); default: the CUDA cell of the newest
    /// torch, else its CPU cell. Downloaded into the toolchain cache once, as a native build does.
    /// With --python: which of the cells that Python's torch builds (default: the CUDA one),
    /// e.g. the CPU cell of a CUDA torch.
    #[arg(long, value_name = "VARIANT", value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub variant: Option<String>,
    /// Run this command (and its arguments) instead of an interactive `$SHELL`.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// `devshell`.
pub fn run_dev(args: Args) -> super::CmdResult {
    run(args, false)
}

/// `testshell`.
pub fn run_test(args: Args) -> super::CmdResult {
    run(args, true)
}

fn run(args: Args, test: bool) -> super::CmdResult {
    super::require_dir(&args.dir)?;
    let loaded = super::load_config(&args.dir)?;
    let opts = ShellOptions { dir: args.dir, python: args.python, variant: args.variant, test };
    let shell = prepare(&loaded, &opts, &super::report::Terminal)?;
    let (program, rest) = match args.command.split_first() {
        Some((p, rest)) => (p.clone(), rest.to_vec()),
        None => (crate::env::SHELL.non_empty().unwrap_or_else(|| "/bin/sh".into()), Vec::new()),
    };
    crate::printer::stderr!("{}", shell.summary);
    // Ctrl-C (and Ctrl-\) in the terminal reach the command itself; this process waits for it,
    // as a shell waits for its job, and so outlives it to remove the shell's temporary
    // directories. SIGTERM and SIGHUP (a CI's `timeout`, a closed terminal) are passed on to
    // the command, and the directories removed, by the interrupt handler. (The child starts
    // with the default dispositions: exec resets handled signals.)
    crate::interrupt::run_as_shell();
    let waiting = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGQUIT, waiting)
        .context("cannot install a signal handler")?;
    let status = shell
        .env
        .iter()
        .fold(crate::process::Cmd::new(&program).args(rest), |c, (k, v)| c.env(k, v))
        .status();
    let status = match status {
        Ok(s) => s,
        // As a shell says it: 127 for a command not found, 126 for one that cannot be run.
        Err(e @ crate::process::Error::Spawn { .. }) => {
            let missing = matches!(&e, crate::process::Error::Spawn { source, .. } if source.kind() == std::io::ErrorKind::NotFound);
            let code = if missing { 127 } else { 126 };
            super::report_error(&anyhow::Error::from(crate::error::Error::from(e)));
            return Ok(ExitCode::from(code));
        }
        Err(e) => return Err(e.into()),
    };
    drop(shell);
    Ok(match status.code() {
        Some(c) => ExitCode::from(u8::try_from(c).unwrap_or(1)),
        // Killed by a signal: exit as a shell reports it, 128 + signal.
        None => ExitCode::from(
            u8::try_from(128 + std::os::unix::process::ExitStatusExt::signal(&status).unwrap_or(0))
                .unwrap_or(1),
        ),
    })
}
