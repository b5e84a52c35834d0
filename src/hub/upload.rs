//! Publishing a built bundle (`DIR/build/<variant>/…`) to a Hub kernel repository.
//!
//! [`prepare`] does every local check before anything is sent; [`upload`] then talks to the
//! Hub:
//!
//! 1. create the repository (type `kernel`) when missing, unless a pull request is asked for;
//! 2. create the version branch from `main`'s head when missing;
//! 3. list the branch's files and [`super::plan::diff`] them with the local files;
//! 4. ask preupload about the files to send (its `uploadMode` may move a file to LFS, its
//!    `oid` may show the content is already there);
//! 5. upload LFS content (binary, larger than 10 MiB, or as preupload says) through the LFS
//!    batch API, basic transfer; objects the server already has are not sent;
//! 6. one commit to the branch, with the branch head seen in step 2 as `parentCommit`: small
//!    text files inline (`file`), LFS files by id (`lfsFile`), stale files (`deletedFile`);
//! 7. `CARD.md` (`DIR/build/CARD.md`, else `DIR/CARD.md`) to `main` as `README.md`, in its own
//!    commit, when it differs.
//!
//! The commits are the only changes to the repository's history after step 2, and LFS
//! uploads are content-addressed, so a failure before a commit leaves every branch as it was.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};
use serde::Serialize;

use super::auth::Token;
use super::client::{CommitOp, HubClient, PreuploadQuery, TreeEntry};
use super::plan::{self, Action, Change, LocalFile};
use crate::hash::digest::{self, Digest};
use crate::hash::manifest::{self, Manifest};
use crate::report::Reporter;

/// What the user asked for.
#[derive(Debug, Clone)]
pub struct UploadOptions {
    /// The kernel directory (holding `build/` and, usually, `build.toml`).
    pub dir: Utf8PathBuf,
    /// `--repo-id`: overrides `[general.hub] repo-id`.
    pub repo_id: Option<String>,
    /// `--branch`: overrides `[general.hub] branch` and `v<version>`.
    pub branch: Option<String>,
    /// Open pull requests instead of committing to the branches.
    pub create_pr: bool,
    /// Plan only: print the operations, send nothing, need no token.
    pub dry_run: bool,
    /// Upload even when `build/hashes.json` is missing or does not match the tree.
    pub force: bool,
    /// Create the repository as private when it does not exist.
    pub private: bool,
    /// Draw a byte bar of what is sent on stderr (only when it is a terminal).
    pub progress: bool,
    /// The kernel's `build.toml` as the caller loaded it ([`crate::config::BuildConfig`]),
    /// else its problems, rendered: it names the repository and branch when the flags do not,
    /// and its source set is held against the manifest.
    pub build_toml: Result<crate::config::BuildConfig, String>,
}

/// Everything checked locally: where to upload and what.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub repo_id: String,
    pub branch: String,
    /// Variant directory names, sorted.
    pub variants: Vec<String>,
    /// Files for the version branch: `build/<variant>/…` and `benchmarks/…`, sorted.
    pub files: Vec<LocalFile>,
    /// `build/CARD.md` (else the kernel's `CARD.md`), published as `README.md` on `main`.
    pub card: Option<LocalFile>,
    /// Warnings to show (manifest problems under `--force`, dirty builds).
    pub warnings: Vec<String>,
    /// The rendered card `card` points at, when it is one (removed when the last clone drops).
    pub card_tmp: Option<std::sync::Arc<CardFile>>,
}

/// The temporary file of a rendered card ([`crate::tune::card::rendered_card_file`]): removed
/// when dropped, and also when the upload is interrupted (SIGINT, SIGTERM, SIGHUP), which then
/// exits with `128 + signal` ([`crate::interrupt`]).
#[derive(Debug)]
pub struct CardFile {
    /// The file (in `$TMPDIR`, `kernel-builder-card-*.md`).
    pub path: tempfile::TempPath,
    _interrupt: crate::interrupt::Registered,
}

impl CardFile {
    /// Take over `path`, registering it for removal on interruption.
    ///
    /// # Errors
    /// The path is not UTF-8.
    pub fn new(path: tempfile::TempPath) -> anyhow::Result<CardFile> {
        let p = Utf8Path::from_path(&path).context("the rendered card's temporary path is not UTF-8")?;
        let _interrupt = crate::interrupt::remove_on_interrupt(p, crate::interrupt::Removal::All);
        Ok(CardFile { path, _interrupt })
    }
}

/// How an upload ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Committed to the branches.
    Uploaded,
    /// Pull requests opened.
    PullRequestCreated,
    /// The remote already had everything: no commit.
    NoChanges,
    /// `--dry-run`: nothing sent.
    DryRun,
    /// The upload failed before any commit landed: the repository's branches are unchanged
    /// (a repository or branch may have been created; see `notes`).
    Failed,
    /// The upload failed after some commits landed (listed in `commits`), e.g. the version
    /// branch committed and then the card's commit to `main` failed.
    PartlyUploaded,
}

/// One commit that landed (or pull request opened).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommitRecord {
    /// The branch committed to (or that the pull request targets).
    pub branch: String,
    /// The commit's id, as the Hub answered it.
    pub commit: String,
    /// The commit's (or pull request's) URL.
    pub url: String,
}

/// One pull request opened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PullRequest {
    /// The branch it targets.
    pub branch: String,
    pub url: String,
}

/// How many files each action touched, over both commits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct FileCounts {
    pub added: usize,
    pub updated: usize,
    pub unchanged: usize,
    pub deleted: usize,
}

