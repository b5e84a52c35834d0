//! `build.toml` loading: user-report cases, the real-file corpus, a no-panic property test and
//! the `check-config` command.

use std::fs;

use camino::{Utf8Path, Utf8PathBuf};
use kernel_builder::config::diagnostics::RenderStyle;
use kernel_builder::config::{self, Backend, ConfigErrors, Framework, Generation, Severity};
use kernel_builder::kernel;
use kernel_builder::kernel::Kernel;
use proptest::prelude::*;

use super::util::kb;

/// A valid edition-5 file the cases below start from.
const BASE: &str = r#"[general]
name = "relu"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cuda"]

[torch]
src = ["torch-ext/torch_binding.cpp"]

[kernel.relu]
backend = "cuda"
depends = ["torch"]
src = ["relu/relu.cu"]
"#;

fn load(text: &str) -> Result<Kernel, ConfigErrors> {
    kernel::load_str_styled(Utf8Path::new("build.toml"), text, None, RenderStyle::Plain)
}

fn errors(text: &str) -> ConfigErrors {
    match load(text) {
        Ok(l) => panic!("expected errors, got a valid config: {:?}", l.config),
        Err(e) => e,
    }
}

/// The rules of the errors, in file order.
fn rules(e: &ConfigErrors) -> Vec<&'static str> {
    e.errors().map(|p| p.rule).collect()
}

fn assert_contains(haystack: &str, needles: &[&str]) {
    for n in needles {
        assert!(haystack.contains(n), "missing {n:?} in:\n{haystack}");
    }
}

#[test]
fn base_file_is_valid_and_read_into_the_model() {
    let l = load(BASE).unwrap();
    let c = &l.config;
    assert_eq!(c.generation, Generation::Edition5);
    assert_eq!(c.general.name, "relu");
    assert_eq!(c.general.version, 1);
    assert_eq!(c.general.license, "Apache-2.0");
    assert_eq!(c.general.backends, vec![Backend::Cuda]);
    match &c.framework {
        Framework::Torch(t) => assert_eq!(t.src, vec!["torch-ext/torch_binding.cpp".to_owned()]),
        f => panic!("wrong framework {f:?}"),
    }
    assert_eq!(c.kernels.len(), 1);
    assert_eq!(c.kernels["relu"].backend, Backend::Cuda);
    assert_eq!(c.kernels["relu"].src, vec!["relu/relu.cu".to_owned()]);
    assert!(l.warnings.is_empty());
    assert_eq!(l.rendered_warnings, "");
}

#[test]
fn every_value_type_is_read() {
    let text = r#"[general]
name = "all-keys"
version = 3
edition = 5
license = "MIT"
upstream = "git@github.com:org/x.git"
source = "https://github.com/org/y"
backends = ["cuda", "rocm", "xpu", "neuron", "tpu", "cpu"]
python-depends = ["einops"]
kernel-depends = [{ repo-id = "kernels-community/relu", version = 1 }]

[general.cuda]
minver = "12.6"
maxver = "13.0"
python-depends = ["nvidia-cutlass-dsl"]
kernel-depends = [{ repo-id = "org/k", revision = "abc123" }]

[general.neuron]
python-depends = ["nki"]

[general.xpu]
python-depends = ["onednn"]

[general.hub]
repo-id = "org/all-keys"
branch = "v3"

[torch]
include = ["inc"]
minver = "2.9"
maxver = "2.12"
pyext = ["py", "json"]
src = ["torch-ext/b.cpp"]
cxx-flags = ["-O2"]

[torch.stable-abi]
cuda = "2.10"

[kernel.k]
backend = "cuda"
depends = ["torch", "cutlass_4_4"]
src = ["k/k.cu"]
include = ["k"]
cuda-capabilities = ["8.0", "9.0a", "10.0f", "12.0+PTX"]
cuda-flags = ["-lineinfo"]
cuda-minver = "12.8"

[kernel.k_rocm]
backend = "rocm"
depends = []
src = ["k/k.cu"]
rocm-archs = ["gfx942"]
hip-flags = ["-O3"]

[kernel.k_xpu]
backend = "xpu"
depends = ["sycl_tla"]
src = ["k/k.cpp"]
sycl-flags = ["-x"]
"#;
    let c = load(text).unwrap().config;
    let g = &c.general;
    assert_eq!(g.upstream.as_deref(), Some("git@github.com:org/x.git"));
    assert_eq!(g.kernel_depends[0].repo_id, "kernels-community/relu");
    assert_eq!(g.kernel_depends[0].pin, config::KernelPin::Version(1));
    assert_eq!(g.cuda.minver.as_ref().unwrap().text, "12.6");
    assert_eq!(g.cuda.maxver.as_ref().unwrap().parts, vec![13, 0]);
    assert_eq!(g.cuda.deps.kernel_depends[0].pin, config::KernelPin::Revision("abc123".into()));
    assert_eq!(g.python_depends_for(Backend::Cuda), vec!["einops", "nvidia-cutlass-dsl"]);
    assert_eq!(g.neuron.python_depends, vec!["nki"]);
    assert_eq!(g.hub.branch.as_deref(), Some("v3"));
    let Framework::Torch(t) = &c.framework else { panic!() };
    assert_eq!(t.pyext, Some(vec!["py".to_owned(), "json".to_owned()]));
    assert_eq!(t.stable_abi.for_backend(Backend::Cuda).unwrap().text, "2.10");
    assert_eq!(t.stable_abi.for_backend(Backend::Rocm), None);
    let k = &c.kernels["k"];
    assert_eq!(k.depends, vec![config::CppDependency::Torch, config::CppDependency::Cutlass(4, 4)]);
    let caps: Vec<String> = k.cuda_capabilities.as_ref().unwrap().iter().map(|c| c.to_string()).collect();
    assert_eq!(caps, ["8.0", "9.0a", "10.0f", "12.0+PTX"]);
    assert_eq!(k.cuda_minver.as_ref().unwrap().text, "12.8");
    assert_eq!(c.kernels["k_rocm"].rocm_archs, Some(vec!["gfx942".to_owned()]));
    assert_eq!(c.kernels["k_xpu"].sycl_flags, vec!["-x"]);
    assert_eq!(c.kernels.keys().collect::<Vec<_>>(), ["k", "k_rocm", "k_xpu"]);
}

// ---- user-report cases -------------------------------------------------------------------

