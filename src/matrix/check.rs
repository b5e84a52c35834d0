//! Checks of a `build.toml` against the build matrix: what the parser cannot know because it
//! depends on which CUDA toolkits and ROCm releases the kernel is built with, and what the
//! `kernels` loader will do with the architectures the variants declare.
//!
//! The matrix is the one the kernel pins (`[general] matrix`), else the default. Rules
//! (`Problem::rule`):
//!
//! - `unknown-matrix` (error): `general.matrix` names a matrix this build does not carry; the
//!   help lists the known ones. No other matrix check runs then;
//! - `capability-suffix` (error): an `a` / `f` suffix on a capability below the first one that
//!   has it (`a` from 9.0, `f` from 10.0);
//! - `capability-out-of-range` (error): no CUDA toolkit of the matrix can compile the
//!   capability and it lies outside the range the kernel's toolkits build (`3.5`, `99999.0`);
//!   the help names the capabilities those toolkits know;
//! - `capability-needs-newer-cuda` (warning): only a toolkit newer than the kernel's CUDA
//!   bounds allow compiles it (`10.0` in a kernel limited to CUDA 12.6, `10.0f` before 12.9);
//!   names the variants that skip it and what they build instead;
//! - `capability-not-built` (warning): a capability inside that range that no toolkit has
//!   (`11.8`), with a did-you-mean; it is ignored, the rest of the list is built;
//! - `no-buildable-capability` (error): nothing in the kernel's list can be built by any of
//!   its toolkits, so its variants would be left with nothing to build;
//! - `kernel-skipped` (warning): some CUDA versions (or ROCm releases) build nothing of the
//!   kernel's list; the kernel is left out of those variants, never built for a default instead;
//! - `empty-capabilities` / `empty-rocm-archs` (error): the list is empty, or nothing in it can be
//!   built by any of the kernel's ROCm releases;
//! - `kernel-never-built` (warning): the kernel's `cuda-minver` is above every CUDA it would
//!   be built with;
//! - `unknown-rocm-arch` (error): a gfx target no ROCm release of the matrix knows (a typo),
//!   with a suggestion and the targets the kernel's ROCm releases build;
//! - `rocm-arch-skipped` (warning): a known target that some ROCm releases do not build;
//! - `loader-refuses-gpus` (warning): a noarch kernel's `cuda_capabilities` / `rocm_archs`
//!   become `backend.archs` in metadata.json, and the loader's arch check ([`loader_covers`])
//!   then refuses GPUs that torch's wheels support and the (run-time compiled) code runs on;
//! - `backend-without-variants` (warning): a backend of `general.backends` that no cell of the
//!   matrix builds, naming the bounds that exclude it;
//! - `no-bundle-variants` (warning): a backend whose cells all lie outside the default bundle
//!   (`build-and-copy` and `nix build .#bundle` build none of them), naming a matrix to pin;
//!   not for a backend that no matrix bundles (`tpu`).

use crate::config::{
    Backend, BuildConfig, CapabilitySuffix, CudaCapability, Framework, Kernel, Problem, Severity, Version,
};

use super::cells::{cells_in, Cell, KernelCells, Scope};
use super::cuda::{
    buildable_range, json_version, resolve_list, resolve_one, suffix_min_cuda, suffix_violation, toolkit,
    SuffixRule,
};
use super::data::{all as all_matrices, for_config, named, MatrixData};
use super::rocm::{is_known_arch, release, suggest_arch};

/// Check `config` against its matrix; every finding, errors and warnings, in file order
/// (the matrix pin and backends first, then kernels, then `[torch-noarch]`). Key paths use
/// edition-5 names, e.g. `kernel.relu.cuda-capabilities[1]`. `cells` are the kernel's cells,
/// computed once when it is loaded ([`KernelCells::of`]).
pub fn check(config: &BuildConfig, cells: &KernelCells) -> Vec<Problem> {
    let mut out = Vec::new();
    if let Some(name) = &config.general.matrix {
        if named(name).is_err() {
            let known: Vec<String> = all_matrices()
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    format!(
                        "`{}` ({}revision {})",
                        m.name,
                        if i == 0 { "the default, " } else { "" },
                        m.revision
                    )
                })
                .collect();
            out.push(problem(
                Severity::Error,
                "general.matrix".to_owned(),
                "unknown-matrix",
                format!("`general.matrix` pins the build matrix `{name}`, which this kernel-builder does not know"),
                Some(format!(
                    "known matrices: {}; pin one of them, or remove `matrix` to build with the default",
                    known.join(", ")
                )),
            ));
            return out;
        }
    }
    let m = for_config(config);
    let all = cells.in_scope(Scope::All);
    backends_without_cells(m, config, all, &mut out);
    let cudas = compiled_versions(all, Backend::Cuda);
    let rocms = compiled_versions(all, Backend::Rocm);
    for (name, kernel) in &config.kernels {
        match kernel.backend {
            Backend::Cuda => check_cuda_kernel(m, name, kernel, &cudas, all, &mut out),
            Backend::Rocm => check_rocm_kernel(m, name, kernel, &rocms, &mut out),
            _ => {}
        }
    }
    if let Framework::TorchNoarch(t) = &config.framework {
        let every: Vec<String> = m.cuda.keys().cloned().collect();
        let mut bad = false;
        for (i, cap) in t.cuda_capabilities.iter().flatten().enumerate() {
            let key = format!("torch-noarch.cuda_capabilities[{i}]");
            bad |= check_capability(m, "`[torch-noarch]`", cap, &every, None, key, &mut out);
        }
        let rocm_releases: Vec<String> = m.rocm.versions.keys().cloned().collect();
        for (i, arch) in t.rocm_archs.iter().flatten().enumerate() {
            if !is_known_arch(m, arch) {
                bad = true;
                out.push(unknown_arch(
                    m,
                    "`[torch-noarch]`",
                    arch,
                    &rocm_releases,
                    format!("torch-noarch.rocm_archs[{i}]"),
                ));
            }
        }
        if !bad && config.general.backends.contains(&Backend::Cuda) {
            if let Some(caps) = &t.cuda_capabilities {
                noarch_cuda_refusals(m, caps, &mut out);
            }
        }
        if !bad && config.general.backends.contains(&Backend::Rocm) {
            if let Some(archs) = &t.rocm_archs {
                noarch_rocm_refusals(m, archs, &mut out);
            }
        }
    }
    out
}

