//! Compiled cells in Nix (`mkTorchCell` / `mkTvmFfiCell`), against real Nix, offline.
//!
//! Two package sets:
//! - the default one (nixpkgs, `lib.nixpkgsToolchain`), which these machines cannot fetch: its
//!   cells are evaluated against the stub nixpkgs (`tests/fixtures/nixpkgs-stub`) and their
//!   wiring checked;
//! - the offline test package set (`tests/fixtures/host-toolchain`), NOT HERMETIC: the host's
//!   python, g++, CMake and Ninja through derivations marked `__noChroot` (so these builds pass
//!   `--option sandbox relaxed`). With it, relu's bundle cells (torch 2.14 and 2.15, CPU and
//!   CUDA) and relu-tvm-ffi's CPU and CUDA cells are built in Nix for real.
//!
//! Torch cells on CPU and CUDA take torch and the CUDA toolkit from their pins
//! (nix/torch-wheels.json) in every package set: the pinned wheels come from the toolchain cache
//! the native pinned builds share (`target/tmp/toolchain-cache`, filled when missing) and are
//! added to the store by their sha256 before `nix build`. tvm-ffi cells take PyPI's
//! apache-tvm-ffi wheel and CUDA 13.0's nvcc wheels from the host set (`wheels.json`), pinned
//! the same way.
//!
//! The host set needs this repository's venv (`.venv`: cmake, ninja, cuobjdump), Debian's
//! `/usr/bin/python3` of the same minor version (the venv's interpreter lives under /root,
//! which the build users cannot read), g++, and the static orchestrator (scripts/setup-nix.sh).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

use super::nix::{git, orchestrator, repo, stub_nixpkgs};

const REPO: &str = env!("CARGO_MANIFEST_DIR");
/// A bundle cell the host package set builds (from its pins: torch 2.15's CUDA 13.2 wheel).
pub(crate) const CPU_CELL: &str = "torch215-cxx11-cpu-x86_64-linux";
const CPU_CELL_214: &str = "torch214-cxx11-cpu-x86_64-linux";
const CUDA_CELL: &str = "torch215-cxx11-cu132-x86_64-linux";
const TVM_FFI_CPU_CELL: &str = "tvm-ffi01-cpu-x86_64-linux";
const TVM_FFI_CUDA_CELL: &str = "tvm-ffi01-cu130-x86_64-linux";

fn run(prog: &str, args: &[&str], cwd: &Path) -> (bool, String, String) {
    let out = duct::cmd(prog, args).dir(cwd).stdout_capture().stderr_capture().unchecked().run().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn nix(cwd: &Path, args: &[&str]) -> String {
    let (ok, out, err) = run("nix", args, cwd);
    assert!(ok, "nix {} failed:\n{err}", args.join(" "));
    out
}

fn venv_python() -> PathBuf {
    let p = repo().join(".venv/bin/python");
    assert!(p.exists(), "no venv at {}: run scripts/setup-venv.sh", p.display());
    p
}

/// The offline test package set, copied into a temp dir with `host.json` describing this
/// host (and its wheels in the store). `manylinux` is the policy it declares.
pub(crate) fn host_toolchain(manylinux: &str) -> tempfile::TempDir {
    let py = venv_python();
    let (ok, purelib, err) = run(
        py.to_str().unwrap(),
        &["-c", "import sysconfig, sys; print(sysconfig.get_paths()['purelib']); print('%d.%d' % sys.version_info[:2])"],
        repo(),
    );
    assert!(ok, "{err}");
    let mut lines = purelib.lines();
    let purelib = lines.next().unwrap().to_owned();
    let venv_minor = lines.next().unwrap().to_owned();
    let (ok, sys_minor, _) =
        run("/usr/bin/python3", &["-c", "import sys; print('%d.%d' % sys.version_info[:2])"], repo());
    assert!(
        ok && sys_minor.trim() == venv_minor,
        "/usr/bin/python3 must be Python {venv_minor}, like the venv"
    );
    // Resolve through the venv's symlink: the build users must be able to read every path.
    let purelib = fs::canonicalize(&purelib).unwrap().display().to_string();
    let venv_bin = fs::canonicalize(repo().join(".venv/bin")).unwrap();
    let host = serde_json::json!({
        "python": "/usr/bin/python3",
        "pythonpath": [purelib],
        "cxx": "/usr/bin/g++",
        "cc": "/usr/bin/gcc",
        "cmake": format!("{purelib}/cmake/data/bin/cmake"),
        "ninja": venv_bin.join("ninja").display().to_string(),
        "bin": ["/usr/bin", "/bin"],
        "manylinux": manylinux,
    });
    let t = tempfile::tempdir().unwrap();
    let fixture = repo().join("tests/fixtures/host-toolchain");
    for f in ["flake.nix", "wheels.json"] {
        fs::copy(fixture.join(f), t.path().join(f)).unwrap();
    }
    fs::write(t.path().join("host.json"), serde_json::to_string_pretty(&host).unwrap()).unwrap();
    let wheels: Value = serde_json::from_slice(&fs::read(fixture.join("wheels.json")).unwrap()).unwrap();
    // The set's own torch (2.11) serves only cells not built from pins, which no test builds.
    let mut all = vec![&wheels["tvm-ffi"]];
    all.extend(wheels["cuda"]["wheels"].as_array().unwrap());
    for w in all {
        add_wheel_to_store(w["file"].as_str().unwrap(), w["sha256"].as_str().unwrap());
    }
    // The pins of the cells built with it (CPU_CELL, CUDA_CELL).
    add_pinned_wheels_to_store("2.15", Some("13.2"));
    t
}

/// Put the pinned wheels of the bundle cell of torch `torch` (`2.15`) and CUDA `cuda` (`None`:
/// CPU) on x86_64-linux in the store, at the fixed-output paths its Nix cell names: from the
/// toolchain cache the native pinned builds share (downloaded into it when missing, checked
/// against the pinned sha256), added with `nix-store --add-fixed sha256`.
fn add_pinned_wheels_to_store(torch: &str, cuda: Option<&str>) {
    use kernel_builder::toolchain::pins::pins;
    use kernel_builder::toolchain::store::{FetchOptions, Store};
    let cache = super::pinned::shared_toolchain_cache();
    let c = pins().cell(torch, cuda, "x86_64-linux").unwrap();
    let mut store = None;
    for w in std::iter::once(c.torch).chain(c.toolkit) {
        let w = w.resolved().unwrap();
        let (ok, path, err) = run("nix-store", &["--print-fixed-path", "sha256", &w.sha256, &w.file], repo());
        assert!(ok, "{err}");
        if run("nix-store", &["--check-validity", path.trim()], repo()).0 {
            continue;
        }
        let store = store.get_or_insert_with(|| {
            Store::open(camino::Utf8Path::from_path(&cache).unwrap(), FetchOptions::default()).unwrap()
        });
        let cached = store.wheel(&w).unwrap();
        // Named as the pin names it (the store path's name), beside the cache (one file system).
        let named = tempfile::tempdir_in(&cache).unwrap();
        let file = named.path().join(&w.file);
        fs::hard_link(&cached, &file).unwrap();
        let (ok, added, err) = run("nix-store", &["--add-fixed", "sha256", file.to_str().unwrap()], repo());
        assert!(ok, "{err}");
        assert_eq!(added.trim(), path.trim());
    }
}

/// Make sure the wheel `file` with PyPI sha256 `sha256` is in the store (the path the fixture's
/// fixed-output derivation names): from `$KERNEL_BUILDER_TEST_WHEELS` (default
/// `target/test-wheels`), downloaded there with pip when missing.
fn add_wheel_to_store(file: &str, sha256: &str) {
    let (ok, path, err) = run("nix-store", &["--print-fixed-path", "sha256", sha256, file], repo());
    assert!(ok, "{err}");
    if run("nix-store", &["--check-validity", path.trim()], repo()).0 {
        return;
    }
    let dir = std::env::var_os("KERNEL_BUILDER_TEST_WHEELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/test-wheels"));
    fs::create_dir_all(&dir).unwrap();
    let local = dir.join(file);
    if !local.is_file() {
        let mut parts = file.split('-');
        let (name, version) = (parts.next().unwrap(), parts.next().unwrap());
        let spec = format!("{}=={version}", name.replace('_', "-"));
        // Tests run in parallel and several need the same wheel: each downloads into a scratch
        // directory of its own and renames the finished file into place (a rename over an
        // equal file is harmless), so no test sees another's half-written wheel.
        let scratch = tempfile::tempdir_in(&dir).unwrap();
        let (ok, _, err) = run(
            venv_python().to_str().unwrap(),
            &[
                "-m",
                "pip",
                "download",
                "--no-cache-dir",
                "--no-deps",
                "-d",
                scratch.path().to_str().unwrap(),
                &spec,
            ],
            repo(),
        );
        assert!(ok, "pip download {spec}: {err}");
        fs::rename(scratch.path().join(file), &local).unwrap();
    }
    let (ok, _, err) = run("nix-store", &["--add-fixed", "sha256", local.to_str().unwrap()], repo());
    assert!(ok, "{err}");
}

