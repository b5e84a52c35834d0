//! The C++ dependencies a `[kernel.*]` may name in `depends`, resolved to pinned sources: the
//! one table of where each comes from (repository, tag, and the commit that tag named when it
//! was read from the repository; no commit is written that was not read there).
//!
//! A build finds a dependency's source in the directory named by
//! `KERNEL_BUILDER_DEP_<NAME>` (upper case, `-` as `_`: `KERNEL_BUILDER_DEP_CUTLASS_3_6`), a
//! checkout of the pinned commit; the generated project receives its include directories as
//! `KB_DEP_<name>_INCLUDE_DIRS`. Nothing is downloaded by the native build: [`find_checkout`]
//! checks the directory, and its errors say what to fetch and how ([`fetch_hint`]).

use camino::Utf8PathBuf;

use crate::config::CppDependency;
use crate::error::{Error, Kind};

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
    crate::env::DEP.name(&dep.name())
}

/// The CMake variable holding `dep`'s include directories (`KB_DEP_cutlass_3_6_INCLUDE_DIRS`).
pub fn cmake_var(dep: CppDependency) -> String {
    format!("KB_DEP_{}_INCLUDE_DIRS", dep.name().replace('-', "_"))
}

/// How to get `dep`'s source for a native build, as lines to run: for a pinned commit, a
/// `git clone` of the repository, a checkout of that commit and the `export` of
/// [`env_var`]; for an archive without a commit (metal-cpp), where to download it from.
pub fn fetch_hint(dep: CppDependency) -> String {
    let var = env_var(dep);
    let Some(pin) = pinned(dep) else {
        return format!("{} is the cell's torch; nothing to fetch", dep.name());
    };
    let repo = pin.url.trim_end_matches('/').rsplit('/').next().unwrap_or(pin.name);
    let dir = format!("{repo}-{}", pin.tag.trim_start_matches('v'));
    match pin.commit {
        Some(commit) => format!(
            "git clone {url} {dir} && git -C {dir} checkout --detach {commit}   # {tag}\n    export {var}=\"$PWD/{dir}\"",
            url = pin.url,
            tag = pin.tag
        ),
        None => format!(
            "download {} ({}) from {} (an archive; no commit is pinned), unpack it, then\n    export {var}=<the unpacked directory>",
            pin.name, pin.tag, pin.url
        ),
    }
}

/// A dependency's source as the native build found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkout {
    /// The directory [`env_var`] names.
    pub dir: Utf8PathBuf,
    /// Its include directories ([`PinnedSource::include_dirs`]), each checked to exist.
    pub include_dirs: Vec<Utf8PathBuf>,
    /// Set when the directory is a git checkout whose `HEAD` is not the pinned commit.
    pub warning: Option<String>,
}