#[test]
fn user_report_name_with_underscores_suggests_dashes() {
    let e = errors(&BASE.replace("name = \"relu\"", "name = \"fused_rms_norm\""));
    assert_eq!(rules(&e), ["kernel-name"]);
    assert_contains(
        &e.render(),
        &[
            "invalid kernel name `fused_rms_norm`: a name must match ^[a-z][-a-z0-9]*[a-z0-9]$",
            "[build.toml:2:8]",
            "2 | name = \"fused_rms_norm\"",
            "help: write `name = \"fused-rms-norm\"`",
        ],
    );
}

#[test]
fn user_report_mps_backend_suggests_metal() {
    let e = errors(&BASE.replace("backends = [\"cuda\"]", "backends = [\"cuda\", \"xpu\", \"mps\"]"));
    assert_eq!(rules(&e), ["unknown-backend"]);
    assert_eq!(
        e.problems.iter().find(|p| p.severity == Severity::Error).unwrap().key_path,
        "general.backends[2]"
    );
    assert_contains(
        &e.render(),
        &["unknown backend `mps`", "[build.toml:6:28]", "help: did you mean `metal`?"],
    );
}

#[test]
fn user_report_unknown_python_dependency_lists_known_ones() {
    let e = errors(
        &BASE.replace("backends = [\"cuda\"]", "backends = [\"cuda\"]\npython-depends = [\"helion-typo\"]"),
    );
    assert_eq!(rules(&e), ["unknown-python-dependency"]);
    assert_contains(
        &e.render(),
        &[
            "unknown Python dependency `helion-typo` (general)",
            "[build.toml:7:19]",
            "did you mean `helion`?",
            "known general Python dependencies: einops, helion, tvm-ffi",
        ],
    );
}

#[test]
fn user_report_unknown_cutlass_lists_known_versions() {
    let e = errors(&BASE.replace("depends = [\"torch\"]", "depends = [\"torch\", \"cutlass_9_9\"]"));
    assert_eq!(rules(&e), ["unknown-dependency"]);
    assert_contains(
        &e.render(),
        &[
            "unknown C++ dependency `cutlass_9_9`",
            "[build.toml:13:21]",
            "known cutlass versions: cutlass_2_10, cutlass_3_5, cutlass_3_6, cutlass_3_8, cutlass_3_9, cutlass_4_0, cutlass_4_4, cutlass_4_5",
        ],
    );
}

#[test]
fn user_report_empty_src_is_an_error() {
    let e = errors(&BASE.replace("src = [\"relu/relu.cu\"]", "src = []"));
    assert_eq!(rules(&e), ["no-sources"]);
    assert_contains(&e.render(), &["`[kernel.relu]` has no source files (`src = []`)", "[build.toml:14:7]"]);
    let e = errors(&BASE.replace("src = [\"relu/relu.cu\"]\n", ""));
    assert_eq!(rules(&e), ["no-sources"]);
    assert_contains(&e.render(), &["`[kernel.relu]` has no `src`", "[build.toml:11:1]"]);
}

#[test]
fn user_report_empty_capabilities_is_an_error() {
    let e =
        errors(&BASE.replace("src = [\"relu/relu.cu\"]", "src = [\"relu/relu.cu\"]\ncuda-capabilities = []"));
    assert_eq!(rules(&e), ["empty-capabilities"]);
    assert_contains(&e.render(), &["`kernel.relu.cuda-capabilities` is empty", "[build.toml:15:21]"]);
    // The same in [torch-noarch], with either spelling.
    for key in ["cuda_capabilities", "cuda-capabilities"] {
        let text = format!(
            "[general]\nname = \"n\"\nversion = 1\nedition = 5\nlicense = \"MIT\"\nbackends = [\"cuda\"]\n\n[torch-noarch]\n{key} = []\n"
        );
        let e = errors(&text.replace("name = \"n\"", "name = \"nn\""));
        assert_eq!(rules(&e), ["empty-capabilities"], "{key}");
        assert_contains(&e.render(), &[&format!("`torch-noarch.{key}` is empty"), "[build.toml:9:"]);
    }
}

#[test]
fn user_report_empty_rocm_archs_is_an_error() {
    let text = BASE.replace("backend = \"cuda\"", "backend = \"rocm\"").replace("[\"cuda\"]", "[\"rocm\"]")
        + "rocm-archs = []\n";
    let e = errors(&text);
    assert_eq!(rules(&e), ["empty-rocm-archs"]);
}

#[test]
fn malformed_capability_names_the_value() {
    let e = errors(&BASE.replace(
        "src = [\"relu/relu.cu\"]",
        "src = [\"relu/relu.cu\"]\ncuda-capabilities = [\"8.0\", \"sm_90\"]",
    ));
    assert_eq!(rules(&e), ["bad-capability"]);
    assert_contains(&e.render(), &["`sm_90` is not a CUDA capability", "[build.toml:15:29]"]);
}

#[test]
fn several_errors_are_all_reported_in_file_order() {
    let text = BASE
        .replace("name = \"relu\"", "name = \"Relu\"")
        .replace("backends = [\"cuda\"]", "backends = [\"cuda\", \"CUDA\"]")
        .replace("depends = [\"torch\"]", "depends = [\"torch\", \"cutlas_3_9\"]\ncuda_flags = [\"-O3\"]")
        .replace("license = \"Apache-2.0\"\n", "");
    let e = errors(&text);
    assert_eq!(
        rules(&e),
        ["missing-key", "kernel-name", "unknown-backend", "unknown-dependency", "unknown-key"]
    );
    let r = e.render();
    assert_contains(
        &r,
        &[
            "`general.license` is required",
            "help: did you mean `cuda`?",
            "did you mean `cutlass_3_9`?",
            "unknown key `cuda_flags` in `[kernel.relu]`",
            "help: did you mean `cuda-flags`?",
            "build.toml: 5 errors and 0 warnings",
        ],
    );
}

#[test]
fn unknown_keys_anywhere_get_did_you_mean() {
    let text = BASE
        .replace("edition = 5", "edition = 5\nlicence = \"MIT\"")
        .replace("[torch]\n", "[torch]\nsrcs = []\n")
        .replace("[kernel.relu]", "[kernels.x]\n\n[kernel.relu]");
    let e = errors(&text);
    assert_eq!(rules(&e), ["unknown-key", "unknown-key", "unknown-key"]);
    let r = e.render();
    assert_contains(
        &r,
        &[
            "unknown key `licence` in `[general]`",
            "did you mean `license`?",
            "unknown key `srcs` in `[torch]`",
            "did you mean `src`?",
            "unknown key `kernels` at the top level",
            "did you mean `kernel`?",
        ],
    );
}

