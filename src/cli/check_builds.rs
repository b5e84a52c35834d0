//! `kernel-builder check-builds [DIR]`: are the variant directories under `DIR/build/` exactly
//! the variants the build matrix says the kernel needs? Names those missing and those extra
//! (a stale variant from an older matrix or build.toml would be uploaded and shadow nothing the
//! loader picks, or worse, be picked by an old torch).

use std::collections::BTreeSet;
use std::process::ExitCode;

use camino::Utf8PathBuf;

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
    let names = |systems: &[String]| -> BTreeSet<String> {
        super::list_variants::build_toml_cells(&m, &loaded, systems, scope)
            .into_iter()
            .map(|c| c.name)
            .collect()
    };
    let expected = names(&systems);
    // The kernel's variants of the systems not checked (a noarch one among them, which names
    // no system): neither expected nor extra.
    let others: Vec<String> = m.systems.iter().filter(|s| !systems.contains(s)).cloned().collect();
    let elsewhere = names(&others);
    let report = crate::bundle::check::check_builds(
        &dir.join("build"),
        &m.name,
        crate::bundle::check::Expected {
            here: expected,
            elsewhere,
            systems: &systems,
            all_systems: &m.systems,
        },
    )?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else if report.ok {
        println!(
            "build/ holds exactly the {} expected variant{} (matrix {})",
            report.expected.len(),
            if report.expected.len() == 1 { "" } else { "s" },
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
