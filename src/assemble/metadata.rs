//! `metadata.json` of a variant directory (reference: kernel-builder-cli.md §4.4, what the
//! `kernels` loader reads: kernels-loader-and-helion.md A8).
//!
//! Keys, in this order: `name`, `id`, `version`, `license`, `upstream` and `source` (only when
//! set), `python-depends`, `kernel-depends` (always, possibly `[]`), `backend` (`type`, and
//! `archs` only when known), `build-layout` (only `"zip"`: a variant without the key is read
//! as `files` by every loader, so files-layout trees stay as they were), `kernels-minver` (only when the variant needs a particular
//! loader release: computed by [`super::loader`], never set by hand), `digest` (the loader's
//! per-file format, [`crate::hash::digest`]), `provenance` (`kernel-builder`, then `kernel`
//! when known), and for compiled variants `build` (how it was built: `native`, `hermetic`, and
//! the toolchain's versions; readers ignore unknown keys, so the `kernels` loader is
//! unaffected). Written as pretty JSON with a two-space indent and a trailing newline.

use serde::Serialize;

use crate::config::{Backend, CudaCapability, KernelDependency};
use crate::hash::digest::Digest;
use crate::source::provenance::{BuilderProvenance, KernelRevision};

/// The whole file, fields in the order they are written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Metadata {
    /// `general.name`.
    pub name: String,
    /// The op namespace `_<python_name>_<backend>_<uid>`; the loader imports the variant under
    /// this name.
    pub id: String,
    pub version: u64,
    pub license: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// `general.python-depends`, then `[general.<backend>].python-depends`.
    pub python_depends: Vec<String>,
    /// `general.kernel-depends`, then `[general.<backend>].kernel-depends`.
    pub kernel_depends: Vec<KernelDependency>,
    pub backend: BackendInfo,
    /// How the package's files are laid out; written only when `zip`.
    pub build_layout: super::build_layout::BuildLayout,
    pub digest: Digest,
    pub provenance: Provenance,
    /// Compiled variants: how the variant was built.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub build: Option<BuildInfo>,
    /// An MLX noarch variant (`mlx-metal`): not written (the loader reads it from the variant's
    /// name), but it decides `kernels-minver` ([`super::loader`]).
    #[serde(skip)]
    pub mlx: bool,
}

/// `build`: how a compiled variant was built. A native build uses the host's toolchain, so it
/// says `"native": true, "hermetic": false`; a Nix cell names its package set
/// (`"package-set": "nixpkgs"`, `"native": false`) and says whether that set is hermetic (the
/// offline test set built from the host's tools is not). What is recorded depends on the
/// toolchain only, never on whether the build ran inside Nix, so a native build given a cell's
/// tools and package-set name is byte for byte the cell. The toolchain map holds each tool's
/// version (`torch`, `python`, `cxx`, `cmake`, `ninja`, `nvcc`), never a path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct BuildInfo {
    /// The tools were the host's own (PATH, `--python`), not a declared package set.
    pub native: bool,
    /// Built from pinned inputs only (a hermetic package set).
    pub hermetic: bool,
    /// The declared package set the tools came from (`nixpkgs`, …), when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub package_set: Option<String>,
    /// The oldest manylinux policy every shared object of the variant meets, from the ABI
    /// check (`manylinux_2_34`); absent when none does (or on macOS).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub manylinux: Option<String>,
    pub toolchain: std::collections::BTreeMap<String, String>,
    /// The CUDA capabilities the variant was compiled for when a quick check asked for fewer
    /// than the kernel publishes (`--cuda-capabilities`); `upload` refuses such a variant.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capabilities_only: Option<Vec<String>>,
}

/// `backend`: the backend and, when known, the architectures the variant supports. The
/// loader refuses a device none of `archs` covers (A9), so `archs` is only written when the
/// author states it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BackendInfo {
    #[serde(rename = "type")]
    pub kind: Backend,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archs: Option<Vec<String>>,
}

/// Sort and de-duplicate `backend.archs` of a CUDA variant by capability: major, minor, then
/// suffix (`8.0` < `9.0` < `9.0+PTX` < `9.0a` < `10.0` < `12.0f`), not as text (which put
/// `10.0` before `7.5`). An entry that is not a capability (none is written) sorts last.
pub fn sort_cuda_archs(archs: &mut Vec<String>) {
    archs.sort_by_cached_key(|a| (CudaCapability::parse(a).map_err(|_| a.clone()), a.clone()));
    archs.dedup();
}

/// Sort and de-duplicate `backend.archs` of a ROCm variant as the cells list them: by the
/// length of the name, then the name (`gfx90a` < `gfx942` < `gfx1030`).
pub fn sort_rocm_archs(archs: &mut Vec<String>) {
    archs.sort_by(|a, b| (a.len(), a).cmp(&(b.len(), b)));
    archs.dedup();
}

/// `provenance`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Provenance {
    #[serde(rename = "kernel-builder")]
    pub kernel_builder: BuilderProvenance,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelRevision>,
}

