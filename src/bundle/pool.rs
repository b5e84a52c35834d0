//! The cells of a build, built (or taken from the native cell cache) by `jobs` threads in plan
//! order; what comes out is gathered in plan order, so the result does not depend on `jobs`.

use camino::{Utf8Path, Utf8PathBuf};

use super::cellcache::{CellCache, CellKey, Fetched};
use super::{BuildOptions, CellOutcome};
use crate::assemble::compiled::{CompiledCell, PlannedVariant, WorkDir};
use crate::assemble::{assemble_variant, check_python_depends};
use crate::config::BuildConfig;
use crate::source::provenance::BuildIds;
use crate::source::{SourceSet, Warning};

/// What one cell of [`build_cells`] gave.
pub(super) struct CellResult {
    /// The warnings of its build (replayed from the cache entry when reused), then the cache's.
    pub(super) warnings: Vec<Warning>,
    pub(super) reused: bool,
    /// What the compile cache did for it (`None`: reused, noarch, or the cache off).
    pub(super) compiles: Option<crate::assemble::compiled::compile_cache::CompileStats>,
    pub(super) parallel: Option<(crate::assemble::compiled::parallel::Plan, bool)>,
    pub(super) phases: Option<crate::assemble::compiled::Phases>,
}

/// Build (or reuse) each of `selected` into `new_dir/<name>`, `options.jobs` cells at a time,
/// and return their results in the order of `selected`. Once a cell fails no further cell
/// starts (those running finish); the error is the first failed cell's in that order.
pub(super) fn build_cells(
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
pub(super) fn build_one(
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
                return Ok(CellResult { warnings: w, reused: true, compiles: None, parallel: None, phases: None })
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
    Ok(CellResult {
        warnings,
        reused: false,
        compiles: built.compiles,
        parallel: built.parallel,
        phases: built.phases,
    })
}

/// The compile cache of the native cells among `selected` (`None` when none is one, or the
/// cache is off); when it cannot be had, a warning saying why and that the cells compile
/// without it.
///
/// Errors: distributed compiles asked for (`KERNEL_BUILDER_COMPILE_DIST`) and not possible as
/// set: a heavy cell compiled here instead would take hours where its author expected minutes.
pub(super) fn compile_cache_for(
    selected: &[PlannedVariant],
    store: Option<&crate::toolchain::store::Store>,
    warnings: &mut Vec<Warning>,
) -> anyhow::Result<Option<crate::assemble::compiled::compile_cache::CompileCache>> {
    use crate::assemble::compiled::compile_cache;
    let native: Vec<&CompiledCell> =
        selected.iter().filter_map(|v| v.cell.as_deref()).filter(|c| c.package_set.is_none()).collect();
    if native.is_empty() {
        return Ok(None);
    }
    let dist = compile_cache::dist_setting()?;
    // A host toolchain's sccache is looked for beside its Ninja, like CMake and Ninja.
    let near: Vec<Utf8PathBuf> =
        native.iter().filter_map(|c| c.ninja.path.parent().map(Utf8Path::to_owned)).collect();
    Ok(match compile_cache::for_build(store, &near) {
        Ok(c) => c,
        Err(e) if dist.is_some() => return Err(e),
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
    })
}

/// Prune the compile cache in `dir` to its bound; a warning when that fails. A build using it
/// at the same time (another process) leaves it for the next prune.
pub(super) fn prune_compile_cache(dir: &Utf8Path) -> Vec<Warning> {
    use crate::assemble::compiled::compile_cache;
    let warn = |message: String| vec![Warning { path: None, message }];
    match compile_cache::max_bytes().and_then(|max| compile_cache::prune(dir, max, false)) {
        Ok(_) => Vec::new(),
        Err(e) => warn(format!("the compile cache `{dir}` was not pruned: {e:#}")),
    }
}
