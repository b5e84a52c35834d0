//! `completions`: the shell completion script, generated from the same clap definitions that
//! parse the command line (clap_complete), so it can never name a command or flag that is gone.

use std::process::ExitCode;

use clap::CommandFactory;
use clap_complete::Shell;

use super::{Cli, CmdResult};

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Install, e.g.:
  bash: kernel-builder completions bash > ~/.local/share/bash-completion/completions/kernel-builder
  zsh:  kernel-builder completions zsh > ~/.zfunc/_kernel-builder   (with fpath+=~/.zfunc before compinit)
  fish: kernel-builder completions fish > ~/.config/fish/completions/kernel-builder.fish")]
pub struct Args {
    /// The shell to write the completion script for.
    #[arg(value_enum)]
    pub shell: CompletionShell,
}

/// The shells a script is written for (those upstream's builder supports).
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

pub fn run(args: Args) -> CmdResult {
    let shell = match args.shell {
        CompletionShell::Bash => Shell::Bash,
        CompletionShell::Zsh => Shell::Zsh,
        CompletionShell::Fish => Shell::Fish,
    };
    let mut cmd = Cli::command();
    clap_complete::generate(shell, &mut cmd, "kernel-builder", &mut std::io::stdout().lock());
    Ok(ExitCode::SUCCESS)
}
