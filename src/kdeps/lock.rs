//! `kernels.lock` beside build.toml: each kernel dependency pinned to a Hub commit and the NAR
//! hash of that commit's tree.
//!
//! The shape is the one kernels 0.17 reads as `NixKernelLocks` (and upstream's
//! `lock-kernel-deps` writes): a JSON list, sorted by repository id and then pin (versions
//! before revisions), of
//!
//! ```json
//! {"dependency": {"repo-id": "org/name", "version": 1},
//!  "lock": {"commit": "<40 lower-case hex>", "hash": "sha256-<base64>"}}
//! ```
//!
//! printed with two-space indentation, byte for byte what `NixKernelLocks.to_json()` prints,
//! plus a final newline. Unknown keys are errors, as in kernels.

use std::collections::BTreeMap;

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};
use serde::{Deserialize, Serialize};

use crate::config::{KernelDependency, KernelPin};

/// The lock file's name, beside build.toml.
pub const LOCK_FILE: &str = "kernels.lock";

/// The most bytes read of a lock file (one entry is about 250 bytes).
const MAX_LOCK_BYTES: u64 = 4 << 20;

/// Where one dependency is pinned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pinned {
    /// The Hub commit, 40 lower-case hex digits.
    pub commit: String,
    /// The NAR hash of the commit's tree, SRI form (`sha256-…`).
    pub hash: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    dependency: Dependency,
    lock: Pinned,
}

/// `KernelDependency` with unknown keys refused (the config model's type is shared with
/// metadata.json, which must stay lenient).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Dependency {
    #[serde(rename = "repo-id")]
    repo_id: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    version: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    revision: Option<String>,
}

/// The order kernels sorts entries in: repository id, then versions (numerically) before
/// revisions.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    pub repo_id: String,
    pin: (u8, u64, String),
}

impl Key {
    pub fn of(dep: &KernelDependency) -> Key {
        let pin = match &dep.pin {
            KernelPin::Version(v) => (0, *v, String::new()),
            KernelPin::Revision(r) => (1, 0, r.clone()),
        };
        Key { repo_id: dep.repo_id.clone(), pin }
    }

    pub fn dependency(&self) -> KernelDependency {
        let pin = match &self.pin {
            (0, v, _) => KernelPin::Version(*v),
            (_, _, r) => KernelPin::Revision(r.clone()),
        };
        KernelDependency { repo_id: self.repo_id.clone(), pin }
    }
}

/// `org/name (version 1)` or `org/name (revision main)`, as messages name a dependency.
pub fn describe(dep: &KernelDependency) -> String {
    match &dep.pin {
        KernelPin::Version(v) => format!("{} (version {v})", dep.repo_id),
        KernelPin::Revision(r) => format!("{} (revision {r})", dep.repo_id),
    }
}

/// A parsed lock file: dependency → pin.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lock {
    pub entries: BTreeMap<Key, Pinned>,
}

impl Lock {
    pub fn get(&self, dep: &KernelDependency) -> Option<&Pinned> {
        self.entries.get(&Key::of(dep))
    }

