//! Key paths and the rendering of [`Problem`]s against the original `build.toml` text.
//!
//! A key path (`general.backends[2]`, `kernel.relu.src[0]`, `kernel."a.b".src`) is resolved
//! in the original document (parsed with spans by `toml_edit::ImDocument`); keys moved by the
//! legacy upgrade are first mapped back through its `renames`, and a key that does not exist
//! (a missing `license`) falls back to its nearest existing parent table.
//!
//! Output is miette's graphical report: `[file:line:column]`, the source line with a marker,
//! the message with its rule, and `help:`. [`RenderStyle::Plain`] (ASCII, no colours, fixed
//! width of 120 columns) is used when stderr is not a terminal or `NO_COLOR` /
//! `KERNEL_BUILDER_PLAIN` is set, so that tests and logs get stable bytes.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use miette::{
    Diagnostic, GraphicalReportHandler, GraphicalTheme, LabeledSpan, MietteError, MietteSpanContents,
    SourceCode, SourceSpan, SpanContents,
};
use toml_edit::{ImDocument, Item};

use super::{Problem, Severity};

/// Append a key to a key path, quoting it when it is not a bare TOML key.
pub fn join_key(base: &str, key: &str) -> String {
    let bare = !key.is_empty() && key.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_');
    let seg =
        if bare { key.to_owned() } else { format!("\"{}\"", key.replace('\\', "\\\\").replace('"', "\\\"")) };
    if base.is_empty() {
        seg
    } else {
        format!("{base}.{seg}")
    }
}

/// Append an array index to a key path (`src` → `src[0]`).
pub fn join_index(base: &str, i: usize) -> String {
    format!("{base}[{i}]")
}

/// One step of a key path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// A table key (unquoted).
    Key(String),
    /// An array index.
    Index(usize),
}

/// Split a key path made by [`join_key`]/[`join_index`] into segments. Malformed text ends the
/// list early (so a bad path locates its longest good prefix).
pub fn parse_key_path(path: &str) -> Vec<Segment> {
    let mut out = Vec::new();
    let mut chars = path.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            '.' => {
                chars.next();
            }
            '[' => {
                chars.next();
                let mut n = String::new();
                while let Some(&d) = chars.peek() {
                    chars.next();
                    if d == ']' {
                        break;
                    }
                    n.push(d);
                }
                match n.parse() {
                    Ok(i) => out.push(Segment::Index(i)),
                    Err(_) => return out,
                }
            }
            '"' => {
                chars.next();
                let mut k = String::new();
                while let Some(d) = chars.next() {
                    match d {
                        '\\' => {
                            if let Some(e) = chars.next() {
                                k.push(e);
                            }
                        }
                        '"' => break,
                        _ => k.push(d),
                    }
                }
                out.push(Segment::Key(k));
            }
            _ => {
                let mut k = String::new();
                while let Some(&d) = chars.peek() {
                    if d == '.' || d == '[' {
                        break;
                    }
                    k.push(d);
                    chars.next();
                }
                out.push(Segment::Key(k));
            }
        }
    }
    out
}

/// Rules whose problem is the key itself (the marker goes under the key, not its value).
const KEY_RULES: &[&str] = &["unknown-key", "key-for-other-backend", "duplicate-key"];

/// Map a key path of the upgraded document to the original one through `renames`
/// (`(new, old)` pairs; the longest matching prefix wins).
pub fn original_key_path(path: &str, renames: &[(String, String)]) -> String {
    let is_prefix = |new: &str| {
        path == new
            || path.strip_prefix(new).is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
    };
    match renames.iter().filter(|(new, _)| is_prefix(new)).max_by_key(|(new, _)| new.len()) {
        Some((new, old)) => format!("{old}{}", &path[new.len()..]),
        None => path.to_owned(),
    }
}

