//! Compiled variants: a backend that a `[kernel.*]` compiles code for (in a `[torch]` or
//! `[tvm-ffi]` kernel), built natively for the one cell the toolchain gives.
//!
//! The pieces, along the data flow: the toolchain found ([`crate::toolchain::host`]: torch or
//! tvm_ffi from `--python`, CMake, Ninja, the C++ compiler, nvcc) → the cell it builds
//! ([`plan`]: the variant name, the kernels and CUDA capabilities, or why none) → the CMake
//! project driven with the cell's facts (`cmake`) → the variant directory ([`build_cell`],
//! this module).
//!
//! # How
//!
//! [`build_cell`] (one code path for `build-and-copy --nix never`, `verify` and the hidden
//! `assemble` a Nix cell runs):
//!
//! 1. computes every fact the compile depends on ([`cmake::CellFacts`]: op namespace, kernels in the
//!    cell, exact `-gencode` pairs per CUDA kernel from the matrix data, defines, include
//!    directories, libraries, prefix maps, `-fno-gnu-unique`, the C++ standard torch's
//!    headers require) before anything is compiled, so a capability list that
//!    this CUDA cannot build fails first;
//! 2. mirrors the source set and the generated project ([`crate::codegen`]) into a work
//!    directory (`src/`), writing only files whose bytes changed, so an unchanged rebuild
//!    compiles nothing;
//! 3. runs CMake (Ninja generator) with the facts as cache variables (`build/kernel-builder-cell.cmake`,
//!    read with `cmake -C`), then `ninja`;
//! 4. writes the variant directory: the package files, `_ops.py` importing the module,
//!    `_<pkg>_<backend>_<uid>.abi3.so` (`.so` for tvm-ffi, whose `_ops.py` opens it with
//!    `tvm_ffi.load_module`), and `metadata.json` (with `build`: native, not
//!    hermetic, and the toolchain's versions); in the zip layout the package files and
//!    `_ops.py` go into `<id>.zip` ([`super::build_layout`]) and the module stays beside it;
//!    `symbols.json` ([`super::symbols`]) is written first, by importing the package, or from its
//!    sources when the cell's Python cannot import it (pinned wheels);
//! 5. checks every shared object of the variant ([`check_abi`]: abi3, the torch stable ABI
//!    of stable-ABI cells, manylinux) before `metadata.json` records the policy met.
//!
//! CMake and Ninja run in a process group of their own (an interruption stops them and the
//! compilers they started, [`crate::interrupt`]) with `TMPDIR` set to `<work>/tmp` (or, where
//! that path has a space or comma nvcc cannot take, a fresh directory in `$TMPDIR`), emptied
//! before and removed after each build and on interruption, so nvcc's `tmpxft_*` files never
//! stay behind; where it is changes no output and no cache key.
//!
//! Ninja's `-j`, nvcc's `--threads` and cicc's `-split-compile` come from the cores and memory,
//! the cells built at once (`build-and-copy --jobs N`) and the cell's sources and targets
//! ([`parallel`]); `KERNEL_BUILDER_JOBS` or `KERNEL_BUILDER_NVCC_THREADS` set one, and the
//! others fill the slots left; `KERNEL_BUILDER_NVCC_SPLIT_COMPILE` sets the split. The build
//! line names what a cell ran with.
//! The torch probe (a Python process importing torch, seconds) is cached in
//! `<cache>/probe-v1/` ([`crate::toolchain::host`]), valid while the interpreter and torch's `version.py` keep their size and
//! modification time. The work directory of `build-and-copy` is kept between runs, in the user's cache
//! (`$KERNEL_BUILDER_CACHE_DIR`, else `$XDG_CACHE_HOME/kernel-builder`, else
//! `~/.cache/kernel-builder`; `cmake-v1/<kernel dir hash>/<variant>`); `verify` and `assemble`
//! use a fresh one. Source and build directories are mapped away (`-ffile-prefix-map`), there
//! are no timestamps, and sources are listed in `build.toml` order, so a fresh build is byte
//! for byte the cached one.

pub mod cargo;
mod cmake;
pub mod compile_cache;
pub mod parallel;
pub mod plan;
mod symptoms;

use std::collections::BTreeMap;

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};
use sha2::Digest as _;

use cmake::{cache_file, compilers_tmp_dir, run_step, sync_copy, sync_file, ConfigureRecord, TmpDir};
pub use cmake::{
    cell_facts, jobs_from_env, module_suffix, nvcc_split_from_env, nvcc_threads_from_env, CompilesRun,
    WorkDir, BUILD_ENV,
};
pub use plan::{
    plan_cell, CargoTools, CompiledCell, PlannedVariant, SkipKind, SkippedBackend, CUDA_CAPABILITIES_VAR,
};

use super::build_layout::{check_layout, zip_package, BuildLayout};
use super::metadata::{BackendInfo, BuildInfo, Metadata, Provenance};
use super::write::{create_dir, create_dirs_below, write_file};
use crate::codegen::{self, Layout};
use crate::config::{Backend, BuildConfig, Framework, Version};
use crate::fsutil::cache_root;
use crate::matrix::CellKind;
use crate::source::provenance::{builder_provenance, BuildIds};
use crate::source::{copy_source, Role, SourceSet, Warning};
use crate::toolchain::host::CellFramework;

