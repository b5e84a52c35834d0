//! The Python environment `testshell` runs a pinned cell's tests in: the cell's torch, the
//! loader (`kernels`) and pytest, importable, which the unpacked toolchain tree alone is not
//! (torch's runtime dependencies, NVIDIA's libraries for PyPI's CUDA builds, are not pinned).
//!
//! One virtual environment per torch wheel, CUDA and CPython, kept in the toolchain cache
//! (`test-envs/<key>/`, about 5 GB for PyPI's CUDA builds of torch) and made once, under a lock
//! so a second shell waits for the first. It is made at its final path, not renamed into place:
//! a venv's console scripts (`pytest`, `pip`) name their interpreter by absolute path in their
//! shebangs. The ready file, written last, says it is whole; a directory without it is an
//! interrupted attempt, removed and made again. Its torch is
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
    /// Its interpreter (`<env>/bin/python`).
    pub python: Utf8PathBuf,
    /// Its directory in the toolchain cache.
    pub dir: Utf8PathBuf,
    /// Where its torch came from, for the shell's summary.
    pub torch_from: String,
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
    let env = TestEnv { python: dir.join("bin/python"), dir: dir.clone(), torch_from };
    if !dir.join(READY).is_file() {
        std::fs::create_dir_all(&parent).with_context(|| format!("cannot create `{parent}`"))?;
        let _lock = super::store::lock_or_say(
            &store.root().join("locks").join(format!("test-env-{key}.lock")),
            &format!("testshell: waiting for another process making the test environment `{dir}`"),
        )?;
        if !dir.join(READY).is_file() {
            // A directory without the ready file is an unfinished attempt.
            if dir.exists() {
                crate::printer::stderr!(
                    "testshell: removing `{dir}`, a test environment left unfinished (interrupted), to make it again"
                );
                std::fs::remove_dir_all(&dir)
                    .with_context(|| format!("cannot remove the unfinished `{dir}`"))?;
            }
            let _registered = crate::interrupt::remove_on_interrupt(&dir, crate::interrupt::Removal::All);
            let made =
                make(store, &dir, interpreter, pinned_wheel.as_ref(), &torch.version, &torch.index, &env);
            if let Err(e) = made {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        }
    }
    if let Some(cuda) = cuda {
        check_cuda(&env.python, cuda, &torch.version, &torch.index)?;
    }
    Ok(env)
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
            let file = store.wheel(w).map_err(|e| anyhow::anyhow!("{e}"))?;
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
