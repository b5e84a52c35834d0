//! Loading a kernel: the one place that puts the stages together, so that data flows one way.
//!
//! 1. [`crate::config`] reads `build.toml` (any generation) into the typed model, with its
//!    problems located in the file;
//! 2. when the file itself is sound, [`crate::matrix::check()`] checks the complete model against
//!    the build matrix (capabilities against CUDA toolkits, gfx targets against ROCm releases,
//!    backends with no cell); its problems are placed and rendered with the file's own;
//! 3. for a build, [`load_with_sources`] then collects the kernel's source set
//!    ([`crate::source::SourceSet`]).
//!
//! `config` knows nothing of `matrix`; `matrix` reads the model of `config`; this module uses
//! both.

use camino::Utf8Path;

use crate::config::{self, diagnostics::RenderStyle, BuildConfig, ConfigErrors, Loaded};
use crate::source::SourceSet;

/// Read `kernel_dir/build.toml` (any generation), validate it, check it against the build
/// matrix, and check that every `src` and `include` path exists inside `kernel_dir`.
/// Problems are rendered in the style of [`RenderStyle::detect`].
///
/// Errors: every problem of the file, rendered (also when the file cannot be read).
pub fn load(kernel_dir: &Utf8Path) -> Result<Loaded, ConfigErrors> {
    let (path, text) = config::read_kernel_build_toml(kernel_dir)?;
    load_str(&path, &text, Some(kernel_dir))
}

/// Read `text` as the `build.toml` shown as `display_path`, as [`load`] does. With
/// `kernel_dir`, `src` and `include` paths are checked on disk relative to it; with `None` only
/// their shape is. Rendering uses [`RenderStyle::detect`].
///
/// Errors: every problem, rendered, when at least one is an error.
pub fn load_str(
    display_path: &Utf8Path,
    text: &str,
    kernel_dir: Option<&Utf8Path>,
) -> Result<Loaded, ConfigErrors> {
    load_str_styled(display_path, text, kernel_dir, RenderStyle::detect())
}

/// [`load_str`] with an explicit rendering style.
pub fn load_str_styled(
    display_path: &Utf8Path,
    text: &str,
    kernel_dir: Option<&Utf8Path>,
    style: RenderStyle,
) -> Result<Loaded, ConfigErrors> {
    let parsed = config::parse_str(display_path, text, kernel_dir, style)?;
    // Checks that need a complete model run only when the file itself is sound.
    let matrix_problems = if parsed.is_sound() { crate::matrix::check(&parsed.config) } else { Vec::new() };
    parsed.finish(matrix_problems)
}

/// [`load`], and the kernel dependencies of build.toml must be pinned by `kernels.lock`
/// ([`crate::kdeps::check`]): an entry without a lock, or one the lock lacks, is an error at
/// its line. For check-config and the commands that build; the others read build.toml alone.
pub fn load_locked(kernel_dir: &Utf8Path) -> Result<Loaded, ConfigErrors> {
    let (path, text) = config::read_kernel_build_toml(kernel_dir)?;
    let parsed = config::parse_str(&path, &text, Some(kernel_dir), RenderStyle::detect())?;
    let mut problems = if parsed.is_sound() { crate::matrix::check(&parsed.config) } else { Vec::new() };
    if parsed.is_sound() {
        problems.extend(crate::kdeps::check(&parsed.config, kernel_dir));
    }
    parsed.finish(problems)
}

/// [`load`] followed by the kernel's source set (the files a build reads, and its id), for the
/// commands that record what a build was made from. Warnings are not printed.
///
/// Errors: the rendered problems of `build.toml`, or why the source set could not be collected
/// (a missing or escaping `src` entry, an unreadable file).
pub fn load_with_sources(kernel_dir: &Utf8Path) -> anyhow::Result<(BuildConfig, SourceSet)> {
    let config = load(kernel_dir).map_err(|e| anyhow::anyhow!("{}", e.render()))?.config;
    let set = SourceSet::collect(kernel_dir, &config)?;
    Ok((config, set))
}
