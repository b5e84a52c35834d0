//! Which CUDA architectures one kernel compiles with one CUDA toolkit.
//!
//! The facts come from `nix/build-matrix.json`: per toolkit the capabilities its `nvcc` accepts,
//! its default list, and the architectures it renamed (`10.1` is `11.0` from CUDA 13); and the
//! rules for the `a` (architecture-specific) and `f` (family) suffixes.
//!
//! Matching follows the generated CMake's loose intersection (kernel-builder-cli §8.1): a
//! kernel capability `X.Y` is used for the toolkit's targets of the same major version that are
//! ≥ `X.Y` (so `8.0` code also serves 8.6 GPUs), suffixes are kept, and `+PTX` is kept so the
//! PTX is embedded too. Because Nix builds every architecture the toolkit supports, the result
//! is the kernel's capabilities that this `nvcc` can compile: an entry it cannot compile is
//! skipped for this toolkit, never replaced by a default architecture.

use crate::config::{CapabilitySuffix, CudaCapability, Version};

use super::data::{matrix, CudaToolkit, MatrixData};

/// Parse a version from `nix/build-matrix.json` (checked by `matrix_json_parses`).
pub(crate) fn json_version(s: &str) -> Version {
    Version::parse(s).unwrap_or_else(|_| Version { parts: Vec::new(), text: s.to_owned() })
}

/// The `(major, minor)` of a plain `X.Y` string from the matrix JSON.
fn json_cap(s: &str) -> Option<(u32, u32)> {
    CudaCapability::parse(s).ok().map(|c| (c.major, c.minor))
}

/// Why one capability is not compiled by one toolkit (`None` from [`resolve_one`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SuffixRule {
    /// The suffix needs at least this capability (`9.0` for `a`, `10.0` for `f`).
    MinCapability(String),
}

/// The suffix rule a capability breaks regardless of the toolkit (`8.0a`: `a` starts at 9.0).
pub(crate) fn suffix_violation(m: &MatrixData, cap: &CudaCapability) -> Option<SuffixRule> {
    let key = match cap.suffix {
        CapabilitySuffix::None => return None,
        CapabilitySuffix::Arch => "a",
        CapabilitySuffix::Family => "f",
    };
    let rule = m.cuda_arch_specific.get(key)?;
    let min = json_cap(&rule.min_capability)?;
    ((cap.major, cap.minor) < min).then(|| SuffixRule::MinCapability(rule.min_capability.clone()))
}

/// The CUDA version from which a suffix is accepted (`12.0` for `a`, `12.9` for `f`).
pub(crate) fn suffix_min_cuda(m: &MatrixData, suffix: CapabilitySuffix) -> Option<Version> {
    let key = match suffix {
        CapabilitySuffix::None => return None,
        CapabilitySuffix::Arch => "a",
        CapabilitySuffix::Family => "f",
    };
    m.cuda_arch_specific.get(key).map(|r| json_version(&r.min_cuda))
}

/// What toolkit `cuda` (its version) compiles for one kernel capability, after renaming
/// (`10.1` → `11.0` from CUDA 13); `None` when it cannot compile it.
pub(crate) fn resolve_one(
    m: &MatrixData,
    cap: &CudaCapability,
    cuda: &Version,
    toolkit: &CudaToolkit,
) -> Option<CudaCapability> {
    if suffix_violation(m, cap).is_some() {
        return None;
    }
    if let Some(min_cuda) = suffix_min_cuda(m, cap.suffix) {
        if *cuda < min_cuda {
            return None;
        }
    }
    let plain = format!("{}.{}", cap.major, cap.minor);
    let (major, minor) = match toolkit.renamed.get(&plain).and_then(|n| json_cap(n)) {
        Some(renamed) => renamed,
        None => (cap.major, cap.minor),
    };
    let targets = toolkit.capabilities.iter().filter_map(|t| json_cap(t));
    let compiles = match cap.suffix {
        // A family target `X.Yf` covers every `X.Z` with Z ≥ Y that this toolkit knows.
        CapabilitySuffix::Family => targets.clone().any(|(ma, mi)| ma == major && mi >= minor),
        // Plain and `a` capabilities are compiled as written, so nvcc must know that exact one.
        CapabilitySuffix::None | CapabilitySuffix::Arch => targets.clone().any(|t| t == (major, minor)),
    };
    compiles.then_some(CudaCapability { major, minor, suffix: cap.suffix, ptx: cap.ptx })
}

