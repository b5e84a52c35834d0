//! Value rules of `build.toml` that do not depend on the build matrix: the kernel-name rule,
//! git URLs, source paths, and did-you-mean suggestions.

use camino::{Utf8Component, Utf8Path};

use super::model::Backend;

/// The kernel-name rule, as written in messages.
pub const NAME_RULE: &str = "^[a-z][-a-z0-9]*[a-z0-9]$";

/// The longest kernel name: the Hub's limit on a repository name (`ORG/NAME`'s NAME), which
/// the kernel name becomes (it is also a directory and a Python package name, far under the
/// 255 bytes a file name may have).
pub const MAX_NAME_LEN: usize = 96;

/// Why `id` is not a Hub repository id (`owner/name`), or `None` when it is one. The Hub's
/// rules (as `huggingface_hub`'s `validate_repo_id` states them): each part is letters,
/// digits, `-`, `_` and `.`, starts and ends with a letter, digit or `_`, has no `--` or `..`,
/// and the name is at most [`MAX_NAME_LEN`] characters and does not end in `.git`. An id that
/// breaks them (`o/..`, `o/n?a=b`) would be put into Hub URLs as it is.
pub fn repo_id_problem(id: &str) -> Option<String> {
    let Some((owner, name)) = id.split_once('/') else {
        return Some("it is not of the form `owner/name`".to_owned());
    };
    if owner.is_empty() || name.is_empty() || name.contains('/') {
        return Some("it is not of the form `owner/name`".to_owned());
    }
    for (what, part) in [("owner", owner), ("name", name)] {
        if let Some(c) = part.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))) {
            return Some(format!(
                "its {what} has the character {}; the Hub allows letters, digits, `-`, `_` and `.`",
                crate::printer::escape_controls(&format!("`{c}`"))
            ));
        }
        let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
        if !part.starts_with(word) || !part.ends_with(word) {
            return Some(format!("its {what} starts or ends with `-` or `.`, which the Hub does not allow"));
        }
        if part.contains("--") || part.contains("..") {
            return Some(format!("its {what} has `--` or `..`, which the Hub does not allow"));
        }
    }
    if name.len() > MAX_NAME_LEN {
        return Some(format!(
            "its name is {} characters long; the Hub allows at most {MAX_NAME_LEN}",
            name.len()
        ));
    }
    if name.ends_with(".git") {
        return Some("its name ends in `.git`, which the Hub does not allow".to_owned());
    }
    None
}

/// Whether `name` matches [`NAME_RULE`]: at least two characters, a lowercase letter first,
/// then lowercase letters, digits and `-`, not ending with `-`.
pub fn is_valid_name(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() >= 2
        && b[0].is_ascii_lowercase()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[b.len() - 1] != b'-'
}

/// The valid name closest to `name`: lowercased, `_`, spaces and other characters turned into
/// `-`, leading characters before the first letter and trailing dashes dropped, runs of dashes
/// collapsed. `None` when nothing valid is left (`fused_rms_norm` → `fused-rms-norm`).
pub fn suggest_name(name: &str) -> Option<String> {
    let mut out = String::new();
    let folded: String = name.chars().flat_map(char::to_lowercase).map(ascii_fold).collect();
    for c in folded.chars() {
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() { c } else { '-' };
        if out.is_empty() && !c.is_ascii_lowercase() {
            continue;
        }
        if c == '-' && out.ends_with('-') {
            continue;
        }
        out.push(c);
    }
    let out = out.trim_end_matches('-').to_owned();
    is_valid_name(&out).then_some(out)
}

