//! CUDA architectures as `nvcc` flags: a resolved capability list (from
//! [`crate::matrix::resolve_cuda_capabilities`], e.g. `["7.5", "9.0a", "12.0+PTX"]`) becomes
//! exact `-gencode` pairs, one token each, so CMake never splits or de-duplicates them:
//!
//! | capability | flags |
//! |---|---|
//! | `8.0` | `-gencode=arch=compute_80,code=sm_80` |
//! | `9.0a` | `-gencode=arch=compute_90a,code=sm_90a` |
//! | `10.0f` | `-gencode=arch=compute_100f,code=sm_100f` |
//! | `12.0+PTX` | `-gencode=arch=compute_120,code=sm_120` and `-gencode=arch=compute_120,code=compute_120` |
//!
//! The same rule as torch's `_get_cuda_arch_flags` (SASS for the architecture, plus the PTX
//! of the virtual architecture for `+PTX`), computed from data, never from a default list.

use crate::config::{CapabilitySuffix, CudaCapability};

/// The `-gencode` flags for one resolved capability list, in list order.
///
/// Errors: an entry that is not a capability (`X.Y`, `X.Ya`, `X.Yf`, `X.Y+PTX`), or an empty
/// list: an empty list would let nvcc fall back to its own default architecture, which is
/// never what a kernel asked for.
pub fn gencode_flags(capabilities: &[String]) -> anyhow::Result<Vec<String>> {
    anyhow::ensure!(!capabilities.is_empty(), "no CUDA capability to compile for");
    let mut out = Vec::new();
    for c in capabilities {
        let cap = CudaCapability::parse(c)?;
        let suffix = match cap.suffix {
            CapabilitySuffix::None => "",
            CapabilitySuffix::Arch => "a",
            CapabilitySuffix::Family => "f",
        };
        let arch = format!("{}{}{suffix}", cap.major, cap.minor);
        out.push(format!("-gencode=arch=compute_{arch},code=sm_{arch}"));
        if cap.ptx {
            out.push(format!("-gencode=arch=compute_{arch},code=compute_{arch}"));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(caps: &[&str]) -> Vec<String> {
        gencode_flags(&caps.iter().map(|c| c.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn pairs_are_exact() {
        assert_eq!(
            flags(&["7.5", "8.0", "9.0a"]),
            [
                "-gencode=arch=compute_75,code=sm_75",
                "-gencode=arch=compute_80,code=sm_80",
                "-gencode=arch=compute_90a,code=sm_90a"
            ]
        );
        assert_eq!(flags(&["10.0f"]), ["-gencode=arch=compute_100f,code=sm_100f"]);
        assert_eq!(
            flags(&["12.0+PTX"]),
            ["-gencode=arch=compute_120,code=sm_120", "-gencode=arch=compute_120,code=compute_120"]
        );
    }

    #[test]
    fn empty_and_malformed_lists_are_errors() {
        assert_eq!(gencode_flags(&[]).unwrap_err().to_string(), "no CUDA capability to compile for");
        assert!(gencode_flags(&["sm_90".to_owned()])
            .unwrap_err()
            .to_string()
            .contains("is not a CUDA capability"));
    }
}
