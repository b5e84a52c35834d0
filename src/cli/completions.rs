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
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, BIN, &mut script);
    let mut script = String::from_utf8_lossy(&script).into_owned();
    if matches!(shell, Shell::Bash) {
        script = fix_bash_labels(&script);
    }
    std::io::Write::write_all(&mut std::io::stdout().lock(), script.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// The program's name.
const BIN: &str = "kernel-builder";

/// clap_complete 4.6's bash script, for a program whose name has a `-`, sets `cmd` to
/// `kernel__builder__subcmd__<sub>` while walking the words but labels the cases that complete
/// a subcommand `kernel__subcmd__builder__subcmd__<sub>`, so nothing after a subcommand was
/// completed. The labels are renamed to what the walk sets.
fn fix_bash_labels(script: &str) -> String {
    let wrong = format!("{}__subcmd__", BIN.replace('-', "__subcmd__"));
    let right = format!("{}__subcmd__", BIN.replace('-', "__"));
    script.replace(&wrong, &right)
}
