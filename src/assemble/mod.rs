//! One variant directory from a kernel's sources: what a cell builds, natively or as the
//! builder inside a Nix derivation.
//!
//! The pieces, in the order data flows through them (the source set and its provenance are
//! [`crate::source`]; the toolchain found is [`crate::toolchain::host`]; a bundle of variants
//! in `DIR/build/`, written all-or-nothing, is [`crate::bundle`]):
//!
//! - [`noarch`]: one flat noarch variant directory (`torch-<backend>/`): the package files,
//!   `_ops.py` and `metadata.json` ([`metadata`], with `kernels-minver` from [`loader`]);
//! - [`compiled`]: compiled (`[torch]` and `[tvm-ffi]`) variants, built natively for the cell
//!   the toolchain gives ([`compiled::plan`] decides the cell, CMake and Ninja build it);
//!   [`stable_abi`]: what a torch stable-ABI cell compiles and links against (the C shim
//!   only); [`tvm_ffi`]: what a tvm-ffi cell compiles and links against and its `_ops.py`;
//!   [`parity`]: what upstream's generated build does implicitly; [`workdirs`]: the CMake
//!   work directories kept in the user's cache; [`progress`]: Ninja's counters as they come;
//! - [`assemble_variant`]: one planned variant into a directory; [`assemble_one`]: the hidden
//!   `kernel-builder assemble` a Nix cell runs over its filtered source.
//!
//! The native path (`kernel-builder build-and-copy --nix never`) and the Nix path (a cell's
//! derivation runs `kernel-builder assemble` over its filtered source) call the same
//! [`assemble_variant`], and the unique id depends only on the source set's content, so both
//! paths write the same bytes for the same source and provenance.

pub mod build_layout;
pub mod compiled;
pub mod loader;
pub mod metadata;
pub mod noarch;
pub mod not_yet;
pub mod parity;
pub mod progress;
pub mod record;
pub mod stable_abi;
pub mod static_symbols;
pub mod symbols;
pub mod tvm_ffi;
pub mod workdirs;
pub mod write;

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};

use crate::config::{deps, Backend, BuildConfig};
pub use crate::source::provenance::{BuildIds, KernelRevision};
pub use crate::source::{SourceSet, Warning};
use crate::toolchain::host::HostToolchain;
pub use build_layout::BuildLayout;
use compiled::{build_cell, plan_cell, PlannedVariant, WorkDir};
use noarch::assemble_noarch;

/// Check that every name of `backend`'s `python-depends` is a known dependency (the general
/// table, or that backend's table), as the `kernels` loader will (A9).
pub fn check_python_depends(config: &BuildConfig, backend: Backend) -> anyhow::Result<()> {
    let unknown: Vec<String> = config
        .general
        .python_depends_for(backend)
        .into_iter()
        .filter(|n| {
            deps::python_dependency(n, None).is_none() && deps::python_dependency(n, Some(backend)).is_none()
        })
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    let mut known: Vec<&str> = deps::python_dependency_names(None).unwrap_or_default();
    known.extend(deps::python_dependency_names(Some(backend)).unwrap_or_default());
    anyhow::bail!(
        "unknown Python dependenc{} {} for `{backend}` in `{}`; the `kernels` loader refuses to load such a variant. Known for `{backend}`: {}",
        if unknown.len() == 1 { "y" } else { "ies" },
        unknown.iter().map(|u| format!("`{u}`")).collect::<Vec<_>>().join(", "),
        config.path,
        known.join(", ")
    )
}

/// Write one planned variant into `out_dir/<name>/` (noarch, or compiled in `work`), its
/// files laid out as `layout` says (callers take it from [`build_layout::layout_of`]).
pub fn assemble_variant(
    source: &SourceSet,
    config: &BuildConfig,
    variant: &PlannedVariant,
    ids: &BuildIds,
    out_dir: &Utf8Path,
    work: &WorkDir,
    layout: BuildLayout,
) -> anyhow::Result<compiled::CellBuilt> {
    let dest = out_dir.join(&variant.name);
    // Read and planned, but not built here yet: say which toolchain it needs.
    if variant.cell.is_some() {
        if let Some(refusal) = not_yet::NotYet::for_backend(config, variant.backend) {
            return Err(crate::error::Error::from(refusal).into());
        }
    }
    check_python_depends(config, variant.backend)?;
    let built = match &variant.cell {
        Some(cell) => build_cell(source, config, cell, ids, &dest, work, layout)?,
        None => assemble_noarch(source, config, variant.backend, ids, &dest, layout)
            .map(|warnings| compiled::CellBuilt { warnings, compiles: None, parallel: None, phases: None })?,
    };
    record::record(&dest)?;
    Ok(built)
}

