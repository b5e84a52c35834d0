//! `build.toml`: every generation read into one typed model ([`model`]), validated with source
//! spans, and migrated to edition 6 by `update-build`.
//!
//! Reading a file ([`read_kernel_build_toml`], [`parse_str`], [`Parsed::finish`]):
//! 1. the text is parsed with `toml_edit` (a syntax error is reported with its position);
//! 2. [`upgrade::upgrade`] turns any generation older than edition 5 into an edition-5
//!    document in place (edition 5 and 6 are read as written);
//! 3. [`parse`] reads that document into [`BuildConfig`] (a kernel's `backend` in edition 5,
//!    its `language` in edition 6), collecting every [`Problem`]
//!    (validation rules in [`validate`], dependency tables in [`deps`]);
//! 4. [`Parsed::finish`] takes the problems of checks on the complete model made by the
//!    caller, and [`diagnostics`] locates each problem's key path in the original text and
//!    renders it.
//!
//! This module knows nothing of the build matrix: the `kernel` module above it is the one place that
//! reads a kernel (this module, then the matrix checks, then the source set).

pub mod deps;
pub mod diagnostics;
pub mod license;
pub mod model;
pub mod parse;
pub mod update;
pub mod upgrade;
pub mod validate;

pub use model::*;

use camino::{Utf8Path, Utf8PathBuf};

/// All the problems found in one `build.toml` when at least one is an error.
#[derive(Debug, Clone)]
pub struct ConfigErrors {
    /// The file, as shown in messages.
    pub path: Utf8PathBuf,
    /// Every problem (errors and warnings) in file order.
    pub problems: Vec<Problem>,
    /// Where each of `problems` is (same order): 1-based line and column in the file, `None`
    /// when the file could not be read or the problem has no place.
    pub locations: Vec<Option<diagnostics::Location>>,
    /// The problems rendered as `[file:line:column]`, source line, rule and help, followed by
    /// a count line (style chosen by [`diagnostics::RenderStyle::detect`] when loading).
    pub rendered: String,
}

impl ConfigErrors {
    /// Every problem, rendered as `file:line:column`, the source line, the rule and the fix.
    pub fn render(&self) -> String {
        self.rendered.clone()
    }

    /// Only the errors (not the warnings).
    pub fn errors(&self) -> impl Iterator<Item = &Problem> {
        self.problems.iter().filter(|p| p.severity == Severity::Error)
    }
}

impl std::fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.rendered)
    }
}

impl std::error::Error for ConfigErrors {}

impl crate::error::Diagnostic for ConfigErrors {
    fn kind(&self) -> crate::error::Kind {
        crate::error::Kind::Config
    }

    /// The fix of each error that has one (its rendering shows them as `help:`).
    fn hints(&self) -> Vec<String> {
        self.errors().filter_map(|p| p.help.clone()).collect()
    }
}

/// A `build.toml` that passed every check, with the warnings found on the way.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub config: BuildConfig,
    /// Warnings (a legacy generation, a kernel whose backend is not built, …) in file order.
    pub warnings: Vec<Problem>,
    /// Where each of `warnings` is (same order), as [`ConfigErrors::locations`].
    pub warning_locations: Vec<Option<diagnostics::Location>>,
    /// The warnings rendered like errors (empty when there are none).
    pub rendered_warnings: String,
}

/// Read `kernel_dir/build.toml` as text, refusing a missing, empty, too large or non-UTF-8
/// file. Returns the path as shown in messages and the text, for [`parse_str`].
///
/// Errors: the one problem, rendered (also when the file cannot be read).
pub fn read_kernel_build_toml(kernel_dir: &Utf8Path) -> Result<(Utf8PathBuf, String), ConfigErrors> {
    let path = kernel_dir.join("build.toml");
    let text = match read_build_toml(&path) {
        Ok(bytes) if bytes.len() as u64 > MAX_BUILD_TOML_BYTES => {
            return Err(unreadable(&path, "file-too-large", too_large_message(&path), Some(TOO_LARGE_HELP.to_owned())));
        }
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(t) if t.trim().is_empty() => {
                return Err(unreadable(
                    &path,
                    "empty-file",
                    format!("`{path}` is empty"),
                    Some("write `[general]` (`name`, `version`, `edition = 6`, `license`, `backends`) and a framework section such as `[torch-noarch]`".to_owned()),
                ))
            }
            Ok(t) => t,
            Err(e) => {
                let at = e.utf8_error().valid_up_to();
                let bytes = e.as_bytes();
                let line = bytes[..at].iter().filter(|b| **b == b'\n').count() + 1;
                return Err(unreadable(
                    &path,
                    "not-utf8",
                    format!("`{path}` is not UTF-8 text: byte {at} (line {line}) is 0x{:02x}", bytes[at]),
                    Some("save the file as UTF-8".to_owned()),
                ));
            }
        },
        Err(e) => {
            let help = if !kernel_dir.is_dir() {
                Some(format!("`{kernel_dir}` is not a directory; pass the kernel directory"))
            } else if std::fs::metadata(&path).is_err() {
                Some("run the command in a kernel directory, or pass its path".to_owned())
            } else {
                None // there, but not a regular file: the message says so
            };
            return Err(unreadable(&path, "no-build-toml", format!("{e:#}"), help));
        }
    };
    Ok((path, text))
}

