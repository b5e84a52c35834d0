//! Reading kernel dependencies from the Hub: a pin to a commit, and a commit's whole tree
//! into the dependency cache, every file checked against the listing and the tree against its
//! NAR hash.
//!
//! Listing and refs go through [`HubClient`]. File bytes and revision lookups are read here, on
//! an agent of their own, because they are the only answers that are streamed to disk (a
//! compiled dependency's shared objects may be hundreds of megabytes): each file is read up to
//! the size the listing gave and no further, and its Git blob id (or LFS SHA-256) is checked
//! before the tree is hashed.
//!
//! Cache layout: `<cache root>/kernel-deps/<owner>--<name>--<commit>/` holds the tree exactly as
//! the Hub has it at that commit (what upstream's Nix fetcher puts in its store path, so the
//! NAR hashes agree). A tree is downloaded into a temporary sibling and renamed into place; a
//! cached tree is checked against the lock's hash every time it is used, so a tampered or
//! half-deleted cache entry is an error, never a silent wrong dependency.

use std::io::{Read, Write};
use std::time::Duration;

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};
use sha1::Digest;

use super::lock::describe;
use crate::config::{KernelDependency, KernelPin};
use crate::hub::auth::{self, Token};
use crate::hub::client::{encode_segment, HubClient};

/// The most bytes read of a revision answer (`{"sha", "siblings", …}`).
const INFO_LIMIT: u64 = 16 << 20;
/// The most files one dependency tree may hold.
const MAX_FILES: usize = 100_000;
/// How long the head of an answer may take.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// The overall deadline of a request whose answer is `bytes` long: two answer timeouts and the
/// body at no less than 256 KiB/s, so a silent or trickling server cannot hold a lock or a
/// build forever, and a large shared object still has the time it needs.
fn deadline(bytes: u64) -> Duration {
    2 * ANSWER_TIMEOUT + Duration::from_secs(bytes / (256 << 10))
}

/// A connection to `HF_ENDPOINT` for reading kernel trees.
pub struct HubReader {
    client: HubClient,
    endpoint: String,
    token: Option<Token>,
    agent: ureq::Agent,
}

impl HubReader {
    /// `HF_ENDPOINT` (else huggingface.co), with the token `hf auth login` or `HF_TOKEN` gives.
    pub fn from_env() -> anyhow::Result<HubReader> {
        let endpoint = auth::checked_endpoint()?;
        let token = auth::find_token()?.map(|(t, _)| t);
        Ok(HubReader::new(&endpoint, token))
    }

