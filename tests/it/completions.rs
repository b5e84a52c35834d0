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