/// The byte range in `doc`'s text for `path`: the value (or, for `on_key`, the key) when it
/// exists, else the nearest existing parent, else the start of the file.
pub fn locate(doc: &ImDocument<String>, path: &str, on_key: bool) -> Range<usize> {
    let segs = parse_key_path(path);
    let mut item: &Item = doc.as_item();
    let mut best: Range<usize> = 0..0;
    let last = segs.len().saturating_sub(1);
    for (n, seg) in segs.iter().enumerate() {
        match seg {
            Segment::Key(k) => {
                let Some(t) = item.as_table_like() else { break };
                let Some((key, child)) = t.get_key_value(k) else {
                    break;
                };
                let key_span = key.span();
                let child_span = child.span();
                let span =
                    if n == last && on_key { key_span.or(child_span) } else { child_span.or(key_span) };
                if let Some(s) = span {
                    best = s;
                }
                item = child;
            }
            Segment::Index(i) => {
                if let Some(arr) = item.as_array() {
                    let Some(v) = arr.get(*i) else { break };
                    if let Some(s) = v.span() {
                        best = s;
                    }
                    // Values inside arrays are not items; go no deeper than an inline table.
                    match v.as_inline_table() {
                        Some(_) if n < last => {
                            return locate_in_value(v, &segs[n + 1..], best);
                        }
                        _ => break,
                    }
                } else if let Some(aot) = item.as_array_of_tables() {
                    let Some(t) = aot.get(*i) else { break };
                    if let Some(s) = t.span() {
                        best = s;
                    }
                    return locate_in_table(t, &segs[n + 1..], best, on_key);
                } else {
                    break;
                }
            }
        }
    }
    best
}

fn locate_in_value(v: &toml_edit::Value, segs: &[Segment], mut best: Range<usize>) -> Range<usize> {
    let mut v = v;
    for seg in segs {
        match (seg, v) {
            (Segment::Key(k), toml_edit::Value::InlineTable(t)) => match t.get(k) {
                Some(c) => v = c,
                None => break,
            },
            (Segment::Index(i), toml_edit::Value::Array(a)) => match a.get(*i) {
                Some(c) => v = c,
                None => break,
            },
            _ => break,
        }
        if let Some(s) = v.span() {
            best = s;
        }
    }
    best
}

fn locate_in_table(
    t: &toml_edit::Table,
    segs: &[Segment],
    mut best: Range<usize>,
    on_key: bool,
) -> Range<usize> {
    let Some(Segment::Key(k)) = segs.first() else {
        return best;
    };
    if let Some((key, child)) = t.get_key_value(k) {
        let span =
            if segs.len() == 1 && on_key { key.span().or(child.span()) } else { child.span().or(key.span()) };
        if let Some(s) = span {
            best = s;
        }
        if let (Some(v), Some(_)) = (child.as_value(), segs.get(1)) {
            return locate_in_value(v, &segs[1..], best);
        }
    }
    best
}

/// Columns diagnostics are wrapped at (fixed, so output does not depend on the terminal).
const WIDTH: usize = 120;

/// How diagnostics look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenderStyle {
    /// ASCII, no colours, 120 columns: stable bytes for files, pipes and tests.
    Plain,
    /// Unicode and colours, for a terminal.
    Fancy,
}

impl RenderStyle {
    /// `Fancy` when stderr is a terminal and neither `NO_COLOR` nor `KERNEL_BUILDER_PLAIN` is
    /// set; `Plain` otherwise.
    pub fn detect() -> RenderStyle {
        use std::io::IsTerminal;
        let plain_env =
            crate::env::NO_COLOR.os_non_empty().is_some() || crate::env::PLAIN.os_non_empty().is_some();
        if !plain_env && std::io::stderr().is_terminal() {
            RenderStyle::Fancy
        } else {
            RenderStyle::Plain
        }
    }
}

/// The file's text shared by every report, with its line starts, so that a file with thousands
/// of problems is neither copied nor rescanned from the top for each one: miette reads only a
/// window of lines around each span.
#[derive(Debug, Clone)]
struct Source {
    name: String,
    text: Arc<str>,
    /// Byte offset of the start of every line.
    line_starts: Arc<Vec<usize>>,
}

impl Source {
    fn new(name: &str, text: &str) -> Source {
        // Line breaks as miette counts them: `\n`, `\r\n`, and a lone `\r`.
        let b = text.as_bytes();
        let mut line_starts = vec![0];
        for (i, c) in b.iter().enumerate() {
            if *c == b'\n' || (*c == b'\r' && b.get(i + 1) != Some(&b'\n')) {
                line_starts.push(i + 1);
            }
        }
        Source { name: name.to_owned(), text: Arc::from(text), line_starts: Arc::new(line_starts) }
    }

