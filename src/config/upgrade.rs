//! Interim document upgrade: only recognises edition 5.
//!
//! The full upgrade (v1–v4 → edition 5, keeping comments) replaces this file; the API below is
//! the contract between it and the parser in [`super::parse`].

use super::{Generation, Problem};

/// What [`upgrade`] did to a document.
#[derive(Debug, Clone)]
pub struct Upgrade {
    /// The generation the file was written in.
    pub generation: Generation,
    /// Every edit made, in order (empty for an edition-5 file).
    pub changes: Vec<Change>,
    /// `(new key path, old key path)` for every key that moved, so that diagnostics about the
    /// upgraded document point at the original text.
    pub renames: Vec<(String, String)>,
    /// Problems found while upgrading (a legacy file without a framework section, …).
    pub problems: Vec<Problem>,
}

/// One edit made by [`upgrade`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Edition-5 key path of the edited item.
    pub key_path: String,
    /// What changed, for `update-build` to print.
    pub description: String,
}

/// Turn a document of any generation into an edition-5 document in place.
///
/// Interim version: `general.edition = 5` gives [`Generation::Edition5`]; anything else is
/// reported as [`Generation::V4`] and left unchanged.
pub fn upgrade(doc: &mut toml_edit::DocumentMut) -> Upgrade {
    let edition = doc
        .get("general")
        .and_then(|g| g.get("edition"))
        .and_then(|e| e.as_integer());
    let generation = if edition == Some(5) {
        Generation::Edition5
    } else {
        Generation::V4
    };
    Upgrade {
        generation,
        changes: Vec::new(),
        renames: Vec::new(),
        problems: Vec::new(),
    }
}
