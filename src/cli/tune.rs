//! `kernel-builder tune [DIR] [--bench FILE] [--kernel NAME]… [--goal G] [--threshold F]
//! [--max-configs N] [--effort quick|full] [--fresh | --retune] [--python PATH]
//! [-- BENCH_ARGS…]`: pre-tune a
//! Helion kernel on this machine's GPU with Helion's AOT runner.

use std::process::ExitCode;

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};

use crate::tune::{self, Effort, Goal};

/// Arguments of `tune`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = "\
Runs Helion's AOT runner (python -m helion.autotuner.aot_runner) over the kernel's bench \
script on this machine's GPU: every distinct call of the script is autotuned, every tuned \
config is timed on every call, and a decision tree that picks among the fewest configs meeting \
the goal is written next to the kernel source as \
torch-ext/<package>/_helion_aot_<source stem>_<kind>_<compute>.py (for example \
_helion_aot_attention_cuda_sm90.py on an H100 or H200). Each file starts with a header naming \
the GPU, driver, CUDA, python, torch, triton and helion versions, the shapes tuned and this \
command. The runner's records and the per-shape table (tuned config against Helion's default \
config, also printed) go to DIR/tuning/<kind>_<compute>/ (tune.json, tuned_configs.json, \
measurements.csv, heuristic_summary.json).

Everything runs in a scratch copy of DIR; DIR changes only at the very end, so a failed or \
interrupted run leaves the earlier heuristic in place. Tuning the same GPU kind again replaces \
that kind's heuristic and records, starting from the shapes recorded there (not searched \
again, unless --fresh, which forgets them all, or --retune, which searches the ones this run \
calls again and keeps the rest): tune in slices by growing the bench script's list of shapes. \
Records from Helion's own data-directory layout (DIR/tuning/tuned_configs_<hardware id>.json, \
what HELION_AOT_DATA_DIR=DIR/tuning leaves) are a starting point too, for this exact GPU. The \
runner runs the bench script once per phase with HELION_AOT_MODE set (collect, measure, then \
evaluate for the table); a script that calls more shapes when it is `measure` has every tuned \
config timed on those too, so the decision tree learns from all of them while a slice searches \
only a few (the header lists them apart; kernels/attention-helion/bench.py does this).

Environment: HELION_AUTOTUNE_BUDGET_SECONDS caps each shape's search; \
HELION_AUTOTUNE_BENCHMARK_SUBPROCESS=0 benchmarks in-process (needed where Helion's \
benchmark worker dies). HELION_AUTOTUNE_EFFORT is set from --effort (default full), whatever \
the environment says. HELION_AOT_MODE, HELION_HEURISTIC_DIR, HELION_FORCE_AUTOTUNE and \
similar variables are removed from the runner's environment.")]
pub struct Args {
    /// Kernel directory, holding build.toml and torch-ext/ (default: the current directory).
    pub dir: Option<Utf8PathBuf>,
    /// The bench script: a Python file inside DIR that calls the kernel with the shapes to
    /// tune for, relative to the current directory or to DIR (default: DIR/bench.py, as
    /// `init --template helion` writes it).
    #[arg(long, value_name = "FILE")]
    pub bench: Option<Utf8PathBuf>,
    /// Tune only this kernel (the Helion function's name; repeatable). Default: every Helion
    /// kernel the bench script calls.
    #[arg(long = "kernel", value_name = "NAME")]
    pub kernels: Vec<String>,
    /// What the chosen configs must achieve on the tuned shapes, against the best tuned config
    /// of each shape.
    #[arg(long, value_enum, default_value_t = Goal::MaxSlowdown)]
    pub goal: Goal,
    /// The goal's bound, as a slowdown factor: 1.01 allows 1% over the best config per shape.
    // allow_negative_numbers: `--threshold -1` reaches the parser's message, instead of clap
    // taking `-1` for a flag and suggesting `-- -1` (which would go to the bench script).
    #[arg(long, default_value_t = 1.01, value_parser = parse_threshold, allow_negative_numbers = true)]
    pub threshold: f64,
    /// At most this many configs per kernel in the heuristic (Helion's default: 10).
    #[arg(long, value_name = "N", value_parser = parse_max_configs, allow_negative_numbers = true)]
    pub max_configs: Option<u32>,
    /// How hard the autotuner searches each shape: quick (about a minute a shape) or full
    /// (Helion's default search, often ten minutes or more a shape).
    #[arg(long, value_enum, default_value_t = Effort::Full)]
    pub effort: Effort,
    /// Search every shape again, instead of starting from the configs the last tune of this
    /// GPU kind recorded in DIR/tuning/<kind>_<compute>/tuned_configs.json (or, failing that,
    /// Helion's DIR/tuning/tuned_configs_<hardware id>.json).
    #[arg(long)]
    pub fresh: bool,
    /// Search every shape this run calls again, though DIR/tuning/ records it (after changing
    /// the kernel's seed configs or search space); the records of the shapes the run does not
    /// call are kept, and the decision trees choose among both.
    #[arg(long, conflicts_with = "fresh")]
    pub retune: bool,
    /// The Python that has torch, triton and helion; it runs the runner and the bench script.
    #[arg(long, value_name = "PATH", env = "KERNEL_BUILDER_PYTHON", default_value = "python3")]
    pub python: String,
    /// Arguments for the bench script (after `--`), e.g. `-- --shapes 0-3`.
    #[arg(last = true, value_name = "BENCH_ARGS")]
    pub bench_args: Vec<String>,
}

