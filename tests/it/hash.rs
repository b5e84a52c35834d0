//! NAR hashes, the per-file digest, the hash manifest and `kernel-builder hash`.
//!
//! The expected SRI values below were printed by `nix hash path` (Nix 2.8.0) for the same
//! trees; the `nix_tests` module (feature `nix-tests`) re-derives them from Nix and also
//! compares random trees.

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

use kernel_builder::hash::nar::{dump_to, nar_hash, nar_hash_sri, sri};
use sha2::{Digest as _, Sha256};

fn write(path: &Path, bytes: &[u8], mode: u32) {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).unwrap();
    }
    fs::write(path, bytes).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// Deterministic pseudo-random bytes (xorshift), so big fixtures need no stored data.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// One named fixture: a function that builds it under a fresh directory and returns the path
/// to hash, and the hash Nix printed for it.
struct Fixture {
    name: &'static str,
    build: fn(&Path) -> PathBuf,
    nix_sri: &'static str,
}

const FIXTURES: &[Fixture] = &[
    Fixture {
        name: "regular file, 5 bytes (padded)",
        build: |d| {
            write(&d.join("f"), b"hello", 0o644);
            d.join("f")
        },
        nix_sri: "sha256-CkMIecJm+LV/QJKg+TXPP6zUi7zN5XYNR0jKQFFx6Wk=",
    },
    Fixture {
        name: "regular file, 16 bytes (multiple of 8, no padding)",
        build: |d| {
            write(&d.join("f"), b"0123456789abcdef", 0o644);
            d.join("f")
        },
        nix_sri: "sha256-rRhtgIbf1FoZp2U7u/g027xbNCzoqSFymxTrCg0uihQ=",
    },
    Fixture {
        name: "empty file",
        build: |d| {
            write(&d.join("f"), b"", 0o644);
            d.join("f")
        },
        nix_sri: "sha256-d6xi4mKdjkX2JFicDIv5niSzpyI0m/Hnm8GGAIU04kY=",
    },
    Fixture {
        name: "executable file",
        build: |d| {
            write(&d.join("f"), b"#!/bin/sh\necho hi\n", 0o755);
            d.join("f")
        },
        nix_sri: "sha256-XgrM8Czt7eXkEZ/6FeeeeaX7H7m8Q8PUNPMyJ6FEd6A=",
    },
    Fixture {
        name: "only group/other execute bits: not executable",
        build: |d| {
            write(&d.join("f"), b"#!/bin/sh\necho hi\n", 0o611);
            d.join("f")
        },
        nix_sri: "sha256-5RlQXtufd/fwLv79PJspdm/dD0Sem/kyMT05ziSZguk=",
    },
    Fixture {
        name: "dangling symlink at the top, not followed",
        build: |d| {
            symlink("../does/not/exist", d.join("l")).unwrap();
            d.join("l")
        },
        nix_sri: "sha256-q2qvVl9C/yIqApNhQ5u8T90bV82ay0tYsiQAADePbEw=",
    },
    Fixture {
        name: "empty directory",
        build: |d| {
            fs::create_dir(d.join("e")).unwrap();
            d.join("e")
        },
        nix_sri: "sha256-pQpattmS9VmO3ZIQUFn66az8GSmB4IvYhTTCFn6SUmo=",
    },
    Fixture {
        name: "nested directories with every entry kind",
        build: |d| {
            let t = d.join("t");
            write(&t.join("lib/_ops.py"), b"ops = 1\n", 0o644);
            write(&t.join("lib/sub/deep/x.so"), &pattern(1000, 7), 0o755);
            write(&t.join("README"), b"", 0o444);
            fs::create_dir_all(t.join("empty/inner")).unwrap();
            symlink("lib/_ops.py", t.join("link")).unwrap();
            symlink("/nonexistent/abs", t.join("lib/dangling")).unwrap();
            symlink("sub", t.join("lib/dirlink")).unwrap();
            t
        },
        nix_sri: "sha256-vE/Oy22GpIbyds9MUZjedwI00pKUPRXIzrACFLe/uQs=",
    },
    Fixture {
        name: "names sorted by raw bytes",
        build: |d| {
            let t = d.join("t");
            for name in ["b", "B", "a", "a.b", "a-b", "a0", "_", "ä", "Z", "aa"] {
                write(&t.join(name), name.as_bytes(), 0o644);
            }
            t
        },
        nix_sri: "sha256-ExpER7CEZCdSfO3ZRs/YmfAMFne4IHZGhIMFhtAeu08=",
    },
    Fixture {
        name: "non-ASCII names",
        build: |d| {
            let t = d.join("t");
            write(&t.join("kernel_ü.py"), b"x", 0o644);
            write(&t.join("日本/語"), b"y", 0o644);
            symlink("日本", t.join("→")).unwrap();
            t
        },
        nix_sri: "sha256-p9N2xYzLKq4JxlsYseox86npAuEG1+ldKUDTxCoE6fo=",
    },
    Fixture {
        name: "non-UTF-8 names",
        build: |d| {
            let t = d.join("t");
            let bad = std::ffi::OsStr::from_bytes(b"caf\xe9");
            write(&t.join(bad), b"latin-1 name", 0o644);
            write(&t.join(std::ffi::OsStr::from_bytes(b"\xff\xfe")).join("inner"), b"", 0o755);
            symlink(std::ffi::OsStr::from_bytes(b"caf\xe9"), t.join("to-bad")).unwrap();
            t
        },
        nix_sri: "sha256-sdBrDgStVC/f23C/pPLl2R+/iVlPWxBjhQviyD2Slo8=",
    },
    Fixture {
        name: "deep tree (300 levels)",
        build: |d| {
            let mut p = d.join("t");
            for i in 0..300 {
                p.push(if i % 2 == 0 { "d" } else { "dd" });
            }
            write(&p.join("leaf"), b"bottom", 0o644);
            symlink("../../..", p.join("up")).unwrap();
            d.join("t")
        },
        nix_sri: "sha256-AAdeB0XO52Nd31hqHce7VfjcONqxeTFeZk/F0rrCSoQ=",
    },
    Fixture {
        name: "large file read on the pipelined path (9 MiB + 3 bytes)",
        build: |d| {
            let t = d.join("t");
            write(&t.join("big.so"), &pattern((9 << 20) + 3, 42), 0o755);
            write(&t.join("small"), b"s", 0o644);
            t
        },
        nix_sri: "sha256-bJtVy3mmLgPgJqJtaPjveFo0xWdFnFuHhKX2OyrEdZs=",
    },
    Fixture {
        name: "archive framing and contents across the 1 MiB buffers of the hashing thread",
        build: |d| {
            // 1,500 entries with long names (about 1.4 MB of archive), so buffer boundaries
            // fall inside length prefixes, names, padding and contents; then a file 4 bytes
            // short of a whole buffer and one of exactly 2 MiB.
            let t = d.join("t");
            for i in 0..1500u64 {
                let name = format!("{i:04}-{}", "n".repeat((i % 97) as usize));
                write(&t.join("many").join(name), &pattern((i as usize * 37) % 1500, i), 0o644);
            }
            write(&t.join("near"), &pattern((1 << 20) - 4, 5), 0o644);
            write(&t.join("whole"), &pattern(2 << 20, 6), 0o755);
            t
        },
        nix_sri: "sha256-MXK1xdc4/FcuEU6OXi2P4RMpvKClNAlxLc/G8fc0MMU=",
    },
];

