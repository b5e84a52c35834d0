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
//! [`Scope::Bundle`]). A compiled backend gets the one cell the host toolchain builds
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
//! (`swap_in`): killed at any instant, each `build/<v>` is the whole old variant or the whole
//! new one, never missing. If a swap fails, the ones already made are undone. A run killed
//! between two variants leaves some variants new and some old; `build/hashes.json` still
//! records the old ones (it is rewritten after the swaps), so `upload` refuses that tree and
//! the next build completes it. Variants that were not built, and other files in `build/`, are left alone.
//! If anything fails before the moves, `build/` is exactly as it was (a `build/` created for
//! this run is removed again). The manifest `build/hashes.json` is then rewritten (see
//! `write_manifest`): one NAR hash per variant built from this source, and the source's tree
//! id.
//!
//! # Cells: cache and parallel jobs
//!
//! [`build_into_with`] takes [`BuildOptions`]: with a [`CellCache`], each cell is first looked
//! up by its key ([`CellKey::of`]: source tree id, cell, toolchain) and, when a sound entry is
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

use std::collections::BTreeSet;

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};

pub mod cellcache;
pub mod verify;

use crate::assemble::compiled::{plan_cell, CompiledCell, PlannedVariant, SkippedBackend, WorkDir};
use crate::assemble::noarch::op_namespace;
use crate::assemble::{assemble_variant, check_python_depends};
use crate::config::{Backend, BuildConfig};
use crate::hash::manifest::Manifest;
use crate::matrix::{self, KernelCells, Scope};
use crate::source::provenance::{git_revision, BuildIds, KernelRevision};
use crate::source::{SourceSet, Warning};
use crate::toolchain::host::HostToolchain;
use cellcache::{CellCache, CellKey, Fetched};

/// The resolved plan of one build: what `build-and-copy` (and `verify`, and the dev shells)
/// builds on this host, and what it cannot and why. The kernel's cells it is planned from
/// ([`crate::kernel::Kernel::cells`], computed once when the kernel is loaded) are read beside
/// it by the later steps (the stale variants of `build/`, why a requested variant is not built).
#[derive(Debug, Clone)]
pub struct Plan {
    /// Sorted by name.
    pub variants: Vec<PlannedVariant>,
    /// Compiled backends this host cannot build, with the reason (what is missing).
    pub skipped: Vec<SkippedBackend>,
}