/// The loader's arch check (`check_arch`, kernels 0.17): does one declared arch of
/// `backend.archs` cover a GPU of compute capability `gpu` (`(major, minor)`)?
///
/// `X.Y` covers the same major with minor ≥ Y; `X.Ya` exactly X.Y; `X.Yf` the same major
/// (family) with minor ≥ Y; `X.Y+PTX` every capability ≥ X.Y (the suffix is looked at first,
/// as kernels 0.17.2's `archs.py` does). A string that does not parse covers nothing here (the
/// loader passes the check only when *no* string parses).
pub fn loader_covers(arch: &str, gpu: (u32, u32)) -> bool {
    let Ok(c) = CudaCapability::parse(arch) else { return false };
    // The loader's order: the `a` suffix wins over `+PTX` (`9.0a+PTX` is still exact).
    match c.suffix {
        CapabilitySuffix::Arch => gpu == (c.major, c.minor),
        CapabilitySuffix::Family => gpu.0 == c.major && gpu.1 >= c.minor,
        CapabilitySuffix::None if c.ptx => gpu >= (c.major, c.minor),
        CapabilitySuffix::None => gpu.0 == c.major && gpu.1 >= c.minor,
    }
}

/// Every capability the official torch CUDA wheels of matrix `m` run on (any toolkit, any
/// system), sorted: the GPUs a noarch CUDA kernel can meet.
fn torch_wheel_gpus(m: &MatrixData) -> Vec<(u32, u32)> {
    let mut v: Vec<(u32, u32)> = m
        .cuda
        .values()
        .flat_map(|tk| tk.torch_wheel.values().flatten())
        .filter_map(|c| CudaCapability::parse(c).ok().map(|c| (c.major, c.minor)))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Newer GPUs than a noarch kernel's lowest declared capability that the loader would refuse:
/// the code is compiled at run time (Helion, Triton), so it runs on them; older ones may be
/// excluded on purpose and are not reported.
fn noarch_cuda_refusals(m: &MatrixData, caps: &[CudaCapability], out: &mut Vec<Problem>) {
    let archs: Vec<String> = caps.iter().map(ToString::to_string).collect();
    let Some(lowest) = caps.iter().map(|c| (c.major, c.minor)).min() else { return };
    let refused: Vec<String> = torch_wheel_gpus(m)
        .into_iter()
        .filter(|g| *g > lowest && !archs.iter().any(|a| loader_covers(a, *g)))
        .map(|(a, b)| format!("{a}.{b}"))
        .collect();
    if refused.is_empty() {
        return;
    }
    let (a, b) = lowest;
    out.push(problem(
        Severity::Warning,
        "torch-noarch.cuda_capabilities".to_owned(),
        "loader-refuses-gpus",
        format!(
            "`[torch-noarch]`: cuda_capabilities ({}) become `backend.archs` of the torch-cuda variant, and the kernels loader (0.17 and newer) then refuses GPUs of capability {}, newer than {a}.{b}, which torch's CUDA wheels support and run-time compiled code (Helion, Triton) runs on",
            archs.join(", "),
            refused.join(", ")
        ),
        Some(format!(
            "write `{a}.{b}+PTX` to accept {a}.{b} and every newer GPU, or remove cuda_capabilities to load on every GPU"
        )),
    ));
}

fn noarch_rocm_refusals(m: &MatrixData, archs: &[String], out: &mut Vec<Problem>) {
    let mut known: Vec<&str> =
        m.rocm.versions.values().flat_map(|r| r.archs.iter().map(String::as_str)).collect();
    known.sort_by_key(|a| (a.len(), *a));
    known.dedup();
    let refused: Vec<&str> = known.iter().copied().filter(|a| !archs.iter().any(|x| x == a)).collect();
    if refused.is_empty() {
        return;
    }
    out.push(problem(
        Severity::Warning,
        "torch-noarch.rocm_archs".to_owned(),
        "loader-refuses-gpus",
        format!(
            "`[torch-noarch]`: rocm_archs ({}) become `backend.archs` of the torch-rocm variant, and the kernels loader needs an exact gfx match, so it refuses {}, which torch's ROCm wheels support",
            archs.join(", "),
            refused.join(", ")
        ),
        Some("remove rocm_archs to load on every GPU, or list every target the code runs on".to_owned()),
    ));
}

/// The backend versions of the compiled cells of `backend`, numerically sorted and unique.
fn compiled_versions(all: &[Cell], backend: Backend) -> Vec<String> {
    let mut v: Vec<String> = all
        .iter()
        .filter(|c| c.backend == backend && !c.noarch)
        .filter_map(|c| c.backend_version.clone())
        .collect();
    v.sort_by_key(|s| json_version(s));
    v.dedup_by_key(|s| json_version(s));
    v
}

fn kernel_key(name: &str) -> String {
    if !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        format!("kernel.{name}")
    } else {
        format!("kernel.\"{}\"", name.replace('\\', "\\\\").replace('"', "\\\""))
    }
}

fn problem(
    severity: Severity,
    key_path: String,
    rule: &'static str,
    message: String,
    help: Option<String>,
) -> Problem {
    Problem { severity, key_path, rule, message, help }
}

