//! The torch stable-ABI rule for `torch-stable-abi…` variants.
//!
//! A library built for the stable ABI talks to libtorch only through its C shim, so:
//! - it references no C++ symbol of libtorch: an undefined symbol that demangles (with the
//!   `cpp_demangle` crate) into the namespaces `c10::`, `at::` or `torch::` is a violation,
//!   except `torch::stable::`, the stable C++ wrappers;
//! - every C shim function it calls (`aoti_torch_*`, `torch_*`) must exist in the targeted
//!   torch. PyTorch records when each was added in `torch/csrc/stable/c/shim_function_versions.txt`
//!   (vendored unchanged as `data/shim_function_versions.txt`; BSD-3-Clause,
//!   `data/LICENSE-pytorch`; provenance in `data/README.md`). A function that file does not
//!   list was available before torch 2.10, so it passes for every target. The file knows
//!   nothing older than 2.10 and says nothing about removals; neither does this check.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use cpp_demangle::{DemangleOptions, Symbol};

use crate::config::Version;

/// PyTorch's `shim_function_versions.txt`, exactly as in pytorch/pytorch.
pub const SHIM_VERSIONS_TXT: &str = include_str!("data/shim_function_versions.txt");

/// Parse `name: TORCH_VERSION_2_10_0` lines (blank lines and `#` comments skipped) into
/// name → version. Errors name the line.
pub fn parse_shim_versions(text: &str) -> anyhow::Result<BTreeMap<String, Version>> {
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = || anyhow::anyhow!("shim_function_versions.txt line {}: `{line}`", i + 1);
        let (name, token) = line.split_once(':').ok_or_else(bad)?;
        let version = token
            .trim()
            .strip_prefix("TORCH_VERSION_")
            .and_then(|v| Version::parse(&v.replace('_', ".")).ok())
            .ok_or_else(bad)?;
        out.insert(name.trim().to_owned(), version);
    }
    Ok(out)
}

/// The embedded shim table.
pub fn shim_versions() -> &'static BTreeMap<String, Version> {
    static TABLE: OnceLock<BTreeMap<String, Version>> = OnceLock::new();
    TABLE.get_or_init(|| {
        // Part of the binary and parsed by a unit test, not user input.
        parse_shim_versions(SHIM_VERSIONS_TXT)
            .expect("embedded shim_function_versions.txt is valid (checked by a unit test)")
    })
}

/// What the rule says about one undefined symbol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TorchVerdict {
    /// Not a torch C++ symbol, or a shim function available in the target.
    Fine,
    /// A C shim function added after the target torch.
    ShimTooNew { added: Version },
    /// A libtorch C++ symbol (its demangled name, without parameters).
    CxxSymbol { demangled: String },
}

/// Judge an undefined symbol for a stable-ABI library targeting `target` (e.g. 2.11).
pub fn judge(symbol: &str, target: &Version) -> TorchVerdict {
    if let Some(added) = shim_versions().get(symbol) {
        return if added > target {
            TorchVerdict::ShimTooNew { added: added.clone() }
        } else {
            TorchVerdict::Fine
        };
    }
    match torch_cxx_name(symbol) {
        Some(demangled) => TorchVerdict::CxxSymbol { demangled },
        None => TorchVerdict::Fine,
    }
}

/// Demangle an Itanium C++ name into its qualified name without parameters or return type
/// (`_ZN3c103fooEv` → `c10::foo`). `None` for anything that is not a mangled C++ name.
pub fn demangle_name(symbol: &str) -> Option<String> {
    if !symbol.starts_with("_Z") {
        return None;
    }
    let sym = Symbol::new(symbol.as_bytes()).ok()?;
    sym.demangle_with_options(&DemangleOptions::new().no_params().no_return_type()).ok()
}

/// Demangle with parameters, for messages (`std::to_chars(char*, char*, double)`).
pub fn demangle_full(symbol: &str) -> Option<String> {
    if !symbol.starts_with("_Z") {
        return None;
    }
    Symbol::new(symbol.as_bytes()).ok()?.demangle().ok()
}

/// The special names `cpp_demangle` puts before an entity (`typeinfo for c10::Error`,
/// `{vtable(c10::Error)}`): the entity after them is what decides the namespace.
const SPECIAL_PREFIXES: &[&str] = &[
    "typeinfo name for ",
    "typeinfo for ",
    "construction vtable for ",
    "guard variable for ",
    "TLS init function for ",
    "TLS wrapper function for ",
    "transaction clone for ",
    "{vtable(",
    "{vtt(",
    "{virtual override thunk(",
];

