//! Are the variant directories under `DIR/build/` exactly the variants the build matrix says
//! the kernel needs (`check-builds`)? Those missing and those extra: a stale variant from an
//! older matrix or build.toml would be uploaded and shadow nothing the loader picks, or worse,
//! be picked by an old torch.

use std::collections::BTreeSet;

use camino::Utf8Path;
use serde::Serialize;

/// What `check-builds` found (`--json` prints it).
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct Report {
    /// The build matrix the expectation comes from.
    pub matrix: String,
    /// The systems whose variants are expected.
    pub systems: Vec<String>,
    pub expected: Vec<String>,
    pub present: Vec<String>,
    pub missing: Vec<String>,
    pub extra: Vec<String>,
    /// `missing` and `extra` are both empty.
    pub ok: bool,
}

/// The variant directories under `build` (files such as `hashes.json` are not variants).
fn present_variants(build: &Utf8Path) -> anyhow::Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    let entries = std::fs::read_dir(build).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            anyhow::anyhow!(
                "`{build}` does not exist: build the variants first (`kernel-builder build-and-copy`)"
            )
        } else {
            anyhow::anyhow!("cannot read `{build}`: {e}")
        }
    })?;
    for entry in entries {
        let entry = entry.map_err(|e| anyhow::anyhow!("cannot read `{build}`: {e}"))?;
        if entry.file_type().map_err(|e| anyhow::anyhow!("cannot read `{build}`: {e}"))?.is_dir() {
            let name = entry.file_name();
            let name = name.to_str().ok_or_else(|| {
                anyhow::anyhow!("`{build}` holds a directory whose name is not UTF-8: {name:?}")
            })?;
            if !name.starts_with('.') {
                out.insert(name.to_owned());
            }
        }
    }
    Ok(out)
}

/// The system a variant name ends with, among `systems` (`None` for noarch `torch-<backend>`).
fn system_of<'a>(name: &str, systems: &'a [String]) -> Option<&'a str> {
    systems.iter().map(String::as_str).find(|s| name.ends_with(&format!("-{s}")))
}

/// What `check-builds` expects in `build/`.
#[derive(Debug)]
pub struct Expected<'a> {
    /// The kernel's variants of the systems checked.
    pub here: BTreeSet<String>,
    /// Its variants of the matrix's other systems: present, they are neither expected nor
    /// extra (a noarch `torch-cuda` of x86_64-linux under `--system aarch64-darwin`).
    pub elsewhere: BTreeSet<String>,
    /// The systems checked.
    pub systems: &'a [String],
    /// Every system of the matrix.
    pub all_systems: &'a [String],
}

/// Compare `expected` with the variants `present`.
fn compare(matrix: &str, expected: Expected<'_>, present: BTreeSet<String>) -> Report {
    let Expected { here, elsewhere, systems, all_systems } = expected;
    // A variant of a system not being checked is neither expected nor extra: one the kernel
    // has there, or one whose name ends with such a system.
    let checked = |n: &String| {
        here.contains(n)
            || (!elsewhere.contains(n)
                && system_of(n, all_systems).is_none_or(|s| systems.iter().any(|x| x == s)))
    };
    let present: BTreeSet<String> = present.into_iter().filter(checked).collect();
    let missing: Vec<String> = here.difference(&present).cloned().collect();
    let extra: Vec<String> = present.difference(&here).cloned().collect();
    Report {
        matrix: matrix.to_owned(),
        systems: systems.to_vec(),
        ok: missing.is_empty() && extra.is_empty(),
        expected: here.into_iter().collect(),
        present: present.into_iter().collect(),
        missing,
        extra,
    }
}

/// Compare the variant directories in `build` with what matrix `matrix` makes the kernel
/// expect there.
///
/// Errors: `build` does not exist or cannot be read, or holds a directory whose name is not
/// UTF-8.
pub fn check_builds(build: &Utf8Path, matrix: &str, expected: Expected<'_>) -> anyhow::Result<Report> {
    Ok(compare(matrix, expected, present_variants(build)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn missing_and_extra_and_other_systems() {
        let all = vec!["x86_64-linux".to_owned(), "aarch64-linux".to_owned()];
        let expected = Expected {
            here: set(&["torch-cuda", "torch215-cxx11-cpu-x86_64-linux"]),
            elsewhere: set(&["torch-cuda", "torch215-cxx11-cpu-aarch64-linux"]),
            systems: &all[..1],
            all_systems: &all,
        };
        let r = compare(
            "2026-12",
            expected,
            set(&["torch-cuda", "torch212-cxx11-cpu-x86_64-linux", "torch215-cxx11-cpu-aarch64-linux"]),
        );
        assert_eq!(r.missing, ["torch215-cxx11-cpu-x86_64-linux"]);
        assert_eq!(r.extra, ["torch212-cxx11-cpu-x86_64-linux"]);
        assert_eq!(r.present, ["torch-cuda", "torch212-cxx11-cpu-x86_64-linux"]);
        assert!(!r.ok);
    }

    /// Found by a fresh user: under `--system aarch64-darwin`, a Helion kernel's noarch
    /// variants of x86_64-linux (`torch-cuda`…, which name no system) were counted as extra. A
    /// variant the kernel has on another system is neither expected nor extra; a noarch name it
    /// has nowhere still is extra.
    #[test]
    fn another_systems_noarch_variants_are_not_extra() {
        let all = vec!["x86_64-linux".to_owned(), "aarch64-darwin".to_owned()];
        let expected = Expected {
            here: BTreeSet::new(),
            elsewhere: set(&["torch-cuda", "torch-rocm", "torch-xpu"]),
            systems: &all[1..],
            all_systems: &all,
        };
        let r = compare("2026-12", expected, set(&["torch-cuda", "torch-rocm", "torch-xpu", "torch-npu"]));
        assert_eq!(r.extra, ["torch-npu"]);
        assert_eq!(r.present, ["torch-npu"]);
        assert!(r.missing.is_empty());
    }
}
