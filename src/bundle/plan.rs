//! The build plan: which variants a command builds (or rebuilds, or opens a shell for) on this
//! machine, each compiled cell with the toolchain it comes from, and what it cannot build and
//! why.
//!
//! Two steps, each taken once per command:
//!
//! 1. [`choose_toolchains`] decides where compiled cells take their toolchain from (the host's,
//!    `--python`; the pinned wheels of the toolchain cache; or the host's with the pins for the
//!    pinned cells the host does not build) from the kernel and what the command was given. It
//!    is the only place that makes this choice.
//! 2. [`Plan::new`] plans every variant from that choice: the noarch cells of every system, and
//!    per compiled backend the cells that toolchain builds ([`plan_cell`]), or why not
//!    ([`SkippedBackend`]). `build-and-copy`, `build-and-upload`, `verify`, `devshell` and
//!    `testshell` read the plan it returns.

use std::collections::BTreeSet;

use camino::Utf8Path;

use crate::assemble::compiled::{plan_cell, CompiledCell, PlannedVariant, SkipKind, SkippedBackend};
use crate::config::{Backend, BuildConfig};
use crate::matrix::{self, KernelCells, Scope};
use crate::toolchain::host::HostToolchain;
use crate::toolchain::store::{FetchOptions, Store};

/// Where the compiled cells of one command take their toolchain from ([`choose_toolchains`]).
/// Each variant is rebuilt with the toolchain that built it, so one `build/` may hold both
/// kinds (README's recipe builds relu's pinned cells, then its `--python` cells beside them).
#[derive(Debug)]
pub enum Toolchains {
    /// The host's (`--python`, PATH) for every compiled cell.
    Host,
    /// The pins for the kernel's CPU and CUDA bundle cells (as `build-and-copy` without
    /// `--python` builds them), the host's for its other compiled backends.
    Pinned(Store),
    /// The host's (`--python`) for the cells it builds; a pinned bundle cell it does not build
    /// but `build/` holds (or `--variant` names) from its pins (`verify --python`).
    HostThenPinned(Store),
}

impl Toolchains {
    /// The toolchain cache the pinned cells come from, when any do.
    pub fn store(&self) -> Option<&Store> {
        match self {
            Toolchains::Host => None,
            Toolchains::Pinned(s) | Toolchains::HostThenPinned(s) => Some(s),
        }
    }

    /// [`Toolchains::store`], given up (to prune the cache once the command is done with it).
    pub fn into_store(self) -> Option<Store> {
        match self {
            Toolchains::Host => None,
            Toolchains::Pinned(s) | Toolchains::HostThenPinned(s) => Some(s),
        }
    }
}

/// What a command was given that decides its toolchains ([`choose_toolchains`]).
#[derive(Debug, Clone, Default)]
pub struct ToolchainRequest {
    /// `--python` was given: the host toolchain builds the compiled cells.
    pub python: bool,
    /// With `--python`, still rebuild from their pins the pinned cells the host does not build
    /// (`verify`: each variant with the toolchain that built it).
    pub pins_beside_python: bool,
    /// How the toolchain cache fetches wheels (`--offline`, `--find-links`, a progress bar).
    pub fetch: FetchOptions,
}

/// Whether a backend of `config` builds from pinned wheels (a `[torch]` kernel's CPU and CUDA
/// cells).
pub fn uses_pins(config: &BuildConfig) -> bool {
    compiled_backends(config).into_iter().any(|b| crate::toolchain::provision::pinned_backend(config, b))
}

/// The pinned-or-host choice, made once per command: without `--python`, a kernel with pinned
/// backends ([`uses_pins`]) takes them from the toolchain cache; with it, the host's toolchain,
/// and (`pins_beside_python`) the pins for what the host does not build. The toolchain cache is
/// opened here, and only when a cell may come from it.
///
/// Errors: a `--find-links` that is not a directory; `--offline` or `--find-links` given with
/// `--python`; the cache cannot be opened.
pub fn choose_toolchains(config: &BuildConfig, request: &ToolchainRequest) -> anyhow::Result<Toolchains> {
    // A mistyped wheelhouse would only show later, as a wheel "not in the cache".
    if let Some(d) = request.fetch.find_links.iter().find(|d| !d.is_dir()) {
        anyhow::bail!(
            "--find-links `{d}` is not a directory; give the directory that holds the pinned wheels"
        );
    }
    let pinned = uses_pins(config);
    if request.python {
        // verify's pinned cells beside --python fetch as a build without it does.
        let beside = pinned && request.pins_beside_python;
        anyhow::ensure!(
            beside || (!request.fetch.offline && request.fetch.find_links.is_empty()),
            "--offline and --find-links apply to the pinned toolchains of a build without --python; drop --python, or drop them"
        );
        if !beside {
            return Ok(Toolchains::Host);
        }
        return Ok(Toolchains::HostThenPinned(Store::user(request.fetch.clone())?));
    }
    if !pinned {
        return Ok(Toolchains::Host);
    }
    Ok(Toolchains::Pinned(Store::user(request.fetch.clone())?))
}

