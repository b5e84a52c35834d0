//! `config::upgrade` (every legacy generation → edition 5, as a document transformation; then
//! edition 5 → 6 with `to_edition6`) and the `kernel-builder update-build` command, on the real files in the corpus
//! (`../shared/corpus`, or `$KERNEL_BUILDER_CORPUS`).

use std::collections::BTreeMap;

use kernel_builder::config::update::plan;
use kernel_builder::config::upgrade::{dash_name, detect, upgrade, Upgrade};
use kernel_builder::config::{Generation, Severity};
use proptest::prelude::*;
use toml_edit::DocumentMut;

use crate::corpus::build_toml as corpus_text;
use crate::corpus::build_tomls as corpus;
use crate::util::kb;

/// Upgrade a text; panics on a TOML parse error (callers pass valid TOML).
fn up(text: &str) -> (String, Upgrade) {
    let mut doc: DocumentMut = text.parse().expect("valid TOML");
    let u = upgrade(&mut doc);
    (doc.to_string(), u)
}

fn up_corpus(name: &str) -> (String, Upgrade) {
    up(&corpus_text(name))
}

fn rules(u: &Upgrade) -> Vec<(Severity, &'static str)> {
    u.problems.iter().map(|p| (p.severity, p.rule)).collect()
}

// ---------------------------------------------------------------------------------------------
// Detection over the whole corpus
// ---------------------------------------------------------------------------------------------

#[test]
#[cfg_attr(
    not(feature = "corpus-tests"),
    ignore = "needs the corpus: cargo test --features corpus-tests (KERNEL_BUILDER_CORPUS or ../shared/corpus)"
)]
fn detects_the_generation_of_every_corpus_file() {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut table = String::new();
    for (name, text) in corpus() {
        let Ok(doc) = text.parse::<DocumentMut>() else {
            table.push_str(&format!("{name}: not TOML\n"));
            continue;
        };
        let g = detect(&doc);
        *counts.entry(format!("{g:?}")).or_default() += 1;
        table.push_str(&format!("{name}: {g:?}\n"));
    }
    let counts: Vec<String> = counts.into_iter().map(|(g, n)| format!("{g}={n}")).collect();
    assert_eq!(counts.join(" "), "Edition5=22 V1=2 V2=20 V3=17 V4=48");
    insta::assert_snapshot!("corpus_generations", table);
}

#[test]
#[cfg_attr(
    not(feature = "corpus-tests"),
    ignore = "needs the corpus: cargo test --features corpus-tests (KERNEL_BUILDER_CORPUS or ../shared/corpus)"
)]
fn upstream_format_rejections_are_all_legacy_generations() {
    // Every file upstream refuses only for its format ("did not match v4 … or v3",
    // "unsupported legacy format") is detected as a legacy generation and upgraded without
    // errors.
    let mut n = 0;
    for (name, text) in corpus() {
        let e = &crate::corpus::entry(&name);
        if e["upstream"] != "rejected" {
            continue;
        }
        let msg = format!("{} {}", e["error"].as_str().unwrap_or(""), e["cause"].as_str().unwrap_or(""));
        if !(msg.contains("did not match v4") || msg.contains("unsupported legacy format")) {
            continue;
        }
        let (_, u) = up(&text);
        assert!(u.generation.is_legacy(), "{name}: {:?}", u.generation);
        assert!(u.problems.iter().all(|p| p.severity == Severity::Warning), "{name}: {:?}", u.problems);
        n += 1;
    }
    assert_eq!(n, 40);
}

// ---------------------------------------------------------------------------------------------
// Invariants over the whole corpus
// ---------------------------------------------------------------------------------------------

#[test]
#[cfg_attr(
    not(feature = "corpus-tests"),
    ignore = "needs the corpus: cargo test --features corpus-tests (KERNEL_BUILDER_CORPUS or ../shared/corpus)"
)]
fn every_corpus_upgrade_is_edition5_idempotent_and_keeps_comments() {
    for (name, text) in corpus() {
        let Ok(_) = text.parse::<DocumentMut>() else { continue };
        let (out, first) = up(&text);
        let (again, second) = up(&out);
        assert_eq!(second.generation, Generation::Edition5, "{name}");
        assert!(second.changes.is_empty(), "{name}: second upgrade changed {:?}", second.changes);
        assert_eq!(again, out, "{name}");
        if first.generation == Generation::Edition5 {
            assert_eq!(out, text, "{name}: an edition-5 file must come back byte for byte");
            assert!(first.changes.is_empty(), "{name}");
            continue;
        }
        // One framework section, edition 5, a dashed name.
        let doc: DocumentMut = out.parse().unwrap();
        let frameworks = ["torch", "torch-noarch", "tvm-ffi"].iter().filter(|f| doc.contains_key(f)).count();
        assert_eq!(frameworks, 1, "{name}");
        assert_eq!(doc["general"]["edition"].as_integer(), Some(5), "{name}");
        let kname = doc["general"]["name"].as_str().unwrap();
        assert!(!kname.contains('_'), "{name}: {kname}");
        // Every comment line of the original survives.
        for line in text.lines().filter(|l| l.trim_start().starts_with('#')) {
            assert!(out.contains(line.trim()), "{name}: lost comment {line:?}");
        }
        // Every version bound keeps its text.
        for bound in ["minver", "maxver"] {
            for (table, key) in [("torch", bound.to_owned()), ("general", format!("cuda-{bound}"))] {
                if let Some(v) = text.parse::<DocumentMut>().unwrap().get(table).and_then(|t| t.get(&key)) {
                    let v = v.as_str().unwrap();
                    assert!(out.contains(&format!("{bound} = \"{v}\"")), "{name}: {bound} {v}");
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Per generation, on real files
// ---------------------------------------------------------------------------------------------

#[test]
#[cfg_attr(
    not(feature = "corpus-tests"),
    ignore = "needs the corpus: cargo test --features corpus-tests (KERNEL_BUILDER_CORPUS or ../shared/corpus)"
)]
fn v4_flash_attn3_keeps_maxver_13_0_text_and_its_comment() {
    // Upstream's migration rewrote this "13.0" as "13" and lost every cu130 cell.
    let (out, u) = up_corpus("huggingface__kernels-community__flash-attn3");
    assert_eq!(u.generation, Generation::V4);
    assert!(out.contains(
        "\n# ptxas fails on 13.2, but the 13.0 build is backwards compatible.\nmaxver = \"13.0\"\n"
    ));
    assert!(out.contains("[torch]\nstable-abi = \"2.9\"\n"), "a string stable-abi stays a string");
    assert!(out.starts_with(
        "[general]\nname = \"flash-attn3\"\nlicense = \"BSD-3-Clause\"\nversion = 1\nedition = 5\n"
    ));
    let changes: Vec<_> = u.changes.iter().map(|c| c.key_path.as_str()).collect();
    assert_eq!(changes, ["general.edition"]);
    assert!(u.problems.is_empty());
    // Only one line was added.
    let original = corpus_text("huggingface__kernels-community__flash-attn3");
    assert_eq!(out.replacen("edition = 5\n", "", 1), original);
}

#[test]
#[cfg_attr(
    not(feature = "corpus-tests"),
    ignore = "needs the corpus: cargo test --features corpus-tests (KERNEL_BUILDER_CORPUS or ../shared/corpus)"
)]
fn v3_without_version_license_or_framework() {
    let (out, u) = up_corpus("huggingface__kernels-community__trimul-gpumode@b27d9fa6");
    assert_eq!(u.generation, Generation::V3);
    assert_eq!(
        rules(&u),
        [(Severity::Warning, "legacy-no-license"), (Severity::Warning, "legacy-no-framework")]
    );
    insta::assert_snapshot!("v3_trimul_gpumode", out);

    let (out, u) = up_corpus("ParagEkbote__model-kernels__kernels_attention_int8@2206842");
    assert_eq!(u.generation, Generation::V3);
    assert!(out.contains("version = 1\nedition = 5\n"));
    assert_eq!(rules(&u), [(Severity::Warning, "legacy-no-license")]);
}

#[test]
#[cfg_attr(
    not(feature = "corpus-tests"),
    ignore = "needs the corpus: cargo test --features corpus-tests (KERNEL_BUILDER_CORPUS or ../shared/corpus)"
)]
fn v2_flash_attn3_moves_cuda_bounds_verbatim() {
    let (out, u) = up_corpus("huggingface__kernels-community__flash-attn3@3c02e44b");
    assert_eq!(u.generation, Generation::V2);
    assert!(out.contains("\n[general.cuda]\nminver = \"12.4\"\nmaxver = \"12.4\"\n"));
    assert!(!out.contains("cuda-minver") && !out.contains("universal"));
    assert!(out.contains("\"--ftemplate-backtrace-limit=0\",              # To debug template code\n"));
    assert!(u.renames.contains(&("general.cuda.maxver".to_owned(), "general.cuda-maxver".to_owned())));
    let head: String = out.lines().take(10).collect::<Vec<_>>().join("\n");
    insta::assert_snapshot!("v2_flash_attn3_head", head);
}

