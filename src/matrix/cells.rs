//! The cells of the build matrix that one kernel builds.
//!
//! Same rules as upstream's Nix (`filterApplicableBuildSets`, nix-builder §3.8):
//!
//! 1. keep the build sets of the system whose backend is in `general.backends`, that offer
//!    tvm-ffi when the kernel is a tvm-ffi kernel (and whose backend has a `[kernel.*]`
//!    then: a tvm-ffi kernel has no noarch cell), whose CUDA version lies within
//!    `general.cuda.minver..=maxver` and whose torch version within `[torch] minver..=maxver`
//!    (versions compare numerically: `"13.0"` equals `"13"`);
//! 2. for a backend built against the torch stable ABI, keep one set per backend version: the
//!    one with the newest torch;
//! 3. name each set: `mlx-<backend>` for an `[mlx-noarch]` kernel, noarch (`torch-<backend>`)
//!    when no `[kernel.*]` targets its backend (TPU is always `torch-tpu`), else tvm-ffi,
//!    stable-ABI or torch arch;
//! 4. a name made by several sets is one cell, from the first set in matrix order (as Nix's
//!    `listToAttrs`); with [`Scope::All`] the first *bundle* set is preferred, so that a cell
//!    of the bundle is described the same way in both scopes.

use serde::{Deserialize, Serialize};

use crate::config::{Backend, BuildConfig, Framework, Kernel, Version};

use super::cuda::{default_list, json_version, normalize, resolve_list, toolkit};
use super::data::{for_config, BuildSet, MatrixData};
use super::naming;
use super::rocm::resolve_rocm_archs_in;

/// Which build sets to consider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// What `nix build .#bundle` builds: sets marked `bundle` in the matrix.
    Bundle,
    /// Every set, adding those outside the bundle (torch 2.11 cpu, torch-tpu).
    All,
}

/// What kind of build a cell is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CellKind {
    /// Pure Python / JIT code, named `torch-<backend>`.
    Noarch,
    /// A compiled torch extension for one torch version.
    Torch,
    /// A compiled torch extension against the torch stable ABI.
    StableAbi,
    /// A compiled TVM-FFI extension.
    TvmFfi,
    /// Pure-Python MLX code (`[mlx-noarch]`), named `mlx-metal`.
    MlxNoarch,
}

/// One build variant of a kernel: a build set of the matrix, named.
///
/// Serialised (snake_case keys) by `kernel-builder list-variants --json` and read by the Nix
/// library and CI; `backend` and `kind` serialise as lowercase / kebab-case strings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cell {
    /// The variant name, also the directory under `build/`: `torch213-cxx11-cu130-x86_64-linux`,
    /// `torch213-cpu-aarch64-darwin`, `torch-stable-abi211-cu126-x86_64-linux`,
    /// `tvm-ffi01-cu126-x86_64-linux`, `torch-cuda`.
    pub name: String,
    /// Nix system, e.g. `x86_64-linux`.
    pub system: String,
    pub backend: Backend,
    /// CUDA / ROCm / XPU version as written in the matrix (`"12.6"`, `"2025.3.2"`).
    pub backend_version: Option<String>,
    /// Torch `major.minor` the cell is built with.
    pub torch_version: String,
    /// True for `torch-<backend>` cells.
    pub noarch: bool,
    /// Part of the default bundle (`nix build .#bundle`).
    pub bundle: bool,
    pub kind: CellKind,
    /// The torch arch variant name of the build set (the dev-shell key), also for noarch cells.
    pub arch_variant: String,
    /// Compiled CUDA cells: the architectures the kernels compile, union over the kernels built
    /// in this cell, sorted (`["8.0", "9.0a", "9.0+PTX"]`). Noarch CUDA cells: the
    /// `[torch-noarch] cuda_capabilities` when set. Otherwise `None`.
    pub cuda_capabilities: Option<Vec<String>>,
    /// Compiled ROCm cells: the gfx targets compiled (union, sorted). Noarch ROCm cells: the
    /// `[torch-noarch] rocm_archs` when set. Otherwise `None`.
    pub rocm_archs: Option<Vec<String>>,
    /// The name of the matrix the cell comes from (`2026-12`, `upstream-2026-08`).
    pub matrix: String,
    /// That matrix's revision date (`2026-12-01`).
    pub matrix_revision: String,
}

/// The nix system this program runs on, e.g. `x86_64-linux` or `aarch64-darwin`.
pub fn host_system() -> String {
    let os = match std::env::consts::OS {
        "macos" => "darwin",
        os => os,
    };
    format!("{}-{os}", std::env::consts::ARCH)
}

/// Whether the kernel builds `backend` against the torch stable ABI.
fn stable_abi_for(config: &BuildConfig, backend: Backend) -> Option<&Version> {
    match &config.framework {
        Framework::Torch(t) => t.stable_abi.for_backend(backend),
        _ => None,
    }
}