/// The result, also the `--output-json` document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Outcome {
    pub status: Status,
    pub repo_id: String,
    pub branch: String,
    /// `<endpoint>/kernels/<repo>/tree/<branch>`; `null` for pull requests and dry runs.
    pub url: Option<String>,
    pub pull_requests: Vec<PullRequest>,
    /// File content bytes sent: inline file contents (before base64) plus LFS uploads.
    pub bytes_sent: u64,
    /// The files of the planned commits (of a failed upload: of those planned so far, landed
    /// or not; `commits` says which landed).
    pub files: FileCounts,
    /// Every commit that landed, in order (also on failure: what is on the Hub now).
    pub commits: Vec<CommitRecord>,
    /// Why the upload failed (`status` `failed` or `partly_uploaded`), with its causes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The operations, one line each (`add build/x/a.py (12 bytes)`), in order; not in JSON.
    #[serde(skip)]
    pub plan: Vec<String>,
    /// Notes for the user (branch created, remote unreachable in a dry run, …); not in JSON.
    #[serde(skip)]
    pub notes: Vec<String>,
}

impl Outcome {
    /// The outcome of an upload refused before contacting the Hub.
    fn not_started(prepared: &Prepared, error: &anyhow::Error) -> Outcome {
        Outcome {
            status: Status::Failed,
            repo_id: prepared.repo_id.clone(),
            branch: prepared.branch.clone(),
            url: None,
            pull_requests: Vec::new(),
            bytes_sent: 0,
            files: FileCounts::default(),
            commits: Vec::new(),
            error: Some(format!("{error:#}")),
            plan: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// The `--output-json` text: pretty JSON and a trailing newline.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }
}

/// Check that `id` is `owner/name` by the Hub's rules ([`crate::config::validate::repo_id_problem`]).
fn check_repo_id(id: &str) -> anyhow::Result<()> {
    match crate::config::validate::repo_id_problem(id) {
        None => Ok(()),
        Some(why) if why.contains("of the form") => {
            anyhow::bail!(
                "repository id `{}` is not of the form `owner/name`",
                crate::printer::escape_controls(id)
            )
        }
        Some(why) => anyhow::bail!(
            "repository id `{}` is not a Hub repository id: {why}",
            crate::printer::escape_controls(id)
        ),
    }
}

/// The variant directories of `build_dir`: every subdirectory whose name does not start with
/// `.` (a `.kernel-builder-tmp-*` left by an interrupted build is not a variant). Sorted.
///
/// # Errors
/// `build_dir` is missing or unreadable, holds no variant, or a variant has no
/// `metadata.json`.
pub fn find_variants(build_dir: &Utf8Path) -> anyhow::Result<Vec<String>> {
    let entries = std::fs::read_dir(build_dir).with_context(|| {
        format!("cannot read `{build_dir}`; build the kernel first (`kernel-builder build-and-copy`)")
    })?;
    let mut variants = Vec::new();
    for e in entries {
        let e = e.with_context(|| format!("cannot read `{build_dir}`"))?;
        let name = e.file_name();
        let Some(name) = name.to_str() else {
            anyhow::bail!("`{build_dir}` holds a directory whose name is not UTF-8: {:?}", e.file_name());
        };
        if name.starts_with('.') || !e.path().is_dir() {
            continue;
        }
        variants.push(name.to_owned());
    }
    variants.sort();
    anyhow::ensure!(
        !variants.is_empty(),
        "`{build_dir}` holds no variant directory; build the kernel first (`kernel-builder build-and-copy`)"
    );
    let missing: Vec<&String> =
        variants.iter().filter(|v| !build_dir.join(v).join("metadata.json").is_file()).collect();
    if !missing.is_empty() {
        anyhow::bail!(
            "variant director{} {} in `{build_dir}` ha{} no metadata.json, so it is not a build variant; \
             rebuild it (`kernel-builder build-and-copy`) or remove it",
            if missing.len() == 1 { "y" } else { "ies" },
            missing.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", "),
            if missing.len() == 1 { "s" } else { "ve" },
        );
    }
    Ok(variants)
}

/// The fields of a variant's `metadata.json` that the upload reads.
struct VariantMeta {
    version: Option<u64>,
    dirty: bool,
}

/// Read `metadata.json` of one variant and check its digest against the files.
fn check_variant(
    build_dir: &Utf8Path,
    name: &str,
    force: bool,
    warnings: &mut Vec<String>,
) -> anyhow::Result<VariantMeta> {
    let dir = build_dir.join(name);
    let path = dir.join("metadata.json");
    let text = crate::fsutil::read_to_string_bounded(&path, 16 << 20, "a variant's metadata.json")?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("`{path}` is not valid JSON; rebuild variant `{name}`"))?;
    let version = value.get("version").and_then(|v| v.as_u64());
    let dirty = value.pointer("/provenance/kernel/dirty").and_then(|d| d.as_bool()).unwrap_or(false);
    // A quick check's variant lacks code for capabilities the loader would send it to; no
    // --force makes it publishable.
    if let Some(only) = value.pointer("/build/capabilities-only").and_then(|c| c.as_array()) {
        let only: Vec<&str> = only.iter().filter_map(|c| c.as_str()).collect();
        anyhow::bail!(
            "variant `{name}` was compiled for CUDA capabilit{} {} only (`build.capabilities-only` in `{path}`:              --cuda-capabilities / KERNEL_BUILDER_CUDA_CAPABILITIES), not for every capability the kernel publishes,              so the loader would pick it on devices it has no code for; rebuild it without that option before uploading",
            if only.len() == 1 { "y" } else { "ies" },
            only.join(", ")
        );
    }
    match value.get("digest") {
        Some(d) => {
            let reference: Digest = serde_json::from_value(d.clone())
                .with_context(|| format!("`{path}` has a malformed `digest`"))?;
            let actual = digest::variant_digest_with(reference.algorithm, &dir)?;
            if let Err(problems) = digest::check(&reference, &actual) {
                anyhow::bail!(
                    "variant `{name}`: its files do not match the digest in `{path}` (the `kernels` \
                     loader would refuse it); rebuild it:\n  {}",
                    problems.join("\n  ")
                );
            }
        }
        None if force => warnings.push(format!("`{path}` has no `digest`; uploading anyway (--force)")),
        None => anyhow::bail!(
            "`{path}` has no `digest`, so the loader cannot check the files; rebuild variant \
             `{name}`, or pass --force"
        ),
    }
    // A zip-layout variant: its archive is what the loader imports (no --force makes a broken
    // one loadable).
    crate::assemble::build_layout::check_built_variant(&dir, &value)
        .map_err(|why| anyhow::anyhow!("variant `{name}`: {why}"))?;
    Ok(VariantMeta { version, dirty })
}

