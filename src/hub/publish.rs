//! The `upload` operation, start to end: it resolves its own inputs (the token, the endpoint),
//! checks everything local ([`super::prepare`]), publishes ([`super::upload()`]) and writes the
//! outcome file, saying what it does through a [`Reporter`]. `upload` and `build-and-upload`
//! build [`PublishOptions`], call [`publish`] and render the [`Outcome`] (text or `--json`).
//!
//! The order is the user's: a directory that is not there is the plainest mistake; then the
//! token and the endpoint, without which nothing is hashed or announced; then `--output-json`,
//! which must be writable before anything is committed.

use camino::Utf8PathBuf;

use super::upload::{self, Failed, Outcome, UploadOptions};
use super::{auth, client::HubError};
use crate::report::Reporter;

/// What [`publish`] is asked to do.
#[derive(Debug, Clone)]
pub struct PublishOptions {
    /// What to upload, and where.
    pub upload: UploadOptions,
    /// Also write the outcome as JSON here (`--output-json`), when the upload fails too.
    pub output_json: Option<Utf8PathBuf>,
}

/// The Hub token, or (unless `dry_run`) the error that there is none. `build-and-upload` asks
/// before it builds anything. A dry run needs none: a token file it cannot read is a warning
/// to `report`, and it reads the Hub anonymously.
///
/// Errors: no token and not `dry_run`; a token file that cannot be read, unless `dry_run`.
pub fn require_token(dry_run: bool, report: &dyn Reporter) -> anyhow::Result<Option<auth::Token>> {
    let token = match auth::find_token() {
        Ok(found) => found.map(|(t, _)| t),
        Err(e) if dry_run => {
            report.warning(&format!("{e:#}; the dry run reads the Hub without a token"));
            None
        }
        Err(e) => return Err(e),
    };
    if !dry_run && token.is_none() {
        return Err(upload::no_token().into());
    }
    Ok(token)
}

/// Publish `opts.upload.dir`'s build to the Hub (see the module doc for the order of checks);
/// the warnings, the `Uploading …` line and the notes go to `report`.
///
/// Errors: any local refusal ([`super::prepare`]), no token, a bad endpoint, an `--output-json`
/// that cannot be written; a failed upload is an [`UploadFailed`], carrying what landed.
pub fn publish(opts: &PublishOptions, report: &dyn Reporter) -> anyhow::Result<Outcome> {
    let up = &opts.upload;
    upload::require_kernel_dir(&up.dir)?;
    let token = require_token(up.dry_run, report)?;
    let endpoint = auth::checked_endpoint()?;
    let prepared = super::prepare(up, report)?;
    for w in &prepared.warnings {
        report.warning(w);
    }
    report.status(&format!(
        "Uploading {} variant(s) to {} branch `{}` at {}",
        prepared.variants.len(),
        prepared.repo_id,
        prepared.branch,
        auth::redact_userinfo(&endpoint)
    ));
    if let Some(path) = &opts.output_json {
        check_writable(path)?;
    }
    match super::upload(&prepared, up, &endpoint, token, report) {
        Ok(outcome) => {
            for n in &outcome.notes {
                report.note(n);
            }
            if let Some(path) = &opts.output_json {
                crate::fsutil::write_atomic(path, outcome.to_json().as_bytes())?;
            }
            Ok(outcome)
        }
        Err(failed) => {
            let Failed { outcome, error } = *failed;
            for n in &outcome.notes {
                report.note(n);
            }
            if let Some(path) = &opts.output_json {
                if let Err(e) = crate::fsutil::write_atomic(path, outcome.to_json().as_bytes()) {
                    report.warning(&format!("{e:#}"));
                }
            }
            report.status(&upload::summary(&outcome));
            Err(crate::error::Error::from(UploadFailed { outcome, error }).into())
        }
    }
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

/// A failed upload: [`crate::error::Kind::Hub`], its message and causes the upload's error's,
/// with what to do when the Hub refused the token or did not answer ([`HubError`] in the
/// chain), and the outcome so far (what landed, what was planned) as `--json` fields.
#[derive(Debug)]
pub struct UploadFailed {
    /// The outcome so far (`status` `failed` or `partly_uploaded`).
    pub outcome: Outcome,
    error: anyhow::Error,
}

// The upload's error as it is: its message here, its causes as the chain below.
impl std::fmt::Display for UploadFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.error, f)
    }
}

impl std::error::Error for UploadFailed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.source()
    }
}

impl crate::error::Diagnostic for UploadFailed {
    fn kind(&self) -> crate::error::Kind {
        crate::error::Kind::Hub
    }

    fn hints(&self) -> Vec<String> {
        let mut hints: Vec<String> = Vec::new();
        for e in self.error.chain().filter_map(|c| c.downcast_ref::<HubError>()) {
            // (hint, the words that show the message already says it)
            let (hint, said) = match e.status {
                Some(401) => (
                    "the Hub does not accept the token: log in again (`hf auth login`) or set HF_TOKEN",
                    "hf auth login",
                ),
                None => ("no answer from the Hub: check HF_ENDPOINT and the network", "check HF_ENDPOINT"),
                Some(_) => continue,
            };
            if !hints.iter().any(|h| h == hint) && !self.error.chain().any(|c| c.to_string().contains(said)) {
                hints.push(hint.to_owned());
            }
        }
        hints
    }

    fn fields(&self) -> serde_json::Map<String, serde_json::Value> {
        crate::error::fields_of(&self.outcome)
    }
}