/// Every variant `build-and-copy` builds for `config` on this host, sorted by name: the
/// noarch cells of every system, and per compiled backend the cell `host` builds.
pub fn plan(config: &BuildConfig, cells: &KernelCells, host: &HostToolchain) -> Plan {
    let mut out = noarch_variants(cells);
    let mut skipped = Vec::new();
    for backend in compiled_backends(config) {
        match host_cell(config, cells, backend, host) {
            Ok(v) => out.push(v),
            Err(s) => skipped.push(s),
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Plan { variants: out, skipped }
}

/// The one cell of `backend` that `host` builds, or why it builds none.
pub fn host_cell(
    config: &BuildConfig,
    cells: &KernelCells,
    backend: Backend,
    host: &HostToolchain,
) -> Result<PlannedVariant, SkippedBackend> {
    plan_cell(config, cells, backend, host).map(PlannedVariant::compiled).map_err(|reason| SkippedBackend {
        backend,
        variant: None,
        reason,
    })
}

/// The noarch bundle cells of every system (they do not depend on the host), each name once.
pub fn noarch_variants(cells: &KernelCells) -> Vec<PlannedVariant> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for cell in cells.in_scope(Scope::Bundle) {
        if cell.noarch && seen.insert(cell.name.clone()) {
            out.push(PlannedVariant::noarch(cell.name.clone(), cell.backend));
        }
    }
    out
}

/// The backends a `[kernel.*]` compiles code for, sorted.
pub fn compiled_backends(config: &BuildConfig) -> Vec<Backend> {
    let mut compiled: Vec<Backend> =
        config.general.backends.iter().copied().filter(|b| config.has_kernel_for(*b)).collect();
    compiled.sort();
    compiled.dedup();
    compiled
}

/// Why `name`, which is not planned, cannot be built here, when it names a compiled variant
/// of this kernel (a backend skipped, or a cell another toolchain would build); `plan` was
/// planned from `cells`.
pub fn why_not_buildable(
    config: &BuildConfig,
    cells: &KernelCells,
    plan: &Plan,
    name: &str,
) -> Option<String> {
    // A variant planned and skipped.
    if let Some(s) = plan.skipped.iter().find(|s| s.variant.as_deref() == Some(name)) {
        return Some(format!("cannot build `{name}` natively: {}", s.reason));
    }
    let backend = cells
        .in_scope(Scope::All)
        .iter()
        .find(|c| c.name == name && !c.noarch)
        .map(|c| c.backend)
        .or_else(|| variant_kind(name).filter(|(_, kind)| *kind != "noarch").map(|(b, _)| b))
        .filter(|b| config.has_kernel_for(*b))?;
    if let Some(s) = plan.skipped.iter().find(|s| s.variant.as_deref() == Some(name)) {
        return Some(format!("cannot build `{name}` natively: {}", s.reason));
    }
    if let Some(s) = plan.skipped.iter().find(|s| s.backend == backend && s.variant.is_none()) {
        return Some(format!("cannot build `{name}` natively: {}", s.reason));
    }
    let built = plan.variants.iter().find(|v| v.backend == backend && v.is_compiled())?;
    let cell = built.cell.as_ref()?;
    if let (Some(nvcc), Some(fix)) = (&cell.nvcc, tvm_ffi_cuda_fix(cell, name)) {
        // A tvm-ffi cell's CUDA is the nvcc's own, not something of the Python environment.
        return Some(format!(
            "cannot build `{name}` natively: the nvcc found here (`{}`, CUDA {}) builds `{}`; {fix}, or build it through Nix",
            nvcc.path, nvcc.version, built.name
        ));
    }
    Some(format!(
        "cannot build `{name}` natively: the toolchain here ({} from the Python environment given) builds `{}`; pass --python with a Python environment whose {} gives `{name}`, or build it through Nix",
        cell.framework.describe(),
        built.name,
        if cell.framework.torch().is_some() { "torch" } else { "tvm-ffi" }
    ))
}

/// For a tvm-ffi CUDA cell that builds another CUDA than the variant `name` asks for: what to
/// change, the nvcc (`point CUDACXX … at an nvcc of CUDA 12.6`), and the Python environment
/// too when the tvm-ffi tag differs as well. `None` when `name` is no tvm-ffi CUDA variant or
/// its CUDA is the cell's (only the tvm-ffi tag differs: the torch-style wording applies).
fn tvm_ffi_cuda_fix(cell: &CompiledCell, name: &str) -> Option<String> {
    use matrix::naming::{parse_variant_name, ParsedVariant};
    if cell.kind != matrix::CellKind::TvmFfi {
        return None;
    }
    let Some(ParsedVariant::TvmFfi { tvm_ffi: want_tag, compute, .. }) = parse_variant_name(name) else {
        return None;
    };
    let Some(ParsedVariant::TvmFfi { tvm_ffi: have_tag, compute: have, .. }) =
        parse_variant_name(&cell.variant)
    else {
        return None;
    };
    // `cu126` → 12.6: the minor is the last digit.
    let digits =
        compute.strip_prefix("cu").filter(|d| d.len() >= 2 && d.bytes().all(|b| b.is_ascii_digit()))?;
    if compute == have {
        return None;
    }
    let cuda = format!("{}.{}", &digits[..digits.len() - 1], &digits[digits.len() - 1..]);
    let mut fix = format!(
        "a tvm-ffi variant takes its CUDA from nvcc, so point CUDACXX (or CUDA_HOME, or PATH) at an nvcc of CUDA {cuda}"
    );
    if want_tag != have_tag && !want_tag.is_empty() {
        // `01` → 0.1: the first digit is the major (the loader's reading).
        fix.push_str(&format!(
            " and pass --python with a Python environment whose tvm-ffi is {}.{}",
            &want_tag[..1],
            &want_tag[1..]
        ));
    }
    Some(fix)
}

/// `"; did you mean `torch-cuda`?"` for the unknown names within two edits (optimal string
/// alignment: a swap of two neighbours is one) of a valid one, else `""`. Variant names share
/// long prefixes (`torch-`, `torch212-cxx11-`), so a similarity score would suggest
/// `torch-rocm` for `torch-metal`; an edit distance does not.
pub fn did_you_mean<S: AsRef<str>>(unknown: &[S], valid: &[&str]) -> String {
    let near: Vec<String> = unknown
        .iter()
        .filter_map(|u| {
            crate::suggest::nearest(u.as_ref(), valid.iter().copied(), 2).map(|v| format!("`{v}`"))
        })
        .collect();
    if near.is_empty() {
        String::new()
    } else {
        format!("; did you mean {}?", near.join(", "))
    }
}

/// The planned variants named in `requested` (all of them when it is empty), in plan order.
///
/// Errors: a name that is not planned; the message lists the valid names.
pub fn select(planned: &[PlannedVariant], requested: &[String]) -> anyhow::Result<Vec<PlannedVariant>> {
    if requested.is_empty() {
        return Ok(planned.to_vec());
    }
    let unknown: Vec<&String> = requested.iter().filter(|r| !planned.iter().any(|p| &p.name == *r)).collect();
    if !unknown.is_empty() {
        let valid: Vec<&str> = planned.iter().map(|p| p.name.as_str()).collect();
        anyhow::bail!(
            "unknown variant{} {}; this kernel's variants are: {}{}",
            if unknown.len() == 1 { "" } else { "s" },
            unknown.iter().map(|u| format!("`{u}`")).collect::<Vec<_>>().join(", "),
            if valid.is_empty() { "(none)".to_owned() } else { valid.join(", ") },
            did_you_mean(&unknown, &valid)
        );
    }
    Ok(planned.iter().filter(|p| requested.contains(&p.name)).cloned().collect())
}

/// Build `variants` (all planned ones when empty) of the kernel in `dir`, described by
/// `config`, natively into `dir/build/`: [`build_into_with`] with the kernel's git
/// revision ([`git_revision`]) and `options` (cell cache, parallel jobs, progress).
///
/// Errors: those of [`git_revision`] and [`build_into_with`]; `build/` is then as it
/// was.
pub fn build_native(
    dir: &Utf8Path,
    config: &BuildConfig,
    cells: &KernelCells,
    variants: &[String],
    host: &HostToolchain,
    options: &BuildOptions<'_>,
) -> anyhow::Result<BundleReport> {
    build_into_with(dir, config, cells, variants, git_revision(dir)?, host, options)
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
    /// Compiled backends skipped because this host lacks their toolchain (what is missing),
    /// then what the cells built leave out ([`CompiledCell::notes`]).
    pub notes: Vec<String>,
}

/// One variant written.
#[derive(Debug, Clone, PartialEq, Eq)]
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
pub trait Progress: Sync {
    /// The cells about to be built, in plan order (before any starts).
    fn planned(&self, _names: &[String]) {}
    /// Work on a cell began (cache lookup, then build).
    fn started(&self, _name: &str) {}
    /// A cell is done.
    fn finished(&self, _name: &str, _outcome: CellOutcome) {}
    /// Before any cell starts: what makes this build long ([`crate::assemble::progress::build_note`]).
    fn note(&self, _text: &str) {}
    /// Where the compile steps of cell `name` go (Ninja's `[n/m]`), if anywhere.
    fn steps(&self, _name: &str) -> Option<crate::assemble::progress::StepSink> {
        None
    }
}

/// A [`Progress`] that shows nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProgress;

impl Progress for NoProgress {}

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
    /// Build the pinned bundle cells from this toolchain cache ([`pinned_plan`])
    /// instead of the one cell per backend of the host toolchain.
    pub pinned: Option<&'a crate::toolchain::store::Store>,
}

impl Default for BuildOptions<'_> {
    fn default() -> Self {
        BuildOptions { cache: None, jobs: 1, progress: &NoProgress, pinned: None }
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
    build_into_with(kernel_dir, config, cells, requested, kernel, host, &BuildOptions::default())
}

