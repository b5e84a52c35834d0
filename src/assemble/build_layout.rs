//! The build layout of a variant directory (`[general] build-layout`, edition 6): `files`, the
//! package's files as they are, or `zip`, the package's Python and data files in one archive
//! `<metadata id>.zip` that kernels ≥ 0.19.0 imports through zipimport.
//!
//! A zip-layout variant (what kernels 0.19.1's importer reads: the archive is named for the
//! `id` of `metadata.json`, which says `"build-layout": "zip"`; the package's search path is
//! the variant directory first, then the archive):
//!
//! ```text
//! torch211-cxx11-cpu-x86_64-linux/
//!   _relu_cpu_4b825dc.zip          __init__.py, _ops.py, every other package file
//!   _relu_cpu_4b825dc.abi3.so      native modules stay outside: a shared object cannot be
//!                                  loaded from inside an archive
//!   symbols.json, metadata.json    read by `kernels` without importing the package
//! ```
//!
//! The archive is reproducible: entries sorted by path (bytes), no directory entries, every
//! entry dated 1980-01-01 00:00:00 (the earliest a zip can say), mode 0644, deflated at level 9
//! by the locked `zip`/`flate2` crates, no extra fields and no comment; so a rebuild from the
//! same sources gives the same bytes and the same NAR hash.
//!
//! Helion kernels cannot use it: Helion finds its heuristic files next to the kernel's source
//! file on the file system (kernels-loader-and-helion.md B7), which it cannot read inside an
//! archive, so a zip-layout variant would run untuned; [`check_layout`] refuses such a kernel.

use std::io::Write;

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};

use crate::config::BuildConfig;

/// How the files of a variant are laid out: the configuration model's `[general]
/// build-layout`, one enum for build.toml, the assembler and metadata.json.
pub use crate::config::BuildLayout;

/// The layout `config` asks for (`[general] build-layout`, edition 6; `files` otherwise). The
/// hidden `assemble` command's `--build-layout` overrides it.
pub fn layout_of(config: &BuildConfig) -> BuildLayout {
    config.general.build_layout
}

/// A layout by its name (`files`, `zip`); the error names both.
pub fn parse_layout(s: &str) -> anyhow::Result<BuildLayout> {
    BuildLayout::from_name(s)
        .with_context(|| format!("unknown build layout `{s}`; expected `files` or `zip`"))
}

/// The archive of a zip-layout variant whose metadata `id` is `id`.
pub fn archive_name(id: &str) -> String {
    format!("{id}.zip")
}

/// Whether the kernel in `config` can be built in `layout`: a kernel with Helion heuristic
/// files (`has_heuristics`) cannot be zipped (see the module docs).
pub fn check_layout(config: &BuildConfig, layout: BuildLayout, has_heuristics: bool) -> anyhow::Result<()> {
    anyhow::ensure!(
        layout == BuildLayout::Files || !has_heuristics,
        "`{}` asks for `build-layout = \"zip\"`, but the kernel ships Helion heuristic files \
         (`_helion_aot_*`), which Helion looks for next to the kernel's source on the file system \
         and cannot find inside an archive (the kernel would run untuned); use `build-layout = \"files\"`",
        config.path
    );
    Ok(())
}

/// Whether the file `rel` of a variant stays outside the archive: what `kernels` reads without
/// importing the package (`metadata.json`, `symbols.json`) and native modules (a shared object
/// is loaded from the file system; the package's search path has the variant directory first).
pub fn stays_outside(rel: &Utf8Path) -> bool {
    if rel.as_str() == "metadata.json" || rel.as_str() == "symbols.json" {
        return true;
    }
    let name = rel.file_name().unwrap_or_default();
    [".so", ".dylib", ".pyd", ".dll"].iter().any(|ext| name.ends_with(ext)) || name.contains(".so.")
}

