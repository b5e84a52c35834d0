//! A bundle: the variants of one kernel in `DIR/build/<variant>/`, written all-or-nothing.
//!
//! The `build/` transaction: this module plans and swaps, [`cellcache`] gives a later build an
//! identical cell's variant directory instead of building it again, and [`verify`] rebuilds
//! variants in a scratch directory and compares them with `build/` and its manifest. Each
//! variant itself is built by [`crate::assemble`].
//!
//! # Which variants
//!
//! A noarch variant (`torch-<backend>`) does not depend on the host, so the bundle holds every
//! noarch cell of the matrix on *any* system ([`crate::matrix::cells()`] with
//! [`crate::matrix::Scope::Bundle`]). A compiled backend gets the one cell the host toolchain builds
//! ([`crate::assemble::compiled::plan_cell`]: torch from `--python`); a backend whose toolchain is missing
//! is skipped with a note saying what is missing ([`Plan::skipped`]), and the other variants
//! still build. `--variant V` restricts the build to the named variants; an unknown name is an
//! error that lists the valid ones, and a compiled one this host cannot build says why.
//!
//! # All or nothing
//!
//! [`build_into`] assembles every requested variant into a temporary directory inside
//! `DIR/build/` (the same filesystem, so renames are atomic), then, variant by variant,
//! exchanges the new one with the old `build/<v>` in one `renameat2(RENAME_EXCHANGE)`
//! (`transaction::swap_in`): killed at any instant, each `build/<v>` is the whole old variant or the whole
//! new one, never missing. If a swap fails, the ones already made are undone. A run killed
//! between two variants leaves some variants new and some old; `build/hashes.json` still
//! records the old ones (it is rewritten after the swaps), so `upload` refuses that tree and
//! the next build completes it. Variants that were not built, and other files in `build/`, are left alone.
//! If anything fails before the moves, `build/` is exactly as it was (a `build/` created for
//! this run is removed again). The manifest `build/hashes.json` is then rewritten (see
//! `transaction::write_manifest`): one NAR hash per variant built from this source, and the source's tree
//! id.
//!
//! # Cells: cache and parallel jobs
//!
//! [`build_into_with`] takes [`BuildOptions`]: with a [`CellCache`], each cell is first looked
//! up by its key ([`cellcache::CellKey::of`]: source tree id, cell, toolchain) and, when a sound entry is
//! there, copied out instead of built, its build's warnings replayed; a cell built is stored.
//! With `jobs` > 1 that many threads take the cells in plan order. The cells are independent
//! (each writes its own directory, a compiled one in its own work directory), and what comes
//! out is gathered in plan order, so `build/`, the report and the output are the same for every
//! `jobs`. The swap into `build/` starts only after every cell succeeded.
//!
//! Concurrent builds of the same kernel take turns: each holds an exclusive `flock` on
//! `build/` while it builds, swaps and writes the manifest ([`lock_dir`]); `verify` holds a
//! shared one while it compares. Nothing is written into `build/` for the lock. A run that is
//! interrupted (SIGINT, SIGTERM, SIGHUP) removes its `build/.kernel-builder-tmp-*` directory and
//! exits with `128 + signal`, letting a swap in progress finish first ([`crate::interrupt`]). A
//! run killed outright can leave that directory (never a variant); the `kernels` loader ignores
//! it, and the next build removes it (with a warning).

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};

pub mod cellcache;
pub mod check;
mod lock;
pub mod native;
mod plan;
mod pool;
mod transaction;
pub mod verify;

pub use lock::{lock_dir, Lock};
pub use plan::{
    choose_toolchains, compiled_backends, host_cell, known_here, no_such_variant, noarch_variants,
    pinned_plan, plan, select, unplanned_variant_dirs, uses_pins, variant_kind, why_not_buildable, Plan,
    ToolchainRequest, Toolchains,
};

use crate::assemble::compiled::SkippedBackend;
use crate::config::BuildConfig;
use crate::matrix::KernelCells;
use crate::source::provenance::{git_revision, BuildIds, KernelRevision};
use crate::source::{SourceSet, Warning};
use crate::toolchain::host::HostToolchain;
use cellcache::CellCache;
use transaction::{build_and_swap, remove_leftover_tmp_dirs, write_manifest};