/// The overrides of a kernel flake inside this repository: the static orchestrator, the
/// offline test package set, the stub nixpkgs; never writing a lock file; the relaxed sandbox
/// the host package set needs.
pub(crate) fn host_args(toolchain: &Path) -> Vec<String> {
    [
        "--option",
        "sandbox",
        "relaxed",
        "--override-input",
        "kernel-builder/orchestrator",
        &format!("path:{}", orchestrator().display()),
        "--override-input",
        "kernel-builder/toolchain",
        &format!("path:{}", toolchain.display()),
        "--override-input",
        "kernel-builder/nixpkgs",
        &format!("path:{}", repo().join("tests/fixtures/nixpkgs-stub").display()),
        "--no-write-lock-file",
    ]
    .map(String::from)
    .to_vec()
}

fn out_path(build_json: &str) -> PathBuf {
    let v: Value = serde_json::from_str(build_json).unwrap();
    PathBuf::from(v[0]["outputs"]["out"].as_str().unwrap())
}

/// Every file under `root`: relative path → bytes.
fn tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    walkdir::WalkDir::new(root)
        .sort_by_file_name()
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| (e.path().strip_prefix(root).unwrap().display().to_string(), fs::read(e.path()).unwrap()))
        .collect()
}

/// Copy `kernels/<name>` to `dest/<name>`; that directory.
fn copy_kernel(name: &str, dest: &Path) -> PathBuf {
    let to = dest.join(name);
    super::util::copy_kernel(name, &to);
    to
}

/// The toolchain record the host package set gives the cell `name` of `kind` (`torch`,
/// `tvm-ffi`): its python, CXX, PATH (store paths' bin dirs and the host's) and nvcc.
fn host_tools(toolchain: &Path, name: &str, kind: &str, backend: &str, backend_version: &str) -> Value {
    // `torch215-…` → "2.15" (tvm-ffi cells name no torch).
    let torch_version = name
        .strip_prefix("torch")
        .and_then(|r| r.split('-').next())
        .map(|d| format!("{}.{}", &d[..1], &d[1..]))
        .unwrap_or_else(|| "2.11".to_owned());
    let expr = format!(
        r#"let t = (builtins.getFlake "path:{}").lib.toolchainFor {{ name = "{name}"; system = "x86_64-linux"; backend = "{backend}"; backend_version = {backend_version}; torch_version = "{torch_version}"; kind = "{kind}"; }}; in {{ inherit (t) python cxx path nvcc missing; }}"#,
        toolchain.display()
    );
    serde_json::from_str(&nix(repo(), &["eval", "--impure", "--json", "--expr", &expr])).unwrap()
}

/// `nix build --no-link` of `<kernels/name>#<cell>` (the kernel's own flake) with the host
/// package set `toolchain`: the output's store path, which holds `<cell>/` and nothing else.
fn nix_build_cell(toolchain: &Path, kernel: &str, cell: &str) -> PathBuf {
    let mut args: Vec<String> =
        ["build", "--no-link", "--json", "-L", &format!("{REPO}/kernels/{kernel}#{cell}")]
            .map(String::from)
            .to_vec();
    args.extend(host_args(toolchain));
    let out = out_path(&nix(repo(), &args.iter().map(String::as_str).collect::<Vec<_>>()));
    let names: Vec<String> =
        fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert_eq!(names, [cell]);
    out
}

/// The native build of `kernels/<kernel>`'s `cell` (`build-and-copy --nix never` of a copy,
/// by the static orchestrator the cells run) with the tools of a host-set record
/// ([`host_tools`]: its python, CXX and PATH) and its package-set name, so that its bytes can
/// be compared with the Nix cell's. Returns the temp dir holding the copy and the variant.
fn native_build_with(tools: &Value, kernel: &str, cell: &str) -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let kernel = copy_kernel(kernel, t.path());
    let path: Vec<&str> = tools["path"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
    Command::new(orchestrator().join("bin/kernel-builder"))
        .env("PATH", path.join(":"))
        .env("CXX", tools["cxx"].as_str().unwrap())
        .env("KERNEL_BUILDER_CACHE_DIR", t.path().join("cache"))
        .args(["build-and-copy", kernel.to_str().unwrap(), "--nix", "never", "--variant", cell])
        .args(["--python", tools["python"].as_str().unwrap(), "--package-set", "host-test"])
        .assert()
        .success();
    let native = kernel.join("build").join(cell);
    (t, native)
}

/// The native pinned build (`build-and-copy --nix never` without `--python`: torch, the CUDA
/// toolkit, CMake and Ninja from the pinned wheels in the shared toolchain cache) of
/// kernels/relu's `cells`, with the compiler of the host set's record `tools` (its CXX, and
/// PATH for the rest: `python3` for `Python.h`) and its package-set name, so that each cell's
/// bytes can be compared with the Nix cell's. Returns the temp dir holding the copy and
/// `build/`.
fn native_pinned_build(tools: &Value, cells: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let kernel = copy_kernel("relu", t.path());
    let path: Vec<&str> = tools["path"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
    let mut cmd = Command::new(orchestrator().join("bin/kernel-builder"));
    cmd.env("PATH", path.join(":"))
        .env("CXX", tools["cxx"].as_str().unwrap())
        .env("KERNEL_BUILDER_CACHE_DIR", t.path().join("cache"))
        .env("KERNEL_BUILDER_TOOLCHAIN_CACHE_DIR", super::pinned::shared_toolchain_cache())
        .args(["build-and-copy", kernel.to_str().unwrap(), "--nix", "never", "--package-set", "host-test"]);
    for c in cells {
        cmd.args(["--variant", c]);
    }
    cmd.assert().success();
    let build = kernel.join("build");
    (t, build)
}

/// `nix hash path`: the NAR hash (SRI) of a tree.
fn nar_hash(p: &Path) -> String {
    nix(repo(), &["hash", "path", p.to_str().unwrap()]).trim().to_owned()
}

/// `cuobjdump` from PyPI's nvidia-cuda-cuobjdump wheel in the venv.
fn cuobjdump() -> PathBuf {
    let lib = fs::canonicalize(repo().join(".venv/lib")).unwrap();
    walkdir::WalkDir::new(lib)
        .into_iter()
        .filter_map(Result::ok)
        .find(|e| e.file_name() == "cuobjdump" && e.file_type().is_file())
        .expect("cuobjdump (pip install nvidia-cuda-cuobjdump) in the venv")
        .into_path()
}

/// The SASS and PTX targets `cuobjdump` lists in the fat binary of `so` (`sm_90`; the
/// compute_90 PTX is listed as `….sm_90.ptx`), each sorted.
fn fatbin_targets(so: &Path) -> (Vec<String>, Vec<String>) {
    let tool = cuobjdump();
    let (ok, elf, err) = run(tool.to_str().unwrap(), &["--list-elf", so.to_str().unwrap()], repo());
    assert!(ok, "{err}");
    let (_, listed, _) = run(tool.to_str().unwrap(), &["--list-ptx", so.to_str().unwrap()], repo());
    let targets = |text: &str| {
        let mut v: Vec<String> =
            text.lines().filter_map(|l| l.rsplit('.').nth(1)).map(String::from).collect();
        v.sort();
        v
    };
    (targets(&elf), targets(&listed))
}

/// Run the pytest file `test` (one test, loading the cell through the real `kernels` loader)
/// with `var` naming the Nix output `out`; it must pass, not skip. No bytecode: Python running
/// as root would write `__pycache__/` into the store path itself (root ignores its read-only
/// mode), and every later build that reuses this output would then differ from the native tree.
fn loads_through_kernels(test: &str, var: &str, out: &Path) {
    let run = duct::cmd(venv_python(), ["-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", test])
        .dir(repo())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env(var, out)
        .stderr_to_stdout()
        .stdout_capture()
        .unchecked()
        .run()
        .unwrap();
    let log = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success() && log.contains("1 passed") && !log.contains("skipped"), "{log}");
}