/// Move the package files of the variant directory `dir` (everything but [`stays_outside`]
/// and Python bytecode) into `dir/<id>.zip`, written reproducibly (module docs), and remove the
/// directories this leaves empty. Returns the paths archived, sorted.
///
/// Errors: no `__init__.py` at the top of the package (the loader executes the archive's
/// `__init__.py`), a file that cannot be read, the archive cannot be written. The archive is
/// written under a temporary name and renamed, so `dir` never holds a partial `<id>.zip`.
pub fn zip_package(dir: &Utf8Path, id: &str) -> anyhow::Result<Vec<Utf8PathBuf>> {
    let mut files: Vec<Utf8PathBuf> = Vec::new();
    let walk = walkdir::WalkDir::new(dir)
        .min_depth(1)
        .into_iter()
        .filter_entry(|e| !crate::layout::is_bytecode(e.file_name(), e.file_type().is_dir()));
    for entry in walk {
        let entry = entry.with_context(|| format!("cannot list `{dir}`"))?;
        if entry.file_type().is_dir() {
            continue;
        }
        let rel = entry
            .path()
            .strip_prefix(dir)
            .ok()
            .and_then(|p| Utf8Path::from_path(p).map(Utf8Path::to_owned))
            .with_context(|| format!("`{}` is not a UTF-8 path below `{dir}`", entry.path().display()))?;
        anyhow::ensure!(
            entry.file_type().is_file(),
            "`{dir}/{rel}` is not a regular file; a zip-layout variant archives regular files only"
        );
        if !stays_outside(&rel) {
            files.push(rel);
        }
    }
    // Bytes of the path with `/` separators, so the order does not depend on the walk.
    files.sort_by(|a, b| a.as_str().as_bytes().cmp(b.as_str().as_bytes()));
    anyhow::ensure!(
        files.iter().any(|f| f.as_str() == "__init__.py"),
        "cannot build the zip layout of `{dir}`: the package has no `__init__.py` at its top"
    );

    let archive = dir.join(archive_name(id));
    let partial = dir.join(format!(".{}.partial", archive_name(id)));
    let written = write_archive(dir, &files, &partial);
    if let Err(e) = written {
        let _ = std::fs::remove_file(&partial);
        return Err(e);
    }
    std::fs::rename(&partial, &archive)
        .with_context(|| format!("cannot rename `{partial}` to `{archive}`"))?;

    for f in &files {
        let path = dir.join(f);
        std::fs::remove_file(&path).with_context(|| format!("cannot remove `{path}` after archiving it"))?;
    }
    // Directories left empty, deepest first.
    let mut dirs: Vec<Utf8PathBuf> =
        files.iter().flat_map(|f| f.ancestors().skip(1)).map(Utf8Path::to_owned).collect();
    dirs.retain(|d| !d.as_str().is_empty());
    dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    dirs.dedup();
    for d in dirs {
        let path = dir.join(&d);
        let empty = std::fs::read_dir(&path).map(|mut r| r.next().is_none()).unwrap_or(false);
        if empty {
            std::fs::remove_dir(&path)
                .with_context(|| format!("cannot remove the empty directory `{path}`"))?;
        }
    }
    Ok(files)
}

/// Write `files` (relative to `dir`, in this order) into a new archive at `to`.
fn write_archive(dir: &Utf8Path, files: &[Utf8PathBuf], to: &Utf8Path) -> anyhow::Result<()> {
    let out = std::fs::File::create(to).with_context(|| format!("cannot create `{to}`"))?;
    let mut zip = zip::ZipWriter::new(std::io::BufWriter::new(out));
    for rel in files {
        let path = dir.join(rel);
        let bytes = std::fs::read(&path).with_context(|| format!("cannot read `{path}`"))?;
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .compression_level(Some(9))
            .last_modified_time(zip::DateTime::default())
            .unix_permissions(super::write::FILE_MODE)
            .large_file(bytes.len() as u64 >= u64::from(u32::MAX));
        zip.start_file(rel.as_str(), options).with_context(|| format!("cannot add `{rel}` to `{to}`"))?;
        zip.write_all(&bytes).with_context(|| format!("cannot write `{rel}` into `{to}`"))?;
    }
    let mut inner = zip.finish().with_context(|| format!("cannot finish `{to}`"))?;
    inner.flush().with_context(|| format!("cannot write `{to}`"))?;
    let file =
        inner.into_inner().map_err(|e| e.into_error()).with_context(|| format!("cannot write `{to}`"))?;
    file.sync_all().with_context(|| format!("cannot write `{to}`"))?;
    std::fs::set_permissions(to, std::os::unix::fs::PermissionsExt::from_mode(super::write::FILE_MODE))
        .with_context(|| format!("cannot set permissions on `{to}`"))
}