#[test]
fn fixtures_match_nix() {
    let mut failures = Vec::new();
    for fx in FIXTURES {
        let dir = tempfile::tempdir().unwrap();
        let path = (fx.build)(dir.path());
        let got = nar_hash_sri(&path).unwrap();
        if got != fx.nix_sri {
            failures.push(format!("{}: expected {}, got {got}", fx.name, fx.nix_sri));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn hash_equals_sha256_of_dumped_archive() {
    for fx in FIXTURES {
        let dir = tempfile::tempdir().unwrap();
        let path = (fx.build)(dir.path());
        let mut archive = Vec::new();
        dump_to(&path, &mut archive).unwrap();
        let of_dump: [u8; 32] = Sha256::digest(&archive).into();
        assert_eq!(nar_hash(&path).unwrap(), of_dump, "{}", fx.name);
    }
}

/// What NAR ignores: group/other permission bits (so the umask), the owner's read/write bits,
/// and timestamps. Only the owner-execute bit of regular files counts.
#[test]
fn hash_ignores_umask_bits_and_times() {
    let fx = FIXTURES.iter().find(|f| f.name.starts_with("nested")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = (fx.build)(dir.path());
    let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
    for entry in walkdir::WalkDir::new(&root) {
        let entry = entry.unwrap();
        if !entry.file_type().is_file() {
            continue;
        }
        let mode = entry.metadata().unwrap().permissions().mode();
        // Keep the owner-execute bit; flip group/other bits and clear owner write (a umask
        // change).
        let new_mode = (mode & 0o100) | 0o400 | (!mode & 0o077);
        fs::set_permissions(entry.path(), fs::Permissions::from_mode(new_mode)).unwrap();
        let f = fs::File::open(entry.path()).unwrap();
        f.set_modified(old).unwrap();
        assert_eq!(entry.path().metadata().unwrap().modified().unwrap(), old);
    }
    fs::set_permissions(&root, fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(nar_hash_sri(&root).unwrap(), fx.nix_sri);
}

/// The archive of one small file, spelled out byte by byte.
#[test]
fn archive_bytes_of_a_small_file() {
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("f"), b"hello", 0o755);
    let mut archive = Vec::new();
    dump_to(&dir.path().join("f"), &mut archive).unwrap();
    let mut expected = Vec::new();
    for (len, text) in [
        (13u8, &b"nix-archive-1\0\0\0"[..]),
        (1, b"(\0\0\0\0\0\0\0"),
        (4, b"type\0\0\0\0"),
        (7, b"regular\0"),
        (10, b"executable\0\0\0\0\0\0"),
        (0, b""),
        (8, b"contents"),
        (5, b"hello\0\0\0"),
        (1, b")\0\0\0\0\0\0\0"),
    ] {
        expected.extend_from_slice(&[len, 0, 0, 0, 0, 0, 0, 0]);
        expected.extend_from_slice(text);
    }
    assert_eq!(archive, expected);
}

#[test]
fn sri_encoding() {
    assert_eq!(sri(&[0; 32]), "sha256-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=");
}

#[test]
fn fifo_is_rejected_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("t/pipe");
    fs::create_dir(dir.path().join("t")).unwrap();
    duct::cmd!("mkfifo", &fifo).run().unwrap();
    let err = nar_hash(&dir.path().join("t")).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "`{}` is not a regular file, directory or symlink (NAR cannot hold sockets, FIFOs \
             or device nodes)",
            fifo.display()
        )
    );
}

/// A file whose size changes while it is read is an error, not a wrong hash. Files in /proc
/// report size 0 and then yield bytes, which makes the case deterministic.
#[test]
fn file_changing_size_is_an_error() {
    let err = nar_hash(Path::new("/proc/self/status")).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with("`/proc/self/status` changed size while it was being hashed (0 bytes expected, ")
            && msg.ends_with(" read)"),
        "{msg}"
    );
}

