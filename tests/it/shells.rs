//! `kernel-builder devshell` and `testshell`, run with `-- CMD` instead of a shell, against the
//! venv (`.venv/bin/python`: torch, cmake, ninja; made by `scripts/setup-venv.sh`; without it
//! they say SKIPPED) and relu's CPU cell built natively.

use std::path::{Path, PathBuf};

use crate::util::{copy_kernel, kb, repo};

fn venv_python() -> Option<PathBuf> {
    crate::util::venv_with_kernels("the shell tests")
}

/// `testshell DIR --python PY -- python -c CODE`.
fn testshell_python(dir: &str, py: &str, code: &str) -> (Option<i32>, String, String) {
    run(&["testshell", dir, "--python", py, "--", "python", "-c", code])
}

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = kb().args(args).output().unwrap();
    (out.status.code(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

#[test]
fn devshell_puts_the_cells_tools_on_path_and_passes_the_exit_status_on() {
    let Some(py) = venv_python() else { return };
    let py = py.to_str().unwrap();
    let relu = repo().join("kernels/relu");
    let relu = relu.to_str().unwrap();
    let (code, out, err) = run(&[
        "devshell",
        relu,
        "--python",
        py,
        "--",
        "sh",
        "-c",
        "command -v cmake; command -v ninja; command -v python; command -v pytest; test -x \"$CXX\" && echo cxx ok",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let bin = repo().join(".venv/bin");
    let bin = bin.display();
    assert_eq!(out, format!("{bin}/cmake\n{bin}/ninja\n{bin}/python\n{bin}/pytest\ncxx ok\n"));
    assert!(err.starts_with("devshell: torch "), "{err}");

    let (code, _, _) = run(&["devshell", relu, "--python", py, "--", "sh", "-c", "exit 7"]);
    assert_eq!(code, Some(7));
    // A command that is not there exits 127, as a shell says it.
    let (code, _, err) = run(&["devshell", relu, "--python", py, "--", "no-such-command-here"]);
    assert_eq!(code, Some(127), "{err}");
    assert!(err.contains("error: cannot run `no-such-command-here`"), "{err}");

    // A compiler the user's PATH finds already leaves its order alone: a wrapper of theirs
    // ahead of /usr/bin stays ahead (a fresh user's `gcc` was shadowed by all of /usr/bin).
    let t = tempfile::tempdir().unwrap();
    let wrapper = t.path().join("gcc");
    std::fs::write(&wrapper, "#!/bin/sh\necho wrapped\n").unwrap();
    std::fs::set_permissions(&wrapper, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", t.path().display(), std::env::var("PATH").unwrap());
    let out = crate::util::kb()
        .args(["devshell", relu, "--python", py, "--", "sh", "-c", "command -v gcc"])
        .env("PATH", &path)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), format!("{}\n", wrapper.display()));

    // Without --python, a kernel with no pinned cell (noarch, stable-ABI, tvm-ffi) needs it.
    let silu = repo().join("kernels/silu-and-mul");
    let silu = silu.to_str().unwrap();
    let (code, out, err) = run(&["devshell", silu, "--", "true"]);
    assert_eq!(code, Some(1));
    assert_eq!(out, "");
    assert_eq!(
        err,
        format!("error: devshell needs --python PATH here: `silu-and-mul` has no cell built from pinned wheels (only a [torch] kernel's CPU and CUDA cells are); pass the Python environment (with torch, kernels and pytest) whose toolchain the shell gets, e.g. `kernel-builder devshell {silu} --python .venv/bin/python`\n")
    );
}

#[test]
fn testshell_needs_a_built_variant_and_makes_it_importable() {
    let Some(py) = venv_python() else { return };
    let py = py.to_str().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("relu");
    copy_kernel("relu", &dir);
    let d = dir.to_str().unwrap();

    // Nothing built: an error naming what to build, and the command does not run.
    let (code, out, err) = run(&["testshell", d, "--python", py, "--", "echo", "ran"]);
    assert_eq!(code, Some(1));
    assert_eq!(out, "");
    assert!(err.contains("/relu/build` has no variant for torch "), "{err}");
    assert!(
        err.contains(&format!(
            "build it first (`kernel-builder build-and-copy {d} --nix never --python {py}`)"
        )),
        "{err}"
    );

    let version = std::process::Command::new(py)
        .args(["-c", "import torch; print(torch.__version__)"])
        .output()
        .unwrap();
    let version = String::from_utf8(version.stdout).unwrap();
    let mut parts = version.trim().split(['.', '+']);
    let cpu = format!(
        "torch{}{}-cxx11-cpu-{}-linux",
        parts.next().unwrap(),
        parts.next().unwrap(),
        std::env::consts::ARCH
    );
    let built = kb()
        .args(["build-and-copy", d, "--nix", "never", "--python", py, "--variant", &cpu])
        .env("KERNEL_BUILDER_CACHE_DIR", tmp.path().join("cache"))
        .output()
        .unwrap();
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));

    // The package, imported by name, is build/<cpu variant> (through the link on PYTHONPATH).
    let (code, out, err) = testshell_python(d, py, "import os, relu, torch; print(relu.relu(torch.tensor([-1.0, 2.0])).tolist()); print(os.path.realpath(os.path.dirname(relu.__file__)))");
    assert_eq!(code, Some(0), "{err}");
    let real = std::fs::canonicalize(dir.join("build").join(&cpu)).unwrap();
    assert_eq!(out, format!("[0.0, 2.0]\n{}\n", real.display()));
    assert!(err.contains(&format!("`import relu` loads build/{cpu}")), "{err}");

    // Both cells built: the CUDA one is taken, and `--variant` picks the CPU one, which a CUDA
    // torch runs too. (The CUDA cell here is a copy of the CPU one: only which is linked counts.)
    let cuda = std::process::Command::new(py)
        .args(["-c", "import torch; print(torch.version.cuda or '')"])
        .output()
        .unwrap();
    let cuda = String::from_utf8(cuda.stdout).unwrap().trim().replace('.', "");
    if !cuda.is_empty() {
        let cu = cpu.replace("-cpu-", &format!("-cu{cuda}-"));
        let status = std::process::Command::new("cp")
            .arg("-r")
            .arg(dir.join("build").join(&cpu))
            .arg(dir.join("build").join(&cu))
            .status()
            .unwrap();
        assert!(status.success());
        let whence = "import os, relu; print(os.path.realpath(os.path.dirname(relu.__file__)))";
        let (code, out, err) = testshell_python(d, py, whence);
        assert_eq!(code, Some(0), "{err}");
        let real_cu = std::fs::canonicalize(dir.join("build").join(&cu)).unwrap();
        assert_eq!(out, format!("{}\n", real_cu.display()));
        let (code, out, err) =
            run(&["testshell", d, "--python", py, "--variant", &cpu, "--", "python", "-c", whence]);
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(out, format!("{}\n", real.display()));
        assert!(err.contains(&format!("`import relu` loads build/{cpu}")), "{err}");
        // A variant this torch does not build is refused, naming those it does.
        let (code, _, err) = run(&["testshell", d, "--python", py, "--variant", "torch-cpu", "--", "true"]);
        assert_eq!(code, Some(1));
        assert!(err.contains("error: `torch-cpu` is not a cell that torch "), "{err}");
        assert!(err.ends_with(&format!(" builds; it builds {cu}, {cpu}\n")), "{err}");
        std::fs::remove_dir_all(dir.join("build").join(&cu)).unwrap();
    }

    // Ctrl-C reaches the command, not testshell, which waits for it, passes its status on and
    // removes the link directory.
    let (code, out, err) = run(&[
        "testshell",
        d,
        "--python",
        py,
        "--",
        "sh",
        "-c",
        "echo \"$PYTHONPATH\"; kill -INT $PPID; sleep 1; exit 3",
    ]);
    assert_eq!(code, Some(3), "{err}");
    let links = out.trim().split(':').next().unwrap();
    assert!(links.contains("kernel-builder-testshell-"), "{out}");
    assert!(!Path::new(links).exists(), "{links} was left behind");

    // SIGTERM (a CI's `timeout`) and SIGHUP end testshell: the command gets the signal, the
    // link directory goes, and the status is 128 + signal (a fresh user found it left behind).
    for (sig, status) in [("TERM", 143), ("HUP", 129)] {
        let script = format!(
            "echo \"$PYTHONPATH\"; trap 'echo got {sig}; exit 5' {sig}; kill -{sig} $PPID; sleep 5 & wait"
        );
        let (code, out, err) = run(&["testshell", d, "--python", py, "--", "sh", "-c", &script]);
        assert_eq!(code, Some(status), "{err}");
        let mut lines = out.lines();
        let links = lines.next().unwrap().split(':').next().unwrap().to_owned();
        assert_eq!(lines.next(), Some(format!("got {sig}").as_str()), "{out}");
        assert!(!Path::new(&links).exists(), "{links} was left behind: {err}");
        assert!(err.contains(&format!("interrupted (SIG{sig}); removed `{links}`")), "{err}");
    }

    // And through the `kernels` loader, from LOCAL_KERNELS (relu has no [general.hub] repo-id).
    let (code, out, err) = testshell_python(d, py, "import os, torch; from kernels import get_kernel; print(os.environ['LOCAL_KERNELS']); k = get_kernel('local/relu', version=1, backend='cpu'); print(k.relu(torch.tensor([-3.0, 4.0])).tolist())");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, format!("local/relu={}\n[0.0, 4.0]\n", Path::new(d).join("build").display()));
}

