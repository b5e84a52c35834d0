//! ABI check of compiled variants: will each shared object load where the variant says it
//! does?
//!
//! Three rules, each from data vendored in `src/abi/data/` (see its README for provenance):
//! - **manylinux** ([`policy`]): every symbol version an ELF library requires from the system
//!   (`__libc_single_threaded@GLIBC_2.32`, `…@GLIBCXX_3.4.29`) must be allowed by the policy
//!   (auditwheel's table). The report also gives, per library, the most compatible policy it
//!   meets, so a native build can say what it produced without failing.
//! - **Python abi3** ([`python_abi`]): CPython symbols must be in the stable ABI, added no later
//!   than the targeted Python.
//! - **torch stable ABI** ([`torch_abi`]), for `torch-stable-abi…` variants: no libtorch C++
//!   symbols, only C shim functions that exist in the targeted torch.
//!
//! The entry points are [`check_variant`] (every `.so`/`.pyd` under a directory) and
//! [`check_library`] (one file). Nothing here panics on a malformed file: it is an error that
//! names the file.
//!
//! For a build: [`AbiReport::manylinux_met`] is the policy to record (e.g. in metadata.json);
//! when a policy was asked for, `!report.is_ok()` fails the build and
//! [`AbiReport::violations`] names each library and symbol; when none was, check against the
//! bundle's policy anyway and print the violations with [`Violation::is_manylinux`] as
//! warnings (each names the symbol, its version and the distributions it does not load on).
//!
//! ```no_run
//! # use kernel_builder::abi::{check_variant, AbiPolicy};
//! let policy = AbiPolicy { manylinux: Some("2_28".into()), ..AbiPolicy::default() };
//! let report = check_variant("build/torch211-cxx11-cpu-x86_64-linux".into(), &policy)?;
//! if !report.is_ok() {
//!     eprint!("{}", report.render_text());
//! }
//! # anyhow::Ok(())
//! ```

use std::fmt;

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};
use serde::Serialize;

use crate::config::Version;

mod elf;
mod macho;
pub mod policy;
pub mod python_abi;
pub mod torch_abi;

use policy::{PolicyTable, Verdict};

/// What to check a variant against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbiPolicy {
    /// The manylinux policy to enforce (`manylinux_2_28`, `2_28`, `2.28`, `manylinux2014`).
    /// `None`: enforce none, only report the policy met.
    pub manylinux: Option<String>,
    /// The oldest Python the abi3 libraries must load on; `None` skips the abi3 check.
    /// Default `(3, 9)`, as upstream.
    pub python_abi: Option<(u32, u32)>,
    /// For stable-ABI variants: the oldest torch they target (e.g. 2.11). `None` skips the
    /// torch rule.
    pub torch_stable_abi: Option<Version>,
}

impl Default for AbiPolicy {
    fn default() -> Self {
        AbiPolicy { manylinux: None, python_abi: Some((3, 9)), torch_stable_abi: None }
    }
}

impl AbiPolicy {
    /// The full name of the manylinux policy asked for (`2_28` → `manylinux_2_28`); `None`
    /// when none is, or the name is unknown.
    pub fn manylinux_policy_name(&self) -> Option<String> {
        self.manylinux_policy().ok().flatten().map(|p| p.name.clone())
    }

    /// The manylinux policy asked for, looked up in the table (error: unknown name, listing
    /// the known ones).
    fn manylinux_policy(&self) -> anyhow::Result<Option<&'static policy::Policy>> {
        match &self.manylinux {
            None => Ok(None),
            Some(name) => PolicyTable::embedded().find(name).map(Some),
        }
    }
}

/// What a shared object is, as read from its headers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum BinaryFormat {
    /// ELF, with auditwheel's architecture name (`x86_64`, `aarch64`, …).
    Elf { arch: String },
    /// Mach-O (macOS); manylinux does not apply.
    MachO { arch: String },
}

impl fmt::Display for BinaryFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BinaryFormat::Elf { arch } => write!(f, "ELF {arch}"),
            BinaryFormat::MachO { arch } => write!(f, "Mach-O {arch}"),
        }
    }
}

