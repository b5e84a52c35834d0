//! `metadata.json` of a variant directory (reference: kernel-builder-cli.md §4.4, what the
//! `kernels` loader reads: kernels-loader-and-helion.md A8).
//!
//! Keys, in this order: `name`, `id`, `version`, `license`, `upstream` and `source` (only when
//! set), `python-depends`, `kernel-depends` (always, possibly `[]`), `backend` (`type`, and
//! `archs` only when known), `digest` (the loader's per-file format, [`crate::hash::digest`]),
//! `provenance` (`kernel-builder`, then `kernel` when known). Written as pretty JSON with a
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