/// Build `variants` (all planned ones when empty) of the kernel in `dir`, described by
/// `config`, natively into `dir/build/`: [`build_into_with`] with the kernel's git
/// revision ([`git_revision`]), the command's plan and `options` (cell cache, parallel jobs,
/// progress).
///
/// Errors: those of [`git_revision`] and [`build_into_with`]; `build/` is then as it
/// was.
pub fn build_native(
    dir: &Utf8Path,
    config: &BuildConfig,
    cells: &KernelCells,
    variants: &[String],
    plan: &Plan,
    options: &BuildOptions<'_>,
) -> anyhow::Result<BundleReport> {
    build_into_with(dir, config, cells, variants, git_revision(dir)?, plan, options)
}

/// What [`build_into`] did.
#[derive(Debug, Clone)]
pub struct BundleReport {
    /// `DIR/build`.
    pub build_dir: Utf8PathBuf,
    /// The variants built, sorted by name.
    pub built: Vec<BuiltVariant>,
    /// The source set's git tree id (40 hex digits).
    pub tree_id: String,
    /// Warnings about the sources and the variants, sorted, each once.
    pub warnings: Vec<Warning>,
    /// The compiled cells and backends not built, each with its kind and reason (none when
    /// variants were named: the cells left out are ones nobody asked for).
    pub skipped: Vec<SkippedBackend>,
    /// What to tell the user: each skipped cell's note ([`SkippedBackend::note`]), then what the
    /// cells built leave out ([`crate::assemble::compiled::CompiledCell::notes`]).
    pub notes: Vec<String>,
}

/// One variant written.
#[derive(Debug, Clone, PartialEq)]
pub struct BuiltVariant {
    pub name: String,
    /// `DIR/build/<name>`.
    pub path: Utf8PathBuf,
    /// The metadata `id` (the op namespace).
    pub id: Option<String>,
    /// Number of files in it, `metadata.json` included.
    pub files: usize,
    /// True when it came out of the native cell cache ([`cellcache`]) instead of a
    /// build.
    pub reused: bool,
    /// What the compile cache did for its compiles (`None`: reused, noarch, or the compile
    /// cache off).
    pub compiles: Option<crate::assemble::compiled::compile_cache::CompileStats>,
    /// The parallelism its compile ran with, and whether it is a CUDA cell (`None`: reused or
    /// noarch).
    pub parallel: Option<(crate::assemble::compiled::parallel::Plan, bool)>,
    /// Where its build time went (`None`: reused, noarch, or not built with CMake).
    pub phases: Option<crate::assemble::compiled::Phases>,
}

/// How one cell of a build went, for [`Progress::finished`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CellOutcome {
    /// Assembled (noarch) or compiled (compiled) by this run.
    Built,
    /// Copied out of the native cell cache, checked against its recorded NAR hash.
    Reused,
    /// The cell failed; the build fails.
    Failed,
}

/// Told what the cells of a build do, as they do it (the CLI draws a progress display). Called
/// from the threads that build the cells, so it must be `Sync`. Every method does nothing by
/// default.
pub trait Progress: crate::report::Reporter + Sync {
    /// The cells about to be built, in plan order (before any starts).
    fn planned(&self, _names: &[String]) {}
    /// Work on a cell began (cache lookup, then build).
    fn started(&self, _name: &str) {}
    /// A cell is done.
    fn finished(&self, _name: &str, _outcome: CellOutcome) {}
    /// Where the compile steps of cell `name` go (Ninja's `[n/m]`), if anywhere.
    fn steps(&self, _name: &str) -> Option<crate::assemble::progress::StepSink> {
        None
    }
}

// Shows nothing: what [`BuildOptions::default`] builds with.
impl Progress for crate::report::Silent {}

