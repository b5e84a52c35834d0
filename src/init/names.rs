//! The names a new kernel project is built from: the Hub repository (`ORG/NAME`) and the three
//! spellings of the kernel name used in generated files.

use std::fmt;

/// The rule a kernel name must follow, as stated in error messages. It is the rule `build.toml`
/// enforces for `general.name` (`^[a-z][-a-z0-9]*[a-z0-9]$`, see
/// `../shared/reference/kernel-builder-cli.md` section 2.6).
pub const KERNEL_NAME_RULE: &str =
    "a kernel name uses lowercase letters, digits and `-`, starts with a letter, \
     does not end with `-`, and is at least 2 characters long (e.g. `vector-add`)";

/// The rule a Hub organisation or user name must follow in `--name ORG/NAME`.
pub const ORG_RULE: &str = "an organisation uses letters, digits, `-`, `_` and `.`, and starts and ends \
     with a letter or digit (e.g. `myorg`)";

/// The three spellings of a valid kernel name.
///
/// * `display`: the kernel name itself (`vector-add-helion`): `general.name`, the Hub repository
///   name and the default directory name.
/// * `python`: `-` replaced by `_` (`vector_add_helion`): the Python package under
///   `torch-ext/` and the op name.
/// * `class`: CamelCase (`VectorAddHelion`): the test class name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelNames {
    pub display: String,
    pub python: String,
    pub class: String,
}

impl KernelNames {
    /// Check `name` against [`KERNEL_NAME_RULE`] and derive the other spellings.
    ///
    /// Errors: [`NameError`] holding the bad name and, when one exists, a valid suggestion
    /// (`My_Kernel` → `my-kernel`).
    pub fn new(name: &str) -> Result<KernelNames, NameError> {
        if !is_valid_kernel_name(name) {
            return Err(NameError {
                name: name.to_owned(),
                suggestion: suggest_kernel_name(name),
                conflict: None,
            });
        }
        if name.len() > crate::config::validate::MAX_NAME_LEN {
            return Err(NameError { name: name.to_owned(), suggestion: None, conflict: None });
        }
        let python = name.replace('-', "_");
        // The generated package and op are named after the kernel: a Python keyword would not
        // parse (`from .op import in`), and a module the op file imports would be shadowed.
        let conflict = if PYTHON_KEYWORDS.contains(&python.as_str()) {
            Some("is a Python keyword")
        } else if SHADOWED_MODULES.contains(&python.as_str()) {
            Some("is the name of a module the generated code imports")
        } else {
            None
        };
        if conflict.is_some() {
            return Err(NameError {
                name: name.to_owned(),
                suggestion: Some(format!("{name}-kernel")),
                conflict,
            });
        }
        let class = name
            .split('-')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let mut cs = p.chars();
                match cs.next() {
                    Some(c) => c.to_ascii_uppercase().to_string() + cs.as_str(),
                    None => String::new(),
                }
            })
            .collect();
        Ok(KernelNames { display: name.to_owned(), python, class })
    }
}

/// The lowercase Python keywords (3.13): not usable as the generated package or op name.
const PYTHON_KEYWORDS: [&str; 32] = [
    "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif", "else",
    "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal", "not",
    "or", "pass", "raise", "return", "try", "while", "with", "yield",
];

/// Modules the generated op files import; an op of the same name would shadow them.
const SHADOWED_MODULES: [&str; 5] = ["torch", "helion", "triton", "kernels", "pytest"];

/// A kernel name that breaks [`KERNEL_NAME_RULE`], or that the generated Python code cannot use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameError {
    /// The name as given.
    pub name: String,
    /// The closest valid name, when one can be made from the given one.
    pub suggestion: Option<String>,
    /// Why a name that follows the rule still cannot be used (`is a Python keyword`, …).
    pub conflict: Option<&'static str>,
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.conflict {
            Some(why) => write!(
                f,
                "`{}` cannot name a kernel project: its Python name `{}` {why}, and the generated \
                 package and op are named after it",
                self.name,
                self.name.replace('-', "_")
            ),
            None if is_valid_kernel_name(&self.name) => write!(
                f,
                "the kernel name is {} characters long; a Hub repository name, which it becomes, has at most {}",
                self.name.len(),
                crate::config::validate::MAX_NAME_LEN
            ),
            None => write!(f, "`{}` is not a valid kernel name: {KERNEL_NAME_RULE}", self.name),
        }
    }
}

impl std::error::Error for NameError {}

/// Whether `s` matches the kernel-name rule (the one `check-config` applies).
pub fn is_valid_kernel_name(s: &str) -> bool {
    crate::config::validate::is_valid_name(s)
}

/// The valid kernel name closest to `s` (see [`crate::config::validate::suggest_name`]);
/// `None` when nothing valid is left or `s` is already valid.
pub fn suggest_kernel_name(s: &str) -> Option<String> {
    crate::config::validate::suggest_name(s).filter(|out| out != s)
}

/// Whether `s` is a plausible Hub organisation or user name (see [`ORG_RULE`]).
pub fn is_valid_org(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_names_and_spellings() {
        let n = KernelNames::new("vector-add-helion").unwrap();
        assert_eq!(n.display, "vector-add-helion");
        assert_eq!(n.python, "vector_add_helion");
        assert_eq!(n.class, "VectorAddHelion");
        let n = KernelNames::new("relu2").unwrap();
        assert_eq!((n.python.as_str(), n.class.as_str()), ("relu2", "Relu2"));
        let n = KernelNames::new("a--b").unwrap();
        assert_eq!((n.python.as_str(), n.class.as_str()), ("a__b", "AB"));
    }

    #[test]
    fn invalid_names() {
        for bad in ["", "a", "A", "My_Kernel", "my_kernel", "-ab", "ab-", "1ab", "ab c", "héllo", "ab/c"] {
            assert!(KernelNames::new(bad).is_err(), "{bad:?} should be rejected");
        }
        // The Hub's limit on a repository name, which the kernel name becomes.
        assert!(KernelNames::new(&"a".repeat(96)).is_ok());
        assert_eq!(
            KernelNames::new(&"a".repeat(97)).unwrap_err().to_string(),
            "the kernel name is 97 characters long; a Hub repository name, which it becomes, has at most 96"
        );
    }

    #[test]
    fn suggestions() {
        assert_eq!(suggest_kernel_name("Café-Kernel").as_deref(), Some("cafe-kernel"));
        assert_eq!(suggest_kernel_name("Straße").as_deref(), Some("strasse"));
        assert_eq!(suggest_kernel_name("ядро").as_deref(), Some("yadro"));
        assert_eq!(suggest_kernel_name("λ-attn").as_deref(), Some("l-attn"));
        assert_eq!(suggest_kernel_name("My_Kernel").as_deref(), Some("my-kernel"));
        assert_eq!(suggest_kernel_name("my_kernel").as_deref(), Some("my-kernel"));
        assert_eq!(suggest_kernel_name("Flash.Attn 3").as_deref(), Some("flash-attn-3"));
        assert_eq!(suggest_kernel_name("2fast__kernel-").as_deref(), Some("fast-kernel"));
        assert_eq!(suggest_kernel_name("__"), None);
        assert_eq!(suggest_kernel_name("x"), None);
        assert_eq!(suggest_kernel_name("ok-name"), None);
    }

    #[test]
    fn orgs() {
        for ok in ["myorg", "kernels-community", "A.B_c-9", "x"] {
            assert!(is_valid_org(ok), "{ok}");
        }
        for bad in ["", "-x", "x-", "a b", "a/b", ".x"] {
            assert!(!is_valid_org(bad), "{bad}");
        }
    }
}