/// What a shared object needs from the process that loads it.
#[derive(Debug, Clone)]
pub(crate) struct Binary {
    pub format: BinaryFormat,
    /// Undefined dynamic symbols (Mach-O: without the leading `_`).
    pub undefined: Vec<UndefinedSymbol>,
    /// ELF `.gnu.version_r`: every (library, version) the dynamic loader will insist on.
    pub version_needs: Vec<VersionNeed>,
}

/// An undefined dynamic symbol.
#[derive(Debug, Clone)]
pub(crate) struct UndefinedSymbol {
    pub name: String,
    /// The version it binds to (`GLIBC_2.32`), if versioned.
    pub version: Option<String>,
    /// The library that version is required from (`libc.so.6`).
    pub version_file: Option<String>,
}

/// One version requirement: `file` (e.g. `libc.so.6`) must define `version`.
#[derive(Debug, Clone)]
pub(crate) struct VersionNeed {
    pub file: String,
    pub version: String,
}

/// Read a shared object from bytes. ELF (32/64-bit) and thin Mach-O are read; anything else is
/// an error saying what the file is.
pub(crate) fn read_binary(data: &[u8]) -> anyhow::Result<Binary> {
    use object::FileKind;
    let Ok(kind) = FileKind::parse(data) else {
        if data.starts_with(b"MZ") {
            // `object` is built without PE support: Windows is not a target of the matrix.
            anyhow::bail!("a Windows PE file: only ELF and Mach-O shared objects are checked");
        }
        anyhow::bail!("not a shared object (neither ELF nor Mach-O: unknown file format)");
    };
    let read = match kind {
        FileKind::Elf32 => elf::read_elf::<object::elf::FileHeader32<object::Endianness>>(data),
        FileKind::Elf64 => elf::read_elf::<object::elf::FileHeader64<object::Endianness>>(data),
        FileKind::MachO32 | FileKind::MachO64 => macho::read_macho(data),
        other => anyhow::bail!(
            "unsupported file format {other:?}: only ELF and thin Mach-O shared objects are checked"
        ),
    };
    read.with_context(|| format!("malformed {kind:?} file"))
}

/// A versioned reference that a manylinux policy governs, explained.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VersionRequirement {
    /// The symbol (`__libc_single_threaded`); `None` for a requirement in `.gnu.version_r`
    /// that no symbol uses (the loader checks it all the same).
    pub symbol: Option<String>,
    /// Its demangled form, for C++ symbols (`std::to_chars(char*, char*, double)`).
    pub demangled: Option<String>,
    /// The version (`GLIBC_2.32`).
    pub version: String,
    /// The library that must provide it (`libc.so.6`).
    pub library: String,
    /// The oldest policy that allows it; `None` when no policy does (`GLIBC_PRIVATE`, or
    /// newer than the table).
    pub first_policy: Option<String>,
    /// The glibc a system needs for it (see [`PolicyTable::needed_glibc`]).
    pub needs_glibc: Option<String>,
    /// Distributions of the built-in table it does not load on, newest first.
    pub not_on: Vec<String>,
}

impl VersionRequirement {
    fn symbol_at_version(&self) -> String {
        match &self.symbol {
            Some(s) => format!("{s}@{}", self.version),
            None => format!("{} (required, no symbol uses it)", self.version),
        }
    }
}

impl VersionRequirement {
    /// What follows the symbol in messages: `: needs manylinux_2_34 (glibc ≥ 2.32), so it
    /// does not load on …`.
    fn consequence(&self) -> String {
        let mut s = match (&self.first_policy, &self.needs_glibc) {
            (Some(p), Some(g)) => format!(": needs {p} (glibc ≥ {g})"),
            (Some(p), None) => format!(": needs {p}"),
            (None, _) => ": allowed by no manylinux policy".to_owned(),
        };
        if !self.not_on.is_empty() {
            s.push_str(&format!(", so it does not load on {}", self.not_on.join(", ")));
        }
        s
    }
}

