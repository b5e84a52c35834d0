//! The variants of every real `build.toml` in the corpus (`../shared/corpus`) that upstream
//! accepts, compared with what upstream's Nix builder produced (`expected.json`): `variants`
//! (the bundle) and `list_variants` (the flake's `variants`, adding non-bundle cells), per
//! system. Also: every cell name is unique per system and loads under the `kernels` loader's
//! grammar, and the matrix checks report no error for a file upstream builds.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use camino::{Utf8Path, Utf8PathBuf};
use kernel_builder::config::{self, Severity};
use kernel_builder::matrix::{self, data::matrix, naming::parse_variant_name, Scope};
use serde_json::Value;

/// The corpus directory: `KERNEL_BUILDER_CORPUS`, else `shared/corpus` beside the repository.
fn corpus_dir() -> Utf8PathBuf {
    if let Ok(dir) = std::env::var("KERNEL_BUILDER_CORPUS") {
        return Utf8PathBuf::from(dir);
    }
    let root = Utf8Path::new(env!("CARGO_MANIFEST_DIR"));
    for candidate in [root.join("shared/corpus"), root.join("../shared/corpus")] {
        if candidate.join("expected.json").is_file() {
            return candidate;
        }
    }
    panic!("the build.toml corpus is missing: expected ../shared/corpus beside the repository (or set KERNEL_BUILDER_CORPUS)");
}

/// Copy one corpus kernel into `dest` as its author had it: build.toml, and an empty file at
/// every path of files.txt and of `sources_missing_from_files_txt`.
pub fn materialize(entry: &Utf8Path, expected: &Value, dest: &Utf8Path) {
    std::fs::copy(entry.join("build.toml"), dest.join("build.toml")).unwrap();
    let listing = std::fs::read_to_string(entry.join("files.txt")).unwrap_or_default();
    let extra = expected["sources_missing_from_files_txt"].as_array().cloned().unwrap_or_default();
    let paths: Vec<String> = listing
        .lines()
        .map(str::to_owned)
        .chain(extra.iter().filter_map(|v| v.as_str().map(str::to_owned)))
        .map(|p| p.trim().trim_end_matches('/').to_owned())
        .filter(|p| !p.is_empty() && p != "build.toml" && !p.starts_with('/') && !p.split('/').any(|c| c == ".."))
        .collect();
    // A listed path that is the parent of another listed path is a directory, not a file.
    let dirs: std::collections::BTreeSet<&str> =
        paths.iter().flat_map(|p| p.match_indices('/').map(move |(i, _)| &p[..i])).collect();
    for rel in &paths {
        let path = dest.join(rel);
        if dirs.contains(rel.as_str()) {
            std::fs::create_dir_all(&path).unwrap();
        } else {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, b"").unwrap();
        }
    }
}

fn expected() -> BTreeMap<String, Value> {
    let text = std::fs::read_to_string(corpus_dir().join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn names_of(v: &Value) -> Vec<String> {
    let mut names: Vec<String> = v.as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_owned()).collect();
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
        let corpus = corpus_dir();
        expected()
            .into_iter()
            .filter(|(_, exp)| exp.get("variants").is_some()) // upstream rejects the others
            .map(|(dir, expected)| {
                let tmp = tempfile::tempdir().unwrap();
                let root = Utf8Path::from_path(tmp.path()).unwrap();
                materialize(&corpus.join(&dir), &expected, root);
                let loaded = config::load(root).map(|l| l.config).map_err(|e| e.render());
                Entry { dir, expected, loaded }
            })
            .collect()
    })
}

#[test]
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
                let got: Vec<String> = matrix::cells(config, system, scope).into_iter().map(|c| c.name).collect();
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
                    failures.push(format!("{}: `{}` does not parse under the loader's grammar", e.dir, c.name));
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
    let unbuilt: Vec<&(String, String, &str)> = warnings.iter().filter(|w| w.2 == "capability-not-built").collect();
    assert_eq!(
        unbuilt,
        [&(
            "huggingface__kernels-community__megablocks".to_owned(),
            "kernel.megablocks.cuda-capabilities[10]".to_owned(),
            "capability-not-built"
        )]
    );
}