/// The largest `build.toml` kernel-builder reads: 1 MiB. The largest real files (the corpus)
/// are about 25 KB; a limit keeps time and memory bounded whatever the input (a file of
/// 500,000 `python-depends` entries once took 24 GB).
pub const MAX_BUILD_TOML_BYTES: u64 = 1 << 20;

const TOO_LARGE_HELP: &str = "real build.toml files are a few kilobytes: check that this is the right file, or move long lists (generated sources) out of it";

fn too_large_message(path: &Utf8Path) -> String {
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(MAX_BUILD_TOML_BYTES + 1);
    format!(
        "`{path}` is {} bytes; kernel-builder reads build.toml files of at most {} bytes (1 MiB)",
        diagnostics::thousands(size as usize),
        diagnostics::thousands(MAX_BUILD_TOML_BYTES as usize)
    )
}

/// Read `path`, but never more than [`MAX_BUILD_TOML_BYTES`] + 1 bytes: a longer result means
/// the file is too large (the caller reports it without reading the rest). A FIFO, a device
/// (a link to `/dev/zero`) or a directory is refused by name before a byte is read
/// ([`crate::fsutil::open_regular`]).
pub fn read_build_toml(path: &Utf8Path) -> anyhow::Result<Vec<u8>> {
    crate::fsutil::read_upto(path, MAX_BUILD_TOML_BYTES)
}

/// [`read_build_toml`] as UTF-8 text for commands that rewrite the file; the errors name the
/// file and say what to do (too large, not UTF-8, unreadable).
pub fn read_build_toml_text(path: &Utf8Path) -> anyhow::Result<String> {
    let bytes = read_build_toml(path)?;
    if bytes.len() as u64 > MAX_BUILD_TOML_BYTES {
        anyhow::bail!("{}\n  help: {TOO_LARGE_HELP}", too_large_message(path));
    }
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let line = bytes[..at].iter().filter(|b| **b == b'\n').count() + 1;
        anyhow::anyhow!(
            "`{path}` is not UTF-8 text: byte {at} (line {line}) is 0x{:02x}; save the file as UTF-8",
            bytes[at]
        )
    })
}

fn unreadable(path: &Utf8Path, rule: &'static str, message: String, help: Option<String>) -> ConfigErrors {
    let problem = Problem { severity: Severity::Error, key_path: String::new(), rule, message, help };
    let placed = vec![diagnostics::Placed { problem: problem.clone(), span: None }];
    ConfigErrors {
        path: path.to_owned(),
        problems: vec![problem],
        locations: vec![None],
        rendered: diagnostics::render(path.as_str(), None, &placed, diagnostics::RenderStyle::detect()),
    }
}

/// A `build.toml` read into the model, with the problems found so far, before the checks that
/// need a complete model (the build-matrix checks, which live above this module) have run.
/// [`Parsed::finish`] adds their problems, places every problem in the source text and renders
/// them.
#[derive(Debug, Clone)]
pub struct Parsed {
    /// The model (complete only when [`Parsed::is_sound`]).
    pub config: BuildConfig,
    display_path: Utf8PathBuf,
    text: String,
    style: diagnostics::RenderStyle,
    problems: Vec<Problem>,
    /// The `legacy-format` warning, reported after every other problem.
    legacy: Option<Problem>,
    renames: Vec<(String, String)>,
}

impl Parsed {
    /// Whether the file itself has no error, so checks on the complete model may run.
    pub fn is_sound(&self) -> bool {
        !self.problems.iter().any(|p| p.severity == Severity::Error)
    }

    /// Add `more` (problems located by key path, found on the complete model), then place and
    /// render every problem against the original text.
    ///
    /// Errors: every problem (errors and warnings), when at least one is an error.
    pub fn finish(self, more: Vec<Problem>) -> Result<Loaded, ConfigErrors> {
        let Parsed { config, display_path, text, style, mut problems, legacy, renames } = self;
        problems.extend(more);
        problems.extend(legacy);
        let shown = display_path.as_str();
        // Parsing the original text again keeps the spans (DocumentMut drops them).
        let original = toml_edit::ImDocument::parse(text.clone()).ok();
        let placed = diagnostics::place(problems, original.as_ref(), &renames);
        let has_errors = placed.iter().any(|p| p.problem.severity == Severity::Error);
        let rendered = diagnostics::render(shown, Some(&text), &placed, style);
        let locations = diagnostics::locations(&text, &placed);
        let problems: Vec<Problem> = placed.into_iter().map(|p| p.problem).collect();
        if has_errors {
            return Err(ConfigErrors { path: display_path, problems, locations, rendered });
        }
        Ok(Loaded { config, warnings: problems, warning_locations: locations, rendered_warnings: rendered })
    }
}