impl fmt::Display for VersionRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} from {}", self.symbol_at_version(), self.library)?;
        if let Some(d) = &self.demangled {
            write!(f, " [{d}]")?;
        }
        f.write_str(&self.consequence())
    }
}

/// One rule broken by one library.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Violation {
    /// A symbol version the requested manylinux policy does not allow.
    SymbolVersion {
        /// The requested policy (`manylinux_2_28`).
        policy: String,
        #[serde(flatten)]
        requirement: VersionRequirement,
    },
    /// The requested policy has no entry for the library's architecture.
    ArchNotInPolicy { policy: String, arch: String },
    /// A CPython symbol outside the stable ABI.
    NotAbi3 { symbol: String },
    /// A stable-ABI symbol added after the targeted Python.
    PythonAbiTooNew { symbol: String, added: String, python_abi: String },
    /// A libtorch C++ symbol in a stable-ABI library.
    TorchCxxSymbol { symbol: String, demangled: String },
    /// A C shim function added after the targeted torch.
    TorchShimTooNew { symbol: String, added: String, torch_stable_abi: String },
}

impl Violation {
    /// Whether this is a manylinux violation ([`Violation::SymbolVersion`],
    /// [`Violation::ArchNotInPolicy`]). A native build that was not asked for a policy can
    /// check against the bundle's policy and print these as warnings, failing only on the
    /// others.
    pub fn is_manylinux(&self) -> bool {
        matches!(self, Violation::SymbolVersion { .. } | Violation::ArchNotInPolicy { .. })
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::SymbolVersion { policy, requirement } => {
                write!(f, "not {policy}: {requirement}")
            }
            Violation::ArchNotInPolicy { policy, arch } => {
                write!(f, "{policy} has no symbol list for {arch}")
            }
            Violation::NotAbi3 { symbol } => {
                write!(f, "not abi3: {symbol} is not in the CPython stable ABI")
            }
            Violation::PythonAbiTooNew { symbol, added, python_abi } => {
                write!(f, "Python {python_abi} abi3: {symbol} joined the stable ABI in Python {added}")
            }
            Violation::TorchCxxSymbol { symbol, demangled } => write!(
                f,
                "torch stable ABI: {symbol} [{demangled}] is a libtorch C++ symbol; use the C \
                 shim or torch::stable"
            ),
            Violation::TorchShimTooNew { symbol, added, torch_stable_abi } => write!(
                f,
                "torch stable ABI {torch_stable_abi}: {symbol} was added to the C shim in torch \
                 {added}"
            ),
        }
    }
}

/// The check of one shared object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LibraryReport {
    /// The file, as found under the checked directory.
    pub path: Utf8PathBuf,
    /// ELF or Mach-O, and the architecture.
    pub format: BinaryFormat,
    /// The most compatible manylinux policy (oldest glibc) whose symbol versions cover every
    /// version the library requires. `None` for Mach-O, for an architecture the table lacks,
    /// and when no policy allows some requirement.
    pub manylinux: Option<String>,
    /// The requirements that keep the library from the next older policy, i.e. the symbols
    /// to remove to do better (empty when it meets the oldest policy or is not ELF).
    pub limited_by: Vec<VersionRequirement>,
    /// Broken rules, in the order: manylinux, Python, torch; sorted within each.
    pub violations: Vec<Violation>,
}

/// The check of every shared object of a variant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AbiReport {
    /// The manylinux policy that was enforced, by its full name, if any.
    pub manylinux_policy: Option<String>,
    /// The Python the abi3 check targeted (`3.9`), if it ran.
    pub python_abi: Option<String>,
    /// The torch the stable-ABI check targeted (`2.11`), if it ran.
    pub torch_stable_abi: Option<String>,
    /// One entry per library, sorted by path.
    pub libraries: Vec<LibraryReport>,
}

