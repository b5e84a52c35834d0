//! Edition 6 of `build.toml` (kernels 0.18.3 and later): every `language` with its own keys,
//! `build-layout`, `[mlx-noarch]`, and the diagnostics of the mistakes an edition-5 habit makes
//! (a `backend` in edition 6, an edition-6 key in edition 5), each at its line and column.

use camino::Utf8Path;
use kernel_builder::config::diagnostics::RenderStyle;
use kernel_builder::config::{Backend, BuildLayout, Framework, Generation, Language};
use kernel_builder::kernel;

/// A valid edition-6 file with a `[tvm-ffi]` framework the cases below edit.
const TVM: &str = r#"[general]
name = "relu"
version = 1
edition = 6
license = "Apache-2.0"
backends = ["cpu", "cuda"]

[tvm-ffi]
src = ["tvm-ffi-ext/binding.cpp"]

[kernel.relu_cpu]
language = "cpp-cpu"
depends = []
src = ["relu_cpu/relu.cpp"]

[kernel.relu_rs]
language = "rust-cuda-oxide"
cargo-manifest = "relu-rs/Cargo.toml"
src = ["relu-rs/src"]
"#;

/// Every problem of `text` as `line:column severity rule: message | help`, in file order
/// (an empty list for a file without problems).
fn findings(text: &str) -> Vec<String> {
    let (problems, locations) =
        match kernel::load_str_styled(Utf8Path::new("build.toml"), text, None, RenderStyle::Plain) {
            Ok(k) => (k.warnings, k.warning_locations),
            Err(e) => (e.problems, e.locations),
        };
    problems
        .iter()
        .zip(locations)
        .map(|(p, l)| {
            let at = l.map_or("-".to_owned(), |l| format!("{}:{}", l.line, l.column));
            format!("{at} {:?} {}: {} | {}", p.severity, p.rule, p.message, p.help.as_deref().unwrap_or(""))
        })
        .collect()
}

#[test]
fn an_edition6_file_is_read_into_the_model() {
    let text = TVM.replace(
        "backends = [\"cpu\", \"cuda\"]\n",
        "backends = [\"cpu\", \"cuda\"]\nbuild-layout = \"zip\"\n",
    );
    let k = kernel::load_str_styled(Utf8Path::new("build.toml"), &text, None, RenderStyle::Plain).unwrap();
    assert!(k.warnings.is_empty(), "{}", k.rendered_warnings);
    let c = &k.config;
    assert_eq!(c.generation, Generation::Edition6);
    assert_eq!(c.general.build_layout, BuildLayout::Zip);
    let kernels: Vec<(&str, Language, Backend, Option<&str>)> = c
        .kernels
        .iter()
        .map(|(n, k)| (n.as_str(), k.language, k.backend, k.cargo_manifest.as_deref()))
        .collect();
    assert_eq!(
        kernels,
        [
            ("relu_cpu", Language::CppCpu, Backend::Cpu, None),
            ("relu_rs", Language::RustCudaOxide, Backend::Cuda, Some("relu-rs/Cargo.toml")),
        ]
    );
    // The cells are those of the same kernels written as C++ of edition 5.
    let names: Vec<&str> =
        k.cells.in_scope(kernel_builder::matrix::Scope::Bundle).iter().map(|c| c.name.as_str()).collect();
    assert!(
        names.contains(&"tvm-ffi01-cpu-x86_64-linux") && names.contains(&"tvm-ffi01-cu130-x86_64-linux"),
        "{names:?}"
    );
}

