//! What a torch wheel says about itself, and whether a build matrix agrees with it (the
//! maintainer command `kernel-builder matrix check-wheel`).
//!
//! Read from the wheel (a zip, PEP 427): `<name>.dist-info/METADATA` (core metadata: `Name`,
//! `Version`, `Requires-Python`), `<name>.dist-info/WHEEL` (`Tag:` lines, `python-abi-platform`)
//! and `torch/version.py` (`__version__`, `cuda`, `hip`, `xpu`: the toolkit the wheel was
//! built with, `None` for a CPU build). The matrix agrees when a build set has the wheel's
//! torch `major.minor`, its backend and toolkit version, on the system of each platform tag.

use std::io::Read;

use camino::Utf8Path;
use serde::Serialize;

use crate::config::{Backend, Version};

use super::cuda::json_version;
use super::data::MatrixData;
use super::naming;

/// The facts read from one torch wheel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WheelFacts {
    /// `Name` of METADATA (`torch`).
    pub name: String,
    /// `Version` of METADATA (`2.11.0`; PyPI's default builds carry no local tag there).
    pub version: String,
    /// `__version__` of `torch/version.py` (`2.11.0+cu130`).
    pub torch_version: String,
    /// The backend the wheel was built for: `cuda`, `rocm`, `xpu` or `cpu`.
    pub backend: Backend,
    /// The toolkit version from `torch/version.py` (`13.0`; ROCm from `hip`, e.g. `7.2.26015`).
    pub toolkit: Option<String>,
    /// `Requires-Python` of METADATA (`>=3.10`), if present.
    pub requires_python: Option<String>,
    /// The wheel's tags from WHEEL (`cp311-cp311-manylinux_2_28_x86_64`), in file order.
    pub tags: Vec<String>,
}

/// Why a wheel could not be read.
#[derive(Debug, thiserror::Error)]
pub enum WheelError {
    #[error("cannot open `{path}`: {source}")]
    Open { path: String, source: std::io::Error },
    #[error("`{path}` is not a wheel (zip archive): {source}")]
    NotZip { path: String, source: zip::result::ZipError },
    #[error("`{path}` has no `{member}`; is it a torch wheel?")]
    Missing { path: String, member: String },
    #[error("`{path}`: `{member}` is not UTF-8 text")]
    NotText { path: String, member: String },
    #[error("`{path}`: {what}")]
    Malformed { path: String, what: String },
    #[error("`{path}`: `{member}` unpacks to more than 1 MiB; a torch wheel's `{member}` is a few kilobytes (is this a zip bomb?)")]
    TooLarge { path: String, member: String },
    #[error("{0:#}")]
    NotAFile(anyhow::Error),
    #[error("`{path}`: its central directory lists {entries} entries in {bytes} bytes; kernel-builder reads at most {MAX_ENTRIES} entries and {} (a torch wheel has about 13,000 entries; is this a zip bomb?)", crate::fsutil::size_words(MAX_DIRECTORY_BYTES))]
    TooManyEntries { path: String, entries: u64, bytes: u64 },
}

/// The most bytes of one member (METADATA, WHEEL, `torch/version.py`) unpacked: each is a few
/// kilobytes, and reading no more keeps a zip bomb from costing memory.
pub const MAX_MEMBER_BYTES: u64 = 1 << 20;

/// The most entries a wheel's central directory may list (torch 2.15's wheel has 13,187), and
/// the most bytes it may take: checked in the end of central directory record before the
/// directory is read, since reading one allocates for every entry it lists.
pub const MAX_ENTRIES: u64 = 100_000;
pub const MAX_DIRECTORY_BYTES: u64 = 32 << 20;

