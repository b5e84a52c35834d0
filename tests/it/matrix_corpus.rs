//! The variants of every real `build.toml` in the corpus (`../shared/corpus`) that upstream
//! accepts, under the August snapshot `upstream-2026-08` (upstream's matrix at 8ac69fc5),
//! compared with what upstream's Nix builder produced (`expected.json`): `variants` (the
//! bundle) and `list_variants` (the flake's `variants`, adding non-bundle cells), per system.
//! Under the default matrix, every corpus file's lists are pinned by an insta snapshot
//! (`snapshots/integration__matrix_corpus__default_matrix_variants.snap`). Also: every cell
//! name is unique per system and loads under the `kernels` loader's grammar, and the matrix
//! checks report no error for a file upstream builds, under either matrix.

use std::sync::OnceLock;

use kernel_builder::config::{self, Severity};
use kernel_builder::kernel;
use kernel_builder::matrix::{self, data::matrix, data::named, naming::parse_variant_name, Scope};
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
                let loaded = kernel::load(&root).map(|l| l.config).map_err(|e| e.render());
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
                let august = named("upstream-2026-08").unwrap();
                let got: Vec<String> =
                    matrix::cells_in(august, config, system, scope).into_iter().map(|c| c.name).collect();
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
    for (e, pin) in accepted().iter().flat_map(|e| [(e, None), (e, Some("upstream-2026-08"))]) {
        let Ok(config) = &e.loaded else { continue };
        let mut config = config.clone();
        config.general.matrix = pin.map(str::to_owned);
        let config = &config;
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
        for p in matrix::check(config, &matrix::KernelCells::of(config)) {
            match p.severity {
                Severity::Error => errors.push((e.dir.clone(), p.key_path, p.rule)),
                Severity::Warning if pin.is_some() => warnings.push((e.dir.clone(), p.key_path, p.rule)),
                Severity::Warning => {}
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

/// Every corpus file that loads, under the default matrix: its bundle and `--all` lists per
/// system, one block per file, pinned by an insta snapshot (review changes with
/// `cargo insta review`). Files that do not load are listed with the rules of their errors.
#[test]
#[cfg_attr(
    not(feature = "corpus-tests"),
    ignore = "needs the corpus: cargo test --features corpus-tests (KERNEL_BUILDER_CORPUS or ../shared/corpus)"
)]
fn default_matrix_variants() {
    let mut out = String::new();
    let mut loaded = 0;
    for (dir, _) in entries() {
        let (_tmp, root) = materialize(&dir);
        out.push_str(&format!("## {dir}\n"));
        match kernel::load(&root) {
            Err(e) => {
                let rules: Vec<&str> = e.errors().map(|p| p.rule).collect();
                out.push_str(&format!("not loaded: {}\n", rules.join(", ")));
            }
            Ok(l) => {
                loaded += 1;
                for system in &matrix().systems {
                    let bundle: Vec<String> =
                        matrix::cells(&l.config, system, Scope::Bundle).into_iter().map(|c| c.name).collect();
                    let extra: Vec<String> = matrix::cells(&l.config, system, Scope::All)
                        .into_iter()
                        .filter(|c| !c.bundle)
                        .map(|c| c.name)
                        .collect();
                    if bundle.is_empty() && extra.is_empty() {
                        continue;
                    }
                    out.push_str(&format!("{system} bundle: {}\n", bundle.join(" ")));
                    if !extra.is_empty() {
                        out.push_str(&format!("{system} also: {}\n", extra.join(" ")));
                    }
                }
            }
        }
    }
    assert!(loaded >= 67, "only {loaded} corpus files load");
    insta::assert_snapshot!(out);
}
