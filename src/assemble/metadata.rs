//! `metadata.json` of a variant directory (reference: kernel-builder-cli.md §4.4, what the
//! `kernels` loader reads: kernels-loader-and-helion.md A8).
//!
//! Keys, in this order: `name`, `id`, `version`, `license`, `upstream` and `source` (only when
//! set), `python-depends`, `kernel-depends` (always, possibly `[]`), `backend` (`type`, and
//! `archs` only when known), `digest` (the loader's per-file format, [`crate::hash::digest`]),
//! `provenance` (`kernel-builder`, then `kernel` when known), and for compiled variants
//! `build` (how it was built: `native`, `hermetic`, and the toolchain's versions; readers
//! ignore unknown keys, so the `kernels` loader is unaffected). Written as pretty JSON with a
//! two-space indent and a trailing newline.

use serde::Serialize;

use super::provenance::{BuilderProvenance, KernelRevision};
use crate::config::{Backend, KernelDependency};
use crate::hash::digest::Digest;

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
    pub digest: Digest,
    pub provenance: Provenance,
    /// Compiled variants: how the variant was built.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub build: Option<BuildInfo>,
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
    pub toolchain: std::collections::BTreeMap<String, String>,
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

/// `provenance`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Provenance {
    #[serde(rename = "kernel-builder")]
    pub kernel_builder: BuilderProvenance,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelRevision>,
}

impl Metadata {
    /// The file's bytes: pretty JSON (two-space indent) and a trailing newline.
    pub fn to_json_bytes(&self) -> anyhow::Result<Vec<u8>> {
        let mut out = serde_json::to_vec_pretty(self)?;
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
        assert_eq!(String::from_utf8(m.to_json_bytes().unwrap()).unwrap(), expected);
    }
}