/// The entry count and size of the central directory of the zip `file`, from its end of
/// central directory record (and the zip64 one when the record defers to it); `None` when no
/// record is found (the zip reader then says what is wrong). Every place in the file's tail
/// that looks like such a record is read, and the largest claim is returned: a comment can
/// hold a decoy record, and the zip reader must not find a larger claim than was checked.
fn central_directory(file: &mut std::fs::File) -> std::io::Result<Option<(u64, u64)>> {
    use std::io::{Seek, SeekFrom};
    let len = file.metadata()?.len();
    // The record is 22 bytes, followed by a comment of at most 65,535.
    let tail_len = len.min(22 + 65_535);
    let mut tail = vec![0u8; tail_len as usize];
    file.seek(SeekFrom::Start(len - tail_len))?;
    file.read_exact(&mut tail)?;
    let le16 = |b: &[u8], at: usize| u16::from_le_bytes([b[at], b[at + 1]]) as u64;
    let le32 = |b: &[u8], at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) as u64;
    let le64 = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]));
    let mut largest: Option<(u64, u64)> = None;
    for at in (0..tail.len().saturating_sub(21)).filter(|&i| tail[i..i + 4] == [0x50, 0x4b, 0x05, 0x06]) {
        let (mut entries, mut bytes) = (le16(&tail, at + 10), le32(&tail, at + 12));
        // The zip64 locator sits just before the record and gives the zip64 record's offset.
        if let Some(loc) = at.checked_sub(20).filter(|&l| tail[l..l + 4] == [0x50, 0x4b, 0x06, 0x07]) {
            let mut rec = [0u8; 56];
            file.seek(SeekFrom::Start(le64(&tail, loc + 8)))?;
            if file.read_exact(&mut rec).is_ok() && rec[..4] == [0x50, 0x4b, 0x06, 0x06] {
                // 0xFFFF and 0xFFFFFFFF in the record only say "see the zip64 record".
                let (e64, b64) = (le64(&rec, 24).max(le64(&rec, 32)), le64(&rec, 40));
                entries = if entries == 0xffff { e64 } else { entries.max(e64) };
                bytes = if bytes == 0xffff_ffff { b64 } else { bytes.max(b64) };
            }
        }
        largest = Some(largest.map_or((entries, bytes), |(e, b)| (e.max(entries), b.max(bytes))));
    }
    file.seek(SeekFrom::Start(0))?;
    Ok(largest)
}

/// Read the facts of the torch wheel at `path`.
///
/// Errors: the file cannot be opened or is not a zip; METADATA, WHEEL or `torch/version.py` is
/// missing or not text; METADATA has no `Name`/`Version`; `version.py` has no `__version__`.
pub fn read_wheel(path: &Utf8Path) -> Result<WheelFacts, WheelError> {
    let p = path.to_string();
    let mut file = crate::fsutil::open_regular(path).map_err(|e| match e.downcast::<std::io::Error>() {
        Ok(source) => WheelError::Open { path: p.clone(), source },
        Err(e) => WheelError::NotAFile(e),
    })?;
    let listed =
        central_directory(&mut file).map_err(|source| WheelError::Open { path: p.clone(), source })?;
    if let Some((entries, bytes)) = listed.filter(|&(e, b)| e > MAX_ENTRIES || b > MAX_DIRECTORY_BYTES) {
        return Err(WheelError::TooManyEntries { path: p, entries, bytes });
    }
    let mut zip =
        zip::ZipArchive::new(file).map_err(|source| WheelError::NotZip { path: p.clone(), source })?;
    let names: Vec<String> = zip.file_names().map(str::to_owned).collect();
    let find = |suffix: &str| -> Result<String, WheelError> {
        names
            .iter()
            .find(|n| {
                n.ends_with(suffix)
                    && n.split('/').count() == 2
                    && n.split('/').next().is_some_and(|d| d.ends_with(".dist-info"))
            })
            .cloned()
            .ok_or_else(|| WheelError::Missing { path: p.clone(), member: format!("*.dist-info{suffix}") })
    };
    let metadata_name = find("/METADATA")?;
    let wheel_name = find("/WHEEL")?;
    let mut read = |member: &str| -> Result<String, WheelError> {
        let mut f = zip
            .by_name(member)
            .map_err(|_| WheelError::Missing { path: p.clone(), member: member.to_owned() })?;
        let mut bytes = Vec::new();
        (&mut f)
            .take(MAX_MEMBER_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|_| WheelError::NotText { path: p.clone(), member: member.to_owned() })?;
        if bytes.len() as u64 > MAX_MEMBER_BYTES {
            return Err(WheelError::TooLarge { path: p.clone(), member: member.to_owned() });
        }
        String::from_utf8(bytes)
            .map_err(|_| WheelError::NotText { path: p.clone(), member: member.to_owned() })
    };
    let metadata = read(&metadata_name)?;
    let wheel = read(&wheel_name)?;
    let version_py = read("torch/version.py")?;
    facts_from(&p, &metadata, &wheel, &version_py)
}

/// The value of the first `Key: value` header line (RFC 822 style, before the body).
fn header<'t>(text: &'t str, key: &str) -> Option<&'t str> {
    text.lines()
        .take_while(|l| !l.is_empty())
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(':')))
        .map(str::trim)
}