#[test]
fn a_key_of_another_language_names_the_languages_that_take_it() {
    let text = TVM.replace(
        "depends = []\n",
        "depends = []\nrocm-archs = [\"gfx942\"]\ncargo-manifest = \"Cargo.toml\"\n",
    );
    assert_eq!(findings(&text), [
            "14:14 Error key-for-other-language: `rocm-archs` applies to cpp-rocm kernels, but `[kernel.relu_cpu]` has language cpp-cpu | remove `rocm-archs`, or move it to a kernel with `language = \"cpp-rocm\"`; cpp-cpu kernels accept: language, depends, src, include, cxx-flags",
            "15:18 Error key-for-other-language: `cargo-manifest` applies to rust-cpu, rust-cuda-oxide, rust-cutile kernels, but `[kernel.relu_cpu]` has language cpp-cpu | remove `cargo-manifest`, or move it to a kernel whose `language` is one of rust-cpu, rust-cuda-oxide, rust-cutile; cpp-cpu kernels accept: language, depends, src, include, cxx-flags",
        ]);
}

#[test]
fn a_rust_kernel_needs_its_cargo_manifest_and_tvm_ffi() {
    let text = TVM.replace("cargo-manifest = \"relu-rs/Cargo.toml\"\n", "");
    assert_eq!(findings(&text), [
            "16:1 Error missing-cargo-manifest: `[kernel.relu_rs]` is a rust-cuda-oxide kernel but has no `cargo-manifest` | add `cargo-manifest = \"Cargo.toml\"`: the path of the kernel crate's manifest, relative to the kernel directory",
        ]);
    let text =
        TVM.replace("[tvm-ffi]\nsrc = [\"tvm-ffi-ext/binding.cpp\"]", "[torch]\nsrc = [\"torch-ext/b.cpp\"]");
    assert_eq!(findings(&text), [
            "17:12 Error rust-needs-tvm-ffi: `[kernel.relu_rs]` is a Rust kernel (rust-cuda-oxide), and Rust kernels are built as `[tvm-ffi]` extensions only, but the framework section is `[torch]` | replace `[torch]` with `[tvm-ffi]` (and its `src`), or write the kernel in C++ (`language = \"cpp-cuda\"`)",
        ]);
    // `depends` is a C++ key.
    let text = TVM.replace(
        "cargo-manifest = \"relu-rs/Cargo.toml\"\n",
        "cargo-manifest = \"relu-rs/Cargo.toml\"\ndepends = []\n",
    );
    assert_eq!(findings(&text), [
            "19:11 Error key-for-other-language: `depends` applies to cpp-cpu, cpp-cuda, cpp-metal, cpp-rocm, cpp-xpu kernels, but `[kernel.relu_rs]` has language rust-cuda-oxide | remove `depends`, or move it to a kernel whose `language` is one of cpp-cpu, cpp-cuda, cpp-metal, cpp-rocm, cpp-xpu; rust-cuda-oxide kernels accept: language, cargo-manifest, src, cuda-capabilities",
        ]);
}

#[test]
fn rust_cutile_needs_tileiras_minver_of_at_least_13_2() {
    let base = TVM.replace("rust-cuda-oxide", "rust-cutile");
    assert_eq!(findings(&base), [
            "16:1 Error missing-key: `[kernel.relu_rs]` is a rust-cutile kernel but has no `tileiras-minver` | add `tileiras-minver = \"13.2\"`: the lowest CUDA whose tileiras compiles the kernel (13.2 or later)",
        ]);
    for (v, expected) in [
        ("13.1", "20:19 Error tileiras-minver: `kernel.relu_rs.tileiras-minver` is 13.1, but cuTile needs CUDA 13.2 or later | write `tileiras-minver = \"13.2\"` or higher"),
        ("13", "20:19 Error bad-version: `kernel.relu_rs.tileiras-minver` is `13`; it must be `major.minor` | write it as e.g. \"13.2\""),
        ("13.2", ""),
    ] {
        let text = base.replace("src = [\"relu-rs/src\"]\n", &format!("src = [\"relu-rs/src\"]\ntileiras-minver = \"{v}\"\n"));
        let got = findings(&text);
        assert_eq!(got.join("\n"), expected, "{v}");
    }
}

