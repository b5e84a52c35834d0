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
    if let Some(e) = lexical_fault(s) {
        return Err(e);
    }
    let err = match spdx::Expression::parse(s) {
        Ok(_) => return Ok(s.to_owned()),
        Err(e) => e,
    };
    let term = s.get(err.span.clone()).unwrap_or(s);
    let at = if term.is_empty() { ", at its end".to_owned() } else { format!(": `{}`", short(term)) };
    let hint = did_you_mean(hint(s, term));
    Err(NotSpdx {
        message: format!(
            "`{}` is not an SPDX license expression ({}{at})",
            short(s),
            // `expected one of … here`: where is said by `at`.
            err.reason.to_string().trim_end_matches(" here")
        ),
        help: format!("{hint}{USE}"),
    })
}

const USE: &str =
    "Use an id from https://spdx.org/licenses/ (e.g. `Apache-2.0`, `MIT`, `BSD-3-Clause`) or an \
                   expression such as `MIT OR Apache-2.0`";

/// What the SPDX parser lets through or reports badly: a character no expression has (the
/// parser names the term before it), an empty `LicenseRef-`, and `NONE` / `NOASSERTION`,
/// which SPDX documents use to say that no license is known, not a license.
fn lexical_fault(s: &str) -> Option<NotSpdx> {
    // SPDX 2.3 annex D: ids and refs use letters, digits, `.`, `-` (`+` after an id, `:` in
    // `DocumentRef-…:LicenseRef-…`); terms are separated by spaces and parentheses.
    if let Some(c) = s.chars().find(|c| !(c.is_ascii_alphanumeric() || ".-+:() ".contains(*c))) {
        let what = if c.is_control() {
            format!("a control character (U+{:04X})", c as u32)
        } else {
            format!("`{c}`")
        };
        return Some(NotSpdx {
            message: format!(
                "`{}` is not an SPDX license expression ({what} cannot appear in one: ids use letters, digits, `.` and \
                 `-`, terms are separated by single spaces)",
                short(s)
            ),
            help: format!("{}{USE}", did_you_mean(canonical(s))),
        });
    }
    for term in s.split([' ', '(', ')']).filter(|t| !t.is_empty()) {
        if term == "LicenseRef-" || term.ends_with(":LicenseRef-") {
            return Some(NotSpdx {
                message: format!(
                    "`{}` is not an SPDX license expression (`{term}` needs a name after the dash)",
                    short(s)
                ),
                help: "Name your own license `LicenseRef-<name>`, e.g. `LicenseRef-Proprietary`".to_owned(),
            });
        }
        if term == "NONE" || term == "NOASSERTION" {
            return Some(NotSpdx {
                message: format!(
                    "`{}` is not a license: `{term}` says that none is known, and a kernel on the Hub needs one",
                    short(s)
                ),
                help: format!("{USE}; a license of your own is `LicenseRef-<name>`"),
            });
        }
    }
    None
}

