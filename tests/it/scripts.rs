//! The repository's scripts that change the machine: `scripts/nix-conf.sh`, which
//! `scripts/setup-nix.sh` (and so `scripts/test.sh`) runs on `/etc/nix/nix.conf`.

use std::fs;
use std::path::Path;

fn nix_conf(conf: &Path) -> (bool, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/nix-conf.sh");
    let out = std::process::Command::new("bash").arg(script).arg(conf).output().unwrap();
    (out.status.success(), String::from_utf8(out.stderr).unwrap())
}

/// A user's nix.conf keeps its other settings and features; only the tests' settings change,
/// each named on stderr, with the original kept beside it (once: a second run changes and
/// says nothing, and never overwrites the backup).
#[test]
fn nix_conf_changes_only_what_the_tests_need_and_keeps_a_backup() {
    let t = tempfile::tempdir().unwrap();
    let conf = t.path().join("nix.conf");
    let original =
        "max-jobs = 4\nexperimental-features = ca-derivations\nsandbox = false\ntrusted-users = root alice\n";
    fs::write(&conf, original).unwrap();
    let (ok, stderr) = nix_conf(&conf);
    assert!(ok, "{stderr}");
    assert_eq!(
        fs::read_to_string(&conf).unwrap(),
        "max-jobs = 4\ntrusted-users = root alice\nexperimental-features = ca-derivations nix-command flakes\n\
         sandbox = true\nsandbox-fallback = false\nsubstituters =\nbuild-users-group = nixbld\n"
    );
    let backup = t.path().join("nix.conf.before-kernel-builder");
    assert_eq!(fs::read_to_string(&backup).unwrap(), original);
    assert!(stderr.contains(&format!("set in {} (other settings unchanged):", conf.display())), "{stderr}");
    assert!(
        stderr.contains("  sandbox = true\n") && stderr.contains(&backup.display().to_string()),
        "{stderr}"
    );

    let after = fs::read_to_string(&conf).unwrap();
    let (ok, stderr) = nix_conf(&conf);
    assert!(ok && stderr.is_empty(), "a second run is silent: {stderr}");
    assert_eq!(fs::read_to_string(&conf).unwrap(), after);
    assert_eq!(fs::read_to_string(&backup).unwrap(), original);
}

/// No nix.conf at all: one is written, and no backup of nothing is made.
#[test]
fn nix_conf_is_created_when_missing_without_a_backup() {
    let t = tempfile::tempdir().unwrap();
    let conf = t.path().join("etc-nix/nix.conf");
    let (ok, stderr) = nix_conf(&conf);
    assert!(ok, "{stderr}");
    assert!(stderr.contains("there was no"), "{stderr}");
    assert!(fs::read_to_string(&conf).unwrap().starts_with("experimental-features = nix-command flakes\n"));
    assert!(!t.path().join("etc-nix/nix.conf.before-kernel-builder").exists());
}