/// [`build_into`] with `options`: the native cell cache, cells built in parallel, progress.
///
/// With a cache, each cell is first looked up by its key ([`CellKey::of`]); a cell found is
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
    host: &HostToolchain,
    options: &BuildOptions<'_>,
) -> anyhow::Result<BundleReport> {
    let the_plan = match options.pinned {
        Some(store) => pinned_plan(config, cells, requested, host, store),
        None => plan(config, cells, host),
    };
    let planned = &the_plan.variants;
    for r in requested {
        if !planned.iter().any(|p| &p.name == r) {
            if let Some(why) = why_not_buildable(config, cells, &the_plan, r) {
                anyhow::bail!("{why}");
            }
        }
    }
    let selected = select(planned, requested)?;
    // With `--variant`, every variant asked for is planned (checked above): the cells left
    // out are ones nobody asked for, and go unmentioned.
    let mut notes: Vec<String> = the_plan
        .skipped
        .iter()
        .filter(|_| requested.is_empty())
        .map(|s| match &s.variant {
            Some(v) => format!("`{v}` is not built: {}", s.reason),
            None => format!("the `{}` variant is not built: {}", s.backend, s.reason),
        })
        .collect();
    // What the selected cells leave out (capabilities their nvcc cannot build).
    notes.extend(selected.iter().filter_map(|v| v.cell.as_ref()).flat_map(|c| c.notes.iter().cloned()));
    if selected.is_empty() {
        if !notes.is_empty() {
            anyhow::bail!("`{}` has no variant this host can build:\n  {}", config.path, notes.join("\n  "));
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
        Ok(_) => anyhow::bail!("`{build_dir}` exists and is not a directory; move it away"),
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
    Ok(BundleReport { build_dir, built, tree_id: source.tree_id(), warnings, notes })
}

/// How [`lock_dir`] locks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lock {
    /// Readers (`verify`): many at once, none while a build swaps variants.
    Shared,
    /// A build replacing variants and the manifest.
    Exclusive,
}

/// Take an advisory lock (`flock`) on the directory `dir` itself, held until the returned
/// file is dropped; waits while another process holds a conflicting lock. Nothing is written
/// into `dir` for it.
///
/// Errors: `dir` cannot be opened or locked.
pub fn lock_dir(dir: &Utf8Path, how: Lock) -> anyhow::Result<std::fs::File> {
    use rustix::fs::FlockOperation as Op;
    let file = std::fs::File::open(dir).with_context(|| format!("cannot open `{dir}` to lock it"))?;
    let (now, wait) = match how {
        Lock::Shared => (Op::NonBlockingLockShared, Op::LockShared),
        Lock::Exclusive => (Op::NonBlockingLockExclusive, Op::LockExclusive),
    };
    match rustix::fs::flock(&file, now) {
        Ok(()) => return Ok(file),
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => {}
        Err(e) => return Err(std::io::Error::from(e)).with_context(|| format!("cannot lock `{dir}`")),
    }
    // Someone else holds it: say who, then wait.
    let who = lock_holder(&file).unwrap_or_else(|| "another process".to_owned());
    let what = match how {
        Lock::Shared => "to finish writing it",
        Lock::Exclusive => "to finish with it",
    };
    crate::printer::stderr!(
        "note: `{dir}` is locked by {who}; waiting for it {what} (builds of one kernel take turns)"
    );
    rustix::fs::flock(&file, wait).with_context(|| format!("cannot lock `{dir}`"))?;
    Ok(file)
}

/// Who holds an `flock` on the file `file` refers to, from `/proc/locks` (Linux): `pid N
/// (command line)`. `None` where that cannot be told.
fn lock_holder(file: &std::fs::File) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let meta = file.metadata().ok()?;
    let (dev, ino) = (meta.dev(), meta.ino());
    let (major, minor) = (rustix::fs::major(dev), rustix::fs::minor(dev));
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    let me = std::process::id();
    for line in locks.lines() {
        // `1: FLOCK  ADVISORY  WRITE 12345 08:01:123456 0 EOF` (blocked waiters have `->`).
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 || f[1] != "FLOCK" || f.contains(&"->") {
            continue;
        }
        let mut id = f[5].split(':');
        let (Some(ma), Some(mi), Some(i)) = (id.next(), id.next(), id.next()) else { continue };
        let same = u32::from_str_radix(ma, 16).ok() == Some(major)
            && u32::from_str_radix(mi, 16).ok() == Some(minor)
            && i.parse::<u64>().ok() == Some(ino);
        let Ok(pid) = f[4].parse::<u32>() else { continue };
        if same && pid != me {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|b| {
                    String::from_utf8_lossy(&b)
                        .split('\0')
                        .filter(|s| !s.is_empty())
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default();
            return Some(if cmd.is_empty() { format!("pid {pid}") } else { format!("pid {pid} (`{cmd}`)") });
        }
    }
    None
}

/// Remove the `.kernel-builder-tmp-*` directories that a killed build left in `build_dir`
/// (call it holding the exclusive lock); one warning per directory removed or not removable.
fn remove_leftover_tmp_dirs(build_dir: &Utf8Path) -> Vec<Warning> {
    let Ok(rd) = build_dir.read_dir_utf8() else {
        return Vec::new();
    };
    let mut warnings = Vec::new();
    for e in rd.flatten() {
        if !e.file_name().starts_with(TMP_PREFIX) || !e.path().is_dir() || e.path().is_symlink() {
            continue;
        }
        // The fallback swap ([`swap_in`]) killed between its two renames: the old variant is
        // in `old/`, and `build/` has none by that name. Put it back first. Only from a real
        // directory: a shipped `old -> ../../..` would otherwise pull whatever it names into
        // `build/`.
        let old = e.path().join("old");
        let old_is_dir = std::fs::symlink_metadata(&old).is_ok_and(|m| m.is_dir());
        if let Some(Ok(old)) = old_is_dir.then(|| old.read_dir_utf8()) {
            for v in old.flatten() {
                let target = build_dir.join(v.file_name());
                if std::fs::symlink_metadata(&target).is_err() {
                    let message = match std::fs::rename(v.path(), &target) {
                        Ok(()) => "restored from an interrupted build".to_owned(),
                        Err(err) => format!(
                            "missing after an interrupted build, and cannot be restored from `{}` ({err})",
                            v.path()
                        ),
                    };
                    warnings.push(Warning { path: None, message: format!("`{target}`: {message}") });
                }
            }
        }
        let message = match std::fs::remove_dir_all(e.path()) {
            Ok(()) => "removed, left by an interrupted build".to_owned(),
            Err(err) => format!("left by an interrupted build, and cannot be removed ({err}); delete it"),
        };
        warnings.push(Warning { path: None, message: format!("`{}`: {message}", e.path()) });
    }
    warnings
}

/// Prefix of the temporary directory a build assembles its variants in, inside `build/`.
const TMP_PREFIX: &str = ".kernel-builder-tmp-";

/// Rewrite `build/hashes.json` ([`crate::hash::manifest`]) with the NAR hashes of the
/// variants just built (see [`Manifest::update_in`] for the entries kept).
///
/// Returns one warning per planned variant left in `build/` that the new manifest does not
/// record (built from other sources, or never recorded): it may be stale, and `verify` checks it.
fn write_manifest(
    cells: &KernelCells,
    build_dir: &Utf8Path,
    built: &[BuiltVariant],
    planned: &[PlannedVariant],
    tree_id: &str,
) -> anyhow::Result<Vec<Warning>> {
    let names: Vec<String> = built.iter().map(|b| b.name.clone()).collect();
    let m = Manifest::for_bundle(build_dir, &names, tree_id)?.update_in(build_dir)?;
    let stale: Vec<&str> = planned
        .iter()
        .map(|p| p.name.as_str())
        .filter(|n| !m.variants.contains_key(*n) && build_dir.join(n).is_dir())
        .collect();
    let mut warnings: Vec<Warning> = stale
        .into_iter()
        .map(|n| Warning {
            path: None,
            message: format!(
                "`{build_dir}/{n}` is left from an earlier build and is not recorded in `{}` (it may come from other sources); rebuild it (`--variant {n}`) or remove it",
                crate::hash::manifest::FILE_NAME
            ),
        })
        .collect();
    for n in unplanned_variant_dirs(build_dir, planned, cells) {
        warnings.push(Warning {
            path: None,
            message: format!(
                "`{build_dir}/{n}` is a variant this kernel no longer builds (see `general.backends`), left from an earlier build; the `kernels` loader may still pick it: remove it"
            ),
        });
    }
    Ok(warnings)
}

/// The backend and the kind (`noarch`, `mlx-noarch`, `torch`, `stable-abi`, `tvm-ffi`) of the variant named
/// `name`, read from the name as the `kernels` loader does; `None` for a name it would not
/// recognise (or the legacy `torch-universal`).
pub fn variant_kind(name: &str) -> Option<(Backend, &'static str)> {
    use matrix::naming::{parse_variant_name, ParsedVariant};
    let (compute, kind) = match parse_variant_name(name)? {
        ParsedVariant::TorchArch { compute, .. } => (compute, "torch"),
        ParsedVariant::StableAbi { compute, .. } => (compute, "stable-abi"),
        ParsedVariant::TvmFfi { compute, .. } => (compute, "tvm-ffi"),
        ParsedVariant::Noarch { .. } => {
            let b = Backend::ALL.into_iter().find(|&b| matrix::naming::noarch_name(b) == name);
            return b.map(|b| (b, "noarch"));
        }
        ParsedVariant::MlxNoarch { backend } => {
            return Backend::from_name(&backend).map(|b| (b, "mlx-noarch"))
        }
    };
    matrix::naming::backend_of_compute(&compute).map(|b| (b, kind))
}

/// The directories of `build_dir` that look like variants (they hold a `metadata.json`), are
/// not among `planned`, and are of a backend and kind ([`variant_kind`]) that the kernel no
/// longer has in any of its `cells`: left from a build of an older `build.toml`. Sorted.
///
/// Not among them: a variant of a backend skipped on this host (no toolchain here: it is kept
/// as it was), and one of another torch, tvm-ffi or CUDA version, or of another system, of a
/// backend and kind the kernel still builds (a build with another toolchain made it).
pub fn unplanned_variant_dirs(
    build_dir: &Utf8Path,
    planned: &[PlannedVariant],
    cells: &KernelCells,
) -> Vec<String> {
    let kinds: BTreeSet<(Backend, &'static str)> =
        cells.in_scope(Scope::All).iter().filter_map(|c| variant_kind(&c.name)).collect();
    let Ok(rd) = build_dir.read_dir_utf8() else {
        return Vec::new();
    };
    let mut out: Vec<String> = rd
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            !name.starts_with('.')
                && !planned.iter().any(|p| p.name == name)
                && e.file_type().is_ok_and(|t| t.is_dir())
                && e.path().join("metadata.json").is_file()
                && !variant_kind(name).is_some_and(|k| kinds.contains(&k))
        })
        .map(|e| e.file_name().to_owned())
        .collect();
    out.sort();
    out
}

