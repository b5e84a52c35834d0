//! Pre-tuning Helion kernels on the GPU they will run on (`kernel-builder tune`).
//!
//! The search itself is Helion's: its AOT runner (`python -m helion.autotuner.aot_runner`)
//! runs the kernel's bench script once per phase (collect: autotune every distinct call;
//! measure: time every tuned config on every call; build: pick a config subset that meets the
//! goal and fit a decision tree) and writes `_helion_aot_<source stem>_<kind>_<compute>.py`
//! next to the kernel's source file. This module drives it so that a user's tree never holds a
//! half-made result:
//!
//! 1. [`probe`] the Python that will tune: torch, helion and triton importable, a GPU visible;
//!    its versions, driver and device become the heuristic's provenance header.
//! 2. Copy the kernel directory (without `build/` and `tuning/`) into a scratch directory and
//!    run the runner's phases there, one at a time, so that the header can list the shapes the
//!    collect phase saw.
//! 3. Time, per shape, the config the heuristic picks against Helion's default config
//!    (`measure.py`, run with `HELION_AOT_MODE=evaluate`).
//! 4. Only then write into the kernel directory: the records under
//!    `tuning/<kind>_<compute>/` (swapped in whole), then each heuristic file (written to a
//!    temporary file beside it and renamed). An error or an interrupt before that point leaves
//!    the directory exactly as it was.

pub mod card;
pub mod lint;
pub mod lookup;
mod report;
mod run;

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};
use serde::{Deserialize, Serialize};

pub use report::{describe_features, ShapeRow, TuneReport};
use run::{Finished, Runner};

/// The environment probe, run by the tuning Python (prints one JSON object).
const PROBE_PY: &str = include_str!("probe.py");
/// The per-shape timing harness (see its docstring).
const MEASURE_PY: &str = include_str!("measure.py");

/// What the config subset must achieve on the tuned shapes, as the runner's `--goal`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Goal {
    /// No tuned shape slower than `threshold` times its own best config.
    #[value(name = "max_slowdown")]
    MaxSlowdown,
    /// The geometric mean of the slowdowns at most `threshold`.
    #[value(name = "geomean_slowdown")]
    GeomeanSlowdown,
    /// The arithmetic mean of the slowdowns at most `threshold`.
    #[value(name = "avg_slowdown")]
    AvgSlowdown,
}

impl Goal {
    /// The runner's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Goal::MaxSlowdown => "max_slowdown",
            Goal::GeomeanSlowdown => "geomean_slowdown",
            Goal::AvgSlowdown => "avg_slowdown",
        }
    }
}

/// How hard Helion's autotuner searches each shape (`HELION_AUTOTUNE_EFFORT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Effort {
    /// Small populations seeded from known-good configs: about a minute per shape.
    Quick,
    /// Helion's default search: often ten minutes or more per shape.
    Full,
}

impl Effort {
    /// The value of `HELION_AUTOTUNE_EFFORT`.
    pub fn as_str(self) -> &'static str {
        match self {
            Effort::Quick => "quick",
            Effort::Full => "full",
        }
    }
}

/// Everything `tune` needs, resolved by the CLI.
#[derive(Debug, Clone)]
pub struct Options {
    /// The kernel directory (holds build.toml and `torch-ext/<package>/`).
    pub dir: Utf8PathBuf,
    /// The Python package name (`general.python_name()`).
    pub package: String,
    /// The bench script; must lie inside `dir` (it is run from a copy of `dir`).
    pub bench: Utf8PathBuf,
    /// Arguments for the bench script.
    pub bench_args: Vec<String>,
    /// Tune only these kernels (function names; the runner's `-k`). Empty: all.
    pub kernels: Vec<String>,
    /// The runner's `--goal`.
    pub goal: Goal,
    /// The runner's `--threshold` (a slowdown factor, e.g. 1.01).
    pub threshold: f64,
    /// The runner's `--max-configs`; `None` keeps Helion's default (10).
    pub max_configs: Option<u32>,
    /// `HELION_AUTOTUNE_EFFORT`.
    pub effort: Effort,
    /// The Python that has torch, triton and helion (a name on PATH or a path).
    pub python: String,
    /// The command line as the user typed it, for the provenance header.
    pub command_line: String,
    /// Start from nothing instead of the configs the last tune of this GPU kind recorded
    /// (`tuning/<kind>_<compute>/tuned_configs.json`, or Helion's own
    /// `tuning/tuned_configs_<hardware id>.json`; see `earlier_records_file`).
    pub fresh: bool,
    /// Search every shape the bench run calls again, recorded or not, and keep the records of
    /// the shapes it does not call (after the kernel's seeds or search space changed). Ignored
    /// with `fresh`, which keeps nothing.
    pub retune: bool,
}

/// Why `tune` stopped. Every variant means the kernel directory was left unchanged.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    /// `--bench` (or DIR/bench.py) is missing.
    #[error(
        "bench script `{0}` does not exist: pass --bench FILE, or write the calls to tune for \
         in DIR/bench.py (`kernel-builder init --template helion` writes one)"
    )]
    BenchMissing(Utf8PathBuf),
    /// The bench script is outside the kernel directory.
    #[error(
        "bench script `{bench}` is not inside the kernel directory `{dir}`: tune runs it from a \
         scratch copy of that directory, so move it there"
    )]
    BenchOutsideDir { bench: Utf8PathBuf, dir: Utf8PathBuf },
    /// The bench script is in a part of the kernel directory the scratch copy leaves out.
    #[error(
        "bench script `{bench}` is under `{top}/`, which tune does not copy into its scratch \
         directory (build outputs and tuning records are left out): keep the bench script beside \
         build.toml or in a directory of its own"
    )]
    BenchInSkipped { bench: Utf8PathBuf, top: String },
    /// No `torch-ext/<package>/`.
    #[error(
        "`{0}` does not exist: a Helion kernel's source lives in torch-ext/<python name>/, and \
         the heuristic files go next to it"
    )]
    NoPackage(Utf8PathBuf),
    /// The Python could not be started or its probe crashed.
    #[error("cannot run `{python}` to probe the tuning environment: {detail}")]
    PythonNotRunnable { python: String, detail: String },
    /// A package the runner needs is not importable.
    #[error("`{python}` cannot import {package}: {detail}")]
    MissingPackage { python: String, package: &'static str, detail: String, hint: &'static str },
    /// No GPU visible.
    #[error("no GPU: {detail}")]
    NoGpu { detail: String },
    /// The collect phase recorded nothing.
    #[error(
        "the bench script `{bench}` called no Helion kernel{filter}: the collect phase recorded \
         no configuration"
    )]
    NoKernelCalled { bench: String, filter: String },
    /// The bench script exited non-zero.
    #[error("the bench script failed in the {phase} phase (exit status {code}); its last lines:\n{tail}")]
    BenchFailed { phase: &'static str, code: i32, tail: String },
    /// SIGINT/SIGTERM during a phase.
    #[error(
        "tuning was interrupted ({how}) in the {phase} phase; `{dir}` is unchanged (an earlier \
         heuristic there stays as it was)"
    )]
    Interrupted {
        phase: &'static str,
        how: String,
        dir: Utf8PathBuf,
        /// The signal that stopped the run (the command exits with 128 + it, as a build does).
        signal: i32,
    },
    /// The runner failed for another reason.
    #[error("Helion's AOT runner failed in the {phase} phase ({status}); its last lines:\n{tail}")]
    RunnerFailed { phase: &'static str, status: String, tail: String },
    /// The build phase finished without writing a heuristic next to the source.
    #[error(
        "Helion's AOT runner wrote no heuristic file `_helion_aot_*_{kind}_{compute}.py` next to \
         the kernel source; its last lines:\n{tail}"
    )]
    NoHeuristic { kind: String, compute: String, tail: String },
    /// The new heuristic lacks kernels the installed one has (the bench run did not call them).
    #[error(
        "the new heuristic would drop {dropped}, which the installed heuristic tunes: the bench \
         run called only {called}, and Helion's runner writes heuristics for the kernels a run \
         calls; `{dir}` is unchanged\n  hint: include shapes that call the dropped kernels in the \
         run (shapes recorded in tuning/ are not searched again), or pass --fresh to replace the \
         heuristic with this run's kernels only"
    )]
    WouldDropKernels { dropped: String, called: String, dir: Utf8PathBuf },
}