#[test]
fn key_of_another_backend_names_the_backend() {
    let text = BASE
        .replace("backends = [\"cuda\"]", "backends = [\"cpu\"]")
        .replace("backend = \"cuda\"", "backend = \"cpu\"\ncuda-flags = [\"-O3\"]");
    let e = errors(&text);
    assert_eq!(rules(&e), ["key-for-other-backend"]);
    assert_contains(
        &e.render(),
        &["`cuda-flags` applies to cuda kernels, but `[kernel.relu]` has backend cpu", "[build.toml:13:1]"],
    );
}

#[test]
fn framework_section_count() {
    let none = BASE.replace("[torch]\nsrc = [\"torch-ext/torch_binding.cpp\"]\n", "");
    let e = errors(&none);
    assert_eq!(rules(&e), ["framework-section"]);
    assert_contains(&e.render(), &["build.toml has no framework section", "[torch-noarch]"]);
    let two = BASE.to_owned() + "\n[torch-noarch]\n";
    let e = errors(&two);
    assert_eq!(rules(&e), ["framework-section"]);
    assert_contains(
        &e.render(),
        &["`[torch-noarch]` is a second framework section (there is already `[torch]`)", "[build.toml:16:1]"],
    );
    // The second one in the file is reported, whichever it is.
    let reversed = none.clone() + "\n[torch-noarch]\n\n[torch]\nsrc = [\"torch-ext/torch_binding.cpp\"]\n";
    let e = errors(&reversed);
    assert_eq!(rules(&e), ["framework-section"]);
    assert_contains(
        &e.render(),
        &["`[torch]` is a second framework section (there is already `[torch-noarch]`)"],
    );
}

#[test]
fn noarch_accepts_both_spellings_but_not_both_at_once() {
    let base = "[general]\nname = \"nn\"\nversion = 1\nedition = 5\nlicense = \"MIT\"\nbackends = [\"cuda\", \"rocm\"]\n\n[torch-noarch]\n";
    for (c, r) in [("cuda_capabilities", "rocm_archs"), ("cuda-capabilities", "rocm-archs")] {
        let l = load(&format!("{base}{c} = [\"9.0\"]\n{r} = [\"gfx942\"]\n")).unwrap();
        let Framework::TorchNoarch(n) = &l.config.framework else { panic!() };
        assert_eq!(n.cuda_capabilities.as_ref().unwrap()[0].to_string(), "9.0");
        assert_eq!(n.rocm_archs, Some(vec!["gfx942".to_owned()]));
    }
    let e = errors(&format!("{base}cuda_capabilities = [\"9.0\"]\ncuda-capabilities = [\"9.0\"]\n"));
    assert_eq!(rules(&e), ["duplicate-key"]);
}

#[test]
fn versions_parse_and_bounds_are_ordered() {
    let e = errors(&BASE.replace("[torch]\n", "[torch]\nminver = \"2.10\"\nmaxver = \"2.9\"\n"));
    assert_eq!(rules(&e), ["version-bounds"]);
    assert_contains(&e.render(), &["`torch.maxver` (2.9) is lower than `torch.minver` (2.10)"]);
    let e = errors(&BASE.replace("[torch]\n", "[general.cuda]\nminver = \"12.x\"\n\n[torch]\n"));
    assert_eq!(rules(&e), ["bad-version"]);
    let e = errors(
        &BASE.replace("[torch]\n", "[general.cuda]\nminver = \"13.0\"\nmaxver = \"12.8\"\n\n[torch]\n"),
    );
    assert_eq!(rules(&e), ["version-bounds"]);
    // 13.0 and 13 are the same version: not a bound violation.
    load(&BASE.replace("[torch]\n", "[general.cuda]\nminver = \"13\"\nmaxver = \"13.0\"\n\n[torch]\n"))
        .unwrap();
}

#[test]
fn kernel_dependency_shape_and_types() {
    let e = errors(&BASE.replace(
        "backends = [\"cuda\"]",
        "backends = [\"cuda\"]\nkernel-depends = [{ repo-id = \"a/b\", version = 1, revision = \"x\" }, { repo-id = \"a/c\" }, { version = 1 }]",
    ));
    assert_eq!(rules(&e), ["kernel-dependency-pin", "kernel-dependency-pin", "missing-key"]);
    let e = errors(&BASE.replace("version = 1", "version = \"1\"").replace("edition = 5", "edition = 4"));
    assert_eq!(rules(&e), ["wrong-type", "unsupported-edition"]);
}

#[test]
fn git_url_schemes() {
    let e =
        errors(&BASE.replace(
            "edition = 5",
            "edition = 5\nupstream = \"ftp://example.com/x\"\nsource = \"not a url\"",
        ));
    assert_eq!(rules(&e), ["bad-git-url", "bad-git-url"]);
    assert_contains(&e.render(), &["unsupported scheme `ftp`"]);
}

#[test]
fn kernel_backend_rules() {
    let e = errors(&BASE.replace("backend = \"cuda\"", "backend = \"neuron\""));
    assert_eq!(rules(&e), ["kernel-backend"]);
    let l = load(&BASE.replace("backends = [\"cuda\"]", "backends = [\"cuda\", \"metal\"]").replace(
        "[kernel.relu]",
        "[kernel.m]\nbackend = \"cpu\"\ndepends = []\nsrc = [\"m.cpp\"]\n\n[kernel.relu]",
    ))
    .unwrap();
    assert_eq!(l.warnings.len(), 1);
    assert_eq!(l.warnings[0].rule, "kernel-not-built");
    assert_contains(
        &l.rendered_warnings,
        &["`[kernel.m]` targets cpu, which is not in `general.backends`, so it is never built"],
    );
}

#[test]
fn backend_python_depends_use_the_backend_table() {
    let text = BASE.replace("[torch]\n", "[general.cuda]\npython-depends = [\"einops\"]\n\n[general.tpu]\npython-depends = [\"jax\"]\n\n[torch]\n");
    let e = errors(&text);
    assert_eq!(rules(&e), ["unknown-python-dependency", "unknown-python-dependency"]);
    assert_contains(
        &e.render(),
        &[
            "`einops` is a general dependency: list it in `general.python-depends`",
            "known backend cuda Python dependencies: nvidia-cutlass-dsl",
            "no Python dependencies are defined for backend tpu",
        ],
    );
}

