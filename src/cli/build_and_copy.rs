//! `kernel-builder build-and-copy [DIR] [--variant V]... [--nix auto|always|never] [--builders SPEC] [-- NIX_ARGS...]`
//! (alias `build`), and the hidden `kernel-builder assemble`, the builder a Nix cell runs.

use std::process::ExitCode;

use camino::Utf8PathBuf;

use crate::assemble::assemble_one;
use crate::bundle;
use crate::config::Backend;
use crate::source::provenance::KernelRevision;
use crate::toolchain::host::HostToolchain;

/// How `build-and-copy` builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum NixMode {
    /// Through Nix when `nix` is on PATH, DIR has a `flake.nix` and the cells' orchestrator
    /// needs no download (KERNEL_BUILDER_ORCHESTRATOR, a static kernel-builder, or one
    /// installed through its flake); natively otherwise, saying why.
    Auto,
    /// Always through Nix (`nix build` of the kernel's flake); fails without Nix.
    Always,
    /// Never through Nix: build the variants here with this binary (compiled ones with the
    /// host's toolchain).
    Never,
}

/// Where compiled variants get their torch (shared by `build-and-copy`, `verify`,
/// `build-and-upload`).
#[derive(Debug, Clone, clap::Args)]
pub struct ToolchainArgs {
    /// The Python interpreter whose torch compiled variants are built against (its tvm_ffi for
    /// a `[tvm-ffi]` kernel); its torch version, CUDA build and C++ ABI (tvm-ffi's major.minor
    /// and nvcc's CUDA) name the variant. CMake and Ninja are looked up beside it first, then
    /// on PATH. Without it, a `[torch]` kernel's CPU and CUDA bundle cells are built from
    /// pinned wheels instead, and other compiled cells with `python3`. (`verify` rebuilds a
    /// variant built from pinned wheels from them, with or without it.)
    #[arg(long, value_name = "PATH")]
    pub python: Option<Utf8PathBuf>,
    /// Record in metadata.json that the tools (--python, CXX, CUDACXX, PATH) come from the
    /// declared package set NAME rather than the host (`build.package-set`, `native: false`).
    /// A Nix cell passes its package set's name; pass the same name and tools to a native
    /// build to get the cell's bytes.
    #[arg(long, value_name = "NAME", value_parser = package_set_name)]
    pub package_set: Option<String>,
    /// The package set is hermetic (pinned inputs only); recorded as `build.hermetic`.
    #[arg(long, requires = "package_set")]
    pub hermetic: bool,
    /// Hold every compiled variant to this manylinux policy (`2_28`, `manylinux_2_28`): a
    /// shared object that needs a newer glibc/libstdc++ symbol fails the build, naming the
    /// library and the symbol. Without it the policy met is recorded in metadata.json
    /// (`build.manylinux`) and what keeps a variant from manylinux_2_28 is a warning.
    #[arg(long, value_name = "POLICY", value_parser = parse_manylinux)]
    pub manylinux: Option<String>,
    /// Compile CUDA kernels for these capabilities only (comma-separated: `9.0` selects 9.0
    /// and 9.0a, `9.0a` that one only), for an edit-compile loop or a CI check that takes
    /// minutes. The variant's metadata.json records it (`build.capabilities-only`) and
    /// `upload` / `build-and-upload` refuse it; a kernel that builds none of them is an error.
    #[arg(
        long,
        value_name = "CAPS",
        value_delimiter = ',',
        env = "KERNEL_BUILDER_CUDA_CAPABILITIES",
        value_parser = cuda_capability_arg
    )]
    pub cuda_capabilities: Vec<String>,
}

/// A manylinux policy name of the embedded table, normalised (`2_28` → `manylinux_2_28`);
/// the error lists the known names.
fn parse_manylinux(s: &str) -> anyhow::Result<String> {
    crate::abi::policy::PolicyTable::embedded().find(s).map(|p| p.name.clone())
}