    pub fn new(endpoint: &str, token: Option<Token>) -> HubReader {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(15)))
            .timeout_recv_response(Some(ANSWER_TIMEOUT))
            .user_agent(concat!("kernel-builder/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        HubReader {
            client: HubClient::new(endpoint, token.clone()),
            endpoint: endpoint.trim_end_matches('/').to_owned(),
            token,
            agent,
        }
    }

    fn shown(&self, s: &str) -> String {
        let s = auth::redact_userinfo(s);
        match &self.token {
            Some(t) => t.redact(&s),
            None => s,
        }
    }

    /// GET `url` (on the endpoint: the token goes along; never on a redirect), whose answer
    /// is about `bytes` long. The body is for the caller to read, within [`deadline`].
    fn get(&self, url: &str, bytes: u64) -> anyhow::Result<ureq::http::Response<ureq::Body>> {
        let mut req = self.agent.get(url);
        if let Some(t) = &self.token {
            req = req.header("Authorization", format!("Bearer {}", t.expose()));
        }
        let mut resp = req
            .config()
            .timeout_global(Some(deadline(bytes)))
            .build()
            .call()
            .map_err(|e| anyhow::anyhow!("GET {} failed: {e}", self.shown(url)))?;
        let status = resp.status().as_u16();
        if !(200..300).contains(&status) {
            let mut bytes = Vec::new();
            let _ = resp.body_mut().as_reader().take(4096).read_to_end(&mut bytes);
            let text = String::from_utf8_lossy(&bytes);
            let message = serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_owned))
                .unwrap_or_else(|| text.chars().take(300).collect());
            anyhow::bail!("GET {} failed: HTTP {status}: {}", self.shown(url), self.shown(&message));
        }
        Ok(resp)
    }

    /// The commit `dep` names on the Hub now: the head of branch `v<version>`, or what the
    /// revision (branch, tag or commit) resolves to.
    pub fn resolve(&self, dep: &KernelDependency) -> anyhow::Result<String> {
        let commit = match &dep.pin {
            KernelPin::Version(v) => {
                let refs = self.client.refs(&dep.repo_id)?.with_context(|| {
                    format!(
                        "{}: no kernel repository `{}` at {}",
                        describe(dep),
                        dep.repo_id,
                        self.shown(&self.endpoint)
                    )
                })?;
                let branch = format!("v{v}");
                match refs.branches.iter().find(|b| b.name == branch) {
                    Some(b) => b.target_commit.clone(),
                    None => {
                        let mut have: Vec<u64> = refs
                            .branches
                            .iter()
                            .filter_map(|b| b.name.strip_prefix('v')?.parse().ok())
                            .collect();
                        have.sort_unstable();
                        let have: Vec<String> = have.iter().map(|v| v.to_string()).collect();
                        anyhow::bail!(
                            "{}: the repository has no branch `{branch}`; its versions are: {}",
                            describe(dep),
                            if have.is_empty() { "none".to_owned() } else { have.join(", ") }
                        )
                    }
                }
            }
            KernelPin::Revision(r) => {
                let url =
                    format!("{}/api/kernels/{}/revision/{}", self.endpoint, dep.repo_id, encode_segment(r));
                let mut resp = self
                    .get(&url, INFO_LIMIT)
                    .with_context(|| format!("cannot resolve {}", describe(dep)))?;
                let body = resp
                    .body_mut()
                    .with_config()
                    .limit(INFO_LIMIT)
                    .read_to_vec()
                    .with_context(|| format!("cannot read the answer of GET {}", self.shown(&url)))?;
                let info: serde_json::Value = serde_json::from_slice(&body)
                    .with_context(|| format!("GET {}: the answer is not JSON", self.shown(&url)))?;
                info.get("sha")
                    .and_then(|s| s.as_str())
                    .map(str::to_owned)
                    .with_context(|| format!("GET {}: the answer has no `sha`", self.shown(&url)))?
            }
        };
        let commit = commit.to_ascii_lowercase();
        anyhow::ensure!(
            commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_hexdigit()),
            "{}: the Hub answered `{commit}`, which is not a commit id",
            describe(dep)
        );
        Ok(commit)
    }

    /// Download every file of `repo_id` at `commit` into the new directory `dest`, each checked
    /// against the listing's size and id.
    pub fn download_tree(&self, repo_id: &str, commit: &str, dest: &Utf8Path) -> anyhow::Result<()> {
        let files = self.client.list_tree(repo_id, commit)?;
        anyhow::ensure!(
            files.len() <= MAX_FILES,
            "{repo_id} at {commit} lists {} files; a kernel tree holds at most {MAX_FILES}",
            files.len()
        );
        std::fs::create_dir_all(dest).with_context(|| format!("cannot create `{dest}`"))?;
        for f in &files {
            let rel = safe_relative(&f.path)
                .with_context(|| format!("{repo_id} at {commit} lists the path `{}`", f.path))?;
            let target = dest.join(rel);
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent).with_context(|| format!("cannot create `{parent}`"))?;
            }
            let (size, check) = match &f.lfs {
                Some(l) => (l.size, Check::Sha256(l.oid.to_ascii_lowercase())),
                None => (f.size, Check::GitBlob(f.oid.to_ascii_lowercase())),
            };
            let url = format!(
                "{}/kernels/{repo_id}/resolve/{commit}/{}",
                self.endpoint,
                f.path.split('/').map(encode_segment).collect::<Vec<_>>().join("/")
            );
            let mut resp = self.get(&url, size)?;
            let mut reader = resp.body_mut().as_reader().take(size + 1);
            self.save(&mut reader, &target, size, &check)
                .with_context(|| format!("{repo_id} at {commit}: `{}` (GET {})", f.path, self.shown(&url)))?;
        }
        Ok(())
    }

    /// Stream `reader` into the new file `target`, checking it is `size` bytes with id `check`.
    fn save(&self, reader: &mut dyn Read, target: &Utf8Path, size: u64, check: &Check) -> anyhow::Result<()> {
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(target)
            .with_context(|| format!("cannot create `{target}`"))?;
        let mut sha1 = sha1::Sha1::new();
        sha1.update(format!("blob {size}\0").as_bytes());
        let mut sha256 = sha2::Sha256::new();
        let mut buf = vec![0u8; crate::fsutil::STREAM_BUFFER];
        let mut got = 0u64;
        loop {
            let n = reader.read(&mut buf).context("the download broke off")?;
            if n == 0 {
                break;
            }
            got += n as u64;
            sha1.update(&buf[..n]);
            sha256.update(&buf[..n]);
            out.write_all(&buf[..n]).with_context(|| format!("cannot write `{target}`"))?;
        }
        anyhow::ensure!(got == size, "the Hub sent {got} bytes where its listing says {size}");
        let (want, have) = match check {
            Check::GitBlob(oid) => (oid, hex(&sha1.finalize())),
            Check::Sha256(oid) => (oid, hex(&sha256.finalize())),
        };
        anyhow::ensure!(&have == want, "the bytes sent have id {have} where the listing says {want}");
        Ok(())
    }
}

