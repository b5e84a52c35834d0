//! Provision the bundle's CPU and CUDA cells of this system from their pins: the torch wheel,
//! the CUDA toolkit wheels and CMake and Ninja, each fetched into the toolchain cache
//! ([`super::store`]) and unpacked; the torch facts read from the wheel itself (METADATA,
//! `torch/version.py`, the C++ ABI of `libc10.so`'s symbols), never by importing it. Only the
//! C++ compiler and `Python.h` (for the module's init function) come from the host, so every
//! such cell is recorded as native and not hermetic.

use camino::{Utf8Path, Utf8PathBuf};

use super::host::{HostToolchain, PinnedInputs, ProvisionedTools, TorchFacts};
use super::pins::{self, ResolvedWheel, WheelPin};
use super::store::Store;
use crate::config::{Backend, BuildConfig, Framework};
use crate::error::{Error, Kind};
use crate::matrix::{self, CellKind, Scope};

/// Whether `config`'s `backend` cells are built from pins (a `[torch]` kernel's CPU and CUDA
/// cells that are not stable-ABI ones); the others keep the host's toolchain.
pub fn pinned_backend(config: &BuildConfig, backend: Backend) -> bool {
    matches!(backend, Backend::Cpu | Backend::Cuda)
        && matches!(&config.framework, Framework::Torch(t) if t.stable_abi.for_backend(backend).is_none())
}

/// The bundle cells of `config` (whose cells are `cells`) on this system that are built from
/// pins, for `backend`.
pub fn pinned_cells<'c>(
    config: &BuildConfig,
    cells: &'c matrix::KernelCells,
    backend: Backend,
) -> Vec<&'c matrix::Cell> {
    if !pinned_backend(config, backend) {
        return Vec::new();
    }
    let system = matrix::host_system();
    cells
        .on(&system, Scope::Bundle)
        .filter(|c| !c.noarch && c.backend == backend && c.kind == CellKind::Torch)
        .collect()
}

/// What the host gives every provisioned cell: `Python.h`'s directory, the interpreter and its
/// `X.Y` (the variant is abi3: any CPython ≥ 3.9 headers do).
#[derive(Debug, Clone)]
struct PythonHeaders {
    include: Utf8PathBuf,
    executable: Utf8PathBuf,
    version: String,
}

/// `Python.h`'s directory, the interpreter and its version, from `python`.
///
/// Errors ([`Kind::Toolchain`], saying to install Python 3 with its headers): `python` cannot
/// be run or report them, or has no `Python.h`.
fn python_headers(python: &str) -> anyhow::Result<PythonHeaders> {
    const PROBE: &str = "import json, sys, sysconfig; print(json.dumps([sysconfig.get_paths()['include'], sys.executable, '%d.%d' % sys.version_info[:2]]))";
    let unusable = |message: String| anyhow::Error::from(Error::new(Kind::Toolchain, message));
    let out = crate::process::Cmd::new(python)
        .args(["-c", PROBE])
        .output()
        .map_err(|e| unusable(format!("cannot run `{python}` ({}), whose `Python.h` the module's init function needs; install Python 3 with its headers (e.g. `apt-get install python3-dev`)", std::error::Error::source(&e).map(ToString::to_string).unwrap_or_default())))?;
    let (include, executable, version): (Utf8PathBuf, Utf8PathBuf, String) = serde_json::from_str(&out.stdout)
        .map_err(|_| unusable(format!("`{python}` could not report where its headers are; install Python 3 with its headers (e.g. `apt-get install python3-dev`)")))?;
    if !include.join("Python.h").is_file() {
        return Err(unusable(format!(
            "`{include}/Python.h` is missing (the module's init function needs it); install Python's headers (e.g. `apt-get install python3-dev`)"
        )));
    }
    Ok(PythonHeaders { include, executable, version })
}