#[test]
fn a_language_for_a_backend_not_built_is_a_warning_at_the_language() {
    let text = TVM.replace("language = \"cpp-cpu\"", "language = \"cpp-rocm\"");
    assert_eq!(findings(&text), [
            "6:13 Error tvm-ffi-backend-without-kernel: backend `cpu` has no `[kernel.*]`; a `[tvm-ffi]` kernel has no pure-Python variant, so nothing would be built for `cpu` | add `[kernel.<name>]` with `language = \"cpp-cpu\"` (and its `depends` and `src`), or remove \"cpu\" from `general.backends`",
            "12:12 Warning kernel-not-built: `[kernel.relu_cpu]` (cpp-rocm) targets rocm, which is not in `general.backends`, so it is never built | add \"rocm\" to `general.backends`, or remove the kernel",
        ]);
}

#[test]
fn an_unknown_language_suggests_the_cpp_language_of_a_backend_name() {
    for (lang, what) in [
        ("cuda", "` | did you mean `cpp-cuda`? "),
        ("cpp-cdua", "` | did you mean `cpp-cuda`? "),
        ("fortran", "` | "),
        ("tpu", "`: tpu is a backend, and no `[kernel.*]` compiles for it | "),
    ] {
        let text = TVM.replace("language = \"cpp-cpu\"", &format!("language = \"{lang}\""));
        let expected = format!("12:12 Error unknown-language: unknown language `{lang}` for `[kernel.relu_cpu]{what}languages: cpp-cpu, cpp-cuda, cpp-metal, cpp-rocm, cpp-xpu, rust-cpu, rust-cuda-oxide, rust-cutile");
        assert_eq!(findings(&text), [expected], "{lang}");
    }
}

#[test]
fn an_edition5_backend_in_edition6_names_its_language() {
    let text = TVM.replace("language = \"cpp-cpu\"", "backend = \"cpu\"");
    assert_eq!(findings(&text), [
            "12:11 Error backend-in-edition-6: `[kernel.relu_cpu]` names a `backend`, the edition-5 key; edition 6 names the kernel's `language` | replace `backend = \"cpu\"` with `language = \"cpp-cpu\"` (or `language = \"rust-…\"` for a Rust kernel)",
        ]);
    let text = TVM.replace("language = \"cpp-cpu\"", "language = \"cpp-cpu\"\nbackend = \"cpu\"");
    assert_eq!(findings(&text), [
            "13:11 Error backend-in-edition-6: `backend` is the edition-5 key; in edition 6 `language` (here cpp-cpu) decides the backend | remove `backend`",
        ]);
}

#[test]
fn edition6_keys_in_edition5_say_which_edition_has_them() {
    let text = "[general]\nname = \"relu\"\nversion = 1\nedition = 5\nlicense = \"MIT\"\nbackends = [\"cpu\"]\nbuild-layout = \"zip\"\n\n[torch]\n\n[kernel.k]\nlanguage = \"cpp-cpu\"\nbackend = \"cpu\"\ndepends = []\nsrc = [\"k.cpp\"]\n";
    assert_eq!(findings(text), [
            "7:16 Error edition-6-key: `build-layout` is an edition-6 key, but this file is edition 5 | write `edition = 6` and name each kernel's `language` instead of its `backend` (`kernel-builder update-build` rewrites the file so)",
            "12:12 Error edition-6-key: `language` is an edition-6 key, but this file is edition 5 | write `edition = 6` and name each kernel's `language` instead of its `backend` (`kernel-builder update-build` rewrites the file so)",
        ]);
    let text = "[general]\nname = \"relu\"\nversion = 1\nedition = 5\nlicense = \"MIT\"\nbackends = [\"metal\"]\n\n[mlx-noarch]\n";
    assert_eq!(findings(text), [
            "8:1 Error edition-6-key: `[mlx-noarch]` is an edition-6 section, but this file is edition 5 | write `edition = 6` and name each kernel's `language` instead of its `backend` (`kernel-builder update-build` rewrites the file so)",
        ]);
}

