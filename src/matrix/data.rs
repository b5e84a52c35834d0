//! The build matrices as data, read from `nix/build-matrix.json` (the default matrix) and the
//! named snapshots it lists under `snapshots` (`nix/matrices/<name>.json`), all embedded at
//! compile time.
//!
//! Those files are the one source of truth: the Nix library reads the same bytes with
//! `builtins.fromJSON`. Their `format` field names the schema version
//! ([`FORMAT`], `kernel-builder-matrix-v2`: v1 plus `name`, `revision`, `notes`, `snapshots`
//! and `cuda.<v>.torch_wheel`); `name` is what a kernel pins (`[general] matrix = "…"`) and
//! `revision` the date the matrix was last changed.
use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Deserialize;

use crate::config::{Backend, Version};

/// The raw JSON of the default matrix, exactly as committed.
pub const MATRIX_JSON: &str = include_str!("../../nix/build-matrix.json");

/// The schema every matrix file declares in `format`.
pub const FORMAT: &str = "kernel-builder-matrix-v2";

/// The named snapshots, as (name, raw JSON). Must list exactly the default matrix's
/// `snapshots` (checked by `snapshots_match_the_default_matrix`).
pub const SNAPSHOT_JSON: &[(&str, &str)] =
    &[("upstream-2026-08", include_str!("../../nix/matrices/upstream-2026-08.json"))];

/// The whole matrix file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatrixData {
    /// Schema name, [`FORMAT`].
    pub format: String,
    /// What a kernel pins with `[general] matrix = "<name>"`: `2026-12`, `upstream-2026-08`.
    pub name: String,
    /// The date (`YYYY-MM-DD`) of the matrix's last change.
    pub revision: String,
    /// Where the facts come from, which cells were left out and why, the bundle rule.
    #[serde(default)]
    pub notes: Vec<String>,
    /// The default matrix only: snapshot name → its file, relative to `nix/`.
    #[serde(default)]
    pub snapshots: BTreeMap<String, String>,
    /// Nix system strings, e.g. `x86_64-linux`.
    pub systems: Vec<String>,
    /// The default matrix only: how cells are named and bounded ([`naming`]).
    #[serde(default)]
    pub naming: Option<Naming>,
    /// Per CUDA toolkit version (`"13.0"`): what it can build.
    pub cuda: BTreeMap<String, CudaToolkit>,
    /// Which CUDA versions and capabilities accept the `a` and `f` suffixes.
    pub cuda_arch_specific: BTreeMap<String, ArchSpecificRule>,
    /// ROCm facts: `known_archs` and, per ROCm version, its supported gfx targets.
    pub rocm: RocmData,
    /// The build sets (torch × backend version × systems), in file order.
    pub build_sets: Vec<BuildSet>,
}

/// How cells are named and bounded: the `naming` section of `nix/build-matrix.json`, which
/// `nix/lib/kernelCells.nix` reads too, so that both languages name a cell from the same bytes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Naming {
    /// What the section means, for a reader of the file.
    #[serde(default)]
    pub notes: String,
    /// Backend name → the `<compute>` prefix of its variant names (`cuda` → `cu`).
    pub compute_prefixes: BTreeMap<String, String>,
    /// Backend name → its noarch variant name (`cann` → `torch-npu`).
    pub noarch_names: BTreeMap<String, String>,
    /// The ABI tag of torch arch variant names and the systems that carry it.
    pub abi_tag: AbiTag,
    /// The inclusive version ranges a kernel gets when build.toml sets no bound.
    pub default_bounds: DefaultBounds,
}

/// `naming.abi_tag`: systems whose name ends with one of `system_suffixes` carry `-<tag>`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AbiTag {
    pub tag: String,
    pub system_suffixes: Vec<String>,
}

/// `naming.default_bounds`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DefaultBounds {
    pub cuda: Bounds,
    pub torch: Bounds,
}

/// An inclusive version range, as strings in the file (`"11.8"`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bounds {
    pub minver: String,
    pub maxver: String,
}

/// The naming section of the default matrix (snapshots name their cells the same way).
pub fn naming() -> &'static Naming {
    matrix().naming.as_ref().expect("nix/build-matrix.json has a `naming` section (tested)")
}

/// What one CUDA toolkit can compile.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CudaToolkit {
    /// Every capability (`X.Y`) nvcc of this version accepts.
    pub capabilities: Vec<String>,
    /// The capabilities built for a kernel that does not set `cuda-capabilities`
    /// (the last one carries `+PTX`).
    pub default: Vec<String>,
    /// Capabilities renamed from this version on: old → new (`10.1` → `11.0` from CUDA 13).
    #[serde(default)]
    pub renamed: BTreeMap<String, String>,
    /// Per Nix system, the capabilities the official torch wheels built with this toolkit
    /// carry (`X.Y`, no PTX): the GPUs a noarch (JIT) kernel's torch runs on. Absent when
    /// not known.
    #[serde(default)]
    pub torch_wheel: BTreeMap<String, Vec<String>>,
}

