//! Filesystem helpers shared by every module: path-aware errors and atomic writes.

use std::io::Write;

use anyhow::Context;
use camino::Utf8Path;

/// Read a UTF-8 file; the error names the path.
pub fn read_to_string(path: &Utf8Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read `{path}`"))
}

/// Write `contents` to `path` atomically: a temporary file in the same directory, flushed,
/// then renamed over `path`. Readers see the old file or the new one, never half of it.
pub fn write_atomic(path: &Utf8Path, contents: &[u8]) -> anyhow::Result<()> {
    let dir = path.parent().filter(|p| !p.as_str().is_empty()).unwrap_or(Utf8Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".kernel-builder-")
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a temporary file in `{dir}`"))?;
    tmp.write_all(contents).with_context(|| format!("cannot write `{path}`"))?;
    tmp.as_file().sync_all().with_context(|| format!("cannot write `{path}`"))?;
    // Keep the permissions of the file being replaced (a fresh temp file is 0600).
    if let Ok(meta) = std::fs::metadata(path) {
        std::fs::set_permissions(tmp.path(), meta.permissions())
            .with_context(|| format!("cannot set permissions on `{path}`"))?;
    } else {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o644))
            .with_context(|| format!("cannot set permissions on `{path}`"))?;
    }
    tmp.persist(path).with_context(|| format!("cannot replace `{path}`"))?;
    Ok(())
}
