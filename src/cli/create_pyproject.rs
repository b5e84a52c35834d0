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
    /// Directory to write the project into (default: DIR). It must exist.
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
    let dir = dir.unwrap_or_else(|| Utf8PathBuf::from("."));
    anyhow::ensure!(dir.is_dir(), "`{dir}` is not a directory");
    let kernel = dir.canonicalize_utf8().with_context(|| format!("cannot resolve `{dir}`"))?;
    let target = match out {
        Some(o) => {
            anyhow::ensure!(o.is_dir(), "`{o}` (--out) is not a directory; create it first");
            o.canonicalize_utf8().with_context(|| format!("cannot resolve `{o}`"))?
        }
        None => kernel.clone(),
    };
    Ok((kernel, target))
}

/// Run `create-pyproject`.
pub fn run(args: Args) -> super::CmdResult {
    let (kernel, target) = dirs(args.dir, args.out)?;
    let loaded = super::load_config(&kernel)?;
    let layout = Layout { source_dir: relative(&target, &kernel) };
    let project = codegen::generate(&loaded.config, &kernel, &layout)?;
    let written = files::write_project(&project, &target, args.force)?;
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