/// Check `build/hashes.json` against the variants on disk, and, when the kernel's sources can
/// be read (`current_source`: the git tree id of the source set now), that `build/` was built
/// from these sources and not from an earlier state of them.
fn check_manifest(
    build_dir: &Utf8Path,
    variants: &[String],
    current_source: Option<&str>,
    force: bool,
    warnings: &mut Vec<String>,
) -> anyhow::Result<()> {
    let path = Manifest::path_in(build_dir);
    let problems: Vec<String> = if !path.is_file() {
        vec![format!("`{path}` is missing")]
    } else {
        let recorded = Manifest::read(&path)?;
        let actual = Manifest::for_bundle(build_dir, variants, &recorded.source)?;
        let mut p: Vec<String> =
            manifest::compare(&recorded, &actual).iter().map(|d| d.to_string()).collect();
        if let Some(now) = current_source.filter(|now| *now != recorded.source) {
            p.push(format!(
                "`build/` was built from other sources (source `{}`), not the kernel's current ones \
                 (source `{now}`): the sources changed since the last build",
                recorded.source
            ));
        }
        p
    };
    if problems.is_empty() {
        return Ok(());
    }
    if force {
        for p in problems {
            warnings.push(format!("hash manifest: {p}; uploading anyway (--force)"));
        }
        return Ok(());
    }
    anyhow::bail!(
        "the tree in `{build_dir}` does not match its hash manifest `{path}`:\n  {}\n\
         rebuild it (`kernel-builder build-and-copy`; delete `build/<variant>` for a variant that is \
         no longer built), or pass --force to upload it as it is",
        problems.join("\n  ")
    )
}

/// The kernel directory an upload reads must exist: the first check, before the token.
pub fn require_kernel_dir(dir: &Utf8Path) -> anyhow::Result<()> {
    anyhow::ensure!(dir.is_dir(), "`{dir}` is not a directory");
    Ok(())
}

/// The repository `opts` uploads to: `--repo-id`, else `[general.hub] repo-id`, checked.
/// `build-and-upload` asks before it builds anything.
///
/// Errors: neither is given (or build.toml cannot be read), or the id is malformed.
pub fn repo_id(opts: &UploadOptions) -> anyhow::Result<String> {
    let dir = &opts.dir;
    let loaded = &opts.build_toml;
    let hub = loaded.as_ref().ok().map(|c| c.general.hub.clone());
    let repo_id = match (&opts.repo_id, hub.as_ref().and_then(|h| h.repo_id.clone())) {
        (Some(r), _) => r.clone(),
        (None, Some(r)) => r,
        (None, None) => match loaded {
            Ok(_) => anyhow::bail!(
                "no repository to upload to: `{}` has no `[general.hub] repo-id`; add it, or pass \
                 --repo-id OWNER/NAME",
                dir.join("build.toml")
            ),
            Err(e) => anyhow::bail!(
                "no repository to upload to: --repo-id was not given and `{}` cannot be read:\n{}",
                dir.join("build.toml"),
                e
            ),
        },
    };
    check_repo_id(&repo_id)?;
    Ok(repo_id)
}

