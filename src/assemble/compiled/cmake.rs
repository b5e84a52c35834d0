//! Driving CMake and Ninja for one compiled cell: the facts of the compile as CMake cache
//! variables ([`CellFacts`], computed before anything runs), the initial-cache script, the
//! record of what a build directory was configured with, and the steps run in a process group
//! of their own with a private `TMPDIR`.

use std::collections::BTreeMap;

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};
use serde::{Deserialize, Serialize};

use super::plan::CompiledCell;
use crate::assemble::noarch::op_namespace;
use crate::codegen;
use crate::config::{Backend, BuildConfig, CppDependency, Framework};
use crate::matrix::CellKind;
use crate::output::{clip_lines, tail};
use crate::toolchain::host::{CellFramework, Tool};

/// The environment variables CMake, the C++ compiler and nvcc read that change what they
/// produce; each one's value is part of a compiled cell's key.
pub const BUILD_ENV: &[&str] = crate::env::COMPILER_ENV;

/// Where a cell's CMake work happens.
#[derive(Debug, Clone)]
pub enum WorkDir {
    /// The per-kernel directory in the user's cache, kept between builds (incremental).
    /// `cells_at_once`: how many cells are built at the same time (they share the cores and
    /// memory, [`super::parallel`]); `compile_cache`: the compile cache the compilers run
    /// through (`None`: off).
    Cache {
        kernel_dir: Utf8PathBuf,
        cells_at_once: usize,
        compile_cache: Option<super::compile_cache::CompileCache>,
    },
    /// A fresh temporary directory, removed afterwards (verify, Nix cells).
    Fresh,
}

/// Every fact the compile of one cell depends on, as CMake cache variables (name → value,
/// lists `;`-joined), computed before anything runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellFacts {
    pub ops_name: String,
    pub cache: BTreeMap<String, String>,
    /// `-gencode` flags per CUDA kernel.
    pub gencode: BTreeMap<String, Vec<String>>,
    /// Extra environment for CMake and Ninja (`LIBRARY_PATH` for PyPI's CUDA layout).
    pub env: Vec<(String, String)>,
    /// Findings that do not stop the build (a dependency checkout at another commit).
    pub warnings: Vec<String>,
    /// The directories whose paths reach the compile (the work directory, the framework's
    /// installation, the CUDA toolkit, dependency checkouts): the compile cache strips them
    /// from what it hashes, so the same translation unit hits from another cell, checkout or
    /// machine. Not part of the cell's key: they do not reach the binary.
    pub basedirs: Vec<Utf8PathBuf>,
    /// The GCC specs file ([`SPECS_FILE`] in the build directory) holding the prefix maps,
    /// `None` with Clang or a path holding whitespace (the maps are then on the command line).
    pub specs: Option<String>,
}

/// The file name of a cell's GCC specs file, in its build directory.
pub const SPECS_FILE: &str = "kernel-builder-cell.specs";

/// Where a cell's compiles run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompilesRun {
    /// In the build directory on this machine.
    Here,
    /// Possibly on another machine (sccache-dist's build servers), which has the compiler and
    /// the preprocessed source but no file of the build directory.
    Elsewhere,
}