impl crate::error::Diagnostic for TuneError {
    /// A Python, package or GPU that is missing is the toolchain's; a signal's stop exits as an
    /// interrupted build does (128 + signal).
    fn kind(&self) -> crate::error::Kind {
        use crate::error::Kind;
        match self {
            TuneError::PythonNotRunnable { .. }
            | TuneError::MissingPackage { .. }
            | TuneError::NoGpu { .. } => Kind::Toolchain,
            TuneError::Interrupted { signal, .. } => Kind::Interrupted { signal: *signal },
            _ => Kind::Failed,
        }
    }

    fn hints(&self) -> Vec<String> {
        let hint = match self {
            TuneError::PythonNotRunnable { .. } => "pass --python PATH (or set KERNEL_BUILDER_PYTHON) to a Python \
                 that has torch, triton and helion"
                .to_owned(),
            TuneError::MissingPackage { hint, .. } => format!(
                "install it into that Python ({hint}), or pass --python PATH to one that has torch, triton and helion"
            ),
            TuneError::NoGpu { .. } => {
                "Helion tunes on the GPU it measures; run `tune` on a machine with the GPU you are tuning for".to_owned()
            }
            TuneError::NoKernelCalled { bench, .. } => format!(
                "the script must call the kernel (an `@helion.aot_kernel` or `@helion.kernel` function) with the \
                 shapes to tune for when run as `python {bench}`"
            ),
            _ => return Vec::new(),
        };
        vec![hint]
    }
}

/// What [`probe`] found: the versions and device that tuning runs on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Environment {
    /// Python version (`3.12.3`).
    pub python: String,
    /// `torch.__version__`.
    pub torch: String,
    /// triton's distribution version.
    pub triton: String,
    /// helion's distribution version.
    pub helion: String,
    /// `torch.version.cuda` (or HIP's version).
    pub cuda: String,
    /// The NVIDIA driver version (`unknown` where nvidia-smi does not answer).
    pub driver: String,
    /// `torch.cuda.get_device_name()`.
    pub device_name: String,
    /// Helion's device kind (`cuda`, `rocm`, `xpu`).
    pub device_kind: String,
    /// Helion's compute id (`sm90`, `gfx942`).
    pub compute: String,
    /// Helion's hardware id, the suffix of the runner's record files.
    pub hardware_id: String,
    /// When the probe ran, `YYYY-MM-DD HH:MM:SS` UTC.
    pub utc: String,
}

#[derive(Deserialize)]
struct ProbeOutput {
    ok: bool,
    problem: Option<String>,
    detail: Option<String>,
    #[serde(flatten)]
    env: Option<Environment>,
}

/// Run the probe with `python`: torch, helion and triton importable and a GPU visible.
///
/// # Errors
/// [`TuneError::PythonNotRunnable`], [`TuneError::MissingPackage`], [`TuneError::NoGpu`].
pub fn probe(python: &str, scratch: &Utf8Path) -> anyhow::Result<Environment> {
    let script = scratch.join("kb_probe.py");
    crate::fsutil::write_atomic(&script, PROBE_PY.as_bytes())?;
    let out = crate::process::Cmd::new(python).arg(script.as_str()).output().map_err(|e| {
        TuneError::PythonNotRunnable {
            python: python.into(),
            detail: std::error::Error::source(&e).map(ToString::to_string).unwrap_or_default(),
        }
    })?;
    let parsed: Option<ProbeOutput> =
        out.stdout.lines().rev().find_map(|l| serde_json::from_str(l.trim()).ok());
    let Some(parsed) = parsed.filter(|_| out.success()) else {
        return Err(TuneError::PythonNotRunnable {
            python: python.into(),
            detail: format!(
                "the probe exited with {} and printed no result\n--- stdout\n{}--- stderr\n{}",
                out.status, out.stdout, out.stderr
            ),
        }
        .into());
    };
    let detail = parsed.detail.clone().unwrap_or_default();
    if !parsed.ok {
        let missing = |package, hint| TuneError::MissingPackage {
            python: python.into(),
            package,
            detail: detail.clone(),
            hint,
        };
        return Err(match parsed.problem.as_deref() {
            Some("no-torch") => missing("torch", "pip install torch"),
            Some("no-helion") => missing("helion", "pip install helion; with torch 2.11 use helion==1.4.0"),
            Some("no-triton") => missing("triton", "it comes with torch's CUDA wheels"),
            Some("no-gpu") => TuneError::NoGpu { detail },
            other => TuneError::PythonNotRunnable {
                python: python.into(),
                detail: format!("the probe reported an unknown problem {other:?}: {detail}"),
            },
        }
        .into());
    }
    parsed.env.with_context(|| format!("the probe run by `{python}` printed an incomplete result"))
}

/// Top-level entries of the kernel directory that are not copied to the scratch directory.
const SKIP_TOP: &[&str] = &["build", "tuning", ".git", ".helion_aot"];