    fn line_of(&self, offset: usize) -> usize {
        self.line_starts.partition_point(|&s| s <= offset).saturating_sub(1)
    }
}

impl SourceCode for Source {
    fn read_span<'a>(
        &'a self,
        span: &SourceSpan,
        context_lines_before: usize,
        context_lines_after: usize,
    ) -> Result<Box<dyn SpanContents<'a> + 'a>, MietteError> {
        let start = span.offset().min(self.text.len());
        let end = (span.offset() + span.len()).min(self.text.len());
        let first = self.line_of(start).saturating_sub(context_lines_before + 1);
        let last = self.line_of(end) + context_lines_after + 1;
        let from = self.line_starts[first];
        let to = self.line_starts.get(last + 1).copied().unwrap_or(self.text.len());
        // The window starts at a line start one line above the context, so miette's own
        // reading of it gives the same columns and data as a reading of the whole text (a
        // test checks every span of a sample); lines and offsets are shifted back.
        let window: &'a str = &self.text[from..to];
        let local = SourceSpan::new((start - from).into(), end - start);
        let c = window.read_span(&local, context_lines_before, context_lines_after)?;
        let data: &'a [u8] = c.data();
        let shifted = SourceSpan::new((c.span().offset() + from).into(), c.span().len());
        Ok(Box::new(MietteSpanContents::new_named(
            self.name.clone(),
            data,
            shifted,
            c.line() + first,
            c.column(),
            c.line_count() + first,
        )))
    }
}

/// A problem with its place in the source, as miette wants it.
#[derive(Debug)]
struct Report {
    message: String,
    rule: &'static str,
    severity: Severity,
    help: Option<String>,
    source: Option<Source>,
    span: Option<Range<usize>>,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Report {}

impl Diagnostic for Report {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(self.rule))
    }
    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        })
    }
    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.help.as_ref().map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }
    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        self.source.as_ref().map(|s| s as &dyn miette::SourceCode)
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let span = self.span.clone()?;
        Some(Box::new(std::iter::once(LabeledSpan::new_primary_with_span(None, span))))
    }
}

/// A problem placed in the file: `span` is a byte range of the original text (`None` when the
/// file could not be read at all).
#[derive(Debug, Clone)]
pub(crate) struct Placed {
    pub problem: Problem,
    pub span: Option<Range<usize>>,
}

/// Place key-path problems in the original text.
pub(crate) fn place(
    problems: Vec<Problem>,
    doc: Option<&ImDocument<String>>,
    renames: &[(String, String)],
) -> Vec<Placed> {
    let mut placed: Vec<Placed> = problems
        .into_iter()
        .map(|p| {
            let span = doc.map(|d| {
                let orig = original_key_path(&p.key_path, renames);
                locate(d, &orig, KEY_RULES.contains(&p.rule))
            });
            Placed { problem: p, span }
        })
        .collect();
    // File order; stable, so problems at the same place keep the order they were found in.
    placed.sort_by_key(|p| p.span.as_ref().map_or(0, |s| s.start));
    placed
}

/// The widest source line drawn, in columns (tabs count 4, as miette widens them): a problem
/// whose drawn lines (its own and one of context on each side) are wider is shown in the plain
/// `file:line:column` form with a window of this many characters of its line around the
/// column, `…` where the line is cut. A line of 800 kB is never echoed whole, and miette's
/// padding (`format!("{:width$}")`, which panics past `u16::MAX`: seen with 70,000 spaces
/// before a bad key) and its unicode underline (`─`, 3 bytes a column) stay small.
const SHOWN_LINE_COLUMNS: usize = 200;

/// The most lines of one span that miette draws; a longer span (a value of 500,000 array
/// entries) is cut to its first line, so one problem never prints the whole file.
const MAX_DRAWN_SPAN_LINES: usize = 8;