/// Compute [`CellFacts`] for `cell` with the project in `src_dir` and the build in
/// `build_dir` (both mapped away in the binaries).
pub fn cell_facts(
    config: &BuildConfig,
    cell: &CompiledCell,
    uid: &str,
    src_dir: &Utf8Path,
    build_dir: &Utf8Path,
    compiles: CompilesRun,
) -> anyhow::Result<CellFacts> {
    let python_name = config.general.python_name();
    let ops_name = op_namespace(&python_name, cell.backend, uid);
    let stable = cell.kind == CellKind::StableAbi;
    let FrameworkInputs { std, defines, mut includes, mut libs, map: framework_map } =
        framework_inputs(config, cell, &ops_name, build_dir);
    let mut env = Vec::new();
    let mut cache = BTreeMap::new();
    let mut gencode = BTreeMap::new();
    // The work directory (source and build), and the directory holding the framework's
    // package (`site-packages`, a toolchain cache tree), so its prefix map reads the same in
    // every cell.
    let mut basedirs: Vec<Utf8PathBuf> = [src_dir.parent(), build_dir.parent(), framework_map.0.parent()]
        .into_iter()
        .flatten()
        .map(Utf8Path::to_owned)
        .collect();
    if cell.backend == Backend::Cuda {
        let cuda = cuda_inputs(cell)?;
        basedirs.push(cuda.root);
        includes.extend(cuda.includes);
        libs.push(cuda.cudart);
        env.push(("LIBRARY_PATH".to_owned(), cuda.libdir.to_string()));
        cache.extend(cuda.cache);
        gencode = cuda.gencode;
    }
    let deps = dependency_inputs(config, cell)?;
    cache.extend(deps.cache);
    let maps = prefix_maps(
        &[(src_dir, "."), (build_dir, "."), (framework_map.0.as_path(), framework_map.1)],
        &deps.maps,
    );
    basedirs.extend(deps.maps.iter().map(|(dir, _)| dir.clone()));
    basedirs.retain(|d| d.as_str() != "/" && !d.as_str().is_empty());
    // GCC emits STB_GNU_UNIQUE for function-local statics of inline functions and templates;
    // clang never does and has no such flag.
    let gnu = !cell.cxx.version.contains("clang");
    let specs = specs_file(&maps, src_dir, build_dir, gnu, compiles);
    let host_opts = host_options(specs.is_some(), maps, gnu, stable, build_dir);
    let opts = compile_options(cell, &host_opts)?;
    cache.insert("KB_BACKEND".into(), cell.backend.as_str().into());
    cache.insert("KB_KERNELS".into(), cell.kernels.join(";"));
    cache.insert("KB_OPS_NAME".into(), ops_name.clone());
    cache.insert("KB_MODULE_SUFFIX".into(), module_suffix(cell.kind).into());
    cache.insert("KB_CXX_STANDARD".into(), std.into());
    cache.insert("KB_DEFINES".into(), defines.join(";"));
    cache.insert("KB_INCLUDE_DIRS".into(), includes.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(";"));
    cache.insert("KB_LINK_LIBRARIES".into(), libs.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(";"));
    cache.insert("KB_COMPILE_OPTIONS".into(), opts.join(";"));
    // No symbol table: nvcc names its host translation unit after a temporary file holding
    // its process id (`tmpxft_<pid>_…cudafe1.cpp`), which lands in local symbols and would make
    // every build differ. The dynamic symbols (what loaders and the ABI check read) stay.
    cache.insert("KB_LINK_OPTIONS".into(), "-Wl,--strip-all".into());
    cache.insert("KB_SOURCE_DIR".into(), src_dir.to_string());
    cache.insert("CMAKE_BUILD_TYPE".into(), "Release".into());
    cache.insert("CMAKE_CXX_COMPILER".into(), cell.cxx.path.to_string());
    cache.insert("CMAKE_MAKE_PROGRAM".into(), cell.ninja.path.to_string());
    cache.insert("CMAKE_SKIP_RPATH".into(), "ON".into());
    Ok(CellFacts { ops_name, cache, gencode, env, warnings: deps.warnings, basedirs, specs })
}

/// What the CUDA toolkit brings to a CUDA cell's compile.
struct CudaInputs {
    /// The toolkit's directory (nvcc's `bin/` is in it), a base directory of the compile cache.
    root: Utf8PathBuf,
    /// Its include directories (`include`, and `include/cccl` where there is one).
    includes: Vec<Utf8PathBuf>,
    /// The CUDA runtime library the module links.
    cudart: Utf8PathBuf,
    /// The directory holding it: `LIBRARY_PATH` for PyPI's CUDA layout.
    libdir: Utf8PathBuf,
    /// The CUDA compiler and host compiler, and each kernel's architecture flags, as CMake
    /// cache variables.
    cache: BTreeMap<String, String>,
    /// `-gencode` flags per CUDA kernel.
    gencode: BTreeMap<String, Vec<String>>,
}

/// [`CudaInputs`] of the CUDA cell `cell`, from the toolkit its nvcc lies in.
///
/// Errors: no CUDA runtime beside the toolkit (the message says what to install); a kernel's
/// CUDA capabilities that have no `-gencode` flags, naming the kernel.
fn cuda_inputs(cell: &CompiledCell) -> anyhow::Result<CudaInputs> {
    let nvcc = cell.nvcc.as_ref().expect("CUDA cells have nvcc");
    let root = nvcc.path.parent().and_then(Utf8Path::parent).map(Utf8Path::to_owned).unwrap_or_default();
    let mut includes = vec![root.join("include")];
    if root.join("include/cccl").is_dir() {
        includes.push(root.join("include/cccl"));
    }
    let libdir =
        ["lib64", "lib"].iter().map(|d| root.join(d)).find(|d| d.is_dir()).unwrap_or(root.join("lib"));
    let cudart = find_versioned(&libdir, "libcudart.so").with_context(|| {
        format!("no libcudart.so in `{libdir}` (the CUDA runtime); install it (`pip install nvidia-cuda-runtime`)")
    })?;
    let mut cache = BTreeMap::new();
    let mut gencode = BTreeMap::new();
    cache.insert("CMAKE_CUDA_COMPILER".into(), nvcc.path.to_string());
    cache.insert("CMAKE_CUDA_HOST_COMPILER".into(), cell.cxx.path.to_string());
    for (k, caps) in &cell.cuda_capabilities {
        let flags = codegen::cuda::gencode_flags(caps).map_err(|e| anyhow::anyhow!("[kernel.{k}]: {e}"))?;
        cache.insert(format!("KB_CUDA_ARCH_FLAGS_{}", codegen::cmake_ident(k)), flags.join(";"));
        gencode.insert(k.clone(), flags);
    }
    Ok(CudaInputs { root, includes, cudart, libdir, cache, gencode })
}