#[test]
fn build_layout_is_files_or_zip() {
    let text = TVM.replace(
        "backends = [\"cpu\", \"cuda\"]\n",
        "backends = [\"cpu\", \"cuda\"]\nbuild-layout = \"ZIP\"\n",
    );
    assert_eq!(findings(&text), [
            "7:16 Error unknown-build-layout: unknown build layout `ZIP` | did you mean `zip`? layouts: files (a directory tree, every loader), zip (Python and data files in one zip, kernels >= 0.19.0)",
        ]);
    let text =
        TVM.replace("backends = [\"cpu\", \"cuda\"]\n", "backends = [\"cpu\", \"cuda\"]\nbuild-layout = 1\n");
    assert_eq!(findings(&text), [
            "7:16 Error wrong-type: `general.build-layout` must be a string, found an integer | write it as \"files\" or \"zip\"",
        ]);
}

/// A Helion kernel (`helion` in `python-depends`, general or per backend) with `build-layout =
/// "zip"` gets a warning at that line: Helion cannot find heuristic files inside the archive
/// (tests/python/test_helion_zip_layout.py shows it with Helion's own lookup). `check-config`
/// says it at the line, and a Helion kernel in `files`, or a zip kernel without Helion, gets none.
#[test]
fn a_helion_kernel_in_the_zip_layout_is_warned_at_the_line() {
    let helion = "[general]\nname = \"vector-add-helion\"\nversion = 1\nedition = 6\nlicense = \"Apache-2.0\"\nbackends = [\"cuda\", \"rocm\"]\npython-depends = [\"helion\"]\nbuild-layout = \"zip\"\n\n[torch-noarch]\n";
    let warning = "8:16 Warning helion-zip-layout: a Helion kernel in the zip layout runs untuned: Helion looks for its heuristic files (`_helion_aot_*.py`) beside the kernel's source on the file system, and inside the variant's zip archive it finds none; a build of the kernel with heuristic files is refused | write `build-layout = \"files\"` (the default, read by every loader), or remove the line";
    assert_eq!(findings(helion), [warning]);
    assert_eq!(findings(&helion.replace("\"zip\"", "\"files\"")), Vec::<String>::new());
    assert_eq!(findings(&helion.replace("[\"helion\"]", "[\"einops\"]")), Vec::<String>::new());

    // The same through the CLI, which names the file.
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("build.toml"), helion).unwrap();
    std::fs::create_dir_all(t.path().join("torch-ext/vector_add_helion")).unwrap();
    std::fs::write(t.path().join("torch-ext/vector_add_helion/__init__.py"), "").unwrap();
    let out = crate::util::kb().arg("check-config").arg(t.path()).output().unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("helion-zip-layout"), "{stderr}");
    assert!(stderr.contains("build.toml:8:16"), "{stderr}");
}

#[test]
fn mlx_noarch_is_metal_only_and_plans_the_mlx_metal_cell() {
    let text = "[general]\nname = \"relu\"\nversion = 1\nedition = 6\nlicense = \"MIT\"\nbackends = [\"metal\"]\n\n[mlx-noarch]\npyext = [\"py\", \"metal\"]\n";
    let k = kernel::load_str_styled(Utf8Path::new("build.toml"), text, None, RenderStyle::Plain).unwrap();
    assert_eq!(
        k.config.framework,
        Framework::MlxNoarch(kernel_builder::config::MlxNoarch {
            pyext: Some(vec!["py".to_owned(), "metal".to_owned()])
        })
    );
    let cells: Vec<(String, String, bool)> = k
        .cells
        .in_scope(kernel_builder::matrix::Scope::All)
        .iter()
        .map(|c| {
            (c.name.clone(), serde_json::to_value(c.kind).unwrap().as_str().unwrap().to_owned(), c.noarch)
        })
        .collect();
    assert_eq!(cells, [("mlx-metal".to_owned(), "mlx-noarch".to_owned(), true)]);
    let text = text
        .replace("[\"metal\"]\n", "[\"metal\", \"cpu\"]\n")
        .replace("pyext = [\"py\", \"metal\"]\n", "src = []\n");
    assert_eq!(findings(&text), [
            "6:22 Error mlx-noarch-backend: `[mlx-noarch]` builds for the metal backend only, but `general.backends` lists `cpu` | remove \"cpu\" from `general.backends`; for other backends write the kernel as `[torch-noarch]`",
            "9:1 Error unknown-key: unknown key `src` in `[mlx-noarch]` | allowed keys: pyext",
        ]);
}

