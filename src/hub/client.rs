//! A blocking client for the parts of the Hub's HTTP API that publishing a kernel needs.
//!
//! Shapes follow the Hub API as `huggingface_hub` uses it (repository type `kernel`, URL
//! segment `kernels`):
//!
//! | call | request | answer |
//! |---|---|---|
//! | [`HubClient::create_repo`] | `POST /api/repos/create` `{"name","organization","type":"kernel","private"}` | 200 `{"url"}`; 409 when it exists |
//! | [`HubClient::refs`] | `GET /api/kernels/{repo}/refs` | `{"branches":[{"name","ref","targetCommit"}],…}` |
//! | [`HubClient::create_branch`] | `POST /api/kernels/{repo}/branch/{b}` `{}` (starts at `main`'s head) | 200; 409 when it exists |
//! | [`HubClient::list_tree`] | `GET /api/kernels/{repo}/tree/{rev}?recursive=true`, pages via `Link: <…>; rel="next"` | `[{"type","path","oid","size","lfs"?:{"oid","size"}}]` |
//! | [`HubClient::preupload`] | `POST /api/kernels/{repo}/preupload/{rev}` `{"files":[{"path","sample","size"}]}` | `{"files":[{"path","uploadMode":"lfs"\|"regular","shouldIgnore","oid"?}]}` |
//! | [`HubClient::lfs_batch`] | `POST /kernels/{repo}.git/info/lfs/objects/batch` (git-lfs batch API, `basic` transfer) | `{"objects":[{"oid","size","actions"?:{"upload":{"href","header"?},"verify"?}}]}` |
//! | [`HubClient::lfs_put`], [`HubClient::lfs_verify`] | `PUT href` (file bytes, the action's headers only); `POST verify.href` `{"oid","size"}` | 2xx |
//! | [`HubClient::commit`] | `POST /api/kernels/{repo}/commit/{rev}[?create_pr=1]`, NDJSON lines `header`, `file`, `lfsFile`, `deletedFile` | `{"commitOid","commitUrl","pullRequestUrl"?,"prNum"?}` |
//!
//! The token goes only into the `Authorization` header of requests to the endpoint's own
//! origin (scheme, host and port: never to an LFS upload URL, which may be another host), and
//! every error text passes through [`super::auth::Token::redact`] and
//! [`crate::printer::escape_controls`]. A listing whose `Link: rel="next"` points at another
//! origin is refused rather than followed, and so is a redirect to another origin than the
//! URL asked (redirects on it are followed, up to [`MAX_REDIRECTS`]): the answer would come
//! from a server that is not the Hub asked, and what upload believes is on the branch (what it
//! skips, what it deletes) would be that server's word. (File downloads of kernel
//! dependencies, whose bytes are checked, may follow a redirect elsewhere:
//! `crate::kdeps::fetch`.) Every request but the commit is tried up to 3 times when it fails transiently (no
//! answer, HTTP 429 or 5xx), each retry announced on stderr; a commit is sent once, since one
//! whose answer was lost may have landed. Errors are [`HubError`]s: the request, the status
//! and the server's own message.
//!
//! Bounds (a hostile or broken server can cost neither unbounded memory nor unbounded time):
//! every answer is read with a cap for its kind ([`Answer`]: JSON listings
//! [`LISTING_LIMIT`], other answers [`SMALL_LIMIT`], error bodies [`ERROR_LIMIT`], truncated);
//! a tree listing reads at most [`TREE_LISTING_LIMIT`] over all its pages, holds at most
//! [`MAX_TREE_FILES`] files in at most [`MAX_TREE_PAGES`] pages, and takes at most
//! [`TREE_LISTING_ANSWERS`] answer timeouts in all; each request has a connect timeout
//! ([`CONNECT_TIMEOUT`]), waits at most [`Timeouts::answer`] for the answer's head or body, and
//! has an overall deadline ([`Timeouts::deadline`]); a request still running after
//! [`NOTICE_AFTER`] says so on stderr, and again every [`NOTICE_EVERY`].

use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;
use std::time::Duration;

use camino::Utf8Path;
use serde::Deserialize;

use super::auth::Token;

/// How many times a request that may be repeated is tried (see [`HubClient::send`]).
const ATTEMPTS: u32 = 3;

/// How many bytes of an error body a message quotes.
const EXCERPT: usize = 400;

/// The most bytes read of a JSON listing (a tree page, refs, a preupload or LFS batch
/// answer). A Hub tree page of 1,000 files is about 300 KB.
pub const LISTING_LIMIT: u64 = 32 << 20;
/// The most bytes read of any other successful answer (create, branch, commit, LFS upload).
pub const SMALL_LIMIT: u64 = 1 << 20;
/// The most bytes read of an error answer; the rest is left unread (only an excerpt is shown).
pub const ERROR_LIMIT: u64 = 64 << 10;
/// The most bytes read of a tree listing over all its pages: each page is read up to
/// [`LISTING_LIMIT`] and no further than what is left of this (a Hub listing of
/// [`MAX_TREE_FILES`] files is about 60 MB).
pub const TREE_LISTING_LIMIT: u64 = 128 << 20;
/// The most files a tree listing may hold (the Hub advises fewer than 100,000 per repository).
pub const MAX_TREE_FILES: usize = 200_000;
/// The most pages a tree listing may take (a Hub page holds up to 1,000 entries).
pub const MAX_TREE_PAGES: usize = 2_000;
/// How long a whole tree listing may take, in answer timeouts ([`Timeouts::answer`]): 20 minutes
/// by default. Each page has its own deadline; this bounds a server that answers every page
/// just in time, for [`MAX_TREE_PAGES`] pages.
pub const TREE_LISTING_ANSWERS: u32 = 20;
/// The most redirects followed, each on the origin of the request it answers.
pub const MAX_REDIRECTS: u32 = 5;
/// How long to wait for a TCP (and TLS) connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// When a request still running is first reported on stderr, and then how often.
pub const NOTICE_AFTER: Duration = Duration::from_secs(5);
pub const NOTICE_EVERY: Duration = Duration::from_secs(30);
/// The environment variable that sets [`Timeouts::answer`] in seconds.
pub const TIMEOUT_ENV: &str = crate::env::HUB_TIMEOUT.name;