/// What the C++ dependencies (other than torch) of a cell's kernels bring to its compile.
struct DependencyInputs {
    /// Each dependency's include directories, as CMake cache variables.
    cache: BTreeMap<String, String>,
    /// Findings about the checkouts (one at another commit).
    warnings: Vec<String>,
    /// Each checkout's directory with the name it has in the binaries (`/<dependency>`).
    maps: Vec<(Utf8PathBuf, String)>,
}

/// [`DependencyInputs`] of the kernels of `cell`, from the checkouts the environment names.
///
/// Errors: a dependency's checkout cannot be found ([`codegen::deps::find_checkout`]).
fn dependency_inputs(config: &BuildConfig, cell: &CompiledCell) -> anyhow::Result<DependencyInputs> {
    let mut cache = BTreeMap::new();
    let mut warnings = Vec::new();
    let mut maps: Vec<(Utf8PathBuf, String)> = Vec::new();
    for (name, k) in &config.kernels {
        if !cell.kernels.contains(name) {
            continue;
        }
        for d in &k.depends {
            if *d == CppDependency::Torch {
                continue;
            }
            let value = crate::env::DEP.var(&d.name())?;
            let checkout = codegen::deps::find_checkout(*d, &format!("[kernel.{name}]"), value.as_deref())?;
            let dirs: Vec<&str> = checkout.include_dirs.iter().map(|i| i.as_str()).collect();
            cache.insert(codegen::deps::cmake_var(*d), dirs.join(";"));
            warnings.extend(checkout.warning);
            // Where the checkout lies does not reach the binary (Nix and native builds agree).
            maps.push((checkout.dir, format!("/{}", d.name())));
        }
    }
    Ok(DependencyInputs { cache, warnings, maps })
}

/// The `-ffile-prefix-map` options mapping each directory of `dirs`, then each dependency
/// checkout of `dep_maps`, to its name in the binaries.
fn prefix_maps(dirs: &[(&Utf8Path, &str)], dep_maps: &[(Utf8PathBuf, String)]) -> Vec<String> {
    let mut maps: Vec<String> = dirs.iter().flat_map(|(from, to)| prefix_map(from, to)).collect();
    maps.extend(dep_maps.iter().flat_map(|(dir, to)| prefix_map(dir, to)));
    maps
}

/// The `-ffile-prefix-map` options mapping `from` to `to`. A directory reached through a
/// symbolic link (a cache directory that is a link) reaches the binary under its resolved name
/// too (CMake resolves some paths, the compiler others): both names are mapped.
fn prefix_map(from: &Utf8Path, to: &str) -> Vec<String> {
    let mut names = vec![from.to_owned()];
    names.extend(resolved(from).filter(|r| r != from));
    names.iter().map(|f| format!("-ffile-prefix-map={f}={to}")).collect()
}

/// The GCC specs file holding the prefix maps `maps`, or `None` where they must stay on the
/// command line.
///
/// The prefix maps name the work directory and the framework's installation, which differ
/// between cells and checkouts: with GCC (`gnu`) they go in a specs file beside the build
/// (`-specs=` with a path relative to the build directory, where every compile runs), so the
/// command line the compile cache hashes is the same in every work directory, while the
/// binary is mapped exactly as before. The compile cache's launcher also gives the compiler
/// the work directory's own paths relative to the build directory
/// ([`super::compile_cache::relative_args`]): `../src` and `.` are mapped as well.
/// Clang reads no specs file, and a path with whitespace cannot be written in one: then the
/// maps stay on the command line. So they do for compiles that may run on another machine:
/// the file would not be there (sccache-dist sends the compiler and the preprocessed source
/// only); the maps give the same bytes either way.
fn specs_file(
    maps: &[String],
    src_dir: &Utf8Path,
    build_dir: &Utf8Path,
    gnu: bool,
    compiles: CompilesRun,
) -> Option<String> {
    let relative_maps =
        [format!("-ffile-prefix-map={}=.", super::compile_cache::relative_dir(build_dir, src_dir))];
    let specs_possible =
        gnu && compiles == CompilesRun::Here && !maps.iter().any(|m| m.chars().any(char::is_whitespace));
    specs_possible.then(|| {
        let all: Vec<&str> = maps.iter().chain(&relative_maps).map(String::as_str).collect();
        format!("*cc1:\n+ {0}\n\n*cc1plus:\n+ {0}\n\n", all.join(" "))
    })
}