#[test]
fn toml_syntax_error_has_a_position() {
    let e = errors("[general]\nname = \"x\nversion = 1\n");
    assert_eq!(rules(&e), ["toml-syntax"]);
    assert_contains(&e.render(), &["not valid TOML", "[build.toml:2:"]);
}

#[test]
fn legacy_file_gets_the_update_build_warning() {
    let l = load(&BASE.replace("edition = 5\n", "")).unwrap();
    assert!(l.config.generation.is_legacy());
    assert_eq!(l.warnings.iter().map(|w| w.rule).collect::<Vec<_>>(), ["legacy-format"]);
    assert_contains(&l.rendered_warnings, &["run `kernel-builder update-build`"]);
}

// ---- paths on disk -----------------------------------------------------------------------

fn kernel_dir(files: &[&str]) -> (tempfile::TempDir, Utf8PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = Utf8PathBuf::from_path_buf(tmp.path().join("k")).unwrap();
    fs::create_dir(&dir).unwrap();
    for f in files {
        let p = dir.join(f);
        // A listed path that other listed paths live under is a directory (an include dir).
        if files.iter().any(|o| o.starts_with(&format!("{f}/"))) {
            fs::create_dir_all(&p).unwrap();
        } else if !p.exists() {
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, "").unwrap();
        }
    }
    (tmp, dir)
}

#[test]
fn paths_dotdot_absolute_missing_and_symlink_out() {
    let (tmp, dir) = kernel_dir(&["torch-ext/torch_binding.cpp", "relu/relu.cu"]);
    fs::write(tmp.path().join("secret.h"), "").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(tmp.path().join("secret.h"), dir.join("relu/link.h")).unwrap();
    let text = BASE.replace(
        "src = [\"relu/relu.cu\"]",
        "src = [\"relu/relu.cu\", \"../secret.h\", \"/etc/hostname\", \"relu/missing.cu\", \"relu/link.h\"]",
    );
    fs::write(dir.join("build.toml"), &text).unwrap();
    let e = kernel::load(&dir).unwrap_err();
    assert_eq!(rules(&e), ["path-outside-kernel", "absolute-path", "missing-path", "path-outside-kernel"]);
    let paths: Vec<&str> = e.errors().map(|p| p.key_path.as_str()).collect();
    assert_eq!(
        paths,
        ["kernel.relu.src[1]", "kernel.relu.src[2]", "kernel.relu.src[3]", "kernel.relu.src[4]"]
    );
    assert_contains(
        &e.render(),
        &[
            "`../secret.h` contains `..`",
            "`/etc/hostname` is an absolute path",
            "`relu/missing.cu` does not exist in the kernel directory",
            "`relu/link.h` resolves to",
            "outside the kernel directory",
        ],
    );
    // Without a kernel directory only the shape is checked.
    let e =
        kernel::load_str_styled(Utf8Path::new("build.toml"), &text, None, RenderStyle::Plain).unwrap_err();
    assert_eq!(rules(&e), ["path-outside-kernel", "absolute-path"]);
}

#[test]
fn load_reports_a_missing_build_toml() {
    let (_tmp, dir) = kernel_dir(&[]);
    let e = kernel::load(&dir).unwrap_err();
    assert_eq!(rules(&e), ["no-build-toml"]);
    assert!(e.render().contains("cannot read"), "{}", e.render());
}

// ---- the corpus ----------------------------------------------------------------------------

use crate::corpus::entries as corpus_entries;

#[test]
#[cfg_attr(
    not(feature = "corpus-tests"),
    ignore = "needs the corpus: cargo test --features corpus-tests (KERNEL_BUILDER_CORPUS or ../shared/corpus)"
)]
fn corpus_files_upstream_accepts_load() {
    let mut failures = Vec::new();
    let mut count = 0;
    for (name, entry) in corpus_entries() {
        if entry.get("upstream").and_then(|u| u.as_str()) == Some("rejected") {
            continue;
        }
        count += 1;
        let (_tmp, dir) = crate::corpus::materialize(&name);
        match kernel::load(&dir) {
            Ok(l) => {
                let text = fs::read_to_string(dir.join("build.toml")).unwrap();
                let expect = if text.contains("edition = 5") { Generation::Edition5 } else { Generation::V4 };
                assert_eq!(l.config.generation, expect, "{name}");
            }
            Err(e) => failures.push(format!("{name}:\n{}", e.render())),
        }
    }
    assert_eq!(count, 67, "upstream accepts 67 corpus files");
    assert!(failures.is_empty(), "{} of {count} failed:\n{}", failures.len(), failures.join("\n"));
}

#[test]
#[cfg_attr(
    not(feature = "corpus-tests"),
    ignore = "needs the corpus: cargo test --features corpus-tests (KERNEL_BUILDER_CORPUS or ../shared/corpus)"
)]
fn corpus_files_with_real_faults_are_rejected_naming_the_rule() {
    let cases = [
        (
            "huggingface__kernels__examples_kernels_relu-rust@76ad94db",
            "unknown-key",
            "unknown key `dsl` in `[kernel.relu_rust]`",
        ),
        (
            "huggingface__kernels__examples_kernels_relu-tirx@c842cbb1",
            "unknown-key",
            "unknown key `lang` in `[kernel.",
        ),
        ("huggingface__kernels__kernel-builder_src_init_templates", "toml-syntax", "not valid TOML"),
    ];
    let entries = corpus_entries();
    for (name, rule, text) in cases {
        assert!(entries.iter().any(|(n, _)| n == name), "{name} is not in expected.json");
        let (_tmp, dir) = crate::corpus::materialize(name);
        let e = kernel::load(&dir).unwrap_err();
        assert!(rules(&e).contains(&rule), "{name}: {:?}", rules(&e));
        assert!(e.render().contains(text), "{name}:\n{}", e.render());
    }
}

// ---- no panics -----------------------------------------------------------------------------

/// Every corpus build.toml plus [`BASE`], read once.
fn corpus_texts() -> &'static [String] {
    static TEXTS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    TEXTS.get_or_init(|| {
        let mut v: Vec<String> = crate::corpus::build_tomls().into_iter().map(|(_, t)| t).collect();
        v.push(BASE.to_owned());
        v
    })
}

/// Each property runs this many inputs (3 × 2000 = 6000 per `cargo test`).
const CASES: u32 = 2000;