/// Resolve a kernel's capability list for one toolkit: sorted, duplicates removed, and `X.Y`
/// dropped where `X.Y+PTX` is present (the latter includes the former's machine code).
pub(crate) fn resolve_list(
    m: &MatrixData,
    caps: &[CudaCapability],
    cuda: &Version,
    toolkit: &CudaToolkit,
) -> Vec<CudaCapability> {
    normalize(caps.iter().filter_map(|c| resolve_one(m, c, cuda, toolkit)).collect())
}

/// Sort, remove duplicates, and drop `X.Y` where `X.Y+PTX` is present.
pub(crate) fn normalize(mut caps: Vec<CudaCapability>) -> Vec<CudaCapability> {
    caps.sort();
    caps.dedup();
    let with_ptx: Vec<CudaCapability> = caps.iter().filter(|c| c.ptx).cloned().collect();
    caps.retain(|c| {
        c.ptx || !with_ptx.iter().any(|p| (p.major, p.minor, p.suffix) == (c.major, c.minor, c.suffix))
    });
    caps
}

/// The toolkit's default capabilities, parsed.
pub(crate) fn default_list(toolkit: &CudaToolkit) -> Vec<CudaCapability> {
    toolkit.default.iter().filter_map(|c| CudaCapability::parse(c).ok()).collect()
}

/// The CUDA architectures one kernel compiles with the CUDA toolkit `cuda` (a key of the
/// matrix's `cuda` table, e.g. `"13.0"`; `"13"` finds it too).
///
/// `kernel` is the kernel's `cuda-capabilities`; `None` gives the toolkit's default list
/// (whose last entry carries `+PTX`). The result is sorted by capability and may be empty
/// (nothing in the list can be built by this toolkit: the kernel is skipped there).
///
/// Errors when `cuda` is not a toolkit of the matrix. Uses the default matrix; see
/// [`resolve_cuda_capabilities_in`] for a kernel that pins another one.
pub fn resolve_cuda_capabilities(
    kernel: Option<&[CudaCapability]>,
    cuda: &str,
) -> anyhow::Result<Vec<String>> {
    resolve_cuda_capabilities_in(matrix(), kernel, cuda)
}

/// [`resolve_cuda_capabilities`] with the toolkit tables of matrix `m`
/// ([`super::data::for_config`] gives a kernel's).
pub fn resolve_cuda_capabilities_in(
    m: &MatrixData,
    kernel: Option<&[CudaCapability]>,
    cuda: &str,
) -> anyhow::Result<Vec<String>> {
    let (version, toolkit) = known_toolkit(m, cuda)?;
    Ok(match kernel {
        None => toolkit.default.clone(),
        Some(caps) => resolve_list(m, caps, &version, toolkit).iter().map(ToString::to_string).collect(),
    })
}

/// The entries of a kernel's `cuda-capabilities` that the CUDA toolkit `cuda` of matrix `m`
/// cannot compile, as written and in the kernel's order: what [`resolve_cuda_capabilities_in`]
/// leaves out (`["5.0"]` of `["5.0", "9.0"]` with CUDA 13.0). A renamed architecture (`10.1`,
/// built as `11.0` from CUDA 13) is not left out.
///
/// Errors when `cuda` is not a toolkit of `m`.
pub fn unbuildable_cuda_capabilities_in(
    m: &MatrixData,
    kernel: &[CudaCapability],
    cuda: &str,
) -> anyhow::Result<Vec<String>> {
    let (version, toolkit) = known_toolkit(m, cuda)?;
    Ok(kernel
        .iter()
        .filter(|c| resolve_one(m, c, &version, toolkit).is_none())
        .map(ToString::to_string)
        .collect())
}

/// [`toolkit`], or an error naming the toolkits `m` has.
fn known_toolkit<'m>(m: &'m MatrixData, cuda: &str) -> anyhow::Result<(Version, &'m CudaToolkit)> {
    toolkit(m, cuda).ok_or_else(|| {
        let known: Vec<&str> = m.cuda.keys().map(String::as_str).collect();
        anyhow::anyhow!("CUDA `{cuda}` is not in the build matrix {} (known: {})", m.name, known.join(", "))
    })
}

