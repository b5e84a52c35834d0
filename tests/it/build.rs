//! `kernel-builder build-and-copy --nix never` and `kernel-builder assemble` on a small noarch
//! Helion-style kernel made in a temporary directory: exact trees, exact metadata, byte-identical
//! rebuilds, variant filtering, all-or-nothing failure, the uid against real git, provenance.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;

use assert_cmd::Command;
use base64::Engine;
use camino::Utf8Path;
use sha2::{Digest as _, Sha256};

use kernel_builder::hash::manifest::Manifest;
use kernel_builder::source::SourceSet;

use super::util::git;

const BUILD_TOML: &str = r#"[general]
name = "vector-add"
version = 1
edition = 5
license = "Apache-2.0"
upstream = "https://github.com/example/vector-add"
backends = ["cuda", "rocm", "xpu"]
python-depends = ["helion"]

[torch-noarch]
pyext = ["py", "json"]
"#;

const INIT_PY: &str = "from .vector_add import vector_add\n\n__all__ = [\"vector_add\"]\n";
const VECTOR_ADD_PY: &str = "import helion\nimport torch\n\n\ndef vector_add(x, y):\n    return x + y\n";
const CONFIG_JSON: &str = "{\"block_sizes\": [256]}\n";
const HEURISTIC_PY: &str = "def key_vector_add(*args):\n    return 0\n\n\ndef autotune_vector_add(*args):\n    return {\"block_sizes\": [1024]}\n";

/// The git tree id of the fixture's source set (build.toml, the four package files), as
/// `git rev-parse HEAD:<kernel dir>` prints it; `uid_is_gits_tree_id` checks it against git.
const FIXTURE_TREE_ID: &str = "3eec1c19ce414c99e04cf81024358cdd58ea4166";

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// Write the fixture kernel into `dir`: the source set plus files that must not count (a
/// README, `__pycache__`, a `.pyc`, a `.gitignore`, a file whose extension is not in pyext).
fn fixture(dir: &Path) {
    write(&dir.join("build.toml"), BUILD_TOML);
    let pkg = dir.join("torch-ext/vector_add");
    write(&pkg.join("__init__.py"), INIT_PY);
    write(&pkg.join("vector_add.py"), VECTOR_ADD_PY);
    write(&pkg.join("configs/default.json"), CONFIG_JSON);
    write(&pkg.join("_helion_aot_vector_add_cuda_sm90.py"), HEURISTIC_PY);
    write(&pkg.join("__pycache__/vector_add.cpython-312.pyc"), "compiled");
    write(&pkg.join("stale.pyc"), "compiled");
    write(&pkg.join("notes.txt"), "not packaged");
    write(&pkg.join(".gitignore"), "*.pyc\n");
    write(&dir.join("README.md"), "# vector-add\n");
}

/// What every build of the fixture says about `notes.txt`.
const NOTES_WARNING: &str = "warning: 1 file in `torch-ext/vector_add/` is not packaged because its extension is not in `torch-noarch.pyext` (py, json): `torch-ext/vector_add/notes.txt`\n";

/// The source set's paths, relative to the kernel directory.
const SOURCE_SET: [&str; 5] = [
    "build.toml",
    "torch-ext/vector_add/__init__.py",
    "torch-ext/vector_add/_helion_aot_vector_add_cuda_sm90.py",
    "torch-ext/vector_add/configs/default.json",
    "torch-ext/vector_add/vector_add.py",
];

/// The cache directory of these tests' builds (the native cell cache, among others): in
/// target/tmp, not the user's cache. Shared by the tests, so a test that asserts `built` passes
/// `--no-cache`.
const IT_CACHE: &str = concat!(env!("CARGO_TARGET_TMPDIR"), "/kernel-builder-cache");

/// The `kernel-builder` binary with git's redirecting variables removed, caching in
/// [`IT_CACHE`].
fn kb(cwd: &Path) -> Command {
    let mut c = super::util::kb();
    c.current_dir(cwd).env("KERNEL_BUILDER_CACHE_DIR", IT_CACHE);
    c
}

fn build(dir: &Path, extra: &[&str]) -> std::process::Output {
    kb(dir).args(["build-and-copy", "--nix", "never"]).args(extra).output().unwrap()
}

fn build_ok(dir: &Path, extra: &[&str]) -> String {
    let out = build(dir, extra);
    assert!(out.status.success(), "build failed:\n{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Every entry under `dir`: relative path → (mode, bytes); directories get empty bytes.
fn tree(dir: &Path) -> BTreeMap<String, (u32, Vec<u8>)> {
    let mut out = BTreeMap::new();
    for e in walkdir::WalkDir::new(dir).min_depth(1).sort_by_file_name() {
        let e = e.unwrap();
        let rel = e.path().strip_prefix(dir).unwrap().to_str().unwrap().to_owned();
        let meta = fs::symlink_metadata(e.path()).unwrap();
        let bytes = if meta.is_file() { fs::read(e.path()).unwrap() } else { Vec::new() };
        out.insert(rel, (meta.permissions().mode() & 0o7777, bytes));
    }
    out
}

/// The regular files under `dir`, relative, sorted.
fn files(dir: &Path) -> Vec<String> {
    walkdir::WalkDir::new(dir)
        .sort_by_file_name()
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| e.path().strip_prefix(dir).unwrap().to_str().unwrap().to_owned())
        .collect()
}

/// The names directly in `dir`, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    names
}

fn b64sha(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(Sha256::digest(text.as_bytes()))
}

fn uid() -> &'static str {
    &FIXTURE_TREE_ID[..7]
}

fn ops_py(ns: &str, variant: &str) -> String {
    format!(
        "# Generated by kernel-builder for the `{variant}` variant; do not edit.\nimport torch\n\n# Ops registered by this kernel live in this namespace; the unique part keeps two builds of\n# different sources apart when both are loaded.\nops = torch.ops.{ns}\n\n\ndef add_op_namespace_prefix(op_name: str) -> str:\n    \"\"\"Qualify `op_name` with this variant's op namespace (`namespace::op_name`).\"\"\"\n    return f\"{ns}::{{op_name}}\"\n"
    )
}