/// Every local check of an upload, in this order: the variants (each with `metadata.json`),
/// the repository id and branch, each variant's digest, the hash manifest; then the files
/// are read and hashed. Nothing is sent.
///
/// # Errors
/// Any refusal: no variants, a variant without `metadata.json`, no repository id (neither
/// `--repo-id` nor `[general.hub] repo-id`), a malformed id, variants of different versions
/// without a branch given, a digest mismatch, a manifest mismatch (unless `force`).
pub fn prepare(opts: &UploadOptions, report: &dyn Reporter) -> anyhow::Result<Prepared> {
    let dir = &opts.dir;
    require_kernel_dir(dir)?;
    let build_dir = dir.join("build");
    let variants = find_variants(&build_dir)?;
    let mut warnings = Vec::new();

    // Repository and branch: flags first, then build.toml.
    let loaded = &opts.build_toml;
    let hub = loaded.as_ref().ok().map(|c| c.general.hub.clone());
    let repo_id = repo_id(opts)?;

    let mut metas = BTreeMap::new();
    for v in &variants {
        metas.insert(v.clone(), check_variant(&build_dir, v, opts.force, &mut warnings)?);
    }
    let branch = match (&opts.branch, hub.as_ref().and_then(|h| h.branch.clone())) {
        (Some(b), _) => b.clone(),
        (None, Some(b)) => b,
        (None, None) => {
            let mut versions: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
            for (v, m) in &metas {
                let Some(ver) = m.version else {
                    anyhow::bail!(
                        "`{}` has no `version`, so the branch is unknown; pass --branch",
                        build_dir.join(v).join("metadata.json")
                    );
                };
                versions.entry(ver).or_default().push(v);
            }
            if versions.len() > 1 {
                let list: Vec<String> =
                    versions.iter().map(|(ver, vs)| format!("version {ver}: {}", vs.join(", "))).collect();
                anyhow::bail!(
                    "the variants in `{build_dir}` have different versions ({}); rebuild them, or \
                     pass --branch",
                    list.join("; ")
                );
            }
            let ver = versions.keys().next().copied().unwrap_or(0);
            format!("v{ver}")
        }
    };
    anyhow::ensure!(
        !branch.is_empty() && !branch.starts_with("refs/") && !branch.contains(".."),
        "`{branch}` is not a branch name"
    );
    let dirty: Vec<&String> = metas.iter().filter(|(_, m)| m.dirty).map(|(v, _)| v).collect();
    if !dirty.is_empty() {
        warnings.push(format!(
            "{} variant(s) were built from a git tree with uncommitted changes: {}",
            dirty.len(),
            dirty.iter().map(|d| d.as_str()).collect::<Vec<_>>().join(", ")
        ));
    }

    let current_source = loaded
        .as_ref()
        .ok()
        .and_then(|c| crate::source::SourceSet::collect(dir, c).ok())
        .map(|set| set.tree_id());
    check_manifest(&build_dir, &variants, current_source.as_deref(), opts.force, &mut warnings)?;

    let mut files = Vec::new();
    for v in &variants {
        report.status(&format!("hashing build/{v}/ …"));
        files.extend(plan::collect_files(&build_dir.join(v), &format!("build/{v}"))?);
    }
    let bench = dir.join("benchmarks");
    if bench.is_dir() {
        files.extend(plan::collect_files(&bench, "benchmarks")?);
    }
    files.sort_by(|a, b| a.repo_path.cmp(&b.repo_path));
    report.status(&format!(
        "hashed {} files ({} bytes)",
        files.len(),
        crate::config::diagnostics::thousands(files.iter().map(|f| f.size as usize).sum())
    ));
    // The bundle's card (build/CARD.md, where a bundle puts a rendered one), else the
    // kernel's own CARD.md (what `kernel-builder init` writes).
    let card_path = [build_dir.join("CARD.md"), dir.join("CARD.md")]
        .into_iter()
        .find(|p| p.is_file())
        .unwrap_or_else(|| build_dir.join("CARD.md"));
    // A Helion kernel's card gets its "Tuned for" section (crate::tune::card), rendered into a
    // temporary file that `Prepared` keeps alive.
    let card_tmp = match loaded {
        Ok(l) if card_path.is_file() => match crate::tune::card::rendered_card_file(dir, l, &card_path)? {
            Some(tmp) => Some(std::sync::Arc::new(CardFile::new(tmp)?)),
            None => None,
        },
        _ => None,
    };
    let card = match &card_tmp {
        Some(tmp) => {
            let path =
                Utf8PathBuf::try_from(tmp.path.to_path_buf()).context("a non-UTF-8 temporary directory")?;
            Some(LocalFile::read(&path, "README.md".to_owned())?)
        }
        None if card_path.is_file() => Some(LocalFile::read(&card_path, "README.md".to_owned())?),
        None => None,
    };
    Ok(Prepared { repo_id, branch, variants, files, card, card_tmp, warnings })
}

/// The plan for one revision, with the remote ids known.
struct RevPlan {
    changes: Vec<Change>,
    /// Local indices that go through LFS.
    lfs: Vec<bool>,
}

fn plan_line(change: &Change, lfs: bool) -> String {
    let how = match change.action {
        Action::Add | Action::Update if lfs => ", lfs",
        _ => "",
    };
    format!("{} {} ({} bytes{how})", change.action.as_str(), change.path, change.size)
}

/// Plan one revision locally: diff, and LFS by the local rule.
fn plan_rev(files: &[LocalFile], remote: &[TreeEntry], prefixes: &[String]) -> RevPlan {
    RevPlan {
        changes: plan::diff(files, remote, prefixes),
        lfs: files.iter().map(LocalFile::needs_lfs).collect(),
    }
}

fn count(changes: &[Change], counts: &mut FileCounts) {
    for c in changes {
        match c.action {
            Action::Add => counts.added += 1,
            Action::Update => counts.updated += 1,
            Action::Unchanged => counts.unchanged += 1,
            Action::Delete => counts.deleted += 1,
        }
    }
}

/// Ask preupload about the files to send and apply its answer: `lfs` moves a file to LFS, an
/// `oid` equal to the local id marks it unchanged, `shouldIgnore` drops it (with a note).
fn apply_preupload(
    client: &HubClient,
    repo_id: &str,
    rev: &str,
    files: &[LocalFile],
    plan: &mut RevPlan,
    create_pr: bool,
    notes: &mut Vec<String>,
) -> anyhow::Result<()> {
    let sending: Vec<usize> = plan
        .changes
        .iter()
        .filter(|c| matches!(c.action, Action::Add | Action::Update))
        .filter_map(|c| c.local)
        .collect();
    if sending.is_empty() {
        return Ok(());
    }
    let queries: Vec<PreuploadQuery<'_>> = sending
        .iter()
        .map(|&i| PreuploadQuery { path: &files[i].repo_path, sample: &files[i].sample, size: files[i].size })
        .collect();
    let answers = client.preupload(repo_id, rev, &queries, create_pr)?;
    let by_path: BTreeMap<&str, _> = answers.iter().map(|a| (a.path.as_str(), a)).collect();
    let mut ignored = Vec::new();
    for change in plan.changes.iter_mut() {
        let Some(i) = change.local else { continue };
        if !matches!(change.action, Action::Add | Action::Update) {
            continue;
        }
        let f = &files[i];
        let Some(a) = by_path.get(f.repo_path.as_str()) else {
            anyhow::bail!("the Hub's preupload answer does not mention `{}`", f.repo_path);
        };
        if a.upload_mode == "lfs" && f.size > 0 {
            plan.lfs[i] = true;
        }
        if let Some(oid) = &a.oid {
            let local = if plan.lfs[i] { &f.sha256 } else { &f.git_oid };
            if oid.eq_ignore_ascii_case(local) {
                change.action = Action::Unchanged;
            }
        }
        if a.should_ignore {
            ignored.push(f.repo_path.clone());
        }
    }
    if !ignored.is_empty() {
        notes.push(format!(
            "the repository's .gitignore excludes {} file(s), which are not committed: {}",
            ignored.len(),
            ignored.join(", ")
        ));
        plan.changes.retain(|c| !ignored.contains(&c.path) || c.action == Action::Delete);
    }
    Ok(())
}