/// The ASCII spelling of a lowercase letter for name suggestions: Latin letters with
/// diacritics lose them (`é` → `e`, `ß` → `ss`, `æ` → `ae`), Cyrillic and Greek letters are
/// transliterated (`я` → `ya`, `λ` → `l`); anything else is returned as it is (and becomes
/// `-` in a name).
fn ascii_fold(c: char) -> std::borrow::Cow<'static, str> {
    use std::borrow::Cow;
    const TABLE: &[(&str, &str)] = &[
        ("àáâãäåāăą", "a"),
        ("çćĉċč", "c"),
        ("ďđ", "d"),
        ("èéêëēĕėęě", "e"),
        ("ĝğġģ", "g"),
        ("ĥħ", "h"),
        ("ìíîïĩīĭįı", "i"),
        ("ĵ", "j"),
        ("ķ", "k"),
        ("ĺļľŀł", "l"),
        ("ñńņňŉ", "n"),
        ("òóôõöøōŏő", "o"),
        ("ŕŗř", "r"),
        ("śŝşš", "s"),
        ("ţťŧ", "t"),
        ("ùúûüũūŭůűų", "u"),
        ("ŵ", "w"),
        ("ýÿŷ", "y"),
        ("źżž", "z"),
        ("ß", "ss"),
        ("æ", "ae"),
        ("œ", "oe"),
        ("þ", "th"),
        ("ð", "d"),
        ("а", "a"),
        ("б", "b"),
        ("в", "v"),
        ("г", "g"),
        ("д", "d"),
        ("её", "e"),
        ("ж", "zh"),
        ("з", "z"),
        ("ий", "i"),
        ("к", "k"),
        ("л", "l"),
        ("м", "m"),
        ("н", "n"),
        ("о", "o"),
        ("п", "p"),
        ("р", "r"),
        ("с", "s"),
        ("т", "t"),
        ("у", "u"),
        ("ф", "f"),
        ("х", "kh"),
        ("ц", "ts"),
        ("ч", "ch"),
        ("ш", "sh"),
        ("щ", "shch"),
        ("ъь", ""),
        ("ы", "y"),
        ("э", "e"),
        ("ю", "yu"),
        ("я", "ya"),
        ("αά", "a"),
        ("β", "b"),
        ("γ", "g"),
        ("δ", "d"),
        ("εέ", "e"),
        ("ζ", "z"),
        ("ηή", "e"),
        ("θ", "th"),
        ("ιίϊ", "i"),
        ("κ", "k"),
        ("λ", "l"),
        ("μ", "m"),
        ("ν", "n"),
        ("ξ", "x"),
        ("οό", "o"),
        ("π", "p"),
        ("ρ", "r"),
        ("σς", "s"),
        ("τ", "t"),
        ("υύϋ", "y"),
        ("φ", "f"),
        ("χ", "ch"),
        ("ψ", "ps"),
        ("ωώ", "o"),
    ];
    if c.is_ascii() {
        let mut b = [0u8; 4];
        return Cow::Owned(c.encode_utf8(&mut b).to_owned());
    }
    TABLE
        .iter()
        .find(|(from, _)| from.contains(c))
        .map_or_else(|| Cow::Owned(c.to_string()), |(_, to)| Cow::Borrowed(*to))
}

/// URL schemes accepted for `general.upstream` and `general.source`.
pub const GIT_URL_SCHEMES: [&str; 7] = ["https", "http", "git", "ssh", "git+ssh", "git+https", "git+http"];

/// Check a git URL: `scheme://…` with a scheme from [`GIT_URL_SCHEMES`], or the scp-like
/// `[user@]host:path` form (path not starting with `/`). The error says which form is expected.
pub fn check_git_url(url: &str) -> anyhow::Result<()> {
    if let Some((scheme, rest)) = url.split_once("://") {
        anyhow::ensure!(
            GIT_URL_SCHEMES.contains(&scheme),
            "unsupported scheme `{scheme}` in git URL `{url}`; use one of {}",
            GIT_URL_SCHEMES.join(", ")
        );
        anyhow::ensure!(!rest.is_empty() && !rest.starts_with('/'), "git URL `{url}` has no host");
        return Ok(());
    }
    match url.split_once(':') {
        Some((host, path))
            if !host.is_empty()
                && !host.contains('/')
                && !host.contains(char::is_whitespace)
                && !path.is_empty()
                && !path.starts_with('/') =>
        {
            Ok(())
        }
        _ => anyhow::bail!(
            "`{url}` is not a git URL; write `https://host/owner/repo` (schemes: {}) or `git@host:owner/repo`",
            GIT_URL_SCHEMES.join(", ")
        ),
    }
}

/// Aliases people use for backends (`mps` for `metal`, …), compared case-insensitively.
pub const BACKEND_ALIASES: [(&str, Backend); 8] = [
    ("mps", Backend::Metal),
    ("hip", Backend::Rocm),
    ("amd", Backend::Rocm),
    ("intel", Backend::Xpu),
    ("sycl", Backend::Xpu),
    ("npu", Backend::Cann),
    ("ascend", Backend::Cann),
    ("apple", Backend::Metal),
];

