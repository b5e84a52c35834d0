//! What `update-build` does to a `build.toml` text, without touching the filesystem: the
//! legacy forms upgraded to edition 5 ([`super::upgrade`]), then edition 6
//! ([`upgrade::to_edition6`]), and the license decided (`--license` for a file without one).
//! The CLI validates the new text and writes it.

use anyhow::bail;
use camino::Utf8Path;
use toml_edit::DocumentMut;

use super::upgrade::{self, Change};
use super::{Generation, Problem, Severity};

/// The outcome of upgrading one `build.toml` text, before anything is written.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The generation the text was written in.
    pub generation: Generation,
    /// Every edit, in order; empty when the file is already current.
    pub changes: Vec<Change>,
    /// Warnings and errors found while upgrading. Errors mean the file must not be written.
    pub problems: Vec<Problem>,
    /// The edition-6 text (equal to the input when `changes` is empty).
    pub new_text: String,
}

impl Plan {
    /// Whether the file needs rewriting.
    pub fn needs_update(&self) -> bool {
        !self.changes.is_empty()
    }

    /// Whether a problem forbids writing the new text.
    pub fn has_errors(&self) -> bool {
        self.problems.iter().any(|p| p.severity == Severity::Error)
    }
}

/// Upgrade a `build.toml` text to edition 6 without touching the filesystem.
///
/// `license` is inserted as `general.license` when the file has none; without it a file with
/// no license (of any generation, editions 5 and 6 included) gets an error problem (rule
/// `missing-license`). A file with another license keeps it, with a warning (rule
/// `license-kept`). `display_path` names the file in
/// error messages. Errors: the text is not TOML, as check-config reports it (a
/// [`crate::config::ConfigErrors`] at its line and column, the line cut around the column).
pub fn plan(display_path: &str, text: &str, license: Option<&str>) -> anyhow::Result<Plan> {
    let mut doc: DocumentMut = text.parse().map_err(|e| {
        let style = crate::config::diagnostics::RenderStyle::detect();
        crate::config::syntax_error(Utf8Path::new(display_path), text, &e, style)
    })?;
    let up = upgrade::upgrade(&mut doc);
    let mut changes = up.changes;
    let mut problems = up.problems;
    if !up.generation.is_legacy() {
        changes.extend(upgrade::dash_name(&mut doc));
    }
    let to6 = upgrade::to_edition6(&mut doc);
    if up.generation.is_legacy() {
        // The legacy upgrade added `edition = 5`: say it as the edition written.
        for c in changes.iter_mut().filter(|c| c.key_path == "general.edition") {
            c.description = "added `edition = 6`".to_owned();
        }
        changes.extend(to6.into_iter().filter(|c| c.key_path != "general.edition"));
    } else {
        changes.extend(to6);
    }
    // The upgrade only warns about a missing license; writing one is decided here.
    problems.retain(|p| p.rule != "legacy-no-license");
    if let Some(general) = doc.get_mut("general").filter(|g| g.is_table_like()) {
        let has_license = general.get("license").is_some();
        match (has_license, license) {
            (false, Some(spdx)) => {
                let spdx = spdx.trim();
                if spdx.is_empty() {
                    bail!("`--license` needs an SPDX license id, e.g. `--license Apache-2.0`");
                }
                insert_license(general, spdx);
                changes.push(Change {
                    key_path: "general.license".to_owned(),
                    description: format!("added `license = \"{spdx}\"` (from `--license`)"),
                });
            }
            // Editions 5 and 6 require it too (check-config refuses the file without one).
            (false, None) => problems.push(Problem {
                severity: Severity::Error,
                key_path: "general.license".to_owned(),
                rule: "missing-license",
                message: "the file has no `license`, which edition 6 requires".to_owned(),
                help: Some(
                    "run again with `--license <SPDX id>` (e.g. `--license Apache-2.0`), or add `license = \"…\"` to `[general]`"
                        .to_owned(),
                ),
            }),
            (true, Some(spdx)) => {
                let current = general.get("license").and_then(|l| l.as_str()).unwrap_or_default().to_owned();
                if current != spdx.trim() {
                    problems.push(Problem {
                        severity: Severity::Warning,
                        key_path: "general.license".to_owned(),
                        rule: "license-kept",
                        message: format!(
                            "the file already has `license = \"{current}\"`, which is kept: `--license {}` only adds a license to a file without one",
                            spdx.trim()
                        ),
                        help: Some("to change the license, edit `license` in `[general]`".to_owned()),
                    });
                }
            }
            (true, None) => {}
        }
        // A license already in the file is kept as it is; say so when it is not SPDX.
        if let Some(Err(e)) =
            general.get("license").and_then(|l| l.as_str()).map(crate::config::license::check)
        {
            problems.push(Problem {
                severity: Severity::Warning,
                key_path: "general.license".to_owned(),
                rule: "license-not-spdx",
                message: e.message,
                help: Some(format!(
                    "{} (update-build keeps the license as it is; edit it in `[general]`)",
                    e.help
                )),
            });
        }
    }
    let new_text = if changes.is_empty() { text.to_owned() } else { doc.to_string() };
    Ok(Plan { generation: up.generation, changes, problems, new_text })
}

fn insert_license(general: &mut toml_edit::Item, spdx: &str) {
    let Some(t) = general.as_table_like_mut() else { return };
    t.insert("license", toml_edit::value(spdx));
    // Place it after name/version/edition, where edition-5 files conventionally have it.
    let keys: Vec<String> = t.iter().map(|(k, _)| k.to_owned()).collect();
    let idx = keys
        .iter()
        .enumerate()
        .filter(|(_, k)| ["name", "version", "edition"].contains(&k.as_str()))
        .map(|(i, _)| i + 1)
        .max()
        .unwrap_or(0);
    let tail: Vec<String> = keys.iter().filter(|k| k.as_str() != "license").skip(idx).cloned().collect();
    let mut moved = Vec::new();
    for k in &tail {
        let key = t.key(k).cloned().unwrap_or_else(|| toml_edit::Key::new(k.as_str()));
        if let Some(v) = t.remove(k) {
            moved.push((key, v));
        }
    }
    for (k, v) in moved {
        t.entry_format(&k).or_insert(v);
    }
}