/// relu's bundle cells `torch214-cxx11-cpu`, `torch215-cxx11-cpu` and `torch215-cxx11-cu132`
/// (x86_64-linux), `nix build` of the kernel's own flake with the host package set: each takes
/// torch (and CUDA) from its pins, not from the set (the CPU cells compile against their
/// release's CUDA wheel, as natively), records the pinned torch's version read from the wheel;
/// the CUDA cell holds exactly the SASS its `cuda-capabilities` asks for; nothing of the build
/// directory, the store or the time is in a module; and each is byte for byte (NAR hash) the
/// native pinned `build-and-copy --nix never` of the same cell given the same compiler and
/// package-set name.
#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn relu_bundle_cells_build_in_nix_from_their_pins_and_equal_the_native_pinned_build() {
    let _heavy = crate::util::heavy_build();
    let tc = host_toolchain("2_34");
    add_pinned_wheels_to_store("2.14", None);
    // (cell, torch version recorded, nvcc recorded)
    let cells: [(&str, &str, Option<&str>); 3] = [
        (CPU_CELL_214, "2.14.0+cu130", None),
        (CPU_CELL, "2.15.0+cu132", None),
        (CUDA_CELL, "2.15.0+cu132", Some("13.2.86")),
    ];
    let mut built = Vec::new();
    for (cell, torch, nvcc) in cells {
        let out = nix_build_cell(tc.path(), "relu", cell);
        let variant = out.join(cell);
        let meta: Value = serde_json::from_slice(&fs::read(variant.join("metadata.json")).unwrap()).unwrap();
        assert_eq!(meta["build"]["package-set"], "host-test", "{meta}");
        assert_eq!(meta["build"]["hermetic"], false);
        assert_eq!(meta["build"]["native"], false);
        assert_eq!(meta["build"]["toolchain"]["torch"], torch, "{meta}");
        assert_eq!(meta["build"]["toolchain"]["nvcc"].as_str(), nvcc, "{meta}");
        let id = meta["id"].as_str().unwrap();
        let mut files: Vec<String> = tree(&variant).into_keys().collect();
        files.sort();
        assert_eq!(
            files,
            ["__init__.py", "_ops.py", &format!("{id}.abi3.so"), "metadata.json", "symbols.json"]
        );
        let so = fs::read(variant.join(format!("{id}.abi3.so"))).unwrap();
        for leak in ["/nix/store", "/build/", "/tmp/", "toolchain-cache", REPO] {
            assert!(
                !so.windows(leak.len()).any(|w| w == leak.as_bytes()),
                "{cell}: the module holds `{leak}`"
            );
        }
        if nvcc.is_some() {
            assert_eq!(meta["backend"], serde_json::json!({ "type": "cuda", "archs": ["9.0"] }));
            assert_eq!(
                fatbin_targets(&variant.join(format!("{id}.abi3.so"))),
                (vec!["sm_90".to_owned()], vec![])
            );
        }
        built.push((cell, variant));
    }
    // The cell's derivation names the pinned wheel (URL and hash of nix/torch-wheels.json).
    let pins: Value =
        serde_json::from_slice(&fs::read(repo().join("nix/torch-wheels.json")).unwrap()).unwrap();
    let mut args: Vec<String> = [
        "eval",
        "--json",
        &format!("{REPO}/kernels/relu#packages.x86_64-linux.{CPU_CELL}.torchWheel.drvAttrs"),
        "--apply",
        "a: { inherit (a) url outputHash; }",
    ]
    .map(String::from)
    .to_vec();
    args.extend(host_args(tc.path()));
    let wheel: Value =
        serde_json::from_str(&nix(repo(), &args.iter().map(String::as_str).collect::<Vec<_>>())).unwrap();
    let pin = &pins["wheels"]["2.15"]["cu132"]["x86_64-linux"];
    assert_eq!(wheel, serde_json::json!({ "url": pin["url"], "outputHash": pin["sha256"] }));
    // Its unpacked tree is a fixed-output path by the NAR hash the pins record for the set (the
    // build above checked the content against it): a store path named by its content, which
    // every kernel-builder version (the orchestrator that unpacks it) shares.
    args[2] = format!("{REPO}/kernels/relu#packages.x86_64-linux.{CPU_CELL}.torchTree.drvAttrs");
    args[4] = "a: { inherit (a) outputHash outputHashMode; }".to_owned();
    let tree_attrs: Value =
        serde_json::from_str(&nix(repo(), &args.iter().map(String::as_str).collect::<Vec<_>>())).unwrap();
    let id = kernel_builder::toolchain::pins::set_id([pin["sha256"].as_str().unwrap()]);
    assert_eq!(
        tree_attrs,
        serde_json::json!({ "outputHash": pins["unpacked"][&id], "outputHashMode": "recursive" })
    );

    // The native pinned builds with the same compiler.
    let tools = host_tools(tc.path(), CPU_CELL, "torch", "cpu", "null");
    assert_eq!(tools["missing"], Value::Null, "{tools}");
    assert_eq!(tools["python"], "/usr/bin/python3", "{tools}");
    let (_t, native) = native_pinned_build(&tools, &cells.map(|c| c.0));
    for (cell, variant) in built {
        let (nix_tree, native_tree) = (tree(&variant), tree(&native.join(cell)));
        let differ: Vec<&String> = nix_tree
            .keys()
            .chain(native_tree.keys())
            .filter(|f| nix_tree.get(*f) != native_tree.get(*f))
            .collect();
        assert!(
            differ.is_empty(),
            "{cell}: the Nix and native trees differ in {differ:?}; metadata.json:\n{}\n{}",
            String::from_utf8_lossy(&nix_tree["metadata.json"]),
            String::from_utf8_lossy(&native_tree["metadata.json"])
        );
        assert_eq!(nar_hash(&variant), nar_hash(&native.join(cell)), "{cell}");
    }
}

/// relu's CUDA cell compiles in Nix with its pinned nvcc 13.2 (no GPU), and its fat binary holds
/// exactly what `cuda-capabilities` asks for: relu's own `["9.0"]` gives sm_90 code and no
/// PTX; `["8.0", "9.0+PTX"]` (a copy of relu) gives sm_80 and sm_90 code and the compute_90
/// PTX (which cuobjdump lists as `sm_90.ptx`), nothing else.
#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn relu_cuda_cell_compiles_in_nix_with_exactly_its_capabilities() {
    let _heavy = crate::util::heavy_build();
    let tc = host_toolchain("2_34");
    let t = tempfile::tempdir().unwrap();
    let two = copy_kernel("relu", t.path());
    let toml = fs::read_to_string(two.join("build.toml")).unwrap();
    fs::write(
        two.join("build.toml"),
        toml.replace("cuda-capabilities = [\"9.0\"]", "cuda-capabilities = [\"8.0\", \"9.0+PTX\"]"),
    )
    .unwrap();
    // (kernel dir, metadata archs, SASS targets, PTX targets)
    type Case = (PathBuf, &'static [&'static str], &'static [&'static str], &'static [&'static str]);
    let cases: [Case; 2] = [
        (repo().join("kernels/relu"), &["9.0"], &["sm_90"], &[]),
        // cuobjdump names the embedded compute_90 PTX `….sm_90.ptx`.
        (two, &["8.0", "9.0+PTX"], &["sm_80", "sm_90"], &["sm_90"]),
    ];
    for (dir, archs, sass, ptx) in cases {
        let expr = format!(
            r#"let
  lib = import {REPO}/nix/lib {{ }};
  out = lib.genKernelFlakeOutputs {{
    path = /. + "{dir}";
    kernelBuilder = _: /. + "{orch}";
    toolchainFor = (builtins.getFlake "path:{tc}").lib.toolchainFor;
    mkShell = _: _: {{ }};
    systems = [ "x86_64-linux" ];
    torchVersions = _: [ {{ torchVersion = "2.15"; cudaVersion = "13.2"; systems = [ "x86_64-linux" ]; bundleBuild = true; }} ];
  }};
in out.packages.x86_64-linux.{CUDA_CELL}"#,
            dir = dir.display(),
            orch = orchestrator().display(),
            tc = tc.path().display()
        );
        let json = nix(
            repo(),
            &[
                "build",
                "--impure",
                "--no-link",
                "--json",
                "-L",
                "--option",
                "sandbox",
                "relaxed",
                "--expr",
                &expr,
            ],
        );
        let variant = out_path(&json).join(CUDA_CELL);
        let meta: Value = serde_json::from_slice(&fs::read(variant.join("metadata.json")).unwrap()).unwrap();
        assert_eq!(meta["backend"], serde_json::json!({ "type": "cuda", "archs": archs }));
        assert_eq!(meta["build"]["toolchain"]["nvcc"], "13.2.86", "{meta}");
        let so = variant.join(format!("{}.abi3.so", meta["id"].as_str().unwrap()));
        let (targets, ptxs) = fatbin_targets(&so);
        assert_eq!(targets, sass, "{archs:?}");
        assert_eq!(ptxs, ptx, "{archs:?}");
    }
}