/// Whatever the input, the outcome is consistent: an `Err` holds at least one error and its
/// rendering ends with the matching count; an `Ok` carries warnings only.
fn check_outcome(text: &str) -> Result<(), TestCaseError> {
    match load(text) {
        Ok(l) => prop_assert!(l.warnings.iter().all(|w| w.severity == Severity::Warning)),
        Err(e) => {
            let errors = e.errors().count();
            prop_assert!(errors > 0);
            let warnings = e.problems.len() - errors;
            let plural = |n: usize, w: &str| {
                if n == 1 {
                    format!("{n} {w}")
                } else {
                    format!("{n} {w}s")
                }
            };
            let count =
                format!("build.toml: {} and {}\n", plural(errors, "error"), plural(warnings, "warning"));
            let r = e.render();
            prop_assert!(r.ends_with(&count), "{}", r);
        }
    }
    Ok(())
}

/// TOML values of every type, biased towards what build.toml holds.
fn toml_value() -> impl Strategy<Value = String> {
    let atom = prop_oneof![
        Just("\"cuda\"".to_owned()),
        Just("\"mps\"".to_owned()),
        Just("\"9.0a\"".to_owned()),
        Just("\"13.0\"".to_owned()),
        Just("\"x.y\"".to_owned()),
        Just("\"../up.cu\"".to_owned()),
        Just("\"/abs.cu\"".to_owned()),
        Just("\"torch\"".to_owned()),
        Just("\"\"".to_owned()),
        (-3i64..7).prop_map(|i| i.to_string()),
        any::<bool>().prop_map(|b| b.to_string()),
        Just("1.5".to_owned()),
        "[a-z_-]{0,8}".prop_map(|s| format!("\"{s}\"")),
    ];
    atom.prop_recursive(2, 12, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(", "))),
            proptest::collection::vec((prop::sample::select(KEYS), inner), 0..3).prop_map(|v| {
                let kv: Vec<String> = v.into_iter().map(|(k, v)| format!("{k} = {v}")).collect();
                format!("{{ {} }}", kv.join(", "))
            }),
        ]
    })
}

const SECTIONS: &[&str] = &[
    "general",
    "general.cuda",
    "general.hub",
    "general.tpu",
    "general.xpu",
    "torch",
    "torch-noarch",
    "tvm-ffi",
    "torch.stable-abi",
    "kernel",
    "kernel.a",
    "kernel.b_c",
    "kernel.\"x.y\"",
    "bogus",
];
const KEYS: &[&str] = &[
    "name",
    "version",
    "edition",
    "license",
    "upstream",
    "source",
    "backends",
    "python-depends",
    "kernel-depends",
    "repo-id",
    "revision",
    "minver",
    "maxver",
    "src",
    "include",
    "pyext",
    "cxx-flags",
    "stable-abi",
    "cuda",
    "backend",
    "depends",
    "cuda-capabilities",
    "cuda_capabilities",
    "rocm-archs",
    "rocm_archs",
    "cuda-flags",
    "hip-flags",
    "sycl-flags",
    "cuda-minver",
    "branch",
    "bogus",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let text = String::from_utf8_lossy(&bytes);
        check_outcome(&text)?;
    }

    #[test]
    #[cfg_attr(
        not(feature = "corpus-tests"),
        ignore = "needs the corpus: cargo test --features corpus-tests (KERNEL_BUILDER_CORPUS or ../shared/corpus)"
    )]
    fn mutated_real_files_never_panic(
        idx in any::<prop::sample::Index>(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), 0usize..4, "[\\[\\]\"=.,a-z0-9_ \\n-]{0,6}"), 1..6),
    ) {
        let texts = corpus_texts();
        let mut t: Vec<char> = idx.get(texts).chars().collect();
        for (pos, op, ins) in edits {
            let at = if t.is_empty() { 0 } else { pos.index(t.len()) };
            match op {
                0 => { t.splice(at..at, ins.chars()); }
                1 => { let end = (at + ins.len() + 1).min(t.len()); t.drain(at..end); }
                2 => { let end = (at + ins.chars().count()).min(t.len()); t.splice(at..end, ins.chars()); }
                _ => { let line_start = t[..at].iter().rposition(|c| *c == '\n').map_or(0, |i| i + 1); t.splice(line_start..line_start, ins.chars().chain(std::iter::once('\n'))); }
            }
        }
        let text: String = t.into_iter().collect();
        check_outcome(&text)?;
    }

    #[test]
    fn generated_documents_never_panic(
        sections in proptest::collection::vec(
            (prop::sample::select(SECTIONS), proptest::collection::vec((prop::sample::select(KEYS), toml_value()), 0..6)),
            0..6,
        ),
    ) {
        let mut text = String::new();
        for (name, kvs) in sections {
            text.push_str(&format!("[{name}]\n"));
            for (k, v) in kvs {
                text.push_str(&format!("{k} = {v}\n"));
            }
        }
        check_outcome(&text)?;
    }
}

// ---- long lines and huge columns -----------------------------------------------------------

/// Whatever the padding, both renderers answer without a panic, every problem keeps its
/// `file:line:column`, and no line drawn from the source is wider than the renderer's bound
/// (200 columns of source, with the gutter and the `…` on each side).
fn check_long_line(text: &str) -> Result<(), TestCaseError> {
    for style in [RenderStyle::Plain, RenderStyle::Fancy] {
        let r = match kernel::load_str_styled(Utf8Path::new("build.toml"), text, None, style) {
            Ok(l) => l.rendered_warnings,
            Err(e) => e.render(),
        };
        let widest =
            r.lines().filter(|l| l.contains(" | ") || l.contains(" │ ")).map(|l| l.chars().count()).max();
        prop_assert!(widest.unwrap_or(0) <= 220, "a source line {widest:?} characters wide was drawn:\n{r}");
        prop_assert!(r.lines().all(|l| l.len() < 8192), "a line of over 8 kB was drawn:\n{r}");
    }
    check_outcome(text)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn long_lines_and_huge_columns_never_panic(
        pad in prop_oneof![0usize..200, 4000usize..5000, 60_000usize..140_000],
        fill in prop::sample::select(&[" ", "\t", "é", " \t"][..]),
        place in 0usize..4,
        key in prop::sample::select(KEYS),
        value in toml_value(),
    ) {
        let padding = fill.repeat(pad / fill.len());
        let text = match place {
            // Before a key of [general], on its own line.
            0 => BASE.replacen("version = 1\n", &format!("version = 1\n{padding}{key} = {value}\n"), 1),
            // Inside an array value: the span starts far to the right.
            1 => BASE.replacen("src = [\"torch-ext", &format!("src = [{padding}\"torch-ext"), 1),
            // In a comment after a value, making the drawn context line long.
            2 => BASE.replacen("edition = 5\n", &format!("edition = 5 #{padding}\n{key} = {value}\n"), 1),
            // A long string value.
            _ => BASE.replacen("license = \"Apache-2.0\"", &format!("license = \"{padding}\""), 1),
        };
        check_long_line(&text)?;
    }
}

