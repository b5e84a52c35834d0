//! The one `--json` failure document (`src/cli/json.rs`): every `--json` command that fails
//! prints `{"ok": false, "command", "error": {"message", "causes", "hints"}, …}` on stdout, with
//! the exit status it had without `--json`.

use std::fs;

use serde_json::{json, Value};

use crate::util::kb;

/// A kernel directory whose build.toml has one error (an unknown key on line 4) and one
/// warning (a license that is not SPDX, line 5).
fn broken_kernel() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    fs::write(
        tmp.path().join("build.toml"),
        "[general]\nname = \"relu\"\nversion = 1\nbogus = 2\nlicense = \"apache 2\"\nedition = 5\nbackends = [\"cpu\"]\n\n[torch-noarch]\n",
    )
    .unwrap();
    tmp
}

/// Run `kernel-builder ARGS` in `dir`; its exit status and stdout as JSON.
fn run_json(dir: &std::path::Path, args: &[&str]) -> (Option<i32>, Value) {
    let out = kb().args(args).current_dir(dir).output().unwrap();
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}):\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), doc)
}

/// The problems of [`broken_kernel`], as every command that reads build.toml reports them.
fn broken_kernel_failure(command: &str) -> Value {
    let warning = json!({
        "severity": "warning", "rule": "license-not-spdx", "key_path": "general.license",
        "message": "`apache 2` is not an SPDX license expression (unknown term: `apache`)",
        "help": "Use an id from https://spdx.org/licenses/ (e.g. `Apache-2.0`, `MIT`, `BSD-3-Clause`) or an \
                 expression such as `MIT OR Apache-2.0`",
        "line": 5, "column": 11
    });
    let error = json!({
        "severity": "error", "rule": "unknown-key", "key_path": "general.bogus",
        "message": "unknown key `bogus` in `[general]`",
        "help": UNKNOWN_KEY_HELP,
        "line": 4, "column": 1
    });
    json!({
        "ok": false,
        "command": command,
        "error": {
            "message": "`./build.toml` has 1 error",
            "causes": ["general.bogus: unknown key `bogus` in `[general]`"],
            "hints": [UNKNOWN_KEY_HELP],
        },
        "valid": false,
        "file": "./build.toml",
        "error_count": 1,
        "warning_count": 1,
        "warnings": [warning],
        "problems": [error, warning],
    })
}

const UNKNOWN_KEY_HELP: &str = "allowed keys: name, version, edition, license, upstream, source, backends, \
     python-depends, kernel-depends, cuda, neuron, tpu, xpu, hub, matrix";

#[test]
fn check_config_failure_has_the_shared_shape_and_lists_its_warnings() {
    let tmp = broken_kernel();
    let (code, doc) = run_json(tmp.path(), &["check-config", "--json"]);
    assert_eq!(code, Some(1));
    assert_eq!(doc, broken_kernel_failure("check-config"));
}

#[test]
fn list_variants_failure_has_the_shared_shape() {
    let tmp = broken_kernel();
    let (code, doc) = run_json(tmp.path(), &["list-variants", "--json"]);
    assert_eq!(code, Some(1));
    assert_eq!(doc, broken_kernel_failure("list-variants"));
}

/// Found by a user: `build-and-copy --json` printed nothing at all when it failed.
#[test]
fn build_and_copy_failure_prints_the_document() {
    let tmp = broken_kernel();
    let (code, doc) = run_json(tmp.path(), &["build-and-copy", "--json", "--nix", "never"]);
    assert_eq!(code, Some(1));
    assert_eq!(doc, broken_kernel_failure("build-and-copy"));

    let (code, doc) = run_json(tmp.path(), &["build-and-copy", "missing", "--json"]);
    assert_eq!(code, Some(1));
    assert_eq!(
        doc,
        json!({"ok": false, "command": "build-and-copy",
               "error": {"message": "`missing` does not exist", "causes": [], "hints": []}})
    );
}

