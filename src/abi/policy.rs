//! The manylinux symbol policies and the glibc versions of common distributions, as data.
//!
//! The policy table is auditwheel 6.8.2's `auditwheel/policy/manylinux-policy.json`, vendored
//! unchanged in `data/manylinux-policy.json` (MIT, `data/LICENSE-auditwheel`; provenance in
//! `data/README.md`). Each policy lists, per architecture and per symbol-version namespace
//! (`GLIBC`, `GLIBCXX`, `CXXABI`, `GCC`, `ZLIB`, `LIBATOMIC`), the set of version names a
//! library may require. A reference `sym@GLIBC_2.32` splits at its first `_` into the namespace
//! `GLIBC` and the version `2.32`; the policy allows it when `2.32` is in its `GLIBC` set.
//! Namespaces the policy does not list (a library's own versions, `libcudart.so.12`, …) are not
//! governed by it. This is auditwheel's rule: membership, not a numeric comparison, so
//! non-numeric versions (`GLIBC_PRIVATE`, `CXXABI_TM_1`, `GLIBC_ABI_DT_RELR`) are decided by the
//! table too.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use anyhow::Context;
use serde::Deserialize;

use crate::config::Version;

/// auditwheel 6.8.2's policy file, exactly as shipped in its wheel.
pub const MANYLINUX_POLICY_JSON: &str = include_str!("data/manylinux-policy.json");

/// The distribution table (`data/glibc-distributions.toml`).
pub const DISTRIBUTIONS_TOML: &str = include_str!("data/glibc-distributions.toml");

/// One manylinux policy, for every architecture it covers.
#[derive(Debug, Clone)]
pub struct Policy {
    /// PEP 600 name, e.g. `manylinux_2_28`.
    pub name: String,
    /// Legacy names, e.g. `manylinux2014` for `manylinux_2_17`.
    pub aliases: Vec<String>,
    /// auditwheel's priority: higher is older and loads on more systems.
    pub priority: u32,
    /// The glibc version in the name: `manylinux_2_28` → `2.28`.
    pub glibc: Version,
    /// Architecture (`x86_64`, `aarch64`, …) → namespace (`GLIBC`, …) → allowed versions.
    pub symbol_versions: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
}

/// What a policy says about one required symbol version on one architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The version is in the policy's set for its namespace.
    Allowed,
    /// The namespace is governed by the policy and the version is not in its set.
    Refused,
    /// The policy does not govern this namespace (or the name has no `_`).
    NotGoverned,
    /// The policy has no entry for this architecture.
    NoSuchArch,
}

impl Policy {
    /// Judge a version name such as `GLIBC_2.32` or `GLIBCXX_3.4.29` for `arch`.
    pub fn verdict(&self, arch: &str, version_name: &str) -> Verdict {
        let Some(namespaces) = self.symbol_versions.get(arch) else {
            return Verdict::NoSuchArch;
        };
        let Some((namespace, version)) = version_name.split_once('_') else {
            return Verdict::NotGoverned;
        };
        match namespaces.get(namespace) {
            None => Verdict::NotGoverned,
            Some(set) if set.contains(version) => Verdict::Allowed,
            Some(_) => Verdict::Refused,
        }
    }

    /// Whether the policy has a list for this architecture.
    pub fn covers(&self, arch: &str) -> bool {
        self.symbol_versions.contains_key(arch)
    }
}

/// The policy table: every manylinux policy, oldest glibc first. auditwheel's catch-all
/// `linux` entry (no restrictions, meaning "no manylinux policy") is not a policy here.
#[derive(Debug, Clone)]
pub struct PolicyTable {
    policies: Vec<Policy>,
}

#[derive(Deserialize)]
struct RawPolicy {
    name: String,
    aliases: Vec<String>,
    priority: u32,
    symbol_versions: BTreeMap<String, BTreeMap<String, Vec<String>>>,
    // `lib_whitelist` and `blacklist` are read but not used: a kernel is loaded into a process
    // that already has torch and the accelerator runtime, so its DT_NEEDED list is not checked.
    #[serde(rename = "lib_whitelist")]
    _lib_whitelist: Vec<String>,
    #[serde(rename = "blacklist")]
    _blacklist: BTreeMap<String, Vec<String>>,
}

