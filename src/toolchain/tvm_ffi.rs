//! The `tvm_ffi` package of a Python environment, as a `[tvm-ffi]` cell's toolchain: where
//! its headers and `libtvm_ffi.so` are and which version it is ([`TvmFfiFacts`], found by
//! [`probe`]). What a tvm-ffi cell does with them is [`crate::assemble::tvm_ffi`].
//!
//! The probe does not import `tvm_ffi`: importing it imports torch when torch is installed
//! (seconds). It finds the package with `importlib.util.find_spec` and reads its version from
//! the package's own `_version.py`, the module `tvm_ffi.__version__` comes from.

use camino::{Utf8Path, Utf8PathBuf};
use serde::{Deserialize, Serialize};

use crate::config::Version;
use crate::error::{Error, Kind};

/// What the `tvm_ffi` package of a Python environment offers a build.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TvmFfiFacts {
    /// `tvm_ffi.__version__`, e.g. `0.1.15.post2`.
    pub version: String,
    /// The `tvm_ffi` package directory (site-packages/tvm_ffi).
    pub package_dir: Utf8PathBuf,
    /// `sysconfig.get_paths()["purelib"]` (site-packages, where PyPI's nvidia wheels live).
    pub purelib: Utf8PathBuf,
    /// `sys.executable`.
    pub executable: Utf8PathBuf,
    /// `X.Y` of the interpreter.
    pub python_version: String,
}

impl TvmFfiFacts {
    /// The header directory: `tvm/ffi/…` and `dlpack/dlpack.h` are below it.
    pub fn include_dir(&self) -> Utf8PathBuf {
        self.package_dir.join("include")
    }

    /// The shared library every tvm-ffi module links (`lib/libtvm_ffi.so`).
    pub fn library(&self) -> Utf8PathBuf {
        self.package_dir.join("lib/libtvm_ffi.so")
    }

    /// The file `tvm_ffi.__version__` is read from; a reinstall changes it.
    pub fn version_file(&self) -> Utf8PathBuf {
        self.package_dir.join("_version.py")
    }

    /// The libraries a cell links, as full paths: `libtvm_ffi.so`.
    pub fn link_libraries(&self) -> Vec<Utf8PathBuf> {
        vec![self.library()]
    }

    /// The version's `major.minor` (`0.1.15.post2` → `0.1`), what names the variant.
    ///
    /// Errors ([`Kind::Toolchain`]): a version that does not start with `MAJOR.MINOR`.
    pub fn major_minor(&self) -> anyhow::Result<Version> {
        let parts: Vec<&str> = self.version.split(['.', '+']).take(2).collect();
        let ok =
            parts.len() == 2 && parts.iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
        if !ok {
            return Err(Error::new(
                Kind::Toolchain,
                format!(
                    "tvm_ffi in `{}` reports version `{}`, which does not start with MAJOR.MINOR; reinstall it (`{} -m pip install --force-reinstall apache-tvm-ffi`)",
                    self.package_dir, self.version, self.executable
                ),
            )
            .into());
        }
        Version::parse(&parts.join("."))
    }
}

/// The Python program that reports [`TvmFfiFacts`] as JSON, or exits with 3 when the
/// environment has no `tvm_ffi`.
const PROBE: &str = r#"
import importlib.util, json, os, runpy, sys, sysconfig
spec = importlib.util.find_spec("tvm_ffi")
if spec is None or not spec.submodule_search_locations:
    sys.exit(3)
pkg = os.path.realpath(list(spec.submodule_search_locations)[0])
version = runpy.run_path(os.path.join(pkg, "_version.py")).get("__version__")
print(json.dumps({
    "version": version,
    "package_dir": pkg,
    "purelib": sysconfig.get_paths()["purelib"],
    "executable": sys.executable,
    "python_version": "%d.%d" % sys.version_info[:2],
}))
"#;

