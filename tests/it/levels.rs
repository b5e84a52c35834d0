//! `--quiet` and `--verbose`, global flags of every command: quiet keeps only what is wrong
//! (warnings, errors, hints and their indented lines), verbose adds each command run.
use std::fs;

use crate::util::copy_kernel;

/// kernel-builder `args` in `dir` with its own cache: exit code, stdout, stderr.
fn run(dir: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let o = crate::cellcache::kb(dir, &dir.join(".cache"), &[], args);
    (o.code, o.stdout, o.stderr)
}

#[test]
fn quiet_drops_notes_and_keeps_errors_with_their_hints() {
    let t = tempfile::tempdir().unwrap();
    let k = t.path().join("vah");
    copy_kernel("vector-add-helion", &k);
    let said = "build.toml has no kernel-depends: nothing to lock\n";
    assert_eq!(run(&k, &["lock-kernel-deps", "."]), (0, String::new(), said.to_owned()));
    assert_eq!(run(&k, &["lock-kernel-deps", ".", "--quiet"]), (0, String::new(), String::new()));
    assert_eq!(run(&k, &["-q", "lock-kernel-deps", "."]), (0, String::new(), String::new()));

    // A failure's own words stay, whatever they begin with.
    assert_eq!(run(&k, &["build-and-copy", "--nix", "never", "-q"]).0, 0);
    let (code, _, err) = run(&k, &["fill-card", "--check", ".", "-q"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.ends_with("/build/CARD.md` does not exist: run `kernel-builder fill-card .`\n"), "{err}");

    // A failure says the same with or without --quiet: the error, its causes, its help.
    let empty = t.path().join("empty");
    fs::create_dir(&empty).unwrap();
    for args in [&["build-and-copy", "--nix", "never"][..], &["upload", "."]] {
        let (code, _, loud) = run(&empty, args);
        let (qcode, _, quiet) = run(&empty, &[args, &["--quiet"]].concat());
        assert_eq!((code, qcode), (1, 1), "{loud}");
        assert!(
            loud.contains("error")
                && loud.lines().any(|l| l.trim_start().starts_with("help: ") || l.starts_with("hint: ")),
            "{loud}"
        );
        assert_eq!(quiet, loud);
    }
}

#[test]
fn verbose_shows_each_command_run_and_conflicts_with_quiet() {
    let t = tempfile::tempdir().unwrap();
    let k = t.path().join("vah");
    copy_kernel("vector-add-helion", &k);
    let git = "+ git -C . rev-parse --verify --quiet HEAD^{commit}";
    let (code, out, err) = run(&k, &["build-and-copy", "--nix", "never", "--verbose"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.lines().any(|l| l == git), "{err}");
    assert!(out.starts_with("built "), "{out}");
    fs::remove_dir_all(k.join("build")).unwrap();
    let (code, _, err) = run(&k, &["build-and-copy", "--nix", "never"]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("+ git"), "{err}");

    // Together they conflict, on either side of the subcommand.
    for args in
        [&["build-and-copy", "-q", "-v"][..], &["-q", "build-and-copy", "-v"], &["-v", "check-config", "-q"]]
    {
        let (code, _, err) = run(&k, args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("'--quiet' cannot be used with '--verbose'"), "{err}");
    }
}