/// Check a built variant directory `dir` whose `metadata.json` holds `metadata`, as `upload`
/// does before sending it: when it says `"build-layout": "zip"`, `<id>.zip` must be there, be a
/// readable archive with `__init__.py` at its top, and `kernels-minver` must keep loaders older
/// than 0.19.0 (which ignore the key and find no `__init__.py`) away. Files-layout variants
/// (no key, or `"files"`) pass. Errors: one sentence, naming the file.
pub fn check_built_variant(dir: &Utf8Path, metadata: &serde_json::Value) -> anyhow::Result<()> {
    let layout = match metadata.get("build-layout") {
        None => return Ok(()),
        Some(v) => v.as_str().and_then(BuildLayout::from_name).with_context(|| {
            format!("`{dir}/metadata.json` has an unknown `build-layout` {v}; expected \"files\" or \"zip\"")
        })?,
    };
    if layout == BuildLayout::Files {
        return Ok(());
    }
    let id = metadata.get("id").and_then(|v| v.as_str()).with_context(|| {
        format!("`{dir}/metadata.json` has no `id`, so the archive of its zip layout has no name")
    })?;
    let minver_ok = metadata
        .get("kernels-minver")
        .and_then(|v| v.as_str())
        .and_then(|v| {
            let parts: Vec<u32> = v.split('.').map(|p| p.parse().ok()).collect::<Option<_>>()?;
            Some(parts >= vec![0, 19, 0])
        })
        .unwrap_or(false);
    anyhow::ensure!(
        minver_ok,
        "`{dir}/metadata.json` says `\"build-layout\": \"zip\"` without `\"kernels-minver\"` 0.19.0 or newer, so older loaders would try it and fail; rebuild the variant"
    );
    let archive = dir.join(archive_name(id));
    let file = std::fs::File::open(&archive).map_err(|e| {
        anyhow::anyhow!(
            "`{archive}` cannot be opened ({e}); a zip-layout variant needs it, rebuild the variant"
        )
    })?;
    let mut zip = zip::ZipArchive::new(std::io::BufReader::new(file)).map_err(|e| {
        anyhow::anyhow!("`{archive}` is not a readable zip archive ({e}); rebuild the variant")
    })?;
    anyhow::ensure!(
        zip.by_name("__init__.py").is_ok(),
        "`{archive}` has no `__init__.py` at its top, so the loader cannot import it; rebuild the variant"
    );
    Ok(())
}

/// An archive's entries in archive order: name, and contents (or why they were not read).
type Entries = Vec<(String, Result<Vec<u8>, String>)>;

