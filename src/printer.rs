//! The library's one terminal writer: progress notes, warnings and a child's echoed output go
//! to stderr through [`stderr!`], so no other library module prints. The crate root denies
//! `clippy::print_stdout` and `clippy::print_stderr` everywhere but here and in `cli` (checked
//! by `cargo clippy --all-targets`), and a test keeps the print macros out of other modules.

/// Write `args` and a newline to stderr, as `eprintln!` does.
pub fn stderr_line(args: std::fmt::Arguments<'_>) {
    eprintln!("{args}");
}

/// `eprintln!` for library code: `crate::printer::stderr!("note: {x}")`.
macro_rules! stderr {
    ($($arg:tt)*) => {
        $crate::printer::stderr_line(format_args!($($arg)*))
    };
}
pub(crate) use stderr;

/// `text` with every control character (C0 but newline and tab, DEL, C1) and every
/// bidirectional override written as a Rust escape (`\u{1b}`), so that text from a server or
/// a file (an error body, a listed path, a name) can neither drive the terminal (colours,
/// cursor moves, window titles, hyperlinks) nor hide what it says. Call it on such text before
/// it reaches the terminal.
pub fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    let bad = |c: char| {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}')
    };
    if !text.contains(bad) {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(
        text.chars().map(|c| if bad(c) { c.escape_unicode().to_string() } else { c.to_string() }).collect(),
    )
}

#[cfg(test)]
mod tests {
    /// Modules allowed to print: this one, the CLI, and the binary.
    fn allowed(file: &str) -> bool {
        file == "printer.rs" || file == "main.rs" || file.starts_with("cli/")
    }

    /// Whether `code` calls the macro `m` (`print!(` inside `eprint!(` is not a call of it).
    fn uses_macro(code: &str, m: &str) -> bool {
        code.match_indices(m).any(|(i, _)| !code[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_'))
    }

    #[test]
    fn escape_controls_leaves_text_and_escapes_terminal_sequences() {
        assert_eq!(super::escape_controls("plain `x`\n\tnext é"), "plain `x`\n\tnext é");
        assert_eq!(
            super::escape_controls("\x1b]0;owned\x07red\x1b[31m"),
            "\\u{1b}]0;owned\\u{7}red\\u{1b}[31m"
        );
        assert_eq!(super::escape_controls("a\rb\u{9b}c\u{202e}d\x7f"), "a\\u{d}b\\u{9b}c\\u{202e}d\\u{7f}");
    }

    #[test]
    fn uses_macro_finds_calls() {
        assert!(uses_macro("    eprintln!(\"x\");", "eprintln!("));
        assert!(!uses_macro("crate::printer::stderr!(\"x\");", "eprintln!("));
        assert!(!uses_macro("eprint!(\"x\")", "print!("));
        assert!(uses_macro("{ print!(\"x\") }", "print!("));
    }

    #[test]
    fn only_the_printer_and_the_cli_print() {
        let mut stray = Vec::new();
        for (file, text) in crate::env::sources() {
            if allowed(&file) {
                continue;
            }
            for (n, l) in text.lines().enumerate() {
                let code = l.trim_start();
                if code.starts_with("//") {
                    continue;
                }
                if ["println!(", "print!(", "eprintln!(", "eprint!("].iter().any(|m| uses_macro(code, m)) {
                    stray.push(format!("src/{file}:{}: {}", n + 1, l.trim()));
                }
            }
        }
        assert!(
            stray.is_empty(),
            "print through crate::printer (or return the text to the CLI):\n{}",
            stray.join("\n")
        );
    }
}
