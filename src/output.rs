//! A tool's output cut down to what an error message shows: the last lines, the first
//! compiler errors (which notes printed after them can push out of the tail), and lines
//! clipped to a width, so a message stays readable and bounded whatever the tool printed.

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    let start = lines.len().saturating_sub(n);
    lines[start..].join("\n")
}

/// Each line of `text` cut to `width` characters.
pub fn clip_lines(text: &str, width: usize) -> String {
    text.lines()
        .map(|l| {
            if l.chars().count() > width {
                format!("{}…", l.chars().take(width).collect::<String>())
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first compiler error lines of a build log (up to 5), which notes printed after them
/// can push out of the tail.
#[cfg(test)]
pub fn error_lines(text: &str) -> String {
    let errors: Vec<&str> = text.lines().filter(|l| is_error_line(l)).take(FIRST_ERRORS).collect();
    first_errors_block(&errors)
}

/// How many compiler error lines `error_lines` shows.
pub const FIRST_ERRORS: usize = 5;

/// Whether `line` of a build log is a compiler's (gcc, clang, nvcc, Ninja) error line.
pub fn is_error_line(line: &str) -> bool {
    line.contains("error:")
        || line.contains(": error")
        || line.contains("error #")
        || line.starts_with("FAILED:")
}

/// The block `error_lines` shows for `errors` (empty for none).
pub fn first_errors_block<S: AsRef<str>>(errors: &[S]) -> String {
    let errors: Vec<&str> = errors.iter().map(AsRef::as_ref).collect();
    if errors.is_empty() {
        return String::new();
    }
    format!("--- first errors ---\n{}\n", clip_lines(&errors.join("\n"), 400))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_lines_pick_the_compiler_errors() {
        let log = "[1/3] Building\nFAILED: a.o\nx.cpp:1:2: error: bad\nnote: because\n";
        assert_eq!(error_lines(log), "--- first errors ---\nFAILED: a.o\nx.cpp:1:2: error: bad\n");
        assert_eq!(error_lines("all good\n"), "");
        assert_eq!(clip_lines(&"x".repeat(10), 4), "xxxx…");
    }

    #[test]
    fn tail_keeps_the_last_lines_without_trailing_blank_ones() {
        assert_eq!(tail("a\nb\nc\n\n", 2), "b\nc");
        assert_eq!(tail("a", 5), "a");
        assert_eq!(tail("", 3), "");
    }
}
