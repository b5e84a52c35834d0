//! Bundle cells built from pinned wheels (`build-and-copy --nix never` without `--python`):
//! kernels/relu's CPU and CUDA cells of torch 2.14 and 2.15 from PyPI's wheels, the cells whose
//! wheels are only on PyTorch's index named with the command that pins them, the same cells
//! offline from a wheelhouse (`--find-links`), and a kernel whose CUDA bounds exclude PyPI's
//! flavours; `matrix pin` against a local PEP 691 index.
//!
//! One toolchain cache serves the whole test run (`$CARGO_TARGET_TMPDIR/toolchain-cache`, kept
//! in `target/`), so the wheels (about 1.3 GB) are downloaded once per machine, not per test.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::cellcache::{copy_kernel, Out};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The toolchain cache every test of the run shares.
pub(crate) fn shared_toolchain_cache() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("toolchain-cache")
}

/// A test's own directory, beside the shared toolchain cache: on the disk the suite's target
/// directory is on, not in `/tmp` (which may be a small, memory-backed file system on a CI
/// machine, and a wheelhouse of hard links to the shared cache needs one file system). A test
/// here holds up to a whole toolchain cache of its own (about 9 GB).
fn scratch() -> tempfile::TempDir {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("pinned-tests");
    fs::create_dir_all(&dir).unwrap();
    tempfile::tempdir_in(dir).unwrap()
}

/// `kernel-builder ARGS` in `dir`, with the cell cache `cells` and the toolchain cache
/// `toolchains`.
fn kb(dir: &Path, cells: &Path, toolchains: &Path, args: &[&str]) -> Out {
    crate::cellcache::kb(dir, cells, &[("KERNEL_BUILDER_TOOLCHAIN_CACHE_DIR", toolchains)], args)
}

const BUILT: [&str; 4] = [
    "torch214-cxx11-cpu-x86_64-linux",
    "torch214-cxx11-cu130-x86_64-linux",
    "torch215-cxx11-cpu-x86_64-linux",
    "torch215-cxx11-cu132-x86_64-linux",
];

/// The note for a bundle cell whose torch wheel is only on PyTorch's index.
fn unpinned_note(variant: &str, flavour: &str) -> String {
    format!(
        "note: `{variant}` is not built: torch 2.14.0 (torch-2.14.0+{flavour}-cp313-cp313-manylinux_2_28_x86_64.whl) has no sha256 pinned in nix/torch-wheels.json yet: run `kernel-builder matrix pin --index https://download.pytorch.org/whl/{flavour}` where that index is reachable, or pass `--find-links DIR` with the wheel and pin its hash there"
    )
}

/// The verb and variant of each line on stdout (`built torch214-…`).
fn verbs(out: &Out) -> Vec<String> {
    out.stdout.lines().map(|l| l.split(" (").next().unwrap().to_owned()).collect()
}

/// `cuobjdump --list-elf` of a CUDA variant's module: the ELF names, e.g.
/// `_relu_cuda_….abi3.1.sm_90.cubin` → `sm_90`.
fn sass(variant_dir: &Path) -> Vec<String> {
    let cuobjdump = fs::read_dir(repo().join(".venv/lib"))
        .ok()
        .and_then(|mut d| d.next())
        .map(|py| py.unwrap().path().join("site-packages/nvidia/cu13/bin/cuobjdump"))
        .filter(|p| p.is_file())
        .expect("cuobjdump from the venv's nvidia-cuda-cuobjdump (scripts/setup-venv.sh)");
    let so = fs::read_dir(variant_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_str().unwrap().ends_with(".abi3.so"))
        .unwrap();
    let o = Command::new(cuobjdump).arg("--list-elf").arg(&so).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap().lines().map(|l| l.rsplit('.').nth(1).unwrap().to_owned()).collect()
}

fn nar(p: &Path) -> String {
    kernel_builder::hash::nar_hash_sri(p).unwrap()
}

/// Every pinned wheel of the built cells, in a wheelhouse made from the shared cache: file
/// name → hard link of `wheels/<sha256>.whl`.
fn wheelhouse(dest: &Path) {
    assert!(wheelhouse_if_cached(dest), "the shared toolchain cache lacks a wheel of the four cells");
}

/// [`wheelhouse`], when the shared toolchain cache holds every wheel of the four cells; else
/// `false`, with what it had linked.
fn wheelhouse_if_cached(dest: &Path) -> bool {
    use kernel_builder::toolchain::pins::pins;
    fs::create_dir_all(dest).unwrap();
    let cells = [("2.14", None), ("2.14", Some("13.0")), ("2.15", None), ("2.15", Some("13.2"))];
    for (torch, cuda) in cells {
        let c = pins().cell(torch, cuda, "x86_64-linux").unwrap();
        for w in std::iter::once(c.torch).chain(c.toolkit).chain(c.tools).chain([c.compile_cache]) {
            let r = w.resolved().unwrap();
            let to = dest.join(&r.file);
            let from = shared_toolchain_cache().join(format!("wheels/{}.whl", r.sha256));
            if !from.is_file() {
                return false;
            }
            if !to.exists() {
                fs::hard_link(from, to).unwrap();
            }
        }
    }
    true
}

