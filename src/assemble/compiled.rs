//! Compiled variants: a backend that a `[kernel.*]` compiles code for (in a `[torch]` or
//! `[tvm-ffi]` kernel), built natively for the one cell the host toolchain gives.
//!
//! # Which cell
//!
//! The toolchain decides: torch comes from a Python environment (`--python`, default
//! `python3`), and its version, its CUDA / ROCm / XPU build and its C++ ABI name the variant
//! ([`HostToolchain`], [`plan_cell`]): with this repository's venv (PyPI torch 2.11.0, a CUDA
//! 13.0 build) the CPU cell is `torch211-cxx11-cpu-x86_64-linux` and the CUDA cell
//! `torch211-cxx11-cu130-x86_64-linux`. A `[tvm-ffi]` kernel needs no torch: its cells take
//! tvm_ffi from the same Python environment and are named for its major.minor and, for CUDA,
//! the version of the nvcc found ([`super::tvm_ffi`]: `tvm-ffi01-cpu-x86_64-linux`,
//! `tvm-ffi01-cu130-x86_64-linux`). A cell the bundle matrix does not hold builds with a
//! warning naming the nearest bundle cells. A backend whose toolchain is missing (no torch, no
//! C++ compiler, no nvcc, a CPU-only torch for CUDA, …) is not buildable here, and the reason
//! says what to install.
//!
//! # How
//!
//! [`build_cell`] (one code path for `build-and-copy --nix never`, `verify` and the hidden
//! `assemble` a Nix cell runs):
//!
//! 1. computes every fact the compile depends on ([`CellFacts`]: op namespace, kernels in the
//!    cell, exact `-gencode` pairs per CUDA kernel from the matrix data, defines, include
//!    directories, libraries, prefix maps, `-fno-gnu-unique`, the C++ standard: 17 for
//!    torch < 2.12, 20 from 2.12) before anything is compiled, so a capability list that
//!    this CUDA cannot build fails first;
//! 2. mirrors the source set and the generated project ([`crate::codegen`]) into a work
//!    directory (`src/`), writing only files whose bytes changed, so an unchanged rebuild
//!    compiles nothing;
//! 3. runs CMake (Ninja generator) with the facts as cache variables (`build/kernel-builder-cell.cmake`,
//!    read with `cmake -C`), then `ninja`;
//! 4. writes the variant directory: the package files, `_ops.py` importing the module,
//!    `_<pkg>_<backend>_<uid>.abi3.so` (`.so` for tvm-ffi, whose `_ops.py` opens it with
//!    `tvm_ffi.load_module`), and `metadata.json` (with `build`: native, not
//!    hermetic, and the toolchain's versions);
//! 5. checks every shared object of the variant ([`check_abi`]: abi3, the torch stable ABI
//!    of stable-ABI cells, manylinux) before `metadata.json` records the policy met.
//!
//! CMake and Ninja run in a process group of their own (an interruption stops them and the
//! compilers they started, [`crate::interrupt`]) with `TMPDIR` set to `<work>/tmp` (or, where
//! that path has a space or comma nvcc cannot take, a fresh directory in `$TMPDIR`), emptied
//! before and removed after each build and on interruption, so nvcc's `tmpxft_*` files never
//! stay behind; where it is changes no output and no cache key.
//!
//! `KERNEL_BUILDER_JOBS` sets Ninja's `-j` (default: Ninja's own, from the CPU count; with
//! `build-and-copy --jobs N`, N > 1, the CPU count divided by N, so that the cells built at once
//! share the cores); for a CUDA cell it is divided by nvcc's `--threads`
//! (`KERNEL_BUILDER_NVCC_THREADS`, else [`super::parity::default_nvcc_threads`]).
//! The torch probe (a Python process importing torch, seconds) is cached in
//! `<cache>/probe-v1/`, valid while the interpreter and torch's `version.py` keep their size and
//! modification time. The work directory of `build-and-copy` is kept between runs, in the user's cache
//! (`$KERNEL_BUILDER_CACHE_DIR`, else `$XDG_CACHE_HOME/kernel-builder`, else
//! `~/.cache/kernel-builder`; `cmake-v1/<kernel dir hash>/<variant>`); `verify` and `assemble`
//! use a fresh one. Source and build directories are mapped away (`-ffile-prefix-map`), there
//! are no timestamps, and sources are listed in `build.toml` order, so a fresh build is byte
//! for byte the cached one.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};
use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use super::metadata::{BackendInfo, BuildInfo, Metadata, Provenance};
use super::noarch::{create_dir, create_dirs_below, op_namespace, write_file};
use super::output::{clip_lines, error_lines, tail};
use super::provenance::{builder_provenance, BuildIds};
use super::source::{copy_source, Role, SourceSet};
use super::tvm_ffi::TvmFfiFacts;
use super::Warning;
use crate::codegen::{self, Layout};
use crate::config::{Backend, BuildConfig, CppDependency, Framework, Version};
use crate::matrix::{self, naming, CellKind, Scope};

/// What `torch` in a Python environment says about itself (one `python -c` run).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TorchFacts {
    /// `torch.__version__`, e.g. `2.11.0+cu130`.
    pub version: String,
    /// `torch.version.cuda` (`13.0`), when torch is a CUDA build.
    pub cuda: Option<String>,
    /// `torch.version.hip`, when a ROCm build.
    pub hip: Option<String>,
    /// `torch.version.xpu`, when an XPU build.
    pub xpu: Option<String>,
    /// `torch._C._GLIBCXX_USE_CXX11_ABI`.
    pub cxx11_abi: bool,
    /// `torch.utils.cmake_prefix_path` (recorded; the generated project does not use torch's
    /// CMake, whose CUDA logic picks architectures itself).
    pub cmake_prefix_path: String,
    /// The torch package directory.
    pub torch_dir: Utf8PathBuf,
    /// `sysconfig.get_paths()["include"]` (for `Python.h`).
    pub python_include: Utf8PathBuf,
    /// `sysconfig.get_paths()["purelib"]` (site-packages, where PyPI's nvidia wheels live).
    pub purelib: Utf8PathBuf,
    /// `sys.executable`.
    pub executable: Utf8PathBuf,
    /// `X.Y` of the interpreter.
    pub python_version: String,
}

impl TorchFacts {
    /// The torch version without its local part (`2.11.0`).
    pub fn public_version(&self) -> Version {
        let v = self.version.split('+').next().unwrap_or(&self.version);
        Version::parse(v).unwrap_or_else(|_| Version { parts: vec![0], text: v.to_owned() })
    }
}

/// The Python program that reports [`TorchFacts`] as JSON.
const PROBE: &str = r#"
import json, os, sys, sysconfig
import torch
v = torch.version
print(json.dumps({
    "version": torch.__version__,
    "cuda": getattr(v, "cuda", None),
    "hip": getattr(v, "hip", None),
    "xpu": getattr(v, "xpu", None),
    "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
    "cmake_prefix_path": torch.utils.cmake_prefix_path,
    "torch_dir": os.path.dirname(torch.__file__),
    "python_include": sysconfig.get_paths()["include"],
    "purelib": sysconfig.get_paths()["purelib"],
    "executable": sys.executable,
    "python_version": "%d.%d" % sys.version_info[:2],
}))
"#;

/// A program found, with the version it reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tool {
    pub path: Utf8PathBuf,
    /// The first line of `--version` (trimmed), or the parsed version where noted.
    pub version: String,
}

/// The host toolchain for native builds, probed lazily (torch only when a compiled backend
/// is planned).
#[derive(Debug)]
pub struct HostToolchain {
    /// The Python interpreter given (`--python`), as typed.
    pub python: Utf8PathBuf,
    /// Where the tools come from: `None` for the host's own (PATH, `--python`); the name of
    /// a declared package set (a Nix cell's, e.g. `nixpkgs`) otherwise. Recorded in
    /// `metadata.json` (`build.package-set`), with [`HostToolchain::hermetic`].
    pub package_set: Option<String>,
    /// Whether that package set is hermetic (pinned inputs only). Never true without one.
    pub hermetic: bool,
    /// The manylinux policy every compiled variant must meet (`manylinux_2_28`, `2_28`):
    /// a violation fails the build naming the library and the symbol. `None`: the policy met
    /// is recorded, and what keeps a variant from manylinux_2_28 (the bundle's policy) is a
    /// warning.
    pub manylinux: Option<String>,
    /// Compile CUDA kernels for these capabilities only (`--cuda-capabilities`,
    /// `KERNEL_BUILDER_CUDA_CAPABILITIES`): a quick check, recorded in metadata.json
    /// (`build.capabilities-only`), which `upload` refuses. `None`: every capability.
    pub cuda_capabilities_only: Option<Vec<String>>,
    /// Tools provisioned from pinned wheels ([`crate::toolchain`]), used instead of looking
    /// them up; `None`: found on the host.
    pub provisioned: Option<ProvisionedTools>,
    torch: OnceLock<Result<TorchFacts, String>>,
    tvm_ffi: OnceLock<Result<TvmFfiFacts, String>>,
}

