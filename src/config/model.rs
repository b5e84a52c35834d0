//! The one typed model of a kernel's `build.toml`.
//!
//! Every generation of the format (edition 6, edition 5, the unversioned "v4" and "v3" forms,
//! the `universal` form "v2" and the oldest form "v1") is read into these types by
//! [`crate::config::parse_str`]; nothing downstream ever looks at the TOML again. Field names
//! follow edition 6 (`language` per kernel, `build-layout`, `[mlx-noarch]`; the facts are in
//! `../shared/reference/kernels-0.19-and-build-speed.md` §1); an edition-5 kernel's `backend`
//! is read as the C++ [`Language`] of that backend.

use std::fmt;

use camino::Utf8PathBuf;
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

/// A compute backend a kernel can target, as spelled in `general.backends` (lowercase).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Cann,
    Cpu,
    Cuda,
    Metal,
    Neuron,
    Rocm,
    Tpu,
    Xpu,
}

impl Backend {
    /// Every backend, in the fixed (alphabetical) order used for metadata files.
    pub const ALL: [Backend; 8] = [
        Backend::Cann,
        Backend::Cpu,
        Backend::Cuda,
        Backend::Metal,
        Backend::Neuron,
        Backend::Rocm,
        Backend::Tpu,
        Backend::Xpu,
    ];

    /// The lowercase name used in `build.toml`, variant names and `metadata.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Cann => "cann",
            Backend::Cpu => "cpu",
            Backend::Cuda => "cuda",
            Backend::Metal => "metal",
            Backend::Neuron => "neuron",
            Backend::Rocm => "rocm",
            Backend::Tpu => "tpu",
            Backend::Xpu => "xpu",
        }
    }

    /// Parse an exact lowercase backend name (`None` for anything else).
    pub fn from_name(s: &str) -> Option<Backend> {
        Backend::ALL.into_iter().find(|b| b.as_str() == s)
    }

    /// Whether `[kernel.*]` tables may target this backend (compiled code).
    pub fn can_compile(self) -> bool {
        matches!(self, Backend::Cpu | Backend::Cuda | Backend::Metal | Backend::Rocm | Backend::Xpu)
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A dotted version such as `2.12` or `13.0`.
///
/// Comparison is numeric per component with missing components read as 0, so `13.0 == 13`
/// (upstream's migration lost cu130 cells because Nix compared `"13.0"` and `"13"` as
/// different). The original spelling is kept in `text` so that `update-build` writes it back
/// unchanged.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Version {
    pub parts: Vec<u32>,
    pub text: String,
}

impl Version {
    /// Parse `"X[.Y[.Z…]]"` (surrounding whitespace trimmed). Errors name the bad text.
    pub fn parse(s: &str) -> anyhow::Result<Version> {
        let t = s.trim();
        anyhow::ensure!(!t.is_empty(), "a version must not be empty");
        let parts = t.split('.').map(|p| p.parse::<u32>()).collect::<Result<Vec<_>, _>>();
        let Ok(parts) = parts else {
            anyhow::bail!("version `{s}` must be dot-separated numbers, e.g. \"2.12\"");
        };
        Ok(Version { parts, text: t.to_owned() })
    }

    /// Component `i`, 0 when absent.
    pub fn part(&self, i: usize) -> u32 {
        self.parts.get(i).copied().unwrap_or(0)
    }

    /// `major.minor` flattened without the dot, as in variant names: 2.12 → "212", 13.0 → "130",
    /// 2025.3.2 → "20253".
    pub fn flat_major_minor(&self) -> String {
        format!("{}{}", self.part(0), self.part(1))
    }
}

impl PartialEq for Version {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}
impl Eq for Version {}
impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Version {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let n = self.parts.len().max(other.parts.len());
        (0..n)
            .map(|i| self.part(i).cmp(&other.part(i)))
            .find(|o| o.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
    }
}
impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Which generation of the `build.toml` format a file was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Generation {
    /// Oldest form: `[torch] name/pyroot`, `capabilities`, `language`, kernels without `backend`.
    V1,
    /// `[general] universal = true|false`, `cuda-minver`/`cuda-maxver` in `[general]`.
    V2,
    /// No `edition`; `version`/`license` optional, framework section optional.
    V3,
    /// No `edition`; `version`, `license` and one framework section required.
    V4,
    /// `edition = 5`: `[kernel.*]` tables name a `backend`. Still read as it is; `update-build`
    /// rewrites it as edition 6.
    Edition5,
    /// `edition = 6`, the current format (kernels 0.18.3 and later read it): `[kernel.*]`
    /// tables name a `language`.
    Edition6,
}