/// How one variant went into `build/`, so that it can be undone.
#[derive(Debug)]
enum Swapped {
    /// Exchanged atomically with the old `build/<v>`, which is now `new/<v>`.
    Exchanged(String),
    /// Moved into place where there was no old variant.
    Moved(String),
    /// Fallback (no `RENAME_EXCHANGE` on this filesystem): the old one moved to `old/<v>`,
    /// then the new one into place.
    TwoStep(String),
}

impl Swapped {
    fn name(&self) -> &str {
        match self {
            Swapped::Exchanged(n) | Swapped::Moved(n) | Swapped::TwoStep(n) => n,
        }
    }

    /// Put back what was there before; false when that failed.
    fn undo(&self, build_dir: &Utf8Path, new_dir: &Utf8Path, old_dir: &Utf8Path) -> bool {
        let target = build_dir.join(self.name());
        match self {
            Swapped::Exchanged(n) => exchange(&new_dir.join(n), &target).is_ok(),
            Swapped::Moved(n) => std::fs::rename(&target, new_dir.join(n)).is_ok(),
            Swapped::TwoStep(n) => {
                std::fs::remove_dir_all(&target).is_ok() && std::fs::rename(old_dir.join(n), &target).is_ok()
            }
        }
    }
}

/// Atomically exchange the two paths (`renameat2(RENAME_EXCHANGE)`): at every instant each
/// name holds one of the two whole trees.
fn exchange(a: &Utf8Path, b: &Utf8Path) -> std::io::Result<()> {
    rustix::fs::renameat_with(
        rustix::fs::CWD,
        a.as_std_path(),
        rustix::fs::CWD,
        b.as_std_path(),
        rustix::fs::RenameFlags::EXCHANGE,
    )
    .map_err(std::io::Error::from)
}

