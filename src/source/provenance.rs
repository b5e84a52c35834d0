//! Where a build came from: the ids that name a variant and the provenance written to
//! `metadata.json` (reference: kernel-builder-cli.md §4.5).
//!
//! - `provenance.kernel` (`{commit, dirty}`) is the kernel's git state. The native path asks
//!   git ([`git_revision`]): the `HEAD` commit, dirty when a tracked file under the kernel
//!   directory differs from `HEAD` (`git status --porcelain --untracked-files=no`), not
//!   counting the kernel's own `build/` directory, which holds outputs. Untracked files never
//!   make it dirty. The Nix path gets the same two values on the command line
//!   (`kernel-builder assemble --kernel-commit SHA [--kernel-dirty]`), from the flake's
//!   `self.rev` / `self.dirtyRev`. Without a commit the key is left out. When `git` cannot be
//!   run inside a repository, cleanliness cannot be checked: `HEAD`'s commit is read from the
//!   repository's files and recorded as dirty, with a warning ([`unchecked_revision`]).
//!
//!   It is written only for a DIRTY build (the `kernels` loader then warns that the variant
//!   was built from a modified tree). A clean build leaves it out, so that a variant's bytes
//!   depend on its source alone, never on which commit holds that source: the unique id
//!   (the git tree id of the source set, also `source` in `build/hashes.json`) already names
//!   the source exactly. Recording the commit would change every variant's NAR hash on any
//!   commit, even one that only edits a README or commits `build/hashes.json` itself, which
//!   would make a committed manifest impossible to match and re-upload unchanged variants.
//! - `provenance.kernel-builder` is `{version}` plus `commit` and `dirty` when they were baked
//!   in at compile time through `KERNEL_BUILDER_GIT_COMMIT` and `KERNEL_BUILDER_GIT_DIRTY`
//!   (`true`/`false`); a binary built without them writes only `version`. Nothing is guessed.

use anyhow::Context;
use camino::Utf8Path;
use serde::Serialize;

/// A git commit and whether the work tree differed from it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KernelRevision {
    /// 40 (SHA-1) or 64 (SHA-256) lowercase hex digits.
    pub commit: String,
    pub dirty: bool,
}

impl KernelRevision {
    /// A revision from user input; the commit must be 40 or 64 hex digits (stored lowercase).
    pub fn new(commit: &str, dirty: bool) -> anyhow::Result<KernelRevision> {
        Ok(KernelRevision { commit: parse_object_id(commit)?, dirty })
    }
}

/// The ids of one build: the unique id of the source (see [`super`]) and the kernel's
/// revision, when known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildIds {
    /// 7 lowercase hex digits, [`super::SourceSet::uid`].
    pub uid: String,
    pub kernel: Option<KernelRevision>,
}

/// Check a git object id: exactly 40 or 64 hex digits. Returns it in lowercase.
pub fn parse_object_id(s: &str) -> anyhow::Result<String> {
    let ok = (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_hexdigit());
    anyhow::ensure!(ok, "`{s}` is not a git commit id: expected 40 or 64 hexadecimal digits");
    Ok(s.to_ascii_lowercase())
}

/// The orchestrator's own provenance (`provenance.kernel-builder`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BuilderProvenance {
    pub version: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dirty: Option<bool>,
}

/// This binary's provenance: the crate version, and the git commit and dirty flag when both
/// were given at compile time (`KERNEL_BUILDER_GIT_COMMIT`, `KERNEL_BUILDER_GIT_DIRTY`).
/// Either one missing or malformed means neither is written.
pub fn builder_provenance() -> BuilderProvenance {
    let commit = option_env!("KERNEL_BUILDER_GIT_COMMIT").and_then(|c| parse_object_id(c).ok());
    let dirty = match option_env!("KERNEL_BUILDER_GIT_DIRTY") {
        Some("true") | Some("1") => Some(true),
        Some("false") | Some("0") => Some(false),
        _ => None,
    };
    let (commit, dirty) = match (commit, dirty) {
        (Some(c), Some(d)) => (Some(c), Some(d)),
        _ => (None, None),
    };
    BuilderProvenance { version: env!("CARGO_PKG_VERSION").to_owned(), commit, dirty }
}

/// A `git` command run in `dir` ([`crate::process::Cmd::git`]: the variables that would
/// redirect it to another repository removed).
fn git(dir: &Utf8Path, args: &[&str]) -> crate::process::Cmd {
    crate::process::Cmd::git().args(["-C", dir.as_str()]).args(args.iter().copied())
}