/// The apache-tvm-ffi wheel of the host package set (`wheels.json`): `{ file, url, sha256,
/// version }`.
fn tvm_ffi_wheel() -> Value {
    let path = repo().join("tests/fixtures/host-toolchain/wheels.json");
    let wheels: Value = serde_json::from_slice(&fs::read(path).unwrap()).unwrap();
    wheels["tvm-ffi"].clone()
}

/// The `tvm_ffi` package directory the interpreter `python` imports (found without importing
/// it, as the orchestrator's probe does).
fn tvm_ffi_package_dir(python: &str) -> String {
    let (ok, out, err) = run(
        python,
        &["-c", "import importlib.util, os; s = importlib.util.find_spec('tvm_ffi'); print(os.path.realpath(list(s.submodule_search_locations)[0]))"],
        repo(),
    );
    assert!(ok, "{python}: {err}");
    out.trim().to_owned()
}

/// relu-tvm-ffi's CPU cell, `nix build` of the kernel's own flake with the host package set,
/// whose python for tvm-ffi cells has PyPI's apache-tvm-ffi wheel (pinned by its sha256, as
/// torch is) first on its path: the variant is named for that tvm_ffi, records it (and no
/// torch), holds `<id>.so` and nothing of the store, the build directory or the time; its NAR
/// hash equals the native `build-and-copy --nix never` given the same tools (python, CXX,
/// PATH) and package-set name; and it loads through `kernels.get_local_kernel` and equals
/// `torch.relu`.
#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn relu_tvm_ffi_cpu_cell_builds_in_nix_equals_the_native_build_and_loads() {
    let tc = host_toolchain("2_34");
    let wheel = tvm_ffi_wheel();
    let version = wheel["version"].as_str().unwrap();
    let tools = host_tools(tc.path(), TVM_FFI_CPU_CELL, "tvm-ffi", "cpu", "null");
    assert_eq!(tools["missing"], Value::Null, "{tools}");
    // Another tvm-ffi major.minor is refused when built, saying what the set has.
    let other = host_tools(tc.path(), "tvm-ffi02-cpu-x86_64-linux", "tvm-ffi", "cpu", "null");
    assert_eq!(
        other["missing"],
        format!("the offline test package set has tvm-ffi {version} only (`tvm-ffi01-…` cells)")
    );

    let out = nix_build_cell(tc.path(), "relu-tvm-ffi", TVM_FFI_CPU_CELL);
    // The cell's tvm_ffi is the pinned wheel's, not the host environment's (which has one too).
    // Asked after the build: evaluation alone does not put the python wrapper in the store.
    let python = tools["python"].as_str().unwrap();
    let pkg = tvm_ffi_package_dir(python);
    assert!(
        pkg.starts_with("/nix/store/")
            && pkg.ends_with(&format!("-apache-tvm-ffi-{version}-pypi-unpacked/site-packages/tvm_ffi")),
        "{python} imports tvm_ffi from {pkg}"
    );
    let variant = out.join(TVM_FFI_CPU_CELL);
    let meta: Value = serde_json::from_slice(&fs::read(variant.join("metadata.json")).unwrap()).unwrap();
    assert_eq!(meta["backend"], serde_json::json!({ "type": "cpu" }), "{meta}");
    assert_eq!(meta["python-depends"], serde_json::json!(["tvm-ffi"]));
    assert_eq!(meta["build"]["package-set"], "host-test");
    assert_eq!(meta["build"]["hermetic"], false);
    assert_eq!(meta["build"]["native"], false);
    assert_eq!(meta["build"]["toolchain"]["tvm-ffi"], version);
    assert!(meta["build"]["toolchain"].get("torch").is_none(), "{meta}");
    let id = meta["id"].as_str().unwrap();
    assert!(id.starts_with("_relu_tvm_ffi_cpu_"), "{id}");
    let files: Vec<String> = tree(&variant).into_keys().collect();
    let mut expected =
        ["__init__.py", "_ops.py", &format!("{id}.so"), "metadata.json", "symbols.json"].map(String::from);
    expected.sort();
    assert_eq!(files, expected);
    let so = fs::read(variant.join(format!("{id}.so"))).unwrap();
    for leak in ["/nix/store", "/build/", "/tmp/", REPO] {
        assert!(!so.windows(leak.len()).any(|w| w == leak.as_bytes()), "the module holds `{leak}`");
    }
    assert!(so.windows(b"libtvm_ffi.so".len()).any(|w| w == b"libtvm_ffi.so"), "not linked to libtvm_ffi.so");

    // The native build with the same tools.
    let (_t, native) = native_build_with(&tools, "relu-tvm-ffi", TVM_FFI_CPU_CELL);
    assert_eq!(tree(&variant), tree(&native), "the Nix and native trees differ");
    assert_eq!(nar_hash(&variant), nar_hash(&native));

    // The real loader.
    loads_through_kernels(
        "tests/python/test_nix_relu_tvm_ffi_cpu.py",
        "KERNEL_BUILDER_NIX_RELU_TVM_FFI_CPU",
        &out,
    );
}

/// relu-tvm-ffi's CUDA cell compiles in Nix with PyPI's nvcc 13.0 and the pinned tvm-ffi (no
/// GPU): named for both, `cuda-capabilities = ["9.0"]` gives sm_90 code and no PTX in its
/// fat binary, and the module holds nothing of the store.
#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn relu_tvm_ffi_cuda_cell_compiles_in_nix_with_exactly_its_capabilities() {
    let tc = host_toolchain("2_34");
    let out = nix_build_cell(tc.path(), "relu-tvm-ffi", TVM_FFI_CUDA_CELL);
    let variant = out.join(TVM_FFI_CUDA_CELL);
    let meta: Value = serde_json::from_slice(&fs::read(variant.join("metadata.json")).unwrap()).unwrap();
    assert_eq!(meta["backend"], serde_json::json!({ "type": "cuda", "archs": ["9.0"] }), "{meta}");
    assert_eq!(meta["build"]["toolchain"]["nvcc"], "13.0.88", "{meta}");
    assert_eq!(meta["build"]["toolchain"]["tvm-ffi"], tvm_ffi_wheel()["version"]);
    assert_eq!(meta["build"]["package-set"], "host-test");
    let id = meta["id"].as_str().unwrap();
    assert!(id.starts_with("_relu_tvm_ffi_cuda_"), "{id}");
    let so = variant.join(format!("{id}.so"));
    let bytes = fs::read(&so).unwrap();
    for leak in ["/nix/store", "/build/", REPO] {
        assert!(!bytes.windows(leak.len()).any(|w| w == leak.as_bytes()), "the module holds `{leak}`");
    }
    let (sass, ptx) = fatbin_targets(&so);
    assert_eq!(sass, ["sm_90"]);
    assert_eq!(ptx, Vec::<String>::new());
}

/// A Nix expression: the compiled cells of the kernel in `dir` on every system, with the
/// default package set (lib.nixpkgsToolchain over the stub nixpkgs), each as its drvPath,
/// builder arguments, environment, `missing`, the toolchain's wheel (cells not built from pins)
/// and the pinned torch wheel's URL and hash (`pin`, cells built from pins).
fn default_set_cells_expr(dirs: &[String]) -> String {
    format!(
        r#"let
  lib = import {REPO}/nix/lib {{ }};
  stub = builtins.getFlake "{stub}";
  systems = (builtins.fromJSON (builtins.readFile {REPO}/nix/build-matrix.json)).systems;
  toolchainFor = cell: lib.nixpkgsToolchain {{ pkgs = stub.legacyPackages.${{cell.system}}; }} cell;
  cellsOf = dir: let
    out = lib.genKernelFlakeOutputs {{ path = /. + dir; kernelBuilder = _: /. + "{orch}"; mkShell = _: _: {{ }}; inherit toolchainFor; }};
    compiled = system: builtins.filter (c: !c.noarch) out.variants.${{system}};
  in builtins.listToAttrs (builtins.concatMap (system: map (c: let d = out.packages.${{system}}.${{c.name}}; in {{
    name = c.name;
    value = {{
      inherit (d) drvPath;
      args = d.drvAttrs.args;
      env = builtins.removeAttrs d.drvAttrs [ "args" "builder" "name" "system" "src" ];
      missing = d.missing;
      wheel = d.toolchain.torchWheel;
      pin = if d.torchWheel == null then null else {{ inherit (d.torchWheel.drvAttrs) url outputHash; }};
      manylinux = d.toolchain.manylinux;
      kind = c.kind;
    }};
  }}) (compiled system)) systems);
in builtins.listToAttrs (map (dir: {{ name = baseNameOf dir; value = cellsOf dir; }}) [ {dirs} ])"#,
        stub = stub_nixpkgs(),
        orch = orchestrator().display(),
        dirs = dirs.iter().map(|d| format!("{d:?}")).collect::<Vec<_>>().join(" ")
    )
}