/// Whether the shared object `lib` was built with the C++11 ABI: its dynamic symbols name
/// `std::__cxx11::` types. Errors: `lib` cannot be read or is no shared object.
fn uses_cxx11_abi(lib: &Utf8Path) -> anyhow::Result<bool> {
    use object::{Object, ObjectSymbol};
    let data = std::fs::read(lib).map_err(|e| anyhow::anyhow!("cannot read `{lib}` ({e})"))?;
    let file =
        object::File::parse(&*data).map_err(|e| anyhow::anyhow!("`{lib}` is not a shared object ({e})"))?;
    Ok(file.dynamic_symbols().any(|s| s.name().is_ok_and(|n| n.contains("cxx11"))))
}

/// torch's facts from its wheel `wheel` unpacked in `tree`. Errors: the wheel cannot be read
/// ([`matrix::wheel::WheelError`]), nor its `libc10.so`.
fn torch_facts(
    wheel: &Utf8Path,
    tree: &Utf8Path,
    purelib: &Utf8Path,
    py: &PythonHeaders,
) -> anyhow::Result<TorchFacts> {
    // One message: a WheelError's text already holds its cause.
    let w = matrix::wheel::read_wheel(wheel).map_err(|e| anyhow::anyhow!("{e}"))?;
    let torch_dir = tree.join("torch");
    let cxx11_abi = uses_cxx11_abi(&torch_dir.join("lib/libc10.so"))?;
    Ok(TorchFacts {
        version: w.torch_version,
        cuda: (w.backend == Backend::Cuda).then_some(w.toolkit).flatten(),
        hip: None,
        xpu: None,
        cxx11_abi,
        cmake_prefix_path: torch_dir.join("share/cmake").to_string(),
        torch_dir,
        python_include: py.include.clone(),
        purelib: purelib.to_owned(),
        executable: py.executable.clone(),
        python_version: py.version.clone(),
    })
}

fn resolve(ws: &[&WheelPin]) -> Result<Vec<ResolvedWheel>, pins::PinError> {
    ws.iter().map(|w| w.resolved()).collect()
}

/// The program `name` of a pinned tool wheel unpacked in `tree`: `<name>/data/bin/<name>`
/// (CMake's layout) or `<dist>.data/scripts/<name>` (a wheel's scripts, Ninja's layout).
/// Errors ([`Kind::Toolchain`]): neither is there.
pub(crate) fn tool_in(tree: &Utf8Path, name: &str) -> anyhow::Result<Utf8PathBuf> {
    let bin = tree.join(format!("{name}/data/bin/{name}"));
    if bin.is_file() {
        return Ok(bin);
    }
    let scripts = tree
        .read_dir_utf8()
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().starts_with(&format!("{name}-")) && e.file_name().ends_with(".data"))
        .map(|e| e.path().join("scripts").join(name))
        .find(|p| p.is_file());
    scripts.ok_or_else(|| {
        Error::new(
            Kind::Toolchain,
            format!("the pinned {name} wheel has no `{name}` program (looked in `{bin}` and `{tree}/{name}-*.data/scripts/`)"),
        )
        .into()
    })
}