/// Put the new variant `new_dir/<name>` in place of `build_dir/<name>` so that, whenever the
/// process is killed, `build/<name>` is either the whole old variant or the whole new one:
///
/// - an old variant exists: one `renameat2(RENAME_EXCHANGE)`; the old one ends up in
///   `new_dir/<name>` and is removed with the temporary directory;
/// - no old variant: one `renameat2(RENAME_NOREPLACE)` (fails rather than replace a variant
///   that appeared meanwhile);
/// - a filesystem without `RENAME_EXCHANGE` (`EINVAL`, or no `renameat2` at all): the old one
///   is renamed to `old_dir/<name>` and the new one into place. A kill between the two leaves
///   the old variant in `old_dir`, from where the next build puts it back
///   ([`remove_leftover_tmp_dirs`]) before doing anything else.
fn swap_in(
    build_dir: &Utf8Path,
    new_dir: &Utf8Path,
    old_dir: &Utf8Path,
    name: &str,
) -> anyhow::Result<Swapped> {
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    let target = build_dir.join(name);
    let new = new_dir.join(name);
    let moved = |e: std::io::Error| {
        anyhow::Error::new(e).context(format!("cannot move the new `{name}` into `{build_dir}`"))
    };
    if std::fs::symlink_metadata(&target).is_err() {
        return match renameat_with(CWD, new.as_std_path(), CWD, target.as_std_path(), RenameFlags::NOREPLACE)
        {
            Ok(()) => Ok(Swapped::Moved(name.to_owned())),
            Err(e) if e == rustix::io::Errno::INVAL || e == rustix::io::Errno::NOSYS => {
                std::fs::rename(&new, &target).map_err(moved)?;
                Ok(Swapped::Moved(name.to_owned()))
            }
            Err(e) => Err(moved(e.into())),
        };
    }
    match exchange(&new, &target) {
        Ok(()) => Ok(Swapped::Exchanged(name.to_owned())),
        Err(e) if matches!(e.raw_os_error(), Some(code) if code == rustix::io::Errno::INVAL.raw_os_error() || code == rustix::io::Errno::NOSYS.raw_os_error()) =>
        {
            let aside = old_dir.join(name);
            std::fs::rename(&target, &aside).with_context(|| format!("cannot move `{target}` aside"))?;
            if let Err(e) = std::fs::rename(&new, &target) {
                let _ = std::fs::rename(&aside, &target);
                return Err(moved(e));
            }
            Ok(Swapped::TwoStep(name.to_owned()))
        }
        Err(e) => {
            Err(anyhow::Error::new(e).context(format!("cannot exchange `{target}` with the new `{name}`")))
        }
    }
}

/// What one cell of [`build_cells`] gave.
struct CellResult {
    /// The warnings of its build (replayed from the cache entry when reused), then the cache's.
    warnings: Vec<Warning>,
    reused: bool,
    /// What the compile cache did for it (`None`: reused, noarch, or the cache off).
    compiles: Option<crate::assemble::compiled::compile_cache::CompileStats>,
    parallel: Option<(crate::assemble::compiled::parallel::Plan, bool)>,
}

/// Build (or reuse) each of `selected` into `new_dir/<name>`, `options.jobs` cells at a time,
/// and return their results in the order of `selected`. Once a cell fails no further cell
/// starts (those running finish); the error is the first failed cell's in that order.
fn build_cells(
    source: &SourceSet,
    config: &BuildConfig,
    selected: &[PlannedVariant],
    ids: &BuildIds,
    new_dir: &Utf8Path,
    work: &WorkDir,
    options: &BuildOptions<'_>,
) -> anyhow::Result<Vec<CellResult>> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Mutex;

    let names: Vec<String> = selected.iter().map(|v| v.name.clone()).collect();
    options.progress.planned(&names);
    if let Some(note) = crate::assemble::progress::build_note(config, source.root(), selected) {
        options.progress.note(&note);
    }
    let jobs = options.jobs.clamp(1, selected.len().max(1));
    // Cells are taken in plan order, so every cell before a failed one has been started.
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let results: Vec<Mutex<Option<anyhow::Result<CellResult>>>> =
        selected.iter().map(|_| Mutex::new(None)).collect();
    let worker = || {
        while !failed.load(Ordering::SeqCst) {
            let i = next.fetch_add(1, Ordering::SeqCst);
            let Some(v) = selected.get(i) else { break };
            options.progress.started(&v.name);
            let r = crate::assemble::progress::with_steps(options.progress.steps(&v.name), || {
                build_one(source, config, v, ids, new_dir, work, options.cache)
            });
            let outcome = match &r {
                Ok(c) if c.reused => CellOutcome::Reused,
                Ok(_) => CellOutcome::Built,
                Err(_) => {
                    failed.store(true, Ordering::SeqCst);
                    CellOutcome::Failed
                }
            };
            options.progress.finished(&v.name, outcome);
            *results[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
        }
    };
    if jobs == 1 {
        worker();
    } else {
        std::thread::scope(|s| {
            for _ in 0..jobs {
                s.spawn(worker);
            }
        });
    }
    let mut out = Vec::with_capacity(selected.len());
    for (v, r) in selected.iter().zip(results) {
        match r.into_inner().unwrap_or_else(|p| p.into_inner()) {
            Some(Ok(c)) => out.push(c),
            Some(Err(e)) => return Err(e.context(format!("cannot build variant `{}`", v.name))),
            None => anyhow::bail!("variant `{}` was not built", v.name),
        }
    }
    Ok(out)
}