/// The host compiler's options: the specs file where there is one (`with_specs`), else the
/// prefix maps `maps`; `-fno-gnu-unique` with GCC (`gnu`); a stable-ABI cell's options.
fn host_options(
    with_specs: bool,
    maps: Vec<String>,
    gnu: bool,
    stable: bool,
    build_dir: &Utf8Path,
) -> Vec<String> {
    // On the command line, the compile cache's launcher gives each map absolute and relative
    // ([`super::compile_cache::relative_args`]).
    let mut host_opts: Vec<String> = if with_specs { vec![format!("-specs={SPECS_FILE}")] } else { maps };
    if gnu {
        // Each kernel's function-local statics stay its own when two are loaded in one process.
        host_opts.push("-fno-gnu-unique".into());
    }
    if stable {
        host_opts.extend(crate::assemble::stable_abi::compile_options(build_dir, gnu));
    }
    host_opts
}

/// The compile options of `cell` as CMake generator expressions: `host_opts` for C++, and for
/// a CUDA cell also for nvcc's host compiler ([`xcompiler`]), with torch's nvcc options.
///
/// Errors: a host option nvcc cannot pass on ([`xcompiler`]).
fn compile_options(cell: &CompiledCell, host_opts: &[String]) -> anyhow::Result<Vec<String>> {
    let mut opts: Vec<String> = host_opts.iter().map(|o| format!("$<$<COMPILE_LANGUAGE:CXX>:{o}>")).collect();
    if cell.backend == Backend::Cuda {
        for o in host_opts {
            opts.push(format!("$<$<COMPILE_LANGUAGE:CUDA>:{}>", xcompiler(o)?));
        }
        if cell.framework.torch().is_some() {
            // The nvcc options torch's CMake gives upstream's build (`parity`).
            opts.extend(
                crate::assemble::parity::TORCH_NVCC_FLAGS
                    .iter()
                    .map(|f| format!("$<$<COMPILE_LANGUAGE:CUDA>:{f}>")),
            );
        }
    }
    Ok(opts)
}

/// What a cell's framework brings to its compile: the C++ standard, definitions (the
/// backend's too), include directories, libraries, and its installation directory with the
/// name it has in the binaries.
struct FrameworkInputs {
    std: &'static str,
    defines: Vec<String>,
    includes: Vec<Utf8PathBuf>,
    libs: Vec<Utf8PathBuf>,
    map: (Utf8PathBuf, &'static str),
}

/// [`FrameworkInputs`] of `cell` (torch or tvm-ffi) with the op namespace `ops_name`; a
/// stable-ABI cell's include root is in `build_dir`.
fn framework_inputs(
    config: &BuildConfig,
    cell: &CompiledCell,
    ops_name: &str,
    build_dir: &Utf8Path,
) -> FrameworkInputs {
    let stable = cell.kind == CellKind::StableAbi;
    let (std, mut defines, includes, libs, map) = match &cell.framework {
        CellFramework::Torch(t) => {
            let std = t.cxx_standard();
            let mut defines = vec![
                format!("TORCH_EXTENSION_NAME={ops_name}"),
                "Py_LIMITED_API=0x03090000".to_owned(),
                format!("_GLIBCXX_USE_CXX11_ABI={}", u8::from(t.cxx11_abi)),
            ];
            // What linking torch's CMake targets defines in upstream's build.
            defines.extend(crate::assemble::parity::torch_interface_defines(&t.torch_dir));
            if let Framework::Torch(tt) = &config.framework {
                if let Some(abi) = tt.stable_abi.for_backend(cell.backend) {
                    defines.push(format!("TORCH_TARGET_VERSION={}", super::torch_target_version(abi)));
                }
            }
            let lib = t.torch_dir.join("lib");
            // A stable-ABI cell sees torch's stable headers and links its C shim only (`stable_abi`).
            let (includes, mut libs) = if stable {
                (
                    vec![crate::assemble::stable_abi::include_root(build_dir), t.python_include.clone()],
                    crate::assemble::stable_abi::link_libraries(&lib, cell.backend),
                )
            } else {
                (
                    vec![
                        t.torch_dir.join("include"),
                        t.torch_dir.join("include/torch/csrc/api/include"),
                        t.python_include.clone(),
                    ],
                    vec![lib.join("libtorch.so"), lib.join("libtorch_cpu.so"), lib.join("libc10.so")],
                )
            };
            if cell.backend == Backend::Cuda && !stable {
                libs.extend([lib.join("libtorch_cuda.so"), lib.join("libc10_cuda.so")]);
            }
            (std, defines, includes, libs, (t.torch_dir.clone(), "/torch"))
        }
        // A tvm-ffi cell sees tvm-ffi's headers and links libtvm_ffi.so (`tvm_ffi`).
        CellFramework::TvmFfi(f) => (
            crate::assemble::tvm_ffi::CXX_STANDARD,
            crate::assemble::tvm_ffi::defines(ops_name),
            vec![f.include_dir()],
            f.link_libraries(),
            (f.package_dir.clone(), "/tvm_ffi"),
        ),
    };
    match cell.backend {
        Backend::Cpu => defines.push("CPU_KERNEL".into()),
        Backend::Cuda => defines.extend(["CUDA_KERNEL".into(), "USE_CUDA=1".into()]),
        Backend::Rocm => defines.extend(["ROCM_KERNEL".into(), "USE_ROCM=1".into()]),
        Backend::Metal => defines.push("METAL_KERNEL".into()),
        Backend::Xpu => defines.extend(["XPU_KERNEL".into(), "USE_XPU".into()]),
        _ => {}
    }
    FrameworkInputs { std, defines, includes, libs, map }
}

/// The module's file name suffix: `.so` for a tvm-ffi cell (a library `tvm_ffi` opens, not a
/// Python extension), `.abi3.so` (CPython's limited API) otherwise.
pub fn module_suffix(kind: CellKind) -> &'static str {
    match kind {
        CellKind::TvmFfi => ".so",
        _ => ".abi3.so",
    }
}

