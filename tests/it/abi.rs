//! The ABI check on shared objects built here by the system compilers (gcc/g++; tiny sources,
//! no torch headers), through the library API and the `check-abi` command.

use std::sync::OnceLock;

use camino::{Utf8Path, Utf8PathBuf};
use kernel_builder::abi::{check_library, check_variant, AbiPolicy, Violation};
use kernel_builder::config::Version;
use proptest::prelude::*;

/// Compile `source` (C when `lang` is "c", else C++17) into `dir/name` as a shared object.
/// Undefined symbols are allowed (as for any shared library): the fixtures reference CPython
/// and libtorch names without linking them.
fn compile(dir: &Utf8Path, name: &str, lang: &str, source: &str) -> Utf8PathBuf {
    let (compiler, ext, std) =
        if lang == "c" { ("gcc", "c", "-std=c11") } else { ("g++", "cpp", "-std=c++17") };
    let src = dir.join(format!("{name}.{ext}"));
    std::fs::write(&src, source).unwrap();
    let out = dir.join(name);
    let res = duct::cmd!(compiler, std, "-O1", "-shared", "-fPIC", "-o", &out, &src)
        .stderr_to_stdout()
        .stdout_capture()
        .unchecked()
        .run()
        .unwrap_or_else(|e| panic!("cannot run {compiler}: {e}"));
    assert!(res.status.success(), "{compiler} failed on {src}:\n{}", String::from_utf8_lossy(&res.stdout));
    out
}

fn tempdir() -> (tempfile::TempDir, Utf8PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let p = Utf8PathBuf::from_path_buf(t.path().to_owned()).unwrap();
    (t, p)
}

fn policy(manylinux: Option<&str>) -> AbiPolicy {
    AbiPolicy { manylinux: manylinux.map(str::to_owned), ..AbiPolicy::default() }
}

const TO_CHARS: &str = r#"
#include <charconv>
extern "C" int format_double(char* buf, int n, double x) {
    auto r = std::to_chars(buf, buf + n, x);
    return static_cast<int>(r.ptr - buf);
}
"#;

const SHARED_PTR: &str = r#"
#include <memory>
extern "C" long share(long x) {
    auto p = std::make_shared<long>(x);
    auto q = p;
    return *q + q.use_count();
}
"#;

const PLAIN_C: &str = r#"
#include <stdio.h>
#include <string.h>
int say(const char* s) { return (int)strlen(s) + puts(s); }
"#;

const PYTHON: &str = r#"
extern "C" void* PyCode_New(int);
extern "C" void* PyType_GetModuleByDef(void*, void*);
extern "C" int PyArg_ParseTuple(void*, const char*, ...);
extern "C" void* use_python(void* a) {
    PyArg_ParseTuple(a, "i");
    PyType_GetModuleByDef(a, a);
    return PyCode_New(1);
}
"#;

const TORCH: &str = r#"
namespace c10 { void foo(); }
namespace torch { namespace stable { void bar(); } }
extern "C" int torch_new_stable_ivalue(void*);
extern "C" int aoti_torch_empty_strided(void*);
extern "C" void use_torch() {
    c10::foo();
    torch::stable::bar();
    torch_new_stable_ivalue(nullptr);
    aoti_torch_empty_strided(nullptr);
}
"#;

