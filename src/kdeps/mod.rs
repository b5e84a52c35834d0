//! Kernel dependencies (`kernel-depends` in `[general]` and `[general.<backend>]`): locking them
//! to Hub commits and NAR hashes in `kernels.lock` ([`lock`]), fetching exactly the locked
//! trees into a cache ([`fetch`]), and the check-config problems of a missing or stale lock.
//!
//! The closure is locked, not just the direct dependencies: kernels resolves a dependency's own
//! `kernel-depends` (from each variant's metadata.json) through the same lock when it loads.
//! What a Hub answers is not trusted to end: the closure is bounded ([`MAX_DEPTH`] levels,
//! [`MAX_KERNELS`] kernels), and each download is announced on stderr before it starts.

pub mod cache;
pub mod fetch;
pub mod lock;

use std::collections::BTreeSet;

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};

use crate::config::{BuildConfig, KernelDependency, Problem, Severity};
use fetch::HubReader;
use lock::{describe, Key, Lock, Pinned};

/// The `kernel-depends` lists of build.toml with their key paths: `general`, then each
/// `[general.<backend>]`.
fn lists(config: &BuildConfig) -> Vec<(&'static str, &[KernelDependency])> {
    let g = &config.general;
    vec![
        ("general.kernel-depends", &g.kernel_depends[..]),
        ("general.cuda.kernel-depends", &g.cuda.deps.kernel_depends[..]),
        ("general.neuron.kernel-depends", &g.neuron.kernel_depends[..]),
        ("general.tpu.kernel-depends", &g.tpu.kernel_depends[..]),
        ("general.xpu.kernel-depends", &g.xpu.kernel_depends[..]),
    ]
}

/// Every dependency build.toml names, for any backend, each once, in lock order.
pub fn direct(config: &BuildConfig) -> Vec<KernelDependency> {
    let keys: BTreeSet<Key> = lists(config).iter().flat_map(|(_, l)| l.iter().map(Key::of)).collect();
    keys.iter().map(Key::dependency).collect()
}

/// check-config's problems: an entry of `kernel-depends` with no kernels.lock, or one the lock
/// does not pin (a stale lock), each at its line; a lock kernels cannot read.
pub fn check(config: &BuildConfig, kernel_dir: &Utf8Path) -> Vec<Problem> {
    let fix = format!("run `kernel-builder lock-kernel-deps {kernel_dir}` to write kernels.lock");
    let mut out = Vec::new();
    let lock = match Lock::read(kernel_dir) {
        Ok(l) => l,
        Err(e) => {
            if let Some((path, _)) = lists(config).into_iter().find(|(_, l)| !l.is_empty()) {
                out.push(Problem {
                    severity: Severity::Error,
                    key_path: path.to_owned(),
                    rule: "kernel-lock-unreadable",
                    message: format!("{e:#}"),
                    help: Some(fix),
                });
            }
            return out;
        }
    };
    for (path, list) in lists(config) {
        for (i, dep) in list.iter().enumerate() {
            let message = match &lock {
                None => {
                    format!("{} is not locked: there is no kernels.lock beside build.toml", describe(dep))
                }
                Some(l) if l.get(dep).is_none() => {
                    format!("{} is not in kernels.lock: the lock is stale", describe(dep))
                }
                Some(_) => continue,
            };
            out.push(Problem {
                severity: Severity::Error,
                key_path: format!("{path}[{i}]"),
                rule: "kernel-dependency-unlocked",
                message,
                help: Some(fix.clone()),
            });
        }
    }
    out
}

/// The most levels of `kernel-depends` followed (a direct dependency is level 1).
pub const MAX_DEPTH: usize = 16;
/// The most kernels one closure holds.
pub const MAX_KERNELS: usize = 100;

/// One dependency of the closure, pinned and present in the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockedTree {
    pub dependency: KernelDependency,
    pub pinned: Pinned,
    /// The tree in the dependency cache.
    pub dir: Utf8PathBuf,
    /// Where it came from.
    pub source: Source,
}

/// Where a [`LockedTree`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Downloaded now.
    Downloaded,
    /// The cache.
    Cached,
    /// The cache, after removing bytecode written into it.
    BytecodeRemoved,
}

impl Source {
    /// How the build reports it.
    fn words(self) -> &'static str {
        match self {
            Source::Downloaded => "downloaded, hash checked",
            Source::Cached => "cached, hash checked",
            Source::BytecodeRemoved => "cached, bytecode removed, hash checked",
        }
    }
}

