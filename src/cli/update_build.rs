//! `kernel-builder update-build`: rewrite `build.toml` as edition 6, in place.
//!
//! The rewrite is [`crate::config::update::plan`]: [`crate::config::upgrade`] (legacy forms to
//! edition 5) followed by [`crate::config::upgrade::to_edition6`], applied to the parsed document, so comments, key
//! order and version text are kept and the file describes exactly the same build variants as
//! before (the in-memory read of a legacy file goes through the same transformation). Every
//! change is printed. The new text is validated before anything is written, and written
//! atomically ([`crate::fsutil::write_atomic`]); a file that would not validate is never
//! written.

use std::process::ExitCode;

use anyhow::bail;

use camino::{Utf8Path, Utf8PathBuf};

use crate::config::update::plan;
use crate::config::upgrade::Change;
use crate::config::{Problem, Severity};

/// Rewrite DIR/build.toml as edition 6, keeping comments and key order, and print each change.
///
/// Reads every generation (edition 5, the unversioned "v4" and "v3" forms, `universal` files,
/// the oldest `language`/`capabilities` form). Edition-6 files are only touched to fix a kernel
/// name written with underscores. The variants that are built do not change. Nothing is
/// written when the result would not validate.
///
/// Exit status: 0 when the file was updated or was already up to date; 1 when it cannot be
/// updated, or with `--check` when it needs an update.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Reads every generation of build.toml (edition 5, the unversioned \"v4\" and \"v3\" forms, \
`universal` files, the oldest `language`/`capabilities` form) and writes edition 6. Edition-6 files \
are only touched to fix a kernel name written with underscores. The build variants do not change. \
Nothing is written when the result would not validate.\n\n\
Exit status: 0 updated or already current; 1 cannot be updated, or (with --check) needs an update."
)]
pub struct Args {
    /// Kernel directory holding build.toml (default: the current directory).
    pub dir: Option<Utf8PathBuf>,

    /// Print what would change and exit 1 if build.toml needs an update; write nothing.
    #[arg(long)]
    pub check: bool,

    /// License to add as `general.license` when the file has none, as an SPDX id
    /// (e.g. `Apache-2.0`) or expression (`MIT OR Apache-2.0`). Editions 5 and 6 require a license;
    /// older files often lack one. A license already in the file is kept (with a warning when
    /// it differs); edit the file to change it.
    #[arg(long, value_name = "SPDX", value_parser = parse_spdx_license)]
    pub license: Option<String>,
}

/// Check `--license` against the SPDX license list (see [`crate::config::license::check`]).
/// Returns it without surrounding whitespace.
///
/// # Errors
/// Anything else: says which term is wrong and why, with the corrected expression or the
/// closest id when one is near.
pub fn parse_spdx_license(s: &str) -> Result<String, String> {
    if s.trim().is_empty() {
        return Err("needs an SPDX license id, e.g. `--license Apache-2.0`".to_owned());
    }
    crate::config::license::check(s).map_err(|e| format!("{}. {}", e.message, e.help))
}

/// Check that `text` is a valid edition-6 `build.toml` for the kernel in `kernel_dir`, with the
/// same validator every other command uses.
fn validate_new_text(display_path: &str, text: &str, kernel_dir: &Utf8Path) -> anyhow::Result<()> {
    crate::kernel::load_str(Utf8Path::new(display_path), text, Some(kernel_dir))
        .map(|_| ())
        .map_err(anyhow::Error::from)
}