/// kernels/relu without --python: the four bundle cells PyPI's wheels give build (CUDA compile
/// only: exactly the one SASS its `cuda-capabilities` asks for), the two only on PyTorch's
/// index are named with the command that pins them; a second build reuses every cell; with no
/// network (`--offline`, an empty toolchain cache) a wheelhouse builds the same bytes.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn relu_bundle_cells_build_from_pinned_wheels_online_and_from_a_wheelhouse() {
    let _heavy = crate::util::heavy_build();
    let t = scratch();
    let relu = t.path().join("relu");
    copy_kernel("relu", &relu);
    let cells = t.path().join("cells");
    let started = std::time::Instant::now();
    let out =
        kb(&relu, &cells, &shared_toolchain_cache(), &["build-and-copy", "--nix", "never", "--jobs", "2"]);
    eprintln!("pinned relu bundle, first build: {:.1} s", started.elapsed().as_secs_f64());
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(verbs(&out), BUILT.map(|v| format!("built {v}")));
    let notes: Vec<&str> = out.stderr.lines().filter(|l| l.starts_with("note: ")).collect();
    // ROCm and XPU cells are named one by one: no toolchain of theirs is pinned yet.
    let rocm = |v: &str| {
        format!("note: `{v}` is not built: native `rocm` builds need hipcc and a ROCm torch; this version builds cpu and cuda cells natively (generate the project with `kernel-builder create-pyproject`)")
    };
    assert_eq!(
        notes,
        [
            // Said before anything compiles: how much CUDA work the build holds.
            "note: building 4 cells; torch214-cxx11-cu130-x86_64-linux compiles 1 CUDA file for 1 capability; torch215-cxx11-cu132-x86_64-linux compiles 1 CUDA file for 1 capability",
            unpinned_note("torch214-cxx11-cu126-x86_64-linux", "cu126").as_str(),
            unpinned_note("torch214-cxx11-cu132-x86_64-linux", "cu132").as_str(),
            "note: the `metal` variant is not built: native `metal` builds need xcrun metal on macOS; this version builds cpu and cuda cells natively (generate the project with `kernel-builder create-pyproject`)",
            &rocm("torch213-cxx11-rocm71-x86_64-linux"),
            &rocm("torch213-cxx11-rocm72-x86_64-linux"),
            &rocm("torch214-cxx11-rocm72-x86_64-linux"),
            "note: `torch213-cxx11-xpu20260-x86_64-linux` is not built: native `xpu` builds need icpx and an XPU torch; this version builds cpu and cuda cells natively (generate the project with `kernel-builder create-pyproject`)",
        ]
    );
    let build = relu.join("build");
    let mut toolchains = BTreeMap::new();
    for v in BUILT {
        let meta: serde_json::Value =
            serde_json::from_slice(&fs::read(build.join(v).join("metadata.json")).unwrap()).unwrap();
        assert_eq!(meta["build"]["native"], true, "{v}");
        assert_eq!(meta["build"]["hermetic"], false, "{v}");
        let tc = &meta["build"]["toolchain"];
        assert_eq!(tc["cmake"], "cmake version 4.4.5", "{v}");
        toolchains
            .insert(v, (tc["torch"].as_str().unwrap().to_owned(), tc["nvcc"].as_str().map(str::to_owned)));
    }
    // A CPU cell compiles against the CUDA wheel of its release (one download for both).
    let s = |x: &str| x.to_owned();
    assert_eq!(
        toolchains.into_values().collect::<Vec<_>>(),
        [
            (s("2.14.0+cu130"), None),
            (s("2.14.0+cu130"), Some(s("13.0.88"))),
            (s("2.15.0+cu132"), None),
            (s("2.15.0+cu132"), Some(s("13.2.86"))),
        ]
    );
    for v in ["torch214-cxx11-cu130-x86_64-linux", "torch215-cxx11-cu132-x86_64-linux"] {
        assert_eq!(sass(&build.join(v)), ["sm_90"], "{v}");
    }
    let hashes: Vec<String> = BUILT.iter().map(|v| nar(&build.join(v))).collect();

    let started = std::time::Instant::now();
    let again = kb(&relu, &cells, &shared_toolchain_cache(), &["build-and-copy", "--nix", "never"]);
    let warm = started.elapsed().as_secs_f64();
    eprintln!("pinned relu bundle, second build: {warm:.1} s");
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(verbs(&again), BUILT.map(|v| format!("reused {v}")));
    // `--json` lists the cells not built, each with the kind of what stands in the way.
    let json = kb(&relu, &cells, &shared_toolchain_cache(), &["build-and-copy", "--nix", "never", "--json"]);
    assert_eq!(json.code, 0, "{}", json.stderr);
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let skipped: Vec<(&str, &str, &str)> = doc["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["backend"].as_str().unwrap(),
                s["variant"].as_str().unwrap_or("-"),
                s["kind"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        skipped,
        [
            ("cuda", "torch214-cxx11-cu126-x86_64-linux", "pins"),
            ("cuda", "torch214-cxx11-cu132-x86_64-linux", "pins"),
            ("metal", "-", "not-native"),
            ("rocm", "torch213-cxx11-rocm71-x86_64-linux", "not-native"),
            ("rocm", "torch213-cxx11-rocm72-x86_64-linux", "not-native"),
            ("rocm", "torch214-cxx11-rocm72-x86_64-linux", "not-native"),
            ("xpu", "torch213-cxx11-xpu20260-x86_64-linux", "not-native"),
        ]
    );
    // `native-cache` shows the toolchain cache: each wheel by its pinned file name.
    let show = kb(&relu, &cells, &shared_toolchain_cache(), &["native-cache"]);
    assert_eq!(show.code, 0, "{}", show.stderr);
    let torch215 = "torch-2.15.0-cp313-cp313-manylinux_2_28_x86_64.whl";
    assert!(
        show.stdout.lines().any(|l| l.starts_with("  241fea2b") && l.ends_with(torch215)),
        "{}",
        show.stdout
    );
    assert!(show.stdout.contains(" toolchain entries, "), "{}", show.stdout);
    // The NAR hashes nix/torch-wheels.json records for these four toolchains (Nix's
    // fixed-output unpacked trees) are what this kernel-builder unpacks: recording them again
    // from the trees just built changes nothing.
    let pins_copy = t.path().join("torch-wheels.json");
    fs::copy(repo().join("nix/torch-wheels.json"), &pins_copy).unwrap();
    let recorded = kb(
        &relu,
        &cells,
        &shared_toolchain_cache(),
        &["matrix", "pin-unpacked", "--pins", pins_copy.to_str().unwrap()],
    );
    assert_eq!(recorded.code, 0, "{}", recorded.stderr);
    assert!(recorded.stdout.contains(": 0 recorded, 4 unchanged, "), "{}", recorded.stdout);
    assert_eq!(fs::read(&pins_copy).unwrap(), fs::read(repo().join("nix/torch-wheels.json")).unwrap());

    // No network: an empty toolchain cache, `--offline`, the wheels in a wheelhouse. The
    // torch 2.15 cells (CPU and CUDA: every kind of wheel) only, so that this second toolchain
    // cache holds one release (about 4 GB), not all (about 9 GB): the suite must fit a CI disk.
    let house = t.path().join("house");
    wheelhouse(&house);
    let relu2 = t.path().join("relu2");
    copy_kernel("relu", &relu2);
    let toolchains2 = t.path().join("toolchains2");
    let offline = kb(
        &relu2,
        &t.path().join("cells2"),
        &toolchains2,
        &[
            "build-and-copy",
            "--nix",
            "never",
            "--jobs",
            "2",
            "--offline",
            "--find-links",
            house.to_str().unwrap(),
            "--variant",
            BUILT[2],
            "--variant",
            BUILT[3],
        ],
    );
    assert_eq!(offline.code, 0, "{}", offline.stderr);
    assert_eq!(verbs(&offline), BUILT[2..].iter().map(|v| format!("built {v}")).collect::<Vec<_>>());
    let offline_hashes: Vec<String> = BUILT[2..].iter().map(|v| nar(&relu2.join("build").join(v))).collect();
    assert_eq!(offline_hashes, hashes[2..], "the wheelhouse build has the online build's bytes");
    // At once (its trees are read-only, which seal::remove handles): its gigabytes are not held
    // while the test goes on.
    kernel_builder::toolchain::seal::remove(camino::Utf8Path::from_path(&toolchains2).unwrap()).unwrap();
    assert!(!toolchains2.exists());

    // Offline without the wheels: every pinned cell is named, nothing is built or downloaded.
    let relu3 = t.path().join("relu3");
    copy_kernel("relu", &relu3);
    let none = kb(
        &relu3,
        &t.path().join("cells3"),
        &t.path().join("toolchains3"),
        &["build-and-copy", "--nix", "never", "--offline", "--variant", BUILT[0]],
    );
    assert_eq!(none.code, 1, "{}", none.stderr);
    assert!(
        none.stderr.contains(&format!(
            "cannot build `{}` natively: torch-2.14.0-cp313-cp313-manylinux_2_28_x86_64.whl is not in the toolchain cache and --offline forbids downloading it; put it in a --find-links directory, or build once without --offline",
            BUILT[0]
        )),
        "{}",
        none.stderr
    );
    assert!(!relu3.join("build").exists());
}

