//! Unit tests of the rules on hand-made [`Binary`] values; the ELF reader is tested on real
//! compiler output in `tests/it/abi.rs`.

use super::*;

fn need(file: &str, version: &str) -> VersionNeed {
    VersionNeed { file: file.to_owned(), version: version.to_owned() }
}

fn sym(name: &str, version: Option<(&str, &str)>) -> UndefinedSymbol {
    UndefinedSymbol {
        name: name.to_owned(),
        version: version.map(|v| v.1.to_owned()),
        version_file: version.map(|v| v.0.to_owned()),
    }
}

fn elf(undefined: Vec<UndefinedSymbol>, version_needs: Vec<VersionNeed>) -> Binary {
    Binary { format: BinaryFormat::Elf { arch: "x86_64".to_owned() }, undefined, version_needs }
}

fn g12_like() -> Binary {
    elf(
        vec![
            sym("__libc_single_threaded", Some(("libc.so.6", "GLIBC_2.32"))),
            sym("memcpy", Some(("libc.so.6", "GLIBC_2.14"))),
            sym("sqrt", Some(("libm.so.6", "GLIBC_2.2.5"))),
            sym("free", Some(("libc.so.6", "GLIBC_2.2.5"))),
            sym("my_own", None),
        ],
        vec![
            need("libm.so.6", "GLIBC_2.2.5"),
            need("libc.so.6", "GLIBC_2.14"),
            need("libc.so.6", "GLIBC_2.32"),
            need("libc.so.6", "GLIBC_2.2.5"),
            need("libcudart.so.12", "libcudart.so.12"),
        ],
    )
}

fn policy(manylinux: Option<&str>) -> AbiPolicy {
    AbiPolicy { manylinux: manylinux.map(str::to_owned), ..AbiPolicy::default() }
}

#[test]
fn reports_the_policy_met_and_what_limits_it() {
    let table = PolicyTable::embedded();
    let p = policy(None);
    let r = judge("x.so".into(), &g12_like(), None, &p);
    assert_eq!(r.manylinux.as_deref(), Some("manylinux_2_34"));
    assert!(r.violations.is_empty());
    // The next older x86_64 policy is manylinux_2_31: only GLIBC_2.32 rules it out.
    assert_eq!(r.limited_by.len(), 1);
    let l = &r.limited_by[0];
    assert_eq!(l.symbol.as_deref(), Some("__libc_single_threaded"));
    assert_eq!((l.version.as_str(), l.library.as_str()), ("GLIBC_2.32", "libc.so.6"));
    assert_eq!(l.first_policy.as_deref(), Some("manylinux_2_34"));
    assert_eq!(l.needs_glibc.as_deref(), Some("2.32"));
    assert_eq!(l.not_on[..2], ["Ubuntu 20.04 (glibc 2.31)", "Debian 11 (glibc 2.31)"]);
    assert!(l.not_on.contains(&"RHEL/AlmaLinux/Rocky 8 (glibc 2.28)".to_owned()));
    assert_eq!(
        l.to_string(),
        "__libc_single_threaded@GLIBC_2.32 from libc.so.6: needs manylinux_2_34 (glibc ≥ 2.32), \
         so it does not load on Ubuntu 20.04 (glibc 2.31), Debian 11 (glibc 2.31), Debian 10 \
         (glibc 2.28), RHEL/AlmaLinux/Rocky 8 (glibc 2.28), Ubuntu 18.04 (glibc 2.27), Amazon \
         Linux 2 (glibc 2.26), CentOS/RHEL 7 (glibc 2.17)"
    );
    // Requirements map symbols to the library of their version: sqrt is libm's.
    let reqs = requirements(table, "x86_64", &g12_like());
    let pairs: Vec<(Option<&str>, &str, &str)> =
        reqs.iter().map(|r| (r.symbol.as_deref(), r.version.as_str(), r.library.as_str())).collect();
    assert_eq!(
        pairs,
        [
            (Some("memcpy"), "GLIBC_2.14", "libc.so.6"),
            (Some("free"), "GLIBC_2.2.5", "libc.so.6"),
            (Some("sqrt"), "GLIBC_2.2.5", "libm.so.6"),
            (Some("__libc_single_threaded"), "GLIBC_2.32", "libc.so.6"),
        ]
    );
}