/// How the toolchain cache gets the pinned wheels (`build-and-copy`, `build-and-upload`,
/// `verify`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct FetchArgs {
    /// Cells built from pinned wheels: never download a wheel; use the toolchain cache and
    /// --find-links directories only.
    #[arg(long)]
    pub offline: bool,
    /// Cells built from pinned wheels: look for the wheels (by file name) in DIR first, a
    /// wheelhouse made elsewhere (repeatable). Each is checked against its pinned sha256.
    #[arg(long = "find-links", value_name = "DIR")]
    pub find_links: Vec<Utf8PathBuf>,
}

impl ToolchainArgs {
    /// The host toolchain these arguments describe.
    pub fn host(&self) -> HostToolchain {
        let python = self.python.clone().unwrap_or_else(|| "python3".into());
        self.apply(HostToolchain::new(python))
    }

    /// What these arguments ask of the toolchains ([`bundle::choose_toolchains`]): `--python`,
    /// and how the toolchain cache fetches (`--offline`, `--find-links`, a progress bar).
    pub fn request(
        &self,
        fetch: &FetchArgs,
        progress: bool,
        pins_beside_python: bool,
    ) -> bundle::ToolchainRequest {
        bundle::ToolchainRequest {
            python: self.python.is_some(),
            pins_beside_python,
            fetch: crate::toolchain::store::FetchOptions {
                offline: fetch.offline,
                find_links: fetch.find_links.clone(),
                progress,
            },
        }
    }

    /// `host` with these arguments' manylinux policy, capabilities and package set.
    fn apply(&self, host: HostToolchain) -> HostToolchain {
        let host = host.with_manylinux(self.manylinux.clone()).with_cuda_capabilities(
            self.cuda_capabilities.iter().filter(|c| !c.trim().is_empty()).cloned().collect(),
        );
        match &self.package_set {
            Some(name) => host.with_package_set(name.clone(), self.hermetic),
            None => host,
        }
    }
}

/// Arguments of `build-and-copy`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = "\
Writes DIR/build/<variant>/ for each variant, replacing only the variants built, and \
DIR/build/hashes.json (the NAR hash of each variant). For a noarch kernel (Helion, Triton, \
plain torch) there is one torch-<backend> directory per backend. Natively, a [torch] kernel's \
CPU and CUDA backends build every bundle cell of this system from pinned wheels (torch, the \
CUDA toolkit, CMake, Ninja; downloaded once into the toolchain cache), compiled with the \
system C++ compiler; with --python, and for stable-ABI and [tvm-ffi] kernels, a compiled \
backend builds the one cell the host toolchain gives (torch or tvm_ffi from --python, nvcc \
for CUDA). Both go through a generated CMake project; a cell or backend whose toolchain \
cannot be had is skipped with a note saying what to do. Nothing in DIR/build/ changes when \
the build fails. A native build reuses a cell built before from the same sources with the same \
toolchain from the native cell cache (the line then says `reused`, not `built`; see \
`kernel-builder native-cache`); `--jobs N` builds N cells at once.")]
pub struct Args {
    /// Kernel directory, holding build.toml (default: the current directory).
    pub dir: Option<Utf8PathBuf>,
    /// Build only this variant, e.g. `torch-cuda` (repeatable). Other variants already in
    /// DIR/build/ are left as they are.
    #[arg(long = "variant", value_name = "VARIANT", value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub variants: Vec<String>,
    /// Build through Nix or natively.
    #[arg(long, value_enum, default_value_t = NixMode::Auto)]
    pub nix: NixMode,
    /// Print what was built as JSON on stdout: `{"variants": [{"name", "path", "files",
    /// "id", "reused", "compile-cache", "parallel", "seconds"}], "skipped": [{"backend", "variant",
    /// "kind", "reason"}]}` (`skipped`, absent for a Nix build: the compiled cells not built,
    /// without `variant` when a whole backend is meant, `kind` one of not-native, toolchain,
    /// config, pins, provision; `files`, `id` and `reused` are null
    /// for a Nix build; `compile-cache`: what the compile cache did for a cell compiled here,
    /// `{"compiles", "hits", "misses", "device_steps_hit", "device_steps_missed",
    /// "not_cached", "unreadable"}`, else null; `parallel`: what its compile ran with, `{"ninja-jobs",
    /// "nvcc-threads", "split-compile"}`, else null; `seconds`: where a cell compiled here with
    /// CMake spent its time, `{"prepare", "compile-cache-start", "configure", "compile",
    /// "package"}`, else null). When no cell can be built, the failure document (`"ok": false`)
    /// has the same `skipped` list.
    #[arg(long)]
    pub json: bool,
    /// Spread the cells over Nix remote builders: Nix's machine list (`nix build --builders`),
    /// e.g. `'ssh-ng://me@big x86_64-linux /root/.ssh/id_builder 8'` (machines separated by
    /// `;`, `@FILE` for a machines file). Every machine must answer before the build starts;
    /// afterwards each cell built elsewhere is named with its builder, and a builder that
    /// fails or dies fails the build naming it (DIR/build/ is left as it was). Without it,
    /// nix.conf's `builders` apply as usual; `--builders ''` means no remote builders at all
    /// (nix.conf's are off too). An `@FILE` that cannot be read, or a SPEC that names no
    /// machine (`';;;'`), is an error. Add `-- --max-jobs 0` to build nothing here.
    #[arg(long, value_name = "SPEC")]
    pub builders: Option<String>,
    #[command(flatten)]
    pub toolchain: ToolchainArgs,
    #[command(flatten)]
    pub native: NativeArgs,
    #[command(flatten)]
    pub fetch: FetchArgs,
    /// Extra arguments for `nix build` (after `--`), e.g. `-- -L --max-jobs 4`.
    #[arg(last = true, value_name = "NIX_ARGS")]
    pub nix_args: Vec<String>,
}