impl Generation {
    /// Human name used in summaries and warnings.
    pub fn label(self) -> &'static str {
        match self {
            Generation::V1 => "v1 (legacy)",
            Generation::V2 => "v2 (legacy, `universal`)",
            Generation::V3 => "v3 (legacy, unversioned)",
            Generation::V4 => "v4 (legacy, unversioned)",
            Generation::Edition5 => "edition 5",
            Generation::Edition6 => "edition 6",
        }
    }

    /// True for everything older than edition 5: read through an in-memory upgrade, with a
    /// warning that says to run `update-build`. Edition 5 is read as written, without one.
    pub fn is_legacy(self) -> bool {
        self < Generation::Edition5
    }

    /// True for the generation `update-build` and `init` write.
    pub fn is_current(self) -> bool {
        self == Generation::CURRENT
    }

    /// The edition written by `init` and `update-build`.
    pub const CURRENT: Generation = Generation::Edition6;
}

/// `[general] build-layout`: how a build variant's Python and data files are stored (edition 6).
///
/// `files` is the plain directory tree every loader reads. `zip` stores the Python and data
/// files in `build/<variant>/<metadata id>.zip`, imported through `zipimport`, and only
/// kernels >= 0.19.0 loads it (written by `crate::assemble::build_layout`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BuildLayout {
    #[default]
    Files,
    Zip,
}

impl BuildLayout {
    pub const ALL: [BuildLayout; 2] = [BuildLayout::Files, BuildLayout::Zip];

    /// The spelling in `build.toml` and `metadata.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            BuildLayout::Files => "files",
            BuildLayout::Zip => "zip",
        }
    }

    pub fn from_name(s: &str) -> Option<BuildLayout> {
        BuildLayout::ALL.into_iter().find(|l| l.as_str() == s)
    }
}

/// `[kernel.*] language` (edition 6): the language a compiled component is written in, which
/// also fixes its backend. An edition-5 `backend = "cuda"` is `cpp-cuda`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Language {
    CppCpu,
    CppCuda,
    CppMetal,
    CppRocm,
    CppXpu,
    /// A Rust crate compiled with cargo for the CPU.
    RustCpu,
    /// A Rust CUDA kernel compiled with cuda-oxide (experimental upstream, kernels 0.19).
    RustCudaOxide,
    /// A Rust CUDA kernel written with cutile-rs, compiled by `tileiras` (CUDA >= 13.2).
    RustCutile,
}

impl Language {
    /// Every language, in the order the 0.19.1 loader's messages list them.
    pub const ALL: [Language; 8] = [
        Language::CppCpu,
        Language::CppCuda,
        Language::CppMetal,
        Language::CppRocm,
        Language::CppXpu,
        Language::RustCpu,
        Language::RustCudaOxide,
        Language::RustCutile,
    ];

    /// The spelling in `build.toml`.
    pub fn as_str(self) -> &'static str {
        match self {
            Language::CppCpu => "cpp-cpu",
            Language::CppCuda => "cpp-cuda",
            Language::CppMetal => "cpp-metal",
            Language::CppRocm => "cpp-rocm",
            Language::CppXpu => "cpp-xpu",
            Language::RustCpu => "rust-cpu",
            Language::RustCudaOxide => "rust-cuda-oxide",
            Language::RustCutile => "rust-cutile",
        }
    }

    pub fn from_name(s: &str) -> Option<Language> {
        Language::ALL.into_iter().find(|l| l.as_str() == s)
    }

    /// The backend the compiled component runs on.
    pub fn backend(self) -> Backend {
        match self {
            Language::CppCpu | Language::RustCpu => Backend::Cpu,
            Language::CppCuda | Language::RustCudaOxide | Language::RustCutile => Backend::Cuda,
            Language::CppMetal => Backend::Metal,
            Language::CppRocm => Backend::Rocm,
            Language::CppXpu => Backend::Xpu,
        }
    }

    /// The C++ language of `backend` (what an edition-5 `backend = "…"` means); `None` for a
    /// backend no `[kernel.*]` compiles for.
    pub fn cpp_for(backend: Backend) -> Option<Language> {
        Language::ALL.into_iter().find(|l| !l.is_rust() && l.backend() == backend)
    }

    pub fn is_rust(self) -> bool {
        matches!(self, Language::RustCpu | Language::RustCudaOxide | Language::RustCutile)
    }

    /// The keys a `[kernel.*]` of this language accepts besides `language` (the 0.19.1
    /// loader's lists, probed with `Build.open`).
    pub fn keys(self) -> &'static [&'static str] {
        const CPP: &[&str] = &["depends", "src", "include", "cxx-flags"];
        match self {
            Language::CppCpu | Language::CppMetal => CPP,
            Language::CppCuda => {
                &["depends", "src", "include", "cxx-flags", "cuda-capabilities", "cuda-flags", "cuda-minver"]
            }
            Language::CppRocm => &["depends", "src", "include", "cxx-flags", "rocm-archs", "hip-flags"],
            Language::CppXpu => &["depends", "src", "include", "cxx-flags", "sycl-flags"],
            Language::RustCpu => &["cargo-manifest", "src"],
            Language::RustCudaOxide => &["cargo-manifest", "src", "cuda-capabilities"],
            Language::RustCutile => &["cargo-manifest", "src", "tileiras-minver"],
        }
    }

    /// The keys a `[kernel.*]` of this language must have.
    pub fn required_keys(self) -> &'static [&'static str] {
        match self {
            Language::RustCpu | Language::RustCudaOxide => &["cargo-manifest", "src"],
            Language::RustCutile => &["cargo-manifest", "src", "tileiras-minver"],
            _ => &["depends", "src"],
        }
    }
}

