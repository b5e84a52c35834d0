//! Host toolchain discovery: what the machine this runs on offers a native compiled cell.
//!
//! torch comes from a Python environment (`--python`, default `python3`): its version, its
//! CUDA / ROCm / XPU build and its C++ ABI ([`TorchFacts`], one `python -c` run, cached in
//! `<cache>/probe-v1/` while the interpreter and torch's `version.py` keep their size and
//! modification time). A `[tvm-ffi]` kernel takes tvm_ffi from the same environment
//! ([`super::tvm_ffi`]). CMake and Ninja are looked for next to the interpreter, then on PATH;
//! the C++ compiler is `CXX`, else `c++`, `g++`, `clang++` on PATH; nvcc is `CUDACXX`,
//! `CUDA_HOME/bin`, PATH, then PyPI's `nvidia/cu<major>/bin` in the environment. A cell
//! provisioned from pinned wheels ([`super::provision`]) gives its torch facts and tools
//! instead ([`HostToolchain::provisioned`]). What a cell then builds with these is decided in
//! [`crate::assemble::compiled::plan`].

use std::sync::OnceLock;

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};
use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use super::tvm_ffi::TvmFfiFacts;
use crate::config::Version;
use crate::error::{Error, Kind};
use crate::fsutil::cache_root;
use crate::output::tail;

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

    /// The C++ standard torch's headers require (`"17"`, `"20"`), read from the guard at the
    /// top of `include/ATen/ATen.h` (`#if … __cplusplus < 202002L` / `#error C++20 or later …`),
    /// so a pinned wheel's is known from its files, without importing it. Torch's release rule
    /// (C++20 from 2.12) when the header is missing or has no guard.
    pub fn cxx_standard(&self) -> &'static str {
        let header = self.torch_dir.join("include/ATen/ATen.h");
        // The guard is in the first lines; a cap keeps a strange file from being read whole.
        let text = crate::fsutil::read_upto(&header, 64 * 1024).unwrap_or_default();
        match required_cplusplus(&String::from_utf8_lossy(&text)) {
            Some(v) if v >= 202302 => "23",
            Some(v) if v >= 202002 => "20",
            Some(_) => "17",
            None if self.public_version() < Version::parse("2.12").expect("version") => "17",
            None => "20",
        }
    }
}

