//! The two native entry points the command line calls: a bundle of variants into `DIR/build/`
//! ([`build_native`], `build-and-copy --nix never`, `build-and-upload`), and one variant into a
//! given directory ([`assemble_one`], the hidden `kernel-builder assemble` a Nix cell runs over
//! its filtered source). Both print nothing: warnings come back to the caller (in the report,
//! or through a callback as they are found), and the CLI prints them.

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};

use super::bundle::{self, BuildOptions, BundleReport};
use super::compiled::{plan_cell, HostToolchain, PlannedVariant, WorkDir};
use super::provenance::{git_revision, BuildIds, KernelRevision};
use super::source::SourceSet;
use super::Warning;
use crate::config::{Backend, BuildConfig};

/// Build `variants` (all planned ones when empty) of the kernel in `dir`, described by
/// `config`, natively into `dir/build/`: [`bundle::build_into_with`] with the kernel's git
/// revision ([`git_revision`]) and `options` (cell cache, parallel jobs, progress).
///
/// Errors: those of [`git_revision`] and [`bundle::build_into_with`]; `build/` is then as it
/// was.
pub fn build_native(
    dir: &Utf8Path,
    config: &BuildConfig,
    variants: &[String],
    host: &HostToolchain,
    options: &BuildOptions<'_>,
) -> anyhow::Result<BundleReport> {
    bundle::build_into_with(dir, config, variants, git_revision(dir)?, host, options)
}

/// Assemble the variant of `backend` of the kernel in `source` (read as `config`) into
/// `out/<variant>/`; `out` is created when missing. A noarch backend gives `torch-<backend>`, a
/// compiled one the cell the toolchain `host` builds, in a fresh work directory (never the
/// cell cache: a Nix cell builds from scratch). `kernel` is the revision recorded in
/// `provenance.kernel`. Each warning (about the sources, then about the variant) is passed to
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
    backend: Backend,
    out: &Utf8Path,
    kernel: Option<KernelRevision>,
    host: &HostToolchain,
    expect_variant: Option<&str>,
    on_warning: &mut dyn FnMut(&Warning),
) -> anyhow::Result<Utf8PathBuf> {
    let cfg = config;
    let variant = if cfg.is_noarch_for(backend) {
        PlannedVariant {
            name: crate::matrix::naming::noarch_name(backend),
            backend,
            compiled: false,
            cell: None,
        }
    } else {
        anyhow::ensure!(
            cfg.general.backends.contains(&backend),
            "cannot build `{backend}`: it is not in `general.backends` of `{}`",
            cfg.path
        );
        let cell =
            plan_cell(cfg, backend, host).map_err(|e| anyhow::anyhow!("cannot build `{backend}`: {e}"))?;
        PlannedVariant { name: cell.variant.clone(), backend, compiled: true, cell: Some(Box::new(cell)) }
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
    match bundle::assemble_variant(&set, cfg, &variant, &ids, out, &WorkDir::Fresh) {
        Ok(warnings) => {
            for w in &warnings {
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
