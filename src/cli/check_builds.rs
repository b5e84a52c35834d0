//! `kernel-builder check-builds [DIR]`: are the variant directories under `DIR/build/` exactly
//! the variants the build matrix says the kernel needs? Names those missing and those extra
//! (a stale variant from an older matrix or build.toml would be uploaded and shadow nothing the
//! loader picks, or worse, be picked by an old torch).

use std::collections::BTreeSet;
use std::process::ExitCode;

use camino::{Utf8Path, Utf8PathBuf};
use serde::Serialize;

use super::list_variants::MatrixFileArg;
use crate::matrix::Scope;

/// Arguments.
///
/// Exit status: 0 when build/ holds exactly the expected variants, 1 when some are missing or
/// extra (or build.toml has errors, or build/ cannot be read), 2 for a bad command line.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Kernel directory containing build.toml and build/ (default: the current directory).
    pub dir: Option<Utf8PathBuf>,
    /// Expect only this Nix system's variants (and the noarch ones); variants of the matrix's
    /// other systems in build/ are then neither expected nor extra. Default: every system of the
    /// matrix, as a full upload needs.
    #[arg(long, value_name = "SYSTEM")]
    pub system: Option<String>,
    /// Also expect the variants outside the default bundle (as `list-variants --all`).
    #[arg(long)]
    pub all: bool,
    /// Print a JSON report (expected, present, missing, extra) instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub matrix_file: MatrixFileArg,
}

/// What `--json` prints.
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
pub fn compare(
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

pub fn run(args: Args) -> super::CmdResult {
    let dir = super::kernel_dir_arg(args.dir)?;
    let loaded = super::load_config(&dir)?;
    let m = args.matrix_file.choose(&loaded.config)?;
    let systems: Vec<String> = match args.system {
        Some(s) if !m.systems.contains(&s) => anyhow::bail!(
            "`{s}` is not a system of build matrix {}; expected one of: {}",
            m.name,
            m.systems.join(", ")
        ),
        Some(s) => vec![s],
        None => m.systems.clone(),
    };
    let scope = if args.all { Scope::All } else { Scope::Bundle };
    let expected: BTreeSet<String> = super::list_variants::build_toml_cells(&m, &loaded, &systems, scope)
        .into_iter()
        .map(|c| c.name)
        .collect();
    let present = present_variants(&dir.join("build"))?;
    let report = compare(&m.name, expected, present, &systems, &m.systems);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else if report.ok {
        println!(
            "build/ holds exactly the {} expected variants (matrix {})",
            report.expected.len(),
            report.matrix
        );
    } else {
        for v in &report.missing {
            println!("missing: {v}");
        }
        for v in &report.extra {
            println!("extra:   {v}");
        }
        crate::printer::stderr!(
            "error: build/ does not match matrix {} ({} missing, {} extra of {} expected): build the missing ones (`build-and-copy`, or CI for other systems) and remove the extra ones",
            report.matrix,
            report.missing.len(),
            report.extra.len(),
            report.expected.len()
        );
    }
    Ok(if report.ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
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