/// A string assignment in `torch/version.py`: `cuda: Optional[str] = '13.0'` or
/// `__version__ = '2.11.0+cu130'`; `None` when the value is `None` or the name is absent.
fn py_string(text: &str, name: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(name)?;
        let rest = rest.trim_start();
        let rest = match rest.strip_prefix(':') {
            Some(annot) => annot.split_once('=')?.1,
            None => rest.strip_prefix('=')?,
        };
        let v = rest.trim();
        let quote = v.chars().next().filter(|c| *c == '\'' || *c == '"')?;
        v[1..].split(quote).next().map(str::to_owned)
    })
}

fn facts_from(path: &str, metadata: &str, wheel: &str, version_py: &str) -> Result<WheelFacts, WheelError> {
    let malformed = |what: &str| WheelError::Malformed { path: path.to_owned(), what: what.to_owned() };
    let name = header(metadata, "Name").ok_or_else(|| malformed("METADATA has no `Name`"))?.to_owned();
    let version =
        header(metadata, "Version").ok_or_else(|| malformed("METADATA has no `Version`"))?.to_owned();
    let torch_version = py_string(version_py, "__version__")
        .ok_or_else(|| malformed("torch/version.py has no `__version__`"))?;
    let (backend, toolkit) = if let Some(c) = py_string(version_py, "cuda") {
        (Backend::Cuda, Some(c))
    } else if let Some(h) = py_string(version_py, "hip") {
        (Backend::Rocm, Some(h))
    } else if let Some(x) = py_string(version_py, "xpu") {
        (Backend::Xpu, Some(x))
    } else {
        (Backend::Cpu, None)
    };
    let tags = wheel.lines().filter_map(|l| l.strip_prefix("Tag:")).map(|t| t.trim().to_owned()).collect();
    Ok(WheelFacts {
        name,
        version,
        torch_version,
        backend,
        toolkit,
        requires_python: header(metadata, "Requires-Python").map(str::to_owned),
        tags,
    })
}

/// The Nix system of a wheel platform tag: `manylinux_2_28_x86_64` → `x86_64-linux`,
/// `macosx_14_0_arm64` → `aarch64-darwin`; `None` for platforms the matrix has no system for
/// (`win_amd64`).
pub fn platform_system(platform: &str) -> Option<&'static str> {
    let linux = platform.starts_with("manylinux")
        || platform.starts_with("linux")
        || platform.starts_with("musllinux");
    if linux && platform.ends_with("x86_64") {
        Some("x86_64-linux")
    } else if linux && platform.ends_with("aarch64") {
        Some("aarch64-linux")
    } else if platform.starts_with("macosx") && platform.ends_with("arm64") {
        Some("aarch64-darwin")
    } else {
        None
    }
}

/// Whether CPython `major.minor` satisfies a `Requires-Python` specifier set such as
/// `>=3.10` or `>=3.11,<3.16`; `None` when an operator is not one of `>=`, `>`, `<=`, `<`,
/// `==`, `!=` (with `.*` wildcards left unevaluated).
pub fn python_satisfies(spec: &str, python: (u64, u64)) -> Option<bool> {
    let mut ok = true;
    for clause in spec.split(',').map(str::trim).filter(|c| !c.is_empty()) {
        let (op, v) = ["==", "!=", ">=", "<=", ">", "<"]
            .iter()
            .find_map(|op| clause.strip_prefix(op).map(|v| (*op, v.trim())))?;
        if v.contains('*') {
            return None;
        }
        let want: Vec<u64> = v.split('.').map(|p| p.parse().ok()).collect::<Option<_>>()?;
        let have = [python.0, python.1];
        let want2 = [want.first().copied().unwrap_or(0), want.get(1).copied().unwrap_or(0)];
        ok &= match op {
            ">=" => have >= want2,
            ">" => have > want2,
            "<=" => have <= want2,
            "<" => have < want2,
            "==" => have == want2,
            _ => have != want2,
        };
    }
    Some(ok)
}

/// The interpreter the Nix builder's torch packages are built for (nix-builder §3.5: cp313).
pub const BUILDER_PYTHON: (u64, u64) = (3, 13);