/// `a (version 1) -> b (version 1)`: the dependency chain from a root to `dep`.
fn chain(parents: &[Key], dep: &KernelDependency) -> String {
    parents
        .iter()
        .map(Key::dependency)
        .chain([dep.clone()])
        .map(|d| describe(&d))
        .collect::<Vec<_>>()
        .join(" -> ")
}

/// ` (needed by b (version 1))`, the kernel whose metadata named it; nothing for a direct
/// dependency.
fn needed_by(parents: &[Key]) -> String {
    parents.last().map(|p| format!(" (needed by {})", describe(&p.dependency()))).unwrap_or_default()
}

/// The `kernel-depends` of every variant of a fetched tree (`build/*/metadata.json`).
fn tree_depends(dir: &Utf8Path) -> anyhow::Result<Vec<KernelDependency>> {
    #[derive(serde::Deserialize)]
    struct Meta {
        #[serde(rename = "kernel-depends", default)]
        kernel_depends: Vec<KernelDependency>,
    }
    let mut out = BTreeSet::new();
    let build = dir.join("build");
    let Ok(entries) = build.read_dir_utf8() else {
        return Ok(Vec::new());
    };
    for e in entries {
        let path = e?.path().join("metadata.json");
        if !path.is_file() {
            continue;
        }
        let file = std::fs::File::open(&path).with_context(|| format!("cannot read `{path}`"))?;
        let meta: Meta = serde_json::from_reader(std::io::Read::take(file, 1 << 20))
            .with_context(|| format!("`{path}` is not a kernel metadata.json"))?;
        // The tree came from the Hub: its ids go into URLs only when they are Hub ids.
        for d in &meta.kernel_depends {
            if let Some(why) = crate::config::validate::repo_id_problem(&d.repo_id) {
                anyhow::bail!(
                    "`{path}` lists the kernel dependency `{}`, which is not a Hub repository id: {why}",
                    crate::printer::escape_controls(&d.repo_id)
                );
            }
        }
        out.extend(meta.kernel_depends.iter().map(Key::of));
    }
    Ok(out.iter().map(Key::dependency).collect())
}

/// What [`walk`] calls for each dependency: the dependency and the chain above it (empty for a
/// direct one); it returns the dependency's tree.
type Visit<'a> = dyn FnMut(&KernelDependency, &[Key]) -> anyhow::Result<LockedTree> + 'a;

/// Depth-first over the closure of `roots`, calling `visit` once per dependency; a dependency
/// reached again on its own path is a cycle, as kernels says. Nothing is visited beyond
/// [`MAX_DEPTH`] levels or [`MAX_KERNELS`] kernels: that is an error naming the chain.
fn walk(roots: &[KernelDependency], visit: &mut Visit<'_>) -> anyhow::Result<Vec<LockedTree>> {
    fn go(
        dep: &KernelDependency,
        stack: &mut Vec<Key>,
        done: &mut std::collections::BTreeMap<Key, LockedTree>,
        visit: &mut Visit<'_>,
    ) -> anyhow::Result<()> {
        let key = Key::of(dep);
        if stack.contains(&key) {
            anyhow::bail!("cyclic kernel dependency: {}", chain(stack, dep));
        }
        if done.contains_key(&key) {
            return Ok(());
        }
        anyhow::ensure!(
            stack.len() < MAX_DEPTH,
            "kernel dependencies nest more than {MAX_DEPTH} levels deep: {}; kernel-builder follows at most {MAX_DEPTH} levels of kernel-depends (is each kernel's metadata.json naming another without end?)",
            chain(stack, dep)
        );
        anyhow::ensure!(
            done.len() < MAX_KERNELS,
            "the kernel dependencies hold more than {MAX_KERNELS} kernels (the next one is {}); kernel-builder locks at most {MAX_KERNELS}",
            chain(stack, dep)
        );
        let tree = visit(dep, stack)?;
        let deps = tree_depends(&tree.dir)?;
        done.insert(key.clone(), tree);
        stack.push(key);
        for d in &deps {
            go(d, stack, done, visit)?;
        }
        stack.pop();
        Ok(())
    }
    let mut done = std::collections::BTreeMap::new();
    for r in roots {
        go(r, &mut Vec::new(), &mut done, visit)?;
    }
    Ok(done.into_values().collect())
}

