//! Cell toolchains as data: the pins of every CPU and CUDA cell ([`pins`], from
//! `nix/torch-wheels.json`), the content-addressed cache they are fetched into ([`store`]),
//! and the provisioning of a bundle cell from them ([`provision`]).
//!
//! `build-and-copy --nix never` without `--python` builds every bundle cell of this system that
//! [`plan`] can provision (`[torch]` kernels' CPU and CUDA cells); a cell that cannot be (no
//! hash pinned, the index unreachable, offline) is named with the reason and what to do, and
//! the others still build. With `--python`, the one-cell-per-backend host mode of
//! [`crate::assemble::compiled`] is used instead, unchanged.

mod http;
pub mod pins;
pub mod provision;
pub mod store;

use crate::assemble::bundle::{self, Plan};
use crate::assemble::compiled::{plan_cell, HostToolchain, SkippedBackend};
use crate::config::BuildConfig;

/// The variants a pinned build makes: the noarch cells, every provisionable pinned bundle cell
/// (restricted to `requested` when it names any), and for backends without pins the cell of
/// `host` as [`bundle::plan`] plans it. Cells that cannot be provisioned are
/// [`Plan::skipped`], each naming its variant.
pub fn plan(config: &BuildConfig, requested: &[String], host: &HostToolchain, store: &store::Store) -> Plan {
    let mut variants = bundle::noarch_variants(config);
    let mut skipped = Vec::new();
    for backend in bundle::compiled_backends(config) {
        if !provision::pinned_backend(config, backend) {
            match bundle::host_cell(config, backend, host) {
                Ok(v) => variants.push(v),
                // Each bundle cell of this system the backend has is named (ROCm, XPU: no
                // toolchain of theirs is pinned yet); a backend with none here, once.
                Err(s) => {
                    let here = bundle_cells(config, backend);
                    if here.is_empty() {
                        skipped.push(s);
                    } else {
                        skipped.extend(here.into_iter().map(|c| SkippedBackend {
                            backend,
                            variant: Some(c.name),
                            reason: s.reason.clone(),
                        }));
                    }
                }
            }
            continue;
        }
        for cell in provision::pinned_cells(config, backend) {
            if !requested.is_empty() && !requested.contains(&cell.name) {
                continue;
            }
            let planned = provision::provision(&cell, store, host.manylinux.clone())
                // `--cuda-capabilities` narrows a pinned cell as it narrows a host one.
                .map(|h| h.with_cuda_capabilities(host.cuda_capabilities_only.clone().unwrap_or_default()))
                .and_then(|h| plan_cell(config, backend, &h))
                .and_then(|c| {
                    if c.variant == cell.name {
                        Ok(c)
                    } else {
                        Err(format!(
                            "its pinned torch builds `{}` instead; fix its entry in {}",
                            c.variant,
                            pins::PINS_FILE
                        ))
                    }
                });
            match planned {
                Ok(c) => variants.push(bundle::compiled_variant(c)),
                Err(reason) => skipped.push(SkippedBackend { backend, variant: Some(cell.name), reason }),
            }
        }
    }
    variants.sort_by(|a, b| a.name.cmp(&b.name));
    Plan { variants, skipped }
}

/// The compiled bundle cells of `backend` on this system.
fn bundle_cells(config: &BuildConfig, backend: crate::config::Backend) -> Vec<crate::matrix::Cell> {
    crate::matrix::cells(config, &crate::matrix::host_system(), crate::matrix::Scope::Bundle)
        .into_iter()
        .filter(|c| !c.noarch && c.backend == backend)
        .collect()
}