fn backends_without_cells(m: &MatrixData, config: &BuildConfig, all: &[Cell], out: &mut Vec<Problem>) {
    for (i, &backend) in config.general.backends.iter().enumerate() {
        if all.iter().any(|c| c.backend == backend) {
            // A backend no matrix bundles at all (torch-tpu: gated wheels) is outside the
            // bundle by design, not because of this kernel or this matrix.
            let bundled_somewhere =
                all_matrices().iter().any(|o| o.build_sets.iter().any(|s| s.backend == backend && s.bundle));
            if bundled_somewhere && !all.iter().any(|c| c.backend == backend && c.bundle) {
                let names: Vec<&str> =
                    all.iter().filter(|c| c.backend == backend).map(|c| c.name.as_str()).collect();
                let other = all_matrices().iter().filter(|o| o.name != m.name).find(|o| {
                    o.systems
                        .iter()
                        .any(|s| cells_in(o, config, s, Scope::Bundle).iter().any(|c| c.backend == backend))
                });
                out.push(problem(
                    Severity::Warning,
                    format!("general.backends[{i}]"),
                    "no-bundle-variants",
                    format!(
                        "`{backend}` is built only outside the default bundle of build matrix {} ({}): `build-and-copy` and `nix build .#bundle` build none of them",
                        m.name,
                        names.join(", ")
                    ),
                    Some(match other {
                        Some(o) => format!("pin the matrix whose bundle builds it: `matrix = \"{}\"` in `[general]`, or build them with `--all`", o.name),
                        None => "widen the torch bounds, or build them with `--all`".to_owned(),
                    }),
                ));
            }
            continue;
        }
        let sets: Vec<_> = m.build_sets.iter().filter(|s| s.backend == backend).collect();
        let mut reasons = Vec::new();
        if sets.is_empty() {
            reasons.push(format!("the build matrix has no build set for `{backend}`"));
        } else {
            if matches!(config.framework, Framework::TvmFfi(_)) && sets.iter().all(|s| s.tvm_ffi.is_none()) {
                reasons.push(format!("no `{backend}` build set of the matrix offers tvm-ffi"));
            }
            let g = &config.general.cuda;
            if backend == Backend::Cuda && (g.minver.is_some() || g.maxver.is_some()) {
                let mut versions: Vec<&str> = sets.iter().filter_map(|s| s.version.as_deref()).collect();
                versions.sort_by_key(|s| json_version(s));
                versions.dedup();
                reasons.push(format!(
                    "{} (the matrix has CUDA {})",
                    bounds("general.cuda", g.minver.as_ref(), g.maxver.as_ref()),
                    versions.join(", ")
                ));
            }
            let (min, max) = config.framework.torch_bounds();
            if min.is_some() || max.is_some() {
                let mut torches: Vec<&str> = sets.iter().map(|s| s.torch.as_str()).collect();
                torches.sort_by_key(|s| json_version(s));
                torches.dedup();
                reasons.push(format!(
                    "{} (the matrix builds `{backend}` with torch {})",
                    bounds("torch", min, max),
                    torches.join(", ")
                ));
            }
        }
        if reasons.is_empty() {
            reasons.push("the matrix's build sets for it are all excluded".to_owned());
        }
        out.push(problem(
            Severity::Warning,
            format!("general.backends[{i}]"),
            "backend-without-variants",
            format!(
                "`{backend}` is listed in general.backends but no variant builds it: {}",
                reasons.join("; ")
            ),
            Some(format!("widen the bounds, or remove `{backend}` from general.backends")),
        ));
    }
}

fn bounds(section: &str, min: Option<&Version>, max: Option<&Version>) -> String {
    let mut parts = Vec::new();
    if let Some(m) = min {
        parts.push(format!("{section}.minver = \"{m}\""));
    }
    if let Some(m) = max {
        parts.push(format!("{section}.maxver = \"{m}\""));
    }
    parts.join(" and ")
}

