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

/// A progress bar (or, without a length, a spinner) on stderr in the indicatif `template`,
/// drawn only when `draw` and stderr is a terminal; otherwise hidden, and every update a no-op.
pub fn bar(draw: bool, len: Option<u64>, template: &str) -> indicatif::ProgressBar {
    let target =
        if draw { indicatif::ProgressDrawTarget::stderr() } else { indicatif::ProgressDrawTarget::hidden() };
    let bar = indicatif::ProgressBar::with_draw_target(len, target);
    if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    bar
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
