//! The jobs that the Nix library's derivations run with the orchestrator as their builder
//! (`kernel-builder nix-support …`), and the copy of built variants into `build/`.
//!
//! These run inside the Nix sandbox, where there is no shell and no coreutils: joining cells
//! into a bundle, writing the `build-and-copy` runner, checking a cell's layout, and failing a
//! not-yet-buildable cell with a message.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use anyhow::{bail, Context};
use camino::{Utf8Path, Utf8PathBuf};

use crate::abi::AbiPolicy;
pub use crate::fsutil::copy_tree;

/// The sorted top-level entries of `dir`; errors name the directory.
fn entries(dir: &Utf8Path) -> anyhow::Result<Vec<Utf8PathBuf>> {
    let mut out = Vec::new();
    for e in dir.read_dir_utf8().with_context(|| format!("cannot read directory `{dir}`"))? {
        let e = e.with_context(|| format!("cannot read directory `{dir}`"))?;
        out.push(e.path().to_owned());
    }
    out.sort();
    Ok(out)
}

/// `nix-support join --out OUT DIR…`: copy every top-level entry of each DIR into OUT (the
/// bundle). Two DIRs with the same entry are an error naming both.
/// With `source` (the kernel's filtered source, the one the cells were assembled from), also
/// write `OUT/hashes.json`, the same reproducibility manifest a native build writes, so the
/// bundle and `build-and-copy --nix never` give the same tree.
pub fn join(out: &Utf8Path, dirs: &[Utf8PathBuf], source: Option<&Utf8Path>) -> anyhow::Result<()> {
    join_cells(out, dirs)?;
    let Some(source) = source else { return Ok(()) };
    if entries(out)?.is_empty() {
        return Ok(()); // a system without cells: an empty bundle, nothing to record
    }
    let (_kernel, set) = crate::kernel::load_with_sources(source)?;
    let variants: Vec<String> = entries(out)?
        .iter()
        .filter(|p| p.is_dir())
        .filter_map(|p| p.file_name().map(str::to_owned))
        .collect();
    let manifest = crate::hash::manifest::Manifest::for_bundle(out, &variants, &set.tree_id())?;
    manifest.write(&crate::hash::manifest::Manifest::path_in(out))
}

fn join_cells(out: &Utf8Path, dirs: &[Utf8PathBuf]) -> anyhow::Result<()> {
    fs::create_dir_all(out).with_context(|| format!("cannot create `{out}`"))?;
    let mut seen: std::collections::BTreeMap<String, &Utf8Path> = Default::default();
    for dir in dirs {
        for e in entries(dir)? {
            let name = e.file_name().unwrap_or_default().to_owned();
            if let Some(first) = seen.insert(name.clone(), dir) {
                bail!("`{name}` is in both `{first}` and `{dir}`; two cells of a bundle must have different variant names");
            }
            copy_tree(&e, &out.join(&name))?;
        }
    }
    Ok(())
}

/// `nix-support check-manifest --out OUT --expected FILE BUNDLE`: the bundle's variants,
/// hashed again here (its own `hashes.json` is not trusted), equal the committed manifest
/// `FILE`: same source tree id, and every variant of the bundle listed with the same NAR hash.
/// Variants of the manifest that this system's bundle lacks are not an error: a manifest may
/// cover the bundles of several systems. Writes OUT on success.
///
/// Errors: unreadable manifests, or every difference found, one per line.
pub fn check_manifest(out: &Utf8Path, expected: &Utf8Path, bundle: &Utf8Path) -> anyhow::Result<()> {
    use crate::hash::manifest::{compare, Difference, Manifest};
    let expected = Manifest::read(expected)?;
    let recorded = Manifest::read(&Manifest::path_in(bundle))
        .with_context(|| format!("the bundle `{bundle}` has no readable hashes.json"))?;
    let variants: Vec<String> = entries(bundle)?
        .iter()
        .filter(|p| p.is_dir())
        .filter_map(|p| p.file_name().map(str::to_owned))
        .collect();
    let actual = Manifest::for_bundle(bundle, &variants, &recorded.source)?;
    let diffs: Vec<String> = compare(&expected, &actual)
        .into_iter()
        .filter(|d| !matches!(d, Difference::MissingVariant { .. }))
        .map(|d| d.to_string())
        .collect();
    if !diffs.is_empty() {
        bail!(
            "the bundle does not match the committed manifest (build/hashes.json):\n  {}\n\
             rebuild and commit the new manifest if the change is intended",
            diffs.join("\n  ")
        );
    }
    fs::write(out, format!("bundle matches the committed manifest ({} variants)\n", variants.len()))
        .with_context(|| format!("cannot write `{out}`"))
}