#[test]
fn noarch_bundle_has_the_exact_tree() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    let stdout = build_ok(t.path(), &["--no-cache"]);
    let u = uid();
    assert_eq!(
        stdout,
        format!(
            "built torch-cuda (7 files, id _vector_add_cuda_{u}) -> ./build/torch-cuda\n\
             built torch-rocm (6 files, id _vector_add_rocm_{u}) -> ./build/torch-rocm\n\
             built torch-xpu (6 files, id _vector_add_xpu_{u}) -> ./build/torch-xpu\n"
        )
    );
    let build = t.path().join("build");
    let got: Vec<(String, u32)> = tree(&build).into_iter().map(|(k, (m, _))| (k, m)).collect();
    let d = 0o755;
    let f = 0o644;
    let expected: Vec<(String, u32)> = [
        ("hashes.json", f),
        ("torch-cuda", d),
        ("torch-cuda/__init__.py", f),
        ("torch-cuda/_helion_aot_vector_add_cuda_sm90.py", f),
        ("torch-cuda/_ops.py", f),
        ("torch-cuda/configs", d),
        ("torch-cuda/configs/default.json", f),
        ("torch-cuda/metadata.json", f),
        ("torch-cuda/symbols.json", f),
        ("torch-cuda/vector_add.py", f),
        ("torch-rocm", d),
        ("torch-rocm/__init__.py", f),
        ("torch-rocm/_ops.py", f),
        ("torch-rocm/configs", d),
        ("torch-rocm/configs/default.json", f),
        ("torch-rocm/metadata.json", f),
        ("torch-rocm/symbols.json", f),
        ("torch-rocm/vector_add.py", f),
        ("torch-xpu", d),
        ("torch-xpu/__init__.py", f),
        ("torch-xpu/_ops.py", f),
        ("torch-xpu/configs", d),
        ("torch-xpu/configs/default.json", f),
        ("torch-xpu/metadata.json", f),
        ("torch-xpu/symbols.json", f),
        ("torch-xpu/vector_add.py", f),
    ]
    .into_iter()
    .map(|(p, m)| (p.to_owned(), m))
    .collect();
    assert_eq!(got, expected);

    // Package files are copied byte for byte; _ops.py names the variant's namespace.
    let cuda = build.join("torch-cuda");
    assert_eq!(fs::read_to_string(cuda.join("vector_add.py")).unwrap(), VECTOR_ADD_PY);
    assert_eq!(fs::read_to_string(cuda.join("_helion_aot_vector_add_cuda_sm90.py")).unwrap(), HEURISTIC_PY);
    let ns = format!("_vector_add_cuda_{u}");
    assert_eq!(fs::read_to_string(cuda.join("_ops.py")).unwrap(), ops_py(&ns, "torch-cuda"));
    // symbols.json, read from the sources (no Python runs in a noarch build).
    let symbols: serde_json::Value =
        serde_json::from_slice(&fs::read(cuda.join("symbols.json")).unwrap()).unwrap();
    let param = |name: &str| serde_json::json!({"name": name, "kind": "POSITIONAL_OR_KEYWORD", "default": null, "annotation": null});
    assert_eq!(
        symbols,
        serde_json::json!({
            "schema_version": 1,
            "module": ns,
            "functions": [{
                "name": "vector_add",
                "qualname": "vector_add",
                "module": format!("{ns}.vector_add"),
                "kind": "function",
                "doc": null,
                "signature": {"parameters": [param("x"), param("y")], "return_annotation": null},
            }],
            "layers": [],
        })
    );
    assert_eq!(
        fs::read_to_string(build.join("torch-rocm/_ops.py")).unwrap(),
        ops_py(&format!("_vector_add_rocm_{u}"), "torch-rocm")
    );

    let ops = ops_py(&ns, "torch-cuda");
    let expected_metadata = format!(
        r#"{{
  "name": "vector-add",
  "id": "{ns}",
  "version": 1,
  "license": "Apache-2.0",
  "upstream": "https://github.com/example/vector-add",
  "python-depends": [
    "helion"
  ],
  "kernel-depends": [],
  "backend": {{
    "type": "cuda"
  }},
  "kernels-minver": "0.17.0",
  "digest": {{
    "algorithm": "sha256",
    "files": {{
      "__init__.py": "{}",
      "_helion_aot_vector_add_cuda_sm90.py": "{}",
      "_ops.py": "{}",
      "configs/default.json": "{}",
      "symbols.json": "{}",
      "vector_add.py": "{}"
    }}
  }},
  "provenance": {{
    "kernel-builder": {{
      "version": "{}"
    }}
  }}
}}
"#,
        b64sha(INIT_PY),
        b64sha(HEURISTIC_PY),
        b64sha(&ops),
        b64sha(CONFIG_JSON),
        b64sha(&fs::read_to_string(cuda.join("symbols.json")).unwrap()),
        b64sha(VECTOR_ADD_PY),
        env!("CARGO_PKG_VERSION"),
    );
    assert_eq!(fs::read_to_string(cuda.join("metadata.json")).unwrap(), expected_metadata);

    // The manifest: the NAR hash of each variant and the source's tree id.
    let sri = |v: &str| kernel_builder::hash::nar_hash_sri(&build.join(v)).unwrap();
    assert_eq!(
        fs::read_to_string(build.join("hashes.json")).unwrap(),
        format!(
            "{{\n  \"format\": \"kernel-builder-hashes-v1\",\n  \"kernel_builder\": \"{}\",\n  \"source\": \"{FIXTURE_TREE_ID}\",\n  \"variants\": {{\n    \"torch-cuda\": \"{}\",\n    \"torch-rocm\": \"{}\",\n    \"torch-xpu\": \"{}\"\n  }}\n}}\n",
            env!("CARGO_PKG_VERSION"),
            sri("torch-cuda"),
            sri("torch-rocm"),
            sri("torch-xpu")
        )
    );

    // The digest is the one the hash module (and so `verify`) computes for the directory.
    let digest = kernel_builder::hash::digest::variant_digest(Utf8Path::from_path(&cuda).unwrap()).unwrap();
    let written: serde_json::Value = serde_json::from_str(&expected_metadata).unwrap();
    assert_eq!(serde_json::to_value(&digest).unwrap(), written["digest"]);
}

#[test]
fn rebuilds_are_byte_identical_anywhere_under_any_umask() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let b_dir = b.path().join("some/deeper/place");
    fixture(a.path());
    fixture(&b_dir);
    build_ok(a.path(), &[]);
    let first = tree(&a.path().join("build"));
    // Rebuild in place (replacing the old tree), and elsewhere under another umask and locale.
    build_ok(a.path(), &[]);
    assert_eq!(tree(&a.path().join("build")), first);
    let out = std::process::Command::new("sh")
        .current_dir(&b_dir)
        .env("LC_ALL", "C")
        .env("TZ", "Pacific/Kiritimati")
        .args([
            "-c",
            &format!("umask 077 && exec '{}' build-and-copy --nix never", crate::util::kb_path().display()),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(tree(&b_dir.join("build")), first);
    for v in ["torch-cuda", "torch-rocm", "torch-xpu"] {
        let ha = kernel_builder::hash::nar_hash(&a.path().join("build").join(v)).unwrap();
        let hb = kernel_builder::hash::nar_hash(&b_dir.join("build").join(v)).unwrap();
        assert_eq!(ha, hb, "{v}");
    }
}

#[test]
fn variant_filter_rebuilds_only_the_named_variants() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    build_ok(t.path(), &[]);
    let build = t.path().join("build");
    // Something else in build/ and an old rocm variant that must survive.
    fs::write(build.join("CARD.md"), "card").unwrap();
    fs::write(build.join("torch-rocm/marker"), "old").unwrap();
    let rocm_before = tree(&build.join("torch-rocm"));
    let xpu_before = tree(&build.join("torch-xpu"));

    write(&t.path().join("torch-ext/vector_add/vector_add.py"), "def vector_add(x, y):\n    return y + x\n");
    let stdout = build_ok(t.path(), &["--variant", "torch-cuda", "--no-cache"]);
    assert!(stdout.starts_with("built torch-cuda (7 files, id _vector_add_cuda_"), "{stdout}");
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert_eq!(tree(&build.join("torch-rocm")), rocm_before);
    assert_eq!(tree(&build.join("torch-xpu")), xpu_before);
    assert_eq!(fs::read_to_string(build.join("CARD.md")).unwrap(), "card");
    assert_eq!(
        fs::read_to_string(build.join("torch-cuda/vector_add.py")).unwrap(),
        "def vector_add(x, y):\n    return y + x\n"
    );
    // The new source has a new uid.
    let meta = fs::read_to_string(build.join("torch-cuda/metadata.json")).unwrap();
    assert!(!meta.contains(uid()), "{meta}");
    // No temporary directory is left behind.
    assert_eq!(entries(&build), ["CARD.md", "hashes.json", "torch-cuda", "torch-rocm", "torch-xpu"]);
    // The manifest names one source: the old variants were built from another one.
    let manifest_path = Utf8Path::from_path(&build).unwrap().join("hashes.json");
    let manifest = Manifest::read(&manifest_path).unwrap();
    assert_eq!(manifest.variants.keys().collect::<Vec<_>>(), ["torch-cuda"]);
    assert_eq!(
        manifest.variants["torch-cuda"],
        kernel_builder::hash::nar_hash_sri(&build.join("torch-cuda")).unwrap()
    );
    // Rebuilding another variant from the same source keeps torch-cuda's entry as recorded,
    // even after an edit to its tree (the manifest does not bless it).
    let cuda_hash = manifest.variants["torch-cuda"].clone();
    fs::write(build.join("torch-cuda/edited.txt"), "x").unwrap();
    build_ok(t.path(), &["--variant", "torch-xpu"]);
    let manifest = Manifest::read(&manifest_path).unwrap();
    assert_eq!(manifest.variants.keys().collect::<Vec<_>>(), ["torch-cuda", "torch-xpu"]);
    assert_eq!(manifest.variants["torch-cuda"], cuda_hash);
    assert_eq!(
        manifest.variants["torch-xpu"],
        kernel_builder::hash::nar_hash_sri(&build.join("torch-xpu")).unwrap()
    );
}

/// A variant left from a build of other sources is dropped from the manifest: the build says
/// so, and `verify` (without `--variant`) checks it instead of passing it over.
#[test]
fn stale_variant_left_by_a_partial_rebuild_is_reported() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    build_ok(t.path(), &[]);
    write(&t.path().join("torch-ext/vector_add/vector_add.py"), "def vector_add(x, y):\n    return y + x\n");
    let out = build(t.path(), &["--variant", "torch-cuda"]);
    assert!(out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    for v in ["torch-rocm", "torch-xpu"] {
        assert!(
            stderr.contains(&format!(
                "build/{v}` is left from an earlier build and is not recorded in `hashes.json`"
            )),
            "{stderr}"
        );
    }
    assert!(!stderr.contains("torch-cuda`"), "{stderr}");
    let (code, stdout, _) = verify(t.path(), &[]);
    assert_eq!(code, 1, "{stdout}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("torch-cuda: same (sha256-"), "{stdout}");
    assert_eq!(lines[1], "torch-rocm: different", "{stdout}");
    assert!(stdout.contains("hashes.json has no entry for `torch-rocm`"), "{stdout}");
    assert!(stdout.contains("torch-xpu: different"), "{stdout}");
}

/// A killed build leaves its temporary directory in build/; the next build removes it.
#[test]
fn leftover_tmp_dir_of_a_killed_build_is_removed() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    build_ok(t.path(), &[]);
    let left = t.path().join("build/.kernel-builder-tmp-AbC123");
    write(&left.join("new/torch-cuda/big.py"), "x");
    let out = build(t.path(), &[]);
    assert!(out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("build/.kernel-builder-tmp-AbC123`: removed, left by an interrupted build"),
        "{stderr}"
    );
    assert!(!left.exists());
    assert_eq!(entries(&t.path().join("build")), ["hashes.json", "torch-cuda", "torch-rocm", "torch-xpu"]);
}

/// A `build/hashes.json` that cannot be replaced fails the build before any variant moves.
#[test]
fn manifest_path_taken_by_a_directory_fails_before_the_swap() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    build_ok(t.path(), &[]);
    let build_dir = t.path().join("build");
    fs::remove_file(build_dir.join("hashes.json")).unwrap();
    fs::create_dir(build_dir.join("hashes.json")).unwrap();
    fs::write(build_dir.join("torch-cuda/marker"), "old").unwrap();
    let before = tree(&build_dir);
    let out = build(t.path(), &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("hashes.json` is not a regular file"), "{stderr}");
    assert_eq!(tree(&build_dir), before);
}