/// A copy of `tests/fixtures/edition6/<name>` in a temporary directory.
fn fixture(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let src = Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/edition6").join(name);
    let dest = t.path().join(name);
    for entry in walkdir::WalkDir::new(&src) {
        let entry = entry.unwrap();
        let to = dest.join(entry.path().strip_prefix(&src).unwrap());
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&to).unwrap();
        } else {
            std::fs::copy(entry.path(), &to).unwrap();
        }
    }
    (t, dest)
}

/// A build that reaches a Rust CUDA kernel refuses it by name with the toolchain it needs, and
/// writes nothing; a rust-cpu kernel is planned for cargo (built in `rust_cpu.rs`), and a
/// generated CMake project refuses it, saying what builds it.
#[test]
fn builds_refuse_rust_cuda_kernels_naming_the_toolchain() {
    let (_t, dir) = fixture("tvm-ffi-rust");
    let out = crate::util::kb().args(["build-and-copy", "--nix", "never"]).arg(&dir).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains(
        "  the `cuda` variant is not built: cannot build natively yet: `[kernel.relu_cutile]` is a rust-cutile kernel, which needs cargo with cutile-rs and the CUDA tileiras compiler (CUDA 13.2 or later); this kernel-builder reads, checks and plans Rust kernels but does not build them\n"
    ), "{stderr}");
    assert!(!stderr.contains("`[kernel.relu_rust]` is a rust-cpu kernel"), "{stderr}");
    assert!(!dir.join("build").exists());
    let project = dir.join("project");
    let out = crate::util::kb().args(["create-pyproject", "--out"]).arg(&project).arg(&dir).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8(out.stderr)
        .unwrap()
        .contains("`[kernel.relu_rust]` is a rust-cpu kernel, whose crate cargo builds: a generated CMake project has no place for it; build the kernel with `kernel-builder build-and-copy --nix never`"));
    assert!(!project.exists());
}