impl fmt::Display for Language {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The first CUDA version with cuTile: the lowest `tileiras-minver` a `rust-cutile` kernel may
/// ask for (the 0.19.1 loader refuses lower ones with the same reason).
pub const CUTILE_MIN_CUDA: (u32, u32) = (13, 2);

/// A kernel this one depends on, fetched from the Hub at load time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelDependency {
    #[serde(rename = "repo-id")]
    pub repo_id: String,
    #[serde(flatten)]
    pub pin: KernelPin,
}

/// Exactly one of a major version or a revision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KernelPin {
    Version(u64),
    Revision(String),
}

/// `[general.<backend>]`: per-backend dependency lists (and CUDA version bounds).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BackendGeneral {
    pub python_depends: Vec<String>,
    pub kernel_depends: Vec<KernelDependency>,
}

/// `[general.cuda]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CudaGeneral {
    /// Lowest CUDA version built (inclusive).
    pub minver: Option<Version>,
    /// Highest CUDA version built (inclusive).
    pub maxver: Option<Version>,
    pub deps: BackendGeneral,
}

/// `[general.hub]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hub {
    pub repo_id: Option<String>,
    pub branch: Option<String>,
}

/// `[general]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct General {
    /// Kernel name, matching `^[a-z][-a-z0-9]*[a-z0-9]$`.
    pub name: String,
    /// Major version of the kernel's API (published to branch `v<version>`).
    pub version: u64,
    pub license: String,
    pub upstream: Option<String>,
    pub source: Option<String>,
    /// Backends in the order written.
    pub backends: Vec<Backend>,
    pub python_depends: Vec<String>,
    pub kernel_depends: Vec<KernelDependency>,
    pub cuda: CudaGeneral,
    pub neuron: BackendGeneral,
    pub tpu: BackendGeneral,
    pub xpu: BackendGeneral,
    pub hub: Hub,
    /// `build-layout` (edition 6; `files` when absent).
    pub build_layout: BuildLayout,
    /// `matrix`: the build matrix this kernel pins (a snapshot name such as
    /// `upstream-2026-08`, see `crate::matrix::data::known_names`); `None` builds against the
    /// default matrix of this kernel-builder.
    pub matrix: Option<String>,
}

impl General {
    /// The Python package name: the kernel name with `-` replaced by `_`.
    pub fn python_name(&self) -> String {
        self.name.replace('-', "_")
    }

    /// `python-depends` for one backend: the general list, then `[general.<backend>]`'s.
    pub fn python_depends_for(&self, backend: Backend) -> Vec<String> {
        let mut out = self.python_depends.clone();
        if let Some(extra) = self.backend_general(backend) {
            out.extend(extra.python_depends.iter().cloned());
        }
        out
    }

    /// `kernel-depends` for one backend: the general list, then `[general.<backend>]`'s.
    pub fn kernel_depends_for(&self, backend: Backend) -> Vec<KernelDependency> {
        let mut out = self.kernel_depends.clone();
        if let Some(extra) = self.backend_general(backend) {
            out.extend(extra.kernel_depends.iter().cloned());
        }
        out
    }

    fn backend_general(&self, backend: Backend) -> Option<&BackendGeneral> {
        match backend {
            Backend::Cuda => Some(&self.cuda.deps),
            Backend::Neuron => Some(&self.neuron),
            Backend::Tpu => Some(&self.tpu),
            Backend::Xpu => Some(&self.xpu),
            _ => None,
        }
    }
}

