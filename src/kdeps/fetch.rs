//! Reading kernel dependencies from the Hub: a pin to a commit, and a commit's whole tree
//! into the dependency cache, every file checked against the listing and the tree against its
//! NAR hash.
//!
//! Listing, refs and revision lookups go through [`HubClient`] (its bounds, its timeouts
//! `$KERNEL_BUILDER_HUB_TIMEOUT`, and redirects followed only on the Hub's origin). File bytes
//! are read here, on an agent of their own, because they are the only answers streamed to disk
//! (a compiled dependency's shared objects may be hundreds of megabytes). What the listing
//! claims is not trusted for the bounds: a file listed larger than [`MAX_FILE_BYTES`], or a
//! tree larger than [`MAX_TREE_BYTES`] in all, is refused before a byte is downloaded; each
//! file is then read up to its listed size and no further, within a deadline that grows with
//! that size, and its Git blob id (or LFS SHA-256) is checked before the tree is hashed. A file
//! download may follow redirects to another server (the Hub sends LFS content from a CDN):
//! the token never goes along, and the bytes are checked against the listing's id.
//!
//! Cache layout: `<cache root>/kernel-deps/<owner>--<name>--<commit>/` holds the tree exactly as
//! the Hub has it at that commit (what upstream's Nix fetcher puts in its store path, so the
//! NAR hashes agree). A tree is downloaded into a temporary sibling and renamed into place; a
//! cached tree is checked against the lock's hash every time it is used, so a tampered or
//! half-deleted cache entry is an error, never a silent wrong dependency.
//!
//! Python bytecode (`__pycache__/`, `*.pyc`: what the kernels loader's digest leaves out) is
//! never part of a dependency: a listing's bytecode is not downloaded, so neither the lock's
//! NAR hash nor the Nix fetcher's output holds it, and bytecode found in a cached tree (written
//! by a Python running as root, or put there) is removed before the tree is hashed and used,
//! so it can never run in place of the locked sources.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};
use sha1::Digest;

use super::lock::describe;
use crate::config::{KernelDependency, KernelPin};
use crate::hub::auth::{self, Token};
use crate::hub::client::{encode_segment, HubClient, Timeouts, CONNECT_TIMEOUT};

/// The most files one dependency tree may hold.
const MAX_FILES: usize = 100_000;
/// The most bytes of one file of a dependency tree, whatever the listing says (a compiled
/// kernel's shared object for every CUDA architecture is well under 2 GiB).
pub const MAX_FILE_BYTES: u64 = 4 << 30;
/// The most bytes of a whole dependency tree (every variant of a kernel), whatever the
/// listing says.
pub const MAX_TREE_BYTES: u64 = 64 << 30;
/// The most redirects a file download follows (the Hub answers with one, to its CDN).
const MAX_REDIRECTS: u32 = 5;
/// What a whole tree download may take per file, besides one request's deadline for all its
/// bytes ([`Timeouts::deadline`] of the tree's size): each file has its own deadline too, and
/// this bounds a server that answers every one of [`MAX_FILES`] files just in time.
const PER_FILE: Duration = Duration::from_secs(2);

/// A connection to `HF_ENDPOINT` for reading kernel trees.
pub struct HubReader {
    client: HubClient,
    endpoint: String,
    token: Option<Token>,
    agent: ureq::Agent,
    timeouts: Timeouts,
    /// [`PER_FILE`], shorter in tests.
    per_file: Duration,
}

impl HubReader {
    /// `HF_ENDPOINT` (else huggingface.co), with the token `hf auth login` or `HF_TOKEN` gives.
    pub fn from_env() -> anyhow::Result<HubReader> {
        let endpoint = auth::checked_endpoint()?;
        let token = auth::find_token()?.map(|(t, _)| t);
        Ok(HubReader::new(&endpoint, token, Timeouts::from_env()?))
    }