/// A fresh user's case: `build/` a symbolic link (to keep the variants on another disk) was
/// reported as "not a directory". It is named as a link, with where it points and the two ways
/// out; the directory it points to is left as it was. A file there is still "not a directory".
#[test]
fn a_symlinked_build_directory_is_named_as_a_link() {
    let t = tempfile::tempdir().unwrap();
    let kernel = t.path().join("k");
    fixture(&kernel);
    build_ok(&kernel, &[]);
    fs::rename(kernel.join("build"), t.path().join("elsewhere")).unwrap();
    symlink("../elsewhere", kernel.join("build")).unwrap();
    let before = tree(&t.path().join("elsewhere"));
    let out = build(&kernel, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "error: `./build` is a symbolic link to `../elsewhere`; the build swaps variants into build/ by renames \
         and keeps its lock and hashes.json there, so build/ must be a directory of the kernel: move the \
         directory it points to in its place (`rm ./build && mv ../elsewhere ./build`), or remove the link \
         (`rm ./build`) to start afresh\n"
    );
    assert_eq!(tree(&t.path().join("elsewhere")), before);
    // The way out it names works.
    fs::remove_file(kernel.join("build")).unwrap();
    fs::rename(t.path().join("elsewhere"), kernel.join("build")).unwrap();
    assert!(build_ok(&kernel, &[]).contains("reused"), "the variants moved back are the build's");

    fs::remove_dir_all(kernel.join("build")).unwrap();
    fs::write(kernel.join("build"), "a file").unwrap();
    let out = build(&kernel, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "error: `./build` exists and is not a directory; the build swaps variants into build/ by renames \
         and keeps its lock and hashes.json there, so build/ must be a directory of the kernel: move it away\n"
    );
}

/// A backend removed from `general.backends` leaves its old variant in build/, which the
/// loader would still pick: the build warns, and `verify` fails on it.
#[test]
fn variant_of_a_removed_backend_is_reported() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    build_ok(t.path(), &[]);
    write(
        &t.path().join("build.toml"),
        &BUILD_TOML.replace(r#"backends = ["cuda", "rocm", "xpu"]"#, r#"backends = ["cuda", "rocm"]"#),
    );
    let out = build(t.path(), &[]);
    assert!(out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("build/torch-xpu` is a variant this kernel no longer builds"), "{stderr}");
    let (code, stdout, _) = verify(t.path(), &[]);
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("torch-xpu: different\n  this kernel does not build `torch-xpu`"), "{stdout}");
    // Removing it is the fix.
    fs::remove_dir_all(t.path().join("build/torch-xpu")).unwrap();
    let (code, stdout, _) = verify(t.path(), &[]);
    assert_eq!(code, 0, "{stdout}");
}

#[test]
fn unknown_variant_lists_the_valid_ones() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    let out = build(t.path(), &["--variant", "torch-cuda", "--variant", "torch-metal"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: unknown variant `torch-metal`; this kernel's variants are: torch-cuda, torch-rocm, torch-xpu\n"
    );
    assert!(!t.path().join("build").exists());
    // A near miss gets a suggestion.
    let out = build(t.path(), &["--variant", "torch-cdua"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: unknown variant `torch-cdua`; this kernel's variants are: torch-cuda, torch-rocm, torch-xpu\nhint: did you mean `torch-cuda`?\n"
    );
}

/// A build that fails part-way (the xpu variant has an unknown Python dependency, found after
/// the cuda and rocm variants were assembled) leaves `build/` exactly as it was. The config
/// check would refuse this build.toml up front, so the library is called with the model.
#[test]
fn failing_build_leaves_build_unchanged() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    build_ok(t.path(), &[]);
    let before = tree(&t.path().join("build"));

    let dir = Utf8Path::from_path(t.path()).unwrap();
    let kernel = kernel_builder::kernel::load(dir).unwrap();
    let mut config = kernel.config;
    config.general.xpu.python_depends.push("not-a-package".into());
    write(&t.path().join("torch-ext/vector_add/vector_add.py"), "changed = True\n");
    let err = kernel_builder::bundle::build_into(
        dir,
        &config,
        &kernel.cells,
        &[],
        None,
        &kernel_builder::toolchain::host::HostToolchain::new("python3"),
    )
    .unwrap_err();
    let chain: Vec<String> = err.chain().map(|e| e.to_string()).collect();
    assert_eq!(chain[0], "cannot build variant `torch-xpu`");
    assert!(chain[1].starts_with("unknown Python dependency `not-a-package` for `xpu` in `"), "{chain:?}");
    assert_eq!(tree(&t.path().join("build")), before);

    // A first build that fails creates no build/ at all.
    let t2 = tempfile::tempdir().unwrap();
    fixture(t2.path());
    fs::remove_file(t2.path().join("torch-ext/vector_add/__init__.py")).unwrap();
    let out = build(t2.path(), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(!t2.path().join("build").exists());
}

#[test]
fn uid_is_gits_tree_id() {
    let t = tempfile::tempdir().unwrap();
    let k = t.path().join("kernels/vector-add");
    fixture(&k);
    // Also an executable file (mode 100755 in git).
    write(&k.join("torch-ext/vector_add/tool.py"), "print('hi')\n");
    fs::set_permissions(k.join("torch-ext/vector_add/tool.py"), fs::Permissions::from_mode(0o755)).unwrap();
    git(t.path(), &["init", "-q"]);
    let mut set: Vec<String> = SOURCE_SET.iter().map(|p| format!("kernels/vector-add/{p}")).collect();
    set.push("kernels/vector-add/torch-ext/vector_add/tool.py".into());
    let mut add = vec!["add", "--"];
    add.extend(set.iter().map(String::as_str));
    git(t.path(), &add);
    git(t.path(), &["commit", "-qm", "source set only"]);
    let expected = git(t.path(), &["rev-parse", "HEAD:kernels/vector-add"]);

    let loaded = kernel_builder::kernel::load(Utf8Path::from_path(&k).unwrap()).unwrap();
    let got = SourceSet::collect(Utf8Path::from_path(&k).unwrap(), &loaded.config).unwrap();
    assert_eq!(got.tree_id(), expected);
    assert_eq!(got.uid(), &expected[..7]);
    let listed: Vec<&str> = got.files().iter().map(|f| f.rel.as_str()).collect();
    assert_eq!(
        listed,
        [
            "build.toml",
            "torch-ext/vector_add/__init__.py",
            "torch-ext/vector_add/_helion_aot_vector_add_cuda_sm90.py",
            "torch-ext/vector_add/configs/default.json",
            "torch-ext/vector_add/tool.py",
            "torch-ext/vector_add/vector_add.py",
        ]
    );

    // Without the executable file: the fixture's source set, whose id the other tests use.
    git(t.path(), &["rm", "-q", "kernels/vector-add/torch-ext/vector_add/tool.py"]);
    git(t.path(), &["commit", "-qm", "fixture"]);
    let fixture_id = git(t.path(), &["rev-parse", "HEAD:kernels/vector-add"]);
    assert_eq!(fixture_id, FIXTURE_TREE_ID);
    let again = SourceSet::collect(Utf8Path::from_path(&k).unwrap(), &loaded.config).unwrap();
    assert_eq!(again.tree_id(), FIXTURE_TREE_ID);
}

fn provenance(dir: &Path, variant: &str) -> serde_json::Value {
    let meta: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(dir.join("build").join(variant).join("metadata.json")).unwrap(),
    )
    .unwrap();
    meta["provenance"]["kernel"].clone()
}

