//! The library's one terminal writer: progress notes, warnings and a child's echoed output go
//! to stderr through [`stderr!`], so no other library module prints. The crate root denies
//! `clippy::print_stdout` and `clippy::print_stderr` everywhere but here and in `cli` (checked
//! by `cargo clippy --all-targets`), and a test keeps the print macros out of other modules.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

/// How much a command says on stderr, set once at start from `--quiet` / `--verbose`
/// ([`set_level`]). Process-wide, as a logger's level is: every line already goes through this
/// module, so the choice is made here once instead of being passed to every function that
/// reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Warnings, errors and hints only: no notes, no progress, no summaries on stderr.
    Quiet = 0,
    /// What a command says by default.
    Normal = 1,
    /// Also each command kernel-builder runs (`+ cmake -G Ninja …`).
    Verbose = 2,
}

static LEVEL: AtomicU8 = AtomicU8::new(Level::Normal as u8);
/// Whether the last line given to [`stderr_line`] was shown: an indented line continues it.
static LAST_SHOWN: AtomicBool = AtomicBool::new(true);

/// Set the level for the rest of the process (the CLI, from its flags).
pub fn set_level(level: Level) {
    LEVEL.store(level as u8, Ordering::Relaxed);
}

/// The level [`set_level`] set ([`Level::Normal`] until then).
pub fn level() -> Level {
    match LEVEL.load(Ordering::Relaxed) {
        0 => Level::Quiet,
        2 => Level::Verbose,
        _ => Level::Normal,
    }
}

/// Whether a stderr line `text` is shown at `level`, given whether the line before it was.
/// Quiet keeps the lines that say something is wrong (`warning…`, `error…`, `hint:`) and the
/// indented lines that continue one (`  caused by: …`, `  help: …`).
pub fn shown(text: &str, level: Level, last_shown: bool) -> bool {
    if level > Level::Quiet {
        return true;
    }
    if text.starts_with([' ', '\t']) {
        return last_shown;
    }
    ["warning", "error", "hint:"].iter().any(|p| text.starts_with(p))
}

/// Write `args` and a newline to stderr, as `eprintln!` does, unless the level hides it
/// ([`shown`]).
pub fn stderr_line(args: std::fmt::Arguments<'_>) {
    let level = level();
    if level == Level::Quiet {
        let text = args.to_string();
        let show = shown(&text, level, LAST_SHOWN.load(Ordering::Relaxed));
        LAST_SHOWN.store(show, Ordering::Relaxed);
        if show {
            eprintln!("{text}");
        }
        return;
    }
    eprintln!("{args}");
}

/// Write `args` and a newline to stderr at every level: a line that says why a command fails
/// or what it left behind, in words that do not begin `error`, `warning` or `hint:`.
pub fn problem_line(args: std::fmt::Arguments<'_>) {
    LAST_SHOWN.store(true, Ordering::Relaxed);
    eprintln!("{args}");
}

/// Write `args` and a newline to stderr at [`Level::Verbose`] only.
pub fn verbose_line(args: std::fmt::Arguments<'_>) {
    if level() == Level::Verbose {
        eprintln!("{args}");
    }
}

/// `eprintln!` for library code: `crate::printer::stderr!("note: {x}")`.
macro_rules! stderr {
    ($($arg:tt)*) => {
        $crate::printer::stderr_line(format_args!($($arg)*))
    };
}
pub(crate) use stderr;

/// [`problem_line`] as a macro: `crate::printer::problem!("`{path}` is stale: …")`.
macro_rules! problem {
    ($($arg:tt)*) => {
        $crate::printer::problem_line(format_args!($($arg)*))
    };
}
pub(crate) use problem;

/// A progress bar (or, without a length, a spinner) on stderr in the indicatif `template`,
/// drawn only when `draw` and stderr is a terminal; otherwise hidden, and every update a no-op.
pub fn bar(draw: bool, len: Option<u64>, template: &str) -> indicatif::ProgressBar {
    let target = if draw && level() > Level::Quiet {
        indicatif::ProgressDrawTarget::stderr()
    } else {
        indicatif::ProgressDrawTarget::hidden()
    };
    let bar = indicatif::ProgressBar::with_draw_target(len, target);
    if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    bar
}

/// `text` with every control character (C0 but newline and tab, DEL, C1) and every
/// bidirectional override written as a Rust escape (`\u{1b}`), so that text from a server or
/// a file (an error body, a listed path, a name) can neither drive the terminal (colours,
/// cursor moves, window titles, hyperlinks) nor hide what it says. Call it on such text before
/// it reaches the terminal.
pub fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    let bad = |c: char| drives_the_terminal(c) && c != '\n' && c != '\t';
    if !text.contains(bad) {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(
        text.chars().map(|c| if bad(c) { c.escape_unicode().to_string() } else { c.to_string() }).collect(),
    )
}

/// Whether `c` is a control character (C0, DEL, C1) or a bidirectional override: what
/// [`escape_controls`] escapes (it keeps newline and tab).
pub fn drives_the_terminal(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}')
}

#[cfg(test)]
mod tests {
    #[test]
    fn quiet_keeps_what_is_wrong_and_its_continuations() {
        use super::{shown, Level};
        let quiet = |lines: &[&str]| -> Vec<String> {
            let mut last = true;
            let mut out = Vec::new();
            for l in lines {
                last = shown(l, Level::Quiet, last);
                if last {
                    out.push((*l).to_owned());
                }
            }
            out
        };
        let said = [
            "note: building 4 cells",
            "  one CUDA file",
            "warning: `x.so` is not manylinux_2_28",
            "  help: rebuild it",
            "built torch215-cxx11-cpu-x86_64-linux",
            "error: cannot build",
            "  caused by: disk full",
            "hint: free space",
        ];
        assert_eq!(
            quiet(&said),
            [
                "warning: `x.so` is not manylinux_2_28",
                "  help: rebuild it",
                "error: cannot build",
                "  caused by: disk full",
                "hint: free space"
            ]
        );
        assert!(said.iter().all(|l| shown(l, Level::Normal, false) && shown(l, Level::Verbose, false)));
    }

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
