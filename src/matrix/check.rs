//! Checks of a `build.toml` against the build matrix: what the parser cannot know because it
//! depends on which CUDA toolkits and ROCm releases the kernel is built with.
//!
//! Rules (`Problem::rule`):
//!
//! - `capability-suffix` (error): an `a` / `f` suffix on a capability below the first one that
//!   has it (`a` from 9.0, `f` from 10.0);
//! - `capability-out-of-range` (error): no CUDA toolkit the kernel is built with can compile
//!   the capability, and it lies outside the range they build (`3.5`, `99999.0`) or its suffix
//!   needs a newer CUDA (`10.0f` when only CUDA 12.6 is built);
//! - `capability-not-built` (warning): a capability inside that range that no toolkit has
//!   (`11.8`), with a did-you-mean; it is ignored, the rest of the list is built;
//! - `no-buildable-capability` (error): nothing in the kernel's list can be built by any toolkit;
//! - `kernel-skipped` (warning): some CUDA versions (or ROCm releases) build nothing of the
//!   kernel's list; the kernel is left out of those variants, never built for a default instead;
//! - `empty-capabilities` / `empty-rocm-archs` (error): the list is empty, or nothing in it can be
//!   built by any ROCm release;
//! - `kernel-never-built` (warning): the kernel's `cuda-minver` is above every CUDA it would
//!   be built with;
//! - `unknown-rocm-arch` (error): a gfx target we do not know (a typo), with a suggestion;
//! - `rocm-arch-skipped` (warning): a known target that some ROCm releases do not build;
//! - `backend-without-variants` (warning): a backend of `general.backends` that no cell of the
//!   matrix builds, naming the bounds that exclude it.

use crate::config::{
    Backend, BuildConfig, CapabilitySuffix, CudaCapability, Framework, Kernel, Problem, Severity, Version,
};

use super::cells::{cells, Cell, Scope};
use super::cuda::{
    buildable_range, json_version, resolve_list, resolve_one, suffix_min_cuda, suffix_violation, toolkit,
    SuffixRule,
};
use super::data::matrix;
use super::rocm::{is_known_arch, release, suggest_arch};

