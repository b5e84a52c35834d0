//! `kernel-builder list-variants [DIR] [--json] [--system S | --all-systems] [--all]`: the
//! build variants (matrix cells) of a kernel, computed from build.toml and the build matrix
//! without evaluating Nix, unless the kernel's flake.nix changes its cells with
//! `torchVersions` or `systems`: then they are the flake's own ([`kernel_cells`]).

use std::fmt::Write as _;
use std::io::Write as _;
use std::process::ExitCode;

use camino::Utf8PathBuf;

use crate::config;
use crate::matrix::data::{matrix, MatrixData};
use crate::matrix::{self, Cell, Scope};

/// Arguments.
///
/// By default prints the variants `nix build .#bundle` builds on this machine's system, one
/// name per line, sorted. Variants are the directory names under `build/`: for example
/// `torch213-cxx11-cu130-x86_64-linux`, `torch-stable-abi211-cu126-x86_64-linux`,
/// `tvm-ffi01-cu126-x86_64-linux`, or `torch-cuda` for noarch (Python-only) kernels.
///
/// When the kernel's flake.nix passes `torchVersions` or `systems` to genKernelFlakeOutputs,
/// the variants are the ones the flake builds, read from its `variants` output with Nix.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Kernel directory containing build.toml (default: the current directory).
    pub dir: Option<Utf8PathBuf>,

    /// Print a JSON array of cells (name, system, backend, backend_version, torch_version,
    /// noarch, bundle, kind, arch_variant, cuda_capabilities, rocm_archs, matrix,
    /// matrix_revision) instead of names. The matrix is the one build.toml pins
    /// (`[general] matrix`), else the default (`kernel-builder --version` names it).
    #[arg(long)]
    pub json: bool,

    /// List the variants of this Nix system instead of the host's (e.g. `aarch64-darwin`).
    #[arg(long, value_name = "SYSTEM", value_parser = parse_system, conflicts_with = "all_systems")]
    pub system: Option<String>,

    /// List the variants of every system of the matrix; text output prefixes each name with
    /// its system and a tab.
    #[arg(long)]
    pub all_systems: bool,

    /// Include variants outside the default bundle (for example torch 2.11 CPU and
    /// `torch-tpu`), as Nix's `redistributable` outputs do.
    #[arg(long)]
    pub all: bool,

    /// Which variant-name grammar the text output uses: `legacy` (the names kernel-builder
    /// writes, read by kernels 0.17.2, 0.18.3 and 0.19.1), `0.19` (the grammar of kernels
    /// 0.19, which also reads the legacy names), or `both` (legacy, a tab, the 0.19 name).
    #[arg(long, value_enum, default_value = "legacy")]
    pub names: NameGrammar,

    #[command(flatten)]
    pub matrix_file: MatrixFileArg,
}

pub use crate::matrix::naming::NameGrammar;

/// `--matrix-file FILE`, shared by `list-variants` and `ci-matrix` so that both list the same
/// cells.
#[derive(Debug, Clone, clap::Args)]
pub struct MatrixFileArg {
    /// Take the cells from this matrix file (the schema of nix/build-matrix.json: a draft of
    /// the next matrix, or a generated one) instead of the matrix build.toml pins or the
    /// default. Nix does not read it; the flake uses nix/build-matrix.json.
    #[arg(long, value_name = "FILE")]
    pub matrix_file: Option<Utf8PathBuf>,
}