impl Plan {
    /// Plan the variants of the kernel (`config`, whose cells are `cells`) that `toolchains`
    /// build here: with [`Toolchains::Host`] every noarch variant and per compiled backend the
    /// cell `host` builds ([`plan`]); with [`Toolchains::Pinned`] every pinned bundle cell
    /// named in `requested`, or (when empty) for which `present` holds ([`pinned_plan`]: a
    /// build passes `|_| true`, `verify` what `build/` holds); with
    /// [`Toolchains::HostThenPinned`] the host's plan and the pinned cells it lacks that are
    /// named in `requested`, or (when empty) for which `present` holds.
    pub fn new(
        config: &BuildConfig,
        cells: &KernelCells,
        host: &HostToolchain,
        toolchains: &Toolchains,
        requested: &[String],
        present: &dyn Fn(&str) -> bool,
    ) -> Plan {
        match toolchains {
            Toolchains::Host => plan(config, cells, host),
            Toolchains::Pinned(store) => {
                let wanted = |name: &str| {
                    if requested.is_empty() {
                        present(name)
                    } else {
                        requested.iter().any(|r| r == name)
                    }
                };
                pinned_plan(config, cells, &wanted, host, store)
            }
            Toolchains::HostThenPinned(store) => {
                host_then_pinned_plan(config, cells, requested, host, store, present)
            }
        }
    }
}

/// The resolved plan of one build: what `build-and-copy` (and `verify`, and the dev shells)
/// builds on this host, and what it cannot and why. The kernel's cells it is planned from
/// ([`crate::kernel::Kernel::cells`], computed once when the kernel is loaded) are read beside
/// it by the later steps (the stale variants of `build/`, why a requested variant is not built).
#[derive(Debug, Clone)]
pub struct Plan {
    /// Sorted by name.
    pub variants: Vec<PlannedVariant>,
    /// Compiled backends this host cannot build, with the reason (what is missing).
    pub skipped: Vec<SkippedBackend>,
}

