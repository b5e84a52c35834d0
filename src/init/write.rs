//! Writing a rendered project to disk, all or nothing, and staging it in git.

use std::collections::BTreeSet;
use std::fmt;
use std::io;

use camino::{Utf8Path, Utf8PathBuf};

use super::FileSet;
use crate::fsutil::{Anchored, FileId};
use crate::process::Cmd;

/// Why a project could not be written. In every case nothing new is left behind (a file
/// replaced under `overwrite` before the failure stays replaced).
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// The target directory holds files and `--overwrite` was not given.
    #[error("{}", not_empty_message(dir, replaced, others))]
    NotEmpty {
        dir: Utf8PathBuf,
        /// Generated files that already exist (they would be replaced).
        replaced: Vec<Utf8PathBuf>,
        /// Other entries at the top of the directory (they would be kept).
        others: Vec<Utf8PathBuf>,
    },
    /// The target exists and is not a directory.
    #[error("`{0}` exists and is not a directory")]
    NotADirectory(Utf8PathBuf),
    /// A generated path is blocked by an existing entry of the wrong kind.
    #[error("cannot write `{path}`: {reason}")]
    Blocked { path: Utf8PathBuf, reason: String },
    /// A filesystem operation failed.
    #[error("cannot {action} `{path}`")]
    Io {
        action: &'static str,
        path: Utf8PathBuf,
        #[source]
        source: io::Error,
    },
    /// A git command failed (the files written were removed again).
    #[error("{}", git_message(command, dir, output))]
    Git { command: String, dir: Utf8PathBuf, output: String },
}

fn not_empty_message(dir: &Utf8Path, replaced: &[Utf8PathBuf], others: &[Utf8PathBuf]) -> String {
    let mut s = format!("`{dir}` is not empty, and `init` writes only into a new or empty directory");
    if !replaced.is_empty() {
        s.push_str("\nthese files would be replaced:");
        for p in replaced {
            s.push_str(&format!("\n    {p}"));
        }
    }
    if !others.is_empty() {
        s.push_str("\nit also holds (these would be kept):");
        for p in others {
            s.push_str(&format!("\n    {p}"));
        }
    }
    s
}

impl crate::error::Diagnostic for InitError {
    fn kind(&self) -> crate::error::Kind {
        match self {
            InitError::Git { output, .. } if output.ends_with("(is git installed and on PATH?)") => {
                crate::error::Kind::Toolchain
            }
            _ => crate::error::Kind::Failed,
        }
    }

    fn hints(&self) -> Vec<String> {
        match self {
            InitError::NotEmpty { .. } => {
                vec!["pass `--overwrite` to write the project anyway: generated files \
                 replace the files of the same name, other files are left as they are"
                    .to_owned()]
            }
            _ => Vec::new(),
        }
    }
}

fn git_message(command: &str, dir: &Utf8Path, output: &str) -> String {
    let mut s = format!("`{command}` failed in `{dir}`");
    let out = output.trim_end();
    if !out.is_empty() {
        s.push_str("\n--- output ---\n");
        s.push_str(out);
        s.push_str("\n---");
    }
    s.push_str("\nnothing was written");
    s
}

/// What happened in git after the files were written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GitOutcome {
    /// `git init` made a new repository in the project directory.
    Initialized,
    /// The project directory is inside an existing work tree (its top level given); the files
    /// were staged there and no nested repository was made.
    Reused(Utf8PathBuf),
    /// The project directory is inside a work tree (its top level given) that ignores it, so
    /// the files cannot be staged there: `git init` made the kernel's own repository.
    InitializedInsideIgnored(Utf8PathBuf),
}

impl GitOutcome {
    /// Whether `git init` made a repository in the project directory.
    pub fn made_repository(&self) -> bool {
        matches!(self, GitOutcome::Initialized | GitOutcome::InitializedInsideIgnored(_))
    }
}

impl fmt::Display for GitOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GitOutcome::Initialized => f.write_str("initialized a new git repository and staged the files"),
            GitOutcome::Reused(top) => {
                write!(f, "staged the files in the existing git repository at `{top}`")
            }
            GitOutcome::InitializedInsideIgnored(top) => write!(
                f,
                "initialized a new git repository and staged the files (the repository at `{top}` ignores this directory)"
            ),
        }
    }
}

/// The result of [`write_project`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub dir: Utf8PathBuf,
    pub git: GitOutcome,
}