/// The toolchain of the bundle cell `cell` (torch version, CUDA version, system) provisioned
/// from the pins into `store`, or why it cannot be (no pin, no hash yet, the download or the
/// check failing, no `Python.h`), naming what to do.
pub fn provision(
    cell: &matrix::Cell,
    store: &Store,
    manylinux: Option<String>,
) -> anyhow::Result<HostToolchain> {
    static PY: std::sync::OnceLock<anyhow::Result<PythonHeaders>> = std::sync::OnceLock::new();
    let py = PY.get_or_init(|| python_headers("python3")).as_ref().map_err(crate::error::copy)?.clone();
    let cuda = (cell.backend == Backend::Cuda).then_some(cell.backend_version.as_deref()).flatten();
    let p = pins::pins().cell(&cell.torch_version, cuda, &cell.system)?;
    let torch = p.torch.resolved()?;
    let toolkit = resolve(&p.toolkit)?;
    let tools = resolve(&p.tools)?;
    let (torch_tree, torch_hash) = store.tree_and_hash(std::slice::from_ref(&torch))?;
    let torch_wheel = store.wheel(&torch)?;
    let (tools_tree, tools_hash) = store.tree_and_hash(&tools)?;
    let toolkit_tree = if toolkit.is_empty() { None } else { Some(store.tree_and_hash(&toolkit)?) };
    let mut inputs = PinnedInputs {
        wheels: std::iter::once(&torch)
            .chain(&toolkit)
            .chain(&tools)
            .map(|w| (w.file.clone(), w.sha256.clone()))
            .collect(),
        trees: [("torch".to_owned(), torch_hash), ("tools".to_owned(), tools_hash)].into(),
    };
    if let Some((_, h)) = &toolkit_tree {
        inputs.trees.insert("toolkit".to_owned(), h.clone());
    }
    let unpacked = Unpacked {
        torch_wheel,
        torch_tree,
        toolkit_tree: toolkit_tree.map(|(p, _)| p),
        cmake: tool_in(&tools_tree, "cmake")?,
        ninja: tool_in(&tools_tree, "ninja")?,
    };
    let mut host = toolchain_of(&unpacked, &py)?.with_manylinux(manylinux);
    if let Some(p) = host.provisioned.as_mut() {
        p.pins = Some(inputs);
    }
    Ok(host)
}

/// A cell's pinned wheels at hand: the torch wheel, unpacked (with the wheel file, whose
/// METADATA and `torch/version.py` say which torch it is), the CUDA toolkit wheels unpacked
/// together (CUDA cells), and the CMake and Ninja to run.
#[derive(Debug, Clone)]
pub struct Unpacked {
    pub torch_wheel: Utf8PathBuf,
    pub torch_tree: Utf8PathBuf,
    pub toolkit_tree: Option<Utf8PathBuf>,
    pub cmake: Utf8PathBuf,
    pub ninja: Utf8PathBuf,
}

/// The toolchain of a cell whose pinned wheels a Nix cell unpacked (`kernel-builder assemble
/// --torch-wheel …`): the same facts and tools as [`provision`] gives a native build, with
/// `python` (the package set's interpreter) supplying only `Python.h`.
///
/// Errors: no `Python.h` from `python`, the torch wheel unreadable, a CUDA toolkit without nvcc.
pub fn from_unpacked(unpacked: &Unpacked, python: &str) -> anyhow::Result<HostToolchain> {
    toolchain_of(unpacked, &python_headers(python)?)
}

fn toolchain_of(u: &Unpacked, py: &PythonHeaders) -> anyhow::Result<HostToolchain> {
    let purelib = u.toolkit_tree.clone().unwrap_or_else(|| u.torch_tree.clone());
    let facts = torch_facts(&u.torch_wheel, &u.torch_tree, &purelib, py)?;
    let nvcc = match &u.toolkit_tree {
        None => None,
        Some(tree) => {
            let cuda = facts.cuda.as_deref().ok_or_else(|| {
                anyhow::anyhow!(
                    "the torch wheel `{}` is not a CUDA build, but CUDA toolkit wheels were given",
                    u.torch_wheel
                )
            })?;
            let major = cuda.split('.').next().unwrap_or(cuda);
            let nvcc = tree.join(format!("nvidia/cu{major}/bin/nvcc"));
            anyhow::ensure!(nvcc.is_file(), "the pinned CUDA {cuda} toolkit wheels have no `{nvcc}`");
            Some(nvcc)
        }
    };
    let provisioned = ProvisionedTools { cmake: u.cmake.clone(), ninja: u.ninja.clone(), nvcc, pins: None };
    Ok(HostToolchain::provisioned(py.executable.clone(), facts, provisioned))
}
