//! How Helion (1.4) finds a kernel's heuristic file at load time, and which shipped heuristic
//! files a kernel package holds: the model that `check-config`'s Helion lint ([`super::lint`])
//! and the card's "Tuned for" section ([`super::card`]) share.
//!
//! Helion's `find_heuristic_file` (`helion/autotuner/aot_cache.py`) takes the stem of the
//! kernel's source file and the device's `(device_kind, compute)` from
//! `helion._hardware.get_hardware_info()`:
//!
//! - CUDA: kind `cuda`, compute `sm<major><minor>` (`sm90`, `sm100`, `sm121`);
//! - ROCm: kind `rocm`, compute the device's `gcnArchName` (`gfx942`);
//! - XPU and TPU: kind `xpu` / `tpu`, compute the device's *name*;
//!
//! and looks beside the source for `_helion_aot_<stem>_<kind>_<c>.py`, for each `c` of the
//! device's compatible list in order, taking the first that exists. The compatible list
//! (`HardwareInfo.get_compatible_compute_ids`) is, for CUDA and ROCm, the device's own compute
//! followed by the rest of a fixed newest-to-oldest list ([`CUDA_FALLBACK`], [`ROCM_FALLBACK`])
//! when the compute is in that list, and the device's compute followed by the *whole* list when
//! it is not (an sm120 GPU tries sm120, then sm100, sm90, …); XPU and TPU use their exact name
//! only. Helion never looks at a file of another kind, so a file is used only on its own kind
//! of device. ROCm devices are modelled as reporting their plain `gfxNNN` name (MI-series
//! cards report feature flags too, `gfx942:sramecc+:xnack-`, which are not in the fixed list,
//! so they try the whole list from gfx950 down; the model does not follow that).

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};

use crate::config::{Backend, CudaCapability};

/// Helion's CUDA fallback list (`_CUDA_COMPUTE_CAPS`), newest first.
pub const CUDA_FALLBACK: [&str; 9] =
    ["sm100", "sm90", "sm89", "sm87", "sm86", "sm80", "sm75", "sm72", "sm70"];

/// Helion's ROCm fallback list (`_ROCM_ARCHS`), newest first.
pub const ROCM_FALLBACK: [&str; 8] =
    ["gfx950", "gfx942", "gfx941", "gfx940", "gfx90a", "gfx908", "gfx906", "gfx900"];

/// Compute capabilities of released NVIDIA GPUs from Volta on (V100 sm70 … GB10 sm121): the
/// devices a CUDA heuristic can meet besides one exactly like the GPU it was tuned on.
pub const KNOWN_CUDA_DEVICES: [&str; 13] = [
    "sm70", "sm72", "sm75", "sm80", "sm86", "sm87", "sm89", "sm90", "sm100", "sm103", "sm110", "sm120",
    "sm121",
];

/// `gcnArchName`s of released AMD GPUs that ROCm's PyTorch supports (MI50 gfx906 … RX 9070
/// gfx1201), plain names (see the module docs).
pub const KNOWN_ROCM_DEVICES: [&str; 13] = [
    "gfx900", "gfx906", "gfx908", "gfx90a", "gfx940", "gfx941", "gfx942", "gfx950", "gfx1030", "gfx1100",
    "gfx1101", "gfx1200", "gfx1201",
];

/// Helion's `device_kind` for a backend of `general.backends` (`None`: Helion has no
/// heuristic lookup for it).
pub fn helion_kind(b: Backend) -> Option<&'static str> {
    match b {
        Backend::Cuda => Some("cuda"),
        Backend::Rocm => Some("rocm"),
        Backend::Xpu => Some("xpu"),
        Backend::Tpu => Some("tpu"),
        _ => None,
    }
}

/// The backend of a Helion `device_kind` (`None` for a kind Helion never reports).
pub fn kind_backend(kind: &str) -> Option<Backend> {
    match kind {
        "cuda" => Some(Backend::Cuda),
        "rocm" => Some(Backend::Rocm),
        "xpu" => Some(Backend::Xpu),
        "tpu" => Some(Backend::Tpu),
        _ => None,
    }
}

/// A human name of a kind's devices, for messages (`CUDA GPU`).
pub fn device_noun(kind: &str) -> &'static str {
    match kind {
        "cuda" => "CUDA GPU",
        "rocm" => "ROCm GPU",
        "xpu" => "Intel XPU",
        "tpu" => "TPU",
        _ => "device",
    }
}

/// [`device_noun`] with its article (`a CUDA GPU`, `an Intel XPU`).
pub fn a_device(kind: &str) -> String {
    let noun = device_noun(kind);
    if noun.starts_with('I') {
        format!("an {noun}")
    } else {
        format!("a {noun}")
    }
}