impl AbiReport {
    /// A report of `libraries` (sorted here) checked under `policy`.
    pub fn new(policy: &AbiPolicy, mut libraries: Vec<LibraryReport>) -> AbiReport {
        libraries.sort_by(|a, b| a.path.cmp(&b.path));
        AbiReport {
            manylinux_policy: policy.manylinux_policy_name(),
            python_abi: policy.python_abi.map(|(a, b)| format!("{a}.{b}")),
            torch_stable_abi: policy.torch_stable_abi.as_ref().map(|v| v.to_string()),
            libraries,
        }
    }

    /// The policy the whole variant meets: the least compatible of its ELF libraries' policies.
    /// `None` when it has no ELF library or one of them meets no policy.
    pub fn manylinux_met(&self) -> Option<String> {
        let table = PolicyTable::embedded();
        let mut worst: Option<&policy::Policy> = None;
        let mut any = false;
        for lib in &self.libraries {
            if !matches!(lib.format, BinaryFormat::Elf { .. }) {
                continue;
            }
            any = true;
            let p = table.find(lib.manylinux.as_deref()?).ok()?;
            if worst.is_none_or(|w| p.glibc > w.glibc) {
                worst = Some(p);
            }
        }
        if !any {
            return None;
        }
        worst.map(|p| p.name.clone())
    }

    /// No library breaks any rule that was asked for.
    pub fn is_ok(&self) -> bool {
        self.libraries.iter().all(|l| l.violations.is_empty())
    }

    /// Every violation with the library it is in.
    pub fn violations(&self) -> impl Iterator<Item = (&Utf8Path, &Violation)> {
        self.libraries.iter().flat_map(|l| l.violations.iter().map(move |v| (l.path.as_path(), v)))
    }

    /// The text report: per library a line with the policy met (or the violations, indented
    /// below), then one summary line.
    pub fn render_text(&self) -> String {
        let mut s = String::new();
        for lib in &self.libraries {
            let met = match (&lib.format, &lib.manylinux) {
                (BinaryFormat::MachO { .. }, _) => "manylinux does not apply".to_owned(),
                (_, Some(p)) => format!("meets {p}"),
                (_, None) => "meets no manylinux policy".to_owned(),
            };
            let verdict = if lib.violations.is_empty() { "ok" } else { "FAILED" };
            s.push_str(&format!("{}: {verdict} ({}, {met})\n", lib.path, lib.format));
            // Symbol-version violations, one line per (policy, version, library).
            let mut by_version: Vec<(&str, Vec<&VersionRequirement>)> = Vec::new();
            for v in &lib.violations {
                match v {
                    Violation::SymbolVersion { policy, requirement } => {
                        match by_version
                            .iter_mut()
                            .find(|(p, rs)| *p == policy.as_str() && same_need(rs[0], requirement))
                        {
                            Some((_, rs)) => rs.push(requirement),
                            None => by_version.push((policy.as_str(), vec![requirement])),
                        }
                    }
                    other => s.push_str(&format!("  - {other}\n")),
                }
            }
            for (policy, rs) in &by_version {
                s.push_str(&format!("  - not {policy}: {}\n", summarize(rs)));
            }
            if lib.violations.is_empty() {
                let mut groups: Vec<Vec<&VersionRequirement>> = Vec::new();
                for r in &lib.limited_by {
                    match groups.iter_mut().find(|g| same_need(g[0], r)) {
                        Some(g) => g.push(r),
                        None => groups.push(vec![r]),
                    }
                }
                for g in &groups {
                    s.push_str(&format!("  limited by {}\n", summarize(g)));
                }
            }
        }
        let n = self.violations().count();
        let libs = self.libraries.len();
        let plural = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        if self.libraries.is_empty() {
            s.push_str("no shared objects (.so, .pyd) found\n");
        } else if n == 0 {
            let met = self.manylinux_met().unwrap_or_else(|| "no manylinux policy".to_owned());
            let torch = match &self.torch_stable_abi {
                Some(v) => format!(" and the torch stable ABI {v} (C shim only)"),
                None => String::new(),
            };
            s.push_str(&format!(
                "ABI check passed: {}, variant meets {met}{torch}\n",
                plural(libs, "library", "libraries")
            ));
        } else {
            let failing = self.libraries.iter().filter(|l| !l.violations.is_empty()).count();
            s.push_str(&format!(
                "ABI check failed: {} in {} of {}\n",
                plural(n, "violation", "violations"),
                plural(failing, "library", "libraries"),
                libs
            ));
        }
        s
    }
}

