//! The seam for compiled variants: a backend that a `[kernel.*]` compiles code for (in a
//! `[torch]` or `[tvm-ffi]` kernel) is built per matrix cell (torch version × compute version
//! × system) with a generated CMake project, not assembled from Python files.
//!
//! This version does not build them: [`assemble_compiled`] says so, naming the variant, and
//! [`super::bundle`] calls it for every compiled variant that was asked for, so a mixed kernel
//! (for example compiled CUDA plus a noarch Metal variant) can still build its noarch variants
//! with `--variant`.

use camino::Utf8Path;

use super::provenance::BuildIds;
use super::source::SourceSet;
use super::Warning;
use crate::config::{Backend, BuildConfig};

/// Whether this version can build the compiled variant `variant` (of `backend`), checked
/// before anything is built.
///
/// Errors: always, in this version: "variant X needs compiled code; compiled cells are not
/// built by this version yet".
pub fn check_supported(config: &BuildConfig, variant: &str, backend: Backend) -> anyhow::Result<()> {
    let kernels: Vec<&str> =
        config.kernels.iter().filter(|(_, k)| k.backend == backend).map(|(n, _)| n.as_str()).collect();
    anyhow::bail!(
        "variant `{variant}` needs compiled code ([kernel.{}] for `{backend}`); compiled cells are not built by this version yet",
        kernels.join("], [kernel.")
    )
}

/// Build the compiled variant `variant` (of `backend`) into `out_variant_dir`.
///
/// Errors: always, in this version, from [`check_supported`].
pub fn assemble_compiled(
    _source: &SourceSet,
    config: &BuildConfig,
    variant: &str,
    backend: Backend,
    _ids: &BuildIds,
    _out_variant_dir: &Utf8Path,
) -> anyhow::Result<Vec<Warning>> {
    check_supported(config, variant, backend)?;
    anyhow::bail!("variant `{variant}`: compiled builds are not implemented")
}