/// nvcc's `-Xcompiler` form of the host compiler option `opt`, as one element of CMake's
/// compile options. An option without whitespace or commas is passed as two arguments
/// (`SHELL:-Xcompiler <opt>`, which CMake does not de-duplicate), so that the compile cache
/// strips a base directory from its path ([`super::compile_cache`]: sccache looks at the value
/// after an argument's first `=`, which `-Xcompiler=<opt>=<path>` would hide). nvcc splits an
/// unquoted value at whitespace and commas when it builds the host compiler's command, so an
/// option holding a path with a space (a cache directory or TMPDIR such as `/home/a b/…`) is
/// passed in double quotes after `-Xcompiler=`, which nvcc strips (its path then stays in the
/// compile cache's key: such a cell shares its cache entries with no other work directory).
///
/// Errors: `opt` holds `"`, `\`, `$` or a backquote, which nvcc's quoting cannot carry; the
/// message names the option and where its paths come from.
fn xcompiler(opt: &str) -> anyhow::Result<String> {
    if let Some(c) = opt.chars().find(|c| matches!(c, '"' | '\\' | '$' | '`')) {
        anyhow::bail!(
            "the host compiler option `{opt}` holds `{c}`, which nvcc cannot pass to the host compiler; \
             its path comes from the work directory (set KERNEL_BUILDER_CACHE_DIR, or TMPDIR for \
             `verify`, to a directory whose path has no `\"`, `\\`, `$` or backquote), the torch \
             installation or a dependency checkout (move it to such a path)"
        );
    }
    if opt.chars().any(|c| c.is_whitespace() || c == ',') {
        Ok(format!("-Xcompiler=\"{opt}\""))
    } else {
        Ok(format!("SHELL:-Xcompiler {opt}"))
    }
}

/// `dir/<name>` or the first `dir/<name>.N…` (sorted), for libraries without the plain link.
fn find_versioned(dir: &Utf8Path, name: &str) -> Option<Utf8PathBuf> {
    if dir.join(name).is_file() {
        return Some(dir.join(name));
    }
    let mut found: Vec<Utf8PathBuf> = dir
        .read_dir_utf8()
        .ok()?
        .flatten()
        .filter(|e| e.file_name().starts_with(&format!("{name}.")))
        .map(|e| e.path().to_owned())
        .collect();
    found.sort();
    found.into_iter().next()
}

/// The initial-cache file (`cmake -C`) holding `facts`.
pub(super) fn cache_file(facts: &CellFacts) -> String {
    let mut out = format!(
        "# {}.\n# The facts of one cell, as CMake cache variables: `cmake -G Ninja -C kernel-builder-cell.cmake -S <project> -B <here>`.\n",
        codegen::GENERATED_BY
    );
    for (k, v) in &facts.cache {
        out.push_str(&format!(
            "set({k} \"{}\" CACHE STRING \"\" FORCE)\n",
            v.replace('\\', "\\\\").replace('"', "\\\"")
        ));
    }
    out
}