/// What [`build_cell`] gave besides the variant directory.
#[derive(Debug, Default)]
pub struct CellBuilt {
    pub warnings: Vec<Warning>,
    /// What the compile cache did for this cell (`None`: it was not used).
    pub compiles: Option<compile_cache::CompileStats>,
    /// Ninja's jobs, nvcc's threads and cicc's split the compile ran with, and whether the
    /// cell is a CUDA one (its build line names the last two).
    pub parallel: Option<(parallel::Plan, bool)>,
    /// Where a CMake cell's time went (`None`: a noarch or cargo cell).
    pub phases: Option<Phases>,
}

/// Where a compiled cell's build time went, in seconds (to the hundredth): what a warm build
/// (every compile from the compile cache) still pays is what the other phases take.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Phases {
    /// The cell's facts (torch's flags and paths, the toolkit's) and the kernel's source mirror.
    pub prepare: f64,
    /// The compile cache's server start (0 without the compile cache).
    pub compile_cache_start: f64,
    /// CMake's configure (close to 0 when the cell's facts were unchanged and it was skipped).
    pub configure: f64,
    /// Ninja: every compile, and the link.
    pub compile: f64,
    /// The variant written: the module, its ABI checks, the Python package, metadata.
    pub package: f64,
}

/// A phase's seconds since `since`, to the hundredth; the clock restarts for the next one.
fn lap(since: &mut std::time::Instant) -> f64 {
    let now = std::time::Instant::now();
    let seconds = (now - *since).as_secs_f64();
    *since = now;
    (seconds * 100.0).round() / 100.0
}