/// A `python3.13` (the CPython of the pinned torch wheels) for PATH: the directory of a link
/// to the interpreter that `python3.13` (or pyenv's 3.13) runs; `None` when there is none.
fn python313_dir(tmp: &Path) -> Option<PathBuf> {
    let probe = |env: &[(&str, &str)]| {
        let out = std::process::Command::new("python3.13")
            .args(["-c", "import sys; print(sys.executable)"])
            .envs(env.iter().copied())
            .output()
            .ok()?;
        out.status.success().then(|| String::from_utf8(out.stdout).unwrap().trim().to_owned())
    };
    let exe = probe(&[]).or_else(|| probe(&[("PYENV_VERSION", "3.13.0")]))?;
    let dir = tmp.join("py313");
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(exe, dir.join("python3.13")).unwrap();
    Some(dir)
}

/// devshell without --python: the pinned CPU cell named by --variant (and, without it, the CUDA
/// cell of the newest pinned torch, whose nvcc is on PATH), its toolchain from the
/// toolchain cache the tests share (`target/tmp/toolchain-cache`, as tests/it/pinned.rs): the
/// pins' CPython as `python`, seeing that cell's torch wheel (its metadata: importing it also
/// needs torch's runtime dependencies, which are not pinned), CMake and Ninja from their pinned
/// wheels, and `Torch_ROOT` where CMake finds TorchConfig.cmake; testshell refuses a cell whose
/// variant is not built before it makes anything. A variant that is not a pinned cell is
/// refused with the ones that are.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn devshell_without_python_gives_the_pinned_cells_toolchain() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(py313) = python313_dir(tmp.path()) else {
        eprintln!("SKIPPED: no python3.13 here (the CPython of the pinned torch wheels)");
        return;
    };
    let cache = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("toolchain-cache");
    let path = format!("{}:{}", py313.display(), std::env::var("PATH").unwrap());
    // kernel-builder ARGS with the shared toolchain cache and python3.13 on PATH.
    let pinned = |args: &[&str]| {
        let out = kb()
            .args(args)
            .env("KERNEL_BUILDER_TOOLCHAIN_CACHE_DIR", &cache)
            .env("KERNEL_BUILDER_CACHE_DIR", tmp.path().join("cells"))
            .env("PATH", &path)
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
    };
    let under_cache =
        |line: &str, tail: &str| line.starts_with(cache.to_str().unwrap()) && line.ends_with(tail);
    let relu = repo().join("kernels/relu");
    let relu = relu.to_str().unwrap();
    let script = "python -c 'import sys, importlib.metadata as m; print(\"%d.%d\" % sys.version_info[:2], m.version(\"torch\"))'; \
                  command -v cmake; command -v ninja; test -f \"$Torch_ROOT/share/cmake/Torch/TorchConfig.cmake\" && echo config ok";
    for (torch, variant) in
        [("2.14.0", "torch214-cxx11-cpu-x86_64-linux"), ("2.15.0", "torch215-cxx11-cpu-x86_64-linux")]
    {
        let (code, stdout, stderr) =
            pinned(&["devshell", relu, "--variant", variant, "--", "sh", "-c", script]);
        assert_eq!(code, Some(0), "{stderr}");
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(lines.len(), 4, "{stdout}");
        assert_eq!(lines[0], format!("3.13 {torch}"));
        assert!(under_cache(lines[1], "/cmake") && under_cache(lines[2], "/ninja"), "{stdout}");
        assert_eq!(lines[3], "config ok");
        let summary = format!("devshell: the pinned toolchain of cell {variant} (torch {torch}+cu13");
        assert!(stderr.starts_with(&summary), "{stderr}");
    }

    // No --variant: the CUDA cell of the newest torch whose wheel is pinned, with its nvcc.
    let nvcc = "nvcc --version | grep -o 'release [0-9.]*'; echo \"$CUDACXX\"";
    let (code, stdout, stderr) = pinned(&["devshell", relu, "--", "sh", "-c", nvcc]);
    assert_eq!(code, Some(0), "{stderr}");
    let summary = "devshell: the pinned toolchain of cell torch215-cxx11-cu132-x86_64-linux (torch 2.15.0";
    assert!(stderr.starts_with(summary), "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "release 13.2", "{stdout}");
    assert!(under_cache(lines[1], "/nvidia/cu13/bin/nvcc"), "{stdout}");

    // testshell: the same toolchain, and the variant of build/ that is the cell's importable.
    let dir = tmp.path().join("relu");
    copy_kernel("relu", &dir);
    let d = dir.to_str().unwrap();
    let cpu = "torch214-cxx11-cpu-x86_64-linux";
    let link = "readlink \"${PYTHONPATH%%:*}/relu\"";
    let (code, _, stderr) = pinned(&["testshell", d, "--variant", cpu, "--", "sh", "-c", link]);
    assert_eq!(code, Some(1));
    let build_first =
        format!("build it first (`kernel-builder build-and-copy {d} --nix never --variant {cpu}`)");
    assert!(stderr.contains(&build_first), "{stderr}");
    // (With the variant built, testshell makes the cell's test environment and runs the
    // kernel's own tests in it: tests/python/test_pinned_cpu_cells.py.)

    let (code, _, stderr) =
        pinned(&["devshell", relu, "--variant", "torch214-cxx11-cpu-aarch64-linux", "--", "true"]);
    assert_eq!(code, Some(1));
    assert_eq!(
        stderr,
        "error: `torch214-cxx11-cpu-aarch64-linux` is not a pinned cell of `relu` on this system; these are: torch214-cxx11-cpu-x86_64-linux, torch214-cxx11-cu130-x86_64-linux, torch215-cxx11-cpu-x86_64-linux, torch215-cxx11-cu132-x86_64-linux\nhint: `torch214-cxx11-cpu-aarch64-linux` is a name for aarch64-linux, and this machine builds x86_64-linux's variants: one of aarch64-linux is built on such a machine, or through Nix with a remote builder of that system (`--builders`)\n"
    );
    // The names of a user's trial: a kernels 0.19 spelling, a typo, and a matrix cell whose
    // torch wheel has no hash pinned (it was listed as "pinned", then failed to provision).
    let (code, _, stderr) = pinned(&[
        "devshell",
        relu,
        "--variant",
        "torch-2.15-cxx11-cuda-13.2-cpython-3.9-abi3-x86_64-linux",
        "--",
        "true",
    ]);
    assert_eq!(code, Some(1));
    assert!(stderr.ends_with("\nhint: `torch-2.15-cxx11-cuda-13.2-cpython-3.9-abi3-x86_64-linux` is the kernels 0.19 spelling of `torch215-cxx11-cu132-x86_64-linux`; name variants the legacy way, as `list-variants` prints them (`--names both` shows the two)\n"), "{stderr}");
    let (code, _, stderr) = pinned(&["devshell", relu, "--variant", "a\nb", "--", "true"]);
    assert_eq!(code, Some(1));
    assert!(stderr.starts_with("error: `a\\nb` is not a pinned cell of `relu`"), "{stderr}");
    let (code, _, stderr) =
        pinned(&["devshell", relu, "--variant", "torch215-cxx11-cpu-x86_64-linx", "--", "true"]);
    assert_eq!(code, Some(1));
    assert!(stderr.ends_with("\nhint: did you mean `torch215-cxx11-cpu-x86_64-linux`?\n"), "{stderr}");
    let (code, _, stderr) =
        pinned(&["devshell", relu, "--variant", "torch214-cxx11-cu126-x86_64-linux", "--", "true"]);
    assert_eq!(code, Some(1));
    assert_eq!(
        stderr,
        "error: `torch214-cxx11-cu126-x86_64-linux` is a cell of `relu` whose torch wheel has no hash pinned here (nix/torch-wheels.json), so devshell cannot provision it; pick a pinned one (torch214-cxx11-cpu-x86_64-linux, torch214-cxx11-cu130-x86_64-linux, torch215-cxx11-cpu-x86_64-linux, torch215-cxx11-cu132-x86_64-linux), or pass --python with an environment that has that torch\n"
    );
}