pub use crate::helion::{compute_is_reported, parse_sm};

/// What the device's compute is for a file's compute, in the form a message shows: what a
/// device of `kind` reports looks like.
pub fn reported_form(kind: &str) -> &'static str {
    match kind {
        "cuda" => "`sm<major><minor>`, e.g. `sm90`",
        "rocm" => "the GPU's `gcnArchName`, e.g. `gfx942`",
        _ => "the device's name",
    }
}

/// The computes a device of `(kind, compute)` tries, in order (Helion's
/// `get_compatible_compute_ids`).
pub fn compatible_computes(kind: &str, compute: &str) -> Vec<String> {
    let list: &[&str] = match kind {
        "cuda" => &CUDA_FALLBACK,
        "rocm" => &ROCM_FALLBACK,
        _ => return vec![compute.to_owned()],
    };
    match list.iter().position(|c| *c == compute) {
        Some(i) => list[i..].iter().map(|c| (*c).to_owned()).collect(),
        None => std::iter::once(compute.to_owned()).chain(list.iter().map(|c| (*c).to_owned())).collect(),
    }
}

/// The file a device of `(kind, device)` picks among `shipped` computes (of one source stem
/// and kind): the first of its compatible list that is shipped.
pub fn picked<'a>(kind: &str, device: &str, shipped: &'a BTreeSet<String>) -> Option<&'a String> {
    compatible_computes(kind, device).into_iter().find_map(|c| shipped.get(&c))
}

/// The devices that load the kernel at all, for the loader's arch check: `declared` is
/// `[torch-noarch] cuda-capabilities` (written to `backend.archs`; `None`: no check). Only CUDA
/// is filtered; other kinds pass.
fn loads_on(kind: &str, device: &str, declared: Option<&[CudaCapability]>) -> bool {
    match (kind, declared) {
        ("cuda", Some(caps)) => parse_sm(device)
            .is_some_and(|gpu| caps.iter().any(|c| crate::matrix::check::loader_covers(&c.to_string(), gpu))),
        _ => true,
    }
}

/// For each shipped compute of one (source stem, kind), the devices on which Helion picks it,
/// among the known devices of the kind ([`KNOWN_CUDA_DEVICES`], [`KNOWN_ROCM_DEVICES`]) and a
/// device exactly like each shipped compute, that load the kernel (`declared`, see
/// `loads_on`). A shipped compute no such device picks maps to an empty list.
pub fn devices_picking(
    kind: &str,
    shipped: &BTreeSet<String>,
    declared: Option<&[CudaCapability]>,
) -> BTreeMap<String, Vec<String>> {
    let known: &[&str] = match kind {
        "cuda" => &KNOWN_CUDA_DEVICES,
        "rocm" => &KNOWN_ROCM_DEVICES,
        _ => &[],
    };
    let mut devices: Vec<String> = known.iter().map(|d| (*d).to_owned()).collect();
    for c in shipped {
        if !devices.contains(c) {
            devices.push(c.clone());
        }
    }
    if kind == "cuda" {
        devices.sort_by_key(|d| parse_sm(d).unwrap_or((0, 0)));
    }
    let mut out: BTreeMap<String, Vec<String>> = shipped.iter().map(|c| (c.clone(), Vec::new())).collect();
    for d in devices {
        if !loads_on(kind, &d, declared) {
            continue;
        }
        if let Some(c) = picked(kind, &d, shipped) {
            out.get_mut(c).expect("a shipped compute").push(d);
        }
    }
    out
}

/// A Python source file of the package (not a heuristic file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// Relative to the kernel directory (`torch-ext/attention_helion/attention.py`).
    pub rel: Utf8PathBuf,
    /// Its directory, relative to the kernel directory.
    pub dir: Utf8PathBuf,
    /// The file stem (`attention`), which heuristic names are made of.
    pub stem: String,
    /// Functions decorated with `@helion.aot_kernel` (`@aot_kernel`, …), in file order: the
    /// kernels that look a heuristic up ([`aot_kernels`]).
    pub aot_kernels: Vec<String>,
    /// Every function name the file defines (`def NAME(`, any indentation).
    pub defs: BTreeSet<String>,
    /// Whether it imports helion ([`imports_helion`]).
    pub imports_helion: bool,
}