/// CMake, Ninja and (for a CUDA cell) nvcc of a cell provisioned from pinned wheels.
#[derive(Debug, Clone)]
pub struct ProvisionedTools {
    pub cmake: Utf8PathBuf,
    pub ninja: Utf8PathBuf,
    pub nvcc: Option<Utf8PathBuf>,
}

impl HostToolchain {
    /// A toolchain that takes torch from the interpreter `python` (a path or a name on PATH).
    pub fn new(python: impl Into<Utf8PathBuf>) -> HostToolchain {
        HostToolchain {
            python: python.into(),
            package_set: None,
            hermetic: false,
            manylinux: None,
            cuda_capabilities_only: None,
            provisioned: None,
            torch: OnceLock::new(),
            tvm_ffi: OnceLock::new(),
        }
    }

    /// A toolchain whose torch facts and tools are given (a cell provisioned from pinned
    /// wheels); `python` only supplies `Python.h`.
    pub fn provisioned(
        python: impl Into<Utf8PathBuf>,
        torch: TorchFacts,
        tools: ProvisionedTools,
    ) -> HostToolchain {
        let host = HostToolchain { provisioned: Some(tools), ..HostToolchain::new(python) };
        let _ = host.torch.set(Ok(torch));
        host
    }

    /// The same toolchain, holding every compiled variant to the manylinux policy `policy`
    /// (see [`HostToolchain::manylinux`]).
    pub fn with_manylinux(mut self, policy: Option<String>) -> HostToolchain {
        self.manylinux = policy;
        self
    }

    /// The same toolchain, compiling CUDA kernels for `only` of their capabilities (see
    /// [`HostToolchain::cuda_capabilities_only`]; an empty list means every capability).
    pub fn with_cuda_capabilities(mut self, only: Vec<String>) -> HostToolchain {
        self.cuda_capabilities_only = (!only.is_empty()).then_some(only);
        self
    }

    /// The same toolchain, declared to come from the package set `name` (hermetic or not).
    /// The tools are still found the same way (`--python`, `CXX`, `CUDACXX`, PATH); only what
    /// `metadata.json` says about them changes, so a native build given a Nix cell's tools and
    /// package-set name writes the same bytes as the cell.
    pub fn with_package_set(mut self, name: impl Into<String>, hermetic: bool) -> HostToolchain {
        self.package_set = Some(name.into());
        self.hermetic = hermetic;
        self
    }

    /// torch's facts, or why torch cannot be used (no such interpreter, no torch, …).
    pub fn torch(&self) -> Result<&TorchFacts, &str> {
        self.torch.get_or_init(|| probe_torch(&self.python)).as_ref().map_err(String::as_str)
    }

    /// tvm_ffi's facts (for `[tvm-ffi]` kernels), or why it cannot be used (no such
    /// interpreter, no `tvm_ffi`: the reason says to install `apache-tvm-ffi`).
    pub fn tvm_ffi(&self) -> Result<&TvmFfiFacts, &str> {
        self.tvm_ffi.get_or_init(|| super::tvm_ffi::probe(&self.python)).as_ref().map_err(String::as_str)
    }

    /// The directory of the interpreter (`.venv/bin`), where pip puts `cmake` and `ninja`;
    /// absolute (symlinks kept: a venv's `python` links outside the venv), because CMake runs
    /// the tools found there from its own build directory. `executable` is `sys.executable`
    /// as the probe reported it, used when `--python` is a bare name.
    fn python_bin_dir(&self, executable: &Utf8Path) -> Option<Utf8PathBuf> {
        if self.python.as_str().contains('/') {
            let abs = std::path::absolute(self.python.as_std_path()).ok()?;
            return Utf8PathBuf::from_path_buf(abs).ok()?.parent().map(Utf8Path::to_owned);
        }
        executable.parent().map(Utf8Path::to_owned)
    }
}

/// What a cached probe is valid for: the interpreter file and torch's `version.py`, by size
/// and modification time (a reinstall of either changes them).
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct ProbeStamp {
    python: String,
    python_mtime_ns: u128,
    python_len: u64,
    torch_version_py_mtime_ns: u128,
    torch_version_py_len: u64,
}

fn stamp_of(python: &Utf8Path, torch_dir: &Utf8Path) -> Option<ProbeStamp> {
    let resolved = find_program(python.as_str(), &[])?;
    let meta = |p: &Utf8Path| -> Option<(u128, u64)> {
        let m = std::fs::metadata(p).ok()?;
        let t = m.modified().ok()?.duration_since(std::time::UNIX_EPOCH).ok()?;
        Some((t.as_nanos(), m.len()))
    };
    let (pm, pl) = meta(&resolved)?;
    let (tm, tl) = meta(&torch_dir.join("version.py"))?;
    Some(ProbeStamp {
        python: resolved.to_string(),
        python_mtime_ns: pm,
        python_len: pl,
        torch_version_py_mtime_ns: tm,
        torch_version_py_len: tl,
    })
}

#[derive(Serialize, Deserialize)]
struct CachedProbe {
    stamp: ProbeStamp,
    facts: serde_json::Value,
}

/// torch's facts for `python`, from the probe cache (`<cache>/probe-v1/`) when the
/// interpreter and torch are unchanged since, else by running the probe (importing torch
/// takes seconds) and caching the result.
fn probe_torch(python: &Utf8Path) -> Result<TorchFacts, String> {
    let key: String =
        sha2::Sha256::digest(python.as_str().as_bytes()).iter().take(8).map(|b| format!("{b:02x}")).collect();
    let cache_file = cache_root().ok().map(|r| r.join("probe-v1").join(format!("{key}.json")));
    if let Some(f) = &cache_file {
        if let Ok(text) = std::fs::read_to_string(f) {
            if let Ok(c) = serde_json::from_str::<CachedProbe>(&text) {
                if let Ok(facts) = serde_json::from_value::<TorchFacts>(c.facts.clone()) {
                    if stamp_of(python, &facts.torch_dir).as_ref() == Some(&c.stamp) {
                        return Ok(facts);
                    }
                }
            }
        }
    }
    let (facts, raw) = run_probe(python)?;
    if let (Some(f), Some(stamp)) = (&cache_file, stamp_of(python, &facts.torch_dir)) {
        if let Some(dir) = f.parent() {
            let _ = std::fs::create_dir_all(dir);
            if let Ok(text) = serde_json::to_vec(&CachedProbe { stamp, facts: raw }) {
                let _ = crate::fsutil::write_atomic(f, &text);
            }
        }
    }
    Ok(facts)
}

fn run_probe(python: &Utf8Path) -> Result<(TorchFacts, serde_json::Value), String> {
    let out = duct::cmd(python.as_str(), ["-c", PROBE])
        .before_spawn(crate::process::before_spawn)
        .stdout_capture()
        .stderr_capture()
        .unchecked()
        .run()
        .map_err(|e| {
            format!(
            "cannot run the Python interpreter `{python}` ({e}); pass --python PATH to a Python with torch"
        )
        })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        if err.contains("No module named 'torch'") {
            return Err(format!(
                "`{python}` has no torch; install it there (`{python} -m pip install torch`) or pass --python PATH to a Python that has it"
            ));
        }
        // A Python that dies silently (`--python /bin/false`) leaves nothing to show: say what ran.
        let detail = if err.trim().is_empty() {
            format!("it exited with {} and printed nothing; is it a Python with torch?", out.status)
        } else {
            tail(&err, 20)
        };
        return Err(format!("`{python}` could not report torch's build facts:\n{detail}"));
    }
    let raw: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("`{python}` printed unexpected torch facts ({e})"))?;
    let facts = serde_json::from_value(raw.clone())
        .map_err(|e| format!("`{python}` printed unexpected torch facts ({e})"))?;
    Ok((facts, raw))
}

/// The environment variables CMake, the C++ compiler and nvcc read that change what they
/// produce; each one's value is part of a compiled cell's key.
pub const BUILD_ENV: &[&str] = crate::env::COMPILER_ENV;

/// One variant a bundle can hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedVariant {
    /// Directory name under `build/` (`torch-cuda`, `torch212-cxx11-cu130-x86_64-linux`).
    pub name: String,
    pub backend: Backend,
    /// True when a `[kernel.*]` compiles code for the backend.
    pub compiled: bool,
    /// Compiled variants: the cell the host toolchain builds.
    pub cell: Option<Box<NativeCell>>,
}

/// Find an executable: a path (with `/`) as given, else `dirs` in order, else PATH.
pub(crate) fn find_program(name: &str, dirs: &[Utf8PathBuf]) -> Option<Utf8PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let is_exe =
        |p: &Utf8Path| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if name.contains('/') {
        let p = Utf8PathBuf::from(name);
        return is_exe(&p).then_some(p);
    }
    let path_dirs: Vec<Utf8PathBuf> = crate::env::PATH
        .get()
        .unwrap_or_default()
        .split(':')
        .filter(|d| !d.is_empty())
        .map(Utf8PathBuf::from)
        .collect();
    dirs.iter().chain(path_dirs.iter()).map(|d| d.join(name)).find(|p| is_exe(p))
}

