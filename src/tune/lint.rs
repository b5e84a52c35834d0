//! `check-config`'s Helion lint: the heuristic files a noarch Helion kernel ships, checked
//! against how Helion picks them at load time ([`super::lookup`]). Everything here is a
//! warning: a kernel without a heuristic still runs (Helion uses its default config, untuned).
//!
//! Rules (the `rule` of each [`Warning`]):
//! - `helion-heuristic-missing`: a backend the kernel lists (cuda, rocm, xpu, tpu) has no
//!   `_helion_aot_<stem>_<kind>_*.py` for a source that defines `@helion.aot_kernel`s.
//! - `helion-heuristic-never-used`: a heuristic file Helion's lookup never selects: its name
//!   starts with no source stem of its directory, its kind is not one Helion reports, its
//!   kind's backend is not a Helion backend of the kernel, its compute is not a name a device
//!   reports (`sm90a`, `sm_90`), or, with `[torch-noarch] cuda-capabilities`, every GPU the
//!   loader accepts finds another file first (or none is accepted).
//! - `helion-heuristic-incomplete`: a heuristic file lacks `key_<k>` or `autotune_<k>` for an
//!   `@helion.aot_kernel` `k` of its source (Helion then runs `k`'s default config on that GPU:
//!   it never looks further down the list once a file is found).
//! - `helion-heuristic-stale`: a heuristic file tunes a function its source no longer defines.

use std::collections::{BTreeMap, BTreeSet};

use camino::{Utf8Path, Utf8PathBuf};
use serde::Serialize;

use super::lookup::{self, HeuristicFile, Package};
use crate::config::{Backend, BuildConfig, Framework};

/// One lint finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Warning {
    /// `helion-heuristic-missing`, `-never-used`, `-incomplete` or `-stale`.
    pub rule: &'static str,
    /// The file it is about, relative to the kernel directory (the source for `-missing`).
    pub file: Utf8PathBuf,
    /// What is wrong and what it means at load time.
    pub message: String,
    /// What to do.
    pub help: String,
}

/// The backends of `config` whose noarch variant depends on helion (`python-depends`, general
/// or per backend) and for which Helion has a heuristic lookup, in `general.backends` order.
pub fn helion_backends(config: &BuildConfig) -> Vec<Backend> {
    if matches!(config.framework, Framework::TvmFfi(_)) {
        return Vec::new();
    }
    config
        .general
        .backends
        .iter()
        .copied()
        .filter(|b| {
            config.is_noarch_for(*b) && config.general.python_depends_for(*b).iter().any(|d| d == "helion")
        })
        .filter(|b| lookup::helion_kind(*b).is_some())
        .collect()
}

/// Whether `config` is a Helion kernel at all (helion in any backend's `python-depends`).
pub fn is_helion(config: &BuildConfig) -> bool {
    config
        .general
        .backends
        .iter()
        .any(|b| config.general.python_depends_for(*b).iter().any(|d| d == "helion"))
}

/// Lint the heuristics of the kernel in `kernel_dir` (its `torch-ext/<python name>/`).
/// A kernel that does not depend on helion gets no warnings.
///
/// # Errors
/// A file of the package cannot be read.
pub fn lint(kernel_dir: &Utf8Path, config: &BuildConfig) -> anyhow::Result<Vec<Warning>> {
    if !is_helion(config) {
        return Ok(Vec::new());
    }
    let pkg = lookup::scan(kernel_dir, &config.general.python_name())?;
    Ok(lint_package(&pkg, config))
}