#[test]
fn provenance_names_head_only_when_dirty_and_untracked_files_never_make_it_dirty() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    git(t.path(), &["init", "-q"]);
    git(t.path(), &["add", "-A"]);
    git(t.path(), &["commit", "-qm", "kernel"]);
    let head = git(t.path(), &["rev-parse", "HEAD"]);

    // Clean: no `provenance.kernel`, so the bytes depend on the source alone.
    build_ok(t.path(), &[]);
    assert_eq!(provenance(t.path(), "torch-cuda"), serde_json::Value::Null);
    let clean_cuda = fs::read(t.path().join("build/torch-cuda/metadata.json")).unwrap();
    // build/ is now untracked, and so is a new file: still clean.
    write(&t.path().join("scratch.txt"), "notes");
    build_ok(t.path(), &[]);
    assert_eq!(provenance(t.path(), "torch-rocm"), serde_json::Value::Null);

    // A new commit that leaves the source set alone gives the same bytes.
    write(
        &t.path().join("NOTES.md"),
        "# notes
",
    );
    git(t.path(), &["add", "NOTES.md"]);
    git(t.path(), &["commit", "-qm", "notes"]);
    build_ok(t.path(), &[]);
    assert_eq!(fs::read(t.path().join("build/torch-cuda/metadata.json")).unwrap(), clean_cuda);
    let head2 = git(t.path(), &["rev-parse", "HEAD"]);
    assert_ne!(head, head2);

    // A changed tracked file (even one outside the source set) makes it dirty, and a dirty
    // build says which commit it started from.
    write(&t.path().join("README.md"), "# changed\n");
    build_ok(t.path(), &[]);
    assert_eq!(provenance(t.path(), "torch-xpu"), serde_json::json!({"commit": head2, "dirty": true}));
}

#[test]
fn assemble_writes_the_same_bytes_as_build_and_copy() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    git(t.path(), &["init", "-q"]);
    git(t.path(), &["add", "-A"]);
    git(t.path(), &["commit", "-qm", "kernel"]);
    let head = git(t.path(), &["rev-parse", "HEAD"]);
    build_ok(t.path(), &[]);

    // The Nix cell's view: a filtered copy with no .git (here: only the source set), and the
    // revision on the command line.
    let src = tempfile::tempdir().unwrap();
    for p in SOURCE_SET {
        write(&src.path().join(p), &fs::read_to_string(t.path().join(p)).unwrap());
    }
    let out_root = tempfile::tempdir().unwrap();
    for backend in ["cuda", "rocm", "xpu"] {
        let out = out_root.path().join(format!("out-{backend}"));
        let o = kb(src.path())
            .args(["assemble", "--source", ".", "--backend", backend, "--out"])
            .arg(&out)
            .args(["--kernel-commit", &head])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let variant = format!("torch-{backend}");
        assert_eq!(entries(&out), std::slice::from_ref(&variant), "assemble writes exactly OUT/{variant}");
        assert_eq!(tree(&out.join(&variant)), tree(&t.path().join("build").join(&variant)));
    }
}

#[test]
fn stray_heuristics_are_left_out_with_a_warning() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    let pkg = t.path().join("torch-ext/vector_add");
    write(&pkg.join("_helion_aot_vector_add_tpu_v5e.py"), "x = 1\n");
    write(&pkg.join("_helion_aot_vector_add_rocm_gfx950.py"), "x = 2\n");
    write(&pkg.join("_helion_aot_missing_xpu_max1550.py"), "x = 3\n");
    let out = build(t.path(), &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        NOTES_WARNING.to_owned()
            + "warning: `torch-ext/vector_add/_helion_aot_missing_xpu_max1550.py`: is a Helion heuristic for `missing.py`, but there is no `torch-ext/vector_add/missing.py`; Helion looks the heuristic up beside the kernel's source file, so it would never be used\n\
         warning: `torch-ext/vector_add/_helion_aot_vector_add_tpu_v5e.py`: is a Helion heuristic for `tpu`, which is not in `general.backends`; it is left out of every variant\n"
    );
    let build = t.path().join("build");
    let heuristics = |v: &str| -> Vec<String> {
        files(&build.join(v)).into_iter().filter(|f| f.starts_with("_helion_aot_")).collect()
    };
    assert_eq!(heuristics("torch-cuda"), ["_helion_aot_vector_add_cuda_sm90.py"]);
    assert_eq!(heuristics("torch-rocm"), ["_helion_aot_vector_add_rocm_gfx950.py"]);
    assert_eq!(heuristics("torch-xpu"), ["_helion_aot_missing_xpu_max1550.py"]);
}

#[test]
fn archs_are_the_authors_statement_only() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    write(
        &t.path().join("build.toml"),
        &BUILD_TOML
            .replace("pyext = [\"py\", \"json\"]", "pyext = [\"py\", \"json\"]\ncuda_capabilities = [\"9.0\", \"10.0\", \"8.0\", \"9.0\"]\nrocm_archs = [\"gfx1100\", \"gfx942\"]")
            .replace("python-depends = [\"helion\"]", "python-depends = []"),
    );
    build_ok(t.path(), &[]);
    let meta = |v: &str| -> serde_json::Value {
        serde_json::from_str(
            &fs::read_to_string(t.path().join("build").join(v).join("metadata.json")).unwrap(),
        )
        .unwrap()
    };
    let backend = |v: &str| meta(v)["backend"].clone();
    // Sorted by capability (not as text, which put 10.0 first) and gfx number.
    assert_eq!(backend("torch-cuda"), serde_json::json!({"type": "cuda", "archs": ["8.0", "9.0", "10.0"]}));
    assert_eq!(backend("torch-rocm"), serde_json::json!({"type": "rocm", "archs": ["gfx942", "gfx1100"]}));
    assert_eq!(backend("torch-xpu"), serde_json::json!({"type": "xpu"}));
    // kernels-minver follows what each variant uses: an arch list needs the 0.17 arch check;
    // a variant without one (and without helion) names no loader release.
    assert_eq!(meta("torch-cuda")["kernels-minver"], "0.17.0");
    assert_eq!(meta("torch-rocm")["kernels-minver"], "0.17.0");
    assert_eq!(meta("torch-xpu").get("kernels-minver"), None);
}

/// Bad input (issue 3, item 7): a clear error, and nothing written.
fn assert_refused(dir: &Path, expected_in_stderr: &str) {
    let out = build(dir, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(expected_in_stderr), "expected {expected_in_stderr:?} in:\n{err}");
    assert!(!dir.join("build").exists(), "build/ was created");
}

#[test]
fn bad_input_no_package_directory() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    fs::remove_dir_all(t.path().join("torch-ext")).unwrap();
    assert_refused(t.path(), "the package directory `torch-ext/vector_add/` does not exist; create `torch-ext/vector_add/__init__.py`");
}

#[test]
fn bad_input_package_name_does_not_match_kernel_name() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    fs::rename(t.path().join("torch-ext/vector_add"), t.path().join("torch-ext/vadd")).unwrap();
    assert_refused(
        t.path(),
        "the package directory `torch-ext/vector_add/` does not exist; found `torch-ext/vadd/`; the package directory must be named after `general.name` (`vector-add`) with `-` replaced by `_`",
    );
}

#[test]
fn bad_input_symlink_out_of_the_kernel() {
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("secret.py"), "x = 1\n").unwrap();
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    symlink(outside.path().join("secret.py"), t.path().join("torch-ext/vector_add/secret.py")).unwrap();
    assert_refused(t.path(), "`torch-ext/vector_add/secret.py` is a symbolic link to `");
    assert_refused(t.path(), "outside the kernel directory; copy the file into the kernel instead");
}

#[test]
fn bad_input_dangling_symlink_is_named_as_such() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    symlink("gone.py", t.path().join("torch-ext/vector_add/dangling.py")).unwrap();
    assert_refused(
        t.path(),
        "torch-ext/vector_add/dangling.py` is a symbolic link to `gone.py`, which does not exist; fix the link or remove it",
    );
}

/// Editor and notebook droppings under dot-directories never reach a variant or the uid.
#[test]
fn files_under_dot_directories_are_not_packaged() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    let pkg = t.path().join("torch-ext/vector_add");
    write(&pkg.join(".ipynb_checkpoints/vector_add-checkpoint.py"), "old = 1\n");
    write(&pkg.join(".hidden.py"), "x = 1\n");
    let stdout = build_ok(t.path(), &[]);
    assert!(stdout.contains(&format!("id _vector_add_cuda_{}", uid())), "{stdout}");
    let all = files(&t.path().join("build/torch-cuda"));
    assert!(all.iter().all(|f| !f.contains("ipynb") && !f.contains("hidden")), "{all:?}");
}

#[test]
fn symlink_inside_the_kernel_is_read_through() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    write(&t.path().join("shared/common.py"), "COMMON = 1\n");
    symlink("../../shared/common.py", t.path().join("torch-ext/vector_add/common.py")).unwrap();
    build_ok(t.path(), &[]);
    let copied = t.path().join("build/torch-cuda/common.py");
    assert!(!fs::symlink_metadata(&copied).unwrap().file_type().is_symlink());
    assert_eq!(fs::read_to_string(copied).unwrap(), "COMMON = 1\n");
}

#[test]
fn bad_input_python_file_not_utf8() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    fs::write(t.path().join("torch-ext/vector_add/latin1.py"), b"# caf\xe9\nx = 1\n").unwrap();
    assert_refused(
        t.path(),
        "`torch-ext/vector_add/latin1.py` is not UTF-8 (invalid byte on line 1); Python reads sources as UTF-8, so re-save it as UTF-8",
    );
}

