//! The CLI's [`Reporter`]: an operation's lines on stderr, at the `--quiet`/`--verbose` level
//! ([`crate::printer`]), with the control characters a server or a file may have sent escaped.

use crate::printer::escape_controls;
use crate::report::Reporter;

/// Lines on this terminal's stderr.
#[derive(Debug, Clone, Copy)]
pub struct Terminal;

impl Reporter for Terminal {
    fn warning(&self, text: &str) {
        crate::printer::stderr!("warning: {}", escape_controls(text));
    }
    fn note(&self, text: &str) {
        crate::printer::stderr!("note: {}", escape_controls(text));
    }
    fn status(&self, text: &str) {
        crate::printer::stderr!("{}", escape_controls(text));
    }
}
