//! Loading a kernel: the one place that puts the stages together, so that data flows one way.
//!
//! 1. [`crate::config`] reads `build.toml` (any generation) into the typed model, with its
//!    problems located in the file;
//! 2. the kernel's cells on every system of its matrix are computed, once
//!    ([`crate::matrix::KernelCells`], kept in the [`Kernel`] for every later step); when the
//!    file itself is sound, [`crate::matrix::check()`] checks the complete model and its cells against
//!    the build matrix (capabilities against CUDA toolkits, gfx targets against ROCm releases,
//!    backends with no cell); its problems are placed and rendered with the file's own;
//! 3. for a build, [`load_with_sources`] then collects the kernel's source set
//!    ([`crate::source::SourceSet`]).
//!
//! `config` knows nothing of `matrix`; `matrix` reads the model of `config`; this module uses
//! both.

use camino::Utf8Path;

use crate::config::{self, diagnostics::RenderStyle, BuildConfig, ConfigErrors, Loaded};
use crate::matrix::KernelCells;
use crate::source::SourceSet;

/// A loaded kernel: its `build.toml` with the warnings (as [`Loaded`] has them) and its cells
/// on every system of its matrix, computed once here and read by every step that asks which
/// cells the kernel has (the matrix checks, the bundle plan, list-variants, ci-matrix, …).
#[derive(Debug, Clone)]
pub struct Kernel {
    pub config: BuildConfig,
    /// Warnings (a legacy generation, a kernel whose backend is not built, …) in file order.
    pub warnings: Vec<config::Problem>,
    /// Where each of `warnings` is (same order), as [`ConfigErrors::locations`].
    pub warning_locations: Vec<Option<config::diagnostics::Location>>,
    /// The warnings rendered like errors (empty when there are none).
    pub rendered_warnings: String,
    /// Every cell of the kernel ([`KernelCells::of`] of `config`).
    pub cells: KernelCells,
}

impl Kernel {
    fn new(loaded: Loaded, cells: KernelCells) -> Kernel {
        let Loaded { config, warnings, warning_locations, rendered_warnings } = loaded;
        Kernel { config, warnings, warning_locations, rendered_warnings, cells }
    }
}

/// Read `kernel_dir/build.toml` (any generation), validate it, check it against the build
/// matrix, and check that every `src` and `include` path exists inside `kernel_dir`.
/// Problems are rendered in the style of [`RenderStyle::detect`].
///
/// Errors: every problem of the file, rendered (also when the file cannot be read).
pub fn load(kernel_dir: &Utf8Path) -> Result<Kernel, ConfigErrors> {
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
) -> Result<Kernel, ConfigErrors> {
    load_str_styled(display_path, text, kernel_dir, RenderStyle::detect())
}

/// [`load_str`] with an explicit rendering style.
pub fn load_str_styled(
    display_path: &Utf8Path,
    text: &str,
    kernel_dir: Option<&Utf8Path>,
    style: RenderStyle,
) -> Result<Kernel, ConfigErrors> {
    let parsed = config::parse_str(display_path, text, kernel_dir, style)?;
    // Checks that need a complete model run only when the file itself is sound.
    let cells = KernelCells::of(&parsed.config);
    let matrix_problems =
        if parsed.is_sound() { crate::matrix::check(&parsed.config, &cells) } else { Vec::new() };
    Ok(Kernel::new(parsed.finish(matrix_problems)?, cells))
}

/// [`load`], and the kernel dependencies of build.toml must be pinned by `kernels.lock`
/// ([`crate::kdeps::check`]): an entry without a lock, or one the lock lacks, is an error at
/// its line. For check-config and the commands that build; the others read build.toml alone.
pub fn load_locked(kernel_dir: &Utf8Path) -> Result<Kernel, ConfigErrors> {
    let (path, text) = config::read_kernel_build_toml(kernel_dir)?;
    let parsed = config::parse_str(&path, &text, Some(kernel_dir), RenderStyle::detect())?;
    let cells = KernelCells::of(&parsed.config);
    let mut problems =
        if parsed.is_sound() { crate::matrix::check(&parsed.config, &cells) } else { Vec::new() };
    if parsed.is_sound() {
        problems.extend(crate::kdeps::check(&parsed.config, kernel_dir));
    }
    Ok(Kernel::new(parsed.finish(problems)?, cells))
}

/// [`load`] followed by the kernel's source set (the files a build reads, and its id), for the
/// commands that record what a build was made from: the loaded kernel (its cells included)
/// and the set. Warnings are not printed.
///
/// Errors: the rendered problems of `build.toml`, or why the source set could not be collected
/// (a missing or escaping `src` entry, an unreadable file).
pub fn load_with_sources(kernel_dir: &Utf8Path) -> anyhow::Result<(Kernel, SourceSet)> {
    let kernel = load(kernel_dir).map_err(|e| anyhow::anyhow!("{}", e.render()))?;
    let set = SourceSet::collect(kernel_dir, &kernel.config)?;
    Ok((kernel, set))
}
