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
//! ([`super::check_config::Invalid`]), and a typed error its [`crate::error::Diagnostic::fields`]
//! (a failed upload its outcome, [`crate::hub::publish::UploadFailed`]; a build with no cell to
//! build, `skipped`).

use serde_json::{Map, Value};

/// The failure document of `command` for `err`.
pub fn failure(command: &str, err: &anyhow::Error) -> Value {
    let (message, causes, hints, fields) = match crate::error::find::<crate::config::ConfigErrors>(err) {
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
            let fields = crate::error::fields_of(&super::check_config::Invalid::of(e));
            (message, causes, hints, fields)
        }
        None => {
            let causes: Vec<String> = err.chain().skip(1).map(|c| c.to_string()).collect();
            (err.to_string(), causes, crate::error::hints(err), crate::error::fields(err))
        }
    };
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

    /// A typed error's fields join the document; they never replace its shape.
    #[test]
    fn a_typed_errors_fields_add_keys_and_never_replace_the_shape() {
        #[derive(Debug, thiserror::Error)]
        #[error("refused")]
        struct Refused;
        impl crate::error::Diagnostic for Refused {
            fn fields(&self) -> Map<String, Value> {
                match serde_json::json!({"status": "failed", "ok": true, "error": "x"}) {
                    Value::Object(m) => m,
                    _ => Map::new(),
                }
            }
        }
        let err: anyhow::Error = crate::error::Error::from(Refused).into();
        assert_eq!(
            failure("upload", &err),
            serde_json::json!({"ok": false, "command": "upload", "status": "failed",
                "error": {"message": "refused", "causes": [], "hints": []}})
        );
    }
}