fn parse_max_configs(s: &str) -> Result<u32, String> {
    match s.parse::<i64>() {
        Ok(n) if n >= 1 => {
            u32::try_from(n).map_err(|_| format!("{s} configs is more than a heuristic can hold"))
        }
        Ok(_) => Err(format!("a heuristic holds at least one config (got {s})")),
        Err(_) => Err(format!("`{s}` is not a whole number")),
    }
}

fn parse_threshold(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("`{s}` is not a number"))?;
    if v.is_finite() && v >= 1.0 {
        Ok(v)
    } else {
        Err(format!("the threshold is a slowdown factor, at least 1.0 (got {s})"))
    }
}

/// The command line as typed, with the program shown as `kernel-builder` and arguments
/// quoted where a shell would need it.
fn command_line() -> String {
    let quote = |a: &str| {
        if !a.is_empty() && a.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,@+%".contains(c)) {
            a.to_owned()
        } else {
            format!("'{}'", a.replace('\'', r"'\''"))
        }
    };
    std::iter::once("kernel-builder".to_owned())
        .chain(std::env::args_os().skip(1).map(|a| quote(&a.to_string_lossy())))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `--bench` as given: relative to the current directory, or else to DIR (`--bench
/// bench_small.py` from anywhere); a directory is refused here, where the message can say so.
fn resolve_bench(dir: &Utf8Path, bench: Utf8PathBuf) -> anyhow::Result<Utf8PathBuf> {
    let in_dir = dir.join(&bench);
    let found = if bench.exists() || bench.is_absolute() || !in_dir.exists() { bench } else { in_dir };
    if found.is_dir() {
        anyhow::bail!(
            "`--bench {found}` is a directory: give the bench script, a Python file inside `{dir}`"
        );
    }
    Ok(found)
}

/// A `--python` path with a directory part (`.venv/bin/python`) is made absolute against the
/// current directory, because the runner and the bench script run from a scratch directory;
/// a bare name (`python3`) is left for PATH lookup. Not canonicalized: a virtual
/// environment's `python` is a symlink whose own path is what selects the environment.
fn absolute_python(python: String) -> anyhow::Result<String> {
    if !python.contains('/') || python.starts_with('/') {
        return Ok(python);
    }
    let abs = std::path::absolute(&python).with_context(|| format!("cannot resolve `--python {python}`"))?;
    abs.into_os_string()
        .into_string()
        .map_err(|_| anyhow::anyhow!("`--python {python}` does not resolve to a UTF-8 path"))
}

/// Run `tune`.
pub fn run(args: Args) -> super::CmdResult {
    let dir = super::kernel_dir_arg(args.dir)?;
    let loaded = super::load_config(&dir)?;
    tune::check_tunable(&loaded.config, &dir, &super::report::Terminal)?;
    let general = &loaded.config.general;
    let bench = match args.bench {
        None => dir.join("bench.py"),
        Some(b) => resolve_bench(&dir, b)?,
    };
    let opts = tune::Options {
        dir: dir.clone(),
        package: general.python_name(),
        bench,
        bench_args: args.bench_args,
        kernels: args.kernels,
        goal: args.goal,
        threshold: args.threshold,
        max_configs: args.max_configs,
        effort: args.effort,
        python: absolute_python(args.python)?,
        command_line: command_line(),
        fresh: args.fresh,
        retune: args.retune,
    };
    let outcome = tune::tune(&opts, &super::report::Terminal)?;
    print!("{}", outcome.report.render_table());
    for h in &outcome.heuristics {
        println!("wrote {}", dir.join(h));
    }
    println!(
        "wrote {}/ (tune.json: the table above as JSON, with the runner's records)",
        dir.join(&outcome.records)
    );
    for w in outcome.report.goal_warnings(args.goal, args.threshold) {
        crate::printer::stderr!("warning: {w}");
    }
    Ok(ExitCode::SUCCESS)
}