/// Step 1 of the module doc: does the kernel build this set at all?
pub(crate) fn set_applies(config: &BuildConfig, set: &BuildSet) -> bool {
    if !config.general.backends.contains(&set.backend) {
        return false;
    }
    if matches!(config.framework, Framework::TvmFfi(_)) {
        // Only `[torch]` turns a backend without a `[kernel.*]` into a pure-Python
        // `torch-<backend>` cell (the mixed-kernel model); a tvm-ffi kernel has no pure-Python
        // variant, so such a backend has no cell (`check-config` refuses the file).
        if set.tvm_ffi.is_none() || !config.has_kernel_for(set.backend) {
            return false;
        }
    }
    // A bound build.toml leaves out is the matrix file's default (`naming.default_bounds`,
    // which kernelCells.nix applies too).
    let defaults = &super::data::naming().default_bounds;
    if set.backend == Backend::Cuda {
        let Some(cuda) = set.version.as_deref().map(json_version) else { return false };
        let g = &config.general.cuda;
        if !in_bounds(&cuda, g.minver.as_ref(), g.maxver.as_ref(), &defaults.cuda) {
            return false;
        }
    }
    let (min, max) = config.framework.torch_bounds();
    in_bounds(&json_version(&set.torch), min, max, &defaults.torch)
}

/// `min <= v <= max`, a missing bound taken from `default`.
fn in_bounds(
    v: &Version,
    min: Option<&Version>,
    max: Option<&Version>,
    default: &super::data::Bounds,
) -> bool {
    let min = min.cloned().unwrap_or_else(|| json_version(&default.minver));
    let max = max.cloned().unwrap_or_else(|| json_version(&default.maxver));
    min <= *v && *v <= max
}

/// Whether `set`'s cell is in the default bundle. A tvm-ffi variant carries no torch version,
/// so where no bundle set of a backend offers tvm-ffi, that backend's tvm-ffi sets are the
/// tvm-ffi kernel's bundle (else such a kernel would build nothing by default; the matrix notes
/// say why the newest torch sets do not offer it), per system. `kernelCells.nix` applies the same rule.
pub(crate) fn set_in_bundle(m: &MatrixData, config: &BuildConfig, set: &BuildSet, system: &str) -> bool {
    set.bundle
        || (matches!(config.framework, Framework::TvmFfi(_))
            && set.tvm_ffi.is_some()
            && !m.build_sets.iter().any(|o| {
                o.backend == set.backend
                    && o.bundle
                    && o.tvm_ffi.is_some()
                    && o.systems.iter().any(|s| s == system)
            }))
}

/// Steps 1 and 2: the sets of `system` of matrix `m` the kernel builds, in matrix order
/// (bundle or not).
pub(crate) fn applicable_sets<'m>(
    m: &'m MatrixData,
    config: &BuildConfig,
    system: &str,
) -> Vec<&'m BuildSet> {
    let sets: Vec<&BuildSet> = m
        .build_sets
        .iter()
        .filter(|s| s.systems.iter().any(|x| x == system) && set_applies(config, s))
        .collect();
    // Stable-ABI dedup: per backend and backend version, only the newest torch survives.
    sets.iter()
        .copied()
        .filter(|s| {
            if stable_abi_for(config, s.backend).is_none() {
                return true;
            }
            let key = s.version.as_deref().map(json_version);
            let torch = json_version(&s.torch);
            // Keep `s` unless a later-or-equal torch exists in its group; ties go to the first.
            !sets.iter().any(|o| {
                o.backend == s.backend
                    && o.version.as_deref().map(json_version) == key
                    && !std::ptr::eq(*o, *s)
                    && (json_version(&o.torch) > torch
                        || (json_version(&o.torch) == torch && position(m, o) < position(m, s)))
            })
        })
        .collect()
}

fn position(m: &MatrixData, set: &BuildSet) -> usize {
    m.build_sets.iter().position(|s| std::ptr::eq(s, set)).unwrap_or(usize::MAX)
}

/// The kernels of `backend` that a cell with backend version `version` compiles: CUDA kernels
/// whose `cuda-minver` (or cuTile `tileiras-minver`) is above the cell's CUDA are left out.
pub(crate) fn kernels_in_cell<'c>(
    config: &'c BuildConfig,
    backend: Backend,
    version: Option<&Version>,
) -> impl Iterator<Item = (&'c String, &'c Kernel)> + 'c {
    let version = version.cloned();
    config.kernels.iter().filter(move |(_, k)| {
        k.backend == backend
            && match (k.min_cuda(), &version) {
                (Some(min), Some(v)) if backend == Backend::Cuda => v >= min,
                _ => true,
            }
    })
}

