//! SPDX license expressions, as `[general] license` and `update-build --license` take them:
//! checked against the SPDX license list of the [`spdx`] crate (list version
//! [`spdx::license_version`]).

/// Why a license string is not an SPDX expression, and what to write instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotSpdx {
    /// ``` `other` is not an SPDX license expression (unknown term: `other`) ```.
    pub message: String,
    /// The corrected expression or closest id when one is near, then where the ids are listed.
    pub help: String,
}

/// Check `s`: an id (`Apache-2.0`), `LicenseRef-…`, or an expression of them with `AND`, `OR`,
/// `WITH <exception>` and parentheses, parsed strictly (case-sensitive ids, no deprecated ids
/// such as `GPL-2.0`). Returns `s` without surrounding whitespace.
///
/// # Errors
/// Anything else (the empty string too): which term is wrong and why, and a near valid
/// expression when there is one (`apache-2.0` gives `Apache-2.0`).
pub fn check(s: &str) -> Result<String, NotSpdx> {
    let s = s.trim();
    let err = match spdx::Expression::parse(s) {
        Ok(_) => return Ok(s.to_owned()),
        Err(e) => e,
    };
    let term = s.get(err.span.clone()).unwrap_or(s);
    let at = if term.is_empty() { ", at its end".to_owned() } else { format!(": `{}`", short(term)) };
    let hint = hint(s, term).map(|h| format!("Did you mean `{}`? ", short(&h))).unwrap_or_default();
    Err(NotSpdx {
        message: format!(
            "`{}` is not an SPDX license expression ({}{at})",
            short(s),
            // `expected one of … here`: where is said by `at`.
            err.reason.to_string().trim_end_matches(" here")
        ),
        help: format!(
            "{hint}Use an id from https://spdx.org/licenses/ (e.g. `Apache-2.0`, `MIT`, \
             `BSD-3-Clause`) or an expression such as `MIT OR Apache-2.0`"
        ),
    })
}

/// `s`, or its first 60 characters and `…` when longer: a message quotes the value, and a
/// value can be a whole line of any length (the renderer bounds the lines it draws).
fn short(s: &str) -> String {
    match s.char_indices().nth(60) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

/// A valid expression near `s`, whose bad part is `term`: the crate's canonical form of a lax
/// expression (`MIT/Apache-2.0`, `apache2`), else `s` with `term` replaced by the id it equals
/// ignoring case, or is closest to.
fn hint(s: &str, term: &str) -> Option<String> {
    let valid = |e: String| spdx::Expression::parse(&e).is_ok().then_some(e);
    if let Some(c) = spdx::Expression::canonicalize(s).ok().flatten().and_then(valid) {
        return Some(c);
    }
    let ids = spdx::identifiers::LICENSES.iter().map(|l| l.name);
    let id = ids.clone().find(|n| n.eq_ignore_ascii_case(term)).or_else(|| {
        let lower = term.to_ascii_lowercase();
        ids.map(|n| (strsim::osa_distance(&lower, &n.to_ascii_lowercase()), n))
            .filter(|(d, _)| *d <= 2)
            .min()
            .map(|(_, n)| n)
    })?;
    valid(s.replacen(term, id, 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_expressions_and_near_misses() {
        assert_eq!(check(" MIT OR Apache-2.0 ").unwrap(), "MIT OR Apache-2.0");
        assert_eq!(check("LicenseRef-Proprietary").unwrap(), "LicenseRef-Proprietary");
        let e = check("apache-2.0").unwrap_err();
        assert_eq!(e.message, "`apache-2.0` is not an SPDX license expression (unknown term: `apache-2.0`)");
        assert!(e.help.starts_with("Did you mean `Apache-2.0`? Use an id from"), "{}", e.help);
        let e = check("other").unwrap_err();
        assert!(e.help.starts_with("Use an id from"), "{}", e.help);
        assert!(check("").is_err());
        assert!(check("{{ license }}").is_err());
        // Found by tests/it/config.rs's long-line property: a 4,064-character value was quoted
        // whole in the message, a line longer than the renderer draws.
        let e = check(&"é".repeat(4064)).unwrap_err();
        assert!(e.message.starts_with(&format!("`{}…` is not an SPDX license expression (", "é".repeat(60))));
        assert!(e.message.len() < 400, "{}", e.message.len());
    }
}