/// Found by the property above in CI: 4,000 tabs before a key (4,013 bytes, under the
/// byte bound) were drawn 16,000 columns wide, because miette widens every tab to four
/// columns; the bound is on the drawn width now.
#[test]
fn four_thousand_tabs_before_a_key_are_not_drawn_wide() {
    let text =
        BASE.replacen("version = 1\n", &format!("version = 1\n{}name = \"cuda\"\n", "\t".repeat(4000)), 1);
    check_long_line(&text).unwrap();
}

/// Found by the property above in CI: a license of 4,000 spaces (4,017-byte line, under the
/// column bound then) was underlined in the unicode theme with 3-byte `─`s, a 12 kB line.
#[test]
fn a_license_of_four_thousand_spaces_is_not_underlined_in_twelve_kilobytes() {
    let text = BASE.replacen("license = \"Apache-2.0\"", &format!("license = \"{}\"", " ".repeat(4000)), 1);
    check_long_line(&text).unwrap();
}

/// The reported case: 70,000 spaces before a bad key. miette panicked ("Formatting argument out
/// of range"); now the problem is the plain `file:line:column` form, with every other problem
/// still drawn.
#[test]
fn seventy_thousand_spaces_before_a_bad_key_render_as_file_line_column() {
    let text = BASE.replacen("version = 1\n", &format!("version = 1\n{}bogus = 1\n", " ".repeat(70_000)), 1);
    for style in [RenderStyle::Plain, RenderStyle::Fancy] {
        let e = kernel::load_str_styled(Utf8Path::new("build.toml"), &text, None, style).unwrap_err();
        let r = e.render();
        assert!(
            r.contains(&format!(
                "build.toml:4:70001: error: unknown key `bogus` in `[general]` [unknown-key]\n  4 | …{}bogus = 1\n    | {}^^^^^\n  help: allowed keys:",
                " ".repeat(191),
                " ".repeat(192)
            )),
            "{r}"
        );
        assert!(r.ends_with("build.toml: 1 error and 0 warnings\n"), "{r}");
    }
    let (_tmp, dir) = kernel_dir(&["torch-ext/torch_binding.cpp", "relu/relu.cu"]);
    fs::write(dir.join("build.toml"), &text).unwrap();
    for args in [&["check-config"][..], &["check-config", "--json"], &["build-and-copy", "--nix", "never"]] {
        let out = kb().args(args).arg(&dir).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

/// A value spanning 5,000 lines is drawn by its first line only, not the whole array.
#[test]
fn a_problem_on_a_huge_multiline_value_draws_only_its_first_line() {
    let entries: String = (0..5000).map(|i| format!("  \"dep-{i}\",\n")).collect();
    let text = BASE.replacen("version = 1\n", &format!("version = 1\nbogus = [\n{entries}]\n"), 1);
    let e = load(&text).unwrap_err();
    let r = e.render();
    assert!(r.contains("unknown key `bogus`"), "{r}");
    assert!(r.lines().count() < 40, "{} lines:\n{r}", r.lines().count());
}

// ---- the command ---------------------------------------------------------------------------

#[test]
fn check_config_valid_prints_summary_and_exits_0() {
    let (_tmp, dir) = kernel_dir(&["torch-ext/torch_binding.cpp", "relu/relu.cu"]);
    fs::write(dir.join("build.toml"), BASE.replace("[\"cuda\"]", "[\"cuda\", \"metal\"]")).unwrap();
    let out = kb().arg("check-config").arg(&dir).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "name: relu\ngeneration: edition 5\nbackends: cuda, metal\nframework: torch\nkernels:\n  relu -> cuda\nnoarch backends: metal\nmatrix: 2026-12 (revision 2026-12-01)\n"
    );
    assert_eq!(String::from_utf8(out.stderr).unwrap(), "");
    let out = kb().arg("check-config").arg("--json").current_dir(&dir).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["name"], "relu");
    assert_eq!(
        v["kernels"],
        serde_json::json!([{ "name": "relu", "backend": "cuda", "language": "cpp-cuda" }])
    );
    assert_eq!(v.get("valid"), Some(&serde_json::json!(true)));
    assert_eq!(v.get("warnings"), Some(&serde_json::json!([])), "always present");
    assert_eq!(v.get("helion_warnings"), Some(&serde_json::json!([])), "always present");
}

/// A valid file's warnings reach `--json` too, placed as in the problems document (found by
/// review: a non-SPDX license warned on stderr only, out of sight of a CI that reads JSON).
#[test]
fn check_config_json_on_a_valid_file_lists_its_warnings() {
    let (_tmp, dir) = kernel_dir(&["torch-ext/torch_binding.cpp", "relu/relu.cu"]);
    let text = BASE.replace("license = \"Apache-2.0\"", "license = \"apache 2\"");
    assert_ne!(text, BASE);
    fs::write(dir.join("build.toml"), &text).unwrap();
    let out = kb().args(["check-config", "--json"]).current_dir(&dir).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let line = text.lines().position(|l| l.starts_with("license")).unwrap() as u64 + 1;
    assert_eq!(
        v["warnings"],
        serde_json::json!([{
            "severity": "warning", "rule": "license-not-spdx", "key_path": "general.license",
            "message": "`apache 2` is not an SPDX license expression (unknown term: `apache`)",
            "help": "Use an id from https://spdx.org/licenses/ (e.g. `Apache-2.0`, `MIT`, `BSD-3-Clause`) or an \
                     expression such as `MIT OR Apache-2.0`",
            "line": line, "column": 11
        }])
    );
}

#[test]
fn check_config_invalid_exits_1_with_every_error() {
    let (_tmp, dir) = kernel_dir(&["torch-ext/torch_binding.cpp", "relu/relu.cu"]);
    fs::write(
        dir.join("build.toml"),
        BASE.replace("\"relu\"", "\"fused_rms_norm\"").replace("[\"cuda\"]", "[\"mps\"]"),
    )
    .unwrap();
    let out = kb().arg("check-config").current_dir(&dir).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(out.stdout, b"");
    let err = String::from_utf8(out.stderr).unwrap();
    insta::assert_snapshot!("check_config_invalid", err);
}