/// `prog --version`'s first line.
fn version_line(prog: &Utf8Path) -> Result<String, String> {
    let out = duct::cmd(prog.as_str(), ["--version"])
        .before_spawn(crate::process::before_spawn)
        .stdout_capture()
        .stderr_capture()
        .unchecked()
        .run()
        .map_err(|e| format!("cannot run `{prog}` ({e})"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_owned())
}

/// The tools every compiled cell needs: CMake, Ninja and a C++ compiler (`executable`: the
/// interpreter the framework probe ran, see [`HostToolchain::python_bin_dir`]).
fn base_tools(host: &HostToolchain, executable: &Utf8Path) -> Result<(Tool, Tool, Tool), String> {
    let near: Vec<Utf8PathBuf> = host.python_bin_dir(executable).into_iter().collect();
    let missing = |what: &str, install: &str| {
        format!("{what} was not found next to `{}` or on PATH; install it ({install})", host.python)
    };
    let (cmake, ninja) = match &host.provisioned {
        Some(p) => (p.cmake.clone(), p.ninja.clone()),
        None => (
            find_program("cmake", &near)
                .ok_or_else(|| missing("CMake", &format!("`{} -m pip install cmake`", host.python)))?,
            find_program("ninja", &near)
                .ok_or_else(|| missing("Ninja", &format!("`{} -m pip install ninja`", host.python)))?,
        ),
    };
    let cxx_name = crate::env::CXX.non_empty();
    let cxx = match &cxx_name {
        Some(c) => find_program(c, &[]).ok_or_else(|| format!("`CXX` is `{c}`, which is not an executable"))?,
        None => ["c++", "g++", "clang++"]
            .iter()
            .find_map(|n| find_program(n, &[]))
            .ok_or_else(|| "no C++ compiler on PATH (c++, g++, clang++); install one (e.g. `apt-get install g++`) or set CXX".to_owned())?,
    };
    let v = |p: Utf8PathBuf| -> Result<Tool, String> { Ok(Tool { version: version_line(&p)?, path: p }) };
    Ok((v(cmake)?, v(ninja)?, v(cxx)?))
}

/// The CUDA an nvcc must be: torch's (`13.0`) for a torch cell; `None` for a tvm-ffi cell,
/// which takes the CUDA of the nvcc found.
#[derive(Debug, Clone, Copy)]
struct WantCuda<'a> {
    cuda: &'a str,
    /// `torch 2.11.0+cu130`, named when nvcc is of another CUDA.
    torch_version: &'a str,
}

/// Find nvcc: `CUDACXX`, `CUDA_HOME/bin`, PATH, then the Python environment's
/// `nvidia/cu<major>/bin` (PyPI's `nvidia-cuda-nvcc`; `purelib` is its site-packages). With
/// `want` (a torch cell), the CUDA of torch's build, `cu<its major>`, and an nvcc of another
/// CUDA is refused; without (a tvm-ffi cell), the newest `cu<major>` there, and the CUDA is
/// the nvcc's own.
fn find_nvcc(purelib: &Utf8Path, executable: &Utf8Path, want: Option<WantCuda<'_>>) -> Result<Tool, String> {
    let mut candidates: Vec<Utf8PathBuf> = Vec::new();
    // A toolkit the user named is used or refused, never passed over for another one.
    for (var, path) in [
        ("CUDACXX", crate::env::CUDACXX.get().map(Utf8PathBuf::from)),
        ("CUDA_HOME", crate::env::CUDA_HOME.get().map(|h| Utf8PathBuf::from(h).join("bin/nvcc"))),
    ] {
        let Some(path) = path.filter(|p| !p.as_str().is_empty() && p.as_str() != "bin/nvcc") else {
            continue;
        };
        if find_program(path.as_str(), &[]).is_none() {
            let which =
                want.map(|w| format!("nvcc of CUDA {}", w.cuda)).unwrap_or_else(|| "an nvcc".to_owned());
            return Err(format!(
                "`{var}` names `{path}`, which is not an executable nvcc; point it at {which}, or unset it to use the one on PATH or in the Python environment"
            ));
        }
        candidates.push(path);
    }
    if let Some(p) = find_program("nvcc", &[]) {
        candidates.push(p);
    }
    match want {
        Some(w) => {
            let major = w.cuda.split('.').next().unwrap_or(w.cuda);
            candidates.push(purelib.join(format!("nvidia/cu{major}/bin/nvcc")));
        }
        None => {
            // `nvidia/cu13/`, `nvidia/cu12/`, …: the newest CUDA first.
            let mut found: Vec<(u32, Utf8PathBuf)> = purelib
                .join("nvidia")
                .read_dir_utf8()
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| {
                    let major = e.file_name().strip_prefix("cu")?.parse::<u32>().ok()?;
                    Some((major, e.path().join("bin/nvcc")))
                })
                .collect();
            found.sort_by(|a, b| b.0.cmp(&a.0));
            candidates.extend(found.into_iter().map(|(_, p)| p));
        }
    }
    let nvcc = candidates.into_iter().find(|p| find_program(p.as_str(), &[]).is_some()).ok_or_else(|| match want {
        Some(WantCuda { cuda, .. }) => {
            let major = cuda.split('.').next().unwrap_or(cuda);
            format!(
                "no nvcc for CUDA {cuda} (looked at CUDACXX, CUDA_HOME, PATH and `{}`); install it, e.g. `{executable} -m pip install nvidia-cuda-nvcc=={cuda}.* nvidia-nvvm=={cuda}.* nvidia-cuda-crt=={cuda}.*`",
                purelib.join(format!("nvidia/cu{major}/bin")),
            )
        }
        None => format!(
            "no nvcc (looked at CUDACXX, CUDA_HOME, PATH and `{}`); install one, e.g. `{executable} -m pip install nvidia-cuda-nvcc nvidia-nvvm nvidia-cuda-crt nvidia-cuda-runtime`",
            purelib.join("nvidia/cu*/bin"),
        ),
    })?;
    nvcc_tool(nvcc, want)
}

/// The nvcc at `nvcc` with its version; with `want`, refused unless of that CUDA.
fn nvcc_tool(nvcc: Utf8PathBuf, want: Option<WantCuda<'_>>) -> Result<Tool, String> {
    let out = duct::cmd(nvcc.as_str(), ["--version"])
        .before_spawn(crate::process::before_spawn)
        .stdout_capture()
        .stderr_capture()
        .unchecked()
        .run()
        .map_err(|e| format!("cannot run `{nvcc}` ({e})"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    // "Cuda compilation tools, release 13.0, V13.0.88"
    let version = text
        .split(", V")
        .nth(1)
        .map(|v| v.split_whitespace().next().unwrap_or("").to_owned())
        .filter(|v| !v.is_empty())
        .ok_or_else(|| format!("`{nvcc} --version` printed no version:\n{}", tail(&text, 5)))?;
    let nv = Version::parse(&version).map_err(|e| format!("`{nvcc}`: {e}"))?;
    if let Some(WantCuda { cuda, torch_version }) = want {
        let want = Version::parse(cuda).map_err(|e| format!("torch.version.cuda: {e}"))?;
        if (nv.part(0), nv.part(1)) != (want.part(0), want.part(1)) {
            return Err(format!(
                "`{nvcc}` is CUDA {version}, but torch {torch_version} was built with CUDA {cuda}; use the nvcc of CUDA {cuda} (CUDACXX=…)"
            ));
        }
    }
    Ok(Tool { path: nvcc, version })
}

/// What a cell compiles against, from the Python environment: torch for a `[torch]` kernel,
/// tvm-ffi for a `[tvm-ffi]` one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CellFramework {
    Torch(TorchFacts),
    TvmFfi(TvmFfiFacts),
}

impl CellFramework {
    /// torch's facts, for a torch (or stable-ABI) cell.
    pub fn torch(&self) -> Option<&TorchFacts> {
        match self {
            CellFramework::Torch(t) => Some(t),
            CellFramework::TvmFfi(_) => None,
        }
    }

    /// `X.Y` of the interpreter the facts come from.
    pub fn python_version(&self) -> &str {
        match self {
            CellFramework::Torch(t) => &t.python_version,
            CellFramework::TvmFfi(f) => &f.python_version,
        }
    }

    /// `sys.executable` of that interpreter.
    pub fn executable(&self) -> &Utf8Path {
        match self {
            CellFramework::Torch(t) => &t.executable,
            CellFramework::TvmFfi(f) => &f.executable,
        }
    }

    /// What the variant is built against, for messages: `torch 2.11.0+cu130`,
    /// `tvm-ffi 0.1.15.post2`.
    pub fn describe(&self) -> String {
        match self {
            CellFramework::Torch(t) => format!("torch {}", t.version),
            CellFramework::TvmFfi(f) => format!("tvm-ffi {}", f.version),
        }
    }
}

/// One compiled cell that this host can build, with everything it compiles with decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NativeCell {
    /// The variant name, from what is used (`torch211-cxx11-cpu-x86_64-linux`,
    /// `tvm-ffi01-cpu-x86_64-linux`).
    pub variant: String,
    pub backend: Backend,
    pub kind: CellKind,
    pub framework: CellFramework,
    /// CUDA version for CUDA cells (`13.0`: torch's, or for tvm-ffi the nvcc's).
    pub backend_version: Option<String>,
    pub cmake: Tool,
    pub ninja: Tool,
    pub cxx: Tool,
    pub nvcc: Option<Tool>,
    /// The `[kernel.*]` tables compiled in this cell, in build.toml order.
    pub kernels: Vec<String>,
    /// Per CUDA kernel: the resolved capabilities (`["7.5", "9.0a"]`).
    pub cuda_capabilities: BTreeMap<String, Vec<String>>,
    /// Warning when the cell is not one of the bundle matrix.
    pub outside_bundle: Option<String>,
    /// Notes on what the cell leaves out: per CUDA kernel, the `cuda-capabilities` the nvcc
    /// found cannot build (they are skipped, the rest is built).
    pub notes: Vec<String>,
    /// The capabilities asked for with `--cuda-capabilities`, when they left out some of what
    /// a CUDA kernel publishes (recorded as `build.capabilities-only`).
    pub capabilities_only: Option<Vec<String>>,
    /// [`HostToolchain::package_set`].
    pub package_set: Option<String>,
    /// [`HostToolchain::hermetic`].
    pub hermetic: bool,
    /// The manylinux policy the variant must meet ([`HostToolchain::manylinux`]).
    pub manylinux: Option<String>,
}