/// Whether a top-level entry of the kernel directory is left out of the scratch copy.
fn skipped_top(name: &str) -> bool {
    SKIP_TOP.contains(&name) || name == "result" || name.starts_with("result-")
}

/// Copy `from` into `to` (created), leaving out [`SKIP_TOP`], `result*` links and
/// `__pycache__` folders. Symbolic links are copied as links.
fn copy_kernel_dir(from: &Utf8Path, to: &Utf8Path) -> anyhow::Result<()> {
    let walk = walkdir::WalkDir::new(from).min_depth(1).into_iter().filter_entry(|e| {
        let name = e.file_name().to_string_lossy();
        let top = e.depth() == 1 && skipped_top(&name);
        !top && name != "__pycache__"
    });
    std::fs::create_dir_all(to).with_context(|| format!("cannot create `{to}`"))?;
    for entry in walk {
        let entry = entry.with_context(|| format!("cannot read `{from}`"))?;
        let rel = entry.path().strip_prefix(from.as_std_path()).expect("walkdir yields children");
        let dest = to.as_std_path().join(rel);
        let ft = entry.file_type();
        if ft.is_dir() {
            std::fs::create_dir_all(&dest).with_context(|| format!("cannot create `{}`", dest.display()))?;
        } else if ft.is_symlink() {
            let target = std::fs::read_link(entry.path())
                .with_context(|| format!("cannot read link `{}`", entry.path().display()))?;
            std::os::unix::fs::symlink(&target, &dest)
                .with_context(|| format!("cannot create link `{}`", dest.display()))?;
        } else {
            std::fs::copy(entry.path(), &dest)
                .with_context(|| format!("cannot copy `{}`", entry.path().display()))?;
        }
    }
    Ok(())
}

/// `_helion_aot_<stem>_<kind>_<compute>.py` files under `root` (recursively), relative.
fn heuristic_files(root: &Utf8Path, kind: &str, compute: &str) -> anyhow::Result<Vec<Utf8PathBuf>> {
    let suffix = format!("_{kind}_{compute}{}", crate::helion::SUFFIX);
    let mut out = Vec::new();
    for entry in walkdir::WalkDir::new(root).sort_by_file_name() {
        let entry = entry.with_context(|| format!("cannot read `{root}`"))?;
        let name = entry.file_name().to_string_lossy();
        if entry.file_type().is_file() && crate::helion::is_heuristic(&name) && name.ends_with(&suffix) {
            let rel = entry.path().strip_prefix(root.as_std_path()).expect("under root");
            out.push(Utf8PathBuf::try_from(rel.to_path_buf()).context("non-UTF-8 file name")?);
        }
    }
    Ok(out)
}

/// The kernels a heuristic file selects configs for, as `(file, kernel)` pairs: Helion's runner
/// writes one `def key_<kernel>(*args)` per kernel into `_helion_aot_<stem>_<kind>_<compute>.py`.
fn heuristic_kernels(
    root: &Utf8Path,
    files: &[Utf8PathBuf],
) -> anyhow::Result<BTreeSet<(Utf8PathBuf, String)>> {
    let mut out = BTreeSet::new();
    for rel in files {
        let text = crate::fsutil::read_to_string(&root.join(rel))?;
        out.extend(lookup::top_level_functions(&text, "key_").into_iter().map(|k| (rel.clone(), k)));
    }
    Ok(out)
}

/// One kernel and the features of one call, from the runner's `tuned_configs_<hw>.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct TunedShape {
    /// Kernel (function) name.
    pub kernel: String,
    /// Helion's shape features of the call (`arg0_dim0`, `arg0_dtype`, …).
    pub features: serde_json::Map<String, serde_json::Value>,
}

/// Whether `config` (the kernel in `dir`) is one `tune` can tune: a `[torch-noarch]` kernel that
/// uses Helion (lists it in `general.python-depends`, or imports it in its package). A Helion
/// kernel that does not list `helion` is tuned, with a warning to `report`.
///
/// Errors: a compiled or `[mlx-noarch]` kernel, or a noarch kernel without Helion, each saying
/// what `tune` is for.
pub fn check_tunable(
    config: &crate::config::BuildConfig,
    dir: &Utf8Path,
    report: &dyn crate::report::Reporter,
) -> anyhow::Result<()> {
    use crate::config::Framework;
    const WHAT: &str = "`tune` pre-tunes the Helion kernels of a `[torch-noarch]` kernel (Python with `@helion.kernel` functions, as `kernel-builder init --template helion` writes)";
    let section = match &config.framework {
        Framework::TorchNoarch(_) => None,
        Framework::MlxNoarch(_) => {
            anyhow::bail!("`{}` is an `[mlx-noarch]` kernel, not a Helion kernel: {WHAT}", config.path)
        }
        Framework::Torch(_) => Some("[torch]"),
        Framework::TvmFfi(_) => Some("[tvm-ffi]"),
    };
    if let Some(section) = section {
        anyhow::bail!(
            "`{}` is a compiled `{section}` kernel, not a Helion kernel: {WHAT} and a compiled kernel has nothing for it to tune",
            config.path
        );
    }
    let general = &config.general;
    // A noarch kernel that neither depends on helion nor imports it in its package has no
    // Helion kernel: asking for a bench script would send the user the wrong way.
    if !lint::is_helion(config) {
        let package = general.python_name();
        let pkg = lookup::scan(dir, &package)?;
        if !pkg.sources.iter().any(|s| s.imports_helion) {
            anyhow::bail!(
                "`{}` is a noarch kernel that does not use Helion, not a Helion kernel: no Python file under `{}` imports helion and `helion` is not in `general.python-depends`; `tune` pre-tunes `@helion.kernel` functions (as `kernel-builder init --template helion` writes), and this kernel has none to tune",
                config.path,
                dir.join("torch-ext").join(&package)
            );
        }
    }
    if !general.python_depends.iter().any(|d| d == "helion") {
        report.warning(&format!(
            "{dir}/build.toml does not list `helion` in general.python-depends; users loading this kernel will need helion to use the heuristic"
        ));
    }
    Ok(())
}

/// The distinct (kernel, shape) pairs of a `tuned_configs_<hw>.json`, in file order.
pub fn tuned_shapes(tuned_configs: &serde_json::Value) -> Vec<TunedShape> {
    let mut out: Vec<TunedShape> = Vec::new();
    if let Some(kernels) = tuned_configs.as_object() {
        for (kernel, entries) in kernels {
            for entry in entries.as_array().into_iter().flatten() {
                let features =
                    entry.get("shape_features").and_then(|f| f.as_object()).cloned().unwrap_or_default();
                let shape = TunedShape { kernel: kernel.clone(), features };
                if !out.contains(&shape) {
                    out.push(shape);
                }
            }
        }
    }
    out
}