/// Resolve every dependency of `config` (and theirs) against the Hub, download each commit's
/// tree into `cache`, and return the lock.
pub fn resolve(
    config: &BuildConfig,
    hub: &HubReader,
    cache: &Utf8Path,
    report: &dyn crate::report::Reporter,
) -> anyhow::Result<(Lock, Vec<LockedTree>)> {
    let _in_use = cache::in_use(cache)?;
    let mut n = 0;
    let trees = walk(&direct(config), &mut |dep, parents| {
        n += 1;
        let commit = hub.resolve(dep)?;
        report.status(&format!(
            "downloading kernel dependency {n}: {} at {}{}",
            describe(dep),
            &commit[..12],
            needed_by(parents)
        ));
        let f = fetch::fetch_into_cache(hub, cache, &dep.repo_id, &commit, None)?;
        Ok(LockedTree {
            dependency: dep.clone(),
            pinned: Pinned { commit, hash: f.hash },
            dir: f.dir,
            source: Source::Downloaded,
        })
    })?;
    let mut lock = Lock::default();
    for t in &trees {
        lock.entries.insert(Key::of(&t.dependency), t.pinned.clone());
    }
    Ok((lock, trees))
}

/// The locked closure of `kernel_dir`'s dependencies in `cache`: a cached tree is used when
/// its NAR hash is the lock's (no network at all then); otherwise it is downloaded at the
/// locked commit and must have the locked hash. `hub` is opened only when something is missing.
///
/// Errors: no lock, a dependency (direct or of a dependency) the lock does not pin, a tree
/// whose hash is not the lock's, a failed download.
pub fn fetch_locked(
    config: &BuildConfig,
    kernel_dir: &Utf8Path,
    cache: &Utf8Path,
    hub: &mut dyn FnMut() -> anyhow::Result<HubReader>,
    report: &dyn crate::report::Reporter,
) -> anyhow::Result<Vec<LockedTree>> {
    let roots = direct(config);
    if roots.is_empty() {
        return Ok(Vec::new());
    }
    let fix = format!("run `kernel-builder lock-kernel-deps {kernel_dir}`");
    let lock = Lock::read(kernel_dir)?.with_context(|| {
        format!("build.toml has kernel-depends but `{kernel_dir}` has no kernels.lock; {fix}")
    })?;
    let mut reader: Option<HubReader> = None;
    let _in_use = cache::in_use(cache)?;
    walk(&roots, &mut |dep, parents| {
        let pinned = lock
            .get(dep)
            .with_context(|| format!("{} is not in kernels.lock (the lock is stale); {fix}", describe(dep)))?
            .clone();
        let dir = fetch::tree_dir(cache, &dep.repo_id, &pinned.commit);
        if dir.is_dir() {
            // Bytecode is never part of a locked tree: what is there now was written after it
            // was cached, and Python would run it instead of the locked sources.
            let removed = fetch::strip_bytecode(&dir)?;
            if !removed.is_empty() {
                report.note(&format!(
                    "removed Python bytecode from the cached tree `{dir}`, written after it was cached (a kernel dependency holds none): {}",
                    removed.join(", ")
                ));
            }
            let cached = fetch::tree_hash(&dir)?;
            if cached == pinned.hash {
                fetch::touch(&dir);
                let source = if removed.is_empty() { Source::Cached } else { Source::BytecodeRemoved };
                return Ok(LockedTree { dependency: dep.clone(), pinned, dir, source });
            }
            report.note(&format!(
                "the cached tree `{dir}` has NAR hash {cached}, not the locked {}; downloading it again",
                pinned.hash
            ));
        }
        if reader.is_none() {
            reader = Some(hub()?);
        }
        let hub = reader.as_ref().context("no Hub connection")?;
        report.status(&format!(
            "downloading kernel dependency {} at {}{}",
            describe(dep),
            &pinned.commit[..12],
            needed_by(parents)
        ));
        let f = fetch::fetch_into_cache(hub, cache, &dep.repo_id, &pinned.commit, Some(&pinned.hash))
            .with_context(|| {
                format!("cannot fetch {} at the locked commit {}", describe(dep), pinned.commit)
            })?;
        Ok(LockedTree { dependency: dep.clone(), pinned, dir: f.dir, source: Source::Downloaded })
    })
}

/// `LOCAL_KERNELS` for kernels: `org/name=/tree:…`, which makes `get_kernel`,
/// `get_local_kernel` and their dependency resolution load these trees. kernels keys it by
/// repository id, so a repository locked at two pins appears once (the first).
pub fn local_kernels(trees: &[LockedTree]) -> String {
    let mut seen = BTreeSet::new();
    trees
        .iter()
        .filter(|t| seen.insert(t.dependency.repo_id.clone()))
        .map(|t| format!("{}={}", t.dependency.repo_id, t.dir))
        .collect::<Vec<_>>()
        .join(":")
}