/// Every compiled cell (every system) of every `[torch]` / `[tvm-ffi]` corpus file upstream
/// accepts evaluates with the default package set against the stub nixpkgs: its derivation
/// exists, its builder is the orchestrator's `assemble` for exactly that cell with the
/// package set's python, `nixpkgs` and `--hermetic`; a cell whose wheel hash is not pinned
/// evaluates too (it fails when built, with the message checked below).
#[test]
#[cfg_attr(
    not(all(feature = "nix-tests", feature = "corpus-tests")),
    ignore = "needs Nix and the corpus: cargo test --features nix-tests,corpus-tests (KERNEL_BUILDER_CORPUS or ../shared/corpus)"
)]
fn every_compiled_corpus_cell_evaluates_with_the_default_package_set() {
    let t = tempfile::tempdir().unwrap();
    let mut dirs = Vec::new();
    for (name, expected) in crate::corpus::entries() {
        if expected["upstream"] == "rejected" {
            continue;
        }
        let dir = t.path().join(&name);
        crate::corpus::materialize_into(&name, &dir);
        let Ok(loaded) = kernel_builder::kernel::load(camino::Utf8Path::from_path(&dir).unwrap()) else {
            continue;
        };
        if loaded.config.generation < kernel_builder::config::Generation::V4 {
            continue; // Nix refuses legacy files with the migration command (nix.rs tests that).
        }
        let compiled = kernel_builder::matrix::data::matrix()
            .systems
            .iter()
            .flat_map(|s| {
                kernel_builder::matrix::cells(&loaded.config, s, kernel_builder::matrix::Scope::All)
            })
            .filter(|c| !c.noarch)
            .count();
        if compiled > 0 {
            dirs.push((name, dir.display().to_string(), compiled));
        }
    }
    let paths: Vec<String> = dirs.iter().map(|d| d.1.clone()).collect();
    let json = nix(repo(), &["eval", "--impure", "--json", "--expr", &default_set_cells_expr(&paths)]);
    let all: Value = serde_json::from_str(&json).unwrap();
    let (mut cells, mut unpinned) = (0, 0);
    for (name, _, expected_cells) in &dirs {
        let got = all[name].as_object().unwrap();
        assert_eq!(got.len(), *expected_cells, "{name}: compiled cells");
        for (variant, c) in got {
            assert!(c["drvPath"].as_str().unwrap().ends_with(".drv"), "{name} {variant}");
            if c["missing"].is_null() {
                let args: Vec<&str> =
                    c["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
                assert_eq!(args[0], "assemble", "{name} {variant}");
                let at = |flag: &str| args[args.iter().position(|a| *a == flag).unwrap() + 1];
                assert_eq!(at("--expect-variant"), variant);
                assert_eq!(at("--package-set"), "nixpkgs");
                // A cell built from pins needs only `Python.h`: the plain interpreter.
                let python =
                    if args.contains(&"--torch-wheel") { "-python3.13-stub" } else { "-python3.13-env-stub" };
                assert!(at("--python").ends_with(&format!("{python}/bin/python3")), "{args:?}");
                assert_eq!(args.contains(&"--hermetic"), !variant.contains("-metal-"), "{variant}");
            } else {
                unpinned += 1;
                // The wheel or a C++ dependency has no hash yet (metal-cpp: no source yet).
                let m = c["missing"].as_str().unwrap();
                assert!(
                    m.contains("has no hash pinned yet: run `nix-prefetch-url")
                        || m.contains("has no sha256 pinned in nix/torch-wheels.json yet: run `kernel-builder matrix pin --index https://download.pytorch.org/whl/")
                        || (m.contains("`metal-cpp`") && m.contains("has no pinned source yet")),
                    "{c}"
                );
            }
            cells += 1;
        }
    }
    eprintln!(
        "{} corpus kernels, {cells} compiled cells evaluated, {unpinned} unbuildable until a hash is pinned",
        dirs.len()
    );
    assert!(dirs.len() >= 40, "only {} compiled corpus kernels", dirs.len());
    assert!(cells >= 400, "{cells}");
}

/// The wiring of a representative set of relu's cells with the default package set: the pinned
/// torch and CUDA toolkit wheels of CPU and CUDA cells (nix/torch-wheels.json, fixed-output
/// downloads), the wheel other cells take from the package set, ROCm's clr, XPU's oneAPI,
/// Metal's impure Xcode access, the manylinux policy, and the build-time message of a cell
/// whose wheel is not pinned (for a pinned cell: the `matrix pin` command).
#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn relu_cells_are_wired_to_the_default_package_set() {
    let relu = repo().join("kernels/relu").display().to_string();
    let json = nix(repo(), &["eval", "--impure", "--json", "--expr", &default_set_cells_expr(&[relu])]);
    let all: Value = serde_json::from_str(&json).unwrap();
    let cells = all["relu"].as_object().unwrap();
    let wheels: Value =
        serde_json::from_slice(&fs::read(repo().join("nix/torch-wheels.json")).unwrap()).unwrap();
    let mut names: Vec<&str> = cells.keys().map(String::as_str).collect();
    names.sort();
    let expected: Vec<String> = kernel_builder::matrix::data::matrix()
        .systems
        .iter()
        .flat_map(|s| {
            let c = kernel_builder::kernel::load(camino::Utf8Path::new(REPO).join("kernels/relu").as_ref())
                .unwrap()
                .config;
            kernel_builder::matrix::cells(&c, s, kernel_builder::matrix::Scope::All)
        })
        .filter(|c| !c.noarch)
        .map(|c| c.name)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(names, expected.iter().map(String::as_str).collect::<Vec<_>>());

    // CUDA 13.0, torch 2.13, x86_64: torch and the CUDA toolkit from the pins (PyPI's wheels,
    // fixed-output downloads with the pinned sha256, unpacked by the orchestrator); the package
    // set gives only python (for `Python.h`), the compiler, CMake and Ninja.
    let c = &cells["torch213-cxx11-cu130-x86_64-linux"];
    assert!(c["wheel"].is_null(), "{c}");
    let pin = &wheels["wheels"]["2.13"]["cu130"]["x86_64-linux"];
    assert_eq!(c["pin"], serde_json::json!({ "url": pin["url"], "outputHash": pin["sha256"] }));
    assert_eq!(c["pin"]["outputHash"], "a3a9a21312872af8a26950b2c15680335a386a1f56ed03e780653d78b9607e9e");
    let args: Vec<&str> = c["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    let at = |flag: &str| args[args.iter().position(|a| *a == flag).unwrap() + 1];
    assert!(at("--torch-wheel").ends_with(&format!("-{}", pin["file"].as_str().unwrap())), "{args:?}");
    assert!(at("--torch-tree").ends_with("-unpacked"), "{args:?}");
    assert!(at("--cuda-tree").contains("-cuda-13.0-"), "{args:?}");
    assert!(c["env"].get("CUDACXX").is_none(), "{c}");
    assert!(c["env"]["CXX"].as_str().unwrap().ends_with("-manylinux_2_28-gcc-stub/bin/c++"), "{c}");
    let path = c["env"]["PATH"].as_str().unwrap();
    for tool in ["-cmake-stub/bin", "-ninja-stub/bin", "-manylinux_2_28-gcc-stub-bintools/bin"] {
        assert!(path.contains(tool), "{tool} not in {path}");
    }
    assert!(!path.contains("cuda"), "{path}");
    assert_eq!(c["manylinux"], "2_28");
    assert!(c["env"].get("__noChroot").is_none());
    // A CPU cell compiles against its release's CUDA wheel (`compile-against`), as natively:
    // one download serves both; no CUDA toolkit.
    let cpu = &cells["torch215-cxx11-cpu-x86_64-linux"];
    let pin = &wheels["wheels"]["2.15"]["cu132"]["x86_64-linux"];
    assert_eq!(cpu["pin"], serde_json::json!({ "url": pin["url"], "outputHash": pin["sha256"] }));
    assert!(!cpu["args"].as_array().unwrap().iter().any(|a| a == "--cuda-tree"), "{cpu}");
    // A cell whose pin has no sha256 yet (its wheel only on PyTorch's index) evaluates and fails
    // when built, naming the command that pins it.
    let u = &cells["torch214-cxx11-cu126-x86_64-linux"];
    let expected = "torch 2.14.0 (torch-2.14.0+cu126-cp313-cp313-manylinux_2_28_x86_64.whl) has no sha256 pinned in nix/torch-wheels.json yet: run `kernel-builder matrix pin --index https://download.pytorch.org/whl/cu126` where that index is reachable";
    assert_eq!(u["missing"], expected);
    assert_eq!(u["pin"], Value::Null);
    assert_eq!(u["args"][1], "fail");
    assert_eq!(u["args"][3], format!("kernel-builder: cell torch214-cxx11-cu126-x86_64-linux: {expected}"));
    // The Metal cell: the macOS CPU wheel from PyPI, the host's Xcode (impure, not hermetic).
    let m = &cells["torch213-metal-aarch64-darwin"];
    assert_eq!(m["wheel"]["sha256"], "33449899ce5496c1b84b4853179d94fd102028ae1407314d9fb956bb79e70d09");
    assert_eq!(m["env"]["__noChroot"], true);
    assert!(m["manylinux"].is_null());
    // ROCm and XPU: their toolkits on PATH and in the environment; the wheels are only on
    // download.pytorch.org, not pinned yet, so the cell fails when built, saying how to pin.
    let r = &cells["torch213-cxx11-rocm71-x86_64-linux"];
    assert_eq!(
        r["wheel"]["url"],
        "https://download.pytorch.org/whl/rocm71/torch-2.13.0%2Brocm71-cp313-cp313-manylinux_2_28_x86_64.whl"
    );
    assert_eq!(
        r["missing"],
        "the torch wheel https://download.pytorch.org/whl/rocm71/torch-2.13.0%2Brocm71-cp313-cp313-manylinux_2_28_x86_64.whl has no hash pinned yet: run `nix-prefetch-url 'https://download.pytorch.org/whl/rocm71/torch-2.13.0%2Brocm71-cp313-cp313-manylinux_2_28_x86_64.whl'` (or `nix store prefetch-file`) where download.pytorch.org is reachable and set its \"sha256\" in nix/torch-wheels.json (torch 2.13 / rocm71 / x86_64-linux)"
    );
    assert_eq!(r["args"][0], "nix-support");
    assert_eq!(r["args"][1], "fail");
    assert!(r["args"][3]
        .as_str()
        .unwrap()
        .starts_with("kernel-builder: cell torch213-cxx11-rocm71-x86_64-linux: the torch wheel"));
    let x = &cells["torch212-cxx11-xpu20253-x86_64-linux"];
    assert_eq!(
        x["wheel"]["url"],
        "https://download.pytorch.org/whl/xpu/torch-2.12.0%2Bxpu-cp313-cp313-linux_x86_64.whl"
    );
}

/// nix/torch-wheels.json has a wheel (URL at least) for every torch × framework × system of
/// the matrix's bundle (and every other compiled build set), and every hash given is a
/// well-formed base16 sha256.
#[test]
fn torch_wheels_cover_the_matrix_and_hashes_are_well_formed() {
    let wheels: Value =
        serde_json::from_slice(&fs::read(repo().join("nix/torch-wheels.json")).unwrap()).unwrap();
    assert_eq!(wheels["format"], "kernel-builder-torch-wheels-v1");
    let matrix: Value =
        serde_json::from_slice(&fs::read(repo().join("nix/build-matrix.json")).unwrap()).unwrap();
    let flat = |v: &str| v.split('.').take(2).collect::<String>();
    let mut checked = std::collections::BTreeSet::new();
    for set in matrix["build_sets"].as_array().unwrap() {
        let backend = set["backend"].as_str().unwrap();
        if backend == "tpu" {
            continue; // TPU cells are noarch: no compiled code, no wheel.
        }
        let version = set["version"].as_str().unwrap_or("");
        let framework = match backend {
            "cuda" => format!("cu{}", flat(version)),
            "rocm" => format!("rocm{}", flat(version)),
            "xpu" => "xpu".to_owned(),
            _ => "cpu".to_owned(),
        };
        let torch = set["torch"].as_str().unwrap();
        for system in set["systems"].as_array().unwrap() {
            let system = system.as_str().unwrap();
            let w = &wheels["wheels"][torch][&framework][system];
            assert!(w.is_object(), "no wheel for torch {torch} × {framework} × {system}");
            let url = w["url"].as_str().unwrap();
            assert!(url.starts_with("https://") && url.ends_with(".whl"), "{url}");
            assert!(url.contains(&format!("torch-{torch}.")), "{url} is not torch {torch}");
            assert!(url.contains("cp313-cp313"), "{url}");
            checked.insert((torch.to_owned(), framework.clone(), system.to_owned()));
        }
    }
    let mut hashes = 0;
    for (torch, fws) in wheels["wheels"].as_object().unwrap() {
        for (fw, systems) in fws.as_object().unwrap() {
            for (system, w) in systems.as_object().unwrap() {
                match &w["sha256"] {
                    Value::Null => {}
                    Value::String(h) => {
                        assert!(
                            h.len() == 64
                                && h.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
                            "{torch}/{fw}/{system}: {h}"
                        );
                        assert!(
                            w["url"].as_str().unwrap().starts_with("https://files.pythonhosted.org/"),
                            "a pinned hash comes from PyPI: {w}"
                        );
                        hashes += 1;
                    }
                    other => panic!("{torch}/{fw}/{system}: sha256 must be null or a string, not {other}"),
                }
            }
        }
    }
    // Nothing but the matrix's cells: every entry was reached above.
    let entries: usize = wheels["wheels"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|f| f.as_object().unwrap().values())
        .map(|s| s.as_object().unwrap().len())
        .sum();
    assert_eq!(checked.len(), entries, "torch-wheels.json has entries the matrix does not use");
    assert_eq!(hashes, 10);
}

/// A committed git repository with the root flake and kernels/relu, whose flake builds only
/// torch 2.15's CPU cell ([`CPU_CELL`], from its pins), as a bundle cell, so that
/// `nix flake check` and `build-and-copy --nix always` build it. `build_toml` edits build.toml.
pub(crate) fn relu_repo(build_toml: impl Fn(String) -> String) -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let r = t.path().join("repo");
    fs::create_dir_all(&r).unwrap();
    for f in ["flake.nix", "flake.lock", "Cargo.toml", "Cargo.lock"] {
        fs::copy(repo().join(f), r.join(f)).unwrap();
    }
    for e in walkdir::WalkDir::new(repo().join("nix")) {
        let e = e.unwrap();
        let d = r.join(e.path().strip_prefix(repo()).unwrap());
        if e.file_type().is_dir() {
            fs::create_dir_all(&d).unwrap();
        } else {
            fs::copy(e.path(), &d).unwrap();
        }
    }
    fs::create_dir_all(r.join("kernels")).unwrap();
    let k = copy_kernel("relu", &r.join("kernels"));
    let toml = fs::read_to_string(k.join("build.toml")).unwrap();
    fs::write(k.join("build.toml"), build_toml(toml)).unwrap();
    fs::write(
        k.join("flake.nix"),
        r#"{
  inputs.kernel-builder.url = "path:../..";
  outputs = { self, kernel-builder }:
    kernel-builder.lib.genKernelFlakeOutputs {
      inherit self;
      path = ./.;
      systems = [ "x86_64-linux" ];
      torchVersions = _: [ { torchVersion = "2.15"; cpu = true; systems = [ "x86_64-linux" ]; bundleBuild = true; } ];
    };
}
"#,
    )
    .unwrap();
    fs::write(r.join(".gitignore"), "build/\nresult\n").unwrap();
    git(&r, &["init", "-q", "."]);
    git(&r, &["add", "-A"]);
    git(&r, &["commit", "-q", "-m", "fixture"]);
    (t, r)
}

