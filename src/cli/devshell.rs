//! `kernel-builder devshell DIR --python PY` and `testshell DIR --python PY`: run `$SHELL` (or
//! the command after `--`) with the cell's toolchain on PATH: the Python environment's bin
//! directory (torch, kernels, pytest, pip's CMake and Ninja), the C++ compiler, CMake, Ninja and
//! nvcc that the native build would use (the same discovery: [`crate::bundle::plan`]).
//! `testshell` builds nothing: it needs the variant of build/ this torch loads and makes the
//! kernel importable from it, both as the package (a `<package>` link on PYTHONPATH) and
//! through `kernels` (`LOCAL_KERNELS=<repo-id>=DIR/build`, see the loader's local override).

use std::process::ExitCode;

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};

use crate::assemble::compiled::CompiledCell;
use crate::bundle;
use crate::config::{Backend, BuildConfig};
use crate::toolchain::host::HostToolchain;

/// Arguments of both shells.
///
/// Exit status: the command's (or the shell's) own; 1 when the toolchain or (testshell) the
/// variant is missing; 2 for a bad command line.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Kernel directory containing build.toml.
    pub dir: Utf8PathBuf,
    /// The Python environment whose torch the shell is for (e.g. `.venv/bin/python`); its bin
    /// directory goes first on PATH.
    #[arg(long, value_name = "PY")]
    pub python: Option<Utf8PathBuf>,
    /// Run this command (and its arguments) instead of an interactive `$SHELL`.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// `devshell`.
pub fn run_dev(args: Args) -> super::CmdResult {
    run(args, false)
}

/// `testshell`.
pub fn run_test(args: Args) -> super::CmdResult {
    run(args, true)
}

/// The toolchain of the shell: the interpreter and the compiled cell the host builds (none for
/// a noarch kernel).
struct Shell {
    python_bin: Utf8PathBuf,
    /// The compiled cells the host builds with this Python, a CUDA one first (its tools,
    /// nvcc included, are the shell's).
    cells: Vec<CompiledCell>,
}

fn run(args: Args, test: bool) -> super::CmdResult {
    super::require_dir(&args.dir)?;
    let which = if test { "testshell" } else { "devshell" };
    let python = args.python.clone().with_context(|| {
        format!(
            "{which} needs --python PATH: the Python environment (with torch, kernels and pytest) whose toolchain the shell gets, e.g. `kernel-builder {which} {} --python .venv/bin/python`",
            args.dir
        )
    })?;
    let loaded = super::load_config(&args.dir)?;
    let config = &loaded.config;
    let shell = toolchain(config, &python)?;
    let mut env: Vec<(String, String)> = Vec::new();
    let mut path: Vec<Utf8PathBuf> = vec![shell.python_bin.clone()];
    if let Some(cell) = shell.cells.first() {
        for tool in
            [Some(&cell.cxx), Some(&cell.cmake), Some(&cell.ninja), cell.nvcc.as_ref()].into_iter().flatten()
        {
            if let Some(dir) = tool.path.parent() {
                path.push(absolute(dir));
            }
        }
        env.push(("CXX".into(), absolute(&cell.cxx.path).to_string()));
        if let Some(nvcc) = &cell.nvcc {
            env.push(("CUDACXX".into(), absolute(&nvcc.path).to_string()));
        }
    }
    let mut seen = std::collections::HashSet::new();
    let mut parts: Vec<String> =
        path.into_iter().map(String::from).filter(|p| seen.insert(p.clone())).collect();
    if let Some(old) = crate::env::PATH.get() {
        parts.extend(old.split(':').filter(|p| !p.is_empty() && !seen.contains(*p)).map(str::to_owned));
    }
    env.push(("PATH".into(), parts.join(":")));

    // testshell: the link directory lives (and is removed) with this process.
    let mut _links: Option<tempfile::TempDir> = None;
    let mut summary = match shell.cells.first() {
        Some(c) => format!("{which}: {} with the tools of cell {}", c.framework.describe(), c.variant),
        None => format!("{which}: `{}` is noarch, the Python environment's tools only", config.general.name),
    };
    if test {
        let build = absolute(&args.dir.join("build"));
        let variant = test_variant(&args.dir, &python, &shell.cells)?;
        let links = tempfile::Builder::new()
            .prefix("kernel-builder-testshell-")
            .tempdir()
            .context("cannot create a temporary directory")?;
        let package = config.general.python_name();
        std::os::unix::fs::symlink(build.join(&variant), links.path().join(&package))
            .context("cannot link the variant into the temporary directory")?;
        let links_dir =
            Utf8Path::from_path(links.path()).context("the temporary directory's path is not UTF-8")?;
        env.push(("PYTHONPATH".into(), join_var(links_dir.as_str(), &crate::env::PYTHONPATH)));
        let repo =
            config.general.hub.repo_id.clone().unwrap_or_else(|| format!("local/{}", config.general.name));
        env.push(("LOCAL_KERNELS".into(), join_var(&format!("{repo}={build}"), &crate::env::LOCAL_KERNELS)));
        summary = format!(
            "{summary}; `import {package}` loads build/{variant}, get_kernel(\"{repo}\") loads {build}"
        );
        _links = Some(links);
    }
    let (program, rest) = match args.command.split_first() {
        Some((p, rest)) => (p.clone(), rest.to_vec()),
        None => (crate::env::SHELL.non_empty().unwrap_or_else(|| "/bin/sh".into()), Vec::new()),
    };
    eprintln!("{summary}");
    // Ctrl-C (and Ctrl-\) in the terminal reach the command itself; this process waits for it,
    // as a shell waits for its job, and so outlives it to remove testshell's link directory.
    // (The child starts with the default dispositions: exec resets handled signals.)
    let waiting = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGQUIT] {
        signal_hook::flag::register(sig, waiting.clone()).context("cannot install a signal handler")?;
    }
    let status = std::process::Command::new(&program)
        .args(&rest)
        .envs(env)
        .status()
        .with_context(|| format!("cannot run `{program}`"))?;
    Ok(match status.code() {
        Some(c) => ExitCode::from(u8::try_from(c).unwrap_or(1)),
        // Killed by a signal: exit as a shell reports it, 128 + signal.
        None => ExitCode::from(
            u8::try_from(128 + std::os::unix::process::ExitStatusExt::signal(&status).unwrap_or(0))
                .unwrap_or(1),
        ),
    })
}