/// What the matrix says about one system of the wheel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SystemVerdict {
    /// The wheel's platform tag (`manylinux_2_28_x86_64`).
    pub platform: String,
    /// Its Nix system, if the matrix could have one.
    pub system: Option<String>,
    /// The torch arch variant of the matching build set (`torch211-cxx11-cu130-x86_64-linux`).
    pub cell: Option<String>,
    /// Its name in the grammar of kernels 0.19
    /// (`torch-2.11-cxx11-cuda-13.0-cpython-3.9-abi3-x86_64-linux`).
    pub cell_0_19: Option<String>,
    /// Whether that set is in the default bundle.
    pub bundle: bool,
    /// The problem, when the matrix does not agree.
    pub problem: Option<String>,
}

/// The whole report of `matrix check-wheel`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WheelReport {
    pub wheel: WheelFacts,
    /// The matrix checked (`2026-12`) and its revision.
    pub matrix: String,
    pub matrix_revision: String,
    /// Torch `major.minor` (`2.11`).
    pub torch: String,
    /// Whether [`BUILDER_PYTHON`] satisfies `Requires-Python` (`None`: absent or not evaluable).
    pub builder_python_ok: Option<bool>,
    pub systems: Vec<SystemVerdict>,
    /// True when every platform with a Nix system has a cell with the wheel's toolkit.
    pub agrees: bool,
}

/// Major.minor of a version string (`2.11.0+cu130` → `2.11`, `7.2.26015-abc` → `7.2`).
fn major_minor(v: &str) -> String {
    let core = v.split(['+', '-']).next().unwrap_or(v);
    let mut parts = core.split('.');
    match (parts.next(), parts.next()) {
        (Some(a), Some(b)) => format!("{a}.{b}"),
        (Some(a), None) => format!("{a}.0"),
        _ => core.to_owned(),
    }
}

/// Compare `facts` with matrix `m`.
pub fn check_wheel(m: &MatrixData, facts: &WheelFacts) -> WheelReport {
    let torch = major_minor(&facts.torch_version);
    let torch_v = json_version(&torch);
    let toolkit = facts.toolkit.as_deref().map(major_minor);
    let mut platforms: Vec<String> =
        facts.tags.iter().filter_map(|t| t.rsplit('-').next().map(str::to_owned)).collect();
    platforms.dedup();
    let mut systems = Vec::new();
    for platform in platforms {
        let Some(system) = platform_system(&platform) else {
            systems.push(SystemVerdict {
                platform,
                system: None,
                cell: None,
                cell_0_19: None,
                bundle: false,
                problem: None,
            });
            continue;
        };
        let same: Vec<_> = m
            .build_sets
            .iter()
            .filter(|s| json_version(&s.torch) == torch_v && s.backend == facts.backend)
            .filter(|s| s.systems.iter().any(|x| x == system))
            .collect();
        let toolkit_matches = |s: &&super::data::BuildSet| match (&toolkit, s.version.as_deref()) {
            (None, None) => true,
            (Some(t), Some(v)) => json_version(&major_minor(v)) == json_version(t),
            _ => false,
        };
        let verdict = match same.iter().copied().find(toolkit_matches) {
            Some(set) => {
                let version: Option<Version> = set.version.as_deref().map(json_version);
                let compute = naming::compute_tag(set.backend, version.as_ref());
                SystemVerdict {
                    platform,
                    system: Some(system.to_owned()),
                    cell: Some(naming::torch_arch_name(&torch_v, &compute, system)),
                    cell_0_19: Some(naming::torch_arch_name_0_19(
                        &torch_v,
                        set.backend,
                        set.version.as_deref(),
                        system,
                    )),
                    bundle: set.bundle,
                    problem: None,
                }
            }
            None => {
                let what = match &toolkit {
                    Some(t) => format!("torch {torch} {} {t}", facts.backend),
                    None => format!("torch {torch} {}", facts.backend),
                };
                let problem = if same.is_empty() {
                    let mut others: Vec<String> = m
                        .build_sets
                        .iter()
                        .filter(|s| {
                            json_version(&s.torch) == torch_v && s.systems.iter().any(|x| x == system)
                        })
                        .map(|s| match &s.version {
                            Some(v) => format!("{} {v}", s.backend),
                            None => s.backend.to_string(),
                        })
                        .collect();
                    others.dedup();
                    if others.is_empty() {
                        format!(
                            "no build set of matrix {} has {what} on {system}: it has no torch {torch} there",
                            m.name
                        )
                    } else {
                        format!(
                            "no build set of matrix {} has {what} on {system}; for torch {torch} it has {}",
                            m.name,
                            others.join(", ")
                        )
                    }
                } else {
                    let have: Vec<String> = same.iter().filter_map(|s| s.version.clone()).collect();
                    format!(
                        "matrix {} builds torch {torch} {} on {system} with {} {}, not {}",
                        m.name,
                        facts.backend,
                        facts.backend,
                        have.join(", "),
                        toolkit.as_deref().unwrap_or("none")
                    )
                };
                SystemVerdict {
                    platform,
                    system: Some(system.to_owned()),
                    cell: None,
                    cell_0_19: None,
                    bundle: false,
                    problem: Some(problem),
                }
            }
        };
        systems.push(verdict);
    }
    let agrees = systems.iter().any(|s| s.system.is_some()) && systems.iter().all(|s| s.problem.is_none());
    WheelReport {
        wheel: facts.clone(),
        matrix: m.name.clone(),
        matrix_revision: m.revision.clone(),
        torch,
        builder_python_ok: facts.requires_python.as_deref().and_then(|r| python_satisfies(r, BUILDER_PYTHON)),
        systems,
        agrees,
    }
}

