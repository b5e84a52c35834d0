//! What is part of a variant directory: the one rule that building, hashing (`hashes.json`,
//! the `metadata.json` digest), `verify`, `upload` and the Nix cell checks share.
//!
//! Python writes bytecode next to the sources it imports (`kernels.get_local_kernel` on
//! `build/` does), so a variant directory that has been loaded holds `__pycache__/` and
//! `*.pyc` files that no build produced. They are never part of a variant: an entry named
//! `__pycache__` (with everything under it) and any non-directory whose name ends in `.pyc`, at
//! any depth below the variant directory. Builds never copy them, hashes and digests never see
//! them, `verify` and `upload` ignore them, and a Nix cell that holds one fails its check (a
//! build must not write bytecode). Nix cannot call this code at evaluation time, so
//! `nix/lib/kernelSource.nix` (`isBytecode`) states the same rule for the source set; the
//! cell check (`nix-support check-cell`, [`crate::nixdrv::jobs`]) uses this one.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

/// Whether an entry named `name` below a variant directory is Python bytecode that is not part
/// of the variant (see the module docs). `is_dir`: the entry is a directory (symlinks
/// followed or not, as the caller walks).
pub fn is_bytecode(name: &OsStr, is_dir: bool) -> bool {
    is_bytecode_name(name.as_bytes(), is_dir)
}

/// [`is_bytecode`] on raw name bytes.
pub fn is_bytecode_name(name: &[u8], is_dir: bool) -> bool {
    name == b"__pycache__" || (!is_dir && name.ends_with(b".pyc"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pycache_anything_and_pyc_files_are_bytecode() {
        assert!(is_bytecode(OsStr::new("__pycache__"), true));
        assert!(is_bytecode(OsStr::new("__pycache__"), false));
        assert!(is_bytecode(OsStr::new("op.cpython-313.pyc"), false));
        assert!(!is_bytecode(OsStr::new("configs.pyc"), true), "a directory named *.pyc is data");
        assert!(!is_bytecode(OsStr::new("op.py"), false));
        assert!(!is_bytecode(OsStr::new("pycache"), true));
    }
}