impl PolicyTable {
    /// Parse a policy file in auditwheel's format. Errors say which entry is wrong.
    pub fn parse(json: &str) -> anyhow::Result<PolicyTable> {
        let raw: Vec<RawPolicy> = serde_json::from_str(json).context("manylinux policy table")?;
        let mut policies = Vec::new();
        for p in raw {
            if p.name == "linux" {
                continue;
            }
            let glibc = p
                .name
                .strip_prefix("manylinux_")
                .and_then(|rest| rest.split_once('_'))
                .and_then(|(major, minor)| Version::parse(&format!("{major}.{minor}")).ok())
                .with_context(|| {
                    format!("manylinux policy table: `{}` is not named manylinux_X_Y", p.name)
                })?;
            let symbol_versions = p
                .symbol_versions
                .into_iter()
                .map(|(arch, ns)| (arch, ns.into_iter().map(|(k, v)| (k, v.into_iter().collect())).collect()))
                .collect();
            policies.push(Policy {
                name: p.name,
                aliases: p.aliases,
                priority: p.priority,
                glibc,
                symbol_versions,
            });
        }
        policies.sort_by_key(|p| std::cmp::Reverse(p.priority));
        for pair in policies.windows(2) {
            anyhow::ensure!(
                pair[0].glibc < pair[1].glibc,
                "manylinux policy table: {} has priority above {} but not an older glibc",
                pair[0].name,
                pair[1].name
            );
        }
        anyhow::ensure!(!policies.is_empty(), "manylinux policy table: no manylinux policies");
        Ok(PolicyTable { policies })
    }

    /// The vendored table (auditwheel 6.8.2).
    pub fn embedded() -> &'static PolicyTable {
        static TABLE: OnceLock<PolicyTable> = OnceLock::new();
        TABLE.get_or_init(|| {
            // Part of the binary and parsed by a unit test, not user input.
            PolicyTable::parse(MANYLINUX_POLICY_JSON)
                .expect("embedded manylinux-policy.json is valid (checked by a unit test)")
        })
    }

    /// Every policy, oldest glibc (most compatible) first.
    pub fn policies(&self) -> &[Policy] {
        &self.policies
    }

    /// Find a policy by `manylinux_2_28`, `2_28`, `2.28` or a legacy alias (`manylinux2014`).
    /// The error lists the names that exist.
    pub fn find(&self, name: &str) -> anyhow::Result<&Policy> {
        let n = name.trim();
        let full = if n.starts_with("manylinux") {
            n.to_owned()
        } else {
            format!("manylinux_{}", n.replace('.', "_"))
        };
        let found = self.policies.iter().find(|p| p.name == full || p.aliases.contains(&full));
        found.ok_or_else(|| {
            let names: Vec<&str> = self.policies.iter().map(|p| p.name.as_str()).collect();
            anyhow::anyhow!(
                "unknown manylinux policy `{name}`; the table (auditwheel 6.8.2) has {}",
                names.join(", ")
            )
        })
    }

    /// The oldest policy that allows `version_name` on `arch`, if any does. `None` also when no
    /// policy governs the namespace.
    pub fn first_allowing(&self, arch: &str, version_name: &str) -> Option<&Policy> {
        self.policies.iter().find(|p| p.verdict(arch, version_name) == Verdict::Allowed)
    }

    /// Whether any policy governs the namespace of `version_name` on `arch`.
    pub fn governs(&self, arch: &str, version_name: &str) -> bool {
        self.policies
            .iter()
            .any(|p| matches!(p.verdict(arch, version_name), Verdict::Allowed | Verdict::Refused))
    }

    /// The glibc a system needs for `version_name`: for `GLIBC_x.y` the version itself, for
    /// the other governed namespaces the glibc of the oldest policy that allows it (the
    /// policies were drawn from what distributions of that glibc ship). `None` when no policy
    /// allows it or the version is not numeric (`GLIBC_PRIVATE`).
    pub fn needed_glibc(&self, arch: &str, version_name: &str) -> Option<Version> {
        if let Some(v) = version_name.strip_prefix("GLIBC_") {
            if let Ok(v) = Version::parse(v) {
                return Some(v);
            }
        }
        self.first_allowing(arch, version_name).map(|p| p.glibc.clone())
    }
}

/// One Linux distribution and its glibc.
#[derive(Debug, Clone, Deserialize)]
pub struct Distribution {
    /// Display name, e.g. `Debian 11`.
    pub name: String,
    /// Its glibc version, e.g. `2.31`.
    #[serde(deserialize_with = "de_version")]
    pub glibc: Version,
}