/// Build the compiled variant `cell` of the kernel (`source`, `config`) into
/// `out_variant_dir` (which must not exist; its parent must). Returns warnings and what the
/// compile cache did.
///
/// Errors: a fact that cannot be computed (no CUDA runtime library, a dependency without a
/// checkout), a generated path that the source set also has, CMake or Ninja failing (the
/// error shows the command and the tail of its output). On error `out_variant_dir` may be
/// partly written; the caller writes into a temporary directory.
pub fn build_cell(
    source: &SourceSet,
    config: &BuildConfig,
    cell: &CompiledCell,
    ids: &BuildIds,
    out_variant_dir: &Utf8Path,
    work: &WorkDir,
    layout: BuildLayout,
) -> anyhow::Result<CellBuilt> {
    // Before anything is configured: a bad value would reach Ninja only after CMake ran.
    let heuristics = source
        .package_files()
        .any(|f| matches!(&f.role, Role::Package { heuristic: Some(h), .. } if h.backend == cell.backend));
    check_layout(config, layout, heuristics)?;
    if let Some(tools) = &cell.cargo {
        return cargo::build(source, config, cell, tools, ids, out_variant_dir, work, layout);
    }
    let mut clock = std::time::Instant::now();
    // Read before anything runs: a bad value fails the build at once.
    let set = ParallelSet {
        jobs: jobs_from_env()?,
        nvcc_threads: nvcc_threads_from_env()?,
        nvcc_split: nvcc_split_from_env()?,
    };
    let mut warnings: Vec<Warning> = Vec::new();
    if let Some(w) = &cell.outside_bundle {
        warnings.push(Warning { path: None, message: w.clone() });
    }
    let CellWorkDir { dir: work_dir, shared_src, _fresh } = cell_work_dir(work, config, cell)?;
    // No orphan of a killed build shares the work directory.
    let _work_lock = crate::assemble::workdirs::lock_work_dir(&work_dir)?;
    // nvcc splits every include path at commas, quoted or not, so under such a path a CUDA
    // compile cannot see the cell's own include directories (the kernel's, a stable-ABI include
    // root, tvm-ffi's binding directory) and fails on a missing header that is there.
    if cell.backend == Backend::Cuda && work_dir.as_str().contains(',') {
        anyhow::bail!(
            "the work directory `{work_dir}` of the CUDA cell `{}` has a comma, and nvcc splits include \
             paths at commas (quoted or not), so the compile would not find the kernel's own headers; \
             set KERNEL_BUILDER_CACHE_DIR (or TMPDIR, for `verify`) to a directory whose path has no comma",
            cell.variant
        );
    }
    let src_dir = shared_src.clone().unwrap_or_else(|| work_dir.join("src"));
    if shared_src.is_some() {
        // The mirror an earlier kernel-builder kept per cell.
        let _ = std::fs::remove_dir_all(work_dir.join("src"));
    }
    let build_dir = work_dir.join("build");
    // The compilers' temporary files (nvcc's `tmpxft_*`, megabytes per CUDA source): in the
    // cell's work directory where nvcc can take its path, removed when the build ends (any
    // way) or is interrupted. Not a fact of the cell: the outputs do not depend on where it is.
    let (tmp_dir, outside) = compilers_tmp_dir(&work_dir)?;
    let _tmp = TmpDir::create(&tmp_dir, outside || matches!(work, WorkDir::Cache { .. }))?;
    let compiles = match work {
        WorkDir::Cache { compile_cache: Some(c), .. } if c.dist.is_some() && cell.package_set.is_none() => {
            CompilesRun::Elsewhere
        }
        _ => CompilesRun::Here,
    };
    let facts = cell_facts(config, cell, &ids.uid, &src_dir, &build_dir, compiles)?;
    warnings.extend(facts.warnings.iter().map(|w| Warning { path: None, message: w.clone() }));

    // The project: the source set plus the generated files.
    let project = codegen::generate(config, source.root(), &Layout::default())?;
    for f in source.files() {
        if project.file(f.rel.as_str()).is_some() {
            warnings.push(Warning {
                path: Some(f.rel.clone()),
                message:
                    "has the path of a generated file; the generated one is used (remove it from the kernel)"
                        .into(),
            });
        }
    }
    let _sources = match &shared_src {
        Some(dir) => Some(shared_sources(dir, &ids.uid, || mirror(source, &project, dir))?),
        None => {
            mirror(source, &project, &src_dir)?;
            None
        }
    };

    let prepare = lap(&mut clock);
    // Configure when the facts changed or nothing is configured yet ([`configure`]); then
    // build. The compile cache: a cell built in the cache's work directory (build-and-copy), never in
    // a Nix sandbox (hermetic) nor for `verify` (a fresh compile is what it checks).
    let compile_cache = match work {
        WorkDir::Cache { compile_cache: Some(c), .. } if cell.package_set.is_none() => {
            match compile_cache::Server::start(c, &facts.basedirs) {
                Ok(s) => Some(s),
                Err(e) => {
                    warnings.push(Warning {
                        path: None,
                        message: format!("`{}` was compiled without the compile cache: {e:#}", cell.variant),
                    });
                    None
                }
            }
        }
        _ => None,
    };
    let compile_cache_start = lap(&mut clock);
    let mut cell_text = cache_file(&facts);
    let launcher = match &compile_cache {
        Some(s) => Some(compile_cache::launcher(s.program(), &src_dir, &build_dir)?),
        None => None,
    };
    cell_text.push_str(&compile_cache::launcher_lines(launcher.as_deref()));
    configure(cell, &facts, &cell_text, &src_dir, &build_dir, &tmp_dir)?;
    let configure_seconds = lap(&mut clock);
    let plan = parallel_plan(source, config, cell, &facts, work, &set, compile_cache.as_ref(), &mut warnings);
    let cuda = cell.backend == Backend::Cuda;
    let mut compile_env = facts.env.clone();
    if let Some(s) = &compile_cache {
        compile_env.extend(s.client_env().iter().cloned());
    }
    if cuda {
        let user = crate::env::NVCC_APPEND_FLAGS.get();
        if let Some(flags) =
            super::parity::nvcc_append_flags(user.as_deref(), plan.nvcc_threads, plan.split_compile)
        {
            compile_env.push(("NVCC_APPEND_FLAGS".to_owned(), flags));
        }
    }
    compile(source, cell, &src_dir, (&build_dir, &tmp_dir), plan.ninja_jobs, &compile_env)?;
    let compile_seconds = lap(&mut clock);
    let compiles = match compile_cache.as_ref().map(compile_cache::Server::stats) {
        Some(Ok(s)) => Some(s),
        Some(Err(e)) => {
            warnings.push(Warning {
                path: None,
                message: format!(
                    "the compile cache's statistics of `{}` could not be read: {e:#}",
                    cell.variant
                ),
            });
            None
        }
        None => None,
    };
    drop(compile_cache);
    let built = build_dir.join(format!("{}{}", facts.ops_name, module_suffix(cell.kind)));
    warnings.extend(write_variant(
        source,
        config,
        cell,
        ids,
        out_variant_dir,
        layout,
        &facts.ops_name,
        &built,
        cell_toolchain(cell),
    )?);
    let phases = Phases {
        prepare,
        compile_cache_start,
        configure: configure_seconds,
        compile: compile_seconds,
        package: lap(&mut clock),
    };
    Ok(CellBuilt { warnings, compiles, parallel: Some((plan, cuda)), phases: Some(phases) })
}

/// The tool versions a cell's metadata records (`build.toolchain`).
fn cell_toolchain(cell: &CompiledCell) -> BTreeMap<String, String> {
    let mut toolchain = BTreeMap::new();
    toolchain.insert("cxx".to_owned(), cell.cxx.version.clone());
    toolchain.insert("cmake".to_owned(), cell.cmake.version.clone());
    toolchain.insert("ninja".to_owned(), cell.ninja.version.clone());
    if let Some(n) = &cell.nvcc {
        toolchain.insert("nvcc".to_owned(), n.version.clone());
    }
    toolchain
}

