//! The Python environment `testshell` runs a pinned cell's tests in: the cell's torch, the
//! loader (`kernels`) and pytest, importable, which the unpacked toolchain tree alone is not
//! (torch's runtime dependencies, NVIDIA's libraries for PyPI's CUDA builds, are not pinned).
//!
//! One virtual environment per torch wheel, CUDA and CPython, kept in the toolchain cache
//! (`test-envs/<key>/`, about 5 GB for PyPI's CUDA builds of torch) and made once, under a lock
//! so a second shell waits for the first. It is made at its final path, not renamed into place:
//! a venv's console scripts (`pytest`, `pip`) name their interpreter by absolute path in their
//! shebangs. The ready file says it is whole; a directory without it is an interrupted
//! attempt, removed and made again. Once whole it is sealed ([`super::seal`]): read-only, with
//! a manifest checked on every use, so that one kernel's tests cannot change what another's
//! run with; one that differs (a test as root wrote `sitecustomize.py` or changed a torch
//! file) is removed and made again, with a warning.
//!
//! A shell never runs in the shared environment itself: [`overlay`] makes a small virtual
//! environment for that one shell (in its temporary directory, removed when it exits) whose
//! site-packages reach the shared one's through a `.pth` file, with the shared console scripts
//! (`pytest`, `pip`) rewritten to run its interpreter. What a kernel's tests install or write
//! into `site.getsitepackages()` lands there and goes with the shell. Its torch is
//! - the pinned wheel itself (sha256-checked, from the cache) when the interpreter is the
//!   pins' CPython (`python3.13`);
//! - else the same torch release for the interpreter at hand, from the pin's index. PyPI's
//!   default build of a release has one CUDA: a CUDA cell of another CUDA is refused here,
//!   naming the index that has it, rather than testing against the wrong runtime.
//!
//! The dependencies beside torch (what torch declares, `kernels`, pytest) come from PyPI,
//! resolved by pip when the environment is made: not pinned, which the shell's summary says.

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};

use super::pins::{CellPins, ResolvedWheel};
use super::store::{Store, TEST_ENV_READY as READY};

/// The loader release the built trees are checked with (README, tests/python).
pub const KERNELS_LOADER: &str = "kernels==0.17.2";
/// The test runner.
pub const PYTEST: &str = "pytest";
/// The index of everything but a torch pinned elsewhere.
const PYPI: &str = "https://pypi.org/simple";

/// A made environment.
#[derive(Debug, Clone)]
pub struct TestEnv {
    /// Its interpreter (`<env>/bin/python`; after [`overlay`], the overlay's).
    pub python: Utf8PathBuf,
    /// Its directory in the toolchain cache.
    pub dir: Utf8PathBuf,
    /// Where its torch came from, for the shell's summary.
    pub torch_from: String,
    /// The shell's own environment over it ([`overlay`]).
    pub overlay: Option<Utf8PathBuf>,
}

