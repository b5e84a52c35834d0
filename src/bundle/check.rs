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

/// Compare the expected variants of `systems` (from the matrix's `all_systems`) with `present`.
fn compare(
    matrix: &str,
    expected: BTreeSet<String>,
    present: BTreeSet<String>,
    systems: &[String],
    all_systems: &[String],
) -> Report {
    // A variant of a system not being checked is neither expected nor extra.
    let checked = |n: &String| system_of(n, all_systems).is_none_or(|s| systems.iter().any(|x| x == s));
    let present: BTreeSet<String> = present.into_iter().filter(checked).collect();
    let missing: Vec<String> = expected.difference(&present).cloned().collect();
    let extra: Vec<String> = present.difference(&expected).cloned().collect();
    Report {
        matrix: matrix.to_owned(),
        systems: systems.to_vec(),
        ok: missing.is_empty() && extra.is_empty(),
        expected: expected.into_iter().collect(),
        present: present.into_iter().collect(),
        missing,
        extra,
    }
}

/// Compare the variant directories in `build` with the `expected` variants of `systems` of
/// matrix `matrix` (whose systems are `all_systems`).
///
/// Errors: `build` does not exist or cannot be read, or holds a directory whose name is not
/// UTF-8.
pub fn check_builds(
    build: &Utf8Path,
    matrix: &str,
    expected: BTreeSet<String>,
    systems: &[String],
    all_systems: &[String],
) -> anyhow::Result<Report> {
    Ok(compare(matrix, expected, present_variants(build)?, systems, all_systems))
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
        let r = compare(
            "2026-12",
            set(&["torch-cuda", "torch215-cxx11-cpu-x86_64-linux"]),
            set(&["torch-cuda", "torch212-cxx11-cpu-x86_64-linux", "torch215-cxx11-cpu-aarch64-linux"]),
            &all[..1],
            &all,
        );
        assert_eq!(r.missing, ["torch215-cxx11-cpu-x86_64-linux"]);
        assert_eq!(r.extra, ["torch212-cxx11-cpu-x86_64-linux"]);
        assert_eq!(r.present, ["torch-cuda", "torch212-cxx11-cpu-x86_64-linux"]);
        assert!(!r.ok);
    }
}