/// How [`build_into_with`] builds the cells; [`BuildOptions::default`] is what [`build_into`]
/// does: no cache, one cell at a time, no progress.
#[derive(Clone, Copy)]
pub struct BuildOptions<'a> {
    /// Reuse cells from this cache and store the cells built in it; `None` builds every cell
    /// and stores nothing.
    pub cache: Option<&'a CellCache>,
    /// How many cells are built at once (`0` counts as 1). Cells are independent; the result
    /// (`build/`, the report, its order) does not depend on this.
    pub jobs: usize,
    /// Told when each cell starts and finishes.
    pub progress: &'a dyn Progress,
    /// The toolchain cache the plan's pinned cells come from ([`Toolchains::store`]): the
    /// compile cache takes its pinned sccache from there.
    pub pinned: Option<&'a crate::toolchain::store::Store>,
}

impl Default for BuildOptions<'_> {
    fn default() -> Self {
        BuildOptions { cache: None, jobs: 1, progress: &crate::report::Silent, pinned: None }
    }
}

impl std::fmt::Debug for BuildOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuildOptions")
            .field("cache", &self.cache)
            .field("jobs", &self.jobs)
            .finish_non_exhaustive()
    }
}

/// Build the variants of the kernel in `kernel_dir` named in `requested` (all planned ones
/// when empty) into `kernel_dir/build/`, all or nothing (see the module doc).
///
/// `kernel` is the kernel's revision for `provenance.kernel` (see
/// [`crate::source::provenance::git_revision`]).
///
/// Errors: an unknown variant, a compiled variant, a source or layout problem, an unknown
/// Python dependency, or a filesystem failure; in each case `build/` is unchanged, except
/// when undoing a partly completed swap fails too (the error then says which variants).
pub fn build_into(
    kernel_dir: &Utf8Path,
    config: &BuildConfig,
    cells: &KernelCells,
    requested: &[String],
    kernel: Option<KernelRevision>,
    host: &HostToolchain,
) -> anyhow::Result<BundleReport> {
    let plan = plan::plan(config, cells, host);
    build_into_with(kernel_dir, config, cells, requested, kernel, &plan, &BuildOptions::default())
}

/// A native build of which no cell could be had here: each note says why one was skipped, and
/// `--json`'s failure document lists them as `skipped`, as a build that succeeds does.
#[derive(Debug, thiserror::Error)]
#[error("`{path}` has no variant this host can build:\n  {}", notes.join("\n  "))]
pub struct NothingBuildable {
    /// The kernel's build.toml.
    pub path: Utf8PathBuf,
    /// One line per cell or backend left out.
    pub notes: Vec<String>,
    /// The cells and backends skipped, each with its typed reason.
    pub skipped: Vec<SkippedBackend>,
}

impl crate::error::Diagnostic for NothingBuildable {
    fn fields(&self) -> serde_json::Map<String, serde_json::Value> {
        skipped_fields(&self.skipped)
    }
}

/// `{"skipped": [...]}`, the `--json` fields of [`NothingBuildable`] and [`Unbuildable`]: the
/// list a build that succeeds prints.
fn skipped_fields(skipped: &[SkippedBackend]) -> serde_json::Map<String, serde_json::Value> {
    crate::error::fields_of(&serde_json::json!({ "skipped": skipped }))
}

/// Variants asked for by name (`--variant`) that cannot be built here, each with why; `--json`
/// lists the cells skipped among them as `skipped`.
#[derive(Debug)]
pub struct Unbuildable {
    /// One reason per variant (`cannot build `…` natively: …`).
    pub reasons: Vec<String>,
    /// The planned cells among them that were skipped, with their typed reasons.
    pub skipped: Vec<SkippedBackend>,
    /// What to do about the names among them that are no variant (a near miss, what the name is).
    pub hints: Vec<String>,
    /// How many names are refused: one reason each, and the line of those that are no variant
    /// names them all.
    pub names: usize,
}

impl std::fmt::Display for Unbuildable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.reasons[..] {
            [one] => f.write_str(one),
            many => write!(
                f,
                "{} of the variants asked for cannot be built:\n  {}",
                self.names,
                many.join("\n  ")
            ),
        }
    }
}

impl std::error::Error for Unbuildable {}

