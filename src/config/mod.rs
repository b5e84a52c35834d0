//! `build.toml`: every generation read into one typed model ([`model`]), validated with source
//! spans, and migrated to edition 5.

pub mod model;

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