/// The architectures of a cell of `backend` (backend version `version`, as the matrix writes
/// it): for a compiled CUDA cell the capabilities its kernels compile (union, sorted), for a
/// compiled ROCm cell the gfx targets; for a noarch cell `[torch-noarch]`'s lists, when set.
fn cell_archs(
    m: &MatrixData,
    config: &BuildConfig,
    backend: Backend,
    version: Option<&str>,
    noarch: bool,
) -> (Option<Vec<String>>, Option<Vec<String>>) {
    let (mut cuda_capabilities, mut rocm_archs) = (None, None);
    if noarch {
        if let Framework::TorchNoarch(t) = &config.framework {
            if backend == Backend::Cuda {
                cuda_capabilities =
                    t.cuda_capabilities.as_ref().map(|c| c.iter().map(ToString::to_string).collect());
            }
            if backend == Backend::Rocm {
                rocm_archs = t.rocm_archs.clone();
            }
        }
    } else if backend == Backend::Cuda {
        let mut all = Vec::new();
        if let Some((cuda, tk)) = version.and_then(|v| toolkit(m, v)) {
            for (_, k) in kernels_in_cell(config, backend, Some(&cuda)) {
                match &k.cuda_capabilities {
                    Some(caps) => all.extend(resolve_list(m, caps, &cuda, tk)),
                    None => all.extend(default_list(tk)),
                }
            }
        }
        cuda_capabilities = Some(normalize(all).iter().map(ToString::to_string).collect());
    } else if backend == Backend::Rocm {
        let mut all: Vec<String> = Vec::new();
        if let Some(v) = version {
            for (_, k) in kernels_in_cell(config, backend, None) {
                all.extend(resolve_rocm_archs_in(m, k.rocm_archs.as_deref(), v).unwrap_or_default());
            }
        }
        all.sort_by(|a, b| gfx_key(a).cmp(&gfx_key(b)));
        all.dedup();
        rocm_archs = Some(all);
    }

    (cuda_capabilities, rocm_archs)
}

/// `cell` (a cell as the kernel's flake lists it, `variants.<system>`) with the architectures
/// of a compiled cell resolved from matrix `m`, as [`cells_in`] resolves them: Nix leaves them
/// null, since the orchestrator resolves them inside the cell.
pub fn with_resolved_archs(m: &MatrixData, config: &BuildConfig, mut cell: Cell) -> Cell {
    if !cell.noarch {
        (cell.cuda_capabilities, cell.rocm_archs) =
            cell_archs(m, config, cell.backend, cell.backend_version.as_deref(), false);
    }
    cell
}

fn cell_for(m: &MatrixData, config: &BuildConfig, set: &BuildSet, system: &str) -> Cell {
    let backend = set.backend;
    let version = set.version.as_deref().map(json_version);
    let torch = json_version(&set.torch);
    let compute = naming::compute_tag(backend, version.as_ref());
    let arch_variant = naming::torch_arch_name(&torch, &compute, system);
    let mlx = matches!(config.framework, Framework::MlxNoarch(_));
    let noarch = mlx || config.is_noarch_for(backend) || backend == Backend::Tpu;
    let (kind, name) = if mlx {
        // `[mlx-noarch]` compiles nothing, whatever `[kernel.*]` tables it has (they are warned about).
        (CellKind::MlxNoarch, naming::mlx_noarch_name(backend))
    } else if noarch {
        (CellKind::Noarch, naming::noarch_name(backend))
    } else if let Framework::TvmFfi(_) = config.framework {
        let tvm = json_version(set.tvm_ffi.as_deref().unwrap_or("0.1"));
        (CellKind::TvmFfi, naming::tvm_ffi_name(&tvm, &compute, system))
    } else if let Some(abi) = stable_abi_for(config, backend) {
        (CellKind::StableAbi, naming::stable_abi_name(abi, &compute, system))
    } else {
        (CellKind::Torch, arch_variant.clone())
    };

    let (cuda_capabilities, rocm_archs) = cell_archs(m, config, backend, set.version.as_deref(), noarch);

    Cell {
        name,
        system: system.to_owned(),
        backend,
        backend_version: set.version.clone(),
        torch_version: set.torch.clone(),
        noarch,
        bundle: set_in_bundle(m, config, set, system),
        kind,
        arch_variant,
        cuda_capabilities,
        rocm_archs,
        matrix: m.name.clone(),
        matrix_revision: m.revision.clone(),
    }
}

/// Sort key for gfx targets: `gfx90a` < `gfx942` < `gfx1030` (by number length, then text).
fn gfx_key(arch: &str) -> (usize, &str) {
    (arch.len(), arch)
}

/// The cells `config` builds on `system` (a Nix system such as `x86_64-linux`), sorted by name,
/// one per name, from the matrix the kernel pins (`[general] matrix`, else the default:
/// [`for_config`]). An unknown system has no cells.
pub fn cells(config: &BuildConfig, system: &str, scope: Scope) -> Vec<Cell> {
    cells_in(for_config(config), config, system, scope)
}

