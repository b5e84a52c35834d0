//! The C++ dependencies a `[kernel.*]` may name in `depends`, resolved to pinned sources: the
//! one table of where each comes from (repository, tag, and the commit that tag named when it
//! was read from the repository; no commit is written that was not read there).
//!
//! A build finds a dependency's source in the directory named by
//! `KERNEL_BUILDER_DEP_<NAME>` (upper case, `-` as `_`: `KERNEL_BUILDER_DEP_CUTLASS_3_6`), a
//! checkout of the pinned commit; the generated project receives its include directories as
//! `KB_DEP_<name>_INCLUDE_DIRS`. Nothing is downloaded by the native build.

use crate::config::CppDependency;

/// Where one dependency's source comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinnedSource {
    /// The `depends` name (`cutlass_3_6`).
    pub name: &'static str,
    /// Git repository URL.
    pub url: &'static str,
    /// The release tag.
    pub tag: &'static str,
    /// The commit the tag names (40 hex digits), `None` where it could not be read.
    pub commit: Option<&'static str>,
    /// Include directories below the checkout.
    pub include_dirs: &'static [&'static str],
}

const CUTLASS: &str = "https://github.com/NVIDIA/cutlass";
const CUTLASS_INCLUDES: &[&str] = &["include", "tools/util/include"];
const SYCL_TLA: &str = "https://github.com/intel/sycl-tla";

/// Every pinned dependency. Commits read from the repositories' tags on 2026-12-01. The
/// `cutlass_X_Y` names follow upstream's versions (2.10.0, 3.5.1, 3.6.0, 3.8.0, 3.9.2, 4.0.0,
/// 4.5.2); for `cutlass_4_4`, which upstream's generator gives no version, the newest 4.4
/// release (4.4.3) is used.
pub const PINNED: &[PinnedSource] = &[
    PinnedSource {
        name: "cutlass_2_10",
        url: CUTLASS,
        tag: "v2.10.0",
        commit: Some("fc9ebc645b63f3a6bc80aaefde5c063fb72110d6"),
        include_dirs: CUTLASS_INCLUDES,
    },
    PinnedSource {
        name: "cutlass_3_5",
        url: CUTLASS,
        tag: "v3.5.1",
        commit: Some("f7b19de32c5d1f3cedfc735c2849f12b537522ee"),
        include_dirs: CUTLASS_INCLUDES,
    },
    PinnedSource {
        name: "cutlass_3_6",
        url: CUTLASS,
        tag: "v3.6.0",
        commit: Some("bf9da7b76c766d7ee7d536afc77880a4ef1f1156"),
        include_dirs: CUTLASS_INCLUDES,
    },
    PinnedSource {
        name: "cutlass_3_8",
        url: CUTLASS,
        tag: "v3.8.0",
        commit: Some("afa1772203677c5118fcd82537a9c8fefbcc7008"),
        include_dirs: CUTLASS_INCLUDES,
    },
    PinnedSource {
        name: "cutlass_3_9",
        url: CUTLASS,
        tag: "v3.9.2",
        commit: Some("ad7b2f5e84fcfa124cb02b91d5bd26d238c0459e"),
        include_dirs: CUTLASS_INCLUDES,
    },
    PinnedSource {
        name: "cutlass_4_0",
        url: CUTLASS,
        tag: "v4.0.0",
        commit: Some("b995f933179c22d3fe0d871c3a53d11e4681950f"),
        include_dirs: CUTLASS_INCLUDES,
    },
    PinnedSource {
        name: "cutlass_4_4",
        url: CUTLASS,
        tag: "v4.4.3",
        commit: Some("b18df7d206c53394bcdbd71dca917fed0842e684"),
        include_dirs: CUTLASS_INCLUDES,
    },
    PinnedSource {
        name: "cutlass_4_5",
        url: CUTLASS,
        tag: "v4.5.2",
        commit: Some("db1c288993354c88e551c40c19a8fb93a774a241"),
        include_dirs: CUTLASS_INCLUDES,
    },
    // Upstream uses v0.8 with DPC++ 2025.3 and v0.9.2 with 2026.0; v0.9.2 was not among the
    // repository's tags when this table was written, so it has no commit yet.
    PinnedSource {
        name: "sycl_tla",
        url: SYCL_TLA,
        tag: "v0.8",
        commit: Some("2fc09973bfdf15755090fcb0e3b6ad236408a992"),
        include_dirs: &["include", "tools/util/include"],
    },
    // metal-cpp is distributed by Apple as an archive, not a git repository: no pin here.
    PinnedSource {
        name: "metal-cpp",
        url: "https://developer.apple.com/metal/cpp/",
        tag: "macOS26",
        commit: None,
        include_dirs: &["."],
    },
];

/// The pinned source of a dependency; `None` for `torch` (always present: the cell's torch).
pub fn pinned(dep: CppDependency) -> Option<&'static PinnedSource> {
    let name = dep.name();
    PINNED.iter().find(|p| p.name == name)
}

/// The environment variable that names a checkout of `dep` (`KERNEL_BUILDER_DEP_CUTLASS_3_6`).
pub fn env_var(dep: CppDependency) -> String {
    format!("KERNEL_BUILDER_DEP_{}", dep.name().to_ascii_uppercase().replace('-', "_"))
}

/// The CMake variable holding `dep`'s include directories (`KB_DEP_cutlass_3_6_INCLUDE_DIRS`).
pub fn cmake_var(dep: CppDependency) -> String {
    format!("KB_DEP_{}_INCLUDE_DIRS", dep.name().replace('-', "_"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::deps::CPP_DEPENDENCY_NAMES;

    #[test]
    fn every_dependency_but_torch_is_pinned_once() {
        for n in CPP_DEPENDENCY_NAMES {
            let dep = CppDependency::from_name(n).unwrap();
            let found: Vec<&PinnedSource> = PINNED.iter().filter(|p| p.name == n).collect();
            assert_eq!(found.len(), usize::from(dep != CppDependency::Torch), "{n}");
            assert_eq!(pinned(dep).is_some(), dep != CppDependency::Torch);
        }
        for p in PINNED {
            if let Some(c) = p.commit {
                assert!(c.len() == 40 && c.bytes().all(|b| b.is_ascii_hexdigit()), "{}", p.name);
            }
        }
        assert_eq!(env_var(CppDependency::MetalCpp), "KERNEL_BUILDER_DEP_METAL_CPP");
        assert_eq!(cmake_var(CppDependency::Cutlass(3, 6)), "KB_DEP_cutlass_3_6_INCLUDE_DIRS");
    }
}
