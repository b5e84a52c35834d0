//! Native builds of compiled cells when the toolchain is incomplete or the request cannot be
//! built: the error says what to install or change, before anything is compiled, and `build/`
//! is left as it was. A fake toolchain (shell scripts that answer `--version` and the torch
//! probe) stands in, with `PATH` limited to it, so these tests need no compiler.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

pub(crate) fn script(path: &Path, body: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

/// A Python whose "torch" reports `cuda` (JSON `null` for a CPU build), in `root/env/bin`.
pub(crate) fn fake_python(root: &Path, cuda: &str) -> std::path::PathBuf {
    let py = root.join("env/bin/python");
    let facts = format!(
        r#"{{"version": "2.11.0", "cuda": {cuda}, "hip": null, "xpu": null, "cxx11_abi": true, "cmake_prefix_path": "{r}/torch/share/cmake", "torch_dir": "{r}/torch", "python_include": "{r}/include", "purelib": "{r}/site", "executable": "{py}", "python_version": "3.11"}}"#,
        r = root.display(),
        py = py.display()
    );
    script(&py, &format!("echo '{facts}'"));
    py
}

pub(crate) fn kernel(dir: &Path, backend: &str, extra: &str) {
    fs::create_dir_all(dir.join("torch-ext/kk")).unwrap();
    fs::create_dir_all(dir.join("src")).unwrap();
    fs::write(dir.join("torch-ext/kk/__init__.py"), "").unwrap();
    fs::write(dir.join("torch-ext/b.cpp"), "").unwrap();
    fs::write(dir.join("src/k.cu"), "").unwrap();
    fs::write(
        dir.join("build.toml"),
        format!(
            "[general]\nname = \"kk\"\nversion = 1\nedition = 5\nlicense = \"MIT\"\nbackends = [\"{backend}\"]\n\n[torch]\nsrc = [\"torch-ext/b.cpp\"]\n\n[kernel.k]\nbackend = \"{backend}\"\ndepends = [\"torch\"]\nsrc = [\"src/k.cu\"]\n{extra}"
        ),
    )
    .unwrap();
}

fn run(dir: &Path, path_dirs: &[&Path], python: &Path, extra: &[&str]) -> (i32, String) {
    let path: Vec<String> = path_dirs.iter().map(|d| d.display().to_string()).collect();
    let out = crate::util::kb()
        .args(["build-and-copy", "--nix", "never", "--python", python.to_str().unwrap()])
        .args(extra)
        .arg(dir)
        .env("PATH", path.join(":"))
        .env_remove("CXX")
        .env_remove("CUDACXX")
        .env_remove("CUDA_HOME")
        .env("KERNEL_BUILDER_CACHE_DIR", dir.join("../cache"))
        .output()
        .unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn missing_cmake_says_what_to_install() {
    let t = tempfile::tempdir().unwrap();
    let k = t.path().join("k");
    kernel(&k, "cpu", "");
    let py = fake_python(t.path(), "null");
    let (code, err) = run(&k, &[&t.path().join("env/bin")], &py, &[]);
    assert_eq!(code, 1);
    assert_eq!(
        err,
        format!(
            "error: `{k}/build.toml` has no variant this host can build:\n  the `cpu` variant is not built: CMake was not found next to `{py}` or on PATH; install it (`{py} -m pip install cmake`)\n",
            py = py.display(),
            k = k.display()
        )
    );
    assert!(!k.join("build").exists());

    // `--json`: the failure document lists the cells skipped, as a build that succeeds does
    // (it had only the reasons joined into its message).
    let out = crate::util::kb()
        .args(["build-and-copy", "--nix", "never", "--json", "--python", py.to_str().unwrap()])
        .arg(&k)
        .env("PATH", t.path().join("env/bin"))
        .env("KERNEL_BUILDER_CACHE_DIR", t.path().join("cache"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["ok"], false);
    assert_eq!(
        doc["skipped"],
        serde_json::json!([{
            "backend": "cpu",
            "kind": "toolchain",
            "reason": format!("CMake was not found next to `{}` or on PATH; install it (`{} -m pip install cmake`)", py.display(), py.display()),
        }])
    );
}

#[test]
fn missing_compiler_and_cpu_only_torch_say_what_to_install() {
    let t = tempfile::tempdir().unwrap();
    let k = t.path().join("k");
    kernel(&k, "cuda", "");
    let bin = t.path().join("env/bin");
    let py = fake_python(t.path(), "null");
    script(&bin.join("cmake"), "echo 'cmake version 4.4.5'");
    script(&bin.join("ninja"), "echo 1.13.2");
    let (code, err) = run(&k, &[&bin], &py, &[]);
    assert_eq!(code, 1);
    assert!(err.contains("no C++ compiler on PATH (c++, g++, clang++); install one (e.g. `apt-get install g++`) or set CXX"), "{err}");
    script(&bin.join("c++"), "echo 'c++ (Debian 12.2.0-14+deb12u1) 12.2.0'");
    let (code, err) = run(&k, &[&bin], &py, &[]);
    assert_eq!(code, 1);
    assert!(err.contains("torch 2.11.0 in `"), "{err}");
    assert!(err.contains("is not a CUDA build (torch.version.cuda is None); install a CUDA torch"), "{err}");
    // A CUDA torch without nvcc: PyPI's wheels are named.
    let py = fake_python(t.path(), "\"13.0\"");
    let (code, err) = run(&k, &[&bin], &py, &[]);
    assert_eq!(code, 1);
    assert!(err.contains("no nvcc for CUDA 13.0 (looked at CUDACXX, CUDA_HOME, PATH and `"), "{err}");
    assert!(
        err.contains("-m pip install nvidia-cuda-nvcc==13.0.* nvidia-nvvm==13.0.* nvidia-cuda-crt==13.0.*`"),
        "{err}"
    );
}

/// In `root`: a CUDA 13.0 torch (`fake_python`), nvcc 13.0 where PyPI's wheel puts it, and
/// CMake, Ninja and a C++ compiler in `root/env/bin` that only answer `--version` (any
/// configure or compile fails). The bin directory and the Python.
fn fake_cuda_tools(root: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let bin = root.join("env/bin");
    let py = fake_python(root, "\"13.0\"");
    script(&bin.join("cmake"), "[ \"$1\" = --version ] && echo 'cmake version 4.4.5' || exit 3");
    script(&bin.join("ninja"), "[ \"$1\" = --version ] && echo 1.13.2 || exit 3");
    script(&bin.join("c++"), "echo 'c++ (Debian 12.2.0-14+deb12u1) 12.2.0'");
    script(&root.join("site/nvidia/cu13/bin/nvcc"), "echo 'Cuda compilation tools, release 13.0, V13.0.88'");
    (bin, py)
}

#[test]
fn capabilities_this_cuda_cannot_build_fail_before_compiling() {
    let t = tempfile::tempdir().unwrap();
    let k = t.path().join("k");
    kernel(&k, "cuda", "cuda-capabilities = [\"7.0\"]\n");
    let (bin, py) = fake_cuda_tools(t.path());
    let (code, err) = run(&k, &[&bin], &py, &[]);
    assert_eq!(code, 1);
    assert!(
        err.contains("the `cuda` variant is not built: [kernel.k] asks for CUDA capabilities 7.0 and CUDA 13.0 builds none of them (it builds 7.5, 8.0, 8.6, 8.7, 8.8, 8.9, 9.0, 10.0, 10.3, 11.0, 12.0, 12.1); fix `cuda-capabilities`"),
        "{err}"
    );
    // Named explicitly, the same reason is the error.
    let (code, err) = run(&k, &[&bin], &py, &["--variant", "torch211-cxx11-cu130-x86_64-linux"]);
    assert_eq!(code, 1);
    assert!(err.contains("\nerror: cannot build `torch211-cxx11-cu130-x86_64-linux` natively: [kernel.k] asks for CUDA capabilities 7.0"), "{err}");
    assert!(!k.join("build").exists());
    assert!(!t.path().join("cache").exists(), "nothing was configured or compiled");
}

/// A CUDA build says up front what makes it long (on stderr, also when it is not a terminal;
/// not with `--json`), before anything is configured.
#[test]
fn a_cuda_build_says_up_front_how_much_it_compiles() {
    let t = tempfile::tempdir().unwrap();
    let k = t.path().join("k");
    kernel(&k, "cuda", "cuda-capabilities = [\"8.0\", \"9.0\"]\n");
    let toml = fs::read_to_string(k.join("build.toml")).unwrap();
    fs::write(
        k.join("build.toml"),
        toml.replace("src = [\"src/k.cu\"]", "src = [\"src/k.cu\", \"src/k2.cu\", \"src/k.h\"]"),
    )
    .unwrap();
    fs::write(k.join("src/k2.cu"), "").unwrap();
    fs::write(k.join("src/k.h"), "").unwrap();
    let (bin, py) = fake_cuda_tools(t.path());
    let note = "note: building 1 cell; torch211-cxx11-cu130-x86_64-linux compiles 2 CUDA files for 2 \
                capabilities: nvcc compiles each file once per capability, expect minutes; \
                --cuda-capabilities 9.0 builds one for a quick check\n";
    let (code, err) = run(&k, &[&bin], &py, &[]);
    assert_eq!(code, 1, "{err}");
    assert!(err.starts_with(note), "{err}");
    // The fake toolkit has no CUDA runtime: the cell fails after the note, before configuring.
    assert!(err.contains("error: cannot build variant `torch211-cxx11-cu130-x86_64-linux`\n"), "{err}");
    let (code, err) = run(&k, &[&bin], &py, &["--json"]);
    assert_eq!(code, 1, "{err}");
    assert!(!err.contains("note: building"), "{err}");
    // One capability: said, without the advice.
    let (code, err) = run(&k, &[&bin], &py, &["--cuda-capabilities", "9.0"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("note: building 1 cell; torch211-cxx11-cu130-x86_64-linux compiles 2 CUDA files for 1 capability\n"),
        "{err}"
    );
}

/// A native build of a kernel that depends on cutlass, without the checkout: before anything
/// is configured, the error names the variable to set, the pinned repository, tag and commit,
/// and the commands that fetch it; `build/` is left as it was.
#[test]
fn missing_cpp_dependency_says_what_to_fetch() {
    let t = tempfile::tempdir().unwrap();
    let k = t.path().join("k");
    kernel(&k, "cpu", "");
    let toml = fs::read_to_string(k.join("build.toml")).unwrap();
    fs::write(
        k.join("build.toml"),
        toml.replace("depends = [\"torch\"]", "depends = [\"torch\", \"cutlass_3_6\"]"),
    )
    .unwrap();
    let bin = t.path().join("env/bin");
    let py = fake_python(t.path(), "null");
    script(&bin.join("cmake"), "[ \"$1\" = --version ] && echo 'cmake version 4.4.5' || exit 3");
    script(&bin.join("ninja"), "[ \"$1\" = --version ] && echo 1.13.2 || exit 3");
    script(&bin.join("c++"), "echo 'c++ (Debian 12.2.0-14+deb12u1) 12.2.0'");
    let (code, err) = run(&k, &[&bin], &py, &[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(
            "[kernel.k] depends on `cutlass_3_6`, and a native build downloads nothing: set KERNEL_BUILDER_DEP_CUTLASS_3_6 to a checkout of https://github.com/NVIDIA/cutlass at v3.6.0 (commit bf9da7b76c766d7ee7d536afc77880a4ef1f1156); fetch it with:\n    git clone https://github.com/NVIDIA/cutlass cutlass-3.6.0 && git -C cutlass-3.6.0 checkout --detach bf9da7b76c766d7ee7d536afc77880a4ef1f1156   # v3.6.0\n    export KERNEL_BUILDER_DEP_CUTLASS_3_6=\"$PWD/cutlass-3.6.0\"\n"
        ),
        "{err}"
    );
    assert!(!k.join("build").exists());
}

/// `KERNEL_BUILDER_JOBS` that is not a whole number of 1 or more is an error naming the
/// variable, before CMake is run (it would reach `ninja -j` only after configuring); `build/`
/// is left as it was.
#[test]
fn bad_kernel_builder_jobs_is_an_error_before_configuring() {
    let t = tempfile::tempdir().unwrap();
    let k = t.path().join("k");
    kernel(&k, "cpu", "");
    let bin = t.path().join("env/bin");
    let py = fake_python(t.path(), "null");
    let ran = t.path().join("cmake-ran");
    script(
        &bin.join("cmake"),
        &format!(
            "[ \"$1\" = --version ] && echo 'cmake version 4.4.5' && exit 0; touch '{}'; exit 3",
            ran.display()
        ),
    );
    script(&bin.join("ninja"), "[ \"$1\" = --version ] && echo 1.13.2 || exit 3");
    script(&bin.join("c++"), "echo 'c++ (Debian 12.2.0-14+deb12u1) 12.2.0'");
    for bad in ["0", "four"] {
        let out = crate::util::kb()
            .args(["build-and-copy", "--nix", "never", "--python", py.to_str().unwrap()])
            .arg(&k)
            .env("PATH", bin.display().to_string())
            .env_remove("CXX")
            .env("KERNEL_BUILDER_JOBS", bad)
            .env("KERNEL_BUILDER_CACHE_DIR", t.path().join("cache"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.contains(&format!(
                "KERNEL_BUILDER_JOBS is `{bad}`, not a number of parallel jobs: set it to a whole number \
                 of 1 or more (Ninja's -j), or unset it for Ninja's default\n"
            )),
            "{err}"
        );
        assert!(!err.contains("panicked"), "{err}");
        assert!(!ran.exists(), "CMake was run");
        assert!(!k.join("build").exists());
    }
}