/// How long a request may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// The longest wait for the head of an answer once the request is sent, and for its body.
    pub answer: Duration,
}

impl Default for Timeouts {
    fn default() -> Timeouts {
        Timeouts { answer: Duration::from_secs(60) }
    }
}

impl Timeouts {
    /// [`Timeouts::default`], or the answer timeout `$KERNEL_BUILDER_HUB_TIMEOUT` (seconds).
    ///
    /// Errors: the variable is set to something that is not a whole number of seconds, 1 to
    /// 3600.
    pub fn from_env() -> anyhow::Result<Timeouts> {
        match crate::env::HUB_TIMEOUT.setting()? {
            None => Ok(Timeouts::default()),
            Some(v) => match v.trim().parse::<u64>() {
                Ok(s @ 1..=3600) => Ok(Timeouts { answer: Duration::from_secs(s) }),
                _ => anyhow::bail!(
                    "{TIMEOUT_ENV} is `{v}`; set it to a whole number of seconds from 1 to 3600"
                ),
            },
        }
    }

    /// The overall deadline of one request sending `upload` bytes: connecting, twice the
    /// answer timeout, and the body at no less than 256 KiB/s.
    pub fn deadline(&self, upload: u64) -> Duration {
        CONNECT_TIMEOUT + 2 * self.answer + Duration::from_secs(upload / (256 << 10))
    }
}

/// What kind of answer a request expects, which sets how much of it is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// A JSON listing: up to [`LISTING_LIMIT`].
    Listing,
    /// Anything else: up to [`SMALL_LIMIT`].
    Small,
    /// A page of a tree listing, of which `read` bytes were read on `pages` earlier pages: up to
    /// [`LISTING_LIMIT`], and no further than [`TREE_LISTING_LIMIT`] in all.
    Page { read: u64, pages: usize },
}

impl Answer {
    /// The most bytes to read, and what to say when an answer is larger.
    fn limit(self) -> (u64, String) {
        let listing = || (LISTING_LIMIT, "32 MiB, the limit for a JSON listing".to_owned());
        match self {
            Answer::Listing => listing(),
            Answer::Small => (SMALL_LIMIT, "1 MiB, the limit for this answer".to_owned()),
            Answer::Page { read, pages } if TREE_LISTING_LIMIT - read.min(TREE_LISTING_LIMIT) < LISTING_LIMIT => (
                TREE_LISTING_LIMIT - read.min(TREE_LISTING_LIMIT),
                format!(
                    "what is left of {} after the {pages} pages before it (the most kernel-builder reads of a tree listing, over all its pages)",
                    crate::fsutil::size_words(TREE_LISTING_LIMIT)
                ),
            ),
            Answer::Page { .. } => listing(),
        }
    }
}

/// `scheme://host:port` of `url`, lower-case, with the scheme's default port filled in; `None`
/// when `url` has no scheme or host.
pub fn origin(url: &str) -> Option<String> {
    let uri: ureq::http::Uri = url.parse().ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let host = uri.host()?.to_ascii_lowercase();
    let port = uri.port_u16().or(match scheme.as_str() {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    })?;
    Some(format!("{scheme}://{host}:{port}"))
}

/// A failed Hub request: the HTTP status (none for a transport failure), the request, and the
/// server's message (its `error` field or `X-Error-Message` header, else a body excerpt).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubError {
    /// HTTP status, `None` when no response came (connection refused, timeout, TLS).
    pub status: Option<u16>,
    /// `METHOD url` of the request.
    pub request: String,
    /// What the server (or the transport) said, with the token redacted.
    pub message: String,
}

impl fmt::Display for HubError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.status {
            Some(s) => write!(f, "{} failed: HTTP {s}: {}", self.request, self.message),
            None => write!(f, "{} failed: {}", self.request, self.message),
        }
    }
}

impl std::error::Error for HubError {}

/// A successful answer: status, the headers kept (lower-case names), body.
type Answered = (u16, BTreeMap<String, String>, Vec<u8>);

/// One request: what [`HubClient::send`] and the helpers under it take.
#[derive(Clone)]
struct Call<'a> {
    method: &'a str,
    /// Absolute.
    url: &'a str,
    headers: &'a [(&'a str, &'a str)],
    body: Body<'a>,
    /// Add the token (which only ever goes to the endpoint's origin).
    auth: bool,
    kind: Answer,
}

impl<'a> Call<'a> {
    /// `method url` with `body`, the token, no other header, expecting a `kind` answer.
    fn new(method: &'a str, url: &'a str, body: Body<'a>, kind: Answer) -> Call<'a> {
        Call { method, url, headers: &[], body, auth: true, kind }
    }

    fn headers(self, headers: &'a [(&'a str, &'a str)]) -> Call<'a> {
        Call { headers, ..self }
    }
}

/// A request body.
#[derive(Clone)]
enum Body<'a> {
    Empty,
    Json(serde_json::Value),
    Raw(&'a [u8], &'a str),
    /// A file, and the byte bar its reads advance (from the position given, on every attempt).
    File(&'a Utf8Path, Option<(&'a indicatif::ProgressBar, u64)>),
}

/// A connection to one Hub endpoint, with or without a token. `Debug` never shows the token.
pub struct HubClient {
    endpoint: String,
    token: Option<Token>,
    agent: ureq::Agent,
    timeouts: Timeouts,
}

impl fmt::Debug for HubClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HubClient")
            .field("endpoint", &self.endpoint)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// One file (or directory) of a tree listing.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct TreeEntry {
    /// `file` or `directory`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Path from the repository root, `/`-separated.
    pub path: String,
    /// Git object id: the blob's SHA-1 (for an LFS file, the pointer's).
    #[serde(default)]
    pub oid: String,
    /// Bytes (for an LFS file, of the pointer or the content, as the server says).
    #[serde(default)]
    pub size: u64,
    /// Present for LFS files: the content's SHA-256 and size.
    #[serde(default)]
    pub lfs: Option<LfsInfo>,
}

/// The LFS part of a tree entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct LfsInfo {
    /// SHA-256 of the content, lower-case hex.
    pub oid: String,
    /// Content size in bytes.
    pub size: u64,
}

/// One ref of a repository.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct GitRef {
    pub name: String,
    #[serde(rename = "targetCommit")]
    pub target_commit: String,
}