impl Source {
    /// Whether miette may draw `span`: every line it shows (the span's lines and one of context
    /// on each side) is at most [`SHOWN_LINE_COLUMNS`] columns wide once its tabs are widened (a
    /// line of 4,000 tabs is 16,000 columns drawn).
    fn renderable(&self, span: &Range<usize>) -> bool {
        let first = self.line_of(span.start.min(self.text.len())).saturating_sub(1);
        let last = (self.line_of(span.end.min(self.text.len())) + 1).min(self.line_starts.len() - 1);
        (first..=last).all(|l| {
            let start = self.line_starts[l];
            let end = self.line_starts.get(l + 1).copied().unwrap_or(self.text.len());
            // Bound what is drawn: miette widens each tab to 4 columns.
            let line = &self.text[start..end];
            let tabs = line.bytes().filter(|b| *b == b'\t').count();
            line.trim_end_matches(['\n', '\r']).chars().count() + 3 * tabs <= SHOWN_LINE_COLUMNS
        })
    }

    /// 1-based line and column (in characters) of byte `offset`.
    fn line_column(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let line = self.line_of(offset);
        let start = self.line_starts[line];
        let column = self.text.get(start..offset).map_or(offset - start, |t| t.chars().count());
        (line + 1, column + 1)
    }

    /// The line of `span`'s start as at most [`SHOWN_LINE_COLUMNS`] characters around it
    /// (tabs as spaces, `…` where the line is cut), and where in that text the span starts and
    /// how many of its characters are on it (at least 1, for the marker).
    fn excerpt(&self, span: &Range<usize>) -> (String, usize, usize) {
        let start = span.start.min(self.text.len());
        let line = self.line_of(start);
        let from = self.line_starts[line];
        let to = self.line_starts.get(line + 1).copied().unwrap_or(self.text.len());
        let chars: Vec<char> = self.text[from..to]
            .trim_end_matches(['\n', '\r'])
            .chars()
            .map(|c| if c == '\t' { ' ' } else { c })
            .collect();
        let column = self.text.get(from..start).map_or(0, |t| t.chars().count()).min(chars.len());
        let end = span.end.clamp(start, to);
        let width = self.text.get(start..end).map_or(1, |t| t.chars().count()).max(1);
        // The column in the middle of the window, unless the line ends first.
        let last = chars.len().min(column.saturating_sub(SHOWN_LINE_COLUMNS / 2) + SHOWN_LINE_COLUMNS);
        let first = last.saturating_sub(SHOWN_LINE_COLUMNS);
        let mut shown = String::new();
        if first > 0 {
            shown.push('…');
        }
        shown.extend(&chars[first..last]);
        if last < chars.len() {
            shown.push('…');
        }
        let at = column - first + usize::from(first > 0);
        (shown, at, width.min(last.saturating_sub(column)).max(1))
    }

    /// `span` cut to the end of its first line when it covers more than
    /// [`MAX_DRAWN_SPAN_LINES`] lines.
    fn clip(&self, span: Range<usize>) -> Range<usize> {
        let (a, b) = (self.line_of(span.start), self.line_of(span.end));
        if b - a < MAX_DRAWN_SPAN_LINES {
            return span;
        }
        let line_end = self.line_starts.get(a + 1).map_or(self.text.len(), |e| e - 1);
        span.start..line_end.max(span.start)
    }
}

/// miette's rendering of one report, or `None` when it fails or panics (the fallback is
/// [`plain_report`]). The panic hook is left alone: a panic here is a bug in the renderer that
/// should still be visible on stderr, but it no longer ends the program.
fn render_guarded(handler: &GraphicalReportHandler, report: &Report) -> Option<String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut s = String::new();
        handler.render_report(&mut s, report).ok().map(|_| s)
    }))
    .ok()
    .flatten()
}

