//! Planning one compiled cell: from the kernel's config and the toolchain found
//! ([`crate::toolchain::host`]), the variant it builds and everything it compiles with
//! ([`CompiledCell`]), or why this host builds none ([`SkippedBackend`]).
//!
//! The toolchain decides the cell: with this repository's venv (PyPI torch 2.11.0, a CUDA 13.0
//! build) the CPU cell is `torch211-cxx11-cpu-x86_64-linux` and the CUDA cell
//! `torch211-cxx11-cu130-x86_64-linux`. A `[tvm-ffi]` kernel's cells are named for the tvm-ffi
//! major.minor and, for CUDA, the version of the nvcc found (`tvm-ffi01-cu130-x86_64-linux`). A
//! cell the bundle matrix does not hold builds with a warning naming the nearest bundle cells.
//! A backend whose toolchain is missing (no torch, no C++ compiler, no nvcc, a CPU-only torch
//! for CUDA, …) is not buildable here, and the reason says what to install.

use std::collections::BTreeMap;

use anyhow::Context;
use serde::Serialize;

use crate::config::{Backend, BuildConfig, Framework, Version};
use crate::error::{Error, Kind};
use crate::matrix::{self, naming, CellKind, KernelCells, Scope};
use camino::{Utf8Path, Utf8PathBuf};

use crate::toolchain::host::{
    base_tools, find_nvcc, find_program, nvcc_tool, version_line, CellFramework, HostToolchain, Tool,
    WantCuda,
};

/// One variant a build makes: a noarch one, or a compiled cell with everything it compiles
/// with decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedVariant {
    /// Directory name under `build/` (`torch-cuda`, `torch212-cxx11-cu130-x86_64-linux`).
    pub name: String,
    pub backend: Backend,
    /// A compiled variant (a `[kernel.*]` compiles code for the backend): the cell the toolchain
    /// builds. `None`: a noarch variant.
    pub cell: Option<Box<CompiledCell>>,
}

impl PlannedVariant {
    /// The noarch variant `name` of `backend`.
    pub fn noarch(name: String, backend: Backend) -> PlannedVariant {
        PlannedVariant { name, backend, cell: None }
    }

    /// The variant of the compiled cell `cell`, named by it.
    pub fn compiled(cell: CompiledCell) -> PlannedVariant {
        PlannedVariant { name: cell.variant.clone(), backend: cell.backend, cell: Some(Box::new(cell)) }
    }

    /// Whether a `[kernel.*]` compiles code for the variant.
    pub fn is_compiled(&self) -> bool {
        self.cell.is_some()
    }
}

/// One compiled cell that the toolchain given can build (the host's, a pinned one, or a Nix
/// cell's), with everything it compiles with decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompiledCell {
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
    /// A cell provisioned from pins: what its toolchain was unpacked from (its cache key holds
    /// it, [`crate::bundle::cellcache`]).
    pub pins: Option<crate::toolchain::host::PinnedInputs>,
    /// A cell whose one kernel is a Rust crate (`rust-cpu`): cargo builds its module instead
    /// of CMake and Ninja ([`super::cargo`]).
    pub cargo: Option<CargoTools>,
}

/// What builds a Rust kernel's cell: cargo and the rustc it is told to use (`RUSTC`), which
/// links with the cell's `cxx`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CargoTools {
    pub cargo: Tool,
    pub rustc: Tool,
    /// The `[kernel.*]` whose crate is the module.
    pub kernel: String,
    /// Its `cargo-manifest`, relative to the kernel directory.
    pub manifest: String,
}

