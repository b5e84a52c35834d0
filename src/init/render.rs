//! Placeholder substitution for the embedded templates.
//!
//! A template is plain text in which `{{key}}` (spaces inside the braces allowed) is replaced by
//! the value of `key`. There are no conditionals or loops: a file that differs per backend is
//! assembled in Rust from smaller templates. An unknown key, or a `{{` without `}}`, is an error,
//! so a typo in a template cannot leak into a generated project (the unit tests render every
//! template).

use std::collections::BTreeMap;

/// Values for the placeholders of one rendering (key → replacement text).
pub type Vars = BTreeMap<&'static str, String>;

/// A template that could not be rendered: the template's name and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("template `{template}`: {problem}")]
pub struct RenderError {
    pub template: String,
    pub problem: String,
}

/// Replace every `{{key}}` in `text` by `vars[key]`. `name` only labels errors.
pub fn render(name: &str, text: &str, vars: &Vars) -> Result<String, RenderError> {
    let err = |problem: String| RenderError { template: name.to_owned(), problem };
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find("}}").ok_or_else(|| err("`{{` without a closing `}}`".to_owned()))?;
        let key = after[..end].trim();
        let value = vars.get(key).ok_or_else(|| err(format!("unknown placeholder `{key}`")))?;
        out.push_str(value);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substitutes_and_rejects() {
        let mut vars = Vars::new();
        vars.insert("a", "1".to_owned());
        vars.insert("b_c", "{{a}}".to_owned());
        assert_eq!(render("t", "x{{a}}y{{ b_c }}z", &vars).unwrap(), "x1y{{a}}z");
        assert_eq!(render("t", "no placeholders }}", &vars).unwrap(), "no placeholders }}");
        assert_eq!(
            render("t", "{{nope}}", &vars).unwrap_err().to_string(),
            "template `t`: unknown placeholder `nope`"
        );
        assert_eq!(
            render("t", "{{a", &vars).unwrap_err().to_string(),
            "template `t`: `{{` without a closing `}}`"
        );
    }
}