/// Look a toolkit of `m` up by version, comparing numerically (`"13"` finds `"13.0"`).
pub(crate) fn toolkit<'m>(m: &'m MatrixData, cuda: &str) -> Option<(Version, &'m CudaToolkit)> {
    let wanted = Version::parse(cuda).ok()?;
    m.cuda.iter().find(|(k, _)| json_version(k) == wanted).map(|(k, t)| (json_version(k), t))
}

/// The lowest and highest capability (`(major, minor)`) any of these toolkits compiles:
/// `((5, 0), (12, 1))` for CUDA 12.6 to 13.2.
pub(crate) fn buildable_range(m: &MatrixData, toolkits: &[&str]) -> Option<((u32, u32), (u32, u32))> {
    let mut all: Vec<(u32, u32)> = toolkits
        .iter()
        .filter_map(|k| toolkit(m, k))
        .flat_map(|(_, t)| t.capabilities.iter().filter_map(|c| json_cap(c)))
        .collect();
    all.sort();
    Some((*all.first()?, *all.last()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(list: &[&str]) -> Vec<CudaCapability> {
        list.iter().map(|c| CudaCapability::parse(c).unwrap()).collect()
    }

    fn resolve(list: &[&str], cuda: &str) -> Vec<String> {
        resolve_cuda_capabilities(Some(&caps(list)), cuda).unwrap()
    }

    #[test]
    fn matrix_json_is_consistent() {
        for m in super::super::data::all() {
            toolkit_tables_are_consistent(m);
        }
    }

    fn toolkit_tables_are_consistent(m: &MatrixData) {
        for (key, tk) in &m.cuda {
            assert!(Version::parse(key).is_ok(), "CUDA key {key}");
            for c in &tk.capabilities {
                let p = CudaCapability::parse(c).unwrap();
                assert_eq!(
                    (p.suffix, p.ptx),
                    (CapabilitySuffix::None, false),
                    "{key}: {c} must be plain X.Y"
                );
            }
            // Every default is buildable, and only the last one embeds PTX.
            for (i, d) in tk.default.iter().enumerate() {
                let p = CudaCapability::parse(d).unwrap();
                assert!(tk.capabilities.contains(&format!("{}.{}", p.major, p.minor)), "{key}: default {d}");
                assert_eq!(p.ptx, i + 1 == tk.default.len(), "{key}: {d}");
            }
            for (old, new) in &tk.renamed {
                assert!(
                    !tk.capabilities.contains(old) && tk.capabilities.contains(new),
                    "{key}: {old} -> {new}"
                );
            }
        }
        for rule in m.cuda_arch_specific.values() {
            assert!(CudaCapability::parse(&rule.min_capability).is_ok());
            assert!(Version::parse(&rule.min_cuda).is_ok());
        }
        for (key, rel) in &m.rocm.versions {
            for a in &rel.archs {
                assert!(m.rocm.known_archs.contains(a), "ROCm {key}: {a} is not in known_archs");
            }
        }
    }

    #[test]
    fn default_list_when_the_kernel_sets_none() {
        assert_eq!(
            resolve_cuda_capabilities(None, "12.6").unwrap(),
            ["7.0", "7.2", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0+PTX"]
        );
        assert_eq!(
            resolve_cuda_capabilities(None, "13").unwrap(),
            resolve_cuda_capabilities(None, "13.0").unwrap()
        );
    }

    #[test]
    fn unknown_toolkit_is_an_error() {
        let err = resolve_cuda_capabilities(None, "11.8").unwrap_err().to_string();
        assert!(err.contains("`11.8` is not in the build matrix 2026-12"), "{err}");
    }

    #[test]
    fn sm90a_is_built_with_cuda_12_8() {
        // 12.8 is in the JSON although no build set uses it today.
        assert_eq!(resolve(&["9.0a"], "12.8"), ["9.0a"]);
        assert_eq!(resolve(&["8.0", "9.0a"], "12.6"), ["8.0", "9.0a"]);
    }

    #[test]
    fn arch_specific_suffix_needs_capability_9_0() {
        assert_eq!(resolve(&["8.0a"], "13.0"), Vec::<String>::new());
        assert!(suffix_violation(matrix(), &caps(&["8.0a"])[0]).is_some());
        assert!(suffix_violation(matrix(), &caps(&["9.0a"])[0]).is_none());
    }

    #[test]
    fn family_suffix_needs_cuda_12_9_and_capability_10_0() {
        assert_eq!(resolve(&["10.0f"], "12.8"), Vec::<String>::new());
        assert_eq!(resolve(&["10.0f"], "12.9"), ["10.0f"]);
        assert_eq!(resolve(&["10.0f"], "13.0"), ["10.0f"]);
        assert_eq!(resolve(&["12.0f"], "13.2"), ["12.0f"]);
        assert_eq!(resolve(&["9.0f"], "13.0"), Vec::<String>::new());
        assert_eq!(resolve(&["10.0f"], "12.6"), Vec::<String>::new());
    }

    #[test]
    fn renamed_architectures_follow_the_toolkit() {
        assert_eq!(resolve(&["10.1"], "12.8"), ["10.1"]);
        assert_eq!(resolve(&["10.1"], "13.0"), ["11.0"]);
        assert_eq!(resolve(&["10.1a"], "13.2"), ["11.0a"]);
        assert_eq!(resolve(&["10.1"], "12.6"), Vec::<String>::new());
        // The new name is not known to toolkits before the rename.
        assert_eq!(resolve(&["11.0"], "12.9"), Vec::<String>::new());
    }

    #[test]
    fn capabilities_a_toolkit_cannot_compile_are_skipped_not_replaced() {
        assert_eq!(resolve(&["5.0", "7.5", "8.0", "9.0"], "13.0"), ["7.5", "8.0", "9.0"]);
        assert_eq!(resolve(&["5.0", "7.5", "8.0", "9.0"], "12.6"), ["5.0", "7.5", "8.0", "9.0"]);
        assert_eq!(resolve(&["10.0", "12.0"], "12.6"), Vec::<String>::new());
        assert_eq!(resolve(&["99999.0"], "13.2"), Vec::<String>::new());
        assert_eq!(resolve(&["3.5"], "12.6"), Vec::<String>::new());
    }

    #[test]
    fn unbuildable_capabilities_are_the_ones_left_out() {
        let dropped = |list: &[&str], cuda: &str| {
            unbuildable_cuda_capabilities_in(matrix(), &caps(list), cuda).unwrap()
        };
        assert_eq!(dropped(&["5.0", "9.0"], "13.0"), ["5.0"]);
        assert_eq!(dropped(&["9.0", "5.0", "10.0f", "10.1"], "12.6"), ["10.0f", "10.1"]);
        assert_eq!(dropped(&["5.0", "9.0"], "12.6"), Vec::<String>::new());
        // Renamed, not dropped.
        assert_eq!(dropped(&["10.1"], "13.0"), Vec::<String>::new());
        assert!(unbuildable_cuda_capabilities_in(matrix(), &caps(&["9.0"]), "11.8").is_err());
    }

    #[test]
    fn ptx_is_kept_and_absorbs_the_plain_entry() {
        assert_eq!(resolve(&["9.0+PTX", "8.0"], "12.6"), ["8.0", "9.0+PTX"]);
        assert_eq!(resolve(&["9.0", "9.0+PTX"], "12.6"), ["9.0+PTX"]);
        assert_eq!(resolve(&["9.0a", "9.0+PTX"], "12.6"), ["9.0+PTX", "9.0a"]);
    }

    #[test]
    fn output_is_sorted_numerically() {
        assert_eq!(resolve(&["12.0", "9.0", "10.0", "8.0"], "13.0"), ["8.0", "9.0", "10.0", "12.0"]);
    }

    #[test]
    fn buildable_range_spans_the_toolkits() {
        assert_eq!(buildable_range(matrix(), &["12.6", "13.0", "13.2"]), Some(((5, 0), (12, 1))));
        assert_eq!(buildable_range(matrix(), &["13.0"]), Some(((7, 5), (12, 1))));
    }
}