enum Check {
    GitBlob(String),
    Sha256(String),
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `path` from a listing as a relative path that stays inside the tree: no empty, `.` or `..`
/// segments, no leading `/`, no NUL or backslash.
fn safe_relative(path: &str) -> anyhow::Result<&Utf8Path> {
    anyhow::ensure!(
        !path.is_empty()
            && !path.contains(['\0', '\\'])
            && path.split('/').all(|s| !s.is_empty() && s != "." && s != ".."),
        "a path that would leave the tree (empty, absolute, or with `.`, `..` or `\\`)"
    );
    Ok(Utf8Path::new(path))
}

/// The dependency cache: `<cache root>/kernel-deps`.
pub fn cache_dir() -> anyhow::Result<Utf8PathBuf> {
    Ok(crate::fsutil::cache_root()?.join("kernel-deps"))
}

/// Where the tree of `repo_id` at `commit` is cached.
pub fn tree_dir(cache: &Utf8Path, repo_id: &str, commit: &str) -> Utf8PathBuf {
    cache.join(format!("{}--{commit}", repo_id.replace('/', "--")))
}

/// The NAR hash (SRI) of a downloaded directory.
pub fn tree_hash(dir: &Utf8Path) -> anyhow::Result<String> {
    crate::hash::nar::nar_hash_sri(dir.as_std_path()).with_context(|| format!("cannot hash `{dir}`"))
}

/// The NAR hash of a cached tree, leaving out the Python bytecode that loading it may have
/// written (read-only modes do not stop root); a Hub tree holds none (uploads and kernels'
/// downloads exclude it), so this equals the locked hash of an untouched tree.
pub fn cached_tree_hash(dir: &Utf8Path) -> anyhow::Result<String> {
    crate::hash::nar::variant_nar_hash_sri(dir.as_std_path()).with_context(|| format!("cannot hash `{dir}`"))
}

/// Download `repo_id` at `commit` into the cache (replacing an entry whose hash is wrong) and
/// return its directory and NAR hash. With `want`, a tree of another hash is an error and is
/// not kept.
pub fn fetch_into_cache(
    hub: &HubReader,
    cache: &Utf8Path,
    repo_id: &str,
    commit: &str,
    want: Option<&str>,
) -> anyhow::Result<(Utf8PathBuf, String)> {
    std::fs::create_dir_all(cache).with_context(|| format!("cannot create `{cache}`"))?;
    let tmp = tempfile::Builder::new()
        .prefix(".download-")
        .tempdir_in(cache)
        .with_context(|| format!("cannot create a temporary directory in `{cache}`"))?;
    let staged = Utf8Path::from_path(tmp.path()).context("the cache path is not UTF-8")?.join("tree");
    hub.download_tree(repo_id, commit, &staged)?;
    let hash = tree_hash(&staged)?;
    if let Some(want) = want {
        anyhow::ensure!(
            hash == want,
            "{repo_id} at {commit} has NAR hash {hash} on the Hub, but kernels.lock says {want}: the \
             commit's files changed or the lock was edited; if you trust the Hub's tree, run \
             `kernel-builder lock-kernel-deps` again"
        );
    }
    set_read_only(&staged, true)?;
    let dir = tree_dir(cache, repo_id, commit);
    if dir.exists() {
        let old = cache.join(format!(".stale-{}-{}", std::process::id(), dir.file_name().unwrap_or("tree")));
        std::fs::rename(&dir, &old).with_context(|| format!("cannot move `{dir}` aside"))?;
        let _ = set_read_only(&old, false);
        let _ = std::fs::remove_dir_all(&old);
    }
    std::fs::rename(&staged, &dir).with_context(|| format!("cannot move the download to `{dir}`"))?;
    Ok((dir, hash))
}

/// Make a cached tree read-only (files 0444, directories 0555), as a store path is, so that
/// loading it cannot write bytecode into it and change its NAR hash; or writable again
/// (0644/0755) to remove it. The NAR hash does not see these bits (no file is executable).
fn set_read_only(dir: &Utf8Path, read_only: bool) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let (file, directory) = if read_only { (0o444, 0o555) } else { (0o644, 0o755) };
    // Directories are opened up before their entries and closed after them.
    if !read_only {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(directory))?;
    }
    for e in dir.read_dir_utf8().with_context(|| format!("cannot read `{dir}`"))? {
        let e = e?;
        let kind = e.file_type()?;
        if kind.is_dir() {
            set_read_only(e.path(), read_only)?;
        } else if kind.is_file() {
            std::fs::set_permissions(e.path(), std::fs::Permissions::from_mode(file))
                .with_context(|| format!("cannot set permissions on `{}`", e.path()))?;
        }
    }
    if read_only {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(directory))
            .with_context(|| format!("cannot set permissions on `{dir}`"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listing_paths_stay_inside_the_tree() {
        for bad in ["", "/etc/passwd", "a/../../b", "a//b", "./a", "a\\b", "a/."] {
            assert!(safe_relative(bad).is_err(), "{bad:?}");
        }
        assert_eq!(safe_relative("build/torch-cpu/__init__.py").unwrap(), "build/torch-cpu/__init__.py");
    }
}
