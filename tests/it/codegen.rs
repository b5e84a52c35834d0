//! The generated build project (`create-pyproject`, `clean-pyproject`, [`kernel_builder::codegen`])
//! over the real corpus: every `[torch]` / `[tvm-ffi]` file upstream accepts generates, and five
//! of them are pinned as snapshots (CUDA `9.0a` with cutlass, ROCm, XPU, Metal, tvm-ffi).

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use camino::Utf8Path;
use kernel_builder::codegen::{self, Layout, GENERATED_BY};

use crate::corpus;
use crate::util::kb;

/// The corpus entries upstream accepts whose framework is compiled, with their loaded config.
fn compiled_entries(
) -> Vec<(String, tempfile::TempDir, camino::Utf8PathBuf, kernel_builder::config::BuildConfig)> {
    let mut out = Vec::new();
    for (name, expected) in corpus::entries() {
        if expected.get("variants").is_none() {
            continue; // upstream rejects it
        }
        let (tmp, dir) = corpus::materialize(&name);
        let Ok(loaded) = kernel_builder::kernel::load(&dir) else { continue };
        if matches!(loaded.config.framework, kernel_builder::config::Framework::TorchNoarch(_)) {
            continue;
        }
        out.push((name, tmp, dir, loaded.config));
    }
    out
}

#[test]
#[cfg_attr(
    not(feature = "corpus-tests"),
    ignore = "needs the corpus: cargo test --features corpus-tests (KERNEL_BUILDER_CORPUS or ../shared/corpus)"
)]
fn every_accepted_compiled_corpus_kernel_generates_a_project() {
    let entries = compiled_entries();
    assert!(
        entries.len() >= 40,
        "expected most of the corpus to be compiled kernels, found {}",
        entries.len()
    );
    for (name, _tmp, dir, config) in &entries {
        let p =
            codegen::generate(config, dir, &Layout::default()).unwrap_or_else(|e| panic!("{name}: {e:#}"));
        for f in &p.files {
            let first = f.contents.lines().next().unwrap_or_default();
            assert!(first.contains(GENERATED_BY), "{name}: {} starts with {first:?}", f.path);
        }
        let cm = &p.file("CMakeLists.txt").unwrap().contents;
        let project = format!("project({} LANGUAGES CXX)", config.general.python_name());
        assert!(cm.contains(&project), "{name}: no `{project}`");
        for (k, kernel) in &config.kernels {
            assert!(
                cm.contains(&format!("\n# [kernel.{k}] ({})\n", kernel.backend)),
                "{name}: no block for {k}"
            );
            if kernel.backend == kernel_builder::config::Backend::Cuda {
                let var = format!("KB_CUDA_ARCH_FLAGS_{}", codegen::cmake_ident(k));
                assert!(
                    cm.contains(&format!("if(\"${{{var}}}\" STREQUAL \"\")")),
                    "{name}: {k} has no arch check"
                );
            }
        }
    }
}

/// All files of a generated project, one after the other.
fn render(config_dir: &Utf8Path) -> String {
    let config = kernel_builder::kernel::load(config_dir).unwrap().config;
    let p = codegen::generate(&config, config_dir, &Layout::default()).unwrap();
    p.files.iter().map(|f| format!("=== {}\n{}", f.path, f.contents)).collect()
}

/// The parity fixture's project: per-kernel flags scoped to their kernel and language
/// (`-static-global-template-stub` for nvcc 12.8 and later only), the directories of headers
/// listed in `src` for the kernel and the binding, `csrc/` and the dependency's include
/// directories for every source (as upstream's generated build scopes them).
#[test]
fn parity_fixture_project_scopes_flags_and_includes_as_upstream() {
    let dir = Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/parity");
    let text = render(&dir);
    let cm = text.split("=== ").find(|f| f.starts_with("CMakeLists.txt")).unwrap();
    for line in [
        "  list(APPEND KB_HEADER_DIRS \"${KB_SOURCE_DIR}/ops\")",
        "  list(APPEND KB_HEADER_DIRS \"${KB_SOURCE_DIR}/csrc/sub\")",
        "  list(APPEND KB_DEP_INCLUDE_DIRS ${KB_DEP_cutlass_3_8_INCLUDE_DIRS})",
        "  set_property(SOURCE \"${KB_SOURCE_DIR}/flagged/flagged.cu\" APPEND PROPERTY INCLUDE_DIRECTORIES \"${KB_SOURCE_DIR}/ops\" \"${KB_SOURCE_DIR}/csrc/sub\")",
        "  set_property(SOURCE \"${KB_SOURCE_DIR}/flagged/flagged.cu\" APPEND PROPERTY COMPILE_OPTIONS ${KB_CUDA_ARCH_FLAGS_flagged} \"$<$<VERSION_GREATER_EQUAL:${CMAKE_CUDA_COMPILER_VERSION},12.8>:-static-global-template-stub=false>\" \"-frandom-seed=flagged/flagged.cu\" \"-Xcudafe=--orig_src_path_name=flagged/flagged.cu\" \"-Xcicc=--orig_src_path_name=flagged/flagged.cu\" \"-DPARITY_CUDA_FLAG=1\")",
        "  set_property(SOURCE \"${KB_SOURCE_DIR}/flagged/flagged_host.cpp\" APPEND PROPERTY COMPILE_OPTIONS \"-DPARITY_CXX_FLAG=1\")",
        "  set_property(SOURCE \"${KB_SOURCE_DIR}/torch-ext/torch_binding.cpp\" APPEND PROPERTY INCLUDE_DIRECTORIES ${KB_HEADER_DIRS})",
        "target_include_directories(kb_module PRIVATE \"${CMAKE_CURRENT_SOURCE_DIR}/torch-ext\" \"${CMAKE_CURRENT_BINARY_DIR}\" \"${KB_SOURCE_DIR}/csrc\" ${KB_DEP_INCLUDE_DIRS})",
    ] {
        assert!(cm.lines().any(|l| l == line), "no line\n{line}\nin\n{cm}");
    }
    // Other kernels' sources see neither [kernel.flagged]'s flags nor its header directories.
    let uses_dep: Vec<&str> = cm.lines().filter(|l| l.contains("uses_dep/uses_dep.cu")).collect();
    assert!(uses_dep.iter().all(|l| !l.contains("PARITY_") && !l.contains("/ops")), "{uses_dep:?}");
}