/// The matrix a command lists: a built-in one (`'static`) or one read from `--matrix-file`.
pub enum ChosenMatrix {
    /// The matrix build.toml pins, else the default.
    BuiltIn(&'static MatrixData),
    /// The matrix read from `--matrix-file`.
    File(Box<MatrixData>),
}

impl std::ops::Deref for ChosenMatrix {
    type Target = MatrixData;
    fn deref(&self) -> &MatrixData {
        match self {
            ChosenMatrix::BuiltIn(m) => m,
            ChosenMatrix::File(m) => m,
        }
    }
}

impl MatrixFileArg {
    /// The matrix to list `config`'s cells from: the file, else the one the kernel pins, else
    /// the default ([`matrix::data::for_config`]).
    ///
    /// # Errors
    /// The file cannot be read or is not a consistent matrix ([`matrix::data::load_file`]).
    pub fn choose(&self, config: &config::BuildConfig) -> anyhow::Result<ChosenMatrix> {
        Ok(match self.matrix_file.as_deref() {
            Some(path) => ChosenMatrix::File(Box::new(matrix::data::load_file(path)?)),
            None => ChosenMatrix::BuiltIn(matrix::data::for_config(config)),
        })
    }
}

/// Accept only systems of the build matrix (a bad value is a command-line error, exit 2).
fn parse_system(s: &str) -> Result<String, String> {
    let systems = &matrix().systems;
    if systems.iter().any(|x| x == s) {
        Ok(s.to_owned())
    } else {
        Err(format!("not a system of the build matrix; expected one of: {}", systems.join(", ")))
    }
}

/// The cells of `kernel` on `systems` (in order) in `scope` from matrix `m`: for the kernel's
/// own matrix those computed when it was loaded ([`crate::kernel::Kernel::cells`]), for a
/// `--matrix-file` computed here ([`matrix::cells_on`]).
pub fn build_toml_cells(
    m: &ChosenMatrix,
    kernel: &crate::kernel::Kernel,
    systems: &[String],
    scope: Scope,
) -> Vec<Cell> {
    match m {
        ChosenMatrix::BuiltIn(_) => systems.iter().flat_map(|s| kernel.cells.on(s, scope)).cloned().collect(),
        ChosenMatrix::File(_) => matrix::cells_on(m, &kernel.config, systems, scope),
    }
}

/// The cells of the kernel in `dir` (already loaded as `kernel`) on `systems`, in order, in
/// `scope`: what its flake builds. When flake.nix changes the cells (`torchVersions`,
/// `systems`: [`crate::nixdrv::flake_cells`]), they are the flake's `variants`, evaluated by
/// Nix, with the architectures of compiled cells resolved from `m`; otherwise, or with
/// `--matrix-file` (a matrix Nix does not read), build.toml's cells of matrix `m`. Without Nix
/// for such a flake, build.toml's cells, with a warning on stderr.
///
/// # Errors
/// Those of [`crate::nixdrv::flake_cells::flake_cells`].
pub fn kernel_cells(
    dir: &camino::Utf8Path,
    m: &ChosenMatrix,
    kernel: &crate::kernel::Kernel,
    systems: &[String],
    scope: Scope,
) -> anyhow::Result<Vec<Cell>> {
    use crate::nixdrv::flake_cells::{flake_cells, FlakeCells};
    let from_flake = match m {
        ChosenMatrix::File(_) => FlakeCells::AsBuildToml,
        ChosenMatrix::BuiltIn(_) => flake_cells(dir)?,
    };
    Ok(match from_flake {
        FlakeCells::Evaluated(cells) => systems
            .iter()
            .flat_map(|system| cells.iter().filter(move |c| &c.system == system))
            .filter(|c| scope == Scope::All || c.bundle)
            .map(|c| matrix::cells::with_resolved_archs(m, &kernel.config, c.clone()))
            .collect(),
        FlakeCells::NoNix(warning) => {
            crate::printer::stderr!("warning: {warning}");
            build_toml_cells(m, kernel, systems, scope)
        }
        FlakeCells::AsBuildToml => build_toml_cells(m, kernel, systems, scope),
    })
}

/// The listing of `cells` (from [`kernel_cells`]): the text (or JSON) to print on stdout.
///
/// With more than one system in `systems`, `<system>\t` comes before each name.
pub fn listing(cells: &[Cell], systems: &[String], json: bool) -> anyhow::Result<String> {
    listing_named(cells, systems, json, NameGrammar::Legacy)
}

/// [`listing`] with the text output's names in `grammar`.
pub fn listing_named(
    cells: &[Cell],
    systems: &[String],
    json: bool,
    grammar: NameGrammar,
) -> anyhow::Result<String> {
    if json {
        let mut s = serde_json::to_string_pretty(&cells)?;
        s.push('\n');
        return Ok(s);
    }
    let mut out = String::new();
    for cell in cells {
        let name = grammar.show(&cell.name, &matrix::naming::loader_0_19_name(cell));
        if systems.len() > 1 {
            let _ = writeln!(out, "{}\t{name}", cell.system);
        } else {
            let _ = writeln!(out, "{name}");
        }
    }
    Ok(out)
}

/// Run the command: exit 0 with the listing on stdout (warnings on stderr), 1 when build.toml
/// has errors (all of them rendered on stderr).
pub fn run(args: Args) -> super::CmdResult {
    let dir = args.dir.unwrap_or_else(|| Utf8PathBuf::from("."));
    let loaded = super::load_config(&dir)?;
    let m = args.matrix_file.choose(&loaded.config)?;
    let systems: Vec<String> = if args.all_systems {
        m.systems.clone()
    } else {
        let system = args.system.unwrap_or_else(matrix::host_system);
        if !m.systems.contains(&system) {
            crate::printer::stderr!(
                "warning: this machine's system `{system}` has no build sets in the matrix; pass --system or --all-systems"
            );
        }
        vec![system]
    };
    let scope = if args.all { Scope::All } else { Scope::Bundle };
    let cells = kernel_cells(&dir, &m, &loaded, &systems, scope)?;
    let text = listing_named(&cells, &systems, args.json, args.names)?;
    if !args.json && text.is_empty() {
        // An empty stdout alone reads like a failure; say why there is nothing.
        crate::printer::stderr!(
            "note: no variant of this kernel is built on {}; `general.backends` has no cell there (try --all-systems)",
            systems.join(", ")
        );
    }
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        // A closed pipe (`list-variants | head -1`) is not a failure.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::Error::new(e).context("cannot write to stdout"))
        }
        _ => Ok(ExitCode::SUCCESS),
    }
}