/// Run Ninja over the configured `build_dir` with `jobs` jobs and the compile environment
/// `env`; the compilers keep their temporary files in `tmp_dir`.
///
/// Errors: the compile failing: its message names the kernel's own files (the compiler saw
/// the mirror in `src_dir`), and its hints say what build.toml can fix first (a flag nvcc asks
/// for, a header the kernel has but the build does not see, a header outside the stable ABI),
/// then what the machine can ([`run_step`]'s: a full disk, a compiler killed).
fn compile(
    source: &SourceSet,
    cell: &CompiledCell,
    src_dir: &Utf8Path,
    (build_dir, tmp_dir): (&Utf8Path, &Utf8Path),
    jobs: usize,
    env: &[(String, String)],
) -> anyhow::Result<()> {
    let args = vec!["-C".to_owned(), build_dir.to_string(), "-j".to_owned(), jobs.to_string()];
    let steps = super::progress::current_steps();
    run_step("the compile (ninja)", &cell.ninja.path, &args, env, (build_dir, tmp_dir), steps).map_err(|e| {
        let root = source.root().canonicalize_utf8().unwrap_or_else(|_| source.root().to_owned());
        let text = e.to_string().replace(&format!("{src_dir}/"), &format!("{root}/"));
        let listed: Vec<String> = source.files().iter().map(|f| f.rel.to_string()).collect();
        let kernel_hints = match super::stable_abi::compile_hint(&text) {
            Some(h) if cell.kind == CellKind::StableAbi => vec![h],
            _ => super::parity::compile_hints(
                &text,
                &listed,
                &super::parity::kernel_files(source.root(), 20_000),
            ),
        };
        let hints = kernel_hints.into_iter().chain(crate::error::hints(&e));
        anyhow::Error::from(crate::error::Error::new(crate::error::Kind::Failed, text).with_hints(hints))
    })
}

/// Where a cell is built ([`cell_work_dir`]).
struct CellWorkDir {
    dir: Utf8PathBuf,
    /// The source mirror shared by the cells of the kernel's name, for cells built in the cache.
    shared_src: Option<Utf8PathBuf>,
    /// A fresh work directory: removed when this is dropped, or on interruption.
    _fresh: Option<(crate::interrupt::Registered, tempfile::TempDir)>,
}

/// The work directory of `cell`: in the cache (`cmake-v1/<kernel>/<variant>`, kept for
/// incremental builds) or fresh (a temporary directory, as `verify` uses).
///
/// Errors: the kernel directory or the cache root cannot be resolved, a link leads out of the
/// cache, or the directory cannot be created.
fn cell_work_dir(work: &WorkDir, config: &BuildConfig, cell: &CompiledCell) -> anyhow::Result<CellWorkDir> {
    // Cells built in the cache compile from one mirror of the kernel's sources per kernel name
    // (`sources-v1/<name>`, [`shared_sources`]), whichever checkout they come from: nvcc hands
    // the real path of each source to cudafe++ and cicc, which the compile cache hashes, so
    // only one path per source lets `torch214-cu132` reuse what `torch215-cu132` compiled, and
    // a fresh checkout reuse what another compiled.
    Ok(match work {
        WorkDir::Cache { kernel_dir, .. } => {
            let (d, kernel_work, canon) = kernel_work_dir(kernel_dir, "cmake-v1", &cell.variant)?;
            // So that `native-cache` can name the kernel a work directory belongs to.
            super::workdirs::record_kernel(&kernel_work, &canon)?;
            let sources = crate::fsutil::inside(
                &cache_root()?,
                &Utf8PathBuf::from(SOURCES_DIR).join(&config.general.name),
            )?;
            CellWorkDir { dir: d, shared_src: Some(sources), _fresh: None }
        }
        WorkDir::Fresh => {
            let (p, fresh) = fresh_work_dir("kernel-builder-cell-")?;
            CellWorkDir { dir: p, shared_src: None, _fresh: Some(fresh) }
        }
    })
}