#[test]
#[cfg_attr(
    not(feature = "corpus-tests"),
    ignore = "needs the corpus: cargo test --features corpus-tests (KERNEL_BUILDER_CORPUS or ../shared/corpus)"
)]
fn v2_universal_true_is_noarch_with_a_warning() {
    let (out, u) = up_corpus("huggingface__kernels-community__flash-attn-cute@ad74fede");
    assert_eq!(u.generation, Generation::V2);
    assert_eq!(
        out,
        "[general]\nname = \"flash-attn-cute\"\nversion = 1\nedition = 5\n\
         backends = [\"cpu\", \"cuda\", \"metal\", \"rocm\", \"xpu\"]\n\n\
         [general.cuda]\nminver = \"12.8\"\npython-depends = [\"nvidia-cutlass-dsl\"]\n\n[torch-noarch]\n"
    );
    assert_eq!(
        rules(&u),
        [(Severity::Warning, "legacy-no-license"), (Severity::Warning, "universal-backends")]
    );
}

#[test]
#[cfg_attr(
    not(feature = "corpus-tests"),
    ignore = "needs the corpus: cargo test --features corpus-tests (KERNEL_BUILDER_CORPUS or ../shared/corpus)"
)]
fn v2_universal_false_is_dropped_and_backends_come_from_kernels() {
    let (out, u) = up_corpus("huggingface__kernels-community__flash-attn@4922936f");
    assert_eq!(u.generation, Generation::V2);
    assert!(out.starts_with(
        "[general]\nname = \"flash-attn\"\nversion = 1\nedition = 5\nbackends = [\"cuda\", \"xpu\"]\n\n[torch]\n"
    ));
    assert!(out.contains("  # bwd kernels - commented out since mha_bwd functions are disabled\n"));
}

#[test]
#[cfg_attr(
    not(feature = "corpus-tests"),
    ignore = "needs the corpus: cargo test --features corpus-tests (KERNEL_BUILDER_CORPUS or ../shared/corpus)"
)]
fn v1_hipify_makes_a_rocm_copy() {
    let (out, u) = up_corpus("huggingface__kernel-builder__examples_relu@c364004");
    assert_eq!(u.generation, Generation::V1);
    insta::assert_snapshot!("v1_relu_hipify", out);
    let doc: DocumentMut = out.parse().unwrap();
    let cuda = &doc["kernel"]["activation"];
    let rocm = &doc["kernel"]["activation_rocm"];
    assert_eq!(cuda["backend"].as_str(), Some("cuda"));
    assert_eq!(rocm["backend"].as_str(), Some("rocm"));
    assert!(cuda.get("cuda-capabilities").is_some() && cuda.get("rocm-archs").is_none());
    assert!(rocm.get("rocm-archs").is_some() && rocm.get("cuda-capabilities").is_none());
    assert_eq!(rocm["src"].as_array().unwrap().len(), 1);
    assert!(u.renames.contains(&("kernel.activation_rocm".to_owned(), "kernel.activation".to_owned())));
}

#[test]
#[cfg_attr(
    not(feature = "corpus-tests"),
    ignore = "needs the corpus: cargo test --features corpus-tests (KERNEL_BUILDER_CORPUS or ../shared/corpus)"
)]
fn v1_untagged_kernel_is_cuda() {
    let (out, u) = up_corpus("huggingface__kernel-builder__examples_relu@c8df7c4e");
    assert_eq!(u.generation, Generation::V1);
    assert!(out.contains("[kernel.activation]\nbackend = \"cuda\"\ncuda-capabilities = ["));
    assert!(out.contains("backends = [\"cuda\"]\n"));
}