/// Quote `s` for a POSIX shell (single quotes).
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// `nix-support runner --out OUT --orchestrator BIN --bundle B`: write `OUT/bin/build-and-copy`,
/// a `/bin/sh` script that refreshes `./build` (or its first argument) from the bundle.
pub fn write_runner(out: &Utf8Path, orchestrator: &Utf8Path, bundle: &Utf8Path) -> anyhow::Result<()> {
    let bin = out.join("bin");
    fs::create_dir_all(&bin).with_context(|| format!("cannot create `{bin}`"))?;
    let script = format!(
        "#!/bin/sh\n# Replace ./build/<variant> with each variant of the kernel bundle (writable copies).\nexec {} nix-support copy-variants {} \"${{1:-build}}\"\n",
        sh_quote(orchestrator.as_str()),
        sh_quote(bundle.as_str())
    );
    let path = bin.join("build-and-copy");
    fs::write(&path, script).with_context(|| format!("cannot write `{path}`"))?;
    fs::set_permissions(&path, fs::Permissions::from_mode(0o555))
        .with_context(|| format!("cannot set permissions on `{path}`"))?;
    Ok(())
}

/// Copy each top-level entry of `from` (a bundle or one cell's output) into `dest`, replacing
/// an existing `dest/<entry>` and leaving every other entry of `dest` alone.
///
/// Each entry is copied into a temporary directory inside `dest` and renamed into place, so
/// `dest/<entry>` is always either the old tree or the whole new one. Returns the names copied.
pub fn copy_variants(from: &Utf8Path, dest: &Utf8Path) -> anyhow::Result<Vec<String>> {
    use crate::hash::manifest::{Manifest, FILE_NAME};
    fs::create_dir_all(dest).with_context(|| format!("cannot create `{dest}`"))?;
    let mut copied = Vec::new();
    for e in entries(from)?.into_iter().filter(|e| e.file_name() != Some(FILE_NAME)) {
        let name = e.file_name().unwrap_or_default();
        copied.push(name.to_owned());
        let staging = tempfile::Builder::new()
            .prefix(".kernel-builder-copy-")
            .tempdir_in(dest)
            .with_context(|| format!("cannot create a temporary directory in `{dest}`"))?;
        let staging_path = Utf8Path::from_path(staging.path())
            .with_context(|| format!("temporary directory in `{dest}` is not UTF-8"))?;
        // Interrupted: the staging directory goes (a swap in progress finishes first).
        let _staging_registered =
            crate::interrupt::remove_on_interrupt(staging_path, crate::interrupt::Removal::All);
        let new = staging_path.join(name);
        copy_tree(&e, &new)?;
        let target = dest.join(name);
        // The old tree is moved into the staging directory: an interruption must not remove
        // it before the new one is in place.
        let swapping = crate::interrupt::hold();
        if fs::symlink_metadata(&target).is_ok() {
            // Move the old tree aside first: the rename below then cannot fail on a
            // non-empty directory, and the old tree goes away with the staging directory.
            let old = staging_path.join(".old");
            fs::rename(&target, &old).with_context(|| format!("cannot move `{target}` aside"))?;
            // A link in the variant's place goes as a link: what it points to is not ours.
            if fs::symlink_metadata(&old).is_ok_and(|m| m.is_dir()) {
                make_writable(&old)?;
            }
        }
        fs::rename(&new, &target).with_context(|| format!("cannot move the new `{name}` into `{dest}`"))?;
        drop(swapping);
        staging.close().with_context(|| format!("cannot remove the old `{target}`"))?;
    }
    // The bundle's manifest covers the variants just copied; merge it into DEST's.
    let manifest = Manifest::path_in(from);
    if manifest.is_file() {
        Manifest::read(&manifest)?.update_in(dest)?;
    }
    Ok(copied)
}

