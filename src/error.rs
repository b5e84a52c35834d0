//! Typed failures with what to do about them: an error's [`Kind`] picks the exit code, its
//! hints are data (never part of the message), and [`failure_lines`] renders them as
//! `hint:` lines after the cause chain; the `--json` failure document lists the same hints.
//!
//! A module whose callers branch on a failure, or whose user needs a fix, implements
//! [`Diagnostic`] for its error type (a `thiserror` enum, as [`crate::process::Error`]) and
//! hands it up as an [`Error`]; [`Error::new`] makes one on the spot. Library code keeps
//! returning `anyhow::Result` where nobody branches: the CLI finds the typed errors anywhere in
//! the chain ([`hints`], [`kind`], [`find`]).
//!
//! | kind | exit code |
//! |---|---|
//! | every failure ([`Kind::Config`], [`Kind::Toolchain`], [`Kind::Hub`], [`Kind::Nix`], [`Kind::Failed`]) | 1 |
//! | [`Kind::Usage`]: a bad command line | 2 |
//! | [`Kind::Interrupted`]: stopped by signal N | 128 + N |

use std::fmt;

/// What failed, in the terms the exit code and a caller branch on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kind {
    /// A file the user writes (`build.toml`, a kernel's layout) is wrong.
    Config,
    /// A tool or package the command runs is missing or unusable (a compiler, Python, torch,
    /// Helion, git, a GPU).
    Toolchain,
    /// The Hub refused or failed a request.
    Hub,
    /// Nix is missing, misconfigured, or a Nix build or evaluation failed.
    Nix,
    /// The command line asks for something impossible (as clap's own errors do).
    Usage,
    /// A signal (SIGINT, SIGTERM, SIGHUP) stopped the command.
    Interrupted {
        /// The signal's number.
        signal: i32,
    },
    /// Anything else: the command failed.
    Failed,
}

impl Kind {
    /// The process exit code of a failure of this kind (see the module doc).
    pub fn exit_code(self) -> u8 {
        match self {
            Kind::Usage => 2,
            Kind::Interrupted { signal } => u8::try_from(128 + signal).unwrap_or(1),
            Kind::Config | Kind::Toolchain | Kind::Hub | Kind::Nix | Kind::Failed => 1,
        }
    }
}

/// An error that knows its [`Kind`] and what the user can do about it.
pub trait Diagnostic: std::error::Error + Send + Sync + 'static {
    /// What failed.
    fn kind(&self) -> Kind {
        Kind::Failed
    }

    /// What to do, one instruction each (`pass --python PATH …`); empty when nothing obvious.
    fn hints(&self) -> Vec<String> {
        Vec::new()
    }

    /// What a program reading `--json` gets beside the message and hints: keys of the failure
    /// document (`skipped`: the cells a build could not have). Empty by default.
    fn fields(&self) -> serde_json::Map<String, serde_json::Value> {
        serde_json::Map::new()
    }
}