#[test]
fn cli_accepts_non_utf8_paths() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join(std::ffi::OsStr::from_bytes(b"caf\xe9"));
    fs::create_dir(&bad).unwrap();
    crate::util::kb()
        .arg("hash")
        .arg(&bad)
        .assert()
        .success()
        // The empty-directory fixture's value.
        .stdout("sha256-pQpattmS9VmO3ZIQUFn66az8GSmB4IvYhTTCFn6SUmo=\n");
}

#[test]
fn missing_path_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let err = nar_hash(&missing).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    assert!(
        err.to_string().starts_with(&format!("cannot read metadata of `{}`: ", missing.display())),
        "{err}"
    );
}

#[test]
fn cli_prints_one_line_per_path_in_order() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("a")).unwrap();
    fs::create_dir(dir.path().join("b")).unwrap();
    let a = (FIXTURES[0].build)(&dir.path().join("a"));
    let b = (FIXTURES[6].build)(&dir.path().join("b"));
    crate::util::kb()
        .args(["hash"])
        .arg(&b)
        .arg(&a)
        .assert()
        .success()
        .stdout(format!("{}\n{}\n", FIXTURES[6].nix_sri, FIXTURES[0].nix_sri))
        .stderr("");
}

#[test]
fn cli_error_names_the_path_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    crate::util::kb().arg("hash").arg(&missing).assert().code(1).stdout("").stderr(
        format!(
            "error: cannot hash `{0}`\n  caused by: cannot read metadata of `{0}`: No such file \
             or directory (os error 2)\n",
            missing.display()
        ) + "error: 1 of 1 paths could not be hashed\n",
    );
}

/// `hash a b c` with `a` and `c` missing: `b` is still hashed and printed, both failures are
/// reported, and the exit status is 1 at the end.
#[test]
fn cli_hashes_every_path_and_exits_1_at_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let (a, c) = (dir.path().join("a"), dir.path().join("c"));
    let b = dir.path().join("b");
    std::fs::write(&b, "").unwrap();
    let out = crate::util::kb().arg("hash").arg(&a).arg(&b).arg(&c).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!("{}\n", kernel_builder::hash::nar_hash_sri(&b).unwrap())
    );
    let stderr = String::from_utf8(out.stderr).unwrap();
    for p in [&a, &c] {
        assert!(stderr.contains(&format!("error: cannot hash `{}`\n", p.display())), "{stderr}");
    }
    assert!(stderr.ends_with("error: 2 of 3 paths could not be hashed\n"), "{stderr}");
}

mod digest {
    use super::write;
    use camino::{Utf8Path, Utf8PathBuf};
    use kernel_builder::hash::digest::{
        check, mismatch_message, variant_digest, variant_digest_with, Algorithm, Digest,
    };
    use std::collections::BTreeMap;
    use std::os::unix::fs::symlink;

    const HELLO: &str = "uU0nuZNNPgilLlLX2n2r+sSE7+N6U4DukIj3rOLvzek=";

    fn utf8(dir: &tempfile::TempDir) -> Utf8PathBuf {
        Utf8Path::from_path(dir.path()).unwrap().to_owned()
    }

    fn digest(files: &[(&str, &str)]) -> Digest {
        Digest {
            algorithm: Algorithm::Sha256,
            files: files.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        }
    }

