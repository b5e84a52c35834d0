//! The one `--json` failure document: every command with `--json` that fails (exit status not
//! 0) prints it on stdout, built here from the error [`super::main`] got back.
//!
//! ```json
//! {"ok": false, "command": "build-and-copy",
//!  "error": {"message": "…", "causes": ["…"], "hints": ["…"]}}
//! ```
//!
//! `causes` is the error's cause chain below `message`; `hints` what to do (the help of each
//! build.toml error, the hints of the typed errors of the chain: [`crate::error::hints`]), both
//! `[]` when there are none. A failure that has more to say adds its own
//! keys beside these: a build.toml with errors adds check-config's problem document
//! ([`super::check_config::Invalid`]), a failed upload its outcome ([`crate::hub::upload::Outcome`]).
//! A typed error adds its [`crate::error::Diagnostic::fields`] (a build with no cell to build:
//! `skipped`).

use serde_json::{Map, Value};

/// An error that carries the fields its command adds to the failure document (an upload's
/// outcome). Its message and causes are those of the wrapped error.
#[derive(Debug)]
pub struct WithDetail {
    error: anyhow::Error,
    detail: Map<String, Value>,
}

impl WithDetail {
    /// `error`, with `detail`'s keys for the `--json` failure document (`detail` not being an
    /// object adds nothing).
    pub fn wrap(error: anyhow::Error, detail: Value) -> anyhow::Error {
        let detail = match detail {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        anyhow::Error::new(WithDetail { error, detail })
    }

    /// The wrapped error, for the text report.
    pub fn inner(&self) -> &anyhow::Error {
        &self.error
    }
}

impl std::fmt::Display for WithDetail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.error, f)
    }
}

impl std::error::Error for WithDetail {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.source()
    }
}

/// The failure document of `command` for `err`.
pub fn failure(command: &str, err: &anyhow::Error) -> Value {
    let (err, detail) = match err.downcast_ref::<WithDetail>() {
        Some(d) => (&d.error, d.detail.clone()),
        None => (err, Map::new()),
    };
    let (message, causes, hints, mut fields) = match crate::error::find::<crate::config::ConfigErrors>(err) {
        Some(e) => {
            let errors: Vec<_> = e.errors().collect();
            let message = format!(
                "`{}` has {} error{}",
                e.path,
                errors.len(),
                if errors.len() == 1 { "" } else { "s" }
            );
            let causes: Vec<String> =
                errors.iter().map(|p| format!("{}: {}", p.key_path, p.message)).collect();
            let hints = crate::error::Diagnostic::hints(e);
            let fields = match serde_json::to_value(super::check_config::Invalid::of(e)) {
                Ok(Value::Object(m)) => m,
                _ => Map::new(),
            };
            (message, causes, hints, fields)
        }
        None => {
            let causes: Vec<String> = err.chain().skip(1).map(|c| c.to_string()).collect();
            (err.to_string(), causes, crate::error::hints(err), crate::error::fields(err))
        }
    };
    fields.extend(detail);
    let mut doc = Map::new();
    doc.insert("ok".into(), Value::Bool(false));
    doc.insert("command".into(), Value::String(command.into()));
    doc.insert("error".into(), serde_json::json!({"message": message, "causes": causes, "hints": hints}));
    for (k, v) in fields {
        // The three keys above are the shape every consumer reads; a detail never replaces them.
        doc.entry(k).or_insert(v);
    }
    Value::Object(doc)
}

/// Print [`failure`] on stdout, pretty, with a trailing newline.
pub fn print_failure(command: &str, err: &anyhow::Error) {
    // Cannot fail: the document holds strings, numbers and maps only.
    println!("{}", serde_json::to_string_pretty(&failure(command, err)).unwrap_or_default());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_becomes_message_and_causes() {
        let err = anyhow::anyhow!("disk full").context("cannot write `build/x`");
        assert_eq!(
            failure("build-and-copy", &err),
            serde_json::json!({"ok": false, "command": "build-and-copy",
                "error": {"message": "cannot write `build/x`", "causes": ["disk full"], "hints": []}})
        );
    }

    #[test]
    fn a_detail_adds_keys_and_never_replaces_the_shape() {
        let err = WithDetail::wrap(
            anyhow::anyhow!("refused"),
            serde_json::json!({"status": "failed", "ok": true, "error": "x"}),
        );
        assert_eq!(
            failure("upload", &err),
            serde_json::json!({"ok": false, "command": "upload", "status": "failed",
                "error": {"message": "refused", "causes": [], "hints": []}})
        );
    }
}