#[test]
fn a_requested_policy_refuses_what_it_does_not_list() {
    let p = policy(Some("2_28"));
    let req = p.manylinux_policy().unwrap();
    let r = judge("x.so".into(), &g12_like(), req, &p);
    assert_eq!(r.violations.len(), 1);
    let Violation::SymbolVersion { policy: name, requirement } = &r.violations[0] else {
        panic!("{:?}", r.violations)
    };
    assert_eq!(name, "manylinux_2_28");
    assert_eq!(requirement.symbol.as_deref(), Some("__libc_single_threaded"));
    assert!(r.violations.iter().all(Violation::is_manylinux));
    let report = AbiReport::new(&p, vec![r]);
    assert_eq!(report.manylinux_policy.as_deref(), Some("manylinux_2_28"));
    assert_eq!(report.python_abi.as_deref(), Some("3.9"));
    assert_eq!(report.torch_stable_abi, None);
    assert!(!report.is_ok());
    assert_eq!(report.manylinux_met().as_deref(), Some("manylinux_2_34"));
    let text = report.render_text();
    assert!(
        text.starts_with(
            "x.so: FAILED (ELF x86_64, meets manylinux_2_34)\n  - not manylinux_2_28: \
             __libc_single_threaded@GLIBC_2.32 from libc.so.6"
        ),
        "{text}"
    );
    assert!(text.ends_with("ABI check failed: 1 violation in 1 library of 1\n"), "{text}");
    // Under 2_34 it passes.
    let p = policy(Some("manylinux_2_34"));
    let r = judge("x.so".into(), &g12_like(), p.manylinux_policy().unwrap(), &p);
    assert!(r.violations.is_empty());
}

#[test]
fn unused_requirements_and_unknown_versions_count_too() {
    let b = elf(vec![], vec![need("libc.so.6", "GLIBC_2.35"), need("libc.so.6", "GLIBC_PRIVATE")]);
    let r = judge("x.so".into(), &b, None, &policy(None));
    // GLIBC_PRIVATE is in no policy: no manylinux policy is met, and it is what limits.
    assert_eq!(r.manylinux, None);
    assert_eq!(r.limited_by.len(), 1);
    assert_eq!(r.limited_by[0].version, "GLIBC_PRIVATE");
    assert_eq!(
        r.limited_by[0].to_string(),
        "GLIBC_PRIVATE (required, no symbol uses it) from libc.so.6: allowed by no manylinux policy"
    );
    let b = elf(vec![], vec![need("libc.so.6", "GLIBC_2.35")]);
    let r = judge("x.so".into(), &b, None, &policy(None));
    assert_eq!(r.manylinux.as_deref(), Some("manylinux_2_35"));
    assert_eq!(r.limited_by[0].symbol, None);
}

#[test]
fn architecture_missing_from_the_policy_is_a_violation() {
    let b = Binary {
        format: BinaryFormat::Elf { arch: "aarch64".to_owned() },
        undefined: vec![],
        version_needs: vec![need("libc.so.6", "GLIBC_2.17")],
    };
    let p = policy(Some("manylinux1"));
    let r = judge("x.so".into(), &b, p.manylinux_policy().unwrap(), &p);
    assert_eq!(r.manylinux.as_deref(), Some("manylinux_2_17"));
    assert_eq!(
        r.violations,
        [Violation::ArchNotInPolicy { policy: "manylinux_2_5".into(), arch: "aarch64".into() }]
    );
}

#[test]
fn python_and_torch_rules_apply_to_undefined_symbols() {
    let b = elf(
        vec![
            sym("PyCode_New", None),
            sym("PyType_GetModuleByDef", None),
            sym("PyArg_ParseTuple", None),
            sym("_ZN3c103fooEv", None),
            sym("torch_new_stable_ivalue", None),
            sym("aoti_torch_empty_strided", None),
        ],
        vec![],
    );
    let p = AbiPolicy {
        manylinux: None,
        python_abi: Some((3, 9)),
        torch_stable_abi: Some(Version::parse("2.11").unwrap()),
    };
    let r = judge("x.so".into(), &b, None, &p);
    assert!(!r.violations.iter().any(Violation::is_manylinux));
    let text: Vec<String> = r.violations.iter().map(|v| v.to_string()).collect();
    assert_eq!(
        text,
        [
            "not abi3: PyCode_New is not in the CPython stable ABI",
            "Python 3.9 abi3: PyType_GetModuleByDef joined the stable ABI in Python 3.13",
            "torch stable ABI: _ZN3c103fooEv [c10::foo] is a libtorch C++ symbol; use the C shim \
             or torch::stable",
            "torch stable ABI 2.11: torch_new_stable_ivalue was added to the C shim in torch 2.13.0",
        ]
    );
    // Without the torch flag and with python_abi None, nothing is checked.
    let r = judge("x.so".into(), &b, None, &AbiPolicy { python_abi: None, ..policy(None) });
    assert!(r.violations.is_empty());
    assert_eq!(r.manylinux.as_deref(), Some("manylinux_2_5"));
    assert!(r.limited_by.is_empty());
}

#[test]
fn unknown_policy_names_are_errors_before_reading() {
    let err = check_variant("/nonexistent".into(), &policy(Some("2_29"))).unwrap_err();
    assert!(err.to_string().contains("unknown manylinux policy `2_29`"), "{err}");
}