/// `[torch] stable-abi`: one version for every backend, or a per-backend table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum StableAbi {
    #[default]
    None,
    All(Version),
    PerBackend(IndexMap<Backend, Version>),
}

impl StableAbi {
    /// The stable-ABI target for `backend`, if any.
    pub fn for_backend(&self, backend: Backend) -> Option<&Version> {
        match self {
            StableAbi::None => None,
            StableAbi::All(v) => Some(v),
            StableAbi::PerBackend(m) => m.get(&backend),
        }
    }
}

/// `[torch]`: an ahead-of-time compiled Torch extension.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TorchArch {
    pub include: Vec<String>,
    pub minver: Option<Version>,
    pub maxver: Option<Version>,
    /// Extra file extensions shipped with the Python package (besides `py`).
    pub pyext: Option<Vec<String>>,
    pub src: Vec<String>,
    pub stable_abi: StableAbi,
    pub cxx_flags: Vec<String>,
}

/// `[torch-noarch]`: a pure-Python / JIT (Helion, Triton) kernel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TorchNoarch {
    pub pyext: Option<Vec<String>>,
    /// Written to `backend.archs` of the CUDA variant's metadata when set.
    pub cuda_capabilities: Option<Vec<CudaCapability>>,
    /// Written to `backend.archs` of the ROCm variant's metadata when set.
    pub rocm_archs: Option<Vec<String>>,
}

/// `[tvm-ffi]`: an ahead-of-time compiled TVM-FFI extension.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TvmFfi {
    pub include: Vec<String>,
    pub pyext: Option<Vec<String>>,
    pub src: Vec<String>,
    pub cxx_flags: Vec<String>,
}

/// `[mlx-noarch]` (edition 6): a pure-Python MLX kernel for Apple silicon, built as the noarch
/// `mlx-metal` variant. Only the `metal` backend is allowed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MlxNoarch {
    pub pyext: Option<Vec<String>>,
}

/// Exactly one framework section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Framework {
    Torch(TorchArch),
    TorchNoarch(TorchNoarch),
    TvmFfi(TvmFfi),
    MlxNoarch(MlxNoarch),
}

impl Framework {
    /// The section name as written in `build.toml`.
    pub fn section(&self) -> &'static str {
        match self {
            Framework::Torch(_) => "torch",
            Framework::TorchNoarch(_) => "torch-noarch",
            Framework::TvmFfi(_) => "tvm-ffi",
            Framework::MlxNoarch(_) => "mlx-noarch",
        }
    }

    /// Whether the framework compiles nothing (`[torch-noarch]`, `[mlx-noarch]`): its
    /// `[kernel.*]` tables are never built.
    pub fn is_noarch(&self) -> bool {
        matches!(self, Framework::TorchNoarch(_) | Framework::MlxNoarch(_))
    }

    /// The directory holding the Python package (`<ext dir>/<python name>/`) and, by
    /// convention, the binding sources: `tvm-ffi-ext` for `[tvm-ffi]`, `torch-ext` otherwise
    /// (kernel-builder-cli §8.3). `[mlx-noarch]` keeps `torch-ext`: upstream's MLX example
    /// tree is not in the public snapshot, so no other directory is invented here.
    pub fn ext_dir(&self) -> &'static str {
        match self {
            Framework::TvmFfi(_) => "tvm-ffi-ext",
            _ => "torch-ext",
        }
    }

    /// File extensions packaged from `<ext dir>/<package>/` (default `py`, `pyi`).
    pub fn pyext(&self) -> Vec<String> {
        let p = match self {
            Framework::Torch(t) => &t.pyext,
            Framework::TorchNoarch(t) => &t.pyext,
            Framework::TvmFfi(t) => &t.pyext,
            Framework::MlxNoarch(t) => &t.pyext,
        };
        p.clone().unwrap_or_else(|| vec!["py".to_owned(), "pyi".to_owned()])
    }

    /// `[torch] minver`/`maxver` (only `[torch]` carries them).
    pub fn torch_bounds(&self) -> (Option<&Version>, Option<&Version>) {
        match self {
            Framework::Torch(t) => (t.minver.as_ref(), t.maxver.as_ref()),
            _ => (None, None),
        }
    }
}

/// A CUDA capability from `cuda-capabilities`: `X.Y`, `X.Ya` (arch-specific), `X.Yf`
/// (family), `X.Y+PTX` (also embed PTX).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CudaCapability {
    pub major: u32,
    pub minor: u32,
    pub suffix: CapabilitySuffix,
    pub ptx: bool,
}