/// One cell into `new_dir/<name>`: from `cache` when it holds a sound entry for the cell's key,
/// else built (and then stored there).
fn build_one(
    source: &SourceSet,
    config: &BuildConfig,
    v: &PlannedVariant,
    ids: &BuildIds,
    new_dir: &Utf8Path,
    work: &WorkDir,
    cache: Option<&CellCache>,
) -> anyhow::Result<CellResult> {
    let dest = new_dir.join(&v.name);
    let mut warnings = Vec::new();
    // A key that cannot be computed means a fact of the cell is missing: the build says what.
    let cached = match cache {
        Some(c) => {
            check_python_depends(config, v.backend)?;
            CellKey::of(source, config, v, ids).ok().map(|k| (c, k))
        }
        None => None,
    };
    if let Some((cache, key)) = &cached {
        match cache.fetch(key, &v.name, &dest) {
            Fetched::Hit(w) => {
                return Ok(CellResult { warnings: w, reused: true, compiles: None, parallel: None })
            }
            Fetched::Miss => {}
            Fetched::Corrupt(why) => warnings.push(Warning {
                path: None,
                message: format!(
                    "the native cell cache entry `{}` for `{}` could not be used ({why}); it was removed and the cell rebuilt",
                    cache.entry_dir(key),
                    v.name
                ),
            }),
        }
    }
    let built = assemble_variant(
        source,
        config,
        v,
        ids,
        new_dir,
        work,
        crate::assemble::build_layout::layout_of(config),
    )?;
    if let Some((cache, key)) = &cached {
        if let Err(e) = cache.store(key, &v.name, &dest, &built.warnings) {
            warnings.push(Warning {
                path: None,
                message: format!("`{}` was not stored in the native cell cache: {e:#}", v.name),
            });
        }
    }
    warnings.extend(built.warnings);
    Ok(CellResult { warnings, reused: false, compiles: built.compiles, parallel: built.parallel })
}

/// The compile cache of the native cells among `selected` (`None` when none is one, or the
/// cache is off); when it cannot be had, a warning saying why and that the cells compile
/// without it.
fn compile_cache_for(
    selected: &[PlannedVariant],
    store: Option<&crate::toolchain::store::Store>,
    warnings: &mut Vec<Warning>,
) -> Option<crate::assemble::compiled::compile_cache::CompileCache> {
    let native: Vec<&CompiledCell> =
        selected.iter().filter_map(|v| v.cell.as_deref()).filter(|c| c.package_set.is_none()).collect();
    if native.is_empty() {
        return None;
    }
    // A host toolchain's sccache is looked for beside its Ninja, like CMake and Ninja.
    let near: Vec<Utf8PathBuf> =
        native.iter().filter_map(|c| c.ninja.path.parent().map(Utf8Path::to_owned)).collect();
    match crate::assemble::compiled::compile_cache::for_build(store, &near) {
        Ok(c) => c,
        Err(e) => {
            warnings.push(Warning {
                path: None,
                message: format!(
                    "the compile cache is not used for this build: {e:#} (set {}=off to say so)",
                    crate::env::COMPILE_CACHE.name
                ),
            });
            None
        }
    }
}

/// Prune the compile cache in `dir` to its bound; a warning when that fails. A build using it
/// at the same time (another process) leaves it for the next prune.
fn prune_compile_cache(dir: &Utf8Path) -> Vec<Warning> {
    use crate::assemble::compiled::compile_cache;
    let warn = |message: String| vec![Warning { path: None, message }];
    match compile_cache::max_bytes().and_then(|max| compile_cache::prune(dir, max, false)) {
        Ok(_) => Vec::new(),
        Err(e) => warn(format!("the compile cache `{dir}` was not pruned: {e:#}")),
    }
}

/// Prune `cache` to the bound of [`cellcache::build_max_bytes`]; a warning when that
/// fails.
fn prune_after_store(cache: &CellCache) -> Vec<Warning> {
    let warn = |message: String| vec![Warning { path: None, message }];
    let max = match cellcache::build_max_bytes() {
        Ok(n) => n,
        Err(e) => return warn(format!("{e}; the native cell cache was not pruned")),
    };
    match cache.prune(max) {
        Ok(_) => Vec::new(),
        Err(e) => warn(format!("the native cell cache was not pruned: {e:#}")),
    }
}

fn build_and_swap(
    source: &SourceSet,
    config: &BuildConfig,
    selected: &[PlannedVariant],
    ids: &BuildIds,
    build_dir: &Utf8Path,
    kernel_dir: &Utf8Path,
    options: &BuildOptions<'_>,
) -> anyhow::Result<(Vec<BuiltVariant>, Vec<Warning>, crate::interrupt::Hold)> {
    let tmp = tempfile::Builder::new()
        .prefix(TMP_PREFIX)
        .tempdir_in(build_dir)
        .with_context(|| format!("cannot create a temporary directory in `{build_dir}`"))?;
    let tmp_path = Utf8Path::from_path(tmp.path())
        .with_context(|| format!("the temporary directory in `{build_dir}` has a non-UTF-8 path"))?
        .to_owned();
    let _tmp_registered = crate::interrupt::remove_on_interrupt(&tmp_path, crate::interrupt::Removal::All);
    let new_dir = tmp_path.join("new");
    let old_dir = tmp_path.join("old");
    for d in [&new_dir, &old_dir] {
        std::fs::create_dir(d).with_context(|| format!("cannot create `{d}`"))?;
    }

    // Cells built at once share the cores and memory ([`crate::assemble::compiled::parallel`]).
    let cells_at_once = options.jobs.clamp(1, selected.len().max(1));
    let mut warnings = Vec::new();
    let compile_cache = compile_cache_for(selected, options.pinned, &mut warnings);
    let work = WorkDir::Cache {
        kernel_dir: kernel_dir.to_owned(),
        cells_at_once,
        compile_cache: compile_cache.clone(),
    };
    let cells = build_cells(source, config, selected, ids, &new_dir, &work, options)?;
    if let Some(c) = &compile_cache {
        warnings.extend(prune_compile_cache(&c.dir));
    }
    for c in &cells {
        warnings.extend(c.warnings.iter().cloned());
    }

    // Swap in, undoing on failure (see [`swap_in`]); an interruption waits for the swap.
    let swapping = crate::interrupt::hold();
    let mut done: Vec<Swapped> = Vec::new();
    for v in selected {
        match swap_in(build_dir, &new_dir, &old_dir, &v.name) {
            Ok(s) => done.push(s),
            Err(e) => {
                let not_restored: Vec<String> = done
                    .iter()
                    .rev()
                    .filter(|s| !s.undo(build_dir, &new_dir, &old_dir))
                    .map(|s| build_dir.join(s.name()).to_string())
                    .collect();
                if not_restored.is_empty() {
                    return Err(e);
                }
                return Err(e.context(format!(
                    "and these variants could not be restored to their previous state: {}",
                    not_restored.join(", ")
                )));
            }
        }
    }

    let built = selected
        .iter()
        .zip(&cells)
        .map(|(v, cell)| {
            let path = build_dir.join(&v.name);
            let files = walkdir::WalkDir::new(&path)
                .into_iter()
                .filter_map(Result::ok)
                .filter(|e| e.file_type().is_file())
                .count();
            let id = Some(op_namespace(source.python_name(), v.backend, &ids.uid));
            BuiltVariant {
                name: v.name.clone(),
                path,
                id,
                files,
                reused: cell.reused,
                compiles: cell.compiles.clone(),
                parallel: cell.parallel,
            }
        })
        .collect();
    // `tmp` (with the old variants) is removed here.
    tmp.close().with_context(|| format!("cannot remove the temporary directory `{tmp_path}`"))?;
    Ok((built, warnings, swapping))
}