/// The two things that can identify a record of Helion's `tuned_configs_<hw>.json` (helion
/// 1.4: per kernel name, a list of `{config, shape_key: {kernel_name, specialization_key,
/// hardware_id}, shape_features, kernel_source_file, ...}`): the specialization key, which is
/// what the collect phase matches a call against, and the shape features, which records of
/// older files carry alone. Each as its JSON text (`None`: absent).
fn record_keys(entry: &serde_json::Value) -> (Option<String>, Option<String>) {
    let spec = entry.get("shape_key").and_then(|k| k.get("specialization_key")).map(|v| v.to_string());
    (spec, entry.get("shape_features").map(|v| v.to_string()))
}

/// Whether records with keys `a` and `b` (from [`record_keys`]) describe the same shape: by
/// specialization key when both have one, else by shape features (an earlier file written
/// without keys, merged with this run's records).
fn same_record(a: &(Option<String>, Option<String>), b: &(Option<String>, Option<String>)) -> bool {
    match (&a.0, &b.0) {
        (Some(x), Some(y)) => x == y,
        _ => a.1.is_some() && a.1 == b.1,
    }
}

/// Merge the records of an earlier tune into this run's `tuned` (both Helion's
/// `tuned_configs_<hw>.json`): an earlier record of a shape this run searched again (the same
/// kernel and [`same_record`]) is replaced in place by the new one, the others are kept, and
/// this run's records of new shapes follow. Returns how many earlier records were kept. A
/// value that is not an object of lists is left as it is.
fn merge_records(tuned: &mut serde_json::Value, earlier: serde_json::Value) -> usize {
    let (Some(new), serde_json::Value::Object(old)) = (tuned.as_object(), earlier) else {
        return 0;
    };
    // This run's records in order, each taken (None) once it has replaced an earlier one.
    type Keys = (Option<String>, Option<String>);
    let mut fresh: Vec<(String, Keys, Option<serde_json::Value>)> = Vec::new();
    for (kernel, entries) in new {
        for e in entries.as_array().into_iter().flatten() {
            let keys = record_keys(e);
            match fresh.iter_mut().find(|(k, other, _)| k == kernel && same_record(other, &keys)) {
                Some(slot) => slot.2 = Some(e.clone()), // a duplicate: the later one
                None => fresh.push((kernel.clone(), keys, Some(e.clone()))),
            }
        }
    }
    let mut merged = serde_json::Map::new();
    let mut kept = 0;
    for (kernel, entries) in old {
        let list: Vec<serde_json::Value> = entries
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| {
                let keys = record_keys(e);
                let replacement = fresh
                    .iter_mut()
                    .find(|(k, other, new)| *k == kernel && new.is_some() && same_record(other, &keys))
                    .and_then(|slot| slot.2.take());
                replacement.unwrap_or_else(|| {
                    kept += 1;
                    e.clone()
                })
            })
            .collect();
        merged.insert(kernel, serde_json::Value::Array(list));
    }
    for (kernel, _, e) in fresh {
        if let Some(e) = e {
            let list = merged.entry(kernel).or_insert_with(|| serde_json::Value::Array(Vec::new()));
            if let Some(list) = list.as_array_mut() {
                list.push(e);
            }
        }
    }
    *tuned = serde_json::Value::Object(merged);
    kept
}

/// The distinct (kernel, shape) pairs of the runner's `measurements_<hw>.csv`, in file order:
/// the calls the measure phase timed every tuned config on, which are what the decision trees
/// learn from. The file is Helion's (`aot_cache.py`, helion 1.4): one row per (call, config),
/// columns `kernel_name, shape_hash, config_hash, config, shape_features, timing_ms`, the
/// features a JSON object in one quoted cell.
///
/// # Errors
/// The text is not CSV with `kernel_name` and `shape_features` columns, or a `shape_features`
/// cell is not a JSON object.
pub fn measured_shapes(csv_text: &str) -> anyhow::Result<Vec<TunedShape>> {
    let mut reader = csv::Reader::from_reader(csv_text.as_bytes());
    let headers = reader.headers().context("no header row")?.clone();
    let column =
        |name: &str| headers.iter().position(|h| h == name).with_context(|| format!("no `{name}` column"));
    let (kernel_col, features_col) = (column("kernel_name")?, column("shape_features")?);
    let mut out: Vec<TunedShape> = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let record = record.with_context(|| format!("row {} is not CSV", i + 2))?;
        let cell = |c: usize| record.get(c).unwrap_or_default();
        let features: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(cell(features_col))
                .with_context(|| format!("row {}: `shape_features` is not a JSON object", i + 2))?;
        let shape = TunedShape { kernel: cell(kernel_col).to_owned(), features };
        if !out.contains(&shape) {
            out.push(shape);
        }
    }
    Ok(out)
}

/// The header line that opens the list of measured shapes no search ran on (see
/// [`provenance_header`]); [`lookup::scan`] reads the list after it.
pub const ALSO_MEASURED: &str = "# Also measured, not searched (the decision trees learn from these too):";

/// The provenance header written at the top of every heuristic file (Python comments): the
/// command, GPU and software, the search settings, the shapes searched (`shapes`), and the
/// other shapes the measure phase timed every config on (`measured` minus `shapes`).
pub fn provenance_header(
    opts: &Options,
    env: &Environment,
    shapes: &[TunedShape],
    measured: &[TunedShape],
) -> String {
    let mut h = String::new();
    h.push_str(&format!(
        "# Generated by `kernel-builder tune` through helion {}'s AOT runner. Do not edit: re-run\n\
         # the command below on the same kind of GPU.\n",
        env.helion
    ));
    h.push_str(&format!("# Command: {}\n", opts.command_line));
    h.push_str(&format!(
        "# GPU: {} ({} {}, hardware id {}), driver {}, CUDA {}\n",
        env.device_name, env.device_kind, env.compute, env.hardware_id, env.driver, env.cuda
    ));
    h.push_str(&format!(
        "# Software: python {}, torch {}, triton {}, helion {}\n",
        env.python, env.torch, env.triton, env.helion
    ));
    h.push_str(&format!(
        "# Search: effort {}, goal {} <= {}, at most {} configs per kernel\n",
        opts.effort.as_str(),
        opts.goal.as_str(),
        opts.threshold,
        opts.max_configs.map_or("10 (Helion's default)".to_owned(), |n| n.to_string()),
    ));
    let list = |h: &mut String, s: &TunedShape| {
        h.push_str(&format!("#   {}: {}\n", s.kernel, describe_features(&s.features)));
    };
    h.push_str(&format!("# Tuned {} UTC on {} shapes:\n", env.utc, shapes.len()));
    shapes.iter().for_each(|s| list(&mut h, s));
    let also: Vec<&TunedShape> = measured.iter().filter(|m| !shapes.contains(m)).collect();
    if !also.is_empty() {
        h.push_str(ALSO_MEASURED);
        h.push('\n');
        also.into_iter().for_each(|s| list(&mut h, s));
    }
    h
}

