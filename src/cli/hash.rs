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
    /// Print `[{"path", "hash", "error"}]` as JSON on stdout (`hash` or `error` is null).
    #[arg(long)]
    pub json: bool,
}

/// Hash each path and print its SRI hash, in order. A path that cannot be hashed is reported
/// on stderr (`error: cannot hash …` and its cause) and the others are still hashed; the exit status is then
/// 1, at the end.
///
/// # Errors
/// Standard output cannot be written.
pub fn run(args: Args) -> super::CmdResult {
    let stdout = std::io::stdout();
    let mut failed = 0usize;
    if args.json {
        let doc: Vec<serde_json::Value> = args
            .paths
            .iter()
            .map(|p| match crate::hash::nar_hash_sri(p) {
                Ok(h) => serde_json::json!({"path": p.display().to_string(), "hash": h, "error": null}),
                Err(e) => {
                    failed += 1;
                    serde_json::json!({"path": p.display().to_string(), "hash": null, "error": e.to_string()})
                }
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(if failed > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS });
    }
    for path in &args.paths {
        let sri = match crate::hash::nar_hash_sri(path) {
            Ok(s) => s,
            Err(e) => {
                crate::printer::stderr!("error: cannot hash `{}`\n  caused by: {e}", path.display());
                failed += 1;
                continue;
            }
        };
        let mut out = stdout.lock();
        if let Err(err) = writeln!(out, "{sri}").and_then(|()| out.flush()) {
            // A closed pipe (`kernel-builder hash … | head -1`) is not a failure.
            if err.kind() == std::io::ErrorKind::BrokenPipe {
                return Ok(ExitCode::SUCCESS);
            }
            return Err(err).context("cannot write to standard output");
        }
    }
    if failed > 0 {
        crate::printer::stderr!("error: {failed} of {} paths could not be hashed", args.paths.len());
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