/// The pinned-wheel lookup is written once in Nix (`internalTorchPin`, read by both
/// `internalCellPins` and `nixpkgsToolchain`) and once natively (`Pins::torch`): for every
/// compiled torch cell of relu on every system, and for cells whose entries are missing (a torch,
/// a CUDA toolkit), Nix's `missing` is the native error (less its native-only `--find-links`
/// hint), and both take the same torch wheel.
#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn nix_and_native_find_the_same_pinned_wheels_and_say_the_same_when_one_is_missing() {
    use kernel_builder::toolchain::pins::pins;
    let relu =
        kernel_builder::kernel::load(camino::Utf8Path::new(REPO).join("kernels/relu").as_ref()).unwrap();
    let mut cells: Vec<(String, Option<String>, String)> = kernel_builder::matrix::data::matrix()
        .systems
        .iter()
        .flat_map(|s| kernel_builder::matrix::cells(&relu.config, s, kernel_builder::matrix::Scope::All))
        .filter(|c| c.kind == kernel_builder::matrix::CellKind::Torch && !c.noarch)
        .filter(|c| {
            matches!(c.backend, kernel_builder::config::Backend::Cpu | kernel_builder::config::Backend::Cuda)
        })
        .map(|c| {
            let cuda = (c.backend == kernel_builder::config::Backend::Cuda)
                .then(|| c.backend_version.clone().unwrap());
            (c.torch_version, cuda, c.system)
        })
        .collect();
    // No torch 2.99 entry; no CUDA 12.99 toolkit for a torch entry that exists.
    cells.push(("2.99".into(), None, "x86_64-linux".into()));
    cells.push(("2.99".into(), Some("13.0".into()), "x86_64-linux".into()));
    let mut wheels: Value =
        serde_json::from_slice(&fs::read(repo().join("nix/torch-wheels.json")).unwrap()).unwrap();
    let some_cu =
        wheels["wheels"]["2.15"].as_object().unwrap().keys().find(|k| k.starts_with("cu")).unwrap().clone();
    wheels["wheels"]["2.15"]["cu1299"] = wheels["wheels"]["2.15"][&some_cu].clone();
    cells.push(("2.15".into(), Some("12.99".into()), "x86_64-linux".into()));
    let patched: kernel_builder::toolchain::pins::Pins = serde_json::from_value(wheels.clone()).unwrap();
    let native: Vec<(Value, Value)> = cells
        .iter()
        .map(|(torch, cuda, system)| {
            let which = if torch == "2.15" && cuda.as_deref() == Some("12.99") { &patched } else { pins() };
            match which.torch(torch, cuda.as_deref(), system) {
                Err(e) => (Value::Null, Value::String(e.to_string())),
                Ok(p) => {
                    let unresolved = std::iter::once(p.torch)
                        .chain(p.toolkit.iter().copied())
                        .find_map(|w| w.resolved().err().map(|e| e.to_string()));
                    let missing = unresolved
                        .map(|e| Value::String(e.split(", or pass `--find-links").next().unwrap().to_owned()))
                        .unwrap_or(Value::Null);
                    (p.torch.file.clone().map(Value::String).unwrap_or(Value::Null), missing)
                }
            }
        })
        .collect();
    let t = tempfile::tempdir().unwrap();
    let wheels_file = t.path().join("torch-wheels.json");
    fs::write(&wheels_file, serde_json::to_vec(&wheels).unwrap()).unwrap();
    let nix_cells: Vec<String> = cells
        .iter()
        .map(|(torch, cuda, system)| {
            let (backend, version) = match cuda {
                Some(v) => ("cuda", format!("\"{v}\"")),
                None => ("cpu", "null".to_owned()),
            };
            format!(r#"{{ torch_version = "{torch}"; backend = "{backend}"; backend_version = {version}; system = "{system}"; kind = "torch"; }}"#)
        })
        .collect();
    let expr = format!(
        r#"let
  lib = import {REPO}/nix/lib {{ torchWheels = builtins.fromJSON (builtins.readFile {wheels}); }};
  tw = builtins.fromJSON (builtins.readFile {wheels});
in map (cell: let p = lib.internalTorchPin {{ torchWheels = tw; inherit cell; }}; in [ (if p.torch == null then null else p.torch.file) p.missing (lib.internalCellPins {{ inherit cell; orchestrator = "/none"; }}).missing ]) [ {cells} ]"#,
        wheels = wheels_file.display(),
        cells = nix_cells.join(" ")
    );
    let got: Vec<(Value, Value, Value)> =
        serde_json::from_str(&nix(repo(), &["eval", "--impure", "--json", "--expr", &expr])).unwrap();
    assert_eq!(got.len(), native.len());
    for ((cell, (file, missing)), (nix_file, nix_missing, cell_pins_missing)) in
        cells.iter().zip(&native).zip(&got)
    {
        assert_eq!(nix_missing, missing, "{cell:?}");
        assert_eq!(cell_pins_missing, missing, "{cell:?}: internalCellPins");
        if missing.is_null() {
            assert_eq!(nix_file, file, "{cell:?}");
        }
    }
    let missing: Vec<&Value> = native.iter().map(|(_, m)| m).filter(|m| !m.is_null()).collect();
    assert_eq!(
        missing[missing.len() - 3..],
        [
            "nix/torch-wheels.json has no torch wheel for torch 2.99 × cpu × x86_64-linux; add one there",
            "nix/torch-wheels.json has no torch wheel for torch 2.99 × cu130 × x86_64-linux; add one there",
            "nix/torch-wheels.json has no CUDA 12.99 toolkit wheels for x86_64-linux; add them under `cuda-toolkits`",
        ]
    );
}