/// Check `config` against the matrix; every finding, errors and warnings, in file order
/// (backends first, then kernels, then `[torch-noarch]`). Key paths use edition-5 names, e.g.
/// `kernel.relu.cuda-capabilities[1]`.
pub fn check(config: &BuildConfig) -> Vec<Problem> {
    let all: Vec<Cell> = matrix().systems.iter().flat_map(|s| cells(config, s, Scope::All)).collect();
    let mut out = Vec::new();
    backends_without_cells(config, &all, &mut out);
    let cudas = compiled_versions(&all, Backend::Cuda);
    let rocms = compiled_versions(&all, Backend::Rocm);
    for (name, kernel) in &config.kernels {
        match kernel.backend {
            Backend::Cuda => check_cuda_kernel(name, kernel, &cudas, &mut out),
            Backend::Rocm => check_rocm_kernel(name, kernel, &rocms, &mut out),
            _ => {}
        }
    }
    if let Framework::TorchNoarch(t) = &config.framework {
        let every: Vec<String> = matrix().cuda.keys().cloned().collect();
        for (i, cap) in t.cuda_capabilities.iter().flatten().enumerate() {
            let key = format!("torch-noarch.cuda_capabilities[{i}]");
            check_capability("`[torch-noarch]`", cap, &every, key, &mut out);
        }
        for (i, arch) in t.rocm_archs.iter().flatten().enumerate() {
            if !is_known_arch(arch) {
                out.push(unknown_arch("`[torch-noarch]`", arch, format!("torch-noarch.rocm_archs[{i}]")));
            }
        }
    }
    out
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

fn backends_without_cells(config: &BuildConfig, all: &[Cell], out: &mut Vec<Problem>) {
    for (i, &backend) in config.general.backends.iter().enumerate() {
        if all.iter().any(|c| c.backend == backend) {
            continue;
        }
        let sets: Vec<_> = matrix().build_sets.iter().filter(|s| s.backend == backend).collect();
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

/// Check one capability against the toolkits `toolkits`; true when an error was reported.
///
/// A capability none of them builds is an error when it lies outside the range they build
/// (`3.5`, `99999.0`) or when its suffix needs a newer CUDA than any of them; inside the range
/// (`11.8`: no such GPU, while 11.0 exists) it is a warning, because the rest of the list still
/// builds as upstream does (kernels-community/megablocks ships such a list).
fn check_capability(
    who: &str,
    cap: &CudaCapability,
    toolkits: &[String],
    key: String,
    out: &mut Vec<Problem>,
) -> bool {
    if let Some(SuffixRule::MinCapability(min)) = suffix_violation(cap) {
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
    let builds = |c: &CudaCapability| {
        toolkits.iter().any(|k| toolkit(k).is_some_and(|(ver, tk)| resolve_one(c, &ver, tk).is_some()))
    };
    if builds(cap) {
        return false;
    }
    let refs: Vec<&str> = toolkits.iter().map(String::as_str).collect();
    let range = buildable_range(&refs);
    let range_text =
        range.map(|((a, b), (c, d))| format!("; they build {a}.{b} to {c}.{d}")).unwrap_or_default();
    let plain = CudaCapability { suffix: CapabilitySuffix::None, ptx: false, ..cap.clone() };
    let too_old = |min: &Version| refs.iter().all(|k| json_version(k) < *min);
    if let Some(min_cuda) = suffix_min_cuda(cap.suffix).filter(|m| builds(&plain) || too_old(m)) {
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
    let near = nearest_same_major(cap, &refs);
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
            None => "remove it, or use a capability those CUDA versions build".to_owned(),
        }),
    ));
    true
}

/// The buildable capability of `cap`'s major version closest below it (else closest above),
/// keeping its suffix: `11.8` → `11.0`.
fn nearest_same_major(cap: &CudaCapability, toolkits: &[&str]) -> Option<String> {
    let mut same: Vec<(u32, u32)> = toolkits
        .iter()
        .filter_map(|k| toolkit(k))
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

fn check_cuda_kernel(name: &str, kernel: &Kernel, cell_cudas: &[String], out: &mut Vec<Problem>) {
    let base = kernel_key(name);
    let who = format!("kernel `{name}`");
    let built: Vec<String> = cell_cudas
        .iter()
        .filter(|c| kernel.cuda_minver.as_ref().is_none_or(|min| json_version(c) >= *min))
        .cloned()
        .collect();
    if !cell_cudas.is_empty() && built.is_empty() {
        if let Some(min) = &kernel.cuda_minver {
            out.push(problem(
                Severity::Warning,
                format!("{base}.cuda-minver"),
                "kernel-never-built",
                format!(
                    "{who} has cuda-minver = \"{min}\", above every CUDA it is built with ({}); it is compiled in no variant",
                    cell_cudas.join(", ")
                ),
                Some("lower cuda-minver, or raise general.cuda.maxver".to_owned()),
            ));
        }
    }
    let Some(caps) = &kernel.cuda_capabilities else { return };
    let from_cells = !built.is_empty();
    let toolkits: Vec<String> = if from_cells { built } else { matrix().cuda.keys().cloned().collect() };
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
    let mut errors = 0;
    for (i, cap) in caps.iter().enumerate() {
        if check_capability(&who, cap, &toolkits, format!("{base}.cuda-capabilities[{i}]"), out) {
            errors += 1;
        }
    }
    if errors == caps.len() {
        return; // every entry is already an error
    }
    let empty: Vec<&str> = toolkits
        .iter()
        .filter(|k| toolkit(k).is_none_or(|(ver, tk)| resolve_list(caps, &ver, tk).is_empty()))
        .map(String::as_str)
        .collect();
    if empty.len() == toolkits.len() {
        out.push(problem(
            Severity::Error,
            format!("{base}.cuda-capabilities"),
            "no-buildable-capability",
            format!(
                "{who}: no CUDA version it is built with ({}) builds any of its cuda-capabilities",
                toolkits.join(", ")
            ),
            Some("list at least one capability those CUDA versions build".to_owned()),
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

fn unknown_arch(who: &str, arch: &str, key: String) -> Problem {
    let help = match suggest_arch(arch) {
        Some(s) => format!("did you mean `{s}`?"),
        None => format!("known gfx targets: {}", matrix().rocm.known_archs.join(", ")),
    };
    problem(
        Severity::Error,
        key,
        "unknown-rocm-arch",
        format!("{who}: `{arch}` is not a known ROCm gfx target"),
        Some(help),
    )
}

fn check_rocm_kernel(name: &str, kernel: &Kernel, cell_rocms: &[String], out: &mut Vec<Problem>) {
    let Some(archs) = &kernel.rocm_archs else { return };
    let base = kernel_key(name);
    let who = format!("kernel `{name}`");
    let from_cells = !cell_rocms.is_empty();
    let releases: Vec<String> =
        if from_cells { cell_rocms.to_vec() } else { matrix().rocm.versions.keys().cloned().collect() };
    let supports = |rel: &str, arch: &str| release(rel).is_some_and(|r| r.archs.iter().any(|a| a == arch));
    let mut known = 0;
    for (i, arch) in archs.iter().enumerate() {
        let key = format!("{base}.rocm-archs[{i}]");
        if !is_known_arch(arch) {
            out.push(unknown_arch(&who, arch, key));
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
                releases.first().map(String::as_str).unwrap_or("?"),
                releases.first().and_then(|r| release(r)).map(|r| r.archs.join(", ")).unwrap_or_default()
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
    use super::super::testutil::*;
    use super::*;
    use crate::config::Backend::*;

    fn summary(problems: &[Problem]) -> Vec<(Severity, String, &'static str)> {
        problems.iter().map(|p| (p.severity, p.key_path.clone(), p.rule)).collect()
    }

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
        assert_eq!(p[0].help.as_deref(), Some("remove it, or use a capability those CUDA versions build"));
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
            .find(|c| c.name == "torch212-cxx11-cu126-x86_64-linux")
            .unwrap();
        assert_eq!(cu126.cuda_capabilities, Some(vec![]));
    }

    #[test]
    fn explicit_cuda_minver_is_not_a_skip_warning() {
        let c = with_kernel("sm100", cuda_kernel(Some(&["10.0f"]), Some("12.9")));
        assert_eq!(check(&c), Vec::<Problem>::new());
    }

    #[test]
    fn suffix_needing_a_newer_cuda_than_the_bounds_allow_is_an_error() {
        let mut c = with_kernel("sm100", cuda_kernel(Some(&["10.0f"]), None));
        c.general.cuda.maxver = Some(v("12.6"));
        let p = check(&c);
        assert_eq!(
            summary(&p),
            [(Severity::Error, "kernel.sm100.cuda-capabilities[0]".into(), "capability-out-of-range")]
        );
        assert_eq!(
            p[0].message,
            "kernel `sm100`: capability `10.0f` cannot be built by CUDA 12.6; they build 5.0 to 9.0"
        );
        assert!(p[0].help.as_deref().unwrap().contains("needs CUDA 12.9 or newer"), "{:?}", p[0].help);
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
        assert_eq!(p[0].message, "kernel `r`: `gfx99999` is not a known ROCm gfx target");
        assert!(p[0].help.as_deref().unwrap().starts_with("known gfx targets: gfx900,"), "{:?}", p[0].help);
        assert_eq!(p[1].help.as_deref(), Some("did you mean `gfx942`?"));
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
    fn odd_kernel_names_are_quoted_in_key_paths() {
        let c = with_kernel("a.b", cuda_kernel(Some(&["3.5"]), None));
        assert_eq!(check(&c)[0].key_path, "kernel.\"a.b\".cuda-capabilities[0]");
    }
}