#[cfg(test)]
impl CompiledCell {
    /// A tvm-ffi cell for tests: `variant` of `backend` against `facts`, compiling `kernels`
    /// with fixed tools (CMake 4.4.5, Ninja 1.13.2, g++ 12.2.0) and, for a CUDA cell, the nvcc
    /// of version `nvcc` (its `X.Y` the backend version).
    pub(crate) fn tvm_ffi_for_tests(
        variant: &str,
        backend: Backend,
        facts: crate::toolchain::tvm_ffi::TvmFfiFacts,
        nvcc: Option<&str>,
        kernels: &[&str],
    ) -> CompiledCell {
        let tool = |p: &str, v: &str| Tool { path: p.into(), version: v.into() };
        CompiledCell {
            variant: variant.into(),
            backend,
            kind: CellKind::TvmFfi,
            framework: CellFramework::TvmFfi(facts),
            backend_version: nvcc.map(|v| v[..4].to_owned()),
            cmake: tool("/bin/cmake", "cmake version 4.4.5"),
            ninja: tool("/bin/ninja", "1.13.2"),
            cxx: tool("/bin/c++", "c++ 12.2.0"),
            nvcc: nvcc.map(|v| tool("/cuda/bin/nvcc", v)),
            kernels: kernels.iter().map(|k| (*k).to_owned()).collect(),
            cuda_capabilities: Default::default(),
            outside_bundle: None,
            notes: Vec::new(),
            capabilities_only: None,
            package_set: None,
            hermetic: false,
            manylinux: None,
            pins: None,
            cargo: None,
        }
    }
}

/// Decide the cell this host builds for `backend`, or say why it cannot. `cells` are the
/// kernel's cells ([`KernelCells::of`]): an outside-bundle cell names its nearest bundle cells.
///
/// Errors (the reason, naming what to install or change): no usable torch (for `[torch]`) or
/// tvm_ffi (for `[tvm-ffi]`, [`crate::toolchain::tvm_ffi::probe`]), no CMake, Ninja or C++ compiler, a
/// torch without the backend (a CPU-only torch for CUDA), no nvcc (of torch's CUDA version
/// for a torch cell), a backend this version does not build natively (ROCm, XPU, Metal), the
/// cell outside the kernel's `[torch]`/`[general.cuda]` bounds, or CUDA capabilities this CUDA
/// cannot build. What the toolchain lacks is of [`Kind::Toolchain`], what build.toml asks
/// for that no cell can build of [`Kind::Config`].
pub fn plan_cell(
    config: &BuildConfig,
    cells: &KernelCells,
    backend: Backend,
    host: &HostToolchain,
) -> anyhow::Result<CompiledCell> {
    let system = matrix::host_system();
    refuse_not_native(config, backend)?;
    let framework = cell_framework(config, host, &system)?;
    let (cmake, ninja, cxx) = base_tools(host, framework.executable())?;
    let (backend_version, nvcc) = backend_toolchain(backend, &framework, host)?;
    let bv = backend_version.as_deref().map(Version::parse).transpose()?;
    check_bounds(config, backend, &framework, bv.as_ref(), host)?;
    let compute = naming::compute_tag(backend, bv.as_ref());
    let (kind, variant, named_version) = cell_name(config, backend, &framework, &compute, &system)?;
    let (kernels, cargo) = cell_kernels(config, backend, bv.as_ref(), host)?;
    let CellCapabilities { by_kernel: cuda_capabilities, notes, only: capabilities_only } = match backend {
        Backend::Cuda => {
            let cuda = backend_version.as_deref().expect("CUDA version");
            cell_cuda_capabilities(config, host, &kernels, cuda, bv.as_ref(), nvcc.as_ref(), &variant)?
        }
        _ => CellCapabilities::default(),
    };

    let outside_bundle = outside_bundle_note(
        config,
        cells,
        &system,
        backend,
        &variant,
        (&named_version, bv.as_ref()),
        &framework,
        host,
    );

    Ok(CompiledCell {
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
        pins: host.provisioned.as_ref().and_then(|p| p.pins.clone()),
        cargo,
    })
}

/// Refuse what this version does not build natively: a kernel of a language not built yet
/// ([`crate::assemble::not_yet::NotYet`]), a backend other than CPU and CUDA.
fn refuse_not_native(config: &BuildConfig, backend: Backend) -> anyhow::Result<()> {
    if let Some(refusal) = crate::assemble::not_yet::NotYet::for_backend(config, backend) {
        return Err(Error::from(refusal).into());
    }
    if !matches!(backend, Backend::Cpu | Backend::Cuda) {
        let tool = match (backend, &config.framework) {
            (Backend::Rocm, Framework::TvmFfi(_)) => "hipcc",
            (Backend::Rocm, _) => "hipcc and a ROCm torch",
            (Backend::Xpu, Framework::TvmFfi(_)) => "icpx",
            (Backend::Xpu, _) => "icpx and an XPU torch",
            (Backend::Metal, _) => "xcrun metal on macOS",
            _ => "a toolchain",
        };
        return Err(unusable(format!(
            "native `{backend}` builds need {tool}; this version builds cpu and cuda cells natively (generate the project with `kernel-builder create-pyproject`)"
        )));
    }
    Ok(())
}