/// The backend someone probably meant by `s` (wrong case, an alias, or a typo).
pub fn suggest_backend(s: &str) -> Option<Backend> {
    let lower = s.to_ascii_lowercase();
    if let Some(b) = Backend::from_name(&lower) {
        return Some(b);
    }
    if let Some((_, b)) = BACKEND_ALIASES.iter().find(|(a, _)| *a == lower) {
        return Some(*b);
    }
    let names: Vec<&str> = Backend::ALL.iter().map(|b| b.as_str()).collect();
    did_you_mean(&lower, &names).and_then(Backend::from_name)
}

/// The candidate closest to `input`: first an exact match after normalising case and `_`/`-`
/// (so `cuda_capabilities` finds `cuda-capabilities`), then the smallest edit distance within
/// a third of the length (at least 1, at most 3), then a candidate that is a prefix of the
/// input or has the input as its prefix (at least 3 characters each).
pub fn did_you_mean<'a>(input: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let norm = |s: &str| s.to_ascii_lowercase().replace('_', "-");
    let n = norm(input);
    if let Some(c) = candidates.iter().find(|c| norm(c) == n) {
        return Some(c);
    }
    let limit = (input.chars().count() / 3).clamp(1, 3);
    let by_distance = crate::suggest::nearest_by(&n, candidates.iter().copied(), limit, norm);
    // `helion-typo` → `helion`: a candidate the input starts with (or the other way round).
    by_distance.or_else(|| {
        candidates
            .iter()
            .filter(|c| c.len() >= 3 && n.len() >= 3 && (n.starts_with(&norm(c)) || norm(c).starts_with(&n)))
            .max_by_key(|c| c.len())
            .copied()
    })
}

/// Why a path from `src` or `include` is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathProblem {
    /// `empty-path`, `absolute-path`, `path-outside-kernel` or `missing-path`.
    pub rule: &'static str,
    /// What is wrong, naming the path.
    pub message: String,
    /// The fix.
    pub help: Option<String>,
}

/// Check the shape of a `src`/`include` path: non-empty, relative, no `..` component.
pub fn check_path_shape(p: &str) -> Result<(), PathProblem> {
    if p.trim().is_empty() {
        return Err(PathProblem {
            rule: "empty-path",
            message: "the path is empty".to_owned(),
            help: Some("remove the entry or write a path relative to the kernel directory".to_owned()),
        });
    }
    let path = Utf8Path::new(p);
    let drive = p.len() >= 2 && p.as_bytes()[0].is_ascii_alphabetic() && p.as_bytes()[1] == b':';
    if path.is_absolute() || p.starts_with('/') || p.starts_with('\\') || path.has_root() || drive {
        return Err(PathProblem {
            rule: "absolute-path",
            message: format!("`{p}` is an absolute path; paths are relative to the kernel directory"),
            help: Some("copy the file into the kernel directory and write its relative path".to_owned()),
        });
    }
    if path.components().any(|c| matches!(c, Utf8Component::ParentDir))
        || p.split(['/', '\\']).any(|c| c == "..")
    {
        return Err(PathProblem {
            rule: "path-outside-kernel",
            message: format!("`{p}` contains `..`; paths must stay inside the kernel directory"),
            help: Some(
                "move the file into the kernel directory (a vendored copy or a git submodule)".to_owned(),
            ),
        });
    }
    Ok(())
}

