//! The known-dependency tables: Python packages for `python-depends` and C++ libraries for a
//! kernel's `depends`.
//!
//! The Python table is `python_dependencies.json` (embedded), with the same structure as
//! upstream's `kernels-data/src/python_dependencies.json`:
//! `{"general": {name: Entry}, "backends": {backend: {name: Entry}}}` where
//! `Entry = {"nix": [python3.pkgs attribute], "python": [{"pkg": PyPI name, "import"?: module}]}`.
//! A backend missing from `backends` (cann, tpu) has no Python dependencies at all.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Deserialize;

use super::model::{Backend, CppDependency};

/// One known Python dependency.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Entry {
    /// Attributes of `python3.pkgs` that provide it in Nix builds and shells.
    pub nix: Vec<String>,
    /// PyPI packages (for `pyproject.toml`) and the module each one imports.
    pub python: Vec<PythonPackage>,
}

/// A PyPI package and the module name the `kernels` loader imports to check it is installed.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PythonPackage {
    /// The PyPI distribution name (`apache-tvm-ffi`).
    pub pkg: String,
    /// The module to import (`tvm_ffi`); absent when there is none to check.
    #[serde(default)]
    pub import: Option<String>,
}

/// The whole Python dependency table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PythonDependencies {
    /// Names allowed in `general.python-depends`.
    pub general: BTreeMap<String, Entry>,
    /// Names allowed in `[general.<backend>].python-depends`, per backend name.
    pub backends: BTreeMap<String, BTreeMap<String, Entry>>,
}

const PYTHON_DEPENDENCIES_JSON: &str = include_str!("python_dependencies.json");

/// The embedded Python dependency table.
pub fn python_dependencies() -> &'static PythonDependencies {
    static TABLE: OnceLock<PythonDependencies> = OnceLock::new();
    TABLE.get_or_init(|| {
        // The file is part of the binary and checked by a unit test, not user input.
        serde_json::from_str(PYTHON_DEPENDENCIES_JSON)
            .expect("embedded python_dependencies.json is valid (checked by a unit test)")
    })
}

/// Look up a Python dependency: `backend = None` searches the general table, `Some(b)` only
/// that backend's table (`None` when the backend has no table, as for cann and tpu).
pub fn python_dependency(name: &str, backend: Option<Backend>) -> Option<&'static Entry> {
    let t = python_dependencies();
    match backend {
        None => t.general.get(name),
        Some(b) => t.backends.get(b.as_str())?.get(name),
    }
}

/// The names allowed for `backend` (`None`: the general table), sorted. `None` when the
/// backend has no table at all.
pub fn python_dependency_names(backend: Option<Backend>) -> Option<Vec<&'static str>> {
    let t = python_dependencies();
    let map = match backend {
        None => &t.general,
        Some(b) => t.backends.get(b.as_str())?,
    };
    Some(map.keys().map(String::as_str).collect())
}

/// Every C++ dependency name accepted in a kernel's `depends`, in documentation order.
pub const CPP_DEPENDENCY_NAMES: [&str; 11] = [
    "cutlass_2_10",
    "cutlass_3_5",
    "cutlass_3_6",
    "cutlass_3_8",
    "cutlass_3_9",
    "cutlass_4_0",
    "cutlass_4_4",
    "cutlass_4_5",
    "sycl_tla",
    "metal-cpp",
    "torch",
];

impl CppDependency {
    /// Parse a name from [`CPP_DEPENDENCY_NAMES`] (`None` for anything else).
    pub fn from_name(name: &str) -> Option<CppDependency> {
        if !CPP_DEPENDENCY_NAMES.contains(&name) {
            return None;
        }
        Some(match name {
            "sycl_tla" => CppDependency::SyclTla,
            "metal-cpp" => CppDependency::MetalCpp,
            "torch" => CppDependency::Torch,
            _ => {
                let rest = name.strip_prefix("cutlass_")?;
                let (maj, min) = rest.split_once('_')?;
                CppDependency::Cutlass(maj.parse().ok()?, min.parse().ok()?)
            }
        })
    }

    /// The name as written in `depends`.
    pub fn name(&self) -> String {
        match self {
            CppDependency::Cutlass(a, b) => format!("cutlass_{a}_{b}"),
            CppDependency::SyclTla => "sycl_tla".to_owned(),
            CppDependency::MetalCpp => "metal-cpp".to_owned(),
            CppDependency::Torch => "torch".to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_parses_with_the_documented_entries() {
        assert_eq!(python_dependency_names(None).unwrap(), ["einops", "helion", "tvm-ffi"]);
        assert_eq!(python_dependency_names(Some(Backend::Cuda)).unwrap(), ["nvidia-cutlass-dsl"]);
        assert_eq!(python_dependency_names(Some(Backend::Neuron)).unwrap(), ["nki"]);
        assert_eq!(python_dependency_names(Some(Backend::Xpu)).unwrap(), ["onednn"]);
        for b in [Backend::Cpu, Backend::Metal, Backend::Rocm] {
            assert_eq!(python_dependency_names(Some(b)).unwrap(), Vec::<&str>::new());
        }
        assert_eq!(python_dependency_names(Some(Backend::Tpu)), None);
        assert_eq!(python_dependency_names(Some(Backend::Cann)), None);
        let e = python_dependency("tvm-ffi", None).unwrap();
        assert_eq!(e.python[0].pkg, "apache-tvm-ffi");
        assert_eq!(e.python[0].import.as_deref(), Some("tvm_ffi"));
        assert_eq!(python_dependency("onednn", Some(Backend::Xpu)).unwrap().python[0].import, None);
        assert_eq!(python_dependency("einops", Some(Backend::Cuda)), None);
    }

    #[test]
    fn cpp_dependency_names_round_trip() {
        for n in CPP_DEPENDENCY_NAMES {
            assert_eq!(CppDependency::from_name(n).unwrap().name(), n);
        }
        assert_eq!(CppDependency::from_name("cutlass_4_4"), Some(CppDependency::Cutlass(4, 4)));
        assert_eq!(CppDependency::from_name("cutlass_9_9"), None);
    }
}