#[test]
#[cfg_attr(
    not(feature = "corpus-tests"),
    ignore = "needs the corpus: cargo test --features corpus-tests (KERNEL_BUILDER_CORPUS or ../shared/corpus)"
)]
fn snapshots_of_five_corpus_projects() {
    for (snap, entry) in [
        ("flash_attn3_cuda_9_0a_cutlass", "huggingface__kernels-community__flash-attn3"),
        ("activation_rocm_metal", "huggingface__kernels-community__activation"),
        ("rmsnorm_xpu", "huggingface__kernels-community__rmsnorm"),
        ("gpt_oss_metal", "huggingface__kernels-community__gpt-oss-metal-kernels"),
        ("relu_tvm_ffi", "huggingface__kernels__examples_kernels_relu-tvm-ffi-compiler-flags"),
    ] {
        let (_tmp, dir) = corpus::materialize(entry);
        insta::assert_snapshot!(snap, render(&dir));
    }
}

fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    walkdir::WalkDir::new(dir)
        .sort_by_file_name()
        .into_iter()
        .filter_map(Result::ok)
        .map(|e| {
            let rel = e.path().strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            let bytes = if e.file_type().is_file() { fs::read(e.path()).unwrap() } else { b"<dir>".to_vec() };
            (rel, bytes)
        })
        .collect()
}