/// When a capability suffix (`a` or `f`) is available.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchSpecificRule {
    pub min_capability: String,
    pub min_cuda: String,
}

/// ROCm targets.
#[derive(Debug, Deserialize)]
pub struct RocmData {
    /// Every gfx target name we recognise (a typo is anything else).
    pub known_archs: Vec<String>,
    /// Per ROCm version (`"7.1"`): the targets it builds.
    #[serde(flatten)]
    pub versions: BTreeMap<String, RocmRelease>,
}

/// One ROCm release.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RocmRelease {
    pub archs: Vec<String>,
}

/// One entry of the matrix: a torch version with one backend (and its version) on some systems.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuildSet {
    /// Torch `major.minor`.
    pub torch: String,
    pub backend: Backend,
    /// CUDA / ROCm / XPU version; absent for cpu, metal and tpu.
    #[serde(default)]
    pub version: Option<String>,
    pub systems: Vec<String>,
    /// Part of the default bundle (`nix build .#bundle`).
    pub bundle: bool,
    /// tvm-ffi version this set can build, if any.
    #[serde(default)]
    pub tvm_ffi: Option<String>,
}

impl BuildSet {
    /// The torch version, parsed.
    pub fn torch_version(&self) -> Version {
        Version::parse(&self.torch).expect("build-matrix.json torch versions are checked by tests")
    }

    /// The backend version, parsed.
    pub fn backend_version(&self) -> Option<Version> {
        self.version
            .as_deref()
            .map(|v| Version::parse(v).expect("build-matrix.json versions are checked by tests"))
    }
}

/// The default matrix, parsed once. Panics only if the committed JSON is malformed, which
/// `matrix_json_parses` catches.
pub fn matrix() -> &'static MatrixData {
    static DATA: OnceLock<MatrixData> = OnceLock::new();
    DATA.get_or_init(|| serde_json::from_str(MATRIX_JSON).expect("nix/build-matrix.json is valid"))
}

/// Every matrix this build knows: the default first, then the snapshots in name order.
pub fn all() -> &'static [MatrixData] {
    static ALL: OnceLock<Vec<MatrixData>> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut v = vec![serde_json::from_str(MATRIX_JSON).expect("nix/build-matrix.json is valid")];
        for (name, json) in SNAPSHOT_JSON {
            let m: MatrixData = serde_json::from_str(json)
                .unwrap_or_else(|e| panic!("nix/matrices/{name}.json is not valid: {e}"));
            v.push(m);
        }
        v
    })
}

/// The names a kernel may pin, default first: `["2026-12", "upstream-2026-08"]`.
pub fn known_names() -> Vec<&'static str> {
    all().iter().map(|m| m.name.as_str()).collect()
}

/// A matrix name this build does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown build matrix `{name}`; this kernel-builder knows {}", known_names().join(", "))]
pub struct UnknownMatrix {
    /// The name asked for.
    pub name: String,
}

/// The matrix called `name` (the default matrix's own name finds it too).
///
/// Errors with [`UnknownMatrix`], whose message lists the known names.
pub fn named(name: &str) -> Result<&'static MatrixData, UnknownMatrix> {
    all().iter().find(|m| m.name == name).ok_or_else(|| UnknownMatrix { name: name.to_owned() })
}

/// The matrix a kernel builds against: the one `[general] matrix` pins, else the default.
/// An unknown pin (which loading build.toml refuses) also gives the default.
pub fn for_config(config: &crate::config::BuildConfig) -> &'static MatrixData {
    match &config.general.matrix {
        Some(name) => named(name).unwrap_or_else(|_| matrix()),
        None => matrix(),
    }
}

/// Read a matrix file that is not built in (a draft of the next matrix, or a generated one for
/// a benchmark): `list-variants --matrix-file FILE` and `ci-matrix --matrix-file FILE` list
/// the cells of it instead of the kernel's matrix. Nix does not see such a file: the flake
/// reads `nix/build-matrix.json` (or give `nix/lib` the same file as its `matrix` argument).
///
/// The file has the schema of `nix/build-matrix.json` ([`FORMAT`]); its `snapshots` are not
/// read.
///
/// # Errors
/// The file cannot be read or is not a matrix of this schema (serde's message, with line and
/// column), or it is inconsistent: every problem found, one per line (a build set on a system
/// the file does not list, a CUDA or ROCm version without its table, a version that does not
/// parse).
/// The most bytes of a matrix file read (nix/build-matrix.json is under 10 KB).
pub const MAX_MATRIX_FILE_BYTES: u64 = 4 << 20;