    /// A reader of `endpoint` with `token`, each request waiting `timeouts.answer` for each
    /// part of its answer.
    pub fn new(endpoint: &str, token: Option<Token>, timeouts: Timeouts) -> HubReader {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .tls_config(crate::tls::config())
            .http_status_as_error(false)
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .timeout_recv_response(Some(timeouts.answer))
            .timeout_recv_body(Some(timeouts.answer))
            .max_redirects(MAX_REDIRECTS)
            // The token goes to the endpoint only, never along a redirect.
            .redirect_auth_headers(ureq::config::RedirectAuthHeaders::Never)
            .user_agent(concat!("kernel-builder/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        HubReader {
            client: HubClient::with_timeouts(endpoint, token.clone(), timeouts),
            endpoint: endpoint.trim_end_matches('/').to_owned(),
            token,
            agent,
            timeouts,
            per_file: PER_FILE,
        }
    }

    /// `s` as shown: no token, no user information, control characters escaped.
    fn shown(&self, s: &str) -> String {
        let s = auth::redact_userinfo(s);
        let s = match &self.token {
            Some(t) => t.redact(&s),
            None => s,
        };
        crate::printer::escape_controls(&s).into_owned()
    }

    /// GET `url` (on the endpoint: the token goes along; never on a redirect), whose answer
    /// is `bytes` long. The body is for the caller to read, within the deadline
    /// ([`Timeouts::deadline`] of `bytes`: at no less than 256 KiB/s).
    fn get(&self, url: &str, bytes: u64, until: Instant) -> anyhow::Result<ureq::http::Response<ureq::Body>> {
        let mut req = self.agent.get(url);
        if let Some(t) = &self.token {
            req = req.header("Authorization", format!("Bearer {}", t.expose()));
        }
        let mut resp = req
            .config()
            .timeout_global(Some(self.timeouts.deadline(bytes).min(until.saturating_duration_since(Instant::now()))))
            .build()
            .call()
            .map_err(|e| match e {
                ureq::Error::Timeout(what) => anyhow::anyhow!(
                    "GET {} failed: no answer in time ({what}; kernel-builder waits {} s for an answer, {} sets it)",
                    self.shown(url),
                    self.timeouts.answer.as_secs(),
                    crate::hub::client::TIMEOUT_ENV
                ),
                e => anyhow::anyhow!("GET {} failed: {}", self.shown(url), self.shown(&crate::tls::describe(&e))),
            })?;
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
            KernelPin::Revision(r) => self
                .client
                .revision(&dep.repo_id, r)
                .with_context(|| format!("cannot resolve {}", describe(dep)))?,
        };
        let commit = commit.to_ascii_lowercase();
        anyhow::ensure!(
            commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_hexdigit()),
            "{}: the Hub answered `{}`, which is not a commit id",
            describe(dep),
            crate::printer::escape_controls(&commit)
        );
        Ok(commit)
    }

    /// Download every file of `repo_id` at `commit` into the new directory `dest`, each checked
    /// against the listing's size and id.
    /// Bytecode in the listing ([`is_bytecode_path`]) is left out. Returns the files and
    /// bytes downloaded.
    pub fn download_tree(
        &self,
        repo_id: &str,
        commit: &str,
        dest: &Utf8Path,
    ) -> anyhow::Result<(usize, u64)> {
        let mut files = self.client.list_tree(repo_id, commit)?;
        files.retain(|f| !is_bytecode_path(&f.path));
        anyhow::ensure!(
            files.len() <= MAX_FILES,
            "{repo_id} at {commit} lists {} files; a kernel tree holds at most {MAX_FILES}",
            files.len()
        );
        // What the listing claims is checked against our own bounds before anything is read.
        let mut total = 0u64;
        for f in &files {
            let path = crate::printer::escape_controls(&f.path);
            safe_relative(&f.path)
                .with_context(|| format!("{repo_id} at {commit} lists the path `{path}`"))?;
            let size = f.lfs.as_ref().map_or(f.size, |l| l.size);
            anyhow::ensure!(
                size <= MAX_FILE_BYTES,
                "{repo_id} at {commit} lists `{path}` at {size} bytes; kernel-builder downloads at most {} of one file of a kernel dependency (is HF_ENDPOINT ({}) a Hub?)",
                crate::fsutil::size_words(MAX_FILE_BYTES),
                self.shown(&self.endpoint)
            );
            total = total.saturating_add(size);
        }
        anyhow::ensure!(
            total <= MAX_TREE_BYTES,
            "{repo_id} at {commit} lists {} files of {total} bytes in all; kernel-builder downloads at most {} of one kernel dependency (is HF_ENDPOINT ({}) a Hub?)",
            files.len(),
            crate::fsutil::size_words(MAX_TREE_BYTES),
            self.shown(&self.endpoint)
        );
        // The whole download's deadline: one request's for all the bytes, and a little per file.
        let budget = self.timeouts.deadline(total) + self.per_file * files.len() as u32;
        let until = Instant::now() + budget;
        std::fs::create_dir_all(dest).with_context(|| format!("cannot create `{dest}`"))?;
        let over = |done: usize| {
            anyhow::anyhow!(
                "{repo_id} at {commit}: the download has taken more than {} s ({done} of {} files); kernel-builder gives up on a kernel dependency after the time its {total} bytes take at 256 KiB/s, two answer timeouts ({}) and {} s per file",
                budget.as_secs(),
                files.len(),
                crate::hub::client::TIMEOUT_ENV,
                self.per_file.as_secs_f64()
            )
        };
        for (done, f) in files.iter().enumerate() {
            if Instant::now() >= until {
                return Err(over(done));
            }
            let target = dest.join(safe_relative(&f.path)?);
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
            let fetched = self.get(&url, size, until).and_then(|mut resp| {
                let mut reader = resp.body_mut().as_reader().take(size + 1);
                self.save(&mut reader, &target, size, &check).with_context(|| {
                    format!(
                        "{repo_id} at {commit}: `{}` (GET {})",
                        crate::printer::escape_controls(&f.path),
                        self.shown(&url)
                    )
                })
            });
            match fetched {
                // Cut by the whole download's deadline: say that, not the request's timeout.
                Err(_) if Instant::now() >= until => return Err(over(done)),
                other => other?,
            }
        }
        Ok((files.len(), total))
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
        anyhow::ensure!(
            &have == want,
            "the bytes sent have id {have} where the listing says {}",
            crate::printer::escape_controls(want)
        );
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

/// Whether a listed path is Python bytecode: a `__pycache__` segment or a `*.pyc` file name
/// ([`crate::layout::is_bytecode_name`]), which the kernels loader's digest skips too. A
/// `*.pyo` is an ordinary file (Python 3 never loads one, and the digest counts it).
pub fn is_bytecode_path(path: &str) -> bool {
    let segments: Vec<&str> = path.split('/').collect();
    segments
        .iter()
        .enumerate()
        .any(|(i, s)| crate::layout::is_bytecode_name(s.as_bytes(), i + 1 < segments.len()))
}

/// Remove the Python bytecode below the cached tree `dir` (opening a read-only directory just
/// long enough), returning what was removed, relative to `dir` and sorted.
pub fn strip_bytecode(dir: &Utf8Path) -> anyhow::Result<Vec<String>> {
    use std::os::unix::fs::PermissionsExt;
    let mut found = Vec::new();
    let mut walk = walkdir::WalkDir::new(dir).min_depth(1).sort_by_file_name().into_iter();
    while let Some(e) = walk.next() {
        let e = e.with_context(|| format!("cannot read `{dir}`"))?;
        if crate::layout::is_bytecode(e.file_name(), e.file_type().is_dir()) {
            if e.file_type().is_dir() {
                walk.skip_current_dir();
            }
            found.push((e.path().to_owned(), e.file_type().is_dir()));
        }
    }
    let mut removed = Vec::new();
    for (path, is_dir) in found {
        let path = Utf8PathBuf::from_path_buf(path)
            .map_err(|p| anyhow::anyhow!("`{}` is not UTF-8", p.display()))?;
        let parent = path.parent().context("a cached file has no parent")?;
        let mode = std::fs::metadata(parent)
            .with_context(|| format!("cannot read `{parent}`"))?
            .permissions()
            .mode();
        std::fs::set_permissions(parent, std::fs::Permissions::from_mode(mode | 0o700))
            .with_context(|| format!("cannot set permissions on `{parent}`"))?;
        let gone = if is_dir {
            set_read_only(&path, false).and_then(|()| {
                std::fs::remove_dir_all(&path).with_context(|| format!("cannot remove `{path}`"))
            })
        } else {
            std::fs::remove_file(&path).with_context(|| format!("cannot remove `{path}`"))
        };
        std::fs::set_permissions(parent, std::fs::Permissions::from_mode(mode))
            .with_context(|| format!("cannot set permissions on `{parent}`"))?;
        gone?;
        removed.push(path.strip_prefix(dir).map(|p| p.to_string()).unwrap_or_else(|_| path.to_string()));
    }
    Ok(removed)
}

/// Mark the cached tree `dir` as used now (its directory's modification time), the order in
/// which `native-cache prune` removes trees.
pub fn touch(dir: &Utf8Path) {
    if let Ok(f) = std::fs::File::open(dir) {
        let _ = f.set_modified(std::time::SystemTime::now());
    }
}

/// Download `repo_id` at `commit` into the cache (replacing an entry whose hash is wrong) and
/// return its directory and NAR hash. With `want`, a tree of another hash is an error and is not
/// kept.
pub fn fetch_into_cache(
    hub: &HubReader,
    cache: &Utf8Path,
    repo_id: &str,
    commit: &str,
    want: Option<&str>,
) -> anyhow::Result<Fetched> {
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
    Ok(Fetched { dir, hash })
}

/// A tree [`fetch_into_cache`] downloaded.
pub struct Fetched {
    pub dir: Utf8PathBuf,
    /// Its NAR hash (SRI).
    pub hash: String,
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

    use crate::hub::testserver::{Reply, TestServer};

    const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

    fn reader(url: &str, token: Option<&str>) -> HubReader {
        HubReader::new(url, token.and_then(Token::new), Timeouts::default())
    }

    /// B3 (attack review of issue 25): the listing's LFS size set both the read limit and the
    /// deadline, so a server announcing 1 TiB got 1 TiB of disk and days of time. Claims are
    /// now checked against our own caps, per file and per tree, before a byte is downloaded.
    #[test]
    fn listed_sizes_are_checked_against_our_caps_before_any_download() {
        let lfs = |path: &str, size: u64| {
            serde_json::json!({"type": "file", "path": path, "oid": "00", "size": 134,
                               "lfs": {"oid": "ab".repeat(32), "size": size}})
        };
        let (huge, many) =
            (lfs("big.so", 1 << 40), (0..17).map(|i| lfs(&format!("v{i}.so"), 4 << 30)).collect::<Vec<_>>());
        let hub = TestServer::start(move |_, _, path| {
            if path.starts_with("/api/kernels/o/huge/tree/") {
                Reply::json(serde_json::json!([huge]))
            } else if path.starts_with("/api/kernels/o/many/tree/") {
                Reply::json(serde_json::Value::Array(many.clone()))
            } else {
                // Whatever is asked for, a megabyte of it, then the connection closes.
                Reply::Large {
                    head: vec![],
                    filler: vec![0; 1 << 20],
                    times: 1,
                    tail: vec![],
                    headers: vec![],
                }
            }
        });
        let t = tempfile::tempdir().unwrap();
        let dest = Utf8Path::from_path(t.path()).unwrap().join("tree");
        let e = reader(&hub.url, None).download_tree("o/huge", COMMIT, &dest).unwrap_err();
        assert_eq!(
            format!("{e:#}"),
            format!("o/huge at {COMMIT} lists `big.so` at 1099511627776 bytes; kernel-builder downloads at most 4 GiB of one file of a kernel dependency (is HF_ENDPOINT ({}) a Hub?)", hub.url)
        );
        let e = reader(&hub.url, None).download_tree("o/many", COMMIT, &dest).unwrap_err();
        assert_eq!(
            format!("{e:#}"),
            format!("o/many at {COMMIT} lists 17 files of 73014444032 bytes in all; kernel-builder downloads at most 64 GiB of one kernel dependency (is HF_ENDPOINT ({}) a Hub?)", hub.url)
        );
        assert!(hub.lines().iter().all(|l| !l.contains("/resolve/")), "{:?}", hub.lines());
        assert!(!dest.exists());
    }

    /// Minor (c): file content may come from another server by a redirect (the Hub's CDN):
    /// followed without the token, and the bytes are checked against the listing. A revision
    /// lookup redirected elsewhere is refused, and the other server is never asked.
    #[test]
    fn only_file_downloads_follow_a_redirect_elsewhere_and_their_bytes_are_checked() {
        let cdn = TestServer::start(|_, _, path| {
            Reply::Full(200, vec![], if path == "/good" { b"hello\n".to_vec() } else { b"evil!\n".to_vec() })
        });
        let blob = {
            let mut h = sha1::Sha1::new();
            h.update(b"blob 6\0hello\n");
            hex(&h.finalize())
        };
        let (c, b) = (cdn.url.clone(), blob.clone());
        let hub = TestServer::start(move |_, _, path| match path {
            p if p.starts_with("/api/kernels/o/good/tree/") => {
                Reply::json(serde_json::json!([{"type": "file", "path": "a.txt", "oid": b, "size": 6}]))
            }
            p if p.starts_with("/api/kernels/o/bad/tree/") => {
                Reply::json(serde_json::json!([{"type": "file", "path": "b.txt", "oid": b, "size": 6}]))
            }
            p if p.starts_with("/kernels/o/good/resolve/") => Reply::redirect(&format!("{c}/good")),
            p if p.starts_with("/kernels/o/bad/resolve/") => Reply::redirect(&format!("{c}/bad")),
            _ => Reply::redirect(&format!("{c}/revision")),
        });
        let r = reader(&hub.url, Some("hf_secretsecretsecret"));
        let t = tempfile::tempdir().unwrap();
        let root = Utf8Path::from_path(t.path()).unwrap();
        r.download_tree("o/good", COMMIT, &root.join("good")).unwrap();
        assert_eq!(std::fs::read_to_string(root.join("good/a.txt")).unwrap(), "hello\n");
        let e = r.download_tree("o/bad", COMMIT, &root.join("bad")).unwrap_err();
        assert!(format!("{e:#}").ends_with(&format!("where the listing says {blob}")), "{e:#}");
        let dep = KernelDependency { repo_id: "o/rev".into(), pin: KernelPin::Revision("main".into()) };
        let e = format!("{:#}", r.resolve(&dep).unwrap_err());
        assert!(
            e.contains(&format!(
                "HTTP 307: the answer is a redirect (HTTP 307) to another server (`{}/revision`)",
                cdn.url
            )),
            "{e}"
        );
        assert_eq!(cdn.lines(), ["GET /good", "GET /bad"]);
        assert!(cdn.seen.lock().unwrap().iter().all(|s| !s.authorized), "the token went to the CDN");
        assert!(hub.seen.lock().unwrap().iter().all(|s| s.authorized));
    }

    /// Found by attacking the fixes: each file has a deadline, but a server answering every one
    /// of 100,000 files just in time could make a download take weeks. The whole download now
    /// has one deadline (here: 17 s, the per-file allowance set to nothing).
    #[test]
    fn a_tree_answered_just_in_time_file_after_file_is_given_up_on() {
        let blob = {
            let mut h = sha1::Sha1::new();
            h.update(b"blob 1\0x");
            hex(&h.finalize())
        };
        let hub = TestServer::start(move |_, _, path| {
            if path.starts_with("/api/kernels/") {
                let files: Vec<_> = (0..100)
                    .map(|i| serde_json::json!({"type": "file", "path": format!("f{i:03}"), "oid": blob, "size": 1}))
                    .collect();
                return Reply::json(serde_json::Value::Array(files));
            }
            Reply::After(
                std::time::Duration::from_millis(800),
                Box::new(Reply::Full(200, vec![], b"x".to_vec())),
            )
        });
        let mut r = HubReader::new(&hub.url, None, Timeouts { answer: Duration::from_secs(1) });
        r.per_file = Duration::ZERO;
        let t = tempfile::tempdir().unwrap();
        let e = format!(
            "{:#}",
            r.download_tree("o/n", COMMIT, &Utf8Path::from_path(t.path()).unwrap().join("tree")).unwrap_err()
        );
        assert!(
            e.starts_with(&format!("o/n at {COMMIT}: the download has taken more than 17 s ("))
                && e.ends_with(" of 100 files); kernel-builder gives up on a kernel dependency after the time its 100 bytes take at 256 KiB/s, two answer timeouts (KERNEL_BUILDER_HUB_TIMEOUT) and 0 s per file"),
            "{e}"
        );
        assert!(hub.lines().len() < 101, "every file was asked for");
    }

    /// Minor (b): the reader waited a fixed 60 s for each answer whatever
    /// `$KERNEL_BUILDER_HUB_TIMEOUT` said; it now takes the client's timeouts.
    #[test]
    fn the_answer_timeout_is_the_one_given() {
        let hub = TestServer::start(|_, _, _| Reply::Silent);
        let r = HubReader::new(&hub.url, None, Timeouts { answer: std::time::Duration::from_secs(1) });
        let dep = KernelDependency { repo_id: "o/n".into(), pin: KernelPin::Revision("main".into()) };
        let e = format!("{:#}", r.resolve(&dep).unwrap_err());
        assert!(
            e.contains("kernel-builder waits 1 s for an answer, KERNEL_BUILDER_HUB_TIMEOUT sets it"),
            "{e}"
        );
    }

    /// The files below `dir`, relative, sorted.
    fn files(dir: &Utf8Path) -> Vec<String> {
        let mut out: Vec<String> = walkdir::WalkDir::new(dir)
            .into_iter()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().is_file())
            .map(|e| e.path().strip_prefix(dir).unwrap().to_string_lossy().into_owned())
            .collect();
        out.sort();
        out
    }

    /// Issue 31: a Hub tree holding bytecode was hashed with it into the lock, while the cache
    /// check left it out, so it never matched and was downloaded on every build. Bytecode in
    /// a listing is now never downloaded (so never hashed); `*.pyo` and a directory named
    /// `*.pyc` are ordinary files, as in the kernels loader's digest.
    #[test]
    fn bytecode_in_a_listing_is_not_downloaded() {
        let blob = |text: &str| {
            let mut h = sha1::Sha1::new();
            h.update(format!("blob {}\0{text}", text.len()).as_bytes());
            hex(&h.finalize())
        };
        let listed = [
            "build/torch-cpu/k/__init__.py",
            "build/torch-cpu/k/__pycache__/__init__.cpython-313.pyc",
            "build/torch-cpu/__pycache__/x.txt",
            "build/torch-cpu/stale.pyc",
            "build/torch-cpu/notes.pyo",
            "build/torch-cpu/configs.pyc/a.json",
        ];
        let listing: Vec<serde_json::Value> = listed
            .iter()
            .map(|p| serde_json::json!({"type": "file", "path": p, "oid": blob(p), "size": p.len()}))
            .collect();
        let hub = TestServer::start(move |_, _, path| {
            if path.starts_with("/api/kernels/") {
                return Reply::json(serde_json::Value::Array(listing.clone()));
            }
            let file = path.split_once(&format!("/resolve/{COMMIT}/")).unwrap().1.to_owned();
            Reply::Full(200, vec![], file.into_bytes())
        });
        let t = tempfile::tempdir().unwrap();
        let dest = Utf8Path::from_path(t.path()).unwrap().join("tree");
        let got = reader(&hub.url, None).download_tree("o/n", COMMIT, &dest).unwrap();
        let kept = [
            "build/torch-cpu/configs.pyc/a.json",
            "build/torch-cpu/k/__init__.py",
            "build/torch-cpu/notes.pyo",
        ];
        assert_eq!(got, (3, kept.iter().map(|p| p.len() as u64).sum()));
        assert_eq!(files(&dest), kept);
        let mut asked: Vec<String> = hub.lines().into_iter().filter(|l| l.contains("/resolve/")).collect();
        asked.sort();
        assert_eq!(asked, kept.map(|p| format!("GET /kernels/o/n/resolve/{COMMIT}/{p}")));
    }

    /// Issue 31: a `.pyc` put into a cached (read-only) tree passed the cache check, and Python
    /// ran it. It is removed before the tree is hashed, whoever may write there.
    #[test]
    fn bytecode_in_a_cached_tree_is_removed() {
        let t = tempfile::tempdir().unwrap();
        let dir = Utf8Path::from_path(t.path()).unwrap().join("tree");
        for (p, text) in [
            ("build/torch-cpu/k/__init__.py", "x = 1\n"),
            ("build/torch-cpu/k/__pycache__/__init__.cpython-313.pyc", "planted"),
            ("build/torch-cpu/k/__pycache__/sub/deeper.pyc", "planted"),
            ("build/torch-cpu/evil.pyc", "planted"),
            ("build/torch-cpu/notes.pyo", "kept"),
            ("build/torch-cpu/configs.pyc/a.json", "{}"),
        ] {
            std::fs::create_dir_all(dir.join(p).parent().unwrap()).unwrap();
            std::fs::write(dir.join(p), text).unwrap();
        }
        set_read_only(&dir, true).unwrap();
        assert_eq!(
            strip_bytecode(&dir).unwrap(),
            ["build/torch-cpu/evil.pyc", "build/torch-cpu/k/__pycache__"]
        );
        assert_eq!(
            files(&dir),
            [
                "build/torch-cpu/configs.pyc/a.json",
                "build/torch-cpu/k/__init__.py",
                "build/torch-cpu/notes.pyo"
            ]
        );
        // The directories that held bytecode are read-only again.
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join("build/torch-cpu/k")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o555);
        assert_eq!(strip_bytecode(&dir).unwrap(), Vec::<String>::new());
        set_read_only(&dir, false).unwrap();
    }

    #[test]
    fn listing_paths_stay_inside_the_tree() {
        for bad in ["", "/etc/passwd", "a/../../b", "a//b", "./a", "a\\b", "a/."] {
            assert!(safe_relative(bad).is_err(), "{bad:?}");
        }
        assert_eq!(safe_relative("build/torch-cpu/__init__.py").unwrap(), "build/torch-cpu/__init__.py");
    }
}