/// What one CMake configure of a cell's build directory was given
/// (`<build>/kernel-builder-cell.configured`, JSON, written after the configure succeeded).
#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub(super) struct ConfigureRecord {
    /// The inputs CMake reads only at the first configure of a build directory and caches
    /// (`CMakeCache.txt`, `CMakeFiles/`): the tools' paths and versions, each of
    /// [`BUILD_ENV`] (and `CC`, `CXX`, `CUDACXX`) with its value or `null`,
    /// the extra environment. A change starts the build directory afresh.
    pub(super) first_configure: BTreeMap<String, Option<String>>,
    /// The `-C` cache script: a change re-runs the configure in place (incremental).
    cache_script: String,
}

impl ConfigureRecord {
    pub(super) fn new(cell: &CompiledCell, facts: &CellFacts, cache_script: &str) -> Self {
        let mut first = BTreeMap::new();
        let mut tool = |name: &str, t: &Tool| {
            first.insert(format!("tool:{name}"), Some(format!("{} ({})", t.path, t.version)));
        };
        tool("cmake", &cell.cmake);
        tool("ninja", &cell.ninja);
        tool("cxx", &cell.cxx);
        if let Some(n) = &cell.nvcc {
            tool("nvcc", n);
        }
        first.insert("generator".into(), Some("Ninja".into()));
        for k in BUILD_ENV.iter().chain(&["CC", "CXX", "CUDACXX"]) {
            first.insert(
                format!("env:{k}"),
                crate::env::recorded(k).map(|v| v.to_string_lossy().into_owned()),
            );
        }
        for (k, v) in &facts.env {
            first.insert(format!("extra-env:{k}"), Some(v.clone()));
        }
        ConfigureRecord { first_configure: first, cache_script: cache_script.to_owned() }
    }
}

/// A build tool's command (CMake, Ninja, cargo) with `env` on top of the build's own: one
/// locale for every tool, so that messages (and anything a tool might embed) do not depend on
/// the user's language settings; its temporary files in `tmp_dir`; and its own process group,
/// so that an interruption reaches the compilers it starts.
pub(super) fn tool_command(
    prog: &Utf8Path,
    args: &[String],
    env: &[(String, String)],
    tmp_dir: &Utf8Path,
) -> crate::process::Cmd {
    env.iter().fold(
        crate::process::Cmd::new(prog.as_str())
            .args(args.iter().cloned())
            .env("LC_ALL", "C")
            .env("TMPDIR", tmp_dir.as_str())
            .own_process_group(),
        |c, (k, v)| c.env(k.as_str(), v.as_str()),
    )
}

/// Run a build step; on failure the error shows the command and the tail of its output.
///
/// The step runs in a process group of its own ([`crate::process::Cmd::own_process_group`]: an
/// interruption stops it and the compilers it started), with `TMPDIR` set to `tmp_dir` (the
/// cell's own, removed after the build and on interruption, so nvcc's `tmpxft_*` files never
/// stay behind in the user's `$TMPDIR`). It is not started once an interruption arrived.
///
/// Errors: the step's failure as a [`crate::error::Error`] whose hints say what to do when its
/// output shows the machine at fault ([`super::symptoms`]: a full disk, a compiler killed).
pub(super) fn run_step(
    what: &str,
    prog: &Utf8Path,
    args: &[String],
    env: &[(String, String)],
    (build_dir, tmp_dir): (&Utf8Path, &Utf8Path),
    steps: Option<crate::assemble::progress::StepSink>,
) -> anyhow::Result<()> {
    anyhow::ensure!(!crate::interrupt::interrupted(), "{what} not started: interrupted");
    // Only the first error lines and the last lines are kept, so memory stays bounded however
    // much a compile prints.
    let cmd = tool_command(prog, args, env, tmp_dir);
    let mut first_errors: Vec<String> = Vec::new();
    let mut symptoms = super::symptoms::Symptoms::default();
    let streamed = cmd
        .stream(
            40,
            |_| {},
            |line| {
                let symptom = symptoms.see(line);
                if first_errors.len() < crate::output::FIRST_ERRORS
                    && (symptom || crate::output::is_error_line(line))
                {
                    first_errors.push(line.to_owned());
                }
                if let (Some(sink), Some((done, total))) =
                    (&steps, crate::assemble::progress::ninja_counter(line))
                {
                    sink(done, total);
                }
            },
        )
        .with_context(|| format!("cannot run `{prog}` ({what})"))?;
    if !streamed.status.success() {
        let shown: Vec<String> = std::iter::once(prog.to_string()).chain(args.iter().cloned()).collect();
        let last: Vec<String> = streamed.tail.into_iter().collect();
        let message = format!(
            "{what} failed ({}): `{}`\n{}--- last lines of its output ---\n{}\n---",
            streamed.status,
            shown.join(" "),
            crate::output::first_errors_block(&first_errors),
            clip_lines(&tail(&last.join("\n"), 40), 400)
        );
        let hints = symptoms.hints(build_dir, tmp_dir, super::symptoms::free_bytes(build_dir));
        return Err(crate::error::Error::new(crate::error::Kind::Failed, message).with_hints(hints).into());
    }
    Ok(())
}

