//! `kernel-builder fill-card [DIR]`: write the kernel card `upload` publishes as the Hub repo's
//! README.md (`DIR/build/CARD.md`) from the kernel's own `CARD.md`, build.toml and the variants
//! built in `DIR/build/` ([`crate::tune::card::filled_card`]).

use std::process::ExitCode;

use camino::Utf8PathBuf;

use crate::tune::card;

/// Arguments.
///
/// Exit status: 0 when the card was written (or, with `--check`, is up to date), 1 when
/// `--check` finds it stale or missing (or build.toml, build/ or a metadata.json is bad), 2 for
/// a bad command line.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Kernel directory containing build.toml and build/ (default: the current directory).
    pub dir: Option<Utf8PathBuf>,
    /// Write nothing; exit 1 when DIR/build/CARD.md is missing or differs from what would be
    /// written (e.g. in CI after a build).
    #[arg(long)]
    pub check: bool,
}

/// The most bytes of an existing card read to compare it (a card is a few kilobytes).
const MAX_CARD_BYTES: u64 = 16 << 20;

pub fn run(args: Args) -> super::CmdResult {
    let dir = super::kernel_dir_arg(args.dir)?;
    let loaded = super::load_config(&dir)?;
    let text = card::filled_card(&dir, &loaded.config)?;
    let path = card::filled_card_path(&dir);
    // Read and written through the kernel directory's own `build/`, never through a link (a
    // `build` that is a symbolic link is refused, naming it).
    let root = crate::fsutil::Anchored::open(&dir)?;
    let rel = path.strip_prefix(&dir).unwrap_or(&path);
    let current = root
        .read(rel, MAX_CARD_BYTES, "a kernel card")?
        .map(|(bytes, _)| String::from_utf8_lossy(&bytes).into_owned());
    if args.check {
        return Ok(match current {
            Some(c) if c == text => {
                println!("`{path}` is up to date");
                ExitCode::SUCCESS
            }
            Some(_) => {
                crate::printer::problem!("`{path}` is stale: run `kernel-builder fill-card {dir}`");
                ExitCode::from(1)
            }
            None => {
                crate::printer::problem!("`{path}` does not exist: run `kernel-builder fill-card {dir}`");
                ExitCode::from(1)
            }
        });
    }
    if current.as_deref() == Some(text.as_str()) {
        println!("`{path}` is up to date");
    } else {
        root.write_atomic(rel, text.as_bytes())?;
        println!("wrote `{path}` (upload publishes it as README.md)");
    }
    Ok(ExitCode::SUCCESS)
}