/// Check that `p` (already shape-checked) exists under `kernel_dir` and does not resolve,
/// through symlinks, outside `canonical_dir` (the canonical form of `kernel_dir`).
pub fn check_path_on_disk(
    kernel_dir: &Utf8Path,
    canonical_dir: &std::path::Path,
    p: &str,
) -> Result<(), PathProblem> {
    let full = kernel_dir.join(p);
    match full.as_std_path().canonicalize() {
        Err(_) => {
            let dangling = full.as_std_path().symlink_metadata().is_ok();
            Err(PathProblem {
                rule: "missing-path",
                message: if dangling {
                    format!("`{p}` is a symlink whose target does not exist")
                } else {
                    format!("`{p}` does not exist in the kernel directory")
                },
                help: Some(format!("create `{p}` or fix the path (it is relative to `{kernel_dir}`)")),
            })
        }
        Ok(real) if !real.starts_with(canonical_dir) => Err(PathProblem {
            rule: "path-outside-kernel",
            message: format!("`{p}` resolves to `{}`, outside the kernel directory", real.display()),
            help: Some("replace the symlink with a copy of the file inside the kernel directory".to_owned()),
        }),
        Ok(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_ids_follow_the_hub_rules() {
        for ok in ["kernels-community/relu", "a/b", "o_/n.x-y", "A1/b2", &format!("o/{}", "n".repeat(96))] {
            assert_eq!(repo_id_problem(ok), None, "{ok}");
        }
        let form = "it is not of the form `owner/name`";
        for (bad, why) in [
            ("relu", form),
            ("o/", form),
            ("/n", form),
            ("a/b/c", form),
            ("o/..", "its name starts or ends with `-` or `.`, which the Hub does not allow"),
            ("o/n?a=b", "its name has the character `?`; the Hub allows letters, digits, `-`, `_` and `.`"),
            ("o/a..b", "its name has `--` or `..`, which the Hub does not allow"),
            ("o--x/n", "its owner has `--` or `..`, which the Hub does not allow"),
            ("o/n.git", "its name ends in `.git`, which the Hub does not allow"),
            (
                "o/n\u{1b}[2J",
                "its name has the character `\\u{1b}`; the Hub allows letters, digits, `-`, `_` and `.`",
            ),
            ("o/é", "its name has the character `é`; the Hub allows letters, digits, `-`, `_` and `.`"),
        ] {
            assert_eq!(repo_id_problem(bad).as_deref(), Some(why), "{bad}");
        }
        let long = format!("o/{}", "n".repeat(97));
        assert_eq!(
            repo_id_problem(&long).as_deref(),
            Some("its name is 97 characters long; the Hub allows at most 96")
        );
    }

    #[test]
    fn names() {
        for ok in ["relu", "fused-rms-norm", "a1", "flash-attn3"] {
            assert!(is_valid_name(ok), "{ok}");
        }
        for bad in ["r", "Relu", "fused_rms_norm", "relu-", "1relu", "-relu", "", "ré"] {
            assert!(!is_valid_name(bad), "{bad}");
        }
        assert_eq!(suggest_name("fused_rms_norm").as_deref(), Some("fused-rms-norm"));
        assert_eq!(suggest_name("My_Kernel").as_deref(), Some("my-kernel"));
        assert_eq!(suggest_name("_x__y_").as_deref(), Some("x-y"));
        assert_eq!(suggest_name("12"), None);
    }

    #[test]
    fn git_urls() {
        for ok in [
            "https://github.com/org/x",
            "git+ssh://git@github.com/org/x.git",
            "git@github.com:org/x.git",
            "ssh://host/x",
        ] {
            assert!(check_git_url(ok).is_ok(), "{ok}");
        }
        assert!(check_git_url("ftp://host/x").unwrap_err().to_string().contains("unsupported scheme `ftp`"));
        assert!(check_git_url("host:/abs").is_err());
        assert!(check_git_url("just-text").is_err());
    }

    #[test]
    fn suggestions() {
        assert_eq!(suggest_backend("mps"), Some(Backend::Metal));
        assert_eq!(suggest_backend("CUDA"), Some(Backend::Cuda));
        assert_eq!(suggest_backend("hip"), Some(Backend::Rocm));
        assert_eq!(suggest_backend("cdua"), Some(Backend::Cuda));
        assert_eq!(suggest_backend("vulkan"), None);
        assert_eq!(
            did_you_mean("cuda_capabilities", &["cuda-capabilities", "src"]),
            Some("cuda-capabilities")
        );
        assert_eq!(did_you_mean("srcs", &["src", "include"]), Some("src"));
        assert_eq!(did_you_mean("zzzz", &["src", "include"]), None);
    }

    #[test]
    fn path_shapes() {
        assert_eq!(check_path_shape("a/b.cu"), Ok(()));
        assert_eq!(check_path_shape("../x.cu").unwrap_err().rule, "path-outside-kernel");
        assert_eq!(check_path_shape("a/../../x.cu").unwrap_err().rule, "path-outside-kernel");
        assert_eq!(check_path_shape("/etc/passwd").unwrap_err().rule, "absolute-path");
        assert_eq!(check_path_shape("").unwrap_err().rule, "empty-path");
        assert_eq!(check_path_shape("C:\\x.cu").unwrap_err().rule, "absolute-path");
        assert_eq!(check_path_shape("a\\..\\..\\x.cu").unwrap_err().rule, "path-outside-kernel");
    }
}