/// `kernel-paths.json` (kernels' `KernelPaths`: `[{"dependency", "path"}]`) and `local-kernels`
/// in `out`, from `REPO_ID=PIN=PATH` arguments (`PIN`: `version:N` or `revision:R`); the job of
/// the Nix library's `kernel-deps` package.
pub fn write_dep_paths(out: &Utf8Path, deps: &[String]) -> anyhow::Result<()> {
    let mut trees = Vec::new();
    for arg in deps {
        let mut parts = arg.splitn(3, '=');
        let (Some(repo_id), Some(pin), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            anyhow::bail!("`{arg}` is not REPO_ID=PIN=PATH");
        };
        let pin = match pin.split_once(':') {
            Some(("version", v)) => {
                crate::config::KernelPin::Version(v.parse().with_context(|| format!("`{arg}`"))?)
            }
            Some(("revision", r)) => crate::config::KernelPin::Revision(r.to_owned()),
            _ => anyhow::bail!("`{arg}`: the pin is `version:N` or `revision:R`"),
        };
        trees.push(LockedTree {
            dependency: KernelDependency { repo_id: repo_id.to_owned(), pin },
            pinned: Pinned { commit: String::new(), hash: String::new() },
            dir: Utf8PathBuf::from(path),
            source: Source::Cached,
        });
    }
    let paths: Vec<serde_json::Value> =
        trees.iter().map(|t| serde_json::json!({"dependency": t.dependency, "path": t.dir})).collect();
    std::fs::create_dir_all(out).with_context(|| format!("cannot create `{out}`"))?;
    crate::fsutil::write_atomic(
        &out.join("kernel-paths.json"),
        serde_json::to_string_pretty(&paths)?.as_bytes(),
    )?;
    crate::fsutil::write_atomic(
        &out.join("local-kernels"),
        format!("{}\n", local_kernels(&trees)).as_bytes(),
    )?;
    Ok(())
}