/// `nix flake check` of a compiled kernel builds its cell and checks it: layout, metadata and
/// the ABI of its module, held to the package set's manylinux policy. The host package set
/// declares manylinux_2_34 (what Debian 12's g++ meets), so the check passes; declaring
/// manylinux_2_28 (the default package set's policy) fails it, naming the library and the
/// symbol.
#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn flake_check_runs_the_abi_check_on_compiled_cells() {
    let (_t, r) = relu_repo(|t| t);
    let kernel = r.join("kernels/relu");
    let tc = host_toolchain("2_34");
    let mut args: Vec<String> = ["flake", "check", "-L"].map(String::from).to_vec();
    args.extend(host_args(tc.path()));
    args.push(".".into());
    let (ok, _, log) = run("nix", &args.iter().map(String::as_str).collect::<Vec<_>>(), &kernel);
    assert!(ok, "flake check failed:\n{log}");
    let mut list: Vec<String> = ["eval", "--json", ".#checks.x86_64-linux", "--apply", "builtins.attrNames"]
        .map(String::from)
        .to_vec();
    list.extend(host_args(tc.path()));
    let names: Vec<String> =
        serde_json::from_str(&nix(&kernel, &list.iter().map(String::as_str).collect::<Vec<_>>())).unwrap();
    assert!(names.contains(&format!("cell-{CPU_CELL}")), "{names:?}");
    let mut check_log: Vec<String> =
        ["build", "--no-link", "--json", &format!(".#checks.x86_64-linux.cell-{CPU_CELL}")]
            .map(String::from)
            .to_vec();
    check_log.extend(host_args(tc.path()));
    let report = out_path(&nix(&kernel, &check_log.iter().map(String::as_str).collect::<Vec<_>>()));
    let text = fs::read_to_string(report).unwrap();
    assert!(
        text.contains(&format!("ABI of {CPU_CELL}: ok")) && text.contains("meets manylinux_2_34"),
        "{text}"
    );

    let strict = host_toolchain("2_28");
    let mut args: Vec<String> = ["flake", "check", "-L"].map(String::from).to_vec();
    args.extend(host_args(strict.path()));
    args.push(".".into());
    let (ok, _, log) = run("nix", &args.iter().map(String::as_str).collect::<Vec<_>>(), &kernel);
    assert!(!ok, "flake check passed under manylinux_2_28");
    assert!(log.contains(&format!("cell `{CPU_CELL}`")) && log.contains("fails the ABI check"), "{log}");
    assert!(log.contains("__libc_single_threaded@GLIBC_2.32"), "{log}");
}

