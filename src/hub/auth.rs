//! Where the Hub endpoint and the access token come from, as the Hub's own tools read them.
//!
//! - Endpoint: `HF_ENDPOINT`, else [`DEFAULT_ENDPOINT`]; a trailing `/` is dropped.
//! - Token: `HF_TOKEN` (when set and not blank), else the file the Hub CLI's login writes:
//!   `$HF_TOKEN_PATH`, else `$HF_HOME/token`, with `HF_HOME` defaulting to
//!   `$XDG_CACHE_HOME/huggingface` and then `~/.cache/huggingface`. Surrounding whitespace is
//!   trimmed; an empty file counts as no token.
//!
//! A [`Token`] never shows its value: `Debug` and `Display` print `<redacted>`, and
//! [`Token::redact`] removes it from any text before that text is shown.

use std::fmt;
use std::path::PathBuf;

/// The public Hub.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// The Hub endpoint: `HF_ENDPOINT` or [`DEFAULT_ENDPOINT`], without a trailing `/`.
pub fn endpoint() -> String {
    endpoint_from(crate::env::HF_ENDPOINT.get())
}

/// [`endpoint`], checked: it must start with `http://` or `https://` (an endpoint without a
/// scheme, `hub.example:8080`, would otherwise fail later as a refused connection).
///
/// Errors: no scheme, or another one; the message shows the value with any user information
/// redacted ([`redact_userinfo`]).
pub fn checked_endpoint() -> anyhow::Result<String> {
    let e = endpoint();
    let lower = e.to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        let shown = redact_userinfo(&e);
        let hint = if e.contains("://") {
            "use an `http://` or `https://` URL".to_owned()
        } else {
            format!("write it with its scheme, e.g. `https://{shown}`")
        };
        anyhow::bail!("HF_ENDPOINT is `{shown}`, which is not an http(s) URL: {hint}");
    }
    Ok(e)
}

/// `s` with the user information of every URL in it (`http://user:hf_…@host/…`) replaced by
/// `<redacted>`: `http://<redacted>@host/…`. Used on everything shown that may hold the
/// endpoint (messages, URLs in the outcome), since a token can hide there as well as in
/// `HF_TOKEN`.
pub fn redact_userinfo(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        // The authority ends at the first `/`, `?`, `#` or whitespace; userinfo is up to its
        // last `@`.
        let end =
            tail.find(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace()).unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(at) => {
                out.push_str("<redacted>");
                out.push_str(&authority[at..]);
            }
            None => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

fn endpoint_from(var: Option<String>) -> String {
    let raw = var
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned());
    raw.trim_end_matches('/').to_owned()
}

/// A Hub access token. Its value is only reachable through [`Token::expose`], used when
/// building the `Authorization` header.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// Wrap a token value (surrounding whitespace trimmed); `None` when it is blank.
    pub fn new(value: &str) -> Option<Token> {
        let v = value.trim();
        (!v.is_empty()).then(|| Token(v.to_owned()))
    }

    /// The raw value, for the `Authorization: Bearer …` header only.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// `text` with every occurrence of the token replaced by `<redacted>`.
    pub fn redact(&self, text: &str) -> String {
        text.replace(&self.0, "<redacted>")
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Where a token was found, for messages (never the value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    /// The `HF_TOKEN` environment variable.
    Env,
    /// A token file (the login command's, or `HF_TOKEN_PATH`).
    File(PathBuf),
}

impl fmt::Display for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenSource::Env => f.write_str("HF_TOKEN"),
            TokenSource::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// The token file the Hub CLI's login writes, per the module docs; `None` when no home
/// directory can be found.
pub fn token_path() -> Option<PathBuf> {
    if let Some(p) = crate::env::HF_TOKEN_PATH.os_non_empty() {
        return Some(PathBuf::from(p));
    }
    let home = if let Some(h) = crate::env::HF_HOME.os_non_empty() {
        PathBuf::from(h)
    } else if let Some(x) = crate::env::XDG_CACHE_HOME.os_non_empty() {
        PathBuf::from(x).join("huggingface")
    } else {
        PathBuf::from(crate::env::HOME.os_non_empty()?).join(".cache").join("huggingface")
    };
    Some(home.join("token"))
}

/// Find the token (module docs); `Ok(None)` when there is none.
///
/// # Errors
/// The token file exists but cannot be read (the error names the file, never its content).
pub fn find_token() -> anyhow::Result<Option<(Token, TokenSource)>> {
    if let Some(t) = crate::env::HF_TOKEN.get().as_deref().and_then(Token::new) {
        return Ok(Some((t, TokenSource::Env)));
    }
    let Some(path) = token_path() else {
        return Ok(None);
    };
    match std::fs::metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        _ => {}
    }
    let Some(shown) = camino::Utf8Path::from_path(&path) else {
        anyhow::bail!(
            "the token file `{}` has a path that is not UTF-8; set HF_TOKEN instead",
            path.display()
        );
    };
    // A token is ~40 bytes; a FIFO or a device given as the file is refused, not read.
    let bytes = crate::fsutil::read_bounded(shown, 64 << 10, "a token file")
        .map_err(|e| anyhow::anyhow!("cannot read the token file: {e:#}"))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("the token file `{}` is not UTF-8 text", path.display()))?;
    Ok(Token::new(&text).map(|t| (t, TokenSource::File(path))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_is_redacted_in_every_url() {
        assert_eq!(
            redact_userinfo(
                "POST http://me:hf_secret@host:8080/api failed; see https://a@b/c and http://plain/x"
            ),
            "POST http://<redacted>@host:8080/api failed; see https://<redacted>@b/c and http://plain/x"
        );
        assert_eq!(redact_userinfo("http://u:p@w@host"), "http://<redacted>@host");
        assert_eq!(redact_userinfo("no url here"), "no url here");
    }

    #[test]
    fn endpoint_default_and_trailing_slash() {
        assert_eq!(endpoint_from(None), "https://huggingface.co");
        assert_eq!(endpoint_from(Some("  ".into())), "https://huggingface.co");
        assert_eq!(endpoint_from(Some("http://127.0.0.1:8080/".into())), "http://127.0.0.1:8080");
    }

    #[test]
    fn token_never_shows_its_value() {
        let t = Token::new(" secret-abc\n").unwrap();
        assert_eq!(t.expose(), "secret-abc");
        assert_eq!(format!("{t:?} {t}"), "Token(<redacted>) <redacted>");
        assert_eq!(t.redact("Bearer secret-abc and secret-abc"), "Bearer <redacted> and <redacted>");
        assert_eq!(Token::new(" \n"), None);
    }
}