impl WheelReport {
    /// The text form: the wheel's facts, then one line per platform (its cell in the legacy
    /// grammar), then the verdict.
    pub fn to_text(&self) -> String {
        self.to_text_named(naming::NameGrammar::Legacy)
    }

    /// [`WheelReport::to_text`] with each cell's name in `grammar`.
    pub fn to_text_named(&self, grammar: naming::NameGrammar) -> String {
        let w = &self.wheel;
        let mut s = String::new();
        s.push_str(&format!("wheel: {} {} (torch.__version__ {})\n", w.name, w.version, w.torch_version));
        s.push_str(&format!(
            "backend: {}{}\n",
            w.backend,
            w.toolkit.as_deref().map(|t| format!(" {t}")).unwrap_or_default()
        ));
        let py = match (&w.requires_python, self.builder_python_ok) {
            (Some(r), Some(true)) => format!("{r} (the builder's CPython 3.13 satisfies it)"),
            (Some(r), Some(false)) => format!("{r} (the builder's CPython 3.13 does NOT satisfy it)"),
            (Some(r), None) => format!("{r} (not evaluated)"),
            (None, _) => "not stated".to_owned(),
        };
        s.push_str(&format!("python: {py}\n"));
        s.push_str(&format!("tags: {}\n", w.tags.join(", ")));
        s.push_str(&format!("matrix: {} (revision {})\n", self.matrix, self.matrix_revision));
        for v in &self.systems {
            match (&v.system, &v.cell, &v.problem) {
                (None, _, _) => {
                    s.push_str(&format!("  {}: no Nix system in the matrix (not checked)\n", v.platform))
                }
                (Some(sys), Some(cell), None) => s.push_str(&format!(
                    "  {} ({sys}): {}{}\n",
                    v.platform,
                    grammar.show(cell, v.cell_0_19.as_deref().unwrap_or(cell)),
                    if v.bundle { " (bundle)" } else { " (outside the bundle)" }
                )),
                (Some(sys), _, Some(p)) => s.push_str(&format!("  {} ({sys}): MISSING: {p}\n", v.platform)),
                (Some(sys), None, None) => s.push_str(&format!("  {} ({sys}): ?\n", v.platform)),
            }
        }
        s.push_str(if self.agrees {
            "the matrix agrees with this wheel\n"
        } else {
            "the matrix does NOT agree with this wheel\n"
        });
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VERSION_PY: &str = "from typing import Optional\n\n__all__ = ['__version__']\n__version__ = '2.14.0+cu130'\ndebug = False\ncuda: Optional[str] = '13.0'\ngit_version = 'abc'\nhip: Optional[str] = None\nrocm: Optional[str] = None\nxpu: Optional[str] = None\n";

    fn facts(version_py: &str, tags: &str) -> WheelFacts {
        let metadata =
            "Metadata-Version: 2.4\nName: torch\nVersion: 2.14.0\nRequires-Python: >=3.10\n\nbody: x\n";
        facts_from("t.whl", metadata, &format!("Wheel-Version: 1.0\n{tags}"), version_py).unwrap()
    }

    #[test]
    fn version_py_values() {
        assert_eq!(py_string(VERSION_PY, "__version__").as_deref(), Some("2.14.0+cu130"));
        assert_eq!(py_string(VERSION_PY, "cuda").as_deref(), Some("13.0"));
        assert_eq!(py_string(VERSION_PY, "hip"), None);
        assert_eq!(py_string("hip = \"7.2.26015-a\"\n", "hip").as_deref(), Some("7.2.26015-a"));
    }

    #[test]
    fn requires_python() {
        assert_eq!(python_satisfies(">=3.10", (3, 13)), Some(true));
        assert_eq!(python_satisfies(">=3.11,<3.13", (3, 13)), Some(false));
        assert_eq!(python_satisfies("~=3.10", (3, 13)), None);
    }

    #[test]
    fn a_2_14_cu130_wheel_has_its_cells() {
        let f = facts(
            VERSION_PY,
            "Tag: cp313-cp313-manylinux_2_28_x86_64\nTag: cp313-cp313-manylinux_2_28_aarch64\n",
        );
        let r = check_wheel(super::super::data::matrix(), &f);
        assert!(r.agrees, "{}", r.to_text());
        let cells: Vec<_> = r.systems.iter().map(|s| s.cell.clone().unwrap()).collect();
        assert_eq!(cells, ["torch214-cxx11-cu130-x86_64-linux", "torch214-cxx11-cu130-aarch64-linux"]);
        assert!(r.systems.iter().all(|s| s.bundle));
        let cells: Vec<_> = r.systems.iter().map(|s| s.cell_0_19.clone().unwrap()).collect();
        assert_eq!(
            cells,
            [
                "torch-2.14-cxx11-cuda-13.0-cpython-3.9-abi3-x86_64-linux",
                "torch-2.14-cxx11-cuda-13.0-cpython-3.9-abi3-aarch64-linux"
            ]
        );
        let lines = |g| {
            r.to_text_named(g).lines().filter(|l| l.starts_with("  ")).map(str::to_owned).collect::<Vec<_>>()
        };
        assert_eq!(
            lines(naming::NameGrammar::Legacy),
            [
                "  manylinux_2_28_x86_64 (x86_64-linux): torch214-cxx11-cu130-x86_64-linux (bundle)",
                "  manylinux_2_28_aarch64 (aarch64-linux): torch214-cxx11-cu130-aarch64-linux (bundle)"
            ]
        );
        assert_eq!(
            lines(naming::NameGrammar::Both),
            [
                "  manylinux_2_28_x86_64 (x86_64-linux): torch214-cxx11-cu130-x86_64-linux\ttorch-2.14-cxx11-cuda-13.0-cpython-3.9-abi3-x86_64-linux (bundle)",
                "  manylinux_2_28_aarch64 (aarch64-linux): torch214-cxx11-cu130-aarch64-linux\ttorch-2.14-cxx11-cuda-13.0-cpython-3.9-abi3-aarch64-linux (bundle)"
            ]
        );
        assert_eq!(r.to_text(), r.to_text_named(naming::NameGrammar::Legacy));
    }

    #[test]
    fn a_toolkit_the_matrix_does_not_build_is_named() {
        let f = facts(&VERSION_PY.replace("2.14.0", "2.15.0"), "Tag: cp313-cp313-manylinux_2_28_x86_64\n");
        let r = check_wheel(super::super::data::matrix(), &f);
        assert!(!r.agrees);
        assert_eq!(
            r.systems[0].problem.as_deref(),
            Some("matrix 2026-12 builds torch 2.15 cuda on x86_64-linux with cuda 13.2, not 13.0")
        );
    }

    #[test]
    fn rocm_and_windows() {
        let f = facts(
            &VERSION_PY
                .replace("cuda: Optional[str] = '13.0'", "cuda: Optional[str] = None")
                .replace("hip: Optional[str] = None", "hip: Optional[str] = '7.2.53211-e7b3b5c8'"),
            "Tag: cp313-cp313-manylinux_2_28_x86_64\nTag: cp313-cp313-win_amd64\n",
        );
        assert_eq!((f.backend, f.toolkit.as_deref()), (Backend::Rocm, Some("7.2.53211-e7b3b5c8")));
        let r = check_wheel(super::super::data::matrix(), &f);
        assert_eq!(r.systems[0].cell.as_deref(), Some("torch214-cxx11-rocm72-x86_64-linux"));
        assert_eq!(
            r.systems[0].cell_0_19.as_deref(),
            Some("torch-2.14-cxx11-rocm-7.2-cpython-3.9-abi3-x86_64-linux")
        );
        assert_eq!(r.systems[1].system, None);
        assert!(r.agrees);
    }
}