/// `--json` on a file with errors still prints a JSON document (the shared failure shape,
/// `tests/it/json_failure.rs`): every problem with its rule, key path, line and column (exit 1;
/// the rendered text stays on stderr).
#[test]
fn check_config_json_on_errors_lists_the_problems_with_their_places() {
    let (_tmp, dir) = kernel_dir(&["torch-ext/torch_binding.cpp", "relu/relu.cu"]);
    fs::write(
        dir.join("build.toml"),
        BASE.replace("[\"cuda\"]", "[\"mps\"]").replace("version = 1\n", "version = 1\nbogus = 2\n"),
    )
    .unwrap();
    let out = kb().args(["check-config", "--json"]).current_dir(&dir).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown key `bogus`"));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&v["ok"], &v["command"], &v["valid"]),
        (&false.into(), &"check-config".into(), &false.into())
    );
    assert_eq!(v["file"], "./build.toml");
    let problems = v["problems"].as_array().unwrap();
    let count = |sev: &str| problems.iter().filter(|p| p["severity"] == sev).count() as u64;
    assert_eq!(
        (v["error_count"].as_u64(), v["warning_count"].as_u64()),
        (Some(count("error")), Some(count("warning")))
    );
    let warnings: Vec<_> = problems.iter().filter(|p| p["severity"] == "warning").cloned().collect();
    assert_eq!(v["warnings"], serde_json::Value::Array(warnings), "a list, as in the summary");
    let bogus = problems.iter().find(|p| p["rule"] == "unknown-key").expect("the unknown key");
    assert_eq!(
        (
            bogus["key_path"].as_str(),
            bogus["line"].as_u64(),
            bogus["column"].as_u64(),
            bogus["severity"].as_str()
        ),
        (Some("general.bogus"), Some(4), Some(1), Some("error"))
    );
    let mps = problems.iter().find(|p| p["key_path"] == "general.backends[0]").expect("the bad backend");
    assert_eq!((mps["line"].as_u64(), mps["column"].as_u64()), (Some(7), Some(13)), "{mps}");
}

#[test]
fn check_config_legacy_file_warns_and_exits_0() {
    let (_tmp, dir) = kernel_dir(&["torch-ext/torch_binding.cpp", "relu/relu.cu"]);
    fs::write(dir.join("build.toml"), BASE.replace("edition = 5\n", "")).unwrap();
    let out = kb().arg("check-config").arg(&dir).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("legacy-format") && err.contains("kernel-builder update-build"), "{err}");
    assert!(String::from_utf8(out.stdout).unwrap().contains("generation: v4 (legacy, unversioned)"));
}