/// How a native build runs its cells (shared by `build-and-copy` and `build-and-upload`).
#[derive(Debug, Clone, clap::Args)]
pub struct NativeArgs {
    /// Native builds: build up to N cells at once (0: one per CPU core); each compiled cell's
    /// Ninja then runs the CPU count divided by N jobs (KERNEL_BUILDER_JOBS overrides). The
    /// variants, their bytes and the output are the same for every N.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub jobs: usize,
    /// Native builds: build every cell, neither reusing nor storing cells in the native cell
    /// cache (`native-cells-v1/` in the cache directory: $KERNEL_BUILDER_CACHE_DIR, else
    /// $XDG_CACHE_HOME/kernel-builder, else ~/.cache/kernel-builder; see `kernel-builder
    /// native-cache`).
    #[arg(long)]
    pub no_cache: bool,
}

/// A progress display of a native build on stderr: one bar, cells done of cells planned, and
/// the cells being built. Drawn only when stderr is a terminal.
struct CellBar {
    bar: indicatif::ProgressBar,
    /// `--json`: nothing on stderr but warnings and errors.
    quiet: bool,
    /// The cells being built, each with Ninja's last `[n/m]` when it compiles (shared with the
    /// step sinks of [`bundle::Progress::steps`], which run on the cells' threads).
    running: std::sync::Arc<std::sync::Mutex<Vec<Running>>>,
}

/// A cell being built, with Ninja's last `[n/m]` once it compiles.
type Running = (String, Option<(u64, u64)>);

impl CellBar {
    fn new(quiet: bool) -> CellBar {
        let target = if quiet {
            indicatif::ProgressDrawTarget::hidden()
        } else {
            indicatif::ProgressDrawTarget::stderr()
        };
        let bar = indicatif::ProgressBar::with_draw_target(None, target);
        if let Ok(style) =
            indicatif::ProgressStyle::with_template("{spinner} [{pos}/{len}] {elapsed} {wide_msg}")
        {
            bar.set_style(style);
        }
        CellBar { bar, quiet, running: Default::default() }
    }

    /// Change the running cells with `f`, then show them: `building a [12/40], b`.
    fn update(
        bar: &indicatif::ProgressBar,
        running: &std::sync::Mutex<Vec<Running>>,
        f: impl FnOnce(&mut Vec<Running>),
    ) {
        let mut running = running.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut running);
        let shown: Vec<String> = running
            .iter()
            .map(|(n, step)| match step {
                Some((done, total)) => format!("{n} [{done}/{total}]"),
                None => n.clone(),
            })
            .collect();
        bar.set_message(if shown.is_empty() {
            String::new()
        } else {
            format!("building {}", shown.join(", "))
        });
    }
}