#[test]
fn create_then_clean_from_another_directory_leaves_the_kernel_as_it_was() {
    let t = tempfile::tempdir().unwrap();
    let kernel = super::hostile::relu(t.path());
    let before = tree(&kernel);
    let elsewhere = t.path().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();

    let out = kb().current_dir(&elsewhere).args(["create-pyproject", "../relu"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let k = kernel.canonicalize().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!(
            "wrote {0}/CMakeLists.txt\nwrote {0}/cmake/kb-embed-metallib.cmake\nwrote {0}/pyproject.toml\nwrote {0}/setup.py\nwrote {0}/torch-ext/registration.h\n",
            k.display()
        )
    );
    assert!(kernel.join(".kernel-builder-generated-v1").is_file());
    // A second run rewrites its own files without --force.
    assert!(kb()
        .current_dir(&elsewhere)
        .args(["create-pyproject", "../relu"])
        .output()
        .unwrap()
        .status
        .success());
    // A user's file in the way is refused, nothing written.
    let t2 = tempfile::tempdir().unwrap();
    fs::write(t2.path().join("CMakeLists.txt"), "mine").unwrap();
    let out = kb()
        .current_dir(&elsewhere)
        .args(["create-pyproject", "../relu", "--out", t2.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("`CMakeLists.txt`"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(fs::read_dir(t2.path()).unwrap().count(), 1);

    let out =
        kb().current_dir(&elsewhere).args(["clean-pyproject", "../relu", "--dry-run"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout)
        .starts_with(&format!("would remove {}/CMakeLists.txt\n", k.display())));
    assert!(kernel.join("CMakeLists.txt").is_file());
    let out = kb().current_dir(&elsewhere).args(["clean-pyproject", "../relu"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!(
            "removed {0}/CMakeLists.txt\nremoved {0}/cmake/kb-embed-metallib.cmake\nremoved {0}/pyproject.toml\nremoved {0}/setup.py\nremoved {0}/torch-ext/registration.h\nremoved {0}/cmake\n",
            k.display()
        )
    );
    assert_eq!(tree(&kernel), before);
}

#[test]
#[cfg_attr(
    not(feature = "corpus-tests"),
    ignore = "needs the corpus: cargo test --features corpus-tests (KERNEL_BUILDER_CORPUS or ../shared/corpus)"
)]
fn out_elsewhere_points_the_project_at_the_kernel() {
    let t = tempfile::tempdir().unwrap();
    let (_tmp, dir) = corpus::materialize("huggingface__kernels-community__activation");
    let out =
        kb().current_dir(t.path()).args(["create-pyproject", dir.as_str(), "--out", "."]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let cm = fs::read_to_string(t.path().join("CMakeLists.txt")).unwrap();
    let target = Utf8Path::from_path(t.path()).unwrap().canonicalize_utf8().unwrap();
    let rel = pathdiff(&target, &dir.canonicalize_utf8().unwrap());
    assert!(
        cm.contains(&format!("set(KB_SOURCE_DIR \"${{CMAKE_CURRENT_SOURCE_DIR}}/{rel}\" CACHE PATH")),
        "{cm}"
    );
}

fn pathdiff(from: &Utf8Path, to: &Utf8Path) -> String {
    let f: Vec<_> = from.components().collect();
    let t: Vec<_> = to.components().collect();
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = (common..f.len()).map(|_| "..".to_owned()).collect();
    parts.extend(t[common..].iter().map(|c| c.as_str().to_owned()));
    parts.join("/")
}

/// Source names the generated project cannot pass on are refused before anything is written,
/// naming the file and the kernel (from a user's report: a `;` became a CMake list separator;
/// a space in a CUDA source split nvcc's `-Xcudafe` option).
#[test]
fn source_names_cmake_or_nvcc_would_split_are_refused() {
    for (file, backend, why) in [
        ("relu_cpu/a;b.cpp", "cpu", "has a `;` in its name, which CMake reads as a list separator"),
        (
            "relu_cuda/my relu.cu",
            "cuda",
            "has whitespace in its name, which nvcc cannot pass on to its front end",
        ),
    ] {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        fs::write(
            d.join("build.toml"),
            format!(
                "[general]\nname = \"relu\"\nversion = 1\nedition = 5\nlicense = \"MIT\"\nbackends = [\"{backend}\"]\n\n[torch]\nsrc = [\"torch-ext/b.cpp\"]\n\n[kernel.k]\nbackend = \"{backend}\"\ndepends = [\"torch\"]\nsrc = [\"{file}\"]\n"
            ),
        )
        .unwrap();
        for f in ["torch-ext/b.cpp", file, "torch-ext/relu/__init__.py"] {
            fs::create_dir_all(d.join(f).parent().unwrap()).unwrap();
            fs::write(d.join(f), "").unwrap();
        }
        let out = kb().current_dir(d).args(["create-pyproject", "."]).output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&format!("`{file}` (a ")), "{err}");
        assert!(err.contains("of [kernel.k]") && err.contains(why), "{err}");
        assert!(!d.join("CMakeLists.txt").exists());
    }
}

/// `create-pyproject --out DIR` creates DIR (and its parents) when missing, as `mkdir -p`
/// would, and `clean-pyproject --out DIR` then empties it; when the project cannot be written
/// (a bad build.toml), the directories it created are removed again.
#[test]
fn create_pyproject_out_creates_the_directory() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let t = tempfile::tempdir().unwrap();
    let out_dir = t.path().join("projects/relu");
    let out = kb()
        .current_dir(t.path())
        .args(["create-pyproject", repo.join("kernels/relu").to_str().unwrap(), "--out", "projects/relu"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let o = out_dir.canonicalize().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!(
            "created projects\nwrote {0}/CMakeLists.txt\nwrote {0}/cmake/kb-embed-metallib.cmake\nwrote {0}/pyproject.toml\nwrote {0}/setup.py\nwrote {0}/torch-ext/registration.h\n",
            o.display()
        )
    );
    let cmake = fs::read_to_string(out_dir.join("CMakeLists.txt")).unwrap();
    let rel = Utf8Path::new(repo.to_str().unwrap()).join("kernels/relu");
    assert!(cmake.contains("set(KB_SOURCE_DIR \"${CMAKE_CURRENT_SOURCE_DIR}/"), "{cmake}");
    assert!(Utf8Path::new(out_dir.to_str().unwrap()).join("../..").exists() && rel.is_dir());
    let out = kb()
        .current_dir(t.path())
        .args(["clean-pyproject", rel.as_str(), "--out", "projects/relu"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(fs::read_dir(&out_dir).unwrap().count(), 0);

    // A kernel whose build.toml is broken: nothing is created.
    let bad = t.path().join("bad");
    fs::create_dir(&bad).unwrap();
    fs::write(bad.join("build.toml"), "[general]\nname = 1\n").unwrap();
    let out =
        kb().current_dir(t.path()).args(["create-pyproject", "bad", "--out", "new/deeper"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(!t.path().join("new").exists(), "{}", String::from_utf8_lossy(&out.stderr));
    // Something in the way that is not a directory.
    fs::write(t.path().join("file"), "x").unwrap();
    let out = kb()
        .current_dir(t.path())
        .args(["create-pyproject", repo.join("kernels/relu").to_str().unwrap(), "--out", "file"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "error: `file` (--out) exists and is not a directory\n");
}
