//! The real build.toml corpus, the one locator every test uses: `$KERNEL_BUILDER_CORPUS`, else
//! `../shared/corpus` beside the repository. The entries are those of `expected.json` (no test
//! lists the directory itself); this module reads their build.toml texts and materializes an
//! entry as a kernel directory (its build.toml plus an empty file at every path of `files.txt` and
//! `sources_missing_from_files_txt`, the corpus README's recipe).
//!
//! The corpus is not part of this repository, so the tests that read it are compiled as
//! ignored (libtest reports them as `ignored, needs the corpus …`, counted apart from passed
//! tests) unless the cargo feature `corpus-tests` is on. With the feature on, a missing corpus
//! is a failure, never a skip: `scripts/test.sh` turns the feature on exactly when it finds the
//! corpus or `$KERNEL_BUILDER_CORPUS` is set. `.ci/run` runs the suite on a fresh clone without
//! the corpus, then exactly the tests it reported as ignored for it, with `--include-ignored`
//! and `$KERNEL_BUILDER_CORPUS` set, so CI cannot pass without running them: the reason must
//! name the corpus (`needs the corpus` or `needs Nix and the corpus`). Mark such a test with
//! `#[cfg_attr(not(feature = "corpus-tests"), ignore = "needs the corpus: …")]`.

use std::fs;
use std::path::{Path, PathBuf};

use camino::Utf8PathBuf;

/// Where the corpus is looked for: `$KERNEL_BUILDER_CORPUS`, else `../shared/corpus` beside
/// the repository. Does not check that it exists.
pub fn corpus_location() -> PathBuf {
    match std::env::var_os("KERNEL_BUILDER_CORPUS") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus"),
    }
}

/// The corpus directory; panics naming the place looked at when it holds no `expected.json`
/// (only tests compiled with `corpus-tests` call it, and for them a missing corpus is a fault).
pub fn corpus_dir() -> PathBuf {
    let dir = corpus_location();
    assert!(
        dir.join("expected.json").is_file(),
        "corpus not found at {} (set KERNEL_BUILDER_CORPUS, or build without --features corpus-tests to skip the corpus tests)",
        dir.display()
    );
    dir
}

/// Every entry of `expected.json`, sorted by directory name.
pub fn entries() -> Vec<(String, serde_json::Value)> {
    let text = fs::read_to_string(corpus_dir().join("expected.json")).expect("read expected.json");
    let v: serde_json::Value = serde_json::from_str(&text).expect("expected.json is JSON");
    let mut out: Vec<(String, serde_json::Value)> =
        v.as_object().expect("an object").iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(out.len() >= 100, "expected the whole corpus, found {} entries", out.len());
    out
}

/// The name of every corpus entry (from `expected.json`, sorted) whose directory holds a
/// build.toml.
pub fn names() -> Vec<String> {
    entries()
        .into_iter()
        .map(|(n, _)| n)
        .filter(|n| corpus_dir().join(n).join("build.toml").is_file())
        .collect()
}

/// Every corpus entry that has a build.toml: (directory name, its text), sorted by name.
pub fn build_tomls() -> Vec<(String, String)> {
    names()
        .into_iter()
        .map(|n| {
            let text = build_toml(&n);
            (n, text)
        })
        .collect()
}

/// The build.toml text of corpus entry `name`; panics when it cannot be read.
pub fn build_toml(name: &str) -> String {
    let path = corpus_dir().join(name).join("build.toml");
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The expected.json entry of one corpus directory.
pub fn entry(name: &str) -> serde_json::Value {
    entries().into_iter().find(|(n, _)| n == name).map(|(_, v)| v).unwrap_or(serde_json::Value::Null)
}

/// Copy corpus entry `name` into a fresh temporary kernel directory (see [`materialize_into`]).
/// Returns the temp dir guard and its UTF-8 path.
pub fn materialize(name: &str) -> (tempfile::TempDir, Utf8PathBuf) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = Utf8PathBuf::from_path_buf(tmp.path().to_path_buf()).expect("UTF-8 temp path");
    materialize_into(name, dir.as_std_path());
    (tmp, dir)
}

/// Write corpus entry `name` into `dest` (created): its build.toml and an empty file at every
/// path the author's kernel had. A listed path that is also the parent of another listed path
/// (a vendored directory or submodule) is a directory; paths that are absolute or contain
/// `..` are skipped.
pub fn materialize_into(name: &str, dest: &Path) {
    let src = corpus_dir().join(name);
    let mut list: Vec<String> = fs::read_to_string(src.join("files.txt"))
        .unwrap_or_default()
        .lines()
        .map(|l| l.trim().trim_end_matches('/'))
        .filter(|l| !l.is_empty() && *l != "build.toml" && !l.starts_with('/'))
        .filter(|l| !l.split('/').any(|c| c == ".."))
        .map(str::to_owned)
        .collect();
    if let Some(extra) = entry(name).get("sources_missing_from_files_txt").and_then(|v| v.as_array()) {
        list.extend(extra.iter().filter_map(|v| v.as_str()).map(str::to_owned));
    }
    let is_dir =
        |p: &str| list.iter().any(|q| q.len() > p.len() && q.starts_with(p) && q.as_bytes()[p.len()] == b'/');
    fs::create_dir_all(dest).expect("create the kernel directory");
    for rel in list.iter().filter(|p| !is_dir(p)) {
        let path = dest.join(rel);
        fs::create_dir_all(path.parent().expect("a parent")).expect("create dirs");
        fs::write(&path, b"").expect("create file");
    }
    fs::copy(src.join("build.toml"), dest.join("build.toml")).expect("copy build.toml");
}