/// A byte bar on stderr for what one commit sends, drawn only with `progress` and a terminal.
fn byte_bar(progress: bool, total: u64) -> indicatif::ProgressBar {
    crate::printer::bar(
        progress,
        Some(total),
        "{spinner} {elapsed} [{bytes}/{total_bytes}] {binary_bytes_per_sec} upload: {wide_msg}",
    )
}

/// A line for `report` that the byte bar (when drawn) makes room for.
fn say(bar: &indicatif::ProgressBar, report: &dyn Reporter, line: &str) {
    bar.suspend(|| report.status(line));
}

/// Upload the LFS content of the plan's files and commit; returns the commit answer (none
/// when there was nothing to commit) and the bytes sent.
#[allow(clippy::too_many_arguments)]
fn commit_rev(
    client: &HubClient,
    repo_id: &str,
    rev: &str,
    parent: Option<&str>,
    files: &[LocalFile],
    plan: &RevPlan,
    summary: &str,
    opts: &UploadOptions,
    report: &dyn Reporter,
) -> anyhow::Result<(Option<super::client::CommitAnswer>, u64)> {
    let create_pr = opts.create_pr;
    let mut ops = Vec::new();
    let mut bytes = 0u64;
    // The bar counts the LFS uploads' bytes (added below) and the commit's inline files.
    let inline: u64 = plan
        .changes
        .iter()
        .filter_map(|c| match (c.action, c.local) {
            (Action::Add | Action::Update, Some(i)) if !plan.lfs[i] => Some(files[i].size),
            _ => None,
        })
        .sum();
    let bar = byte_bar(opts.progress, inline);
    let mut lfs_objects: BTreeMap<String, usize> = BTreeMap::new();
    for c in &plan.changes {
        match (c.action, c.local) {
            (Action::Add | Action::Update, Some(i)) if plan.lfs[i] => {
                lfs_objects.entry(files[i].sha256.clone()).or_insert(i);
            }
            _ => {}
        }
    }
    if !lfs_objects.is_empty() {
        let objects: Vec<(String, u64)> =
            lfs_objects.iter().map(|(oid, &i)| (oid.clone(), files[i].size)).collect();
        let answers = client.lfs_batch(repo_id, rev, &objects)?;
        let uploads = |o: &&super::client::LfsObject| o.actions.as_ref().is_some_and(|a| a.upload.is_some());
        let to_send = answers.iter().filter(uploads).count();
        bar.inc_length(
            answers
                .iter()
                .filter(uploads)
                .filter_map(|o| lfs_objects.get(&o.oid).map(|&i| files[i].size))
                .sum(),
        );
        let mut sent = 0;
        for obj in &answers {
            let Some(&i) = lfs_objects.get(&obj.oid) else {
                anyhow::bail!("the LFS batch answer names an object not asked for: {}", obj.oid);
            };
            let f = &files[i];
            if let Some(err) = &obj.error {
                anyhow::bail!(
                    "the Hub refused the LFS upload of `{}`: {} (code {})",
                    f.repo_path,
                    err.message,
                    err.code
                );
            }
            let Some(actions) = &obj.actions else {
                continue;
            };
            if let Some(up) = &actions.upload {
                anyhow::ensure!(
                    !up.header.contains_key("chunk_size"),
                    "the Hub asked for a multipart LFS upload of `{}`, which kernel-builder does not speak",
                    f.repo_path
                );
                sent += 1;
                say(
                    &bar,
                    report,
                    &format!(
                        "sending {} ({} bytes, LFS object {sent} of {to_send}) …",
                        f.repo_path,
                        crate::config::diagnostics::thousands(f.size as usize)
                    ),
                );
                bar.set_message(format!("sending {}", f.repo_path));
                client.lfs_put(up, &f.disk_path, Some(&bar))?;
                bytes += f.size;
            }
            if let Some(verify) = &actions.verify {
                client.lfs_verify(verify, &f.sha256, f.size)?;
            }
        }
        for oid in lfs_objects.keys() {
            anyhow::ensure!(
                answers.iter().any(|o| &o.oid == oid),
                "the LFS batch answer leaves out object {oid}"
            );
        }
    }
    for c in &plan.changes {
        match (c.action, c.local) {
            (Action::Add | Action::Update, Some(i)) => {
                let f = &files[i];
                if plan.lfs[i] {
                    ops.push(CommitOp::LfsFile {
                        path: f.repo_path.clone(),
                        sha256: f.sha256.clone(),
                        size: f.size,
                    });
                } else {
                    let content = std::fs::read(&f.disk_path)
                        .with_context(|| format!("cannot read `{}`", f.disk_path))?;
                    let again = LocalFile::read(&f.disk_path, f.repo_path.clone())?;
                    anyhow::ensure!(
                        again.sha256 == f.sha256 && content.len() as u64 == f.size,
                        "`{}` changed during the upload; run it again",
                        f.disk_path
                    );
                    bytes += f.size;
                    ops.push(CommitOp::File { path: f.repo_path.clone(), content });
                }
            }
            (Action::Delete, _) => ops.push(CommitOp::DeleteFile { path: c.path.clone() }),
            _ => {}
        }
    }
    if ops.is_empty() {
        bar.finish_and_clear();
        return Ok((None, 0));
    }
    say(&bar, report, &format!("committing {} operation(s) to `{rev}` …", ops.len()));
    bar.set_message(format!("committing to `{rev}`"));
    let answer = client.commit(repo_id, rev, summary, parent, &ops, create_pr);
    if answer.is_ok() {
        bar.inc(inline);
    }
    bar.finish_and_clear();
    let answer = answer.map_err(|e| {
        let what = if e.status == Some(412) {
            format!(
                "`{rev}` changed while uploading (another commit landed first), so this \
                     commit was refused; run the upload again"
            )
        } else {
            format!("the commit to `{rev}` failed")
        };
        anyhow::Error::new(e).context(what)
    })?;
    Ok((Some(answer), bytes))
}

