//! Native builds of `[tvm-ffi]` cells (`kernels/relu-tvm-ffi`): the CUDA cell compiled without
//! a GPU by the venv's nvcc against the venv's tvm_ffi, holding exactly the SASS that
//! `cuda-capabilities` asks for; and a Python environment without tvm_ffi, refused with what to
//! install before anything runs. The CPU cell is built, loaded and compared with `torch.relu`
//! in `tests/python/test_relu_tvm_ffi.py`.
//!
//! The CUDA test needs the repository's venv (`scripts/setup-venv.sh`: apache-tvm-ffi,
//! nvidia-cuda-nvcc, nvidia-cuda-cuobjdump); without it it says SKIPPED. Its compile takes
//! about 10 s (one capability, a `.cu` without tvm-ffi's headers).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Copy `kernels/<name>` to `dest`, without its `build/`.
fn copy_kernel(name: &str, dest: &Path) {
    let src = repo().join("kernels").join(name);
    for e in walkdir::WalkDir::new(&src).into_iter().filter_entry(|e| {
        let rel = e.path().strip_prefix(&src).unwrap();
        rel != Path::new("build") && e.file_name() != "__pycache__"
    }) {
        let e = e.unwrap();
        let to = dest.join(e.path().strip_prefix(&src).unwrap());
        if e.file_type().is_dir() {
            fs::create_dir_all(&to).unwrap();
        } else {
            fs::copy(e.path(), &to).unwrap();
        }
    }
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn kb(cache: &Path, args: &[&str]) -> Out {
    let o = Command::cargo_bin("kernel-builder")
        .unwrap()
        .env("KERNEL_BUILDER_CACHE_DIR", cache)
        .env_remove("CUDACXX")
        .env_remove("CUDA_HOME")
        .args(args)
        .output()
        .unwrap();
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8(o.stdout).unwrap(),
        stderr: String::from_utf8(o.stderr).unwrap(),
    }
}

/// What the venv's Python says: tvm_ffi's version and site-packages, or `None` (with a
/// SKIPPED line) when there is no venv or no tvm_ffi in it.
fn venv_tvm_ffi() -> Option<(PathBuf, String, PathBuf)> {
    let py = repo().join(".venv/bin/python");
    let program = "import importlib.metadata as m, sysconfig; print(m.version('apache-tvm-ffi')); print(sysconfig.get_paths()['purelib'])";
    let out =
        std::process::Command::new(&py).args(["-c", program]).output().ok().filter(|o| o.status.success());
    let Some(out) = out else {
        eprintln!(
            "SKIPPED: no apache-tvm-ffi in {} (run scripts/setup-venv.sh); the tvm-ffi CUDA test did not run",
            py.display()
        );
        return None;
    };
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    let version = lines.next().unwrap().to_owned();
    let purelib = PathBuf::from(lines.next().unwrap());
    Some((py, version, purelib))
}

