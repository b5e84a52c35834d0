//! `kernel-builder completions <shell>`: scripts generated from the clap definitions.

fn script(shell: &str) -> String {
    let out = crate::util::kb().args(["completions", shell]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The visible subcommands, as `--help` lists them (hidden ones are not completed).
const COMMANDS: &[&str] = &[
    "init",
    "check-config",
    "create-pyproject",
    "clean-pyproject",
    "update-build",
    "list-variants",
    "ci-matrix",
    "build-and-copy",
    "cache",
    "hash",
    "verify",
    "native-cache",
    "check-abi",
    "upload",
    "build-and-upload",
    "matrix",
    "tune",
    "check-builds",
    "completions",
    "fill-card",
    "devshell",
    "testshell",
];

#[test]
fn bash_script_is_valid_and_completes_every_command_and_their_flags() {
    let s = script("bash");
    for c in COMMANDS {
        assert!(s.contains(&format!("kernel__builder,{c})")), "bash script lacks `{c}`");
    }
    // A subcommand's own flags are completed after it.
    assert!(s.contains("--matrix"), "list-variants' --matrix is not completed");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kb.bash");
    std::fs::write(&path, &s).unwrap();
    let check = std::process::Command::new("bash").arg("-n").arg(&path).output().unwrap();
    assert!(check.status.success(), "bash -n: {}", String::from_utf8_lossy(&check.stderr));
    // Sourcing it registers the completion function for the program.
    let reg = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!("source {} && complete -p kernel-builder", path.display()))
        .output()
        .unwrap();
    assert!(reg.status.success(), "{}", String::from_utf8_lossy(&reg.stderr));
    assert!(String::from_utf8_lossy(&reg.stdout).contains("kernel-builder"));
}

/// What bash offers for the command line `words` (the last one being completed), with the
/// script sourced and its function called as bash's `complete -F` calls it.
fn bash_completes(script: &std::path::Path, words: &[&str]) -> Vec<String> {
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let (cur, prev) = (words[words.len() - 1], words[words.len().saturating_sub(2)]);
    let line = format!(
        "source '{}' && COMP_WORDS=({}) && COMP_CWORD={} && _kernel__builder kernel-builder '{cur}' '{prev}' && printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display(),
        quoted.join(" "),
        words.len() - 1
    );
    let out = std::process::Command::new("bash").arg("-c").arg(&line).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().filter(|l| !l.is_empty()).map(str::to_owned).collect()
}

/// Issue 31: the generated function set `cmd` to names its own case labels did not use, so
/// nothing after a subcommand was completed (the old test read only the text). Now bash's
/// completion runs: a subcommand's subcommands, flags and values are offered.
#[test]
fn bash_completes_after_a_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kb.bash");
    std::fs::write(&path, script("bash")).unwrap();
    assert_eq!(bash_completes(&path, &["kernel-builder", "fill"]), ["fill-card"]);
    assert_eq!(bash_completes(&path, &["kernel-builder", "native-cache", "p"]), ["prune", "prune-work"]);
    assert_eq!(
        bash_completes(&path, &["kernel-builder", "native-cache", "prune", "--k"]),
        ["--kernel-deps-max-size"]
    );
    assert_eq!(
        bash_completes(&path, &["kernel-builder", "completions", ""]),
        ["-q", "-v", "-h", "--quiet", "--verbose", "--help", "bash", "zsh", "fish"]
    );
}

#[test]
fn zsh_and_fish_scripts_name_every_command() {
    let zsh = script("zsh");
    assert!(zsh.starts_with("#compdef kernel-builder"), "{}", &zsh[..zsh.len().min(80)]);
    let fish = script("fish");
    for c in COMMANDS {
        assert!(zsh.contains(&format!("'{c}:")), "zsh script lacks `{c}`");
        assert!(fish.contains(&format!("-a \"{c}\"")), "fish script lacks `{c}`");
    }
}

#[test]
fn an_unknown_shell_is_refused_with_the_choices() {
    let out = crate::util::kb().args(["completions", "powershell"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("[possible values: bash, zsh, fish]"), "{err}");
}