/// A kernel whose `[general.cuda] maxver` is 12.9 keeps only the cu126 cell of the bundle,
/// whose torch wheel is on PyTorch's index only: asked for, it is named with that wheel and
/// the command that pins it, before anything is downloaded.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn a_kernel_below_pypis_cuda_names_its_cu126_cell_and_the_wheel_that_would_build_it() {
    let t = scratch();
    let k = t.path().join("relu");
    copy_kernel("relu", &k);
    let toml = fs::read_to_string(k.join("build.toml")).unwrap();
    let toml =
        toml.replace("python-depends = []\n", "python-depends = []\n\n[general.cuda]\nmaxver = \"12.9\"\n");
    fs::write(k.join("build.toml"), toml).unwrap();
    let toolchains = t.path().join("toolchains");
    let variant = "torch214-cxx11-cu126-x86_64-linux";
    let out = kb(
        &k,
        &t.path().join("cells"),
        &toolchains,
        &["build-and-copy", "--nix", "never", "--variant", variant],
    );
    assert_eq!(out.code, 1, "{}", out.stderr);
    let why = unpinned_note(variant, "cu126");
    let why = why.strip_prefix(&format!("note: `{variant}` is not built: ")).unwrap();
    assert_eq!(out.stderr, format!("error: cannot build `{variant}` natively: {why}\n"));
    let list = kb(&k, &t.path().join("cells"), &toolchains, &["list-variants", "."]);
    let cuda: Vec<&str> = list.stdout.lines().filter(|l| l.contains("-cu")).collect();
    assert_eq!(cuda, [variant], "the kernel's only CUDA bundle cell");
    // Nothing was downloaded for it.
    let wheels = fs::read_dir(toolchains.join("wheels")).map(|d| d.count()).unwrap_or(0);
    assert_eq!(wheels, 0);
}

/// What a CUDA kernel may include beside torch's own CUDA headers (which include cuBLAS,
/// cuSPARSE and cuSOLVER's): every library of the pinned toolkits, used so that the compiler
/// and the linker see each one.
const CUDA_LIBRARY_USE: &str = r#"
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cufft.h>
#include <curand_kernel.h>
#include <cusolverDn.h>
#include <cusparse.h>
#include <nvtx3/nvToolsExt.h>

// Not registered as an op: it only has to compile and link against torch's CUDA library.
cublasHandle_t pinned_toolkit_blas_handle() {
  nvtxRangePushA("blas handle");
  cublasHandle_t h = at::cuda::getCurrentCUDABlasHandle();
  nvtxRangePop();
  return h;
}

__global__ void pinned_toolkit_random(float *out, unsigned long long seed) {
  curandStatePhilox4_32_10_t state;
  curand_init(seed, threadIdx.x, 0, &state);
  out[threadIdx.x] = curand_uniform(&state);
}

cufftType pinned_toolkit_fft_type() { return CUFFT_C2C; }
"#;