/// Assemble the variant of `backend` of the kernel in `source` (read as `config`) into
/// `out/<variant>/`; `out` is created when missing. A noarch backend gives `torch-<backend>`, a
/// compiled one the cell the toolchain `host` builds, in a fresh work directory (never the
/// cell cache: a Nix cell builds from scratch). `kernel` is the revision recorded in
/// `provenance.kernel`; `layout` overrides the kernel's build layout ([`build_layout::layout_of`]).
/// Each warning (about the sources, then about the variant) is passed to
/// `on_warning` as soon as it is known. Returns `out/<variant>`.
///
/// Errors: the backend is not in `general.backends` or cannot be built with `host` (the
/// reason names what is missing); `expect_variant` is given and the toolchain builds another
/// variant (both are named); a source, layout or build failure. Nothing is left behind: `out`
/// when this call created it, else the partly written variant.
#[allow(clippy::too_many_arguments)] // one per `assemble` flag; a struct would only rename them
pub fn assemble_one(
    source: &Utf8Path,
    config: &BuildConfig,
    cells: &crate::matrix::KernelCells,
    backend: Backend,
    out: &Utf8Path,
    kernel: Option<KernelRevision>,
    host: &HostToolchain,
    expect_variant: Option<&str>,
    layout: Option<BuildLayout>,
    on_warning: &mut dyn FnMut(&Warning),
) -> anyhow::Result<Utf8PathBuf> {
    let cfg = config;
    let variant = if cfg.is_noarch_for(backend) {
        PlannedVariant::noarch(noarch::variant_name(cfg, backend), backend)
    } else {
        anyhow::ensure!(
            cfg.general.backends.contains(&backend),
            "cannot build `{backend}`: it is not in `general.backends` of `{}`",
            cfg.path
        );
        // One line, the reason after the backend, as a skipped backend's reason reads.
        let cell = plan_cell(cfg, cells, backend, host)
            .map_err(|e| anyhow::anyhow!("cannot build `{backend}`: {e:#}"))?;
        PlannedVariant::compiled(cell)
    };
    if let Some(want) = expect_variant {
        anyhow::ensure!(
            variant.name == want,
            "the toolchain given builds `{}`, not the expected `{want}` ({} from `{}`); give this cell a toolchain whose torch (or tvm-ffi), backend version and system name it",
            variant.name,
            variant.cell.as_ref().map(|c| c.framework.describe()).unwrap_or_else(|| "-".to_owned()),
            host.python
        );
    }
    let set = SourceSet::collect(source, cfg)?;
    for w in set.warnings() {
        on_warning(w);
    }
    let ids = BuildIds { uid: set.uid(), kernel };
    let created = !out.exists();
    let variant_existed = out.join(&variant.name).exists();
    std::fs::create_dir_all(out).with_context(|| format!("cannot create `{out}`"))?;
    let layout = layout.unwrap_or_else(|| build_layout::layout_of(cfg));
    match assemble_variant(&set, cfg, &variant, &ids, out, &WorkDir::Fresh, layout) {
        Ok(built) => {
            for w in &built.warnings {
                on_warning(w);
            }
            Ok(out.join(&variant.name))
        }
        Err(e) => {
            // Leave nothing behind: the output directory if this run made it, else the
            // partly written variant.
            if created {
                let _ = std::fs::remove_dir_all(out);
            } else if !variant_existed {
                let _ = std::fs::remove_dir_all(out.join(&variant.name));
            }
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Backend::*;
    use crate::matrix::testutil::noarch_config;

    #[test]
    fn python_depends_are_checked_per_backend() {
        let mut c = noarch_config(&[Cuda, Rocm]);
        c.general.python_depends = vec!["helion".into()];
        c.general.cuda.deps.python_depends = vec!["nvidia-cutlass-dsl".into()];
        assert!(check_python_depends(&c, Cuda).is_ok());
        assert!(check_python_depends(&c, Rocm).is_ok());
        c.general.python_depends.push("numpy".into());
        let err = check_python_depends(&c, Rocm).unwrap_err().to_string();
        assert_eq!(
            err,
            "unknown Python dependency `numpy` for `rocm` in `build.toml`; the `kernels` loader refuses to load such a variant. Known for `rocm`: einops, helion, tvm-ffi"
        );
    }
}