/// Rewrite every `kernel_source_file` of a tuned-configs document with `f` (paths that `f`
/// maps to `None` stay as they are).
fn map_sources(tuned: &mut serde_json::Value, f: impl Fn(&str) -> Option<String>) {
    if let Some(kernels) = tuned.as_object_mut() {
        for entries in kernels.values_mut() {
            for entry in entries.as_array_mut().into_iter().flatten() {
                if let Some(src) = entry.get_mut("kernel_source_file") {
                    if let Some(new) = src.as_str().and_then(&f) {
                        *src = serde_json::Value::String(new);
                    }
                }
            }
        }
    }
}

/// Make every `kernel_source_file` relative to `root` (the scratch copy of the kernel
/// directory), so the committed records name no temporary path.
fn relativize_sources(tuned: &mut serde_json::Value, root: &Utf8Path) {
    let prefix = format!("{root}/");
    map_sources(tuned, |s| s.strip_prefix(&prefix).map(str::to_owned));
}

/// The inverse of [`relativize_sources`]: relative paths become paths under `root`, where the
/// runner's build phase looks for the source files to write the heuristics beside.
fn absolutize_sources(tuned: &mut serde_json::Value, root: &Utf8Path) {
    map_sources(tuned, |s| (!s.starts_with('/')).then(|| format!("{root}/{s}")));
}

/// Records written on another machine name the source file by its absolute path there
/// (`/home/me/kernels/op/torch-ext/op/op.py`, as Helion's cache writes them). Where the part
/// from `torch-ext/` on names a file of this kernel directory, the record is rebased onto it
/// (`torch-ext/op/op.py`), so Helion's collect phase, which keys records by source file,
/// finds them again. Other paths stay as they are.
fn rebase_foreign_sources(tuned: &mut serde_json::Value, kernel_dir: &Utf8Path) {
    map_sources(tuned, |s| {
        let at = s.rfind("/torch-ext/")?;
        let rel = &s[at + 1..];
        (s.starts_with('/') && !Utf8Path::new(s).is_file() && kernel_dir.join(rel).is_file())
            .then(|| rel.to_owned())
    });
}

/// The earlier records of this GPU kind, if any: `tune`'s own
/// (`tuning/<kind>_<compute>/tuned_configs.json`), or else the file Helion's AOT cache writes
/// into its data directory, `tuning/tuned_configs_<hardware id>.json`, which a kernel tuned by
/// hand (`HELION_AOT_DATA_DIR=tuning`) before it used `tune` has. The hardware id names the GPU
/// model and CUDA version, so only records of this exact GPU are taken from that layout.
fn earlier_records_file(dir: &Utf8Path, records_rel: &Utf8Path, hardware_id: &str) -> Option<Utf8PathBuf> {
    [
        records_rel.join("tuned_configs.json"),
        Utf8Path::new("tuning").join(crate::helion::tuned_configs_file(hardware_id)),
    ]
    .into_iter()
    .map(|rel| dir.join(rel))
    .find(|p| p.is_file())
}

/// What [`tune`] wrote, for the CLI to print.
#[derive(Debug)]
pub struct Outcome {
    /// The per-shape table and provenance (also written as `tune.json`).
    pub report: TuneReport,
    /// Heuristic files written, relative to the kernel directory.
    pub heuristics: Vec<Utf8PathBuf>,
    /// The records directory, relative to the kernel directory (`tuning/cuda_sm90`).
    pub records: Utf8PathBuf,
}

/// Tune the kernel in `opts.dir` on this machine's GPU and install the heuristic.
///
/// Progress (the runner's and the bench script's output) goes to stderr as it comes.
///
/// # Errors
/// A [`TuneError`] for everything a user can fix; I/O errors name their path. In every error
/// case the kernel directory is unchanged.
pub fn tune(opts: &Options, report: &dyn crate::report::Reporter) -> anyhow::Result<Outcome> {
    // A TuneError goes up as a typed error: its kind picks the exit code, its hints are data.
    tune_unchanged_on_error(opts, report).map_err(|err| match err.downcast::<TuneError>() {
        Ok(t) => crate::error::Error::from(t).into(),
        Err(err) => err,
    })
}