/// The letter after a capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CapabilitySuffix {
    None,
    /// `a`: exactly this architecture.
    Arch,
    /// `f`: this family, minor ≥ Y.
    Family,
}

impl CudaCapability {
    /// Parse `X.Y`, `X.Ya`, `X.Yf` or `X.Y+PTX`; the error says which forms are accepted.
    pub fn parse(s: &str) -> anyhow::Result<CudaCapability> {
        let bad = || {
            anyhow::anyhow!(
                "`{s}` is not a CUDA capability; write `X.Y`, `X.Ya`, `X.Yf` or `X.Y+PTX`, e.g. \"9.0a\""
            )
        };
        let (body, ptx) = match s.strip_suffix("+PTX") {
            Some(b) => (b, true),
            None => (s, false),
        };
        let (body, suffix) = if let Some(b) = body.strip_suffix('a') {
            (b, CapabilitySuffix::Arch)
        } else if let Some(b) = body.strip_suffix('f') {
            (b, CapabilitySuffix::Family)
        } else {
            (body, CapabilitySuffix::None)
        };
        let (maj, min) = body.split_once('.').ok_or_else(bad)?;
        let all_digits = |t: &str| !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit());
        if !all_digits(maj) || !all_digits(min) {
            return Err(bad());
        }
        let major = maj.parse().map_err(|_| bad())?;
        let minor = min.parse().map_err(|_| bad())?;
        Ok(CudaCapability { major, minor, suffix, ptx })
    }
}

impl fmt::Display for CudaCapability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)?;
        match self.suffix {
            CapabilitySuffix::None => {}
            CapabilitySuffix::Arch => f.write_str("a")?,
            CapabilitySuffix::Family => f.write_str("f")?,
        }
        if self.ptx {
            f.write_str("+PTX")?;
        }
        Ok(())
    }
}

/// A C++ dependency from a kernel's `depends`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CppDependency {
    Cutlass(u32, u32),
    SyclTla,
    MetalCpp,
    Torch,
}

/// `[kernel.<name>]`: one compiled component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kernel {
    /// `language` (edition 6), or the C++ language of an edition-5 `backend`.
    pub language: Language,
    /// The backend it runs on: always `language.backend()`.
    pub backend: Backend,
    pub depends: Vec<CppDependency>,
    /// Source and header paths, relative to the kernel directory.
    pub src: Vec<String>,
    pub include: Vec<String>,
    pub cxx_flags: Vec<String>,
    /// CUDA only; `None` means "every capability the cell's CUDA supports".
    pub cuda_capabilities: Option<Vec<CudaCapability>>,
    pub cuda_flags: Vec<String>,
    pub cuda_minver: Option<Version>,
    /// ROCm only; `None` means "every gfx target the cell's ROCm supports".
    pub rocm_archs: Option<Vec<String>>,
    pub hip_flags: Vec<String>,
    pub sycl_flags: Vec<String>,
    /// Rust languages: the crate's `Cargo.toml`, relative to the kernel directory.
    pub cargo_manifest: Option<String>,
    /// `rust-cutile`: the lowest CUDA whose `tileiras` compiles it (>= [`CUTILE_MIN_CUDA`]).
    pub tileiras_minver: Option<Version>,
}

impl Kernel {
    /// The lowest CUDA version a cell must have to compile this kernel: `cuda-minver` of a C++
    /// CUDA kernel, `tileiras-minver` of a cuTile one.
    pub fn min_cuda(&self) -> Option<&Version> {
        self.cuda_minver.as_ref().or(self.tileiras_minver.as_ref())
    }
}

/// A whole `build.toml`, upgraded to the current model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildConfig {
    /// The file it was read from.
    pub path: Utf8PathBuf,
    /// The generation the file was written in.
    pub generation: Generation,
    pub general: General,
    pub framework: Framework,
    /// `[kernel.*]` tables in file order.
    pub kernels: IndexMap<String, Kernel>,
}

impl BuildConfig {
    /// Whether a `[kernel.*]` targets `backend` (otherwise that backend's cells are noarch).
    pub fn has_kernel_for(&self, backend: Backend) -> bool {
        self.kernels.values().any(|k| k.backend == backend)
    }

    /// A backend's cells are noarch when no `[kernel.*]` compiles code for it.
    pub fn is_noarch_for(&self, backend: Backend) -> bool {
        !self.has_kernel_for(backend)
    }
}