fn head_of(refs: &super::client::Refs, branch: &str) -> Option<String> {
    refs.branches.iter().find(|b| b.name == branch).map(|b| b.target_commit.clone())
}

/// The error of an upload without a token, what to do as its hints (`--json` lists them).
pub fn no_token() -> crate::error::Error {
    // Where it looked, so a token saved elsewhere (another HF_HOME) is found by the reader.
    let env = match crate::env::HF_TOKEN.get() {
        Some(v) if v.trim().is_empty() => "HF_TOKEN is empty",
        _ => "HF_TOKEN is not set",
    };
    let message = match super::auth::token_path() {
        Some(p) if p.is_file() => {
            format!("no Hub token: {env}, and the token file `{}` is empty", p.display())
        }
        Some(p) => format!("no Hub token: {env}, and there is no token file `{}`", p.display()),
        None => format!("no Hub token: {env}, and there is no home directory to find a token file in"),
    };
    crate::error::Error::new(crate::error::Kind::Hub, message).with_hints([
        "set HF_TOKEN, or log in with `hf auth login` (the token file is read from $HF_TOKEN_PATH, \
         else $HF_HOME/token)"
            .to_owned(),
        "`--dry-run` works without one".to_owned(),
    ])
}

/// Publish `prepared` to the Hub at `endpoint` (see the module docs). With `dry_run`, only
/// reads (anonymously unless a token is given), and plans against an empty repository when
/// the Hub cannot be reached.
///
/// # Errors
/// No token (unless `dry_run`); any Hub request that fails, with the server's status and
/// message; a pull request against a repository or branch that does not exist.
pub fn upload(
    prepared: &Prepared,
    opts: &UploadOptions,
    endpoint: &str,
    token: Option<Token>,
    report: &dyn Reporter,
) -> Result<Outcome, Box<Failed>> {
    if !opts.dry_run && token.is_none() {
        let error = anyhow::Error::from(no_token());
        return Err(Box::new(Failed { outcome: Outcome::not_started(prepared, &error), error }));
    }
    let mut outcome = Outcome {
        status: Status::NoChanges,
        repo_id: prepared.repo_id.clone(),
        branch: prepared.branch.clone(),
        url: None,
        pull_requests: Vec::new(),
        bytes_sent: 0,
        files: FileCounts::default(),
        commits: Vec::new(),
        error: None,
        plan: Vec::new(),
        notes: Vec::new(),
    };
    match upload_into(&mut outcome, prepared, opts, endpoint, token, report) {
        Ok(()) => Ok(outcome),
        Err(e) => {
            let landed: Vec<String> = outcome
                .commits
                .iter()
                .map(|c| format!("`{}` (commit {}, {})", c.branch, c.commit, c.url))
                .collect();
            // Nothing landed: the summary line says so ("Upload failed: nothing was committed").
            let e = if landed.is_empty() {
                outcome.status = Status::Failed;
                e
            } else {
                outcome.status = Status::PartlyUploaded;
                e.context(format!(
                    "the upload to `{}` is incomplete: committed to {}; run the upload again to finish it",
                    outcome.repo_id,
                    landed.join(" and ")
                ))
            };
            outcome.error = Some(format!("{e:#}"));
            Err(Box::new(Failed { outcome, error: e }))
        }
    }
}

/// A failed [`upload`]: the outcome so far (`status` `failed` or `partly_uploaded`, the
/// commits that landed, `error`), for `--output-json`, and the error to report.
#[derive(Debug)]
pub struct Failed {
    pub outcome: Outcome,
    pub error: anyhow::Error,
}

/// The upload itself, step by step: a dry run's plan; else the repository (1) and the branch (2),
/// the variants on the version branch (3-6), and the card on main (7).
fn upload_into(
    outcome: &mut Outcome,
    prepared: &Prepared,
    opts: &UploadOptions,
    endpoint: &str,
    token: Option<Token>,
    report: &dyn Reporter,
) -> anyhow::Result<()> {
    let client = HubClient::with_timeouts(endpoint, token, super::client::Timeouts::from_env()?);
    let card: Vec<LocalFile> = prepared.card.iter().cloned().collect();
    if opts.dry_run {
        return plan_dry_run(outcome, prepared, &client, &card);
    }
    let (refs, parent) = repository_and_branch(outcome, prepared, opts, &client)?;
    let mut committed = commit_variants(outcome, prepared, opts, &client, endpoint, &parent, report)?;
    if !card.is_empty() {
        let card_rev = CardRev { card: &card, refs: &refs, committed };
        committed |= commit_card(outcome, prepared, opts, &client, endpoint, card_rev, report)?;
    }
    let branch = &prepared.branch;
    if !opts.create_pr {
        outcome.url = Some(format!("{}/kernels/{}/tree/{}", client.endpoint(), prepared.repo_id, branch));
    }
    outcome.status = if !committed {
        Status::NoChanges
    } else if opts.create_pr {
        Status::PullRequestCreated
    } else {
        Status::Uploaded
    };
    Ok(())
}

/// The `build/<variant>/` prefixes an upload of `prepared` replaces.
fn variant_prefixes(prepared: &Prepared) -> Vec<String> {
    prepared.variants.iter().map(|v| format!("build/{v}/")).collect()
}