/// Make a tree deletable (copies from older tools may be read-only, like the store).
fn make_writable(path: &Utf8Path) -> anyhow::Result<()> {
    for e in walkdir::WalkDir::new(path) {
        let e = e.with_context(|| format!("cannot walk `{path}`"))?;
        if e.file_type().is_dir() {
            fs::set_permissions(e.path(), fs::Permissions::from_mode(0o755))
                .with_context(|| format!("cannot make `{}` writable", e.path().display()))?;
        }
    }
    Ok(())
}

/// `Some(entry)` when the archive `zip` has no entry `entry`; `None` also when it cannot be
/// read (the caller has checked that it can).
fn zip_lacks(zip: &Utf8Path, entry: &str) -> Option<String> {
    let f = fs::File::open(zip).ok()?;
    let mut z = zip::ZipArchive::new(std::io::BufReader::new(f)).ok()?;
    let missing = z.by_name(entry).is_err();
    missing.then(|| entry.to_owned())
}

/// `nix-support check-cell --out OUT --variant V CELL`: the built cell holds exactly
/// `V/`, with `__init__.py`, `_ops.py` (inside `<id>.zip` for the zip layout, whose archive
/// must be sound: [`crate::assemble::build_layout::check_built_variant`]) and a
/// `metadata.json` that has `name`, `id`
/// (`_<python name>_…`), `version` and `backend.type`, and no `__pycache__` or `*.pyc`
/// anywhere. On success writes `OUT` (a file naming the checks passed).
///
/// Errors list every problem found, naming the files.
pub fn check_cell(
    out: &Utf8Path,
    variant: &str,
    cell: &Utf8Path,
    abi: Option<&AbiPolicy>,
) -> anyhow::Result<()> {
    let mut problems = Vec::new();
    let names: Vec<String> =
        entries(cell)?.iter().map(|p| p.file_name().unwrap_or_default().to_owned()).collect();
    if names != [variant] {
        problems.push(format!("`{cell}` must hold exactly `{variant}/`, found {names:?}"));
    }
    let root = cell.join(variant);
    // A zip-layout variant has its package files in `<id>.zip` (assemble::build_layout).
    let meta: Option<serde_json::Value> =
        fs::read_to_string(root.join("metadata.json")).ok().and_then(|t| serde_json::from_str(&t).ok());
    let archive = meta
        .as_ref()
        .filter(|m| m.get("build-layout").and_then(|l| l.as_str()) == Some("zip"))
        .and_then(|m| m.get("id")?.as_str().map(crate::assemble::build_layout::archive_name));
    if let (Some(name), Some(m)) = (&archive, &meta) {
        if let Err(why) = crate::assemble::build_layout::check_built_variant(&root, m) {
            problems.push(format!("{why:#}"));
        } else if let Some(missing) = zip_lacks(&root.join(name), "_ops.py") {
            problems.push(format!("`{variant}/{name}` has no `{missing}`"));
        }
    } else {
        for f in ["__init__.py", "_ops.py"] {
            if !root.join(f).is_file() {
                problems.push(format!("`{variant}/{f}` is missing"));
            }
        }
    }
    if !root.join("metadata.json").is_file() {
        problems.push(format!("`{variant}/metadata.json` is missing"));
    }
    if let Ok(text) = fs::read_to_string(root.join("metadata.json")) {
        match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(m) => {
                for key in ["name", "id", "license"] {
                    if !m.get(key).is_some_and(|v| v.is_string()) {
                        problems.push(format!("`{variant}/metadata.json`: `{key}` must be a string"));
                    }
                }
                if !m.get("version").is_some_and(|v| v.is_u64()) {
                    problems
                        .push(format!("`{variant}/metadata.json`: `version` must be a non-negative integer"));
                }
                if !m.pointer("/backend/type").is_some_and(|v| v.is_string()) {
                    problems.push(format!("`{variant}/metadata.json`: `backend.type` must be a string"));
                }
                if let Some(noarch_backend) = variant.strip_prefix("torch-") {
                    let ty = m.pointer("/backend/type").and_then(|v| v.as_str()).unwrap_or("");
                    let expected = if noarch_backend == "npu" { "cann" } else { noarch_backend };
                    if !noarch_backend.starts_with("stable-abi") && ty != expected {
                        problems.push(format!(
                            "`{variant}/metadata.json`: `backend.type` is `{ty}`, expected `{expected}`"
                        ));
                    }
                }
            }
            Err(e) => problems.push(format!("`{variant}/metadata.json` is not JSON: {e}")),
        }
    }
    for e in walkdir::WalkDir::new(&root).sort_by_file_name() {
        let Ok(e) = e else { continue };
        if e.depth() > 0 && crate::layout::is_bytecode(e.file_name(), e.file_type().is_dir()) {
            problems.push(format!("`{}` must not be shipped", e.path().display()));
        }
    }
    if !problems.is_empty() {
        bail!("cell `{variant}` ({cell}) fails the layout check:\n  {}", problems.join("\n  "));
    }
    let mut report = format!("layout and metadata of {variant}: ok\n");
    if let Some(policy) = abi {
        let r = crate::abi::check_variant(&root, policy)?;
        let text = r.render_text();
        if !r.is_ok() {
            bail!("cell `{variant}` ({cell}) fails the ABI check:\n{text}");
        }
        report.push_str(&format!("ABI of {variant}: ok\n{text}"));
    }
    fs::write(out, report).with_context(|| format!("cannot write `{out}`"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utf8(p: &std::path::Path) -> Utf8PathBuf {
        Utf8PathBuf::from_path_buf(p.to_owned()).unwrap()
    }

    fn write(p: &Utf8Path, text: &str) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    #[test]
    fn a_link_in_a_variants_place_is_replaced_and_its_target_left_alone() {
        let t = tempfile::tempdir().unwrap();
        let root = utf8(t.path());
        let bundle = root.join("bundle");
        write(&bundle.join("torch-cuda/__init__.py"), "new");
        let victim = root.join("victim");
        write(&victim.join("ro/keep.py"), "keep");
        fs::set_permissions(victim.join("ro"), fs::Permissions::from_mode(0o555)).unwrap();
        let build = root.join("build");
        fs::create_dir(&build).unwrap();
        std::os::unix::fs::symlink("../victim", build.join("torch-cuda")).unwrap();
        copy_variants(&bundle, &build).unwrap();
        assert_eq!(fs::read_to_string(build.join("torch-cuda/__init__.py")).unwrap(), "new");
        assert_eq!(fs::read_to_string(victim.join("ro/keep.py")).unwrap(), "keep");
        let mode = fs::metadata(victim.join("ro")).unwrap().permissions().mode() & 0o777;
        fs::set_permissions(victim.join("ro"), fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(mode, 0o555, "the link's target was made writable");
    }

    #[test]
    fn copy_variants_replaces_only_the_bundle_variants() {
        let t = tempfile::tempdir().unwrap();
        let root = utf8(t.path());
        let bundle = root.join("bundle");
        write(&bundle.join("torch-cuda/__init__.py"), "new");
        fs::set_permissions(bundle.join("torch-cuda/__init__.py"), fs::Permissions::from_mode(0o444))
            .unwrap();
        let build = root.join("build");
        write(&build.join("torch-cuda/stale.py"), "old");
        write(&build.join("torch-rocm/__init__.py"), "keep");
        copy_variants(&bundle, &build).unwrap();
        copy_variants(&bundle, &build).unwrap();
        let mut found: Vec<String> = walkdir::WalkDir::new(&build)
            .sort_by_file_name()
            .into_iter()
            .map(|e| e.unwrap().path().strip_prefix(&build).unwrap().display().to_string())
            .collect();
        found.sort();
        assert_eq!(
            found,
            ["", "torch-cuda", "torch-cuda/__init__.py", "torch-rocm", "torch-rocm/__init__.py"]
        );
        assert_eq!(fs::read_to_string(build.join("torch-cuda/__init__.py")).unwrap(), "new");
        let mode = fs::metadata(build.join("torch-cuda/__init__.py")).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644);
    }

    #[test]
    fn join_refuses_two_cells_with_one_variant() {
        let t = tempfile::tempdir().unwrap();
        let root = utf8(t.path());
        write(&root.join("a/torch-cuda/x.py"), "a");
        write(&root.join("b/torch-cuda/x.py"), "b");
        write(&root.join("c/torch-rocm/x.py"), "c");
        let err = join(&root.join("out1"), &[root.join("a"), root.join("b")], None).unwrap_err().to_string();
        assert!(err.contains("`torch-cuda` is in both"), "{err}");
        join(&root.join("out2"), &[root.join("a"), root.join("c")], None).unwrap();
        let names: Vec<_> =
            entries(&root.join("out2")).unwrap().iter().map(|p| p.file_name().unwrap().to_owned()).collect();
        assert_eq!(names, ["torch-cuda", "torch-rocm"]);
    }

    #[test]
    fn check_cell_lists_every_problem() {
        let t = tempfile::tempdir().unwrap();
        let root = utf8(t.path());
        let cell = root.join("cell");
        write(&cell.join("torch-cuda/__init__.py"), "");
        write(
            &cell.join("torch-cuda/metadata.json"),
            r#"{"name":"x","id":"_x_cuda_1","license":"mit","version":1,"backend":{"type":"rocm"}}"#,
        );
        write(&cell.join("torch-cuda/__pycache__/a.pyc"), "");
        let err = check_cell(&root.join("ok"), "torch-cuda", &cell, None).unwrap_err().to_string();
        assert!(err.contains("`torch-cuda/_ops.py` is missing"), "{err}");
        assert!(err.contains("`backend.type` is `rocm`, expected `cuda`"), "{err}");
        assert!(err.contains("__pycache__"), "{err}");
        fs::remove_dir_all(cell.join("torch-cuda/__pycache__")).unwrap();
        write(&cell.join("torch-cuda/_ops.py"), "");
        write(
            &cell.join("torch-cuda/metadata.json"),
            r#"{"name":"x","id":"_x_cuda_1","license":"mit","version":1,"backend":{"type":"cuda"}}"#,
        );
        check_cell(&root.join("ok"), "torch-cuda", &cell, None).unwrap();
        assert_eq!(fs::read_to_string(root.join("ok")).unwrap(), "layout and metadata of torch-cuda: ok\n");
    }

    #[test]
    fn check_cell_looks_into_the_archive_of_a_zip_layout() {
        let t = tempfile::tempdir().unwrap();
        let root = utf8(t.path());
        let cell = root.join("cell");
        let v = cell.join("torch-cpu");
        write(&v.join("__init__.py"), "");
        crate::assemble::build_layout::zip_package(&v, "_x_cpu_1").unwrap();
        let meta = r#"{"name":"x","id":"_x_cpu_1","license":"mit","version":1,"backend":{"type":"cpu"},"build-layout":"zip","kernels-minver":"0.19.0"}"#;
        write(&v.join("metadata.json"), meta);
        let err = check_cell(&root.join("ok"), "torch-cpu", &cell, None).unwrap_err().to_string();
        assert!(err.contains("`torch-cpu/_x_cpu_1.zip` has no `_ops.py`"), "{err}");
        assert!(!err.contains("`torch-cpu/__init__.py` is missing"), "{err}");
        fs::remove_file(v.join("_x_cpu_1.zip")).unwrap();
        write(&v.join("__init__.py"), "");
        write(&v.join("_ops.py"), "");
        crate::assemble::build_layout::zip_package(&v, "_x_cpu_1").unwrap();
        check_cell(&root.join("ok"), "torch-cpu", &cell, None).unwrap();
        assert_eq!(fs::read_to_string(root.join("ok")).unwrap(), "layout and metadata of torch-cpu: ok\n");
    }

    #[test]
    fn runner_quotes_its_paths() {
        let t = tempfile::tempdir().unwrap();
        let root = utf8(t.path());
        write_runner(
            &root,
            Utf8Path::new("/nix/store/a-kb/bin/kernel-builder"),
            Utf8Path::new("/nix/store/b-bundle"),
        )
        .unwrap();
        assert_eq!(
            fs::read_to_string(root.join("bin/build-and-copy")).unwrap(),
            "#!/bin/sh\n# Replace ./build/<variant> with each variant of the kernel bundle (writable copies).\nexec '/nix/store/a-kb/bin/kernel-builder' nix-support copy-variants '/nix/store/b-bundle' \"${1:-build}\"\n"
        );
    }
}