/// `init --template compiled` for CUDA, built without `--python` (issue 31: both pinned CUDA
/// cells failed with `cusparse.h: No such file or directory` from `ATen/cuda/CUDAContext.h`):
/// the template, with a source that includes every library header of the toolkit, builds its
/// two PyPI CUDA cells from the pins alone, each with the SASS it asks for.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn the_compiled_template_and_cuda_library_headers_build_from_the_pins_alone() {
    let _heavy = crate::util::heavy_build();
    let t = scratch();
    let cells = t.path().join("cells");
    let init = kb(
        t.path(),
        &cells,
        &shared_toolchain_cache(),
        &[
            "init",
            "--template",
            "compiled",
            "--name",
            "myorg/cuda-libs",
            "--backends",
            "cuda",
            "--",
            "cuda-libs",
        ],
    );
    assert_eq!(init.code, 0, "{}", init.stderr);
    let k = t.path().join("cuda-libs");
    let cu = k.join("cuda_libs_cuda/cuda_libs.cu");
    let source = fs::read_to_string(&cu).unwrap();
    assert!(source.contains("#include <ATen/cuda/CUDAContext.h>"), "{source}");
    fs::write(&cu, format!("{source}{CUDA_LIBRARY_USE}")).unwrap();
    // One capability: the test is about headers and libraries, not about compile time.
    let toml = fs::read_to_string(k.join("build.toml")).unwrap();
    let toml = toml.replace(r#"cuda-capabilities = ["8.0", "9.0+PTX"]"#, r#"cuda-capabilities = ["9.0"]"#);
    fs::write(k.join("build.toml"), toml).unwrap();

    let out = kb(&k, &cells, &shared_toolchain_cache(), &["build-and-copy", "--nix", "never", "--jobs", "2"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let built = ["torch214-cxx11-cu130-x86_64-linux", "torch215-cxx11-cu132-x86_64-linux"];
    assert_eq!(verbs(&out), built.map(|v| format!("built {v}")));
    for (v, nvcc) in built.iter().zip(["13.0.88", "13.2.86"]) {
        let dir = k.join("build").join(v);
        let meta: serde_json::Value =
            serde_json::from_slice(&fs::read(dir.join("metadata.json")).unwrap()).unwrap();
        assert_eq!(meta["build"]["toolchain"]["nvcc"], nvcc, "{v}");
        assert_eq!(sass(&dir), ["sm_90"], "{v}");
    }
}

/// A PEP 691 index on 127.0.0.1 serving the wheels of a directory (tests/index_server).
struct Index {
    child: Child,
    url: String,
}

impl Index {
    fn start(dir: &Path) -> Index {
        Index::start_logging(dir, Path::new(""))
    }

    /// With each file request appended to `log` (none when empty).
    fn start_logging(dir: &Path, log: &Path) -> Index {
        let mut child = Command::new("python3")
            .arg(repo().join("tests/index_server/server.py"))
            .arg(dir)
            .env("INDEX_LOG", log)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs the index server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port = line.trim().strip_prefix("PORT ").unwrap().to_owned();
        Index { child, url: format!("http://127.0.0.1:{port}/simple") }
    }
}

impl Drop for Index {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `matrix pin --index URL` resolves the file, URL and sha256 of that index's entries for
/// their system, leaves the others alone, writes the file in its stable order, and a second
/// run changes nothing; an entry the index lacks is named and the exit status is 1.
#[test]
fn matrix_pin_resolves_entries_from_a_local_index_and_is_stable() {
    let t = scratch();
    let wheels = t.path().join("wheels/tool");
    fs::create_dir_all(&wheels).unwrap();
    for (name, bytes) in [
        ("tool-1.0-py3-none-manylinux_2_17_x86_64.whl", &b"x86"[..]),
        ("tool-1.0-py3-none-manylinux_2_17_aarch64.whl", b"arm"),
        ("tool-0.9-py3-none-manylinux_2_17_x86_64.whl", b"old"),
    ] {
        fs::write(wheels.join(name), bytes).unwrap();
    }
    let index = Index::start(&t.path().join("wheels"));
    let mut pins: serde_json::Value =
        serde_json::from_str(kernel_builder::toolchain::pins::PINS_JSON).unwrap();
    let entry = |v: &str| serde_json::json!({"project": "tool", "version": v, "index": index.url, "file": null, "url": null, "sha256": null});
    pins["build-tools"]["x86_64-linux"].as_array_mut().unwrap().push(entry("1.0"));
    pins["build-tools"]["aarch64-linux"].as_array_mut().unwrap().push(entry("1.0"));
    pins["build-tools"]["aarch64-linux"].as_array_mut().unwrap().push(entry("2.0"));
    let file = t.path().join("pins.json");
    fs::write(&file, serde_json::to_string(&pins).unwrap()).unwrap();
    let pin = || {
        kb(
            t.path(),
            t.path(),
            t.path(),
            &["matrix", "pin", "--index", &index.url, "--pins", file.to_str().unwrap()],
        )
    };
    // Every committed entry (torch wheels, CUDA toolkits, build tools) names another index.
    let committed = {
        let p = kernel_builder::toolchain::pins::pins();
        let torch: usize = p.wheels.values().flat_map(|f| f.values()).map(|s| s.len()).sum();
        let toolkits: usize = p.cuda_toolkits.values().flat_map(|s| s.values()).map(|w| w.len()).sum();
        torch + toolkits + p.build_tools.values().map(|w| w.len()).sum::<usize>()
    };
    let out = pin();
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        format!("pinned tool 1.0 (aarch64-linux)\npinned tool 1.0 (x86_64-linux)\n{}: 2 changed, 1 not resolved, {committed} of other indexes left alone\n", file.display())
    );
    assert_eq!(
        out.stderr,
        "not resolved: tool 2.0 (aarch64-linux): the index has no such wheel for aarch64-linux\n"
    );
    let written: serde_json::Value = serde_json::from_slice(&fs::read(&file).unwrap()).unwrap();
    let x86 = written["build-tools"]["x86_64-linux"].as_array().unwrap().last().unwrap().clone();
    let sha = |b: &[u8]| {
        use sha2::Digest;
        sha2::Sha256::digest(b).iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    assert_eq!(
        x86,
        serde_json::json!({
            "file": "tool-1.0-py3-none-manylinux_2_17_x86_64.whl",
            "index": index.url,
            "project": "tool",
            "sha256": sha(b"x86"),
            "url": format!("{}/tool/tool-1.0-py3-none-manylinux_2_17_x86_64.whl", index.url),
            "version": "1.0",
        })
    );
    // Everything else is as committed, and the text is the stable form.
    let mut rest = written.clone();
    rest["build-tools"]["x86_64-linux"].as_array_mut().unwrap().pop();
    let arm = rest["build-tools"]["aarch64-linux"].as_array_mut().unwrap();
    arm.truncate(arm.len() - 2);
    assert_eq!(
        rest,
        serde_json::from_str::<serde_json::Value>(kernel_builder::toolchain::pins::PINS_JSON).unwrap()
    );
    let text = fs::read_to_string(&file).unwrap();
    let again = pin();
    assert_eq!(again.code, 1);
    assert!(
        again.stdout.starts_with(&format!("{}: 0 changed, 1 not resolved", file.display())),
        "{}",
        again.stdout
    );
    assert_eq!(fs::read_to_string(&file).unwrap(), text, "a second refresh changes nothing");
}

/// The toolchain cache resumes a partial download with `Range` and keeps the wheel only when
/// the whole file has the pinned sha256: a partial file of other bytes fails the check, is
/// removed, and the next fetch downloads the wheel whole.
#[test]
fn a_partial_download_resumes_and_a_wrong_one_is_never_used() {
    use kernel_builder::toolchain::pins::ResolvedWheel;
    use kernel_builder::toolchain::store::{FetchOptions, Store};
    use sha2::Digest;
    let t = scratch();
    let file = "tool-1.0-py3-none-any.whl";
    let bytes: Vec<u8> = (0..3_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    fs::create_dir_all(t.path().join("wheels/tool")).unwrap();
    fs::write(t.path().join("wheels/tool").join(file), &bytes).unwrap();
    let log = t.path().join("requests.log");
    let index = Index::start_logging(&t.path().join("wheels"), &log);
    let sha: String = sha2::Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    let w =
        ResolvedWheel { file: file.into(), url: format!("{}/tool/{file}", index.url), sha256: sha.clone() };
    let root = camino::Utf8PathBuf::from_path_buf(t.path().join("tc")).unwrap();
    let store = Store::open(&root, FetchOptions::default()).unwrap();
    let part = root.join(format!("wheels/{sha}.part"));

    fs::write(&part, &bytes[..1_000_000]).unwrap();
    let got = store.wheel(&w).unwrap();
    assert_eq!(got, root.join(format!("wheels/{sha}.whl")));
    assert_eq!(fs::read(&got).unwrap(), bytes);
    assert!(!part.exists());
    assert_eq!(fs::read_to_string(&log).unwrap(), format!("{file} bytes=1000000-\n"));

    fs::remove_file(&got).unwrap();
    fs::write(&part, vec![0u8; 1_000_000]).unwrap();
    let err = store.wheel(&w).unwrap_err().to_string();
    assert!(err.starts_with(&format!("{file} has sha256 ")), "{err}");
    assert!(
        err.contains(&format!(", but nix/torch-wheels.json pins {sha}; the file was not used (its copy in the toolchain cache was removed)")),
        "{err}"
    );
    assert!(!part.exists() && !got.exists());
    assert_eq!(fs::read(store.wheel(&w).unwrap()).unwrap(), bytes);
    assert_eq!(
        fs::read_to_string(&log).unwrap(),
        format!("{file} bytes=1000000-\n{file} bytes=1000000-\n{file} -\n")
    );
}

/// A fresh user found that `verify` could not check a build made from pins: it planned the
/// host's torch (`python3`, which has none) instead of the cells' pinned wheels. Without
/// `--python` it now rebuilds a pinned cell from the same pins, says `same`, and catches a
/// variant changed on disk.
#[test]
fn verify_rebuilds_a_pinned_cell_from_its_pins() {
    let _heavy = crate::util::heavy_build();
    let t = scratch();
    let relu = t.path().join("relu");
    copy_kernel("relu", &relu);
    let cells = t.path().join("cells");
    let cell = "torch215-cxx11-cpu-x86_64-linux";
    let out = kb(
        &relu,
        &cells,
        &shared_toolchain_cache(),
        &["build-and-copy", "--nix", "never", "--variant", cell],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let verify = |args: &[&str]| kb(&relu, &t.path().join("verify-cells"), &shared_toolchain_cache(), args);
    let out = verify(&["verify", "--variant", cell]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout.lines().next().unwrap().split(" (").next().unwrap(), format!("{cell}: same"));
    let variant = relu.join("build").join(cell);
    let listed: Vec<String> = fs::read_dir(&variant)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();

    // Offline, as build-and-copy can be (verify said to pass --find-links, which it lacked): an
    // empty toolchain cache names the wheel it needs; a wheelhouse of the cell's wheels rebuilds
    // it without the network.
    let empty = t.path().join("empty-toolchains");
    let offline =
        kb(&relu, &t.path().join("offline-cells"), &empty, &["verify", "--variant", cell, "--offline"]);
    assert_eq!(offline.code, 1, "{}", offline.stderr);
    assert!(
        offline.stderr.contains(&format!("error: cannot verify: cannot build `{cell}` natively: torch-2.15.0-cp313-cp313-manylinux_2_28_x86_64.whl is not in the toolchain cache and --offline forbids downloading it; put it in a --find-links directory")),
        "{}",
        offline.stderr
    );
    let house = t.path().join("wheelhouse");
    fs::create_dir_all(&house).unwrap();
    let pins = kernel_builder::toolchain::pins::pins();
    let c = pins.cell("2.15", None, "x86_64-linux").unwrap();
    let mut house_sha256s = Vec::new();
    for w in std::iter::once(c.torch).chain(c.toolkit).chain(c.tools).chain([c.compile_cache]) {
        let r = w.resolved().unwrap();
        fs::hard_link(shared_toolchain_cache().join(format!("wheels/{}.whl", r.sha256)), house.join(&r.file))
            .unwrap();
        house_sha256s.push(r.sha256.clone());
    }
    house_sha256s.sort();
    let house_arg = house.to_str().unwrap();
    let args = ["verify", "--variant", cell, "--offline", "--find-links", house_arg];
    let out = kb(&relu, &t.path().join("offline-cells"), &empty, &args);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout.lines().next().unwrap().split(" (").next().unwrap(), format!("{cell}: same"));

    // Without --variant, only what build/ holds is rebuilt: only this cell's wheels are taken,
    // from a wheelhouse of every cell's when the shared cache has them all (a fresh user saw
    // every pinned cell's toolchain, 6 GB, fetched to verify one CPU cell).
    let full = t.path().join("full-house");
    let all_there = wheelhouse_if_cached(&full);
    let given = if all_there { &full } else { &house };
    let own = t.path().join("own-toolchains");
    let args = ["verify", "--offline", "--find-links", given.to_str().unwrap()];
    let out = kb(&relu, &t.path().join("own-cells"), &own, &args);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let mut fetched: Vec<String> = fs::read_dir(own.join("wheels"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter_map(|n| n.strip_suffix(".whl").map(str::to_owned))
        .collect();
    fetched.sort();
    assert!(
        fetched.iter().all(|w| house_sha256s.contains(w)),
        "{fetched:?} (all cells' wheels given: {all_there})"
    );
    assert!(fetched.contains(&c.torch.resolved().unwrap().sha256), "{fetched:?}");
    // A typo is told the kernel's variants, with the near miss; a real variant build/ lacks is
    // refused before anything is fetched.
    let typo = &cell[..cell.len() - 1];
    let out = kb(&relu, &t.path().join("own-cells"), &empty, &["verify", "--offline", "--variant", typo]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains(&format!("did you mean `{cell}`?")), "{}", out.stderr);
    let other = "torch214-cxx11-cpu-x86_64-linux";
    let out = kb(&relu, &t.path().join("own-cells"), &empty, &["verify", "--offline", "--variant", other]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.starts_with(&format!("error: cannot verify `{other}`: not in `")), "{}", out.stderr);

    let init = variant.join("__init__.py");
    assert!(init.is_file(), "{listed:?}");
    fs::write(&init, fs::read_to_string(&init).unwrap() + "# changed\n").unwrap();
    let out = verify(&["verify", "--variant", cell]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(out.stdout.lines().next().unwrap(), format!("{cell}: different"));
}

/// README's recipe in its order (issue 31): relu's cells built from pins, then `--python` cells
/// beside them in the same build/, then `verify --python`: each variant is rebuilt with the
/// toolchain that built it (the torch 2.15 cell from its pins, the torch 2.11 cell with the
/// venv's torch) and both are `same`; it used to refuse the pinned cell.
#[test]
fn verify_with_python_checks_pinned_cells_with_their_pins_and_its_own_with_python() {
    let _heavy = crate::util::heavy_build();
    let Some(python) = crate::util::venv_with_kernels("verify --python of a build/ with pinned cells") else {
        return;
    };
    let t = scratch();
    let relu = t.path().join("relu");
    copy_kernel("relu", &relu);
    let cells = t.path().join("cells");
    let pinned = "torch215-cxx11-cpu-x86_64-linux";
    let own = "torch211-cxx11-cpu-x86_64-linux";
    let py = python.to_str().unwrap();
    let out = kb(
        &relu,
        &cells,
        &shared_toolchain_cache(),
        &["build-and-copy", "--nix", "never", "--variant", pinned],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = kb(
        &relu,
        &cells,
        &shared_toolchain_cache(),
        &["build-and-copy", "--nix", "never", "--python", py, "--variant", own],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out =
        kb(&relu, &t.path().join("verify-cells"), &shared_toolchain_cache(), &["verify", "--python", py]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let verdicts: Vec<&str> = out.stdout.lines().map(|l| l.split(" (").next().unwrap()).collect();
    assert_eq!(verdicts, [format!("{own}: same"), format!("{pinned}: same")]);
}

/// `wheel` (a zip file) with the member `name` appended to: every other member copied as it is.
fn wheel_with_appended(wheel: &Path, name: &str, appended: &str, dest: &Path) {
    use std::io::{Read, Write};
    let mut src = zip::ZipArchive::new(fs::File::open(wheel).unwrap()).unwrap();
    let mut out = zip::ZipWriter::new(fs::File::create(dest).unwrap());
    for i in 0..src.len() {
        let mut member = src.by_index(i).unwrap();
        if member.name() == name {
            let mut text = String::new();
            member.read_to_string(&mut text).unwrap();
            out.start_file(name, zip::write::SimpleFileOptions::default()).unwrap();
            out.write_all((text + appended).as_bytes()).unwrap();
        } else {
            drop(member);
            out.raw_copy_file(src.by_index_raw(i).unwrap()).unwrap();
        }
    }
    out.finish().unwrap();
}

/// Append `text` to the read-only file `path`, as a tool run by root can.
fn append_as_root_can(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    let mode = fs::metadata(path).unwrap().permissions().mode();
    fs::set_permissions(path, fs::Permissions::from_mode(0o644)).unwrap();
    fs::write(path, fs::read_to_string(path).unwrap() + text).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// Issue 31: a torch wheel replaced in the toolchain cache by one with a changed header built
/// silently, and the build then said `reused` and `verify` said `same` with a hash that
/// differs from an honest build. Now the replaced wheel is found before it is unpacked and a
/// changed unpacked tree on its next use; both are made again with a warning, and every build
/// (built, reused) and `verify` give the honest bytes.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn a_changed_toolchain_is_made_again_and_never_reused() {
    let _heavy = crate::util::heavy_build();
    use kernel_builder::toolchain::pins::pins;
    let t = scratch();
    let relu = t.path().join("relu");
    copy_kernel("relu", &relu);
    let cell = "torch215-cxx11-cpu-x86_64-linux";
    let variant = relu.join("build").join(cell);
    // An honest build, which also fetches the wheels into the shared cache.
    let out = kb(
        &relu,
        &t.path().join("cells-honest"),
        &shared_toolchain_cache(),
        &["build-and-copy", "--nix", "never", "--variant", cell],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let honest = nar(&variant);
    // This test's own toolchain cache, filled from a wheelhouse of the shared cache's wheels.
    let c = pins().cell("2.15", None, "x86_64-linux").unwrap();
    let house = t.path().join("house");
    fs::create_dir_all(&house).unwrap();
    for w in std::iter::once(c.torch).chain(c.toolkit).chain(c.tools) {
        let r = w.resolved().unwrap();
        fs::hard_link(shared_toolchain_cache().join(format!("wheels/{}.whl", r.sha256)), house.join(&r.file))
            .unwrap();
    }
    let torch = c.torch.resolved().unwrap();
    let tc = t.path().join("tc");
    let house_arg = house.to_str().unwrap();
    let build = |cells: &str| {
        let args =
            ["build-and-copy", "--nix", "never", "--variant", cell, "--offline", "--find-links", house_arg];
        kb(&relu, &t.path().join(cells), &tc, &args)
    };
    const HEADER: &str = "torch/include/torch/library.h";
    // Kept in the module: a build against the changed header has other bytes.
    const TAMPER: &str =
        "\n__attribute__((used)) static const char kernel_builder_tampered[] = \"tampered\";\n";
    // The toolchain cache's warnings (a host whose glibc is newer than manylinux_2_28's adds
    // one about the module).
    let warnings = |out: &Out| -> Vec<String> {
        out.stderr
            .lines()
            .filter(|l| {
                l.starts_with("warning: the cached wheel ") || l.starts_with("warning: the unpacked tree ")
            })
            .map(str::to_owned)
            .collect()
    };

    // 1. The cached torch wheel is one with a changed header, under the pinned name.
    fs::create_dir_all(tc.join("wheels")).unwrap();
    let cached = tc.join(format!("wheels/{}.whl", torch.sha256));
    wheel_with_appended(&house.join(&torch.file), HEADER, TAMPER, &cached);
    let out = build("cells-1");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(verbs(&out), [format!("built {cell}")]);
    let w = warnings(&out);
    assert_eq!(w.len(), 1, "{}", out.stderr);
    assert!(
        w[0].starts_with(&format!("warning: the cached wheel {} (`", torch.file))
            && w[0].ends_with(&format!(
                "not the pinned {}: corrupted, truncated or replaced; removed, fetching it again",
                torch.sha256
            )),
        "{}",
        w[0]
    );
    assert_eq!(nar(&variant), honest);

    // 2. The unpacked tree's header appended to (a test as root): a fresh cell cache compiles.
    let tree = fs::read_dir(tc.join("trees"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.join(HEADER).is_file())
        .unwrap();
    let header = tree.join(HEADER);
    let len = fs::metadata(&header).unwrap().len();
    let expected = format!(
        "warning: the unpacked tree `{}` ({}) differs from what was unpacked: `{HEADER}` changed size ({} bytes, recorded {len}); unpacking it again",
        fs::canonicalize(&tree).unwrap().display(),
        torch.file,
        len + TAMPER.len() as u64
    );
    append_as_root_can(&header, TAMPER);
    let out = build("cells-2");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(verbs(&out), [format!("built {cell}")]);
    assert_eq!(warnings(&out), std::slice::from_ref(&expected));
    assert_eq!(nar(&variant), honest);

    // 3. Again, with that cell cache: the tree is made again before the key is taken, so the
    //    cell is reused with the honest bytes.
    append_as_root_can(&header, TAMPER);
    let out = build("cells-2");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(verbs(&out), [format!("reused {cell}")]);
    assert_eq!(warnings(&out), std::slice::from_ref(&expected));
    assert_eq!(nar(&variant), honest);

    // 4. verify rebuilds from the tree made again: `same`.
    append_as_root_can(&header, TAMPER);
    let out = kb(&relu, &t.path().join("cells-verify"), &tc, &["verify", "--variant", cell]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(out.stdout.lines().next().unwrap().split(" (").next().unwrap(), format!("{cell}: same"));
    assert_eq!(warnings(&out), [expected]);
}

/// A build on a full disk: CMake's compiler check there says only that the compiler "is not
/// able to compile a simple test program" (its own test file has an "Unknown extension"), and
/// a compile says `No space left on device` somewhere in a long log. The cache directory is a
/// 150 KiB tmpfs in a mount namespace of the test's own (root: CI runs as root, as mount needs):
/// the failure says the disk is full, names the cell's directories and what to run, on stderr
/// and in `--json`'s `hints`, and the kernel's build/ is not touched.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn a_full_disk_is_named_with_what_to_do() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIPPED: mounting the small tmpfs this test fills needs root");
        return;
    }
    let t = scratch();
    let relu = t.path().join("relu");
    copy_kernel("relu", &relu);
    let small = t.path().join("small-disk");
    fs::create_dir(&small).unwrap();
    let cell = "torch215-cxx11-cpu-x86_64-linux";
    let o = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(r#"mount -t tmpfs -o size=150k tmpfs "$1" && shift && exec "$@""#)
        .arg("sh")
        .arg(&small)
        .arg(crate::util::kb_path())
        .args(["build-and-copy", "--nix", "never", "--json", "--variant", cell])
        .current_dir(&relu)
        .env("KERNEL_BUILDER_PLAIN", "1")
        .env("KERNEL_BUILDER_CACHE_DIR", &small)
        .env("KERNEL_BUILDER_TOOLCHAIN_CACHE_DIR", shared_toolchain_cache())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let hints: Vec<&str> =
        doc["error"]["hints"].as_array().unwrap().iter().map(|h| h.as_str().unwrap()).collect();
    let work = format!("{}/cmake-v1/", small.display());
    assert_eq!(hints.len(), 1, "{hints:?}");
    assert!(
        hints[0].starts_with("the disk ")
            && hints[0].contains(&format!(": this cell compiles in `{work}"))
            && hints[0].contains("`native-cache prune-work --all` removes the CMake work directories"),
        "{}",
        hints[0]
    );
    assert!(stderr.lines().any(|l| l == format!("hint: {}", hints[0])), "{stderr}");
    assert!(!relu.join("build").exists(), "a failed build wrote the kernel's build/");
}

/// `matrix pin-unpacked` on what a user may hand it: the cache is read, never created (a wrong
/// path is an error, not an empty cache); the pins file is read as a regular file, written
/// where a link points, never over a read-only file, and refused with keys it does not know
/// (a rewrite would drop them).
#[test]
fn pin_unpacked_reads_the_cache_and_writes_the_pins_file_with_care() {
    use camino::Utf8Path;
    use kernel_builder::toolchain::pins;
    let t = tempfile::tempdir().unwrap();
    let root = Utf8Path::from_path(t.path()).unwrap();
    // A cache holding one sealed tree: torch 2.15's of x86_64-linux, one header.
    let cache = root.join("toolchains");
    let torch = &pins::pins().wheels["2.15"]["cu132"]["x86_64-linux"];
    let tree = cache.join("trees").join(pins::set_id([torch.sha256.as_deref().unwrap()]));
    fs::create_dir_all(tree.join("torch/include")).unwrap();
    fs::write(tree.join("torch/include/a.h"), "int a;\n").unwrap();
    kernel_builder::toolchain::seal::seal(&tree, None).unwrap();
    let committed = fs::read_to_string(repo().join("nix/torch-wheels.json")).unwrap();
    let run = |pins: &Utf8Path, cache: &Utf8Path| {
        kb(
            t.path(),
            &t.path().join("cells"),
            cache.as_std_path(),
            &["matrix", "pin-unpacked", "--pins", pins.as_str()],
        )
    };

    // A cache that is not there.
    let copy = root.join("pins.json");
    fs::write(&copy, &committed).unwrap();
    let out = run(&copy, &root.join("nope"));
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.contains("no toolchain cache at `")
            && out.stderr.contains("KERNEL_BUILDER_TOOLCHAIN_CACHE_DIR"),
        "{}",
        out.stderr
    );
    assert!(!root.join("nope").exists());

    // Through a link: the target gets the new hash, the link stays a link.
    let link = root.join("link.json");
    std::os::unix::fs::symlink(&copy, &link).unwrap();
    let out = run(&link, &cache);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains(": 1 recorded, 0 unchanged, 3 kept without a tree to check, "),
        "{}",
        out.stdout
    );
    assert!(link.is_symlink());
    assert_ne!(fs::read_to_string(&copy).unwrap(), committed);

    // Read-only: refused, unchanged.
    fs::write(&copy, &committed).unwrap();
    let mut perm = fs::metadata(&copy).unwrap().permissions();
    perm.set_readonly(true);
    fs::set_permissions(&copy, perm).unwrap();
    let out = run(&copy, &cache);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("is read-only, so it was not changed"), "{}", out.stderr);
    assert_eq!(fs::read_to_string(&copy).unwrap(), committed);

    // A key it does not know, and a FIFO.
    let extra = root.join("extra.json");
    fs::write(&extra, committed.replacen("{\n", "{\n  \"x-extra\": 1,\n", 1)).unwrap();
    let out = run(&extra, &cache);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("unknown field `x-extra`"), "{}", out.stderr);
    let fifo = root.join("fifo.json");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let out = run(&fifo, &cache);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("is a FIFO (named pipe), not a regular file"), "{}", out.stderr);
}

/// A `--find-links` that is not a directory (mistyped, or a wheel file given instead) is said
/// at once, by every command that takes it, instead of each wheel being "not in the cache".
#[test]
fn a_find_links_that_is_not_a_directory_is_refused_first() {
    let t = scratch();
    let relu = t.path().join("relu");
    copy_kernel("relu", &relu);
    let file = t.path().join("torch.whl");
    fs::write(&file, "not a directory").unwrap();
    for given in [t.path().join("no-such-dir"), file] {
        let g = given.to_str().unwrap();
        for cmd in [
            &["build-and-copy", "--nix", "never"][..],
            &["verify"],
            &["build-and-upload", "--dry-run", "--repo-id", "org/relu"],
        ] {
            let mut args = cmd.to_vec();
            args.extend(["--offline", "--find-links", g]);
            let out = kb(&relu, &t.path().join("cells"), &t.path().join("toolchains"), &args);
            assert_eq!(out.code, 1, "{args:?}: {}", out.stderr);
            assert!(
                out.stderr.contains(&format!("error: --find-links `{g}` is not a directory; give the directory that holds the pinned wheels")),
                "{args:?}: {}",
                out.stderr
            );
        }
    }
    assert!(!t.path().join("toolchains").exists());
}

/// Found by a fresh user: `--variant` of two cells that cannot be had here named only the first,
/// and `--json` had no `skipped` list. Both are named, and listed with their kinds.
#[test]
fn every_variant_asked_for_that_cannot_be_built_is_named_and_listed() {
    let t = scratch();
    let relu = t.path().join("relu");
    copy_kernel("relu", &relu);
    let cells = ["torch214-cxx11-cpu-x86_64-linux", "torch215-cxx11-cpu-x86_64-linux"];
    let args = [
        "build-and-copy",
        "--nix",
        "never",
        "--offline",
        "--json",
        "--variant",
        cells[0],
        "--variant",
        cells[1],
    ];
    let out = kb(&relu, &t.path().join("cells"), &t.path().join("empty"), &args);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let doc: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("2 of the variants asked for cannot be built:\n"),
        "{doc}"
    );
    let skipped: Vec<(&str, &str)> = doc["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["variant"].as_str().unwrap(), s["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(skipped, [(cells[0], "provision"), (cells[1], "provision")]);
    assert!(!relu.join("build").exists());
}