/// The environment of the cell whose pins are `pins` (`cuda`: the cell's CUDA, `None` for a
/// CPU cell) for `interpreter`, made if missing. `pins_python`: the CPython of the pins
/// (`3.13`).
pub fn provision(
    store: &Store,
    pins: &CellPins<'_>,
    cuda: Option<&str>,
    interpreter: &Utf8Path,
    pins_python: &str,
) -> anyhow::Result<TestEnv> {
    let version = python_version(interpreter)?;
    let torch = &pins.torch;
    let pinned_wheel: Option<ResolvedWheel> =
        if version == pins_python { torch.resolved().ok() } else { None };
    // Named for what it holds: the pinned wheel's build, or the index's default build.
    let build = match &pinned_wheel {
        Some(_) => pins.torch_framework.clone(),
        None if torch.index.trim_end_matches('/') == PYPI => "pypi".to_owned(),
        None => torch.index.trim_end_matches('/').rsplit('/').next().unwrap_or("index").to_owned(),
    };
    let key = format!("torch-{}-{build}-cp{}", torch.version, version.replace('.', ""));
    let parent = store.root().join("test-envs");
    let dir = parent.join(&key);
    let torch_from = match &pinned_wheel {
        Some(w) => format!("the pinned wheel {}", w.file),
        None => format!("torch=={} from {} for CPython {version}", torch.version, torch.index),
    };
    let env = TestEnv { python: dir.join("bin/python"), dir: dir.clone(), torch_from, overlay: None };
    store.mark_used(&dir);
    std::fs::create_dir_all(&parent).with_context(|| format!("cannot create `{parent}`"))?;
    let lock = || {
        super::store::lock_or_say(
            &store.root().join("locks").join(format!("test-env-{key}.lock")),
            &format!("testshell: waiting for another process making the test environment `{dir}`"),
        )
    };
    ensure(&dir, lock, || {
        make(store, &dir, interpreter, pinned_wheel.as_ref(), &torch.version, &torch.index, &env)
    })?;
    if let Some(cuda) = cuda {
        check_cuda(&env.python, cuda, &torch.version, &torch.index)?;
    }
    Ok(env)
}

/// Make sure `dir` is a whole environment that matches its manifest: when it is not (missing,
/// unfinished, or changed since it was made), under `lock`, remove what is there and `make`
/// it again, then seal it.
fn ensure<L>(
    dir: &Utf8Path,
    lock: impl Fn() -> anyhow::Result<L>,
    make: impl FnOnce() -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let whole = |dir: &Utf8Path| -> anyhow::Result<Result<(), String>> {
        if !dir.join(READY).is_file() {
            return Ok(Err(String::new()));
        }
        Ok(super::seal::check(dir)?.map(|_| ()).map_err(|d| d.0))
    };
    if whole(dir)?.is_ok() {
        return Ok(());
    }
    let _lock = lock()?;
    match whole(dir)? {
        Ok(()) => return Ok(()),
        Err(why) if dir.exists() => {
            // No ready file: an unfinished attempt; a ready one that differs was changed.
            if why.is_empty() {
                crate::printer::stderr!(
                    "testshell: removing `{dir}`, a test environment left unfinished (interrupted), to make it again"
                );
            } else {
                crate::printer::stderr!(
                    "warning: the test environment `{dir}` changed since it was made ({why}): something run in it (a kernel's tests?) wrote there; removing it to make it again"
                );
            }
            super::seal::remove(dir).with_context(|| format!("cannot remove `{dir}`"))?;
        }
        Err(_) => {}
    }
    let _registered = crate::interrupt::remove_on_interrupt(dir, crate::interrupt::Removal::All);
    let made = make().and_then(|()| super::seal::seal(dir, None).map(|_| ()));
    if let Err(e) = made {
        let _ = super::seal::remove(dir);
        return Err(e);
    }
    Ok(())
}