fn io_err(action: &'static str, path: &Utf8Path) -> impl FnOnce(io::Error) -> InitError {
    let path = path.to_owned();
    move |source| InitError::Io { action, path, source }
}

/// Undo what a failed write created: files and directories, newest first. Directories are
/// removed only when empty. Inside the project directory this goes through its directory
/// handle (`inner`), so a link swapped in meanwhile is never followed, and a file is removed
/// only while it is still the one written. Errors are ignored: this runs while reporting
/// another error.
struct Rollback {
    /// The project directory's missing ancestors and itself, as created.
    dirs: Vec<Utf8PathBuf>,
    inner: Option<Anchored>,
    inner_files: Vec<(Utf8PathBuf, FileId)>,
    inner_dirs: Vec<Utf8PathBuf>,
    armed: bool,
}

impl Rollback {
    fn run(&mut self) {
        if let Some(root) = &self.inner {
            for (f, id) in self.inner_files.drain(..).rev() {
                let _ = root.remove_file(&f, id);
            }
            for d in self.inner_dirs.drain(..).rev() {
                let _ = root.remove_empty_dir(&d);
            }
        }
        self.inner = None;
        for d in self.dirs.drain(..).rev() {
            let _ = std::fs::remove_dir(&d);
        }
    }
}

impl Drop for Rollback {
    fn drop(&mut self) {
        if self.armed {
            self.run();
        }
    }
}

/// Create `dir` and its missing ancestors, recording each one created.
fn create_dirs(dir: &Utf8Path, rollback: &mut Rollback) -> Result<(), InitError> {
    let mut missing = Vec::new();
    let mut cur = Some(dir);
    while let Some(d) = cur {
        if d.as_str().is_empty() {
            break;
        }
        match std::fs::symlink_metadata(d) {
            Ok(m) if m.is_dir() => break,
            Ok(m) if m.file_type().is_symlink() && d.is_dir() => break,
            Ok(_) => {
                return Err(InitError::Blocked {
                    path: d.to_owned(),
                    reason: "it exists and is not a directory".into(),
                })
            }
            Err(e) if matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory) => {
                missing.push(d.to_owned())
            }
            Err(e) => return Err(io_err("inspect", d)(e)),
        }
        cur = d.parent();
    }
    for d in missing.into_iter().rev() {
        std::fs::create_dir(&d).map_err(io_err("create the directory", &d))?;
        set_mode(&d, 0o755)?;
        rollback.dirs.push(d);
    }
    Ok(())
}

fn set_mode(path: &Utf8Path, mode: u32) -> Result<(), InitError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(io_err("set permissions on", path))
}

/// Write the files of a project into `dir` and stage them in git.
///
/// * `dir` missing: it is created with its missing parents.
/// * `dir` exists: it must be a directory, empty apart from `.git`, unless `overwrite`; with
///   `overwrite`, generated files replace files of the same path and other files are kept.
/// * Files are written with mode 0644, directories 0755, each file through a temporary file
///   renamed into place. If anything fails, every file and directory created so far is
///   removed (a file replaced under `overwrite` stays replaced).
/// * Git: when `dir` is inside an existing work tree, the files are staged there; otherwise
///   `git init` makes a repository in `dir`. Then `git add .` runs in `dir`. Nothing is
///   committed. `git` is looked up before anything is written.
pub fn write_project(dir: &Utf8Path, files: &FileSet, overwrite: bool) -> Result<Written, InitError> {
    let git = Git::new();
    git.check_available(dir)?;

    match std::fs::symlink_metadata(dir) {
        Ok(_) if !dir.is_dir() => return Err(InitError::NotADirectory(dir.to_owned())),
        Ok(_) => {
            check_existing(dir, files, overwrite)?;
            // A link in the directory (`torch-ext -> ../elsewhere`, `.git -> ../victim`) must not
            // take a file, or the repository `git init`/`git add` write, out of it.
            for rel in files.keys().map(|k| k.as_str()).chain([".git"]) {
                crate::fsutil::inside(dir, Utf8Path::new(rel))
                    .map_err(|e| InitError::Blocked { path: dir.join(rel), reason: format!("{e:#}") })?;
            }
        }
        Err(e) if matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory) => {}
        Err(e) => return Err(io_err("inspect", dir)(e)),
    }

    let mut rollback = Rollback {
        dirs: Vec::new(),
        inner: None,
        inner_files: Vec::new(),
        inner_dirs: Vec::new(),
        armed: true,
    };
    create_dirs(dir, &mut rollback)?;
    // Everything inside is written through the directory's handle, each directory on the way
    // opened without following links: a link swapped in after the check above (a race) is
    // refused, never written through.
    rollback.inner = Some(Anchored::open(dir).map_err(blocked(dir.to_owned()))?);
    write_files(dir, files, &mut rollback)?;

    let had_git = dir.join(".git").exists();
    // A directory the enclosing repository ignores cannot be staged there (`git add` refuses
    // ignored paths): the kernel gets its own repository instead.
    let outcome = match git.toplevel(dir) {
        Some(top) if git.is_ignored(dir) => GitOutcome::InitializedInsideIgnored(top),
        Some(top) => GitOutcome::Reused(top),
        None => GitOutcome::Initialized,
    };
    let undo_init = |outcome: &GitOutcome| {
        if outcome.made_repository() && !had_git {
            let _ = std::fs::remove_dir_all(dir.join(".git"));
        }
    };
    if outcome.made_repository() {
        if let Err(e) = git.run(dir, &["init", "--quiet"]) {
            undo_init(&outcome);
            return Err(e);
        }
    }
    if let Err(e) = git.run(dir, &["add", "--", "."]) {
        undo_init(&outcome);
        return Err(e);
    }
    rollback.armed = false;
    Ok(Written { dir: dir.to_owned(), git: outcome })
}

