//! The variants of every real `build.toml` in the corpus (`../shared/corpus`) that upstream
//! accepts, compared with what upstream's Nix builder produced (`expected.json`): `variants`
//! (the bundle) and `list_variants` (the flake's `variants`, adding non-bundle cells), per
//! system. Also: every cell name is unique per system and loads under the `kernels` loader's
//! grammar, and the matrix checks report no error for a file upstream builds.

use std::sync::OnceLock;

use kernel_builder::config::{self, Severity};
use kernel_builder::matrix::{self, data::matrix, naming::parse_variant_name, Scope};
use serde_json::Value;

use super::corpus::{entries, materialize};

fn names_of(v: &Value) -> Vec<String> {
    let mut names: Vec<String> =
        v.as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_owned()).collect();
    names.sort();
    names
}

/// One corpus kernel upstream accepts: its directory name, its expected.json entry, and the
/// result of loading it (the rendered errors on failure).
struct Entry {
    dir: String,
    expected: Value,
    loaded: Result<config::BuildConfig, String>,
}

/// Every accepted corpus kernel, materialized and loaded once for all tests of this module.
fn accepted() -> &'static [Entry] {
    static ENTRIES: OnceLock<Vec<Entry>> = OnceLock::new();
    ENTRIES.get_or_init(|| {
        entries()
            .into_iter()
            .filter(|(_, exp)| exp.get("variants").is_some()) // upstream rejects the others
            .map(|(dir, expected)| {
                let (_tmp, root) = materialize(&dir);
                let loaded = config::load(&root).map(|l| l.config).map_err(|e| e.render());
                Entry { dir, expected, loaded }
            })
            .collect()
    })
}

#[test]
#[cfg_attr(
    not(feature = "corpus-tests"),
    ignore = "needs the corpus: cargo test --features corpus-tests (KERNEL_BUILDER_CORPUS or ../shared/corpus)"
)]
fn corpus_variants_equal_upstream() {
    let mut failures = Vec::new();
    for e in accepted() {
        let config = match &e.loaded {
            Ok(c) => c,
            Err(rendered) => {
                failures.push(format!("{}: not loaded:\n{rendered}", e.dir));
                continue;
            }
        };
        for system in &matrix().systems {
            for (key, scope) in [("variants", Scope::Bundle), ("list_variants", Scope::All)] {
                let Some(want) = e.expected.get(key).and_then(|v| v.get(system)) else { continue };
                let want = names_of(want);
                let got: Vec<String> =
                    matrix::cells(config, system, scope).into_iter().map(|c| c.name).collect();
                if got != want {
                    failures.push(format!("{} {key} {system}:\n  got  {got:?}\n  want {want:?}", e.dir));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} differences:\n{}", failures.len(), failures.join("\n"));
    assert_eq!(accepted().len(), 67, "upstream accepts 67 corpus files");
}

#[test]
#[cfg_attr(
    not(feature = "corpus-tests"),
    ignore = "needs the corpus: cargo test --features corpus-tests (KERNEL_BUILDER_CORPUS or ../shared/corpus)"
)]
fn corpus_cells_are_unique_and_loadable_and_checks_find_no_errors() {
    let mut failures = Vec::new();
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    for e in accepted() {
        let Ok(config) = &e.loaded else { continue };
        for system in &matrix().systems {
            let cells = matrix::cells(config, system, Scope::All);
            let mut names: Vec<&str> = cells.iter().map(|c| c.name.as_str()).collect();
            names.dedup();
            if names.len() != cells.len() {
                failures.push(format!("{} {system}: duplicate names {names:?}", e.dir));
            }
            for c in &cells {
                if parse_variant_name(&c.name).is_none() {
                    failures
                        .push(format!("{}: `{}` does not parse under the loader's grammar", e.dir, c.name));
                }
            }
        }
        for p in matrix::check(config) {
            match p.severity {
                Severity::Error => errors.push((e.dir.clone(), p.key_path, p.rule)),
                Severity::Warning => warnings.push((e.dir.clone(), p.key_path, p.rule)),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(errors, Vec::<(String, String, &str)>::new(), "a file upstream builds has matrix errors");
    // The one file that asks for a GPU that does not exist: megablocks lists capability "11.8",
    // which upstream's CMake silently drops; we drop it too, with a warning.
    let unbuilt: Vec<&(String, String, &str)> =
        warnings.iter().filter(|w| w.2 == "capability-not-built").collect();
    assert_eq!(
        unbuilt,
        [&(
            "huggingface__kernels-community__megablocks".to_owned(),
            "kernel.megablocks.cuda-capabilities[10]".to_owned(),
            "capability-not-built"
        )]
    );
}