/// Find `tvm_ffi` in the Python environment `python` (a path or a name on PATH) and check
/// that it has what a build needs.
///
/// Errors (of [`Kind::Toolchain`], each says what to install or pass): the interpreter cannot
/// be run; it has no `tvm_ffi` (install `apache-tvm-ffi` there); the package has no version,
/// no headers or no `libtvm_ffi.so` (a broken or source-tree install).
pub fn probe(python: &Utf8Path) -> anyhow::Result<TvmFfiFacts> {
    let unusable = |message: String| anyhow::Error::from(Error::new(Kind::Toolchain, message));
    let out = crate::process::Cmd::new(python.as_str()).args(["-c", PROBE]).output().map_err(|e| {
        unusable(format!(
            "cannot run the Python interpreter `{python}` ({}); pass --python PATH to a Python with tvm-ffi (`pip install apache-tvm-ffi`)",
            std::error::Error::source(&e).map_or_else(|| e.to_string(), |c| c.to_string())
        ))
    })?;
    if out.status.code() == Some(3) {
        return Err(unusable(format!(
            "`{python}` has no tvm_ffi, which a `[tvm-ffi]` kernel is built against; install it there (`{python} -m pip install apache-tvm-ffi`) or pass --python PATH to a Python that has it"
        )));
    }
    if !out.success() {
        let err = &out.stderr;
        let detail = if err.trim().is_empty() {
            format!("it exited with {} and printed nothing; is it a Python with tvm-ffi?", out.status)
        } else {
            crate::output::tail(err, 20)
        };
        return Err(unusable(format!("`{python}` could not report tvm_ffi's build facts:\n{detail}")));
    }
    #[derive(Deserialize)]
    struct Raw {
        version: Option<String>,
        package_dir: Utf8PathBuf,
        purelib: Utf8PathBuf,
        executable: Utf8PathBuf,
        python_version: String,
    }
    let raw: Raw = serde_json::from_str(&out.stdout)
        .map_err(|e| unusable(format!("`{python}` printed unexpected tvm_ffi facts ({e})")))?;
    let reinstall =
        format!("reinstall it (`{} -m pip install --force-reinstall apache-tvm-ffi`)", raw.executable);
    let version = raw.version.filter(|v| !v.is_empty()).ok_or_else(|| {
        unusable(format!("tvm_ffi in `{}` has no version in its `_version.py`; {reinstall}", raw.package_dir))
    })?;
    let facts = TvmFfiFacts {
        version,
        package_dir: raw.package_dir,
        purelib: raw.purelib,
        executable: raw.executable,
        python_version: raw.python_version,
    };
    for needed in [
        facts.include_dir().join("tvm/ffi/c_api.h"),
        facts.include_dir().join("dlpack/dlpack.h"),
        facts.library(),
    ] {
        if !needed.is_file() {
            return Err(unusable(format!(
                "tvm_ffi {} in `{}` has no `{}`, which a build needs (a source checkout or a broken install); {reinstall}",
                facts.version,
                facts.package_dir,
                needed.strip_prefix(&facts.package_dir).unwrap_or(&needed)
            )));
        }
    }
    Ok(facts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(version: &str) -> TvmFfiFacts {
        TvmFfiFacts {
            version: version.into(),
            package_dir: "/sp/tvm_ffi".into(),
            purelib: "/sp".into(),
            executable: "/venv/bin/python".into(),
            python_version: "3.11".into(),
        }
    }

    #[test]
    fn major_minor_names_the_variant() {
        for (v, want) in [("0.1.15.post2", "0.1"), ("0.1.0", "0.1"), ("1.12", "1.12"), ("0.2+local", "0.2")] {
            assert_eq!(facts(v).major_minor().unwrap().to_string(), want, "{v}");
        }
        let err = facts("dev").major_minor().unwrap_err();
        assert_eq!(crate::error::kind(&err), Kind::Toolchain);
        assert_eq!(
            err.to_string(),
            "tvm_ffi in `/sp/tvm_ffi` reports version `dev`, which does not start with MAJOR.MINOR; reinstall it (`/venv/bin/python -m pip install --force-reinstall apache-tvm-ffi`)"
        );
        assert_eq!(facts("0.1.15").library(), Utf8PathBuf::from("/sp/tvm_ffi/lib/libtvm_ffi.so"));
        assert_eq!(facts("0.1.15").include_dir(), Utf8PathBuf::from("/sp/tvm_ffi/include"));
    }

    #[test]
    fn a_python_without_tvm_ffi_says_what_to_install() {
        // The system Python of the test machine, or any: `-S` keeps site-packages out, so
        // tvm_ffi cannot be found. A wrapper script passes it.
        let t = tempfile::tempdir().unwrap();
        let d = Utf8Path::from_path(t.path()).unwrap();
        let py = d.join("python");
        std::fs::write(&py, "#!/bin/sh\nexec python3 -S -I \"$@\"\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&py, std::fs::Permissions::from_mode(0o755)).unwrap();
        let err = probe(&py).unwrap_err().to_string();
        assert_eq!(
            err,
            format!("`{py}` has no tvm_ffi, which a `[tvm-ffi]` kernel is built against; install it there (`{py} -m pip install apache-tvm-ffi`) or pass --python PATH to a Python that has it")
        );
        let err = probe(Utf8Path::new("/nonexistent/python")).unwrap_err().to_string();
        assert!(err.starts_with("cannot run the Python interpreter `/nonexistent/python` ("), "{err}");
    }
}