/// `--dry-run`: what an upload would do, planned against the repository as it is; nothing is
/// sent.
fn plan_dry_run(
    outcome: &mut Outcome,
    prepared: &Prepared,
    client: &HubClient,
    card: &[LocalFile],
) -> anyhow::Result<()> {
    let (repo, branch) = (&prepared.repo_id, &prepared.branch);
    let (branch_tree, main_tree) = match client.refs(repo) {
        // Planning against an empty repository would list every file as added: a plan
        // of nothing real. Say the Hub was not reached and fail.
        Err(e) => {
            let why = match e.status {
                None => format!("the Hub at {} was not reached", client.endpoint()),
                Some(s) => format!("the Hub answered HTTP {s} when asked for `{repo}`"),
            };
            return Err(anyhow::Error::new(e).context(format!(
                "cannot plan the dry run: {why}; nothing was sent (check HF_ENDPOINT, the network, or the token for a private repository)"
            )));
        }
        Ok(None) => {
            outcome.plan.push(format!("create repository {repo} (type kernel)"));
            outcome.plan.push(format!("create branch {branch} from main"));
            (Vec::new(), Vec::new())
        }
        Ok(Some(refs)) => {
            let has_main = head_of(&refs, "main").is_some();
            let main_tree = if has_main { client.list_tree(repo, "main")? } else { Vec::new() };
            if head_of(&refs, branch).is_some() {
                (client.list_tree(repo, branch)?, main_tree)
            } else {
                outcome.plan.push(format!("create branch {branch} from main"));
                (main_tree.clone(), main_tree)
            }
        }
    };
    let p = plan_rev(&prepared.files, &branch_tree, &variant_prefixes(prepared));
    outcome.plan.push(format!("commit to {branch}:"));
    for c in &p.changes {
        let lfs = c.local.is_some_and(|i| p.lfs[i]);
        outcome.plan.push(format!("  {}", plan_line(c, lfs)));
    }
    count(&p.changes, &mut outcome.files);
    if !card.is_empty() {
        let p = plan_rev(card, &main_tree, &[]);
        outcome.plan.push("commit to main:".to_owned());
        for c in &p.changes {
            outcome.plan.push(format!("  {} (from CARD.md)", plan_line(c, false)));
        }
        count(&p.changes, &mut outcome.files);
    }
    outcome.status = Status::DryRun;
    Ok(())
}

/// Steps 1 and 2: the repository (created unless `--create-pr`) and the version branch
/// (created from main unless `--create-pr`). Returns the refs and the branch's head.
fn repository_and_branch(
    outcome: &mut Outcome,
    prepared: &Prepared,
    opts: &UploadOptions,
    client: &HubClient,
) -> anyhow::Result<(super::client::Refs, String)> {
    let (repo, branch) = (&prepared.repo_id, &prepared.branch);
    if !opts.create_pr {
        let created = client.create_repo(repo, opts.private).map_err(|e| {
            let owner = repo.split('/').next().unwrap_or(repo);
            let hint = match e.status {
                Some(401) => {
                    "the Hub does not accept the token; log in again (`hf auth login`) or set HF_TOKEN"
                        .to_owned()
                }
                Some(403) => format!(
                    "the token cannot create repositories under `{owner}`; use a token with write \
                     access to `{owner}`, or ask its maintainers to create `{repo}` (type kernel)"
                ),
                None => format!(
                    "no answer from the Hub at {} ({}); check HF_ENDPOINT and the network",
                    client.endpoint(),
                    e.message
                ),
                Some(status) => format!("the Hub answered HTTP {status} and did not create it"),
            };
            anyhow::Error::new(e).context(format!("cannot create repository `{repo}`: {hint}"))
        })?;
        if created {
            outcome.notes.push(format!("created repository {repo}"));
        }
    }
    let Some(mut refs) = client.refs(repo)? else {
        if opts.create_pr {
            anyhow::bail!(
                "repository `{repo}` does not exist; a pull request needs an existing repository \
                 (upload without --create-pr to create it)"
            );
        }
        anyhow::bail!("repository `{repo}` cannot be found after creating it");
    };
    if head_of(&refs, branch).is_none() {
        if opts.create_pr {
            anyhow::bail!(
                "branch `{branch}` does not exist in `{repo}`; a pull request can only target an \
                 existing branch: ask a maintainer to create it"
            );
        }
        client.create_branch(repo, branch)?;
        outcome.notes.push(format!("created branch {branch} from main"));
        refs = client.refs(repo)?.with_context(|| format!("repository `{repo}` disappeared"))?;
    }
    let parent = head_of(&refs, branch)
        .with_context(|| format!("branch `{branch}` cannot be found after creating it"))?;
    Ok((refs, parent))
}

/// Steps 3-6: the variants, committed to the version branch on top of `parent` (only the
/// uploaded variants' directories are replaced). Returns whether a commit was made.
fn commit_variants(
    outcome: &mut Outcome,
    prepared: &Prepared,
    opts: &UploadOptions,
    client: &HubClient,
    endpoint: &str,
    parent: &str,
    report: &dyn Reporter,
) -> anyhow::Result<bool> {
    let (repo, branch) = (&prepared.repo_id, &prepared.branch);
    let tree = client.list_tree(repo, parent)?;
    // Variants on the branch that this upload does not carry stay there (only the uploaded
    // variants are pruned): say so, since users of the branch would still load them.
    let mut remote_only: Vec<&str> = tree
        .iter()
        .filter_map(|e| e.path.strip_prefix("build/")?.split('/').next())
        .filter(|v| !prepared.variants.iter().any(|l| l == v))
        .collect();
    remote_only.sort_unstable();
    remote_only.dedup();
    for v in remote_only {
        outcome.notes.push(format!(
            "`build/{v}` on branch `{branch}` is not in this upload and stays there; users \
             of the branch can still load it (delete it on the Hub if the kernel no longer builds it)"
        ));
    }
    let mut p = plan_rev(&prepared.files, &tree, &variant_prefixes(prepared));
    apply_preupload(client, repo, branch, &prepared.files, &mut p, opts.create_pr, &mut outcome.notes)?;
    count(&p.changes, &mut outcome.files);
    for c in &p.changes {
        let lfs = c.local.is_some_and(|i| p.lfs[i]);
        outcome.plan.push(plan_line(c, lfs));
    }
    let summary =
        format!("Upload {} with kernel-builder {}", prepared.variants.join(", "), env!("CARGO_PKG_VERSION"));
    let (answer, bytes) =
        commit_rev(client, repo, branch, Some(parent), &prepared.files, &p, &summary, opts, report)?;
    outcome.bytes_sent += bytes;
    Ok(record_commit(outcome, repo, branch, answer.as_ref(), opts, endpoint))
}

