//! The native cell cache and `--jobs`: a second native build of an unchanged cell reuses it
//! (the output says `reused`, the tree's NAR hash is unchanged, and no compiler ran: `CXX` is a
//! wrapper that records its calls), a one-byte source change rebuilds, a corrupt entry is
//! found and rebuilt, `verify` never reads the cache, and `--jobs 2` writes the same `build/`
//! as `--jobs 1`. Each test has its own cache (`KERNEL_BUILDER_CACHE_DIR`).
//!
//! The relu tests build `kernels/relu`'s CPU cell with the repository's venv
//! (`.venv/bin/python`, made by `scripts/setup-venv.sh`); without it they say SKIPPED.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

pub(crate) use super::util::{copy_kernel, repo};

/// An executable `#!/bin/sh` script at `path` running `body`.
pub(crate) fn script(path: &Path, body: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

/// A finished command: exit code (-1 when killed), stdout, stderr.
pub(crate) struct Out {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// `kernel-builder ARGS` in `dir` with the cache `cache` and extra environment.
pub(crate) fn kb(dir: &Path, cache: &Path, env: &[(&str, &Path)], args: &[&str]) -> Out {
    let mut c = crate::util::kb();
    c.current_dir(dir)
        .env("KERNEL_BUILDER_CACHE_DIR", cache)
        .env_remove("KERNEL_BUILDER_NATIVE_CACHE_MAX_SIZE")
        .args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8(o.stdout).unwrap(),
        stderr: String::from_utf8(o.stderr).unwrap(),
    }
}

fn nar(path: &Path) -> String {
    kernel_builder::hash::nar_hash_sri(path).unwrap()
}

/// The entry directories of the cache (`native-cells-v1/<key>`), sorted.
fn entries(cache: &Path) -> Vec<PathBuf> {
    let dir = cache.join("native-cells-v1");
    let mut out: Vec<PathBuf> = fs::read_dir(&dir)
        .map(|rd| {
            rd.map(|e| e.unwrap().path())
                .filter(|p| !p.file_name().unwrap().to_str().unwrap().starts_with('.'))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// `build-and-copy` of one native cell with the interpreter `py`, rebuilding it (`--no-cache`),
/// then `extra`.
pub(crate) fn native_build_args<'a>(py: &'a Path, cell: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "build-and-copy",
        "--nix",
        "never",
        "--no-cache",
        "--python",
        py.to_str().unwrap(),
        "--variant",
        cell,
    ];
    args.extend(extra);
    args
}

/// The venv's interpreter and the CPU cell its torch gives (`torch211-cxx11-cpu-x86_64-linux`),
/// or `None` (with a SKIPPED line) without the venv.
pub(crate) fn venv_cpu_cell() -> Option<(PathBuf, String)> {
    let py = repo().join(".venv/bin/python");
    let version = std::process::Command::new(&py)
        .args(["-c", "import torch; print(torch.__version__)"])
        .output()
        .ok()
        .filter(|o| o.status.success());
    let Some(version) = version else {
        eprintln!(
            "SKIPPED: no torch in {} (run scripts/setup-venv.sh); the relu cache tests did not run",
            py.display()
        );
        return None;
    };
    let v = String::from_utf8(version.stdout).unwrap();
    let mut parts = v.trim().split(['.', '+']);
    let (major, minor) = (parts.next().unwrap().to_owned(), parts.next().unwrap().to_owned());
    Some((py, format!("torch{major}{minor}-cxx11-cpu-{}-linux", std::env::consts::ARCH)))
}

/// A `CXX` that appends its arguments to `log`, one line per call, and runs the system's c++.
fn recording_cxx(dir: &Path, log: &Path) -> PathBuf {
    let real = String::from_utf8(
        std::process::Command::new("sh").args(["-c", "command -v c++"]).output().unwrap().stdout,
    )
    .unwrap()
    .trim()
    .to_owned();
    assert!(!real.is_empty(), "no c++ on PATH");
    let cxx = dir.join("cxx-wrapper/c++");
    script(&cxx, &format!("printf '%s\\n' \"$*\" >> '{}'\nexec '{real}' \"$@\"", log.display()));
    cxx
}

/// The compiler calls recorded in `log` since it was last emptied, other than `--version`
/// (which planning runs to name the compiler), and empty it.
fn compiles(log: &Path) -> Vec<String> {
    let text = fs::read_to_string(log).unwrap_or_default();
    fs::write(log, "").unwrap();
    text.lines().filter(|l| *l != "--version").map(str::to_owned).collect()
}

/// Rewrite an entry's recorded hash to match its (edited) tree: an entry that is wrong but
/// self-consistent, which only a rebuild can tell from a good one.
fn poison(entry: &Path, edit: impl FnOnce(&Path)) {
    edit(&entry.join("tree"));
    let file = entry.join("entry.json");
    let mut doc: serde_json::Value = serde_json::from_str(&fs::read_to_string(&file).unwrap()).unwrap();
    doc["nar_hash"] = serde_json::Value::String(nar(&entry.join("tree")));
    fs::write(&file, serde_json::to_string(&doc).unwrap()).unwrap();
}

/// relu's CPU cell: reused by a rebuild and by another checkout of the same source (whose
/// CMake work directory is new, so only the cache can spare the compile); rebuilt after a
/// one-byte change; a corrupt entry is refused and rebuilt; `verify` compiles from scratch
/// and sees through a poisoned entry that a build reuses.
#[test]
fn relu_cpu_cell_is_reused_without_a_compile_and_rebuilt_when_it_must_be() {
    let _heavy = crate::util::heavy_build();
    let Some((py, cell)) = venv_cpu_cell() else { return };
    let t = tempfile::tempdir().unwrap();
    let (a, b, cache, log) =
        (t.path().join("a"), t.path().join("b"), t.path().join("cache"), t.path().join("cxx.log"));
    copy_kernel("relu", &a);
    copy_kernel("relu", &b);
    let cxx = recording_cxx(t.path(), &log);
    let env = [("CXX", cxx.as_path())];
    let args = ["build-and-copy", "--nix", "never", "--python", py.to_str().unwrap(), "--variant", &cell];

    let first = kb(&a, &cache, &env, &args);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(first.stdout.starts_with(&format!("built {cell} (5 files, id _relu_cpu_")), "{}", first.stdout);
    assert!(compiles(&log).iter().any(|c| c.contains(" -c ")), "the first build compiles");
    let built = nar(&a.join("build").join(&cell));
    assert_eq!(entries(&cache).len(), 1);

    // The same directory again, and another checkout of the same source.
    for dir in [&a, &b] {
        let again = kb(dir, &cache, &env, &args);
        assert_eq!(again.code, 0, "{}", again.stderr);
        assert_eq!(again.stdout.lines().count(), 1, "{}", again.stdout);
        assert!(
            again.stdout.starts_with(&format!("reused {cell} (5 files, id _relu_cpu_")),
            "{}",
            again.stdout
        );
        assert_eq!(again.stderr, first.stderr, "the same warnings and notes");
        assert_eq!(compiles(&log), Vec::<String>::new(), "no compiler ran for a reused cell");
        assert_eq!(nar(&dir.join("build").join(&cell)), built);
    }
    assert_eq!(
        fs::read(a.join("build/hashes.json")).unwrap(),
        fs::read(b.join("build/hashes.json")).unwrap()
    );

    // One byte of the source changed (an uncommitted edit): a new key, a compile.
    let src = b.join("relu_cpu/relu.cpp");
    let mut bytes = fs::read(&src).unwrap();
    bytes.push(b'\n');
    fs::write(&src, bytes).unwrap();
    let changed = kb(&b, &cache, &env, &args);
    assert_eq!(changed.code, 0, "{}", changed.stderr);
    assert!(changed.stdout.starts_with(&format!("built {cell} ")), "{}", changed.stdout);
    assert!(compiles(&log).iter().any(|c| c.contains("relu.cpp")), "the edited source was compiled");
    assert_ne!(nar(&b.join("build").join(&cell)), built, "a new source id, a new op namespace");
    assert_eq!(entries(&cache).len(), 2);

    // A corrupt entry (one byte of its shared object changed) is refused, removed and rebuilt.
    let entry = entries(&cache)
        .into_iter()
        .find(|e| {
            let doc: serde_json::Value =
                serde_json::from_str(&fs::read_to_string(e.join("entry.json")).unwrap()).unwrap();
            doc["nar_hash"] == serde_json::Value::String(built.clone())
        })
        .expect("the first build's entry");
    let so = fs::read_dir(entry.join("tree"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "so"))
        .unwrap();
    let mut bytes = fs::read(&so).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 1;
    fs::write(&so, bytes).unwrap();
    let healed = kb(&a, &cache, &env, &args);
    assert_eq!(healed.code, 0, "{}", healed.stderr);
    assert!(healed.stdout.starts_with(&format!("built {cell} ")), "{}", healed.stdout);
    assert!(
        healed.stderr.contains(&format!("warning: the native cell cache entry `{}` for `{cell}` could not be used (its tree has NAR hash sha256-", entry.display())),
        "{}",
        healed.stderr
    );
    assert!(
        healed.stderr.contains(&format!(
            "but {built} was recorded when it was stored); it was removed and the cell rebuilt"
        )),
        "{}",
        healed.stderr
    );
    assert_eq!(nar(&a.join("build").join(&cell)), built, "the rebuild is the original cell");
    let again = kb(&a, &cache, &env, &args);
    assert!(
        again.stdout.starts_with(&format!("reused {cell} ")),
        "the rebuilt cell was stored again: {}",
        again.stdout
    );
    compiles(&log);

    // A wrong entry whose recorded hash matches it is served by a build (the cache is not a
    // check) but `verify` rebuilds from scratch, compiling, and says the tree is different.
    poison(&entry, |tree| fs::write(tree.join("__init__.py"), "poisoned = True\n").unwrap());
    let served = kb(&a, &cache, &env, &args);
    assert!(served.stdout.starts_with(&format!("reused {cell} ")), "{}", served.stdout);
    assert_eq!(
        fs::read_to_string(a.join("build").join(&cell).join("__init__.py")).unwrap(),
        "poisoned = True\n"
    );
    let verify = kb(&a, &cache, &env, &["verify", "--python", py.to_str().unwrap(), "--variant", &cell]);
    assert_eq!(verify.code, 1, "{}{}", verify.stdout, verify.stderr);
    assert!(verify.stdout.starts_with(&format!("{cell}: different\n")), "{}", verify.stdout);
    assert!(verify.stdout.contains("__init__.py"), "{}", verify.stdout);
    assert!(compiles(&log).iter().any(|c| c.contains(" -c ")), "verify compiled the cell");
    let _ = fs::remove_dir_all(&entry);
}

/// vector-add-helion (noarch, three cells): a rebuild reuses every cell with the same tree; the
/// bundle (variants and `hashes.json`) and the output are byte for byte the same with `--jobs
/// 1`, `--jobs 2` and `--jobs 0`, cached or not.
#[test]
fn vector_add_helion_is_reused_and_jobs_do_not_change_the_tree() {
    let t = tempfile::tempdir().unwrap();
    let cache = t.path().join("cache");
    let build = |name: &str, extra: &[&str]| -> (Out, String) {
        let dir = t.path().join(name);
        if !dir.exists() {
            copy_kernel("vector-add-helion", &dir);
        }
        let mut args = vec!["build-and-copy", "--nix", "never"];
        args.extend_from_slice(extra);
        let out = kb(&dir, &cache, &[], &args);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let tree = nar(&dir.join("build"));
        (out, tree)
    };
    let (first, tree) = build("one", &["--jobs", "1"]);
    let names = ["torch-cuda", "torch-rocm", "torch-xpu"];
    let verbs = |out: &Out| -> Vec<String> {
        out.stdout.lines().map(|l| l.split(" (").next().unwrap().to_owned()).collect()
    };
    assert_eq!(verbs(&first), names.map(|n| format!("built {n}")));
    assert_eq!(entries(&cache).len(), 3);

    let (again, same) = build("one", &["--jobs", "1"]);
    assert_eq!(verbs(&again), names.map(|n| format!("reused {n}")));
    assert_eq!(same, tree);
    assert_eq!(again.stdout.replace("reused ", "built "), first.stdout);
    assert_eq!(again.stderr, first.stderr);

    let (parallel, ptree) = build("two", &["--jobs", "2", "--no-cache"]);
    assert_eq!(ptree, tree, "--jobs 2 writes the same build/ as --jobs 1");
    assert_eq!(parallel.stdout, first.stdout, "in the same order");
    assert_eq!(parallel.stderr, first.stderr, "no progress display when stderr is not a terminal");
    let (all_cores, ctree) = build("cores", &["--jobs", "0"]);
    assert_eq!(ctree, tree);
    assert_eq!(
        verbs(&all_cores),
        names.map(|n| format!("reused {n}")),
        "another checkout of the same source"
    );
    assert_eq!(entries(&cache).len(), 3, "--no-cache stored nothing");

    // JSON says which cells were reused.
    let json = kb(
        &t.path().join("one"),
        &cache,
        &[],
        &["build-and-copy", "--nix", "never", "--json", "--jobs", "2"],
    );
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let reused: Vec<(String, bool)> = doc["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["name"].as_str().unwrap().to_owned(), v["reused"].as_bool().unwrap()))
        .collect();
    assert_eq!(reused, names.map(|n| (n.to_owned(), true)));

    // `native-cache prune` bounds it; the next build builds again.
    let show = kb(t.path(), &cache, &[], &["native-cache"]);
    assert_eq!(show.code, 0, "{}", show.stderr);
    assert!(
        show.stdout.starts_with(&format!("{}\n", cache.join("native-cells-v1").display())),
        "{}",
        show.stdout
    );
    assert!(show.stdout.contains("3 entries, "), "{}", show.stdout);
    // Noarch cells compile nothing: no CMake work directory, and the listing says so.
    assert!(
        show.stdout
            .ends_with("0 work directories, 0 B (`native-cache prune-work` removes those of gone kernels)\n"),
        "{}",
        show.stdout
    );
    let pruned = kb(t.path(), &cache, &[], &["native-cache", "prune", "--max-size", "0"]);
    assert_eq!(pruned.code, 0, "{}", pruned.stderr);
    assert!(pruned.stdout.starts_with("removed 3 entries ("), "{}", pruned.stdout);
    assert!(entries(&cache).is_empty());
    let (rebuilt, rtree) = build("one", &[]);
    assert_eq!(verbs(&rebuilt), names.map(|n| format!("built {n}")));
    assert_eq!(rtree, tree);
}

/// With `--jobs 2`, a compiled cell that fails (CMake fails; the toolchain is fake) fails the
/// build naming the cell while the noarch cells build beside it, and `build/` stays as it was.
#[test]
fn a_failing_cell_fails_a_parallel_build_and_leaves_build_unchanged() {
    let t = tempfile::tempdir().unwrap();
    let k = t.path().join("k");
    fs::create_dir_all(k.join("torch-ext/kk")).unwrap();
    fs::create_dir_all(k.join("src")).unwrap();
    fs::write(k.join("torch-ext/kk/__init__.py"), "").unwrap();
    fs::write(k.join("torch-ext/b.cpp"), "").unwrap();
    fs::write(k.join("src/k.cpp"), "").unwrap();
    fs::write(
        k.join("build.toml"),
        "[general]\nname = \"kk\"\nversion = 1\nedition = 5\nlicense = \"MIT\"\nbackends = [\"cpu\", \"cuda\", \"xpu\"]\n\n\
         [torch]\nsrc = [\"torch-ext/b.cpp\"]\n\n[kernel.k]\nbackend = \"cpu\"\ndepends = [\"torch\"]\nsrc = [\"src/k.cpp\"]\n",
    )
    .unwrap();
    // A Python whose "torch" answers the probe, and tools that only answer --version.
    let bin = t.path().join("env/bin");
    let r = t.path().display();
    script(
        &bin.join("python"),
        &format!(
            r#"echo '{{"version": "2.11.0", "cuda": null, "hip": null, "xpu": null, "cxx11_abi": true, "cmake_prefix_path": "{r}/torch", "torch_dir": "{r}/torch", "python_include": "{r}/include", "purelib": "{r}/site", "executable": "{r}/env/bin/python", "python_version": "3.11"}}'"#
        ),
    );
    script(&bin.join("cmake"), "[ \"$1\" = --version ] && echo 'cmake version 4.4.5' && exit 0; echo 'CMake Error: no compiler here'; exit 3");
    script(&bin.join("ninja"), "echo 1.13.2");
    script(&bin.join("c++"), "echo 'c++ (Debian 12.2.0-14+deb12u1) 12.2.0'");
    let cache = t.path().join("cache");
    let py = bin.join("python");
    let path = [("PATH", bin.as_path())];
    let args = |extra: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = ["build-and-copy", "--nix", "never", "--python", py.to_str().unwrap()]
            .map(str::to_owned)
            .to_vec();
        a.extend(extra.iter().map(|s| (*s).to_owned()));
        a
    };
    let run = |extra: &[&str]| {
        let a = args(extra);
        let refs: Vec<&str> = a.iter().map(String::as_str).collect();
        kb(&k, &cache, &path, &refs)
    };
    let ok = run(&["--variant", "torch-cuda", "--variant", "torch-xpu"]);
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    let before = nar(&k.join("build"));
    fs::write(k.join("torch-ext/kk/__init__.py"), "changed = True\n").unwrap();

    let failed = run(&["--jobs", "2"]);
    assert_eq!(failed.code, 1, "{}", failed.stdout);
    assert_eq!(failed.stdout, "");
    assert!(
        failed.stderr.starts_with("error: cannot build variant `torch211-cxx11-cpu-x86_64-linux`\n  caused by: CMake configure failed"),
        "{}",
        failed.stderr
    );
    assert!(failed.stderr.contains("CMake Error: no compiler here"), "{}", failed.stderr);
    assert_eq!(nar(&k.join("build")), before, "build/ is as it was");
    let left: Vec<String> = fs::read_dir(k.join("build"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(!left.iter().any(|n| n.starts_with(".kernel-builder-tmp")), "{left:?}");
}

/// CMake reads `CXXFLAGS` (and the other flag variables) and the compiler only at the first
/// configure of a build directory. A build with new flags must use them, not the warm work
/// directory's old ones, and must not reuse or store the cell under the old flags' result:
/// relu-stable-abi's CPU cell built once, then with `CXXFLAGS=-fbogus-flag-xyz` fails
/// naming the flag (the first build's cache entry in place, not reused); then with `CXX` a
/// wrapper the first build did not use, it builds at the first try with the wrapper.
#[test]
fn a_changed_compiler_or_flags_configures_the_work_directory_afresh() {
    let Some((py, _)) = venv_cpu_cell() else { return };
    let t = tempfile::tempdir().unwrap();
    let (a, cache, log) = (t.path().join("a"), t.path().join("cache"), t.path().join("cxx.log"));
    copy_kernel("relu-stable-abi", &a);
    let cell = format!("torch-stable-abi211-cpu-{}-linux", std::env::consts::ARCH);
    let args = ["build-and-copy", "--nix", "never", "--python", py.to_str().unwrap(), "--variant", &cell];

    let first = kb(&a, &cache, &[], &args);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(first.stdout.starts_with(&format!("built {cell} ")), "{}", first.stdout);
    assert_eq!(entries(&cache).len(), 1);
    let built = nar(&a.join("build").join(&cell));

    let bogus = kb(&a, &cache, &[("CXXFLAGS", Path::new("-fbogus-flag-xyz"))], &args);
    assert_eq!(bogus.code, 1, "{}{}", bogus.stdout, bogus.stderr);
    assert!(!bogus.stdout.contains("reused"), "{}", bogus.stdout);
    assert!(bogus.stderr.contains("-fbogus-flag-xyz"), "{}", bogus.stderr);
    assert!(bogus.stderr.contains("unrecognized command-line option"), "{}", bogus.stderr);
    assert_eq!(entries(&cache).len(), 1, "nothing stored for the failed cell");
    assert_eq!(nar(&a.join("build").join(&cell)), built, "build/ unchanged");

    // Another compiler: configured afresh (no "You have changed variables" failure), and
    // the compiles go through it.
    let cxx = recording_cxx(t.path(), &log);
    let other = kb(&a, &cache, &[("CXX", cxx.as_path())], &args);
    assert_eq!(other.code, 0, "{}", other.stderr);
    assert!(other.stdout.starts_with(&format!("built {cell} ")), "{}", other.stdout);
    assert!(
        compiles(&log).iter().any(|c| c.contains(" -c ") && c.contains("relu.cpp")),
        "the wrapper compiled"
    );
    assert_eq!(entries(&cache).len(), 2);
}

/// relu's CUDA cell built with a cache directory whose path has a space: nvcc would split
/// `-Xcompiler=-ffile-prefix-map=<that path>=.` into two host compiler arguments, so
/// kernel-builder passes it quoted; the cell builds and its library does not name the path.
/// A path with a comma is refused before anything runs, naming the variable to change (nvcc
/// splits include paths at commas, quoted or not: a stable-ABI or tvm-ffi cell, or a kernel
/// with include directories, failed there on a header that was present).
/// Needs the venv's CUDA torch and nvcc (`scripts/setup-venv.sh`); about 30 s.
#[test]
fn relu_cuda_cell_builds_from_a_cache_directory_with_a_space() {
    let Some((py, _)) = venv_cpu_cell() else { return };
    let o = std::process::Command::new(&py)
        .args(["-c", "import torch; print(torch.__version__.split('+')[0], torch.version.cuda)"])
        .output()
        .unwrap();
    let out = String::from_utf8(o.stdout).unwrap();
    let (version, cuda) = out.trim().split_once(' ').unwrap();
    if cuda == "None" {
        eprintln!("SKIPPED: the venv's torch is a CPU build; the CUDA work-directory test did not run");
        return;
    }
    let mut v = version.split('.');
    let (major, minor) = (v.next().unwrap(), v.next().unwrap());
    let cell =
        format!("torch{major}{minor}-cxx11-cu{}-{}-linux", cuda.replace('.', ""), std::env::consts::ARCH);
    let t = tempfile::tempdir().unwrap();
    let (a, cache) = (t.path().join("a"), t.path().join("my cache here"));
    copy_kernel("relu", &a);
    let args = ["build-and-copy", "--nix", "never", "--python", py.to_str().unwrap(), "--variant", &cell];
    let comma = kb(&a, &t.path().join("my cache, here"), &[], &args);
    assert_eq!(comma.code, 1, "{}", comma.stderr);
    assert!(
        comma.stderr.contains(&format!(
            "of the CUDA cell `{cell}` has a comma, and nvcc splits include paths at commas"
        )),
        "{}",
        comma.stderr
    );
    assert!(
        comma.stderr.contains(
            "set KERNEL_BUILDER_CACHE_DIR (or TMPDIR, for `verify`) to a directory whose path has no comma"
        ),
        "{}",
        comma.stderr
    );
    assert!(!a.join("build").exists(), "nothing built");
    let built = kb(&a, &cache, &[], &args);
    assert_eq!(built.code, 0, "{}", built.stderr);
    assert!(built.stdout.starts_with(&format!("built {cell} (5 files, id _relu_cuda_")), "{}", built.stdout);
    let so = fs::read_dir(a.join("build").join(&cell))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "so"))
        .unwrap();
    let bytes = fs::read(so).unwrap();
    assert!(!bytes.windows(b"my cache".len()).any(|w| w == b"my cache"), "the cache path is mapped away");
}

/// Found by a fresh user: a bad `KERNEL_BUILDER_NATIVE_CACHE_MAX_SIZE` failed the build only
/// after every cell was built (the bound is read to prune). The caches' settings are read
/// first: the build fails at once, naming the variable, with nothing written; a setting that
/// does not apply (the cell cache under `--no-cache`, the compile cache of a noarch kernel)
/// is not read.
#[test]
fn a_bad_cache_bound_fails_before_anything_is_built() {
    let t = tempfile::tempdir().unwrap();
    let helion = t.path().join("helion");
    copy_kernel("vector-add-helion", &helion);
    let relu = t.path().join("relu");
    copy_kernel("relu", &relu);
    let cache = t.path().join("cache");
    let run = |dir: &Path, var: &str, extra: &[&str]| {
        let mut c = crate::util::kb();
        c.current_dir(dir)
            .env("KERNEL_BUILDER_CACHE_DIR", &cache)
            .env("KERNEL_BUILDER_TOOLCHAIN_CACHE_DIR", t.path().join("toolchains"))
            .env_remove("KERNEL_BUILDER_NATIVE_CACHE_MAX_SIZE")
            .env_remove("KERNEL_BUILDER_COMPILE_CACHE_MAX_SIZE")
            .env_remove("KERNEL_BUILDER_COMPILE_CACHE")
            .env(var, "lots")
            .args(["build-and-copy", "--nix", "never", "--offline"])
            .args(extra);
        c.output().unwrap()
    };
    let refused = |out: std::process::Output, var: &str, dir: &Path| {
        assert_eq!(out.status.code(), Some(1));
        assert_eq!(
            String::from_utf8(out.stderr).unwrap(),
            format!("error: {var} is `lots`: not a size; write bytes or a number with K, M, G or T (e.g. 500M, 2G)\n")
        );
        assert!(!dir.join("build").exists());
    };
    refused(
        run(&helion, "KERNEL_BUILDER_NATIVE_CACHE_MAX_SIZE", &[]),
        "KERNEL_BUILDER_NATIVE_CACHE_MAX_SIZE",
        &helion,
    );
    refused(
        run(&relu, "KERNEL_BUILDER_COMPILE_CACHE_MAX_SIZE", &[]),
        "KERNEL_BUILDER_COMPILE_CACHE_MAX_SIZE",
        &relu,
    );
    // Bytes that are not UTF-8 are refused too, not taken as unset (the default applied).
    for var in ["KERNEL_BUILDER_NATIVE_CACHE_MAX_SIZE", "KERNEL_BUILDER_COMPILE_CACHE_MAX_SIZE"] {
        use std::os::unix::ffi::OsStrExt;
        let out = crate::util::kb()
            .current_dir(&relu)
            .env("KERNEL_BUILDER_CACHE_DIR", &cache)
            .env("KERNEL_BUILDER_TOOLCHAIN_CACHE_DIR", t.path().join("toolchains"))
            .env_remove("KERNEL_BUILDER_NATIVE_CACHE_MAX_SIZE")
            .env_remove("KERNEL_BUILDER_COMPILE_CACHE_MAX_SIZE")
            .env_remove("KERNEL_BUILDER_COMPILE_CACHE")
            .env(var, std::ffi::OsStr::from_bytes(b"2\xffG"))
            .args(["build-and-copy", "--nix", "never", "--offline"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(
            stderr.starts_with(&format!("error: {var} is `2\u{fffd}G`, which is not UTF-8 text; ")),
            "{stderr}"
        );
        assert!(!relu.join("build").exists());
    }
    assert!(!t.path().join("toolchains").exists(), "nothing was fetched or unpacked");
    // Settings that do not apply are not read.
    let out = run(&helion, "KERNEL_BUILDER_NATIVE_CACHE_MAX_SIZE", &["--no-cache"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = run(&helion, "KERNEL_BUILDER_COMPILE_CACHE_MAX_SIZE", &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A setting of ours given in bytes that are not UTF-8 is refused, naming the variable, before
/// anything is built or written: taking it as unset would quietly use the default place or
/// value the user meant to change (the cache root under `~/.cache`, `nix`, 60 s).
#[test]
fn settings_that_are_not_utf8_are_refused_before_anything_is_written() {
    use std::os::unix::ffi::OsStrExt;
    let t = tempfile::tempdir().unwrap();
    let helion = t.path().join("helion");
    copy_kernel("vector-add-helion", &helion);
    let home = t.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let bad = std::ffi::OsStr::from_bytes(b"/tmp/caf\xe9");
    let run = |var: &str, args: &[&str]| {
        let mut c = crate::util::kb();
        c.current_dir(&helion)
            .env("HOME", &home)
            .env_remove("XDG_CACHE_HOME")
            .env("KERNEL_BUILDER_CACHE_DIR", t.path().join("cache"))
            .env("HF_ENDPOINT", "http://127.0.0.1:9")
            .env("HF_TOKEN", "hf_test")
            .env(var, bad)
            .args(args);
        let out = c.output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{var}: {out:?}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(
            stderr
                .lines()
                .last()
                .unwrap()
                .starts_with(&format!("error: {var} is `/tmp/caf\u{FFFD}`, which is not UTF-8 text; ")),
            "{var}: {stderr}"
        );
        stderr
    };
    run("KERNEL_BUILDER_CACHE_DIR", &["build-and-copy", "--nix", "never", "--offline"]);
    run("KERNEL_BUILDER_NIX", &["build-and-copy", "--nix", "always"]);
    run("KERNEL_BUILDER_NIX", &["build-and-copy", "--nix", "auto"]);
    run("KERNEL_BUILDER_TOOLCHAIN_CACHE_DIR", &["native-cache"]);
    assert!(!helion.join("build").exists());
    assert_eq!(std::fs::read_dir(&home).unwrap().count(), 0, "nothing under the default cache root");
    // Built, then uploaded with a bad answer timeout: refused before any request.
    let built = crate::util::kb()
        .current_dir(&helion)
        .env("KERNEL_BUILDER_CACHE_DIR", t.path().join("cache"))
        .args(["build-and-copy", "--nix", "never", "--offline"])
        .output()
        .unwrap();
    assert!(built.status.success(), "{built:?}");
    let stderr = run("KERNEL_BUILDER_HUB_TIMEOUT", &["upload", "--repo-id", "me/helion"]);
    assert!(
        !stderr.contains("hashing") && !stderr.contains("Uploading"),
        "refused before any work: {stderr}"
    );
    // build-and-upload refuses it before it builds (it had built, hashed, then failed).
    std::fs::remove_dir_all(helion.join("build")).unwrap();
    let stderr = run("KERNEL_BUILDER_HUB_TIMEOUT", &["build-and-upload", "--repo-id", "me/helion"]);
    assert!(!stderr.contains("built "), "{stderr}");
    assert!(!helion.join("build").exists());
}

/// A native cell-cache bound below the cell just stored empties the cache, that cell too, and
/// says so (a user's trial set `0` and had no word of it).
#[test]
fn a_cell_cache_bound_below_the_cell_just_stored_is_a_warning() {
    let _heavy = crate::util::heavy_build();
    let Some((py, cell)) = venv_cpu_cell() else { return };
    let t = tempfile::tempdir().unwrap();
    let (relu, cache) = (t.path().join("relu"), t.path().join("cache"));
    copy_kernel("relu", &relu);
    let env = [("KERNEL_BUILDER_NATIVE_CACHE_MAX_SIZE", Path::new("0"))];
    let args = ["build-and-copy", "--nix", "never", "--python", py.to_str().unwrap(), "--variant", &cell];
    let out = kb(&relu, &cache, &env, &args);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("warning: KERNEL_BUILDER_NATIVE_CACHE_MAX_SIZE is 0 B, less than the cell just stored, so the native cell cache keeps nothing and the next build starts cold; raise it (the default is 5G), or build with --no-cache\n"),
        "{}",
        out.stderr
    );
    assert_eq!(entries(&cache), Vec::<PathBuf>::new());
}

/// A cache directory setting that is `~…`, relative, or a file is refused, naming the
/// variable, before anything is built or written (a user's trial had `'~/tc'` fill `./~/tc`
/// with 1.8 GB of wheels, and `/dev/null` pass with warnings that named no variable).
#[test]
fn cache_directories_must_be_absolute_directories() {
    let t = tempfile::tempdir().unwrap();
    let helion = t.path().join("helion");
    copy_kernel("vector-add-helion", &helion);
    let file = t.path().join("a-file");
    fs::write(&file, "x").unwrap();
    let file = file.to_str().unwrap();
    for var in ["KERNEL_BUILDER_CACHE_DIR", "KERNEL_BUILDER_TOOLCHAIN_CACHE_DIR"] {
        for (value, says) in [
            ("~/tc", "and `~` is not expanded here; write the directory in full (`$HOME/…`)".to_owned()),
            ("reltc", "a relative path; set it to an absolute directory (".to_owned()),
            (file, "which exists and is not a directory; set it to a directory (".to_owned()),
        ] {
            let mut c = crate::util::kb();
            c.current_dir(&helion).args(["build-and-copy", "--nix", "never", "--offline"]);
            if var != "KERNEL_BUILDER_CACHE_DIR" {
                c.env("KERNEL_BUILDER_CACHE_DIR", t.path().join("cache"));
            }
            let out = c.env(var, value).output().unwrap();
            let stderr = String::from_utf8(out.stderr).unwrap();
            assert_eq!(out.status.code(), Some(1), "{var}={value}: {stderr}");
            assert!(
                stderr.starts_with(&format!("error: {var} is `{value}`, {says}")),
                "{var}={value}: {stderr}"
            );
            assert!(
                !helion.join("build").exists()
                    && !helion.join("~").exists()
                    && !helion.join("reltc").exists()
            );
        }
    }
    // The compile cache too, sccache or not.
    let out = crate::util::kb()
        .current_dir(&helion)
        .env("KERNEL_BUILDER_CACHE_DIR", t.path().join("cache"))
        .env("KERNEL_BUILDER_COMPILE_CACHE", file)
        .arg("native-cache")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        format!("error: KERNEL_BUILDER_COMPILE_CACHE is `{file}`, which exists and is not a directory; set it to a directory (the compile cache), or to `off`\n")
    );
}