    #[test]
    fn hello_world_known_value_and_json_form() {
        let dir = tempfile::tempdir().unwrap();
        write(&dir.path().join("hello.txt"), b"hello world", 0o644);
        let d = variant_digest(&utf8(&dir)).unwrap();
        assert_eq!(d, digest(&[("hello.txt", HELLO)]));
        assert_eq!(
            serde_json::to_string(&d).unwrap(),
            format!(r#"{{"algorithm":"sha256","files":{{"hello.txt":"{HELLO}"}}}}"#)
        );
        let back: Digest = serde_json::from_str(&serde_json::to_string(&d).unwrap()).unwrap();
        assert_eq!(back, d);
    }

    #[test]
    fn sha512_value() {
        let dir = tempfile::tempdir().unwrap();
        write(&dir.path().join("hello.txt"), b"hello world", 0o644);
        let d = variant_digest_with(Algorithm::Sha512, &utf8(&dir)).unwrap();
        // `printf 'hello world' | openssl dgst -sha512 -binary | base64 -w0`
        assert_eq!(
            d.files["hello.txt"],
            "MJ7MSJwS1utMxA9QyQLytNDtd+5RGnx6m808qG1M2G+YndNbxf9JlnDaNCVbRbDP2DDoH2Bdz33FVC6TrpzXbw=="
        );
        assert_eq!(serde_json::to_value(&d).unwrap()["algorithm"], "sha512");
    }

    #[test]
    fn empty_directory_gives_empty_map() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("empty")).unwrap();
        assert_eq!(variant_digest(&utf8(&dir)).unwrap(), digest(&[]));
    }

    #[test]
    fn skip_rules_and_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for path in [
            "metadata.json",
            "metadata.json.sigstore",
            "pkg/metadata.json",
            "pkg/metadata.json.sigstore",
            "pkg/__init__.py",
            "pkg/__pycache__/__init__.cpython-312.pyc",
            "pkg/__pycache__/notes.txt",
            "__pycache__/top.txt",
            "pkg/stale.pyc",
            "top.pyc",
            "pkg/sub/_ops.py",
            "pkg/sub/data.pyc.txt",
            "weird name ü.txt",
        ] {
            write(&d.join(path), b"hello world", 0o644);
        }
        std::fs::create_dir_all(d.join("pkg/empty")).unwrap();
        symlink("pkg/__init__.py", d.join("link.py")).unwrap();
        symlink("pkg/sub", d.join("linked-dir")).unwrap();
        let got = variant_digest(&utf8(&dir)).unwrap();
        let keys: Vec<&str> = got.files.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "link.py",
                "linked-dir/_ops.py",
                "linked-dir/data.pyc.txt",
                "pkg/__init__.py",
                "pkg/metadata.json",
                "pkg/metadata.json.sigstore",
                "pkg/sub/_ops.py",
                "pkg/sub/data.pyc.txt",
                "weird name ü.txt",
            ]
        );
        assert!(got.files.values().all(|v| v == HELLO));
    }

    #[test]
    fn dangling_symlink_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        symlink("nowhere", dir.path().join("broken")).unwrap();
        let err = variant_digest(&utf8(&dir)).unwrap_err();
        let chain = format!("{err:#}");
        assert!(chain.contains("broken"), "{chain}");
    }

    #[test]
    fn non_utf8_name_is_an_error_naming_it() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        write(&dir.path().join(std::ffi::OsStr::from_bytes(b"caf\xe9.py")), b"", 0o644);
        let err = variant_digest(&utf8(&dir)).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "`{}/caf\u{fffd}.py` is not a valid UTF-8 path; rename it (metadata.json digests \
                 key files by UTF-8 names)",
                dir.path().display()
            )
        );
    }

    #[test]
    fn not_a_directory_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        write(&dir.path().join("f"), b"x", 0o644);
        let f = utf8(&dir).join("f");
        assert_eq!(variant_digest(&f).unwrap_err().to_string(), format!("`{f}` is not a directory"));
    }

    #[test]
    fn check_reports_every_problem_in_order() {
        let reference = digest(&[("a.py", "AAA="), ("b.so", "BBB="), ("c.py", "CCC="), ("d.py", "DDD=")]);
        let actual = digest(&[
            ("a.py", "AAA="),
            ("b.so", "XXX="),
            ("d.py", "DDD="),
            ("e.py", "EEE="),
            ("0.py", "000="),
        ]);
        let problems = check(&reference, &actual).unwrap_err();
        assert_eq!(
            problems,
            [
                "File hash mismatch for b.so: expected: BBB=, got: XXX=",
                "Missing file: c.py",
                "Unknown file: 0.py",
                "Unknown file: e.py",
            ]
        );
        assert_eq!(
            mismatch_message(&problems),
            "kernel does not match the expected digest:\n\
             File hash mismatch for b.so: expected: BBB=, got: XXX=\n\
             Missing file: c.py\n\
             Unknown file: 0.py\n\
             Unknown file: e.py"
        );
        assert_eq!(check(&reference, &reference.clone()), Ok(()));
    }

    #[test]
    fn check_algorithm_first() {
        let reference = digest(&[("a.py", "AAA=")]);
        let actual = Digest { algorithm: Algorithm::Sha512, files: BTreeMap::new() };
        assert_eq!(
            check(&reference, &actual).unwrap_err(),
            ["Algorithm mismatch: expected: SHA256, got: SHA512"]
        );
    }

    #[test]
    fn flipped_byte_is_named() {
        let dir = tempfile::tempdir().unwrap();
        write(&dir.path().join("lib/k.so"), b"hello world", 0o755);
        let before = variant_digest(&utf8(&dir)).unwrap();
        write(&dir.path().join("lib/k.so"), b"hello worle", 0o755);
        let after = variant_digest(&utf8(&dir)).unwrap();
        assert_eq!(
            check(&before, &after).unwrap_err(),
            [format!("File hash mismatch for lib/k.so: expected: {HELLO}, got: {}", after.files["lib/k.so"])]
        );
    }
}

mod manifest {
    use super::FIXTURES;
    use camino::{Utf8Path, Utf8PathBuf};
    use kernel_builder::hash::manifest::{compare, Difference, Manifest, FORMAT};
    use std::fs;

    const EMPTY_DIR: &str = "sha256-pQpattmS9VmO3ZIQUFn66az8GSmB4IvYhTTCFn6SUmo=";
    const NESTED: &str = "sha256-vE/Oy22GpIbyds9MUZjedwI00pKUPRXIzrACFLe/uQs=";