/// A typed failure ([`Diagnostic`]) as one type, the one the CLI looks for in a chain.
pub struct Error {
    inner: Box<dyn std::error::Error + Send + Sync + 'static>,
    /// [`Diagnostic::kind`] and [`Diagnostic::hints`] of `inner`'s type.
    kind: fn(&(dyn std::error::Error + 'static)) -> Kind,
    hints: fn(&(dyn std::error::Error + 'static)) -> Vec<String>,
    fields: fn(&(dyn std::error::Error + 'static)) -> serde_json::Map<String, serde_json::Value>,
}

impl<E: Diagnostic> From<E> for Error {
    fn from(e: E) -> Error {
        Error {
            inner: Box::new(e),
            kind: |e| e.downcast_ref::<E>().map_or(Kind::Failed, Diagnostic::kind),
            hints: |e| e.downcast_ref::<E>().map(Diagnostic::hints).unwrap_or_default(),
            fields: |e| e.downcast_ref::<E>().map(Diagnostic::fields).unwrap_or_default(),
        }
    }
}

impl Error {
    /// An error of `kind` with `message` and no hints yet ([`Error::hint`] adds them).
    pub fn new(kind: Kind, message: impl Into<String>) -> Error {
        Error::from(Plain { kind, message: message.into(), hints: Vec::new(), source: None })
    }

    /// This error with `hint` added (an error made by [`Error::new`]; others keep theirs).
    pub fn hint(mut self, hint: impl Into<String>) -> Error {
        if let Some(p) = self.inner.downcast_mut::<Plain>() {
            p.hints.push(hint.into());
        }
        self
    }

    /// This error with each of `hints` added, in order ([`Error::hint`]).
    pub fn with_hints(self, hints: impl IntoIterator<Item = String>) -> Error {
        hints.into_iter().fold(self, Error::hint)
    }

    /// This error caused by `source` (an error made by [`Error::new`]).
    pub fn with_source(mut self, source: impl Into<anyhow::Error>) -> Error {
        if let Some(p) = self.inner.downcast_mut::<Plain>() {
            p.source = Some(source.into());
        }
        self
    }

    /// What failed.
    pub fn kind(&self) -> Kind {
        (self.kind)(&*self.inner)
    }

    /// What to do.
    pub fn hints(&self) -> Vec<String> {
        (self.hints)(&*self.inner)
    }

    /// The typed error inside, when it is a `T`.
    pub fn downcast_ref<T: Diagnostic>(&self) -> Option<&T> {
        self.inner.downcast_ref::<T>()
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.inner, f)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.inner, f)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.inner.source()
    }
}

/// What [`Error::new`] makes.
#[derive(Debug)]
struct Plain {
    kind: Kind,
    message: String,
    hints: Vec<String>,
    source: Option<anyhow::Error>,
}

impl fmt::Display for Plain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Plain {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_ref().map(|s| s.as_ref() as &(dyn std::error::Error + 'static))
    }
}

impl Diagnostic for Plain {
    fn kind(&self) -> Kind {
        self.kind
    }
    fn hints(&self) -> Vec<String> {
        self.hints.clone()
    }
}

impl Diagnostic for crate::process::Error {
    /// A program that cannot be started is a missing tool.
    fn kind(&self) -> Kind {
        match self {
            crate::process::Error::Spawn { .. } => Kind::Toolchain,
            _ => Kind::Failed,
        }
    }
    fn hints(&self) -> Vec<String> {
        crate::process::Error::hints(self)
    }
}

/// The kind and hints of one link of a chain: an [`Error`], a [`crate::process::Error`] that
/// came up through `?` without being wrapped, or a download's refused certificate
/// ([`crate::tls::explain`]).
fn diagnostic(link: &(dyn std::error::Error + 'static)) -> Option<(Kind, Vec<String>)> {
    if let Some(e) = link.downcast_ref::<Error>() {
        return Some((e.kind(), e.hints()));
    }
    if let Some(why) = link.downcast_ref::<ureq::Error>().and_then(crate::tls::explain) {
        return Some((Kind::Failed, vec![why]));
    }
    if link.downcast_ref::<std::io::Error>().is_some_and(|e| {
        matches!(e.kind(), std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded)
    }) {
        return Some((Kind::Failed, vec![disk_full_hint()]));
    }
    link.downcast_ref::<crate::process::Error>().map(|e| (Diagnostic::kind(e), Diagnostic::hints(e)))
}

/// What to do when a write of kernel-builder's own found the disk full (ENOSPC, EDQUOT).
fn disk_full_hint() -> String {
    format!(
        "the disk (or your quota on it) is full: free space on the file system of the path named above (when that is kernel-builder's cache: `kernel-builder native-cache` shows what it holds, `native-cache prune-work --all` and `native-cache prune` shrink it, and {} moves it to a larger disk)",
        crate::env::CACHE_DIR.name
    )
}

/// The hints of every typed error in `err`'s chain, outermost first, each once.
pub fn hints(err: &anyhow::Error) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for h in err.chain().filter_map(diagnostic).flat_map(|(_, hints)| hints) {
        if !out.contains(&h) {
            out.push(h);
        }
    }
    out
}

/// `err` said after `prefix` on its own line (`cannot verify: unknown variant …`), its kind and
/// hints kept; for an error whose cause chain would say less than its one line.
pub fn prefixed(prefix: &str, err: anyhow::Error) -> anyhow::Error {
    let kind = kind(&err);
    Error::new(kind, format!("{prefix}: {err}")).with_hints(hints(&err)).into()
}

/// The lines that report a failure: `error: …`, each cause below it as `  caused by: …`, then
/// each hint of the chain's typed errors ([`hints`]) as `hint: …`.
pub fn failure_lines(err: &anyhow::Error) -> Vec<String> {
    let mut lines = vec![format!("error: {err}")];
    lines.extend(err.chain().skip(1).map(|cause| format!("  caused by: {cause}")));
    lines.extend(hints(err).into_iter().map(|h| format!("hint: {h}")));
    lines
}

/// The kind of the outermost typed error in `err`'s chain; [`Kind::Failed`] when it has none.
pub fn kind(err: &anyhow::Error) -> Kind {
    err.chain().find_map(diagnostic).map_or(Kind::Failed, |(kind, _)| kind)
}

/// A copy of `err`, for a failure that is kept and reported again (a cached probe's:
/// `anyhow::Error` is not `Clone`): the same chain of messages, each typed link an [`Error`]
/// of its kind and hints, so [`kind`], [`hints`] and the rendered text are those of `err`.
/// [`find`] finds no type of `err`'s own in it.
pub fn copy(err: &anyhow::Error) -> anyhow::Error {
    let links: Vec<&(dyn std::error::Error + 'static)> = err.chain().collect();
    let mut out: Option<anyhow::Error> = None;
    for link in links.into_iter().rev() {
        let message = link.to_string();
        out = Some(match (diagnostic(link), out) {
            (Some((kind, hints)), source) => {
                let e = Error::new(kind, message).with_hints(hints);
                anyhow::Error::from(match source {
                    Some(s) => e.with_source(s),
                    None => e,
                })
            }
            (None, Some(source)) => source.context(message),
            (None, None) => anyhow::Error::msg(message),
        });
    }
    out.unwrap_or_else(|| anyhow::Error::msg(err.to_string()))
}

/// `value`'s keys as [`Diagnostic::fields`] (none when it does not serialize to a JSON object).
pub fn fields_of(value: &impl serde::Serialize) -> serde_json::Map<String, serde_json::Value> {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    }
}

/// The `--json` fields of every typed error in `err`'s chain ([`Diagnostic::fields`]); an
/// outer error's key wins over an inner one's.
pub fn fields(err: &anyhow::Error) -> serde_json::Map<String, serde_json::Value> {
    let mut out = serde_json::Map::new();
    for e in err.chain().filter_map(|link| link.downcast_ref::<Error>()) {
        for (k, v) in (e.fields)(&*e.inner) {
            out.entry(k).or_insert(v);
        }
    }
    out
}

/// The first `T` in `err`'s chain, as itself or inside an [`Error`].
pub fn find<T: Diagnostic>(err: &anyhow::Error) -> Option<&T> {
    err.chain().find_map(|link| {
        link.downcast_ref::<T>().or_else(|| link.downcast_ref::<Error>().and_then(Error::downcast_ref::<T>))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("no GPU")]
    struct NoGpu;

    impl Diagnostic for NoGpu {
        fn kind(&self) -> Kind {
            Kind::Toolchain
        }
        fn hints(&self) -> Vec<String> {
            vec!["run it on a machine with a GPU".into()]
        }
    }

    #[test]
    fn kind_and_hints_come_from_the_typed_errors_of_the_chain() {
        let err = anyhow::Error::from(Error::from(NoGpu)).context("cannot tune `k`");
        assert_eq!(kind(&err), Kind::Toolchain);
        assert_eq!(hints(&err), ["run it on a machine with a GPU"]);
        assert!(find::<NoGpu>(&err).is_some());
        assert_eq!(err.chain().map(|c| c.to_string()).collect::<Vec<_>>(), ["cannot tune `k`", "no GPU"]);

        let plain = anyhow::anyhow!("disk full").context("cannot write");
        assert_eq!((kind(&plain), hints(&plain)), (Kind::Failed, Vec::<String>::new()));
        assert!(find::<NoGpu>(&plain).is_none());
    }

    #[test]
    fn a_failure_is_its_chain_then_its_hints() {
        let typed = crate::error::Error::new(crate::error::Kind::Nix, "cannot run `nix --version`")
            .hint("install Nix")
            .with_source(std::io::Error::other("No such file or directory"));
        let err = anyhow::Error::from(typed).context("cannot build `k`");
        assert_eq!(
            failure_lines(&err),
            [
                "error: cannot build `k`",
                "  caused by: cannot run `nix --version`",
                "  caused by: No such file or directory",
                "hint: install Nix",
            ]
        );
        assert_eq!(failure_lines(&anyhow::anyhow!("plain")), ["error: plain"]);
    }

    #[test]
    fn a_full_disk_anywhere_in_the_chain_says_what_to_do() {
        let full = std::io::Error::from_raw_os_error(28); // ENOSPC
        let err = anyhow::Error::from(full).context("cannot write `build/x.so`");
        assert_eq!(hints(&err), [disk_full_hint()]);
        assert!(disk_full_hint().contains("native-cache prune"));
        let other = anyhow::Error::from(std::io::Error::from_raw_os_error(13)).context("cannot write");
        assert!(hints(&other).is_empty());
    }

    #[test]
    fn new_errors_carry_hints_and_a_source() {
        let e = Error::new(Kind::Nix, "cannot run `nix --version`")
            .hint("install Nix")
            .hint("or build without it")
            .with_source(std::io::Error::other("not found"));
        assert_eq!(e.to_string(), "cannot run `nix --version`");
        assert_eq!(e.hints(), ["install Nix", "or build without it"]);
        let err = anyhow::Error::from(e);
        assert_eq!(err.chain().nth(1).map(|c| c.to_string()).as_deref(), Some("not found"));
        assert_eq!(kind(&err), Kind::Nix);
        // A hint is added only to an error made on the spot.
        assert!(Error::from(NoGpu).hint("x").hints().len() == 1);
    }

    #[test]
    fn a_process_error_is_typed_without_wrapping() {
        let spawn = crate::process::Cmd::new("kernel-builder-no-such-program").output().unwrap_err();
        let err = anyhow::Error::from(spawn).context("cannot probe");
        assert_eq!(kind(&err), Kind::Toolchain);
        assert_eq!(hints(&err), ["is `kernel-builder-no-such-program` installed and on PATH?"]);
    }

    #[test]
    fn a_copy_has_the_chain_kind_and_hints_of_the_original() {
        let full = std::io::Error::from_raw_os_error(28); // ENOSPC
        let unpack = Error::new(Kind::Toolchain, "cannot unpack torch")
            .hint("free space")
            .with_source(anyhow::Error::from(full).context("cannot write `x`"));
        let err = anyhow::Error::from(unpack).context("cannot provision `cpu`");
        let again = copy(&err);
        assert_eq!(failure_lines(&again), failure_lines(&err));
        assert_eq!(format!("{again:#}"), format!("{err:#}"));
        assert_eq!(kind(&again), Kind::Toolchain);
        assert_eq!(hints(&again), ["free space".to_owned(), disk_full_hint()]);
        let plain = copy(&anyhow::anyhow!("no torch"));
        assert_eq!((plain.to_string(), kind(&plain)), ("no torch".to_owned(), Kind::Failed));
    }

    #[test]
    fn exit_codes() {
        assert_eq!(Kind::Failed.exit_code(), 1);
        assert_eq!(Kind::Config.exit_code(), 1);
        assert_eq!(Kind::Usage.exit_code(), 2);
        assert_eq!(Kind::Interrupted { signal: 2 }.exit_code(), 130);
        assert_eq!(Kind::Interrupted { signal: 15 }.exit_code(), 143);
        assert_eq!(Kind::Interrupted { signal: 1000 }.exit_code(), 1);
    }
}