/// `value`, then the variable's current value after a `:` when it has one.
fn join_var(value: &str, var: &crate::env::Var) -> String {
    match var.non_empty() {
        Some(old) => format!("{value}:{old}"),
        None => value.to_owned(),
    }
}

fn absolute(p: &Utf8Path) -> Utf8PathBuf {
    std::path::absolute(p.as_std_path())
        .ok()
        .and_then(|p| Utf8PathBuf::from_path_buf(p).ok())
        .unwrap_or_else(|| p.to_owned())
}

/// The compiled cell the native build would build with `python` (a CUDA one when it can, for
/// nvcc); for a kernel with compiled backends none of which builds here, the reasons.
fn toolchain(config: &BuildConfig, python: &Utf8Path) -> anyhow::Result<Shell> {
    let host = HostToolchain::new(python);
    let facts = host.torch().map_err(|e| anyhow::anyhow!("{e}"))?;
    // A path as given (a venv's `python` links outside the venv: keep the link's directory);
    // a bare name is the interpreter the probe ran.
    let interpreter = if python.as_str().contains('/') { absolute(python) } else { facts.executable.clone() };
    let python_bin =
        interpreter.parent().map(Utf8Path::to_owned).context("the interpreter has no directory")?;
    if bundle::compiled_backends(config).is_empty() {
        return Ok(Shell { python_bin, cells: Vec::new() });
    }
    let plan = bundle::plan(config, &host);
    let mut cells: Vec<CompiledCell> = plan.variants.into_iter().filter_map(|v| v.cell.map(|c| *c)).collect();
    cells.sort_by_key(|c| c.backend != Backend::Cuda);
    if cells.is_empty() {
        let reasons: Vec<String> =
            plan.skipped.iter().map(|s| format!("  {}: {}", s.backend, s.reason)).collect();
        anyhow::bail!(
            "no compiled cell of `{}` builds with `{python}` here:\n{}",
            config.general.name,
            reasons.join("\n")
        );
    }
    Ok(Shell { python_bin, cells })
}

/// The variant directory of `dir/build` that this torch loads: a compiled cell's (CUDA first),
/// else the noarch one of torch's device (CUDA, XPU) or CPU, else `torch-universal`.
fn test_variant(dir: &Utf8Path, python: &Utf8Path, cells: &[CompiledCell]) -> anyhow::Result<String> {
    let build = dir.join("build");
    let host = HostToolchain::new(python);
    let facts = host.torch().map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut wanted: Vec<String> = cells.iter().map(|c| c.variant.clone()).collect();
    if facts.cuda.is_some() {
        wanted.push("torch-cuda".into());
    }
    if facts.xpu.is_some() {
        wanted.push("torch-xpu".into());
    }
    wanted.extend(["torch-cpu".to_owned(), "torch-universal".to_owned()]);
    if let Some(v) = wanted.iter().find(|v| build.join(v).join("metadata.json").is_file()) {
        return Ok(v.clone());
    }
    anyhow::bail!(
        "`{build}` has no variant for torch {} (looked for {}): build it first (`kernel-builder build-and-copy {} --nix never --python {python}`)",
        facts.version,
        wanted.join(", "),
        dir
    )
}
