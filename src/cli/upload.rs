//! `kernel-builder upload [DIR] [--repo-id ORG/NAME] [--branch B] [--create-pr] [--dry-run]
//! [--force] [--output-json FILE]`.

use std::process::ExitCode;

use camino::Utf8PathBuf;

use crate::hub::{self, UploadOptions};
use crate::printer::escape_controls;

/// Options shared by `upload` and `build-and-upload`.
#[derive(Debug, Clone, clap::Args)]
pub struct UploadFlags {
    /// Hub repository, `OWNER/NAME` (default: `[general.hub] repo-id` in build.toml).
    #[arg(long, value_name = "OWNER/NAME")]
    pub repo_id: Option<String>,
    /// Branch to commit to (default: `[general.hub] branch`, else `v<version>`).
    #[arg(long, value_name = "BRANCH")]
    pub branch: Option<String>,
    /// Open pull requests instead of committing (the repository and branch must exist).
    #[arg(long)]
    pub create_pr: bool,
    /// Print the planned operations; send nothing and need no token.
    #[arg(long)]
    pub dry_run: bool,
    /// Upload even when build/hashes.json is missing or does not match the tree.
    #[arg(long)]
    pub force: bool,
    /// Create the repository as private when it does not exist yet.
    #[arg(long)]
    pub private: bool,
    /// Also write the outcome as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub output_json: Option<Utf8PathBuf>,
    /// Print the outcome as JSON on stdout (the summary line goes to stderr); a failure prints
    /// the failure document (`"ok": false`) with the outcome's keys.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `upload`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = "\
Publishes DIR/build/<variant>/** (every variant directory, each with its metadata.json) and \
DIR/benchmarks/** to the version branch of a Hub kernel repository in one commit, and \
DIR/build/CARD.md (else DIR/CARD.md) to main as README.md. Files already on the branch with the same content are \
not sent again; files under build/<variant>/ of the uploaded variants that are no longer built \
are deleted. The endpoint is HF_ENDPOINT (default https://huggingface.co); the token is \
HF_TOKEN, else the file `hf auth login` writes ($HF_TOKEN_PATH, else $HF_HOME/token).")]
pub struct Args {
    /// Kernel directory, holding build/ and build.toml (default: the current directory).
    pub dir: Option<Utf8PathBuf>,
    #[command(flatten)]
    pub flags: UploadFlags,
}

/// Run `upload`.
pub fn run(args: Args) -> super::CmdResult {
    let dir = args.dir.unwrap_or_else(|| Utf8PathBuf::from("."));
    let build_toml = crate::kernel::load(&dir).map(|k| k.config).map_err(|e| e.render());
    run_upload(dir, build_toml, &args.flags)
}

/// The Hub token, or (unless `--dry-run`) the error that there is none: checked before
/// anything is built, hashed or announced. Silent: the upload that follows looks again and
/// says what it finds.
pub fn require_token(flags: &UploadFlags) -> anyhow::Result<()> {
    hub::publish::require_token(flags.dry_run, &crate::report::Silent)?;
    // The answer timeout too: a bad one had failed the upload only after the build and the
    // hashing (a user's trial).
    hub::client::Timeouts::from_env().map(drop)
}

/// [`hub::UploadOptions`] of `flags` for the kernel in `dir`.
pub fn upload_options(
    dir: Utf8PathBuf,
    build_toml: Result<crate::config::BuildConfig, String>,
    flags: &UploadFlags,
) -> UploadOptions {
    UploadOptions {
        dir,
        repo_id: flags.repo_id.clone(),
        branch: flags.branch.clone(),
        create_pr: flags.create_pr,
        dry_run: flags.dry_run,
        force: flags.force,
        private: flags.private,
        progress: !flags.json,
        build_toml,
    }
}

/// Publish ([`hub::publish`]) and render the outcome: the part `build-and-upload` shares.
/// `build_toml`: the kernel's build.toml as the command loaded it, else its rendered problems.
pub fn run_upload(
    dir: Utf8PathBuf,
    build_toml: Result<crate::config::BuildConfig, String>,
    flags: &UploadFlags,
) -> super::CmdResult {
    hub::client::Timeouts::from_env()?;
    let opts = hub::PublishOptions {
        upload: upload_options(dir, build_toml, flags),
        output_json: flags.output_json.clone(),
    };
    let outcome = hub::publish(&opts, &super::report::Terminal)?;
    if flags.dry_run {
        for line in &outcome.plan {
            let line = escape_controls(line);
            if flags.json {
                crate::printer::stderr!("{line}");
            } else {
                println!("{line}");
            }
        }
    }
    // The summary quotes the server's commit and pull request URLs.
    let summary = hub::upload::summary(&outcome);
    let summary = escape_controls(&summary);
    if flags.json {
        print!("{}", outcome.to_json());
        crate::printer::stderr!("{summary}");
    } else if outcome.status == hub::Status::NoChanges {
        crate::printer::stderr!("{summary}");
    } else {
        println!("{summary}");
    }
    Ok(ExitCode::SUCCESS)
}
