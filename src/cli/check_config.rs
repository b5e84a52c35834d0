//! Placeholder until the command lands.

use camino::Utf8PathBuf;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Kernel directory (default: the current directory).
    pub dir: Option<Utf8PathBuf>,
}

/// Run the command.
pub fn run(_args: Args) -> super::CmdResult {
    anyhow::bail!("not implemented yet")
}