#[test]
fn bad_input_unknown_python_dependency() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    write(&t.path().join("build.toml"), &BUILD_TOML.replace("[\"helion\"]", "[\"helion\", \"numpy\"]"));
    // Found by the config check, pointing at the value in build.toml.
    assert_refused(t.path(), "unknown Python dependency `numpy` (general)");
    assert_refused(t.path(), "./build.toml:8:29");
}

#[test]
fn bad_input_problems_are_reported_together() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    let pkg = t.path().join("torch-ext/vector_add");
    fs::remove_file(pkg.join("__init__.py")).unwrap();
    write(&pkg.join("vector_add/__init__.py"), "");
    write(&pkg.join("metadata.json"), "{}");
    let out = build(t.path(), &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr).replace(&t.path().display().to_string(), "<DIR>");
    assert_eq!(
        err,
        "error: the kernel in `.` cannot be built (3 problems):\n  \
         - `torch-ext/vector_add/vector_add` must not exist: a file or directory named after the package shadows it when the variant is imported; rename it\n  \
         - `torch-ext/vector_add/__init__.py` is missing; the `kernels` loader imports the package through it\n  \
         - `torch-ext/vector_add/metadata.json` must not exist: the build writes `metadata.json` into every variant; remove it from the package\n"
    );
}

#[test]
fn source_ops_py_is_replaced_with_a_warning() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    write(&t.path().join("torch-ext/vector_add/_ops.py"), "ops = None\n");
    let out = build(t.path(), &["--variant", "torch-cuda"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        NOTES_WARNING.to_owned()
            + "warning: `torch-ext/vector_add/_ops.py`: is replaced in every variant by the generated `_ops.py` (the op namespace is fixed per variant); remove it from the package\n"
    );
    let ops = fs::read_to_string(t.path().join("build/torch-cuda/_ops.py")).unwrap();
    assert!(ops.starts_with("# Generated by kernel-builder"), "{ops}");
}

#[test]
fn nix_args_without_nix_are_refused() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    let out = build(t.path(), &["--", "-L"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: arguments after `--` are for `nix build`, but this build does not use Nix: -L\n"
    );
}

#[test]
fn auto_without_a_flake_builds_natively_with_a_note() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    let out = kb(t.path()).args(["build", "--variant", "torch-xpu"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err == format!("note: `.` has no flake.nix; building natively (`--nix never`)\n{NOTES_WARNING}")
            || err
                == format!("note: `nix` is not on PATH; building natively (`--nix never`)\n{NOTES_WARNING}"),
        "{err}"
    );
    assert_eq!(files(&t.path().join("build/torch-xpu")).len(), 6);
}

/// `--nix auto` looks for the Nix program KERNEL_BUILDER_NIX names, not for `nix` on PATH
/// whatever it says (a user's trial), with a flake beside the kernel.
#[test]
fn auto_looks_for_the_nix_program_kernel_builder_nix_names() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    fs::write(t.path().join("flake.nix"), "{ outputs = _: { }; }\n").unwrap();
    let out = kb(t.path())
        .args(["build", "--variant", "torch-xpu"])
        .env("KERNEL_BUILDER_NIX", "/nonexistent/nix")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("note: `/nonexistent/nix` (KERNEL_BUILDER_NIX) is not a program here; building natively (`--nix never`)\n{NOTES_WARNING}")
    );
}

fn verify(dir: &Path, extra: &[&str]) -> (i32, String, String) {
    let out = kb(dir).arg("verify").args(extra).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// A bad `KERNEL_BUILDER_JOBS` is refused when build-and-copy or verify starts, even for a
/// kernel with nothing to compile (noarch), before anything is written.
#[test]
fn bad_kernel_builder_jobs_is_refused_at_the_start() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    let msg = "error: KERNEL_BUILDER_JOBS is `two`, not a number of parallel jobs: set it to a whole number of 1 or more (Ninja's -j), or unset it for Ninja's default\n";
    let out = kb(t.path())
        .args(["build-and-copy", "--nix", "never"])
        .env("KERNEL_BUILDER_JOBS", "two")
        .output()
        .unwrap();
    assert_eq!((out.status.code(), String::from_utf8_lossy(&out.stderr).as_ref()), (Some(1), msg));
    assert!(!t.path().join("build").exists());
    build_ok(t.path(), &[]);
    let before = tree(&t.path().join("build"));
    let out = kb(t.path()).arg("verify").env("KERNEL_BUILDER_JOBS", "0").output().unwrap();
    assert_eq!(
        (out.status.code(), String::from_utf8_lossy(&out.stderr).as_ref()),
        (Some(1), msg.replace("`two`", "`0`").as_str())
    );
    assert_eq!(tree(&t.path().join("build")), before);
}

#[test]
fn verify_says_same_for_an_unchanged_build() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    build_ok(t.path(), &[]);
    let before = tree(&t.path().join("build"));
    let sri = |v: &str| kernel_builder::hash::nar_hash_sri(&t.path().join("build").join(v)).unwrap();
    let (code, stdout, stderr) = verify(t.path(), &[]);
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert_eq!(
        stdout,
        format!(
            "torch-cuda: same ({})\ntorch-rocm: same ({})\ntorch-xpu: same ({})\n",
            sri("torch-cuda"),
            sri("torch-rocm"),
            sri("torch-xpu")
        )
    );
    assert_eq!(tree(&t.path().join("build")), before, "verify must not touch build/");
}

/// Issue 6: a flipped byte in a built file makes `verify` fail and name the file.
#[test]
fn verify_names_the_file_with_a_flipped_byte() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    build_ok(t.path(), &[]);
    let f = t.path().join("build/torch-rocm/vector_add.py");
    let mut bytes = fs::read(&f).unwrap();
    bytes[7] ^= 0x20; // "import helion" -> "import Helion"
    fs::write(&f, bytes).unwrap();
    let (code, stdout, _) = verify(t.path(), &[]);
    assert_eq!(code, 1);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("torch-cuda: same (sha256-"), "{stdout}");
    assert_eq!(
        lines[1..6],
        [
            "torch-rocm: different",
            "  first difference: `vector_add.py` differs from byte 7 (- rebuilt, + on disk)",
            "    line 1, byte 7:",
            "    - import helion",
            "    + import Helion",
        ]
    );
    assert!(lines[6].starts_with("torch-xpu: same (sha256-"), "{stdout}");
    assert_eq!(lines.len(), 7, "{stdout}");

    // Only the cuda variant asked for: same, exit 0.
    let (code, stdout, _) = verify(t.path(), &["--variant", "torch-cuda"]);
    assert_eq!(code, 0);
    assert!(stdout.starts_with("torch-cuda: same (sha256-"), "{stdout}");
}

#[test]
fn verify_checks_the_manifest_too() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    build_ok(t.path(), &[]);
    let path = t.path().join("build/hashes.json");
    let real = kernel_builder::hash::nar_hash_sri(&t.path().join("build/torch-xpu")).unwrap();
    let fake = "sha256-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    fs::write(&path, fs::read_to_string(&path).unwrap().replace(&real, fake)).unwrap();
    let (code, stdout, _) = verify(t.path(), &["--variant", "torch-xpu"]);
    assert_eq!(code, 1);
    assert_eq!(
        stdout,
        format!("torch-xpu: different\n  hashes.json records {fake}, the rebuild is {real}\n")
    );
}

#[test]
fn verify_uses_the_recorded_provenance() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    git(t.path(), &["init", "-q"]);
    git(t.path(), &["add", "-A"]);
    git(t.path(), &["commit", "-qm", "kernel"]);
    build_ok(t.path(), &[]);
    // A later commit that does not touch the source set: the published tree still verifies.
    write(&t.path().join("README.md"), "# more docs\n");
    git(t.path(), &["commit", "-qam", "docs"]);
    let (code, stdout, stderr) = verify(t.path(), &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    // A change to the sources does not.
    write(&t.path().join("torch-ext/vector_add/vector_add.py"), "def vector_add(x, y):\n    return x - y\n");
    let (code, stdout, stderr) = verify(t.path(), &["--variant", "torch-cuda"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("note: the sources changed since the build: the manifest records source "),
        "{stderr}"
    );
    assert!(
        stdout.starts_with("torch-cuda: different\n  first difference: `_ops.py` differs from byte "),
        "{stdout}"
    );
}

/// A `[torch]` kernel with a compiled CUDA kernel and a noarch Metal variant, on a host
/// without a usable torch: the noarch variant builds, the CUDA one is skipped with a note that
/// says what is missing, and asking for it by name is an error that says why.
#[cfg(target_os = "linux")]
#[test]
fn mixed_kernel_without_a_toolchain_builds_its_noarch_variant_and_says_why_not_the_compiled_one() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    write(
        &d.join("build.toml"),
        "[general]\nname = \"relu\"\nversion = 1\nedition = 5\nlicense = \"Apache-2.0\"\nbackends = [\"cuda\", \"metal\"]\n\n\
         [torch]\nsrc = [\"torch-ext/torch_binding.cpp\"]\n\n\
         [kernel.relu_cuda]\nbackend = \"cuda\"\ndepends = [\"torch\"]\nsrc = [\"relu_cuda/relu.cu\"]\n",
    );
    write(&d.join("torch-ext/torch_binding.cpp"), "// binding\n");
    write(&d.join("relu_cuda/relu.cu"), "// kernel\n");
    write(&d.join("torch-ext/relu/__init__.py"), "from ._ops import ops\n");
    let no_python = ["--python", "/nonexistent/python3"];
    let why = "cannot run the Python interpreter `/nonexistent/python3` (No such file or directory (os error 2)); pass --python PATH to a Python with torch";

    let out = build(d, &[&no_python[..], &["--no-cache"]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("note: the `cuda` variant is not built: {why}\n")
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("built torch-metal (4 files, id _relu_metal_"), "{stdout}");
    assert_eq!(
        files(&d.join("build/torch-metal")),
        ["__init__.py", "_ops.py", "metadata.json", "symbols.json"]
    );

    // Issue 31: asking for the noarch variant alone, nothing is said about the cells nobody
    // asked for.
    let out = build(d, &[&["--variant", "torch-metal", "--no-cache"][..], &no_python[..]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("built torch-metal (4 files, id _relu_metal_"));

    let host = kernel_builder::matrix::host_system();
    let variant = format!("torch214-cxx11-cu130-{host}");
    let mut args = vec!["--variant", variant.as_str()];
    args.extend(no_python);
    let out = build(d, &args);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("error: cannot build `{variant}` natively: {why}\n")
    );
}

/// The help is the user manual: keep what it promises in sight (and in review).
#[test]
fn build_and_copy_help() {
    let out = kb(Path::new("."))
        .args(["build-and-copy", "--help"])
        .env_remove("KERNEL_BUILDER_CUDA_CAPABILITIES")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), HELP);
}

