//! `kernel-builder clean-pyproject [DIR] [--out TARGET] [--dry-run]`: remove exactly what
//! `create-pyproject` wrote into TARGET, from any working directory.

use std::process::ExitCode;

use camino::Utf8PathBuf;

use crate::codegen::files;
use crate::printer::escape_controls;

/// Arguments of `clean-pyproject`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = "\
Reads TARGET/.kernel-builder-generated-v1 (written by `create-pyproject`) and removes the files \
it lists that still hold what was written, the directories it created once empty, and the \
list itself. A generated file edited since is left in place, with a note. Paths are resolved \
against TARGET, never the current directory.")]
pub struct Args {
    /// Kernel directory, holding build.toml (default: the current directory).
    pub dir: Option<Utf8PathBuf>,
    /// The directory the project was written into (default: DIR).
    #[arg(long, value_name = "TARGET")]
    pub out: Option<Utf8PathBuf>,
    /// Only list what would be removed.
    #[arg(short = 'n', long)]
    pub dry_run: bool,
}

/// Run `clean-pyproject`.
pub fn run(args: Args) -> super::CmdResult {
    let (_, target) = super::create_pyproject::dirs(args.dir, args.out)?;
    let Some(c) = files::clean_project(&target, args.dry_run)? else {
        println!("nothing to clean: `{target}` has no {}", files::MANIFEST);
        return Ok(ExitCode::SUCCESS);
    };
    let verb = if args.dry_run { "would remove" } else { "removed" };
    for f in c.removed.iter().chain(c.removed_dirs.iter()) {
        println!("{verb} {}", escape_controls(target.join(f).as_str()));
    }
    for f in &c.kept_changed {
        crate::printer::stderr!(
            "note: kept {}: it was changed since create-pyproject wrote it",
            escape_controls(target.join(f).as_str())
        );
    }
    for f in &c.missing {
        crate::printer::stderr!("note: {} was already removed", escape_controls(target.join(f).as_str()));
    }
    Ok(ExitCode::SUCCESS)
}