/// [`cells`] from matrix `m`, whatever the kernel pins (the corpus tests compare the August
/// snapshot's cells with upstream's lists this way).
pub fn cells_in(m: &MatrixData, config: &BuildConfig, system: &str, scope: Scope) -> Vec<Cell> {
    let mut out: Vec<Cell> = Vec::new();
    for set in applicable_sets(m, config, system) {
        if scope == Scope::Bundle && !set_in_bundle(m, config, set, system) {
            continue;
        }
        let cell = cell_for(m, config, set, system);
        match out.iter_mut().find(|c| c.name == cell.name) {
            Some(existing) if !existing.bundle && cell.bundle => *existing = cell,
            Some(_) => {}
            None => out.push(cell),
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// [`cells_in`] for each of `systems` in turn: the cells of the first system (sorted by name),
/// then the second's, … A noarch name (`torch-cuda`) comes once per system that has a cell for
/// it. This is what `list-variants` prints and what `ci-matrix` fans out.
pub fn cells_on(m: &MatrixData, config: &BuildConfig, systems: &[String], scope: Scope) -> Vec<Cell> {
    systems.iter().flat_map(|s| cells_in(m, config, s, scope)).collect()
}

/// Every cell of one kernel on every system of its matrix, in both scopes: computed once when
/// a build is planned ([`KernelCells::of`]), then read by every step that asks which cells the
/// kernel has (the host cell's nearest bundle cells, why a named variant is not built here, the
/// pinned cells, the stale variants of `build/`), instead of each step recomputing them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelCells {
    /// [`Scope::Bundle`]: each system of the matrix in turn, each sorted by name ([`cells_on`]).
    bundle: Vec<Cell>,
    /// [`Scope::All`], in the same order.
    all: Vec<Cell>,
}

impl KernelCells {
    /// The cells of `config` in the matrix it pins ([`for_config`]).
    pub fn of(config: &BuildConfig) -> KernelCells {
        KernelCells::in_matrix(for_config(config), config)
    }

    /// The cells of `config` in matrix `m`.
    pub fn in_matrix(m: &MatrixData, config: &BuildConfig) -> KernelCells {
        KernelCells {
            bundle: cells_on(m, config, &m.systems, Scope::Bundle),
            all: cells_on(m, config, &m.systems, Scope::All),
        }
    }

    /// Every system's cells in `scope` (a noarch name once per system that has it).
    pub fn in_scope(&self, scope: Scope) -> &[Cell] {
        match scope {
            Scope::Bundle => &self.bundle,
            Scope::All => &self.all,
        }
    }

    /// The cells of `system` in `scope`, sorted by name (none for a system the matrix lacks):
    /// what [`cells`] gives.
    pub fn on<'a: 's, 's>(&'a self, system: &'s str, scope: Scope) -> impl Iterator<Item = &'a Cell> + 's {
        self.in_scope(scope).iter().filter(move |c| c.system == system)
    }
}

#[cfg(test)]
mod tests {
    use super::super::data::named;
    use super::super::testutil::*;
    use super::*;
    use crate::config::{Backend::*, StableAbi};

    // The rules are tested on the August snapshot, whose data never changes; tests of the
    // default matrix (below, `default_matrix_*`) call `super::cells`.
    fn cells(config: &BuildConfig, system: &str, scope: Scope) -> Vec<Cell> {
        cells_in(named("upstream-2026-08").unwrap(), config, system, scope)
    }

    fn names(config: &BuildConfig, system: &str, scope: Scope) -> Vec<String> {
        cells(config, system, scope).into_iter().map(|c| c.name).collect()
    }

    fn default_names(config: &BuildConfig, system: &str, scope: Scope) -> Vec<String> {
        super::cells(config, system, scope).into_iter().map(|c| c.name).collect()
    }

    #[test]
    fn default_matrix_bundle_is_torch_2_14_and_2_15() {
        let c = torch_config(&[Cpu, Cuda, Metal, Rocm, Xpu], &[Cpu, Cuda, Metal, Rocm, Xpu]);
        assert_eq!(
            default_names(&c, "x86_64-linux", Scope::Bundle),
            [
                "torch213-cxx11-rocm71-x86_64-linux",
                "torch213-cxx11-rocm72-x86_64-linux",
                "torch213-cxx11-xpu20260-x86_64-linux",
                "torch214-cxx11-cpu-x86_64-linux",
                "torch214-cxx11-cu126-x86_64-linux",
                "torch214-cxx11-cu130-x86_64-linux",
                "torch214-cxx11-cu132-x86_64-linux",
                "torch214-cxx11-rocm72-x86_64-linux",
                "torch215-cxx11-cpu-x86_64-linux",
                "torch215-cxx11-cu132-x86_64-linux",
            ]
        );
        assert_eq!(
            default_names(&c, "aarch64-linux", Scope::Bundle),
            [
                "torch214-cxx11-cpu-aarch64-linux",
                "torch214-cxx11-cu126-aarch64-linux",
                "torch214-cxx11-cu130-aarch64-linux",
                "torch214-cxx11-cu132-aarch64-linux",
                "torch215-cxx11-cpu-aarch64-linux",
                "torch215-cxx11-cu132-aarch64-linux",
            ]
        );
        assert_eq!(
            default_names(&c, "aarch64-darwin", Scope::Bundle),
            [
                "torch214-cpu-aarch64-darwin",
                "torch214-metal-aarch64-darwin",
                "torch215-cpu-aarch64-darwin",
                "torch215-metal-aarch64-darwin",
            ]
        );
        // Outside the bundle: torch 2.11 cpu, every 2.12 set, 2.13 cpu/cuda.
        assert_eq!(default_names(&c, "x86_64-linux", Scope::All).len(), 10 + 1 + 7 + 4);
        let all = super::cells(&c, "x86_64-linux", Scope::All);
        let cu132 = all.iter().find(|c| c.name == "torch215-cxx11-cu132-x86_64-linux").unwrap();
        assert_eq!((cu132.matrix.as_str(), cu132.matrix_revision.as_str()), ("2026-12", "2026-12-01"));
        assert!(cu132.bundle);
        let rocm = all.iter().find(|c| c.name == "torch214-cxx11-rocm72-x86_64-linux").unwrap();
        assert!(rocm.rocm_archs.as_deref().unwrap().contains(&"gfx1151".to_owned()));
        assert_eq!(rocm.rocm_archs.as_deref().unwrap().len(), 15);
    }

    #[test]
    fn default_matrix_noarch_and_stable_abi_cells() {
        let c = noarch_config(&[Cpu, Cuda, Rocm, Xpu]);
        let x86 = super::cells(&c, "x86_64-linux", Scope::Bundle);
        let facts: Vec<(&str, &str, Option<&str>)> = x86
            .iter()
            .map(|c| (c.name.as_str(), c.torch_version.as_str(), c.backend_version.as_deref()))
            .collect();
        assert_eq!(
            facts,
            [
                ("torch-cpu", "2.14", None),
                ("torch-cuda", "2.14", Some("12.6")),
                ("torch-rocm", "2.13", Some("7.1")),
                ("torch-xpu", "2.13", Some("2026.0.0")),
            ]
        );
        let mut s = torch_config(&[Cpu, Cuda, Metal, Rocm, Xpu], &[Cpu, Cuda, Metal, Rocm, Xpu]);
        if let Framework::Torch(t) = &mut s.framework {
            t.stable_abi = StableAbi::All(v("2.11"));
        }
        let x86 = super::cells(&s, "x86_64-linux", Scope::Bundle);
        let facts: Vec<(&str, &str)> =
            x86.iter().map(|c| (c.name.as_str(), c.torch_version.as_str())).collect();
        assert_eq!(
            facts,
            [
                ("torch-stable-abi211-cpu-x86_64-linux", "2.15"),
                ("torch-stable-abi211-cu126-x86_64-linux", "2.14"),
                ("torch-stable-abi211-cu130-x86_64-linux", "2.14"),
                ("torch-stable-abi211-cu132-x86_64-linux", "2.15"),
                ("torch-stable-abi211-rocm71-x86_64-linux", "2.13"),
                ("torch-stable-abi211-rocm72-x86_64-linux", "2.14"),
                ("torch-stable-abi211-xpu20260-x86_64-linux", "2.13"),
            ]
        );
    }

    #[test]
    fn a_pinned_snapshot_gives_its_cells() {
        let mut c = torch_config(&[Cuda], &[Cuda]);
        c.general.matrix = Some("upstream-2026-08".into());
        assert_eq!(
            default_names(&c, "aarch64-linux", Scope::Bundle),
            names(&c, "aarch64-linux", Scope::Bundle)
        );
        assert_eq!(super::cells(&c, "aarch64-linux", Scope::Bundle)[0].matrix, "upstream-2026-08");
        assert_eq!(super::cells(&c, "aarch64-linux", Scope::Bundle)[0].matrix_revision, "2026-08-20");
    }

    /// A cell as the kernel's flake lists it (compiled cells without architectures) gets back
    /// exactly the architectures `cells_in` resolves, on every system, for a kernel of every
    /// framework; a noarch cell keeps what it has.
    #[test]
    fn flake_cells_get_the_architectures_cells_in_resolves() {
        let configs = [
            torch_config(&[Cpu, Cuda, Metal, Rocm, Xpu], &[Cpu, Cuda, Metal, Rocm, Xpu]),
            crate::matrix::testutil::tvm_ffi_config(&[Cpu, Cuda], &[Cpu, Cuda]),
            crate::matrix::testutil::noarch_config(&[Cuda, Rocm]),
        ];
        let m = for_config(&configs[0]);
        let mut compiled = 0;
        for c in &configs {
            for cell in KernelCells::of(c).in_scope(Scope::All) {
                let mut from_nix = cell.clone();
                if !cell.noarch {
                    (from_nix.cuda_capabilities, from_nix.rocm_archs) = (None, None);
                    compiled += 1;
                }
                assert_eq!(&with_resolved_archs(m, c, from_nix), cell, "{}", cell.name);
            }
        }
        assert!(compiled > 20, "{compiled}");
    }

    #[test]
    fn relu_like_kernel_builds_the_whole_matrix() {
        let c = torch_config(&[Cpu, Cuda, Metal, Rocm, Xpu], &[Cpu, Cuda, Metal, Rocm, Xpu]);
        assert_eq!(
            names(&c, "x86_64-linux", Scope::All),
            [
                "torch211-cxx11-cpu-x86_64-linux",
                "torch212-cxx11-cpu-x86_64-linux",
                "torch212-cxx11-cu126-x86_64-linux",
                "torch212-cxx11-cu130-x86_64-linux",
                "torch212-cxx11-cu132-x86_64-linux",
                "torch212-cxx11-rocm71-x86_64-linux",
                "torch212-cxx11-rocm72-x86_64-linux",
                "torch212-cxx11-xpu20253-x86_64-linux",
                "torch213-cxx11-cpu-x86_64-linux",
                "torch213-cxx11-cu126-x86_64-linux",
                "torch213-cxx11-cu130-x86_64-linux",
                "torch213-cxx11-cu132-x86_64-linux",
                "torch213-cxx11-rocm71-x86_64-linux",
                "torch213-cxx11-rocm72-x86_64-linux",
                "torch213-cxx11-xpu20260-x86_64-linux",
            ]
        );
        assert_eq!(names(&c, "x86_64-linux", Scope::Bundle).len(), 14);
        assert_eq!(
            names(&c, "aarch64-darwin", Scope::Bundle),
            [
                "torch212-cpu-aarch64-darwin",
                "torch212-metal-aarch64-darwin",
                "torch213-cpu-aarch64-darwin",
                "torch213-metal-aarch64-darwin",
            ]
        );
        assert_eq!(names(&c, "aarch64-linux", Scope::All).len(), 8);
        assert_eq!(names(&c, "riscv64-linux", Scope::All), Vec::<String>::new());
    }

    #[test]
    fn relu_cells_carry_their_build_facts() {
        let c = torch_config(&[Cpu, Cuda, Metal, Rocm, Xpu], &[Cpu, Cuda, Metal, Rocm, Xpu]);
        let all = cells(&c, "x86_64-linux", Scope::All);
        let cu130 = all.iter().find(|c| c.name == "torch213-cxx11-cu130-x86_64-linux").unwrap();
        assert_eq!(cu130.backend, Cuda);
        assert_eq!(cu130.backend_version.as_deref(), Some("13.0"));
        assert_eq!(cu130.torch_version, "2.13");
        assert_eq!(cu130.kind, CellKind::Torch);
        assert!(cu130.bundle && !cu130.noarch);
        assert_eq!(cu130.arch_variant, cu130.name);
        assert_eq!(
            cu130.cuda_capabilities.as_deref().unwrap(),
            ["7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "11.0", "12.0", "12.1+PTX"]
        );
        assert_eq!(cu130.rocm_archs, None);
        let rocm = all.iter().find(|c| c.name == "torch212-cxx11-rocm71-x86_64-linux").unwrap();
        assert_eq!(
            rocm.rocm_archs.as_deref().unwrap(),
            [
                "gfx906", "gfx908", "gfx90a", "gfx942", "gfx950", "gfx1030", "gfx1100", "gfx1101", "gfx1200",
                "gfx1201"
            ]
        );
        let cpu211 = all.iter().find(|c| c.name == "torch211-cxx11-cpu-x86_64-linux").unwrap();
        assert!(!cpu211.bundle);
    }

    #[test]
    fn noarch_backends_collapse_to_one_cell_each() {
        let c = noarch_config(&[Cuda, Rocm, Xpu]);
        assert_eq!(names(&c, "x86_64-linux", Scope::All), ["torch-cuda", "torch-rocm", "torch-xpu"]);
        assert_eq!(names(&c, "aarch64-linux", Scope::Bundle), ["torch-cuda"]);
        assert_eq!(names(&c, "aarch64-darwin", Scope::All), Vec::<String>::new());
        let cuda = &cells(&c, "x86_64-linux", Scope::Bundle)[0];
        // The first CUDA set in matrix order: torch 2.12, CUDA 12.6.
        assert_eq!((cuda.torch_version.as_str(), cuda.backend_version.as_deref()), ("2.12", Some("12.6")));
        assert_eq!(cuda.kind, CellKind::Noarch);
        assert_eq!(cuda.arch_variant, "torch212-cxx11-cu126-x86_64-linux");
        assert_eq!(cuda.cuda_capabilities, None);
    }

    #[test]
    fn noarch_cpu_prefers_the_bundle_set_in_scope_all() {
        let c = noarch_config(&[Cpu, Tpu]);
        let all = cells(&c, "x86_64-linux", Scope::All);
        assert_eq!(all.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["torch-cpu", "torch-tpu"]);
        assert!(all[0].bundle);
        assert_eq!(all[0].torch_version, "2.12");
        assert!(!all[1].bundle);
        assert_eq!(all[1].arch_variant, "torch211-cxx11-tpu-x86_64-linux");
        assert_eq!(names(&c, "x86_64-linux", Scope::Bundle), ["torch-cpu"]);
    }

    #[test]
    fn noarch_metadata_capabilities_are_passed_through() {
        let mut c = noarch_config(&[Cuda, Rocm]);
        if let Framework::TorchNoarch(t) = &mut c.framework {
            t.cuda_capabilities = Some(vec![cap("9.0a"), cap("8.0")]);
            t.rocm_archs = Some(vec!["gfx942".into()]);
        }
        let all = cells(&c, "x86_64-linux", Scope::Bundle);
        assert_eq!(all[0].cuda_capabilities.as_deref().unwrap(), ["9.0a", "8.0"]);
        assert_eq!(all[1].rocm_archs.as_deref().unwrap(), ["gfx942"]);
    }

    #[test]
    fn backend_without_a_kernel_is_noarch_inside_a_torch_kernel() {
        let mut c = torch_config(&[Cuda, Metal], &[Cuda]);
        if let Framework::Torch(t) = &mut c.framework {
            t.stable_abi = StableAbi::All(v("2.11"));
        }
        assert_eq!(names(&c, "aarch64-darwin", Scope::All), ["torch-metal"]);
        let metal = &cells(&c, "aarch64-darwin", Scope::All)[0];
        // Stable-ABI dedup happens before naming: only the newest torch is left.
        assert_eq!(metal.torch_version, "2.13");
    }

    #[test]
    fn stable_abi_builds_one_cell_per_backend_version() {
        let mut c = torch_config(&[Cpu, Cuda, Metal, Rocm, Xpu], &[Cpu, Cuda, Metal, Rocm, Xpu]);
        if let Framework::Torch(t) = &mut c.framework {
            t.stable_abi = StableAbi::All(v("2.11"));
        }
        let x86 = cells(&c, "x86_64-linux", Scope::All);
        assert_eq!(
            x86.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
            [
                "torch-stable-abi211-cpu-x86_64-linux",
                "torch-stable-abi211-cu126-x86_64-linux",
                "torch-stable-abi211-cu130-x86_64-linux",
                "torch-stable-abi211-cu132-x86_64-linux",
                "torch-stable-abi211-rocm71-x86_64-linux",
                "torch-stable-abi211-rocm72-x86_64-linux",
                "torch-stable-abi211-xpu20253-x86_64-linux",
                "torch-stable-abi211-xpu20260-x86_64-linux",
            ]
        );
        let torch_of = |n: &str| x86.iter().find(|c| c.name == n).unwrap().torch_version.clone();
        assert_eq!(torch_of("torch-stable-abi211-cu126-x86_64-linux"), "2.13");
        assert_eq!(torch_of("torch-stable-abi211-xpu20253-x86_64-linux"), "2.12");
        assert_eq!(torch_of("torch-stable-abi211-cpu-x86_64-linux"), "2.13");
        assert!(x86.iter().all(|c| c.kind == CellKind::StableAbi && c.bundle));
        assert_eq!(
            names(&c, "aarch64-linux", Scope::Bundle),
            [
                "torch-stable-abi211-cpu-aarch64-linux",
                "torch-stable-abi211-cu126-aarch64-linux",
                "torch-stable-abi211-cu130-aarch64-linux",
                "torch-stable-abi211-cu132-aarch64-linux",
            ]
        );
        assert_eq!(
            names(&c, "aarch64-darwin", Scope::Bundle),
            ["torch-stable-abi211-cpu-aarch64-darwin", "torch-stable-abi211-metal-aarch64-darwin"]
        );
    }

    #[test]
    fn stable_abi_per_backend_leaves_other_backends_versioned() {
        let mut c = torch_config(&[Cpu, Cuda], &[Cpu, Cuda]);
        if let Framework::Torch(t) = &mut c.framework {
            t.stable_abi = StableAbi::PerBackend([(Cuda, v("2.10"))].into_iter().collect());
        }
        assert_eq!(
            names(&c, "aarch64-linux", Scope::All),
            [
                "torch-stable-abi210-cu126-aarch64-linux",
                "torch-stable-abi210-cu130-aarch64-linux",
                "torch-stable-abi210-cu132-aarch64-linux",
                "torch212-cxx11-cpu-aarch64-linux",
                "torch213-cxx11-cpu-aarch64-linux",
            ]
        );
    }

    #[test]
    fn tvm_ffi_uses_only_sets_that_offer_it() {
        let c = tvm_ffi_config(&[Cpu, Cuda, Xpu], &[Cpu, Cuda, Xpu]);
        assert_eq!(
            names(&c, "x86_64-linux", Scope::All),
            [
                "tvm-ffi01-cpu-x86_64-linux",
                "tvm-ffi01-cu126-x86_64-linux",
                "tvm-ffi01-cu130-x86_64-linux",
                "tvm-ffi01-cu132-x86_64-linux",
                "tvm-ffi01-xpu20253-x86_64-linux",
            ]
        );
        assert_eq!(names(&c, "aarch64-darwin", Scope::Bundle), ["tvm-ffi01-cpu-aarch64-darwin"]);
        // cu132 is offered by torch 2.12 and 2.13; the first set in matrix order wins.
        let cu132 = cells(&c, "x86_64-linux", Scope::Bundle)
            .into_iter()
            .find(|c| c.name == "tvm-ffi01-cu132-x86_64-linux")
            .unwrap();
        assert_eq!(cu132.torch_version, "2.12");
        assert_eq!(cu132.kind, CellKind::TvmFfi);
        // A backend without a `[kernel.*]`: no `torch-<backend>` cell for a tvm-ffi kernel
        // (check-config refuses the file), while `[torch]` keeps its noarch cell.
        let c = tvm_ffi_config(&[Cpu, Cuda], &[Cpu]);
        assert_eq!(names(&c, "x86_64-linux", Scope::All), ["tvm-ffi01-cpu-x86_64-linux"]);
        assert_eq!(
            names(&tvm_ffi_config(&[Cpu, Cuda], &[]), "x86_64-linux", Scope::All),
            Vec::<String>::new()
        );
        let t = torch_config(&[Cpu, Cuda], &[Cpu]);
        assert!(names(&t, "x86_64-linux", Scope::All).contains(&"torch-cuda".to_owned()));
    }

    #[test]
    fn torch_bounds_are_inclusive() {
        let mut c = torch_config(&[Cuda], &[Cuda]);
        if let Framework::Torch(t) = &mut c.framework {
            t.minver = Some(v("2.12"));
            t.maxver = Some(v("2.12"));
        }
        assert_eq!(
            names(&c, "x86_64-linux", Scope::All),
            [
                "torch212-cxx11-cu126-x86_64-linux",
                "torch212-cxx11-cu130-x86_64-linux",
                "torch212-cxx11-cu132-x86_64-linux",
            ]
        );
    }

    #[test]
    fn cuda_maxver_13_0_keeps_cu130() {
        // Upstream's migration rewrote "13.0" as "13" and Nix then dropped cu130.
        for maxver in ["13.0", "13"] {
            let mut c = torch_config(&[Cuda], &[Cuda]);
            c.general.cuda.maxver = Some(v(maxver));
            c.general.cuda.minver = Some(v("12.6"));
            assert_eq!(
                names(&c, "aarch64-linux", Scope::Bundle),
                [
                    "torch212-cxx11-cu126-aarch64-linux",
                    "torch212-cxx11-cu130-aarch64-linux",
                    "torch213-cxx11-cu126-aarch64-linux",
                    "torch213-cxx11-cu130-aarch64-linux"
                ],
                "maxver {maxver}"
            );
        }
    }

    #[test]
    fn cuda_bounds_matching_nothing_give_no_cells() {
        let mut c = torch_config(&[Cuda], &[Cuda]);
        c.general.cuda.minver = Some(v("12.4"));
        c.general.cuda.maxver = Some(v("12.4"));
        assert_eq!(names(&c, "x86_64-linux", Scope::All), Vec::<String>::new());
    }

    #[test]
    fn kernels_skipped_in_a_cell_do_not_claim_capabilities() {
        let mut c = torch_config(&[Cuda], &[]);
        c.kernels.insert("sm100".into(), cuda_kernel(Some(&["10.0f"]), None));
        c.kernels.insert("sm90".into(), cuda_kernel(Some(&["9.0a"]), None));
        c.kernels.insert("sm120".into(), cuda_kernel(Some(&["12.0a"]), Some("13.0")));
        let all = cells(&c, "x86_64-linux", Scope::Bundle);
        let caps = |n: &str| all.iter().find(|c| c.name == n).unwrap().cuda_capabilities.clone().unwrap();
        assert_eq!(caps("torch212-cxx11-cu126-x86_64-linux"), ["9.0a"]);
        assert_eq!(caps("torch212-cxx11-cu130-x86_64-linux"), ["9.0a", "10.0f", "12.0a"]);
    }

    #[test]
    fn rocm_cells_intersect_the_kernel_archs() {
        let mut c = torch_config(&[Rocm], &[]);
        c.kernels.insert("r".into(), rocm_kernel(&["gfx1100", "gfx90a", "gfx940", "gfx942"]));
        let all = cells(&c, "x86_64-linux", Scope::Bundle);
        assert_eq!(all.len(), 4);
        assert!(all.iter().all(|c| c.rocm_archs.as_deref().unwrap() == ["gfx90a", "gfx942", "gfx1100"]));
    }
}