/// Write `bytes` to `path` unless it already holds exactly them (keeps mtimes, so Ninja
/// rebuilds nothing for unchanged files). Creates parent directories.
pub(super) fn sync_file(path: &Utf8Path, bytes: &[u8]) -> anyhow::Result<bool> {
    if std::fs::read(path).is_ok_and(|old| old == bytes) {
        return Ok(false);
    }
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p).with_context(|| format!("cannot create `{p}`"))?;
    }
    std::fs::write(path, bytes).with_context(|| format!("cannot write `{path}`"))?;
    Ok(true)
}

/// Copy the source file `src` to `dest` unless `dest` already has its bytes (so Ninja
/// rebuilds nothing for unchanged files), streaming; creates parent directories.
pub(super) fn sync_copy(src: &Utf8Path, dest: &Utf8Path) -> anyhow::Result<bool> {
    if crate::fsutil::same_contents(src, dest) {
        return Ok(false);
    }
    if let Some(p) = dest.parent() {
        std::fs::create_dir_all(p).with_context(|| format!("cannot create `{p}`"))?;
    }
    match std::fs::remove_file(dest) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("cannot replace `{dest}`")),
    }
    crate::fsutil::copy_new_file(src, dest, crate::assemble::write::FILE_MODE)?;
    Ok(true)
}

/// Where a cell's compilers keep their temporary files (their `TMPDIR`), and whether that is
/// outside `work_dir`: `<work_dir>/tmp`, unless that path holds whitespace or a comma, which
/// nvcc's fatbinary step splits its arguments at (seen: every CUDA compile failed with "… is
/// not in 'keyword=value' format" under a cache directory `my cache, here`); then a fresh
/// `kernel-builder-tmp-*` directory in the system's temporary directory (`$TMPDIR`).
///
/// Errors: that directory cannot be created, or its path is not UTF-8.
pub(super) fn compilers_tmp_dir(work_dir: &Utf8Path) -> anyhow::Result<(Utf8PathBuf, bool)> {
    let inside = work_dir.join("tmp");
    if !inside.as_str().chars().any(|c| c.is_whitespace() || c == ',') {
        return Ok((inside, false));
    }
    let fresh = tempfile::Builder::new()
        .prefix("kernel-builder-tmp-")
        .tempdir()
        .context("cannot create a temporary directory for the compilers in $TMPDIR")?
        .keep();
    let fresh = Utf8PathBuf::from_path_buf(fresh)
        .map_err(|p| anyhow::anyhow!("the temporary directory `{}` is not UTF-8", p.display()))?;
    Ok((fresh, true))
}

/// A cell's directory for the compilers' temporary files (their `TMPDIR`), emptied when
/// created and removed when dropped.
pub(super) struct TmpDir {
    path: Utf8PathBuf,
    _registered: Option<crate::interrupt::Registered>,
}

impl TmpDir {
    /// Create `path` afresh (what an earlier killed build left there is removed); `register`:
    /// also remove it on interruption (a work directory in the cache, which stays; a fresh
    /// one is removed whole).
    pub(super) fn create(path: &Utf8Path, register: bool) -> anyhow::Result<TmpDir> {
        let registered =
            register.then(|| crate::interrupt::remove_on_interrupt(path, crate::interrupt::Removal::All));
        match std::fs::remove_dir_all(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(e).with_context(|| format!("cannot empty the temporary directory `{path}`"))
            }
        }
        std::fs::create_dir_all(path)
            .with_context(|| format!("cannot create the temporary directory `{path}`"))?;
        Ok(TmpDir { path: path.to_owned(), _registered: registered })
    }
}

impl Drop for TmpDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// The environment variable that sets Ninja's `-j` for native builds.
pub const JOBS_VAR: &str = crate::env::JOBS.name;

/// nvcc's `--threads` from `KERNEL_BUILDER_NVCC_THREADS` ([`crate::assemble::parity::nvcc_threads_var`]).
pub fn nvcc_threads_from_env() -> anyhow::Result<Option<usize>> {
    crate::assemble::parity::nvcc_threads_var(crate::env::NVCC_THREADS.os().as_deref())
}

/// cicc's `-split-compile` from `KERNEL_BUILDER_NVCC_SPLIT_COMPILE` ([`crate::assemble::parity::nvcc_split_var`]).
pub fn nvcc_split_from_env() -> anyhow::Result<Option<usize>> {
    crate::assemble::parity::nvcc_split_var(crate::env::NVCC_SPLIT_COMPILE.os().as_deref())
}