/// Whether two requirements are the same (version, library) need.
fn same_need(a: &VersionRequirement, b: &VersionRequirement) -> bool {
    a.version == b.version && a.library == b.library
}

/// One line for the requirements of one (version, library): the requirement itself when one
/// symbol uses it, else the version with a count and the first three symbols (demangled when
/// C++), then the policy and distributions, e.g. `GLIBCXX_3.4.21 from libstdc++.so.6, used by
/// 46 symbols (std::logic_error::logic_error(…), …, and 43 more): needs manylinux_2_24 …`.
fn summarize(rs: &[&VersionRequirement]) -> String {
    if rs.len() == 1 {
        return rs[0].to_string();
    }
    let first = rs[0];
    let shown: Vec<&str> =
        rs.iter().take(3).map(|r| r.demangled.as_deref().or(r.symbol.as_deref()).unwrap_or("?")).collect();
    let more = if rs.len() > 3 { format!(", and {} more", rs.len() - 3) } else { String::new() };
    // The consequence is the same for every member of the group.
    format!(
        "{} from {}, used by {} symbols ({}{more}){}",
        first.version,
        first.library,
        rs.len(),
        shown.join(", "),
        first.consequence()
    )
}

/// One line for all the symbol-version violations of one library, or `None` when it has none:
/// the policy it misses, the highest policy its symbols need (with the glibc) and how many
/// symbols need that one (the first three named), how many miss the policy in all, and the
/// distributions it does not load on, e.g. `not manylinux_2_28: 2 symbols need manylinux_2_34,
/// glibc ≥ 2.34 (GLIBC_2.34 from libc.so.6: …), 5 past manylinux_2_28 in all; so it does not
/// load on …`. A
/// library built on a new distribution needs dozens of versioned symbols; one line each would
/// bury the one fact that matters, the oldest glibc it loads on.
pub fn summarize_symbol_versions(violations: &[Violation]) -> Option<String> {
    let mut policy_name = None;
    let mut rs: Vec<&VersionRequirement> = Vec::new();
    for v in violations {
        if let Violation::SymbolVersion { policy, requirement } = v {
            policy_name = Some(policy.as_str());
            rs.push(requirement);
        }
    }
    let policy_name = policy_name?;
    // The highest need: a requirement no policy allows (GLIBC_PRIVATE, newer than the table)
    // above all, then by the oldest policy allowing it, then by the glibc it needs (2.32 and
    // 2.34 both first fit manylinux_2_34).
    let table = PolicyTable::embedded();
    let rank = |r: &VersionRequirement| {
        let policy = r.first_policy.as_deref().and_then(|p| table.find(p).ok()).map(|p| p.glibc.clone());
        let glibc = r.needs_glibc.as_deref().and_then(|g| crate::config::Version::parse(g).ok());
        (policy.is_none(), policy, glibc)
    };
    let highest = rs.iter().map(|r| rank(r)).max()?;
    let top: Vec<&VersionRequirement> = rs.iter().copied().filter(|r| rank(r) == highest).collect();
    let first = top[0];
    let plural = top.len() != 1;
    let need = match (&first.first_policy, &first.needs_glibc) {
        (Some(p), Some(g)) => format!("{} {p}, glibc ≥ {g}", if plural { "need" } else { "needs" }),
        (Some(p), None) => format!("{} {p}", if plural { "need" } else { "needs" }),
        (None, _) => format!("{} allowed by no manylinux policy", if plural { "are" } else { "is" }),
    };
    // The versions of the highest need, each with its first symbols.
    let mut by_version: Vec<Vec<&VersionRequirement>> = Vec::new();
    for r in &top {
        match by_version.iter_mut().find(|g| same_need(g[0], r)) {
            Some(g) => g.push(r),
            None => by_version.push(vec![r]),
        }
    }
    let versions: Vec<String> = by_version
        .iter()
        .map(|g| {
            let names: Vec<&str> = g
                .iter()
                .take(3)
                .map(|r| r.demangled.as_deref().or(r.symbol.as_deref()).unwrap_or("(no symbol)"))
                .collect();
            let more = if g.len() > 3 { format!(", and {} more", g.len() - 3) } else { String::new() };
            format!("{} from {}: {}{more}", g[0].version, g[0].library, names.join(", "))
        })
        .collect();
    let symbols = |n: usize| if n == 1 { "1 symbol".to_owned() } else { format!("{n} symbols") };
    let mut s = format!("not {policy_name}: {} {need} ({})", symbols(top.len()), versions.join("; "));
    if rs.len() > top.len() {
        s.push_str(&format!(", {} past {policy_name} in all", rs.len()));
    }
    if !first.not_on.is_empty() {
        s.push_str(&format!("; so it does not load on {}", first.not_on.join(", ")));
    }
    Some(s)
}