/// Every variant `build-and-copy` builds for `config` on this host, sorted by name: the
/// noarch cells of every system, and per compiled backend the cell `host` builds.
pub fn plan(config: &BuildConfig, cells: &KernelCells, host: &HostToolchain) -> Plan {
    let mut out = noarch_variants(cells);
    let mut skipped = Vec::new();
    for backend in compiled_backends(config) {
        match host_cell(config, cells, backend, host) {
            Ok(v) => out.push(v),
            Err(s) => skipped.push(s),
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Plan { variants: out, skipped }
}

/// The one cell of `backend` that `host` builds, or why it builds none.
pub fn host_cell(
    config: &BuildConfig,
    cells: &KernelCells,
    backend: Backend,
    host: &HostToolchain,
) -> Result<PlannedVariant, SkippedBackend> {
    plan_cell(config, cells, backend, host).map(PlannedVariant::compiled).map_err(|e| SkippedBackend {
        backend,
        variant: None,
        kind: SkipKind::of(config, backend, &e, false),
        reason: format!("{e:#}"),
    })
}

/// The noarch bundle cells of every system (they do not depend on the host), each name once.
pub fn noarch_variants(cells: &KernelCells) -> Vec<PlannedVariant> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for cell in cells.in_scope(Scope::Bundle) {
        if cell.noarch && seen.insert(cell.name.clone()) {
            out.push(PlannedVariant::noarch(cell.name.clone(), cell.backend));
        }
    }
    out
}

/// The backends a `[kernel.*]` compiles code for, sorted.
pub fn compiled_backends(config: &BuildConfig) -> Vec<Backend> {
    let mut compiled: Vec<Backend> =
        config.general.backends.iter().copied().filter(|b| config.has_kernel_for(*b)).collect();
    compiled.sort();
    compiled.dedup();
    compiled
}

/// Why `name`, which is not planned, cannot be built here, when it names a compiled variant
/// of this kernel (a backend skipped, or a cell another toolchain would build); `plan` was
/// planned from `cells`.
pub fn why_not_buildable(
    config: &BuildConfig,
    cells: &KernelCells,
    plan: &Plan,
    name: &str,
) -> Option<String> {
    // Another system's variant: that, before what this host lacks for its backend (a user's
    // trial was told `torch215-metal-aarch64-darwin` needs xcrun on macOS).
    let host = matrix::host_system();
    // Only a variant the kernel has there: another name is unknown (and its hints say whose
    // name it is), not a variant to build elsewhere.
    let has = || cells.in_scope(Scope::All).iter().any(|c| c.name == name);
    if let Some(system) = system_of(name).filter(|s| *s != host) {
        return has().then(|| format!("cannot build `{name}` natively: it is {}", elsewhere(&system, &host)));
    }
    // A variant planned and skipped.
    if let Some(s) = plan.skipped.iter().find(|s| s.variant.as_deref() == Some(name)) {
        return Some(format!("cannot build `{name}` natively: {}", s.reason));
    }
    let backend = cells
        .in_scope(Scope::All)
        .iter()
        .find(|c| c.name == name && !c.noarch)
        .map(|c| c.backend)
        .or_else(|| variant_kind(name).filter(|(_, kind)| *kind != "noarch").map(|(b, _)| b))
        .filter(|b| config.has_kernel_for(*b))?;
    if let Some(s) = plan.skipped.iter().find(|s| s.backend == backend && s.variant.is_none()) {
        return Some(format!("cannot build `{name}` natively: {}", s.reason));
    }
    let built = plan.variants.iter().find(|v| v.backend == backend && v.is_compiled())?;
    let cell = built.cell.as_ref()?;
    if let (Some(nvcc), Some(fix)) = (&cell.nvcc, tvm_ffi_cuda_fix(cell, name)) {
        // A tvm-ffi cell's CUDA is the nvcc's own, not something of the Python environment.
        return Some(format!(
            "cannot build `{name}` natively: the nvcc found here (`{}`, CUDA {}) builds `{}`; {fix}, or build it through Nix",
            nvcc.path, nvcc.version, built.name
        ));
    }
    if cell.pins.is_some() {
        // No --python: the cells are the pinned ones (a user's trial was told of "the Python
        // environment given" when none was).
        let pinned: Vec<&str> = plan
            .variants
            .iter()
            .filter(|v| v.backend == backend && v.is_compiled())
            .map(|v| v.name.as_str())
            .collect();
        return Some(format!(
            "cannot build `{name}` natively: no pinned toolchain builds it (the pins build {}); pass --python with a Python environment whose {} gives `{name}`, or build it through Nix",
            pinned.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "),
            if cell.framework.torch().is_some() { "torch" } else { "tvm-ffi" }
        ));
    }
    Some(format!(
        "cannot build `{name}` natively: the toolchain here ({} from the Python environment given) builds `{}`; pass --python with a Python environment whose {} gives `{name}`, or build it through Nix",
        cell.framework.describe(),
        built.name,
        if cell.framework.torch().is_some() { "torch" } else { "tvm-ffi" }
    ))
}

/// For a tvm-ffi CUDA cell that builds another CUDA than the variant `name` asks for: what to
/// change, the nvcc (`point CUDACXX … at an nvcc of CUDA 12.6`), and the Python environment
/// too when the tvm-ffi tag differs as well. `None` when `name` is no tvm-ffi CUDA variant or
/// its CUDA is the cell's (only the tvm-ffi tag differs: the torch-style wording applies).
fn tvm_ffi_cuda_fix(cell: &CompiledCell, name: &str) -> Option<String> {
    use matrix::naming::{parse_variant_name, ParsedVariant};
    if cell.kind != matrix::CellKind::TvmFfi {
        return None;
    }
    let Some(ParsedVariant::TvmFfi { tvm_ffi: want_tag, compute, .. }) = parse_variant_name(name) else {
        return None;
    };
    let Some(ParsedVariant::TvmFfi { tvm_ffi: have_tag, compute: have, .. }) =
        parse_variant_name(&cell.variant)
    else {
        return None;
    };
    // `cu126` → 12.6: the minor is the last digit.
    let digits =
        compute.strip_prefix("cu").filter(|d| d.len() >= 2 && d.bytes().all(|b| b.is_ascii_digit()))?;
    if compute == have {
        return None;
    }
    let cuda = format!("{}.{}", &digits[..digits.len() - 1], &digits[digits.len() - 1..]);
    let mut fix = format!(
        "a tvm-ffi variant takes its CUDA from nvcc, so point CUDACXX (or CUDA_HOME, or PATH) at an nvcc of CUDA {cuda}"
    );
    if want_tag != have_tag && !want_tag.is_empty() {
        // `01` → 0.1: the first digit is the major (the loader's reading).
        fix.push_str(&format!(
            " and pass --python with a Python environment whose tvm-ffi is {}.{}",
            &want_tag[..1],
            &want_tag[1..]
        ));
    }
    Some(fix)
}

/// Each of `names` once, in the order given: a name asked for twice is said of once.
pub(super) fn each_once<S: AsRef<str>>(names: &[S]) -> Vec<&str> {
    let mut once: Vec<&str> = Vec::new();
    for n in names.iter().map(AsRef::as_ref) {
        if !once.contains(&n) {
            once.push(n);
        }
    }
    once
}

/// `did you mean `torch-cuda`?` for the unknown names within two edits (optimal string
/// alignment: a swap of two neighbours is one) of a valid one, else nothing: a hint. With
/// several names, each suggestion says which name it is for; a name asked for twice is
/// suggested for once. Variant names share long prefixes (`torch-`, `torch212-cxx11-`), so a
/// similarity score would suggest `torch-rocm` for `torch-metal`; an edit distance does not.
fn did_you_mean<S: AsRef<str>>(unknown: &[S], valid: &[&str]) -> Option<String> {
    let names = each_once(unknown);
    let near: Vec<(&str, &str)> = names
        .iter()
        .filter_map(|u| crate::suggest::nearest(u, valid.iter().copied(), 2).map(|v| (*u, v)))
        .collect();
    match &near[..] {
        [] => None,
        [(_, v)] if names.len() == 1 => Some(format!("did you mean `{v}`?")),
        many => Some(format!(
            "did you mean {}?",
            many.iter()
                .map(|(u, v)| format!("`{v}` for `{}`", u.escape_debug()))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The kernel's bundle variants of this system that `the_plan` does not build, split: those not
/// planned because nobody asked for them (pinned cells), and those skipped here.
pub fn unplanned_and_skipped<'c>(cells: &'c KernelCells, the_plan: &Plan) -> (Vec<&'c str>, Vec<&'c str>) {
    let system = crate::matrix::host_system();
    let skipped_here = |n: &str| the_plan.skipped.iter().any(|s| s.variant.as_deref() == Some(n));
    cells
        .on(&system, Scope::Bundle)
        .map(|c| c.name.as_str())
        .filter(|n| !the_plan.variants.iter().any(|p| p.name == *n))
        .partition(|n| !skipped_here(n))
}

/// The error for the `unknown` variant names: the kernel's variants, the planned and
/// `unplanned` ones, and apart those that cannot be built here (`not_here`), with the near
/// misses among them all.
pub fn unknown_variants<S: AsRef<str>>(
    planned: &[PlannedVariant],
    unknown: &[S],
    unplanned: &[&str],
    not_here: &[&str],
) -> anyhow::Error {
    let mut valid: Vec<&str> =
        planned.iter().map(|p| p.name.as_str()).chain(unplanned.iter().copied()).collect();
    valid.sort_unstable();
    valid.dedup();
    let listed = match (valid.join(", "), not_here.join(", ")) {
        (valid, not_here) if not_here.is_empty() => {
            if valid.is_empty() {
                "(none)".into()
            } else {
                valid
            }
        }
        (valid, not_here) if valid.is_empty() => format!("none that builds here ({not_here} cannot)"),
        (valid, not_here) => format!("{valid}, and {not_here}, which cannot be built here"),
    };
    let all: Vec<&str> = valid.iter().chain(not_here).copied().collect();
    let names = each_once(unknown);
    let message = format!(
        "unknown variant{} {}; this kernel's variants are: {listed}",
        if names.len() == 1 { "" } else { "s" },
        names.iter().map(|u| format!("`{}`", u.escape_debug())).collect::<Vec<_>>().join(", "),
    );
    no_such_variant(message, unknown, &all)
}

/// The system a variant name is for (`aarch64-linux`), when the name says one.
fn system_of(name: &str) -> Option<String> {
    match matrix::naming::parse_variant_name(name)? {
        matrix::naming::ParsedVariant::TorchArch { cpu, os, .. }
        | matrix::naming::ParsedVariant::StableAbi { cpu, os, .. }
        | matrix::naming::ParsedVariant::TvmFfi { cpu, os, .. } => Some(format!("{cpu}-{os}")),
        _ => None,
    }
}

/// What a variant of `system` is, said on `host`.
fn elsewhere(system: &str, host: &str) -> String {
    format!("a variant of {system}, and this machine builds {host}'s: build it on such a machine, or through Nix with a remote builder of that system (`--builders`)")
}

/// What a name of `system` that is no variant here is said to be: the name says its system,
/// and whether the kernel has such a variant there is not known where this is said.
fn named_for(system: &str, host: &str) -> String {
    format!("a name for {system}, and this machine builds {host}'s variants: one of {system} is built on such a machine, or through Nix with a remote builder of that system (`--builders`)")
}

/// What names that are no variant here are, one hint each: a kernels 0.19 spelling of one
/// (kernel-builder takes the legacy names both loaders read), or a variant of another system.
fn what_they_are<S: AsRef<str>>(unknown: &[S], all: &[&str]) -> Vec<String> {
    let host = matrix::host_system();
    // The system a variant name is for, when the name says one.
    let named_for = |system: &str| named_for(system, &host);
    each_once(unknown)
        .into_iter()
        .filter_map(|u| {
            if let Some(legacy) = matrix::naming::legacy_name_of_0_19(u) {
                let what = match system_of(&legacy).as_deref() {
                    _ if all.contains(&legacy.as_str()) => String::new(),
                    Some(system) if system != host => format!(", {}", named_for(system)),
                    _ => ", which this kernel does not have either".to_owned(),
                };
                return Some(format!(
                    "`{u}` is the kernels 0.19 spelling of `{legacy}`{what}; name variants the legacy way, as `list-variants` prints them (`--names both` shows the two)"
                ));
            }
            let system = system_of(u)?;
            (system != host).then(|| format!("`{u}` is {}", named_for(&system)))
        })
        .collect()
}

/// The hints for names that are none of `all`: the near misses ([`did_you_mean`]), then what
/// each is ([`what_they_are`]).
fn name_hints<S: AsRef<str>>(unknown: &[S], all: &[&str]) -> Vec<String> {
    did_you_mean(unknown, all).into_iter().chain(what_they_are(unknown, all)).collect()
}

/// The error "`message`", with [`name_hints`] for `unknown` among `all` as its hints (the
/// `hint:` lines, and `hints` in a `--json` failure).
pub fn no_such_variant<S: AsRef<str>>(message: String, unknown: &[S], all: &[&str]) -> anyhow::Error {
    crate::error::Error::new(crate::error::Kind::Failed, message).with_hints(name_hints(unknown, all)).into()
}

/// Refuses the names in `requested` that are none of this host's variants of the kernel (its
/// cells on this system, in the matrix or not), with what [`unknown_variants`] says of them:
/// `verify` says so of names `build/` lacks before it plans a rebuild.
pub fn known_here<S: AsRef<str>>(cells: &matrix::KernelCells, requested: &[S]) -> anyhow::Result<()> {
    let system = matrix::host_system();
    let here: Vec<&str> = cells.on(&system, matrix::Scope::All).map(|c| c.name.as_str()).collect();
    let unknown: Vec<&str> = requested.iter().map(AsRef::as_ref).filter(|n| !here.contains(n)).collect();
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(unknown_variants(&[], &unknown, &here, &[]))
    }
}

/// The planned variants named in `requested` (all of them when it is empty), in plan order.
/// Named in the error beside the planned ones: `unplanned`, the kernel's variants not planned
/// because nobody asked for them (pinned cells), and `not_here`, those that cannot be built on
/// this host.
///
/// Errors: a name that is not planned; the message lists the valid names.
pub fn select(
    planned: &[PlannedVariant],
    requested: &[String],
    unplanned: &[&str],
    not_here: &[&str],
) -> anyhow::Result<Vec<PlannedVariant>> {
    if requested.is_empty() {
        return Ok(planned.to_vec());
    }
    let unknown: Vec<&String> = requested.iter().filter(|r| !planned.iter().any(|p| &p.name == *r)).collect();
    if !unknown.is_empty() {
        return Err(unknown_variants(planned, &unknown, unplanned, not_here));
    }
    Ok(planned.iter().filter(|p| requested.contains(&p.name)).cloned().collect())
}

/// The backend and the kind (`noarch`, `mlx-noarch`, `torch`, `stable-abi`, `tvm-ffi`) of the variant named
/// `name`, read from the name as the `kernels` loader does; `None` for a name it would not
/// recognise (or the legacy `torch-universal`).
pub fn variant_kind(name: &str) -> Option<(Backend, &'static str)> {
    use matrix::naming::{parse_variant_name, ParsedVariant};
    let (compute, kind) = match parse_variant_name(name)? {
        ParsedVariant::TorchArch { compute, .. } => (compute, "torch"),
        ParsedVariant::StableAbi { compute, .. } => (compute, "stable-abi"),
        ParsedVariant::TvmFfi { compute, .. } => (compute, "tvm-ffi"),
        ParsedVariant::Noarch { .. } => {
            let b = Backend::ALL.into_iter().find(|&b| matrix::naming::noarch_name(b) == name);
            return b.map(|b| (b, "noarch"));
        }
        ParsedVariant::MlxNoarch { backend } => {
            return Backend::from_name(&backend).map(|b| (b, "mlx-noarch"))
        }
    };
    matrix::naming::backend_of_compute(&compute).map(|b| (b, kind))
}

/// The directories of `build_dir` that look like variants (they hold a `metadata.json`), are
/// not among `planned`, and are of a backend and kind ([`variant_kind`]) that the kernel no
/// longer has in any of its `cells`: left from a build of an older `build.toml`. Sorted.
///
/// Not among them: a variant of a backend skipped on this host (no toolchain here: it is kept
/// as it was), and one of another torch, tvm-ffi or CUDA version, or of another system, of a
/// backend and kind the kernel still builds (a build with another toolchain made it).
pub fn unplanned_variant_dirs(
    build_dir: &Utf8Path,
    planned: &[PlannedVariant],
    cells: &KernelCells,
) -> Vec<String> {
    let kinds: BTreeSet<(Backend, &'static str)> =
        cells.in_scope(Scope::All).iter().filter_map(|c| variant_kind(&c.name)).collect();
    let Ok(rd) = build_dir.read_dir_utf8() else {
        return Vec::new();
    };
    let mut out: Vec<String> = rd
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            !name.starts_with('.')
                && !planned.iter().any(|p| p.name == name)
                && e.file_type().is_ok_and(|t| t.is_dir())
                && e.path().join("metadata.json").is_file()
                && !variant_kind(name).is_some_and(|k| kinds.contains(&k))
        })
        .map(|e| e.file_name().to_owned())
        .collect();
    out.sort();
    out
}

/// The variants a pinned build makes: the noarch cells, every provisionable pinned bundle cell
/// (those `wanted`), and for backends without pins the cell of
/// `host` as [`plan`] plans it. Cells that cannot be provisioned are
/// [`Plan::skipped`], each naming its variant.
pub fn pinned_plan(
    config: &BuildConfig,
    cells: &KernelCells,
    wanted: &dyn Fn(&str) -> bool,
    host: &HostToolchain,
    store: &Store,
) -> Plan {
    let mut variants = noarch_variants(cells);
    let mut skipped = Vec::new();
    for backend in compiled_backends(config) {
        if !crate::toolchain::provision::pinned_backend(config, backend) {
            match host_cell(config, cells, backend, host) {
                Ok(v) => variants.push(v),
                // Each bundle cell of this system the backend has is named (ROCm, XPU: no
                // toolchain of theirs is pinned yet); a backend with none here, once.
                Err(s) => {
                    let here = compiled_cells_here(cells, backend);
                    if here.is_empty() {
                        skipped.push(s);
                    } else {
                        skipped.extend(
                            here.into_iter()
                                .map(|c| SkippedBackend { variant: Some(c.name.clone()), ..s.clone() }),
                        );
                    }
                }
            }
            continue;
        }
        for cell in crate::toolchain::provision::pinned_cells(config, cells, backend) {
            if !wanted(&cell.name) {
                continue;
            }
            let planned = crate::toolchain::provision::provision(cell, store, host.manylinux.clone())
                // `--cuda-capabilities` narrows a pinned cell as it narrows a host one.
                .map(|h| h.with_cuda_capabilities(host.cuda_capabilities_only.clone().unwrap_or_default()))
                // `--package-set` too: a native build given a Nix cell's compiler and set name
                // writes the cell's bytes.
                .map(|h| match &host.package_set {
                    Some(name) => h.with_package_set(name.clone(), host.hermetic),
                    None => h,
                })
                .and_then(|h| plan_cell(config, cells, backend, &h))
                .map_err(|e| (SkipKind::of(config, backend, &e, true), e))
                .and_then(|c| {
                    if c.variant == cell.name {
                        Ok(c)
                    } else {
                        let why = format!(
                            "its pinned torch builds `{}` instead; fix its entry in {}",
                            c.variant,
                            crate::toolchain::pins::PINS_FILE
                        );
                        Err((SkipKind::Pins, anyhow::anyhow!(why)))
                    }
                });
            match planned {
                Ok(c) => variants.push(PlannedVariant::compiled(c)),
                Err((kind, e)) => skipped.push(SkippedBackend {
                    backend,
                    variant: Some(cell.name.clone()),
                    kind,
                    reason: format!("{e:#}"),
                }),
            }
        }
    }
    variants.sort_by(|a, b| a.name.cmp(&b.name));
    Plan { variants, skipped }
}

/// The compiled bundle cells of `backend` on this system.
fn compiled_cells_here(cells: &KernelCells, backend: Backend) -> Vec<&crate::matrix::Cell> {
    let system = crate::matrix::host_system();
    cells.on(&system, Scope::Bundle).filter(|c| !c.noarch && c.backend == backend).collect::<Vec<_>>()
}

/// The host's plan, with the pinned bundle cells it lacks that are to be verified (named in
/// `requested`, else recorded in the manifest or present in `build/`) planned from their pins.
/// Only those cells' wheels are fetched.
fn host_then_pinned_plan(
    config: &BuildConfig,
    cells: &KernelCells,
    requested: &[String],
    host: &HostToolchain,
    store: &Store,
    present: &dyn Fn(&str) -> bool,
) -> Plan {
    let mut the_plan = plan(config, cells, host);
    let wanted =
        |name: &str| if requested.is_empty() { present(name) } else { requested.iter().any(|r| r == name) };
    let pinned_names: Vec<String> = compiled_backends(config)
        .into_iter()
        .flat_map(|b| crate::toolchain::provision::pinned_cells(config, cells, b))
        .map(|c| c.name.clone())
        .filter(|n| wanted(n) && !the_plan.variants.iter().any(|v| &v.name == n))
        .collect();
    if pinned_names.is_empty() {
        return the_plan;
    }
    let pinned = pinned_plan(config, cells, &|n| pinned_names.iter().any(|p| p == n), host, store);
    for v in pinned.variants {
        if pinned_names.contains(&v.name) {
            the_plan.variants.push(v);
        }
    }
    the_plan.skipped.extend(
        pinned.skipped.into_iter().filter(|s| s.variant.as_ref().is_some_and(|n| pinned_names.contains(n))),
    );
    the_plan.variants.sort_by(|a, b| a.name.cmp(&b.name));
    the_plan
}

#[cfg(test)]
mod tests {
    /// An error as the CLI says it, less `error: `: its line, then a `hint:` line each.
    fn said(e: anyhow::Error) -> String {
        crate::error::failure_lines(&e).join("\n").trim_start_matches("error: ").to_owned()
    }

    use super::*;
    use crate::config::Backend::*;
    use crate::matrix::testutil::{noarch_config, torch_config, v};

    fn names(planned: &[PlannedVariant]) -> Vec<&str> {
        planned.iter().map(|p| p.name.as_str()).collect()
    }

    fn host() -> HostToolchain {
        HostToolchain::new("/nonexistent/python3")
    }

    #[test]
    fn noarch_variants_come_from_every_system() {
        // torch-metal only has cells on aarch64-darwin; torch-tpu is outside the bundle.
        let c = noarch_config(&[Cpu, Cuda, Metal, Rocm, Tpu, Xpu]);
        let planned = plan(&c, &KernelCells::of(&c), &host()).variants;
        assert_eq!(names(&planned), ["torch-cpu", "torch-cuda", "torch-metal", "torch-rocm", "torch-xpu"]);
        assert!(planned.iter().all(|p| !p.is_compiled()));
    }

    #[test]
    fn cuda_bounds_outside_the_matrix_leave_no_cuda_variant() {
        let mut c = noarch_config(&[Cuda, Rocm]);
        c.general.cuda.maxver = Some(v("11.8"));
        assert_eq!(names(&plan(&c, &KernelCells::of(&c), &host()).variants), ["torch-rocm"]);
    }

    /// Only a variant of a backend or kind the kernel no longer has is stale: not one of a
    /// backend skipped on this host, nor one of another torch or CUDA version or system.
    #[test]
    fn stale_variants_are_those_of_a_backend_or_kind_the_kernel_no_longer_has() {
        let c = torch_config(&[Cuda, Metal], &[Cuda]);
        let p = plan(&c, &KernelCells::of(&c), &host());
        assert_eq!(names(&p.variants), ["torch-metal"]);
        let t = tempfile::tempdir().unwrap();
        let build = Utf8Path::from_path(t.path()).unwrap();
        for d in [
            "torch-metal",
            // cuda: skipped here (no Python), still in `general.backends`.
            "torch211-cxx11-cu130-x86_64-linux",
            // an older torch and CUDA, another system.
            "torch27-cxx11-cu118-x86_64-linux",
            "torch211-cxx11-cu130-aarch64-linux",
            // no longer: a backend removed, a noarch cuda variant, other kinds of cuda cells.
            "torch211-cxx11-rocm71-x86_64-linux",
            "torch-xpu",
            "torch-cuda",
            "torch-stable-abi211-cu130-x86_64-linux",
            "tvm-ffi01-cu130-x86_64-linux",
        ] {
            std::fs::create_dir(build.join(d)).unwrap();
            std::fs::write(build.join(d).join("metadata.json"), "{}").unwrap();
        }
        assert_eq!(
            unplanned_variant_dirs(build, &p.variants, &KernelCells::of(&c)),
            [
                "torch-cuda",
                "torch-stable-abi211-cu130-x86_64-linux",
                "torch-xpu",
                "torch211-cxx11-rocm71-x86_64-linux",
                "tvm-ffi01-cu130-x86_64-linux",
            ]
        );
    }

    #[test]
    fn compiled_backends_without_a_toolchain_are_skipped_with_the_reason() {
        let c = torch_config(&[Cuda, Metal], &[Cuda]);
        let p = plan(&c, &KernelCells::of(&c), &host());
        assert_eq!(names(&p.variants), ["torch-metal"]);
        assert_eq!(p.skipped.len(), 1);
        assert_eq!(p.skipped[0].backend, Cuda);
        assert!(
            p.skipped[0].reason.starts_with("cannot run the Python interpreter `/nonexistent/python3`"),
            "{}",
            p.skipped[0].reason
        );
        let cells = KernelCells::of(&c);
        let why = why_not_buildable(&c, &cells, &p, "torch212-cxx11-cu126-x86_64-linux").unwrap();
        assert!(
            why.starts_with("cannot build `torch212-cxx11-cu126-x86_64-linux` natively: cannot run"),
            "{why}"
        );
        assert_eq!(why_not_buildable(&c, &cells, &p, "torch-metal"), None);
        // Another system's variant says so first, before what this host lacks for its backend.
        let other = if matrix::host_system() == "aarch64-linux" { "x86_64-linux" } else { "aarch64-linux" };
        let name = format!("torch212-cxx11-cu126-{other}");
        assert!(why_not_buildable(&c, &cells, &p, &name).unwrap().starts_with(&format!(
            "cannot build `{name}` natively: it is a variant of {other}, and this machine builds "
        )),);
        // A name of another system that is no variant of the kernel is unknown, not one to build
        // there (a user's trial was told `torch999-…-aarch64-linux` is a variant of it).
        assert_eq!(why_not_buildable(&c, &cells, &p, &format!("torch999-cxx11-cu132-{other}")), None);
        assert_eq!(why_not_buildable(&c, &cells, &p, &format!("torch212-metal-{other}")), None);
    }

    /// A planned tvm-ffi cell `variant` of `backend`, built with nvcc `nvcc` (CUDA cells).
    fn tvm_ffi_planned(variant: &str, backend: crate::config::Backend, nvcc: Option<&str>) -> PlannedVariant {
        let facts = crate::toolchain::tvm_ffi::TvmFfiFacts {
            version: "0.1.15".into(),
            package_dir: "/sp/tvm_ffi".into(),
            purelib: "/sp".into(),
            executable: "/venv/bin/python".into(),
            python_version: "3.11".into(),
        };
        let cell = CompiledCell::tvm_ffi_for_tests(variant, backend, facts, nvcc, &["k"]);
        PlannedVariant { name: variant.into(), backend, cell: Some(Box::new(cell)) }
    }

    /// Cells from the pins (no --python) are not called "the Python environment given" (a
    /// user's trial was told so of a torch 2.15 that came from the pins).
    #[test]
    fn a_variant_no_pinned_cell_builds_names_the_pinned_ones() {
        let c = crate::matrix::testutil::tvm_ffi_config(&[Cpu], &[Cpu]);
        let pinned = |name: &str| {
            let mut v = tvm_ffi_planned(name, Cpu, None);
            let cell = v.cell.as_mut().unwrap();
            cell.pins = Some(crate::toolchain::host::PinnedInputs {
                wheels: Default::default(),
                trees: Default::default(),
            });
            v
        };
        let p = Plan {
            variants: vec![pinned("tvm-ffi01-cpu-x86_64-linux"), pinned("tvm-ffi02-cpu-x86_64-linux")],
            skipped: Vec::new(),
        };
        assert_eq!(
            why_not_buildable(&c, &KernelCells::of(&c), &p, "tvm-ffi03-cpu-x86_64-linux").unwrap(),
            "cannot build `tvm-ffi03-cpu-x86_64-linux` natively: no pinned toolchain builds it (the pins build `tvm-ffi01-cpu-x86_64-linux`, `tvm-ffi02-cpu-x86_64-linux`); pass --python with a Python environment whose tvm-ffi gives `tvm-ffi03-cpu-x86_64-linux`, or build it through Nix"
        );
    }

    /// A tvm-ffi variant of another CUDA than the nvcc found: the fix is the nvcc (CUDACXX), not
    /// `--python` (tvm_ffi does not decide the CUDA); the tvm-ffi tag alone keeps `--python`.
    #[test]
    fn a_tvm_ffi_variant_of_another_cuda_says_to_point_cudacxx_at_its_nvcc() {
        let c = crate::matrix::testutil::tvm_ffi_config(&[Cpu, Cuda], &[Cpu, Cuda]);
        let p = Plan {
            variants: vec![
                tvm_ffi_planned("tvm-ffi01-cpu-x86_64-linux", Cpu, None),
                tvm_ffi_planned("tvm-ffi01-cu130-x86_64-linux", Cuda, Some("13.0.88")),
            ],
            skipped: Vec::new(),
        };
        let cells = KernelCells::of(&c);
        assert_eq!(
            why_not_buildable(&c, &cells, &p, "tvm-ffi01-cu126-x86_64-linux").unwrap(),
            "cannot build `tvm-ffi01-cu126-x86_64-linux` natively: the nvcc found here (`/cuda/bin/nvcc`, CUDA 13.0.88) builds `tvm-ffi01-cu130-x86_64-linux`; a tvm-ffi variant takes its CUDA from nvcc, so point CUDACXX (or CUDA_HOME, or PATH) at an nvcc of CUDA 12.6, or build it through Nix"
        );
        assert_eq!(
            why_not_buildable(&c, &cells, &p, "tvm-ffi02-cu132-x86_64-linux").unwrap(),
            "cannot build `tvm-ffi02-cu132-x86_64-linux` natively: the nvcc found here (`/cuda/bin/nvcc`, CUDA 13.0.88) builds `tvm-ffi01-cu130-x86_64-linux`; a tvm-ffi variant takes its CUDA from nvcc, so point CUDACXX (or CUDA_HOME, or PATH) at an nvcc of CUDA 13.2 and pass --python with a Python environment whose tvm-ffi is 0.2, or build it through Nix"
        );
        // Same CUDA, another tvm-ffi; and the CPU cell: the Python environment decides.
        for (name, built) in [
            ("tvm-ffi02-cu130-x86_64-linux", "tvm-ffi01-cu130-x86_64-linux"),
            ("tvm-ffi02-cpu-x86_64-linux", "tvm-ffi01-cpu-x86_64-linux"),
        ] {
            assert_eq!(
                why_not_buildable(&c, &cells, &p, name).unwrap(),
                format!("cannot build `{name}` natively: the toolchain here (tvm-ffi 0.1.15 from the Python environment given) builds `{built}`; pass --python with a Python environment whose tvm-ffi gives `{name}`, or build it through Nix")
            );
        }
    }

    #[test]
    fn select_keeps_plan_order_and_refuses_unknown_names() {
        let c = noarch_config(&[Cuda, Rocm, Xpu]);
        let planned = plan(&c, &KernelCells::of(&c), &host()).variants;
        let picked = select(&planned, &["torch-xpu".into(), "torch-cuda".into()], &[], &[]).unwrap();
        assert_eq!(names(&picked), ["torch-cuda", "torch-xpu"]);
        assert_eq!(
            names(&select(&planned, &[], &[], &[]).unwrap()),
            ["torch-cuda", "torch-rocm", "torch-xpu"]
        );
        let err = said(select(&planned, &["torch-cpu".into(), "cuda".into()], &[], &[]).unwrap_err());
        assert_eq!(
            err,
            "unknown variants `torch-cpu`, `cuda`; this kernel's variants are: torch-cuda, torch-rocm, torch-xpu\nhint: did you mean `torch-xpu` for `torch-cpu`?"
        );
        let err = said(select(&planned, &["torch-metal".into()], &[], &[]).unwrap_err());
        assert!(err.ends_with("torch-rocm, torch-xpu"), "no near miss, no suggestion: {err}");
        // A pinned build whose cells were all skipped here (an empty toolchain cache with
        // --offline) listed "(none)"; it names them, and near misses among them.
        let skipped = ["torch215-cxx11-cpu-x86_64-linux", "torch215-cxx11-cu132-x86_64-linux"];
        let err = said(select(&[], &["torch215-cxx11-cpu-x86_64-linx".into()], &[], &skipped).unwrap_err());
        assert_eq!(
            err,
            "unknown variant `torch215-cxx11-cpu-x86_64-linx`; this kernel's variants are: none that builds here (torch215-cxx11-cpu-x86_64-linux, torch215-cxx11-cu132-x86_64-linux cannot)\nhint: did you mean `torch215-cxx11-cpu-x86_64-linux`?"
        );
        let err = said(select(&planned[..1], &["bogus".into()], &[], &skipped[..1]).unwrap_err());
        assert_eq!(
            err,
            "unknown variant `bogus`; this kernel's variants are: torch-cuda, and torch215-cxx11-cpu-x86_64-linux, which cannot be built here"
        );
        // A pinned cell nobody asked for is not planned, and is no less a variant: a fresh user
        // was told every pinned cell "cannot" be built, for a typo, with the right one building.
        let err = said(
            select(&planned[..1], &["torch215-cxx11-cpu-x86_64-linu".into()], &skipped[..1], &[])
                .unwrap_err(),
        );
        assert_eq!(
            err,
            "unknown variant `torch215-cxx11-cpu-x86_64-linu`; this kernel's variants are: torch-cuda, torch215-cxx11-cpu-x86_64-linux\nhint: did you mean `torch215-cxx11-cpu-x86_64-linux`?"
        );
    }

    /// A name copied from kernels 0.19 (`kernels variants`) or one of another system is said
    /// to be what it is, beside the list of this kernel's variants.
    #[test]
    fn unknown_variants_say_what_a_0_19_name_or_another_systems_name_is() {
        let host = matrix::host_system();
        let ours = format!("torch215-cxx11-cu132-{host}");
        let other = if host == "x86_64-linux" { "aarch64-linux" } else { "x86_64-linux" };
        let msg = |asked: &str| said(unknown_variants(&[], &[asked], &[ours.as_str()], &[]));
        assert_eq!(
            msg(&format!("torch-2.15-cxx11-cuda-13.2-cpython-3.9-abi3-{host}")),
            format!("unknown variant `torch-2.15-cxx11-cuda-13.2-cpython-3.9-abi3-{host}`; this kernel's variants are: {ours}\nhint: `torch-2.15-cxx11-cuda-13.2-cpython-3.9-abi3-{host}` is the kernels 0.19 spelling of `{ours}`; name variants the legacy way, as `list-variants` prints them (`--names both` shows the two)")
        );
        assert!(msg(&format!("torch-2.14-cxx11-cuda-13.0-cpython-3.9-abi3-{host}")).ends_with(&format!(
            "is the kernels 0.19 spelling of `torch214-cxx11-cu130-{host}`, which this kernel does not have either; name variants the legacy way, as `list-variants` prints them (`--names both` shows the two)"
        )));
        assert_eq!(
            msg(&format!("torch215-cxx11-cu132-{other}")),
            format!("unknown variant `torch215-cxx11-cu132-{other}`; this kernel's variants are: {ours}\nhint: `torch215-cxx11-cu132-{other}` is a name for {other}, and this machine builds {host}'s variants: one of {other} is built on such a machine, or through Nix with a remote builder of that system (`--builders`)")
        );
        // A 0.19 name of another system's variant says both (it had said "which this kernel
        // does not have either" of a variant the kernel has, on aarch64-linux).
        assert_eq!(
            msg(&format!("torch-2.15-cxx11-cuda-13.2-cpython-3.9-abi3-{other}")),
            format!("unknown variant `torch-2.15-cxx11-cuda-13.2-cpython-3.9-abi3-{other}`; this kernel's variants are: {ours}\nhint: `torch-2.15-cxx11-cuda-13.2-cpython-3.9-abi3-{other}` is the kernels 0.19 spelling of `torch215-cxx11-cu132-{other}`, a name for {other}, and this machine builds {host}'s variants: one of {other} is built on such a machine, or through Nix with a remote builder of that system (`--builders`); name variants the legacy way, as `list-variants` prints them (`--names both` shows the two)")
        );
        // A name with a line break is shown escaped, on the error's one line.
        assert!(msg("torch\nfoo").starts_with("unknown variant `torch\\nfoo`;"), "{}", msg("torch\nfoo"));
        // Anything else: the list alone.
        assert_eq!(
            msg("torch-metal"),
            format!("unknown variant `torch-metal`; this kernel's variants are: {ours}")
        );
    }
}
