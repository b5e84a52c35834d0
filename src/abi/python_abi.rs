//! The CPython stable ABI (abi3) as data: every function and data symbol of the Limited API /
//! Stable ABI with the Python version that added it, from CPython's `Misc/stable_abi.toml`
//! (vendored as `data/stable_abi_symbols.toml` by `scripts/vendor-stable-abi.py`; PSF licence,
//! `data/LICENSE-cpython`; provenance in `data/README.md`).
//!
//! The rule, as upstream's `check-abi` applies it: an undefined symbol found in the table must
//! have been added no later than the targeted Python (`--python-abi`, default 3.9); an undefined
//! symbol that is not in the table but starts with `Py` or `_Py` is outside the stable ABI, so
//! an `abi3.so` that references it does not load on every Python 3.

use std::collections::HashMap;
use std::sync::OnceLock;

use anyhow::Context;
use indexmap::IndexMap;
use serde::Deserialize;

/// The vendored symbol table.
pub const STABLE_ABI_TOML: &str = include_str!("data/stable_abi_symbols.toml");

/// Whether a stable-ABI item is a function or a data object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `[function.NAME]`.
    Function,
    /// `[data.NAME]`.
    Data,
}

/// One stable-ABI symbol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Function or data.
    pub kind: Kind,
    /// The Python version that added it, `(3, 2)` for `'3.2'`.
    pub added: (u32, u32),
    /// The feature macro it depends on (`MS_WINDOWS`, `HAVE_FORK`, …), if any.
    pub ifdef: Option<String>,
    /// Part of the ABI only (called by macros), not of the Limited API.
    pub abi_only: bool,
}

/// The table: symbol name → entry.
#[derive(Debug, Clone)]
pub struct StableAbiTable {
    symbols: HashMap<String, Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    function: IndexMap<String, RawEntry>,
    #[serde(default)]
    data: IndexMap<String, RawEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    added: String,
    ifdef: Option<String>,
    #[serde(default)]
    abi_only: bool,
}

/// Parse `3.9` (or ` 3.9 `) as `(3, 9)`. Errors name the text.
pub fn parse_python_version(s: &str) -> anyhow::Result<(u32, u32)> {
    let t = s.trim();
    let bad = || anyhow::anyhow!("Python version `{s}` must be MAJOR.MINOR, e.g. 3.9");
    let (major, minor) = t.split_once('.').ok_or_else(bad)?;
    Ok((major.parse().map_err(|_| bad())?, minor.parse().map_err(|_| bad())?))
}

impl StableAbiTable {
    /// Parse a table in the vendored format (a subset of `stable_abi.toml`).
    pub fn parse(toml: &str) -> anyhow::Result<StableAbiTable> {
        let raw: RawFile = toml_edit::de::from_str(toml).context("stable ABI table")?;
        let mut symbols = HashMap::new();
        for (kind, items) in [(Kind::Function, raw.function), (Kind::Data, raw.data)] {
            for (name, e) in items {
                let added =
                    parse_python_version(&e.added).with_context(|| format!("stable ABI table: `{name}`"))?;
                symbols.insert(name, Entry { kind, added, ifdef: e.ifdef, abi_only: e.abi_only });
            }
        }
        Ok(StableAbiTable { symbols })
    }

    /// The vendored table.
    pub fn embedded() -> &'static StableAbiTable {
        static TABLE: OnceLock<StableAbiTable> = OnceLock::new();
        TABLE.get_or_init(|| {
            // Part of the binary and parsed by a unit test, not user input.
            StableAbiTable::parse(STABLE_ABI_TOML)
                .expect("embedded stable_abi_symbols.toml is valid (checked by a unit test)")
        })
    }

    /// Look a symbol up.
    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.symbols.get(name)
    }

    /// The newest Python version that added a symbol: the last Python this table describes
    /// (`(3, 15)` for the vendored one); `None` when it is empty.
    pub fn newest(&self) -> Option<(u32, u32)> {
        self.symbols.values().map(|e| e.added).max()
    }

    /// Number of symbols.
    pub fn len(&self) -> usize {
        self.symbols.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.symbols.is_empty()
    }
}

/// What the stable-ABI rule says about one undefined symbol when targeting `target`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PythonVerdict {
    /// Not a Python symbol, or in the table and old enough.
    Fine,
    /// In the table but added after `target`.
    TooNew { added: (u32, u32) },
    /// Looks like a CPython symbol (`Py…`, `_Py…`) but is not in the stable ABI.
    NotAbi3,
}

/// Judge an undefined symbol against the embedded table.
pub fn judge(symbol: &str, target: (u32, u32)) -> PythonVerdict {
    match StableAbiTable::embedded().get(symbol) {
        Some(e) if e.added > target => PythonVerdict::TooNew { added: e.added },
        Some(_) => PythonVerdict::Fine,
        None if symbol.starts_with("Py") || symbol.starts_with("_Py") => PythonVerdict::NotAbi3,
        None => PythonVerdict::Fine,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_table_has_the_known_symbols() {
        let t = StableAbiTable::embedded();
        assert_eq!(t.len(), 952);
        let e = t.get("PyType_FromSpec").unwrap();
        assert_eq!((e.kind, e.added, e.abi_only), (Kind::Function, (3, 2), false));
        let e = t.get("_PyObject_GC_New").unwrap();
        assert!(e.abi_only);
        assert_eq!(t.get("PyType_GetModuleByDef").unwrap().added, (3, 13));
        assert_eq!(t.get("PyExc_TypeError").unwrap().kind, Kind::Data);
        assert_eq!(t.get("PyOS_BeforeFork").unwrap().ifdef.as_deref(), Some("HAVE_FORK"));
        assert!(t.get("PyCode_New").is_none());
    }

    #[test]
    fn judge_applies_the_rule() {
        assert_eq!(judge("PyArg_ParseTuple", (3, 9)), PythonVerdict::Fine);
        assert_eq!(judge("PyType_GetModuleByDef", (3, 9)), PythonVerdict::TooNew { added: (3, 13) });
        assert_eq!(judge("PyType_GetModuleByDef", (3, 13)), PythonVerdict::Fine);
        assert_eq!(judge("PyCode_New", (3, 9)), PythonVerdict::NotAbi3);
        assert_eq!(judge("_PyObject_MakeTpCall", (3, 9)), PythonVerdict::NotAbi3);
        assert_eq!(judge("malloc", (3, 9)), PythonVerdict::Fine);
    }

    #[test]
    fn python_versions_parse_or_say_why_not() {
        assert_eq!(parse_python_version("3.9").unwrap(), (3, 9));
        assert_eq!(parse_python_version(" 3.13 ").unwrap(), (3, 13));
        for bad in ["3", "3.x", "", "three.nine", "3.9.1"] {
            let err = parse_python_version(bad).unwrap_err().to_string();
            assert!(err.contains("MAJOR.MINOR"), "{bad}: {err}");
        }
        let err = format!("{:#}", StableAbiTable::parse("[function.PyFoo]\nadded = 'soon'\n").unwrap_err());
        assert_eq!(err, "stable ABI table: `PyFoo`: Python version `soon` must be MAJOR.MINOR, e.g. 3.9");
        assert!(StableAbiTable::parse("[struct.PyObject]\nadded = '3.2'\n").is_err());
    }
}