/// Decide the cell this host builds for `backend`, or say why it cannot.
///
/// Errors (the reason, naming what to install or change): no usable torch (for `[torch]`) or
/// tvm_ffi (for `[tvm-ffi]`, [`super::tvm_ffi::probe`]), no CMake, Ninja or C++ compiler, a
/// torch without the backend (a CPU-only torch for CUDA), no nvcc (of torch's CUDA version
/// for a torch cell), a backend this version does not build natively (ROCm, XPU, Metal), the
/// cell outside the kernel's `[torch]`/`[general.cuda]` bounds, or CUDA capabilities this CUDA
/// cannot build.
pub fn plan_cell(config: &BuildConfig, backend: Backend, host: &HostToolchain) -> Result<NativeCell, String> {
    let system = matrix::host_system();
    if !matches!(backend, Backend::Cpu | Backend::Cuda) {
        let tool = match (backend, &config.framework) {
            (Backend::Rocm, Framework::TvmFfi(_)) => "hipcc",
            (Backend::Rocm, _) => "hipcc and a ROCm torch",
            (Backend::Xpu, Framework::TvmFfi(_)) => "icpx",
            (Backend::Xpu, _) => "icpx and an XPU torch",
            (Backend::Metal, _) => "xcrun metal on macOS",
            _ => "a toolchain",
        };
        return Err(format!(
            "native `{backend}` builds need {tool}; this version builds cpu and cuda cells natively (generate the project with `kernel-builder create-pyproject`)"
        ));
    }
    let framework = match &config.framework {
        Framework::TvmFfi(_) => CellFramework::TvmFfi(host.tvm_ffi()?.clone()),
        _ => {
            let torch = host.torch()?.clone();
            if system.ends_with("-linux") && !torch.cxx11_abi {
                return Err(format!(
                    "torch {} in `{}` uses the pre-C++11 ABI, which the build matrix does not build; use a torch built with the C++11 ABI",
                    torch.version, host.python
                ));
            }
            CellFramework::Torch(torch)
        }
    };
    let (cmake, ninja, cxx) = base_tools(host, framework.executable())?;
    let (backend_version, nvcc) = match (backend, &framework) {
        (Backend::Cuda, CellFramework::Torch(torch)) => {
            let cuda = torch.cuda.clone().ok_or_else(|| {
                format!(
                    "torch {} in `{}` is not a CUDA build (torch.version.cuda is None); install a CUDA torch",
                    torch.version, host.python
                )
            })?;
            let want = WantCuda { cuda: &cuda, torch_version: &torch.version };
            let nvcc = match host.provisioned.as_ref().and_then(|p| p.nvcc.clone()) {
                Some(pinned) => nvcc_tool(pinned, Some(want))?,
                None => find_nvcc(&torch.purelib, &torch.executable, Some(want))?,
            };
            (Some(cuda), Some(nvcc))
        }
        (Backend::Cuda, CellFramework::TvmFfi(f)) => {
            // The CUDA of a tvm-ffi cell is the nvcc's (`13.0.88` → `13.0`).
            let nvcc = find_nvcc(&f.purelib, &f.executable, None)?;
            let v = Version::parse(&nvcc.version).map_err(|e| format!("`{}`: {e}", nvcc.path))?;
            (Some(format!("{}.{}", v.part(0), v.part(1))), Some(nvcc))
        }
        _ => (None, None),
    };
    let (min, max) = config.framework.torch_bounds();
    if let Some(torch) = framework.torch() {
        let tv = torch.public_version();
        if min.is_some_and(|m| tv < *m) || max.is_some_and(|m| tv > *m) {
            return Err(format!(
                "torch {} in `{}` is outside `[torch]` minver/maxver of `{}`; use a Python environment with a torch in range",
                torch.version, host.python, config.path
            ));
        }
    }
    let bv = backend_version.as_deref().map(|v| Version::parse(v).map_err(|e| e.to_string())).transpose()?;
    if backend == Backend::Cuda {
        let g = &config.general.cuda;
        let cuda = bv.as_ref().expect("CUDA version");
        if g.minver.as_ref().is_some_and(|m| cuda < m) || g.maxver.as_ref().is_some_and(|m| cuda > m) {
            return Err(format!(
                "{} CUDA {cuda} is outside `[general.cuda]` minver/maxver of `{}`",
                if framework.torch().is_some() { "torch's" } else { "nvcc's" },
                config.path
            ));
        }
    }
    let compute = naming::compute_tag(backend, bv.as_ref());
    // `named_version`: what the nearest bundle cells are looked for by, torch's version (also
    // for a stable-ABI cell) or tvm-ffi's major.minor.
    let (kind, variant, named_version) = match (&config.framework, &framework) {
        (Framework::TvmFfi(_), CellFramework::TvmFfi(f)) => {
            let v = f.major_minor()?;
            (CellKind::TvmFfi, naming::tvm_ffi_name(&v, &compute, &system), v)
        }
        (Framework::Torch(t), CellFramework::Torch(torch)) => {
            let tv = torch.public_version();
            match t.stable_abi.for_backend(backend) {
                Some(abi) => {
                    if tv < *abi {
                        return Err(format!(
                            "torch {} is older than the stable ABI target {abi} of `[torch] stable-abi`",
                            torch.version
                        ));
                    }
                    (CellKind::StableAbi, naming::stable_abi_name(abi, &compute, &system), tv)
                }
                None => (CellKind::Torch, naming::torch_arch_name(&tv, &compute, &system), tv),
            }
        }
        _ => {
            return Err(format!(
                "`{}` is a `[{}]` kernel, which compiles nothing for `{backend}`",
                config.path,
                config.framework.section()
            ))
        }
    };

    let kernels: Vec<String> =
        matrix::cells::kernels_in_cell(config, backend, bv.as_ref()).map(|(n, _)| n.clone()).collect();
    if kernels.is_empty() {
        return Err(format!("no `[kernel.*]` of `{backend}` applies to this cell (see `cuda-minver`)"));
    }
    let mut cuda_capabilities = BTreeMap::new();
    let mut notes = Vec::new();
    let mut capabilities_only = None;
    if backend == Backend::Cuda {
        let cuda = backend_version.as_deref().expect("CUDA version");
        for name in &kernels {
            let k = &config.kernels[name];
            let resolved = matrix::resolve_cuda_capabilities_in(
                matrix::data::for_config(config),
                k.cuda_capabilities.as_deref(),
                cuda,
            )?;
            if let (Some(asked), Some(nvcc), false) = (&k.cuda_capabilities, &nvcc, resolved.is_empty()) {
                let dropped =
                    matrix::unbuildable_cuda_capabilities_in(matrix::data::for_config(config), asked, cuda)?;
                if !dropped.is_empty() {
                    notes.push(dropped_capabilities_note(name, &dropped, nvcc, &variant, &resolved));
                }
            }
            if resolved.is_empty() {
                let asked: Vec<String> =
                    k.cuda_capabilities.iter().flatten().map(ToString::to_string).collect();
                let can = matrix::data::for_config(config)
                    .cuda
                    .iter()
                    .find(|(v, _)| Version::parse(v).ok().as_ref() == bv.as_ref());
                return Err(format!(
                    "[kernel.{name}] asks for CUDA capabilities {} and CUDA {cuda} builds none of them (it builds {}); fix `cuda-capabilities`",
                    asked.join(", "),
                    can.map(|(_, t)| t.capabilities.join(", ")).unwrap_or_default()
                ));
            }
            let resolved = match &host.cuda_capabilities_only {
                Some(only) => {
                    let kept = select_capabilities(&resolved, only)
                        .map_err(|e| format!("--cuda-capabilities / {CUDA_CAPABILITIES_VAR}: {e}"))?;
                    if kept.is_empty() {
                        return Err(format!(
                            "[kernel.{name}] builds CUDA capabilities {} here, none of {} asked for with --cuda-capabilities / {CUDA_CAPABILITIES_VAR}; ask for one of them",
                            resolved.join(", "),
                            only.join(", ")
                        ));
                    }
                    if kept.len() < resolved.len() {
                        notes.push(format!(
                            "[kernel.{name}]: compiled for CUDA capabilit{} {} only (--cuda-capabilities / {CUDA_CAPABILITIES_VAR}), not {}; `{variant}` is for checks, and upload refuses it",
                            if kept.len() == 1 { "y" } else { "ies" },
                            kept.join(", "),
                            resolved.iter().filter(|c| !kept.contains(c)).cloned().collect::<Vec<_>>().join(", ")
                        ));
                        capabilities_only = Some(only.clone());
                    }
                    kept
                }
                None => resolved,
            };
            cuda_capabilities.insert(name.clone(), resolved);
        }
    }

    let bundle: Vec<matrix::Cell> = matrix::cells(config, &system, Scope::Bundle)
        .into_iter()
        .filter(|c| c.backend == backend && !c.noarch)
        .collect();
    let outside_bundle = (!bundle.iter().any(|c| c.name == variant)).then(|| {
        let mut near: Vec<(u64, &str)> = bundle
            .iter()
            .map(|c| {
                // A torch cell's torch; a tvm-ffi cell's tvm-ffi (`tvm-ffi01-…` → 0.1, the
                // loader's reading of the digits: one for the major, the rest the minor).
                let ct = match c.kind {
                    CellKind::TvmFfi => match naming::parse_variant_name(&c.name) {
                        Some(naming::ParsedVariant::TvmFfi { tvm_ffi, .. }) => {
                            Version::parse(&format!("{}.{}", &tvm_ffi[..1], &tvm_ffi[1..])).ok()
                        }
                        _ => None,
                    },
                    _ => Version::parse(&c.torch_version).ok(),
                };
                let dt = ct
                    .map(|c| {
                        (c.part(0) as i64 * 100 + c.part(1) as i64
                            - (named_version.part(0) as i64 * 100 + named_version.part(1) as i64))
                            .unsigned_abs()
                    })
                    .unwrap_or(999);
                let db =
                    match (c.backend_version.as_deref().and_then(|v| Version::parse(v).ok()), bv.as_ref()) {
                        (Some(a), Some(b)) => (a.part(0) as i64 * 100 + a.part(1) as i64
                            - (b.part(0) as i64 * 100 + b.part(1) as i64))
                            .unsigned_abs(),
                        _ => 0,
                    };
                (dt * 1000 + db, c.name.as_str())
            })
            .collect();
        near.sort();
        let names: Vec<&str> = near.iter().take(2).map(|(_, n)| *n).collect();
        let in_matrix = matrix::cells(config, &system, Scope::All).iter().any(|c| c.name == variant);
        let which = matrix::data::for_config(config).name.clone();
        format!(
            "`{variant}` ({} from `{}`) is {}; it builds, but the published bundle holds {}",
            framework.describe(),
            host.python,
            if in_matrix {
                format!("not a bundle cell of matrix {which}")
            } else {
                format!("not a cell of matrix {which} at all")
            },
            if names.is_empty() {
                "no compiled cell of this backend".to_owned()
            } else {
                format!("e.g. {}", names.join(", "))
            }
        )
    });

    Ok(NativeCell {
        variant,
        backend,
        kind,
        framework,
        backend_version,
        cmake,
        ninja,
        cxx,
        nvcc,
        kernels,
        cuda_capabilities,
        outside_bundle,
        notes,
        capabilities_only,
        package_set: host.package_set.clone(),
        hermetic: host.package_set.is_some() && host.hermetic,
        manylinux: host.manylinux.clone(),
    })
}