/// Check every `.so` and `.pyd` file under `variant_dir` (recursively, symlinks not followed).
///
/// Errors: an unknown manylinux policy name (before any file is read), a directory that cannot
/// be walked, and any library that cannot be read or parsed (naming it).
pub fn check_variant(variant_dir: &Utf8Path, policy: &AbiPolicy) -> anyhow::Result<AbiReport> {
    let requested = policy.manylinux_policy()?;
    anyhow::ensure!(variant_dir.is_dir(), "`{variant_dir}` is not a directory");
    let mut paths = Vec::new();
    for entry in walkdir::WalkDir::new(variant_dir).sort_by_file_name() {
        let entry = entry.with_context(|| format!("cannot list `{variant_dir}`"))?;
        if !entry.file_type().is_file() {
            continue;
        }
        let path = Utf8PathBuf::from_path_buf(entry.into_path())
            .map_err(|p| anyhow::anyhow!("`{}` is not a UTF-8 path; rename it", p.display()))?;
        if matches!(path.extension(), Some("so" | "pyd")) {
            paths.push(path);
        }
    }
    paths.sort();
    let libraries =
        paths.iter().map(|p| check_library_with(p, requested, policy)).collect::<anyhow::Result<Vec<_>>>()?;
    Ok(AbiReport::new(policy, libraries))
}

/// Check one shared object. Errors name the file: unreadable, not ELF/Mach-O, malformed.
pub fn check_library(path: &Utf8Path, policy: &AbiPolicy) -> anyhow::Result<LibraryReport> {
    check_library_with(path, policy.manylinux_policy()?, policy)
}

fn check_library_with(
    path: &Utf8Path,
    requested: Option<&policy::Policy>,
    policy: &AbiPolicy,
) -> anyhow::Result<LibraryReport> {
    let data = std::fs::read(path).with_context(|| format!("cannot read `{path}`"))?;
    // One line naming the file, as `check-abi` prints it (its cause after a colon).
    let binary = read_binary(&data).map_err(|e| anyhow::anyhow!("`{path}`: {e:#}"))?;
    Ok(judge(path.to_owned(), &binary, requested, policy))
}