fn lint_package(pkg: &Package, config: &BuildConfig) -> Vec<Warning> {
    let backends = helion_backends(config);
    let declared = match &config.framework {
        Framework::TorchNoarch(t) => t.cuda_capabilities.as_deref(),
        _ => None,
    };
    let mut out = Vec::new();

    // Missing: per source with aot kernels, per Helion backend.
    for src in &pkg.sources {
        if src.aot_kernels.is_empty() {
            continue;
        }
        for b in &backends {
            let kind = lookup::helion_kind(*b).expect("filtered");
            let has = pkg.heuristics.iter().any(|h| {
                h.dir == src.dir
                    && h.stem.as_deref() == Some(src.stem.as_str())
                    && h.kind_compute
                        .as_ref()
                        .is_some_and(|(k, c)| k == kind && lookup::compute_is_reported(k, c))
            });
            if !has {
                out.push(Warning {
                    rule: "helion-heuristic-missing",
                    file: src.rel.clone(),
                    message: format!(
                        "backend `{b}` has no Helion heuristic for {}: no `{}/_helion_aot_{}_{kind}_<compute>.py` \
                         with a compute that {} reports, so on every {noun} Helion runs its default config, \
                         untuned",
                        quoted_list(&src.aot_kernels),
                        src.dir,
                        src.stem,
                        lookup::a_device(kind),
                        noun = lookup::device_noun(kind)
                    ),
                    help: format!(
                        "run `kernel-builder tune` on {} of the kind users have; it writes the heuristic beside \
                         `{}`",
                        lookup::a_device(kind),
                        src.rel
                    ),
                });
            }
        }
    }

    // Shipped computes per (dir, stem, kind), for the fallback simulation.
    let mut shipped: BTreeMap<(Utf8PathBuf, String, String), BTreeSet<String>> = BTreeMap::new();
    for h in &pkg.heuristics {
        if let (Some(stem), Some((kind, compute))) = (&h.stem, &h.kind_compute) {
            if lookup::compute_is_reported(kind, compute) {
                shipped
                    .entry((h.dir.clone(), stem.clone(), kind.clone()))
                    .or_default()
                    .insert(compute.clone());
            }
        }
    }

    for h in &pkg.heuristics {
        if let Some((why, help)) = never_used(h, pkg, &backends, declared, &shipped) {
            out.push(Warning {
                rule: "helion-heuristic-never-used",
                file: h.rel.clone(),
                message: format!("Helion never loads `{}`: {why}", h.name),
                help,
            });
            continue;
        }
        let stem = h.stem.as_deref().expect("used files have a stem");
        let Some(src) = pkg.sources_in(&h.dir).find(|s| s.stem == stem) else { continue };
        let lacking: Vec<String> = src
            .aot_kernels
            .iter()
            .filter_map(|k| {
                let missing: Vec<String> = [("key_", &h.key_fns), ("autotune_", &h.autotune_fns)]
                    .into_iter()
                    .filter(|(_, fns)| !fns.contains(k))
                    .map(|(p, _)| format!("`{p}{k}`"))
                    .collect();
                (!missing.is_empty()).then(|| missing.join(" and "))
            })
            .collect();
        let (kind, compute) = h.kind_compute.as_ref().expect("used files have a kind");
        if !lacking.is_empty() {
            out.push(Warning {
                rule: "helion-heuristic-incomplete",
                file: h.rel.clone(),
                message: format!(
                    "`{}` has no {} for the `@helion.aot_kernel`s of `{}`: on the GPUs that load this file Helion \
                     runs those kernels' default config (it never looks past the first file it finds)",
                    h.name,
                    lacking.join(", "),
                    src.rel
                ),
                help: format!(
                    "re-run `kernel-builder tune` on {} of compute {compute}, with a bench script that calls every \
                     kernel",
                    lookup::a_device(kind)
                ),
            });
        }
        let stale: Vec<String> =
            h.key_fns.union(&h.autotune_fns).filter(|k| !src.defs.contains(*k)).cloned().collect();
        if !stale.is_empty() {
            out.push(Warning {
                rule: "helion-heuristic-stale",
                file: h.rel.clone(),
                message: format!(
                    "`{}` tunes {}, which `{}` does not define: the heuristic was made for an older version of the \
                     source",
                    h.name,
                    quoted_list(&stale),
                    src.rel
                ),
                help: format!("re-run `kernel-builder tune` on {} of compute {compute}", lookup::a_device(kind)),
            });
        }
    }
    out
}