/// The refs of a repository (`GET …/refs`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Refs {
    pub branches: Vec<GitRef>,
}

/// One file's answer from preupload.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PreuploadFile {
    pub path: String,
    /// `lfs` or `regular`.
    #[serde(rename = "uploadMode")]
    pub upload_mode: String,
    /// The repository's `.gitignore` excludes the path: a commit would skip it.
    #[serde(rename = "shouldIgnore", default)]
    pub should_ignore: bool,
    /// The id of the file now at that path on the revision (SHA-1 blob id for a regular file,
    /// SHA-256 for an LFS file), when there is one.
    #[serde(default)]
    pub oid: Option<String>,
}

#[derive(Deserialize)]
struct PreuploadAnswer {
    files: Vec<PreuploadFile>,
}

/// One file to ask preupload about.
#[derive(Debug, Clone)]
pub struct PreuploadQuery<'a> {
    pub path: &'a str,
    /// Up to the first 512 bytes of the content.
    pub sample: &'a [u8],
    pub size: u64,
}

/// An action of an LFS batch answer (`upload` or `verify`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct LfsAction {
    pub href: String,
    #[serde(default)]
    pub header: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct LfsActions {
    pub upload: Option<LfsAction>,
    pub verify: Option<LfsAction>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct LfsObjectError {
    #[serde(default)]
    pub code: i64,
    #[serde(default)]
    pub message: String,
}

/// One object of an LFS batch answer. No `actions`: the server already has the content.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct LfsObject {
    pub oid: String,
    #[serde(default)]
    pub size: u64,
    #[serde(default)]
    pub actions: Option<LfsActions>,
    #[serde(default)]
    pub error: Option<LfsObjectError>,
}

#[derive(Deserialize)]
struct LfsBatchAnswer {
    objects: Vec<LfsObject>,
}

/// One operation of a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommitOp {
    /// A file sent inline (base64 in the commit body).
    File { path: String, content: Vec<u8> },
    /// A file already uploaded through LFS: its SHA-256 (hex) and size.
    LfsFile { path: String, sha256: String, size: u64 },
    /// Delete one file (never a directory).
    DeleteFile { path: String },
}

/// The answer to a commit.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CommitAnswer {
    #[serde(rename = "commitOid")]
    pub commit_oid: String,
    #[serde(rename = "commitUrl", default)]
    pub commit_url: String,
    #[serde(rename = "pullRequestUrl", default)]
    pub pull_request_url: Option<String>,
    #[serde(rename = "prNum", default)]
    pub pr_num: Option<u64>,
}

/// Percent-encode one path segment (everything but `A-Za-z0-9-._~`), as a revision name is
/// encoded in Hub URLs.
pub fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `location` (a `Location` header: absolute, `//host/…`, `/path` or a relative path) as an
/// absolute URL, resolved against the URL `base` it answered.
pub fn join_url(base: &str, location: &str) -> String {
    let location = location.trim();
    if location.contains("://")
        && location
            .split("://")
            .next()
            .is_some_and(|s| s.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)))
    {
        return location.to_owned();
    }
    let (scheme, rest) = base.split_once("://").unwrap_or(("", base));
    if let Some(host_path) = location.strip_prefix("//") {
        return format!("{scheme}://{host_path}");
    }
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    if location.starts_with('/') {
        return format!("{scheme}://{authority}{location}");
    }
    let path = path.split(['?', '#']).next().unwrap_or("");
    let dir = &path[..path.rfind('/').map_or(0, |i| i + 1)];
    let dir = if dir.is_empty() { "/" } else { dir };
    format!("{scheme}://{authority}{dir}{location}")
}

/// The URL of `next` in a `Link` header (`<url>; rel="next", …`).
fn next_link(link: &str) -> Option<String> {
    link.split(',').find_map(|part| {
        let (url, params) = part.split_once(';')?;
        let is_next = params.split(';').any(|p| matches!(p.trim(), "rel=\"next\"" | "rel=next"));
        let url = url.trim().strip_prefix('<')?.strip_suffix('>')?;
        is_next.then(|| url.to_owned())
    })
}

impl HubClient {
    /// A client for `endpoint` (e.g. `https://huggingface.co`), sending `token` when given.
    pub fn new(endpoint: &str, token: Option<Token>) -> HubClient {
        HubClient::with_timeouts(endpoint, token, Timeouts::default())
    }

