//! Command-line interface: one file per subcommand, each with an `Args` struct (its doc comments
//! are the user manual) and a `run` that calls into the library.
// Those doc comments are clap's --help text: `<variant>` and `[torch]` there are what a user
// reads (a placeholder, a TOML table), not HTML or links.
#![allow(rustdoc::invalid_html_tags, rustdoc::broken_intra_doc_links)]

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

pub mod build_and_copy;
pub mod build_and_upload;
pub mod cache;
pub mod check_abi;
pub mod check_builds;
pub mod check_config;
pub mod ci_matrix;
pub mod clean_pyproject;
pub mod completions;
pub mod create_pyproject;
pub mod devshell;
pub mod fill_card;
pub mod hash;
pub mod init;
pub mod json;
pub mod list_variants;
pub mod lock_kernel_deps;
pub mod matrix;
pub mod native_cache;
pub mod nix_support;
pub mod report;
pub mod tune;
pub mod update_build;
pub mod upload;
pub mod verify;

/// Build PyTorch kernels for every cell of the compatibility matrix into Hub-ready trees.
#[derive(Debug, Parser)]
#[command(name = "kernel-builder", version = crate::matrix::data::version_line(), about, max_term_width = 100)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Say on stderr only what is wrong (warnings, errors, hints, why a command failed): no
    /// notes or progress; results on stdout stay. Before or after the command's name.
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// Also say each command kernel-builder runs (`+ cmake -G Ninja …`) on stderr. Not with
    /// --quiet.
    #[arg(short, long, global = true)]
    pub verbose: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create a new kernel project (Helion, Triton, PyTorch or compiled), ready to build.
    Init(init::Args),
    /// Read build.toml (any edition), validate it and print a summary.
    CheckConfig(check_config::Args),
    /// Write the generated CMake project of a compiled kernel (CMakeLists.txt, …).
    CreatePyproject(create_pyproject::Args),
    /// Remove exactly the files create-pyproject wrote.
    CleanPyproject(clean_pyproject::Args),
    /// Rewrite build.toml as edition 6, keeping comments and order.
    UpdateBuild(update_build::Args),
    /// List the build variants (matrix cells) of a kernel.
    ListVariants(list_variants::Args),
    /// Print the CI build jobs of every variant: a GitHub Actions matrix, or JSON.
    CiMatrix(ci_matrix::Args),
    /// Build every variant of a kernel into DIR/build/<variant>/.
    #[command(visible_alias = "build")]
    BuildAndCopy(build_and_copy::Args),
    /// Build one variant directory from a kernel source (the builder a Nix cell runs).
    #[command(hide = true)]
    Assemble(build_and_copy::AssembleArgs),
    /// Push the cells and bundle to a signed Nix binary cache, or fill build/ from one.
    Cache(cache::Args),
    /// Print the NAR hash of each path, as `nix hash path` does.
    Hash(hash::Args),
    /// Rebuild variants in a scratch directory and compare with build/ and build/hashes.json.
    Verify(verify::Args),
    /// Show or prune the native cell cache that native builds reuse cells from.
    NativeCache(native_cache::Args),
    /// Check the shared objects of built variants: manylinux policy, CPython abi3, torch
    /// stable ABI.
    CheckAbi(check_abi::Args),
    /// Pin each kernel-depends entry to a Hub commit and NAR hash in DIR/kernels.lock.
    LockKernelDeps(lock_kernel_deps::Args),
    /// Fetch the trees kernels.lock pins into the cache; print LOCAL_KERNELS for them.
    GetKernelDeps(lock_kernel_deps::FetchArgs),
    /// Upload DIR/build/ to the version branch of a Hub kernel repository.
    Upload(upload::Args),
    /// Build the variants natively, verify them against the manifest, then upload.
    BuildAndUpload(build_and_upload::Args),
    /// Maintainer commands about the build matrix (check it against a torch wheel).
    Matrix(matrix::Args),
    /// Pre-tune a Helion kernel on this GPU: heuristic files with provenance, per-shape table.
    Tune(tune::Args),
    /// Check that DIR/build/ holds exactly the variants the build matrix says the kernel needs.
    CheckBuilds(check_builds::Args),
    /// Print the shell completion script (bash, zsh or fish).
    Completions(completions::Args),
    /// Write DIR/build/CARD.md (the Hub README.md) from CARD.md, build.toml and build/.
    FillCard(fill_card::Args),
    /// Run $SHELL (or `-- CMD`) with the kernel's toolchain: Python env, compiler, CMake, Ninja, nvcc.
    Devshell(devshell::Args),
    /// As devshell, with the built variant importable: <package> on PYTHONPATH, LOCAL_KERNELS.
    Testshell(devshell::Args),
    /// Jobs run inside Nix derivations (join a bundle, check a cell, …).
    #[command(hide = true)]
    NixSupport(nix_support::Args),
    /// Run one compile through the compile cache (the compiler launcher of native cells).
    #[command(hide = true)]
    CompileLaunch(native_cache::LaunchArgs),
}

