//! `verify`: rebuild variants in a scratch directory and compare them with what `DIR/build/`
//! holds and what `DIR/build/hashes.json` records.
//!
//! A variant is *same* when its rebuild's NAR hash equals both the hash recorded in the
//! manifest (when there is one) and the NAR hash of `build/<variant>` on disk. Otherwise it is
//! *different*, and the report names the first path (in NAR order) where the tree on disk
//! differs from the rebuild ([`crate::hash::tree_diff`]: missing, unexpected, another kind,
//! the execute bit, the bytes), with a short diff of that file's contents.
//!
//! The rebuild uses the provenance recorded in the variant's `metadata.json` on disk
//! (`provenance.kernel`), as a Nix rebuild uses the revision it is given: what is checked is
//! that the *sources* build to the published bytes, not that the work tree still sits on the
//! same commit. A variant with no readable `metadata.json` is rebuilt with the current git
//! state.
//!
//! The scratch directory (`$TMPDIR/kernel-builder-verify-*`) and each cell's work directory
//! (`$TMPDIR/kernel-builder-cell-*`) are removed afterwards, and also when the process is
//! interrupted (SIGINT, SIGTERM, SIGHUP: the compile is stopped and the exit status is
//! `128 + signal`, as for `build-and-copy`; [`crate::interrupt`]).

use anyhow::Context;
use camino::Utf8Path;

use super::{lock_dir, why_not_buildable, Lock, Plan};
use crate::assemble::assemble_variant;
use crate::assemble::compiled::{PlannedVariant, WorkDir};
use crate::config::BuildConfig;
use crate::hash::manifest::{self, Manifest};
use crate::hash::tree_diff::{self, TreeDifference};
use crate::matrix::KernelCells;
use crate::source::provenance::{git_revision, BuildIds, KernelRevision};
use crate::source::SourceSet;
use crate::toolchain::host::HostToolchain;

/// The outcome for one variant (also its `verify --json` form).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct VariantCheck {
    pub name: String,
    /// NAR hash (SRI) of the rebuild.
    pub rebuilt: String,
    /// NAR hash of `build/<name>` on disk; `None` when it is missing.
    pub on_disk: Option<String>,
    /// The hash the manifest records; `None` without a manifest or entry.
    pub recorded: Option<String>,
    /// Why it is different; `None` when it is the same.
    pub difference: Option<String>,
}

impl VariantCheck {
    /// True when the rebuild matches the tree on disk and the manifest.
    pub fn is_same(&self) -> bool {
        self.difference.is_none()
    }
}

/// The whole verification (also the `verify --json` document).
#[derive(Debug, Clone, serde::Serialize)]
pub struct VerifyReport {
    /// Per variant, sorted by name.
    pub variants: Vec<VariantCheck>,
    /// Notes that apply to the bundle (no manifest; the manifest's source differs), then what
    /// the rebuilt cells leave out ([`crate::assemble::compiled::CompiledCell::notes`]).
    pub notes: Vec<String>,
}

/// Rebuild and compare the variants of the kernel in `kernel_dir` named in `requested`; when
/// empty, those in the manifest and the planned variants present in `build/`, each with the
/// toolchain that built it ([`super::Toolchains`], chosen here by [`super::choose_toolchains`] from
/// `request`: cells built from pinned wheels from the same pins, with `--python` the cells that
/// Python's torch builds with it).
///
/// Errors: the toolchain cache cannot be opened, no `build/` to verify, an unknown variant
/// (the valid ones are listed), a manifest that cannot be read, or a failed rebuild.
pub fn verify(
    kernel_dir: &Utf8Path,
    config: &BuildConfig,
    cells: &KernelCells,
    requested: &[String],
    host: &HostToolchain,
    request: &super::ToolchainRequest,
) -> anyhow::Result<VerifyReport> {
    // Its rebuilds run Ninja: a bad `KERNEL_BUILDER_JOBS` fails before any of them.
    crate::assemble::compiled::jobs_from_env()?;
    let toolchains = &super::choose_toolchains(config, request)?;
    // Cells built from pinned wheels are rebuilt from the same pins (those requested, or those
    // recorded in the manifest or present in build/).
    verify_with(kernel_dir, config, cells, requested, &|build_dir, manifest| {
        let present = |name: &str| {
            manifest.is_some_and(|m| m.variants.contains_key(name)) || build_dir.join(name).is_dir()
        };
        Plan::new(config, cells, host, toolchains, requested, &present)
    })
}

