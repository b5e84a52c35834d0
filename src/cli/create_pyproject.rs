//! `kernel-builder create-pyproject [DIR] [--out TARGET] [--force]`: write the generated build
//! project of a compiled kernel ([`crate::codegen`]).

use std::process::ExitCode;

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};

use crate::codegen::{self, files, Layout};

/// Arguments of `create-pyproject`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = "\
Writes CMakeLists.txt, pyproject.toml and (for [torch] kernels) torch-ext/registration.h, each \
marked as generated, plus .kernel-builder-generated-v1, the list of what was written, which \
`kernel-builder clean-pyproject` uses to remove exactly those files. `kernel-builder \
build-and-copy` builds the same project; what the cell and the toolchain decide (architectures, \
flags, torch's paths) it passes as KB_* cache variables.")]
pub struct Args {
    /// Kernel directory, holding build.toml (default: the current directory).
    pub dir: Option<Utf8PathBuf>,
    /// Directory to write the project into (default: DIR). Created (with its parents) when
    /// it does not exist; removed again if the project cannot be written.
    #[arg(long, value_name = "TARGET")]
    pub out: Option<Utf8PathBuf>,
    /// Overwrite files that exist and were not written there by kernel-builder (or were
    /// changed since).
    #[arg(short, long)]
    pub force: bool,
}

/// `to` relative to `from` (both absolute, normalised), `/`-separated; `.` when equal.
pub(crate) fn relative(from: &Utf8Path, to: &Utf8Path) -> Utf8PathBuf {
    let f: Vec<_> = from.components().collect();
    let t: Vec<_> = to.components().collect();
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut out = Utf8PathBuf::new();
    for _ in common..f.len() {
        out.push("..");
    }
    for c in &t[common..] {
        out.push(c.as_str());
    }
    if out.as_str().is_empty() {
        out.push(".");
    }
    out
}

/// The kernel and target directories, absolute.
pub(crate) fn dirs(
    dir: Option<Utf8PathBuf>,
    out: Option<Utf8PathBuf>,
) -> anyhow::Result<(Utf8PathBuf, Utf8PathBuf)> {
    let dir = super::kernel_dir_arg(dir)?;
    let kernel = dir.canonicalize_utf8().with_context(|| format!("cannot resolve `{dir}`"))?;
    let target = match out {
        Some(o) => {
            anyhow::ensure!(
                o.is_dir(),
                "`{o}` (--out) {}",
                if std::fs::symlink_metadata(&o).is_ok() {
                    "exists and is not a directory"
                } else {
                    "does not exist"
                }
            );
            o.canonicalize_utf8().with_context(|| format!("cannot resolve `{o}`"))?
        }
        None => kernel.clone(),
    };
    Ok((kernel, target))
}

/// Create `dir` and any missing parents; returns the directories created, outermost first.
/// Errors: something in the way that is not a directory, or no permission; each names the path.
fn create_missing(dir: &Utf8Path) -> anyhow::Result<Vec<Utf8PathBuf>> {
    let mut missing = Vec::new();
    let mut d = Some(dir);
    while let Some(p) = d.filter(|p| !p.as_str().is_empty() && std::fs::symlink_metadata(p).is_err()) {
        missing.push(p.to_owned());
        d = p.parent();
    }
    missing.reverse();
    for (i, m) in missing.iter().enumerate() {
        if let Err(e) = std::fs::create_dir(m) {
            remove_created(&missing[..i]);
            return Err(e).with_context(|| format!("cannot create `{m}` (for --out)"));
        }
    }
    Ok(missing)
}

/// Remove directories [`create_missing`] created, innermost first, each only when empty.
fn remove_created(created: &[Utf8PathBuf]) {
    for d in created.iter().rev() {
        let _ = std::fs::remove_dir(d);
    }
}

/// Run `create-pyproject`.
pub fn run(args: Args) -> super::CmdResult {
    let created = match &args.out {
        Some(o) => create_missing(o)?,
        None => Vec::new(),
    };
    let result = (|| -> anyhow::Result<_> {
        let (kernel, target) = dirs(args.dir, args.out)?;
        let loaded = super::load_config(&kernel)?;
        let layout = Layout { source_dir: relative(&target, &kernel) };
        let project = codegen::generate(&loaded.config, &kernel, &layout)?;
        let written = files::write_project(&project, &target, args.force)?;
        Ok((target, written))
    })();
    let (target, written) = match result {
        Ok(r) => r,
        Err(e) => {
            remove_created(&created);
            return Err(e);
        }
    };
    if let Some(top) = created.first() {
        println!("created {top}");
    }
    for f in &written.files {
        println!("wrote {}", target.join(f));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths() {
        assert_eq!(relative(Utf8Path::new("/a/b"), Utf8Path::new("/a/b")), ".");
        assert_eq!(relative(Utf8Path::new("/a/out"), Utf8Path::new("/a/relu")), "../relu");
        assert_eq!(relative(Utf8Path::new("/a"), Utf8Path::new("/a/k/relu")), "k/relu");
    }
}