impl crate::error::Diagnostic for Unbuildable {
    fn fields(&self) -> serde_json::Map<String, serde_json::Value> {
        skipped_fields(&self.skipped)
    }
    fn hints(&self) -> Vec<String> {
        self.hints.clone()
    }
}

/// The planned variants a build of `requested` (every planned one when empty) builds, in plan
/// order: what [`build_into_with`] builds, for a command to check before work of its own
/// (`build-and-upload` asks for the Hub token after it).
///
/// Errors: the names that cannot be built here, each with why ([`why_not_buildable`]), and
/// beside them the names that are no variant at all, with their hints ([`Unbuildable`]); or
/// only the latter ([`select`]).
pub fn selection(
    config: &BuildConfig,
    cells: &KernelCells,
    the_plan: &Plan,
    requested: &[String],
) -> anyhow::Result<Vec<crate::assemble::compiled::PlannedVariant>> {
    let planned = &the_plan.variants;
    let (unplanned, not_here) = plan::unplanned_and_skipped(cells, the_plan);
    // Every variant asked for that cannot be built here is named, not only the first; each
    // name once, in the order given.
    let not_planned: Vec<&str> =
        plan::each_once(requested).into_iter().filter(|r| !planned.iter().any(|p| p.name == *r)).collect();
    let (reasons, unknown): (Vec<_>, Vec<_>) = not_planned
        .iter()
        .map(|r| (*r, why_not_buildable(config, cells, the_plan, r)))
        .partition(|(_, why)| why.is_some());
    if reasons.is_empty() {
        return select(planned, requested, &unplanned, &not_here);
    }
    let reasons: Vec<String> = reasons.into_iter().filter_map(|(_, why)| why).collect();
    // Names that are no variant here at all: said beside the reasons, with their hints (a
    // user's trial lost a typo's "did you mean" behind another name's reason).
    let unknown: Vec<&str> = unknown.into_iter().map(|(r, _)| r).collect();
    let (reasons, hints) = match unknown.is_empty() {
        true => (reasons, Vec::new()),
        false => {
            let e = plan::unknown_variants(planned, &unknown, &unplanned, &not_here);
            ([reasons, vec![e.to_string()]].concat(), crate::error::hints(&e))
        }
    };
    let skipped = the_plan
        .skipped
        .iter()
        .filter(|s| s.variant.as_ref().is_some_and(|v| requested.contains(v)))
        .cloned()
        .collect();
    let names = not_planned.len();
    Err(crate::error::Error::from(Unbuildable { reasons, skipped, hints, names }).into())
}