/// `s`, or its first 60 characters and `…` when longer: a message quotes the value, and a
/// value can be a whole line of any length (the renderer bounds the lines it draws).
fn short(s: &str) -> String {
    match s.char_indices().nth(60) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

/// The spdx crate's canonical form of a lax expression (`MIT/Apache-2.0`, `apache2`), when that
/// is a valid expression.
fn canonical(s: &str) -> Option<String> {
    spdx::Expression::canonicalize(s).ok().flatten().filter(|c| spdx::Expression::parse(c).is_ok())
}

fn did_you_mean(near: Option<String>) -> String {
    near.map(|n| format!("Did you mean `{}`? ", short(&n))).unwrap_or_default()
}

/// A valid expression near `s`, whose bad part is `term`: the crate's canonical form of a lax
/// expression (`MIT/Apache-2.0`, `apache2`), else `s` with `term` replaced by the id it equals
/// ignoring case, or is closest to.
fn hint(s: &str, term: &str) -> Option<String> {
    let valid = |e: String| spdx::Expression::parse(&e).is_ok().then_some(e);
    if let Some(c) = canonical(s) {
        return Some(c);
    }
    let ids = spdx::identifiers::LICENSES.iter().map(|l| l.name);
    let id = ids.clone().find(|n| n.eq_ignore_ascii_case(term)).or_else(|| {
        // A near id only for a term long enough to be a misspelling of one: two edits turn
        // any short word into some id (`X` into `GD`).
        let lower = term.to_ascii_lowercase();
        let max = (lower.chars().count() / 4).min(2);
        // Sorted, so that of equally near ids the smallest is suggested.
        let mut sorted: Vec<&str> = ids.collect();
        sorted.sort_unstable();
        crate::suggest::nearest_by(&lower, sorted, max, str::to_ascii_lowercase)
    })?;
    valid(s.replacen(term, id, 1))
}

/// The license as a Hugging Face Hub card states it (the `license:` key of the card's YAML
/// front matter): one of the Hub's license ids, or `other` with a name of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HubLicense {
    /// A Hub license id (`apache-2.0`, `gpl-3.0`).
    Id(String),
    /// Not one of the Hub's ids (an expression, `LicenseRef-…`, an id the Hub does not list):
    /// `license: other` with `license_name: <name>`, the expression as a lowercase slug.
    Other { name: String },
}

/// The Hub's license ids that an SPDX id maps onto by lowercasing (the Hub's list of repository
/// licenses, huggingface.co/docs/hub/repositories-licenses); the GNU families and a few data
/// licenses are named without their version suffixes there and are mapped in [`hub_license`].
const HUB_IDS: &[&str] = &[
    "apache-2.0",
    "mit",
    "afl-3.0",
    "artistic-2.0",
    "bsl-1.0",
    "bsd-2-clause",
    "bsd-3-clause",
    "bsd-3-clause-clear",
    "cc0-1.0",
    "cc-by-2.0",
    "cc-by-2.5",
    "cc-by-3.0",
    "cc-by-4.0",
    "cc-by-sa-3.0",
    "cc-by-sa-4.0",
    "cc-by-nc-2.0",
    "cc-by-nc-3.0",
    "cc-by-nc-4.0",
    "cc-by-nd-4.0",
    "cc-by-nc-nd-3.0",
    "cc-by-nc-nd-4.0",
    "cc-by-nc-sa-2.0",
    "cc-by-nc-sa-3.0",
    "cc-by-nc-sa-4.0",
    "cdla-sharing-1.0",
    "cdla-permissive-1.0",
    "cdla-permissive-2.0",
    "wtfpl",
    "ecl-2.0",
    "epl-1.0",
    "epl-2.0",
    "etalab-2.0",
    "eupl-1.1",
    "eupl-1.2",
    "isc",
    "lppl-1.3c",
    "ms-pl",
    "mpl-2.0",
    "osl-3.0",
    "postgresql",
    "ofl-1.1",
    "ncsa",
    "unlicense",
    "zlib",
];

/// The value of `license:` in a card's front matter: the Hub's own id, or `other` followed by a
/// `license_name:` line.
pub fn card_front_matter(expression: &str) -> String {
    match hub_license(expression) {
        HubLicense::Id(id) => id,
        HubLicense::Other { name } => format!("other\nlicense_name: {name}"),
    }
}