/// The build's lines, each made room for by the bar: on stderr whether or not it is a terminal
/// (a log shows why the build takes long); notes not with `--json`.
impl crate::report::Reporter for CellBar {
    fn warning(&self, text: &str) {
        self.bar.suspend(|| super::report::Terminal.warning(text));
    }
    fn note(&self, text: &str) {
        if !self.quiet {
            self.bar.suspend(|| super::report::Terminal.note(text));
        }
    }
    fn status(&self, text: &str) {
        self.bar.suspend(|| super::report::Terminal.status(text));
    }
}

impl bundle::Progress for CellBar {
    fn planned(&self, names: &[String]) {
        self.bar.set_length(names.len() as u64);
        // The ticker is a thread: none when nothing is drawn.
        if !self.bar.is_hidden() {
            self.bar.enable_steady_tick(std::time::Duration::from_millis(200));
        }
    }

    fn started(&self, name: &str) {
        CellBar::update(&self.bar, &self.running, |r| r.push((name.to_owned(), None)));
    }

    fn finished(&self, name: &str, _outcome: bundle::CellOutcome) {
        self.bar.inc(1);
        CellBar::update(&self.bar, &self.running, |r| r.retain(|(n, _)| n != name));
    }

    /// Only when the bar is drawn (stderr a terminal, no `--json`): a log gets no line per step.
    fn steps(&self, name: &str) -> Option<crate::assemble::progress::StepSink> {
        if self.bar.is_hidden() {
            return None;
        }
        let (bar, running, name) = (self.bar.clone(), std::sync::Arc::clone(&self.running), name.to_owned());
        Some(std::sync::Arc::new(move |done, total| {
            CellBar::update(&bar, &running, |r| {
                if let Some(cell) = r.iter_mut().find(|(n, _)| *n == name) {
                    cell.1 = Some((done, total));
                }
            });
        }))
    }
}

/// Run the native build `b` ([`bundle::native::build`]) with a progress bar on stderr unless
/// `quiet`, and print its warnings and notes to stderr (`build-and-copy`, `build-and-upload`).
pub(crate) fn build_natively(
    b: &bundle::native::NativeBuild<'_>,
    quiet: bool,
) -> anyhow::Result<bundle::native::NativeOutcome> {
    let bar = CellBar::new(quiet || crate::printer::level() == crate::printer::Level::Quiet);
    let outcome = bundle::native::build(b, &bar);
    bar.bar.finish_and_clear();
    let outcome = outcome?;
    for w in &outcome.report.warnings {
        crate::printer::stderr!("warning: {w}");
    }
    for n in &outcome.report.notes {
        crate::printer::stderr!("note: {n}");
    }
    Ok(outcome)
}

impl NativeArgs {
    /// The native build of `kernel` in `dir` these arguments (and `toolchain`'s) ask for.
    pub(crate) fn build<'a>(
        &self,
        dir: &'a camino::Utf8Path,
        kernel: &'a crate::kernel::Kernel,
        variants: &'a [String],
        host: HostToolchain,
        toolchains: bundle::ToolchainRequest,
    ) -> bundle::native::NativeBuild<'a> {
        bundle::native::NativeBuild {
            dir,
            kernel,
            variants,
            host,
            toolchains,
            jobs: self.jobs,
            cell_cache: !self.no_cache,
        }
    }
}

/// Whether the Nix program `program` ([`crate::nixdrv::nix_program`]) is there to run: a path
/// that is an executable file, or a name found so on PATH. (It looked for `nix` on PATH
/// whatever KERNEL_BUILDER_NIX said; a user's trial.)
fn nix_found(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return runnable(std::path::Path::new(program));
    }
    let Some(path) = crate::env::PATH.os() else {
        return false;
    };
    std::env::split_paths(&path).any(|d| runnable(&d.join(program)))
}