/// The variants a pinned build makes: the noarch cells, every provisionable pinned bundle cell
/// (restricted to `requested` when it names any), and for backends without pins the cell of
/// `host` as [`plan`] plans it. Cells that cannot be provisioned are
/// [`Plan::skipped`], each naming its variant.
pub fn pinned_plan(
    config: &BuildConfig,
    cells: &KernelCells,
    requested: &[String],
    host: &HostToolchain,
    store: &crate::toolchain::store::Store,
) -> Plan {
    let mut variants = noarch_variants(cells);
    let mut skipped = Vec::new();
    for backend in compiled_backends(config) {
        if !crate::toolchain::provision::pinned_backend(config, backend) {
            match host_cell(config, cells, backend, host) {
                Ok(v) => variants.push(v),
                // Each bundle cell of this system the backend has is named (ROCm, XPU: no
                // toolchain of theirs is pinned yet); a backend with none here, once.
                Err(s) => {
                    let here = compiled_cells_here(cells, backend);
                    if here.is_empty() {
                        skipped.push(s);
                    } else {
                        skipped.extend(here.into_iter().map(|c| SkippedBackend {
                            backend,
                            variant: Some(c.name.clone()),
                            reason: s.reason.clone(),
                        }));
                    }
                }
            }
            continue;
        }
        for cell in crate::toolchain::provision::pinned_cells(config, cells, backend) {
            if !requested.is_empty() && !requested.contains(&cell.name) {
                continue;
            }
            let planned = crate::toolchain::provision::provision(cell, store, host.manylinux.clone())
                // `--cuda-capabilities` narrows a pinned cell as it narrows a host one.
                .map(|h| h.with_cuda_capabilities(host.cuda_capabilities_only.clone().unwrap_or_default()))
                // `--package-set` too: a native build given a Nix cell's compiler and set name
                // writes the cell's bytes.
                .map(|h| match &host.package_set {
                    Some(name) => h.with_package_set(name.clone(), host.hermetic),
                    None => h,
                })
                .and_then(|h| plan_cell(config, cells, backend, &h))
                .and_then(|c| {
                    if c.variant == cell.name {
                        Ok(c)
                    } else {
                        Err(format!(
                            "its pinned torch builds `{}` instead; fix its entry in {}",
                            c.variant,
                            crate::toolchain::pins::PINS_FILE
                        ))
                    }
                });
            match planned {
                Ok(c) => variants.push(PlannedVariant::compiled(c)),
                Err(reason) => {
                    skipped.push(SkippedBackend { backend, variant: Some(cell.name.clone()), reason })
                }
            }
        }
    }
    variants.sort_by(|a, b| a.name.cmp(&b.name));
    Plan { variants, skipped }
}