/// Ninja's `-j` from [`JOBS_VAR`] (`KERNEL_BUILDER_JOBS`): `None` when it is unset or empty,
/// else its value, a whole number of at least 1.
///
/// Errors: any other value (not a number, 0, not UTF-8), naming the variable and its value.
pub fn jobs_from_env() -> anyhow::Result<Option<usize>> {
    parse_jobs(crate::env::JOBS.os().as_deref())
}

/// [`jobs_from_env`] for the value `value` of the variable.
pub fn parse_jobs(value: Option<&std::ffi::OsStr>) -> anyhow::Result<Option<usize>> {
    let Some(value) = value.filter(|v| !v.is_empty()) else { return Ok(None) };
    match value.to_str().map(str::trim).map(str::parse::<usize>) {
        Some(Ok(n)) if n >= 1 => Ok(Some(n)),
        _ => anyhow::bail!(
            "{JOBS_VAR} is `{}`, not a number of parallel jobs: set it to a whole number of 1 or \
             more (Ninja's -j), or unset it for Ninja's default",
            value.to_string_lossy()
        ),
    }
}

/// `path` with every symbolic link resolved: its deepest existing ancestor canonicalized, the
/// rest appended (a work directory may not exist yet); `None` when no ancestor resolves.
fn resolved(path: &Utf8Path) -> Option<Utf8PathBuf> {
    let mut rest = Vec::new();
    let mut at = path;
    loop {
        if let Ok(real) = at.canonicalize_utf8() {
            return Some(rest.iter().rev().fold(real, |p: Utf8PathBuf, c: &&str| p.join(c)));
        }
        rest.push(at.file_name()?);
        at = at.parent()?;
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_path_through_a_link_resolves_to_its_target_even_where_it_does_not_exist_yet() {
        let t = tempfile::tempdir().unwrap();
        let root = Utf8Path::from_path(t.path()).unwrap().canonicalize_utf8().unwrap();
        std::fs::create_dir_all(root.join("real/trees")).unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("link")).unwrap();
        assert_eq!(resolved(&root.join("link/trees/k/torch")), Some(root.join("real/trees/k/torch")));
        assert_eq!(resolved(&root.join("real/trees")), Some(root.join("real/trees")));
    }

    use super::*;

    #[test]
    fn xcompiler_quotes_spaces_and_commas_and_refuses_what_nvcc_cannot_carry() {
        assert_eq!(
            xcompiler("-ffile-prefix-map=/c/kb/src=.").unwrap(),
            "SHELL:-Xcompiler -ffile-prefix-map=/c/kb/src=."
        );
        assert_eq!(
            xcompiler("-ffile-prefix-map=/home/a b/kb/src=.").unwrap(),
            "-Xcompiler=\"-ffile-prefix-map=/home/a b/kb/src=.\""
        );
        assert_eq!(
            xcompiler("-ffile-prefix-map=/tmp/x,y=.").unwrap(),
            "-Xcompiler=\"-ffile-prefix-map=/tmp/x,y=.\""
        );
        assert_eq!(xcompiler("-fno-gnu-unique").unwrap(), "SHELL:-Xcompiler -fno-gnu-unique");
        for bad in ["/tmp/a\"b", "/tmp/a\\b", "/tmp/$HOME", "/tmp/a`b"] {
            let err = xcompiler(&format!("-ffile-prefix-map={bad}=.")).unwrap_err().to_string();
            assert!(
                err.starts_with(&format!("the host compiler option `-ffile-prefix-map={bad}=.` holds `")),
                "{err}"
            );
            assert!(err.contains("set KERNEL_BUILDER_CACHE_DIR, or TMPDIR for `verify`"), "{err}");
        }
    }

    #[test]
    fn kernel_builder_jobs_must_be_a_positive_number() {
        use std::ffi::OsStr;
        assert_eq!(parse_jobs(None).unwrap(), None);
        assert_eq!(parse_jobs(Some(OsStr::new(""))).unwrap(), None);
        assert_eq!(parse_jobs(Some(OsStr::new("4"))).unwrap(), Some(4));
        assert_eq!(parse_jobs(Some(OsStr::new(" 2 "))).unwrap(), Some(2));
        for bad in ["0", "abc", "-1", "2.5", "4 jobs"] {
            assert_eq!(
                parse_jobs(Some(OsStr::new(bad))).unwrap_err().to_string(),
                format!(
                    "KERNEL_BUILDER_JOBS is `{bad}`, not a number of parallel jobs: set it to a whole \
                     number of 1 or more (Ninja's -j), or unset it for Ninja's default"
                )
            );
        }
    }
}
