//! How a variant's files and directories are written: new, with fixed modes (0644 files,
//! 0755 directories), whatever the umask, so that a variant's bytes and modes, and so its NAR
//! hash, depend on nothing of the machine. Every writer of a variant (noarch, compiled, the
//! zip layout, symbols.json) goes through here.

use std::os::unix::fs::PermissionsExt;

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};

/// Mode of every file written.
pub const FILE_MODE: u32 = 0o644;
/// Mode of every directory written.
pub const DIR_MODE: u32 = 0o755;

/// Create one directory with mode 0755; it must not exist.
pub fn create_dir(dir: &Utf8Path) -> anyhow::Result<()> {
    std::fs::create_dir(dir).with_context(|| format!("cannot create `{dir}`"))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(DIR_MODE))
        .with_context(|| format!("cannot set permissions on `{dir}`"))
}

/// Create `dir` and its missing parents up to (not including) `top`, each with mode 0755.
pub fn create_dirs_below(top: &Utf8Path, dir: &Utf8Path) -> anyhow::Result<()> {
    let mut missing: Vec<Utf8PathBuf> = Vec::new();
    let mut d = dir;
    while d != top && !d.is_dir() {
        missing.push(d.to_owned());
        d = d.parent().with_context(|| format!("`{dir}` is not below `{top}`"))?;
    }
    for m in missing.iter().rev() {
        create_dir(m)?;
    }
    Ok(())
}

/// Write a new file with mode 0644.
pub fn write_file(path: &Utf8Path, bytes: &[u8]) -> anyhow::Result<()> {
    std::fs::write(path, bytes).with_context(|| format!("cannot write `{path}`"))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(FILE_MODE))
        .with_context(|| format!("cannot set permissions on `{path}`"))
}