fn tune_unchanged_on_error(opts: &Options, report: &dyn crate::report::Reporter) -> anyhow::Result<Outcome> {
    let dir = &opts.dir;
    let (dir_abs, bench_rel) = check_inputs(opts)?;
    let scratch_tmp = tempfile::Builder::new()
        .prefix("kernel-builder-tune-")
        .tempdir()
        .context("cannot create a scratch directory")?;
    // Resolved (TMPDIR may be a link): Python names files by their resolved paths, and the
    // error's quoted output is matched against this one.
    let scratch_path = scratch_tmp.path().canonicalize().unwrap_or_else(|_| scratch_tmp.path().to_owned());
    let scratch =
        Utf8PathBuf::try_from(scratch_path).context("the temporary directory's path is not UTF-8")?;
    let env = probe(&opts.python, &scratch)?;
    report.status(&format!(
        "tune: {} ({} {}), driver {}, CUDA {}; torch {}, triton {}, helion {}",
        env.device_name,
        env.device_kind,
        env.compute,
        env.driver,
        env.cuda,
        env.torch,
        env.triton,
        env.helion
    ));

    // The scratch copy: heuristics for this device removed, so whatever is there after the
    // build phase is the runner's new output.
    let work = scratch.join("kernel");
    copy_kernel_dir(&dir_abs, &work)?;
    for old in heuristic_files(&work.join("torch-ext"), &env.device_kind, &env.compute)? {
        let p = work.join("torch-ext").join(&old);
        std::fs::remove_file(&p).with_context(|| format!("cannot remove `{p}`"))?;
    }
    let aot_dir = scratch.join("aot");
    let run_id = "kernel-builder-tune";
    let run_dir = aot_dir.join(run_id);
    let hw = &env.hardware_id;
    let records_rel = Utf8PathBuf::from("tuning").join(format!("{}_{}", env.device_kind, env.compute));
    let earlier = earlier_records(opts, &records_rel, hw, &dir_abs, &work)?;
    std::fs::create_dir_all(&run_dir).with_context(|| format!("cannot create `{run_dir}`"))?;
    let configs_file = run_dir.join(crate::helion::tuned_configs_file(hw));
    seed_records(opts, &configs_file, earlier.as_ref(), &dir.join(&records_rel), report)?;

    let phases = Phases::new(opts, &work, &aot_dir, run_id, &bench_rel, report)?;
    let mut tuned_configs = phases.collect(opts, &configs_file, &bench_rel, earlier)?;
    let shapes = tuned_shapes(&tuned_configs);
    let measured = phases.measure(&run_dir.join(crate::helion::measurements_file(hw)))?;
    let header = provenance_header(opts, &env, &shapes, &measured);
    let produced = phases.build(&scratch.join("header.txt"), &header, &work, &env)?;
    check_no_kernel_dropped(opts, &env, &work, &produced)?;
    let table = phases.table(opts, &scratch, &run_dir, &bench_rel)?;

    let summary_file = run_dir.join(crate::helion::heuristic_summary_file(hw));
    let summary: serde_json::Value = match std::fs::read_to_string(&summary_file) {
        Ok(s) => serde_json::from_str(&s).with_context(|| format!("`{summary_file}` is not JSON"))?,
        Err(_) => serde_json::Value::Null,
    };
    let report =
        TuneReport::new(opts, &env, &produced, table, summary, &bench_rel).with_shapes(&shapes, &measured);

    // 5. install: records first (one rename), the heuristics last (one rename each).
    relativize_sources(&mut tuned_configs, &work);
    let mut records: BTreeMap<&str, Vec<u8>> = BTreeMap::new();
    records.insert("tune.json", report.to_json().into_bytes());
    records.insert("tuned_configs.json", (serde_json::to_string_pretty(&tuned_configs)? + "\n").into_bytes());
    for (src, name) in [
        (crate::helion::measurements_file(hw), "measurements.csv"),
        (crate::helion::heuristic_summary_file(hw), "heuristic_summary.json"),
        ("run_metadata.json".to_owned(), "run_metadata.json"),
    ] {
        if let Ok(bytes) = std::fs::read(run_dir.join(&src)) {
            records.insert(name, bytes);
        }
    }
    install_records(&dir.join(&records_rel), &records)?;
    for rel in &produced {
        let bytes = std::fs::read(work.join("torch-ext").join(rel))
            .with_context(|| format!("cannot read the new heuristic `{rel}`"))?;
        crate::fsutil::write_atomic(&dir.join("torch-ext").join(rel), &bytes)?;
    }
    Ok(Outcome {
        report,
        heuristics: produced.iter().map(|p| Utf8PathBuf::from("torch-ext").join(p)).collect(),
        records: records_rel,
    })
}

/// The kernel directory (resolved) and the bench relative to it, checked: the bench exists,
/// lies inside the kernel directory but not under a directory the copy skips, and the kernel
/// has its package under `torch-ext/`.
fn check_inputs(opts: &Options) -> anyhow::Result<(Utf8PathBuf, Utf8PathBuf)> {
    let dir = &opts.dir;
    if !opts.bench.is_file() {
        return Err(TuneError::BenchMissing(opts.bench.clone()).into());
    }
    let abs = |p: &Utf8Path| -> anyhow::Result<Utf8PathBuf> {
        let c = p.canonicalize_utf8().with_context(|| format!("cannot resolve `{p}`"))?;
        Ok(c)
    };
    let dir_abs = abs(dir)?;
    let bench_rel = abs(&opts.bench)?
        .strip_prefix(&dir_abs)
        .map(Utf8Path::to_owned)
        .map_err(|_| TuneError::BenchOutsideDir { bench: opts.bench.clone(), dir: dir.clone() })?;
    if let Some(top) = bench_rel.components().next().map(|c| c.as_str()).filter(|top| skipped_top(top)) {
        return Err(TuneError::BenchInSkipped { bench: opts.bench.clone(), top: top.to_owned() }.into());
    }
    let package_dir = dir.join("torch-ext").join(&opts.package);
    if !package_dir.is_dir() {
        return Err(TuneError::NoPackage(package_dir).into());
    }
    Ok((dir_abs, bench_rel))
}

/// The records of a previous tune of this GPU kind (unless `--fresh`), and the file they came
/// from, their sources pointed at the scratch copy `work`.
///
/// Shapes a previous tune of this GPU kind already searched are not searched again: the
/// collect phase reuses a recorded config for a call with the same shape key. With --retune
/// the collect phase starts from nothing, so it searches every shape the run calls, and the
/// records of the other shapes are merged back in after it.
fn earlier_records(
    opts: &Options,
    records_rel: &Utf8Path,
    hw: &str,
    dir_abs: &Utf8Path,
    work: &Utf8Path,
) -> anyhow::Result<Option<(Utf8PathBuf, serde_json::Value)>> {
    Ok(match earlier_records_file(&opts.dir, records_rel, hw) {
        Some(previous) if !opts.fresh => {
            let mut earlier: serde_json::Value =
                serde_json::from_str(&crate::fsutil::read_to_string(&previous)?)
                    .with_context(|| format!("`{previous}` is not JSON (tune with --fresh to ignore it)"))?;
            rebase_foreign_sources(&mut earlier, dir_abs);
            absolutize_sources(&mut earlier, work);
            Some((previous, earlier))
        }
        _ => None,
    })
}

/// The collect phase starts from the `earlier` records (written to `configs_file`), unless
/// `--retune`; says so, and where this tune's records go (`own_records`) when the earlier ones
/// are elsewhere.
fn seed_records(
    opts: &Options,
    configs_file: &Utf8Path,
    earlier: Option<&(Utf8PathBuf, serde_json::Value)>,
    own_records: &Utf8Path,
    report: &dyn crate::report::Reporter,
) -> anyhow::Result<()> {
    if let Some((previous, earlier)) = earlier.filter(|_| !opts.retune) {
        crate::fsutil::write_atomic(configs_file, serde_json::to_string_pretty(earlier)?.as_bytes())?;
        report.status(&format!(
            "tune: starting from the {} shapes recorded in `{previous}` (they are not searched \
             again; --retune searches the ones this run calls again, --fresh starts over)",
            tuned_shapes(earlier).len()
        ));
    }
    if let Some((previous, _)) = earlier.filter(|(p, _)| !p.starts_with(own_records)) {
        report.status(&format!(
            "tune: `{previous}` is in Helion's own data-directory layout; this tune's records go to \
             `{own_records}` and that file is left as it is"
        ));
    }
    Ok(())
}