/// The work directory of `variant` of the kernel in `kernel_dir` under `dir_name` in the cache
/// root (`<dir_name>/<16 hex digits of the kernel's resolved path>/<variant>`), created; with
/// the kernel's directory there and the kernel's resolved path.
///
/// Errors: the kernel directory cannot be resolved, a link leads out of the cache root, or the
/// directory cannot be created.
pub(super) fn kernel_work_dir(
    kernel_dir: &Utf8Path,
    dir_name: &str,
    variant: &str,
) -> anyhow::Result<(Utf8PathBuf, Utf8PathBuf, Utf8PathBuf)> {
    let canon = kernel_dir.canonicalize_utf8().with_context(|| format!("cannot resolve `{kernel_dir}`"))?;
    let key: String =
        sha2::Sha256::digest(canon.as_str().as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    let kernel_work = crate::fsutil::inside(&cache_root()?, &Utf8PathBuf::from(dir_name).join(&key[..16]))?;
    let d = crate::fsutil::inside(&kernel_work, Utf8Path::new(variant))?; // no link leads the build out of it
    std::fs::create_dir_all(&d).with_context(|| format!("cannot create the work directory `{d}`"))?;
    Ok((d, kernel_work, canon))
}

/// A fresh work directory in the system's temporary directory, removed when the returned
/// guard is dropped, or before the process exits when it is interrupted while CMake, Ninja or
/// cargo runs in it.
///
/// Errors: it cannot be created, or its path is not UTF-8.
pub(super) fn fresh_work_dir(
    prefix: &str,
) -> anyhow::Result<(Utf8PathBuf, (crate::interrupt::Registered, tempfile::TempDir))> {
    let t = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .context("cannot create a temporary work directory")?;
    let p = Utf8PathBuf::from_path_buf(t.path().to_owned())
        .map_err(|p| anyhow::anyhow!("non-UTF-8 temporary path {}", p.display()))?;
    let registered = crate::interrupt::remove_on_interrupt(&p, crate::interrupt::Removal::All);
    Ok((p, (registered, t)))
}

/// Configure the cell's CMake build directory `build_dir` for `src_dir` with the cache file
/// `cell_text`, unless the last configure that succeeded had the same record. CMake reads the
/// compilers, the generator and the flag variables (CXXFLAGS, …) only at the first configure
/// of a build directory: when one of those differs from that configure's (or none
/// succeeded), the build directory is started afresh.
///
/// Errors: the build directory cannot be made or written, or CMake fails.
fn configure(
    cell: &CompiledCell,
    facts: &cmake::CellFacts,
    cell_text: &str,
    src_dir: &Utf8Path,
    build_dir: &Utf8Path,
    tmp_dir: &Utf8Path,
) -> anyhow::Result<()> {
    let mut record = ConfigureRecord::new(cell, facts, cell_text);
    // CMake refuses a build directory configured for another source directory.
    record.first_configure.insert("source-dir".into(), Some(src_dir.to_string()));
    let configured = build_dir.join("kernel-builder-cell.configured");
    let last =
        std::fs::read(&configured).ok().and_then(|b| serde_json::from_slice::<ConfigureRecord>(&b).ok());
    if last.as_ref().is_none_or(|l| l.first_configure != record.first_configure) && build_dir.exists() {
        std::fs::remove_dir_all(build_dir)
            .with_context(|| format!("cannot remove the stale build directory `{build_dir}`"))?;
    }
    std::fs::create_dir_all(build_dir).with_context(|| format!("cannot create `{build_dir}`"))?;
    if let (CellKind::StableAbi, Some(t)) = (cell.kind, cell.framework.torch()) {
        super::stable_abi::prepare_include_root(build_dir, &t.torch_dir.join("include"))?;
    }
    let cell_file = build_dir.join("kernel-builder-cell.cmake");
    sync_file(&cell_file, cell_text.as_bytes())?;
    if let Some(specs) = &facts.specs {
        sync_file(&build_dir.join(cmake::SPECS_FILE), specs.as_bytes())?;
    }
    // A configure that failed or was interrupted leaves the old build.ninja (for the old
    // facts), which must not be used.
    if last.as_ref() != Some(&record) || !build_dir.join("build.ninja").is_file() {
        let _ = std::fs::remove_file(&configured);
        run_step(
            "CMake configure",
            &cell.cmake.path,
            &[
                "-G".into(),
                "Ninja".into(),
                "-C".into(),
                cell_file.to_string(),
                "-S".into(),
                src_dir.to_string(),
                "-B".into(),
                build_dir.to_string(),
            ],
            &facts.env,
            (build_dir, tmp_dir),
            None,
        )?;
        let text = serde_json::to_vec_pretty(&record).context("cannot serialise the configure record")?;
        sync_file(&configured, &text)?;
    }
    Ok(())
}

/// The numbers of a cell's parallelism that the environment sets (`KERNEL_BUILDER_JOBS`,
/// `KERNEL_BUILDER_NVCC_THREADS`, `KERNEL_BUILDER_NVCC_SPLIT_COMPILE`); the others are chosen.
struct ParallelSet {
    jobs: Option<usize>,
    nvcc_threads: Option<usize>,
    nvcc_split: Option<usize>,
}

/// Ninja's `-j`, nvcc's `--threads` and cicc's split of `cell` ([`parallel`]): from the cores
/// and memory shared by the cells built at once, the cell's sources and targets, and the build
/// servers of distributed compiles; a number set in the environment stays, the others fill the
/// rest. A scheduler of distributed compiles that does not answer is a warning.
#[allow(clippy::too_many_arguments)]
fn parallel_plan(
    source: &SourceSet,
    config: &BuildConfig,
    cell: &CompiledCell,
    facts: &cmake::CellFacts,
    work: &WorkDir,
    set: &ParallelSet,
    compile_cache: Option<&compile_cache::Server>,
    warnings: &mut Vec<Warning>,
) -> parallel::Plan {
    let cells_at_once = match work {
        WorkDir::Cache { cells_at_once, .. } => *cells_at_once,
        WorkDir::Fresh => 1,
    };
    let kinds: Vec<codegen::SourceKind> = config
        .kernels
        .iter()
        .filter(|(n, _)| cell.kernels.contains(n))
        .filter_map(|(_, k)| codegen::expand(source.root(), &k.src).ok())
        .flatten()
        .map(|p| codegen::source_kind(&p))
        .collect();
    let cuda = cell.backend == Backend::Cuda;
    let sources = if cuda {
        kinds.iter().filter(|k| **k == codegen::SourceKind::Cuda).count()
    } else {
        kinds.iter().filter(|k| !matches!(k, codegen::SourceKind::Other | codegen::SourceKind::Metal)).count()
    };
    // A CUDA cell's C/C++ sources: its kernels' and the binding's.
    let binding: &[String] = match &config.framework {
        crate::config::Framework::Torch(t) => &t.src,
        crate::config::Framework::TvmFfi(f) => &f.src,
        _ => &[],
    };
    let other = kinds
        .iter()
        .copied()
        .chain(
            codegen::expand(source.root(), binding)
                .unwrap_or_default()
                .iter()
                .map(|p| codegen::source_kind(p)),
        )
        .filter(|k| matches!(k, codegen::SourceKind::Cxx | codegen::SourceKind::C))
        .count();
    let targets = facts.gencode.values().map(Vec::len).max().unwrap_or(1);
    let mut plan = parallel::plan_with(
        parallel::resources(),
        cells_at_once,
        sources,
        if cuda { other } else { 0 },
        targets,
        cuda,
        set.jobs,
        set.nvcc_threads,
    );
    if let (Some(s), true) = (set.nvcc_split, cuda) {
        plan.split_compile = s;
    }
    if !cell.nvcc.as_ref().is_some_and(|n| parallel::split_compile_supported(&n.version)) {
        plan = plan.without_split();
    }
    // Distributed compiles: as many jobs as the build servers have cores (the compiles run
    // there; here only their preprocessing), unless the user set the jobs.
    if let Some(status) = compile_cache.and_then(compile_cache::Server::dist_status) {
        match status {
            Ok(st) if set.jobs.is_none() => plan.ninja_jobs = plan.ninja_jobs.max(st.cpus as usize),
            Ok(_) => {}
            Err(e) => warnings.push(Warning {
                path: None,
                message: format!(
                    "`{}`: the sccache-dist scheduler did not answer ({e:#}); its compiles run on this machine",
                    cell.variant
                ),
            }),
        }
    }
    plan
}

/// Write the variant directory of the compiled `cell` from its built module `built`: the
/// package files, `_ops.py`, the module as `<ops_name><suffix>`, `symbols.json`, the zip of
/// the zip layout, and `metadata.json` (its `build.toolchain` is `toolchain` plus the
/// framework's and Python's versions), after the ABI check. Returns warnings.
#[allow(clippy::too_many_arguments)] // the cell's facts, each used once
fn write_variant(
    source: &SourceSet,
    config: &BuildConfig,
    cell: &CompiledCell,
    ids: &BuildIds,
    out_variant_dir: &Utf8Path,
    layout: BuildLayout,
    ops_name: &str,
    built: &Utf8Path,
    mut toolchain: BTreeMap<String, String>,
) -> anyhow::Result<Vec<Warning>> {
    let module = format!("{ops_name}{}", module_suffix(cell.kind));
    anyhow::ensure!(built.is_file(), "the build wrote no `{built}`");
    let mut warnings = Vec::new();

    // The variant directory.
    create_dir(out_variant_dir)?;
    for f in source.package_files() {
        let Role::Package { in_package, .. } = &f.role else { continue };
        if in_package.as_str() == "_ops.py" {
            continue;
        }
        let dest = out_variant_dir.join(in_package);
        if let Some(parent) = dest.parent() {
            create_dirs_below(out_variant_dir, parent)?;
        }
        copy_source(f, &dest, super::write::FILE_MODE)?;
    }
    let ops_py = match cell.kind {
        CellKind::TvmFfi => super::tvm_ffi::ops_py(ops_name, &cell.variant, layout),
        _ => compiled_ops_py(ops_name, &cell.variant),
    };
    write_file(&out_variant_dir.join("_ops.py"), ops_py.as_bytes())?;
    let so = std::fs::read(built).with_context(|| format!("cannot read `{built}`"))?;
    write_file(&out_variant_dir.join(&module), &so)?;
    let (manylinux, abi_warnings) = check_abi(out_variant_dir, config, cell)?;
    warnings.extend(abi_warnings);
    // symbols.json (module docs of `symbols`): before the digest, which covers it. Imported
    // by the cell's Python when it has the cell's framework, else read from the sources.
    use super::symbols::{write_static_symbols, write_symbols, Outcome};
    let imported = if config.general.kernel_depends_for(cell.backend).is_empty() {
        // Its package would ask the loader for its kernel-depends while it is imported.
        write_symbols(out_variant_dir, ops_name, &cell.framework)?
    } else {
        Outcome::Skipped("kernel-depends".to_owned())
    };
    match imported {
        Outcome::Written => {}
        Outcome::Skipped(_) => {
            if let Some(w) = write_static_symbols(out_variant_dir, ops_name, &cell.variant)? {
                warnings.push(Warning { path: None, message: w });
            }
        }
        Outcome::DoesNotImport(why) => {
            warnings.push(Warning {
                path: None,
                message: format!(
                    "`{}`'s symbols.json is read from its sources: its package raised while `{}` imported it: {why}",
                    cell.variant,
                    cell.framework.executable()
                ),
            });
            if let Some(w) = write_static_symbols(out_variant_dir, ops_name, &cell.variant)? {
                warnings.push(Warning { path: None, message: w });
            }
        }
    }
    if layout == BuildLayout::Zip {
        zip_package(out_variant_dir, ops_name)?;
    }

    let digest = crate::hash::digest::variant_digest(out_variant_dir)
        .with_context(|| format!("cannot compute the digest of `{out_variant_dir}`"))?;
    let g = &config.general;
    let archs = (cell.backend == Backend::Cuda).then(|| {
        let mut all: Vec<String> = cell.cuda_capabilities.values().flatten().cloned().collect();
        super::metadata::sort_cuda_archs(&mut all);
        all
    });
    match &cell.framework {
        CellFramework::Torch(t) => toolchain.insert("torch".to_owned(), t.version.clone()),
        CellFramework::TvmFfi(f) => toolchain.insert("tvm-ffi".to_owned(), f.version.clone()),
    };
    toolchain.insert("python".to_owned(), cell.framework.python_version().to_owned());
    let metadata = Metadata {
        name: g.name.clone(),
        id: ops_name.to_owned(),
        version: g.version,
        license: g.license.clone(),
        upstream: g.upstream.clone(),
        source: g.source.clone(),
        python_depends: g.python_depends_for(cell.backend),
        kernel_depends: g.kernel_depends_for(cell.backend),
        backend: BackendInfo { kind: cell.backend, archs },
        build_layout: layout,
        digest,
        provenance: Provenance {
            kernel_builder: builder_provenance(),
            kernel: ids.kernel.clone().filter(|k| k.dirty),
        },
        build: Some(BuildInfo {
            native: cell.package_set.is_none(),
            hermetic: cell.hermetic,
            package_set: cell.package_set.clone(),
            manylinux,
            toolchain,
            capabilities_only: cell.capabilities_only.clone(),
        }),
        mlx: false,
    };
    write_file(&out_variant_dir.join("metadata.json"), &super::loader::metadata_json(&metadata)?)?;
    Ok(warnings)
}

/// The manylinux policy a native build without `--manylinux` is compared with: the one the
/// published bundle's cells are held to (reference: nix-builder.md §4.1).
pub const BUNDLE_MANYLINUX: &str = "manylinux_2_28";

/// The ABI check of a finished compiled variant ([`crate::abi`]), before its metadata is
/// written: every shared object against the CPython abi3 table (Python 3.9), against the torch
/// C shim for stable-ABI cells, and against the manylinux policy the cell is held to.
///
/// A tvm-ffi module is not a Python extension (tvm_ffi opens it; it calls libtvm_ffi's C API),
/// so it references no CPython symbol and the abi3 rule finds nothing to judge. The rule still
/// runs: a module that does reference CPython (a binding that includes `Python.h`) binds to
/// the interpreter it is loaded in, and the variant's name promises every Python, which only
/// the stable ABI keeps.
///
/// Returns the oldest manylinux policy every library meets (recorded in `metadata.json` as
/// `build.manylinux`) and warnings: without a requested policy, one per library that misses
/// [`BUNDLE_MANYLINUX`] ([`crate::abi::summarize_symbol_versions`]: the highest glibc it needs,
/// how many symbols need it, and the distributions it will not load on).
///
/// Errors: an abi3 or torch stable-ABI violation; with a requested policy
/// ([`CompiledCell::manylinux`]), any violation of it; each names the library and the symbol.
pub fn check_abi(
    variant_dir: &Utf8Path,
    config: &BuildConfig,
    cell: &CompiledCell,
) -> anyhow::Result<(Option<String>, Vec<Warning>)> {
    let torch_stable_abi = match (&config.framework, cell.kind) {
        (Framework::Torch(t), CellKind::StableAbi) => t.stable_abi.for_backend(cell.backend).cloned(),
        _ => None,
    };
    let enforced = cell.manylinux.is_some();
    let policy = crate::abi::AbiPolicy {
        manylinux: Some(cell.manylinux.clone().unwrap_or_else(|| BUNDLE_MANYLINUX.to_owned())),
        python_abi: Some((3, 9)),
        torch_stable_abi,
    };
    let report = crate::abi::check_variant(variant_dir, &policy)
        .with_context(|| format!("the ABI check of `{}` failed", cell.variant))?;
    let mut warnings = Vec::new();
    let mut errors = Vec::new();
    for lib in &report.libraries {
        let name = lib.path.file_name().unwrap_or(lib.path.as_str());
        // Unasked, the symbol versions past the bundle's policy are one warning per library.
        if !enforced {
            if let Some(summary) = crate::abi::summarize_symbol_versions(&lib.violations) {
                warnings.push(Warning {
                    path: None,
                    message: format!("`{}`: `{name}` is {summary}", cell.variant),
                });
            }
        }
        for v in &lib.violations {
            match v {
                crate::abi::Violation::SymbolVersion { .. } if !enforced => {}
                v if v.is_manylinux() && !enforced => warnings
                    .push(Warning { path: None, message: format!("`{}`: `{name}` is {v}", cell.variant) }),
                v => errors.push(format!("`{name}`: {v}")),
            }
        }
    }
    if !errors.is_empty() {
        let asked = match &cell.manylinux {
            Some(p) => format!(" (asked for {p})"),
            None => String::new(),
        };
        anyhow::bail!(
            "the ABI check of `{}` failed{asked}; nothing was swapped into build/:\n  {}",
            cell.variant,
            errors.join("\n  ")
        );
    }
    Ok((report.manylinux_met(), warnings))
}

/// Mirror the source set and the generated `project` into `src_dir`, writing only files whose
/// bytes changed (Ninja then rebuilds nothing for unchanged files) and removing the rest.
fn mirror(source: &SourceSet, project: &codegen::Project, src_dir: &Utf8Path) -> anyhow::Result<()> {
    let mut wanted: Vec<Utf8PathBuf> = Vec::new();
    for f in source.files() {
        if project.file(f.rel.as_str()).is_some() {
            continue;
        }
        sync_copy(&f.abs, &src_dir.join(&f.rel))?;
        wanted.push(f.rel.clone());
    }
    for f in &project.files {
        sync_file(&src_dir.join(&f.path), f.contents.as_bytes())?;
        wanted.push(f.path.clone());
    }
    remove_unwanted(src_dir, &wanted)
}

/// A kernel's shared source mirror, held while cells compile from it: a shared lock on
/// `<dir>.lock` that keeps other processes from rewriting it meanwhile.
#[derive(Debug)]
pub struct SharedSources {
    _lock: std::fs::File,
    uid: String,
}

/// Hold the shared source mirror `dir` of the source set `uid`: the first cell of this process
/// takes `<dir>.lock` exclusively (waiting, with a note, for another process's build of the same
/// checkout), runs `sync`, and keeps the lock shared; later cells of the same source set share
/// that hold. Cells of one build all have the same source set, so it is synced once and never
/// changes under a compile.
///
/// Errors: the lock, `sync`, or another source set of the same checkout held by this process.
fn shared_sources(
    dir: &Utf8Path,
    uid: &str,
    sync: impl FnOnce() -> anyhow::Result<()>,
) -> anyhow::Result<std::sync::Arc<SharedSources>> {
    use std::sync::{Arc, Mutex, Weak};
    static HELD: Mutex<BTreeMap<Utf8PathBuf, Weak<SharedSources>>> = Mutex::new(BTreeMap::new());
    let mut held = HELD.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(h) = held.get(dir).and_then(Weak::upgrade) {
        anyhow::ensure!(
            h.uid == uid,
            "`{dir}` holds the sources {} of another checkout of this kernel, built by this process right now; build the two one after the other",
            h.uid
        );
        return Ok(h);
    }
    let lock_path = Utf8PathBuf::from(format!("{dir}.lock"));
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("cannot create `{parent}`"))?;
    }
    let lock = crate::toolchain::store::lock_or_say(
        &lock_path,
        &format!("note: another build of this kernel is compiling from `{dir}`; waiting for it"),
    )?;
    sync()?;
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockShared)
        .with_context(|| format!("cannot lock `{lock_path}`"))?;
    let h = Arc::new(SharedSources { _lock: lock, uid: uid.to_owned() });
    held.insert(dir.to_owned(), Arc::downgrade(&h));
    Ok(h)
}

