//! Which gfx targets one ROCm kernel compiles with one ROCm release.
//!
//! A kernel's `rocm-archs` is intersected exactly with the release's supported targets
//! (`rocm.<version>.archs` in `nix/build-matrix.json`), as the generated CMake does with
//! `HIP_SUPPORTED_ARCHS`; without `rocm-archs` the kernel builds every supported target.

use crate::config::Version;

use super::cuda::json_version;
use super::data::{matrix, MatrixData, RocmRelease};

/// Look a ROCm release up by version, comparing numerically (`"7"` would find `"7.0"`).
pub(crate) fn release<'m>(m: &'m MatrixData, rocm: &str) -> Option<&'m RocmRelease> {
    let wanted = Version::parse(rocm).ok()?;
    m.rocm.versions.iter().find(|(k, _)| json_version(k) == wanted).map(|(_, r)| r)
}

/// The gfx targets a kernel compiles with ROCm `rocm`, in the release's order. `kernel` is the
/// kernel's `rocm-archs` (`None`: every target of the release). Empty when the release builds
/// none of them; `None` when `rocm` is not a release of the default matrix (see
/// [`resolve_rocm_archs_in`]).
pub fn resolve_rocm_archs(kernel: Option<&[String]>, rocm: &str) -> Option<Vec<String>> {
    resolve_rocm_archs_in(matrix(), kernel, rocm)
}

/// [`resolve_rocm_archs`] with the ROCm tables of matrix `m`.
pub fn resolve_rocm_archs_in(m: &MatrixData, kernel: Option<&[String]>, rocm: &str) -> Option<Vec<String>> {
    let rel = release(m, rocm)?;
    Some(match kernel {
        None => rel.archs.clone(),
        Some(wanted) => rel.archs.iter().filter(|a| wanted.contains(a)).cloned().collect(),
    })
}

/// Whether a gfx target name is one matrix `m` recognises (anything else is a typo).
pub fn is_known_arch(m: &MatrixData, arch: &str) -> bool {
    m.rocm.known_archs.iter().any(|a| a == arch)
}

/// The known gfx target closest to a misspelt one (edit distance ≤ 2, ties broken by the
/// longest common prefix), if one is close enough to suggest.
pub fn suggest_arch<'m>(m: &'m MatrixData, arch: &str) -> Option<&'m str> {
    m.rocm
        .known_archs
        .iter()
        .map(|k| {
            let common = arch.bytes().zip(k.bytes()).take_while(|(a, b)| a.eq_ignore_ascii_case(b)).count();
            (crate::suggest::distance(&arch.to_ascii_lowercase(), k), std::cmp::Reverse(common), k.as_str())
        })
        .filter(|(d, _, _)| *d <= 2)
        .min()
        .map(|(_, _, k)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_intersection_in_release_order() {
        let wanted: Vec<String> = ["gfx942", "gfx90a", "gfx940", "gfx1100"].map(String::from).to_vec();
        assert_eq!(resolve_rocm_archs(Some(&wanted), "7.1").unwrap(), ["gfx90a", "gfx942", "gfx1100"]);
        assert_eq!(resolve_rocm_archs(None, "7.2").unwrap().len(), 15);
        let august = super::super::data::named("upstream-2026-08").unwrap();
        assert_eq!(resolve_rocm_archs_in(august, None, "7.2").unwrap().len(), 10);
        assert_eq!(resolve_rocm_archs(None, "6.3"), None);
    }

    #[test]
    fn typos_get_a_suggestion() {
        let m = matrix();
        assert!(is_known_arch(m, "gfx940"));
        assert!(is_known_arch(m, "gfx1151"));
        assert!(!is_known_arch(m, "gfx99999"));
        assert_eq!(suggest_arch(m, "gfx9420"), Some("gfx942"));
        assert_eq!(suggest_arch(m, "gfx90A"), Some("gfx90a"));
        assert_eq!(suggest_arch(m, "sm_90"), None);
    }
}
