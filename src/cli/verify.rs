//! `kernel-builder verify [DIR] [--variant V]...`: rebuild variants natively in a scratch
//! directory and compare them with DIR/build/ and DIR/build/hashes.json.

use std::process::ExitCode;

use camino::Utf8PathBuf;

use crate::assemble::verify::verify;

/// Arguments of `verify`.
///
/// Rebuilds each variant in a scratch directory and prints, per variant, `same` or
/// `different` (with the first differing file and a short diff). Exits 1 when any variant is
/// different. DIR/build/ is not modified.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Kernel directory, holding build.toml and build/ (default: the current directory).
    pub dir: Option<Utf8PathBuf>,
    /// Verify only this variant (repeatable). Default: the variants in build/hashes.json and
    /// the variants of this kernel present in build/.
    #[arg(long = "variant", value_name = "VARIANT")]
    pub variants: Vec<String>,
    #[command(flatten)]
    pub toolchain: super::build_and_copy::ToolchainArgs,
}

/// Run `verify`.
pub fn run(args: Args) -> super::CmdResult {
    let dir = args.dir.unwrap_or_else(|| Utf8PathBuf::from("."));
    anyhow::ensure!(dir.is_dir(), "`{dir}` is not a directory");
    let loaded = super::load_config(&dir)?;
    let report = verify(&dir, &loaded.config, &args.variants, &args.toolchain.host())?;
    for n in &report.notes {
        eprintln!("note: {n}");
    }
    let mut all_same = true;
    for v in &report.variants {
        match &v.difference {
            None => println!("{}: same ({})", v.name, v.rebuilt),
            Some(d) => {
                all_same = false;
                println!("{}: different", v.name);
                for line in d.lines() {
                    println!("  {line}");
                }
            }
        }
    }
    Ok(if all_same { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