fn de_version<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Version, D::Error> {
    let s = String::deserialize(d)?;
    Version::parse(&s).map_err(serde::de::Error::custom)
}

#[derive(Deserialize)]
struct DistributionFile {
    distribution: Vec<Distribution>,
}

/// Parse a distribution table (`[[distribution]] name, glibc`), checking ascending order.
pub fn parse_distributions(toml: &str) -> anyhow::Result<Vec<Distribution>> {
    let f: DistributionFile = toml_edit::de::from_str(toml).context("distribution table")?;
    for pair in f.distribution.windows(2) {
        anyhow::ensure!(
            pair[0].glibc <= pair[1].glibc,
            "distribution table: {} (glibc {}) comes after {} (glibc {}); keep ascending order",
            pair[1].name,
            pair[1].glibc,
            pair[0].name,
            pair[0].glibc
        );
    }
    Ok(f.distribution)
}

/// The embedded distribution table, ascending by glibc.
pub fn distributions() -> &'static [Distribution] {
    static TABLE: OnceLock<Vec<Distribution>> = OnceLock::new();
    TABLE.get_or_init(|| {
        // Part of the binary and parsed by a unit test, not user input.
        parse_distributions(DISTRIBUTIONS_TOML)
            .expect("embedded glibc-distributions.toml is valid (checked by a unit test)")
    })
}