#[test]
fn violations_serialize_with_their_kind() {
    let v = Violation::NotAbi3 { symbol: "PyCode_New".into() };
    assert_eq!(serde_json::to_string(&v).unwrap(), r#"{"kind":"not-abi3","symbol":"PyCode_New"}"#);
}

#[test]
fn other_formats_say_what_they_are() {
    assert_eq!(
        read_binary(b"MZ\x90\x00").unwrap_err().to_string(),
        "a Windows PE file: only ELF and Mach-O shared objects are checked"
    );
    assert_eq!(
        read_binary(b"").unwrap_err().to_string(),
        "not a shared object (neither ELF nor Mach-O: unknown file format)"
    );
    // A fat (universal) Mach-O header with no architectures.
    let fat = [0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let err = read_binary(&fat).unwrap_err().to_string();
    assert!(err.starts_with("unsupported file format MachOFat32"), "{err}");
}

/// A fresh user's case: a library built on a new distribution was warned about once per glibc
/// symbol (dozens of lines). The summary is one line per library: the highest policy needed,
/// how many symbols need it (the first three named), how many miss the policy in all, and the
/// distributions it does not load on.
#[test]
fn symbol_versions_past_a_policy_are_summarized_in_one_line() {
    let b = elf(
        vec![
            sym("__libc_single_threaded", Some(("libc.so.6", "GLIBC_2.32"))),
            sym("pthread_create", Some(("libc.so.6", "GLIBC_2.34"))),
            sym("dlopen", Some(("libc.so.6", "GLIBC_2.34"))),
            sym("__libc_start_main", Some(("libc.so.6", "GLIBC_2.34"))),
            sym("pthread_join", Some(("libc.so.6", "GLIBC_2.34"))),
            sym("exp", Some(("libm.so.6", "GLIBC_2.29"))),
            sym("memcpy", Some(("libc.so.6", "GLIBC_2.14"))),
        ],
        vec![
            need("libc.so.6", "GLIBC_2.14"),
            need("libc.so.6", "GLIBC_2.32"),
            need("libc.so.6", "GLIBC_2.34"),
            need("libm.so.6", "GLIBC_2.29"),
        ],
    );
    let p = policy(Some("2_28"));
    let r = judge("x.so".into(), &b, p.manylinux_policy().unwrap(), &p);
    assert_eq!(r.violations.len(), 6, "{:?}", r.violations);
    assert_eq!(
        summarize_symbol_versions(&r.violations).unwrap(),
        "not manylinux_2_28: 4 symbols need manylinux_2_34, glibc ≥ 2.34 (GLIBC_2.34 from libc.so.6: \
         __libc_start_main, dlopen, pthread_create, and 1 more), 6 past manylinux_2_28 in all; so it does \
         not load on Ubuntu 20.04 (glibc 2.31), Debian 11 (glibc 2.31), Debian 10 (glibc 2.28), \
         RHEL/AlmaLinux/Rocky 8 (glibc 2.28), Ubuntu 18.04 (glibc 2.27), Amazon Linux 2 (glibc 2.26), \
         CentOS/RHEL 7 (glibc 2.17)"
    );
    // One symbol: said in the singular, with no "in all".
    let one = elf(
        vec![sym("__libc_single_threaded", Some(("libc.so.6", "GLIBC_2.32")))],
        vec![need("libc.so.6", "GLIBC_2.32")],
    );
    let r = judge("x.so".into(), &one, p.manylinux_policy().unwrap(), &p);
    let s = summarize_symbol_versions(&r.violations).unwrap();
    assert!(
        s.starts_with(
            "not manylinux_2_28: 1 symbol needs manylinux_2_34, glibc ≥ 2.32 (GLIBC_2.32 from libc.so.6: \
             __libc_single_threaded); so it does not load on Ubuntu 20.04"
        ),
        "{s}"
    );
    // A version no policy allows ranks above every policy.
    let private = elf(
        vec![sym("x", Some(("libc.so.6", "GLIBC_PRIVATE"))), sym("y", Some(("libc.so.6", "GLIBC_2.34")))],
        vec![need("libc.so.6", "GLIBC_PRIVATE"), need("libc.so.6", "GLIBC_2.34")],
    );
    let r = judge("x.so".into(), &private, p.manylinux_policy().unwrap(), &p);
    assert_eq!(
        summarize_symbol_versions(&r.violations).unwrap(),
        "not manylinux_2_28: 1 symbol is allowed by no manylinux policy (GLIBC_PRIVATE from libc.so.6: x), \
         2 past manylinux_2_28 in all"
    );
    // Nothing past the policy: nothing to say.
    let p34 = policy(Some("2_34"));
    let r = judge("x.so".into(), &g12_like(), p34.manylinux_policy().unwrap(), &p34);
    assert_eq!(summarize_symbol_versions(&r.violations), None);
}