/// (a) `std::to_chars` for double is GLIBCXX_3.4.29: refused by manylinux_2_28 naming the
/// library and the symbol; the table's first policy with 3.4.29 is manylinux_2_34, so 2_34 and
/// 2_35 accept it.
#[test]
fn to_chars_needs_glibcxx_3_4_29() {
    let (_t, dir) = tempdir();
    let so = compile(&dir, "to_chars.so", "c++", TO_CHARS);

    let lib = check_library(&so, &policy(Some("2_28"))).unwrap();
    assert_eq!(lib.path, so);
    assert_eq!(lib.manylinux.as_deref(), Some("manylinux_2_34"));
    let refused: Vec<(&str, &str, &str)> = lib
        .violations
        .iter()
        .map(|v| match v {
            Violation::SymbolVersion { policy, requirement } => {
                (policy.as_str(), requirement.symbol.as_deref().unwrap(), requirement.version.as_str())
            }
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(refused, [("manylinux_2_28", "_ZSt8to_charsPcS_d", "GLIBCXX_3.4.29")]);
    let Violation::SymbolVersion { requirement, .. } = &lib.violations[0] else { unreachable!() };
    assert_eq!(requirement.library, "libstdc++.so.6");
    assert_eq!(requirement.demangled.as_deref(), Some("std::to_chars(char*, char*, double)"));
    assert_eq!(requirement.first_policy.as_deref(), Some("manylinux_2_34"));
    assert!(requirement.not_on.contains(&"RHEL/AlmaLinux/Rocky 8 (glibc 2.28)".to_owned()));

    for ok in ["2_34", "manylinux_2_35"] {
        let lib = check_library(&so, &policy(Some(ok))).unwrap();
        assert!(lib.violations.is_empty(), "{ok}: {:?}", lib.violations);
    }

    // The command: exit 1 under 2_28, the line names the library and the symbol.
    let out = crate::util::kb().args(["check-abi", so.as_str(), "--manylinux", "2_28"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        stdout,
        format!(
            "{so}: FAILED (ELF x86_64, meets manylinux_2_34)\n  - not manylinux_2_28: \
             _ZSt8to_charsPcS_d@GLIBCXX_3.4.29 from libstdc++.so.6 [std::to_chars(char*, char*, \
             double)]: needs manylinux_2_34 (glibc ≥ 2.34), so it does not load on Ubuntu 20.04 \
             (glibc 2.31), Debian 11 (glibc 2.31), Debian 10 (glibc 2.28), RHEL/AlmaLinux/Rocky 8 \
             (glibc 2.28), Ubuntu 18.04 (glibc 2.27), Amazon Linux 2 (glibc 2.26), CentOS/RHEL 7 \
             (glibc 2.17)\nABI check failed: 1 violation in 1 library of 1\n"
        )
    );
    // Without --manylinux: the policy met is reported, exit 0.
    let out = crate::util::kb().args(["check-abi", so.as_str()]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.starts_with(&format!("{so}: ok (ELF x86_64, meets manylinux_2_34)\n")), "{stdout}");
    assert!(stdout.contains("  limited by _ZSt8to_charsPcS_d@GLIBCXX_3.4.29"), "{stdout}");
    assert!(stdout.ends_with("ABI check passed: 1 library, variant meets manylinux_2_34\n"));
}

/// What the issue saw: g++ 12 on Debian 12 puts `__libc_single_threaded@GLIBC_2.32` into code
/// that counts references; glibc 2.32 is newer than RHEL 8's and Debian 11's.
#[test]
fn shared_ptr_needs_glibc_2_32() {
    let (_t, dir) = tempdir();
    let so = compile(&dir, "shared_ptr.so", "c++", SHARED_PTR);
    let lib = check_library(&so, &policy(Some("manylinux_2_28"))).unwrap();
    let [Violation::SymbolVersion { requirement, .. }] = lib.violations.as_slice() else {
        panic!("{:?}", lib.violations)
    };
    assert_eq!(requirement.symbol.as_deref(), Some("__libc_single_threaded"));
    assert_eq!((requirement.version.as_str(), requirement.library.as_str()), ("GLIBC_2.32", "libc.so.6"));
    assert_eq!(requirement.needs_glibc.as_deref(), Some("2.32"));
    assert_eq!(requirement.not_on[..2], ["Ubuntu 20.04 (glibc 2.31)", "Debian 11 (glibc 2.31)"]);
    assert!(requirement.not_on.contains(&"RHEL/AlmaLinux/Rocky 8 (glibc 2.28)".to_owned()));
    assert!(!requirement.not_on.iter().any(|d| d.starts_with("Debian 12")));
}

/// (b) Plain C using old glibc symbols (strlen, puts: GLIBC_2.2.5 on x86_64) meets the
/// table's oldest x86_64 policy, manylinux_2_5, and so every policy asked for.
#[test]
fn plain_c_meets_the_oldest_policy() {
    let (_t, dir) = tempdir();
    let so = compile(&dir, "plain.so", "c", PLAIN_C);
    let lib = check_library(&so, &policy(Some("manylinux2014"))).unwrap();
    assert_eq!(lib.manylinux.as_deref(), Some("manylinux_2_5"));
    assert!(lib.violations.is_empty(), "{:?}", lib.violations);
    assert!(lib.limited_by.is_empty());
    let out = crate::util::kb().args(["check-abi", so.as_str(), "-m", "2_17"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!(
            "{so}: ok (ELF x86_64, meets manylinux_2_5)\nABI check passed: 1 library, variant \
             meets manylinux_2_5\n"
        )
    );
}

/// (c) CPython symbols outside the stable ABI, or newer than the targeted Python.
#[test]
fn python_symbols_outside_abi3_are_refused() {
    let (_t, dir) = tempdir();
    let so = compile(&dir, "_ext.abi3.so", "c++", PYTHON);
    let lib = check_library(&so, &AbiPolicy::default()).unwrap();
    assert_eq!(
        lib.violations,
        [
            Violation::NotAbi3 { symbol: "PyCode_New".into() },
            Violation::PythonAbiTooNew {
                symbol: "PyType_GetModuleByDef".into(),
                added: "3.13".into(),
                python_abi: "3.9".into()
            },
        ]
    );
    let out = crate::util::kb().args(["check-abi", so.as_str(), "--python-abi", "3.13"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("  - not abi3: PyCode_New is not in the CPython stable ABI\n"), "{stdout}");
    assert!(!stdout.contains("PyType_GetModuleByDef"), "{stdout}");
}

/// (d) A mangled `c10::` reference in a stable-ABI library; `torch::stable::` is allowed; a
/// shim function newer than the target is refused.
#[test]
fn torch_cxx_symbols_are_refused_under_the_stable_abi() {
    let (_t, dir) = tempdir();
    let so = compile(&dir, "_ops.abi3.so", "c++", TORCH);
    let p = AbiPolicy { torch_stable_abi: Some(Version::parse("2.11").unwrap()), ..AbiPolicy::default() };
    let lib = check_library(&so, &p).unwrap();
    assert_eq!(
        lib.violations,
        [
            Violation::TorchCxxSymbol { symbol: "_ZN3c103fooEv".into(), demangled: "c10::foo".into() },
            Violation::TorchShimTooNew {
                symbol: "torch_new_stable_ivalue".into(),
                added: "2.13.0".into(),
                torch_stable_abi: "2.11".into()
            },
        ]
    );
    // Not a stable-ABI variant: the torch rule is not applied.
    assert!(check_library(&so, &AbiPolicy::default()).unwrap().violations.is_empty());
    let out =
        crate::util::kb().args(["check-abi", so.as_str(), "--torch-stable-abi", "2.13"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains(
            "  - torch stable ABI: _ZN3c103fooEv [c10::foo] is a libtorch C++ symbol; use the C \
             shim or torch::stable\n"
        ),
        "{stdout}"
    );
    assert!(!stdout.contains("torch_new_stable_ivalue"), "{stdout}");
}

/// A variant directory named `torch-stable-abi<MAJ><MIN>-…` gets the torch rule without
/// `--torch-stable-abi`, targeting the version in its name; the same library under a
/// versioned torch variant's name does not.
#[test]
fn stable_abi_variant_names_bring_the_torch_rule() {
    let (_t, dir) = tempdir();
    let stable = dir.join("build/torch-stable-abi212-cpu-x86_64-linux");
    let versioned = dir.join("build/torch212-cxx11-cpu-x86_64-linux");
    for v in [&stable, &versioned] {
        std::fs::create_dir_all(v).unwrap();
        compile(v, "_ops.abi3.so", "c++", TORCH);
        std::fs::write(v.join("metadata.json"), "{}").unwrap();
    }
    let check = |args: &[&str]| {
        let out = crate::util::kb().arg("check-abi").args(args).output().unwrap();
        (out.status.code(), String::from_utf8(out.stdout).unwrap())
    };
    let (code, stdout) = check(&[stable.as_str()]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("  - torch stable ABI: _ZN3c103fooEv [c10::foo] is a libtorch C++ symbol"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "  - torch stable ABI 2.12: torch_new_stable_ivalue was added to the C shim in torch 2.13.0\n"
        ),
        "{stdout}"
    );
    // The flag overrides the name; the whole build directory checks each variant by its own name.
    let (code, stdout) = check(&[stable.as_str(), "--torch-stable-abi", "2.13"]);
    assert_eq!(code, Some(1));
    assert!(!stdout.contains("torch_new_stable_ivalue"), "{stdout}");
    let (code, stdout) = check(&["--json", dir.join("build").as_str()]);
    assert_eq!(code, Some(1));
    let reports: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let targets: Vec<&serde_json::Value> =
        reports.as_array().unwrap().iter().map(|r| &r["torch_stable_abi"]).collect();
    assert_eq!(targets, [&serde_json::json!("2.12"), &serde_json::Value::Null]);
    // A kernel repository without build.toml (as downloaded from the Hub, with README.md):
    // DIR stands for its build/<variant>/ directories, not for one variant named after DIR.
    std::fs::write(dir.join("README.md"), "# kk\n").unwrap();
    let (code, stdout) = check(&["--json", dir.as_str()]);
    assert_eq!(code, Some(1), "{stdout}");
    let reports: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let got: Vec<(&str, &serde_json::Value)> = reports
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["variant"].as_str().unwrap(), &r["torch_stable_abi"]))
        .collect();
    assert_eq!(
        got,
        [(stable.as_str(), &serde_json::json!("2.12")), (versioned.as_str(), &serde_json::Value::Null)]
    );
    let (code, stdout) = check(&[versioned.as_str()]);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(!stdout.contains("torch stable ABI"), "{stdout}");
}

/// (e) A file named `.so` that is not one, and a truncated ELF: errors naming the file, exit 1,
/// no panic.
#[test]
fn non_elf_and_truncated_files_are_clear_errors() {
    let (_t, dir) = tempdir();
    let bad = dir.join("bad.so");
    std::fs::write(&bad, "this is not ELF").unwrap();
    let err = check_library(&bad, &AbiPolicy::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("`{bad}`: not a shared object (neither ELF nor Mach-O: unknown file format)")
    );
    let so = compile(&dir, "plain.so", "c", PLAIN_C);
    let bytes = std::fs::read(&so).unwrap();
    let truncated = dir.join("truncated.so");
    std::fs::write(&truncated, &bytes[..300]).unwrap();
    let err = check_library(&truncated, &AbiPolicy::default()).unwrap_err().to_string();
    assert!(err.starts_with(&format!("`{truncated}`: malformed Elf64 file: ")), "{err}");

    let out = crate::util::kb().args(["check-abi", bad.as_str()]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        stderr,
        format!("error: `{bad}`: not a shared object (neither ELF nor Mach-O: unknown file format)\n")
    );
    let out = crate::util::kb().args(["check-abi", dir.as_str(), "-m", "2_29"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.starts_with("error: --manylinux: unknown manylinux policy `2_29`"), "{stderr}");
    let out =
        crate::util::kb().args(["check-abi", dir.as_str(), "--torch-stable-abi", "2.x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "error: --torch-stable-abi: version `2.x` must be dot-separated numbers, e.g. \"2.12\"\n"
    );
}

/// `--python-abi` takes only Pythons with a stable ABI (3.2 on) that the vendored stable-ABI
/// table knows (up to 3.15, the newest `added` in it): anything else is a usage error (exit 2)
/// saying what is accepted, before any file is read.
#[test]
fn python_abi_values_without_a_stable_abi_are_usage_errors() {
    assert_eq!(kernel_builder::abi::python_abi::StableAbiTable::embedded().newest(), Some((3, 15)));
    let no_abi3 = |v: &str| {
        format!("Python {v} has no stable ABI (abi3 starts at Python 3.2); give 3.2 to 3.15 as 3.Y, e.g. 3.9")
    };
    let too_new = |v: &str| {
        format!(
            "Python {v} is newer than the stable ABI table kernel-builder carries (it knows Python 3.2 \
             to 3.15); give 3.2 to 3.15 as 3.Y, e.g. 3.9"
        )
    };
    for (value, why) in [
        ("2.7", no_abi3("2.7")),
        ("3.1", no_abi3("3.1")),
        ("4.0", no_abi3("4.0")),
        ("3.16", too_new("3.16")),
        ("3.99", too_new("3.99")),
        ("3", "Python version `3` must be MAJOR.MINOR, e.g. 3.9".to_owned()),
    ] {
        let out =
            crate::util::kb().args(["check-abi", "/nonexistent", "--python-abi", value]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{value}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(
            stderr.starts_with(&format!("error: invalid value '{value}' for '--python-abi <X.Y>': {why}\n")),
            "{stderr}"
        );
    }
    // The newest the table knows is accepted (the file does not exist: exit 1, not 2).
    let out = crate::util::kb().args(["check-abi", "/nonexistent", "--python-abi", "3.15"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let out = crate::util::kb().args(["check-abi", "--help"]).output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap().split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        help.contains(
            "The oldest Python the abi3 modules must load on: 3.2 (where abi3 starts) up to the newest \
             Python of the stable-ABI table kernel-builder carries (3.15)"
        ),
        "{help}"
    );
}

/// A kernel directory: every build/<variant>/ is checked, libraries found recursively and
/// sorted; the variant meets the least compatible of its libraries' policies; `--json` carries
/// the same report.
#[test]
fn kernel_directory_checks_each_variant() {
    let (_t, dir) = tempdir();
    std::fs::write(dir.join("build.toml"), "").unwrap();
    let v1 = dir.join("build/torch211-cxx11-cpu-x86_64-linux");
    let v2 = dir.join("build/torch211-cxx11-cu130-x86_64-linux");
    for v in [&v1, &v2] {
        std::fs::create_dir_all(v.join("sub")).unwrap();
        std::fs::write(v.join("metadata.json"), "{}").unwrap();
        std::fs::write(v.join("__init__.py"), "").unwrap();
    }
    compile(&v1, "_plain.abi3.so", "c", PLAIN_C);
    compile(&v1.join("sub"), "_to_chars.abi3.so", "c++", TO_CHARS);
    compile(&v2, "_plain.abi3.so", "c", PLAIN_C);
    // Not a variant (no metadata.json): the bundle's benchmarks.
    std::fs::create_dir_all(dir.join("build/benchmarks")).unwrap();
    compile(&dir.join("build/benchmarks"), "not_a_variant.so", "c++", PYTHON);

    let report = check_variant(&v1, &AbiPolicy::default()).unwrap();
    let paths: Vec<&str> =
        report.libraries.iter().map(|l| l.path.strip_prefix(&v1).unwrap().as_str()).collect();
    assert_eq!(paths, ["_plain.abi3.so", "sub/_to_chars.abi3.so"]);
    assert_eq!(report.manylinux_met().as_deref(), Some("manylinux_2_34"));
    assert!(report.is_ok());

    let out = crate::util::kb().args(["check-abi", dir.as_str(), "--json", "-m", "2_28"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let variants: Vec<(&str, &str)> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["variant"].as_str().unwrap(), v["manylinux_met"].as_str().unwrap()))
        .collect();
    assert_eq!(variants, [(v1.as_str(), "manylinux_2_34"), (v2.as_str(), "manylinux_2_5")]);
    let violation = &json[0]["libraries"][1]["violations"][0];
    assert_eq!(violation["kind"], "symbol-version");
    assert_eq!(violation["policy"], "manylinux_2_28");
    assert_eq!(violation["symbol"], "_ZSt8to_charsPcS_d");
    assert_eq!(violation["version"], "GLIBCXX_3.4.29");
    assert_eq!(violation["library"], "libstdc++.so.6");
    assert_eq!(json[1]["libraries"][0]["violations"], serde_json::json!([]));
    assert_eq!(json[1]["libraries"][0]["format"], serde_json::json!({"kind": "elf", "arch": "x86_64"}));
    assert_eq!(
        (&json[0]["manylinux_policy"], &json[0]["python_abi"]),
        (&"manylinux_2_28".into(), &"3.9".into())
    );

    // The build dir and the variant dir name the same variants.
    let text = |d: &Utf8Path| {
        let out = crate::util::kb().args(["check-abi", d.as_str()]).output().unwrap();
        assert_eq!(out.status.code(), Some(0));
        String::from_utf8(out.stdout).unwrap()
    };
    let from_build = text(&dir.join("build"));
    assert!(from_build.starts_with(&format!("{v1}:\n{v1}/_plain.abi3.so: ok")), "{from_build}");
    assert!(from_build.contains(&format!("{v2}:\n{v2}/_plain.abi3.so: ok")), "{from_build}");
    let from_variant = text(&v2);
    assert_eq!(
        from_variant,
        format!(
            "{v2}/_plain.abi3.so: ok (ELF x86_64, meets manylinux_2_5)\nABI check passed: 1 \
             library, variant meets manylinux_2_5\n"
        )
    );
    assert!(!from_build.contains("benchmarks"), "{from_build}");
    // A kernel directory that was never built says so.
    let (_t2, unbuilt) = tempdir();
    std::fs::write(unbuilt.join("build.toml"), "").unwrap();
    let out = crate::util::kb().args(["check-abi", unbuilt.as_str()]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("is a kernel directory without build/; build it first"), "{stderr}");
}

/// A real shared object, compiled once, for the mutation property below.
fn sample_elf() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| {
        let (t, dir) = tempdir();
        let so = compile(&dir, "sample.so", "c++", SHARED_PTR);
        let bytes = std::fs::read(&so).unwrap();
        drop(t);
        bytes
    })
}

/// A Mach-O object with undefined symbols, written with `object`.
fn macho_bytes(names: &[&str]) -> Vec<u8> {
    use object::write::{Object, Symbol, SymbolSection};
    use object::{Architecture, BinaryFormat, Endianness, SymbolFlags, SymbolKind, SymbolScope};

    let mut obj = Object::new(BinaryFormat::MachO, Architecture::Aarch64, Endianness::Little);
    for name in names {
        obj.add_symbol(Symbol {
            name: name.as_bytes().to_vec(),
            value: 0,
            size: 0,
            kind: SymbolKind::Text,
            scope: SymbolScope::Dynamic,
            weak: false,
            section: SymbolSection::Undefined,
            flags: SymbolFlags::None,
        });
    }
    obj.write().unwrap()
}

fn check_bytes(bytes: &[u8]) -> Result<(), String> {
    let (_t, dir) = tempdir();
    let path = dir.join("x.so");
    std::fs::write(&path, bytes).unwrap();
    let p = AbiPolicy {
        manylinux: Some("2_28".into()),
        python_abi: Some((3, 9)),
        torch_stable_abi: Some(Version::parse("2.11").unwrap()),
    };
    match check_library(&path, &p) {
        Ok(_) => Ok(()),
        Err(e) => {
            let msg = e.to_string();
            // Every error names the file.
            if msg.starts_with(&format!("`{path}`: ")) {
                Ok(())
            } else {
                Err(msg)
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Arbitrary bytes named `x.so`: an error naming the file, never a panic.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        prop_assert_eq!(check_bytes(&bytes), Ok(()));
    }

    /// A real ELF (or a Mach-O object) with bytes overwritten anywhere (headers, tables,
    /// strings) and maybe truncated: a report or an error naming the file, never a panic.
    #[test]
    fn corrupted_elf_never_panics(
        macho in any::<bool>(),
        edits in proptest::collection::vec(
            (0..3usize, any::<prop::sample::Index>(), any::<u8>()),
            1..16,
        ),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let mut bytes = if macho {
            macho_bytes(&["PyCode_New", "_ZN3c103fooEv", "memcpy"])
        } else {
            sample_elf().to_vec()
        };
        let len = bytes.len();
        for (region, at, value) in edits {
            // The ELF header, program headers and dynamic tables sit at the start, the
            // section headers at the end: aim two thirds of the edits there.
            let i = match region {
                0 => at.index(len.min(4096)),
                1 => len - 1 - at.index(len.min(4096)),
                _ => at.index(len),
            };
            bytes[i] = value;
        }
        if truncate {
            bytes.truncate(cut.index(bytes.len()));
        }
        prop_assert_eq!(check_bytes(&bytes), Ok(()));
    }
}

/// A Mach-O object (as a Metal variant's library would be) written with `object`: manylinux
/// does not apply, the abi3 and torch rules do, on names without Mach-O's leading `_`.
#[test]
fn macho_libraries_get_the_python_and_torch_rules() {
    // `object` applies Mach-O name mangling: these are written as `_PyCode_New`,
    // `__ZN3c103fooEv`, …
    let bytes = macho_bytes(&["PyCode_New", "_ZN3c103fooEv", "PyArg_ParseTuple"]);
    let (_t, dir) = tempdir();
    let path = dir.join("_metal.abi3.so");
    std::fs::write(&path, bytes).unwrap();
    let p = AbiPolicy {
        manylinux: Some("2_28".into()),
        python_abi: Some((3, 9)),
        torch_stable_abi: Some(Version::parse("2.11").unwrap()),
    };
    let lib = check_library(&path, &p).unwrap();
    assert_eq!(lib.format, kernel_builder::abi::BinaryFormat::MachO { arch: "aarch64".into() });
    assert_eq!(lib.manylinux, None);
    assert_eq!(
        lib.violations,
        [
            Violation::NotAbi3 { symbol: "PyCode_New".into() },
            Violation::TorchCxxSymbol { symbol: "_ZN3c103fooEv".into(), demangled: "c10::foo".into() },
        ]
    );
    let report = check_variant(&dir, &p).unwrap();
    assert_eq!(report.manylinux_met(), None);
    assert!(report
        .render_text()
        .starts_with(&format!("{path}: FAILED (Mach-O aarch64, manylinux does not apply)\n")));
}

/// A compiled variant without any shared object (its extension module is missing) fails,
/// naming the variant; a noarch variant (pure Python) has nothing to check and passes, so a
/// noarch-only tree exits 0 and says so.
#[test]
fn compiled_variants_without_shared_objects_fail_and_noarch_ones_are_skipped() {
    let (_t, dir) = tempdir();
    std::fs::write(dir.join("build.toml"), "").unwrap();
    let noarch = dir.join("build/torch-cuda");
    let compiled = dir.join("build/torch211-cxx11-cpu-x86_64-linux");
    for v in [&noarch, &compiled] {
        std::fs::create_dir_all(v).unwrap();
        std::fs::write(v.join("metadata.json"), "{}").unwrap();
        std::fs::write(v.join("__init__.py"), "").unwrap();
    }
    let run = |args: &[&str]| {
        let out = crate::util::kb().arg("check-abi").args(args).output().unwrap();
        (out.status.code(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
    };
    let (code, stdout, stderr) = run(&[dir.as_str()]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert_eq!(
        stdout,
        format!(
            "{noarch}:\nnothing to check: noarch variant (pure Python, no shared objects)\n{compiled}:\nno \
             shared objects (.so, .pyd) found\n"
        )
    );
    assert_eq!(
        stderr,
        format!(
            "error: no shared objects (.so, .pyd) found under `{compiled}`; a compiled variant holds its \
             kernel's extension module: rebuild it (`kernel-builder build-and-copy`), or pass a directory \
             that has one\n"
        )
    );
    // The same for the variant alone, and in --json (where `noarch` tells them apart).
    assert_eq!(run(&[compiled.as_str()]).0, Some(1));
    let (code, stdout, _) = run(&[dir.as_str(), "--json"]);
    assert_eq!(code, Some(1));
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let facts: Vec<(bool, usize)> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["noarch"].as_bool().unwrap(), v["libraries"].as_array().unwrap().len()))
        .collect();
    assert_eq!(facts, [(true, 0), (false, 0)]);

    // Noarch only: nothing to check, exit 0.
    std::fs::remove_dir_all(&compiled).unwrap();
    let (code, stdout, stderr) = run(&[dir.as_str()]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        stdout,
        format!("{noarch}:\nnothing to check: noarch variant (pure Python, no shared objects)\n")
    );
    assert_eq!(stderr, "");
}