#[test]
#[cfg_attr(
    not(feature = "corpus-tests"),
    ignore = "needs the corpus: cargo test --features corpus-tests (KERNEL_BUILDER_CORPUS or ../shared/corpus)"
)]
fn names_with_underscores_get_dashes_in_legacy_files_only() {
    let (out, u) = up_corpus("huggingface__kernels-community__causal-conv1d@32f3c1ed");
    assert!(out.contains("name = \"causal-conv1d\"\n"));
    assert!(u.changes.iter().any(
        |c| c.key_path == "general.name" && c.description.contains("`causal_conv1d` to `causal-conv1d`")
    ));

    // Edition 5: the upgrade leaves the name for the validator; update-build uses dash_name.
    let text = "[general]\nname = \"fused_rms_norm\"  # the name\nversion = 1\nedition = 5\nlicense = \"MIT\"\nbackends = []\n\n[torch-noarch]\n";
    let (out, u) = up(text);
    assert_eq!(out, text);
    assert!(u.changes.is_empty());
    let mut doc: DocumentMut = text.parse().unwrap();
    let change = dash_name(&mut doc).expect("renamed");
    assert_eq!(change.key_path, "general.name");
    assert_eq!(doc.to_string(), text.replace("fused_rms_norm", "fused-rms-norm"));
    assert!(dash_name(&mut doc).is_none());
}

// ---------------------------------------------------------------------------------------------
// Rules on small documents
// ---------------------------------------------------------------------------------------------

#[test]
fn editions_other_than_5_and_6_are_an_error() {
    for (edition, msg) in [("4", "unsupported edition 4"), ("7", "unsupported edition 7")] {
        let text = format!("[general]\nname = \"x1\"\nedition = {edition}\n");
        let (out, u) = up(&text);
        assert_eq!(out, text);
        assert_eq!(u.generation, Generation::Edition5);
        assert_eq!(rules(&u), [(Severity::Error, "unsupported-edition")]);
        assert_eq!(u.problems[0].message, msg);
    }
    let text = "[general]\nname = \"x1\"\nedition = 6\n";
    let (out, u) = up(text);
    assert_eq!((out.as_str(), u.generation, u.problems.len()), (text, Generation::Edition6, 0));
    let (_, u) = up("[general]\nedition = \"5\"\n");
    assert_eq!(u.problems[0].message, "`edition` must be the integer 6 (or 5), not `\"5\"`");
}

#[test]
fn hipify_copy_name_taken_is_an_error() {
    let text = "[general]\nname = \"relu\"\n\n[torch]\n\n[kernel.a]\nlanguage = \"cuda-hipify\"\nsrc = [\"a.cu\"]\ndepends = []\n\n[kernel.a_rocm]\nlanguage = \"cuda\"\nsrc = [\"b.cu\"]\ndepends = []\n";
    let (out, u) = up(text);
    assert_eq!(u.generation, Generation::V1);
    assert!(rules(&u).contains(&(Severity::Error, "hipify-copy-conflict")));
    assert_eq!(
        u.problems.iter().find(|p| p.rule == "hipify-copy-conflict").unwrap().key_path,
        "kernel.a_rocm"
    );
    // No second `a_rocm`; both kernels are CUDA kernels.
    assert_eq!(out.matches("[kernel.a_rocm]").count(), 1);
    assert_eq!(out.matches("backend = \"cuda\"").count(), 2);
}

