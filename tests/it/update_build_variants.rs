//! `update-build` never changes what is built: for every corpus file, the build variants of
//! the in-memory read equal those of the rewritten file, on every system and in both scopes.
//!
//! Uses `kernel::load_str` (the parser of every edition and the matrix checks), `matrix::cells` (the
//! variant function) and the corpus through `crate::corpus`.

use camino::Utf8Path;
use kernel_builder::config::update::plan;
use kernel_builder::config::BuildConfig;
use kernel_builder::kernel::load_str;
use kernel_builder::matrix::{cells, data::matrix, Cell, Scope};

use crate::corpus::build_tomls as corpus;

/// The model with the fields that may legitimately differ after a rewrite made equal: the
/// generation read, and a license that `--license` supplied.
fn comparable(mut c: BuildConfig, license: &str) -> BuildConfig {
    c.generation = kernel_builder::config::Generation::Edition6;
    c.path = Default::default();
    if c.general.license.is_empty() {
        c.general.license = license.to_owned();
    }
    c
}

fn all_cells(c: &BuildConfig) -> Vec<(String, &'static str, Vec<Cell>)> {
    let mut out = Vec::new();
    for system in &matrix().systems {
        for (scope, label) in [(Scope::Bundle, "bundle"), (Scope::All, "all")] {
            out.push((system.clone(), label, cells(c, system, scope)));
        }
    }
    out
}

#[test]
#[cfg_attr(
    not(feature = "corpus-tests"),
    ignore = "needs the corpus: cargo test --features corpus-tests (KERNEL_BUILDER_CORPUS or ../shared/corpus)"
)]
fn update_build_keeps_every_variant_of_every_corpus_file() {
    const LICENSE: &str = "Apache-2.0";
    let path = Utf8Path::new("build.toml");
    let (mut compared, mut rejected) = (0, Vec::new());
    for (name, text) in corpus() {
        let Ok(before) = load_str(path, &text, None) else {
            rejected.push(name);
            continue;
        };
        let plan = plan("build.toml", &text, Some(LICENSE)).unwrap_or_else(|e| panic!("{name}: {e:#}"));
        assert!(!plan.has_errors(), "{name}: {:?}", plan.problems);
        let after = load_str(path, &plan.new_text, None)
            .unwrap_or_else(|e| panic!("{name}: the rewritten file does not load:\n{}", e.render()));
        assert_eq!(after.config.generation, kernel_builder::config::Generation::Edition6, "{name}");
        let (b, a) = (comparable(before.config, LICENSE), comparable(after.config, LICENSE));
        assert_eq!(all_cells(&b), all_cells(&a), "{name}: the variants changed");
        assert_eq!(b, a, "{name}: the model changed");
        compared += 1;
    }
    // Every file except those invalid in any generation: unknown kernel keys (`dsl`, `lang`),
    // not TOML. (A legacy file without `license` is read with the `legacy-no-license` warning.)
    assert_eq!(
        rejected,
        [
            "huggingface__kernels__examples_kernels_relu-rust@76ad94db",
            "huggingface__kernels__examples_kernels_relu-tirx@c842cbb1",
            "huggingface__kernels__kernel-builder_src_init_templates",
        ]
    );
    assert_eq!(compared, 107);
}

#[test]
#[cfg_attr(
    not(feature = "corpus-tests"),
    ignore = "needs the corpus: cargo test --features corpus-tests (KERNEL_BUILDER_CORPUS or ../shared/corpus)"
)]
fn flash_attn3_keeps_its_cu130_cells_after_update_build() {
    // Upstream's migration rewrote `maxver = "13.0"` as `"13"` and Nix then dropped cu130.
    let text = corpus()
        .into_iter()
        .find(|(n, _)| n == "huggingface__kernels-community__flash-attn3")
        .map(|(_, t)| t)
        .expect("flash-attn3 in the corpus");
    let plan = plan("build.toml", &text, None).expect("plan");
    let after = load_str(Utf8Path::new("build.toml"), &plan.new_text, None).expect("loads");
    let names: Vec<String> =
        cells(&after.config, "x86_64-linux", Scope::Bundle).into_iter().map(|c| c.name).collect();
    assert_eq!(names, ["torch-stable-abi29-cu126-x86_64-linux", "torch-stable-abi29-cu130-x86_64-linux"]);
}