/// Fetch the locked trees of a kernel before a build, saying on stderr what came from where
/// (the build and `get-kernel-deps`).
pub fn fetch_for_build(
    config: &BuildConfig,
    kernel_dir: &Utf8Path,
    report: &dyn crate::report::Reporter,
) -> anyhow::Result<Vec<LockedTree>> {
    if direct(config).is_empty() {
        return Ok(Vec::new());
    }
    let cache = fetch::cache_dir()?;
    let trees = fetch_locked(config, kernel_dir, &cache, &mut HubReader::from_env, report)?;
    for t in &trees {
        report.status(&format!(
            "kernel dependency {} at {} ({}): {}",
            describe(&t.dependency),
            &t.pinned.commit[..12],
            t.pinned.hash,
            t.source.words()
        ));
    }
    Ok(trees)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::KernelPin;

    fn dep(repo: &str) -> KernelDependency {
        KernelDependency { repo_id: repo.into(), pin: KernelPin::Version(1) }
    }

    /// A tree per repository under `root`, whose one variant depends on `deps`.
    fn tree(root: &Utf8Path, repo: &str, deps: &[&str]) -> Utf8PathBuf {
        let dir = root.join(repo.replace('/', "--"));
        let variant = dir.join("build/torch-cpu");
        std::fs::create_dir_all(&variant).unwrap();
        let deps: Vec<KernelDependency> = deps.iter().map(|d| dep(d)).collect();
        let meta = serde_json::json!({"name": "x", "kernel-depends": deps});
        std::fs::write(variant.join("metadata.json"), meta.to_string()).unwrap();
        dir
    }

    fn visit_in(root: &Utf8Path) -> impl FnMut(&KernelDependency, &[Key]) -> anyhow::Result<LockedTree> + '_ {
        move |d, _| {
            Ok(LockedTree {
                dependency: d.clone(),
                pinned: Pinned { commit: "c".repeat(40), hash: String::new() },
                dir: root.join(d.repo_id.replace('/', "--")),
                source: Source::Cached,
            })
        }
    }

    #[test]
    fn the_closure_is_walked_once_per_dependency_and_a_cycle_is_named() {
        let t = tempfile::tempdir().unwrap();
        let root = Utf8Path::from_path(t.path()).unwrap();
        tree(root, "o/a", &["o/b", "o/c"]);
        tree(root, "o/b", &["o/c"]);
        tree(root, "o/c", &[]);
        let mut visited = Vec::new();
        let mut visit = visit_in(root);
        let trees = walk(&[dep("o/a")], &mut |d, parents| {
            visited.push(format!("{} <- {}", d.repo_id, parents.len()));
            visit(d, parents)
        })
        .unwrap();
        assert_eq!(visited, ["o/a <- 0", "o/b <- 1", "o/c <- 2"]);
        let repos: Vec<&str> = trees.iter().map(|t| t.dependency.repo_id.as_str()).collect();
        assert_eq!(repos, ["o/a", "o/b", "o/c"]);

        tree(root, "o/c", &["o/a"]);
        let err = walk(&[dep("o/a")], &mut visit_in(root)).unwrap_err().to_string();
        assert_eq!(
            err,
            "cyclic kernel dependency: o/a (version 1) -> o/b (version 1) -> o/c (version 1) -> o/a (version 1)"
        );

        // Found by attacking the fixes: a downloaded tree's metadata named dependencies whose
        // ids went into Hub URLs unchecked (`o/n?a=b`, `o/..`).
        let c = tree(root, "o/c", &["o/n?a=b"]);
        let err = walk(&[dep("o/c")], &mut visit_in(root)).unwrap_err().to_string();
        assert_eq!(
            err,
            format!("`{c}/build/torch-cpu/metadata.json` lists the kernel dependency `o/n?a=b`, which is not a Hub repository id: its name has the character `?`; the Hub allows letters, digits, `-`, `_` and `.`")
        );
    }

    /// Issue 31: a Hub whose kernels each depended on a new one made `lock-kernel-deps`
    /// download 2,468 trees in 240 s. The closure now ends at MAX_DEPTH levels and at
    /// MAX_KERNELS kernels, with an error naming the chain, and nothing beyond is visited.
    #[test]
    fn the_closure_is_bounded_in_depth_and_in_count() {
        let t = tempfile::tempdir().unwrap();
        let root = Utf8Path::from_path(t.path()).unwrap();
        // o/d0 -> o/d1 -> … -> o/d40
        for i in 0..40 {
            tree(root, &format!("o/d{i}"), &[&format!("o/d{}", i + 1)]);
        }
        let mut visited = 0;
        let mut visit = visit_in(root);
        let err = walk(&[dep("o/d0")], &mut |d, p| {
            visited += 1;
            visit(d, p)
        })
        .unwrap_err()
        .to_string();
        let chain: Vec<String> = (0..=MAX_DEPTH).map(|i| format!("o/d{i} (version 1)")).collect();
        assert_eq!(
            err,
            format!("kernel dependencies nest more than 16 levels deep: {}; kernel-builder follows at most 16 levels of kernel-depends (is each kernel's metadata.json naming another without end?)", chain.join(" -> "))
        );
        assert_eq!(visited, MAX_DEPTH);
        // Exactly MAX_DEPTH levels are fine.
        tree(root, &format!("o/d{}", MAX_DEPTH - 1), &[]);
        assert_eq!(walk(&[dep("o/d0")], &mut visit_in(root)).unwrap().len(), MAX_DEPTH);

        // o/wide -> o/w0 … o/w199: the 101st kernel is not visited.
        let leaves: Vec<String> = (0..200).map(|i| format!("o/w{i:03}")).collect();
        tree(root, "o/wide", &leaves.iter().map(String::as_str).collect::<Vec<_>>());
        for l in &leaves {
            tree(root, l, &[]);
        }
        let mut visited = 0;
        let mut visit = visit_in(root);
        let err = walk(&[dep("o/wide")], &mut |d, p| {
            visited += 1;
            visit(d, p)
        })
        .unwrap_err()
        .to_string();
        assert_eq!(
            err,
            "the kernel dependencies hold more than 100 kernels (the next one is o/wide (version 1) -> o/w099 (version 1)); kernel-builder locks at most 100"
        );
        assert_eq!(visited, MAX_KERNELS);
    }

    #[test]
    fn local_kernels_names_each_repository_once() {
        let t = |repo: &str, pin: KernelPin, dir: &str| LockedTree {
            dependency: KernelDependency { repo_id: repo.into(), pin },
            pinned: Pinned { commit: String::new(), hash: String::new() },
            dir: dir.into(),
            source: Source::Cached,
        };
        let trees = [
            t("o/a", KernelPin::Version(1), "/c/a1"),
            t("o/a", KernelPin::Version(2), "/c/a2"),
            t("o/b", KernelPin::Revision("main".into()), "/c/b"),
        ];
        assert_eq!(local_kernels(&trees), "o/a=/c/a1:o/b=/c/b");
    }
}