/// The first difference of the archive `actual` from `expected` (of the same variant), for
/// `verify`: an entry missing from `actual`, the first entry (in `expected`'s order) whose
/// contents differ, an entry only `actual` has; `None` when every
/// entry's name and contents agree (the bytes may still differ, e.g. in timestamps), or when
/// either is not a readable archive. Reads at most `limit` bytes of any one entry.
pub fn first_entry_difference(expected: &Utf8Path, actual: &Utf8Path, limit: u64) -> Option<String> {
    let entries = |p: &Utf8Path| -> Option<Entries> {
        let f = std::fs::File::open(p).ok()?;
        let mut z = zip::ZipArchive::new(std::io::BufReader::new(f)).ok()?;
        let mut out = Vec::new();
        for i in 0..z.len() {
            let mut e = z.by_index(i).ok()?;
            let name = e.name().to_owned();
            let data = if e.size() > limit {
                Err(format!("{} bytes", e.size()))
            } else {
                let mut buf = Vec::new();
                std::io::Read::read_to_end(&mut e, &mut buf).ok()?;
                Ok(buf)
            };
            out.push((name, data));
        }
        Some(out)
    };
    let (ea, eb) = (entries(expected)?, entries(actual)?);
    for (name, data) in &ea {
        match eb.iter().find(|(n, _)| n == name) {
            None => return Some(format!("the archive entry `{name}` is missing")),
            Some((_, other)) if other != data => return Some(format!("the archive entry `{name}` differs")),
            Some(_) => {}
        }
    }
    if let Some((name, _)) = eb.iter().find(|(n, _)| !ea.iter().any(|(m, _)| m == n)) {
        return Some(format!("the archive entry `{name}` is unexpected"));
    }
    let names = |e: &[(String, _)]| e.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    (names(&ea) != names(&eb)).then(|| "the archive entries are in another order".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> (tempfile::TempDir, Utf8PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let d = Utf8Path::from_path(t.path()).unwrap().to_owned();
        for (rel, text) in files {
            let p = d.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, text).unwrap();
        }
        (t, d)
    }

    fn listing(d: &Utf8Path) -> Vec<String> {
        let mut out: Vec<String> = walkdir::WalkDir::new(d)
            .min_depth(1)
            .sort_by_file_name()
            .into_iter()
            .map(|e| e.unwrap().path().strip_prefix(d).unwrap().to_string_lossy().into_owned())
            .collect();
        out.sort();
        out
    }

    #[test]
    fn package_files_go_into_the_archive_native_modules_and_metadata_stay() {
        let (_t, d) = tree(&[
            ("__init__.py", "from ._ops import ops\n"),
            ("_ops.py", "ops = 1\n"),
            ("layers/__init__.py", "\n"),
            ("data/table.json", "{}\n"),
            ("_relu_cpu_1.abi3.so", "ELF"),
            ("libextra.so.1", "ELF"),
            ("symbols.json", "{}\n"),
            ("metadata.json", "{}\n"),
            ("__pycache__/_ops.cpython-311.pyc", "x"),
        ]);
        let archived = zip_package(&d, "_relu_cpu_1").unwrap();
        assert_eq!(archived, ["__init__.py", "_ops.py", "data/table.json", "layers/__init__.py"]);
        assert_eq!(
            listing(&d),
            [
                "__pycache__",
                "__pycache__/_ops.cpython-311.pyc",
                "_relu_cpu_1.abi3.so",
                "_relu_cpu_1.zip",
                "libextra.so.1",
                "metadata.json",
                "symbols.json"
            ]
        );
        let f = std::fs::File::open(d.join("_relu_cpu_1.zip")).unwrap();
        let mut z = zip::ZipArchive::new(f).unwrap();
        let names: Vec<String> = z.file_names().map(str::to_owned).collect();
        assert_eq!(names, ["__init__.py", "_ops.py", "data/table.json", "layers/__init__.py"]);
        let e = z.by_name("_ops.py").unwrap();
        assert_eq!(e.compression(), zip::CompressionMethod::Deflated);
        assert_eq!(e.unix_mode(), Some(0o100644));
        let t = e.last_modified().unwrap();
        assert_eq!((t.year(), t.month(), t.day(), t.hour(), t.minute(), t.second()), (1980, 1, 1, 0, 0, 0));
    }

    #[test]
    fn the_archive_is_the_same_bytes_whatever_the_files_times_and_creation_order() {
        let (_a, da) = tree(&[("__init__.py", "a\n"), ("z.py", "z\n"), ("m/b.py", "b\n")]);
        let (_b, db) = tree(&[("m/b.py", "b\n"), ("z.py", "z\n"), ("__init__.py", "a\n")]);
        let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        std::fs::File::options().write(true).open(db.join("z.py")).unwrap().set_modified(old).unwrap();
        zip_package(&da, "_k_cpu_1").unwrap();
        zip_package(&db, "_k_cpu_1").unwrap();
        let (za, zb) = (
            std::fs::read(da.join("_k_cpu_1.zip")).unwrap(),
            std::fs::read(db.join("_k_cpu_1.zip")).unwrap(),
        );
        assert_eq!(za, zb);
        assert_eq!(first_entry_difference(&da.join("_k_cpu_1.zip"), &db.join("_k_cpu_1.zip"), 1 << 20), None);
        assert_eq!(listing(&da), ["_k_cpu_1.zip"]);
    }

    #[test]
    fn a_package_without_init_is_refused_and_nothing_is_written() {
        let (_t, d) = tree(&[("relu/__init__.py", "\n"), ("_ops.py", "\n")]);
        let err = zip_package(&d, "_k_cpu_1").unwrap_err().to_string();
        assert_eq!(
            err,
            format!("cannot build the zip layout of `{d}`: the package has no `__init__.py` at its top")
        );
        assert_eq!(listing(&d), ["_ops.py", "relu", "relu/__init__.py"]);
    }

    #[test]
    fn entry_differences_are_named() {
        let (_a, da) = tree(&[("__init__.py", "a\n"), ("x.py", "1\n")]);
        let (_b, db) = tree(&[("__init__.py", "a\n"), ("x.py", "2\n"), ("y.py", "\n")]);
        zip_package(&da, "k").unwrap();
        zip_package(&db, "k").unwrap();
        let (za, zb) = (da.join("k.zip"), db.join("k.zip"));
        assert_eq!(
            first_entry_difference(&za, &zb, 1 << 20).as_deref(),
            Some("the archive entry `x.py` differs")
        );
        let (_c, dc) = tree(&[("__init__.py", "a\n"), ("x.py", "1\n"), ("y.py", "\n")]);
        zip_package(&dc, "k").unwrap();
        assert_eq!(
            first_entry_difference(&za, &dc.join("k.zip"), 1 << 20).as_deref(),
            Some("the archive entry `y.py` is unexpected")
        );
    }

    #[test]
    fn built_zip_variants_are_checked_before_upload() {
        let (_t, d) = tree(&[("__init__.py", "\n")]);
        zip_package(&d, "_k_cpu_1").unwrap();
        let meta = |v: serde_json::Value| check_built_variant(&d, &v).map_err(|e| e.to_string());
        let good = serde_json::json!({"id": "_k_cpu_1", "build-layout": "zip", "kernels-minver": "0.19.0"});
        assert_eq!(meta(good), Ok(()));
        assert_eq!(meta(serde_json::json!({"id": "_other"})), Ok(()));
        assert_eq!(meta(serde_json::json!({"id": "_other", "build-layout": "files"})), Ok(()));
        assert_eq!(
            meta(serde_json::json!({"id": "_k_cpu_1", "build-layout": "zip", "kernels-minver": "0.18.3"})),
            Err(format!("`{d}/metadata.json` says `\"build-layout\": \"zip\"` without `\"kernels-minver\"` 0.19.0 or newer, so older loaders would try it and fail; rebuild the variant"))
        );
        let err =
            meta(serde_json::json!({"id": "_other", "build-layout": "zip", "kernels-minver": "0.19.1"}))
                .unwrap_err();
        assert!(err.starts_with(&format!("`{d}/_other.zip` cannot be opened (")), "{err}");
        std::fs::write(d.join("_bad.zip"), "not a zip").unwrap();
        let err = meta(serde_json::json!({"id": "_bad", "build-layout": "zip", "kernels-minver": "0.19.1"}))
            .unwrap_err();
        assert!(err.starts_with(&format!("`{d}/_bad.zip` is not a readable zip archive (")), "{err}");
        assert_eq!(
            meta(serde_json::json!({"id": "_k_cpu_1", "build-layout": "Zip"})),
            Err(format!(
                "`{d}/metadata.json` has an unknown `build-layout` \"Zip\"; expected \"files\" or \"zip\""
            ))
        );
    }

    #[test]
    fn layouts_parse_and_helion_heuristics_refuse_zip() {
        assert_eq!(parse_layout("zip").unwrap(), BuildLayout::Zip);
        assert_eq!(
            parse_layout("Zip").unwrap_err().to_string(),
            "unknown build layout `Zip`; expected `files` or `zip`"
        );
        let c = crate::matrix::testutil::noarch_config(&[crate::config::Backend::Cuda]);
        assert!(check_layout(&c, BuildLayout::Zip, false).is_ok());
        assert!(check_layout(&c, BuildLayout::Files, true).is_ok());
        let err = check_layout(&c, BuildLayout::Zip, true).unwrap_err().to_string();
        assert!(
            err.starts_with(
                "`build.toml` asks for `build-layout = \"zip\"`, but the kernel ships Helion heuristic files"
            ),
            "{err}"
        );
    }
}