/// The cells that skip capability `cap` of one CUDA kernel, and what each group of them
/// builds: `"torch214-cxx11-cu126-x86_64-linux, … build 8.0, 9.0"`.
fn skipping_cells(
    m: &MatrixData,
    cap: &CudaCapability,
    kernel_caps: &[CudaCapability],
    cells: &[Cell],
) -> String {
    let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
    for c in cells.iter().filter(|c| c.backend == Backend::Cuda && !c.noarch) {
        let Some((ver, tk)) = c.backend_version.as_deref().and_then(|v| toolkit(m, v)) else { continue };
        if resolve_one(m, cap, &ver, tk).is_some() {
            continue;
        }
        let builds: Vec<String> =
            resolve_list(m, kernel_caps, &ver, tk).iter().map(ToString::to_string).collect();
        let builds = if builds.is_empty() { "nothing of this kernel".to_owned() } else { builds.join(", ") };
        match groups.iter_mut().find(|(b, _)| *b == builds) {
            Some((_, names)) => names.push(&c.name),
            None => groups.push((builds, vec![&c.name])),
        }
    }
    groups
        .iter()
        .map(|(builds, names)| format!("{} build {builds}", names.join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Check one capability against the toolkits `toolkits`; true when an error was reported.
/// `context` is the kernel's whole list and its compiled cells, for kernels that have cells.
///
/// A capability none of them builds is a warning when a newer toolkit of the matrix builds it
/// (naming the cells of `context` that skip it and what they build), a warning when it lies inside the range they
/// build (`11.8`: no such GPU, while 11.0 exists; the rest of the list still builds, as
/// upstream does for kernels-community/megablocks), and an error otherwise (`3.5`, `99999.0`).
fn check_capability(
    m: &MatrixData,
    who: &str,
    cap: &CudaCapability,
    toolkits: &[String],
    context: Option<(&[CudaCapability], &[Cell])>,
    key: String,
    out: &mut Vec<Problem>,
) -> bool {
    if let Some(SuffixRule::MinCapability(min)) = suffix_violation(m, cap) {
        let (letter, what) = match cap.suffix {
            CapabilitySuffix::Arch => ("a", "architecture-specific"),
            _ => ("f", "family"),
        };
        out.push(problem(
            Severity::Error,
            key,
            "capability-suffix",
            format!("{who}: capability `{cap}` is not valid: the `{letter}` ({what}) suffix exists from capability {min} on"),
            Some(format!("write `{}.{}` without the suffix, or a capability of at least {min}", cap.major, cap.minor)),
        ));
        return true;
    }
    let builds_with = |k: &str, c: &CudaCapability| {
        toolkit(m, k).is_some_and(|(ver, tk)| resolve_one(m, c, &ver, tk).is_some())
    };
    if toolkits.iter().any(|k| builds_with(k, cap)) {
        return false;
    }
    let refs: Vec<&str> = toolkits.iter().map(String::as_str).collect();
    let newest = refs.iter().map(|k| json_version(k)).max();
    let newer: Vec<&String> = m
        .cuda
        .keys()
        .filter(|k| newest.as_ref().is_none_or(|n| json_version(k) > *n) && builds_with(k, cap))
        .collect();
    if let (Some(first), Some((caps, cells))) = (newer.first(), context) {
        let needs = format!("CUDA {first} or newer");
        out.push(problem(
            Severity::Warning,
            key,
            "capability-needs-newer-cuda",
            format!(
                "{who}: capability `{cap}` needs {needs}, which the kernel's CUDA bounds leave out (it is built with CUDA {}); {}",
                refs.join(", "),
                skipping_cells(m, cap, caps, cells)
            ),
            // The suffix is named only when it is what needs the newer CUDA (`10.0f`: 12.9);
            // `12.0a` needs 12.8 for the architecture itself, though `a` exists from 12.0.
            Some(match suffix_min_cuda(m, cap.suffix).filter(|min| json_version(first) <= *min) {
                Some(min) => format!("the `{}` suffix needs CUDA {min} or newer; raise general.cuda.maxver to build it, or drop it", if cap.suffix == CapabilitySuffix::Arch { "a" } else { "f" }),
                None => "raise general.cuda.maxver to build it, or remove it".to_owned(),
            }),
        ));
        return false;
    }
    let range = buildable_range(m, &refs);
    let range_text =
        range.map(|((a, b), (c, d))| format!("; they build {a}.{b} to {c}.{d}")).unwrap_or_default();
    let plain = CudaCapability { suffix: CapabilitySuffix::None, ptx: false, ..cap.clone() };
    let too_old = |min: &Version| refs.iter().all(|k| json_version(k) < *min);
    if let Some(min_cuda) = suffix_min_cuda(m, cap.suffix)
        .filter(|mc| toolkits.iter().any(|k| builds_with(k, &plain)) || too_old(mc))
    {
        // The architecture exists, but the suffix needs a newer CUDA than the kernel builds with.
        let letter = if cap.suffix == CapabilitySuffix::Arch { "a" } else { "f" };
        out.push(problem(
            Severity::Error,
            key,
            "capability-out-of-range",
            format!("{who}: capability `{cap}` cannot be built by CUDA {}{range_text}", refs.join(", ")),
            Some(format!("the `{letter}` suffix needs CUDA {min_cuda} or newer; raise general.cuda.maxver or drop the suffix")),
        ));
        return true;
    }
    let near = nearest_same_major(m, cap, &refs);
    let in_range = range.is_some_and(|(lo, hi)| (lo..=hi).contains(&(cap.major, cap.minor)));
    if in_range {
        out.push(problem(
            Severity::Warning,
            key,
            "capability-not-built",
            format!(
                "{who}: capability `{cap}` is not an architecture that CUDA {} builds; it is ignored",
                refs.join(", ")
            ),
            Some(match near {
                Some(n) => format!("did you mean `{n}`? Otherwise remove it"),
                None => "remove it".to_owned(),
            }),
        ));
        return false;
    }
    out.push(problem(
        Severity::Error,
        key,
        "capability-out-of-range",
        format!("{who}: capability `{cap}` cannot be built by CUDA {}{range_text}", refs.join(", ")),
        Some(match near {
            Some(n) => format!("did you mean `{n}`? Otherwise remove it"),
            None => format!(
                "remove it, or use a capability those CUDA versions build: {}",
                known_capabilities(m, &refs)
            ),
        }),
    ));
    true
}

/// The plain capabilities any of `toolkits` compiles, sorted: `5.0, 5.2, …, 12.1`.
fn known_capabilities(m: &MatrixData, toolkits: &[&str]) -> String {
    let mut all: Vec<(u32, u32)> = toolkits
        .iter()
        .filter_map(|k| toolkit(m, k))
        .flat_map(|(_, t)| t.capabilities.iter().filter_map(|c| CudaCapability::parse(c).ok()))
        .map(|c| (c.major, c.minor))
        .collect();
    all.sort();
    all.dedup();
    all.iter().map(|(a, b)| format!("{a}.{b}")).collect::<Vec<_>>().join(", ")
}

/// The buildable capability of `cap`'s major version closest below it (else closest above),
/// keeping its suffix: `11.8` → `11.0`.
fn nearest_same_major(m: &MatrixData, cap: &CudaCapability, toolkits: &[&str]) -> Option<String> {
    let mut same: Vec<(u32, u32)> = toolkits
        .iter()
        .filter_map(|k| toolkit(m, k))
        .flat_map(|(_, t)| t.capabilities.iter().filter_map(|c| CudaCapability::parse(c).ok()))
        .filter(|c| c.major == cap.major)
        .map(|c| (c.major, c.minor))
        .collect();
    same.sort();
    same.dedup();
    let pick = same.iter().rev().find(|c| c.1 <= cap.minor).or_else(|| same.first())?;
    let near = CudaCapability { major: pick.0, minor: pick.1, suffix: cap.suffix, ptx: cap.ptx };
    Some(near.to_string())
}

fn check_cuda_kernel(
    m: &MatrixData,
    name: &str,
    kernel: &Kernel,
    cell_cudas: &[String],
    cells: &[Cell],
    out: &mut Vec<Problem>,
) {
    let base = kernel_key(name);
    let who = format!("kernel `{name}`");
    let built: Vec<String> = cell_cudas
        .iter()
        .filter(|c| kernel.min_cuda().is_none_or(|min| json_version(c) >= *min))
        .cloned()
        .collect();
    if !cell_cudas.is_empty() && built.is_empty() {
        if let Some(min) = kernel.min_cuda() {
            // `cuda-minver` of a C++ kernel, `tileiras-minver` of a cuTile one.
            let key = if kernel.cuda_minver.is_some() { "cuda-minver" } else { "tileiras-minver" };
            out.push(problem(
                Severity::Warning,
                format!("{base}.{key}"),
                "kernel-never-built",
                format!(
                    "{who} has {key} = \"{min}\", above every CUDA it is built with ({}); it is compiled in no variant",
                    cell_cudas.join(", ")
                ),
                Some(format!("lower {key}, or raise general.cuda.maxver")),
            ));
        }
    }
    let Some(caps) = &kernel.cuda_capabilities else { return };
    let from_cells = !built.is_empty();
    let toolkits: Vec<String> = if from_cells { built } else { m.cuda.keys().cloned().collect() };
    if caps.is_empty() {
        out.push(problem(
            Severity::Error,
            format!("{base}.cuda-capabilities"),
            "empty-capabilities",
            format!("{who}: cuda-capabilities is empty, so the kernel would be compiled for no architecture"),
            Some(
                "list the capabilities to build, or remove the key to build the CUDA version's defaults"
                    .to_owned(),
            ),
        ));
        return;
    }
    // The cells that compile this kernel (its cuda-minver leaves the others out).
    let kernel_cells: Vec<Cell> = cells
        .iter()
        .filter(|c| {
            c.backend == Backend::Cuda
                && !c.noarch
                && c.backend_version
                    .as_deref()
                    .is_some_and(|v| toolkits.iter().any(|t| json_version(t) == json_version(v)))
        })
        .cloned()
        .collect();
    let context = from_cells.then_some((caps.as_slice(), kernel_cells.as_slice()));
    let mut errors = 0;
    for (i, cap) in caps.iter().enumerate() {
        if check_capability(m, &who, cap, &toolkits, context, format!("{base}.cuda-capabilities[{i}]"), out) {
            errors += 1;
        }
    }
    if errors == caps.len() {
        return; // every entry is already an error
    }
    let empty: Vec<&str> = toolkits
        .iter()
        .filter(|k| toolkit(m, k).is_none_or(|(ver, tk)| resolve_list(m, caps, &ver, tk).is_empty()))
        .map(String::as_str)
        .collect();
    if empty.len() == toolkits.len() {
        out.push(problem(
            Severity::Error,
            format!("{base}.cuda-capabilities"),
            "no-buildable-capability",
            format!(
                "{who}: no CUDA version it is built with ({}) builds any of its cuda-capabilities, so its variants would have nothing to build",
                toolkits.join(", ")
            ),
            Some("list at least one capability those CUDA versions build, or raise general.cuda.maxver".to_owned()),
        ));
    } else if from_cells && !empty.is_empty() {
        let list: Vec<String> = caps.iter().map(ToString::to_string).collect();
        out.push(problem(
            Severity::Warning,
            format!("{base}.cuda-capabilities"),
            "kernel-skipped",
            format!(
                "{who}: none of its cuda-capabilities ({}) can be built with CUDA {}; the kernel is skipped in those variants",
                list.join(", "),
                empty.join(", ")
            ),
            Some(format!(
                "set cuda-minver on the kernel to say so explicitly, or add a capability that CUDA {} builds",
                empty.join(", ")
            )),
        ));
    }
}

/// The gfx targets the ROCm releases `releases` build, sorted (`gfx900, …, gfx1201`).
fn release_targets(m: &MatrixData, releases: &[String]) -> Vec<String> {
    let mut v: Vec<String> =
        releases.iter().filter_map(|r| release(m, r)).flat_map(|r| r.archs.iter().cloned()).collect();
    v.sort_by(|a, b| (a.len(), a).cmp(&(b.len(), b)));
    v.dedup();
    v
}

fn unknown_arch(m: &MatrixData, who: &str, arch: &str, releases: &[String], key: String) -> Problem {
    let targets = release_targets(m, releases).join(", ");
    let help = match suggest_arch(m, arch) {
        Some(s) => format!("did you mean `{s}`? ROCm {} builds: {targets}", releases.join(", ")),
        None => format!("ROCm {} builds: {targets}", releases.join(", ")),
    };
    problem(
        Severity::Error,
        key,
        "unknown-rocm-arch",
        format!("{who}: `{arch}` is not a gfx target that any ROCm release of build matrix {} knows", m.name),
        Some(help),
    )
}

fn check_rocm_kernel(
    m: &MatrixData,
    name: &str,
    kernel: &Kernel,
    cell_rocms: &[String],
    out: &mut Vec<Problem>,
) {
    let Some(archs) = &kernel.rocm_archs else { return };
    let base = kernel_key(name);
    let who = format!("kernel `{name}`");
    let from_cells = !cell_rocms.is_empty();
    let releases: Vec<String> =
        if from_cells { cell_rocms.to_vec() } else { m.rocm.versions.keys().cloned().collect() };
    let supports = |rel: &str, arch: &str| release(m, rel).is_some_and(|r| r.archs.iter().any(|a| a == arch));
    let mut known = 0;
    for (i, arch) in archs.iter().enumerate() {
        let key = format!("{base}.rocm-archs[{i}]");
        if !is_known_arch(m, arch) {
            out.push(unknown_arch(m, &who, arch, &releases, key));
            continue;
        }
        known += 1;
        let missing: Vec<&str> = releases.iter().filter(|r| !supports(r, arch)).map(String::as_str).collect();
        if from_cells && !missing.is_empty() {
            out.push(problem(
                Severity::Warning,
                key,
                "rocm-arch-skipped",
                format!(
                    "{who}: `{arch}` is not supported by ROCm {}; it is not compiled there",
                    missing.join(", ")
                ),
                None,
            ));
        }
    }
    if !archs.is_empty() && known == 0 {
        return;
    }
    let empty: Vec<&str> =
        releases.iter().filter(|r| !archs.iter().any(|a| supports(r, a))).map(String::as_str).collect();
    if archs.is_empty() || empty.len() == releases.len() {
        out.push(problem(
            Severity::Error,
            format!("{base}.rocm-archs"),
            "empty-rocm-archs",
            format!(
                "{who}: no ROCm release it is built with ({}) supports any of its rocm-archs",
                releases.join(", ")
            ),
            Some(format!(
                "targets ROCm {} builds: {}",
                releases.join(", "),
                release_targets(m, &releases).join(", ")
            )),
        ));
    } else if from_cells && !empty.is_empty() {
        out.push(problem(
            Severity::Warning,
            format!("{base}.rocm-archs"),
            "kernel-skipped",
            format!(
                "{who}: none of its rocm-archs is supported by ROCm {}; the kernel is skipped in those variants",
                empty.join(", ")
            ),
            None,
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::super::cells::cells;
    use super::super::testutil::*;
    use super::*;
    use crate::config::Backend::*;

    /// [`super::check`] with the cells computed here, as [`crate::kernel::load`] does.
    fn check(config: &BuildConfig) -> Vec<Problem> {
        super::check(config, &KernelCells::of(config))
    }

    fn summary(problems: &[Problem]) -> Vec<(Severity, String, &'static str)> {
        problems.iter().map(|p| (p.severity, p.key_path.clone(), p.rule)).collect()
    }

    /// A CUDA + ROCm kernel with one extra kernel, on the default matrix.
    fn with_kernel(name: &str, k: Kernel) -> BuildConfig {
        let mut c = torch_config(&[Cuda, Rocm], &[]);
        c.kernels.insert(name.into(), k);
        c
    }

    #[test]
    fn relu_like_kernel_has_no_findings() {
        let c = torch_config(&[Cpu, Cuda, Metal, Rocm, Xpu], &[Cpu, Cuda, Metal, Rocm, Xpu]);
        assert_eq!(check(&c), Vec::<Problem>::new());
    }

    #[test]
    fn capability_no_toolkit_builds_is_an_error_with_the_range() {
        let c = with_kernel("relu", cuda_kernel(Some(&["8.0", "99999.0", "3.5"]), None));
        let p = check(&c);
        assert_eq!(
            summary(&p),
            [
                (Severity::Error, "kernel.relu.cuda-capabilities[1]".into(), "capability-out-of-range"),
                (Severity::Error, "kernel.relu.cuda-capabilities[2]".into(), "capability-out-of-range"),
            ]
        );
        assert_eq!(
            p[0].message,
            "kernel `relu`: capability `99999.0` cannot be built by CUDA 12.6, 13.0, 13.2; they build 5.0 to 12.1"
        );
        assert!(p[1].message.contains("`3.5`"));
        assert_eq!(
            p[0].help.as_deref(),
            Some(
                "remove it, or use a capability those CUDA versions build: 5.0, 5.2, 5.3, 6.0, 6.1, 6.2, 7.0, 7.2, \
                 7.5, 8.0, 8.6, 8.7, 8.8, 8.9, 9.0, 10.0, 10.3, 11.0, 12.0, 12.1"
            )
        );
    }

    #[test]
    fn megablocks_capability_11_8_is_ignored_with_a_suggestion() {
        // kernels-community/megablocks lists "11.8" (no such GPU); upstream silently ignores it
        // and builds the rest, so do we, but not silently.
        let c = with_kernel("megablocks", cuda_kernel(Some(&["8.0", "11.8", "12.0"]), None));
        let p = check(&c);
        assert_eq!(
            summary(&p),
            [(Severity::Warning, "kernel.megablocks.cuda-capabilities[1]".into(), "capability-not-built")]
        );
        assert_eq!(
            p[0].message,
            "kernel `megablocks`: capability `11.8` is not an architecture that CUDA 12.6, 13.0, 13.2 builds; it is ignored"
        );
        assert_eq!(p[0].help.as_deref(), Some("did you mean `11.0`? Otherwise remove it"));
    }

    #[test]
    fn only_unbuilt_capabilities_is_an_error() {
        let c = with_kernel("k", cuda_kernel(Some(&["11.8", "10.2"]), None));
        assert_eq!(
            summary(&check(&c)),
            [
                (Severity::Warning, "kernel.k.cuda-capabilities[0]".into(), "capability-not-built"),
                (Severity::Warning, "kernel.k.cuda-capabilities[1]".into(), "capability-not-built"),
                (Severity::Error, "kernel.k.cuda-capabilities".into(), "no-buildable-capability"),
            ]
        );
    }

    #[test]
    fn suffix_below_its_first_capability_is_an_error() {
        let c = with_kernel("k", cuda_kernel(Some(&["8.0a", "9.0f", "9.0a"]), None));
        let p = check(&c);
        assert_eq!(
            summary(&p),
            [
                (Severity::Error, "kernel.k.cuda-capabilities[0]".into(), "capability-suffix"),
                (Severity::Error, "kernel.k.cuda-capabilities[1]".into(), "capability-suffix"),
            ]
        );
        assert!(
            p[0].message.contains("the `a` (architecture-specific) suffix exists from capability 9.0 on"),
            "{}",
            p[0].message
        );
        assert!(
            p[1].message.contains("the `f` (family) suffix exists from capability 10.0 on"),
            "{}",
            p[1].message
        );
    }

    #[test]
    fn kernel_unbuildable_with_some_cuda_versions_is_skipped_there() {
        let c = with_kernel("sm100", cuda_kernel(Some(&["10.0f"]), None));
        let p = check(&c);
        assert_eq!(
            summary(&p),
            [(Severity::Warning, "kernel.sm100.cuda-capabilities".into(), "kernel-skipped")]
        );
        assert_eq!(
            p[0].message,
            "kernel `sm100`: none of its cuda-capabilities (10.0f) can be built with CUDA 12.6; the kernel is skipped in those variants"
        );
        // And the cells agree: nothing is claimed for cu126.
        let cu126 = cells(&c, "x86_64-linux", Scope::Bundle)
            .into_iter()
            .find(|c| c.name == "torch214-cxx11-cu126-x86_64-linux")
            .unwrap();
        assert_eq!(cu126.cuda_capabilities, Some(vec![]));
    }

    #[test]
    fn explicit_cuda_minver_is_not_a_skip_warning() {
        let c = with_kernel("sm100", cuda_kernel(Some(&["10.0f"]), Some("12.9")));
        assert_eq!(check(&c), Vec::<Problem>::new());
    }

    #[test]
    fn suffix_needing_a_newer_cuda_than_the_bounds_allow_leaves_nothing_to_build() {
        let mut c = with_kernel("sm100", cuda_kernel(Some(&["10.0f"]), None));
        c.general.cuda.maxver = Some(v("12.6"));
        let p = check(&c);
        assert_eq!(
            summary(&p),
            [
                (
                    Severity::Warning,
                    "kernel.sm100.cuda-capabilities[0]".into(),
                    "capability-needs-newer-cuda"
                ),
                (Severity::Error, "kernel.sm100.cuda-capabilities".into(), "no-buildable-capability"),
            ]
        );
        assert!(
            p[0].message.starts_with("kernel `sm100`: capability `10.0f` needs CUDA 12.9 or newer"),
            "{}",
            p[0].message
        );
        assert!(p[0].help.as_deref().unwrap().contains("needs CUDA 12.9 or newer"), "{:?}", p[0].help);
    }

    #[test]
    fn capability_of_a_newer_toolkit_than_the_bounds_is_a_warning_naming_the_cells() {
        // 10.0 (Blackwell) needs CUDA 12.8; a kernel limited to CUDA 12.6 skips it and builds 8.0 and 9.0.
        let mut c = with_kernel("k", cuda_kernel(Some(&["8.0", "9.0", "10.0"]), None));
        c.general.cuda.maxver = Some(v("12.6"));
        let p = check(&c);
        assert_eq!(
            summary(&p),
            [(Severity::Warning, "kernel.k.cuda-capabilities[2]".into(), "capability-needs-newer-cuda")]
        );
        assert_eq!(
            p[0].message,
            "kernel `k`: capability `10.0` needs CUDA 12.8 or newer, which the kernel's CUDA bounds leave out \
             (it is built with CUDA 12.6); torch212-cxx11-cu126-aarch64-linux, torch213-cxx11-cu126-aarch64-linux, \
             torch214-cxx11-cu126-aarch64-linux, torch212-cxx11-cu126-x86_64-linux, torch213-cxx11-cu126-x86_64-linux, \
             torch214-cxx11-cu126-x86_64-linux build 8.0, 9.0"
        );
        assert_eq!(p[0].help.as_deref(), Some("raise general.cuda.maxver to build it, or remove it"));
    }

    #[test]
    fn renamed_capability_is_gated_by_cuda_version() {
        // 10.1 exists up to CUDA 12.9 and is 11.0 from CUDA 13: buildable with 13.x, not 12.6.
        let c = with_kernel("k", cuda_kernel(Some(&["10.1"]), None));
        let p = check(&c);
        assert_eq!(summary(&p), [(Severity::Warning, "kernel.k.cuda-capabilities".into(), "kernel-skipped")]);
        assert!(p[0].message.contains("CUDA 12.6;"), "{}", p[0].message);
    }

    #[test]
    fn empty_capability_list_is_an_error() {
        let c = with_kernel("k", cuda_kernel(Some(&[]), None));
        assert_eq!(
            summary(&check(&c)),
            [(Severity::Error, "kernel.k.cuda-capabilities".into(), "empty-capabilities")]
        );
    }

    #[test]
    fn cuda_minver_above_every_cell_means_never_built() {
        let c = with_kernel("k", cuda_kernel(None, Some("14.0")));
        let p = check(&c);
        assert_eq!(summary(&p), [(Severity::Warning, "kernel.k.cuda-minver".into(), "kernel-never-built")]);
    }

    #[test]
    fn unknown_rocm_arch_is_an_error_with_a_suggestion() {
        let c = with_kernel("r", rocm_kernel(&["gfx942", "gfx99999", "gfx9420"]));
        let p = check(&c);
        assert_eq!(
            summary(&p),
            [
                (Severity::Error, "kernel.r.rocm-archs[1]".into(), "unknown-rocm-arch"),
                (Severity::Error, "kernel.r.rocm-archs[2]".into(), "unknown-rocm-arch"),
            ]
        );
        assert_eq!(
            p[0].message,
            "kernel `r`: `gfx99999` is not a gfx target that any ROCm release of build matrix 2026-12 knows"
        );
        let targets = "gfx900, gfx906, gfx908, gfx90a, gfx942, gfx950, gfx1030, gfx1100, gfx1101, gfx1102, \
                       gfx1103, gfx1150, gfx1151, gfx1200, gfx1201";
        assert_eq!(p[0].help.as_deref(), Some(format!("ROCm 7.1, 7.2 builds: {targets}").as_str()));
        assert_eq!(
            p[1].help.as_deref(),
            Some(format!("did you mean `gfx942`? ROCm 7.1, 7.2 builds: {targets}").as_str())
        );
    }

    #[test]
    fn known_but_unsupported_rocm_arch_is_skipped_with_a_warning() {
        let c = with_kernel("r", rocm_kernel(&["gfx90a", "gfx940"]));
        let p = check(&c);
        assert_eq!(summary(&p), [(Severity::Warning, "kernel.r.rocm-archs[1]".into(), "rocm-arch-skipped")]);
        assert_eq!(
            p[0].message,
            "kernel `r`: `gfx940` is not supported by ROCm 7.1, 7.2; it is not compiled there"
        );
    }

    #[test]
    fn rocm_archs_no_release_supports_is_an_error() {
        let c = with_kernel("r", rocm_kernel(&["gfx940", "gfx941"]));
        let p = check(&c);
        assert_eq!(
            summary(&p),
            [
                (Severity::Warning, "kernel.r.rocm-archs[0]".into(), "rocm-arch-skipped"),
                (Severity::Warning, "kernel.r.rocm-archs[1]".into(), "rocm-arch-skipped"),
                (Severity::Error, "kernel.r.rocm-archs".into(), "empty-rocm-archs"),
            ]
        );
    }

    #[test]
    fn cuda_bounds_that_match_nothing_warn_with_the_bounds() {
        let mut c = torch_config(&[Cpu, Cuda], &[Cpu, Cuda]);
        c.general.cuda.minver = Some(v("12.4"));
        c.general.cuda.maxver = Some(v("12.4"));
        let p = check(&c);
        assert_eq!(
            summary(&p),
            [(Severity::Warning, "general.backends[1]".into(), "backend-without-variants")]
        );
        assert_eq!(
            p[0].message,
            "`cuda` is listed in general.backends but no variant builds it: general.cuda.minver = \"12.4\" and \
             general.cuda.maxver = \"12.4\" (the matrix has CUDA 12.6, 13.0, 13.2)"
        );
    }

    #[test]
    fn backend_without_build_sets_warns() {
        let c = noarch_config(&[Neuron]);
        let p = check(&c);
        assert_eq!(
            summary(&p),
            [(Severity::Warning, "general.backends[0]".into(), "backend-without-variants")]
        );
        assert!(p[0].message.ends_with("the build matrix has no build set for `neuron`"), "{}", p[0].message);
    }

    #[test]
    fn noarch_lists_are_checked_too() {
        let mut c = noarch_config(&[Cuda, Rocm]);
        if let Framework::TorchNoarch(t) = &mut c.framework {
            t.cuda_capabilities = Some(vec![cap("9.0a"), cap("3.5")]);
            t.rocm_archs = Some(vec!["gfx942".into(), "gfx9999".into()]);
        }
        assert_eq!(
            summary(&check(&c)),
            [
                (Severity::Error, "torch-noarch.cuda_capabilities[1]".into(), "capability-out-of-range"),
                (Severity::Error, "torch-noarch.rocm_archs[1]".into(), "unknown-rocm-arch"),
            ]
        );
    }

    #[test]
    fn unknown_matrix_pin_is_an_error_listing_the_known_ones() {
        let mut c = with_kernel("k", cuda_kernel(Some(&["3.5"]), None));
        c.general.matrix = Some("upstream-2025-01".into());
        let p = check(&c);
        assert_eq!(summary(&p), [(Severity::Error, "general.matrix".into(), "unknown-matrix")]);
        assert_eq!(
            p[0].message,
            "`general.matrix` pins the build matrix `upstream-2025-01`, which this kernel-builder does not know"
        );
        assert_eq!(
            p[0].help.as_deref(),
            Some(
                "known matrices: `2026-12` (the default, revision 2026-12-01), `upstream-2026-08` (revision \
                 2026-08-20); pin one of them, or remove `matrix` to build with the default"
            )
        );
        c.general.matrix = Some("upstream-2026-08".into());
        assert_eq!(
            summary(&check(&c)),
            [(Severity::Error, "kernel.k.cuda-capabilities[0]".into(), "capability-out-of-range")]
        );
    }

    #[test]
    fn tvm_ffi_kernels_build_in_the_default_bundle_and_a_backend_without_tvm_ffi_is_named() {
        // No bundle set offers tvm-ffi, so the tvm-ffi sets are the tvm-ffi kernel's bundle.
        let mut c = tvm_ffi_config(&[Cpu, Cuda], &[Cpu, Cuda]);
        assert_eq!(check(&c), Vec::<Problem>::new());
        let bundle: Vec<String> =
            cells(&c, "x86_64-linux", Scope::Bundle).into_iter().map(|c| c.name).collect();
        assert_eq!(
            bundle,
            [
                "tvm-ffi01-cpu-x86_64-linux",
                "tvm-ffi01-cu126-x86_64-linux",
                "tvm-ffi01-cu130-x86_64-linux",
                "tvm-ffi01-cu132-x86_64-linux",
            ]
        );
        // ROCm has no build set offering tvm-ffi: the warning says so.
        let rocm = tvm_ffi_config(&[Cpu, Rocm], &[Cpu, Rocm]);
        let p = check(&rocm);
        assert_eq!(
            summary(&p),
            [(Severity::Warning, "general.backends[1]".into(), "backend-without-variants")]
        );
        assert_eq!(
            p[0].message,
            "`rocm` is listed in general.backends but no variant builds it: no `rocm` build set of the matrix offers tvm-ffi"
        );
        c.general.matrix = Some("upstream-2026-08".into());
        assert_eq!(check(&c), Vec::<Problem>::new());
        // torch-tpu is never in a bundle: no warning for it.
        assert_eq!(check(&noarch_config(&[Cpu, Tpu])), Vec::<Problem>::new());
        // A torch bound that keeps only torch versions outside the bundle does warn.
        let mut old = torch_config(&[Cuda], &[Cuda]);
        if let Framework::Torch(t) = &mut old.framework {
            t.maxver = Some(v("2.13"));
        }
        assert_eq!(
            summary(&check(&old)),
            [(Severity::Warning, "general.backends[0]".into(), "no-bundle-variants")]
        );
        assert!(check(&old)[0].help.as_deref().unwrap().contains("`matrix = \"upstream-2026-08\"`"));
    }

    #[test]
    fn loader_arch_check_semantics() {
        assert!(
            loader_covers("9.0", (9, 0)) && !loader_covers("9.0", (10, 0)) && !loader_covers("9.0", (8, 6))
        );
        assert!(loader_covers("8.0", (8, 6)) && !loader_covers("8.6", (8, 0)));
        assert!(loader_covers("9.0a", (9, 0)) && !loader_covers("9.0a", (9, 1)));
        assert!(loader_covers("10.0f", (10, 3)) && !loader_covers("10.0f", (12, 0)));
        assert!(
            loader_covers("7.5+PTX", (12, 0))
                && loader_covers("7.5+PTX", (7, 5))
                && !loader_covers("7.5+PTX", (7, 0))
        );
        assert!(!loader_covers("sm_90", (9, 0)));
        assert!(!loader_covers("9.0a+PTX", (10, 0)) && !loader_covers("10.0f+PTX", (12, 0)));
    }

    #[test]
    fn noarch_capabilities_that_refuse_gpus_warn() {
        // A noarch Helion kernel listing 9.0: the loader refuses an sm_100 card it runs on.
        let mut c = noarch_config(&[Cuda, Rocm]);
        if let Framework::TorchNoarch(t) = &mut c.framework {
            t.cuda_capabilities = Some(vec![cap("9.0")]);
            t.rocm_archs = Some(vec!["gfx942".into()]);
        }
        let p = check(&c);
        assert_eq!(
            summary(&p),
            [
                (Severity::Warning, "torch-noarch.cuda_capabilities".into(), "loader-refuses-gpus"),
                (Severity::Warning, "torch-noarch.rocm_archs".into(), "loader-refuses-gpus"),
            ]
        );
        assert!(
            p[0].message.contains("refuses GPUs of capability 10.0, 11.0, 12.0, newer than 9.0,"),
            "{}",
            p[0].message
        );
        assert_eq!(
            p[0].help.as_deref(),
            Some("write `9.0+PTX` to accept 9.0 and every newer GPU, or remove cuda_capabilities to load on every GPU")
        );
        assert!(p[1].message.contains("refuses gfx900, gfx906, gfx908, gfx90a, gfx950,"), "{}", p[1].message);
        // `+PTX` covers every newer GPU, and a list that covers each newer major does too.
        for list in
            [vec![cap("9.0+PTX")], vec![cap("8.0"), cap("9.0"), cap("10.0"), cap("11.0"), cap("12.0")]]
        {
            if let Framework::TorchNoarch(t) = &mut c.framework {
                t.cuda_capabilities = Some(list);
                t.rocm_archs = None;
            }
            assert_eq!(check(&c), Vec::<Problem>::new());
        }
    }

    #[test]
    fn odd_kernel_names_are_quoted_in_key_paths() {
        let c = with_kernel("a.b", cuda_kernel(Some(&["3.5"]), None));
        assert_eq!(check(&c)[0].key_path, "kernel.\"a.b\".cuda-capabilities[0]");
    }
}
