//! The `build/` transaction (see the module doc of [`super`]): the variants are built into a
//! temporary directory inside `build/`, then each is swapped in with one atomic exchange,
//! undone when a swap fails; what a killed run left is restored or removed by the next one;
//! the manifest is rewritten after the swaps.

use anyhow::Context;
use camino::Utf8Path;

use super::plan::unplanned_variant_dirs;
use super::pool::{build_cells, compile_cache_for, prune_compile_cache};
use super::{BuildOptions, BuiltVariant};
use crate::assemble::compiled::{PlannedVariant, WorkDir};
use crate::assemble::noarch::op_namespace;
use crate::config::BuildConfig;
use crate::hash::manifest::Manifest;
use crate::matrix::KernelCells;
use crate::source::provenance::BuildIds;
use crate::source::{SourceSet, Warning};

/// Remove the `.kernel-builder-tmp-*` directories that a killed build left in `build_dir`
/// (call it holding the exclusive lock); one warning per directory removed or not removable.
pub(super) fn remove_leftover_tmp_dirs(build_dir: &Utf8Path) -> Vec<Warning> {
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
pub(super) const TMP_PREFIX: &str = ".kernel-builder-tmp-";

/// Rewrite `build/hashes.json` ([`crate::hash::manifest`]) with the NAR hashes of the
/// variants just built (see [`Manifest::update_in`] for the entries kept).
///
/// Returns one warning per planned variant left in `build/` that the new manifest does not
/// record (built from other sources, or never recorded): it may be stale, and `verify` checks it.
pub(super) fn write_manifest(
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

pub(super) fn build_and_swap(
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
    let compile_cache = compile_cache_for(selected, options.pinned, &mut warnings)?;
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
                phases: cell.phases,
            }
        })
        .collect();
    // `tmp` (with the old variants) is removed here.
    tmp.close().with_context(|| format!("cannot remove the temporary directory `{tmp_path}`"))?;
    Ok((built, warnings, swapping))
}