/// `build-and-copy --nix always` builds a compiled kernel's bundle through its Nix cells and
/// swaps the variant into build/, the bytes of the cell; other entries of build/ stay.
#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn build_and_copy_through_nix_builds_compiled_cells() {
    let _heavy = crate::util::heavy_build();
    let (_t, r) = relu_repo(|t| t);
    let kernel = r.join("kernels/relu");
    fs::create_dir_all(kernel.join("build/torch-mine")).unwrap();
    fs::write(kernel.join("build/torch-mine/keep.py"), "mine").unwrap();
    let tc = host_toolchain("2_34");
    let mut cmd = crate::util::kb();
    cmd.env(kernel_builder::nixdrv::ORCHESTRATOR_ENV, orchestrator());
    cmd.args(["build-and-copy", kernel.to_str().unwrap(), "--nix", "always", "--"]);
    cmd.args(host_args(tc.path()));
    cmd.assert().success();
    let mut top: Vec<String> = fs::read_dir(kernel.join("build"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    top.sort();
    assert_eq!(top, ["hashes.json", "torch-mine", CPU_CELL]);
    let mut args: Vec<String> =
        ["build", "--no-link", "--json", &format!(".#{CPU_CELL}")].map(String::from).to_vec();
    args.extend(host_args(tc.path()));
    let cell = out_path(&nix(&kernel, &args.iter().map(String::as_str).collect::<Vec<_>>()));
    assert_eq!(tree(&kernel.join("build").join(CPU_CELL)), tree(&cell.join(CPU_CELL)));
}

/// A bad build.toml in a compiled kernel fails its Nix cell with the orchestrator's own
/// diagnostics (the text `check-config` prints: file, line, column, the rule), not a Nix
/// stack trace.
#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn bad_build_toml_fails_a_compiled_cell_with_check_config_diagnostics() {
    let (_t, r) = relu_repo(|t| {
        t.replace("cuda-capabilities = [\"9.0\"]", "cuda-capabilities = [\"9.0\"]\ncuda-flags = 3")
    });
    let kernel = r.join("kernels/relu");
    let (ok, _, native) = run(
        orchestrator().join("bin/kernel-builder").to_str().unwrap(),
        &["check-config", kernel.to_str().unwrap()],
        &r,
    );
    assert!(!ok);
    let tc = host_toolchain("2_34");
    let mut args: Vec<String> =
        ["build", "--no-link", "-L", &format!(".#{CPU_CELL}")].map(String::from).to_vec();
    args.extend(host_args(tc.path()));
    let (ok, _, log) = run("nix", &args.iter().map(String::as_str).collect::<Vec<_>>(), &kernel);
    assert!(!ok, "the cell built");
    // The diagnostic's own text (the rule, its position, the source line, the fix) appears in
    // the cell's log; only the glyphs of the frame differ (the sandbox is not a terminal).
    let rule =
        native.lines().find(|l| l.contains("cuda-flags` must be")).unwrap_or_else(|| panic!("{native}"));
    let rule = &rule[rule.find('`').unwrap()..];
    for expected in
        [rule, "build.toml:29:14]", "29 │ cuda-flags = 3", "help: write it as", "1 error and 0 warnings"]
    {
        let expected =
            if native.contains(expected) { expected.to_owned() } else { expected.replace('│', "|") };
        assert!(native.contains(&expected), "check-config does not print {expected:?}:\n{native}");
        assert!(
            log.contains(expected.replace('|', "│").as_str()),
            "--- nix\n{log}\n--- check-config\n{native}"
        );
    }
    assert!(!log.contains("stack trace") && !log.contains("while evaluating"), "{log}");
}

/// nix/cpp-deps.json names the same C++ dependency sources as the orchestrator's table
/// (src/codegen/deps.rs: repository, tag, commit, environment variable), and every hash given
/// is a well-formed base32/base16 sha256.
#[test]
fn cpp_deps_json_equals_the_orchestrators_pins() {
    use kernel_builder::codegen::deps;
    let json: Value = serde_json::from_slice(&fs::read(repo().join("nix/cpp-deps.json")).unwrap()).unwrap();
    assert_eq!(json["format"], "kernel-builder-cpp-deps-v1");
    let nix = json["deps"].as_object().unwrap();
    let mut names: Vec<&str> = nix.keys().map(String::as_str).collect();
    names.sort();
    let mut pinned: Vec<&str> = deps::PINNED.iter().map(|p| p.name).collect();
    pinned.sort();
    assert_eq!(names, pinned);
    for p in deps::PINNED {
        let d = &nix[p.name];
        assert_eq!(d["url"], p.url, "{}", p.name);
        assert_eq!(d["tag"], p.tag, "{}", p.name);
        assert_eq!(d["commit"].as_str(), p.commit, "{}", p.name);
        let dep = kernel_builder::config::CppDependency::from_name(p.name).unwrap();
        assert_eq!(d["env"], deps::env_var(dep), "{}", p.name);
        match (p.commit, p.url.strip_prefix("https://github.com/")) {
            (Some(c), Some(_)) => assert_eq!(d["archive"], format!("{}/archive/{c}.tar.gz", p.url)),
            _ => assert!(d["archive"].is_null(), "{}", p.name),
        }
        match &d["sha256"] {
            Value::Null => {}
            Value::String(h) => assert!(
                (h.len() == 52 && h.bytes().all(|b| b"0123456789abcdfghijklmnpqrsvwxyz".contains(&b)))
                    || (h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit())),
                "{}: {h}",
                p.name
            ),
            other => panic!("{}: sha256 must be null or a string, not {other}", p.name),
        }
    }
}

/// A cell whose kernels depend on cutlass gets it as a fixed-output fetch of the pinned commit
/// (KERNEL_BUILDER_DEP_CUTLASS_3_8 in its environment) once nix/cpp-deps.json has its hash;
/// until then it evaluates and fails when built, naming the command that gives the hash.
#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn cpp_dependencies_reach_the_cell_as_pinned_fetches() {
    let t = tempfile::tempdir().unwrap();
    let k = t.path().join("k");
    fs::create_dir_all(k.join("torch-ext/k")).unwrap();
    fs::write(k.join("torch-ext/k/__init__.py"), "").unwrap();
    fs::write(k.join("g.cu"), "").unwrap();
    fs::write(
        k.join("build.toml"),
        "[general]\nname = \"k\"\nversion = 1\nedition = 5\nlicense = \"mit\"\nbackends = [\"cuda\"]\n\n[torch]\n\n[kernel.g]\nbackend = \"cuda\"\ndepends = [\"torch\", \"cutlass_3_8\"]\nsrc = [\"g.cu\"]\n",
    )
    .unwrap();
    let cell = "torch213-cxx11-cu130-x86_64-linux";
    let eval = |cpp_deps: &str| -> Value {
        let expr = format!(
            r#"let
  lib = import {REPO}/nix/lib {{ }};
  stub = (builtins.getFlake "{stub}").legacyPackages.x86_64-linux;
  cppDeps = {cpp_deps};
  out = lib.genKernelFlakeOutputs {{ path = /. + "{k}"; kernelBuilder = _: /. + "{orch}"; mkShell = _: _: {{ }};
    systems = [ "x86_64-linux" ];
    toolchainFor = cell: lib.nixpkgsToolchain {{ pkgs = stub; inherit cppDeps; }} cell; }};
  d = out.packages.x86_64-linux.{cell};
in {{ args = d.drvAttrs.args; dep = d.drvAttrs.KERNEL_BUILDER_DEP_CUTLASS_3_8 or null; }}"#,
            stub = stub_nixpkgs(),
            k = k.display(),
            orch = orchestrator().display()
        );
        serde_json::from_str(&nix(repo(), &["eval", "--impure", "--json", "--expr", &expr])).unwrap()
    };
    let pins = format!("builtins.fromJSON (builtins.readFile {REPO}/nix/cpp-deps.json)");
    let unpinned = eval(&pins);
    assert_eq!(unpinned["args"][1], "fail", "{unpinned}");
    assert_eq!(
        unpinned["args"][3],
        format!("kernel-builder: cell {cell}: the C++ dependency `cutlass_3_8` (https://github.com/NVIDIA/cutlass v3.8.0, commit afa1772203677c5118fcd82537a9c8fefbcc7008) has no hash pinned yet: run `nix-prefetch-url --unpack 'https://github.com/NVIDIA/cutlass/archive/afa1772203677c5118fcd82537a9c8fefbcc7008.tar.gz'` where github.com is reachable and set its \"sha256\" in nix/cpp-deps.json")
    );
    // With a hash (a stand-in: the stub fetches nothing), the fetch is wired in.
    let with_hash = eval(&format!(
        "let p = {pins}; in p // {{ deps = p.deps // {{ cutlass_3_8 = p.deps.cutlass_3_8 // {{ sha256 = \"{}\"; }}; }}; }}",
        "0".repeat(52)
    ));
    assert_eq!(with_hash["args"][0], "assemble", "{with_hash}");
    assert!(with_hash["dep"].as_str().unwrap().ends_with("-cutlass_3_8-source"), "{with_hash}");
}