/// The distributions whose glibc is older than `needed`, newest first (the ones a user is most
/// likely to meet), as `Name (glibc X.Y)`.
pub fn distributions_without(needed: &Version) -> Vec<String> {
    distributions()
        .iter()
        .rev()
        .filter(|d| d.glibc < *needed)
        .map(|d| format!("{} (glibc {})", d.name, d.glibc))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn embedded_table_parses_with_the_documented_policies() {
        let t = PolicyTable::embedded();
        let names: Vec<&str> = t.policies().iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "manylinux_2_5",
                "manylinux_2_12",
                "manylinux_2_17",
                "manylinux_2_24",
                "manylinux_2_26",
                "manylinux_2_27",
                "manylinux_2_28",
                "manylinux_2_31",
                "manylinux_2_34",
                "manylinux_2_35",
                "manylinux_2_36",
                "manylinux_2_37",
                "manylinux_2_38",
                "manylinux_2_39",
                "manylinux_2_40",
                "manylinux_2_41",
            ]
        );
        assert_eq!(t.find("manylinux2014").unwrap().name, "manylinux_2_17");
        assert_eq!(t.find("manylinux1").unwrap().name, "manylinux_2_5");
        assert_eq!(t.find("2_28").unwrap().glibc, v("2.28"));
        assert_eq!(t.find("2.34").unwrap().name, "manylinux_2_34");
        let err = t.find("2_29").unwrap_err().to_string();
        assert!(err.contains("unknown manylinux policy `2_29`"), "{err}");
        assert!(err.contains("manylinux_2_28, manylinux_2_31"), "{err}");
    }

    /// The table in torch-releases-2026.md: highest allowed versions on x86_64.
    #[test]
    fn verdicts_match_the_reference_table() {
        let t = PolicyTable::embedded();
        let p228 = t.find("2_28").unwrap();
        assert_eq!(p228.verdict("x86_64", "GLIBC_2.28"), Verdict::Allowed);
        assert_eq!(p228.verdict("x86_64", "GLIBC_2.29"), Verdict::Refused);
        assert_eq!(p228.verdict("x86_64", "GLIBC_2.32"), Verdict::Refused);
        assert_eq!(p228.verdict("x86_64", "GLIBCXX_3.4.24"), Verdict::Allowed);
        assert_eq!(p228.verdict("x86_64", "GLIBCXX_3.4.25"), Verdict::Refused);
        assert_eq!(p228.verdict("x86_64", "GCC_7.0.0"), Verdict::Allowed);
        assert_eq!(p228.verdict("x86_64", "CXXABI_TM_1"), Verdict::Allowed);
        assert_eq!(p228.verdict("x86_64", "GLIBC_PRIVATE"), Verdict::Refused);
        assert_eq!(p228.verdict("x86_64", "CUDART_12"), Verdict::NotGoverned);
        assert_eq!(p228.verdict("x86_64", "libcudart.so.12"), Verdict::NotGoverned);
        assert_eq!(p228.verdict("sparc", "GLIBC_2.2.5"), Verdict::NoSuchArch);
        let p234 = t.find("2_34").unwrap();
        assert_eq!(p234.verdict("x86_64", "GLIBCXX_3.4.29"), Verdict::Allowed);
        assert_eq!(p234.verdict("x86_64", "GLIBCXX_3.4.30"), Verdict::Refused);
        let p235 = t.find("2_35").unwrap();
        assert_eq!(p235.verdict("x86_64", "GLIBCXX_3.4.30"), Verdict::Allowed);
        assert_eq!(p235.verdict("x86_64", "GCC_12.0.0"), Verdict::Allowed);
        // manylinux_2_5 predates aarch64.
        assert!(!t.find("2_5").unwrap().covers("aarch64"));
        assert!(t.find("2_17").unwrap().covers("aarch64"));
    }

    #[test]
    fn first_allowing_and_needed_glibc() {
        let t = PolicyTable::embedded();
        assert_eq!(t.first_allowing("x86_64", "GLIBC_2.32").unwrap().name, "manylinux_2_34");
        assert_eq!(t.first_allowing("x86_64", "GLIBCXX_3.4.29").unwrap().name, "manylinux_2_34");
        assert_eq!(t.first_allowing("x86_64", "GLIBC_2.2.5").unwrap().name, "manylinux_2_5");
        assert!(t.first_allowing("x86_64", "GLIBC_PRIVATE").is_none());
        assert_eq!(t.needed_glibc("x86_64", "GLIBC_2.32"), Some(v("2.32")));
        assert_eq!(t.needed_glibc("x86_64", "GLIBC_2.2.5"), Some(v("2.2.5")));
        assert_eq!(t.needed_glibc("x86_64", "GLIBCXX_3.4.29"), Some(v("2.34")));
        assert_eq!(t.needed_glibc("x86_64", "GLIBC_PRIVATE"), None);
        assert!(t.governs("x86_64", "GLIBC_PRIVATE"));
        assert!(!t.governs("x86_64", "CUDART_12"));
    }

    #[test]
    fn version_comparison_is_numeric() {
        assert!(v("2.2.5") < v("2.17"));
        assert!(v("2.9") < v("2.10"));
        assert!(v("2.28") < v("2.32"));
        assert_eq!(v("2.28"), v("2.28.0"));
    }

    #[test]
    fn parse_rejects_bad_tables() {
        assert!(
            format!("{:#}", PolicyTable::parse("{}").unwrap_err()).starts_with("manylinux policy table: ")
        );
        let bad_name = r#"[{"name": "musllinux_1_2", "aliases": [], "priority": 1,
            "symbol_versions": {}, "lib_whitelist": [], "blacklist": {}}]"#;
        assert!(PolicyTable::parse(bad_name).unwrap_err().to_string().contains("`musllinux_1_2`"));
        let disordered = r#"[
            {"name": "manylinux_2_28", "aliases": [], "priority": 90, "symbol_versions": {},
             "lib_whitelist": [], "blacklist": {}},
            {"name": "manylinux_2_17", "aliases": [], "priority": 80, "symbol_versions": {},
             "lib_whitelist": [], "blacklist": {}}]"#;
        assert!(PolicyTable::parse(disordered).unwrap_err().to_string().contains("not an older glibc"));
    }

    #[test]
    fn distributions_parse_in_order() {
        let d = distributions();
        assert_eq!(d.first().unwrap().name, "CentOS/RHEL 7");
        assert_eq!(
            distributions_without(&v("2.32")),
            [
                "Ubuntu 20.04 (glibc 2.31)",
                "Debian 11 (glibc 2.31)",
                "Debian 10 (glibc 2.28)",
                "RHEL/AlmaLinux/Rocky 8 (glibc 2.28)",
                "Ubuntu 18.04 (glibc 2.27)",
                "Amazon Linux 2 (glibc 2.26)",
                "CentOS/RHEL 7 (glibc 2.17)",
            ]
        );
        assert!(distributions_without(&v("2.17")).is_empty());
        let bad = "[[distribution]]\nname = \"a\"\nglibc = \"2.30\"\n\
                   [[distribution]]\nname = \"b\"\nglibc = \"2.20\"\n";
        assert!(parse_distributions(bad).unwrap_err().to_string().contains("keep ascending order"));
        let not_version = "[[distribution]]\nname = \"a\"\nglibc = \"two\"\n";
        assert!(parse_distributions(not_version).is_err());
    }
}