/// The environment variable that, like `--cuda-capabilities`, compiles CUDA kernels for
/// fewer capabilities than they publish.
pub const CUDA_CAPABILITIES_VAR: &str = crate::env::CUDA_CAPABILITIES.name;

/// The entries of `resolved` (a kernel's capabilities for this CUDA: `8.0`, `9.0a`,
/// `12.0+PTX`) that `only` asks for: `X.Y` selects every entry of that major.minor (`9.0`
/// selects `9.0` and `9.0a`), `X.Ya`/`X.Yf` that one only; `+PTX` of an entry is kept.
/// Errors: an entry of `only` that is not a capability.
fn select_capabilities(resolved: &[String], only: &[String]) -> Result<Vec<String>, String> {
    use crate::config::{CapabilitySuffix, CudaCapability};
    let wanted: Vec<CudaCapability> =
        only.iter().map(|o| CudaCapability::parse(o.trim())).collect::<Result<_, _>>()?;
    Ok(resolved
        .iter()
        .filter(|r| {
            CudaCapability::parse(r).is_ok_and(|c| {
                wanted.iter().any(|w| {
                    (w.major, w.minor) == (c.major, c.minor)
                        && (w.suffix == CapabilitySuffix::None || w.suffix == c.suffix)
                })
            })
        })
        .cloned()
        .collect())
}

/// The note for CUDA kernel `kernel` of cell `variant` whose `cuda-capabilities` entries
/// `dropped` the CUDA of `nvcc` cannot build; `built` is what it builds instead.
fn dropped_capabilities_note(
    kernel: &str,
    dropped: &[String],
    nvcc: &Tool,
    variant: &str,
    built: &[String],
) -> String {
    format!(
        "[kernel.{kernel}]: the nvcc found (`{}`, CUDA {}) cannot build CUDA capabilit{} {} of `cuda-capabilities`; `{variant}` holds {} only",
        nvcc.path,
        nvcc.version,
        if dropped.len() == 1 { "y" } else { "ies" },
        dropped.join(", "),
        built.join(", "),
    )
}

/// Where a cell's CMake work happens.
#[derive(Debug, Clone)]
pub enum WorkDir {
    /// The per-kernel directory in the user's cache, kept between builds (incremental).
    /// `ninja_jobs` is Ninja's `-j` when `KERNEL_BUILDER_JOBS` is not set (`None`: Ninja's
    /// default).
    Cache { kernel_dir: Utf8PathBuf, ninja_jobs: Option<usize> },
    /// A fresh temporary directory, removed afterwards (verify, Nix cells).
    Fresh,
}

/// The cache root: `$KERNEL_BUILDER_CACHE_DIR`, `$XDG_CACHE_HOME/kernel-builder`, or
/// `~/.cache/kernel-builder`.
pub fn cache_root() -> anyhow::Result<Utf8PathBuf> {
    let var = |v: &crate::env::Var| v.non_empty().map(Utf8PathBuf::from);
    if let Some(d) = var(&crate::env::CACHE_DIR) {
        return Ok(d);
    }
    if let Some(d) = var(&crate::env::XDG_CACHE_HOME) {
        return Ok(d.join("kernel-builder"));
    }
    let home = var(&crate::env::HOME).context("neither KERNEL_BUILDER_CACHE_DIR, XDG_CACHE_HOME nor HOME is set: set KERNEL_BUILDER_CACHE_DIR to a directory for build work files")?;
    Ok(home.join(".cache/kernel-builder"))
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
}

