//! `kernel-builder check-config [DIR] [--json]`: read DIR/build.toml (any generation), check
//! every rule, print a summary.

use std::process::ExitCode;

use camino::Utf8PathBuf;
use serde::Serialize;

use crate::config::{self, BuildConfig, Framework};
use crate::kernel;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Kernel directory (default: the current directory).
    pub dir: Option<Utf8PathBuf>,
    /// Print the summary as JSON on stdout instead of text; a file with errors prints the
    /// failure document (`"ok": false`) with its problems, their lines and columns (the text
    /// still goes to stderr).
    #[arg(long)]
    pub json: bool,
}

/// The summary printed on success (also the `--json` shape). Its `valid` is `true`, where
/// [`Invalid`] has `valid: false`; `warnings` is the same list in both.
#[derive(Debug, Serialize)]
pub struct Summary {
    /// Always `true` (a file with errors prints [`Invalid`]).
    pub valid: bool,
    /// `general.name`.
    pub name: String,
    /// The generation the file was written in (`Generation::label`).
    pub generation: String,
    /// `general.backends` in file order.
    pub backends: Vec<String>,
    /// `torch`, `torch-noarch` or `tvm-ffi`.
    pub framework: String,
    /// `[kernel.*]` tables in file order.
    pub kernels: Vec<KernelSummary>,
    /// Backends with no `[kernel.*]`: their variants are noarch (`torch-<backend>`).
    pub noarch_backends: Vec<String>,
    /// The build matrix the cells come from (`[general] matrix`, else the default), e.g.
    /// `2026-12`, and its revision date.
    pub matrix: String,
    pub matrix_revision: String,
    /// The file's warnings (a license that is not SPDX, a capability no toolkit builds, …),
    /// also on stderr, placed as in [`Invalid::problems`]; always present, `[]` when none.
    pub warnings: Vec<ProblemJson>,
    /// The Helion lint's warnings (`crate::tune::lint`), also on stderr; always present, an
    /// empty array when there are none (always so for a kernel that does not use Helion).
    pub helion_warnings: Vec<crate::tune::lint::Warning>,
}

/// What a build.toml with errors adds to the `--json` failure document (exit 1, of every
/// command that reads build.toml; `super::json`): every problem with its place, the warnings
/// alone as in [`Summary::warnings`], and how many there are of each.
///
/// ```json
/// {"ok": false, "command": "check-config", "error": {…},
///  "valid": false, "file": "k/build.toml", "error_count": 1, "warning_count": 0,
///  "warnings": [],
///  "problems": [{"severity": "error", "rule": "unknown-key", "key_path": "general.bogus",
///                "message": "…", "help": "…", "line": 7, "column": 1}]}
/// ```
#[derive(Debug, Serialize)]
pub struct Invalid {
    /// Always `false` (a valid file prints [`Summary`]).
    pub valid: bool,
    pub file: String,
    pub error_count: usize,
    pub warning_count: usize,
    /// The problems of severity `warning`, as [`Summary::warnings`].
    pub warnings: Vec<ProblemJson>,
    pub problems: Vec<ProblemJson>,
}

/// One problem of [`Invalid`]; `line` and `column` are 1-based, `null` without a place.
#[derive(Debug, Clone, Serialize)]
pub struct ProblemJson {
    /// `error` or `warning`.
    pub severity: &'static str,
    pub rule: &'static str,
    pub key_path: String,
    pub message: String,
    pub help: Option<String>,
    pub line: Option<usize>,
    pub column: Option<usize>,
}

impl ProblemJson {
    /// `problems` with their `locations` (same order; missing ones are `None`).
    fn all(
        problems: &[config::Problem],
        locations: &[Option<config::diagnostics::Location>],
    ) -> Vec<ProblemJson> {
        problems
            .iter()
            .zip(locations.iter().chain(std::iter::repeat(&None)))
            .map(|(p, l)| ProblemJson {
                severity: match p.severity {
                    config::Severity::Error => "error",
                    config::Severity::Warning => "warning",
                },
                rule: p.rule,
                key_path: p.key_path.clone(),
                message: p.message.clone(),
                help: p.help.clone(),
                line: l.map(|l| l.line),
                column: l.map(|l| l.column),
            })
            .collect()
    }
}