/// relu-tvm-ffi's CUDA cell, `cuda-capabilities = ["9.0"]`: named for the venv's tvm-ffi
/// major.minor and its nvcc's CUDA, one `sm_90` cubin and no PTX, linking libtvm_ffi and
/// libcudart (not torch), with `metadata.json` recording the capability and the toolchain.
#[test]
fn relu_tvm_ffi_cuda_cell_holds_exactly_the_sass_asked_for() {
    let Some((py, version, purelib)) = venv_tvm_ffi() else { return };
    let cuda_bin = purelib.join("nvidia/cu13/bin");
    if !cuda_bin.join("nvcc").is_file() || !cuda_bin.join("cuobjdump").is_file() {
        eprintln!(
            "SKIPPED: no nvcc or cuobjdump in {} (run scripts/setup-venv.sh); the tvm-ffi CUDA test did not run",
            cuda_bin.display()
        );
        return;
    }
    let nvcc = String::from_utf8(
        std::process::Command::new(cuda_bin.join("nvcc")).arg("--version").output().unwrap().stdout,
    )
    .unwrap();
    // "Cuda compilation tools, release 13.0, V13.0.88"
    let release = nvcc.split("release ").nth(1).unwrap().split(',').next().unwrap().to_owned();
    let mut v = version.split('.');
    let tag = format!("{}{}", v.next().unwrap(), v.next().unwrap());
    let cell = format!("tvm-ffi{tag}-cu{}-{}-linux", release.replace('.', ""), std::env::consts::ARCH);

    let t = tempfile::tempdir().unwrap();
    let kernel = t.path().join("relu-tvm-ffi");
    copy_kernel("relu-tvm-ffi", &kernel);
    let args = ["build-and-copy", "--nix", "never", "--python", py.to_str().unwrap(), "--variant", &cell];
    let mut args: Vec<&str> = args.to_vec();
    args.push(kernel.to_str().unwrap());
    let built = kb(&t.path().join("cache"), &args);
    assert_eq!(built.code, 0, "{}", built.stderr);
    let variant = kernel.join("build").join(&cell);
    let meta: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(variant.join("metadata.json")).unwrap()).unwrap();
    let id = meta["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("_relu_tvm_ffi_cuda_"), "{id}");
    assert_eq!(built.stdout, format!("built {cell} (4 files, id {id}) -> {}\n", variant.display()));
    let mut files: Vec<String> =
        fs::read_dir(&variant).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    files.sort();
    assert_eq!(files, ["__init__.py", "_ops.py", &format!("{id}.so"), "metadata.json"]);
    assert_eq!(meta["backend"], serde_json::json!({"type": "cuda", "archs": ["9.0"]}));
    let toolchain = &meta["build"]["toolchain"];
    assert_eq!(toolchain["tvm-ffi"], version.as_str());
    assert!(toolchain["nvcc"].as_str().unwrap().starts_with(&format!("{release}.")), "{toolchain}");
    assert!(toolchain.get("torch").is_none(), "{toolchain}");

    let so = variant.join(format!("{id}.so"));
    let cuobjdump = |flag: &str| {
        let o = std::process::Command::new(cuda_bin.join("cuobjdump"))
            .args([flag, so.to_str().unwrap()])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
    };
    let elf: Vec<String> = cuobjdump("--list-elf")
        .lines()
        .filter_map(|l| l.trim().strip_suffix(".cubin").and_then(|c| c.rsplit('.').next()).map(str::to_owned))
        .collect();
    assert_eq!(elf, ["sm_90"]);
    assert!(cuobjdump("--list-ptx").contains("No PTX file found"), "no PTX was asked for");
    let dynamic = String::from_utf8(
        std::process::Command::new("readelf").args(["-d", so.to_str().unwrap()]).output().unwrap().stdout,
    )
    .unwrap();
    assert!(dynamic.contains("[libtvm_ffi.so]") && dynamic.contains("[libcudart.so.13]"), "{dynamic}");
    assert!(!dynamic.contains("libtorch") && !dynamic.contains("libc10"), "{dynamic}");
    let symbols = String::from_utf8(
        std::process::Command::new("nm")
            .args(["-D", "--defined-only", so.to_str().unwrap()])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(symbols.lines().any(|l| l.ends_with(" __tvm_ffi_relu_cuda")), "{symbols}");
    assert!(!symbols.contains("__tvm_ffi_relu_cpu"), "{symbols}");
}

/// A Python without tvm_ffi (the host's python3, isolated and without site-packages): both
/// cells are refused naming the package to install, and `build/` is not created.
#[test]
fn a_python_without_tvm_ffi_says_to_install_apache_tvm_ffi() {
    let t = tempfile::tempdir().unwrap();
    let kernel = t.path().join("relu-tvm-ffi");
    copy_kernel("relu-tvm-ffi", &kernel);
    let bare = t.path().join("bin/python");
    fs::create_dir_all(bare.parent().unwrap()).unwrap();
    fs::write(&bare, "#!/bin/sh\nexec python3 -I -S \"$@\"\n").unwrap();
    fs::set_permissions(&bare, fs::Permissions::from_mode(0o755)).unwrap();
    let p = bare.to_str().unwrap();
    let out = kb(
        &t.path().join("cache"),
        &["build-and-copy", "--nix", "never", "--python", p, kernel.to_str().unwrap()],
    );
    assert_eq!(out.code, 1, "{}", out.stderr);
    let why = format!(
        "`{p}` has no tvm_ffi, which a `[tvm-ffi]` kernel is built against; install it there (`{p} -m pip install apache-tvm-ffi`) or pass --python PATH to a Python that has it"
    );
    assert!(
        out.stderr.contains(&format!(
            "error: `{}/build.toml` has no variant this host can build:\n  the `cpu` variant is not built: {why}\n  the `cuda` variant is not built: {why}\n",
            kernel.display()
        )),
        "{}",
        out.stderr
    );
    assert!(!kernel.join("build").exists());
    // One variant asked for: the same reason, for it.
    let cell = format!("tvm-ffi01-cpu-{}-linux", std::env::consts::ARCH);
    let out = kb(
        &t.path().join("cache"),
        &["build-and-copy", "--nix", "never", "--python", p, "--variant", &cell, kernel.to_str().unwrap()],
    );
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains(&why), "{}", out.stderr);
    assert!(!kernel.join("build").exists());
}