/// An `[mlx-noarch]` kernel (the fixture: a Metal ReLU through `mlx.core.fast.metal_kernel`)
/// builds as the noarch `mlx-metal` variant: its package files (`pyext` takes `relu.metal`), an
/// `_ops.py` that does not import torch, and metadata with `kernels-minver` 0.19.0 (the first
/// loader with MLX variants). A copy at another path builds the same bytes, and `verify`
/// rebuilds it to the recorded NAR hash. (That kernels 0.19.1 reads the tree and its digest is
/// tests/python/test_mlx_noarch.py.)
#[test]
fn mlx_noarch_builds_the_mlx_metal_variant() {
    let (_t, dir) = fixture("mlx");
    let out = crate::util::kb().args(["build-and-copy", "--nix", "never"]).arg(&dir).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let variant = dir.join("build").join("mlx-metal");
    let mut files: Vec<String> =
        std::fs::read_dir(&variant).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    files.sort();
    assert_eq!(files, ["__init__.py", "_ops.py", "metadata.json", "relu.metal"]);
    let names: Vec<String> = std::fs::read_dir(dir.join("build"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}"); // mlx-metal and hashes.json
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(variant.join("metadata.json")).unwrap()).unwrap();
    let id = meta["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("_relu_mlx_metal_") && id.len() == "_relu_mlx_metal_".len() + 7, "{id}");
    assert_eq!(meta["name"], "relu-mlx");
    assert_eq!(meta["backend"], serde_json::json!({"type": "metal"}));
    assert_eq!(meta["kernels-minver"], "0.19.0");
    assert_eq!(meta["python-depends"], serde_json::json!([]));
    assert!(meta.get("build").is_none() && meta.get("build-layout").is_none(), "{meta}");
    let digested: Vec<&String> = meta["digest"]["files"].as_object().unwrap().keys().collect();
    assert_eq!(digested, ["__init__.py", "_ops.py", "relu.metal"]);
    let ops = std::fs::read_to_string(variant.join("_ops.py")).unwrap();
    assert!(!ops.contains("import torch"), "{ops}");
    assert!(ops.contains(&format!("namespace = \"{id}\"\n")), "{ops}");
    assert_eq!(
        std::fs::read(variant.join("relu.metal")).unwrap(),
        std::fs::read(dir.join("torch-ext/relu_mlx/relu.metal")).unwrap()
    );

    // Another copy, at another path: the same bytes, the same NAR hash.
    let (_t2, again) = fixture("mlx");
    let out = crate::util::kb().args(["build-and-copy", "--nix", "never"]).arg(&again).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    for f in ["__init__.py", "_ops.py", "metadata.json", "relu.metal"] {
        assert_eq!(
            std::fs::read(variant.join(f)).unwrap(),
            std::fs::read(again.join("build/mlx-metal").join(f)).unwrap(),
            "{f}"
        );
    }
    assert_eq!(
        std::fs::read(dir.join("build/hashes.json")).unwrap(),
        std::fs::read(again.join("build/hashes.json")).unwrap()
    );
    let out = crate::util::kb().arg("verify").arg(&dir).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

/// check-config's summary of an edition-6 file names each kernel's language (`--json` has it
/// for every edition).
#[test]
fn check_config_names_each_kernels_language() {
    let (_t, dir) = fixture("tvm-ffi-rust");
    let out = crate::util::kb().arg("check-config").arg(&dir).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "name: relu-rust\ngeneration: edition 6\nbackends: cpu, cuda\nframework: tvm-ffi\nkernels:\n  \
         relu_rust (rust-cpu) -> cpu\n  relu_cutile (rust-cutile) -> cuda\n  relu_cuda (cpp-cuda) -> cuda\n\
         matrix: 2026-12 (revision 2026-12-01)\n"
    );
}

/// `build-layout = "zip"` in build.toml reaches the assembler: an edition-6 noarch kernel
/// (silu-and-mul, migrated by `update-build`) builds each variant as `<id>.zip` beside
/// metadata.json, which says so and asks for kernels 0.19.0, the first loader that reads it.
#[test]
fn build_layout_zip_in_build_toml_builds_zip_trees() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("silu-and-mul");
    crate::util::copy_kernel("silu-and-mul", &dir);
    let run = |args: &[&str]| {
        let out = crate::util::kb()
            .args(args)
            .arg(&dir)
            .env("KERNEL_BUILDER_CACHE_DIR", t.path().join("cache"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    run(&["update-build"]);
    let toml = std::fs::read_to_string(dir.join("build.toml")).unwrap();
    assert!(toml.contains("\nedition = 6\n"), "{toml}");
    std::fs::write(
        dir.join("build.toml"),
        toml.replace("\nedition = 6\n", "\nedition = 6\nbuild-layout = \"zip\"\n"),
    )
    .unwrap();
    run(&["build-and-copy", "--nix", "never"]);
    for variant in ["torch-cpu", "torch-cuda"] {
        let v = dir.join("build").join(variant);
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(v.join("metadata.json")).unwrap()).unwrap();
        let id = meta["id"].as_str().unwrap();
        let mut files: Vec<String> =
            std::fs::read_dir(&v).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        files.sort();
        assert_eq!(files, [format!("{id}.zip"), "metadata.json".to_owned()], "{variant}");
        assert_eq!(meta["build-layout"], "zip", "{variant}");
        assert_eq!(meta["kernels-minver"], "0.19.0", "{variant}");
    }
}