/// Step 7: the card (README.md from CARD.md), committed to main. `committed`: the variants'
/// commit was made (when it went to main itself, main's head moved). Returns whether a commit
/// was made.
fn commit_card(
    outcome: &mut Outcome,
    prepared: &Prepared,
    opts: &UploadOptions,
    client: &HubClient,
    endpoint: &str,
    CardRev { card, refs, committed }: CardRev<'_>,
    report: &dyn Reporter,
) -> anyhow::Result<bool> {
    let repo = &prepared.repo_id;
    // Uploading to `main` itself just moved its head: read it again, or the card commit
    // would name a stale parent and be refused.
    let main_head = if prepared.branch == "main" && committed && !opts.create_pr {
        client.refs(repo)?.and_then(|r| head_of(&r, "main"))
    } else {
        head_of(refs, "main")
    };
    let main_tree = match &main_head {
        Some(h) => client.list_tree(repo, h)?,
        None => Vec::new(),
    };
    let mut p = plan_rev(card, &main_tree, &[]);
    apply_preupload(client, repo, "main", card, &mut p, opts.create_pr, &mut outcome.notes)?;
    count(&p.changes, &mut outcome.files);
    for c in &p.changes {
        outcome.plan.push(format!("{} (main, from CARD.md)", plan_line(c, p.lfs[0])));
    }
    let (answer, bytes) = commit_rev(
        client,
        repo,
        "main",
        main_head.as_deref(),
        card,
        &p,
        "Update README.md from the kernel card (kernel-builder)",
        opts,
        report,
    )?;
    outcome.bytes_sent += bytes;
    Ok(record_commit(outcome, repo, "main", answer.as_ref(), opts, endpoint))
}

/// What [`commit_card`] commits: the card, main's refs as read before the variants' commit,
/// and whether that commit was made (when it went to main itself, main's head moved).
struct CardRev<'a> {
    card: &'a [LocalFile],
    refs: &'a super::client::Refs,
    committed: bool,
}

/// Record the commit `answer` to `branch` (none: nothing changed) in `outcome`, with its pull
/// request under `--create-pr`; whether there was one.
fn record_commit(
    outcome: &mut Outcome,
    repo: &str,
    branch: &str,
    answer: Option<&super::client::CommitAnswer>,
    opts: &UploadOptions,
    endpoint: &str,
) -> bool {
    let Some(a) = answer else { return false };
    let url =
        if opts.create_pr { pr_url(endpoint, repo, a) } else { super::auth::redact_userinfo(&a.commit_url) };
    outcome.commits.push(CommitRecord { branch: branch.to_owned(), commit: a.commit_oid.clone(), url });
    if opts.create_pr {
        outcome.pull_requests.push(PullRequest { branch: branch.to_owned(), url: pr_url(endpoint, repo, a) });
    }
    true
}

/// The pull request's URL from the commit answer, user information redacted.
fn pr_url(endpoint: &str, repo: &str, a: &super::client::CommitAnswer) -> String {
    super::auth::redact_userinfo(&pr_url_raw(endpoint, repo, a))
}

fn pr_url_raw(endpoint: &str, repo: &str, a: &super::client::CommitAnswer) -> String {
    if let Some(u) = a.pull_request_url.as_ref().filter(|u| !u.is_empty()) {
        return u.clone();
    }
    match a.pr_num {
        Some(n) => format!("{endpoint}/kernels/{repo}/discussions/{n}"),
        None => a.commit_url.clone(),
    }
}

/// The human summary of an outcome, as the CLI prints it.
pub fn summary(o: &Outcome) -> String {
    let mut s = String::new();
    let f = o.files;
    let counts = format!(
        "{} added, {} updated, {} unchanged, {} deleted; {} bytes sent",
        f.added, f.updated, f.unchanged, f.deleted, o.bytes_sent
    );
    match o.status {
        Status::Failed => {
            let _ = write!(s, "Upload failed: nothing was committed to {}", o.repo_id);
        }
        Status::PartlyUploaded => {
            let landed: Vec<String> = o.commits.iter().map(|c| format!("{} ({})", c.branch, c.url)).collect();
            let _ = write!(s, "Upload incomplete: committed to {} only", landed.join(", "));
        }
        Status::Uploaded => {
            let _ = write!(s, "Kernel uploaded: {} ({counts})", o.url.as_deref().unwrap_or(""));
        }
        Status::PullRequestCreated => {
            for pr in &o.pull_requests {
                let _ = writeln!(s, "Pull request created for {}: {}", pr.branch, pr.url);
            }
            s.push_str(&counts);
        }
        Status::NoChanges => {
            let _ = write!(s, "No changes to upload: {} already has these files ({counts})", o.repo_id);
        }
        Status::DryRun => {
            let _ = write!(
                s,
                "Dry run: would add {}, update {}, delete {}, leave {} unchanged; nothing was sent",
                f.added, f.updated, f.deleted, f.unchanged
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_ids() {
        for ok in ["org/name", "kernels-community/silu_and_mul", "a.b/c-d"] {
            assert!(check_repo_id(ok).is_ok(), "{ok}");
        }
        for bad in ["name", "org/", "/name", "a/b/c"] {
            assert_eq!(
                check_repo_id(bad).unwrap_err().to_string(),
                format!("repository id `{bad}` is not of the form `owner/name`")
            );
        }
        for (bad, why) in [
            ("org/na me", "its name has the character ` `; the Hub allows letters, digits, `-`, `_` and `.`"),
            ("-org/name", "its owner starts or ends with `-` or `.`, which the Hub does not allow"),
            ("org/name.", "its name starts or ends with `-` or `.`, which the Hub does not allow"),
        ] {
            assert_eq!(
                check_repo_id(bad).unwrap_err().to_string(),
                format!("repository id `{bad}` is not a Hub repository id: {why}")
            );
        }
    }
}