pub fn load_file(path: &camino::Utf8Path) -> anyhow::Result<MatrixData> {
    use anyhow::Context;
    let text = crate::fsutil::read_to_string_bounded(path, MAX_MATRIX_FILE_BYTES, "a matrix file")?;
    let m: MatrixData = serde_json::from_str(&text)
        .with_context(|| format!("`{path}` is not a build matrix (the schema of nix/build-matrix.json)"))?;
    let problems = problems(&m);
    anyhow::ensure!(
        problems.is_empty(),
        "the matrix file `{path}` is inconsistent:\n  {}",
        problems.join("\n  ")
    );
    Ok(m)
}

/// What is wrong with `m`, one sentence each (empty when it is consistent): the `format`, the
/// systems of each build set, the CUDA and ROCm versions having their tables, versions that
/// parse.
pub fn problems(m: &MatrixData) -> Vec<String> {
    let mut out = Vec::new();
    if m.format != FORMAT {
        out.push(format!("`format` is `{}`, expected `{FORMAT}`", m.format));
    }
    for (i, set) in m.build_sets.iter().enumerate() {
        let at = format!("build_sets[{i}] (torch {}, {})", set.torch, set.backend);
        if let Err(e) = Version::parse(&set.torch) {
            out.push(format!("{at}: torch version: {e}"));
        }
        if let Some(Err(e)) = set.version.as_deref().map(Version::parse) {
            out.push(format!("{at}: backend version: {e}"));
        }
        for s in &set.systems {
            if !m.systems.contains(s) {
                out.push(format!("{at}: system `{s}` is not in `systems`"));
            }
        }
        match (set.backend, set.version.as_deref()) {
            (Backend::Cuda, Some(v)) if !m.cuda.contains_key(v) => {
                out.push(format!("{at}: CUDA {v} has no entry in `cuda`"))
            }
            (Backend::Rocm, Some(v)) if !m.rocm.versions.contains_key(v) => {
                out.push(format!("{at}: ROCm {v} has no entry in `rocm`"))
            }
            (Backend::Cuda | Backend::Rocm | Backend::Xpu, None) => out.push(format!("{at}: no `version`")),
            _ => {}
        }
    }
    out
}