#[test]
fn check_config_missing_dir_exits_1() {
    let out = kb().args(["check-config", "/nonexistent/kernel"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8(out.stderr).unwrap().contains("is not a directory"));
}

#[test]
fn user_report_cuda_minver_without_framework_is_never_silently_noarch() {
    let text = "[general]\nname = \"k\"\nversion = 1\nedition = 5\nlicense = \"MIT\"\nbackends = [\"cuda\"]\n\n[general.cuda]\nminver = \"13.0\"\n";
    let e = errors(&text.replace("\"k\"", "\"kk\""));
    assert_eq!(rules(&e), ["framework-section"]);
    assert_contains(
        &e.render(),
        &[
            "build.toml has no framework section",
            "[build.toml:1:1]",
            "add exactly one of `[torch]` (compiled Torch extension), `[torch-noarch]` (Python/Triton/Helion kernel) or `[tvm-ffi]`",
        ],
    );
}

#[test]
fn repo_ids_are_owner_slash_name() {
    let text = BASE.to_owned() + "\n[general.hub]\nrepo-id = \"relu\"\n";
    let text = text.replace(
        "backends = [\"cuda\"]",
        "backends = [\"cuda\"]\nkernel-depends = [{ repo-id = \"a/b/c\", version = 1 }]",
    );
    let e = errors(&text);
    assert_eq!(rules(&e), ["bad-repo-id", "bad-repo-id"]);
    assert_contains(
        &e.render(),
        &["`a/b/c` is not a Hub repository id", "`relu` is not a Hub repository id"],
    );
}

#[test]
fn kernels_in_a_noarch_file_are_flagged() {
    let text = BASE.replace("[torch]\nsrc = [\"torch-ext/torch_binding.cpp\"]", "[torch-noarch]");
    let l = load(&text).unwrap();
    assert_eq!(l.warnings.iter().map(|w| w.rule).collect::<Vec<_>>(), ["kernel-in-noarch"]);
    assert_contains(
        &l.rendered_warnings,
        &[
            "`[kernel.relu]` is never compiled: the framework section is `[torch-noarch]`",
            "[build.toml:10:1]",
        ],
    );
}

// ---- [tvm-ffi] -------------------------------------------------------------------------------

/// A valid `[tvm-ffi]` file: one CPU and one CUDA kernel, on the matrix whose bundle has
/// tvm-ffi cells (no `no-bundle-variants` warning).
const TVM_FFI: &str = r#"[general]
name = "relu-tvm-ffi"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cpu", "cuda"]
matrix = "upstream-2026-08"

[tvm-ffi]
src = ["tvm-ffi-ext/binding.cpp"]

[kernel.relu_cpu]
backend = "cpu"
depends = []
src = ["relu_cpu/relu.cpp"]

[kernel.relu_cuda]
backend = "cuda"
depends = []
src = ["relu_cuda/relu.cu"]
"#;

/// A `[tvm-ffi]` backend without a `[kernel.*]` is refused at its `general.backends` entry
/// (there is no pure-Python tvm-ffi variant; it used to build `torch-cuda` with a torch
/// `_ops.py`), each such backend once; `[torch]` keeps its noarch backends.
#[test]
fn a_tvm_ffi_backend_without_a_kernel_is_refused() {
    assert!(load(TVM_FFI).is_ok());
    let no_cuda = TVM_FFI.replace(
        "\n[kernel.relu_cuda]\nbackend = \"cuda\"\ndepends = []\nsrc = [\"relu_cuda/relu.cu\"]\n",
        "",
    );
    let e = errors(&no_cuda);
    assert_eq!(rules(&e), ["tvm-ffi-backend-without-kernel"]);
    assert_contains(
        &e.render(),
        &[
            "backend `cuda` has no `[kernel.*]`; a `[tvm-ffi]` kernel has no pure-Python variant, so nothing would be built for `cuda`",
            "[build.toml:6:20]",
            "help: add `[kernel.<name>]` with `backend = \"cuda\"` (and its `depends` and `src`), or remove \"cuda\" from `general.backends`",
        ],
    );
    // No kernel at all, and a backend that cannot have one: every backend, at its entry.
    let bare: String = TVM_FFI
        .split("\n[kernel.relu_cpu]")
        .next()
        .unwrap()
        .replace("[\"cpu\", \"cuda\"]", "[\"cpu\", \"cuda\", \"tpu\"]");
    let e = errors(&bare);
    let places: Vec<String> = e.errors().map(|p| p.key_path.clone()).collect();
    assert_eq!(places, ["general.backends[0]", "general.backends[1]", "general.backends[2]"]);
    assert_contains(
        &e.render(),
        &[
            "backend `cpu` has no `[kernel.*]`",
            "backend `tpu` cannot have a `[kernel.*]`, and a `[tvm-ffi]` kernel has no pure-Python variant",
            "help: remove \"tpu\" from `general.backends`",
        ],
    );
    // The same file as `[torch]`: cuda is a noarch backend, as designed.
    let torch = no_cuda.replace("[tvm-ffi]\nsrc = [\"tvm-ffi-ext/binding.cpp\"]", "[torch]\nsrc = []");
    let l = load(&torch).unwrap();
    assert!(l.config.is_noarch_for(Backend::Cuda));
}

/// check-config (and every command that loads the kernel) exits 1 on such a file, naming
/// build.toml and the backend.
#[test]
fn check_config_refuses_a_tvm_ffi_backend_without_a_kernel() {
    let (_tmp, dir) = kernel_dir(&["tvm-ffi-ext/binding.cpp", "relu_cpu/relu.cpp"]);
    fs::write(dir.join("build.toml"), TVM_FFI.split("\n[kernel.relu_cuda]").next().unwrap()).unwrap();
    for args in [&["check-config"][..], &["list-variants"][..]] {
        let out = kb().args(args).current_dir(&dir).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_contains(
            &err,
            &["[./build.toml:6:20]", "backend `cuda` has no `[kernel.*]`", "with `backend = \"cuda\"`"],
        );
    }
}

/// `[tvm-ffi] src = []` is refused where it is written (upstream requires `src`; the compile
/// failed inside CMake); `[torch] src = []` is valid, as upstream's default.
#[test]
fn an_empty_tvm_ffi_src_is_refused() {
    let e = errors(&TVM_FFI.replace("src = [\"tvm-ffi-ext/binding.cpp\"]", "src = []"));
    assert_eq!(rules(&e), ["no-sources"]);
    assert_contains(
        &e.render(),
        &[
            "`[tvm-ffi]` has no source files (`src = []`): a tvm-ffi kernel is built from its binding sources",
            "[build.toml:10:7]",
            "help: list the binding's sources, e.g. `src = [\"tvm-ffi-ext/binding.cpp\"]`",
        ],
    );
    // A non-string entry is its own error, not also an empty list.
    assert_eq!(
        rules(&errors(&TVM_FFI.replace("src = [\"tvm-ffi-ext/binding.cpp\"]", "src = [1]"))),
        ["wrong-type"]
    );
    assert!(load(&BASE.replace("src = [\"torch-ext/torch_binding.cpp\"]", "src = []")).is_ok());
}

/// `depends = ["torch"]` in a `[tvm-ffi]` kernel is accepted (upstream's own
/// relu-tvm-ffi-compiler-flags has it) with a warning: the build gets no torch.
#[test]
fn torch_in_a_tvm_ffi_kernel_is_a_warning() {
    let l = load(&TVM_FFI.replacen("depends = []", "depends = [\"torch\"]", 1)).unwrap();
    assert_eq!(l.warnings.iter().map(|w| w.rule).collect::<Vec<_>>(), ["torch-in-tvm-ffi"]);
    assert_contains(
        &l.rendered_warnings,
        &[
            "`[kernel.relu_cpu]` depends on `torch`, but a `[tvm-ffi]` kernel is built against tvm-ffi only: it gets no torch headers or libraries",
            "[build.toml:14:12]",
            "remove \"torch\" from `depends`",
        ],
    );
    // `[torch]` kernels: no warning.
    assert!(load(BASE).unwrap().warnings.is_empty());
}

// ---- size ------------------------------------------------------------------------------------

/// A build.toml over 1 MiB is refused by name and size, by every command that reads it, before
/// it is parsed (a file of 500,000 entries once took 24 GB).
#[test]
fn a_build_toml_over_one_mib_is_refused_with_its_size() {
    let (_tmp, dir) = kernel_dir(&[]);
    let text = format!("{BASE}{}", "# padding\n".repeat(110_000));
    fs::write(dir.join("build.toml"), &text).unwrap();
    let size = text.len().to_string();
    let size = format!("{},{},{}", &size[..1], &size[1..4], &size[4..]);
    let want =
        format!("is {size} bytes; kernel-builder reads build.toml files of at most 1,048,576 bytes (1 MiB)");
    for args in [
        &["check-config"][..],
        &["check-config", "--json"],
        &["update-build"],
        &["build-and-copy", "--nix", "never"],
    ] {
        let out = kb().args(args).arg(&dir).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(&want), "{args:?}: {stderr}");
    }
    let e = load(&text).unwrap_err();
    assert_eq!(rules(&e), ["file-too-large"]);
}

/// 2,000 problems of one kind print three in full and one line for the rest, with the lines
/// they are on; the count line still counts all of them.
#[test]
fn many_problems_of_one_kind_are_grouped_after_three() {
    let deps: String = (0..2000).map(|i| format!("  \"bad-dep-{i}\",\n")).collect();
    let text = BASE.replacen(
        "backends = [\"cuda\"]\n",
        &format!("backends = [\"cuda\"]\npython-depends = [\n{deps}]\n"),
        1,
    );
    let e = load(&text).unwrap_err();
    assert_eq!(e.problems.len(), 2000);
    let r = e.render();
    assert_eq!(r.matches("unknown Python dependency `bad-dep-").count(), 3, "{r}");
    assert!(
        r.contains("build.toml: … and 1,997 more [unknown-python-dependency] errors like the 3 above (lines 11–2,007)\n"),
        "{r}"
    );
    assert!(r.ends_with("build.toml: 2000 errors and 0 warnings\n"), "{r}");
    assert!(r.len() < 4000, "{} bytes", r.len());
}