/// A `_helion_aot_*.py` file of the package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeuristicFile {
    /// Relative to the kernel directory.
    pub rel: Utf8PathBuf,
    /// Its directory, relative to the kernel directory.
    pub dir: Utf8PathBuf,
    /// The file name.
    pub name: String,
    /// The source stem in the same directory whose lookup asks for this name: of the stems the
    /// name starts with, one followed by a device Helion can report, else by a known kind, else
    /// the longest (`None`: the name starts with no stem).
    pub stem: Option<String>,
    /// `<kind>` and `<compute>` after the stem (`None`: the name has no `_` after the stem).
    pub kind_compute: Option<(String, String)>,
    /// Kernels it selects configs for: `k` of each top-level `def key_<k>(`.
    pub key_fns: BTreeSet<String>,
    /// `k` of each top-level `def autotune_<k>(`.
    pub autotune_fns: BTreeSet<String>,
    /// The shapes its provenance header lists (`kernel: shape`, from the `# Tuned … on N
    /// shapes:` block that `kernel-builder tune` writes); empty without such a header.
    pub tuned_shapes: Vec<String>,
    /// The shapes listed after [`super::ALSO_MEASURED`]: measured on every config, not
    /// searched; empty without that block.
    pub also_measured: Vec<String>,
}

/// The Python sources and heuristic files of a package directory.
#[derive(Debug, Clone, Default)]
pub struct Package {
    pub sources: Vec<SourceFile>,
    pub heuristics: Vec<HeuristicFile>,
}

impl Package {
    /// The sources in `dir` (relative to the kernel directory).
    pub fn sources_in<'a>(&'a self, dir: &'a Utf8Path) -> impl Iterator<Item = &'a SourceFile> + 'a {
        self.sources.iter().filter(move |s| s.dir == dir)
    }
}

/// The `NAME`s of functions decorated with `aot_kernel` in Python source `text`: a decorator line
/// `@<dotted name ending in aot_kernel>` (with or without arguments, which may span lines),
/// then other decorators, then `def NAME(`. A line-based reading: decorators built at run time
/// (`k = helion.aot_kernel()(f)`) are not seen.
pub fn aot_kernels(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending = false;
    for line in text.lines() {
        let t = line.trim_start();
        if let Some(dec) = t.strip_prefix('@') {
            let name: String =
                dec.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '.').collect();
            if name == "aot_kernel" || name.ends_with(".aot_kernel") {
                pending = true;
            }
            continue;
        }
        if let Some(name) = def_name(t) {
            if pending {
                out.push(name.to_owned());
            }
            pending = false;
        }
    }
    out
}

/// Whether Python source `text` imports helion: a line (any indentation) `import helion…` or
/// `from helion… import`, as every `@helion.kernel` / `@aot_kernel` needs. A line-based
/// reading: `importlib.import_module("helion")` is not seen.
pub fn imports_helion(text: &str) -> bool {
    text.lines().any(|line| {
        let t = line.trim_start();
        let module = t.strip_prefix("import ").or_else(|| t.strip_prefix("from "));
        module.is_some_and(|m| {
            m.trim_start().split(',').any(|part| {
                let name = part.trim_start();
                name.strip_prefix("helion")
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', ' ', '\t', '#']))
            })
        })
    })
}

/// The names after `prefix` of a heuristic file's top-level functions: `key_` gives the kernels
/// Helion's runner wrote a `def key_<kernel>(*args)` for (its files define no nested ones).
pub fn top_level_functions(text: &str, prefix: &str) -> BTreeSet<String> {
    text.lines().filter_map(|l| def_name(l).and_then(|n| n.strip_prefix(prefix)).map(str::to_owned)).collect()
}

/// `NAME` of a line `def NAME(` / `async def NAME(` (already left-trimmed).
fn def_name(t: &str) -> Option<&str> {
    let rest = t.strip_prefix("async ").map(str::trim_start).unwrap_or(t).strip_prefix("def ")?;
    let rest = rest.trim_start();
    let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))?;
    (end > 0 && rest[end..].trim_start().starts_with('(')).then(|| &rest[..end])
}