/// Apply the rules to what was read.
fn judge(
    path: Utf8PathBuf,
    binary: &Binary,
    requested: Option<&policy::Policy>,
    policy: &AbiPolicy,
) -> LibraryReport {
    let table = PolicyTable::embedded();
    let mut violations = Vec::new();
    let (mut manylinux, mut limited_by) = (None, Vec::new());

    if let BinaryFormat::Elf { arch } = &binary.format {
        let requirements = requirements(table, arch, binary);
        let best = table.policies().iter().find(|p| {
            p.covers(arch) && requirements.iter().all(|r| p.verdict(arch, &r.version) == Verdict::Allowed)
        });
        if let Some(best) = best {
            manylinux = Some(best.name.clone());
            // What rules out the next older policy for this architecture.
            let older = table.policies().iter().rev().find(|p| p.glibc < best.glibc && p.covers(arch));
            if let Some(older) = older {
                limited_by = requirements
                    .iter()
                    .filter(|r| older.verdict(arch, &r.version) == Verdict::Refused)
                    .cloned()
                    .collect();
            }
        } else {
            limited_by = requirements.iter().filter(|r| r.first_policy.is_none()).cloned().collect();
        }
        if let Some(req) = requested {
            if !req.covers(arch) {
                violations.push(Violation::ArchNotInPolicy { policy: req.name.clone(), arch: arch.clone() });
            } else {
                for r in &requirements {
                    if req.verdict(arch, &r.version) == Verdict::Refused {
                        violations.push(Violation::SymbolVersion {
                            policy: req.name.clone(),
                            requirement: r.clone(),
                        });
                    }
                }
            }
        }
    }

    let mut names: Vec<&str> = binary.undefined.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    if let Some(target) = policy.python_abi {
        for name in &names {
            match python_abi::judge(name, target) {
                python_abi::PythonVerdict::Fine => {}
                python_abi::PythonVerdict::NotAbi3 => {
                    violations.push(Violation::NotAbi3 { symbol: (*name).to_owned() })
                }
                python_abi::PythonVerdict::TooNew { added } => violations.push(Violation::PythonAbiTooNew {
                    symbol: (*name).to_owned(),
                    added: format!("{}.{}", added.0, added.1),
                    python_abi: format!("{}.{}", target.0, target.1),
                }),
            }
        }
    }
    if let Some(target) = &policy.torch_stable_abi {
        for name in &names {
            match torch_abi::judge(name, target) {
                torch_abi::TorchVerdict::Fine => {}
                torch_abi::TorchVerdict::CxxSymbol { demangled } => {
                    violations.push(Violation::TorchCxxSymbol { symbol: (*name).to_owned(), demangled })
                }
                torch_abi::TorchVerdict::ShimTooNew { added } => {
                    violations.push(Violation::TorchShimTooNew {
                        symbol: (*name).to_owned(),
                        added: added.to_string(),
                        torch_stable_abi: target.to_string(),
                    })
                }
            }
        }
    }

    LibraryReport { path, format: binary.format.clone(), manylinux, limited_by, violations }
}

/// Every version requirement of an ELF binary that the policy table governs, each with the
/// symbols that use it (one entry per symbol; one entry with `symbol: None` for a requirement
/// no symbol uses). Sorted by version, library, symbol. The dynamic loader's own file
/// (`ld-linux…`) is included: unlike auditwheel, which skips it, a too-new version there stops
/// the library from loading just the same.
fn requirements(table: &PolicyTable, arch: &str, binary: &Binary) -> Vec<VersionRequirement> {
    let mut out = Vec::new();
    for need in &binary.version_needs {
        if !table.governs(arch, &need.version) {
            continue;
        }
        let first_policy = table.first_allowing(arch, &need.version);
        let needs_glibc = table.needed_glibc(arch, &need.version);
        let not_on = needs_glibc.as_ref().map(policy::distributions_without).unwrap_or_default();
        let make = |symbol: Option<&str>| VersionRequirement {
            symbol: symbol.map(str::to_owned),
            demangled: symbol.and_then(torch_abi::demangle_full),
            version: need.version.clone(),
            library: need.file.clone(),
            first_policy: first_policy.map(|p| p.name.clone()),
            needs_glibc: needs_glibc.as_ref().map(|v| v.to_string()),
            not_on: not_on.clone(),
        };
        let mut users: Vec<&str> = binary
            .undefined
            .iter()
            .filter(|s| {
                s.version.as_deref() == Some(need.version.as_str())
                    && s.version_file.as_deref() == Some(need.file.as_str())
            })
            .map(|s| s.name.as_str())
            .collect();
        users.sort_unstable();
        users.dedup();
        if users.is_empty() {
            out.push(make(None));
        } else {
            out.extend(users.into_iter().map(|u| make(Some(u))));
        }
    }
    out.sort_by(|a, b| (&a.version, &a.library, &a.symbol).cmp(&(&b.version, &b.library, &b.symbol)));
    out.dedup();
    out
}

#[cfg(test)]
mod tests;