/// A run that calls only some kernels gets a heuristic for those only; installing it would
/// silently send the others back to Helion's default config (seen on the H200: every
/// non-causal shape fell to 0.31x FLASH after a causal-only slice). Unless `--fresh`, refuse
/// heuristics (`produced`, in the scratch copy `work`) that drop a kernel the installed ones
/// have.
fn check_no_kernel_dropped(
    opts: &Options,
    env: &Environment,
    work: &Utf8Path,
    produced: &[Utf8PathBuf],
) -> anyhow::Result<()> {
    if opts.fresh {
        return Ok(());
    }
    let dir = &opts.dir;
    let installed_root = dir.join("torch-ext");
    let installed = heuristic_files(&installed_root, &env.device_kind, &env.compute)?;
    let before = heuristic_kernels(&installed_root, &installed)?;
    let after = heuristic_kernels(&work.join("torch-ext"), produced)?;
    let dropped: Vec<&str> = before.difference(&after).map(|(_, k)| k.as_str()).collect();
    if !dropped.is_empty() {
        let called: BTreeSet<&str> = after.iter().map(|(_, k)| k.as_str()).collect();
        let list = |v: Vec<&str>| v.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ");
        return Err(TuneError::WouldDropKernels {
            dropped: list(dropped),
            called: list(called.into_iter().collect()),
            dir: dir.to_owned(),
        }
        .into());
    }
    Ok(())
}

/// The phases of Helion's AOT runner over the scratch copy, and the per-shape table after them.
struct Phases<'o> {
    runner: Runner<'o>,
    /// `-m helion.autotuner.aot_runner` and its options, before `--phase`.
    runner_args: Vec<String>,
    /// The bench command after `--`.
    bench_cmd: Vec<String>,
    effort: &'o str,
}