/// The compiled bundle cells of `backend` on this system.
fn compiled_cells_here(cells: &KernelCells, backend: Backend) -> Vec<&crate::matrix::Cell> {
    let system = crate::matrix::host_system();
    cells.on(&system, Scope::Bundle).filter(|c| !c.noarch && c.backend == backend).collect::<Vec<_>>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Backend::*;
    use crate::matrix::testutil::{noarch_config, torch_config, v};

    fn names(planned: &[PlannedVariant]) -> Vec<&str> {
        planned.iter().map(|p| p.name.as_str()).collect()
    }

    fn host() -> HostToolchain {
        HostToolchain::new("/nonexistent/python3")
    }

    #[test]
    fn noarch_variants_come_from_every_system() {
        // torch-metal only has cells on aarch64-darwin; torch-tpu is outside the bundle.
        let c = noarch_config(&[Cpu, Cuda, Metal, Rocm, Tpu, Xpu]);
        let planned = plan(&c, &KernelCells::of(&c), &host()).variants;
        assert_eq!(names(&planned), ["torch-cpu", "torch-cuda", "torch-metal", "torch-rocm", "torch-xpu"]);
        assert!(planned.iter().all(|p| !p.is_compiled()));
    }

    #[test]
    fn cuda_bounds_outside_the_matrix_leave_no_cuda_variant() {
        let mut c = noarch_config(&[Cuda, Rocm]);
        c.general.cuda.maxver = Some(v("11.8"));
        assert_eq!(names(&plan(&c, &KernelCells::of(&c), &host()).variants), ["torch-rocm"]);
    }

    /// Only a variant of a backend or kind the kernel no longer has is stale: not one of a
    /// backend skipped on this host, nor one of another torch or CUDA version or system.
    #[test]
    fn stale_variants_are_those_of_a_backend_or_kind_the_kernel_no_longer_has() {
        let c = torch_config(&[Cuda, Metal], &[Cuda]);
        let p = plan(&c, &KernelCells::of(&c), &host());
        assert_eq!(names(&p.variants), ["torch-metal"]);
        let t = tempfile::tempdir().unwrap();
        let build = Utf8Path::from_path(t.path()).unwrap();
        for d in [
            "torch-metal",
            // cuda: skipped here (no Python), still in `general.backends`.
            "torch211-cxx11-cu130-x86_64-linux",
            // an older torch and CUDA, another system.
            "torch27-cxx11-cu118-x86_64-linux",
            "torch211-cxx11-cu130-aarch64-linux",
            // no longer: a backend removed, a noarch cuda variant, other kinds of cuda cells.
            "torch211-cxx11-rocm71-x86_64-linux",
            "torch-xpu",
            "torch-cuda",
            "torch-stable-abi211-cu130-x86_64-linux",
            "tvm-ffi01-cu130-x86_64-linux",
        ] {
            std::fs::create_dir(build.join(d)).unwrap();
            std::fs::write(build.join(d).join("metadata.json"), "{}").unwrap();
        }
        assert_eq!(
            unplanned_variant_dirs(build, &p.variants, &KernelCells::of(&c)),
            [
                "torch-cuda",
                "torch-stable-abi211-cu130-x86_64-linux",
                "torch-xpu",
                "torch211-cxx11-rocm71-x86_64-linux",
                "tvm-ffi01-cu130-x86_64-linux",
            ]
        );
    }

    #[test]
    fn compiled_backends_without_a_toolchain_are_skipped_with_the_reason() {
        let c = torch_config(&[Cuda, Metal], &[Cuda]);
        let p = plan(&c, &KernelCells::of(&c), &host());
        assert_eq!(names(&p.variants), ["torch-metal"]);
        assert_eq!(p.skipped.len(), 1);
        assert_eq!(p.skipped[0].backend, Cuda);
        assert!(
            p.skipped[0].reason.starts_with("cannot run the Python interpreter `/nonexistent/python3`"),
            "{}",
            p.skipped[0].reason
        );
        let cells = KernelCells::of(&c);
        let why = why_not_buildable(&c, &cells, &p, "torch212-cxx11-cu126-x86_64-linux").unwrap();
        assert!(
            why.starts_with("cannot build `torch212-cxx11-cu126-x86_64-linux` natively: cannot run"),
            "{why}"
        );
        assert_eq!(why_not_buildable(&c, &cells, &p, "torch-metal"), None);
    }

    /// A planned tvm-ffi cell `variant` of `backend`, built with nvcc `nvcc` (CUDA cells).
    fn tvm_ffi_planned(variant: &str, backend: crate::config::Backend, nvcc: Option<&str>) -> PlannedVariant {
        let facts = crate::toolchain::tvm_ffi::TvmFfiFacts {
            version: "0.1.15".into(),
            package_dir: "/sp/tvm_ffi".into(),
            purelib: "/sp".into(),
            executable: "/venv/bin/python".into(),
            python_version: "3.11".into(),
        };
        let cell = CompiledCell::tvm_ffi_for_tests(variant, backend, facts, nvcc, &["k"]);
        PlannedVariant { name: variant.into(), backend, cell: Some(Box::new(cell)) }
    }

    /// A tvm-ffi variant of another CUDA than the nvcc found: the fix is the nvcc (CUDACXX), not
    /// `--python` (tvm_ffi does not decide the CUDA); the tvm-ffi tag alone keeps `--python`.
    #[test]
    fn a_tvm_ffi_variant_of_another_cuda_says_to_point_cudacxx_at_its_nvcc() {
        let c = crate::matrix::testutil::tvm_ffi_config(&[Cpu, Cuda], &[Cpu, Cuda]);
        let p = Plan {
            variants: vec![
                tvm_ffi_planned("tvm-ffi01-cpu-x86_64-linux", Cpu, None),
                tvm_ffi_planned("tvm-ffi01-cu130-x86_64-linux", Cuda, Some("13.0.88")),
            ],
            skipped: Vec::new(),
        };
        let cells = KernelCells::of(&c);
        assert_eq!(
            why_not_buildable(&c, &cells, &p, "tvm-ffi01-cu126-x86_64-linux").unwrap(),
            "cannot build `tvm-ffi01-cu126-x86_64-linux` natively: the nvcc found here (`/cuda/bin/nvcc`, CUDA 13.0.88) builds `tvm-ffi01-cu130-x86_64-linux`; a tvm-ffi variant takes its CUDA from nvcc, so point CUDACXX (or CUDA_HOME, or PATH) at an nvcc of CUDA 12.6, or build it through Nix"
        );
        assert_eq!(
            why_not_buildable(&c, &cells, &p, "tvm-ffi02-cu132-x86_64-linux").unwrap(),
            "cannot build `tvm-ffi02-cu132-x86_64-linux` natively: the nvcc found here (`/cuda/bin/nvcc`, CUDA 13.0.88) builds `tvm-ffi01-cu130-x86_64-linux`; a tvm-ffi variant takes its CUDA from nvcc, so point CUDACXX (or CUDA_HOME, or PATH) at an nvcc of CUDA 13.2 and pass --python with a Python environment whose tvm-ffi is 0.2, or build it through Nix"
        );
        // Same CUDA, another tvm-ffi; and the CPU cell: the Python environment decides.
        for (name, built) in [
            ("tvm-ffi02-cu130-x86_64-linux", "tvm-ffi01-cu130-x86_64-linux"),
            ("tvm-ffi02-cpu-x86_64-linux", "tvm-ffi01-cpu-x86_64-linux"),
        ] {
            assert_eq!(
                why_not_buildable(&c, &cells, &p, name).unwrap(),
                format!("cannot build `{name}` natively: the toolchain here (tvm-ffi 0.1.15 from the Python environment given) builds `{built}`; pass --python with a Python environment whose tvm-ffi gives `{name}`, or build it through Nix")
            );
        }
    }

    #[test]
    fn select_keeps_plan_order_and_refuses_unknown_names() {
        let c = noarch_config(&[Cuda, Rocm, Xpu]);
        let planned = plan(&c, &KernelCells::of(&c), &host()).variants;
        let picked = select(&planned, &["torch-xpu".into(), "torch-cuda".into()]).unwrap();
        assert_eq!(names(&picked), ["torch-cuda", "torch-xpu"]);
        assert_eq!(names(&select(&planned, &[]).unwrap()), ["torch-cuda", "torch-rocm", "torch-xpu"]);
        let err = select(&planned, &["torch-cpu".into(), "cuda".into()]).unwrap_err().to_string();
        assert_eq!(
            err,
            "unknown variants `torch-cpu`, `cuda`; this kernel's variants are: torch-cuda, torch-rocm, torch-xpu; did you mean `torch-xpu`?"
        );
        let err = select(&planned, &["torch-metal".into()]).unwrap_err().to_string();
        assert!(err.ends_with("torch-rocm, torch-xpu"), "no near miss, no suggestion: {err}");
    }
}