/// Why Helion's lookup never selects `h`, and what to do (`None`: some device selects it).
fn never_used(
    h: &HeuristicFile,
    pkg: &Package,
    backends: &[Backend],
    declared: Option<&[crate::config::CudaCapability]>,
    shipped: &BTreeMap<(Utf8PathBuf, String, String), BTreeSet<String>>,
) -> Option<(String, String)> {
    const RETUNE: &str = "`kernel-builder tune` writes heuristics with the name Helion looks for";
    let Some(stem) = &h.stem else {
        let stems: Vec<String> = pkg.sources_in(&h.dir).map(|s| format!("{}.py", s.stem)).collect();
        return Some((
            format!(
                "Helion looks for `_helion_aot_<source stem>_<kind>_<compute>.py` beside the kernel's source, and no \
                 source in `{}` has a stem the name starts with (sources there: {})",
                h.dir,
                if stems.is_empty() { "none".to_owned() } else { stems.join(", ") }
            ),
            format!("move or rename it after the source it was tuned for, or delete it; {RETUNE}"),
        ));
    };
    let Some((kind, compute)) = &h.kind_compute else {
        return Some((
            format!("after the source stem `{stem}` the name has no `_<kind>_<compute>` (e.g. `_helion_aot_{stem}_cuda_sm90.py`)"),
            format!("rename it, or delete it; {RETUNE}"),
        ));
    };
    let Some(backend) = lookup::kind_backend(kind) else {
        return Some((
            format!("`{kind}` is not a device kind Helion reports (cuda, rocm, xpu, tpu)"),
            format!("rename it after the kind of device it was tuned on, or delete it; {RETUNE}"),
        ));
    };
    if !backends.contains(&backend) {
        let listed: Vec<String> = backends.iter().map(|b| b.to_string()).collect();
        return Some((
            format!(
                "it is for `{kind}`, and the kernel's Helion backends are {}: no `{}` variant loads it, and Helion on \
                 another backend looks only for its own kind",
                if listed.is_empty() { "none".to_owned() } else { listed.join(", ") },
                crate::matrix::naming::noarch_name(backend)
            ),
            format!("add \"{backend}\" to `general.backends`, or delete the file"),
        ));
    }
    if !lookup::compute_is_reported(kind, compute) {
        return Some((
            format!(
                "no device reports the compute `{compute}`: {} reports {}",
                lookup::a_device(kind),
                lookup::reported_form(kind)
            ),
            format!("rename it after the compute the GPU reports, or delete it; {RETUNE}"),
        ));
    }
    let set = &shipped[&(h.dir.clone(), stem.clone(), kind.clone())];
    let picking = lookup::devices_picking(kind, set, if kind == "cuda" { declared } else { None });
    if picking[compute].is_empty() {
        let caps: Vec<String> = declared.unwrap_or_default().iter().map(|c| c.to_string()).collect();
        let takers: Vec<String> = picking
            .iter()
            .filter(|(c, d)| *c != compute && !d.is_empty())
            .map(|(c, d)| format!("{} take `{c}`", d.join(", ")))
            .collect();
        return Some((
            format!(
                "`[torch-noarch] cuda-capabilities` ({}) lets the loader run the kernel only on GPUs that {}",
                caps.join(", "),
                if takers.is_empty() {
                    format!("never fall back to `{compute}`")
                } else {
                    format!("find another heuristic first ({})", takers.join("; "))
                }
            ),
            format!(
                "add \"{}\" (the capability it was tuned for) to `[torch-noarch] cuda-capabilities`, or delete the file",
                lookup::parse_sm(compute).map_or(compute.clone(), |(major, minor)| format!("{major}.{minor}"))
            ),
        ));
    }
    None
}

fn quoted_list(names: &[String]) -> String {
    names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
}

/// Render warnings like `check-config`'s plain diagnostics: the rule, then `! message` and
/// `help:` indented, a blank line between. Empty for no warnings.
pub fn render(warnings: &[Warning]) -> String {
    let mut s = String::new();
    for w in warnings {
        s.push_str(&format!("{}\n\n  ! {}: {}\n  help: {}\n\n", w.rule, w.file, w.message, w.help));
    }
    s
}
