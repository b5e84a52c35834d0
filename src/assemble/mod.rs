//! One variant directory from a kernel's sources, and a bundle of them in `DIR/build/`.
//!
//! The pieces, in the order data flows through them:
//!
//! - [`source`]: the kernel's *source set* (the files a build reads) and its content-derived
//!   unique id ([`source::SourceSet::uid`], git's tree id of that set);
//! - [`provenance`]: the git state recorded in `metadata.json` (`provenance.kernel`), and the
//!   orchestrator's own version and commit (`provenance.kernel-builder`);
//! - [`noarch`]: one flat noarch variant directory (`torch-<backend>/`): the package files,
//!   `_ops.py` and `metadata.json` ([`metadata`], with `kernels-minver` from [`loader`]);
//! - [`compiled`]: compiled (`[torch]` and `[tvm-ffi]`) variants, built natively for the cell
//!   the host toolchain gives; [`stable_abi`]: what a torch stable-ABI cell compiles and links
//!   against (the C shim only); [`tvm_ffi`]: what a tvm-ffi cell compiles and links against
//!   (the Python environment's `tvm_ffi`) and its `_ops.py`;
//! - [`bundle`]: every requested variant built into a temporary directory inside `DIR/build/`
//!   (cells in parallel with `--jobs`) and renamed into place, replacing only the variants
//!   built, then `build/hashes.json`;
//! - [`cellcache`]: the native cell cache, which gives a later build an identical cell's
//!   variant directory instead of building it again;
//! - [`native`]: the entry points the command line calls (a bundle into `DIR/build/`, one
//!   variant for a Nix cell);
//! - [`verify`]: variants rebuilt in a scratch directory and compared with `build/` and the
//!   manifest.
//!
//! The native path (`kernel-builder build-and-copy --nix never`) and the Nix path (a cell's
//! derivation runs `kernel-builder assemble` over its filtered source) call the same
//! [`noarch::assemble_noarch`], and the unique id depends only on the source set's content,
//! so both paths write the same bytes for the same source and provenance.

pub mod bundle;
pub mod cellcache;
pub mod compiled;
pub mod gitid;
pub mod loader;
pub mod metadata;
pub mod native;
pub mod noarch;
pub mod output;
pub mod parity;
pub mod progress;
pub mod provenance;
pub mod source;
pub mod stable_abi;
pub mod tvm_ffi;
pub mod verify;
pub mod workdirs;

use std::fmt;

use camino::Utf8PathBuf;

pub use provenance::{BuildIds, KernelRevision};
pub use source::SourceSet;

/// A non-fatal finding while collecting sources or assembling a variant (a stray Helion
/// heuristic file, a source `_ops.py` that the generated one replaces, …). The build goes on;
/// the CLI prints each one as `warning: …`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Warning {
    /// The file the warning is about, relative to the kernel directory, when there is one.
    pub path: Option<Utf8PathBuf>,
    /// What is wrong and what happens because of it.
    pub message: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            Some(p) => write!(f, "`{p}`: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}
