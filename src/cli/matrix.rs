//! `kernel-builder matrix …`: maintainer commands about the build matrix itself.
//!
//! - `matrix check-wheel WHEEL [--matrix NAME] [--json]`: read a torch wheel's METADATA, WHEEL
//!   and `torch/version.py` ([`crate::matrix::wheel`]) and say whether the matrix has a cell
//!   for it with the wheel's toolkit. Exit 0 when it agrees, 1 when it does not or the wheel
//!   cannot be read.

use std::process::ExitCode;

use camino::Utf8PathBuf;

use crate::matrix::data::{matrix, named};
use crate::matrix::wheel::{check_wheel, read_wheel};

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: MatrixCommand,
}

/// The `matrix` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum MatrixCommand {
    /// Check the matrix against a torch wheel: its torch version, CUDA/ROCm/XPU version,
    /// Python range and platform tags, and whether a cell exists for each platform with that
    /// toolkit.
    CheckWheel(CheckWheelArgs),
}

/// Arguments of `matrix check-wheel`.
#[derive(Debug, clap::Args)]
pub struct CheckWheelArgs {
    /// The wheel file (`torch-2.14.0-cp313-cp313-manylinux_2_28_x86_64.whl`).
    pub wheel: Utf8PathBuf,
    /// Check against this matrix (a snapshot name such as `upstream-2026-08`) instead of the
    /// default one.
    #[arg(long, value_name = "NAME")]
    pub matrix: Option<String>,
    /// Print the report as JSON on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Run a `matrix` subcommand.
pub fn run(args: Args) -> super::CmdResult {
    match args.command {
        MatrixCommand::CheckWheel(a) => check_wheel_cmd(a),
    }
}

fn check_wheel_cmd(args: CheckWheelArgs) -> super::CmdResult {
    let m = match &args.matrix {
        Some(name) => named(name)?,
        None => matrix(),
    };
    let facts = read_wheel(&args.wheel)?;
    let report = check_wheel(m, &facts);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.to_text());
    }
    Ok(if report.agrees { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