/// Find `dep`'s checkout for a native build from `value`, the value of its [`env_var`]
/// (`crate::env::DEP.var(dep.name())`), for the kernel `who` (`[kernel.gemm]`, for messages).
///
/// Errors (each naming the variable, the pinned repository, tag and commit, and the commands
/// that fetch it, [`fetch_hint`]; of [`Kind::Toolchain`]): the variable unset or empty, naming
/// no directory, or a directory without the dependency's include directories. A checkout at
/// another commit is used, with [`Checkout::warning`].
pub fn find_checkout(dep: CppDependency, who: &str, value: Option<&str>) -> anyhow::Result<Checkout> {
    let var = env_var(dep);
    let Some(pin) = pinned(dep) else {
        anyhow::bail!("{who}: `{}` has no pinned source", dep.name());
    };
    let what = format!(
        "a checkout of {} at {}{}",
        pin.url,
        pin.tag,
        pin.commit.map(|c| format!(" (commit {c})")).unwrap_or_default()
    );
    let fetch = format!("fetch it with:\n    {}", fetch_hint(dep));
    let missing = |message: String| anyhow::Error::from(Error::new(Kind::Toolchain, message));
    let dir = match value {
        Some(v) if !v.is_empty() => Utf8PathBuf::from(v),
        _ => {
            return Err(missing(format!(
                "{who} depends on `{}`, and a native build downloads nothing: set {var} to {what}; {fetch}",
                dep.name()
            )))
        }
    };
    if !dir.is_dir() {
        return Err(missing(format!(
            "{var} is `{dir}`, which is not a directory; it must name {what}; {fetch}"
        )));
    }
    // CMake and the compilers run elsewhere: a relative path is taken from where this runs.
    let dir = std::path::absolute(&dir).ok().and_then(|p| Utf8PathBuf::from_path_buf(p).ok()).unwrap_or(dir);
    let mut include_dirs = Vec::new();
    for rel in pin.include_dirs {
        let inc = if *rel == "." { dir.clone() } else { dir.join(rel) };
        if !inc.is_dir() {
            return Err(missing(format!(
                "{var} is `{dir}`, which has no `{rel}/`: it must name {what} (the `{}` source itself, not a directory above it); {fetch}",
                dep.name()
            )));
        }
        include_dirs.push(inc);
    }
    let warning = pin.commit.and_then(|pinned_commit| {
        let head = crate::process::Cmd::git().args(["-C", dir.as_str(), "rev-parse", "HEAD"]).run().ok()?;
        let head = head.stdout.trim().to_owned();
        (head.len() == 40 && head != pinned_commit).then(|| {
            format!(
                "{var} (`{dir}`) is at commit {head}, not {pinned_commit} ({} {}) that `{}` is pinned to; the build uses it as it is",
                pin.url,
                pin.tag,
                dep.name()
            )
        })
    });
    Ok(Checkout { dir, include_dirs, warning })
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

    const CUTLASS_3_6_FETCH: &str = "fetch it with:\n    git clone https://github.com/NVIDIA/cutlass cutlass-3.6.0 && git -C cutlass-3.6.0 checkout --detach bf9da7b76c766d7ee7d536afc77880a4ef1f1156   # v3.6.0\n    export KERNEL_BUILDER_DEP_CUTLASS_3_6=\"$PWD/cutlass-3.6.0\"";

    #[test]
    fn a_missing_checkout_says_which_variable_and_what_to_fetch() {
        let dep = CppDependency::Cutlass(3, 6);
        for unset in [None, Some("")] {
            let err = find_checkout(dep, "[kernel.gemm]", unset).unwrap_err();
            assert_eq!(crate::error::kind(&err), Kind::Toolchain);
            assert_eq!(
                err.to_string(),
                format!("[kernel.gemm] depends on `cutlass_3_6`, and a native build downloads nothing: set KERNEL_BUILDER_DEP_CUTLASS_3_6 to a checkout of https://github.com/NVIDIA/cutlass at v3.6.0 (commit bf9da7b76c766d7ee7d536afc77880a4ef1f1156); {CUTLASS_3_6_FETCH}")
            );
        }
        let t = tempfile::tempdir().unwrap();
        let d = camino::Utf8Path::from_path(t.path()).unwrap();
        assert_eq!(
            find_checkout(dep, "[kernel.gemm]", Some(d.join("nope").as_str())).unwrap_err().to_string(),
            format!("KERNEL_BUILDER_DEP_CUTLASS_3_6 is `{d}/nope`, which is not a directory; it must name a checkout of https://github.com/NVIDIA/cutlass at v3.6.0 (commit bf9da7b76c766d7ee7d536afc77880a4ef1f1156); {CUTLASS_3_6_FETCH}")
        );
        // A directory above the checkout (or another project) has no include/.
        assert_eq!(
            find_checkout(dep, "[kernel.gemm]", Some(d.as_str())).unwrap_err().to_string(),
            format!("KERNEL_BUILDER_DEP_CUTLASS_3_6 is `{d}`, which has no `include/`: it must name a checkout of https://github.com/NVIDIA/cutlass at v3.6.0 (commit bf9da7b76c766d7ee7d536afc77880a4ef1f1156) (the `cutlass_3_6` source itself, not a directory above it); {CUTLASS_3_6_FETCH}")
        );
        // metal-cpp comes as an archive: no git commands.
        assert_eq!(
            fetch_hint(CppDependency::MetalCpp),
            "download metal-cpp (macOS26) from https://developer.apple.com/metal/cpp/ (an archive; no commit is pinned), unpack it, then\n    export KERNEL_BUILDER_DEP_METAL_CPP=<the unpacked directory>"
        );
    }

    #[test]
    fn a_checkout_is_found_and_another_commit_is_a_warning() {
        let dep = CppDependency::Cutlass(3, 6);
        let t = tempfile::tempdir().unwrap();
        let d = camino::Utf8Path::from_path(t.path()).unwrap();
        std::fs::create_dir_all(d.join("include/cutlass")).unwrap();
        std::fs::create_dir_all(d.join("tools/util/include")).unwrap();
        let c = find_checkout(dep, "[kernel.gemm]", Some(d.as_str())).unwrap();
        assert_eq!(c.include_dirs, [d.join("include"), d.join("tools/util/include")]);
        assert_eq!(c.warning, None, "not a git checkout: nothing to compare");
        let git = |args: &[&str]| {
            let out = crate::process::Cmd::git()
                .args(args.iter().copied())
                .dir(d)
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@t")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@t")
                .run()
                .unwrap();
            out.stdout.trim().to_owned()
        };
        git(&["init", "-q"]);
        std::fs::write(d.join("include/cutlass/cutlass.h"), "// not cutlass\n").unwrap();
        git(&["add", "."]);
        git(&["commit", "-q", "-m", "x"]);
        let head = git(&["rev-parse", "HEAD"]);
        let c = find_checkout(dep, "[kernel.gemm]", Some(d.as_str())).unwrap();
        assert_eq!(
            c.warning.unwrap(),
            format!("KERNEL_BUILDER_DEP_CUTLASS_3_6 (`{d}`) is at commit {head}, not bf9da7b76c766d7ee7d536afc77880a4ef1f1156 (https://github.com/NVIDIA/cutlass v3.6.0) that `cutlass_3_6` is pinned to; the build uses it as it is")
        );
    }
}