/// Remove the special-name prefixes (and a thunk's `{offset(…)}, ` arguments) before the
/// entity a demangled name is about.
fn entity_of(demangled: &str) -> &str {
    let mut entity = demangled;
    loop {
        if let Some(rest) = SPECIAL_PREFIXES.iter().find_map(|p| entity.strip_prefix(p)) {
            entity = rest;
            continue;
        }
        // A thunk's offsets: a balanced `{…}` group followed by `, `.
        if entity.starts_with('{') {
            let mut depth = 0usize;
            let end = entity.char_indices().find_map(|(i, c)| {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i);
                        }
                    }
                    _ => {}
                }
                None
            });
            if let Some(rest) = end.and_then(|i| entity[i + 1..].strip_prefix(", ")) {
                entity = rest;
                continue;
            }
        }
        return entity;
    }
}

/// The demangled name when `symbol` is a C++ entity of libtorch's unstable ABI (`c10::`, `at::`,
/// `torch::` but not `torch::stable::`), else `None`.
pub fn torch_cxx_name(symbol: &str) -> Option<String> {
    let demangled = demangle_name(symbol)?;
    let entity = entity_of(&demangled);
    let unstable = ["c10::", "at::", "torch::"].iter().any(|ns| entity.starts_with(ns))
        && !entity.starts_with("torch::stable::");
    unstable.then(|| demangled.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn embedded_shim_table_parses() {
        let t = shim_versions();
        assert_eq!(t.len(), 108);
        assert_eq!(t["torch_library_impl"], v("2.10.0"));
        assert_eq!(t["torch_from_blob"], v("2.11.0"));
        assert_eq!(t["torch_new_stable_ivalue"], v("2.13.0"));
        assert!(!t.contains_key("aoti_torch_empty_strided"));
    }

    #[test]
    fn shim_table_errors_name_the_line() {
        let err =
            parse_shim_versions("# c\n\nfoo: TORCH_VERSION_2_10_0\nbar 2.11\n").unwrap_err().to_string();
        assert!(err.contains("line 4"), "{err}");
        assert!(parse_shim_versions("foo: 2.10").unwrap_err().to_string().contains("line 1"));
    }

    #[test]
    fn judge_applies_the_rule() {
        let t211 = v("2.11");
        assert_eq!(judge("torch_from_blob", &t211), TorchVerdict::Fine);
        assert_eq!(judge("torch_new_stable_ivalue", &t211), TorchVerdict::ShimTooNew { added: v("2.13.0") });
        // Not listed: available before 2.10.
        assert_eq!(judge("aoti_torch_empty_strided", &v("2.9")), TorchVerdict::Fine);
        assert_eq!(
            judge("_ZN3c103fooEv", &t211),
            TorchVerdict::CxxSymbol { demangled: "c10::foo".to_owned() }
        );
        // at::Tensor's destructor-like members, typeinfo and templates with return types.
        assert!(matches!(judge("_ZN2at6TensorD1Ev", &t211), TorchVerdict::CxxSymbol { .. }));
        assert!(matches!(judge("_ZTIN3c105ErrorE", &t211), TorchVerdict::CxxSymbol { .. }));
        assert!(matches!(judge("_ZN3c104sizeIiEEvv", &t211), TorchVerdict::CxxSymbol { .. }));
        assert!(matches!(judge("_ZN5torch7Library4_defEv", &t211), TorchVerdict::CxxSymbol { .. }));
        // Every special name of a c10 entity is c10's.
        for special in [
            "_ZTVN3c105ErrorE",
            "_ZTTN3c105ErrorE",
            "_ZTSN3c105ErrorE",
            "_ZGVN3c103fooE",
            "_ZThn8_N3c103fooEv",
            "_ZTv0_n24_N3c103fooEv",
            "_ZTCN3c105ErrorE0_N3c104BaseE",
            "_ZTHN3c103fooE",
            "_ZTWN3c103fooE",
            "_ZZN3c103fooEvE1x",
        ] {
            assert!(
                matches!(judge(special, &t211), TorchVerdict::CxxSymbol { .. }),
                "{special}: {:?}",
                demangle_name(special)
            );
        }
        assert_eq!(judge("_ZTVN5torch6stable6TensorE", &t211), TorchVerdict::Fine);
        assert_eq!(judge("_ZTVSt9exception", &t211), TorchVerdict::Fine);
        // torch::stable:: is the allowed C++ layer; std:: and C names are not torch's.
        assert_eq!(judge("_ZN5torch6stable3fooEv", &t211), TorchVerdict::Fine);
        assert_eq!(judge("_ZSt8to_charsPcS_d", &t211), TorchVerdict::Fine);
        assert_eq!(judge("memcpy", &t211), TorchVerdict::Fine);
        assert_eq!(judge("_Zgarbage", &t211), TorchVerdict::Fine);
        // A user's own namespace that merely takes an at::Tensor is not libtorch's.
        assert_eq!(judge("_ZN2my3fooEN2at6TensorE", &t211), TorchVerdict::Fine);
    }

    #[test]
    fn demangles_for_messages() {
        assert_eq!(
            demangle_full("_ZSt8to_charsPcS_d").as_deref(),
            Some("std::to_chars(char*, char*, double)")
        );
        assert_eq!(demangle_full("malloc"), None);
    }
}