/// A CUDA torch without an nvcc: `--variant` of its CUDA cell says what is missing (it was
/// told "not a cell that torch builds"), and without `--variant` the shell says why it is for
/// the CPU cell (it said nothing). The case of a user's trial: a venv that sees the torch of
/// `.venv` through a `.pth` file, and so none of its `nvidia/*/bin`.
#[test]
fn a_cuda_cell_without_nvcc_is_said_to_want_one() {
    let Some(py) = venv_python() else { return };
    let site = std::process::Command::new(&py)
        .args(["-c", "import torch, os, sys; print(torch.version.cuda or ''); print(os.path.dirname(os.path.dirname(torch.__file__)))"])
        .output()
        .unwrap();
    let site = String::from_utf8(site.stdout).unwrap();
    let mut lines = site.lines();
    let (cuda, site) = (lines.next().unwrap().to_owned(), lines.next().unwrap().to_owned());
    if cuda.is_empty() {
        eprintln!("SKIPPED: the venv's torch is not a CUDA build");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let venv = t.path().join("v");
    let made =
        std::process::Command::new(&py).args(["-m", "venv", "--without-pip"]).arg(&venv).status().unwrap();
    assert!(made.success());
    let own_site = std::process::Command::new(venv.join("bin/python"))
        .args(["-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
        .output()
        .unwrap();
    let own_site = PathBuf::from(String::from_utf8(own_site.stdout).unwrap().trim());
    std::fs::write(own_site.join("seen.pth"), format!("{site}\n")).unwrap();
    let vpy = venv.join("bin/python");
    let vpy = vpy.to_str().unwrap();
    let relu = repo().join("kernels/relu");
    let relu = relu.to_str().unwrap();
    let version = std::process::Command::new(vpy)
        .args(["-c", "import torch; print(torch.__version__)"])
        .output()
        .unwrap();
    let version = String::from_utf8(version.stdout).unwrap();
    let mut parts = version.trim().split(['.', '+']);
    let torch = format!("torch{}{}", parts.next().unwrap(), parts.next().unwrap());
    let arch = std::env::consts::ARCH;
    let cu = format!("{torch}-cxx11-cu{}-{arch}-linux", cuda.replace('.', ""));
    let shell = |args: &[&str]| {
        let out = kb()
            .arg("devshell")
            .arg(relu)
            .args(["--python", vpy])
            .args(args)
            .args(["--", "true"])
            // The venv's cmake and ninja (no nvcc there: it lies in site-packages).
            .env("PATH", format!("{}:/usr/bin:/bin", py.parent().unwrap().display()))
            .env_remove("CUDACXX")
            .env_remove("CUDA_HOME")
            .env("KERNEL_BUILDER_CACHE_DIR", t.path().join("cache"))
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8(out.stderr).unwrap())
    };
    let (code, err) = shell(&["--variant", &cu]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.starts_with(&format!(
            "error: `{cu}` cannot be built with `{vpy}` here: no nvcc for CUDA {cuda} (looked at "
        )),
        "{err}"
    );
    let (code, err) = shell(&[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.starts_with(&format!(
            "note: the shell is for `{torch}-cxx11-cpu-{arch}-linux`: no cuda cell with `{vpy}` here: no nvcc for CUDA {cuda}"
        )),
        "{err}"
    );
}
