//! What `kernel-builder devshell DIR` and `testshell DIR` run `$SHELL` (or the command after
//! `--`) in: a cell's toolchain on PATH, as an environment ([`prepare`]); the CLI runs the
//! command in it.
//!
//! - With `--python PY`: the Python environment's bin directory (torch, kernels, pytest, pip's
//!   CMake and Ninja), the C++ compiler, CMake, Ninja and nvcc that the native build would use
//!   (the same plan: [`crate::bundle::Plan::new`], the toolchains chosen by
//!   [`crate::bundle::choose_toolchains`]).
//! - Without: one pinned bundle cell's toolchain (`--variant`, else the CUDA cell of the newest
//!   torch, else its CPU cell), provisioned from the toolchain cache exactly as `build-and-copy
//!   --nix never` provisions it ([`crate::bundle::pinned_plan`]): CMake, Ninja and (CUDA)
//!   nvcc from their wheels, the torch wheel unpacked on PYTHONPATH with `Torch_ROOT` at its
//!   package (for CMake's `find_package(Torch)`), and `python` the CPython of the pins (`python3.13` from PATH). Importing
//!   that torch also needs its runtime dependencies (typing_extensions, sympy, …, and for PyPI's
//!   CUDA builds NVIDIA's libraries), which are not pinned; `--python` gives an environment that
//!   has them.
//!
//! `testshell` builds nothing: it needs the variant of build/ this torch loads and makes the
//! kernel importable from it, both as the package (a `<package>` link on PYTHONPATH) and
//! through `kernels` (`LOCAL_KERNELS=<repo-id>=DIR/build`, see the loader's local override).

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};

use crate::assemble::compiled::CompiledCell;
use crate::bundle;
use crate::config::{Backend, BuildConfig};
use crate::kernel::Kernel;
use crate::matrix::KernelCells;
use crate::report::Reporter;
use crate::toolchain::host::{HostToolchain, TorchFacts};

/// What shell to prepare.
#[derive(Debug, Clone)]
pub struct ShellOptions {
    /// The kernel directory.
    pub dir: Utf8PathBuf,
    /// The Python environment whose torch the shell is for; `None`: a pinned cell's toolchain.
    pub python: Option<Utf8PathBuf>,
    /// Without `python`: the pinned bundle cell whose toolchain the shell gets; with it, which
    /// of the compiled cells that Python's torch builds (default: the CUDA one).
    pub variant: Option<String>,
    /// testshell: the built variant importable, and (pinned) a test environment.
    pub test: bool,
}

impl ShellOptions {
    /// The command's name, for messages.
    pub fn which(&self) -> &'static str {
        if self.test {
            "testshell"
        } else {
            "devshell"
        }
    }
}

/// A shell ready to run a command in: its environment, and what must live as long as it (the
/// temporary link directories, the toolchain cache's in-use lock).
pub struct PreparedShell {
    /// The variables to set (`PATH`, `CXX`, `PYTHONPATH`, `Torch_ROOT`, …), over the caller's.
    pub env: Vec<(String, String)>,
    /// One line saying what the shell is (shown before the command runs).
    pub summary: String,
    _links: Option<ShellDir>,
    _shell: Shell,
}

/// The toolchain of the shell: the interpreter and the compiled cell the host builds (none for
/// a noarch kernel).
struct Shell {
    /// The directory put first on PATH for `python`: the environment's bin directory, or (a
    /// pinned cell) a directory of links to the pins' CPython.
    python_bin: Utf8PathBuf,
    /// The torch the shell is for (testshell picks the variant it loads).
    torch: TorchFacts,
    /// The compiled cells the host builds with this Python, a CUDA one first (its tools,
    /// nvcc included, are the shell's).
    cells: Vec<CompiledCell>,
    /// The compiled backends this Python's toolchain cannot build, with the reason (no nvcc).
    skipped: Vec<crate::assemble::compiled::plan::SkippedBackend>,
    /// A pinned cell's: PYTHONPATH entries (the unpacked wheels), `Torch_ROOT`, and what
    /// must live as long as the shell (the link directory, the toolchain cache's in-use lock).
    pinned: Option<Pinned>,
}