/// [`verify`] of the variants of `plan`, the plan the command built them from
/// (`build-and-upload`).
pub fn verify_planned(
    kernel_dir: &Utf8Path,
    config: &BuildConfig,
    cells: &KernelCells,
    requested: &[String],
    plan: &Plan,
) -> anyhow::Result<VerifyReport> {
    verify_with(kernel_dir, config, cells, requested, &|_, _| plan.clone())
}

/// [`verify`], planned by `plan_of` (given `build/` and its manifest, read under the lock).
fn verify_with(
    kernel_dir: &Utf8Path,
    config: &BuildConfig,
    cells: &KernelCells,
    requested: &[String],
    plan_of: &dyn Fn(&Utf8Path, Option<&Manifest>) -> Plan,
) -> anyhow::Result<VerifyReport> {
    let build_dir = kernel_dir.join("build");
    anyhow::ensure!(
        build_dir.is_dir(),
        "`{build_dir}` does not exist; build the kernel first (`kernel-builder build-and-copy`)"
    );
    // No build may swap variants while they are compared.
    let _lock = lock_dir(&build_dir, Lock::Shared)?;
    let manifest_path = build_dir.join(manifest::FILE_NAME);
    let manifest = if manifest_path.is_file() { Some(Manifest::read(&manifest_path)?) } else { None };
    // A variant asked for that build/ lacks has nothing to be compared with: said before its
    // toolchain is fetched and it is rebuilt, not after.
    let absent: Vec<&String> = requested
        .iter()
        .filter(|n| {
            !build_dir.join(n).is_dir() && !manifest.as_ref().is_some_and(|m| m.variants.contains_key(*n))
        })
        .collect();
    super::plan::known_here(cells, &absent).map_err(|e| crate::error::prefixed("cannot verify", e))?;
    if !absent.is_empty() {
        anyhow::bail!(
            "cannot verify {}: not in `{build_dir}` nor in its hashes.json, so there is nothing to compare a rebuild with; build it first (`kernel-builder build-and-copy --variant …`)",
            absent.iter().map(|u| format!("`{u}`")).collect::<Vec<_>>().join(", ")
        );
    }
    let the_plan = plan_of(&build_dir, manifest.as_ref());
    let planned = the_plan.variants.clone();

    let mut names: Vec<String> = if !requested.is_empty() {
        requested.to_vec()
    } else if let Some(m) = &manifest {
        // The recorded variants, and any other variant of this kernel present in build/ (one
        // built from other sources is no longer recorded: it must not pass unseen).
        let mut names: Vec<String> = m.variants.keys().cloned().collect();
        for p in &planned {
            if !m.variants.contains_key(&p.name) && build_dir.join(&p.name).is_dir() {
                names.push(p.name.clone());
            }
        }
        names
    } else {
        planned.iter().filter(|p| build_dir.join(&p.name).is_dir()).map(|p| p.name.clone()).collect()
    };
    // A cell present in build/ that cannot be had here (its pinned wheel not in the cache with
    // --offline) says why, rather than vanishing from what is verified.
    for s in the_plan.skipped.iter().filter_map(|s| s.variant.as_ref()) {
        if !names.contains(s) && build_dir.join(s).is_dir() {
            names.push(s.clone());
        }
    }
    let unknown: Vec<&String> = names.iter().filter(|n| !planned.iter().any(|p| &p.name == *n)).collect();
    if let Some(why) = unknown.iter().find_map(|u| why_not_buildable(config, cells, &the_plan, u)) {
        anyhow::bail!("cannot verify: {why}");
    }
    if !unknown.is_empty() {
        // Listed as a build lists them: skipped cells apart, pinned ones not planned as variants.
        let (unplanned, not_here) = super::plan::unplanned_and_skipped(cells, &the_plan);
        let e = super::plan::unknown_variants(&planned, &unknown, &unplanned, &not_here);
        return Err(crate::error::prefixed("cannot verify", e));
    }
    anyhow::ensure!(!names.is_empty(), "`{build_dir}` holds no variant of this kernel to verify");
    let source = SourceSet::collect(kernel_dir, config)?;
    let mut notes = Vec::new();
    match &manifest {
        None => notes.push(format!("no `{manifest_path}`: comparing with the trees on disk only")),
        Some(m) if m.source != source.tree_id() => notes.push(format!(
            "the sources changed since the build: the manifest records source {}, the sources now are {}",
            m.source,
            source.tree_id()
        )),
        Some(_) => {}
    }

    let scratch = tempfile::Builder::new()
        .prefix("kernel-builder-verify-")
        .tempdir()
        .context("cannot create a scratch directory")?;
    let scratch_dir =
        Utf8Path::from_path(scratch.path()).context("the scratch directory has a non-UTF-8 path")?.to_owned();
    // Interrupted (Ctrl-C, SIGTERM, SIGHUP): the scratch directory is removed, the rebuild's
    // CMake or Ninja is stopped, and the exit status is 128 + signal ([`crate::interrupt`]).
    let _scratch_registered =
        crate::interrupt::remove_on_interrupt(&scratch_dir, crate::interrupt::Removal::All);
    let current = git_revision(kernel_dir)?;

    let mut out = Vec::new();
    for name in names {
        let Some(variant) = planned.iter().find(|p| p.name == name) else {
            continue;
        };
        let on_disk_dir = build_dir.join(&name);
        let kernel = recorded_revision(&on_disk_dir).unwrap_or_else(|| current.clone());
        let ids = BuildIds { uid: source.uid(), kernel };
        let variant_scratch = scratch_dir.join(format!("{}", out.len()));
        std::fs::create_dir(&variant_scratch)
            .with_context(|| format!("cannot create `{variant_scratch}`"))?;
        rebuild(&source, config, variant, &ids, &variant_scratch)
            .with_context(|| format!("cannot rebuild variant `{name}`"))?;
        notes.extend(variant.cell.iter().flat_map(|c| c.notes.iter().cloned()));
        let rebuilt_dir = variant_scratch.join(&name);
        out.push(check_one(&name, &rebuilt_dir, &on_disk_dir, manifest.as_ref())?);
    }
    if requested.is_empty() {
        // A variant the sources no longer build (a backend removed since) is not what they
        // produce, and the loader may still pick it.
        for name in super::unplanned_variant_dirs(&build_dir, &planned, cells) {
            out.push(VariantCheck {
                difference: Some(format!(
                    "this kernel does not build `{name}` (see `general.backends`): `{build_dir}/{name}` is left from an earlier build; remove it"
                )),
                name,
                rebuilt: String::new(),
                on_disk: None,
                recorded: None,
            });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(VerifyReport { variants: out, notes })
}

fn rebuild(
    source: &SourceSet,
    config: &BuildConfig,
    variant: &PlannedVariant,
    ids: &BuildIds,
    out: &Utf8Path,
) -> anyhow::Result<()> {
    let layout = crate::assemble::build_layout::layout_of(config);
    assemble_variant(source, config, variant, ids, out, &WorkDir::Fresh, layout).map(|_| ())
}

/// `provenance.kernel` of the `metadata.json` in `variant_dir`: `Some(None)` when the file says
/// there is none, `None` when the file cannot be read.
fn recorded_revision(variant_dir: &Utf8Path) -> Option<Option<KernelRevision>> {
    let text = std::fs::read_to_string(variant_dir.join("metadata.json")).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    let Some(kernel) = json.get("provenance").and_then(|p| p.get("kernel")) else {
        return Some(None);
    };
    let commit = kernel.get("commit").or_else(|| kernel.get("sha"))?.as_str()?;
    let dirty = kernel.get("dirty").and_then(|d| d.as_bool()).unwrap_or(false);
    KernelRevision::new(commit, dirty).ok().map(Some)
}

fn sri_of(dir: &Utf8Path) -> anyhow::Result<String> {
    crate::hash::variant_nar_hash_sri(dir.as_std_path()).with_context(|| format!("cannot hash `{dir}`"))
}

fn check_one(
    name: &str,
    rebuilt_dir: &Utf8Path,
    on_disk_dir: &Utf8Path,
    manifest: Option<&Manifest>,
) -> anyhow::Result<VariantCheck> {
    let rebuilt = sri_of(rebuilt_dir)?;
    let on_disk = if on_disk_dir.is_dir() { Some(sri_of(on_disk_dir)?) } else { None };
    let recorded = manifest.and_then(|m| m.variants.get(name).cloned());

    let mut reasons = Vec::new();
    match &on_disk {
        None => reasons.push(format!("`{on_disk_dir}` is missing")),
        Some(h) if *h != rebuilt => {
            reasons.push(first_difference(on_disk_dir, rebuilt_dir)?.unwrap_or_else(|| {
                format!("the NAR hashes differ (on disk {h}, rebuilt {rebuilt}) but no file does")
            }))
        }
        Some(_) => {}
    }
    match (&recorded, manifest) {
        (Some(r), _) if *r != rebuilt => {
            reasons.push(format!("{} records {r}, the rebuild is {rebuilt}", manifest::FILE_NAME))
        }
        (None, Some(_)) => reasons.push(format!("{} has no entry for `{name}`", manifest::FILE_NAME)),
        _ => {}
    }
    let difference = if reasons.is_empty() { None } else { Some(reasons.join("\n")) };
    Ok(VariantCheck { name: name.to_owned(), rebuilt, on_disk, recorded, difference })
}

/// The first path, in NAR order, where `on_disk` differs from `rebuilt` (the rebuild is the
/// expectation, [`crate::hash::tree_diff`]), with a short diff of a file's contents.
fn first_difference(on_disk: &Utf8Path, rebuilt: &Utf8Path) -> anyhow::Result<Option<String>> {
    let diff = tree_diff::first_variant_difference(rebuilt.as_std_path(), on_disk.as_std_path())
        .with_context(|| format!("cannot compare `{on_disk}` with its rebuild"))?;
    let Some(diff) = diff else { return Ok(None) };
    let mut msg = format!("first difference: {diff}");
    if let TreeDifference::Contents { path, offset, .. } = &diff {
        let (expected, actual) = (rebuilt.as_std_path().join(path), on_disk.as_std_path().join(path));
        let excerpt = tree_diff::contents_excerpt(&expected, &actual, *offset)
            .with_context(|| format!("cannot compare `{}` with its rebuild", actual.display()))?;
        // An archive (the zip layout) differs in compressed bytes: name the entry instead.
        let zip_entry = path.extension().is_some_and(|e| e == "zip").then(|| {
            let (e, a) = (Utf8Path::from_path(&expected)?, Utf8Path::from_path(&actual)?);
            crate::assemble::build_layout::first_entry_difference(e, a, 64 << 20)
        });
        if let Some(Some(entry)) = zip_entry {
            msg.push_str(&format!(" ({entry} on disk)"));
        } else {
            msg.push_str(" (- rebuilt, + on disk)");
            for line in excerpt.lines() {
                msg.push_str("\n  ");
                msg.push_str(line);
            }
        }
    }
    Ok(Some(msg))
}
