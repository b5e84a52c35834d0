//! The build matrix as data, read from `nix/build-matrix.json` (embedded at compile time).
//!
//! That file is the one source of truth: the Nix library reads the same bytes with
//! `builtins.fromJSON`. Its `format` field names the schema version (`kernel-builder-matrix-v1`).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Deserialize;

use crate::config::{Backend, Version};

/// The raw JSON, exactly as committed.
pub const MATRIX_JSON: &str = include_str!("../../nix/build-matrix.json");

/// The whole matrix file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatrixData {
    /// Schema name, `kernel-builder-matrix-v1`.
    pub format: String,
    /// Nix system strings, e.g. `x86_64-linux`.
    pub systems: Vec<String>,
    /// Per CUDA toolkit version (`"13.0"`): what it can build.
    pub cuda: BTreeMap<String, CudaToolkit>,
    /// Which CUDA versions and capabilities accept the `a` and `f` suffixes.
    pub cuda_arch_specific: BTreeMap<String, ArchSpecificRule>,
    /// ROCm facts: `known_archs` and, per ROCm version, its supported gfx targets.
    pub rocm: RocmData,
    /// The build sets (torch × backend version × systems), in file order.
    pub build_sets: Vec<BuildSet>,
}

/// What one CUDA toolkit can compile.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CudaToolkit {
    /// Every capability (`X.Y`) nvcc of this version accepts.
    pub capabilities: Vec<String>,
    /// The capabilities built for a kernel that does not set `cuda-capabilities`
    /// (the last one carries `+PTX`).
    pub default: Vec<String>,
    /// Capabilities renamed from this version on: old → new (`10.1` → `11.0` from CUDA 13).
    #[serde(default)]
    pub renamed: BTreeMap<String, String>,
}

/// When a capability suffix (`a` or `f`) is available.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchSpecificRule {
    pub min_capability: String,
    pub min_cuda: String,
}

/// ROCm targets.
#[derive(Debug, Deserialize)]
pub struct RocmData {
    /// Every gfx target name we recognise (a typo is anything else).
    pub known_archs: Vec<String>,
    /// Per ROCm version (`"7.1"`): the targets it builds.
    #[serde(flatten)]
    pub versions: BTreeMap<String, RocmRelease>,
}

/// One ROCm release.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RocmRelease {
    pub archs: Vec<String>,
}

/// One entry of the matrix: a torch version with one backend (and its version) on some systems.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuildSet {
    /// Torch `major.minor`.
    pub torch: String,
    pub backend: Backend,
    /// CUDA / ROCm / XPU version; absent for cpu, metal and tpu.
    #[serde(default)]
    pub version: Option<String>,
    pub systems: Vec<String>,
    /// Part of the default bundle (`nix build .#bundle`).
    pub bundle: bool,
    /// tvm-ffi version this set can build, if any.
    #[serde(default)]
    pub tvm_ffi: Option<String>,
}

impl BuildSet {
    /// The torch version, parsed.
    pub fn torch_version(&self) -> Version {
        Version::parse(&self.torch).expect("build-matrix.json torch versions are checked by tests")
    }

    /// The backend version, parsed.
    pub fn backend_version(&self) -> Option<Version> {
        self.version
            .as_deref()
            .map(|v| Version::parse(v).expect("build-matrix.json versions are checked by tests"))
    }
}

/// The matrix, parsed once. Panics only if the committed JSON is malformed, which
/// `matrix_json_parses` catches.
pub fn matrix() -> &'static MatrixData {
    static DATA: OnceLock<MatrixData> = OnceLock::new();
    DATA.get_or_init(|| serde_json::from_str(MATRIX_JSON).expect("nix/build-matrix.json is valid"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matrix_json_parses() {
        let m: MatrixData = serde_json::from_str(MATRIX_JSON).unwrap();
        assert_eq!(m.format, "kernel-builder-matrix-v1");
        assert_eq!(m.build_sets.len(), 18);
        for set in &m.build_sets {
            set.torch_version();
            set.backend_version();
            for s in &set.systems {
                assert!(m.systems.contains(s), "unknown system {s}");
            }
            if set.backend == Backend::Cuda {
                assert!(m.cuda.contains_key(set.version.as_deref().unwrap()));
            }
            if set.backend == Backend::Rocm {
                assert!(m.rocm.versions.contains_key(set.version.as_deref().unwrap()));
            }
        }
        let flattened: usize = m.build_sets.iter().map(|s| s.systems.len()).sum();
        assert_eq!(flattened, 28);
    }
}
