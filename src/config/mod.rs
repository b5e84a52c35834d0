//! `build.toml`: every generation read into one typed model ([`model`]), validated with source
//! spans, and migrated to edition 5.

pub mod model;
pub mod upgrade;

pub use model::*;

/// All the errors found in one `build.toml`, ready to print with their source lines.
#[derive(Debug)]
pub struct ConfigErrors {
    pub rendered: String,
}

impl ConfigErrors {
    /// Every error, rendered as `file:line:column`, the source line, the rule and the fix.
    pub fn render(&self) -> String {
        self.rendered.clone()
    }
}

impl std::fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.rendered)
    }
}

impl std::error::Error for ConfigErrors {}

/// How serious a [`Problem`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Warning,
    Error,
}

/// One finding about a `build.toml`, located by its key path rather than by byte offset, so
/// that checks outside the parser (for example the matrix checks in [`crate::matrix`]) can
/// report problems that the diagnostics renderer then points at in the source file.
///
/// `key_path` uses dots between keys and `[i]` for array items, with the edition-5 key names:
/// `general.backends[2]`, `kernel.relu.cuda-capabilities[0]`, `torch-noarch`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub severity: Severity,
    pub key_path: String,
    /// Short rule name, e.g. `unknown-backend`, `capability-out-of-range`.
    pub rule: &'static str,
    /// What is wrong, naming the value.
    pub message: String,
    /// The fix, when one is obvious (`did you mean \`metal\`?`).
    pub help: Option<String>,
}