/// The highest `__cplusplus` value a header's `__cplusplus < NNNNNNL` comparisons require.
fn required_cplusplus(header: &str) -> Option<u32> {
    header
        .split("__cplusplus")
        .skip(1)
        .filter_map(|after| {
            let rest = after.trim_start().strip_prefix('<')?.trim_start();
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .max()
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
    torch: OnceLock<anyhow::Result<TorchFacts>>,
    tvm_ffi: OnceLock<anyhow::Result<TvmFfiFacts>>,
}

/// CMake, Ninja and (for a CUDA cell) nvcc of a cell provisioned from pinned wheels.
#[derive(Debug, Clone)]
pub struct ProvisionedTools {
    pub cmake: Utf8PathBuf,
    pub ninja: Utf8PathBuf,
    pub nvcc: Option<Utf8PathBuf>,
    /// What the tools and torch were unpacked from, for the cell's key; `None` for a Nix
    /// cell's trees (store paths, named by their own hashes).
    pub pins: Option<PinnedInputs>,
}

/// What a cell provisioned from pins is built from, as its cache key holds it: every wheel
/// (file name → pinned sha256) and the recorded hash of each unpacked tree (`torch`, `toolkit`,
/// `tools`), checked against the tree on every use ([`crate::toolchain::seal`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinnedInputs {
    pub wheels: std::collections::BTreeMap<String, String>,
    pub trees: std::collections::BTreeMap<String, String>,
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

    /// torch's facts, probed once.
    ///
    /// Errors ([`Kind::Toolchain`], each call a copy of the first probe's,
    /// [`crate::error::copy`]): no such interpreter, no torch, a probe that fails.
    pub fn torch(&self) -> anyhow::Result<&TorchFacts> {
        self.torch.get_or_init(|| probe_torch(&self.python)).as_ref().map_err(crate::error::copy)
    }

    /// tvm_ffi's facts (for `[tvm-ffi]` kernels), probed once.
    ///
    /// Errors (as [`HostToolchain::torch`]'s): no such interpreter, no `tvm_ffi` (the message
    /// says to install `apache-tvm-ffi`), a broken install.
    pub fn tvm_ffi(&self) -> anyhow::Result<&TvmFfiFacts> {
        self.tvm_ffi.get_or_init(|| super::tvm_ffi::probe(&self.python)).as_ref().map_err(crate::error::copy)
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
/// takes seconds) and caching the result. Errors: [`run_probe`]'s.
fn probe_torch(python: &Utf8Path) -> anyhow::Result<TorchFacts> {
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

/// torch's facts as `python` reports them, and the JSON they were read from (what the cache
/// keeps).
///
/// Errors (of [`Kind::Toolchain`], each saying what to install or pass): the interpreter
/// cannot be run, has no torch, fails the probe or prints something else than the facts.
fn run_probe(python: &Utf8Path) -> anyhow::Result<(TorchFacts, serde_json::Value)> {
    let unusable = |message: String| anyhow::Error::from(Error::new(Kind::Toolchain, message));
    let out = crate::process::Cmd::new(python.as_str()).args(["-c", PROBE]).output().map_err(|e| {
        unusable(format!(
            "cannot run the Python interpreter `{python}` ({}); pass --python PATH to a Python with torch",
            std::error::Error::source(&e).map_or_else(|| e.to_string(), |c| c.to_string())
        ))
    })?;
    if !out.success() {
        let err = &out.stderr;
        if err.contains("No module named 'torch'") {
            return Err(unusable(format!(
                "`{python}` has no torch; install it there (`{python} -m pip install torch`) or pass --python PATH to a Python that has it"
            )));
        }
        // A Python that dies silently (`--python /bin/false`) leaves nothing to show: say what ran.
        let detail = if err.trim().is_empty() {
            format!("it exited with {} and printed nothing; is it a Python with torch?", out.status)
        } else {
            tail(err, 20)
        };
        return Err(unusable(format!("`{python}` could not report torch's build facts:\n{detail}")));
    }
    let unexpected =
        |e: serde_json::Error| unusable(format!("`{python}` printed unexpected torch facts ({e})"));
    let raw: serde_json::Value = serde_json::from_str(&out.stdout).map_err(unexpected)?;
    let facts = serde_json::from_value(raw.clone()).map_err(unexpected)?;
    Ok((facts, raw))
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

/// `prog --version`, run to its end (any status). Errors ([`Kind::Toolchain`]): `prog`
/// cannot be run.
fn version_output(prog: &Utf8Path) -> anyhow::Result<crate::process::Output> {
    crate::process::Cmd::new(prog.as_str()).arg("--version").output().map_err(|e| {
        let message = format!(
            "cannot run `{prog}` ({})",
            std::error::Error::source(&e).map_or_else(|| e.to_string(), |c| c.to_string())
        );
        anyhow::Error::from(Error::new(Kind::Toolchain, message))
    })
}

/// `prog --version`'s first line. Errors: [`version_output`]'s.
pub(crate) fn version_line(prog: &Utf8Path) -> anyhow::Result<String> {
    let out = version_output(prog)?;
    let text = out.stdout;
    Ok(text.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_owned())
}

/// The tools every compiled cell needs: CMake, Ninja and a C++ compiler (`executable`: the
/// interpreter the framework probe ran, see [`HostToolchain::python_bin_dir`]).
///
/// Errors ([`Kind::Toolchain`], saying what to install or set): a tool not found, or one that
/// cannot be run.
pub(crate) fn base_tools(host: &HostToolchain, executable: &Utf8Path) -> anyhow::Result<(Tool, Tool, Tool)> {
    let near: Vec<Utf8PathBuf> = host.python_bin_dir(executable).into_iter().collect();
    let unusable = |message: String| anyhow::Error::from(Error::new(Kind::Toolchain, message));
    let missing = |what: &str, install: &str| {
        unusable(format!("{what} was not found next to `{}` or on PATH; install it ({install})", host.python))
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
        Some(c) => find_program(c, &[])
            .ok_or_else(|| unusable(format!("`CXX` is `{c}`, which is not an executable")))?,
        None => ["c++", "g++", "clang++"].iter().find_map(|n| find_program(n, &[])).ok_or_else(|| {
            unusable("no C++ compiler on PATH (c++, g++, clang++); install one (e.g. `apt-get install g++`) or set CXX".to_owned())
        })?,
    };
    let v = |p: Utf8PathBuf| -> anyhow::Result<Tool> { Ok(Tool { version: version_line(&p)?, path: p }) };
    Ok((v(cmake)?, v(ninja)?, v(cxx)?))
}

/// The CUDA an nvcc must be: torch's (`13.0`) for a torch cell; `None` for a tvm-ffi cell,
/// which takes the CUDA of the nvcc found.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WantCuda<'a> {
    pub(crate) cuda: &'a str,
    /// `torch 2.11.0+cu130`, named when nvcc is of another CUDA.
    pub(crate) torch_version: &'a str,
}

/// Find nvcc: `CUDACXX`, `CUDA_HOME/bin`, PATH, then the Python environment's
/// `nvidia/cu<major>/bin` (PyPI's `nvidia-cuda-nvcc`; `purelib` is its site-packages). With
/// `want` (a torch cell), the CUDA of torch's build, `cu<its major>`, and an nvcc of another
/// CUDA is refused; without (a tvm-ffi cell), the newest `cu<major>` there, and the CUDA is
/// the nvcc's own.
///
/// Errors ([`Kind::Toolchain`], saying what to install or set): `CUDACXX` or `CUDA_HOME`
/// naming no nvcc, no nvcc found, and [`nvcc_tool`]'s.
pub(crate) fn find_nvcc(
    purelib: &Utf8Path,
    executable: &Utf8Path,
    want: Option<WantCuda<'_>>,
) -> anyhow::Result<Tool> {
    let unusable = |message: String| anyhow::Error::from(Error::new(Kind::Toolchain, message));
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
            return Err(unusable(format!(
                "`{var}` names `{path}`, which is not an executable nvcc; point it at {which}, or unset it to use the one on PATH or in the Python environment"
            )));
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
            found.sort_by_key(|f| std::cmp::Reverse(f.0));
            candidates.extend(found.into_iter().map(|(_, p)| p));
        }
    }
    let nvcc = candidates.into_iter().find(|p| find_program(p.as_str(), &[]).is_some()).ok_or_else(|| {
        unusable(match want {
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
        })
    })?;
    nvcc_tool(nvcc, want)
}

/// The nvcc at `nvcc` with its version; with `want`, refused unless of that CUDA.
///
/// Errors ([`Kind::Toolchain`]): nvcc cannot be run or prints no version, or (with `want`) is
/// of another CUDA than torch's.
pub(crate) fn nvcc_tool(nvcc: Utf8PathBuf, want: Option<WantCuda<'_>>) -> anyhow::Result<Tool> {
    let out = version_output(&nvcc)?;
    let text = out.stdout;
    // "Cuda compilation tools, release 13.0, V13.0.88"
    let version = text
        .split(", V")
        .nth(1)
        .map(|v| v.split_whitespace().next().unwrap_or("").to_owned())
        .filter(|v| !v.is_empty())
        .ok_or_else(|| {
            Error::new(Kind::Toolchain, format!("`{nvcc} --version` printed no version:\n{}", tail(&text, 5)))
        })?;
    let nv = Version::parse(&version).with_context(|| format!("`{nvcc}`"))?;
    if let Some(WantCuda { cuda, torch_version }) = want {
        let want = Version::parse(cuda).context("torch.version.cuda")?;
        if (nv.part(0), nv.part(1)) != (want.part(0), want.part(1)) {
            return Err(Error::new(
                Kind::Toolchain,
                format!(
                    "`{nvcc}` is CUDA {version}, but torch {torch_version} was built with CUDA {cuda}; use the nvcc of CUDA {cuda} (CUDACXX=…)"
                ),
            )
            .into());
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

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(version: &str, torch_dir: &Utf8Path) -> TorchFacts {
        TorchFacts {
            version: version.to_owned(),
            cuda: None,
            hip: None,
            xpu: None,
            cxx11_abi: true,
            cmake_prefix_path: String::new(),
            torch_dir: torch_dir.to_owned(),
            python_include: Utf8PathBuf::new(),
            purelib: Utf8PathBuf::new(),
            executable: Utf8PathBuf::new(),
            python_version: "3.11".to_owned(),
        }
    }

    /// The first lines of `ATen/ATen.h` in torch 2.11.0's wheel (the guard, as shipped).
    const ATEN_2_11: &str = "#pragma once\n\n#if !defined(_MSC_VER) && __cplusplus < 201703L\n#error C++17 or later compatible compiler is required to use ATen.\n#endif\n";

    #[test]
    fn the_standard_is_the_headers_guard() {
        assert_eq!(required_cplusplus(ATEN_2_11), Some(201703));
        let newer = ATEN_2_11.replace("201703L", "202002L").replace("C++17", "C++20");
        assert_eq!(required_cplusplus(&newer), Some(202002));
        assert_eq!(required_cplusplus("#include <c10/core/Device.h>\n"), None);
        // torch 2.15's guard also tests MSVC's `_MSVC_LANG`, below a comment naming the
        // value MSVC leaves `__cplusplus` at, which is no requirement.
        let msvc = "// MSVC keeps __cplusplus at 199711L without /Zc:__cplusplus\n#if (defined(_MSVC_LANG) && _MSVC_LANG < 202002L) || \\\n    (!defined(_MSVC_LANG) && __cplusplus < 202002L)\n#error C++20\n#endif\n";
        assert_eq!(required_cplusplus(msvc), Some(202002));

        let dir = tempfile::tempdir().unwrap();
        let torch = Utf8Path::from_path(dir.path()).unwrap();
        std::fs::create_dir_all(torch.join("include/ATen")).unwrap();
        // The header decides, whatever the version says.
        std::fs::write(torch.join("include/ATen/ATen.h"), &newer).unwrap();
        assert_eq!(facts("2.11.0", torch).cxx_standard(), "20");
        std::fs::write(torch.join("include/ATen/ATen.h"), ATEN_2_11).unwrap();
        assert_eq!(facts("2.15.0+cu132", torch).cxx_standard(), "17");
        // Without a guard, torch's release rule.
        std::fs::remove_file(torch.join("include/ATen/ATen.h")).unwrap();
        assert_eq!(facts("2.11.0", torch).cxx_standard(), "17");
        assert_eq!(facts("2.15.0+cu132", torch).cxx_standard(), "20");
    }
}