/// Read `dir/build.toml` ([`crate::kernel::load`]) and print its warnings to stderr; errors
/// come back rendered, for [`report_error`].
pub(crate) fn load_config(dir: &camino::Utf8Path) -> anyhow::Result<crate::kernel::Kernel> {
    let loaded = crate::kernel::load(dir).map_err(crate::error::Error::from)?;
    if !loaded.rendered_warnings.is_empty() {
        eprint!("{}", loaded.rendered_warnings);
    }
    Ok(loaded)
}

/// [`load_config`] through [`crate::kernel::load_locked`]: kernel-depends must be locked (the
/// commands that build).
pub(crate) fn load_config_locked(dir: &camino::Utf8Path) -> anyhow::Result<crate::kernel::Kernel> {
    let loaded = crate::kernel::load_locked(dir).map_err(crate::error::Error::from)?;
    if !loaded.rendered_warnings.is_empty() {
        eprint!("{}", loaded.rendered_warnings);
    }
    Ok(loaded)
}

/// How a command ended, when it did not fail with an error.
pub type CmdResult = anyhow::Result<ExitCode>;

/// Parse the command line, run the command, print any error with its cause chain.
///
/// Exit codes: 0 success; a failure's from its kind ([`crate::error::Kind::exit_code`]): 1 the
/// command failed (bad input, failed build), 2 bad command line, 128 + N stopped by signal N.
pub fn main() -> ExitCode {
    let matches = match Cli::command().try_get_matches() {
        Ok(m) => m,
        Err(e) => return command_line_error(e),
    };
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // Checked here, not by clap's `conflicts_with`: clap sees a conflict only among the flags
    // given on one side of the subcommand.
    if cli.quiet && cli.verbose {
        Cli::command()
            .error(clap::error::ErrorKind::ArgumentConflict, "'--quiet' cannot be used with '--verbose'")
            .exit();
    }
    crate::printer::set_level(match (cli.quiet, cli.verbose) {
        (true, _) => crate::printer::Level::Quiet,
        (_, true) => crate::printer::Level::Verbose,
        _ => crate::printer::Level::Normal,
    });
    let json = json_name(&matches);
    let result = match cli.command {
        Command::Init(a) => init::run(a),
        Command::CheckConfig(a) => check_config::run(a),
        Command::CreatePyproject(a) => create_pyproject::run(a),
        Command::CleanPyproject(a) => clean_pyproject::run(a),
        Command::UpdateBuild(a) => update_build::run(a),
        Command::ListVariants(a) => list_variants::run(a),
        Command::CiMatrix(a) => ci_matrix::run(a),
        Command::BuildAndCopy(a) => build_and_copy::run(a),
        Command::Assemble(a) => build_and_copy::run_assemble(a),
        Command::Cache(a) => cache::run(a),
        Command::Hash(a) => hash::run(a),
        Command::Verify(a) => verify::run(a),
        Command::NativeCache(a) => native_cache::run(a),
        Command::CheckAbi(a) => check_abi::run(a),
        Command::NixSupport(a) => nix_support::run(a),
        Command::Matrix(a) => matrix::run(a),
        Command::LockKernelDeps(a) => lock_kernel_deps::run(a),
        Command::GetKernelDeps(a) => lock_kernel_deps::run_fetch(a),
        Command::Upload(a) => upload::run(a),
        Command::BuildAndUpload(a) => build_and_upload::run(a),
        Command::Tune(a) => tune::run(a),
        Command::CheckBuilds(a) => check_builds::run(a),
        Command::Completions(a) => completions::run(a),
        Command::FillCard(a) => fill_card::run(a),
        Command::Devshell(a) => devshell::run_dev(a),
        Command::Testshell(a) => devshell::run_test(a),
        Command::CompileLaunch(a) => native_cache::run_launch(a),
    };
    // Interrupted: the signal handler removes what the command registered and exits with
    // 128 + signal; the command's own status (often a failure: its child was stopped) is moot.
    crate::interrupt::finish();
    match result {
        Ok(code) => code,
        Err(err) => {
            report_error(&err);
            if let Some(command) = &json {
                json::print_failure(command, &err);
            }
            // The exit code is the typed error's ([`crate::error::Kind::exit_code`]).
            ExitCode::from(crate::error::kind(&err).exit_code())
        }
    }
}

/// A command line clap refuses: its message on stderr, as clap prints it, exit 2; with `--json`
/// also the failure document on stdout, so a program reading it gets one either way. A value
/// clap read from an environment variable (`env =` arguments) is said to be that variable's:
/// clap names the flag, which the user did not give.
fn command_line_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let shown = matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    );
    // `args_os`: the argument clap refused may be the one that is not UTF-8, and `args` would
    // panic on it.
    let args_os: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    // What is after `--` is the user's own command's (devshell, tune), not ours.
    let ours = args_os.iter().position(|a| a == "--").unwrap_or(args_os.len());
    let args: Vec<String> = args_os[..ours].iter().map(|a| a.to_string_lossy().into_owned()).collect();
    let argv_utf8 = args_os.iter().all(|a| a.to_str().is_some());
    // The subcommand path the arguments name (`matrix check-wheel`), as far as they name one.
    let mut command = Cli::command();
    let mut names: Vec<String> = Vec::new();
    for a in args.iter().filter(|a| !a.starts_with('-')) {
        match command.find_subcommand(a) {
            Some(sub) => {
                names.push(sub.get_name().to_owned());
                command = sub.clone();
            }
            None => break,
        }
    }
    let from_env = if shown { None } else { refused_environment_value(&e, &command, &args, argv_utf8) };
    let json = args.iter().any(|a| a == "--json");
    let message = match from_env {
        Some(message) => {
            crate::printer::stderr!("error: {message}");
            message
        }
        None if shown || !json => e.exit(),
        None => {
            let _ = e.print();
            let text = e.render().to_string();
            text.lines().next().unwrap_or_default().trim_start_matches("error: ").to_owned()
        }
    };
    if json {
        json::print_failure(&names.join(" "), &anyhow::anyhow!(message));
    }
    ExitCode::from(crate::error::Kind::Usage.exit_code())
}

