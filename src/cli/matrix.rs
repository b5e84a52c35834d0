//! `kernel-builder matrix …`: maintainer commands about the build matrix itself.
//!
//! - `matrix check-wheel WHEEL [--matrix NAME] [--json] [--names legacy|0.19|both]`: read a torch wheel's METADATA, WHEEL
//!   and `torch/version.py` ([`crate::matrix::wheel`]) and say whether the matrix has a cell
//!   for it with the wheel's toolkit. Exit 0 when it agrees, 1 when it does not or the wheel
//!   cannot be read.
//! - `matrix pin [--index URL] [--pins FILE]`: resolve the pinned wheels' files and hashes from
//!   their index ([`crate::toolchain::pins::refresh`]).
//! - `matrix pin-unpacked [--pins FILE]`: record the NAR hash of each pinned wheel set whose
//!   tree the toolchain cache holds ([`crate::toolchain::pins::record_unpacked`]).

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
    /// Resolve the file, URL and sha256 of the pinned wheels (torch, CUDA toolkits, CMake,
    /// Ninja) from their index's PEP 691 JSON API and rewrite the pins file in its stable
    /// order (sorted keys), so the change is a reviewable diff and a second run changes
    /// nothing. Exit 1 when an entry of the index could not be resolved (each is named).
    Pin(PinArgs),
    /// Record in the pins file the NAR hash of each pinned wheel set (a torch wheel, one CUDA
    /// version's toolkit wheels) as Nix unpacks it, from the trees the toolchain cache holds (a
    /// native build of a cell unpacks them; no network). With the hash, Nix makes the unpacked
    /// toolchain a fixed-output store path that every kernel-builder version shares; without
    /// it, each version unpacks its own copy (gigabytes). Entries of sets no longer pinned are
    /// dropped. Exit 0; the sets with neither a tree nor a hash are listed.
    PinUnpacked(PinUnpackedArgs),
}

/// Arguments of `matrix pin-unpacked`.
#[derive(Debug, clap::Args)]
pub struct PinUnpackedArgs {
    /// The pins file to write.
    #[arg(long, value_name = "FILE", default_value = crate::toolchain::pins::PINS_FILE)]
    pub pins: Utf8PathBuf,
}

/// Arguments of `matrix pin`.
#[derive(Debug, clap::Args)]
pub struct PinArgs {
    /// Only the entries whose `index` is this URL (e.g. `https://pypi.org/simple`,
    /// `https://download.pytorch.org/whl/cu126`); default: every entry, each from its own
    /// index.
    #[arg(long, value_name = "URL")]
    pub index: Option<String>,
    /// The pins file to refresh.
    #[arg(long, value_name = "FILE", default_value = crate::toolchain::pins::PINS_FILE)]
    pub pins: Utf8PathBuf,
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
    /// Print the report as JSON on stdout instead of text (each system's `cell` and its
    /// kernels 0.19 spelling `cell_0_19`).
    #[arg(long)]
    pub json: bool,
    /// Which variant-name grammar the text output uses for each cell: `legacy` (the names
    /// kernel-builder writes, read by kernels 0.17.2, 0.18.3 and 0.19.1), `0.19` (the grammar
    /// of kernels 0.19), or `both` (legacy, a tab, the 0.19 name), as `list-variants --names`.
    #[arg(long, value_enum, default_value = "legacy")]
    pub names: crate::matrix::naming::NameGrammar,
}

/// Run a `matrix` subcommand.
pub fn run(args: Args) -> super::CmdResult {
    match args.command {
        MatrixCommand::CheckWheel(a) => check_wheel_cmd(a),
        MatrixCommand::Pin(a) => pin_cmd(a),
        MatrixCommand::PinUnpacked(a) => pin_unpacked_cmd(a),
    }
}

/// Write `pins` to `path` when its text changed: atomically, where a symbolic link points
/// (the link stays), and never over a read-only file.
fn write_pins(path: &camino::Utf8Path, pins: &crate::toolchain::pins::Pins) -> anyhow::Result<()> {
    let text = crate::toolchain::pins::to_text(pins)?;
    if std::fs::read_to_string(path).ok().as_deref() == Some(text.as_str()) {
        return Ok(());
    }
    let target = crate::fsutil::link_target(path);
    if std::fs::metadata(&target).is_ok_and(|m| m.permissions().readonly()) {
        anyhow::bail!(
            "`{target}` is read-only, so it was not changed: make it writable (`chmod u+w {target}`) or pass a writable copy with --pins"
        );
    }
    crate::fsutil::write_atomic(&target, text.as_bytes())
}

fn pin_unpacked_cmd(args: PinUnpackedArgs) -> super::CmdResult {
    use crate::toolchain::{pins, store};
    let mut p = pins::read(&args.pins)?;
    // Read only: the cache is neither created nor locked (a wrong path is an error, not an
    // empty cache).
    let cache = store::user_root()?;
    if !cache.join("trees").is_dir() {
        anyhow::bail!(
            "no toolchain cache at `{cache}` (no `trees/` there): a native build of a pinned cell (`build-and-copy --nix never`) makes one; {} names another",
            crate::env::TOOLCHAIN_CACHE_DIR.name
        );
    }
    let report = pins::record_unpacked(&mut p, &cache)?;
    write_pins(&args.pins, &p)?;
    for r in &report.recorded {
        println!("recorded {r}");
    }
    for d in &report.damaged {
        crate::printer::problem!("not hashed, the tree differs from what was unpacked: {d}");
    }
    if !report.missing.is_empty() {
        println!(
            "no tree in `{cache}`, and no hash recorded, for: {} (a native build of one of their cells, on a machine of their system, unpacks them)",
            report.missing.join(", ")
        );
    }
    println!(
        "{}: {} recorded, {} unchanged, {} kept without a tree to check, {} without a tree or hash, {} damaged, {} of sets no longer pinned dropped",
        args.pins,
        report.recorded.len(),
        report.same,
        report.kept,
        report.missing.len(),
        report.damaged.len(),
        report.dropped
    );
    Ok(ExitCode::SUCCESS)
}

fn pin_cmd(args: PinArgs) -> super::CmdResult {
    use crate::toolchain::pins;
    let mut p = pins::read(&args.pins)?;
    let report = pins::refresh(&mut p, args.index.as_deref());
    write_pins(&args.pins, &p)?;
    for c in &report.changed {
        println!("pinned {c}");
    }
    for u in &report.unresolved {
        crate::printer::problem!("not resolved: {u}");
    }
    println!(
        "{}: {} changed, {} not resolved, {} of other indexes left alone",
        args.pins,
        report.changed.len(),
        report.unresolved.len(),
        report.skipped
    );
    if report.unpacked_dropped > 0 {
        println!(
            "{} unpacked-tree hashes of changed sets dropped: run `kernel-builder matrix pin-unpacked` after a native build of their cells",
            report.unpacked_dropped
        );
    }
    Ok(if report.unresolved.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
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
        print!("{}", report.to_text_named(args.names));
    }
    Ok(if report.agrees { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
