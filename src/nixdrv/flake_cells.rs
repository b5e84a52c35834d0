//! The cells a kernel's flake builds, when its `flake.nix` changes them.
//!
//! `genKernelFlakeOutputs` takes two arguments that change which cells the flake builds: the
//! `torchVersions` function (it may drop, edit or add build sets of the matrix, in upstream's
//! versions.nix shape) and `systems`. A function is Nix code, which only Nix can evaluate, so
//! `list-variants` and `ci-matrix` do not re-implement it: when `flake.nix` names either one
//! ([`flake_changes_cells`]), they read the flake's own `variants` output (the cells per
//! system, [`flake_cells`]) and resolve the architectures of its compiled cells from the
//! matrix as for any other cell ([`crate::matrix::cells::with_resolved_archs`]). A flake that
//! names neither builds exactly the cells of build.toml and the matrix, which the commands
//! compute without Nix, as before.
//!
//! Without Nix on the machine the commands warn that the flake's filter is not applied and list
//! build.toml's cells; a flake that Nix cannot evaluate is an error with Nix's message.

use anyhow::Context;
use camino::Utf8Path;

use crate::matrix::Cell;

/// The `genKernelFlakeOutputs` arguments that change which cells a kernel's flake builds.
pub const CELL_ARGUMENTS: [&str; 2] = ["torchVersions", "systems"];

/// Whether the Nix text `flake` names one of [`CELL_ARGUMENTS`] outside comments: then its
/// cells can differ from build.toml's, and only Nix can say which they are.
pub fn flake_changes_cells(flake: &str) -> bool {
    let code = strip_comments(flake);
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '\'';
    CELL_ARGUMENTS.iter().any(|arg| {
        code.match_indices(arg).any(|(i, _)| {
            let before = code[..i].chars().next_back();
            let after = code[i + arg.len()..].chars().next();
            !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
        })
    })
}

/// `text` without its Nix comments (`# …` to the end of the line, `/* … */`); strings are
/// kept as they are (a `#` inside a string is taken for a comment, which can only hide a
/// name, never invent one).
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("/*") {
            rest = after.find("*/").map_or("", |end| &after[end + 2..]);
            out.push(' ');
        } else if rest.starts_with('#') {
            rest = rest.find('\n').map_or("", |end| &rest[end..]);
        } else {
            let c = rest.chars().next().unwrap_or_default();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// What the kernel in `dir` says about its flake's cells.
#[derive(Debug)]
pub enum FlakeCells {
    /// No `flake.nix`, or one that names none of [`CELL_ARGUMENTS`]: the cells are build.toml's.
    AsBuildToml,
    /// `flake.nix` changes the cells but Nix cannot be run here (the warning to print).
    NoNix(String),
    /// The flake's `variants` output: every system's cells, in the order of the systems.
    Evaluated(Vec<Cell>),
}

/// The cells the flake in `dir` builds, per [`FlakeCells`].
///
/// Errors: `flake.nix` cannot be read; Nix fails to evaluate the flake's `variants` output
/// ([`eval_variants`]); the output is not a list of cells per system.
pub fn flake_cells(dir: &Utf8Path) -> anyhow::Result<FlakeCells> {
    let flake = dir.join("flake.nix");
    if !flake.is_file() {
        return Ok(FlakeCells::AsBuildToml);
    }
    let text = crate::fsutil::read_to_string_bounded(&flake, 1 << 20, "flake.nix")?;
    if !flake_changes_cells(&text) {
        return Ok(FlakeCells::AsBuildToml);
    }
    if let Err(e) = super::nix_version() {
        return Ok(FlakeCells::NoNix(format!(
            "`{flake}` passes `torchVersions` or `systems`, which only Nix evaluates, and Nix cannot be run here ({}); these are build.toml's cells without the flake's filter",
            e.to_string().lines().next().unwrap_or_default()
        )));
    }
    let stdout = eval_variants(dir, "variants", &[])?;
    let per_system: std::collections::BTreeMap<String, Vec<Cell>> = serde_json::from_str(&stdout)
        .with_context(|| {
            format!("`{dir}#variants` is not a list of cells per system; is the flake made by genKernelFlakeOutputs?")
        })?;
    Ok(FlakeCells::Evaluated(per_system.into_values().flatten().collect()))
}

/// `nix eval --json <dir>#<attr>` (the flake's `variants` or `variants.<system>`) with
/// `eval_flags` (input overrides, lock handling), never writing a lock file: its JSON.
///
/// Errors: Nix cannot be run, or the evaluation fails (the command and Nix's message, with how
/// to work offline when it could not fetch an input).
pub(super) fn eval_variants(dir: &Utf8Path, attr: &str, eval_flags: &[String]) -> anyhow::Result<String> {
    use crate::error::{Error, Kind};
    let nix = super::nix_program()?;
    let mut args: Vec<String> =
        vec!["eval".into(), "--json".into(), super::NO_WRITE_LOCK.into(), format!("{dir}#{attr}")];
    args.extend(eval_flags.iter().cloned());
    let out = crate::process::Cmd::new(&nix).args(args.iter().cloned()).output()?;
    if !out.success() {
        let message = format!("`{nix} {}` failed:\n{}", args.join(" "), out.stderr.trim_end());
        return Err(Error::new(Kind::Nix, message).with_hints(super::offline_hint(&out.stderr)).into());
    }
    Ok(out.stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flake_changes_cells_when_it_names_torch_versions_or_systems_outside_comments() {
        let template = "{\n  inputs.kernel-builder.url = \"github:o/kernel-builder\";\n  outputs = { self, kernel-builder }:\n    kernel-builder.lib.genKernelFlakeOutputs { inherit self; path = ./.; };\n}\n";
        assert!(!flake_changes_cells(template));
        let filtered = template.replace(
            "path = ./.;",
            "path = ./.;\n      torchVersions = defaults: builtins.filter (e: e ? cudaVersion) defaults;",
        );
        assert!(flake_changes_cells(&filtered));
        assert!(flake_changes_cells(
            &template.replace("path = ./.;", "path = ./.; systems = [ \"x86_64-linux\" ];")
        ));
        // Named in a comment only, or as part of a longer name: not an argument.
        assert!(!flake_changes_cells(&template.replace("path = ./.;", "path = ./.; # torchVersions = f;")));
        assert!(!flake_changes_cells(&template.replace("path = ./.;", "path = ./.; /* systems\n = [ ]; */")));
        assert!(!flake_changes_cells(
            &template.replace("path = ./.;", "path = ./.; mySystems = 1; torchVersions2 = 2;")
        ));
    }

    #[test]
    fn comments_are_stripped_up_to_their_end() {
        assert_eq!(strip_comments("a # b\nc /* d */ e"), "a \nc   e");
        assert_eq!(strip_comments("a /* never closed"), "a  ");
        assert_eq!(strip_comments("# only"), "");
    }
}
