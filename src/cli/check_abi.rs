//! `kernel-builder check-abi [DIR] [--manylinux P] [--python-abi X.Y] [--torch-stable-abi V]
//! [--json]`: check the shared objects of built variants ([`crate::abi`]).

use std::process::ExitCode;

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};
use serde::Serialize;

use crate::abi::{self, AbiPolicy, AbiReport};
use crate::config::Version;

/// Arguments of `check-abi`.
///
/// Checks every `.so` and `.pyd` of each variant: the symbol versions it needs from the system
/// against a manylinux policy, its CPython symbols against the stable ABI (abi3), and, with
/// `--torch-stable-abi`, that it uses only torch's C shim. Prints one line per library with
/// the most compatible manylinux policy it meets, or its violations. Exits 1 when a rule that
/// was asked for is broken; without `--manylinux` the policy met is reported, never enforced.
/// A noarch variant (`torch-<backend>`, pure Python) has nothing to check and is reported as
/// `nothing to check: noarch variant`; any other variant without a shared object is an error
/// (exit 1), as its extension module is missing.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A kernel directory (checks every DIR/build/<variant>/; also without build.toml, as a
    /// repository downloaded from the Hub, when build/ holds variant-named directories), a
    /// build directory (every subdirectory with a metadata.json), one variant directory, or
    /// one shared object.
    /// Default: the current directory.
    pub dir: Option<Utf8PathBuf>,
    /// Enforce this manylinux policy: `2_28`, `manylinux_2_28`, `manylinux2014`, …
    #[arg(short = 'm', long, value_name = "POLICY")]
    pub manylinux: Option<String>,
    /// The oldest Python the abi3 modules must load on: 3.2 (where abi3 starts) up to the
    /// newest Python of the stable-ABI table kernel-builder carries (3.15).
    #[arg(short = 'p', long, value_name = "X.Y", default_value = "3.9", value_parser = abi3_python)]
    pub python_abi: String,
    /// Check a stable-ABI variant: no libtorch C++ symbols, and only C shim functions that
    /// exist in this torch (e.g. 2.11). Default: for `torch-stable-abi<MAJ><MIN>-…` variant
    /// directories, the version in the name; for others, no such check.
    #[arg(long, value_name = "VERSION")]
    pub torch_stable_abi: Option<String>,
    /// Print the reports as JSON on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// One variant's report, as printed by `--json`.
#[derive(Debug, Serialize)]
pub struct VariantReport {
    /// The variant directory.
    pub variant: Utf8PathBuf,
    /// [`AbiReport::manylinux_met`].
    pub manylinux_met: Option<String>,
    /// A noarch variant (`torch-<backend>`): pure Python, no shared object expected.
    pub noarch: bool,
    /// The report.
    #[serde(flatten)]
    pub report: AbiReport,
}

/// The variant directories DIR stands for (see [`Args::dir`]), sorted. A variant directory is
/// one with a `metadata.json` (as for `upload`), so `build/benchmarks/` is not one. A directory
/// without `build.toml` whose `build/` holds variant-named directories (a kernel repository
/// downloaded from the Hub) stands for those; a directory that neither is a variant nor holds
/// any is checked as a single variant.
pub fn variant_dirs(dir: &Utf8Path) -> anyhow::Result<Vec<Utf8PathBuf>> {
    super::require_dir(dir)?;
    let variants_in = |d: &Utf8Path| -> anyhow::Result<Vec<Utf8PathBuf>> {
        Ok(subdirs(d)?.into_iter().filter(|v| v.join("metadata.json").is_file()).collect())
    };
    if dir.join("build.toml").is_file() {
        let build = dir.join("build");
        anyhow::ensure!(
            build.is_dir(),
            "`{dir}` is a kernel directory without build/; build it first (kernel-builder \
             build-and-copy) or pass a variant directory"
        );
        let variants = variants_in(&build)?;
        anyhow::ensure!(
            !variants.is_empty(),
            "`{build}` has no variant directories (subdirectories with a metadata.json)"
        );
        return Ok(variants);
    }
    if dir.join("metadata.json").is_file() {
        return Ok(vec![dir.to_owned()]);
    }
    // A kernel tree without its build.toml (a repository downloaded from the Hub): the
    // variants are `DIR/build/<variant>/`, each checked by the rules its name implies.
    let build = dir.join("build");
    if build.is_dir() {
        let named: Vec<Utf8PathBuf> = subdirs(&build)?
            .into_iter()
            .filter(|v| v.file_name().is_some_and(|n| crate::matrix::naming::parse_variant_name(n).is_some()))
            .collect();
        if !named.is_empty() {
            return Ok(named);
        }
    }
    let variants = variants_in(dir)?;
    Ok(if variants.is_empty() { vec![dir.to_owned()] } else { variants })
}

fn subdirs(dir: &Utf8Path) -> anyhow::Result<Vec<Utf8PathBuf>> {
    let mut out = Vec::new();
    for entry in dir.read_dir_utf8().with_context(|| format!("cannot list `{dir}`"))? {
        let entry = entry.with_context(|| format!("cannot list `{dir}`"))?;
        if entry.file_type().with_context(|| format!("cannot stat `{}`", entry.path()))?.is_dir() {
            out.push(entry.into_path());
        }
    }
    out.sort();
    Ok(out)
}