/// How a card states `expression`, an expression [`check`] accepted: a single SPDX id the Hub
/// lists under its own id (`Apache-2.0` → `apache-2.0`, `GPL-3.0-only` → `gpl-3.0`), else
/// [`HubLicense::Other`].
pub fn hub_license(expression: &str) -> HubLicense {
    let lower = expression.trim().to_ascii_lowercase();
    let family = ["agpl-3.0", "gpl-2.0", "gpl-3.0", "lgpl-2.1", "lgpl-3.0"]
        .into_iter()
        .find(|f| lower.strip_prefix(f).is_some_and(|rest| matches!(rest, "-only" | "-or-later")));
    let renamed = match lower.as_str() {
        "odc-by-1.0" => Some("odc-by"),
        "odbl-1.0" => Some("odbl"),
        "pddl-1.0" => Some("pddl"),
        "c-uda-1.0" => Some("c-uda"),
        l if l.starts_with("gfdl-") && !l.contains(' ') => Some("gfdl"),
        _ => None,
    };
    if let Some(id) = family.or(renamed).or_else(|| HUB_IDS.iter().copied().find(|i| *i == lower)) {
        return HubLicense::Id(id.to_owned());
    }
    let mut name = String::new();
    for c in lower.chars() {
        if c.is_ascii_alphanumeric() || c == '.' {
            name.push(c);
        } else if !name.ends_with('-') && !name.is_empty() {
            name.push('-');
        }
    }
    HubLicense::Other { name: name.trim_end_matches('-').to_owned() }
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

    #[test]
    fn characters_refs_and_non_licenses_the_parser_lets_through_or_misreports() {
        // Found by review: a newline passed as whitespace and broke the card's YAML.
        let e = check("MIT\nOR Apache-2.0").unwrap_err();
        assert!(e.message.contains("a control character (U+000A) cannot appear in one"), "{}", e.message);
        let e = check("Lizenz-Ä").unwrap_err();
        assert!(e.message.contains("`Ä` cannot appear in one"), "{}", e.message);
        assert!(check("LicenseRef-a\"b").unwrap_err().message.contains("`\"` cannot appear"));
        let e = check("MIT OR LicenseRef-").unwrap_err();
        assert!(e.message.contains("`LicenseRef-` needs a name after the dash"), "{}", e.message);
        for s in ["NONE", "NOASSERTION"] {
            assert!(check(s).unwrap_err().message.contains("says that none is known"), "{s}");
        }
        assert_eq!(check("DocumentRef-x:LicenseRef-y").unwrap(), "DocumentRef-x:LicenseRef-y");
        assert_eq!(
            check("(MIT OR Apache-2.0) AND BSD-3-Clause").unwrap(),
            "(MIT OR Apache-2.0) AND BSD-3-Clause"
        );
    }

    #[test]
    fn hints_only_for_terms_long_enough_to_be_misspellings() {
        // Found by review: `X` and the empty string were offered `GD`.
        for s in ["", "X", "ab"] {
            assert!(check(s).unwrap_err().help.starts_with("Use an id"), "{s:?}");
        }
        assert!(check("Apach-2.0").unwrap_err().help.starts_with("Did you mean `Apache-2.0`?"));
    }

    #[test]
    fn card_licenses_are_hub_ids_or_other() {
        let id = |s: &str| HubLicense::Id(s.to_owned());
        assert_eq!(hub_license("Apache-2.0"), id("apache-2.0"));
        assert_eq!(hub_license("MIT"), id("mit"));
        assert_eq!(hub_license("GPL-3.0-only"), id("gpl-3.0"));
        assert_eq!(hub_license("LGPL-2.1-or-later"), id("lgpl-2.1"));
        assert_eq!(hub_license("ODbL-1.0"), id("odbl"));
        assert_eq!(hub_license("MIT OR Apache-2.0"), HubLicense::Other { name: "mit-or-apache-2.0".into() });
        assert_eq!(hub_license("(MIT)"), HubLicense::Other { name: "mit".into() });
        assert_eq!(
            hub_license("LicenseRef-Proprietary"),
            HubLicense::Other { name: "licenseref-proprietary".into() }
        );
        assert_eq!(
            hub_license("GPL-3.0-only WITH GCC-exception-3.1"),
            HubLicense::Other { name: "gpl-3.0-only-with-gcc-exception-3.1".into() }
        );
    }
}