/// Read `text` as the `build.toml` shown as `display_path`: upgrade a legacy form to edition 5 and read it
/// into the model. With `kernel_dir`, `src` and `include` paths are checked on disk relative to
/// it; with `None` only their shape is. Problems are rendered in `style`.
///
/// Errors: a file over [`MAX_BUILD_TOML_BYTES`] or one that is not TOML (the problem rendered).
/// Every other problem is kept in the [`Parsed`] for [`Parsed::finish`].
/// The configuration of the valid build.toml `text`, for tests (panics on a problem).
#[cfg(test)]
pub(crate) fn config_for_tests(text: &str) -> BuildConfig {
    parse_str(Utf8Path::new("build.toml"), text, None, diagnostics::RenderStyle::Plain)
        .expect("parses")
        .finish(Vec::new())
        .expect("valid")
        .config
}

pub fn parse_str(
    display_path: &Utf8Path,
    text: &str,
    kernel_dir: Option<&Utf8Path>,
    style: diagnostics::RenderStyle,
) -> Result<Parsed, ConfigErrors> {
    let shown = display_path.as_str();
    if text.len() as u64 > MAX_BUILD_TOML_BYTES {
        let problem = Problem {
            severity: Severity::Error,
            key_path: String::new(),
            rule: "file-too-large",
            message: format!(
                "`{shown}` is {} bytes; kernel-builder reads build.toml files of at most {} bytes (1 MiB)",
                diagnostics::thousands(text.len()),
                diagnostics::thousands(MAX_BUILD_TOML_BYTES as usize)
            ),
            help: Some(TOO_LARGE_HELP.to_owned()),
        };
        let placed = vec![diagnostics::Placed { problem: problem.clone(), span: None }];
        return Err(ConfigErrors {
            path: display_path.to_owned(),
            problems: vec![problem],
            locations: vec![None],
            rendered: diagnostics::render(shown, None, &placed, style),
        });
    }
    let mut doc = match text.parse::<toml_edit::DocumentMut>() {
        Ok(d) => d,
        Err(e) => return Err(syntax_error(display_path, text, &e, style)),
    };
    let up = upgrade::upgrade(&mut doc);
    let mut cx = parse::Cx::new(kernel_dir);
    let config = parse::read(&mut cx, doc.as_table(), display_path, up.generation);
    let mut problems = up.problems;
    problems.extend(cx.problems);
    let legacy = up.generation.is_legacy().then(|| Problem {
        severity: Severity::Warning,
        key_path: "general".to_owned(),
        rule: "legacy-format",
        message: format!("build.toml uses the {} format; it was upgraded in memory", up.generation.label()),
        help: Some("run `kernel-builder update-build` to rewrite it as edition 6".to_owned()),
    });
    Ok(Parsed {
        config,
        display_path: display_path.to_owned(),
        text: text.to_owned(),
        style,
        problems,
        legacy,
        renames: up.renames,
    })
}

/// The TOML syntax error `e` of `text` (shown as `display_path`) as a `toml-syntax` problem at
/// its place, rendered like every other problem (the source line cut around the column), for
/// every command that reads build.toml, `update-build` included.
pub(crate) fn syntax_error(
    display_path: &Utf8Path,
    text: &str,
    e: &toml_edit::TomlError,
    style: diagnostics::RenderStyle,
) -> ConfigErrors {
    let shown = display_path.as_str();
    let problem = Problem {
        severity: Severity::Error,
        key_path: String::new(),
        rule: "toml-syntax",
        message: match (
            e.message().trim_end(),
            e.span().and_then(|s| text.get(s.start..)).and_then(|t| t.chars().next()),
        ) {
            // toml_edit gives no reason for a control character where it may not stand.
            ("", Some(c)) if crate::printer::drives_the_terminal(c) => {
                format!("not valid TOML: the control character U+{:04X} may not stand here", u32::from(c))
            }
            (reason, _) => format!("not valid TOML: {reason}"),
        },
        help: Some("fix the TOML syntax at the marked place".to_owned()),
    };
    let span = e.span().map(|s| {
        // A zero-width span at the end still needs a character to point at.
        let start = s.start.min(text.len());
        start..s.end.max(start).min(text.len())
    });
    let placed = vec![diagnostics::Placed { problem: problem.clone(), span: Some(span.unwrap_or(0..0)) }];
    ConfigErrors {
        path: display_path.to_owned(),
        problems: vec![problem],
        locations: diagnostics::locations(text, &placed),
        rendered: diagnostics::render(shown, Some(text), &placed, style),
    }
}

/// How serious a [`Problem`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Warning,
    Error,
}

/// One finding about a `build.toml`, located by its key path rather than by byte offset, so
/// that checks outside the parser (for example the build-matrix checks) can
/// report problems that the diagnostics renderer then points at in the source file.
///
/// `key_path` uses dots between keys and `[i]` for array items, with the edition-5 key names:
/// `general.backends[2]`, `kernel.relu.cuda-capabilities[0]`, `torch-noarch`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub severity: Severity,
    pub key_path: String,
    /// Short rule name, e.g. `unknown-backend`, `capability-out-of-range`.
    pub rule: &'static str,
    /// What is wrong, naming the value.
    pub message: String,
    /// The fix, when one is obvious (`did you mean \`metal\`?`).
    pub help: Option<String>,
}