/// The git state of the kernel in `kernel_dir`: `HEAD`'s commit and whether tracked files
/// under `kernel_dir` (outside its `build/`) differ from it.
///
/// When `git` cannot be run (not installed, not on `PATH`) but `kernel_dir` is inside a git
/// repository, whether the tree is clean cannot be checked. The build must not then pass for
/// a clean one: the commit is read from the repository's files (`HEAD`, loose and packed
/// refs) and recorded as dirty, and a warning on stderr says why (see
/// [`unchecked_revision`]).
///
/// `Ok(None)` when `kernel_dir` is not in a repository, or the repository has no commit yet.
/// Errors: `git status` fails inside a repository (its stderr is shown).
pub fn git_revision(kernel_dir: &Utf8Path) -> anyhow::Result<Option<KernelRevision>> {
    let head = match git(kernel_dir, &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"]).output() {
        Ok(out) if out.success() => out.stdout.trim().to_owned(),
        Err(crate::process::Error::Spawn { source, .. }) => {
            return Ok(unchecked_revision(kernel_dir, &source))
        }
        // Not a repository, or no commit: nothing to record.
        _ => return Ok(None),
    };
    let Ok(commit) = parse_object_id(&head) else {
        return Ok(None);
    };
    let status =
        git(kernel_dir, &["status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)build"])
            .output()
            .with_context(|| format!("cannot run `git status` in `{kernel_dir}`"))?;
    if !status.success() {
        anyhow::bail!(
            "`git status --porcelain --untracked-files=no` failed in `{kernel_dir}` ({}):\n{}",
            status.status,
            status.stderr.trim_end()
        );
    }
    Ok(Some(KernelRevision { commit, dirty: !status.stdout.is_empty() }))
}

/// The revision recorded when `git` cannot be run (`error`): `HEAD`'s commit read from the
/// repository's files, marked dirty because cleanliness could not be checked; `None` when
/// `kernel_dir` is in no repository or `HEAD` cannot be resolved. Prints one warning saying
/// which, and what was recorded.
pub fn unchecked_revision(kernel_dir: &Utf8Path, error: &std::io::Error) -> Option<KernelRevision> {
    let gitdir = find_gitdir(kernel_dir)?;
    let commit = read_head(&gitdir);
    let what = match &commit {
        Some(c) => format!(
            "recorded as commit {c} with `dirty: true` (provenance.kernel in metadata.json), so that the build never passes for a clean one"
        ),
        None => "and HEAD could not be read, so no kernel revision is recorded".to_owned(),
    };
    crate::printer::stderr!(
        "warning: cannot run `git` ({error}): whether `{kernel_dir}` has uncommitted changes could not be checked; {what}. Install git (or put it on PATH) to record the real state."
    );
    Some(KernelRevision { commit: commit?, dirty: true })
}

/// The git directory of the repository holding `dir`: the nearest `.git` directory, or the
/// directory a `.git` file (`gitdir: …`, a worktree or submodule) names.
fn find_gitdir(dir: &Utf8Path) -> Option<std::path::PathBuf> {
    let start = std::fs::canonicalize(dir).ok()?;
    for d in start.ancestors() {
        let dot = d.join(".git");
        if dot.is_dir() {
            return Some(dot);
        }
        if let Ok(text) = std::fs::read_to_string(&dot) {
            let target = text.strip_prefix("gitdir:")?.trim();
            return Some(d.join(target));
        }
    }
    None
}

/// `HEAD` of `gitdir` as a commit id: a detached id, or the ref it names, looked up as a loose
/// ref and in `packed-refs`, in `gitdir` and then in its `commondir` (worktrees).
fn read_head(gitdir: &std::path::Path) -> Option<String> {
    let head = std::fs::read_to_string(gitdir.join("HEAD")).ok()?;
    let head = head.trim();
    let Some(name) = head.strip_prefix("ref:").map(str::trim) else {
        return parse_object_id(head).ok();
    };
    let common = std::fs::read_to_string(gitdir.join("commondir"))
        .ok()
        .map(|c| gitdir.join(c.trim()))
        .unwrap_or_else(|| gitdir.to_owned());
    for dir in [gitdir, common.as_path()] {
        if let Ok(id) = std::fs::read_to_string(dir.join(name)) {
            return parse_object_id(id.trim()).ok();
        }
        if let Ok(packed) = std::fs::read_to_string(dir.join("packed-refs")) {
            for line in packed.lines() {
                if let Some((id, r)) = line.split_once(' ') {
                    if r == name {
                        return parse_object_id(id).ok();
                    }
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_ids() {
        let c = "ABCDEF0123456789abcdef0123456789abcdef01";
        assert_eq!(parse_object_id(c).unwrap(), c.to_ascii_lowercase());
        assert!(parse_object_id(&"a".repeat(64)).is_ok());
        for bad in ["abc1234", &"g".repeat(40), &"a".repeat(41), ""] {
            let err = parse_object_id(bad).unwrap_err().to_string();
            assert!(err.contains("40 or 64 hexadecimal digits"), "{err}");
        }
    }

    #[test]
    fn builder_provenance_has_the_crate_version() {
        let p = builder_provenance();
        assert_eq!(p.version, env!("CARGO_PKG_VERSION"));
        assert_eq!(p.commit.is_some(), p.dirty.is_some());
    }
}