    /// Parse lock text. Errors say what is wrong (serde's message carries line and column).
    pub fn parse(text: &str) -> anyhow::Result<Lock> {
        let list: Vec<Entry> = serde_json::from_str(text)?;
        let mut entries = BTreeMap::new();
        for e in list {
            let d = e.dependency;
            let pin = match (d.version, d.revision) {
                (Some(v), None) => KernelPin::Version(v),
                (None, Some(r)) => KernelPin::Revision(r),
                _ => anyhow::bail!("`{}` needs exactly one of `version` and `revision`", d.repo_id),
            };
            if let Some(why) = crate::config::validate::repo_id_problem(&d.repo_id) {
                anyhow::bail!(
                    "`{}` is not a Hub repository id: {why}",
                    crate::printer::escape_controls(&d.repo_id)
                );
            }
            let dep = KernelDependency { repo_id: d.repo_id, pin };
            let commit = e.lock.commit.to_ascii_lowercase();
            anyhow::ensure!(
                commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_hexdigit()),
                "{}: `{}` is not a 40-digit commit id",
                describe(&dep),
                e.lock.commit
            );
            anyhow::ensure!(
                e.lock.hash.starts_with("sha256-") && e.lock.hash.len() == 51,
                "{}: `{}` is not a NAR hash (`sha256-` and 44 base64 characters)",
                describe(&dep),
                e.lock.hash
            );
            let pinned = Pinned { commit, hash: e.lock.hash };
            if entries.insert(Key::of(&dep), pinned).is_some() {
                anyhow::bail!("{} is locked twice", describe(&dep));
            }
        }
        Ok(Lock { entries })
    }

    /// Read `kernel_dir/kernels.lock`; `Ok(None)` when there is none.
    pub fn read(kernel_dir: &Utf8Path) -> anyhow::Result<Option<Lock>> {
        let path = lock_path(kernel_dir);
        let text = match crate::fsutil::read_to_string(&path) {
            Ok(t) => t,
            Err(_) if !path.exists() => return Ok(None),
            Err(e) => return Err(e),
        };
        anyhow::ensure!(
            text.len() as u64 <= MAX_LOCK_BYTES,
            "`{path}` is larger than 4 MiB; it is not a kernels.lock (run `kernel-builder lock-kernel-deps` to write one)"
        );
        Lock::parse(&text)
            .map(Some)
            .with_context(|| format!("`{path}` is not a kernels.lock that kernels 0.17 reads"))
    }

    /// The file's text: kernels' `NixKernelLocks.to_json()` and a newline.
    pub fn to_text(&self) -> String {
        let list: Vec<Entry> = self
            .entries
            .iter()
            .map(|(k, pinned)| {
                let dep = k.dependency();
                let (version, revision) = match dep.pin {
                    KernelPin::Version(v) => (Some(v), None),
                    KernelPin::Revision(r) => (None, Some(r)),
                };
                Entry {
                    dependency: Dependency { repo_id: dep.repo_id, version, revision },
                    lock: pinned.clone(),
                }
            })
            .collect();
        let mut s = serde_json::to_string_pretty(&list).unwrap_or_else(|_| "[]".to_owned());
        s.push('\n');
        s
    }

    /// Write the lock beside build.toml, atomically.
    pub fn write(&self, kernel_dir: &Utf8Path) -> anyhow::Result<Utf8PathBuf> {
        let path = lock_path(kernel_dir);
        crate::fsutil::write_atomic(&path, self.to_text().as_bytes())?;
        Ok(path)
    }
}

pub fn lock_path(kernel_dir: &Utf8Path) -> Utf8PathBuf {
    kernel_dir.join(LOCK_FILE)
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: &str = "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=";

    fn dep(repo: &str, pin: KernelPin) -> KernelDependency {
        KernelDependency { repo_id: repo.into(), pin }
    }

    #[test]
    fn text_is_sorted_like_kernels_and_round_trips() {
        let mut lock = Lock::default();
        for (d, c) in [
            (dep("org/b", KernelPin::Version(2)), "a"),
            (dep("org/a", KernelPin::Revision("main".into())), "b"),
            (dep("org/a", KernelPin::Version(10)), "c"),
            (dep("org/a", KernelPin::Version(9)), "d"),
        ] {
            lock.entries.insert(Key::of(&d), Pinned { commit: c.repeat(40), hash: H.into() });
        }
        let text = lock.to_text();
        let order: Vec<&str> =
            text.lines().filter(|l| l.contains("\"version\"") || l.contains("\"revision\"")).collect();
        assert_eq!(
            order,
            [
                "      \"version\": 9",
                "      \"version\": 10",
                "      \"revision\": \"main\"",
                "      \"version\": 2"
            ]
        );
        assert!(text.starts_with("[\n  {\n    \"dependency\": {\n      \"repo-id\": \"org/a\",\n"));
        assert_eq!(Lock::parse(&text).unwrap(), lock);
    }

    #[test]
    fn refuses_what_kernels_refuses() {
        let c = "a".repeat(40);
        let unknown = format!(
            r#"[{{"dependency":{{"repo-id":"o/n","version":1}},"lock":{{"commit":"{c}","hash":"{H}","x":1}}}}]"#
        );
        assert!(Lock::parse(&unknown).unwrap_err().to_string().contains("unknown field `x`"));
        let commit_only =
            format!(r#"[{{"dependency":{{"repo-id":"o/n","version":1}},"lock":{{"commit":"{c}"}}}}]"#);
        assert!(Lock::parse(&commit_only).unwrap_err().to_string().contains("missing field `hash`"));
        let short = format!(
            r#"[{{"dependency":{{"repo-id":"o/n","version":1}},"lock":{{"commit":"abc","hash":"{H}"}}}}]"#
        );
        assert_eq!(
            Lock::parse(&short).unwrap_err().to_string(),
            "o/n (version 1): `abc` is not a 40-digit commit id"
        );
        let bad_id = format!(
            r#"[{{"dependency":{{"repo-id":"o/..","version":1}},"lock":{{"commit":"{c}","hash":"{H}"}}}}]"#
        );
        assert_eq!(
            Lock::parse(&bad_id).unwrap_err().to_string(),
            "`o/..` is not a Hub repository id: its name starts or ends with `-` or `.`, which the Hub does not allow"
        );
    }
}