/// Refuse a directory that holds anything besides `.git`, unless `overwrite`; refuse a
/// generated path blocked by a directory even then.
fn check_existing(dir: &Utf8Path, files: &FileSet, overwrite: bool) -> Result<(), InitError> {
    let mut others = BTreeSet::new();
    for entry in std::fs::read_dir(dir).map_err(io_err("list", dir))? {
        let entry = entry.map_err(io_err("list", dir))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name != ".git" {
            others.insert(Utf8PathBuf::from(name.as_ref()));
        }
    }
    if others.is_empty() {
        return Ok(());
    }
    let mut replaced = Vec::new();
    for rel in files.keys() {
        let path = dir.join(rel);
        if path.is_dir() {
            return Err(InitError::Blocked {
                path,
                reason: "a directory is in the way of a generated file".into(),
            });
        }
        if path.exists() {
            replaced.push(rel.clone());
        }
        // A file in the way of a generated directory.
        let mut p = rel.parent();
        while let Some(d) = p.filter(|d| !d.as_str().is_empty()) {
            let full = dir.join(d);
            if full.exists() && !full.is_dir() {
                return Err(InitError::Blocked {
                    path: full,
                    reason: "a file is in the way of a generated directory".into(),
                });
            }
            p = d.parent();
        }
    }
    if overwrite {
        return Ok(());
    }
    // Top-level entries that hold a replaced file are shown through that file.
    let replaced_tops: BTreeSet<Utf8PathBuf> = replaced
        .iter()
        .filter_map(|p| p.components().next().map(|c| Utf8PathBuf::from(c.as_str())))
        .collect();
    let others = others.into_iter().filter(|o| !replaced_tops.contains(o)).collect();
    Err(InitError::NotEmpty { dir: dir.to_owned(), replaced, others })
}

/// An error of a write through the directory handle, blocked at `path`.
fn blocked(path: Utf8PathBuf) -> impl FnOnce(anyhow::Error) -> InitError {
    move |e| InitError::Blocked { path, reason: format!("{e:#}") }
}

/// Write `files` into `dir` through `rollback`'s handle of it (mode 0644, directories 0755),
/// recording what did not exist before for the rollback.
fn write_files(dir: &Utf8Path, files: &FileSet, rollback: &mut Rollback) -> Result<(), InitError> {
    let Some(root) = rollback.inner.take() else { return Ok(()) };
    let result = files.iter().try_for_each(|(rel, contents)| {
        if let Some(parent) = rel.parent().filter(|p| !p.as_str().is_empty()) {
            let created = root.create_dirs(parent).map_err(blocked(dir.join(parent)))?;
            rollback.inner_dirs.extend(created);
        }
        let existed = root.exists(rel).map_err(blocked(dir.join(rel)))?;
        let id = root.write_atomic_mode(rel, contents.as_bytes(), 0o644).map_err(blocked(dir.join(rel)))?;
        if !existed {
            rollback.inner_files.push((rel.clone(), id));
        }
        Ok(())
    });
    rollback.inner = Some(root);
    result
}

