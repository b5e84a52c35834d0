//! `kernel-builder upload [DIR] [--repo-id ORG/NAME] [--branch B] [--create-pr] [--dry-run]
//! [--force] [--output-json FILE]`.

use std::process::ExitCode;

use camino::Utf8PathBuf;

use crate::hub::{self, auth, UploadOptions};
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

/// Fail unless a file can be written at `path`: its directory exists and takes a new file
/// (one is created and removed), and `path` itself is not a directory.
fn check_writable(path: &camino::Utf8Path) -> anyhow::Result<()> {
    use anyhow::Context;
    anyhow::ensure!(!path.is_dir(), "--output-json `{path}` is a directory; name a file");
    let dir = path.parent().filter(|p| !p.as_str().is_empty()).unwrap_or(camino::Utf8Path::new("."));
    tempfile::Builder::new().prefix(".kernel-builder-").tempfile_in(dir).map(drop).with_context(|| {
        format!("--output-json `{path}` cannot be written (checked before uploading anything)")
    })
}

/// The Hub token, or (unless `--dry-run`) the error that there is none: checked before
/// anything is built, hashed or announced.
pub fn require_token(flags: &UploadFlags) -> anyhow::Result<Option<crate::hub::auth::Token>> {
    let token = auth::find_token()?.map(|(t, _)| t);
    if !flags.dry_run && token.is_none() {
        return Err(hub::upload::no_token().into());
    }
    Ok(token)
}

/// Prepare, upload, print and write the JSON outcome (also when the upload fails: then with
/// the commits that landed and the error): the part `build-and-upload` shares. `build_toml`:
/// the kernel's build.toml as the command loaded it, else its rendered problems.
pub fn run_upload(
    dir: Utf8PathBuf,
    build_toml: Result<crate::config::BuildConfig, String>,
    flags: &UploadFlags,
) -> super::CmdResult {
    let opts = UploadOptions {
        dir,
        repo_id: flags.repo_id.clone(),
        branch: flags.branch.clone(),
        create_pr: flags.create_pr,
        dry_run: flags.dry_run,
        force: flags.force,
        private: flags.private,
        progress: !flags.json,
        build_toml,
    };
    // A directory that is not there is the plainest mistake; then the token and the endpoint:
    // without them nothing is hashed or announced.
    hub::upload::require_kernel_dir(&opts.dir)?;
    let token = require_token(flags)?;
    let endpoint = auth::checked_endpoint()?;
    let prepared = hub::prepare(&opts)?;
    for w in &prepared.warnings {
        crate::printer::stderr!("warning: {}", escape_controls(w));
    }
    crate::printer::stderr!(
        "Uploading {} variant(s) to {} branch `{}` at {endpoint}",
        prepared.variants.len(),
        prepared.repo_id,
        prepared.branch,
        endpoint = auth::redact_userinfo(&endpoint)
    );
    // A bad `--output-json` path fails now, before anything is committed.
    if let Some(path) = &flags.output_json {
        check_writable(path)?;
    }
    let outcome = match hub::upload(&prepared, &opts, &endpoint, token) {
        Ok(o) => o,
        Err(failed) => {
            let hub::upload::Failed { outcome, error } = *failed;
            for n in &outcome.notes {
                crate::printer::stderr!("note: {}", escape_controls(n));
            }
            if let Some(path) = &flags.output_json {
                if let Err(e) = crate::fsutil::write_atomic(path, outcome.to_json().as_bytes()) {
                    crate::printer::stderr!("warning: {e:#}");
                }
            }
            crate::printer::stderr!("{}", escape_controls(&hub::upload::summary(&outcome)));
            // With --json the outcome's keys (what landed, what was planned) join the failure
            // document `super::json` prints.
            return Err(crate::cli::json::WithDetail::wrap(
                crate::error::Error::from(HubFailure(error)).into(),
                serde_json::to_value(&outcome).unwrap_or_default(),
            ));
        }
    };
    for n in &outcome.notes {
        crate::printer::stderr!("note: {}", escape_controls(n));
    }
    if opts.dry_run {
        for line in &outcome.plan {
            let line = escape_controls(line);
            if flags.json {
                crate::printer::stderr!("{line}");
            } else {
                println!("{line}");
            }
        }
    }
    if let Some(path) = &flags.output_json {
        crate::fsutil::write_atomic(path, outcome.to_json().as_bytes())?;
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

/// A failed upload: [`crate::error::Kind::Hub`], with what to do when the Hub refused the
/// token or did not answer ([`crate::hub::client::HubError`] in the chain). Its message and
/// causes are the upload's error's.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
struct HubFailure(anyhow::Error);

impl crate::error::Diagnostic for HubFailure {
    fn kind(&self) -> crate::error::Kind {
        crate::error::Kind::Hub
    }

    fn hints(&self) -> Vec<String> {
        let mut hints: Vec<String> = Vec::new();
        for e in self.0.chain().filter_map(|c| c.downcast_ref::<crate::hub::client::HubError>()) {
            // (hint, the words that show the message already says it)
            let (hint, said) = match e.status {
                Some(401) => (
                    "the Hub does not accept the token: log in again (`hf auth login`) or set HF_TOKEN",
                    "hf auth login",
                ),
                None => ("no answer from the Hub: check HF_ENDPOINT and the network", "check HF_ENDPOINT"),
                Some(_) => continue,
            };
            if !hints.iter().any(|h| h == hint) && !self.0.chain().any(|c| c.to_string().contains(said)) {
                hints.push(hint.to_owned());
            }
        }
        hints
    }
}
