//! `kernel-builder hash PATH…`: the NAR hash of each path, printed as `nix hash path` prints it.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

/// Arguments of `kernel-builder hash`; the help text is in `after_long_help`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = "Prints the NAR hash of each PATH in SRI form (`sha256-…`), one line per \
path, in order: the same value `nix hash path PATH` prints.\n\n\
Symlinks are recorded, not followed (PATH itself included); a file counts as executable when \
its owner-execute bit is set; times, owners and other mode bits do not count.")]
pub struct Args {
    /// Files, directories or symlinks to hash.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

/// Hash each path and print its SRI hash; stops at the first path that cannot be hashed.
///
/// # Errors
/// A path that cannot be read, or that holds a socket, FIFO or device node; the error names it.
pub fn run(args: Args) -> super::CmdResult {
    let stdout = std::io::stdout();
    for path in &args.paths {
        let sri =
            crate::hash::nar_hash_sri(path).with_context(|| format!("cannot hash `{}`", path.display()))?;
        let mut out = stdout.lock();
        if let Err(err) = writeln!(out, "{sri}").and_then(|()| out.flush()) {
            // A closed pipe (`kernel-builder hash … | head -1`) is not a failure.
            if err.kind() == std::io::ErrorKind::BrokenPipe {
                return Ok(ExitCode::SUCCESS);
            }
            return Err(err).context("cannot write to standard output");
        }
    }
    Ok(ExitCode::SUCCESS)
}