/// Run `build-and-copy`.
pub fn run(args: Args) -> super::CmdResult {
    let dir = super::kernel_dir_arg(args.dir)?;
    // The native build's toolchain flags mean nothing to Nix (its cells bring their own): said,
    // not dropped.
    let native_only: Vec<&str> = [
        ("--python", args.toolchain.python.is_some()),
        ("--offline", args.fetch.offline),
        ("--find-links", !args.fetch.find_links.is_empty()),
        ("--manylinux", args.toolchain.manylinux.is_some()),
        ("--package-set", args.toolchain.package_set.is_some()),
    ]
    .into_iter()
    .filter_map(|(flag, given)| given.then_some(flag))
    .collect();
    let use_nix = match args.nix {
        NixMode::Always => true,
        NixMode::Never => false,
        NixMode::Auto => {
            let program = crate::nixdrv::nix_program()?;
            let has_nix = nix_found(&program);
            let has_flake = dir.join("flake.nix").is_file();
            let orchestrator = if has_nix && has_flake {
                crate::nixdrv::offline_orchestrator(&args.nix_args)?
            } else {
                None
            };
            if orchestrator.is_some() && !native_only.is_empty() {
                crate::printer::stderr!(
                    "note: building natively: `{dir}` has a flake.nix, but {} apply to a native build",
                    native_only.join(", ")
                );
                false
            } else if let Some(from) = orchestrator {
                crate::printer::stderr!(
                    "note: building through Nix (`{dir}` has a flake.nix; the cells run {from}); `--nix never` builds natively"
                );
                true
            } else if has_nix && has_flake {
                crate::printer::stderr!(
                    "note: building natively: Nix is on PATH, but this kernel-builder is not statically linked and \
                     KERNEL_BUILDER_ORCHESTRATOR is not set, so Nix would first build the orchestrator from nixpkgs \
                     (a download); `--nix always` does that, `scripts/setup-nix.sh` prints a directory for \
                     KERNEL_BUILDER_ORCHESTRATOR"
                );
                false
            } else {
                let why = if has_nix {
                    format!("`{dir}` has no flake.nix")
                } else {
                    match program {
                        p if p.contains('/') => format!("`{p}` (KERNEL_BUILDER_NIX) is not a program here"),
                        p => format!("`{p}` is not on PATH"),
                    }
                };
                crate::printer::stderr!("note: {why}; building natively (`--nix never`)");
                false
            }
        }
    };
    anyhow::ensure!(
        use_nix || args.builders.is_none(),
        "--builders spreads a build through Nix, but this build does not use Nix (see the note above); add `--nix always`"
    );
    anyhow::ensure!(
        !use_nix || args.toolchain.cuda_capabilities.is_empty(),
        "--cuda-capabilities / {} narrows a native build only, and this build uses Nix; add `--nix never`",
        crate::assemble::compiled::CUDA_CAPABILITIES_VAR
    );
    anyhow::ensure!(
        !use_nix || native_only.is_empty(),
        "{} {} to a native build only, and this build uses Nix (its cells bring their own toolchains); add `--nix never`, or drop {}",
        native_only.join(", "),
        if native_only.len() == 1 { "applies" } else { "apply" },
        if native_only.len() == 1 { "it" } else { "them" }
    );
    if use_nix {
        let mut nix_args = crate::nixdrv::builders::prepare(args.builders.as_deref())?;
        nix_args.extend(args.nix_args.iter().cloned());
        let paths = crate::nixdrv::build_and_copy(&dir, &args.variants, &nix_args, args.json)?;
        if args.json {
            let variants: Vec<serde_json::Value> = paths
                .iter()
                .map(|p| serde_json::json!({"name": p.file_name().unwrap_or_default(), "path": p, "files": null, "id": null, "reused": null, "compile-cache": null, "parallel": null, "seconds": null}))
                .collect();
            println!("{}", serde_json::to_string_pretty(&serde_json::json!({ "variants": variants }))?);
        } else {
            for path in paths {
                println!("built {} (through Nix) -> {path}", path.file_name().unwrap_or_default());
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    // A native build: a bad `KERNEL_BUILDER_JOBS` fails now, not when a cell first compiles.
    crate::assemble::compiled::jobs_from_env()?;
    anyhow::ensure!(
        args.nix_args.is_empty(),
        "arguments after `--` are for `nix build`, but this build does not use Nix: {}",
        args.nix_args.join(" ")
    );

    let loaded = super::load_config_locked(&dir)?;
    let request = args.toolchain.request(&args.fetch, !args.json, false);
    let build = args.native.build(&dir, &loaded, &args.variants, args.toolchain.host(), request);
    let report = build_natively(&build, args.json)?.report;
    print_built(&report, args.json)?;
    Ok(ExitCode::SUCCESS)
}

/// Print the variants a native build wrote on stdout, one [`built_line`] each, or with `json`
/// the `{"variants": [...]}` document; `build-and-copy` and `build-and-upload` both print this.
pub(crate) fn print_built(report: &bundle::BundleReport, json: bool) -> anyhow::Result<()> {
    if json {
        let variants: Vec<serde_json::Value> = report
            .built
            .iter()
            .map(|v| serde_json::json!({"name": v.name, "path": v.path, "files": v.files, "id": v.id, "reused": v.reused, "compile-cache": v.compiles, "parallel": v.parallel.map(|(p, _)| p), "seconds": v.phases}))
            .collect();
        let doc = serde_json::json!({ "variants": variants, "skipped": report.skipped });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    for v in &report.built {
        println!("{}", built_line(v));
    }
    Ok(())
}

/// `built NAME (N files, id ID, 4 jobs × 1 nvcc thread × 4 cicc splits, 3 of 4 compiles from
/// the compile cache) -> PATH`, or `reused …` for a cell that came out of the native cell
/// cache.
pub(crate) fn built_line(v: &bundle::BuiltVariant) -> String {
    let id = v.id.as_deref().map(|i| format!(", id {i}")).unwrap_or_default();
    let verb = if v.reused { "reused" } else { "built" };
    let parallel = v.parallel.map(|(p, cuda)| format!(", {}", p.summary(cuda))).unwrap_or_default();
    let compiles = v.compiles.as_ref().map(|c| format!(", {}", c.summary())).unwrap_or_default();
    format!("{verb} {} ({} files{id}{parallel}{compiles}) -> {}", v.name, v.files, v.path)
}

fn parse_backend(s: &str) -> Result<Backend, String> {
    Backend::from_name(&s.to_ascii_lowercase()).ok_or_else(|| {
        let all: Vec<&str> = Backend::ALL.iter().map(|b| b.as_str()).collect();
        format!("unknown backend `{s}`; expected one of {}", all.join(", "))
    })
}

/// Arguments of the hidden `assemble` command: build one variant from a kernel source (the
/// builder that a Nix cell runs over its filtered source, with no `.git` in reach). A noarch
/// backend gives `torch-<backend>`; a compiled one the cell of the toolchain given
/// (`--python`, and `CXX`/`CUDACXX` in the environment), built in a fresh work directory.
#[derive(Debug, clap::Args)]
pub struct AssembleArgs {
    /// The kernel source (a directory holding build.toml).
    #[arg(long, value_name = "SRC")]
    pub source: Utf8PathBuf,
    /// The backend whose variant to build.
    #[arg(long, value_parser = parse_backend)]
    pub backend: Backend,
    #[command(flatten)]
    pub toolchain: ToolchainArgs,
    /// Output directory; created, and `OUT/torch-<backend>/` written into it.
    #[arg(long, value_name = "OUT")]
    pub out: Utf8PathBuf,
    /// The kernel's git commit, for `provenance.kernel` (40 or 64 hex digits).
    #[arg(long, value_name = "SHA")]
    pub kernel_commit: Option<String>,
    /// The kernel's work tree differed from `--kernel-commit`.
    #[arg(long, requires = "kernel_commit")]
    pub kernel_dirty: bool,
    /// The variant the caller expects (a Nix cell's name): fail, naming both, when the
    /// toolchain given builds another one (e.g. a torch wheel of the wrong version).
    #[arg(long, value_name = "VARIANT")]
    pub expect_variant: Option<String>,
    /// The build layout (`files` or `zip`), instead of the kernel's own: how the tests build
    /// zip-layout trees while build.toml cannot say it yet.
    #[arg(long, value_name = "LAYOUT", value_parser = crate::assemble::build_layout::parse_layout)]
    pub build_layout: Option<crate::assemble::BuildLayout>,
    /// The cell's pinned torch wheel (a Nix cell's fixed-output download): torch's version,
    /// CUDA build and C++ ABI are read from it, never by importing torch; `--python` then
    /// only supplies `Python.h`, and CMake and Ninja are taken from PATH.
    #[arg(long, value_name = "WHEEL", requires = "torch_tree")]
    pub torch_wheel: Option<Utf8PathBuf>,
    /// That wheel unpacked (`kernel-builder nix-support unpack-wheels`).
    #[arg(long, value_name = "DIR", requires = "torch_wheel")]
    pub torch_tree: Option<Utf8PathBuf>,
    /// The cell's pinned CUDA toolkit wheels unpacked together (CUDA cells): nvcc, headers and
    /// the runtime come from there.
    #[arg(long, value_name = "DIR", requires = "torch_wheel")]
    pub cuda_tree: Option<Utf8PathBuf>,
}

impl AssembleArgs {
    /// The toolchain to build with: the pinned wheels given (`--torch-wheel`), else the
    /// interpreter's torch (`--python`).
    fn host(&self) -> anyhow::Result<HostToolchain> {
        let (Some(wheel), Some(tree)) = (&self.torch_wheel, &self.torch_tree) else {
            return Ok(self.toolchain.host());
        };
        let on_path = |name: &str| {
            crate::toolchain::host::find_program(name, &[])
                .ok_or_else(|| anyhow::anyhow!("no `{name}` on PATH; the package set gives CMake and Ninja"))
        };
        let unpacked = crate::toolchain::provision::Unpacked {
            torch_wheel: wheel.clone(),
            torch_tree: tree.clone(),
            toolkit_tree: self.cuda_tree.clone(),
            cmake: on_path("cmake")?,
            ninja: on_path("ninja")?,
        };
        let python = self.toolchain.python.clone().unwrap_or_else(|| "python3".into());
        let host = crate::toolchain::provision::from_unpacked(&unpacked, python.as_str())
            .map_err(|e| anyhow::anyhow!("the pinned toolchain: {e:#}"))?;
        Ok(self.toolchain.apply(host))
    }
}

/// Run the hidden `assemble` command.
pub fn run_assemble(args: AssembleArgs) -> super::CmdResult {
    crate::assemble::compiled::jobs_from_env()?;
    let kernel = match &args.kernel_commit {
        Some(c) => Some(KernelRevision::new(c, args.kernel_dirty)?),
        None => None,
    };
    let loaded = super::load_config_locked(&args.source)?;
    let written = assemble_one(
        &args.source,
        &loaded.config,
        &loaded.cells,
        args.backend,
        &args.out,
        kernel,
        &args.host()?,
        args.expect_variant.as_deref(),
        args.build_layout,
        &mut |w| crate::printer::stderr!("warning: {w}"),
    )?;
    println!("{written}");
    Ok(ExitCode::SUCCESS)
}

/// `--package-set NAME`: a name, recorded in metadata.json and compared by `verify`, so not
/// blank and without white space or control characters (a user's trial rebuilt under `''`).
fn package_set_name(s: &str) -> Result<String, String> {
    if s.is_empty() || s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(
            "a package set's name is one word, without spaces (the name a Nix cell records, e.g. `nixpkgs`)"
                .into(),
        );
    }
    Ok(s.to_owned())
}

/// One entry of `--cuda-capabilities` / `KERNEL_BUILDER_CUDA_CAPABILITIES`, checked when it is
/// given: a kernel with no CUDA cell here never reached the check, so `abc` passed silently (a
/// user's trial). A blank entry stands for none (an empty variable narrows nothing).
fn cuda_capability_arg(s: &str) -> Result<String, String> {
    if !s.trim().is_empty() {
        // Escaped, on one line: clap prints the reason as it is, and the value may hold a line
        // break or a terminal sequence.
        crate::config::CudaCapability::parse(s.trim())
            .map_err(|e| crate::printer::escape_controls(&format!("{e:#}")).replace('\n', "\\n"))?;
    }
    Ok(s.to_owned())
}
