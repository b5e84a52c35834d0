//! What an operation says while it works, as data handed to the caller's [`Reporter`]: the
//! library decides what is worth saying, the caller how (the CLI's terminal, at its
//! `--quiet`/`--verbose` level, escaping what a server or a file sent; a test, a list).

/// Where an operation's lines go.
pub trait Reporter {
    /// Something the user should know and may act on (`warning: …` in a terminal).
    fn warning(&self, text: &str);
    /// A fact about the work that changes nothing (`note: …`).
    fn note(&self, text: &str);
    /// What the operation is doing or did (`Uploading 2 variant(s) to …`), shown as it is.
    fn status(&self, text: &str);
}

/// A [`Reporter`] that says nothing (a check whose lines another step says again).
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Reporter for Silent {
    fn warning(&self, _text: &str) {}
    fn note(&self, _text: &str) {}
    fn status(&self, _text: &str) {}
}

/// A [`Reporter`] that keeps every line, for tests and for callers that render later.
#[derive(Debug, Default)]
pub struct Collected {
    lines: std::sync::Mutex<Vec<String>>,
}

impl Collected {
    /// The lines so far, each as a terminal shows it (`warning: …`, `note: …`, the status as
    /// it is).
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().map(|l| l.clone()).unwrap_or_default()
    }

    fn push(&self, line: String) {
        if let Ok(mut l) = self.lines.lock() {
            l.push(line);
        }
    }
}

impl Reporter for Collected {
    fn warning(&self, text: &str) {
        self.push(format!("warning: {text}"));
    }
    fn note(&self, text: &str) {
        self.push(format!("note: {text}"));
    }
    fn status(&self, text: &str) {
        self.push(text.to_owned());
    }
}