    /// [`HubClient::new`] with other [`Timeouts`].
    pub fn with_timeouts(endpoint: &str, token: Option<Token>, timeouts: Timeouts) -> HubClient {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .tls_config(crate::tls::config())
            .http_status_as_error(false)
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .timeout_recv_response(Some(timeouts.answer))
            .timeout_recv_body(Some(timeouts.answer))
            .timeout_per_write(Some(timeouts.answer))
            // Redirects are followed by `exchange`, on the request's own origin only.
            .max_redirects(0)
            .redirect_auth_headers(ureq::config::RedirectAuthHeaders::Never)
            .user_agent(concat!("kernel-builder/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        HubClient { endpoint: endpoint.trim_end_matches('/').to_owned(), token, agent, timeouts }
    }

    /// Whether `url` is on the endpoint's own origin (scheme, host and port).
    fn same_origin(&self, url: &str) -> bool {
        origin(url).is_some_and(|o| Some(o) == origin(&self.endpoint))
    }

    /// The endpoint as shown (user information redacted), without a trailing `/`.
    pub fn endpoint(&self) -> String {
        super::auth::redact_userinfo(&self.endpoint)
    }

    /// Whether requests carry a token.
    pub fn has_token(&self) -> bool {
        self.token.is_some()
    }

    /// `s` without the token, without user information in URLs, and with control characters
    /// escaped ([`crate::printer::escape_controls`]): every text of a [`HubError`] passes here,
    /// so a server's message cannot drive the terminal it is shown on.
    fn redact(&self, s: &str) -> String {
        let s = super::auth::redact_userinfo(s);
        let s = match &self.token {
            Some(t) => t.redact(&s),
            None => s,
        };
        crate::printer::escape_controls(&s).into_owned()
    }

    /// [`HubClient::send_once`], tried up to [`ATTEMPTS`] times while the failure is
    /// transient (no answer or a broken one, or HTTP 429, 500, 502, 503, 504), waiting 0.5 s,
    /// then 1 s. Used
    /// for every request but the commit: the others are reads, or writes that are safe to
    /// repeat (creating what exists answers 409; LFS objects are addressed by content).
    fn send(&self, call: Call<'_>) -> Result<Answered, HubError> {
        let mut attempt = 1;
        loop {
            match self.send_once(call.clone()) {
                Ok(answer) => return Ok(answer),
                Err((e, true)) if attempt < ATTEMPTS => {
                    let wait = Duration::from_millis(500 << (attempt - 1));
                    crate::printer::stderr!(
                        "note: {e}; trying again in {:.1} s (attempt {} of {ATTEMPTS})",
                        wait.as_secs_f64(),
                        attempt + 1
                    );
                    std::thread::sleep(wait);
                    attempt += 1;
                }
                Err((mut e, _)) => {
                    if attempt > 1 {
                        e.message = format!("{} (after {attempt} attempts)", e.message);
                    }
                    return Err(e);
                }
            }
        }
    }

    /// Send one request. `call.auth` adds the token when `call.url` is on the endpoint's
    /// origin. Returns the status, the headers wanted (lower-case names) and the
    /// body, read up to the limit of `kind`; a non-2xx status is a [`HubError`]. The flag with
    /// an error says whether trying again may help.
    fn send_once(&self, call: Call<'_>) -> Result<Answered, (HubError, bool)> {
        let request = format!("{} {}", call.method, self.redact(call.url));
        // Says on stderr that the request is still running, until it ends (the sender drops).
        let (done, waiting) = std::sync::mpsc::channel::<()>();
        let answer = self.timeouts.answer.as_secs();
        let shown = request.clone();
        std::thread::scope(|scope| {
            scope.spawn(move || {
                let started = std::time::Instant::now();
                let mut next = NOTICE_AFTER;
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = waiting.recv_timeout(next) {
                    crate::printer::stderr!(
                        "note: {shown}: no complete answer after {} s (waiting up to {answer} s for each part of it)",
                        started.elapsed().as_secs(),
                    );
                    next = NOTICE_EVERY;
                }
            });
            let result = self.exchange(call, &request);
            drop(done);
            result
        })
    }

    /// Send `method url` once (no redirect followed) with `headers`, `body`, and the token when
    /// `auth` and `url` is on the endpoint's origin.
    fn request_at(
        &self,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: Body<'_>,
        auth: bool,
        fail: &dyn Fn(Option<u16>, String) -> HubError,
    ) -> Result<ureq::http::Response<ureq::Body>, (HubError, bool)> {
        // A request that cannot be built is never transient; one that got no answer may be.
        let local = |e: String| (fail(None, e), false);
        let transport = |e: ureq::Error| {
            if let ureq::Error::Timeout(what) = e {
                let message = format!(
                    "no answer in time ({what}; kernel-builder waits {} s for an answer, {TIMEOUT_ENV} sets it)",
                    self.timeouts.answer.as_secs()
                );
                return (fail(None, message), true);
            }
            // A refused certificate is refused again: not transient, and explained.
            if let Some(why) = crate::tls::explain(&e) {
                return (fail(None, format!("{e}: {why}")), false);
            }
            let transient = matches!(
                e,
                ureq::Error::Io(_)
                    | ureq::Error::Timeout(_)
                    | ureq::Error::HostNotFound
                    | ureq::Error::ConnectionFailed
                    | ureq::Error::Protocol(_)
            );
            (fail(None, e.to_string()), transient)
        };
        let mut builder = ureq::http::Request::builder().method(method).uri(url);
        for (k, v) in headers {
            builder = builder.header(*k, *v);
        }
        if auth && self.same_origin(url) {
            if let Some(t) = &self.token {
                builder = builder.header("Authorization", format!("Bearer {}", t.expose()));
            }
        }
        // The overall deadline of this request, which grows with what it sends.
        match body {
            Body::Empty => builder
                .body(())
                .map_err(|e| local(e.to_string()))
                .and_then(|r| self.run(r, 0).map_err(transport)),
            Body::Json(v) => {
                let bytes = serde_json::to_vec(&v).unwrap_or_default();
                let n = bytes.len() as u64;
                builder
                    .header("Content-Type", "application/json")
                    .body(bytes)
                    .map_err(|e| local(e.to_string()))
                    .and_then(|r| self.run(r, n).map_err(transport))
            }
            Body::Raw(bytes, ctype) => builder
                .header("Content-Type", ctype)
                .body(bytes)
                .map_err(|e| local(e.to_string()))
                .and_then(|r| self.run(r, bytes.len() as u64).map_err(transport)),
            Body::File(path, None) => {
                let file = crate::fsutil::open_regular(path).map_err(|e| local(format!("{e:#}")))?;
                let n = file.metadata().map(|m| m.len()).unwrap_or(0);
                builder
                    .body(file)
                    .map_err(|e| local(e.to_string()))
                    .and_then(|r| self.run(r, n).map_err(transport))
            }
            Body::File(path, Some((bar, from))) => {
                let file = crate::fsutil::open_regular(path).map_err(|e| local(format!("{e:#}")))?;
                let n = file.metadata().map(|m| m.len()).unwrap_or(0);
                bar.set_position(from);
                // A reader has no size of its own: the length goes in the header.
                builder
                    .header("Content-Length", n)
                    .body(ureq::SendBody::from_owned_reader(bar.wrap_read(file)))
                    .map_err(|e| local(e.to_string()))
                    .and_then(|r| self.run(r, n).map_err(transport))
            }
        }
    }

    /// Run `request`, which sends `sends` bytes, with its overall deadline.
    fn run<B: ureq::AsSendBody>(
        &self,
        request: ureq::http::Request<B>,
        sends: u64,
    ) -> Result<ureq::http::Response<ureq::Body>, ureq::Error> {
        let deadline = Some(self.timeouts.deadline(sends));
        self.agent.run(self.agent.configure_request(request).timeout_global(deadline).build())
    }

    /// The work of [`HubClient::send_once`]; `request` is how it is shown. Redirects are
    /// followed here, up to [`MAX_REDIRECTS`], and only on the origin of the URL asked: an
    /// answer from another server is not the Hub's word (and a body sent there would leak).
    fn exchange(&self, call: Call<'_>, request: &str) -> Result<Answered, (HubError, bool)> {
        let Call { mut method, url, headers, mut body, auth, kind } = call;
        let fail = |status: Option<u16>, message: String| HubError {
            status,
            request: request.to_owned(),
            message: self.redact(&message),
        };
        let mut at = url.to_owned();
        let mut hops = 0;
        let mut resp = loop {
            let resp = self.request_at(method, &at, headers, body.clone(), auth, &fail)?;
            let status = resp.status().as_u16();
            let location = resp.headers().get("location").and_then(|v| v.to_str().ok());
            let (true, Some(location)) = (matches!(status, 301 | 302 | 303 | 307 | 308), location) else {
                break resp;
            };
            let next = join_url(&at, location);
            if origin(&next).is_none() || origin(&next) != origin(&at) {
                let message = format!(
                    "the answer is a redirect (HTTP {status}) to another server (`{}`); kernel-builder takes this answer only from {} and follows redirects elsewhere only for file downloads, whose bytes it checks",
                    super::auth::redact_userinfo(&next),
                    origin(&at).unwrap_or_default()
                );
                return Err((fail(Some(status), message), false));
            }
            hops += 1;
            if hops > MAX_REDIRECTS {
                let message = format!(
                    "more than {MAX_REDIRECTS} redirects (the last to `{}`)",
                    super::auth::redact_userinfo(&next)
                );
                return Err((fail(Some(status), message), false));
            }
            // As browsers and ureq do: 303, and 301/302 after a POST, become a GET without body.
            if status == 303 || (matches!(status, 301 | 302) && method == "POST") {
                method = "GET";
                body = Body::Empty;
            }
            at = next;
        };
        let status = resp.status().as_u16();
        let mut kept = BTreeMap::new();
        for name in ["link", "x-error-message", "x-error-code"] {
            if let Some(v) = resp.headers().get(name).and_then(|v| v.to_str().ok()) {
                kept.insert(name.to_owned(), v.to_owned());
            }
        }
        if !(200..300).contains(&status) {
            // Only an excerpt is shown: read no more than that needs.
            let mut bytes = Vec::new();
            let _ = resp.body_mut().as_reader().take(ERROR_LIMIT).read_to_end(&mut bytes);
            return Err((
                fail(Some(status), error_text(&kept, &bytes)),
                matches!(status, 429 | 500 | 502 | 503 | 504),
            ));
        }
        let (limit, said) = kind.limit();
        let bytes = resp.body_mut().with_config().limit(limit).read_to_vec().map_err(|e| match e {
            ureq::Error::BodyExceedsLimit(_) => (
                fail(
                    Some(status),
                    format!("the answer is larger than {said}; is HF_ENDPOINT ({}) a Hub?", self.endpoint()),
                ),
                false,
            ),
            ureq::Error::Timeout(what) => {
                (fail(Some(status), format!("the answer did not arrive in time ({what})")), true)
            }
            e => (fail(Some(status), format!("cannot read the answer: {e}")), true),
        })?;
        Ok((status, kept, bytes))
    }

    fn json<T: for<'de> Deserialize<'de>>(
        &self,
        method: &str,
        url: &str,
        bytes: &[u8],
    ) -> Result<T, HubError> {
        serde_json::from_slice(bytes).map_err(|e| HubError {
            status: None,
            request: format!("{method} {}", self.redact(url)),
            message: format!("unexpected answer ({e}): {}", self.redact(&excerpt(bytes))),
        })
    }

    fn api(&self, repo_id: &str, rest: &str) -> String {
        format!("{}/api/kernels/{repo_id}/{rest}", self.endpoint)
    }

    /// Create the kernel repository `repo_id`. `Ok(true)`: created; `Ok(false)`: it already
    /// existed (409).
    pub fn create_repo(&self, repo_id: &str, private: bool) -> Result<bool, HubError> {
        let (org, name) = repo_id.split_once('/').unwrap_or(("", repo_id));
        let body = serde_json::json!({
            "name": name,
            "organization": org,
            "type": "kernel",
            "private": private,
        });
        let url = format!("{}/api/repos/create", self.endpoint);
        match self.send(Call::new("POST", &url, Body::Json(body), Answer::Small)) {
            Ok(_) => Ok(true),
            Err(e) if e.status == Some(409) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The branches of `repo_id`; `Ok(None)` when the repository does not exist (404).
    pub fn refs(&self, repo_id: &str) -> Result<Option<Refs>, HubError> {
        let url = self.api(repo_id, "refs");
        match self.send(Call::new("GET", &url, Body::Empty, Answer::Listing)) {
            Ok((_, _, b)) => self.json("GET", &url, &b).map(Some),
            Err(e) if e.status == Some(404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The commit `rev` (a branch, tag or commit) of `repo_id` is at (`GET …/revision/{rev}`,
    /// its `sha`), as the Hub answers it: the caller checks that it is a commit id.
    pub fn revision(&self, repo_id: &str, rev: &str) -> Result<String, HubError> {
        let url = self.api(repo_id, &format!("revision/{}", encode_segment(rev)));
        let (_, _, bytes) = self.send(Call::new("GET", &url, Body::Empty, Answer::Listing))?;
        #[derive(Deserialize)]
        struct Info {
            sha: String,
        }
        self.json::<Info>("GET", &url, &bytes).map(|i| i.sha)
    }

    /// Create `branch` from `main`'s head. `Ok(false)` when it already existed (409).
    pub fn create_branch(&self, repo_id: &str, branch: &str) -> Result<bool, HubError> {
        let url = self.api(repo_id, &format!("branch/{}", encode_segment(branch)));
        match self.send(Call::new("POST", &url, Body::Json(serde_json::json!({})), Answer::Small)) {
            Ok(_) => Ok(true),
            Err(e) if e.status == Some(409) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Every file of revision `rev` (directories left out), following pagination.
    ///
    /// Errors: besides a failed request, a next page on another origin than the endpoint's
    /// (not followed: see the module doc), a next page that is the page itself, more than
    /// [`MAX_TREE_FILES`] entries or [`MAX_TREE_PAGES`] pages, or more than
    /// [`TREE_LISTING_LIMIT`] bytes over all pages, or longer than [`TREE_LISTING_ANSWERS`]
    /// answer timeouts in all.
    pub fn list_tree(&self, repo_id: &str, rev: &str) -> Result<Vec<TreeEntry>, HubError> {
        let mut url = self.api(repo_id, &format!("tree/{}?recursive=true", encode_segment(rev)));
        let mut files = Vec::new();
        let mut entries = 0usize;
        let mut read = 0u64;
        let (started, budget) = (std::time::Instant::now(), TREE_LISTING_ANSWERS * self.timeouts.answer);
        for pages in 1.. {
            let kind = Answer::Page { read, pages: pages - 1 };
            let (_, headers, bytes) = self.send(Call::new("GET", &url, Body::Empty, kind))?;
            read += bytes.len() as u64;
            let page: Vec<TreeEntry> = self.json("GET", &url, &bytes)?;
            let refuse = |message: String| HubError {
                status: None,
                request: format!("GET {}", self.redact(&url)),
                message: self.redact(&message),
            };
            entries += page.len();
            if started.elapsed() > budget {
                return Err(refuse(format!(
                    "the listing has taken more than {} s ({pages} pages); kernel-builder gives up on a listing after {TREE_LISTING_ANSWERS} times the answer timeout ({TIMEOUT_ENV})",
                    budget.as_secs()
                )));
            }
            if entries > MAX_TREE_FILES || pages > MAX_TREE_PAGES {
                return Err(refuse(format!(
                    "the listing has more than {MAX_TREE_FILES} entries or {MAX_TREE_PAGES} pages, the most kernel-builder reads"
                )));
            }
            let empty = page.is_empty();
            files.extend(page.into_iter().filter(|e| e.kind == "file"));
            match headers.get("link").and_then(|l| next_link(l)) {
                Some(next) if !self.same_origin(&next) => {
                    return Err(refuse(format!(
                        "the next page of the listing is on another server (`{}`); kernel-builder follows listings only on {} and sends its token nowhere else",
                        super::auth::redact_userinfo(&next),
                        self.endpoint()
                    )))
                }
                Some(next) if next == url || empty => {
                    return Err(refuse("the listing goes on after an empty page, or at the page itself".to_owned()))
                }
                Some(next) => url = next,
                None => break,
            }
        }
        files.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(files)
    }

    /// Ask how each file would be committed (`lfs` or `regular`) and what is there now.
    pub fn preupload(
        &self,
        repo_id: &str,
        rev: &str,
        files: &[PreuploadQuery<'_>],
        create_pr: bool,
    ) -> Result<Vec<PreuploadFile>, HubError> {
        use base64::Engine;
        let b64 = &base64::engine::general_purpose::STANDARD;
        let mut out = Vec::new();
        for chunk in files.chunks(256) {
            let list: Vec<serde_json::Value> = chunk
                .iter()
                .map(|f| {
                    serde_json::json!({
                        "path": f.path,
                        "sample": b64.encode(f.sample),
                        "size": f.size,
                    })
                })
                .collect();
            let mut url = self.api(repo_id, &format!("preupload/{}", encode_segment(rev)));
            if create_pr {
                url.push_str("?create_pr=1");
            }
            let body = serde_json::json!({ "files": list });
            let (_, _, bytes) = self.send(Call::new("POST", &url, Body::Json(body), Answer::Listing))?;
            let answer: PreuploadAnswer = self.json("POST", &url, &bytes)?;
            out.extend(answer.files);
        }
        Ok(out)
    }

    /// Ask the LFS batch endpoint where to upload `objects` (SHA-256 hex, size), `basic`
    /// transfer only.
    pub fn lfs_batch(
        &self,
        repo_id: &str,
        rev: &str,
        objects: &[(String, u64)],
    ) -> Result<Vec<LfsObject>, HubError> {
        let url = format!("{}/kernels/{repo_id}.git/info/lfs/objects/batch", self.endpoint);
        let objs: Vec<serde_json::Value> =
            objects.iter().map(|(oid, size)| serde_json::json!({"oid": oid, "size": size})).collect();
        let body = serde_json::json!({
            "operation": "upload",
            "transfers": ["basic"],
            "objects": objs,
            "hash_algo": "sha256",
            "ref": {"name": rev},
        });
        let bytes = serde_json::to_vec(&body).unwrap_or_default();
        let lfs = "application/vnd.git-lfs+json";
        let (_, _, answer) = self.send(
            Call::new("POST", &url, Body::Raw(&bytes, lfs), Answer::Listing).headers(&[("Accept", lfs)]),
        )?;
        let answer: LfsBatchAnswer = self.json("POST", &url, &answer)?;
        Ok(answer.objects)
    }

    /// PUT the file at `path` to an LFS upload action (its headers only, no token), advancing
    /// `progress` (a byte bar) as it is read.
    pub fn lfs_put(
        &self,
        action: &LfsAction,
        path: &Utf8Path,
        progress: Option<&indicatif::ProgressBar>,
    ) -> Result<(), HubError> {
        let headers: Vec<(&str, &str)> = action
            .header
            .iter()
            .filter(|(k, _)| !k.eq_ignore_ascii_case("content-length"))
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        self.send(Call {
            auth: false,
            ..Call::new(
                "PUT",
                &action.href,
                Body::File(path, progress.map(|b| (b, b.position()))),
                Answer::Small,
            )
            .headers(&headers)
        })?;
        Ok(())
    }

    /// Confirm an LFS upload through its verify action.
    pub fn lfs_verify(&self, action: &LfsAction, oid: &str, size: u64) -> Result<(), HubError> {
        let headers: Vec<(&str, &str)> =
            action.header.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let body = serde_json::to_vec(&serde_json::json!({"oid": oid, "size": size})).unwrap_or_default();
        let lfs = "application/vnd.git-lfs+json";
        // The token goes with it only when the action is on the endpoint's origin (send_once).
        self.send(Call::new("POST", &action.href, Body::Raw(&body, lfs), Answer::Small).headers(&headers))?;
        Ok(())
    }

    /// Commit `ops` to `rev` (or open a pull request against it), with `parent` as the
    /// expected head when given (the server refuses the commit if the branch moved).
    pub fn commit(
        &self,
        repo_id: &str,
        rev: &str,
        summary: &str,
        parent: Option<&str>,
        ops: &[CommitOp],
        create_pr: bool,
    ) -> Result<CommitAnswer, HubError> {
        let body = commit_body(summary, parent, ops);
        let mut url = self.api(repo_id, &format!("commit/{}", encode_segment(rev)));
        if create_pr {
            url.push_str("?create_pr=1");
        }
        // Never repeated: a commit whose answer was lost may have landed.
        let (_, _, bytes) = self
            .send_once(Call::new("POST", &url, Body::Raw(&body, "application/x-ndjson"), Answer::Small))
            .map_err(|(e, _)| e)?;
        self.json("POST", &url, &bytes)
    }
}

/// The NDJSON body of a commit: a `header` line, then one line per operation.
pub fn commit_body(summary: &str, parent: Option<&str>, ops: &[CommitOp]) -> Vec<u8> {
    use base64::Engine;
    let b64 = &base64::engine::general_purpose::STANDARD;
    let mut header = serde_json::json!({"summary": summary, "description": ""});
    if let Some(p) = parent {
        header["parentCommit"] = serde_json::Value::String(p.to_owned());
    }
    let mut lines = vec![serde_json::json!({"key": "header", "value": header})];
    for op in ops {
        lines.push(match op {
            CommitOp::File { path, content } => serde_json::json!({
                "key": "file",
                "value": {"path": path, "content": b64.encode(content), "encoding": "base64"},
            }),
            CommitOp::LfsFile { path, sha256, size } => serde_json::json!({
                "key": "lfsFile",
                "value": {"path": path, "algo": "sha256", "oid": sha256, "size": size},
            }),
            CommitOp::DeleteFile { path } => serde_json::json!({
                "key": "deletedFile",
                "value": {"path": path},
            }),
        });
    }
    let mut out = Vec::new();
    for l in lines {
        out.extend(serde_json::to_vec(&l).unwrap_or_default());
        out.push(b'\n');
    }
    out
}

fn excerpt(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    match text.char_indices().nth(EXCERPT) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

/// The server's message: the JSON `error` field, else `X-Error-Message`, else an excerpt.
fn error_text(headers: &BTreeMap<String, String>, body: &[u8]) -> String {
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) {
        if let Some(e) = v.get("error").and_then(|e| e.as_str()) {
            return excerpt(e.as_bytes());
        }
        if let Some(e) = v.get("message").and_then(|e| e.as_str()) {
            return excerpt(e.as_bytes());
        }
    }
    if let Some(m) = headers.get("x-error-message") {
        return excerpt(m.as_bytes());
    }
    let e = excerpt(body);
    if e.is_empty() {
        "(empty answer)".to_owned()
    } else {
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_header_next() {
        assert_eq!(
            next_link("<http://h/api/x?cursor=abc>; rel=\"next\""),
            Some("http://h/api/x?cursor=abc".to_owned())
        );
        assert_eq!(next_link("<http://h/a>; rel=\"prev\""), None);
    }

    /// B2 (attack review of issue 25): 77 pages of 30 MiB each were read one after the other
    /// (each under the page limit), 2.4 GB in all. The listing is now bounded over all its
    /// pages: the fifth 30 MiB page is cut at what is left of 128 MiB.
    #[test]
    fn a_listing_of_many_large_pages_is_bounded_in_all() {
        use super::super::testserver::{Reply, TestServer};
        let server = TestServer::start(|url, _, path| {
            let cursor: usize = path.rsplit_once("cursor=").map_or(0, |(_, c)| c.parse().unwrap_or(0));
            let entry = format!(r#"[{{"type":"file","path":"f{cursor}","oid":"00","size":1}}"#);
            let mut headers = vec![("Content-Type".to_owned(), "application/json".to_owned())];
            if cursor < 7 {
                let next = format!("{url}/api/kernels/o/n/tree/main?recursive=true&cursor={}", cursor + 1);
                headers.push(("Link".to_owned(), format!("<{next}>; rel=\"next\"")));
            }
            Reply::Large {
                head: entry.into_bytes(),
                filler: vec![b' '; 1 << 20],
                times: 30,
                tail: b"]".to_vec(),
                headers,
            }
        });
        let client = HubClient::new(&server.url, None);
        let e = client.list_tree("o/n", "main").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "GET {}/api/kernels/o/n/tree/main?recursive=true&cursor=4 failed: HTTP 200: the answer is larger than what is left of 128 MiB after the 4 pages before it (the most kernel-builder reads of a tree listing, over all its pages); is HF_ENDPOINT ({}) a Hub?",
                server.url, server.url
            )
        );
        assert_eq!(server.lines().len(), 5, "{:?}", server.lines());
    }

    /// Found by attacking the fixes: a server answering every page just within the answer
    /// timeout could make a listing of 2,000 pages take days. The whole listing now has
    /// [`TREE_LISTING_ANSWERS`] answer timeouts.
    #[test]
    fn a_listing_answered_just_in_time_page_after_page_is_given_up_on() {
        use super::super::testserver::{Reply, TestServer};
        let server = TestServer::start(|url, _, path| {
            let cursor: usize = path.rsplit_once("cursor=").map_or(0, |(_, c)| c.parse().unwrap_or(0));
            let next = format!(
                "<{url}/api/kernels/o/n/tree/main?recursive=true&cursor={}>; rel=\"next\"",
                cursor + 1
            );
            let page =
                serde_json::json!([{"type": "file", "path": format!("f{cursor}"), "oid": "00", "size": 1}]);
            let headers = vec![("Link".to_owned(), next)];
            Reply::After(
                Duration::from_millis(600),
                Box::new(Reply::Full(200, headers, page.to_string().into_bytes())),
            )
        });
        let client = HubClient::with_timeouts(&server.url, None, Timeouts { answer: Duration::from_secs(1) });
        let e = client.list_tree("o/n", "main").unwrap_err();
        let pages = server.lines().len();
        assert!(
            e.message.starts_with("the listing has taken more than 20 s (")
                && e.message.ends_with(" pages); kernel-builder gives up on a listing after 20 times the answer timeout (KERNEL_BUILDER_HUB_TIMEOUT)"),
            "{e}"
        );
        assert!(pages < MAX_TREE_PAGES, "{pages} pages asked for");
    }

    /// Minor (c) of the attack review: a redirect to another origin was followed (without the
    /// token) and its answer believed. Now it is refused, and the other server is never asked;
    /// a redirect on the same origin is followed, with the token.
    #[test]
    fn redirects_are_followed_only_on_the_same_origin() {
        use super::super::testserver::{Reply, TestServer};
        let elsewhere = TestServer::start(|_, _, _| Reply::json(serde_json::json!({"branches": []})));
        let to = format!("{}/steal", elsewhere.url);
        let hub = TestServer::start(move |url, _, path| match path {
            "/api/kernels/o/n/refs" => Reply::redirect(&to),
            "/api/kernels/o/m/refs" => Reply::redirect(&format!("{url}/api/kernels/o/renamed/refs")),
            _ => Reply::json(serde_json::json!({"branches": [{"name": "main", "targetCommit": "abc"}]})),
        });
        let token = Token::new("hf_secretsecretsecret").unwrap();
        let client = HubClient::new(&hub.url, Some(token));
        let e = client.refs("o/n").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "GET {}/api/kernels/o/n/refs failed: HTTP 307: the answer is a redirect (HTTP 307) to another server (`{}/steal`); kernel-builder takes this answer only from {} and follows redirects elsewhere only for file downloads, whose bytes it checks",
                hub.url, elsewhere.url, hub.url
            )
        );
        assert!(elsewhere.lines().is_empty(), "{:?}", elsewhere.lines());
        let refs = client.refs("o/m").unwrap().unwrap();
        assert_eq!(refs.branches[0].target_commit, "abc");
        let seen = hub.seen.lock().unwrap().clone();
        assert_eq!(
            seen.iter().map(|s| s.line.as_str()).collect::<Vec<_>>()[1..],
            ["GET /api/kernels/o/m/refs", "GET /api/kernels/o/renamed/refs"]
        );
        assert!(seen.iter().all(|s| s.authorized), "{seen:?}");
    }

    /// Minor (a): a server's error text with terminal escapes (a window title, a colour) is
    /// shown with them escaped.
    #[test]
    fn a_servers_message_cannot_drive_the_terminal() {
        use super::super::testserver::{Reply, TestServer};
        let hub = TestServer::start(|_, _, _| {
            Reply::Full(403, vec![], br#"{"error":"no\u001b]0;pwned\u0007 \u001b[2Jway"}"#.to_vec())
        });
        let e = HubClient::new(&hub.url, None).create_branch("o/n", "b").unwrap_err().to_string();
        assert!(!e.contains('\u{1b}') && !e.contains('\u{7}'), "{e:?}");
        assert!(e.ends_with(r"HTTP 403: no\u{1b}]0;pwned\u{7} \u{1b}[2Jway"), "{e:?}");
    }

    #[test]
    fn redirect_locations_resolve_against_the_request() {
        let base = "http://127.0.0.1:8080/api/kernels/o/n/refs?x=1";
        assert_eq!(join_url(base, "http://other:1/steal"), "http://other:1/steal");
        assert_eq!(join_url(base, "//other/steal"), "http://other/steal");
        assert_eq!(join_url(base, "/api/kernels/o/m/refs"), "http://127.0.0.1:8080/api/kernels/o/m/refs");
        assert_eq!(join_url(base, "tree"), "http://127.0.0.1:8080/api/kernels/o/n/tree");
        assert_eq!(join_url("http://h", "a"), "http://h/a");
        assert_ne!(origin(&join_url(base, "//127.0.0.1:8081/x")), origin(base));
    }

    #[test]
    fn origins_compare_scheme_host_and_port() {
        assert_eq!(origin("https://HuggingFace.co/api/x").as_deref(), Some("https://huggingface.co:443"));
        assert_eq!(origin("http://127.0.0.1:8080/a?b").as_deref(), Some("http://127.0.0.1:8080"));
        assert_eq!(origin("http://h/a"), origin("http://h:80/b"));
        assert_ne!(origin("http://h/a"), origin("https://h/a"));
        assert_ne!(origin("http://h:1/a"), origin("http://h:2/a"));
        assert_eq!(origin("/relative"), None);
        let c = HubClient::new("http://127.0.0.1:8080", None);
        assert!(c.same_origin("http://127.0.0.1:8080/api/x?cursor=2"));
        assert!(!c.same_origin("http://127.0.0.1:80801/api"));
        assert!(!c.same_origin("http://127.0.0.1:8080@evil.example/api"));
        assert!(!c.same_origin("http://localhost:8080/api"));
    }

    #[test]
    fn deadlines_grow_with_what_a_request_sends() {
        assert_eq!(Timeouts::default().answer, Duration::from_secs(60));
        assert_eq!(Timeouts::default().deadline(0), Duration::from_secs(135));
        assert_eq!(Timeouts::default().deadline(256 << 20), Duration::from_secs(135 + 1024));
    }

    #[test]
    fn segments_are_encoded() {
        assert_eq!(encode_segment("v1"), "v1");
        assert_eq!(encode_segment("refs/pr/1"), "refs%2Fpr%2F1");
    }

    #[test]
    fn commit_body_lines() {
        let body = commit_body(
            "msg",
            Some("abc"),
            &[
                CommitOp::File { path: "a.py".into(), content: b"hi".to_vec() },
                CommitOp::LfsFile { path: "b.so".into(), sha256: "00".into(), size: 3 },
                CommitOp::DeleteFile { path: "c".into() },
            ],
        );
        assert_eq!(
            String::from_utf8(body).unwrap(),
            concat!(
                r#"{"key":"header","value":{"summary":"msg","description":"","parentCommit":"abc"}}"#,
                "\n",
                r#"{"key":"file","value":{"path":"a.py","content":"aGk=","encoding":"base64"}}"#,
                "\n",
                r#"{"key":"lfsFile","value":{"path":"b.so","algo":"sha256","oid":"00","size":3}}"#,
                "\n",
                r#"{"key":"deletedFile","value":{"path":"c"}}"#,
                "\n"
            )
        );
    }

    #[test]
    fn error_text_prefers_the_error_field() {
        let h = BTreeMap::new();
        assert_eq!(error_text(&h, br#"{"error":"no"}"#), "no");
        assert_eq!(error_text(&h, b"plain"), "plain");
        assert_eq!(error_text(&h, b""), "(empty answer)");
    }
}