/// The written form: [`Metadata`]'s fields with `build-layout` and `kernels-minver` after
/// `backend`.
#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct Wire<'a> {
    name: &'a str,
    id: &'a str,
    version: u64,
    license: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    upstream: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<&'a str>,
    python_depends: &'a [String],
    kernel_depends: &'a [KernelDependency],
    backend: &'a BackendInfo,
    #[serde(skip_serializing_if = "Option::is_none")]
    build_layout: Option<super::build_layout::BuildLayout>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kernels_minver: Option<String>,
    digest: &'a Digest,
    provenance: &'a Provenance,
    #[serde(skip_serializing_if = "Option::is_none")]
    build: Option<&'a BuildInfo>,
}

impl Metadata {
    /// The file's bytes: pretty JSON (two-space indent) and a trailing newline, with
    /// `kernels-minver` as given. Written only through [`super::loader::metadata_json`], which
    /// computes it from what the variant uses and refuses a variant that release could not load.
    pub(super) fn to_json_bytes(&self, kernels_minver: Option<String>) -> anyhow::Result<Vec<u8>> {
        let wire = Wire {
            name: &self.name,
            id: &self.id,
            version: self.version,
            license: &self.license,
            upstream: self.upstream.as_deref(),
            source: self.source.as_deref(),
            python_depends: &self.python_depends,
            kernel_depends: &self.kernel_depends,
            backend: &self.backend,
            build_layout: (self.build_layout != super::build_layout::BuildLayout::Files)
                .then_some(self.build_layout),
            kernels_minver,
            digest: &self.digest,
            provenance: &self.provenance,
            build: self.build.as_ref(),
        };
        let mut out = serde_json::to_vec_pretty(&wire)?;
        out.push(b'\n');
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::config::KernelPin;
    use crate::hash::digest::Algorithm;

    #[test]
    fn archs_sort_by_capability_not_as_text() {
        let mut cuda: Vec<String> =
            ["12.0f", "10.0", "9.0a", "7.5", "9.0+PTX", "8.0", "10.0", "9.0"].map(String::from).to_vec();
        sort_cuda_archs(&mut cuda);
        assert_eq!(cuda, ["7.5", "8.0", "9.0", "9.0+PTX", "9.0a", "10.0", "12.0f"]);
        let mut rocm: Vec<String> = ["gfx1030", "gfx942", "gfx90a", "gfx942"].map(String::from).to_vec();
        sort_rocm_archs(&mut rocm);
        assert_eq!(rocm, ["gfx90a", "gfx942", "gfx1030"]);
    }

    #[test]
    fn every_key_in_the_reference_order() {
        let m = Metadata {
            name: "vector-add".into(),
            id: "_vector_add_cuda_abc1234".into(),
            version: 2,
            license: "Apache-2.0".into(),
            upstream: Some("https://github.com/example/upstream.git".into()),
            source: Some("https://github.com/example/source.git".into()),
            python_depends: vec!["helion".into(), "nvidia-cutlass-dsl".into()],
            kernel_depends: vec![
                KernelDependency { repo_id: "kernels-community/relu".into(), pin: KernelPin::Version(1) },
                KernelDependency { repo_id: "org/other".into(), pin: KernelPin::Revision("main".into()) },
            ],
            backend: BackendInfo { kind: Backend::Cuda, archs: Some(vec!["8.0".into(), "9.0".into()]) },
            build_layout: super::super::build_layout::BuildLayout::Zip,
            digest: Digest {
                algorithm: Algorithm::Sha256,
                files: BTreeMap::from([("__init__.py".to_owned(), "AAAA".to_owned())]),
            },
            provenance: Provenance {
                kernel_builder: BuilderProvenance {
                    version: "0.1.0".into(),
                    commit: Some("a".repeat(40)),
                    dirty: Some(false),
                },
                kernel: Some(KernelRevision { commit: "b".repeat(40), dirty: true }),
            },
            build: None,
            mlx: false,
        };
        let expected = format!(
            r#"{{
  "name": "vector-add",
  "id": "_vector_add_cuda_abc1234",
  "version": 2,
  "license": "Apache-2.0",
  "upstream": "https://github.com/example/upstream.git",
  "source": "https://github.com/example/source.git",
  "python-depends": [
    "helion",
    "nvidia-cutlass-dsl"
  ],
  "kernel-depends": [
    {{
      "repo-id": "kernels-community/relu",
      "version": 1
    }},
    {{
      "repo-id": "org/other",
      "revision": "main"
    }}
  ],
  "backend": {{
    "type": "cuda",
    "archs": [
      "8.0",
      "9.0"
    ]
  }},
  "build-layout": "zip",
  "kernels-minver": "0.19.0",
  "digest": {{
    "algorithm": "sha256",
    "files": {{
      "__init__.py": "AAAA"
    }}
  }},
  "provenance": {{
    "kernel-builder": {{
      "version": "0.1.0",
      "commit": "{a}",
      "dirty": false
    }},
    "kernel": {{
      "commit": "{b}",
      "dirty": true
    }}
  }}
}}
"#,
            a = "a".repeat(40),
            b = "b".repeat(40)
        );
        assert_eq!(String::from_utf8(super::super::loader::metadata_json(&m).unwrap()).unwrap(), expected);
    }
}
