//! Benchmark (not a test): what `check-config` and `list-variants` cost per build.toml, over
//! the whole corpus, in one process.
//!
//! ```text
//! cargo bench --bench matrix_corpus -- [--reps N] [--corpus DIR]
//! ```
//!
//! Every corpus kernel (accepted by upstream or not) is materialized once into a temporary
//! directory (build.toml plus an empty file per listed path), then for N repetitions each file
//! goes through `kernel::load` (what `check-config` does, matrix checks included, against the
//! default matrix), once more `matrix::check` alone, and `matrix::cells` for every system in
//! both scopes (what `list-variants --all-systems [--all]` does), the last two under the
//! default matrix and under the August snapshot `upstream-2026-08` (the kernel pinned to it),
//! interleaved so that both see the same machine load; and, for every loaded `[torch]` /
//! `[tvm-ffi]` kernel, `codegen::generate` (what `create-pyproject` computes before writing,
//! and what a compiled build generates). Figures are wall-clock means per file per repetition.
//! Results: BENCHMARKS.md.

use std::time::{Duration, Instant};

use camino::{Utf8Path, Utf8PathBuf};
use kernel_builder::codegen::{self, Layout};
use kernel_builder::config;
use kernel_builder::kernel;
use kernel_builder::matrix::{self, data::matrix, Scope};

fn materialize(entry: &Utf8Path, extra: &[String], dest: &Utf8Path) -> std::io::Result<()> {
    std::fs::copy(entry.join("build.toml"), dest.join("build.toml"))?;
    let listing = std::fs::read_to_string(entry.join("files.txt")).unwrap_or_default();
    let paths: Vec<String> = listing
        .lines()
        .map(str::to_owned)
        .chain(extra.iter().cloned())
        .map(|p| p.trim().trim_end_matches('/').to_owned())
        .filter(|p| {
            !p.is_empty() && p != "build.toml" && !p.starts_with('/') && !p.split('/').any(|c| c == "..")
        })
        .collect();
    let dirs: std::collections::BTreeSet<&str> =
        paths.iter().flat_map(|p| p.match_indices('/').map(move |(i, _)| &p[..i])).collect();
    for rel in &paths {
        let path = dest.join(rel);
        if dirs.contains(rel.as_str()) {
            std::fs::create_dir_all(&path)?;
        } else {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&path, b"")?;
        }
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let mut reps = 20usize;
    let mut corpus = std::env::var("KERNEL_BUILDER_CORPUS")
        .map(Utf8PathBuf::from)
        .unwrap_or_else(|_| Utf8PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/corpus")));
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--reps" => {
                reps = args.next().and_then(|n| n.parse().ok()).ok_or_else(|| anyhow::anyhow!("--reps N"))?
            }
            "--corpus" => {
                corpus = args.next().map(Utf8PathBuf::from).ok_or_else(|| anyhow::anyhow!("--corpus DIR"))?
            }
            "--bench" => {} // passed by `cargo bench`
            other => anyhow::bail!("unknown argument `{other}` (expected --reps N, --corpus DIR)"),
        }
    }
    let expected: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&kernel_builder::fsutil::read_to_string(&corpus.join("expected.json"))?)?;
    let tmp = tempfile::tempdir()?;
    let root =
        Utf8Path::from_path(tmp.path()).ok_or_else(|| anyhow::anyhow!("temporary directory is not UTF-8"))?;
    let mut dirs = Vec::new();
    for (name, exp) in &expected {
        let extra: Vec<String> = exp["sources_missing_from_files_txt"]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
            .unwrap_or_default();
        let dest = root.join(name);
        std::fs::create_dir_all(&dest)?;
        materialize(&corpus.join(name), &extra, &dest)?;
        dirs.push(dest);
    }

    let mut t_load = Duration::ZERO;
    // Per matrix (0: the default, 1: the August snapshot): check and cells time, cells listed.
    let pins = [None, Some("upstream-2026-08")];
    let mut t_check = [Duration::ZERO; 2];
    let mut t_cells = [Duration::ZERO; 2];
    let mut cells_total = [0usize; 2];
    let mut loaded = 0usize;
    let (mut t_gen, mut generated, mut gen_files) = (Duration::ZERO, 0usize, 0usize);
    let start = Instant::now();
    for _ in 0..reps {
        for dir in &dirs {
            let t0 = Instant::now();
            let result = kernel::load(dir);
            t_load += t0.elapsed();
            let Ok(mut l) = result else { continue };
            loaded += 1;
            if !matches!(l.config.framework, config::Framework::TorchNoarch(_)) {
                let t3 = Instant::now();
                let project = codegen::generate(&l.config, dir, &Layout::default());
                t_gen += t3.elapsed();
                if let Ok(p) = project {
                    generated += 1;
                    gen_files += std::hint::black_box(p.files).len();
                }
            }
            for (i, pin) in pins.iter().enumerate() {
                l.config.general.matrix = pin.map(str::to_owned);
                let t1 = Instant::now();
                std::hint::black_box(matrix::check(&l.config, &matrix::KernelCells::of(&l.config)));
                t_check[i] += t1.elapsed();
                let t2 = Instant::now();
                for system in &matrix().systems {
                    for scope in [Scope::Bundle, Scope::All] {
                        cells_total[i] += std::hint::black_box(matrix::cells(&l.config, system, scope)).len();
                    }
                }
                t_cells[i] += t2.elapsed();
            }
        }
    }
    let total = start.elapsed();
    let per = |d: Duration, n: usize| d.as_secs_f64() * 1e6 / n.max(1) as f64;
    let files = dirs.len() * reps;
    println!("corpus: {} files ({} load), {reps} repetitions", dirs.len(), loaded / reps.max(1));
    println!("total: {:.3} s, {:.1} µs per file", total.as_secs_f64(), per(total, files));
    println!("  kernel::load (check-config; includes matrix::check): {:.1} µs per file", per(t_load, files));
    println!(
        "  codegen::generate (create-pyproject's project): {:.1} µs per compiled kernel ({} kernels, {} files each)",
        per(t_gen, generated),
        generated / reps.max(1),
        gen_files / generated.max(1)
    );
    for (i, name) in ["default matrix", "upstream-2026-08"].iter().enumerate() {
        println!("  {name}:");
        println!("    matrix::check alone:         {:.1} µs per loaded file", per(t_check[i], loaded));
        println!(
            "    matrix::cells, 3 systems x 2 scopes: {:.1} µs per loaded file ({} cells per file)",
            per(t_cells[i], loaded),
            cells_total[i] / loaded.max(1)
        );
    }
    Ok(())
}