impl<'o> Phases<'o> {
    fn new(
        opts: &'o Options,
        work: &Utf8Path,
        aot_dir: &Utf8Path,
        run_id: &str,
        bench_rel: &Utf8Path,
        report: &'o dyn crate::report::Reporter,
    ) -> anyhow::Result<Phases<'o>> {
        let runner = Runner::new(&opts.python, work, &opts.dir, report)?;
        let mut runner_args: Vec<String> = vec![
            "-m".into(),
            "helion.autotuner.aot_runner".into(),
            "--output-dir".into(),
            aot_dir.to_string(),
            "--run-id".into(),
            run_id.into(),
            "--goal".into(),
            opts.goal.as_str().into(),
            "--threshold".into(),
            opts.threshold.to_string(),
            "--no-score-matrix".into(),
        ];
        if let Some(n) = opts.max_configs {
            runner_args.extend(["--max-configs".into(), n.to_string()]);
        }
        for k in &opts.kernels {
            runner_args.extend(["--kernel".into(), k.clone()]);
        }
        let bench_cmd: Vec<String> = [opts.python.clone(), bench_rel.to_string()]
            .into_iter()
            .chain(opts.bench_args.iter().cloned())
            .collect();
        Ok(Phases { runner, runner_args, bench_cmd, effort: opts.effort.as_str() })
    }

    /// Run `phase` with `extra` options.
    fn run(&self, phase: &'static str, extra: &[String]) -> anyhow::Result<Finished> {
        let mut a = self.runner_args.clone();
        a.extend(["--phase".into(), phase.into()]);
        a.extend(extra.iter().cloned());
        a.push("--".into());
        a.extend(self.bench_cmd.iter().cloned());
        self.runner.run(phase, &a, &[("HELION_AUTOTUNE_EFFORT", self.effort)])
    }

    /// Phase 1, collect: the tuned configs (`configs_file`), with `earlier`'s other shapes merged
    /// back in under `--retune`.
    fn collect(
        &self,
        opts: &Options,
        configs_file: &Utf8Path,
        bench_rel: &Utf8Path,
        earlier: Option<(Utf8PathBuf, serde_json::Value)>,
    ) -> anyhow::Result<serde_json::Value> {
        let fin = self.run("collect", &[])?;
        if let Some(code) = fin.failed_bench_code("Collect phase failed with return code") {
            return Err(TuneError::BenchFailed { phase: "collect", code, tail: fin.tail() }.into());
        }
        if !configs_file.is_file() {
            let filter = if opts.kernels.is_empty() {
                String::new()
            } else {
                format!(" named {}", opts.kernels.join(", "))
            };
            return Err(TuneError::NoKernelCalled { bench: bench_rel.to_string(), filter }.into());
        }
        fin.ensure_success("collect")?;
        let mut tuned_configs: serde_json::Value =
            serde_json::from_str(&crate::fsutil::read_to_string(configs_file)?)
                .with_context(|| format!("`{configs_file}` is not JSON"))?;
        if let (true, Some((previous, earlier))) = (opts.retune, earlier) {
            let searched = tuned_shapes(&tuned_configs).len();
            let kept = merge_records(&mut tuned_configs, earlier);
            crate::fsutil::write_atomic(
                configs_file,
                serde_json::to_string_pretty(&tuned_configs)?.as_bytes(),
            )?;
            self.runner.report().status(&format!(
                "tune: searched the {searched} shapes this run calls again (--retune); kept the \
                 records of {kept} other shapes from `{previous}`"
            ));
        }
        Ok(tuned_configs)
    }

    /// Phase 2, measure: the shapes measured (read from `measurements_file`), which the trees learn
    /// from. An unreadable file costs only that list.
    fn measure(&self, measurements_file: &Utf8Path) -> anyhow::Result<Vec<TunedShape>> {
        let fin = self.run("measure", &[])?;
        if let Some(code) = fin.failed_bench_code("Measure phase failed with return code") {
            return Err(TuneError::BenchFailed { phase: "measure", code, tail: fin.tail() }.into());
        }
        fin.ensure_success("measure")?;
        Ok(match std::fs::read_to_string(measurements_file) {
            Ok(text) => measured_shapes(&text).unwrap_or_else(|e| {
                self.runner.report().warning(&format!(
                    "tune: cannot read the measured shapes from `{measurements_file}`: {e:#}"
                ));
                Vec::new()
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => {
                self.runner.report().warning(&format!(
                    "tune: cannot read `{measurements_file}`: {e}; the header lists no measured shapes"
                ));
                Vec::new()
            }
        })
    }

    /// Phase 3, build, with the provenance `header` (written to `header_file`): the heuristic files
    /// it produced in the scratch copy `work`, at least one.
    fn build(
        &self,
        header_file: &Utf8Path,
        header: &str,
        work: &Utf8Path,
        env: &Environment,
    ) -> anyhow::Result<Vec<Utf8PathBuf>> {
        crate::fsutil::write_atomic(header_file, header.as_bytes())?;
        let fin = self.run("build", &["--file-header".into(), format!("@{header_file}")])?;
        fin.ensure_success("build")?;
        let produced = heuristic_files(&work.join("torch-ext"), &env.device_kind, &env.compute)?;
        if produced.is_empty() {
            return Err(TuneError::NoHeuristic {
                kind: env.device_kind.clone(),
                compute: env.compute.clone(),
                tail: fin.tail(),
            }
            .into());
        }
        Ok(produced)
    }

    /// Then the per-shape table, with the new heuristic (in `run_dir`) in evaluate mode.
    fn table(
        &self,
        opts: &Options,
        scratch: &Utf8Path,
        run_dir: &Utf8Path,
        bench_rel: &Utf8Path,
    ) -> anyhow::Result<report::MeasureTable> {
        let measure_script = scratch.join("kb_measure.py");
        crate::fsutil::write_atomic(&measure_script, MEASURE_PY.as_bytes())?;
        let table_file = scratch.join("table.json");
        let mut args: Vec<String> = vec![
            measure_script.to_string(),
            "--bench".into(),
            bench_rel.to_string(),
            "--out".into(),
            table_file.to_string(),
        ];
        for k in &opts.kernels {
            args.extend(["--kernel".into(), k.clone()]);
        }
        args.push("--".into());
        args.extend(opts.bench_args.iter().cloned());
        let run_dir_s = run_dir.to_string();
        let fin = self.runner.run_python(
            "table",
            &args,
            &[("HELION_AOT_MODE", "evaluate"), ("HELION_AOT_DATA_DIR", run_dir_s.as_str())],
        )?;
        match fin.code() {
            Some(0) => {}
            Some(3) => {
                return Err(
                    TuneError::NoKernelCalled { bench: bench_rel.to_string(), filter: String::new() }.into()
                )
            }
            Some(code) => {
                return Err(TuneError::BenchFailed { phase: "table", code, tail: fin.tail() }.into())
            }
            None => fin.ensure_success("table")?,
        }
        serde_json::from_str(&crate::fsutil::read_to_string(&table_file)?)
            .with_context(|| format!("`{table_file}` is not the table measure.py writes"))
    }
}

/// Replace directory `target` by one holding `files`: written in a sibling temporary
/// directory, the old one renamed aside, the new one renamed in, the old one removed.
fn install_records(target: &Utf8Path, files: &BTreeMap<&str, Vec<u8>>) -> anyhow::Result<()> {
    let parent = target.parent().context("records directory has no parent")?;
    std::fs::create_dir_all(parent).with_context(|| format!("cannot create `{parent}`"))?;
    let fresh = tempfile::Builder::new()
        .prefix(".kernel-builder-tune-")
        .tempdir_in(parent)
        .with_context(|| format!("cannot create a temporary directory in `{parent}`"))?;
    for (name, bytes) in files {
        let p = fresh.path().join(name);
        std::fs::write(&p, bytes).with_context(|| format!("cannot write `{}`", p.display()))?;
    }
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(fresh.path(), std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("cannot set permissions in `{parent}`"))?;
    let fresh = fresh.keep();
    let old = parent.join(format!(".kernel-builder-tune-old-{}", std::process::id()));
    let had_old = target.exists();
    if had_old {
        std::fs::rename(target, &old).with_context(|| format!("cannot move `{target}` aside"))?;
    }
    if let Err(e) = std::fs::rename(&fresh, target) {
        if had_old {
            let _ = std::fs::rename(&old, target);
        }
        let _ = std::fs::remove_dir_all(&fresh);
        return Err(e).with_context(|| format!("cannot write `{target}`"));
    }
    if had_old {
        std::fs::remove_dir_all(&old).with_context(|| format!("cannot remove `{old}`"))?;
    }
    Ok(())
}

impl Finished {
    /// `Err(RunnerFailed)` unless the process exited 0.
    fn ensure_success(&self, phase: &'static str) -> Result<(), TuneError> {
        if self.code() == Some(0) {
            Ok(())
        } else {
            Err(TuneError::RunnerFailed { phase, status: self.status_text(), tail: self.tail() })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::merge_records;
    use serde_json::json;

    fn rec(kernel: &str, shape: u32, config: u32) -> serde_json::Value {
        json!({"config": {"block_sizes": [config]}, "shape_features": {"n": shape},
               "shape_key": {"kernel_name": kernel, "specialization_key": [shape], "hardware_id": "h"}})
    }

    #[test]
    fn retuned_shapes_replace_their_records_in_place_and_the_rest_are_kept() {
        let earlier = json!({"a": [rec("a", 1, 16), rec("a", 2, 16)], "b": [rec("b", 1, 16)]});
        let mut tuned = json!({"a": [rec("a", 3, 64), rec("a", 2, 64)], "c": [rec("c", 1, 64)]});
        assert_eq!(merge_records(&mut tuned, earlier), 2);
        assert_eq!(
            tuned,
            json!({"a": [rec("a", 1, 16), rec("a", 2, 64), rec("a", 3, 64)],
                   "b": [rec("b", 1, 16)], "c": [rec("c", 1, 64)]})
        );
    }

    /// An earlier file written without specialization keys (an older Helion) merged with this
    /// run's keyed records: the same shape matches by its features, so it is not kept twice
    /// (found re-reading the merge: the ids were a key on one side and features on the other).
    #[test]
    fn a_keyed_record_replaces_an_unkeyed_one_of_the_same_shape() {
        let unkeyed = |shape: u32| json!({"config": {"block_sizes": [16]}, "shape_features": {"n": shape}});
        let earlier = json!({"a": [unkeyed(1), unkeyed(2)]});
        let mut tuned = json!({"a": [rec("a", 2, 64)]});
        assert_eq!(merge_records(&mut tuned, earlier), 1);
        assert_eq!(tuned, json!({"a": [unkeyed(1), rec("a", 2, 64)]}));
        // Two keyed records with the same features but different keys stay two shapes.
        let mut other_key = rec("a", 2, 64);
        other_key["shape_key"]["specialization_key"] = json!([99]);
        let mut tuned = json!({"a": [other_key.clone()]});
        assert_eq!(merge_records(&mut tuned, json!({"a": [rec("a", 2, 16)]})), 1);
        assert_eq!(tuned, json!({"a": [rec("a", 2, 16), other_key]}));
    }

    #[test]
    fn records_without_a_shape_key_match_by_features_and_odd_files_are_left_alone() {
        let old = json!({"a": [{"config": 1, "shape_features": {"n": 1}}]});
        let mut tuned = json!({"a": [{"config": 2, "shape_features": {"n": 1}}]});
        assert_eq!(merge_records(&mut tuned, old.clone()), 0);
        assert_eq!(tuned, json!({"a": [{"config": 2, "shape_features": {"n": 1}}]}));
        let mut odd = json!([1, 2]);
        assert_eq!(merge_records(&mut odd, old), 0);
        assert_eq!(odd, json!([1, 2]));
    }
}