/// This shell's own environment over `env` (the shared, sealed one), made in `into` (the
/// shell's temporary directory): a venv of the same interpreter whose site-packages reach
/// `env`'s through a `.pth` file (after its own, so what the shell installs comes first), and
/// `env`'s console scripts with their shebang naming its interpreter. What a kernel's tests
/// write to their site-packages stays there and goes with the shell.
pub fn overlay(env: &TestEnv, into: &Utf8Path) -> anyhow::Result<TestEnv> {
    let dir = into.join("env");
    crate::process::Cmd::new(env.python.as_str())
        .args(["-m", "venv", "--without-pip", dir.as_str()])
        .run()
        .map_err(|e| {
        anyhow::anyhow!("cannot make this shell's environment over `{}`: {}", env.dir, e.one_line())
    })?;
    let python = dir.join("bin/python");
    let purelib = |py: &Utf8Path| -> anyhow::Result<Utf8PathBuf> {
        let out = crate::process::Cmd::new(py.as_str())
            .args(["-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .run()
            .map_err(|e| {
                anyhow::anyhow!("cannot ask `{py}` where its site-packages are: {}", e.one_line())
            })?;
        Ok(Utf8PathBuf::from(out.stdout.trim()))
    };
    let shared = purelib(&env.python)?;
    let own = purelib(&python)?;
    std::fs::write(own.join("_kernel_builder_shared_test_env.pth"), format!("{shared}\n"))
        .with_context(|| format!("cannot write the `.pth` file in `{own}`"))?;
    // The shared console scripts, run by this interpreter (pip writes `#!<env>/bin/python…`).
    let bin = env.dir.join("bin");
    let shebang = format!("#!{bin}/python");
    for e in bin.read_dir_utf8().with_context(|| format!("cannot list `{bin}`"))? {
        let e = e.with_context(|| format!("cannot list `{bin}`"))?;
        let to = dir.join("bin").join(e.file_name());
        if !e.file_type().is_ok_and(|t| t.is_file()) || to.exists() {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(e.path()) else { continue };
        let Some((first, rest)) = text.split_once('\n') else { continue };
        // A long path is run through `/bin/sh` (`'''exec' "<env>/bin/python" "$0" "$@"`).
        let sh_exec = format!("'''exec' \"{bin}/python");
        let script = if first.starts_with(&shebang) && !first[shebang.len()..].contains(char::is_whitespace) {
            format!("#!{python}\n{rest}")
        } else if first == "#!/bin/sh" && rest.starts_with(&sh_exec) {
            let interpreter_end = rest[sh_exec.len()..].find('"').map_or(rest.len(), |i| i + sh_exec.len());
            format!("{first}\n'''exec' \"{python}{}", &rest[interpreter_end..])
        } else {
            continue;
        };
        std::fs::write(&to, script).with_context(|| format!("cannot write `{to}`"))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755))
            .with_context(|| format!("cannot make `{to}` executable"))?;
    }
    Ok(TestEnv { python, overlay: Some(dir), ..env.clone() })
}

/// Make the environment in `tmp` (its final path): a venv of `interpreter`, then torch
/// (`wheel`, else `torch==version` from `index`), the loader and pytest.
fn make(
    store: &Store,
    tmp: &Utf8Path,
    interpreter: &Utf8Path,
    wheel: Option<&ResolvedWheel>,
    version: &str,
    index: &str,
    env: &TestEnv,
) -> anyhow::Result<()> {
    crate::printer::stderr!(
        "testshell: making the test environment `{}` once: {} with its dependencies, {KERNELS_LOADER} and {PYTEST} (about 5 GB for a CUDA build of torch)",
        env.dir, env.torch_from
    );
    crate::process::Cmd::new(interpreter.as_str()).args(["-m", "venv", tmp.as_str()]).run().map_err(|e| {
        anyhow::anyhow!("cannot make a virtual environment with `{interpreter}`: {}", e.one_line())
    })?;
    let mut install: Vec<String> =
        ["-m", "pip", "install", "--no-cache-dir", "--progress-bar", "off", "--disable-pip-version-check"]
            .map(str::to_owned)
            .to_vec();
    match wheel {
        Some(w) => {
            let file = store.wheel(w)?;
            // pip reads the distribution's name and version from the file name.
            let named = tmp.join(&w.file);
            std::fs::hard_link(&file, &named)
                .or_else(|_| std::fs::copy(&file, &named).map(|_| ()))
                .with_context(|| format!("cannot place `{file}` in `{tmp}`"))?;
            install.push(named.to_string());
        }
        None => {
            install.push(format!("torch=={version}"));
            if index.trim_end_matches('/') != PYPI {
                install.extend([
                    "--index-url".into(),
                    index.to_owned(),
                    "--extra-index-url".into(),
                    PYPI.into(),
                ]);
            }
        }
    }
    install.extend([KERNELS_LOADER.to_owned(), PYTEST.to_owned()]);
    let pip = crate::process::Cmd::new(tmp.join("bin/python").as_str()).args(install);
    let streamed = pip.stream(
        0,
        |_| {},
        |line| crate::printer::stderr!("  pip: {}", crate::printer::escape_controls(line)),
    )?;
    if !streamed.status.success() {
        anyhow::bail!(
            "cannot install the test environment's packages (`{}`): pip exited with {}, its output is above; pass --python PATH to test with an environment of your own",
            pip.display(),
            streamed.status
        );
    }
    if let Some(w) = wheel {
        let _ = std::fs::remove_file(tmp.join(&w.file));
    }
    std::fs::write(tmp.join(READY), format!("{}\n", env.torch_from))
        .with_context(|| format!("cannot write `{tmp}/{READY}`"))
}

/// `major.minor` of `interpreter`.
fn python_version(interpreter: &Utf8Path) -> anyhow::Result<String> {
    let out = crate::process::Cmd::new(interpreter.as_str())
        .args(["-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
        .run()
        .map_err(|e| anyhow::anyhow!("cannot ask `{interpreter}` its version: {}", e.one_line()))?;
    Ok(out.stdout.trim().to_owned())
}

/// The installed torch's CUDA is the cell's `cuda` (major.minor), else an error naming where
/// the right build is.
fn check_cuda(python: &Utf8Path, cuda: &str, version: &str, index: &str) -> anyhow::Result<()> {
    let out = crate::process::Cmd::new(python.as_str())
        .args(["-c", "import torch; print(torch.version.cuda or '')"])
        // The sealed environment stays as it was made (a root user would write bytecode).
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .run()
        .map_err(|e| anyhow::anyhow!("the test environment's torch does not import: {}", e.one_line()))?;
    let got = out.stdout.trim();
    let major_minor = |v: &str| v.split('.').take(2).collect::<Vec<_>>().join(".");
    if major_minor(got) != major_minor(cuda) {
        let what = if got.is_empty() { "a CPU build".to_owned() } else { format!("a CUDA {got} build") };
        anyhow::bail!(
            "torch {version} from {index} for this Python is {what}, not this cell's CUDA {cuda}: pass --python PATH with an environment that has torch {version}+cu{} (from PyTorch's index, https://download.pytorch.org/whl/cu{})",
            cuda.replace('.', ""),
            cuda.replace('.', "")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utf8(t: &tempfile::TempDir) -> Utf8PathBuf {
        Utf8Path::from_path(t.path()).unwrap().to_owned()
    }

    /// Issue 31: a test that wrote `sitecustomize.py` into the shared test environment ran in
    /// another kernel's testshell. The environment is sealed when made; one changed since is
    /// removed and made again, with a warning, before any shell uses it.
    #[test]
    fn a_changed_test_environment_is_made_again() {
        let t = tempfile::tempdir().unwrap();
        let dir = utf8(&t).join("torch-9.9.9-cpu-cp313");
        let made = std::cell::Cell::new(0);
        let make = || {
            made.set(made.get() + 1);
            std::fs::create_dir_all(dir.join("lib/site-packages/torch")).unwrap();
            std::fs::write(dir.join("lib/site-packages/torch/__init__.py"), "x = 1\n").unwrap();
            std::fs::write(dir.join(READY), "the pinned wheel\n").unwrap();
            Ok(())
        };
        let lock = || Ok(());
        ensure(&dir, lock, make).unwrap();
        assert_eq!(made.get(), 1);
        assert_eq!(std::fs::metadata(dir.join("lib/site-packages")).unwrap().permissions().mode() & 0o222, 0);
        ensure(&dir, lock, make).unwrap();
        assert_eq!(made.get(), 1, "a whole, unchanged environment is used as it is");

        // What a kernel's test run as root could do: plant a file in site-packages.
        std::fs::set_permissions(dir.join("lib/site-packages"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        std::fs::write(dir.join("lib/site-packages/sitecustomize.py"), "print('planted')\n").unwrap();
        assert_eq!(
            super::super::seal::check(&dir).unwrap().unwrap_err().to_string(),
            "`lib/site-packages/sitecustomize.py` was added"
        );
        ensure(&dir, lock, make).unwrap();
        assert_eq!(made.get(), 2);
        assert!(!dir.join("lib/site-packages/sitecustomize.py").exists());
        assert!(super::super::seal::check(&dir).unwrap().is_ok());
    }

    use std::os::unix::fs::PermissionsExt;

    /// Each shell runs in its own environment over the shared one: the shared packages import,
    /// the console scripts run its interpreter, and what its tests write to their
    /// site-packages (`sitecustomize.py`) lands there, not in the shared environment, so the
    /// next shell never runs it.
    #[test]
    fn a_shells_own_environment_keeps_what_its_tests_write() {
        let t = tempfile::tempdir().unwrap();
        let root = utf8(&t);
        let shared = root.join("shared");
        crate::process::Cmd::new("python3")
            .args(["-m", "venv", "--without-pip", shared.as_str()])
            .run()
            .unwrap();
        let purelib = |py: &Utf8Path| {
            let out = crate::process::Cmd::new(py.as_str())
                .args(["-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
                .run()
                .unwrap();
            Utf8PathBuf::from(out.stdout.trim())
        };
        let site = purelib(&shared.join("bin/python"));
        std::fs::write(site.join("shared_pkg.py"), "WHERE = 'shared'\n").unwrap();
        // A console script as pip writes it.
        std::fs::write(
            shared.join("bin/where"),
            format!("#!{shared}/bin/python\nimport sys, shared_pkg\nprint(sys.prefix, shared_pkg.WHERE)\n"),
        )
        .unwrap();
        std::fs::set_permissions(shared.join("bin/where"), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(shared.join(READY), "test\n").unwrap();
        super::super::seal::seal(&shared, None).unwrap();
        let env = TestEnv {
            python: shared.join("bin/python"),
            dir: shared.clone(),
            torch_from: "test".into(),
            overlay: None,
        };

        let one = root.join("one");
        std::fs::create_dir_all(&one).unwrap();
        let own = overlay(&env, &one).unwrap();
        assert_eq!(own.python, one.join("env/bin/python"));
        assert_eq!(own.overlay.as_deref(), Some(one.join("env").as_path()));
        let out = crate::process::Cmd::new(one.join("env/bin/where").as_str()).run().unwrap();
        assert_eq!(out.stdout, format!("{one}/env shared\n"));
        // A test writes sitecustomize.py where `site` says site-packages are.
        let plant = "import site, pathlib; p = pathlib.Path(site.getsitepackages()[0], 'sitecustomize.py'); p.write_text('print(\"planted\")\\n'); print(p)";
        let own_site = purelib(&own.python);
        assert_eq!(own_site.parent().unwrap().parent().unwrap().parent().unwrap(), one.join("env"));
        let out = crate::process::Cmd::new(own.python.as_str()).args(["-c", plant]).run().unwrap();
        assert_eq!(out.stdout.trim(), own_site.join("sitecustomize.py").as_str());
        let out = crate::process::Cmd::new(own.python.as_str()).args(["-c", "pass"]).run().unwrap();
        assert_eq!(out.stdout, "planted\n", "this shell's own environment keeps it");
        assert!(super::super::seal::check(&shared).unwrap().is_ok(), "the shared environment is untouched");

        // Another shell (another kernel's) does not run it.
        let two = root.join("two");
        std::fs::create_dir_all(&two).unwrap();
        let other = overlay(&env, &two).unwrap();
        let out = crate::process::Cmd::new(other.python.as_str())
            .args(["-c", "import shared_pkg; print(shared_pkg.WHERE)"])
            .run()
            .unwrap();
        assert_eq!(out.stdout, "shared\n");
    }
}