/// One line for `kernel-builder --version`: the crate version and the matrices it carries,
/// e.g. `0.1.0 (matrix 2026-12, revision 2026-12-01; snapshots: upstream-2026-08 (2026-08-20))`.
pub fn version_line() -> &'static str {
    static LINE: OnceLock<String> = OnceLock::new();
    LINE.get_or_init(|| {
        let d = matrix();
        let snaps: Vec<String> = all()[1..].iter().map(|m| format!("{} ({})", m.name, m.revision)).collect();
        format!(
            "{} (matrix {}, revision {}; snapshots: {})",
            env!("CARGO_PKG_VERSION"),
            d.name,
            d.revision,
            if snaps.is_empty() { "none".to_owned() } else { snaps.join(", ") }
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_consistent(m: &MatrixData) {
        assert_eq!(m.format, FORMAT, "{}", m.name);
        let date = m.revision.as_bytes();
        assert!(
            date.len() == 10 && date[4] == b'-' && date[7] == b'-',
            "{}: revision {} is not YYYY-MM-DD",
            m.name,
            m.revision
        );
        for set in &m.build_sets {
            set.torch_version();
            set.backend_version();
            for s in &set.systems {
                assert!(m.systems.contains(s), "{}: unknown system {s}", m.name);
            }
            if set.backend == Backend::Cuda {
                assert!(m.cuda.contains_key(set.version.as_deref().unwrap()));
            }
            if set.backend == Backend::Rocm {
                assert!(m.rocm.versions.contains_key(set.version.as_deref().unwrap()));
            }
        }
        for (v, tk) in &m.cuda {
            for (system, caps) in &tk.torch_wheel {
                assert!(m.systems.contains(system), "{}: CUDA {v}: torch_wheel system {system}", m.name);
                for c in caps {
                    assert!(
                        tk.capabilities.contains(c),
                        "{}: CUDA {v}: wheel capability {c} unknown",
                        m.name
                    );
                }
            }
        }
    }

    #[test]
    fn naming_covers_every_backend() {
        let n = naming();
        for b in Backend::ALL {
            assert!(n.compute_prefixes.contains_key(b.as_str()), "{b:?}");
            assert!(n.noarch_names.contains_key(b.as_str()), "{b:?}");
        }
        assert_eq!(n.compute_prefixes.len(), Backend::ALL.len());
        assert_eq!(n.noarch_names.len(), Backend::ALL.len());
        for b in [&n.default_bounds.cuda, &n.default_bounds.torch] {
            assert!(
                super::super::cuda::json_version(&b.minver) <= super::super::cuda::json_version(&b.maxver)
            );
        }
    }

    #[test]
    fn matrix_json_parses() {
        let m: MatrixData = serde_json::from_str(MATRIX_JSON).unwrap();
        check_consistent(&m);
        assert_eq!((m.name.as_str(), m.revision.as_str()), ("2026-12", "2026-12-01"));
        assert_eq!(m.build_sets.len(), 27);
        let flattened: usize = m.build_sets.iter().map(|s| s.systems.len()).sum();
        assert_eq!(flattened, 45);
        // The bundle: torch 2.14 and 2.15, plus the newest known ROCm and XPU builds (notes).
        let mut bundle: Vec<(String, Backend)> =
            m.build_sets.iter().filter(|s| s.bundle).map(|s| (s.torch.clone(), s.backend)).collect();
        bundle.dedup();
        assert!(bundle.iter().all(|(t, b)| t == "2.14"
            || t == "2.15"
            || (t == "2.13" && matches!(b, Backend::Rocm | Backend::Xpu))));
    }

    #[test]
    fn snapshots_match_the_default_matrix() {
        let listed: Vec<&str> = matrix().snapshots.keys().map(String::as_str).collect();
        let embedded: Vec<&str> = SNAPSHOT_JSON.iter().map(|(n, _)| *n).collect();
        assert_eq!(listed, embedded);
        for (name, file) in &matrix().snapshots {
            assert_eq!(file, &format!("matrices/{name}.json"));
            let m = named(name).unwrap();
            assert_eq!(&m.name, name);
            assert!(m.snapshots.is_empty(), "a snapshot lists no snapshots");
            check_consistent(m);
        }
        assert_eq!(known_names(), ["2026-12", "upstream-2026-08"]);
    }

    #[test]
    fn the_august_snapshot_is_upstreams_matrix() {
        let m = named("upstream-2026-08").unwrap();
        assert_eq!(m.revision, "2026-08-20");
        assert_eq!(m.build_sets.len(), 18);
        let flattened: usize = m.build_sets.iter().map(|s| s.systems.len()).sum();
        assert_eq!(flattened, 28);
        assert_eq!(m.build_sets.iter().filter(|s| s.bundle).map(|s| s.systems.len()).sum::<usize>(), 26);
    }

    #[test]
    fn matrix_files_are_checked_when_loaded() {
        for m in all() {
            assert_eq!(problems(m), Vec::<String>::new(), "{}", m.name);
        }
        let dir = tempfile::tempdir().unwrap();
        let path = camino::Utf8PathBuf::from_path_buf(dir.path().join("m.json")).unwrap();
        std::fs::write(&path, MATRIX_JSON).unwrap();
        assert_eq!(load_file(&path).unwrap().build_sets.len(), matrix().build_sets.len());
        let broken = MATRIX_JSON
            .replacen(
                "\"systems\": [\"aarch64-darwin\", \"aarch64-linux\", \"x86_64-linux\"]",
                "\"systems\": [\"x86_64-linux\"]",
                1,
            )
            .replacen("\"version\": \"12.6\"", "\"version\": \"12.5\"", 1);
        assert_ne!(broken, MATRIX_JSON);
        std::fs::write(&path, broken).unwrap();
        let err = format!("{:#}", load_file(&path).unwrap_err());
        assert!(err.starts_with(&format!("the matrix file `{path}` is inconsistent:\n  ")), "{err}");
        assert!(
            err.contains("\n  build_sets[3] (torch 2.12, cuda): CUDA 12.5 has no entry in `cuda`\n"),
            "{err}"
        );
        assert!(err.contains("system `aarch64-linux` is not in `systems`"), "{err}");
        std::fs::write(&path, "{\"format\": 1}").unwrap();
        let err = format!("{:#}", load_file(&path).unwrap_err());
        assert!(err.contains("is not a build matrix") && err.contains("line 1 column"), "{err}");
    }

    #[test]
    fn unknown_names_list_the_known_ones() {
        let err = named("upstream-2025-01").unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown build matrix `upstream-2025-01`; this kernel-builder knows 2026-12, upstream-2026-08"
        );
        assert!(version_line()
            .ends_with("(matrix 2026-12, revision 2026-12-01; snapshots: upstream-2026-08 (2026-08-20))"));
    }
}