/// The renderer-free form of one problem: `file:line:column: severity: message [rule]`, the
/// problem's line (cut to [`SHOWN_LINE_COLUMNS`] characters around the column) with `^` under
/// it, and its `help:` line; without a source or a span, `file: severity: message [rule]`.
fn plain_report(display_path: &str, source: Option<&Source>, p: &Placed) -> String {
    let severity = match p.problem.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    };
    let mut s = match (source, &p.span) {
        (Some(src), Some(span)) => {
            let (line, column) = src.line_column(span.start);
            let (shown, at, width) = src.excerpt(span);
            let gutter = " ".repeat(line.to_string().len());
            format!(
                "{display_path}:{line}:{column}: {severity}: {} [{}]\n  {line} | {shown}\n  {gutter} | {}{}\n",
                p.problem.message,
                p.problem.rule,
                " ".repeat(at),
                "^".repeat(width)
            )
        }
        _ => format!("{display_path}: {severity}: {} [{}]\n", p.problem.message, p.problem.rule),
    };
    if let Some(help) = &p.problem.help {
        s.push_str(&format!("  help: {help}\n"));
    }
    s
}

/// A place in the file: 1-based line and column (in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Location {
    pub line: usize,
    pub column: usize,
}

/// The [`Location`] of each placed problem in `text` (same order).
pub(crate) fn locations(text: &str, placed: &[Placed]) -> Vec<Option<Location>> {
    let source = Source::new("", text);
    placed
        .iter()
        .map(|p| {
            p.span.as_ref().map(|s| {
                let (line, column) = source.line_column(s.start);
                Location { line, column }
            })
        })
        .collect()
}

/// How many problems of one rule are drawn in full; the rest are one line ("… and 1,998 more").
pub const GROUP_AFTER: usize = 3;

