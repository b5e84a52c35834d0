//! `kernel-builder verify [DIR] [--variant V]...`: rebuild variants natively in a scratch
//! directory and compare them with DIR/build/ and DIR/build/hashes.json.

use std::process::ExitCode;

use camino::Utf8PathBuf;

use crate::bundle::verify::verify;

/// Arguments of `verify`; what it prints and its exit status are in `after_long_help`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = "\
Prints `same` or `different` per variant; for a different one, the first file that differs and a short diff. \
DIR/build/ is not modified.

Exit status: 0 every variant rebuilt the same; 1 one differs, or one cannot be rebuilt; 2 bad command line.")]
pub struct Args {
    /// Kernel directory, holding build.toml and build/ (default: the current directory).
    pub dir: Option<Utf8PathBuf>,
    /// Verify only this variant (repeatable). Default: the variants in build/hashes.json and
    /// the variants of this kernel present in build/.
    #[arg(long = "variant", value_name = "VARIANT", value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub variants: Vec<String>,
    /// Print the result as JSON on stdout: `{"same": bool, "variants": [{"name", "rebuilt",
    /// "on_disk", "recorded", "difference"}], "notes": [...]}` (same exit status).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub toolchain: super::build_and_copy::ToolchainArgs,
    #[command(flatten)]
    pub fetch: super::build_and_copy::FetchArgs,
}

/// Run `verify`.
pub fn run(args: Args) -> super::CmdResult {
    let dir = super::kernel_dir_arg(args.dir)?;
    let loaded = super::load_config(&dir)?;
    // Each variant is rebuilt with the toolchain that built it (pins beside --python).
    let request = args.toolchain.request(&args.fetch, !args.json, true);
    let report =
        verify(&dir, &loaded.config, &loaded.cells, &args.variants, &args.toolchain.host(), &request)?;
    for n in &report.notes {
        crate::printer::stderr!("note: {n}");
    }
    if args.json {
        let same = report.variants.iter().all(|v| v.is_same());
        let doc = serde_json::json!({"same": same, "variants": report.variants, "notes": report.notes});
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(if same { ExitCode::SUCCESS } else { ExitCode::from(1) });
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