/// Compute [`CellFacts`] for `cell` with the project in `src_dir` and the build in
/// `build_dir` (both mapped away in the binaries).
pub fn cell_facts(
    config: &BuildConfig,
    cell: &NativeCell,
    uid: &str,
    src_dir: &Utf8Path,
    build_dir: &Utf8Path,
) -> anyhow::Result<CellFacts> {
    let python_name = config.general.python_name();
    let ops_name = op_namespace(&python_name, cell.backend, uid);
    let stable = cell.kind == CellKind::StableAbi;
    // What the framework brings: the C++ standard, definitions, include directories,
    // libraries, and its installation directory, mapped away in the binaries.
    let (std, mut defines, mut includes, mut libs, framework_map) = match &cell.framework {
        CellFramework::Torch(t) => {
            let tv = t.public_version();
            let std = if tv < Version::parse("2.12").expect("version") { "17" } else { "20" };
            let mut defines = vec![
                format!("TORCH_EXTENSION_NAME={ops_name}"),
                "Py_LIMITED_API=0x03090000".to_owned(),
                format!("_GLIBCXX_USE_CXX11_ABI={}", u8::from(t.cxx11_abi)),
            ];
            // What linking torch's CMake targets defines in upstream's build.
            defines.extend(super::parity::torch_interface_defines(&t.torch_dir));
            if let Framework::Torch(tt) = &config.framework {
                if let Some(abi) = tt.stable_abi.for_backend(cell.backend) {
                    defines.push(format!("TORCH_TARGET_VERSION={}", torch_target_version(abi)));
                }
            }
            let lib = t.torch_dir.join("lib");
            // A stable-ABI cell sees torch's stable headers and links its C shim only (`stable_abi`).
            let (includes, mut libs) = if stable {
                (
                    vec![super::stable_abi::include_root(build_dir), t.python_include.clone()],
                    super::stable_abi::link_libraries(&lib, cell.backend),
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
            super::tvm_ffi::CXX_STANDARD,
            super::tvm_ffi::defines(&ops_name),
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
    let mut env = Vec::new();
    let mut cache = BTreeMap::new();
    let mut gencode = BTreeMap::new();
    if cell.backend == Backend::Cuda {
        let nvcc = cell.nvcc.as_ref().expect("CUDA cells have nvcc");
        let root = nvcc.path.parent().and_then(Utf8Path::parent).map(Utf8Path::to_owned).unwrap_or_default();
        includes.push(root.join("include"));
        if root.join("include/cccl").is_dir() {
            includes.push(root.join("include/cccl"));
        }
        let libdir =
            ["lib64", "lib"].iter().map(|d| root.join(d)).find(|d| d.is_dir()).unwrap_or(root.join("lib"));
        let cudart = find_versioned(&libdir, "libcudart.so").with_context(|| {
            format!("no libcudart.so in `{libdir}` (the CUDA runtime); install it (`pip install nvidia-cuda-runtime`)")
        })?;
        libs.push(cudart);
        env.push(("LIBRARY_PATH".to_owned(), libdir.to_string()));
        cache.insert("CMAKE_CUDA_COMPILER".into(), nvcc.path.to_string());
        cache.insert("CMAKE_CUDA_HOST_COMPILER".into(), cell.cxx.path.to_string());
        for (k, caps) in &cell.cuda_capabilities {
            let flags =
                codegen::cuda::gencode_flags(caps).map_err(|e| anyhow::anyhow!("[kernel.{k}]: {e}"))?;
            cache.insert(format!("KB_CUDA_ARCH_FLAGS_{}", codegen::cmake_ident(k)), flags.join(";"));
            gencode.insert(k.clone(), flags);
        }
    }
    let mut warnings = Vec::new();
    let mut dep_maps: Vec<(Utf8PathBuf, String)> = Vec::new();
    for (name, k) in &config.kernels {
        if !cell.kernels.contains(name) {
            continue;
        }
        for d in &k.depends {
            if *d == CppDependency::Torch {
                continue;
            }
            let value = crate::env::DEP.var(&d.name());
            let checkout = codegen::deps::find_checkout(*d, &format!("[kernel.{name}]"), value.as_deref())
                .map_err(anyhow::Error::msg)?;
            let dirs: Vec<&str> = checkout.include_dirs.iter().map(|i| i.as_str()).collect();
            cache.insert(codegen::deps::cmake_var(*d), dirs.join(";"));
            warnings.extend(checkout.warning);
            // Where the checkout lies does not reach the binary (Nix and native builds agree).
            dep_maps.push((checkout.dir, format!("/{}", d.name())));
        }
    }
    // A directory reached through a symbolic link (a cache directory that is a link) reaches
    // the binary under its resolved name too (CMake resolves some paths, the compiler others):
    // both names are mapped.
    let map = |from: &Utf8Path, to: &str| -> Vec<String> {
        let mut names = vec![from.to_owned()];
        names.extend(resolved(from).filter(|r| r != from));
        names.iter().map(|f| format!("-ffile-prefix-map={f}={to}")).collect()
    };
    let mut host_opts: Vec<String> =
        [(src_dir, "."), (build_dir, "."), (framework_map.0.as_path(), framework_map.1)]
            .into_iter()
            .flat_map(|(from, to)| map(from, to))
            .collect();
    host_opts.extend(dep_maps.iter().flat_map(|(dir, to)| map(dir, to)));
    // GCC emits STB_GNU_UNIQUE for function-local statics of inline functions and templates;
    // clang never does and has no such flag.
    let gnu = !cell.cxx.version.contains("clang");
    if gnu {
        // Each kernel's function-local statics stay its own when two are loaded in one process.
        host_opts.push("-fno-gnu-unique".into());
    }
    if stable {
        host_opts.extend(super::stable_abi::compile_options(build_dir, gnu));
    }
    let mut opts: Vec<String> = host_opts.iter().map(|o| format!("$<$<COMPILE_LANGUAGE:CXX>:{o}>")).collect();
    if cell.backend == Backend::Cuda {
        for o in &host_opts {
            opts.push(format!("$<$<COMPILE_LANGUAGE:CUDA>:{}>", xcompiler(o).map_err(anyhow::Error::msg)?));
        }
        if cell.framework.torch().is_some() {
            // The nvcc options torch's CMake gives upstream's build (`parity`).
            opts.extend(
                super::parity::TORCH_NVCC_FLAGS.iter().map(|f| format!("$<$<COMPILE_LANGUAGE:CUDA>:{f}>")),
            );
        }
    }
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
    Ok(CellFacts { ops_name, cache, gencode, env, warnings })
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

/// The module's file name suffix: `.so` for a tvm-ffi cell (a library `tvm_ffi` opens, not a
/// Python extension), `.abi3.so` (CPython's limited API) otherwise.
pub fn module_suffix(kind: CellKind) -> &'static str {
    match kind {
        CellKind::TvmFfi => ".so",
        _ => ".abi3.so",
    }
}

/// nvcc's `-Xcompiler` form of the host compiler option `opt`. nvcc splits an unquoted value
/// at whitespace and commas when it builds the host compiler's command, so an option holding
/// a path with a space (a cache directory or TMPDIR such as `/home/a b/…`) is passed in double
/// quotes, which nvcc strips; one without whitespace or commas is passed as it is.
///
/// Errors: `opt` holds `"`, `\`, `$` or a backquote, which nvcc's quoting cannot carry; the
/// message names the option and where its paths come from.
fn xcompiler(opt: &str) -> Result<String, String> {
    if let Some(c) = opt.chars().find(|c| matches!(c, '"' | '\\' | '$' | '`')) {
        return Err(format!(
            "the host compiler option `{opt}` holds `{c}`, which nvcc cannot pass to the host compiler; \
             its path comes from the work directory (set KERNEL_BUILDER_CACHE_DIR, or TMPDIR for \
             `verify`, to a directory whose path has no `\"`, `\\`, `$` or backquote), the torch \
             installation or a dependency checkout (move it to such a path)"
        ));
    }
    if opt.chars().any(|c| c.is_whitespace() || c == ',') {
        Ok(format!("-Xcompiler=\"{opt}\""))
    } else {
        Ok(format!("-Xcompiler={opt}"))
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
fn cache_file(facts: &CellFacts) -> String {
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
struct ConfigureRecord {
    /// The inputs CMake reads only at the first configure of a build directory and caches
    /// (`CMakeCache.txt`, `CMakeFiles/`): the tools' paths and versions, each of
    /// [`BUILD_ENV`] (and `CC`, `CXX`, `CUDACXX`) with its value or `null`,
    /// the extra environment. A change starts the build directory afresh.
    first_configure: BTreeMap<String, Option<String>>,
    /// The `-C` cache script: a change re-runs the configure in place (incremental).
    cache_script: String,
}

impl ConfigureRecord {
    fn new(cell: &NativeCell, facts: &CellFacts, cache_script: &str) -> Self {
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

/// Run a build step; on failure the error shows the command and the tail of its output.
///
/// The step runs in a process group of its own ([`crate::interrupt::in_own_group`]: an
/// interruption stops it and the compilers it started), with `TMPDIR` set to `tmp_dir` (the
/// cell's own, removed after the build and on interruption, so nvcc's `tmpxft_*` files never
/// stay behind in the user's `$TMPDIR`). It is not started once an interruption arrived.
fn run_step(
    what: &str,
    prog: &Utf8Path,
    args: &[String],
    env: &[(String, String)],
    tmp_dir: &Utf8Path,
    steps: Option<super::progress::StepSink>,
) -> anyhow::Result<()> {
    anyhow::ensure!(!crate::interrupt::interrupted(), "{what} not started: interrupted");
    // One locale for every tool: messages (and anything a tool might embed) do not depend on
    // the user's language settings.
    let mut cmd = duct::cmd(prog.as_str(), args)
        .stdin_null()
        .stderr_to_stdout()
        .unchecked()
        .env("LC_ALL", "C")
        .env("TMPDIR", tmp_dir.as_str())
        .before_spawn(|c| {
            crate::interrupt::in_own_group(c);
            crate::process::dies_with_parent(c);
            Ok(())
        });
    for (k, v) in env {
        cmd = cmd.env(k, v);
    }
    let out = match steps {
        None => cmd.stdout_capture().run(),
        Some(sink) => run_reporting_steps(&cmd, &*sink),
    }
    .with_context(|| format!("cannot run `{prog}` ({what})"))?;
    if !out.status.success() {
        let text = String::from_utf8_lossy(&out.stdout);
        let shown: Vec<String> = std::iter::once(prog.to_string()).chain(args.iter().cloned()).collect();
        anyhow::bail!(
            "{what} failed ({}): `{}`\n{}--- last lines of its output ---\n{}\n---",
            out.status,
            shown.join(" "),
            error_lines(&text),
            clip_lines(&tail(&text, 40), 400)
        );
    }
    Ok(())
}

/// Run `cmd` (stdout and stderr joined), reading its output line by line as it comes and
/// passing each Ninja counter (`[n/m]`, [`super::progress::ninja_counter`]) to `sink`; the
/// whole output comes back as [`duct::Expression::run`] with `stdout_capture` gives it.
fn run_reporting_steps(
    cmd: &duct::Expression,
    sink: &dyn Fn(u64, u64),
) -> std::io::Result<std::process::Output> {
    use std::io::BufRead;
    let reader = cmd.reader()?;
    let mut text = Vec::new();
    let mut lines = std::io::BufReader::new(&reader);
    loop {
        let start = text.len();
        if lines.read_until(b'\n', &mut text)? == 0 {
            break;
        }
        if let Some((done, total)) = super::progress::ninja_counter(&String::from_utf8_lossy(&text[start..]))
        {
            sink(done, total);
        }
    }
    drop(lines);
    // At end of output the reader has waited for the process: its status is there.
    let status = match reader.try_wait()? {
        Some(out) => out.status,
        None => return Err(std::io::Error::other("the process closed its output but did not exit")),
    };
    Ok(std::process::Output { status, stdout: text, stderr: Vec::new() })
}

/// Write `bytes` to `path` unless it already holds exactly them (keeps mtimes, so Ninja
/// rebuilds nothing for unchanged files). Creates parent directories.
fn sync_file(path: &Utf8Path, bytes: &[u8]) -> anyhow::Result<bool> {
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
fn sync_copy(src: &Utf8Path, dest: &Utf8Path) -> anyhow::Result<bool> {
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
    crate::fsutil::copy_new_file(src, dest, super::noarch::FILE_MODE)?;
    Ok(true)
}

/// Where a cell's compilers keep their temporary files (their `TMPDIR`), and whether that is
/// outside `work_dir`: `<work_dir>/tmp`, unless that path holds whitespace or a comma, which
/// nvcc's fatbinary step splits its arguments at (seen: every CUDA compile failed with "… is
/// not in 'keyword=value' format" under a cache directory `my cache, here`); then a fresh
/// `kernel-builder-tmp-*` directory in the system's temporary directory (`$TMPDIR`).
///
/// Errors: that directory cannot be created, or its path is not UTF-8.
fn compilers_tmp_dir(work_dir: &Utf8Path) -> anyhow::Result<(Utf8PathBuf, bool)> {
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
struct TmpDir {
    path: Utf8PathBuf,
    _registered: Option<crate::interrupt::Registered>,
}

impl TmpDir {
    /// Create `path` afresh (what an earlier killed build left there is removed); `register`:
    /// also remove it on interruption (a work directory in the cache, which stays; a fresh
    /// one is removed whole).
    fn create(path: &Utf8Path, register: bool) -> anyhow::Result<TmpDir> {
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

/// nvcc's `--threads` from `KERNEL_BUILDER_NVCC_THREADS` ([`super::parity::nvcc_threads_var`]).
pub fn nvcc_threads_from_env() -> anyhow::Result<Option<usize>> {
    super::parity::nvcc_threads_var(crate::env::NVCC_THREADS.os().as_deref())
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

/// Build the compiled variant `cell` of the kernel (`source`, `config`) into
/// `out_variant_dir` (which must not exist; its parent must). Returns warnings.
///
/// Errors: a fact that cannot be computed (no CUDA runtime library, a dependency without a
/// checkout), a generated path that the source set also has, CMake or Ninja failing (the
/// error shows the command and the tail of its output). On error `out_variant_dir` may be
/// partly written; the caller writes into a temporary directory.
pub fn build_cell(
    source: &SourceSet,
    config: &BuildConfig,
    cell: &NativeCell,
    ids: &BuildIds,
    out_variant_dir: &Utf8Path,
    work: &WorkDir,
) -> anyhow::Result<Vec<Warning>> {
    // Before anything is configured: a bad value would reach Ninja only after CMake ran.
    let env_jobs = jobs_from_env()?;
    let nvcc_threads = nvcc_threads_from_env()?;
    let mut warnings: Vec<Warning> = Vec::new();
    if let Some(w) = &cell.outside_bundle {
        warnings.push(Warning { path: None, message: w.clone() });
    }
    let _fresh;
    let work_dir: Utf8PathBuf = match work {
        WorkDir::Cache { kernel_dir, .. } => {
            let canon =
                kernel_dir.canonicalize_utf8().with_context(|| format!("cannot resolve `{kernel_dir}`"))?;
            let key: String =
                sha2::Sha256::digest(canon.as_str().as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
            let rel = Utf8PathBuf::from("cmake-v1").join(&key[..16]).join(&cell.variant);
            let d = crate::fsutil::inside(&cache_root()?, &rel)?; // no link leads the build out of it
            std::fs::create_dir_all(&d).with_context(|| format!("cannot create the work directory `{d}`"))?;
            // So that `native-cache` can name the kernel a work directory belongs to.
            super::workdirs::record_kernel(d.parent().unwrap_or(&d), &canon)?;
            d
        }
        WorkDir::Fresh => {
            let t = tempfile::Builder::new()
                .prefix("kernel-builder-cell-")
                .tempdir()
                .context("cannot create a temporary work directory")?;
            let p = Utf8PathBuf::from_path_buf(t.path().to_owned())
                .map_err(|p| anyhow::anyhow!("non-UTF-8 temporary path {}", p.display()))?;
            // Interrupted while CMake or Ninja runs in it: removed before the process exits.
            _fresh = (crate::interrupt::remove_on_interrupt(&p, crate::interrupt::Removal::All), t);
            p
        }
    };
    let _work_lock = crate::process::lock_work_dir(&work_dir)?; // no orphan of a killed build shares it
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
    let src_dir = work_dir.join("src");
    let build_dir = work_dir.join("build");
    // The compilers' temporary files (nvcc's `tmpxft_*`, megabytes per CUDA source): in the
    // cell's work directory where nvcc can take its path, removed when the build ends (any
    // way) or is interrupted. Not a fact of the cell: the outputs do not depend on where it is.
    let (tmp_dir, outside) = compilers_tmp_dir(&work_dir)?;
    let _tmp = TmpDir::create(&tmp_dir, outside || matches!(work, WorkDir::Cache { .. }))?;
    let facts = cell_facts(config, cell, &ids.uid, &src_dir, &build_dir)?;
    warnings.extend(facts.warnings.iter().map(|w| Warning { path: None, message: w.clone() }));

    // The project: the source set plus the generated files.
    let project = codegen::generate(config, source.root(), &Layout::default())?;
    let mut wanted: Vec<Utf8PathBuf> = Vec::new();
    for f in source.files() {
        if project.file(f.rel.as_str()).is_some() {
            warnings.push(Warning {
                path: Some(f.rel.clone()),
                message:
                    "has the path of a generated file; the generated one is used (remove it from the kernel)"
                        .into(),
            });
            continue;
        }
        sync_copy(&f.abs, &src_dir.join(&f.rel))?;
        wanted.push(f.rel.clone());
    }
    for f in &project.files {
        sync_file(&src_dir.join(&f.path), f.contents.as_bytes())?;
        wanted.push(f.path.clone());
    }
    remove_unwanted(&src_dir, &wanted)?;

    // Configure when the facts changed or nothing is configured yet; then build. CMake reads
    // the compilers, the generator and the flag variables (CXXFLAGS, …) only at the first
    // configure of a build directory: when one of those differs from the last configure that
    // succeeded (or none did), the build directory is started afresh.
    let cell_text = cache_file(&facts);
    let record = ConfigureRecord::new(cell, &facts, &cell_text);
    let configured = build_dir.join("kernel-builder-cell.configured");
    let last =
        std::fs::read(&configured).ok().and_then(|b| serde_json::from_slice::<ConfigureRecord>(&b).ok());
    if last.as_ref().is_none_or(|l| l.first_configure != record.first_configure) && build_dir.exists() {
        std::fs::remove_dir_all(&build_dir)
            .with_context(|| format!("cannot remove the stale build directory `{build_dir}`"))?;
    }
    std::fs::create_dir_all(&build_dir).with_context(|| format!("cannot create `{build_dir}`"))?;
    if let (CellKind::StableAbi, Some(t)) = (cell.kind, cell.framework.torch()) {
        super::stable_abi::prepare_include_root(&build_dir, &t.torch_dir.join("include"))?;
    }
    let cell_file = build_dir.join("kernel-builder-cell.cmake");
    sync_file(&cell_file, cell_text.as_bytes())?;
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
            &tmp_dir,
            None,
        )?;
        let text = serde_json::to_vec_pretty(&record).context("cannot serialise the configure record")?;
        sync_file(&configured, &text)?;
    }
    let mut ninja_args = vec!["-C".to_owned(), build_dir.to_string()];
    let mut jobs = match (env_jobs, work) {
        (Some(n), _) | (None, &WorkDir::Cache { ninja_jobs: Some(n), .. }) => Some(n),
        _ => None,
    };
    let mut compile_env = facts.env.clone();
    if cell.backend == Backend::Cuda {
        // nvcc compiles a source's architectures on `threads` threads; Ninja runs fewer
        // compiles at once so that the two together fill the cores
        // (`parity::default_nvcc_threads`).
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        let threads = nvcc_threads.unwrap_or_else(|| {
            let cuda_sources: usize = config
                .kernels
                .iter()
                .filter(|(n, _)| cell.kernels.contains(n))
                .filter_map(|(_, k)| codegen::expand(source.root(), &k.src).ok())
                .map(|s| s.iter().filter(|p| codegen::source_kind(p) == codegen::SourceKind::Cuda).count())
                .sum();
            let targets = facts.gencode.values().map(Vec::len).max().unwrap_or(1);
            super::parity::default_nvcc_threads(cores, cuda_sources, targets)
        });
        let user = crate::env::NVCC_APPEND_FLAGS.get();
        if let Some(flags) = super::parity::nvcc_append_flags(user.as_deref(), threads) {
            compile_env.push(("NVCC_APPEND_FLAGS".to_owned(), flags));
            if env_jobs.is_none() {
                jobs = Some(super::parity::ninja_jobs_with_threads(jobs, cores, threads));
            }
        }
    }
    if let Some(n) = jobs {
        ninja_args.extend(["-j".to_owned(), n.to_string()]);
    }
    // The compiler sees the mirrored sources; its messages name the kernel's own files, so an
    // editor can jump to them.
    let steps = super::progress::current_steps();
    run_step("the compile (ninja)", &cell.ninja.path, &ninja_args, &compile_env, &tmp_dir, steps).map_err(
        |e| {
            let root = source.root().canonicalize_utf8().unwrap_or_else(|_| source.root().to_owned());
            let text = e.to_string().replace(&format!("{src_dir}/"), &format!("{root}/"));
            let listed: Vec<String> = source.files().iter().map(|f| f.rel.to_string()).collect();
            let hint = super::stable_abi::compile_hint(&text)
                .filter(|_| cell.kind == CellKind::StableAbi)
                .or_else(|| {
                    super::parity::compile_hint(
                        &text,
                        &listed,
                        &super::parity::kernel_files(source.root(), 20_000),
                    )
                });
            match hint {
                Some(hint) => anyhow::anyhow!("{text}\n{hint}"),
                None => anyhow::anyhow!("{text}"),
            }
        },
    )?;
    let module = format!("{}{}", facts.ops_name, module_suffix(cell.kind));
    let built = build_dir.join(&module);
    anyhow::ensure!(built.is_file(), "the build wrote no `{built}`");

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
        copy_source(f, &dest, super::noarch::FILE_MODE)?;
    }
    let ops_py = match cell.kind {
        CellKind::TvmFfi => super::tvm_ffi::ops_py(&facts.ops_name, &cell.variant),
        _ => compiled_ops_py(&facts.ops_name, &cell.variant),
    };
    write_file(&out_variant_dir.join("_ops.py"), ops_py.as_bytes())?;
    let so = std::fs::read(&built).with_context(|| format!("cannot read `{built}`"))?;
    write_file(&out_variant_dir.join(&module), &so)?;
    let (manylinux, abi_warnings) = check_abi(out_variant_dir, config, cell)?;
    warnings.extend(abi_warnings);

    let digest = crate::hash::digest::variant_digest(out_variant_dir)
        .with_context(|| format!("cannot compute the digest of `{out_variant_dir}`"))?;
    let g = &config.general;
    let archs = (cell.backend == Backend::Cuda).then(|| {
        let mut all: Vec<String> = cell.cuda_capabilities.values().flatten().cloned().collect();
        super::metadata::sort_cuda_archs(&mut all);
        all
    });
    let mut toolchain = BTreeMap::new();
    match &cell.framework {
        CellFramework::Torch(t) => toolchain.insert("torch".to_owned(), t.version.clone()),
        CellFramework::TvmFfi(f) => toolchain.insert("tvm-ffi".to_owned(), f.version.clone()),
    };
    toolchain.insert("python".to_owned(), cell.framework.python_version().to_owned());
    toolchain.insert("cxx".to_owned(), cell.cxx.version.clone());
    toolchain.insert("cmake".to_owned(), cell.cmake.version.clone());
    toolchain.insert("ninja".to_owned(), cell.ninja.version.clone());
    if let Some(n) = &cell.nvcc {
        toolchain.insert("nvcc".to_owned(), n.version.clone());
    }
    let metadata = Metadata {
        name: g.name.clone(),
        id: facts.ops_name.clone(),
        version: g.version,
        license: g.license.clone(),
        upstream: g.upstream.clone(),
        source: g.source.clone(),
        python_depends: g.python_depends_for(cell.backend),
        kernel_depends: g.kernel_depends_for(cell.backend),
        backend: BackendInfo { kind: cell.backend, archs },
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
/// `build.manylinux`) and warnings: without a requested policy, each reference that keeps the
/// variant from [`BUNDLE_MANYLINUX`], naming the symbol and the distributions it will not load
/// on.
///
/// Errors: an abi3 or torch stable-ABI violation; with a requested policy
/// ([`NativeCell::manylinux`]), any violation of it; each names the library and the symbol.
pub fn check_abi(
    variant_dir: &Utf8Path,
    config: &BuildConfig,
    cell: &NativeCell,
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
    for (lib, v) in report.violations() {
        let name = lib.file_name().unwrap_or(lib.as_str());
        if v.is_manylinux() && !enforced {
            warnings.push(Warning { path: None, message: format!("`{}`: `{name}` is {v}", cell.variant) });
        } else {
            errors.push(format!("`{name}`: {v}"));
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

/// A compiled backend this host cannot build, and why (what is missing).
#[derive(Debug, Clone, Serialize)]
pub struct SkippedBackend {
    pub backend: Backend,
    /// The cell not built, when one cell of the backend is meant (a pinned bundle cell).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_through_a_link_resolves_to_its_target_even_where_it_does_not_exist_yet() {
        let t = tempfile::tempdir().unwrap();
        let root = Utf8Path::from_path(t.path()).unwrap().canonicalize_utf8().unwrap();
        std::fs::create_dir_all(root.join("real/trees")).unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("link")).unwrap();
        assert_eq!(resolved(&root.join("link/trees/k/torch")), Some(root.join("real/trees/k/torch")));
        assert_eq!(resolved(&root.join("real/trees")), Some(root.join("real/trees")));
    }

    #[test]
    fn xcompiler_quotes_spaces_and_commas_and_refuses_what_nvcc_cannot_carry() {
        assert_eq!(
            xcompiler("-ffile-prefix-map=/c/kb/src=.").unwrap(),
            "-Xcompiler=-ffile-prefix-map=/c/kb/src=."
        );
        assert_eq!(
            xcompiler("-ffile-prefix-map=/home/a b/kb/src=.").unwrap(),
            "-Xcompiler=\"-ffile-prefix-map=/home/a b/kb/src=.\""
        );
        assert_eq!(
            xcompiler("-ffile-prefix-map=/tmp/x,y=.").unwrap(),
            "-Xcompiler=\"-ffile-prefix-map=/tmp/x,y=.\""
        );
        assert_eq!(xcompiler("-fno-gnu-unique").unwrap(), "-Xcompiler=-fno-gnu-unique");
        for bad in ["/tmp/a\"b", "/tmp/a\\b", "/tmp/$HOME", "/tmp/a`b"] {
            let err = xcompiler(&format!("-ffile-prefix-map={bad}=.")).unwrap_err();
            assert!(
                err.starts_with(&format!("the host compiler option `-ffile-prefix-map={bad}=.` holds `")),
                "{err}"
            );
            assert!(err.contains("set KERNEL_BUILDER_CACHE_DIR, or TMPDIR for `verify`"), "{err}");
        }
    }

    #[test]
    fn capabilities_are_selected_by_major_minor_or_exactly_with_a_suffix() {
        let resolved: Vec<String> =
            ["7.5", "8.0", "9.0", "9.0a", "12.0+PTX"].iter().map(|c| c.to_string()).collect();
        let sel = |only: &[&str]| {
            select_capabilities(&resolved, &only.iter().map(|c| c.to_string()).collect::<Vec<_>>())
        };
        assert_eq!(sel(&["9.0"]).unwrap(), ["9.0", "9.0a"]);
        assert_eq!(sel(&["9.0a"]).unwrap(), ["9.0a"]);
        assert_eq!(sel(&["8.0", "12.0"]).unwrap(), ["8.0", "12.0+PTX"]);
        assert!(sel(&["8.6"]).unwrap().is_empty());
        assert!(sel(&["sm_90"]).unwrap_err().contains("is not a CUDA capability"));
    }

    #[test]
    fn dropped_capabilities_are_named_with_the_nvcc() {
        let nvcc = Tool { path: "/cuda/bin/nvcc".into(), version: "13.0.88".into() };
        assert_eq!(
            dropped_capabilities_note("relu", &["5.0".into()], &nvcc, "torch211-cxx11-cu130-x86_64-linux", &["9.0".into()]),
            "[kernel.relu]: the nvcc found (`/cuda/bin/nvcc`, CUDA 13.0.88) cannot build CUDA capability 5.0 of `cuda-capabilities`; `torch211-cxx11-cu130-x86_64-linux` holds 9.0 only"
        );
        assert_eq!(
            dropped_capabilities_note("k", &["5.0".into(), "6.1".into()], &nvcc, "v", &["8.0".into(), "9.0".into()]),
            "[kernel.k]: the nvcc found (`/cuda/bin/nvcc`, CUDA 13.0.88) cannot build CUDA capabilities 5.0, 6.1 of `cuda-capabilities`; `v` holds 8.0, 9.0 only"
        );
    }

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