/// What clap refused, said of the environment variable it came from: an argument of `command`
/// with `env = VAR` whose flag `args` does not give, when VAR is set and is the value refused
/// (clap's error names the flag) or is not UTF-8 while every argument is (clap's says "invalid
/// UTF-8 in arguments"). `args` are ours, those before `--`.
fn refused_environment_value(
    e: &clap::Error,
    command: &clap::Command,
    args: &[String],
    argv_utf8: bool,
) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let refused_flag = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(s)) => s.split_whitespace().next().map(str::to_owned),
        _ => None,
    };
    command.get_arguments().find_map(|arg| {
        let var = arg.get_env()?.to_str()?;
        let long = format!("--{}", arg.get_long()?);
        let given = args.iter().any(|a| *a == long || a.starts_with(&format!("{long}=")));
        // Every `env =` variable is one of src/env.rs's (a test holds them to it).
        let value = crate::env::RUNTIME.iter().find(|v| v.name == var)?.os().filter(|_| !given)?;
        match (e.kind(), value.to_str()) {
            // Not UTF-8 on the command line too: clap's message is about that argument.
            (ErrorKind::InvalidUtf8, None) if argv_utf8 => {
                Some(format!("`{var}` is not UTF-8; set it to a UTF-8 value, unset it, or pass {long}"))
            }
            (ErrorKind::ValueValidation | ErrorKind::InvalidValue, Some(value))
                if refused_flag.as_deref() == Some(long.as_str()) =>
            {
                let why = std::error::Error::source(e).map(|s| format!(": {s}")).unwrap_or_default();
                Some(format!(
                    "invalid `{var}` (the environment's {long}, `{}`){why}; fix it, unset it, or pass {long}",
                    value.escape_debug()
                ))
            }
            _ => None,
        }
    })
}

/// The command's name (`matrix check-wheel`) when `--json` was given to it: its failure is then
/// also the [`json::failure`] document on stdout. Read from clap's matches, so every command
/// that has a `--json` flag gets it, without a list to keep.
fn json_name(matches: &clap::ArgMatches) -> Option<String> {
    let mut names = Vec::new();
    let mut m = matches;
    while let Some((name, sub)) = m.subcommand() {
        names.push(name);
        m = sub;
    }
    let has_json = m.ids().any(|id| id.as_str() == "json");
    (has_json && m.get_flag("json")).then(|| names.join(" "))
}

/// Print an error: build.toml's errors are rendered with their source snippets and `help:`
/// lines; anything else as [`crate::error::failure_lines`] (`error: …`, each cause, `hint:`
/// lines).
pub fn report_error(err: &anyhow::Error) {
    if let Some(diags) = crate::error::find::<crate::config::ConfigErrors>(err) {
        eprint!("{}", diags.render());
        return;
    }
    // Errors quote servers and file names: their control characters are shown escaped.
    for line in crate::error::failure_lines(err) {
        crate::printer::stderr_line(format_args!("{}", crate::printer::escape_controls(&line)));
    }
}

/// The kernel directory argument, `.` when not given; an error that says whether it is missing
/// or a file (with the directory to pass instead when the file is a `build.toml`).
pub(crate) fn kernel_dir_arg(dir: Option<camino::Utf8PathBuf>) -> anyhow::Result<camino::Utf8PathBuf> {
    let dir = dir.unwrap_or_else(|| camino::Utf8PathBuf::from("."));
    require_dir(&dir)?;
    Ok(dir)
}

/// `dir` must be an existing directory: otherwise an error saying it does not exist, or that it
/// is a file (naming its directory when it is a `build.toml`).
pub(crate) fn require_dir(dir: &camino::Utf8Path) -> anyhow::Result<()> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) if dir.file_name() == Some("build.toml") => {
            let parent =
                dir.parent().filter(|p| !p.as_str().is_empty()).unwrap_or(camino::Utf8Path::new("."));
            anyhow::bail!("`{dir}` is a file; pass the kernel directory that holds it: `{parent}`")
        }
        Ok(_) => anyhow::bail!("`{dir}` is a file, not a directory"),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => anyhow::bail!("`{dir}` does not exist"),
        Err(e) => anyhow::bail!("cannot read `{dir}`: {e}"),
    }
}