/// `--python-abi`'s value parser: `3.Y` with `Y ≥ 2`, the Pythons that have a stable ABI
/// (CPython's abi3 starts at 3.2), up to the newest Python the vendored stable-ABI table
/// knows ([`abi::python_abi::StableAbiTable::newest`]): for a later one the check could not
/// tell which symbols it has. The error says what is accepted.
pub fn abi3_python(s: &str) -> anyhow::Result<String> {
    let (major, minor) = abi::python_abi::parse_python_version(s)?;
    let (newest_major, newest_minor) = abi::python_abi::StableAbiTable::embedded().newest().unwrap_or((3, 2));
    anyhow::ensure!(
        major == 3 && minor >= 2,
        "Python {major}.{minor} has no stable ABI (abi3 starts at Python 3.2); give 3.2 to \
         {newest_major}.{newest_minor} as 3.Y, e.g. 3.9"
    );
    anyhow::ensure!(
        (major, minor) <= (newest_major, newest_minor),
        "Python {major}.{minor} is newer than the stable ABI table kernel-builder carries (it \
         knows Python 3.2 to {newest_major}.{newest_minor}); give 3.2 to \
         {newest_major}.{newest_minor} as 3.Y, e.g. 3.9"
    );
    Ok(s.trim().to_owned())
}

/// Turn the command-line flags into an [`AbiPolicy`]; errors say which flag is wrong.
pub fn policy_of(args: &Args) -> anyhow::Result<AbiPolicy> {
    let python_abi = abi::python_abi::parse_python_version(&args.python_abi)
        .map_err(|e| anyhow::anyhow!("--python-abi: {e}"))?;
    let torch_stable_abi = args
        .torch_stable_abi
        .as_deref()
        .map(Version::parse)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--torch-stable-abi: {e}"))?;
    if let Some(m) = &args.manylinux {
        abi::policy::PolicyTable::embedded().find(m).map_err(|e| anyhow::anyhow!("--manylinux: {e}"))?;
    }
    Ok(AbiPolicy { manylinux: args.manylinux.clone(), python_abi: Some(python_abi), torch_stable_abi })
}

/// The policy for the variant in `variant_dir`: `policy`, with the torch stable-ABI target
/// taken from the directory's name (`torch-stable-abi211-…` → 2.11) when `--torch-stable-abi`
/// was not given, so a stable-ABI variant is never checked without its torch rule.
pub fn policy_for(variant_dir: &Utf8Path, policy: &AbiPolicy) -> AbiPolicy {
    let mut policy = policy.clone();
    if policy.torch_stable_abi.is_none() {
        let name = variant_dir.file_name().unwrap_or("");
        if let Some(crate::matrix::naming::ParsedVariant::StableAbi { abi, .. }) =
            crate::matrix::naming::parse_variant_name(name)
        {
            // `211`: the major version is the first digit, as the `kernels` loader reads it.
            policy.torch_stable_abi = Version::parse(&format!("{}.{}", &abi[..1], &abi[1..])).ok();
        }
    }
    policy
}

/// Whether `variant_dir` is a noarch variant by its name (`torch-cuda`, `torch-universal`, …),
/// as the `kernels` loader reads it.
pub fn is_noarch(variant_dir: &Utf8Path) -> bool {
    matches!(
        crate::matrix::naming::parse_variant_name(variant_dir.file_name().unwrap_or("")),
        Some(crate::matrix::naming::ParsedVariant::Noarch { .. })
    )
}

/// Run `check-abi`.
pub fn run(args: Args) -> super::CmdResult {
    let policy = policy_of(&args)?;
    let dir = args.dir.clone().unwrap_or_else(|| Utf8PathBuf::from("."));
    let mut reports = Vec::new();
    if dir.is_file() {
        let policy = policy_for(dir.parent().unwrap_or(Utf8Path::new("")), &policy);
        let library = abi::check_library(&dir, &policy)?;
        let report = AbiReport::new(&policy, vec![library]);
        reports.push(VariantReport {
            manylinux_met: report.manylinux_met(),
            noarch: false,
            variant: dir.clone(),
            report,
        });
    } else {
        for variant in variant_dirs(&dir)? {
            let report = abi::check_variant(&variant, &policy_for(&variant, &policy))?;
            let noarch = is_noarch(&variant);
            reports.push(VariantReport { manylinux_met: report.manylinux_met(), noarch, variant, report });
        }
    }
    // A compiled variant without its extension module would pass every rule unseen.
    let without_libraries: Vec<String> = reports
        .iter()
        .filter(|r| !r.noarch && r.report.libraries.is_empty())
        .map(|r| format!("`{}`", r.variant))
        .collect();
    let ok = reports.iter().all(|r| r.report.is_ok()) && without_libraries.is_empty();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    } else {
        for r in &reports {
            if reports.len() > 1 || r.variant != dir {
                println!("{}:", r.variant);
            }
            if r.noarch && r.report.libraries.is_empty() {
                println!("nothing to check: noarch variant (pure Python, no shared objects)");
            } else {
                print!("{}", r.report.render_text());
            }
        }
    }
    if !without_libraries.is_empty() {
        crate::printer::stderr!(
            "error: no shared objects (.so, .pyd) found under {}; a compiled variant holds its \
             kernel's extension module: rebuild it (`kernel-builder build-and-copy`), or pass a \
             directory that has one",
            without_libraries.join(", ")
        );
    }
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
