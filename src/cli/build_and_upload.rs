//! `kernel-builder build-and-upload [DIR] [--variant V]... [upload flags]`: build natively
//! (as `build-and-copy --nix never`), verify the rebuild against `build/hashes.json`, upload.

use camino::Utf8PathBuf;

use super::upload::{run_upload, UploadFlags};
use crate::bundle;

/// Arguments of `build-and-upload`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = "\
Builds the variants into DIR/build/ natively (as `build-and-copy --nix never`), \
rebuilds them in a scratch directory to check they match DIR/build/hashes.json (as `verify`), \
and uploads DIR/build/ (as `upload`). Stops at the first step that fails; nothing is sent when \
the build or the verification fails.")]
pub struct Args {
    /// Kernel directory, holding build.toml (default: the current directory).
    pub dir: Option<Utf8PathBuf>,
    /// Build only this variant (repeatable); the upload then holds every variant in build/.
    #[arg(long = "variant", value_name = "VARIANT", value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub variants: Vec<String>,
    #[command(flatten)]
    pub toolchain: super::build_and_copy::ToolchainArgs,
    #[command(flatten)]
    pub native: super::build_and_copy::NativeArgs,
    #[command(flatten)]
    pub fetch: super::build_and_copy::FetchArgs,
    #[command(flatten)]
    pub flags: UploadFlags,
}

/// Run `build-and-upload`.
pub fn run(args: Args) -> super::CmdResult {
    let dir = super::kernel_dir_arg(args.dir)?;
    let host = args.toolchain.host();
    if let Some(only) = &host.cuda_capabilities_only {
        anyhow::bail!(
            "build-and-upload publishes every CUDA capability the kernel publishes, and --cuda-capabilities / {} asks for {} only (a quick check, which upload refuses); unset it, or use `build-and-copy` for the check",
            crate::assemble::compiled::CUDA_CAPABILITIES_VAR,
            only.join(", ")
        );
    }
    let loaded = super::load_config(&dir)?;
    // Without --python, the CPU and CUDA bundle cells build (and are verified) from pinned
    // wheels, as `build-and-copy --nix never` builds them: one plan for both.
    let request = args.toolchain.request(&args.fetch, !args.flags.json, false);
    let build = args.native.build(&dir, &loaded, &args.variants, host, request);
    // A variant the build would refuse, no token, or no repository: said now, not after the
    // build (nor the token asked for to build a typo). The build's own plan decides, so a cell
    // of --python's torch outside the matrix is one.
    bundle::native::check_selection(&build)?;
    super::upload::require_token(&args.flags)?;
    let options = super::upload::upload_options(dir.clone(), Ok(loaded.config.clone()), &args.flags);
    crate::hub::upload::repo_id(&options)?;
    let bundle::native::NativeOutcome { plan, report } =
        super::build_and_copy::build_natively(&build, args.flags.json)?;
    // The same lines as build-and-copy, on the same stream; with --json the upload's document
    // is the one on stdout, so the build lines go to stderr.
    if args.flags.json {
        for v in &report.built {
            crate::printer::stderr!("{}", super::build_and_copy::built_line(v));
        }
    } else {
        super::build_and_copy::print_built(&report, false)?;
    }
    let built: Vec<String> = report.built.iter().map(|v| v.name.clone()).collect();
    let checked = bundle::verify::verify_planned(&dir, &loaded.config, &loaded.cells, &built, &plan)?;
    for n in &checked.notes {
        crate::printer::stderr!("note: {n}");
    }
    let different: Vec<String> = checked
        .variants
        .iter()
        .filter_map(|v| v.difference.as_ref().map(|d| format!("{}: {d}", v.name)))
        .collect();
    if !different.is_empty() {
        // An error (not a bare exit 1) so that --json prints the failure document too.
        anyhow::bail!("the rebuild differs from build/, nothing was uploaded:\n  {}", different.join("\n  "));
    }
    crate::printer::stderr!("verified {} variant(s) against build/hashes.json", checked.variants.len());
    // The build.toml loaded above names the repository: upload does not read it again.
    run_upload(dir, Ok(loaded.config), &args.flags)
}