/// The directory in the cache root holding each kernel's shared source mirror, by kernel name.
pub const SOURCES_DIR: &str = "sources-v1";

/// Remove files under `dir` that are not in `wanted` (left from an earlier source set), so
/// the mirror holds exactly the source set and the generated files.
fn remove_unwanted(dir: &Utf8Path, wanted: &[Utf8PathBuf]) -> anyhow::Result<()> {
    for e in walkdir::WalkDir::new(dir).contents_first(true) {
        let e = e.with_context(|| format!("cannot list `{dir}`"))?;
        let Some(p) = Utf8Path::from_path(e.path()) else { continue };
        let Ok(rel) = p.strip_prefix(dir) else { continue };
        if rel.as_str().is_empty() {
            continue;
        }
        if e.file_type().is_dir() {
            let _ = std::fs::remove_dir(p); // only when empty
        } else if !wanted.iter().any(|w| w == rel) {
            std::fs::remove_file(p).with_context(|| format!("cannot remove `{p}`"))?;
        }
    }
    Ok(())
}

/// The `_ops.py` of a compiled variant: imports the native module (which registers the ops in
/// the namespace) and exposes `ops` and `add_op_namespace_prefix`.
pub fn compiled_ops_py(namespace: &str, variant: &str) -> String {
    format!(
        r#"# Generated by kernel-builder for the `{variant}` variant; do not edit.
import torch

# The native module: importing it registers this kernel's ops in its namespace.
from . import {namespace}  # noqa: F401

ops = torch.ops.{namespace}


def add_op_namespace_prefix(op_name: str) -> str:
    """Qualify `op_name` with this variant's op namespace (`namespace::op_name`)."""
    return f"{namespace}::{{op_name}}"
"#
    )
}