struct Pinned {
    python_path: Vec<Utf8PathBuf>,
    torch_root: Utf8PathBuf,
    /// The pins' CPython, which `python` and `python3` link to (devshell).
    python: Utf8PathBuf,
    /// testshell's environment (torch importable, the loader, pytest), whose bin directory is
    /// first on PATH.
    test_env: Option<crate::toolchain::test_env::TestEnv>,
    _links: ShellDir,
    /// The toolchain cache the cell comes from (its in-use lock).
    _toolchains: bundle::Toolchains,
}

pub fn prepare(loaded: &Kernel, args: &ShellOptions, report: &dyn Reporter) -> anyhow::Result<PreparedShell> {
    let test = args.test;
    let which = args.which();
    let config = &loaded.config;
    // The pinned-or-host choice, as a native build makes it (the cache's download bar shown).
    let request = bundle::ToolchainRequest {
        python: args.python.is_some(),
        pins_beside_python: false,
        fetch: crate::toolchain::store::FetchOptions { progress: true, ..Default::default() },
    };
    let shell = match (&args.python, bundle::choose_toolchains(config, &request)?) {
        (Some(python), _) => {
            let mut shell = toolchain(config, &loaded.cells, python)?;
            if let Some(wanted) = &args.variant {
                keep_cell(&mut shell, wanted, python, &config.general.name)?;
            } else if let Some(first) = shell.cells.first() {
                // The shell is for another backend than the kernel's first choice: say why.
                for s in shell.skipped.iter().filter(|s| s.backend == Backend::Cuda) {
                    report.note(&format!(
                        "the shell is for `{}`: no {} cell with `{python}` here: {}",
                        first.variant, s.backend, s.reason
                    ));
                }
            }
            shell
        }
        (None, pinned @ bundle::Toolchains::Pinned(_)) => {
            pinned_toolchain(config, &loaded.cells, args, pinned, report)?
        }
        (None, _) => anyhow::bail!("{}", needs_python(which, &config.general.name, &args.dir)),
    };
    let mut env: Vec<(String, String)> = Vec::new();
    let mut path: Vec<Utf8PathBuf> = vec![shell.python_bin.clone()];
    if let Some(cell) = shell.cells.first() {
        for tool in
            [Some(&cell.cxx), Some(&cell.cmake), Some(&cell.ninja), cell.nvcc.as_ref()].into_iter().flatten()
        {
            // A tool the PATH finds already (the host's `/usr/bin/c++`) leaves the user's order
            // alone: moving its directory first would put all of `/usr/bin` ahead of theirs.
            if found_first(&path, &tool.path) {
                continue;
            }
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
    let mut python_path: Vec<String> = Vec::new();
    if let Some(p) = &shell.pinned {
        python_path.extend(p.python_path.iter().map(|d| d.to_string()));
        // CMake's `find_package(Torch)` looks under `<Torch_ROOT>/share/cmake/Torch/` (a
        // read-only tree of the toolchain cache, checked on every use).
        env.push(("Torch_ROOT".into(), p.torch_root.to_string()));
        // As root, importing from the unpacked tree or the shared test environment would add
        // bytecode to them (a change their check on use finds, making them again).
        env.push(("PYTHONDONTWRITEBYTECODE".into(), "1".into()));
    }

    // testshell: the link directory lives (and is removed) with this process.
    let mut links_dir_guard: Option<ShellDir> = None;
    let mut summary = match (shell.cells.first(), &shell.pinned) {
        (Some(c), Some(p)) => match &p.test_env {
            Some(env) => format!(
                "{which}: the pinned toolchain of cell {}; `python` is the test environment `{}` ({}, its dependencies, {} and {} from PyPI, resolved when it was made; read-only, seen through this shell's own environment `{}`, which goes when it exits)",
                c.variant,
                env.dir,
                env.torch_from,
                crate::toolchain::test_env::KERNELS_LOADER,
                crate::toolchain::test_env::PYTEST,
                env.overlay.as_deref().map(Utf8Path::as_str).unwrap_or_default()
            ),
            None => format!(
                "{which}: the pinned toolchain of cell {} (torch {} unpacked on PYTHONPATH, `python` is {}; importing torch also needs its runtime dependencies, which are not pinned: testshell makes an environment that has them, --python uses yours)",
                c.variant, shell.torch.version, p.python
            ),
        },
        (Some(c), None) => format!("{which}: {} with the tools of cell {}", c.framework.describe(), c.variant),
        (None, _) => format!("{which}: `{}` is noarch, the Python environment's tools only", config.general.name),
    };
    if test {
        let build = absolute(&args.dir.join("build"));
        let how = match (&args.python, shell.cells.first()) {
            (Some(python), _) => match &args.variant {
                Some(v) => format!("--python {python} --variant {v}"),
                None => format!("--python {python}"),
            },
            (None, Some(cell)) => format!("--variant {}", cell.variant),
            (None, None) => String::new(),
        };
        let variant = test_variant(&args.dir, &how, &shell.torch, &shell.cells)?;
        let links = ShellDir::new("kernel-builder-testshell-")?;
        let package = config.general.python_name();
        std::os::unix::fs::symlink(build.join(&variant), links.path().join(&package))
            .context("cannot link the variant into the temporary directory")?;
        let links_dir =
            Utf8Path::from_path(links.path()).context("the temporary directory's path is not UTF-8")?;
        python_path.insert(0, links_dir.to_string());
        let repo =
            config.general.hub.repo_id.clone().unwrap_or_else(|| format!("local/{}", config.general.name));
        env.push(("LOCAL_KERNELS".into(), join_var(&format!("{repo}={build}"), &crate::env::LOCAL_KERNELS)));
        summary = format!(
            "{summary}; `import {package}` loads build/{variant}, get_kernel(\"{repo}\") loads {build}"
        );
        links_dir_guard = Some(links);
    }
    if !python_path.is_empty() {
        env.push(("PYTHONPATH".into(), join_var(&python_path.join(":"), &crate::env::PYTHONPATH)));
    }
    Ok(PreparedShell { env, summary, _links: links_dir_guard, _shell: shell })
}

/// A temporary directory of the shell's, removed when the shell ends: when dropped, and by the
/// interrupt handler when SIGTERM or SIGHUP ends it ([`crate::interrupt::run_as_shell`]).
struct ShellDir {
    // Unregistered first (fields drop in order), then removed.
    _registered: crate::interrupt::Registered,
    dir: tempfile::TempDir,
}

impl ShellDir {
    fn new(prefix: &str) -> anyhow::Result<ShellDir> {
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir()
            .context("cannot create a temporary directory")?;
        let path = Utf8Path::from_path(dir.path()).context("the temporary directory's path is not UTF-8")?;
        let _registered = crate::interrupt::remove_on_interrupt(path, crate::interrupt::Removal::All);
        Ok(ShellDir { _registered, dir })
    }

    fn path(&self) -> &std::path::Path {
        self.dir.path()
    }
}

/// Whether looking up `tool`'s file name in `dirs`, then PATH, finds `tool` itself.
fn found_first(dirs: &[Utf8PathBuf], tool: &Utf8Path) -> bool {
    let found = tool.file_name().and_then(|name| crate::toolchain::host::find_program(name, dirs));
    match (found.map(|f| f.canonicalize_utf8()), tool.canonicalize_utf8()) {
        (Some(Ok(a)), Ok(b)) => a == b,
        _ => false,
    }
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
fn toolchain(config: &BuildConfig, kernel_cells: &KernelCells, python: &Utf8Path) -> anyhow::Result<Shell> {
    let host = HostToolchain::new(python);
    let facts = host.torch()?.clone();
    // A path as given (a venv's `python` links outside the venv: keep the link's directory);
    // a bare name is the interpreter the probe ran.
    let interpreter = if python.as_str().contains('/') { absolute(python) } else { facts.executable.clone() };
    let python_bin =
        interpreter.parent().map(Utf8Path::to_owned).context("the interpreter has no directory")?;
    if bundle::compiled_backends(config).is_empty() {
        return Ok(Shell { python_bin, torch: facts, cells: Vec::new(), skipped: Vec::new(), pinned: None });
    }
    let plan = bundle::Plan::new(config, kernel_cells, &host, &bundle::Toolchains::Host, &[], &|_| false);
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
    Ok(Shell { python_bin, torch: facts, cells, skipped: plan.skipped, pinned: None })
}

/// With `--python` and `--variant`: keep the one compiled cell named, of those the
/// environment's torch builds (the CPU cell of a CUDA torch, say; without `--variant` the
/// CUDA one is taken).
fn keep_cell(shell: &mut Shell, wanted: &str, python: &Utf8Path, name: &str) -> anyhow::Result<()> {
    let builds: Vec<String> = shell.cells.iter().map(|c| c.variant.clone()).collect();
    anyhow::ensure!(
        !builds.is_empty(),
        "`{name}` is noarch: with --python the shell's tools are the environment's, and --variant, which picks one of a kernel's compiled cells, does not apply"
    );
    shell.cells.retain(|c| c.variant == wanted);
    // A cell of this torch whose backend cannot be built here (a CUDA cell without nvcc): the
    // reason, not "not a cell that torch builds" (a user's trial was told so).
    let this_torch = shell.torch.version.split('.').take(2).collect::<String>();
    let skipped = match crate::matrix::naming::parse_variant_name(wanted) {
        Some(crate::matrix::naming::ParsedVariant::TorchArch { torch, .. }) if torch == this_torch => {
            bundle::variant_kind(wanted).and_then(|(b, _)| shell.skipped.iter().find(|s| s.backend == b))
        }
        _ => None,
    };
    if let (true, Some(s)) = (shell.cells.is_empty(), skipped) {
        anyhow::bail!("`{}` cannot be built with `{python}` here: {}", wanted.escape_debug(), s.reason);
    }
    if shell.cells.is_empty() {
        let built: Vec<&str> = builds.iter().map(String::as_str).collect();
        let message = format!(
            "`{}` is not a cell that torch {} of `{python}` builds; it builds {}",
            wanted.escape_debug(),
            shell.torch.version,
            builds.join(", "),
        );
        return Err(bundle::no_such_variant(message, &[wanted], &built));
    }
    Ok(())
}

/// Why a shell without `--python` cannot be had for the kernel `name` in `dir`: it has no
/// cell built from pinned wheels.
fn needs_python(which: &str, name: &str, dir: &Utf8Path) -> String {
    format!(
        "{which} needs --python PATH here: `{name}` has no cell built from pinned wheels (only a [torch] kernel's CPU and CUDA cells are); pass the Python environment (with torch, kernels and pytest) whose toolchain the shell gets, e.g. `kernel-builder {which} {dir} --python .venv/bin/python`"
    )
}

/// The toolchain of one pinned bundle cell (`variant`, else the default of [`ShellOptions::variant`]),
/// provisioned from the toolchain cache of `pinned` ([`bundle::Toolchains::Pinned`]) as
/// `build-and-copy --nix never` does.
fn pinned_toolchain(
    config: &BuildConfig,
    kernel_cells: &KernelCells,
    opts: &ShellOptions,
    pinned: bundle::Toolchains,
    report: &dyn Reporter,
) -> anyhow::Result<Shell> {
    let (dir, variant, which, test) = (&opts.dir, opts.variant.as_deref(), opts.which(), opts.test);
    let name = &config.general.name;
    let mut cells: Vec<crate::matrix::Cell> = bundle::compiled_backends(config)
        .into_iter()
        .flat_map(|b| crate::toolchain::provision::pinned_cells(config, kernel_cells, b))
        .cloned()
        .collect();
    if cells.is_empty() {
        anyhow::bail!("{}", needs_python(which, name, dir));
    }
    // The default: CUDA first, then the newest torch.
    let torch_key = |c: &crate::matrix::Cell| -> Vec<u64> {
        c.torch_version.split('.').map(|p| p.parse().unwrap_or(0)).collect()
    };
    cells.sort_by(|a, b| {
        (a.backend != Backend::Cuda).cmp(&(b.backend != Backend::Cuda)).then(torch_key(b).cmp(&torch_key(a)))
    });
    // A cell whose torch wheel (and CUDA wheels) nix/torch-wheels.json pins with a hash.
    let is_pinned = |c: &crate::matrix::Cell| {
        let cuda = (c.backend == Backend::Cuda).then_some(c.backend_version.as_deref()).flatten();
        crate::toolchain::pins::pins()
            .cell(&c.torch_version, cuda, &c.system)
            .is_ok_and(|p| p.torch.resolved().is_ok())
    };
    let cell = match variant {
        Some(v) => {
            let mut names: Vec<&str> =
                cells.iter().filter(|c| is_pinned(c)).map(|c| c.name.as_str()).collect();
            names.sort_unstable();
            match cells.iter().find(|c| c.name == v) {
                Some(c) if is_pinned(c) => c.clone(),
                Some(_) => anyhow::bail!(
                    "`{}` is a cell of `{name}` whose torch wheel has no hash pinned here (nix/torch-wheels.json), so {which} cannot provision it; pick a pinned one ({}), or pass --python with an environment that has that torch",
                    v.escape_debug(),
                    names.join(", ")
                ),
                None => {
                    let message = format!(
                        "`{}` is not a pinned cell of `{name}` on this system; these are: {}",
                        v.escape_debug(),
                        names.join(", "),
                    );
                    return Err(bundle::no_such_variant(message, &[v], &names));
                }
            }
        }
        // The first whose torch wheel is pinned (else the first, which then says what to pin).
        None => cells.iter().find(|c| is_pinned(c)).unwrap_or(&cells[0]).clone(),
    };
    let host = HostToolchain::new("python3");
    let plan =
        bundle::Plan::new(config, kernel_cells, &host, &pinned, std::slice::from_ref(&cell.name), &|_| false);
    let Some(native) = plan.variants.into_iter().filter_map(|v| v.cell).find(|c| c.variant == cell.name)
    else {
        let why = plan
            .skipped
            .iter()
            .find(|s| s.variant.as_deref() == Some(&cell.name))
            .map(|s| s.reason.clone())
            .unwrap_or_else(|| "it was not planned".into());
        anyhow::bail!("the pinned toolchain of `{}` cannot be had: {why}", cell.name);
    };
    let torch = native.framework.torch().cloned().context("a pinned cell is a torch cell")?;
    let (python, of_pins) = pins_python()?;
    let test_env = if test {
        // A missing variant is said before the environment (gigabytes) is made.
        test_variant(dir, &format!("--variant {}", cell.name), &torch, std::slice::from_ref(&native))?;
        let cuda = (cell.backend == Backend::Cuda).then_some(cell.backend_version.as_deref()).flatten();
        let pins = crate::toolchain::pins::pins();
        let cell_pins =
            pins.cell(&cell.torch_version, cuda, &cell.system).map_err(|e| anyhow::anyhow!("{e}"))?;
        let store = pinned.store().context("a pinned cell's toolchain cache")?;
        Some(crate::toolchain::test_env::provision(store, &cell_pins, cuda, &python, &pins.python, report)?)
    } else {
        if !of_pins {
            let v = &crate::toolchain::pins::pins().python;
            report.note(&format!(
                "`python{v}` does not run here: the shell's python is `{python}`, which compiles against the pinned torch's headers as a native build does but cannot import that torch (built for CPython {v}); install CPython {v} for that, use testshell (which makes an environment with torch for `{python}`), or pass --python PATH"
            ));
        }
        None
    };
    let links = ShellDir::new("kernel-builder-devshell-")?;
    for link in ["python", "python3"] {
        std::os::unix::fs::symlink(&python, links.path().join(link))
            .with_context(|| format!("cannot link `{python}` into the temporary directory"))?;
    }
    // The shell runs in its own environment over the shared, read-only one, in the temporary
    // directory: nothing its tests write reaches another kernel's shell.
    let test_env = match test_env {
        Some(env) => {
            let into =
                Utf8Path::from_path(links.path()).context("the temporary directory's path is not UTF-8")?;
            Some(crate::toolchain::test_env::overlay(&env, into)?)
        }
        None => None,
    };
    let tree = torch.torch_dir.parent().map(Utf8Path::to_owned).context("torch's directory has no parent")?;
    // testshell's environment has its own torch: the unpacked tree must not shadow it.
    let (python_bin, python_path) = match &test_env {
        Some(env) => {
            (env.python.parent().map(Utf8Path::to_owned).context("the environment has no bin")?, Vec::new())
        }
        None => {
            let mut python_path = vec![tree.clone()];
            if torch.purelib != tree {
                python_path.push(torch.purelib.clone());
            }
            let links_dir = Utf8Path::from_path(links.path())
                .context("the temporary directory's path is not UTF-8")?
                .to_owned();
            (links_dir, python_path)
        }
    };
    let pinned = Pinned {
        python_path,
        torch_root: torch.torch_dir.clone(),
        python,
        test_env,
        _links: links,
        _toolchains: pinned,
    };
    Ok(Shell { python_bin, torch, cells: vec![*native], skipped: Vec::new(), pinned: Some(pinned) })
}

/// The CPython the pinned torch wheels are built for (`python3.13`), from PATH: the path of
/// the interpreter it runs (a pyenv shim resolves to the real one). Without it, `python3`, as a
/// native pinned build uses (the module is abi3: its headers serve the compile), with a note
/// that this python cannot import the pinned torch.
fn pins_python() -> anyhow::Result<(Utf8PathBuf, bool)> {
    let version = &crate::toolchain::pins::pins().python;
    let program = format!("python{version}");
    let executable = |program: &str| {
        crate::process::Cmd::new(program)
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .ok()
            .filter(|o| o.success())
            .map(|o| Utf8PathBuf::from(o.stdout.trim().to_owned()))
    };
    if let Some(p) = executable(&program) {
        return Ok((p, true));
    }
    match executable("python3") {
        Some(p) => Ok((p, false)),
        None => anyhow::bail!(
            "the pinned torch wheels are for CPython {version}, and neither `{program}` nor `python3` runs here; install CPython {version} (or put it on PATH), or pass --python PATH"
        ),
    }
}

/// The variant directory of `dir/build` that this torch loads: a compiled cell's (CUDA first),
/// else the noarch one of torch's device (CUDA, XPU) or CPU, else `torch-universal`; `how`
/// (`--python PY`, `--variant V`) goes in the build command the error names.
fn test_variant(
    dir: &Utf8Path,
    how: &str,
    facts: &TorchFacts,
    cells: &[CompiledCell],
) -> anyhow::Result<String> {
    let build = dir.join("build");
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
        "`{build}` has no variant for torch {} (looked for {}): build it first (`kernel-builder build-and-copy {} --nix never {how}`)",
        facts.version,
        wanted.join(", "),
        dir
    )
}
