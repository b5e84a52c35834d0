//! What `nix build` shows while it runs: Nix's own log (`-L`) line by line as it comes, and,
//! when stderr is a terminal, a line under it with the time so far, how many derivations Nix
//! has started and the one it started last (read from Nix's `building '…drv'` lines). Quiet
//! (`--json`): nothing at all; the log is still kept for the error message.

use std::io::Write;

/// The progress display of one `nix build`.
pub(super) struct NixProgress {
    bar: indicatif::ProgressBar,
    quiet: bool,
    started: usize,
}

impl NixProgress {
    /// Drawn only when stderr is a terminal and not `quiet`.
    pub(super) fn new(quiet: bool) -> NixProgress {
        let bar = crate::printer::bar(!quiet, None, "{spinner} {elapsed} {wide_msg}");
        if !bar.is_hidden() {
            bar.set_message("nix build: evaluating");
            bar.enable_steady_tick(std::time::Duration::from_millis(200));
        }
        NixProgress { bar, quiet, started: 0 }
    }

    /// One line of Nix's output: shown (above the progress line when it is drawn), and
    /// counted when Nix starts a derivation with it.
    pub(super) fn line(&mut self, line: &str) {
        if let Some(name) = started_derivation(line) {
            self.started += 1;
            self.bar.set_message(format!(
                "nix build: {} started, last {name}",
                if self.started == 1 {
                    "1 derivation".to_owned()
                } else {
                    format!("{} derivations", self.started)
                }
            ));
        }
        if self.quiet {
            return;
        }
        if self.bar.is_hidden() {
            let _ = writeln!(std::io::stderr(), "{line}");
        } else {
            self.bar.println(line);
        }
    }

    /// Remove the progress line.
    pub(super) fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// The derivation name of Nix's `building '/nix/store/<hash>-<name>.drv'...` line (also
/// `… on 'ssh://host'...` for a remote builder); `None` for every other line.
pub(super) fn started_derivation(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("building '")?;
    let (path, tail) = rest.split_once('\'')?;
    if !(tail.starts_with("...") || tail.starts_with(" on '")) {
        return None;
    }
    let file = path.strip_prefix("/nix/store/").or_else(|| path.rsplit_once('/').map(|(_, f)| f))?;
    let (hash, name) = file.split_once('-')?;
    let name = name.strip_suffix(".drv")?;
    (hash.len() == 32 && !name.is_empty()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn started_derivations_are_read_from_nix_lines_and_nothing_else() {
        assert_eq!(
            started_derivation(
                "building '/nix/store/9rcda3mnqgrwa7mnjylcdh81zyshc4l0-relu-torch-cpu.drv'..."
            ),
            Some("relu-torch-cpu")
        );
        assert_eq!(
            started_derivation(
                "building '/nix/store/9rcda3mnqgrwa7mnjylcdh81zyshc4l0-x.drv' on 'ssh://kbremote1@127.0.0.1'..."
            ),
            Some("x")
        );
        for other in [
            "relu-torch-cpu> building '/nix/store/9rcda3mnqgrwa7mnjylcdh81zyshc4l0-x.drv'...",
            "building '/nix/store/9rcda3mnqgrwa7mnjylcdh81zyshc4l0-x'...",
            "building '/nix/store/short-x.drv'...",
            "building '/nix/store/9rcda3mnqgrwa7mnjylcdh81zyshc4l0-x.drv",
            "error: builder for '/nix/store/9rcda3mnqgrwa7mnjylcdh81zyshc4l0-x.drv' failed with exit code 1",
            "",
        ] {
            assert_eq!(started_derivation(other), None, "{other:?}");
        }
    }

    #[test]
    fn quiet_progress_counts_but_is_hidden() {
        let mut p = NixProgress::new(true);
        p.line("building '/nix/store/9rcda3mnqgrwa7mnjylcdh81zyshc4l0-a.drv'...");
        p.line("a> compiling");
        p.line("building '/nix/store/9rcda3mnqgrwa7mnjylcdh81zyshc4l0-b.drv'...");
        assert!(p.bar.is_hidden());
        assert_eq!(p.started, 2);
        assert_eq!(p.bar.message(), "nix build: 2 derivations started, last b");
        p.finish();
    }
}