/// The `TORCH_TARGET_VERSION` of a stable-ABI target: `(major << 56) | (minor << 48)` in hex
/// (`2.11` → `0x020b000000000000`), what torch's stable headers compare against.
pub fn torch_target_version(abi: &Version) -> String {
    let v: u64 = (u64::from(abi.part(0)) << 56) | (u64::from(abi.part(1)) << 48);
    format!("0x{v:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_abi_target_versions() {
        let v = |s: &str| Version::parse(s).unwrap();
        assert_eq!(torch_target_version(&v("2.11")), "0x020b000000000000");
        assert_eq!(torch_target_version(&v("2.9")), "0x0209000000000000");
        assert_eq!(torch_target_version(&v("3.0")), "0x0300000000000000");
    }

    #[test]
    fn compiled_ops_py_imports_the_module() {
        let text = compiled_ops_py("_relu_cpu_abc1234", "torch211-cxx11-cpu-x86_64-linux");
        assert!(text.starts_with(
            "# Generated by kernel-builder for the `torch211-cxx11-cpu-x86_64-linux` variant; do not edit.\n"
        ));
        assert!(text.contains("\nfrom . import _relu_cpu_abc1234  # noqa: F401\n"));
        assert!(text.contains("\nops = torch.ops._relu_cpu_abc1234\n"));
        assert!(text.contains("return f\"_relu_cpu_abc1234::{op_name}\""));
    }
}