    /// A bundle with `torch-cuda` (the nested fixture) and `torch-cpu` (an empty directory).
    fn bundle() -> (tempfile::TempDir, Utf8PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = Utf8Path::from_path(dir.path()).unwrap().join("build");
        fs::create_dir(&root).unwrap();
        let scratch = dir.path().join("scratch");
        fs::create_dir(&scratch).unwrap();
        let nested = FIXTURES.iter().find(|f| f.nix_sri == NESTED).unwrap();
        fs::rename((nested.build)(&scratch), root.join("torch-cuda")).unwrap();
        fs::create_dir(root.join("torch-cpu")).unwrap();
        (dir, root)
    }

    fn manifest(source: &str, variants: &[(&str, &str)]) -> Manifest {
        Manifest {
            format: FORMAT.to_owned(),
            kernel_builder: "0.1.0".to_owned(),
            source: source.to_owned(),
            variants: variants.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        }
    }

    #[test]
    fn for_bundle_hashes_each_variant_sorted() {
        let (_dir, root) = bundle();
        let names = ["torch-cuda", "torch-cpu", "torch-cuda"].map(String::from);
        let m = Manifest::for_bundle(&root, &names, "tree:abc123").unwrap();
        assert_eq!(
            m,
            Manifest {
                kernel_builder: env!("CARGO_PKG_VERSION").to_owned(),
                ..manifest("tree:abc123", &[("torch-cpu", EMPTY_DIR), ("torch-cuda", NESTED)])
            }
        );
    }

    #[test]
    fn write_then_read_exact_text() {
        let (_dir, root) = bundle();
        let m = manifest("tree:abc123", &[("torch-cuda", NESTED), ("torch-cpu", EMPTY_DIR)]);
        let path = Manifest::path_in(&root);
        assert_eq!(path, root.join("hashes.json"));
        m.write(&path).unwrap();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            format!(
                "{{\n  \"format\": \"kernel-builder-hashes-v1\",\n  \"kernel_builder\": \"0.1.0\",\n  \
                 \"source\": \"tree:abc123\",\n  \"variants\": {{\n    \"torch-cpu\": \"{EMPTY_DIR}\",\n    \
                 \"torch-cuda\": \"{NESTED}\"\n  }}\n}}\n"
            )
        );
        assert_eq!(Manifest::read(&path).unwrap(), m);
        // Written beside the variants, it changes none of their hashes; no temp files remain.
        let again =
            Manifest::for_bundle(&root, &["torch-cpu".into(), "torch-cuda".into()], "tree:abc123").unwrap();
        assert_eq!(again.variants, m.variants);
        let mut entries: Vec<String> =
            fs::read_dir(&root).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        entries.sort();
        assert_eq!(entries, ["hashes.json", "torch-cpu", "torch-cuda"]);
    }

    #[test]
    fn bad_variants_are_named() {
        let (_dir, root) = bundle();
        fs::write(root.join("file"), b"x").unwrap();
        let err = |v: &str| format!("{:#}", Manifest::for_bundle(&root, &[v.to_owned()], "s").unwrap_err());
        assert_eq!(err("../x"), "`../x` is not a variant directory name");
        assert_eq!(err(""), "`` is not a variant directory name");
        assert_eq!(err("file"), format!("variant `file` at `{root}/file` is not a directory"));
        assert!(
            err("torch-rocm")
                .starts_with(&format!("cannot read variant `torch-rocm` at `{root}/torch-rocm`: ")),
            "{}",
            err("torch-rocm")
        );
    }

    #[test]
    fn read_rejects_other_formats_and_fields() {
        let dir = tempfile::tempdir().unwrap();
        let path = Utf8Path::from_path(dir.path()).unwrap().join("hashes.json");
        let read = |text: &str| {
            fs::write(&path, text).unwrap();
            format!("{:#}", Manifest::read(&path).unwrap_err())
        };
        assert_eq!(
            read(r#"{"format": "kernel-builder-hashes-v2", "variants": {}}"#),
            format!(
                "`{path}` has hash manifest format \"kernel-builder-hashes-v2\", but this \
                 kernel-builder reads only \"kernel-builder-hashes-v1\"; use the kernel-builder \
                 version that wrote it"
            )
        );
        assert_eq!(
            read(r#"{"variants": {}}"#),
            format!("`{path}` is not a kernel-builder hash manifest: it has no \"format\" field")
        );
        assert_eq!(
            read(
                r#"{"format": "kernel-builder-hashes-v1", "kernel_builder": "0.1.0", "source": "s",
"variants": {}, "extra": 1}"#
            ),
            format!(
                "`{path}` is not a valid \"kernel-builder-hashes-v1\" hash manifest: unknown field \
                 `extra`, expected one of `format`, `kernel_builder`, `source`, `variants` at line 2 \
                 column 23"
            )
        );
        assert_eq!(
            read("not json"),
            format!("`{path}` is not a kernel-builder hash manifest: expected ident at line 1 column 2")
        );
    }

    #[test]
    fn compare_lists_every_difference() {
        let expected = manifest("tree:1", &[("a", "sha256-A"), ("b", "sha256-B"), ("c", "sha256-C")]);
        let mut actual = manifest("tree:2", &[("b", "sha256-X"), ("c", "sha256-C"), ("d", "sha256-D")]);
        actual.kernel_builder = "9.9.9".to_owned();
        let diffs = compare(&expected, &actual);
        assert_eq!(
            diffs,
            [
                Difference::Source { expected: "tree:1".into(), actual: "tree:2".into() },
                Difference::MissingVariant { variant: "a".into(), expected: "sha256-A".into() },
                Difference::Hash {
                    variant: "b".into(),
                    expected: "sha256-B".into(),
                    actual: "sha256-X".into()
                },
                Difference::ExtraVariant { variant: "d".into(), actual: "sha256-D".into() },
            ]
        );
        let lines: Vec<String> = diffs.iter().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            [
                "source differs: expected `tree:1`, got `tree:2`",
                "variant `a` is missing (expected sha256-A)",
                "variant `b` differs: expected sha256-B, got sha256-X",
                "variant `d` is not in the expected manifest (got sha256-D)",
            ]
        );
        assert_eq!(
            diffs.iter().map(|d| d.variant()).collect::<Vec<_>>(),
            [None, Some("a"), Some("b"), Some("d")]
        );
        // Only the orchestrator version differs: the same.
        let mut newer = expected.clone();
        newer.kernel_builder = "9.9.9".to_owned();
        assert_eq!(compare(&expected, &newer), []);
        let mut other_format = expected.clone();
        other_format.format = "x".to_owned();
        assert_eq!(
            compare(&expected, &other_format),
            [Difference::Format { expected: FORMAT.into(), actual: "x".into() }]
        );
    }

    #[test]
    fn flipped_byte_changes_only_that_variant() {
        let (_dir, root) = bundle();
        let names = ["torch-cpu".to_owned(), "torch-cuda".to_owned()];
        let before = Manifest::for_bundle(&root, &names, "s").unwrap();
        let so = root.join("torch-cuda/lib/sub/deep/x.so");
        let mut bytes = fs::read(&so).unwrap();
        bytes[500] ^= 1;
        fs::write(&so, bytes).unwrap();
        let after = Manifest::for_bundle(&root, &names, "s").unwrap();
        let diffs = compare(&before, &after);
        assert_eq!(diffs.len(), 1, "{diffs:?}");
        assert_eq!(diffs[0].variant(), Some("torch-cuda"));
    }
}