#[test]
fn v1_torch_name_pyroot_capabilities_and_metal() {
    let text = "\
[general]
name = \"my_ops\"

[torch]
name = \"my_ops\"
pyroot = \"torch-ext\"
src = [\"torch-ext/b.cpp\"]

# The CUDA kernel.
[kernel.k]
# Which GPUs.
capabilities = [\"8.0\", \"9.0\"]  # trailing
rocm-archs = [\"gfx942\"]
src = [\"k.cu\"]
depends = [\"torch\"]

[kernel.m]
language = \"metal\"
src = [\"m.mm\"]
depends = [\"torch\"]
";
    let (out, u) = up(text);
    assert_eq!(u.generation, Generation::V1);
    assert_eq!(
        out,
        "\
[general]
name = \"my-ops\"
version = 1
edition = 5
backends = [\"cuda\", \"metal\"]

[torch]
src = [\"torch-ext/b.cpp\"]

# The CUDA kernel.
[kernel.k]
backend = \"cuda\"
# Which GPUs.
cuda-capabilities = [\"8.0\", \"9.0\"]  # trailing
src = [\"k.cu\"]
depends = [\"torch\"]

[kernel.m]
backend = \"metal\"
src = [\"m.mm\"]
depends = [\"torch\"]
"
    );
    let paths: Vec<&str> = u.changes.iter().map(|c| c.key_path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "general.name",
            "general.version",
            "general.edition",
            "torch.name",
            "torch.pyroot",
            "kernel.k.cuda-capabilities",
            "kernel.k.backend",
            "kernel.k.rocm-archs",
            "kernel.m.backend",
            "general.backends",
        ]
    );
    assert!(u
        .renames
        .contains(&("kernel.k.cuda-capabilities".to_owned(), "kernel.k.capabilities".to_owned())));
}

#[test]
fn unknown_v1_language_is_an_error() {
    let (_, u) =
        up("[general]\nname = \"ab\"\n[torch]\n[kernel.k]\nlanguage = \"hip\"\nsrc = []\ndepends = []\n");
    assert!(rules(&u).contains(&(Severity::Error, "legacy-unknown-language")));
}

#[test]
fn universal_true_with_a_torch_table_becomes_torch_noarch() {
    let text = "[general]\nname = \"ab\"\n\n# Python only.\n[torch]\nuniversal = true\npyext = [\"py\", \"json\"]\nsrc = []\n";
    let (out, u) = up(text);
    assert_eq!(u.generation, Generation::V1);
    assert_eq!(
        out,
        "[general]\nname = \"ab\"\nversion = 1\nedition = 5\nbackends = [\"cpu\", \"cuda\", \"metal\", \"rocm\", \"xpu\"]\n\n# Python only.\n[torch-noarch]\npyext = [\"py\", \"json\"]\n"
    );
    assert!(u.renames.contains(&("torch-noarch".to_owned(), "torch".to_owned())));
}

#[test]
fn v3_without_framework_but_with_kernels_gets_torch_with_a_warning() {
    let text = "[general]\nname = \"ab\"\nbackends = [\"cuda\"]\n\n[kernel.k]\nbackend = \"cuda\"\nsrc = [\"k.cu\"]\ndepends = []\n";
    let (out, u) = up(text);
    assert_eq!(u.generation, Generation::V3);
    assert!(out.contains("backends = [\"cuda\"]\n\n[torch]\n\n[kernel.k]\n"), "{out}");
    let p = u.problems.iter().find(|p| p.rule == "legacy-no-framework").unwrap();
    assert_eq!(p.severity, Severity::Warning);
    assert_eq!(p.key_path, "torch");
}

#[test]
fn general_cuda_only_and_no_framework_is_never_silently_noarch() {
    // From a user's report: `[general]` + `[general.cuda] minver = "13.0"` and nothing else.
    let text = "[general]\nname = \"ab\"\nbackends = [\"cuda\"]\n\n[general.cuda]\nminver = \"13.0\"\n";
    let (out, u) = up(text);
    assert!(out.contains("[general.cuda]\nminver = \"13.0\"\n\n[torch-noarch]\n"), "{out}");
    assert!(u.problems.iter().any(|p| p.rule == "legacy-no-framework" && p.severity == Severity::Warning));
}

#[test]
fn cuda_bound_in_both_places_is_an_error() {
    let text =
        "[general]\nname = \"ab\"\ncuda-minver = \"12.4\"\n[general.cuda]\nminver = \"12.6\"\n[torch]\n";
    let (out, u) = up(text);
    assert_eq!(
        rules(&u),
        [(Severity::Warning, "legacy-no-license"), (Severity::Error, "legacy-cuda-bound-conflict")]
    );
    assert!(out.contains("minver = \"12.6\""));
}

#[test]
fn inline_general_table_is_upgraded_too() {
    let text = "general = { name = \"a_b\", universal = false, cuda-maxver = \"13.0\" }\ntorch = {}\n";
    let (out, u) = up(text);
    assert_eq!(u.generation, Generation::V2);
    let doc: DocumentMut = out.parse().unwrap();
    assert_eq!(doc["general"]["cuda"]["maxver"].as_str(), Some("13.0"));
    assert_eq!(doc["general"]["edition"].as_integer(), Some(5));
    assert_eq!(doc["general"]["name"].as_str(), Some("a-b"));
}

// ---------------------------------------------------------------------------------------------
// The command
// ---------------------------------------------------------------------------------------------

fn kernel_dir(text: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("build.toml"), text).unwrap();
    dir
}

/// A kernel directory made from a corpus entry ([`crate::corpus::materialize`]).
fn corpus_kernel_dir(name: &str) -> tempfile::TempDir {
    crate::corpus::materialize(name).0
}

/// `tests/fixtures/update-build/NAME` (this repository's own cases) copied into a fresh
/// temporary directory; returns the guard and the original build.toml text.
fn fixture_kernel_dir(name: &str) -> (tempfile::TempDir, String) {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/update-build").join(name);
    let dir = tempfile::tempdir().unwrap();
    for entry in walkdir::WalkDir::new(&src) {
        let entry = entry.unwrap();
        let dest = dir.path().join(entry.path().strip_prefix(&src).unwrap());
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
        }
    }
    let text = std::fs::read_to_string(src.join("build.toml")).unwrap();
    (dir, text)
}

fn read(dir: &tempfile::TempDir) -> String {
    std::fs::read_to_string(dir.path().join("build.toml")).unwrap()
}

#[test]
fn check_exits_1_when_an_update_is_needed_and_writes_nothing() {
    let (dir, original) = fixture_kernel_dir("v4-cuda-bounds");
    let out = kb().args(["update-build", "--check"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains(
        "needs an update: v4 (legacy, unversioned) → edition 6\n  general.edition: added `edition = 6`\n"
    ));
    assert_eq!(read(&dir), original);
}

#[test]
fn check_exits_0_on_a_current_file() {
    let (dir, original) = fixture_kernel_dir("edition6-current");
    let out = kb().args(["update-build", "--check"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8(out.stdout).unwrap().ends_with("is already edition 6; nothing to change.\n"));
    assert_eq!(read(&dir), original);
}

/// Found by a fresh user: an edition-6 file with an unknown key (and a missing `depends`) was
/// "already edition 6; nothing to change", exit 0, under `--check` too. Nothing to change is
/// no promise the file is right: it fails with the diagnostics check-config gives.
#[test]
fn check_fails_on_a_current_file_that_does_not_validate() {
    let (dir, _) = fixture_kernel_dir("edition6-current");
    let path = dir.path().join("build.toml");
    let text = read(&dir).replace("[kernel.relu]\n", "[kernel.relu]\nbogus-key = 1\n");
    std::fs::write(&path, &text).unwrap();
    for check in [true, false] {
        let mut cmd = kb();
        cmd.arg("update-build");
        if check {
            cmd.arg("--check");
        }
        let out = cmd.arg(dir.path()).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "--check {check}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(
            stderr.starts_with(&format!(
                "error: `{}` is edition 6, with nothing for update-build to change, but it does not validate; fix the errors below\n",
                path.display()
            )),
            "{stderr}"
        );
        assert!(stderr.contains("unknown key `bogus-key` in `[kernel.relu]`"), "{stderr}");
        assert!(String::from_utf8(out.stdout).unwrap().is_empty());
        assert_eq!(read(&dir), text);
    }
}

/// Found by a fresh user: `--check` on an edition-5 file with an unknown key said "Run
/// `kernel-builder update-build` to apply", and that run failed on the key. `--check` validates
/// what the update would write, says so, and the command it names carries `--license`.
#[test]
fn check_says_to_fix_what_the_update_would_fail_on() {
    let (dir, _) = fixture_kernel_dir("edition5-current");
    let path = dir.path().join("build.toml");
    let text = read(&dir).replace("[kernel.relu]\n", "[kernel.relu]\nbogus-key = 1\n");
    std::fs::write(&path, &text).unwrap();
    let out = kb().args(["update-build", "--check"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.ends_with("Fix the errors above, then run `kernel-builder update-build` to apply.\n"),
        "{stdout}"
    );
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("unknown key `bogus-key` in `[kernel.relu]`"), "{stderr}");
    let out = kb().args(["update-build"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8(out.stdout).unwrap().is_empty(), "no change is announced that is not made");
    assert_eq!(read(&dir), text);

    let (dir, _) = fixture_kernel_dir("v2-no-license");
    let out = kb().args(["update-build", "--check", "--license", "MIT"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.ends_with("Run `kernel-builder update-build --license MIT` to apply.\n"), "{stdout}");
}

/// An edition-5 file is migrated to edition 6: `edition`, each kernel's `backend` becomes its
/// C++ `language` in the same place, and nothing else moves; the result is the edition-6
/// fixture byte for byte, and its cells are the edition-5 file's.
#[test]
fn edition5_is_migrated_to_edition6() {
    let (dir, original) = fixture_kernel_dir("edition5-current");
    let out = kb().args(["update-build", "--check"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!(
            "{0} needs an update: edition 5 → edition 6\n\
             \x20 general.edition: `edition = 5` became `edition = 6`\n\
             \x20 kernel.relu.language: `backend = \"cuda\"` became `language = \"cpp-cuda\"`\n\
             \x20 kernel.relu_rocm.language: `backend = \"rocm\"` became `language = \"cpp-rocm\"`\n\
             Run `kernel-builder update-build` to apply.\n",
            dir.path().join("build.toml").display()
        )
    );
    assert_eq!(read(&dir), original);
    kb().args(["update-build"]).arg(dir.path()).assert().code(0);
    let (_, edition6) = fixture_kernel_dir("edition6-current");
    assert_eq!(read(&dir), edition6);
    let cells = |text: &str| {
        let k = kernel_builder::kernel::load_str(camino::Utf8Path::new("build.toml"), text, None).unwrap();
        k.cells.in_scope(kernel_builder::matrix::Scope::All).to_vec()
    };
    assert_eq!(cells(&original), cells(&edition6));
}

#[test]
fn update_twice_is_a_no_op_the_second_time() {
    let (dir, _) = fixture_kernel_dir("v4-cuda-bounds");
    kb().args(["update-build"]).arg(dir.path()).assert().code(0);
    let first = read(&dir);
    assert!(first.contains("version = 1\nedition = 6\nbackends"));
    let out = kb().args(["update-build"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8(out.stdout).unwrap().contains("already edition 6; nothing to change."));
    assert_eq!(read(&dir), first);
    kb().args(["update-build", "--check"]).arg(dir.path()).assert().code(0);
}

#[test]
fn missing_license_refuses_to_write_until_given() {
    let (dir, original) = fixture_kernel_dir("v2-no-license");
    let out = kb().args(["update-build"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr
        .contains("general.license: the file has no `license`, which edition 6 requires [missing-license]"));
    assert!(stderr.contains("--license <SPDX id>"));
    assert_eq!(read(&dir), original, "the original bytes are untouched");
    // No stray temporary file is left behind.
    let stray: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".kernel-builder-"))
        .collect();
    assert!(stray.is_empty(), "{stray:?}");

    kb().args(["update-build", "--license", "BSD-3-Clause"]).arg(dir.path()).assert().code(0);
    let new = read(&dir);
    assert!(new.starts_with(
        "[general]\nname = \"bounded-attn\"\nversion = 1\nedition = 6\nlicense = \"BSD-3-Clause\"\nbackends = [\"cuda\"]\n"
    ));
    assert!(new.contains("maxver = \"12.4\""));
    assert!(new.contains("\"--use_fast_math\",              # keep this comment\n"));
}

/// An edition-5 file without `license` (which check-config refuses) is not "nothing to
/// change": update-build reports the missing license, exits 1 (with `--check` too) and writes
/// nothing until `--license` is given; `--license` on a file with another license keeps that
/// one and says so.
#[test]
fn edition5_without_license_is_reported_and_an_existing_license_is_kept() {
    let original = "[general]\nname = \"ab\"\nversion = 1\nedition = 5\nbackends = []\n\n[torch-noarch]\n";
    let dir = kernel_dir(original);
    for check in [true, false] {
        let out = kb().arg("update-build").args(check.then_some("--check")).arg(dir.path()).output().unwrap();
        let (stdout, stderr) =
            (String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap());
        assert_eq!(out.status.code(), Some(1), "--check {check}: {stdout}{stderr}");
        assert!(!stdout.contains("nothing to change"), "{stdout}");
        assert!(
            stderr.contains(
                "general.license: the file has no `license`, which edition 6 requires [missing-license]\n  help: run again with `--license <SPDX id>`"
            ),
            "{stderr}"
        );
        // Edition 5 needs the migration to edition 6 too: the license error stops it.
        if check {
            assert!(
                stdout.ends_with("Fix the errors above, then run `kernel-builder update-build` to apply.\n"),
                "{stdout}"
            );
        } else {
            assert!(
                stderr.ends_with("was not changed: fix the errors above and run this command again\n"),
                "{stderr}"
            );
        }
        assert_eq!(read(&dir), original);
    }
    kb().args(["update-build", "--license", "MIT"]).arg(dir.path()).assert().code(0);
    let with_license = read(&dir);
    assert_eq!(with_license, original.replace("edition = 5\n", "edition = 6\nlicense = \"MIT\"\n"));
    kb().args(["update-build", "--check"]).arg(dir.path()).assert().code(0);
    // Another license on the command line: the file's is kept, and the warning says so.
    let out = kb().args(["update-build", "--license", "Apache-2.0"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains(
            "general.license: the file already has `license = \"MIT\"`, which is kept: `--license Apache-2.0` only adds a license to a file without one [license-kept]\n  help: to change the license, edit `license` in `[general]`\n"
        ),
        "{stderr}"
    );
    assert_eq!(read(&dir), with_license);
    // The same license again is no news.
    let out = kb().args(["update-build", "--license", "MIT"]).arg(dir.path()).output().unwrap();
    assert_eq!((out.status.code(), String::from_utf8(out.stderr).unwrap()), (Some(0), String::new()));
}

/// A license already in the file is kept, and one that is not SPDX is said to be (found by
/// review: `apache-2.0` went through the upgrade silently, and only check-config warned later).
#[test]
fn a_kept_license_that_is_not_spdx_is_warned_about() {
    let original =
        "[general]\nname = \"ab\"\nversion = 1\nlicense = \"apache-2.0\"\nbackends = []\n\n[torch-noarch]\n";
    for extra in [&[][..], &["--license", "MIT"]] {
        let dir = kernel_dir(original);
        let out = kb().arg("update-build").args(extra).arg(dir.path()).output().unwrap();
        assert_eq!(out.status.code(), Some(0));
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(
            stderr.contains(
                "general.license: `apache-2.0` is not an SPDX license expression (unknown term: `apache-2.0`) \
                 [license-not-spdx]\n  help: Did you mean `Apache-2.0`? Use an id from"
            ),
            "{stderr}"
        );
        assert!(
            stderr.contains("(update-build keeps the license as it is; edit it in `[general]`)"),
            "{stderr}"
        );
        assert!(read(&dir).contains("\nlicense = \"apache-2.0\"\n"));
    }
}

/// `--license` must be an SPDX license expression (ids from the SPDX list, `LicenseRef-…`,
/// `AND`/`OR`/`WITH`): anything else is a usage error (exit 2) that names the bad term and,
/// when one is near, the expression meant; the file is untouched. Valid expressions are
/// written as given.
#[test]
fn license_must_be_an_spdx_expression() {
    let original = "[general]\nname = \"ab\"\nversion = 1\nbackends = []\n\n[torch-noarch]\n";
    let tail = "Use an id from https://spdx.org/licenses/ (e.g. `Apache-2.0`, `MIT`, `BSD-3-Clause`) or an \
                expression such as `MIT OR Apache-2.0`";
    for (bad, why) in [
        ("Apache2", "(unknown term: `Apache2`). Did you mean `Apache-2.0`? "),
        ("mit", "(unknown term: `mit`). Did you mean `MIT`? "),
        ("BSD3", "(unknown term: `BSD3`). Did you mean `BSD-3-Clause`? "),
        (
            "MIT/Apache-2.0",
            "(`/` cannot appear in one: ids use letters, digits, `.` and `-`, terms are separated by single \
             spaces). Did you mean `MIT OR Apache-2.0`? ",
        ),
        ("GPL-2.0", "(a deprecated license identifier was used: `GPL-2.0`). Did you mean `GPL-2.0-only`? "),
        ("Proprietary", "(unknown term: `Proprietary`). "),
        ("MIT OR", "(expected one of `<license>`, `(`, at its end). "),
    ] {
        let dir = kernel_dir(original);
        let out = kb().args(["update-build", "--license", bad]).arg(dir.path()).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert_eq!(
            String::from_utf8(out.stderr).unwrap(),
            format!(
                "error: invalid value '{bad}' for '--license <SPDX>': `{bad}` is not an SPDX license \
                 expression {why}{tail}\n\nFor more information, try '--help'.\n"
            ),
            "{bad}"
        );
        assert_eq!(read(&dir), original, "{bad}");
    }
    for good in ["MIT OR Apache-2.0", "Apache-2.0 WITH LLVM-exception", "LicenseRef-Acme-Internal"] {
        let dir = kernel_dir(original);
        kb().args(["update-build", "--license", good]).arg(dir.path()).assert().code(0);
        assert!(read(&dir).contains(&format!("\nlicense = \"{good}\"\n")), "{good}: {}", read(&dir));
    }
}

#[test]
fn upgrade_errors_leave_the_file_untouched() {
    let original = "[general]\nname = \"relu\"\n\n[torch]\n\n[kernel.a]\nlanguage = \"cuda-hipify\"\nsrc = [\"a.cu\"]\ndepends = []\n\n[kernel.a_rocm]\nsrc = [\"b.cu\"]\ndepends = []\n";
    let dir = kernel_dir(original);
    let out = kb().args(["update-build", "--license", "MIT"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8(out.stderr).unwrap().contains("[hipify-copy-conflict]"));
    assert_eq!(read(&dir), original);
}

#[test]
fn a_result_that_would_not_validate_leaves_the_original_bytes() {
    // A legacy file with two framework sections: the upgrade itself has nothing to object to,
    // validation of the new text does.
    let original = "[general]\nname = \"ab\"  # keep\nlicense = \"MIT\"\nbackends = []\n\n[torch]\n\n[tvm-ffi]\nsrc = []\n";
    let dir = kernel_dir(original);
    let out = kb().args(["update-build"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("was not changed: the upgraded file would not validate"), "{stderr}");
    assert_eq!(read(&dir), original);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file is left");
}

#[test]
fn edition5_name_with_underscores_is_renamed() {
    let original = "[general]\nname = \"fused_rms_norm\"\nversion = 1\nedition = 5\nlicense = \"MIT\"\nbackends = [\"cuda\"]\n\n[torch-noarch]\n";
    let dir = kernel_dir(original);
    kb().args(["update-build", "--check"]).arg(dir.path()).assert().code(1);
    assert_eq!(read(&dir), original);
    let out = kb().args(["update-build"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .contains("renamed the kernel `fused_rms_norm` to `fused-rms-norm`"));
    assert_eq!(
        read(&dir),
        original.replace("fused_rms_norm", "fused-rms-norm").replace("edition = 5", "edition = 6")
    );
}

/// A fresh user's case: a bad line of 800 kB was echoed whole in update-build's error (toml_edit's
/// own message quotes the line). The error is check-config's now, at the same line and column,
/// with 200 characters of the line around the column.
#[test]
fn a_huge_bad_line_is_not_echoed_whole() {
    let text = format!("[general]\nname = \"x\"\nuniversal = true\nbad = {}\n", "a".repeat(800_000));
    let dir = kernel_dir(&text);
    let path = dir.path().join("build.toml");
    let shown = format!("{}…", "a".repeat(194));
    let expected = |file: &str| {
        format!(
            "{file}:4:7: error: not valid TOML: invalid string\nexpected `\"`, `'` [toml-syntax]\n  4 | bad = {shown}\n    |       ^\n  help: fix the TOML syntax at the marked place\n\n{file}: 1 error and 0 warnings\n"
        )
    };
    let out = kb().args(["update-build"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8(out.stderr).unwrap(), expected(path.to_str().unwrap()));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text, "nothing is written");
    // check-config says the same.
    let out = kb().args(["check-config"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8(out.stderr).unwrap(), expected(path.to_str().unwrap()));
}

#[test]
fn bad_input_is_a_clear_error() {
    let dir = kernel_dir("[general\nname = 1\n");
    let out = kb().args(["update-build"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    // Rendered as check-config renders it: file, line and column, the line, the fix.
    let file = dir.path().join("build.toml");
    assert!(stderr.contains(&format!("[{}:1:9]", file.display())), "{stderr}");
    assert!(stderr.contains("not valid TOML: invalid table header"), "{stderr}");
    assert!(stderr.contains("help: fix the TOML syntax at the marked place"), "{stderr}");

    let out = kb().args(["update-build", "/nonexistent/kernel"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8(out.stderr).unwrap().contains("`/nonexistent/kernel` is not a directory"));

    let latin1 = tempfile::tempdir().unwrap();
    std::fs::write(latin1.path().join("build.toml"), b"[general]\nname = \"caf\xe9\"\n").unwrap();
    let out = kb().args(["update-build"]).arg(latin1.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8(out.stderr)
        .unwrap()
        .contains("build.toml` is not UTF-8 text: byte 21 (line 2) is 0xe9; save the file as UTF-8"));

    let empty = tempfile::tempdir().unwrap();
    let out = kb().args(["update-build"]).arg(empty.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8(out.stderr).unwrap().contains("build.toml"));
}

#[test]
#[cfg_attr(
    not(feature = "corpus-tests"),
    ignore = "needs the corpus: cargo test --features corpus-tests (KERNEL_BUILDER_CORPUS or ../shared/corpus)"
)]
fn every_corpus_file_updates_and_then_is_current() {
    // This legacy file names the C++ dependency by its old name, which the upgrade renames.
    const RENAMED_DEP: &str = "huggingface__kernels-community__flash-attn@4922936f";
    let mut updated = 0;
    let mut refused = Vec::new();
    for (name, text) in corpus() {
        if text.parse::<DocumentMut>().is_err() {
            continue;
        }
        let dir = corpus_kernel_dir(&name);
        let out = kb().args(["update-build", "--license", "Apache-2.0"]).arg(dir.path()).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if stderr.contains("was not changed: the upgraded file would not validate") {
            // Invalid in every generation (an unknown kernel key): nothing is written.
            assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
            assert_eq!(read(&dir), text, "{name}");
            refused.push(name);
            continue;
        }
        assert_eq!(out.status.code(), Some(0), "{name}: {stderr}");
        let new = read(&dir);
        if name == RENAMED_DEP {
            assert!(new.contains(r#"depends = ["torch", "sycl_tla"]"#), "{name}: {new}");
            assert!(!new.contains("cutlass_sycl"), "{name}");
        }
        if new != text {
            updated += 1;
        }
        let mut doc: DocumentMut = new.parse().unwrap();
        assert!(doc["general"]["license"].is_str(), "{name}");
        let u = upgrade(&mut doc);
        assert!(u.changes.is_empty() && u.generation == Generation::Edition6, "{name}");
        kb().args(["update-build", "--check"]).arg(dir.path()).assert().code(0);
    }
    // Upstream's Rust example of August (edition 5 with `dsl = "rust"`, which no loader reads)
    // and its TIR-X one (`lang`) are refused; every other file is rewritten as edition 6.
    assert_eq!(
        refused,
        [
            "huggingface__kernels__examples_kernels_relu-rust@76ad94db",
            "huggingface__kernels__examples_kernels_relu-tirx@c842cbb1",
        ]
    );
    assert_eq!(updated, 107);
}

// ---------------------------------------------------------------------------------------------
// Properties: nothing panics, and the upgrade is idempotent
// ---------------------------------------------------------------------------------------------

/// Whatever the document, upgrading never panics, the result is TOML again, and upgrading it a
/// second time changes nothing.
fn check_upgrade_invariants(text: &str) -> Result<(), TestCaseError> {
    let _ = plan("build.toml", text, Some("MIT"));
    let _ = plan("build.toml", text, None);
    let Ok(mut doc) = text.parse::<DocumentMut>() else { return Ok(()) };
    let _ = detect(&doc);
    let _ = upgrade(&mut doc);
    let out = doc.to_string();
    let Ok(mut again) = out.parse::<DocumentMut>() else {
        // toml_edit can print documents it cannot read back only when the input was already
        // unusual (e.g. a key defined both dotted and as a table); nothing to compare then.
        return Ok(());
    };
    let second = upgrade(&mut again);
    prop_assert!(second.changes.is_empty(), "second upgrade changed {:?}\n{out}", second.changes);
    Ok(())
}

const KEYS: &[&str] = &[
    "[general]\n",
    "[torch]\n",
    "[torch-noarch]\n",
    "[tvm-ffi]\n",
    "[kernel.a]\n",
    "[kernel.a_rocm]\n",
    "[general.cuda]\n",
    "name = \"a_b\"\n",
    "universal = true\n",
    "universal = false\n",
    "universal = 1\n",
    "cuda-minver = \"12.4\"\n",
    "cuda-maxver = \"13.0\"\n",
    "language = \"cuda-hipify\"\n",
    "language = \"metal\"\n",
    "language = 3\n",
    "capabilities = [\"8.0\"]\n",
    "backend = \"cuda\"\n",
    "rocm-archs = [\"gfx942\"]\n",
    "edition = 5\n",
    "edition = \"x\"\n",
    "version = 1\n",
    "license = \"MIT\"\n",
    "python-depends = [\"einops\", \"nvidia-cutlass-dsl\"]\n",
    "pyroot = \"x\"\n",
    "src = []\n",
    "cuda = 1\n",
    "backends = [\"cuda\"]\n",
    "# comment\n",
    "kernel = 1\n",
    "general = 1\n",
    "torch = { universal = true }\n",
    "general.cuda.minver = \"1\"\n",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,400}") {
        check_upgrade_invariants(&text)?;
    }

    #[test]
    fn build_toml_shaped_text_never_panics(parts in proptest::collection::vec(0..KEYS.len(), 0..24)) {
        let text: String = parts.iter().map(|&i| KEYS[i]).collect();
        check_upgrade_invariants(&text)?;
    }

    #[test]
    #[cfg_attr(
        not(feature = "corpus-tests"),
        ignore = "needs the corpus: cargo test --features corpus-tests (KERNEL_BUILDER_CORPUS or ../shared/corpus)"
    )]
    fn mutated_corpus_files_never_panic(
        file in 0usize..200,
        edits in proptest::collection::vec((0usize..10_000, 0..KEYS.len(), any::<bool>()), 1..6),
    ) {
        let files = corpus_small();
        let (_, text) = &files[file % files.len()];
        let mut lines: Vec<String> = text.lines().map(|l| format!("{l}\n")).collect();
        for (at, key, delete) in edits {
            let at = at % (lines.len() + 1);
            if delete && at < lines.len() {
                lines.remove(at);
            } else {
                lines.insert(at, KEYS[key].to_owned());
            }
        }
        check_upgrade_invariants(&lines.concat())?;
    }
}

/// The corpus files under 200 lines (the mutation test reads them once).
fn corpus_small() -> &'static [(String, String)] {
    static FILES: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();
    FILES.get_or_init(|| corpus().into_iter().filter(|(_, t)| t.lines().count() < 200).collect())
}

#[test]
fn a_symlinked_build_toml_is_updated_where_it_points() {
    let dir = kernel_dir(
        "[general]\nname = \"ab\"\nversion = 1\nlicense = \"MIT\"\nbackends = []\n\n[torch-noarch]\n",
    );
    let real = dir.path().join("real.toml");
    std::fs::rename(dir.path().join("build.toml"), &real).unwrap();
    std::os::unix::fs::symlink("real.toml", dir.path().join("build.toml")).unwrap();
    kb().args(["update-build"]).arg(dir.path()).assert().code(0);
    assert!(std::fs::symlink_metadata(dir.path().join("build.toml")).unwrap().file_type().is_symlink());
    assert_eq!(
        std::fs::read_to_string(&real).unwrap(),
        "[general]\nname = \"ab\"\nversion = 1\nedition = 6\nlicense = \"MIT\"\nbackends = []\n\n[torch-noarch]\n"
    );
}

#[test]
fn a_crlf_build_toml_keeps_its_line_endings() {
    let dir = kernel_dir(
        "# comment\r\n[general]\r\nname = \"ab\"\r\nversion = 1\r\nlicense = \"MIT\"\r\nbackends = []\r\n\r\n[torch-noarch]\r\n",
    );
    kb().args(["update-build"]).arg(dir.path()).assert().code(0);
    assert_eq!(
        read(&dir),
        "# comment\r\n[general]\r\nname = \"ab\"\r\nversion = 1\r\nedition = 6\r\nlicense = \"MIT\"\r\nbackends = []\r\n\r\n[torch-noarch]\r\n"
    );
}

#[test]
fn check_with_errors_does_not_suggest_a_plain_update() {
    let dir = kernel_dir("[general]\nname = \"ab\"\n\n[torch-noarch]\n");
    let out = kb().args(["update-build", "--check"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("[missing-license]"), "{stderr}");
    assert!(
        stdout.ends_with("Fix the errors above, then run `kernel-builder update-build` to apply.\n"),
        "{stdout}"
    );
}

#[test]
fn an_empty_build_toml_is_an_error_not_current() {
    let dir = kernel_dir("\n  \n");
    let out = kb().args(["update-build"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8(out.stderr).unwrap().contains("is empty"));
    let out = kb().args(["check-config"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("empty-file"), "{stderr}");
    assert!(!stderr.contains("legacy"), "{stderr}");
    // Not empty, but nothing of a build.toml either: never "already edition 6".
    for text in ["# only a comment\n", "foo = 1\n"] {
        let dir = kernel_dir(text);
        let out = kb().args(["update-build"]).arg(dir.path()).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{text}");
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert!(!stdout.contains("already edition"), "{stdout}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(stderr.contains("has no `[general]` section"), "{stderr}");
    }
}

#[test]
fn help_text() {
    let out = kb().args(["update-build", "--help"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    insta::assert_snapshot!("update_build_help", String::from_utf8(out.stdout).unwrap());
}

/// update-build's own output never tells the user to run update-build: the shared rules' help
/// is said as what to do here (regression: "help: run `kernel-builder update-build`, then …").
#[test]
fn update_builds_output_does_not_tell_the_user_to_run_update_build() {
    let dir = kernel_dir("[general]\nname = \"x-y\"\nuniversal = true\n\n[torch]\n");
    let out = kb().args(["update-build"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let all = String::from_utf8(out.stdout).unwrap() + &String::from_utf8(out.stderr).unwrap();
    assert!(!all.contains("kernel-builder update-build"), "{all}");
    assert!(all.contains("  help: remove from `backends` the ones this kernel does not support\n"), "{all}");
    assert!(all.contains("  help: run again with `--license <SPDX id>`"), "{all}");
    assert!(all.contains("was not changed: fix the errors above and run this command again"), "{all}");

    let out = kb().args(["update-build", "--license", "MIT"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let all = String::from_utf8(out.stdout).unwrap() + &String::from_utf8(out.stderr).unwrap();
    assert!(!all.contains("kernel-builder update-build"), "{all}");
}

/// `[general] matrix` (the pinned build matrix) survives an upgrade, in place, and an unknown
/// pin stops update-build before it writes, naming the known matrices.
#[test]
#[cfg_attr(
    not(feature = "corpus-tests"),
    ignore = "needs the corpus: cargo test --features corpus-tests (KERNEL_BUILDER_CORPUS or ../shared/corpus)"
)]
fn the_matrix_pin_is_kept_and_checked() {
    let original = corpus_text("huggingface__kernels-community__flash-attn3");
    let pinned =
        original.replacen("[general]\n", "[general]\nmatrix = \"upstream-2026-08\"  # keep 2.12/2.13\n", 1);
    assert_ne!(pinned, original, "the corpus file starts with [general]");
    let dir = kernel_dir(&pinned);
    crate::corpus::materialize_into("huggingface__kernels-community__flash-attn3", dir.path());
    std::fs::write(dir.path().join("build.toml"), &pinned).unwrap();
    kb().args(["update-build"]).arg(dir.path()).assert().code(0);
    let new = read(&dir);
    assert!(new.contains("[general]\nmatrix = \"upstream-2026-08\"  # keep 2.12/2.13\n"), "{new}");
    assert!(new.contains("edition = 6"), "{new}");
    let out = kb().args(["list-variants", "--system", "x86_64-linux"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    // Upstream's August bundle for this file (expected.json `variants`), not the default's.
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "torch-stable-abi29-cu126-x86_64-linux\ntorch-stable-abi29-cu130-x86_64-linux\n"
    );

    let unknown = pinned.replace("upstream-2026-08", "upstream-2099-01");
    std::fs::write(dir.path().join("build.toml"), &unknown).unwrap();
    let out = kb().args(["update-build"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("unknown-matrix"), "{stderr}");
    assert!(stderr.contains("known matrices: `2026-12`"), "{stderr}");
    assert_eq!(read(&dir), unknown, "nothing is written");
}