/// Read every `.py` file under `kernel_dir/torch-ext/<package>/` (recursively, sorted):
/// heuristic files (`_helion_aot_*.py`) and sources. An absent package directory is an empty
/// package.
///
/// # Errors
/// A file or directory that cannot be read (a link loop included); the error names it.
pub fn scan(kernel_dir: &Utf8Path, package: &str) -> anyhow::Result<Package> {
    let root = kernel_dir.join("torch-ext").join(package);
    let mut pkg = Package::default();
    if !root.is_dir() {
        return Ok(pkg);
    }
    let mut heuristic_paths = Vec::new();
    // Links are followed, as the build follows them when it copies the package: a linked
    // source or heuristic is shipped, so it is linted. Only `.py` files matter here; any other
    // name (one that is not UTF-8 included) is not a Helion source or heuristic.
    for entry in walkdir::WalkDir::new(&root).follow_links(true).sort_by_file_name() {
        let entry = entry.with_context(|| format!("cannot read `{root}`"))?;
        if !entry.file_type().is_file() || !entry.file_name().to_str().is_some_and(|n| n.ends_with(".py")) {
            continue;
        }
        let path = Utf8PathBuf::try_from(entry.path().to_path_buf()).context("a non-UTF-8 path")?;
        let name = path.file_name().expect("a file has a name");
        let rel = path.strip_prefix(kernel_dir).expect("under the kernel directory").to_owned();
        let dir = rel.parent().expect("a file has a parent").to_owned();
        if crate::helion::is_heuristic(name) {
            heuristic_paths.push((path.clone(), rel, dir));
            continue;
        }
        let text = crate::fsutil::read_to_string(&path)?;
        let defs = text.lines().filter_map(|l| def_name(l.trim_start())).map(str::to_owned).collect();
        pkg.sources.push(SourceFile {
            stem: name.strip_suffix(".py").expect(".py").to_owned(),
            aot_kernels: aot_kernels(&text),
            imports_helion: imports_helion(&text),
            defs,
            rel,
            dir,
        });
    }
    for (path, rel, dir) in heuristic_paths {
        let name = rel.file_name().expect("a file name").to_owned();
        // Helion asks for the exact name `_helion_aot_<stem>_<kind>_<compute>.py` of a source and
        // a device: the stems are those of the sources beside the file.
        let split = crate::helion::split(&name, |s| pkg.sources_in(&dir).any(|src| src.stem == s));
        let stem = split.as_ref().map(|s| s.stem.to_owned());
        let kind_compute = split.and_then(|s| s.device).map(|(k, c)| (k.to_owned(), c.to_owned()));
        let text = crate::fsutil::read_to_string(&path)?;
        let list_after = |opens: &dyn Fn(&str) -> bool| -> Vec<String> {
            text.lines()
                .skip_while(|l| !opens(l))
                .skip(1)
                .map_while(|l| l.strip_prefix("#   ").map(|s| s.trim().to_owned()))
                .collect()
        };
        let tuned_shapes = list_after(&|l| l.starts_with("# Tuned ") && l.ends_with(" shapes:"));
        let also_measured = list_after(&|l| l == super::ALSO_MEASURED);
        pkg.heuristics.push(HeuristicFile {
            tuned_shapes,
            also_measured,
            key_fns: top_level_functions(&text, "key_"),
            autotune_fns: top_level_functions(&text, "autotune_"),
            rel,
            dir,
            name,
            stem,
            kind_compute,
        });
    }
    Ok(pkg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &[&str]) -> BTreeSet<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn compatible_lists_follow_helion() {
        assert_eq!(compatible_computes("cuda", "sm90"), CUDA_FALLBACK[1..].to_vec());
        assert_eq!(compatible_computes("cuda", "sm120")[..3], ["sm120", "sm100", "sm90"]);
        assert_eq!(compatible_computes("rocm", "gfx90a"), ["gfx90a", "gfx908", "gfx906", "gfx900"]);
        assert_eq!(compatible_computes("xpu", "Intel(R) Arc(TM) A770"), ["Intel(R) Arc(TM) A770"]);
    }

    #[test]
    fn an_sm90_file_serves_hopper_and_everything_newer() {
        let got = devices_picking("cuda", &set(&["sm90"]), None);
        assert_eq!(got["sm90"], ["sm90", "sm100", "sm103", "sm110", "sm120", "sm121"]);
        let got = devices_picking("cuda", &set(&["sm80", "sm90"]), None);
        assert_eq!(got["sm80"], ["sm80", "sm86", "sm87", "sm89"]);
        // Declared 8.0 only: the loader refuses sm90 and newer, so the sm90 file serves nobody.
        let caps = [CudaCapability::parse("8.0").unwrap()];
        let got = devices_picking("cuda", &set(&["sm80", "sm90"]), Some(&caps));
        assert_eq!((got["sm80"].len(), got["sm90"].len()), (4, 0));
    }

    #[test]
    fn aot_kernels_are_read_from_decorators() {
        let src = "import helion\n@helion.aot_kernel(\n    static_shapes=True,\n)\ndef a(x):\n    pass\n\n@helion.kernel()\ndef b(x):\n    pass\n\n@aot_kernel\n@other\nasync def c (x):\n    def inner():\n        pass\n";
        assert_eq!(aot_kernels(src), ["a", "c"]);
    }

    #[test]
    fn helion_imports_are_seen() {
        for yes in [
            "import helion\n",
            "import torch, helion\n",
            "  import helion.language as hl\n",
            "from helion import kernel\n",
            "from helion.autotuner import aot_kernel\n",
            "import helion  # the DSL\n",
        ] {
            assert!(imports_helion(yes), "{yes:?}");
        }
        for no in ["import helionx\n", "# import helion\n", "from .helion import x\n", "x = 'helion'\n", ""] {
            assert!(!imports_helion(no), "{no:?}");
        }
    }
}