/// Random trees for property tests: every entry kind, random modes, Unicode and non-UTF-8
/// names, lengths on and off multiples of 8.
mod gen {
    use super::{pattern, write};
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use std::fs;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::symlink;
    use std::path::Path;

    /// A generated tree entry.
    #[derive(Debug, Clone)]
    pub enum Node {
        File { bytes: Vec<u8>, mode: u32 },
        Symlink { target: Vec<u8> },
        Dir(BTreeMap<Vec<u8>, Node>),
    }

    /// Entry names: mostly printable ASCII and Unicode, some arbitrary non-UTF-8 bytes.
    pub fn name() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            4 => "[a-zA-Z0-9_.+-]{1,10}".prop_map(String::into_bytes),
            2 => "[a-zäöüßé日本語→ ._-]{1,8}".prop_map(String::into_bytes),
            1 => proptest::collection::vec(1u8..=255, 1..8),
        ]
        .prop_filter("not a valid entry name", |n| {
            n != b"." && n != b".." && !n.contains(&b'/') && !n.contains(&0)
        })
    }

    pub fn leaf() -> impl Strategy<Value = Node> {
        prop_oneof![
            4 => (
                prop_oneof![
                    proptest::collection::vec(any::<u8>(), 0..64),
                    (0usize..5).prop_map(|k| pattern(k * 8, k as u64)),
                    (0usize..3000).prop_map(|k| pattern(k, 3)),
                ],
                prop_oneof![Just(0o644u32), Just(0o755), Just(0o600), Just(0o700), Just(0o654), Just(0o511)],
            )
                .prop_map(|(bytes, mode)| Node::File { bytes, mode }),
            1 => proptest::collection::vec(1u8..=255, 1..20).prop_map(|target| Node::Symlink { target }),
            1 => Just(Node::Dir(BTreeMap::new())),
        ]
    }

    pub fn tree() -> impl Strategy<Value = Node> {
        leaf().prop_recursive(4, 48, 6, |inner| {
            proptest::collection::btree_map(name(), inner, 0..6).prop_map(Node::Dir)
        })
    }

    pub fn materialise(path: &Path, node: &Node) {
        match node {
            Node::File { bytes, mode } => write(path, bytes, *mode),
            Node::Symlink { target } => symlink(std::ffi::OsStr::from_bytes(target), path).unwrap(),
            Node::Dir(entries) => {
                fs::create_dir(path).unwrap();
                for (name, child) in entries {
                    materialise(&path.join(std::ffi::OsStr::from_bytes(name)), child);
                }
            }
        }
    }
}

mod tree_diff {
    use super::{gen, pattern, write, FIXTURES};
    use kernel_builder::hash::nar::nar_hash;
    use kernel_builder::hash::tree_diff::{first_difference, EntryKind, TreeDifference};
    use proptest::prelude::*;
    use std::fs;
    use std::os::unix::fs::{symlink, PermissionsExt};
    use std::path::{Path, PathBuf};