/// `n` with a comma every three digits (`1998` → `1,998`).
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `text` with every character that could drive the terminal (but newline, tab and carriage
/// return, which the renderer handles) replaced by as many `?` as it has bytes.
fn shown_source(text: &str) -> std::borrow::Cow<'_, str> {
    let bad = |c: char| crate::printer::drives_the_terminal(c) && !matches!(c, '\n' | '\t' | '\r');
    if !text.contains(bad) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if bad(c) {
            out.extend(std::iter::repeat_n('?', c.len_utf8()));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Render placed problems one after another (at most [`GROUP_AFTER`] of each rule in full, the
/// rest counted on one line per rule), then a one-line count.
pub(crate) fn render(
    display_path: &str,
    text: Option<&str>,
    placed: &[Placed],
    style: RenderStyle,
) -> String {
    let handler = match style {
        RenderStyle::Plain => {
            // No wrapping: every message stays on one line, greppable and stable.
            GraphicalReportHandler::new_themed(GraphicalTheme::none())
                .with_width(WIDTH)
                .with_wrap_lines(false)
                .with_links(false)
        }
        RenderStyle::Fancy => GraphicalReportHandler::new_themed(GraphicalTheme::unicode()).with_width(WIDTH),
    };
    // The quoted lines come from the user's file: a control character there (an escape
    // sequence in a comment) must not reach the terminal. Each is drawn as `?`, byte for byte,
    // so every span still points where it did.
    let shown = text.map(shown_source);
    let source = shown.as_deref().map(|t| Source::new(display_path, t));
    let mut out = String::new();
    // Problems of one rule beyond the first GROUP_AFTER are counted, not drawn: rule → (how
    // many were left out, first and last line of those).
    let mut shown: std::collections::HashMap<&'static str, usize> = std::collections::HashMap::new();
    // (rule, severity, how many left out, first and last line of those)
    type Group = (&'static str, Severity, usize, Option<(usize, usize)>);
    let mut grouped: Vec<Group> = Vec::new();
    for p in placed {
        let n = shown.entry(p.problem.rule).or_insert(0);
        *n += 1;
        if *n > GROUP_AFTER {
            let line = source.as_ref().zip(p.span.as_ref()).map(|(src, sp)| src.line_column(sp.start).0);
            match grouped.iter_mut().find(|g| g.0 == p.problem.rule) {
                Some(g) => {
                    g.2 += 1;
                    if let (Some((a, b)), Some(l)) = (&mut g.3, line) {
                        *a = (*a).min(l);
                        *b = (*b).max(l);
                    }
                }
                None => grouped.push((p.problem.rule, p.problem.severity, 1, line.map(|l| (l, l)))),
            }
            continue;
        }
        let report = Report {
            // With a source the header shows `[file:line:column]`; without one, name the file.
            message: if text.is_some() {
                p.problem.message.clone()
            } else {
                format!("{}: {}", display_path, p.problem.message)
            },
            rule: p.problem.rule,
            severity: p.problem.severity,
            help: p.problem.help.clone(),
            source: source.clone(),
            span: p.span.clone().map(|sp| source.as_ref().map_or(sp.clone(), |src| src.clip(sp))),
        };
        let s = match (&source, &p.span) {
            (Some(src), Some(span)) if !src.renderable(span) => plain_report(display_path, Some(src), p),
            _ => render_guarded(&handler, &report)
                .unwrap_or_else(|| plain_report(display_path, source.as_ref(), p)),
        };
        out.push_str(s.trim_end());
        out.push_str("\n\n");
    }
    for (rule, severity, count, lines) in &grouped {
        let kind = match (severity, *count == 1) {
            (Severity::Error, true) => "error",
            (Severity::Error, false) => "errors",
            (Severity::Warning, true) => "warning",
            (Severity::Warning, false) => "warnings",
        };
        let place = match lines {
            Some((a, b)) if a == b => format!(" (line {})", thousands(*a)),
            Some((a, b)) => format!(" (lines {}–{})", thousands(*a), thousands(*b)),
            None => String::new(),
        };
        out.push_str(&format!(
            "{display_path}: … and {} more [{rule}] {kind} like the {GROUP_AFTER} above{place}\n\n",
            thousands(*count)
        ));
    }
    let errors = placed.iter().filter(|p| p.problem.severity == Severity::Error).count();
    let warnings = placed.len() - errors;
    let plural = |n: usize, w: &str| {
        if n == 1 {
            format!("{n} {w}")
        } else {
            format!("{n} {w}s")
        }
    };
    if errors > 0 {
        out.push_str(&format!(
            "{display_path}: {} and {}\n",
            plural(errors, "error"),
            plural(warnings, "warning")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_paths_round_trip() {
        let p = join_index(&join_key(&join_key("kernel", "a.b"), "src"), 3);
        assert_eq!(p, "kernel.\"a.b\".src[3]");
        assert_eq!(
            parse_key_path(&p),
            vec![
                Segment::Key("kernel".into()),
                Segment::Key("a.b".into()),
                Segment::Key("src".into()),
                Segment::Index(3)
            ]
        );
    }

    #[test]
    fn renames_map_prefixes() {
        let r = vec![("general.cuda.minver".to_owned(), "general.cuda-minver".to_owned())];
        assert_eq!(original_key_path("general.cuda.minver", &r), "general.cuda-minver");
        assert_eq!(original_key_path("general.cuda.minverx", &r), "general.cuda.minverx");
    }

    #[test]
    fn locate_values_keys_and_parents() {
        let text = "[general]\nname = \"x\"\nbackends = [\"cuda\", \"mps\"]\n\n[kernel.relu]\nsrc = []\n";
        let doc = ImDocument::parse(text.to_owned()).unwrap();
        let at = |p: &str, k: bool| {
            let r = locate(&doc, p, k);
            &text[r]
        };
        assert_eq!(at("general.backends[1]", false), "\"mps\"");
        assert_eq!(at("general.name", true), "name");
        assert_eq!(at("general.name", false), "\"x\"");
        assert_eq!(at("kernel.relu.src", false), "[]");
        assert!(at("general.license", false).starts_with("[general]"));
        assert!(at("kernel.relu", false).contains("[kernel.relu]"));
    }

    /// The windowed source gives exactly what miette reads from the whole text.
    #[test]
    fn windowed_source_matches_the_whole_text() {
        let text = "a = 1\r\nb = [\n  \"x\",\n  \"y\",\n]\n\n[t]\nc = \"z\"\rd = 2\n";
        let src = Source::new("f", text);
        for start in 0..text.len() {
            for len in [0, 1, 3] {
                if start + len > text.len() {
                    continue;
                }
                for (before, after) in [(0, 0), (1, 1), (2, 3)] {
                    let span = SourceSpan::new(start.into(), len);
                    let want = text.read_span(&span, before, after).unwrap();
                    let got = src.read_span(&span, before, after).unwrap();
                    let at = format!("{start}+{len} ({before},{after})");
                    assert_eq!(got.data(), want.data(), "{at}");
                    assert_eq!(got.span(), want.span(), "{at}");
                    assert_eq!((got.line(), got.column()), (want.line(), want.column()), "{at}");
                }
            }
        }
    }

    fn one_problem(span: Range<usize>) -> Vec<Placed> {
        let problem = Problem {
            severity: Severity::Error,
            key_path: String::new(),
            rule: "toml-syntax",
            message: "m".to_owned(),
            help: Some("h".to_owned()),
        };
        vec![Placed { problem, span: Some(span) }]
    }

    /// A fresh user's case: update-build echoed a bad line of 800 kB whole. A line wider than
    /// [`SHOWN_LINE_COLUMNS`] is shown as that many characters around the column, in both
    /// styles, with `…` on each side that was cut and `^` under the column.
    #[test]
    fn a_long_line_is_shown_cut_around_the_column() {
        let text = format!("[general]\nname = \"x\"\nbad = {}\n", "a".repeat(800_000));
        let start = text.find("bad = ").unwrap() + 6 + 400_000;
        for style in [RenderStyle::Plain, RenderStyle::Fancy] {
            let out = render("build.toml", Some(&text), &one_problem(start..start + 1), style);
            assert_eq!(
                out,
                format!(
                    "build.toml:3:400007: error: m [toml-syntax]\n  3 | …{}…\n    | {}^\n  help: h\n\nbuild.toml: 1 error and 0 warnings\n",
                    "a".repeat(200),
                    " ".repeat(101)
                )
            );
        }
        // Near the start only the end is cut; near the end only the start; a span longer than
        // what is shown is underlined to the cut.
        let line = format!("x = [{}]", "\"b\", ".repeat(100));
        let text = format!("{line}\n");
        let out = render("f", Some(&text), &one_problem(4..text.len() - 1), RenderStyle::Plain);
        let shown: String = line.chars().take(200).collect();
        assert_eq!(
            out,
            format!("f:1:5: error: m [toml-syntax]\n  1 | {shown}…\n    |     {}\n  help: h\n\nf: 1 error and 0 warnings\n", "^".repeat(196))
        );
        let end = text.len() - 2;
        let out = render("f", Some(&text), &one_problem(end..end + 1), RenderStyle::Plain);
        let tail: String = line.chars().skip(line.chars().count() - 200).collect();
        assert!(
            out.starts_with(&format!(
                "f:1:{}: error: m [toml-syntax]\n  1 | …{tail}\n    | {}^\n",
                end + 1,
                " ".repeat(200)
            )),
            "{out}"
        );
        // Tabs are shown as one space each, so the marker stays under its column.
        let text = format!("{}bogus = 1\n", "\t".repeat(300));
        let out = render("f", Some(&text), &one_problem(300..305), RenderStyle::Plain);
        assert!(
            out.starts_with(&format!(
                "f:1:301: error: m [toml-syntax]\n  1 | …{}bogus = 1\n    | {}^^^^^\n",
                " ".repeat(191),
                " ".repeat(192)
            )),
            "{out}"
        );
    }

    #[test]
    fn moved_keys_are_shown_where_they_were_written() {
        let text = "[general]\nname = \"x\"\ncuda-minver = \"12.x\"\n".to_owned();
        let doc = ImDocument::parse(text.clone()).unwrap();
        let problem = Problem {
            severity: Severity::Error,
            key_path: "general.cuda.minver".to_owned(),
            rule: "bad-version",
            message: "bad".to_owned(),
            help: None,
        };
        let renames = vec![("general.cuda.minver".to_owned(), "general.cuda-minver".to_owned())];
        let placed = place(vec![problem.clone()], Some(&doc), &renames);
        assert_eq!(&text[placed[0].span.clone().unwrap()], "\"12.x\"");
        // Without the rename the nearest existing parent, `[general]`, is shown.
        let placed = place(vec![problem], Some(&doc), &[]);
        assert!(text[placed[0].span.clone().unwrap()].starts_with("[general]"));
        let out = render("build.toml", Some(&text), &placed, RenderStyle::Plain);
        assert!(out.contains("[build.toml:1:1]"), "{out}");
        assert!(out.ends_with("build.toml: 1 error and 0 warnings\n"), "{out}");
    }
}
