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

use super::cellcache::{copy_kernel, script, Out};
use super::util::repo;

fn kb(cache: &Path, args: &[&str]) -> Out {
    let o = crate::util::kb()
        .env("KERNEL_BUILDER_CACHE_DIR", cache)
        .env_remove("CUDACXX")
        .env_remove("CUDA_HOME")
        // The parallel plan fixed, so the build line is the same on every machine.
        .env("KERNEL_BUILDER_JOBS", "2")
        .env("KERNEL_BUILDER_NVCC_THREADS", "1")
        .env("KERNEL_BUILDER_NVCC_SPLIT_COMPILE", "2")
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

/// relu-tvm-ffi's CUDA cell, `cuda-capabilities = ["5.0", "9.0"]` (5.0 left out by CUDA 13,
/// with a note): named for the venv's tvm-ffi
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
    // 5.0 as well, which CUDA 13 cannot build: left out, with a note naming it and the nvcc.
    let toml = fs::read_to_string(kernel.join("build.toml")).unwrap();
    let toml = toml.replace("cuda-capabilities = [\"9.0\"]", "cuda-capabilities = [\"5.0\", \"9.0\"]");
    fs::write(kernel.join("build.toml"), toml).unwrap();
    let args = ["build-and-copy", "--nix", "never", "--python", py.to_str().unwrap(), "--variant", &cell];
    let mut args: Vec<&str> = args.to_vec();
    args.push(kernel.to_str().unwrap());
    let built = kb(&t.path().join("cache"), &args);
    assert_eq!(built.code, 0, "{}", built.stderr);
    if release.split('.').next().unwrap().parse::<u32>().unwrap() >= 13 {
        assert!(
            built.stderr.contains("note: [kernel.relu_cuda]: the nvcc found (`")
                && built.stderr.contains(&format!(", CUDA {release}.",))
                && built.stderr.contains(&format!(
                    ") cannot build CUDA capability 5.0 of `cuda-capabilities`; `{cell}` holds 9.0 only\n"
                )),
            "{}",
            built.stderr
        );
    }
    let variant = kernel.join("build").join(&cell);
    let meta: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(variant.join("metadata.json")).unwrap()).unwrap();
    let id = meta["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("_relu_tvm_ffi_cuda_"), "{id}");
    assert_eq!(
        built.stdout,
        format!(
            "built {cell} (5 files, id {id}, 2 jobs × 1 nvcc thread × 2 cicc splits) -> {}\n",
            variant.display()
        )
    );
    let mut files: Vec<String> =
        fs::read_dir(&variant).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    files.sort();
    assert_eq!(files, ["__init__.py", "_ops.py", &format!("{id}.so"), "metadata.json", "symbols.json"]);
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

/// A Python in `root/env/bin` whose tvm_ffi (version `version`) is `root/site/tvm_ffi`, with
/// the headers and library a build needs (empty files), and no torch at all.
fn fake_tvm_ffi_python(root: &Path, version: &str) -> PathBuf {
    let pkg = root.join("site/tvm_ffi");
    for f in ["include/tvm/ffi/c_api.h", "include/dlpack/dlpack.h", "lib/libtvm_ffi.so", "_version.py"] {
        fs::create_dir_all(pkg.join(f).parent().unwrap()).unwrap();
        fs::write(pkg.join(f), "").unwrap();
    }
    let py = root.join("env/bin/python");
    let facts = format!(
        r#"{{"version": "{version}", "package_dir": "{pkg}", "purelib": "{site}", "executable": "{py}", "python_version": "3.11"}}"#,
        pkg = pkg.display(),
        site = root.join("site").display(),
        py = py.display()
    );
    script(&py, &format!("echo '{facts}'"));
    py
}

/// The CUDA of a tvm-ffi cell is the nvcc's, and its tvm-ffi tag the probe's major.minor: with
/// CUDA 12.6's nvcc (the newest `nvidia/cu*` of the environment) the cell is `tvm-ffi02-cu126-…`,
/// capabilities that 12.6 cannot build fail before anything is configured, and one it can
/// build stops at the toolkit's missing CUDA runtime; without any nvcc the error says which
/// wheels to install. Fake tools only answer `--version`.
#[test]
fn a_tvm_ffi_cuda_cell_takes_its_cuda_from_nvcc_and_its_name_from_tvm_ffi() {
    let t = tempfile::tempdir().unwrap();
    let k = t.path().join("k");
    for f in ["tvm-ffi-ext/kk/__init__.py", "tvm-ffi-ext/b.cpp", "src/k.cu"] {
        fs::create_dir_all(k.join(f).parent().unwrap()).unwrap();
        fs::write(k.join(f), "").unwrap();
    }
    fs::write(
        k.join("build.toml"),
        "[general]\nname = \"kk\"\nversion = 1\nedition = 5\nlicense = \"MIT\"\nbackends = [\"cuda\"]\n\n[tvm-ffi]\nsrc = [\"tvm-ffi-ext/b.cpp\"]\n\n[kernel.k]\nbackend = \"cuda\"\ndepends = []\ncuda-capabilities = [\"12.0\"]\nsrc = [\"src/k.cu\"]\n",
    )
    .unwrap();
    let bin = t.path().join("env/bin");
    let py = fake_tvm_ffi_python(t.path(), "0.2.3");
    script(&bin.join("cmake"), "[ \"$1\" = --version ] && echo 'cmake version 4.4.5' || exit 3");
    script(&bin.join("ninja"), "[ \"$1\" = --version ] && echo 1.13.2 || exit 3");
    script(&bin.join("c++"), "echo 'c++ (Debian 12.2.0-14+deb12u1) 12.2.0'");
    let run = |extra: &[&str]| {
        let out = crate::util::kb()
            .args(["build-and-copy", "--nix", "never", "--python", py.to_str().unwrap()])
            .args(extra)
            .arg(&k)
            .env("PATH", &bin)
            .env_remove("CXX")
            .env_remove("CUDACXX")
            .env_remove("CUDA_HOME")
            .env("KERNEL_BUILDER_CACHE_DIR", t.path().join("cache"))
            .output()
            .unwrap();
        (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, err) = run(&[]);
    assert_eq!(code, 1);
    assert!(
        err.contains(&format!(
            "the `cuda` variant is not built: no nvcc (looked at CUDACXX, CUDA_HOME, PATH and `{site}/nvidia/cu*/bin`); install one, e.g. `{py} -m pip install nvidia-cuda-nvcc nvidia-nvvm nvidia-cuda-crt nvidia-cuda-runtime`",
            site = t.path().join("site").display(),
            py = py.display()
        )),
        "{err}"
    );
    // CUDA 11's and 12's nvcc in the environment: the newer one is used.
    script(
        &t.path().join("site/nvidia/cu11/bin/nvcc"),
        "echo 'Cuda compilation tools, release 11.8, V11.8.89'",
    );
    script(
        &t.path().join("site/nvidia/cu12/bin/nvcc"),
        "echo 'Cuda compilation tools, release 12.6, V12.6.85'",
    );
    let cell = format!("tvm-ffi02-cu126-{}-linux", std::env::consts::ARCH);
    let (code, err) = run(&["--variant", &cell]);
    assert_eq!(code, 1);
    assert!(
        err.contains(&format!(
            "error: cannot build `{cell}` natively: [kernel.k] asks for CUDA capabilities 12.0 and CUDA 12.6 builds none of them"
        )),
        "{err}"
    );
    assert!(!k.join("build").exists());
    assert!(!t.path().join("cache").exists(), "nothing was configured or compiled");
    // A capability 12.6 builds: the cell is planned under that name, and stops at the missing
    // CUDA runtime of that nvcc's toolkit.
    let toml = fs::read_to_string(k.join("build.toml")).unwrap().replace("[\"12.0\"]", "[\"9.0\"]");
    fs::write(k.join("build.toml"), toml).unwrap();
    let (code, err) = run(&[]);
    assert_eq!(code, 1);
    assert!(
        err.contains(&format!(
            "error: cannot build variant `{cell}`\n  caused by: no libcudart.so in `{}` (the CUDA runtime); install it (`pip install nvidia-cuda-runtime`)",
            t.path().join("site/nvidia/cu12/lib").display()
        )),
        "{err}"
    );
    assert!(!k.join("build").exists());
    // A variant of another CUDA: the nvcc decides it, not the Python environment, for
    // build-and-copy and for verify (a leftover variant).
    let other = format!("tvm-ffi02-cu130-{}-linux", std::env::consts::ARCH);
    let why = format!(
        "cannot build `{other}` natively: the nvcc found here (`{}`, CUDA 12.6.85) builds `{cell}`; a tvm-ffi variant takes its CUDA from nvcc, so point CUDACXX (or CUDA_HOME, or PATH) at an nvcc of CUDA 13.0, or build it through Nix",
        t.path().join("site/nvidia/cu12/bin/nvcc").display()
    );
    let (code, err) = run(&["--variant", &other]);
    assert_eq!(code, 1);
    assert!(err.contains(&format!("error: {why}\n")), "{err}");
    assert!(!err.contains("pass --python"), "{err}");
    fs::create_dir_all(k.join("build").join(&other)).unwrap();
    let out = crate::util::kb()
        .args(["verify", "--python", py.to_str().unwrap(), "--variant", &other])
        .arg(&k)
        .env("PATH", &bin)
        .env_remove("CXX")
        .env_remove("CUDACXX")
        .env_remove("CUDA_HOME")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("error: cannot verify: {why}\n")), "{err}");
    fs::remove_dir_all(k.join("build")).unwrap();
    // A version that names no major.minor.
    fake_tvm_ffi_python(t.path(), "dev");
    let (code, err) = run(&[]);
    assert_eq!(code, 1);
    assert!(
        err.contains("the `cuda` variant is not built: tvm_ffi in `")
            && err.contains("reports version `dev`, which does not start with MAJOR.MINOR"),
        "{err}"
    );
}
