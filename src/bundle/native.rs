//! The native build operation behind `build-and-copy --nix never` and `build-and-upload`: from
//! a loaded kernel and what the command line asked, the whole build, with no printing.
//!
//! One call does every step the two commands share, in order: the pinned-or-host choice of
//! toolchains ([`super::choose_toolchains`]), the plan ([`Plan::new`]), the native cell cache
//! (opened unless turned off; a cache that cannot be opened is a note, and every cell builds),
//! the kernel's locked dependencies ([`crate::kdeps::fetch_for_build`]), the build
//! ([`super::build_native`]), and the toolchain cache's bound afterwards. What the user is told
//! comes back in the [`BundleReport`] (warnings, notes, skipped cells) and through the
//! [`Progress`] handed in; the caller renders it.

use camino::Utf8Path;

use super::{build_native, choose_toolchains, BuildOptions, BundleReport, Plan, Progress, ToolchainRequest};
use crate::kernel::Kernel;
use crate::source::Warning;
use crate::toolchain::host::HostToolchain;

/// What a native build is asked to do.
#[derive(Debug)]
pub struct NativeBuild<'a> {
    /// The kernel directory.
    pub dir: &'a Utf8Path,
    /// Its build.toml, loaded.
    pub kernel: &'a Kernel,
    /// Only these variants (`--variant`); all when empty.
    pub variants: &'a [String],
    /// The host toolchain (`--python`, the manylinux policy, capabilities, package set).
    pub host: HostToolchain,
    /// Pinned or host toolchains, and how the toolchain cache fetches.
    pub toolchains: ToolchainRequest,
    /// Cells built at once; `0`: one per core.
    pub jobs: usize,
    /// Reuse and store cells in the native cell cache (`--no-cache` turns it off).
    pub cell_cache: bool,
}

/// What a native build did: its plan (which `build-and-upload` verifies against) and report.
#[derive(Debug)]
pub struct NativeOutcome {
    pub plan: Plan,
    pub report: BundleReport,
}

/// Refuse the `--variant` names of `b` that [`build`] would refuse, planned as it plans them,
/// building and fetching nothing: for a command to say so before work of its own
/// (`build-and-upload` asks for the Hub token after it).
///
/// Errors: as [`super::selection`]; the toolchain cache cannot be opened.
pub fn check_selection(b: &NativeBuild<'_>) -> anyhow::Result<()> {
    if b.variants.is_empty() {
        return Ok(());
    }
    let toolchains = choose_toolchains(&b.kernel.config, &b.toolchains)?;
    let plan = Plan::new(&b.kernel.config, &b.kernel.cells, &b.host, &toolchains, b.variants, &|_| true);
    super::selection(&b.kernel.config, &b.kernel.cells, &plan, b.variants).map(|_| ())
}

/// Build `b` natively; `progress` is told of each cell and of notes while it runs.
///
/// Errors: a toolchain cache that cannot be opened, a kernel dependency that cannot be had, and
/// [`super::build_native`]'s (a variant asked for that cannot be built, a failed cell; then
/// `build/` is as it was).
pub fn build(b: &NativeBuild<'_>, progress: &dyn Progress) -> anyhow::Result<NativeOutcome> {
    // The toolchain cache's bound, read before the cache is opened or anything is built: a bad
    // value fails now, having written nothing.
    let bound = super::uses_pins(&b.kernel.config).then(crate::toolchain::store::max_bytes).transpose()?;
    // So are the other caches' settings, which are read after the cells are built.
    check_cache_settings(b.cell_cache, !super::compiled_backends(&b.kernel.config).is_empty())?;
    let toolchains = choose_toolchains(&b.kernel.config, &b.toolchains)?;
    // Without --variant, every cell.
    let plan = Plan::new(&b.kernel.config, &b.kernel.cells, &b.host, &toolchains, b.variants, &|_| true);
    let cache = match super::CellCache::user() {
        _ if !b.cell_cache => None,
        Ok(c) => Some(c),
        Err(e) => {
            progress.note(&format!("{e:#}; building every cell without the native cell cache"));
            None
        }
    };
    let jobs = match b.jobs {
        0 => std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        n => n,
    };
    // The locked kernel dependencies, fetched (or found in the cache) and checked first.
    crate::kdeps::fetch_for_build(&b.kernel.config, b.dir, progress)?;
    let options = BuildOptions { cache: cache.as_ref(), jobs, progress, pinned: toolchains.store() };
    let mut report = build_native(b.dir, &b.kernel.config, &b.kernel.cells, b.variants, &plan, &options)?;
    if let (Some(store), Some(max)) = (toolchains.into_store(), bound) {
        report.warnings.extend(prune_toolchains(store, max));
    }
    Ok(NativeOutcome { plan, report })
}

/// The settings a build reads after its cells are built (the native cell cache's bound, when it
/// is used; the compile cache's place and bound, when it is on), read before anything is:
/// a bad value fails the build at once, not after an hour of nvcc.
fn check_cache_settings(cell_cache: bool, compiles: bool) -> anyhow::Result<()> {
    use crate::assemble::compiled::compile_cache;
    // A cache root or toolchain cache named wrongly (not UTF-8, relative, `~…`, a file) is
    // refused, not built around: building without the cache (what a root that cannot be opened
    // gets) would hide the typo, and a relative one would fill the current directory.
    crate::env::CACHE_DIR.dir()?;
    crate::env::TOOLCHAIN_CACHE_DIR.dir()?;
    if cell_cache {
        super::cellcache::build_max_bytes()?;
    }
    if compiles && compile_cache::setting()? != compile_cache::Setting::Off {
        compile_cache::max_bytes()?;
    }
    Ok(())
}

/// Bound the toolchain cache after a build: the least recently used wheels and trees go, unless
/// another build uses them. What this build used is kept, and a bound smaller than that is a
/// warning, as is a prune that failed.
fn prune_toolchains(store: crate::toolchain::store::Store, max: u64) -> Option<Warning> {
    let warn = |message: String| Some(Warning { path: None, message });
    match store.prune(max, false) {
        Ok(Some(pruned)) => pruned.over_bound(max).and_then(warn),
        Ok(None) => None,
        Err(e) => warn(format!("the toolchain cache was not pruned: {e:#}")),
    }
}