/// [`build_into`] of the variants of `plan` ([`Plan::new`], made once by the command), with
/// `options`: the native cell cache, cells built in parallel, progress.
///
/// With a cache, each cell is first looked up by its key ([`cellcache::CellKey::of`]); a cell found is
/// copied out and checked instead of built ([`BuiltVariant::reused`]), a cell built is stored.
/// A corrupt entry is a warning, and the cell is built. With `jobs` > 1 the cells are built
/// by that many threads; when one fails no further cell starts, and the error is that of the
/// first failed cell in plan order (naming it). Either way the variants are swapped into
/// `build/` only after every cell succeeded, in plan order.
///
/// Errors: as for [`build_into`].
pub fn build_into_with(
    kernel_dir: &Utf8Path,
    config: &BuildConfig,
    cells: &KernelCells,
    requested: &[String],
    kernel: Option<KernelRevision>,
    the_plan: &Plan,
    options: &BuildOptions<'_>,
) -> anyhow::Result<BundleReport> {
    let planned = &the_plan.variants;
    let selected = selection(config, cells, the_plan, requested)?;
    // With `--variant`, every variant asked for is planned (checked above): the cells left
    // out are ones nobody asked for, and go unmentioned.
    let skipped: Vec<SkippedBackend> =
        the_plan.skipped.iter().filter(|_| requested.is_empty()).cloned().collect();
    let mut notes: Vec<String> = skipped.iter().map(SkippedBackend::note).collect();
    // What the selected cells leave out (capabilities their nvcc cannot build).
    notes.extend(selected.iter().filter_map(|v| v.cell.as_ref()).flat_map(|c| c.notes.iter().cloned()));
    if selected.is_empty() {
        if !notes.is_empty() {
            let nothing = NothingBuildable { path: config.path.clone(), notes, skipped };
            return Err(crate::error::Error::from(nothing).into());
        }
        anyhow::bail!(
            "`{}` has no variant to build: no backend of `general.backends` has a cell in the build matrix",
            config.path
        );
    }
    let source = SourceSet::collect(kernel_dir, config)?;
    let ids = BuildIds { uid: source.uid(), kernel };

    let build_dir = kernel_dir.join("build");
    let created_build = match std::fs::symlink_metadata(&build_dir) {
        Ok(m) if m.is_dir() => false,
        Ok(_) => anyhow::bail!(
            "{}",
            crate::fsutil::in_the_way(
                &build_dir,
                "the build swaps variants into build/ by renames and keeps its lock and hashes.json there, so build/ must be a directory of the kernel"
            )
        ),
        Err(_) => match std::fs::create_dir(&build_dir) {
            Ok(()) => true,
            // Another run created it just now.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && build_dir.is_dir() => false,
            Err(e) => return Err(e).with_context(|| format!("cannot create `{build_dir}`")),
        },
    };
    // Interrupted (Ctrl-C, SIGTERM): a `build/` made for this run goes again if still empty.
    let _build_registered = created_build
        .then(|| crate::interrupt::remove_on_interrupt(&build_dir, crate::interrupt::Removal::IfEmpty));
    // One build at a time swaps variants in `build/` (a second run waits here).
    let _lock = lock_dir(&build_dir, Lock::Exclusive)?;
    // The manifest is written after the swap: refuse now what would fail then.
    let manifest_path = build_dir.join(crate::hash::manifest::FILE_NAME);
    if let Ok(m) = std::fs::symlink_metadata(&manifest_path) {
        if !m.is_file() {
            anyhow::bail!(
                "`{manifest_path}` is not a regular file, so the build could not record its hashes there; move it away"
            );
        }
    }
    // Under the lock no other build runs, so a temporary directory here is a killed run's.
    let leftovers = remove_leftover_tmp_dirs(&build_dir);
    let result = build_and_swap(&source, config, &selected, &ids, &build_dir, kernel_dir, options);
    if result.is_err() && created_build {
        // Only removes it when empty, i.e. when nothing was moved in.
        let _ = std::fs::remove_dir(&build_dir);
    }
    // `_swapping`: an interruption lets the swap and the manifest finish first.
    let (built, mut warnings, _swapping) = result?;
    warnings.extend(leftovers);

    warnings.extend(write_manifest(cells, &build_dir, &built, planned, &source.tree_id())?);

    warnings.extend(source.warnings().iter().cloned());
    if let Some(cache) = options.cache.filter(|_| built.iter().any(|b| !b.reused)) {
        warnings.extend(prune_after_store(cache));
    }
    warnings.sort();
    warnings.dedup();
    Ok(BundleReport { build_dir, built, tree_id: source.tree_id(), warnings, skipped, notes })
}

/// Prune `cache` to the bound of [`cellcache::build_max_bytes`]; a warning when that
/// fails.
fn prune_after_store(cache: &CellCache) -> Vec<Warning> {
    let warn = |message: String| vec![Warning { path: None, message }];
    let max = match cellcache::build_max_bytes() {
        Ok(n) => n,
        Err(e) => return warn(format!("{e:#}; the native cell cache was not pruned")),
    };
    match cache.prune(max) {
        // A bound below the cell just stored empties the cache, that cell too: said, since the
        // cache then saves nothing (a user's trial set 0 and saw no word of it).
        Ok(r) if r.kept == 0 && r.removed > 0 => warn(format!(
            "{} is {}, less than the cell just stored, so the native cell cache keeps nothing and the next build starts cold; raise it (the default is 5G), or build with --no-cache",
            crate::env::NATIVE_CACHE_MAX_SIZE.name,
            crate::fsutil::human_size(max)
        )),
        Ok(_) => Vec::new(),
        Err(e) => warn(format!("the native cell cache was not pruned: {e:#}")),
    }
}