/// An upload refused before any request (nothing built) prints the same shape.
#[test]
fn upload_failure_before_the_hub_prints_the_document() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, doc) = run_json(tmp.path(), &["upload", "missing", "--json"]);
    assert_eq!(code, Some(1));
    assert_eq!(
        doc,
        json!({"ok": false, "command": "upload",
               "error": {"message": "`missing` is not a directory", "causes": [], "hints": []}})
    );
}

/// No token: the Hub hints (how to give one, `--dry-run`) are data, not words in the message.
#[test]
fn an_upload_without_a_token_lists_what_to_do_as_hints() {
    let tmp = tempfile::tempdir().unwrap();
    let out = kb()
        .args(["upload", ".", "--json"])
        .current_dir(tmp.path())
        .env_remove("HF_TOKEN")
        .env_remove("HF_TOKEN_PATH")
        .env("HF_HOME", tmp.path().join("hf"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc,
        json!({"ok": false, "command": "upload", "error": {"message": format!("no Hub token: HF_TOKEN is not set, and there is no token file `{}`", tmp.path().join("hf/token").display()), "causes": [], "hints": [
            "set HF_TOKEN, or log in with `hf auth login` (the token file is read from $HF_TOKEN_PATH, else $HF_HOME/token)",
            "`--dry-run` works without one"
        ]}})
    );
}

/// An unknown `--variant`: the near miss and what the name is (a kernels 0.19 spelling) are
/// hints, not words in the message (a user's trial found them inside it, with `hints: []`).
#[test]
fn an_unknown_variant_lists_the_near_miss_and_what_it_is_as_hints() {
    let tmp = tempfile::tempdir().unwrap();
    fs::write(
        tmp.path().join("build.toml"),
        "[general]\nname = \"relu\"\nversion = 1\nbackends = [\"cpu\", \"cuda\"]\n\n[torch-noarch]\n",
    )
    .unwrap();
    let (code, doc) =
        run_json(tmp.path(), &["build-and-copy", "--json", "--nix", "never", "--variant", "torch-cdua"]);
    assert_eq!(code, Some(1));
    assert_eq!(
        doc["error"],
        json!({"message": "unknown variant `torch-cdua`; this kernel's variants are: torch-cpu, torch-cuda", "causes": [], "hints": ["did you mean `torch-cuda`?"]})
    );
    let host = kernel_builder::matrix::host_system();
    let name = format!("torch-2.15-cxx11-cuda-13.2-cpython-3.9-abi3-{host}");
    fs::create_dir(tmp.path().join("build")).unwrap();
    let (code, doc) = run_json(tmp.path(), &["verify", "--json", "--variant", &name]);
    assert_eq!(code, Some(1));
    assert_eq!(
        doc["error"],
        json!({"message": format!("cannot verify: unknown variant `{name}`; this kernel's variants are: torch-cpu, torch-cuda"), "causes": [], "hints": [
            format!("`{name}` is the kernels 0.19 spelling of `torch215-cxx11-cu132-{host}`, which this kernel does not have either; name variants the legacy way, as `list-variants` prints them (`--names both` shows the two)")
        ]})
    );
}

/// A name of another system's variant beside a typo: both are said, the typo's near miss as a
/// hint (a user's trial lost it behind the other's reason), each name once; and a name of
/// another system that is no variant of the kernel is unknown, not "a variant of" it.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn another_systems_variant_beside_a_typo_keeps_the_typos_hint() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("relu");
    crate::util::copy_kernel("relu", &dir);
    let run = |names: &[&str]| {
        let mut args = vec!["build-and-copy", "--json", "--nix", "never", "--offline"];
        for n in names {
            args.extend(["--variant", n]);
        }
        let out = kb()
            .args(&args)
            .current_dir(&dir)
            .env("KERNEL_BUILDER_CACHE_DIR", tmp.path().join("cache"))
            .env("KERNEL_BUILDER_TOOLCHAIN_CACHE_DIR", tmp.path().join("toolchains"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        doc["error"].clone()
    };
    let typo = "torch215-cxx11-cpu-x86_64-linx";
    let e = run(&[typo, "torch215-cxx11-cpu-aarch64-linux", typo]);
    let message = e["message"].as_str().unwrap();
    assert!(message.starts_with("2 of the variants asked for cannot be built:\n  cannot build `torch215-cxx11-cpu-aarch64-linux` natively: it is a variant of aarch64-linux, and this machine builds x86_64-linux's"), "{message}");
    assert!(
        message.contains(&format!("\n  unknown variant `{typo}`; this kernel's variants are: ")),
        "{message}"
    );
    assert_eq!(e["hints"], json!(["did you mean `torch215-cxx11-cpu-x86_64-linux`?"]));
    let e = run(&["torch999-cxx11-cpu-aarch64-linux"]);
    assert!(
        e["message"].as_str().unwrap().starts_with("unknown variant `torch999-cxx11-cpu-aarch64-linux`; "),
        "{e}"
    );
    // Its hint says whose name it is, not that the kernel has it there (a re-trial was told
    // "a variant of aarch64-linux").
    assert_eq!(
        e["hints"],
        json!(["`torch999-cxx11-cpu-aarch64-linux` is a name for aarch64-linux, and this machine builds x86_64-linux's variants: one of aarch64-linux is built on such a machine, or through Nix with a remote builder of that system (`--builders`)"])
    );
    // The count is of names, not of lines: two typos and another system's variant are three.
    let e = run(&[typo, "torch215-cxx11-cpu-x86_64-lin", "torch215-cxx11-cpu-aarch64-linux"]);
    assert!(
        e["message"].as_str().unwrap().starts_with("3 of the variants asked for cannot be built:"),
        "{e}"
    );
    assert_eq!(
        e["hints"],
        json!([format!("did you mean `torch215-cxx11-cpu-x86_64-linux` for `{typo}`, `torch215-cxx11-cpu-x86_64-linux` for `torch215-cxx11-cpu-x86_64-lin`?")])
    );
}

/// Without `--json` a failure leaves stdout empty: the document is only for `--json`.
#[test]
fn without_json_a_failure_prints_nothing_on_stdout() {
    let tmp = broken_kernel();
    let out = kb().args(["check-config"]).current_dir(tmp.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
}

/// A typed failure's hints are data: the `--json` document lists them, and the text report ends
/// with them as `hint:` lines.
#[test]
fn a_missing_nix_fills_the_hints() {
    let tmp = tempfile::tempdir().unwrap();
    crate::util::copy_kernel("relu", tmp.path());
    let hint =
        "install Nix (Debian: `apt-get install nix-bin`, see scripts/setup-nix.sh), set KERNEL_BUILDER_NIX \
                to its path, or build without Nix (`build-and-copy --nix never`)";
    let out = kb()
        .args(["build-and-copy", "--json", "--nix", "always"])
        .env("KERNEL_BUILDER_NIX", "/nonexistent/nix")
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["error"]["hints"], json!([hint]), "{doc}");
    assert_eq!(
        doc["error"]["message"],
        "cannot run `/nonexistent/nix show-config --json`: Nix is not installed or not on PATH"
    );
    assert_eq!(doc["error"]["causes"], json!(["No such file or directory (os error 2)"]));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.ends_with(&format!("\nhint: {hint}\n")), "{stderr}");
}

/// The exit code comes from the kind of failure: 2 for a bad command line (clap's, and one
/// `init` finds), 1 for a failed command (bad build.toml, missing tool).
#[test]
fn exit_codes_follow_the_kind_of_failure() {
    let tmp = tempfile::tempdir().unwrap();
    let out = kb().args(["list-variants", "--no-such-flag"]).current_dir(tmp.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = kb().args(["init", "--name", "vector-add"]).current_dir(tmp.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "init's own usage error (its text: init::name_without_org)");
    let broken = broken_kernel();
    let out = kb().args(["check-config"]).current_dir(broken.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let out = kb()
        .args(["build-and-copy", "--nix", "always"])
        .env("KERNEL_BUILDER_NIX", "/nonexistent/nix")
        .current_dir(broken.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}

/// The command names `kernel-builder PREFIX --help` lists under `Commands:` (not `help`).
fn subcommands(prefix: &[&str]) -> Vec<String> {
    let out = kb().args(prefix).arg("--help").output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    let Some(listed) = help.split("Commands:\n").nth(1) else { return Vec::new() };
    listed
        .lines()
        .take_while(|l| !l.is_empty())
        // A name is indented by two spaces; a wrapped description by more.
        .filter_map(|l| l.strip_prefix("  ").filter(|l| !l.starts_with(' ')))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// Found by a fresh user: `verify --json` printed no document on failure, because the commands
/// that print one were a list kept by hand. Every command whose help offers `--json` (read from
/// the binary, two levels deep) prints the failure document when it fails: here, each run in an
/// empty directory on a path that does not exist.
#[test]
fn every_command_with_json_prints_the_failure_document() {
    let empty = tempfile::tempdir().unwrap();
    let mut checked = Vec::new();
    for top in subcommands(&[]) {
        let mut paths: Vec<Vec<String>> =
            subcommands(&[top.as_str()]).into_iter().map(|sub| vec![top.clone(), sub]).collect();
        if paths.is_empty() {
            paths.push(vec![top.clone()]);
        }
        for path in paths {
            let args: Vec<&str> = path.iter().map(String::as_str).collect();
            let out = kb().args(&args).arg("--help").output().unwrap();
            let help = String::from_utf8(out.stdout).unwrap();
            if !help.contains("\n      --json") {
                continue;
            }
            let usage = help.lines().find(|l| l.starts_with("Usage:")).unwrap().to_owned();
            let takes_path = usage.contains(" [DIR]") || usage.contains(" <");
            let mut run = args.clone();
            run.push("--json");
            if takes_path {
                run.push("does-not-exist");
            }
            let (code, doc) = run_json(empty.path(), &run);
            assert_eq!(code, Some(1), "{run:?}: {doc}");
            checked.push(path.join(" "));
            if path == ["hash"] {
                // hash reports each path it was given, the failed ones with their error.
                assert_eq!(doc[0]["hash"], Value::Null, "{doc}");
                assert!(doc[0]["error"].as_str().unwrap().contains("does-not-exist"), "{doc}");
                continue;
            }
            assert_eq!(doc["ok"], false, "{run:?}");
            assert_eq!(doc["command"], path.join(" "), "{run:?}");
            assert!(doc["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{run:?}: {doc}");
        }
    }
    // The walk found them: a command that gains --json joins this list.
    assert_eq!(
        checked,
        [
            "check-config",
            "list-variants",
            "build-and-copy",
            "hash",
            "verify",
            "check-abi",
            "upload",
            "build-and-upload",
            "matrix check-wheel",
            "check-builds"
        ]
    );
}

/// Found by a fresh user: a command line clap refuses (exit 2) printed no document with
/// `--json`, while the same mistake caught later did. Both print one now.
#[test]
fn a_refused_command_line_with_json_prints_the_failure_document() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, doc) = run_json(tmp.path(), &["list-variants", "--json", ".", "--system", "bogus"]);
    assert_eq!(code, Some(2));
    assert_eq!(doc["ok"], false);
    assert_eq!(doc["command"], "list-variants");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid value 'bogus' for '--system <SYSTEM>'"),
        "{doc}"
    );
    let (code, doc) = run_json(tmp.path(), &["matrix", "check-wheel", "--json"]);
    assert_eq!(code, Some(2));
    assert_eq!(doc["command"], "matrix check-wheel");
    // Without --json, clap's own message only.
    let out =
        kb().args(["list-variants", ".", "--system", "bogus"]).current_dir(tmp.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
}

/// A value clap reads from an environment variable (`env =`: KERNEL_BUILDER_CUDA_CAPABILITIES,
/// KERNEL_BUILDER_PYTHON, KERNEL_BUILDER_FLAKE_REF) is refused as the variable's, not as the
/// flag clap names: a user's trial was told `--cuda-capabilities`, which they had not given, and
/// of a value that is not UTF-8 "invalid UTF-8 in arguments". A flag given names the flag.
#[test]
fn a_value_refused_from_the_environment_names_the_variable() {
    use std::os::unix::ffi::OsStrExt;
    let tmp = tempfile::tempdir().unwrap();
    let run = |value: &std::ffi::OsStr, args: &[&str]| {
        let out = kb()
            .args(args)
            .current_dir(tmp.path())
            .env("KERNEL_BUILDER_CUDA_CAPABILITIES", value)
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8(out.stderr).unwrap(), String::from_utf8(out.stdout).unwrap())
    };
    let (code, stderr, stdout) = run("9.0,abc".as_ref(), &["build-and-copy"]);
    assert_eq!(code, Some(2));
    assert_eq!(
        stderr,
        "error: invalid `KERNEL_BUILDER_CUDA_CAPABILITIES` (the environment's --cuda-capabilities, `9.0,abc`): `abc` is not a CUDA capability; write `X.Y`, `X.Ya`, `X.Yf` or `X.Y+PTX`, e.g. \"9.0a\"; fix it, unset it, or pass --cuda-capabilities\n"
    );
    assert_eq!(stdout, "");
    let (code, _, stdout) = run(std::ffi::OsStr::from_bytes(b"9.0\xff"), &["build-and-upload", "--json"]);
    assert_eq!(code, Some(2));
    let doc: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        doc,
        json!({"ok": false, "command": "build-and-upload", "error": {"message": "`KERNEL_BUILDER_CUDA_CAPABILITIES` is not UTF-8; set it to a UTF-8 value, unset it, or pass --cuda-capabilities", "causes": [], "hints": []}})
    );
    // The flag given: clap's own message, naming the flag.
    let (code, stderr, _) = run("abc".as_ref(), &["build-and-copy", "--cuda-capabilities", "xyz"]);
    assert_eq!(code, Some(2));
    assert!(stderr.starts_with("error: invalid value 'xyz' for '--cuda-capabilities <CAPS>'"), "{stderr}");
    // What follows `--` is the user's command's: neither its `--python` nor its `--json` is ours.
    let out = kb()
        .args(["tune", "k", "--", "--python", "--json"])
        .current_dir(tmp.path())
        .env("KERNEL_BUILDER_PYTHON", std::ffi::OsStr::from_bytes(b"py\xff"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "error: `KERNEL_BUILDER_PYTHON` is not UTF-8; set it to a UTF-8 value, unset it, or pass --python\n"
    );
    // An argument that is not UTF-8 as well: clap's message, about the arguments.
    let out = kb()
        .arg("build-and-copy")
        .arg(std::ffi::OsStr::from_bytes(b"k\xff"))
        .current_dir(tmp.path())
        .env("KERNEL_BUILDER_CUDA_CAPABILITIES", std::ffi::OsStr::from_bytes(b"\xff"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8(out.stderr).unwrap().starts_with("error: invalid UTF-8 was detected"));
}

/// A command line that clap refuses is reported, never a panic, whatever bytes it holds: the
/// case from a user's trial was `--variant $'torch215\xff'` (exit 101, a backtrace), reached by
/// any refused command line with an argument that is not UTF-8. Every subcommand, with and
/// without `--json`.
#[test]
fn a_refused_command_line_with_bytes_that_are_not_utf8_is_an_error_not_a_panic() {
    use std::os::unix::ffi::OsStrExt;
    let tmp = tempfile::tempdir().unwrap();
    let help = kb().arg("--help").output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    let commands: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.len() > 20 && commands.contains(&"build-and-copy"), "{commands:?}");
    let bad = std::ffi::OsStr::from_bytes(b"torch215\xff");
    for command in commands {
        for json in [false, true] {
            let mut c = kb();
            c.current_dir(tmp.path())
                .arg(command)
                .args(json.then_some("--json"))
                .arg("--no-such-option")
                .arg(bad);
            let out = c.output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{command} (json: {json}): {stderr}");
            assert!(stderr.starts_with("error: "), "{command} (json: {json}): {stderr}");
            if json && !out.stdout.is_empty() {
                let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
                assert_eq!(doc["ok"], json!(false), "{command}");
            }
        }
    }
}