    /// Build the same fixture in two places: `(tempdir, expected, actual)`.
    fn twice(build: fn(&Path) -> PathBuf) -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("e")).unwrap();
        fs::create_dir(dir.path().join("a")).unwrap();
        let e = build(&dir.path().join("e"));
        let a = build(&dir.path().join("a"));
        (dir, e, a)
    }

    fn nested() -> fn(&Path) -> PathBuf {
        FIXTURES.iter().find(|f| f.name.starts_with("nested")).unwrap().build
    }

    #[test]
    fn equal_fixtures_have_no_difference() {
        for fx in FIXTURES {
            let (_d, e, a) = twice(fx.build);
            assert_eq!(first_difference(&e, &a).unwrap(), None, "{}", fx.name);
        }
    }

    #[test]
    fn each_kind_of_difference() {
        let p = PathBuf::from;
        type Case = (&'static str, fn(&Path), TreeDifference, &'static str);
        let cases: Vec<Case> = vec![
            (
                "missing",
                |a| fs::remove_file(a.join("README")).unwrap(),
                TreeDifference::Missing { path: p("README") },
                "`README` is missing",
            ),
            (
                "extra",
                |a| write(&a.join("lib/sub/new"), b"", 0o644),
                TreeDifference::Extra { path: p("lib/sub/new") },
                "`lib/sub/new` is unexpected",
            ),
            (
                "kind",
                |a| {
                    fs::remove_file(a.join("link")).unwrap();
                    fs::create_dir(a.join("link")).unwrap();
                },
                TreeDifference::Kind {
                    path: p("link"),
                    expected: EntryKind::Symlink,
                    actual: EntryKind::Directory,
                },
                "`link` is a directory, expected a symlink",
            ),
            (
                "executable",
                |a| {
                    let f = a.join("lib/sub/deep/x.so");
                    fs::set_permissions(&f, fs::Permissions::from_mode(0o655)).unwrap();
                },
                TreeDifference::Executable { path: p("lib/sub/deep/x.so"), expected: true },
                "`lib/sub/deep/x.so` is not executable, expected executable",
            ),
            (
                "symlink target",
                |a| {
                    fs::remove_file(a.join("lib/dirlink")).unwrap();
                    symlink("sub/", a.join("lib/dirlink")).unwrap();
                },
                TreeDifference::SymlinkTarget {
                    path: p("lib/dirlink"),
                    expected: p("sub"),
                    actual: p("sub/"),
                },
                "`lib/dirlink` points to `sub/`, expected `sub`",
            ),
            (
                "flipped byte",
                |a| {
                    let f = a.join("lib/sub/deep/x.so");
                    let mut b = fs::read(&f).unwrap();
                    b[777] ^= 0x80;
                    fs::write(&f, b).unwrap();
                },
                TreeDifference::Contents {
                    path: p("lib/sub/deep/x.so"),
                    offset: 777,
                    expected_len: 1000,
                    actual_len: 1000,
                },
                "`lib/sub/deep/x.so` differs from byte 777",
            ),
            (
                "truncated",
                |a| {
                    let f = a.join("lib/_ops.py");
                    fs::write(&f, b"ops").unwrap();
                },
                TreeDifference::Contents {
                    path: p("lib/_ops.py"),
                    offset: 3,
                    expected_len: 8,
                    actual_len: 3,
                },
                "`lib/_ops.py` differs from byte 3 (3 bytes, expected 8)",
            ),
        ];
        for (name, mutate, expected, message) in cases {
            let (_d, e, a) = twice(nested());
            mutate(&a);
            let got = first_difference(&e, &a).unwrap();
            assert_eq!(got.as_ref(), Some(&expected), "{name}");
            assert_eq!(expected.to_string(), message, "{name}");
            assert_ne!(nar_hash(&e).unwrap(), nar_hash(&a).unwrap(), "{name}");
        }
    }

    #[test]
    fn first_in_nar_order() {
        let (_d, e, a) = twice(nested());
        // `README` sorts before `lib` (byte order: uppercase first); both differ.
        write(&a.join("README"), b"changed", 0o444);
        write(&a.join("lib/_ops.py"), b"changed", 0o644);
        assert_eq!(first_difference(&e, &a).unwrap().unwrap().path(), Path::new("README"));
    }

    #[test]
    fn contents_excerpt_text_binary_and_end_of_file() {
        use kernel_builder::hash::tree_diff::contents_excerpt;
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let excerpt = |e: &[u8], a: &[u8]| {
            write(&d.join("e"), e, 0o644);
            write(&d.join("a"), a, 0o644);
            let TreeDifference::Contents { offset, .. } =
                first_difference(&d.join("e"), &d.join("a")).unwrap().unwrap()
            else {
                panic!("not a contents difference")
            };
            contents_excerpt(&d.join("e"), &d.join("a"), offset).unwrap()
        };
        assert_eq!(
            excerpt(b"import torch\nops = 1\nname = \"relu\"\n", b"import torch\nops = 1\nname = \"gelu\"\n"),
            "line 3, byte 29:\n- name = \"relu\"\n+ name = \"gelu\""
        );
        assert_eq!(
            excerpt(b"a\nb\n", b"a\nb\nextra line\n"),
            "line 3, byte 4:\n- (end of file)\n+ extra line"
        );
        let mut elf = vec![0x7f, b'E', b'L', b'F', 2, 1, 1, 0];
        elf.extend(pattern(40, 9));
        let mut changed = elf.clone();
        changed[10] ^= 0xff;
        let expected_hex: Vec<String> = elf[10..26].iter().map(|b| format!("{b:02x}")).collect();
        let actual_hex: Vec<String> = changed[10..26].iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            excerpt(&elf, &changed),
            format!("byte 10:\n- {}\n+ {}", expected_hex.join(" "), actual_hex.join(" "))
        );
        assert_eq!(
            excerpt(&elf, &elf[..20]),
            format!(
                "byte 20:\n- {}\n+ (end of file)",
                elf[20..36].iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" ")
            )
        );
    }

    #[test]
    fn root_kinds() {
        let dir = tempfile::tempdir().unwrap();
        write(&dir.path().join("f"), b"x", 0o644);
        fs::create_dir(dir.path().join("d")).unwrap();
        let d = first_difference(&dir.path().join("f"), &dir.path().join("d")).unwrap().unwrap();
        assert_eq!(d.to_string(), "`.` is a directory, expected a regular file");
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// Flip one byte, toggle the execute bit or append a byte in one file of a random tree:
        /// the difference names that file; untouched, there is none; and NAR hashes agree.
        #[test]
        fn finds_the_mutated_file(root in gen::tree(), pick in any::<usize>(), how in 0u8..3, at in any::<usize>()) {
            let dir = tempfile::tempdir().unwrap();
            let (e, a) = (dir.path().join("e"), dir.path().join("a"));
            gen::materialise(&e, &root);
            gen::materialise(&a, &root);
            let files: Vec<PathBuf> = walkdir::WalkDir::new(&a)
                .follow_root_links(false)
                .into_iter()
                .map(|x| x.unwrap())
                .filter(|x| x.file_type().is_file())
                .map(|x| x.path().to_owned())
                .collect();
            prop_assert_eq!(first_difference(&e, &a).unwrap(), None);
            prop_assert_eq!(nar_hash(&e).unwrap(), nar_hash(&a).unwrap());
            if !files.is_empty() {
                let f = &files[pick % files.len()];
                let mut bytes = fs::read(f).unwrap();
                match (how, bytes.is_empty()) {
                    (0, false) => { let i = at % bytes.len(); bytes[i] ^= 1; fs::write(f, &bytes).unwrap() }
                    (1, _) => {
                        let mode = fs::metadata(f).unwrap().permissions().mode();
                        fs::set_permissions(f, fs::Permissions::from_mode(mode ^ 0o100)).unwrap();
                    }
                    _ => { bytes.push(0); fs::write(f, &bytes).unwrap() }
                }
                let d = first_difference(&e, &a).unwrap();
                prop_assert_eq!(d.as_ref().map(|d| a.join(d.path())), Some(f.clone()));
                prop_assert_ne!(nar_hash(&e).unwrap(), nar_hash(&a).unwrap());
            }
        }
    }
}