const HELP: &str = r#"Build every variant of a kernel into DIR/build/<variant>/

Usage: kernel-builder build-and-copy [OPTIONS] [DIR] [-- <NIX_ARGS>...]

Arguments:
  [DIR]
          Kernel directory, holding build.toml (default: the current directory)

  [NIX_ARGS]...
          Extra arguments for `nix build` (after `--`), e.g. `-- -L --max-jobs 4`

Options:
      --variant <VARIANT>
          Build only this variant, e.g. `torch-cuda` (repeatable). Other variants already in
          DIR/build/ are left as they are

      --nix <NIX>
          Build through Nix or natively

          Possible values:
          - auto:   Through Nix when `nix` is on PATH, DIR has a `flake.nix` and the cells'
            orchestrator needs no download (KERNEL_BUILDER_ORCHESTRATOR, a static kernel-builder, or
            one installed through its flake); natively otherwise, saying why
          - always: Always through Nix (`nix build` of the kernel's flake); fails without Nix
          - never:  Never through Nix: build the variants here with this binary (compiled ones with
            the host's toolchain)
          
          [default: auto]

      --json
          Print what was built as JSON on stdout: `{"variants": [{"name", "path", "files", "id",
          "reused", "compile-cache", "parallel", "seconds"}], "skipped": [{"backend", "variant",
          "kind", "reason"}]}` (`skipped`, absent for a Nix build: the compiled cells not built,
          without `variant` when a whole backend is meant, `kind` one of not-native, toolchain,
          config, pins, provision; `files`, `id` and `reused` are null for a Nix build;
          `compile-cache`: what the compile cache did for a cell compiled here, `{"compiles",
          "hits", "misses", "device_steps_hit", "device_steps_missed", "not_cached", "unreadable"}`,
          else null; `parallel`: what its compile ran with, `{"ninja-jobs", "nvcc-threads",
          "split-compile"}`, else null; `seconds`: where a cell compiled here with CMake spent its
          time, `{"prepare", "compile-cache-start", "configure", "compile", "package"}`, else null).
          When no cell can be built, the failure document (`"ok": false`) has the same `skipped`
          list

      --builders <SPEC>
          Spread the cells over Nix remote builders: Nix's machine list (`nix build --builders`),
          e.g. `'ssh-ng://me@big x86_64-linux /root/.ssh/id_builder 8'` (machines separated by `;`,
          `@FILE` for a machines file). Every machine must answer before the build starts;
          afterwards each cell built elsewhere is named with its builder, and a builder that fails
          or dies fails the build naming it (DIR/build/ is left as it was). Without it, nix.conf's
          `builders` apply as usual; `--builders ''` means no remote builders at all (nix.conf's are
          off too). An `@FILE` that cannot be read, or a SPEC that names no machine (`';;;'`), is an
          error. Add `-- --max-jobs 0` to build nothing here

      --python <PATH>
          The Python interpreter whose torch compiled variants are built against (its tvm_ffi for a
          `[tvm-ffi]` kernel); its torch version, CUDA build and C++ ABI (tvm-ffi's major.minor and
          nvcc's CUDA) name the variant. CMake and Ninja are looked up beside it first, then on
          PATH. Without it, a `[torch]` kernel's CPU and CUDA bundle cells are built from pinned
          wheels instead, and other compiled cells with `python3`. (`verify` rebuilds a variant
          built from pinned wheels from them, with or without it.)

      --package-set <NAME>
          Record in metadata.json that the tools (--python, CXX, CUDACXX, PATH) come from the
          declared package set NAME rather than the host (`build.package-set`, `native: false`). A
          Nix cell passes its package set's name; pass the same name and tools to a native build to
          get the cell's bytes

      --hermetic
          The package set is hermetic (pinned inputs only); recorded as `build.hermetic`

      --manylinux <POLICY>
          Hold every compiled variant to this manylinux policy (`2_28`, `manylinux_2_28`): a shared
          object that needs a newer glibc/libstdc++ symbol fails the build, naming the library and
          the symbol. Without it the policy met is recorded in metadata.json (`build.manylinux`) and
          what keeps a variant from manylinux_2_28 is a warning

      --cuda-capabilities <CAPS>
          Compile CUDA kernels for these capabilities only (comma-separated: `9.0` selects 9.0 and
          9.0a, `9.0a` that one only), for an edit-compile loop or a CI check that takes minutes.
          The variant's metadata.json records it (`build.capabilities-only`) and `upload` /
          `build-and-upload` refuse it; a kernel that builds none of them is an error
          
          [env: KERNEL_BUILDER_CUDA_CAPABILITIES=]

      --jobs <N>
          Native builds: build up to N cells at once (0: one per CPU core); each compiled cell's
          Ninja then runs the CPU count divided by N jobs (KERNEL_BUILDER_JOBS overrides). The
          variants, their bytes and the output are the same for every N
          
          [default: 1]

      --no-cache
          Native builds: build every cell, neither reusing nor storing cells in the native cell
          cache (`native-cells-v1/` in the cache directory: $KERNEL_BUILDER_CACHE_DIR, else
          $XDG_CACHE_HOME/kernel-builder, else ~/.cache/kernel-builder; see `kernel-builder
          native-cache`)

      --offline
          Cells built from pinned wheels: never download a wheel; use the toolchain cache and
          --find-links directories only

      --find-links <DIR>
          Cells built from pinned wheels: look for the wheels (by file name) in DIR first, a
          wheelhouse made elsewhere (repeatable). Each is checked against its pinned sha256

  -q, --quiet
          Say on stderr only what is wrong (warnings, errors, hints, why a command failed): no notes
          or progress; results on stdout stay. Before or after the command's name

  -v, --verbose
          Also say each command kernel-builder runs (`+ cmake -G Ninja …`) on stderr. Not with
          --quiet

  -h, --help
          Print help (see a summary with '-h')

Writes DIR/build/<variant>/ for each variant, replacing only the variants built, and
DIR/build/hashes.json (the NAR hash of each variant). For a noarch kernel (Helion, Triton, plain
torch) there is one torch-<backend> directory per backend. Natively, a [torch] kernel's CPU and CUDA
backends build every bundle cell of this system from pinned wheels (torch, the CUDA toolkit, CMake,
Ninja; downloaded once into the toolchain cache), compiled with the system C++ compiler; with
--python, and for stable-ABI and [tvm-ffi] kernels, a compiled backend builds the one cell the host
toolchain gives (torch or tvm_ffi from --python, nvcc for CUDA). Both go through a generated CMake
project; a cell or backend whose toolchain cannot be had is skipped with a note saying what to do.
Nothing in DIR/build/ changes when the build fails. A native build reuses a cell built before from
the same sources with the same toolchain from the native cell cache (the line then says `reused`,
not `built`; see `kernel-builder native-cache`); `--jobs N` builds N cells at once.
"#;

#[test]
fn bad_input_pyext_without_py() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    write(
        &t.path().join("build.toml"),
        &BUILD_TOML.replace("pyext = [\"py\", \"json\"]", "pyext = [\"json\"]"),
    );
    assert_refused(
        t.path(),
        "`torch-ext/vector_add/__init__.py` is not packaged because `py` is not in `pyext` (\"json\"); add \"py\" to `torch-noarch.pyext`",
    );
}

#[test]
fn verify_names_extra_and_missing_files() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    build_ok(t.path(), &[]);
    let build = t.path().join("build");
    fs::write(build.join("torch-xpu/extra.py"), "x = 1\n").unwrap();
    fs::remove_file(build.join("torch-rocm/configs/default.json")).unwrap();
    let (code, stdout, _) = verify(t.path(), &["--variant", "torch-rocm", "--variant", "torch-xpu"]);
    assert_eq!(code, 1);
    assert_eq!(
        stdout,
        "torch-rocm: different\n  first difference: `configs/default.json` is missing\n\
         torch-xpu: different\n  first difference: `extra.py` is unexpected\n"
    );
}

/// Two builds of the same kernel at once take turns on `build/`: both succeed and the result
/// is what one build writes.
#[test]
fn concurrent_builds_take_turns() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    build_ok(t.path(), &[]);
    let expected = tree(&t.path().join("build"));
    // They also race to create build/.
    fs::remove_dir_all(t.path().join("build")).unwrap();
    let bin = crate::util::kb_path();
    let children: Vec<std::process::Child> = (0..4)
        .map(|_| {
            std::process::Command::new(&bin)
                .current_dir(t.path())
                .args(["build-and-copy", "--nix", "never"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    assert_eq!(tree(&t.path().join("build")), expected);
}

#[test]
fn assemble_checks_its_arguments() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    // --kernel-dirty needs --kernel-commit: a command-line error (exit 2).
    let out = kb(t.path())
        .args(["assemble", "--source", ".", "--backend", "cuda", "--out", "o", "--kernel-dirty"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // A malformed commit: exit 1, nothing written.
    let out = kb(t.path())
        .args(["assemble", "--source", ".", "--backend", "CUDA", "--out", "o", "--kernel-commit", "abc1234"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: `abc1234` is not a git commit id: expected 40 or 64 hexadecimal digits\n"
    );
    assert!(!t.path().join("o").exists());
    // A backend the kernel does not list.
    let out = kb(t.path())
        .args(["assemble", "--source", ".", "--backend", "metal", "--out", "o"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("{NOTES_WARNING}error: cannot build `torch-metal`: `metal` is not in `general.backends` of `./build.toml`\n")
    );
    assert!(!t.path().join("o").exists());
    // The backend name is case-insensitive on the command line; the output is OUT/torch-cuda.
    let out =
        kb(t.path()).args(["assemble", "--source", ".", "--backend", "CUDA", "--out", "o"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "o/torch-cuda\n");
    assert_eq!(entries(&t.path().join("o")), ["torch-cuda"]);
}

/// An existing `OUT/<variant>` is never overwritten nor removed by a failing `assemble`.
#[test]
fn assemble_keeps_an_existing_variant_directory() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    write(&t.path().join("o/torch-cuda/keep.txt"), "mine");
    let out =
        kb(t.path()).args(["assemble", "--source", ".", "--backend", "cuda", "--out", "o"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot create `o/torch-cuda`"));
    assert_eq!(files(&t.path().join("o")), ["torch-cuda/keep.txt"]);
}

/// A 96 MiB source file is streamed through the build (UTF-8 check, copy, digest, hashes):
/// the build succeeds with the address space capped at 80 MB, below what a whole read of the
/// file would need on top of the process's own mappings (the debug binary, its threads'
/// stacks and glibc's arenas take 48-56 MB here, so the earlier 48 MB cap failed in malloc
/// whatever the file's size).
#[test]
fn a_source_file_larger_than_the_memory_limit_builds() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    let big = t.path().join("torch-ext/vector_add/table.py");
    fs::File::create(&big).unwrap().set_len(96 << 20).unwrap(); // NUL bytes are UTF-8
    let cache = tempfile::tempdir().unwrap();
    let exe = crate::util::kb_path();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 80000 && exec \"$0\" build-and-copy --nix never .")
        .arg(&exe)
        .current_dir(t.path())
        .env_remove("GIT_DIR")
        // Its own cache: the cells (3 × 96 MiB) are stored, streamed too.
        .env("KERNEL_BUILDER_CACHE_DIR", cache.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(fs::metadata(t.path().join("build/torch-cuda/table.py")).unwrap().len(), 96 << 20);
}

/// Killed at each `renameat2` of the swap in turn (strace injects SIGKILL at the Nth call),
/// an update of three variants never leaves one missing or half-made: each `build/<v>` is
/// wholly the old build or wholly the new one, and the next build finishes the job (same tree
/// as a clean build, nothing left over). Skipped, saying so, when strace is not installed
/// (scripts/test.sh installs it).
#[test]
fn a_build_killed_at_any_rename_of_the_swap_leaves_whole_variants() {
    if duct::cmd!("strace", "-V").stdout_null().stderr_null().run().is_err() {
        eprintln!(
            "SKIPPED: strace not found (apt-get install strace); the kill-at-every-rename test did not run"
        );
        return;
    }
    let variants = ["torch-cuda", "torch-rocm", "torch-xpu"];
    let edit = |dir: &Path| {
        let p = dir.join("torch-ext/vector_add/vector_add.py");
        let mut text = fs::read_to_string(&p).unwrap();
        text.push_str("# version 2\n");
        fs::write(&p, text).unwrap();
    };
    // The two whole trees every variant must equal one of.
    let reference = tempfile::tempdir().unwrap();
    fixture(reference.path());
    build_ok(reference.path(), &[]);
    let old: Vec<_> = variants.iter().map(|v| tree(&reference.path().join("build").join(v))).collect();
    edit(reference.path());
    build_ok(reference.path(), &[]);
    let new: Vec<_> = variants.iter().map(|v| tree(&reference.path().join("build").join(v))).collect();
    let clean = tree(&reference.path().join("build"));
    assert_ne!(old, new);

    let exe = crate::util::kb_path();
    let mut killed = 0;
    for n in 1.. {
        let t = tempfile::tempdir().unwrap();
        fixture(t.path());
        build_ok(t.path(), &[]);
        edit(t.path());
        let out = std::process::Command::new("strace")
            .args(["-f", "-o", "/dev/null", "-e", "trace=renameat2"])
            .arg(format!("--inject=renameat2:signal=KILL:when={n}"))
            .arg(&exe)
            .args(["build-and-copy", "--nix", "never", "."])
            .current_dir(t.path())
            .env_remove("GIT_DIR")
            .env("KERNEL_BUILDER_CACHE_DIR", IT_CACHE)
            .output()
            .unwrap();
        if out.status.success() {
            assert_eq!(
                tree(&t.path().join("build")),
                clean,
                "the run past the last rename is a normal build"
            );
            break;
        }
        killed += 1;
        for (i, v) in variants.iter().enumerate() {
            let got = tree(&t.path().join("build").join(v));
            assert!(got == old[i] || got == new[i], "kill at rename {n}: `build/{v}` is neither build");
        }
        let out = build(t.path(), &[]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stderr).contains("removed, left by an interrupted build"));
        assert_eq!(tree(&t.path().join("build")), clean, "after the kill at rename {n} and a rebuild");
    }
    assert_eq!(killed, variants.len(), "one atomic rename per variant");
}

/// With `git` missing from PATH, an edited tree in a repository does not build as clean: the
/// build says cleanliness could not be checked, and records HEAD's commit (read from `.git`,
/// packed refs included) as dirty, so the loader warns about it.
#[test]
fn without_git_an_edited_tree_is_recorded_as_unchecked_not_clean() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    git(t.path(), &["init", "-q"]);
    git(t.path(), &["add", "-A"]);
    git(t.path(), &["commit", "-qm", "fixture"]);
    git(t.path(), &["pack-refs", "--all"]);
    let head = git(t.path(), &["rev-parse", "HEAD"]);
    let p = t.path().join("torch-ext/vector_add/vector_add.py");
    fs::write(&p, fs::read_to_string(&p).unwrap() + "# edited\n").unwrap();

    let out =
        kb(t.path()).env("PATH", "/nonexistent").args(["build-and-copy", "--nix", "never"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("warning: cannot run `git` ("), "{stderr}");
    assert!(stderr.contains("has uncommitted changes could not be checked; recorded as commit"), "{stderr}");
    let meta: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(t.path().join("build/torch-cuda/metadata.json")).unwrap())
            .unwrap();
    assert_eq!(meta["provenance"]["kernel"], serde_json::json!({"commit": head, "dirty": true}));

    // `verify` without git rebuilds with the recorded revision and finds the same trees.
    let out = kb(t.path()).env("PATH", "/nonexistent").arg("verify").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
}

/// A build that has to wait for another holder of `build/`'s lock says so, and who holds it
/// (pid and command line, from /proc/locks), then goes on once the lock is released.
#[test]
fn a_build_waiting_for_the_lock_says_whose_it_is() {
    use std::io::BufRead;
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    fs::create_dir(t.path().join("build")).unwrap();
    let holder = fs::File::open(t.path().join("build")).unwrap();
    rustix::fs::flock(&holder, rustix::fs::FlockOperation::LockExclusive).unwrap();
    let mut child = crate::util::kb_std()
        .current_dir(t.path())
        .args(["build-and-copy", "--nix", "never"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let me = std::process::id();
    assert!(
        first.starts_with(&format!("note: `./build` is locked by pid {me} (`"))
            && first.ends_with("waiting for it to finish with it (builds of one kernel take turns)"),
        "{first}"
    );
    assert!(child.try_wait().unwrap().is_none(), "it waits");
    drop(holder);
    let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
    assert!(child.wait().unwrap().success(), "{rest:?}");
    assert!(t.path().join("build/torch-cuda/metadata.json").is_file());
}

/// A packaged file whose name holds a newline is refused, naming it, and nothing is built.
#[test]
fn a_file_name_with_a_newline_is_refused() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    write(&t.path().join("torch-ext/vector_add/two\nlines.py"), "X = 1\n");
    let out = build(t.path(), &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("\"torch-ext/vector_add/two\\nlines.py\" has a line break in its name")
            && stderr.contains("rename it"),
        "{stderr}"
    );
    assert!(!t.path().join("build").exists());
}

/// One convention for machine-readable output: `--json` prints one JSON document on stdout
/// (build-and-copy, verify, hash; check-config and list-variants too), text goes to stderr.
#[test]
fn json_flags_print_one_document_on_stdout() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    let out = kb(t.path()).args(["build-and-copy", "--nix", "never", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> =
        v["variants"].as_array().unwrap().iter().map(|x| x["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["torch-cuda", "torch-rocm", "torch-xpu"]);
    assert_eq!(v["variants"][0]["files"], 7);
    assert_eq!(v["variants"][0]["id"], format!("_vector_add_cuda_{}", uid()));
    // Noarch only: nothing compiled, so nothing skipped.
    assert_eq!(v["skipped"], serde_json::json!([]));

    let out = kb(t.path()).args(["verify", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["same"], true);
    assert_eq!(v["variants"].as_array().unwrap().len(), 3);
    assert_eq!(v["variants"][0]["name"], "torch-cuda");
    assert_eq!(v["variants"][0]["rebuilt"], v["variants"][0]["recorded"]);

    let out = kb(t.path()).args(["hash", "--json", "build/torch-cuda", "missing"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["path"], "build/torch-cuda");
    assert!(v[0]["hash"].as_str().unwrap().starts_with("sha256-") && v[0]["error"].is_null());
    assert!(v[1]["hash"].is_null() && v[1]["error"].as_str().unwrap().contains("missing"));
}

/// A kernel directory argument that is missing or a file says which (and for a `build.toml`,
/// the directory to pass), for every command that takes one.
#[test]
fn kernel_dir_arguments_say_missing_or_file() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    std::fs::write(d.join("build.toml"), "").unwrap();
    std::fs::write(d.join("notes.txt"), "").unwrap();
    for cmd in ["build-and-copy", "verify", "tune", "create-pyproject", "check-abi"] {
        let run = |arg: &str| {
            let out = crate::util::kb().current_dir(d).args([cmd, arg]).output().unwrap();
            assert!(!out.status.success(), "{cmd} {arg}");
            String::from_utf8(out.stderr).unwrap()
        };
        assert_eq!(run("nonexistent"), "error: `nonexistent` does not exist\n", "{cmd}");
        // check-abi also takes one library, so a file is checked as one.
        if cmd != "check-abi" {
            assert_eq!(run("notes.txt"), "error: `notes.txt` is a file, not a directory\n", "{cmd}");
            assert_eq!(
                run("build.toml"),
                "error: `build.toml` is a file; pass the kernel directory that holds it: `.`\n",
                "{cmd}"
            );
        }
    }
}

/// A `--python` that exits without a word (here `/bin/false`) is named with its exit status,
/// not an empty reason.
#[cfg(target_os = "linux")]
#[test]
fn a_silent_failing_python_is_named_with_its_status() {
    let t = tempfile::tempdir().unwrap();
    let k = t.path().join("relu-stable-abi");
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels/relu-stable-abi");
    for e in walkdir::WalkDir::new(&src) {
        let e = e.unwrap();
        let to = k.join(e.path().strip_prefix(&src).unwrap());
        if e.file_type().is_dir() {
            std::fs::create_dir_all(&to).unwrap();
        } else if !e.path().components().any(|c| c.as_os_str() == "build") {
            std::fs::copy(e.path(), &to).unwrap();
        }
    }
    let out = crate::util::kb()
        .args(["build-and-copy", "--nix", "never", "--no-cache", "--python", "/bin/false"])
        .arg(&k)
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(!out.status.success());
    assert!(
        stderr.contains(
            "`/bin/false` could not report torch's build facts:\nit exited with exit status: 1 and printed nothing; is it a Python with torch?"
        ),
        "{stderr}"
    );
}

/// A bad toolchain-cache bound is refused before anything is built or fetched, not after the
/// build (the bound is applied once the cells are built).
#[test]
fn a_bad_toolchain_cache_bound_fails_before_the_build() {
    let t = tempfile::tempdir().unwrap();
    let relu = t.path().join("relu");
    crate::cellcache::copy_kernel("relu", &relu);
    let out = kb(&relu)
        .args(["build-and-copy", "--nix", "never", "."])
        .env("KERNEL_BUILDER_TOOLCHAIN_CACHE_DIR", t.path().join("toolchains"))
        .env("KERNEL_BUILDER_TOOLCHAIN_CACHE_MAX_SIZE", "lots")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: KERNEL_BUILDER_TOOLCHAIN_CACHE_MAX_SIZE is `lots`: not a size; write bytes or a number with K, M, G or T (e.g. 500M, 2G)\n"
    );
    assert!(!relu.join("build").exists());
    assert!(!t.path().join("toolchains").exists(), "the toolchain cache is not even created");
}

/// Found by a fresh user: `--nix always` dropped --python, --offline and --find-links without
/// a word (the Nix cells bring their own toolchains). They are refused, naming them, before
/// Nix is run.
#[test]
fn native_only_flags_are_refused_with_nix_always() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    let out = kb(t.path())
        .env("KERNEL_BUILDER_NIX", "/nonexistent/nix")
        .args(["build-and-copy", "--nix", "always", "--python", "python3", "--offline"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: --python, --offline apply to a native build only, and this build uses Nix (its cells bring their own toolchains); add `--nix never`, or drop them\n"
    );
    assert!(!t.path().join("build").exists());
}

/// `--variant ''` is a mistake clap refuses (exit 2), for every command that takes it.
#[test]
fn an_empty_variant_name_is_refused() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    for cmd in [
        &["build-and-copy", "--nix", "never"][..],
        &["verify"],
        &["build-and-upload", "--dry-run"],
        &["devshell", "."],
    ] {
        let out = kb(t.path()).args(cmd).args(["--variant", ""]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{cmd:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr)
                .contains("a value is required for '--variant <VARIANT>' but none was supplied"),
            "{cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `--package-set` is a name recorded in metadata.json and compared by verify: blank or with
/// spaces it is refused as a usage error (a user's trial had `verify --package-set ''` rebuild
/// under an empty name and report a difference).
#[test]
fn a_blank_package_set_name_is_a_usage_error() {
    let relu = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels/relu");
    for (command, name) in [("verify", ""), ("build-and-copy", " "), ("build-and-copy", "nix pkgs")] {
        let out = crate::util::kb().args([command, "--package-set", name]).arg(&relu).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{command} {name:?}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(
            stderr.starts_with(&format!(
                "error: invalid value '{name}' for '--package-set <NAME>': a package set's name is one word"
            )),
            "{stderr}"
        );
    }
}

/// A bad `--cuda-capabilities` entry is a usage error when given, whatever the kernel builds:
/// with only CPU cells to build it was never checked and `abc` passed (a user's trial). A
/// blank value narrows nothing.
#[test]
fn a_bad_cuda_capability_is_refused_when_given() {
    let t = tempfile::tempdir().unwrap();
    let helion = t.path().join("helion");
    crate::util::copy_kernel("vector-add-helion", &helion);
    let run = |flag: Option<&str>, env: Option<&str>| {
        let mut c = crate::util::kb();
        c.current_dir(&helion).env("KERNEL_BUILDER_CACHE_DIR", t.path().join("cache"));
        c.args(["build-and-copy", "--nix", "never", "--offline"]);
        if let Some(f) = flag {
            c.args(["--cuda-capabilities", f]);
        }
        match env {
            Some(v) => c.env("KERNEL_BUILDER_CUDA_CAPABILITIES", v),
            None => c.env_remove("KERNEL_BUILDER_CUDA_CAPABILITIES"),
        };
        let out = c.output().unwrap();
        (out.status.code(), String::from_utf8(out.stderr).unwrap())
    };
    for (flag, env) in [(Some("abc,9.0"), None), (None, Some("8.x"))] {
        let (code, err) = run(flag, env);
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains("is not a CUDA capability; write `X.Y`, `X.Ya`, `X.Yf` or `X.Y+PTX`"), "{err}");
        assert!(!helion.join("build").exists());
    }
    let (code, err) = run(None, Some(""));
    assert_eq!(code, Some(0), "{err}");
}