impl Invalid {
    /// The document for `e`.
    pub fn of(e: &config::ConfigErrors) -> Invalid {
        let problems = ProblemJson::all(&e.problems, &e.locations);
        let warnings: Vec<ProblemJson> =
            problems.iter().filter(|p| p.severity == "warning").cloned().collect();
        Invalid {
            valid: false,
            file: e.path.to_string(),
            error_count: problems.len() - warnings.len(),
            warning_count: warnings.len(),
            warnings,
            problems,
        }
    }
}

/// One `[kernel.<name>]`.
#[derive(Debug, Serialize)]
pub struct KernelSummary {
    /// The `<name>` of `[kernel.<name>]`.
    pub name: String,
    /// Its backend (`backend` in edition 5, the backend of its `language` in edition 6).
    pub backend: String,
    /// Its `language` (edition 6), or the C++ language of an edition-5 `backend`.
    pub language: String,
}

impl Summary {
    /// Summarise a loaded configuration.
    pub fn of(c: &BuildConfig) -> Summary {
        Summary {
            valid: true,
            name: c.general.name.clone(),
            generation: c.generation.label().to_owned(),
            backends: c.general.backends.iter().map(|b| b.to_string()).collect(),
            framework: c.framework.section().to_owned(),
            kernels: c
                .kernels
                .iter()
                .map(|(n, k)| KernelSummary {
                    name: n.clone(),
                    backend: k.backend.to_string(),
                    language: k.language.to_string(),
                })
                .collect(),
            noarch_backends: match c.framework {
                Framework::Torch(_) | Framework::TorchNoarch(_) => c
                    .general
                    .backends
                    .iter()
                    .filter(|b| c.is_noarch_for(**b))
                    .map(|b| b.to_string())
                    .collect(),
                Framework::MlxNoarch(_) => c.general.backends.iter().map(|b| b.to_string()).collect(),
                Framework::TvmFfi(_) => Vec::new(),
            },
            matrix: crate::matrix::data::for_config(c).name.clone(),
            matrix_revision: crate::matrix::data::for_config(c).revision.clone(),
            warnings: Vec::new(),
            helion_warnings: Vec::new(),
        }
    }

    /// The text form: one `key: value` line each, kernels indented below.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!("name: {}\n", self.name));
        s.push_str(&format!("generation: {}\n", self.generation));
        s.push_str(&format!("backends: {}\n", self.backends.join(", ")));
        s.push_str(&format!("framework: {}\n", self.framework));
        if self.kernels.is_empty() {
            s.push_str("kernels: none\n");
        } else {
            s.push_str("kernels:\n");
            for k in &self.kernels {
                // An edition-6 file names languages: show the one written.
                if self.generation == crate::config::Generation::Edition6.label() {
                    s.push_str(&format!("  {} ({}) -> {}\n", k.name, k.language, k.backend));
                } else {
                    s.push_str(&format!("  {} -> {}\n", k.name, k.backend));
                }
            }
        }
        if !self.noarch_backends.is_empty() {
            s.push_str(&format!("noarch backends: {}\n", self.noarch_backends.join(", ")));
        }
        s.push_str(&format!("matrix: {} (revision {})\n", self.matrix, self.matrix_revision));
        s
    }
}

/// Run the command: exit 0 when the file is valid (warnings on stderr), 1 with every error
/// rendered on stderr otherwise.
pub fn run(args: Args) -> super::CmdResult {
    let dir = args.dir.unwrap_or_else(|| Utf8PathBuf::from("."));
    match kernel::load_locked(&dir) {
        Ok(loaded) => {
            if !loaded.rendered_warnings.is_empty() {
                eprint!("{}", loaded.rendered_warnings);
            }
            let mut summary = Summary::of(&loaded.config);
            summary.warnings = ProblemJson::all(&loaded.warnings, &loaded.warning_locations);
            summary.helion_warnings = crate::tune::lint::lint(&dir, &loaded.config)?;
            eprint!("{}", crate::tune::lint::render(&summary.helion_warnings));
            if args.json {
                println!("{}", serde_json::to_string_pretty(&summary)?);
            } else {
                print!("{}", summary.to_text());
            }
            Ok(ExitCode::SUCCESS)
        }
        // Rendered on stderr by `report_error`; with --json the failure document on stdout
        // holds [`Invalid`]'s keys (`super::json`).
        Err(errors) => Err(errors.into()),
    }
}