/// Run the command (see [`Args`] for the behaviour and exit status).
pub fn run(args: Args) -> super::CmdResult {
    let dir = args.dir.clone().unwrap_or_else(|| Utf8PathBuf::from("."));
    if !dir.is_dir() {
        bail!("`{dir}` is not a directory");
    }
    let path = dir.join("build.toml");
    let display = if args.dir.is_some() { path.to_string() } else { "build.toml".to_owned() };
    let text = crate::config::read_build_toml_text(&path)?;
    if text.trim().is_empty() {
        bail!("`{display}` is empty: there is nothing to update (`kernel-builder check-config` says what it needs)");
    }
    let plan = plan(&display, &text, args.license.as_deref())?;

    if !plan.needs_update() {
        print_problems(&display, &plan.problems);
        if plan.has_errors() {
            if plan.generation.is_current() {
                bail!("`{display}` is edition 6 but not complete; fix the errors above");
            }
            bail!("`{display}` cannot be brought to edition 6; fix the errors above");
        }
        // Nothing to change is no promise the file is right: an edition-6 file with an unknown
        // key, or one the upgrade cannot read (no `[general]`), says what is wrong with it.
        if let Err(err) = validate_new_text(&display, &text, &dir) {
            if plan.generation.is_current() {
                crate::printer::stderr!(
                    "error: `{display}` is edition 6, with nothing for update-build to change, but it does not validate; fix the errors below"
                );
            } else {
                crate::printer::stderr!(
                    "error: `{display}` cannot be brought to edition 6; fix the errors below"
                );
            }
            return Err(err);
        }
        println!("{display} is already edition 6; nothing to change.");
        return Ok(ExitCode::SUCCESS);
    }

    let header = if plan.generation.is_current() {
        "edition 6 (fixes)".to_owned()
    } else {
        format!("{} → edition 6", plan.generation.label())
    };
    // The command that applies the update, as this one was given.
    let apply = match &args.license {
        Some(l) => format!("kernel-builder update-build --license {l}"),
        None => "kernel-builder update-build".to_owned(),
    };
    if args.check {
        println!("{display} needs an update: {header}");
        print_changes(&plan.changes);
        print_problems(&display, &plan.problems);
        // What the update would write must validate too, or running it only fails.
        let shown_new = format!("{display} (as upgraded, not written)");
        let invalid =
            if plan.has_errors() { None } else { validate_new_text(&shown_new, &plan.new_text, &dir).err() };
        if let Some(err) = &invalid {
            super::report_error(err);
        }
        if plan.has_errors() || invalid.is_some() {
            // Running the suggested command as it is would only fail on the same errors.
            println!("Fix the errors above, then run `{apply}` to apply.");
        } else {
            println!("Run `{apply}` to apply.");
        }
        return Ok(ExitCode::from(1));
    }

    print_problems(&display, &plan.problems);
    if plan.has_errors() {
        bail!("`{display}` was not changed: fix the errors above and run this command again");
    }
    // Diagnostics about the new text name it as such: its line numbers are not the file's.
    let shown_new = format!("{display} (as upgraded, not written)");
    if let Err(err) = validate_new_text(&shown_new, &plan.new_text, &dir) {
        crate::printer::stderr!("error: `{display}` was not changed: the upgraded file would not validate");
        return Err(err);
    }
    // The changes are said once they are sure to be made.
    println!("{display}: {header}");
    print_changes(&plan.changes);
    // Keep the file's line endings: a CRLF file stays CRLF (the TOML writer emits LF).
    let new_text = if text.contains("\r\n") {
        plan.new_text.replace("\r\n", "\n").replace('\n', "\r\n")
    } else {
        plan.new_text.clone()
    };
    if new_text != text {
        // A symlinked build.toml is updated where it points, not replaced by a regular file.
        crate::fsutil::write_atomic(&crate::fsutil::link_target(&path), new_text.as_bytes())?;
    }
    println!("Updated {display}.");
    Ok(ExitCode::SUCCESS)
}

fn print_changes(changes: &[Change]) {
    for c in changes {
        println!("  {}: {}", c.key_path, c.description);
    }
}

fn print_problems(display: &str, problems: &[Problem]) {
    for p in problems {
        let level = match p.severity {
            Severity::Warning => "warning",
            Severity::Error => "error",
        };
        crate::printer::stderr!("{level}: {display}: {}: {} [{}]", p.key_path, p.message, p.rule);
        if let Some(help) = p.help.as_deref().and_then(help_here) {
            crate::printer::stderr!("  help: {help}");
        }
    }
}

/// A problem's help as update-build shows it: the upgrade's rules are shared with check-config,
/// whose help says to run update-build, which is what is running. That part is dropped (or,
/// for `--license`, said as "run again with"); a help that is nothing but it is left out.
fn help_here(help: &str) -> Option<String> {
    const RUN: &str = "run `kernel-builder update-build`";
    let help = help.strip_prefix(&format!("{RUN}, then ")).map(str::to_owned).unwrap_or_else(|| {
        help.replace(&format!("or {RUN} --license <SPDX id>`"), "or run again with `--license <SPDX id>`")
    });
    (!help.contains("kernel-builder update-build")).then_some(help)
}