#[cfg(feature = "nix-tests")]
mod nix_tests {
    //! Compare with real Nix (`nix hash path`), which must be on PATH with the `nix-command`
    //! experimental feature enabled. Compiled in only with `--features nix-tests`.

    use super::gen::{materialise, tree};
    use super::*;
    use proptest::prelude::*;

    fn nix_hash_path(path: &Path) -> String {
        let out = duct::cmd!("nix", "--extra-experimental-features", "nix-command", "hash", "path", path)
            .stdout_capture()
            .stderr_capture()
            .unchecked()
            .run()
            .expect("cannot run `nix`; install Nix or build without --features nix-tests");
        assert!(
            out.status.success(),
            "nix hash path {} failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
            path.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim_end().to_owned()
    }

    #[test]
    fn fixtures_from_nix() {
        let mut failures = Vec::new();
        for fx in FIXTURES {
            let dir = tempfile::tempdir().unwrap();
            let path = (fx.build)(dir.path());
            let nix = nix_hash_path(&path);
            if nix != fx.nix_sri {
                failures.push(format!("{}: table says {}, nix says {nix}", fx.name, fx.nix_sri));
            }
            assert_eq!(nar_hash_sri(&path).unwrap(), nix, "{}", fx.name);
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        #[test]
        fn random_trees_match_nix(root in tree()) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("root");
            materialise(&path, &root);
            let ours = nar_hash_sri(&path).unwrap();
            prop_assert_eq!(ours, nix_hash_path(&path));
        }
    }
}

/// A tree as deep as a path allows (2,000 levels: 4,000 bytes of `d/`) is hashed on the
/// archive-writer thread without running out of stack, equal to the SHA-256 of its archive.
#[test]
fn a_tree_two_thousand_levels_deep_hashes() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = dir.path().join("t");
    for _ in 0..2000 {
        p.push("d");
    }
    fs::create_dir_all(&p).unwrap();
    write(&p.join("f"), b"bottom", 0o644);
    let root = dir.path().join("t");
    // Called from a thread with the main thread's 8 MiB of stack (test threads have 2): that is
    // what `dump_to`, and the hash with one CPU, recurse on; with more, the writer has its own.
    let (hash, archive) = std::thread::scope(|s| {
        std::thread::Builder::new()
            .stack_size(8 << 20)
            .spawn_scoped(s, || {
                let mut archive = Vec::new();
                dump_to(&root, &mut archive).unwrap();
                (nar_hash(&root).unwrap(), archive)
            })
            .unwrap()
            .join()
            .unwrap()
    });
    let of_dump: [u8; 32] = Sha256::digest(&archive).into();
    assert_eq!(hash, of_dump);
}
