//! `kernel-builder ci-matrix [DIR] [--format github|json] [--group-by cell|backend|system]`:
//! the build jobs a CI system runs for a kernel's whole bundle (see [`crate::ci`]): the cells
//! its flake builds ([`super::list_variants::kernel_cells`], as `list-variants` lists them).

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::Context;
use camino::Utf8PathBuf;

use super::list_variants::MatrixFileArg;
use crate::ci::{self, CiMatrix, GroupBy, Runners};
use crate::matrix::{self, Scope};

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Pretty JSON, `{"format": "kernel-builder-ci-matrix-v1", "kernel", "matrix",
    /// "matrix_revision", "group_by", "jobs": [{"id", "system", "runner", "attributes",
    /// "variants", "backends"}]}`, lists as JSON arrays.
    Json,
    /// One line, `{"include": [...]}` with the same job keys, lists as space-separated
    /// strings: what GitHub Actions' `strategy.matrix` takes through `fromJSON`.
    Github,
}

/// Arguments.
#[derive(Debug, clap::Args)]
#[command(after_long_help = "\
The jobs build every variant of the default bundle on every system, each variant exactly once: \
the cells `list-variants --all-systems` lists, where a noarch variant (torch-cuda) listed by \
several systems is built on the first of x86_64-linux, aarch64-linux, aarch64-darwin that has \
it. A job builds the flake attributes `packages.<system>.<variant>` of its cells (`nix build \
.#<attribute>`), each a directory holding <variant>/.\n\n\
Runner labels (GitHub-hosted): x86_64-linux ubuntu-latest, aarch64-linux ubuntu-24.04-arm, \
aarch64-darwin macos-latest; --runner replaces or adds one.\n\n\
In a workflow (`kernel-builder init` writes .github/workflows/build.yml):\n  \
m=$(kernel-builder ci-matrix --format github) && echo \"matrix=$m\" >> \"$GITHUB_OUTPUT\"\n  \
strategy: { matrix: ${{ fromJSON(needs.matrix.outputs.matrix) }} }")]
pub struct Args {
    /// Kernel directory containing build.toml (default: the current directory).
    pub dir: Option<Utf8PathBuf>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Json)]
    pub format: Format,

    /// One job per cell, per system and backend, or per system.
    #[arg(long, value_enum, default_value_t = GroupBy::Cell)]
    pub group_by: GroupBy,

    /// The runner label of a system's jobs, e.g. `x86_64-linux=gpu-runner` (repeatable).
    /// SYSTEM must be one of the matrix's systems.
    #[arg(long, value_name = "SYSTEM=LABEL", value_parser = parse_runner)]
    pub runner: Vec<(String, String)>,

    #[command(flatten)]
    pub matrix_file: MatrixFileArg,
}

fn parse_runner(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((system, label)) if !system.is_empty() && !label.is_empty() => {
            Ok((system.to_owned(), label.to_owned()))
        }
        _ => Err("expected SYSTEM=LABEL, e.g. `aarch64-linux=ubuntu-24.04-arm`".to_owned()),
    }
}

/// Refuse a `--runner` whose system is not one of `known` (the matrix's systems): such a label
/// would be silently unused.
///
/// # Errors
/// The first unknown system, naming the known ones (and the closest, for a typo).
pub fn check_runner_systems(runners: &[(String, String)], known: &[String]) -> anyhow::Result<()> {
    for (system, label) in runners {
        if known.contains(system) {
            continue;
        }
        // `known` is sorted, so of equally near systems the first is the smallest.
        let closest = crate::suggest::nearest(system, known.iter().map(String::as_str), 3)
            .map(|k| format!(" (did you mean `{k}`?)"))
            .unwrap_or_default();
        anyhow::bail!(
            "--runner `{system}={label}`: `{system}` is not a system of the matrix{closest}; its systems are: {}",
            known.join(", ")
        );
    }
    Ok(())
}

/// The document `ci-matrix` prints for already-loaded `config` from matrix `m`, building
/// `cells` (every system's bundle cells, [`super::list_variants::kernel_cells`]).
///
/// # Errors
/// A system with cells but no runner label ([`ci::NoRunner`]).
pub fn plan(
    m: &matrix::data::MatrixData,
    config: &crate::config::BuildConfig,
    cells: &[matrix::Cell],
    group_by: GroupBy,
    runners: &Runners,
) -> Result<CiMatrix, ci::NoRunner> {
    Ok(CiMatrix {
        format: ci::FORMAT,
        kernel: config.general.name.clone(),
        matrix: m.name.clone(),
        matrix_revision: m.revision.clone(),
        group_by,
        jobs: ci::jobs(cells, group_by, runners)?,
    })
}

/// Run the command: exit 0 with the matrix on stdout, 1 when build.toml has errors (rendered
/// on stderr) or the matrix cannot be made (no runner for a system; for GitHub, no job at all
/// or more than GitHub takes).
pub fn run(args: Args) -> super::CmdResult {
    let dir = args.dir.unwrap_or_else(|| Utf8PathBuf::from("."));
    let loaded = super::load_config(&dir)?;
    let m = args.matrix_file.choose(&loaded.config)?;
    check_runner_systems(&args.runner, &m.systems)?;
    let cells = super::list_variants::kernel_cells(&dir, &m, &loaded, &m.systems, Scope::Bundle)?;
    let doc = plan(&m, &loaded.config, &cells, args.group_by, &Runners::with_overrides(&args.runner))?;
    let text = match args.format {
        Format::Json => {
            if doc.jobs.is_empty() {
                crate::printer::stderr!("note: this kernel has no bundle cell on any system; `general.backends` has no cell in matrix {}", doc.matrix);
            }
            let mut s = serde_json::to_string_pretty(&doc)?;
            s.push('\n');
            s
        }
        Format::Github => {
            anyhow::ensure!(
                !doc.jobs.is_empty(),
                "this kernel has no bundle cell on any system (`general.backends` has no cell in matrix {}), and GitHub Actions refuses an empty matrix",
                doc.matrix
            );
            anyhow::ensure!(
                doc.jobs.len() <= ci::GITHUB_MAX_JOBS,
                "{} jobs are more than the {} GitHub Actions runs from one matrix; group them with --group-by backend or --group-by system",
                doc.jobs.len(),
                ci::GITHUB_MAX_JOBS
            );
            let mut s = ci::github(&doc.jobs);
            s.push('\n');
            s
        }
    };
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e).context("cannot write to stdout"),
        _ => Ok(ExitCode::SUCCESS),
    }
}