/// What the cell compiles against: tvm-ffi, or a torch built with the C++11 ABI on Linux.
fn cell_framework(config: &BuildConfig, host: &HostToolchain, system: &str) -> anyhow::Result<CellFramework> {
    Ok(match &config.framework {
        Framework::TvmFfi(_) => CellFramework::TvmFfi(host.tvm_ffi()?.clone()),
        _ => {
            let torch = host.torch()?.clone();
            if system.ends_with("-linux") && !torch.cxx11_abi {
                return Err(unusable(format!(
                    "torch {} in `{}` uses the pre-C++11 ABI, which the build matrix does not build; use a torch built with the C++11 ABI",
                    torch.version, host.python
                )));
            }
            CellFramework::Torch(torch)
        }
    })
}

/// The backend's version and compiler: for CUDA, torch's CUDA and an nvcc of it (the pinned
/// one, else found beside torch), or for a tvm-ffi cell the nvcc found and its version.
fn backend_toolchain(
    backend: Backend,
    framework: &CellFramework,
    host: &HostToolchain,
) -> anyhow::Result<(Option<String>, Option<Tool>)> {
    Ok(match (backend, framework) {
        (Backend::Cuda, CellFramework::Torch(torch)) => {
            let cuda = torch.cuda.clone().ok_or_else(|| {
                unusable(format!(
                    "torch {} in `{}` is not a CUDA build (torch.version.cuda is None); install a CUDA torch",
                    torch.version, host.python
                ))
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
            let v = Version::parse(&nvcc.version).with_context(|| format!("`{}`", nvcc.path))?;
            (Some(format!("{}.{}", v.part(0), v.part(1))), Some(nvcc))
        }
        _ => (None, None),
    })
}

/// The cell's torch within `[torch]` minver/maxver, its CUDA (`bv`) within `[general.cuda]`'s.
fn check_bounds(
    config: &BuildConfig,
    backend: Backend,
    framework: &CellFramework,
    bv: Option<&Version>,
    host: &HostToolchain,
) -> anyhow::Result<()> {
    let (min, max) = config.framework.torch_bounds();
    if let Some(torch) = framework.torch() {
        let tv = torch.public_version();
        if min.is_some_and(|m| tv < *m) || max.is_some_and(|m| tv > *m) {
            return Err(unusable(format!(
                "torch {} in `{}` is outside `[torch]` minver/maxver of `{}`; use a Python environment with a torch in range",
                torch.version, host.python, config.path
            )));
        }
    }
    if backend == Backend::Cuda {
        let g = &config.general.cuda;
        let cuda = bv.expect("CUDA version");
        if g.minver.as_ref().is_some_and(|m| cuda < m) || g.maxver.as_ref().is_some_and(|m| cuda > m) {
            return Err(unusable(format!(
                "{} CUDA {cuda} is outside `[general.cuda]` minver/maxver of `{}`",
                if framework.torch().is_some() { "torch's" } else { "nvcc's" },
                config.path
            )));
        }
    }
    Ok(())
}

/// The cell's kind and variant name, and the version its nearest bundle cells are looked for
/// by: torch's (also for a stable-ABI cell) or tvm-ffi's major.minor.
fn cell_name(
    config: &BuildConfig,
    backend: Backend,
    framework: &CellFramework,
    compute: &str,
    system: &str,
) -> anyhow::Result<(CellKind, String, Version)> {
    Ok(match (&config.framework, framework) {
        (Framework::TvmFfi(_), CellFramework::TvmFfi(f)) => {
            let v = f.major_minor()?;
            (CellKind::TvmFfi, naming::tvm_ffi_name(&v, compute, system), v)
        }
        (Framework::Torch(t), CellFramework::Torch(torch)) => {
            let tv = torch.public_version();
            match t.stable_abi.for_backend(backend) {
                Some(abi) => {
                    if tv < *abi {
                        return Err(unusable(format!(
                            "torch {} is older than the stable ABI target {abi} of `[torch] stable-abi`",
                            torch.version
                        )));
                    }
                    (CellKind::StableAbi, naming::stable_abi_name(abi, compute, system), tv)
                }
                None => (CellKind::Torch, naming::torch_arch_name(&tv, compute, system), tv),
            }
        }
        _ => anyhow::bail!(
            "`{}` is a `[{}]` kernel, which compiles nothing for `{backend}`",
            config.path,
            config.framework.section()
        ),
    })
}

/// The `[kernel.*]` the cell compiles (at least one), and cargo and rustc for a Rust kernel
/// (natively only: a Nix cell has no Rust toolchain).
fn cell_kernels(
    config: &BuildConfig,
    backend: Backend,
    bv: Option<&Version>,
    host: &HostToolchain,
) -> anyhow::Result<(Vec<String>, Option<CargoTools>)> {
    let kernels: Vec<String> =
        matrix::cells::kernels_in_cell(config, backend, bv).map(|(n, _)| n.clone()).collect();
    if kernels.is_empty() {
        return Err(misconfigured(format!(
            "no `[kernel.*]` of `{backend}` applies to this cell (see `cuda-minver`)"
        )));
    }
    let cargo = cargo_tools(config, backend, &kernels)?;
    if let (Some(c), Some(set)) = (&cargo, &host.package_set) {
        // A Nix cell builds sandboxed, offline: the locked crates would have to be store paths
        // (a vendored Cargo.lock), and the package sets here bring no Rust toolchain.
        anyhow::bail!(
            "`[kernel.{}]` is a rust-cpu kernel, which Nix cells (package set `{set}`) do not build yet: a cell's derivation gets no cargo from its package set and cannot fetch the locked crates in the sandbox; build it natively with `kernel-builder build-and-copy --nix never`",
            c.kernel
        );
    }
    Ok((kernels, cargo))
}

/// A [`Kind::Toolchain`] error: what builds the cell is missing or cannot build it.
fn unusable(message: String) -> anyhow::Error {
    Error::new(Kind::Toolchain, message).into()
}

/// A [`Kind::Config`] error: build.toml asks for what the cell cannot build.
fn misconfigured(message: String) -> anyhow::Error {
    Error::new(Kind::Config, message).into()
}

/// The warning for a cell that is not in the bundle of its system (a host toolchain's torch
/// the matrix does not publish for), naming the two nearest bundle cells by framework version
/// then backend version (`versions`: the cell's framework and backend versions); `None` for a
/// bundle cell.
#[allow(clippy::too_many_arguments)]
fn outside_bundle_note(
    config: &BuildConfig,
    cells: &KernelCells,
    system: &str,
    backend: Backend,
    variant: &str,
    versions: (&Version, Option<&Version>),
    framework: &CellFramework,
    host: &HostToolchain,
) -> Option<String> {
    let (named_version, bv) = versions;
    let bundle: Vec<&matrix::Cell> =
        cells.on(system, Scope::Bundle).filter(|c| c.backend == backend && !c.noarch).collect();
    if bundle.iter().any(|c| c.name == variant) {
        return None;
    }
    Some({
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
                let db = match (c.backend_version.as_deref().and_then(|v| Version::parse(v).ok()), bv) {
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
        let in_matrix = cells.on(system, Scope::All).any(|c| c.name == variant);
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
    })
}

/// The CUDA capabilities each kernel of a cell is compiled for, and what the build says of
/// them.
#[derive(Default)]
struct CellCapabilities {
    by_kernel: BTreeMap<String, Vec<String>>,
    notes: Vec<String>,
    /// `--cuda-capabilities` (or its variable), when it left some out.
    only: Option<Vec<String>>,
}

/// [`CellCapabilities`] of the CUDA cell `variant` (CUDA `cuda`, parsed `bv`, compiled by
/// `nvcc`) for its
/// `kernels`: each kernel's `cuda-capabilities` resolved against what that CUDA builds, less
/// what `--cuda-capabilities` leaves out.
///
/// Errors: a kernel none of whose capabilities this CUDA builds; `--cuda-capabilities` asking
/// for none that any kernel of the cell builds.
fn cell_cuda_capabilities(
    config: &BuildConfig,
    host: &HostToolchain,
    kernels: &[String],
    cuda: &str,
    bv: Option<&Version>,
    nvcc: Option<&Tool>,
    variant: &str,
) -> anyhow::Result<CellCapabilities> {
    let mut cuda_capabilities = BTreeMap::new();
    let mut notes = Vec::new();
    let mut capabilities_only = None;
    // The CUDA kernels none of whose capabilities --cuda-capabilities asks for.
    let mut unmatched: Vec<String> = Vec::new();
    for name in kernels {
        let k = &config.kernels[name];
        let resolved = matrix::resolve_cuda_capabilities_in(
            matrix::data::for_config(config),
            k.cuda_capabilities.as_deref(),
            cuda,
        )?;
        if let (Some(asked), Some(nvcc), false) = (&k.cuda_capabilities, nvcc, resolved.is_empty()) {
            let dropped =
                matrix::unbuildable_cuda_capabilities_in(matrix::data::for_config(config), asked, cuda)?;
            if !dropped.is_empty() {
                notes.push(dropped_capabilities_note(name, &dropped, nvcc, variant, &resolved));
            }
        }
        if resolved.is_empty() {
            let asked: Vec<String> = k.cuda_capabilities.iter().flatten().map(ToString::to_string).collect();
            let can = matrix::data::for_config(config)
                .cuda
                .iter()
                .find(|(v, _)| Version::parse(v).ok().as_ref() == bv);
            return Err(misconfigured(format!(
                "[kernel.{name}] asks for CUDA capabilities {} and CUDA {cuda} builds none of them (it builds {}); fix `cuda-capabilities`",
                asked.join(", "),
                can.map(|(_, t)| t.capabilities.join(", ")).unwrap_or_default()
            )));
        }
        let resolved = match &host.cuda_capabilities_only {
            Some(only) => {
                let kept = select_capabilities(&resolved, only)
                    .with_context(|| format!("--cuda-capabilities / {CUDA_CAPABILITIES_VAR}"))?;
                if kept.is_empty() {
                    // A part for other GPUs (an sm100-only kernel beside sm90 ones): leaving
                    // it out would leave the binding's calls into it unresolved, so it keeps
                    // its own capabilities (few, for such a part) and the cell still loads.
                    notes.push(format!(
                        "[kernel.{name}] builds none of {} asked for with --cuda-capabilities / {CUDA_CAPABILITIES_VAR}: compiled for its own {}",
                        only.join(", "),
                        resolved.join(", ")
                    ));
                    unmatched.push(format!("[kernel.{name}] ({})", resolved.join(", ")));
                } else if kept.len() < resolved.len() {
                    notes.push(format!(
                        "[kernel.{name}]: compiled for CUDA capabilit{} {} only (--cuda-capabilities / {CUDA_CAPABILITIES_VAR}), not {}; `{variant}` is for checks, and upload refuses it",
                        if kept.len() == 1 { "y" } else { "ies" },
                        kept.join(", "),
                        resolved.iter().filter(|c| !kept.contains(c)).cloned().collect::<Vec<_>>().join(", ")
                    ));
                    capabilities_only = Some(only.clone());
                }
                if kept.is_empty() {
                    resolved
                } else {
                    kept
                }
            }
            None => resolved,
        };
        cuda_capabilities.insert(name.clone(), resolved);
    }
    if let (Some(only), true) = (&host.cuda_capabilities_only, unmatched.len() == kernels.len()) {
        anyhow::bail!(
            "no `[kernel.*]` of this cell builds any of {} asked for with --cuda-capabilities / {CUDA_CAPABILITIES_VAR}: {}; ask for one of those",
            only.join(", "),
            unmatched.join(", ")
        );
    }
    Ok(CellCapabilities { by_kernel: cuda_capabilities, notes, only: capabilities_only })
}

/// The cargo tools of a cell compiling `kernels` when one of them is a Rust crate, `None`
/// when all are C++.
///
/// Errors: a Rust kernel beside another kernel in the cell (its crate is the whole module, so
/// nothing else could be linked in); no cargo or rustc.
fn cargo_tools(
    config: &BuildConfig,
    backend: Backend,
    kernels: &[String],
) -> anyhow::Result<Option<CargoTools>> {
    let Some(rust) = kernels.iter().find(|k| config.kernels[k.as_str()].language.is_rust()) else {
        return Ok(None);
    };
    if let Some(other) = kernels.iter().find(|k| *k != rust) {
        return Err(misconfigured(format!(
            "`[kernel.{rust}]` ({}) and `[kernel.{other}]` ({}) both compile for `{backend}` in `{}`; a Rust kernel's crate is the whole module of its cell, so a cell has one Rust kernel and nothing else: put the other code in the crate, or give it a backend of its own",
            config.kernels[rust.as_str()].language,
            config.kernels[other.as_str()].language,
            config.path
        )));
    }
    let manifest = config.kernels[rust.as_str()].cargo_manifest.clone().ok_or_else(|| {
        misconfigured(format!("`[kernel.{rust}]` of `{}` has no `cargo-manifest`", config.path))
    })?;
    let home_bin: Vec<Utf8PathBuf> = crate::env::CARGO_HOME
        .non_empty()
        .map(Utf8PathBuf::from)
        .or_else(|| crate::env::HOME.non_empty().map(|h| Utf8PathBuf::from(h).join(".cargo")))
        .map(|h| h.join("bin"))
        .into_iter()
        .collect();
    let cargo = match crate::env::CARGO.non_empty() {
        Some(c) => find_program(&c, &[])
            .ok_or_else(|| unusable(format!("`CARGO` is `{c}`, which is not an executable")))?,
        None => find_program("cargo", &home_bin).ok_or_else(|| {
            unusable(format!("`[kernel.{rust}]` is a Rust kernel and cargo was not found on PATH or in `$CARGO_HOME/bin`; install a Rust toolchain (e.g. rustup, or `apt-get install cargo`) or set CARGO"))
        })?,
    };
    // The rustc beside cargo (a rustup proxy picks the same toolchain for both), else PATH's.
    let beside: Vec<Utf8PathBuf> = cargo.parent().map(Utf8Path::to_owned).into_iter().collect();
    let rustc = find_program("rustc", &beside).ok_or_else(|| {
        unusable(format!("no rustc beside `{cargo}` or on PATH; install the Rust toolchain cargo belongs to"))
    })?;
    Ok(Some(CargoTools {
        cargo: Tool { version: version_line(&cargo)?, path: cargo },
        rustc: Tool { version: version_line(&rustc)?, path: rustc },
        kernel: rust.clone(),
        manifest,
    }))
}

/// The environment variable that, like `--cuda-capabilities`, compiles CUDA kernels for
/// fewer capabilities than they publish.
pub const CUDA_CAPABILITIES_VAR: &str = crate::env::CUDA_CAPABILITIES.name;

/// The entries of `resolved` (a kernel's capabilities for this CUDA: `8.0`, `9.0a`,
/// `12.0+PTX`) that `only` asks for: `X.Y` selects every entry of that major.minor (`9.0`
/// selects `9.0` and `9.0a`), `X.Ya`/`X.Yf` that one only; `+PTX` of an entry is kept.
/// Errors: an entry of `only` that is not a capability.
fn select_capabilities(resolved: &[String], only: &[String]) -> anyhow::Result<Vec<String>> {
    use crate::config::{CapabilitySuffix, CudaCapability};
    let wanted: Vec<CudaCapability> =
        only.iter().map(|o| CudaCapability::parse(o.trim())).collect::<anyhow::Result<_>>()?;
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

/// A compiled backend this host cannot build, and why (what is missing).
#[derive(Debug, Clone, Serialize)]
pub struct SkippedBackend {
    pub backend: Backend,
    /// The cell not built, when one cell of the backend is meant (a pinned bundle cell).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// What stands in the way, for a program (`--json`'s `kind`).
    pub kind: SkipKind,
    /// The same for a person: what is missing and what to do.
    pub reason: String,
}

/// What keeps a compiled cell from being built on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SkipKind {
    /// This version does not build the backend natively (ROCm, XPU, Metal; a Rust kernel's
    /// language not yet built): nothing on the machine would change that.
    NotNative,
    /// The machine's toolchain lacks or refuses what the cell needs (a C++ compiler, a CUDA
    /// torch, an nvcc of torch's CUDA, tvm-ffi), or gives a torch or CUDA outside build.toml's
    /// bounds: another toolchain would build the cell.
    Toolchain,
    /// build.toml asks for what no toolchain builds in this cell (no `[kernel.*]` applies to
    /// it, CUDA capabilities its CUDA cannot build).
    Config,
    /// The cell's pins (nix/torch-wheels.json) are incomplete (no entry, no sha256 yet) or
    /// build another cell.
    Pins,
    /// Its pinned toolchain could not be had: a download, a wheelhouse, the disk.
    Provision,
}

impl SkipKind {
    /// The kind of `e`, an error of planning a cell of `backend` (`pinned`: from its pins).
    pub fn of(config: &BuildConfig, backend: Backend, e: &anyhow::Error, pinned: bool) -> SkipKind {
        if refuse_not_native(config, backend).is_err() {
            return SkipKind::NotNative;
        }
        if e.downcast_ref::<crate::toolchain::pins::PinError>().is_some() {
            return SkipKind::Pins;
        }
        match crate::error::kind(e) {
            Kind::Config => SkipKind::Config,
            Kind::Toolchain => SkipKind::Toolchain,
            _ if pinned => SkipKind::Provision,
            _ => SkipKind::Toolchain,
        }
    }
}

impl SkippedBackend {
    /// The note a build prints for it.
    pub fn note(&self) -> String {
        match &self.variant {
            Some(v) => format!("`{v}` is not built: {}", self.reason),
            None => format!("the `{}` variant is not built: {}", self.backend, self.reason),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(sel(&["sm_90"]).unwrap_err().to_string().contains("is not a CUDA capability"));
    }

    #[test]
    fn a_skipped_cell_is_of_the_kind_its_error_says() {
        let config = |backends: &str, framework: &str, kernel: &str| {
            let text = format!(
                "[general]\nname = \"kk\"\nversion = 1\nedition = 6\nlicense = \"MIT\"\nbackends = [{backends}]\n[{framework}]\nsrc = [\"t.cpp\"]\n{kernel}"
            );
            crate::config::config_for_tests(&text)
        };
        let c = config(
            "\"cpu\", \"cuda\", \"rocm\"",
            "torch",
            "[kernel.a]\nlanguage = \"cpp-cpu\"\ndepends = []\nsrc = [\"a.cpp\"]\n",
        );
        let any = anyhow::anyhow!("whatever");
        assert_eq!(SkipKind::of(&c, Backend::Rocm, &any, false), SkipKind::NotNative);
        let pins = anyhow::Error::from(crate::toolchain::pins::PinError::NoToolkit {
            cuda: "12.6".into(),
            system: "x86_64-linux".into(),
        })
        .context("cannot provision");
        assert_eq!(SkipKind::of(&c, Backend::Cuda, &pins, true), SkipKind::Pins);
        assert_eq!(SkipKind::of(&c, Backend::Cuda, &unusable("no nvcc".into()), false), SkipKind::Toolchain);
        assert_eq!(SkipKind::of(&c, Backend::Cuda, &misconfigured("outside".into()), true), SkipKind::Config);
        // A pinned toolchain that could not be had (a download, the disk); on the host, the toolchain.
        assert_eq!(SkipKind::of(&c, Backend::Cuda, &any, true), SkipKind::Provision);
        assert_eq!(SkipKind::of(&c, Backend::Cpu, &any, false), SkipKind::Toolchain);
        // A Rust kernel this version does not build yet.
        let rust = config(
            "\"cuda\"",
            "tvm-ffi",
            "[kernel.b]\nlanguage = \"rust-cutile\"\ncargo-manifest = \"Cargo.toml\"\nsrc = [\"src/lib.rs\"]\ntileiras-minver = \"13.2\"\n",
        );
        assert_eq!(SkipKind::of(&rust, Backend::Cuda, &any, false), SkipKind::NotNative);
        let s = SkippedBackend {
            backend: Backend::Rocm,
            variant: None,
            kind: SkipKind::NotNative,
            reason: "r".into(),
        };
        assert_eq!(
            serde_json::to_value(&s).unwrap(),
            serde_json::json!({"backend": "rocm", "kind": "not-native", "reason": "r"})
        );
        assert_eq!(s.note(), "the `rocm` variant is not built: r");
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
}