/// Runs `git` through [`crate::process::Cmd::git`] (the variables that would redirect it to
/// another repository removed).
struct Git;

impl Git {
    fn new() -> Git {
        Git
    }

    fn cmd(&self, dir: &Utf8Path, args: &[&str]) -> Cmd {
        Cmd::git().args(args.iter().copied()).dir(dir)
    }

    /// Fail early, before anything is written, when `git` cannot run.
    fn check_available(&self, dir: &Utf8Path) -> Result<(), InitError> {
        let git_error =
            |output: String| InitError::Git { command: "git --version".into(), dir: dir.to_owned(), output };
        match self.cmd(Utf8Path::new("."), &["--version"]).output() {
            Ok(o) if o.success() => Ok(()),
            Ok(o) => Err(git_error(o.stdout + &o.stderr)),
            Err(e) => Err(git_error(format!("{} (is git installed and on PATH?)", e.one_line()))),
        }
    }

    /// Whether the work tree holding `dir` ignores it (`git check-ignore`).
    fn is_ignored(&self, dir: &Utf8Path) -> bool {
        self.cmd(dir, &["check-ignore", "-q", "."]).succeeds()
    }

    /// The top level of the work tree holding `dir`, if any.
    fn toplevel(&self, dir: &Utf8Path) -> Option<Utf8PathBuf> {
        let out = self.cmd(dir, &["rev-parse", "--show-toplevel"]).run().ok()?;
        let top = out.stdout.trim_end_matches(['\n', '\r']);
        (!top.is_empty()).then(|| Utf8PathBuf::from(top))
    }

    fn run(&self, dir: &Utf8Path, args: &[&str]) -> Result<(), InitError> {
        let command = format!("git {}", args.join(" "));
        let out = self.cmd(dir, args).output().map_err(|e| InitError::Git {
            command: command.clone(),
            dir: dir.to_owned(),
            output: e.one_line(),
        })?;
        if out.success() {
            Ok(())
        } else {
            Err(InitError::Git { command, dir: dir.to_owned(), output: out.stdout + &out.stderr })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The race the up-front link check leaves open (issue 25): a thread swaps `torch-ext` (a
    /// real directory) with a link to `../victim` (which has the same `kk/` inside, so a write
    /// led there would succeed) while init's files are written again and again. Nothing may
    /// ever land in the victim; the writes that find the real directory succeed.
    #[test]
    #[cfg(target_os = "linux")]
    fn init_never_writes_through_a_directory_swapped_for_a_link() {
        let t = tempfile::tempdir().unwrap();
        let d = Utf8Path::from_path(t.path()).unwrap();
        let (kernel, victim) = (d.join("kernel"), d.join("victim"));
        std::fs::create_dir_all(kernel.join("torch-ext/kk")).unwrap();
        std::fs::create_dir_all(victim.join("kk")).unwrap();
        std::os::unix::fs::symlink("../victim", kernel.join("other")).unwrap();
        let files: FileSet = [(Utf8PathBuf::from("torch-ext/kk/__init__.py"), "x = 1\n".to_owned())].into();
        let swapper = crate::fsutil::Swapper::start(kernel.join("torch-ext"), kernel.join("other"));
        let mut written = 0;
        for _ in 0..3000 {
            let mut rollback = Rollback {
                dirs: Vec::new(),
                inner: Some(Anchored::open(&kernel).unwrap()),
                inner_files: Vec::new(),
                inner_dirs: Vec::new(),
                armed: true,
            };
            if write_files(&kernel, &files, &mut rollback).is_ok() {
                written += 1;
            }
            // The rollback removes what was written, through the handle, as a failed init does.
            drop(rollback);
            let found: Vec<_> =
                std::fs::read_dir(victim.join("kk")).unwrap().map(|e| e.unwrap().file_name()).collect();
            if !found.is_empty() || std::fs::read_dir(&victim).unwrap().count() != 1 {
                swapper.stop();
                panic!("init wrote {found:?} in ../victim (after {written} writes)");
            }
        }
        let swaps = swapper.stop();
        assert!(swaps > 1000 && written > 0, "the race did not run: {swaps} swaps, {written} writes");
    }
}
