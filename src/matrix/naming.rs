//! Build variant names: the directory names under `build/` that the `kernels` loader matches.
//!
//! The formats are upstream's (nix-builder §3.3, kernel-builder-cli §3) and the loader's grammar
//! (kernels-loader A3):
//!
//! - torch arch: `torch<MAJ><MIN>-cxx11-<compute>-<system>` on Linux,
//!   `torch<MAJ><MIN>-<compute>-<system>` on darwin (no ABI tag);
//! - stable ABI: `torch-stable-abi<MAJ><MIN>-<compute>-<system>` (the ABI target, not the torch
//!   version; never an ABI tag);
//! - tvm-ffi: `tvm-ffi<MAJ><MIN>-<compute>-<system>`;
//! - noarch: `torch-<backend>` (`torch-npu` for CANN);
//! - MLX noarch: `mlx-<backend>` (`mlx-metal`, the only one: an `[mlx-noarch]` kernel is
//!   metal-only). There is no legacy spelling: the 0.19 loader's grammar is the only one that
//!   has MLX, and loaders before 0.19 cannot load an MLX kernel at all.
//!
//! `<compute>` is `cu<MAJ><MIN>`, `rocm<MAJ><MIN>`, `xpu<MAJ><MIN>` (`2025.3.2` → `xpu20253`),
//! `cann<MAJ><MIN>`, or the bare backend name for `cpu`, `metal`, `neuron` and `tpu`.

use super::data::naming;
use crate::config::{Backend, Version};

/// The compute part of a variant name: `cu126`, `rocm71`, `xpu20253`, `cpu`, `metal`, `tpu`.
///
/// `version` is the backend version of the build set (`None` for cpu, metal, neuron and tpu).
pub fn compute_tag(backend: Backend, version: Option<&Version>) -> String {
    let prefix = compute_prefix(backend);
    match version {
        Some(v) => format!("{prefix}{}", v.flat_major_minor()),
        None => prefix.to_owned(),
    }
}

/// The `<compute>` prefix of `backend`'s variant names (`cu` for CUDA), from the matrix file.
pub fn compute_prefix(backend: Backend) -> &'static str {
    naming().compute_prefixes.get(backend.as_str()).map_or(backend.as_str(), String::as_str)
}

/// The backend a `<compute>` part names: its prefix followed by nothing or by the version's
/// digits (`cu126` → CUDA, `cpu` → CPU).
pub fn backend_of_compute(compute: &str) -> Option<Backend> {
    Backend::ALL.into_iter().find(|&b| {
        compute.strip_prefix(compute_prefix(b)).is_some_and(|v| v.bytes().all(|c| c.is_ascii_digit()))
    })
}

/// The noarch variant name of `backend` (`torch-cuda`; CANN's is `torch-npu`), from the
/// matrix file.
pub fn noarch_name(backend: Backend) -> String {
    naming()
        .noarch_names
        .get(backend.as_str())
        .cloned()
        .unwrap_or_else(|| format!("torch-{}", backend.as_str()))
}

/// The MLX noarch variant name of `backend`: `mlx-metal`.
pub fn mlx_noarch_name(backend: Backend) -> String {
    format!("mlx-{}", backend.as_str())
}

/// The name of a cell in the variant grammar of kernels >= 0.19 (`_internals/variants.py`):
/// `torch-2.15-cxx11-cuda-13.2-cpython-3.9-abi3-x86_64-linux`,
/// `torch-stable-abi-2.10-cuda-12.6-cpython-3.9-abi3-x86_64-linux`,
/// `tvm-ffi-0.1-cpu-cpython-3.9-abi3-x86_64-linux`; noarch names (`torch-cuda`, `mlx-metal`)
/// are the same in both grammars. The Python part is the one a legacy name implies
/// (`cpython-3.9-abi3`), so the 0.19 loader reads both names as the same variant.
///
/// kernel-builder writes the legacy name: kernels 0.17.2 and 0.18.3 read a new-grammar torch
/// name as a noarch variant and refuse the stable-ABI and tvm-ffi ones (see README, "Variant
/// names"). This spelling is for `list-variants --names` and for trees that only 0.19 can load.
pub fn loader_0_19_name(cell: &super::Cell) -> String {
    let legacy = &cell.name;
    let Some(parsed) = parse_variant_name(legacy) else { return legacy.clone() };
    // A legacy version part: the first digit is the major version (the loader's rule).
    let dotted = |v: &str| match v.split_at_checked(1) {
        Some((major, minor)) if !minor.is_empty() => format!("{major}.{minor}"),
        _ => v.to_owned(),
    };
    let framework = match &parsed {
        ParsedVariant::TorchArch { abi_tag, .. } => match abi_tag {
            Some(tag) => format!("torch-{}-{tag}", cell.torch_version),
            None => format!("torch-{}", cell.torch_version),
        },
        ParsedVariant::StableAbi { abi, .. } => format!("torch-stable-abi-{}", dotted(abi)),
        ParsedVariant::TvmFfi { tvm_ffi, .. } => format!("tvm-ffi-{}", dotted(tvm_ffi)),
        ParsedVariant::Noarch { .. } | ParsedVariant::MlxNoarch { .. } => return legacy.clone(),
    };
    format!(
        "{framework}-{}-cpython-3.9-abi3-{}",
        compute_0_19(cell.backend, cell.backend_version.as_deref()),
        cell.system
    )
}

/// The backend part of a 0.19 name: `cuda-12.6`, `xpu-2025.3`, `cpu`.
fn compute_0_19(backend: Backend, version: Option<&str>) -> String {
    match version.map(Version::parse) {
        Some(Ok(v)) => format!("{}-{}.{}", backend.as_str(), v.part(0), v.part(1)),
        _ => backend.as_str().to_owned(),
    }
}

/// The 0.19 spelling of the torch arch variant [`torch_arch_name`] names for torch `torch`,
/// `backend` at `version` (`None` for CPU and Metal) on `system`, as [`loader_0_19_name`]
/// spells a cell: `torch-2.14-cxx11-cuda-13.0-cpython-3.9-abi3-x86_64-linux`.
pub fn torch_arch_name_0_19(
    torch: &Version,
    backend: Backend,
    version: Option<&str>,
    system: &str,
) -> String {
    let abi = if has_abi_tag(system) { format!("-{}", naming().abi_tag.tag) } else { String::new() };
    format!(
        "torch-{}.{}{abi}-{}-cpython-3.9-abi3-{system}",
        torch.part(0),
        torch.part(1),
        compute_0_19(backend, version)
    )
}

/// The legacy name of `name` written in the kernels 0.19 grammar with the Python part legacy
/// names imply (`torch-2.15-cxx11-cuda-13.2-cpython-3.9-abi3-x86_64-linux` →
/// `torch215-cxx11-cu132-x86_64-linux`): the inverse of [`loader_0_19_name`], for saying
/// which variant a user meant. `None` for any other name (a legacy one, a noarch one, or a
/// Python part kernel-builder does not build).
pub fn legacy_name_of_0_19(name: &str) -> Option<String> {
    // `2.15` → `215`, `2025.3` → `20253`: the legacy parts are the dotted ones run together.
    let flat = |v: &str| -> Option<String> {
        let parts: Vec<&str> = v.split('.').collect();
        (parts.len() >= 2 && parts.iter().all(|p| is_digits(p))).then(|| parts.concat())
    };
    let parts: Vec<&str> = name.split('-').collect();
    let n = parts.len();
    if n < 7 || parts[n - 5..n - 2] != ["cpython", "3.9", "abi3"] {
        return None;
    }
    let (cpu, os) = (parts[n - 2], parts[n - 1]);
    let (framework, compute) = match &parts[..n - 5] {
        ["torch", "stable", "abi", v, rest @ ..] => (format!("torch-stable-abi{}", flat(v)?), rest),
        ["tvm", "ffi", v, rest @ ..] => (format!("tvm-ffi{}", flat(v)?), rest),
        ["torch", v, tag @ ("cxx11" | "cxx98"), rest @ ..] => (format!("torch{}-{tag}", flat(v)?), rest),
        ["torch", v, rest @ ..] => (format!("torch{}", flat(v)?), rest),
        _ => return None,
    };
    let compute = match compute {
        [plain] => (*plain).to_owned(),
        ["cuda", v] => format!("cu{}", flat(v)?),
        [backend @ ("rocm" | "xpu" | "cann"), v] => format!("{backend}{}", flat(v)?),
        _ => return None,
    };
    let legacy = format!("{framework}-{compute}-{cpu}-{os}");
    parse_variant_name(&legacy).is_some().then_some(legacy)
}

/// Which grammar a listing of variant names uses (`list-variants --names`, `matrix check-wheel
/// --names`): the legacy names kernel-builder writes (read by kernels 0.17.2, 0.18.3 and
/// 0.19.1), the grammar of kernels 0.19 (which also reads the legacy names), or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum NameGrammar {
    Legacy,
    #[value(name = "0.19")]
    V019,
    Both,
}

impl NameGrammar {
    /// `legacy` in this grammar, given its 0.19 spelling `v019`: one name, or both separated
    /// by a tab.
    pub fn show(self, legacy: &str, v019: &str) -> String {
        match self {
            NameGrammar::Legacy => legacy.to_owned(),
            NameGrammar::V019 => v019.to_owned(),
            NameGrammar::Both => format!("{legacy}\t{v019}"),
        }
    }
}

/// Whether variant names on `system` carry the ABI tag (`cxx11`; every Linux system does).
pub fn has_abi_tag(system: &str) -> bool {
    naming().abi_tag.system_suffixes.iter().any(|s| system.ends_with(s.as_str()))
}

/// The torch arch variant name (also the key of dev and test shells):
/// `torch212-cxx11-cu126-x86_64-linux`, `torch212-metal-aarch64-darwin`.
pub fn torch_arch_name(torch: &Version, compute: &str, system: &str) -> String {
    let abi = if has_abi_tag(system) { format!("-{}", naming().abi_tag.tag) } else { String::new() };
    format!("torch{}{abi}-{compute}-{system}", torch.flat_major_minor())
}

/// The torch stable-ABI variant name: `torch-stable-abi211-cu126-x86_64-linux`.
pub fn stable_abi_name(abi: &Version, compute: &str, system: &str) -> String {
    format!("torch-stable-abi{}-{compute}-{system}", abi.flat_major_minor())
}

/// The tvm-ffi variant name: `tvm-ffi01-cu126-x86_64-linux`.
pub fn tvm_ffi_name(tvm_ffi: &Version, compute: &str, system: &str) -> String {
    format!("tvm-ffi{}-{compute}-{system}", tvm_ffi.flat_major_minor())
}

/// A variant name taken apart by the `kernels` loader's grammar (kernels-loader A3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParsedVariant {
    /// `torch<MAJ><MIN>[-cxx11|-cxx98]-<compute>-<cpu>-<os>`.
    TorchArch { torch: String, abi_tag: Option<String>, compute: String, cpu: String, os: String },
    /// `torch-stable-abi<MAJ><MIN>-<compute>-<cpu>-<os>`.
    StableAbi { abi: String, compute: String, cpu: String, os: String },
    /// `tvm-ffi<MAJ><MIN>-<compute>-<cpu>-<os>`.
    TvmFfi { tvm_ffi: String, compute: String, cpu: String, os: String },
    /// `torch-<backend>` (including the legacy `torch-universal`).
    Noarch { backend: String },
    /// `mlx-<backend>` (kernels >= 0.19 only).
    MlxNoarch { backend: String },
}

/// Parse a variant directory name the way the `kernels` loader does (A3); `None` when the
/// loader would not recognise it. Used by tests to prove that every generated name loads.
pub fn parse_variant_name(name: &str) -> Option<ParsedVariant> {
    const NOARCH: [&str; 8] = ["cuda", "rocm", "xpu", "cpu", "metal", "neuron", "tpu", "npu"];
    if let Some(rest) = name.strip_prefix("torch-stable-abi") {
        let (ver, compute, cpu, os) = split_arch(rest)?;
        return Some(ParsedVariant::StableAbi { abi: ver, compute, cpu, os });
    }
    if let Some(rest) = name.strip_prefix("tvm-ffi") {
        let (ver, compute, cpu, os) = split_arch(rest)?;
        return Some(ParsedVariant::TvmFfi { tvm_ffi: ver, compute, cpu, os });
    }
    if let Some(backend) = name.strip_prefix("mlx-") {
        // The 0.19.1 loader: `mlx-<noarch backend>`; versioned MLX variants do not exist yet.
        return NOARCH.contains(&backend).then(|| ParsedVariant::MlxNoarch { backend: backend.to_owned() });
    }
    if let Some(backend) = name.strip_prefix("torch-") {
        return (NOARCH.contains(&backend) || backend == "universal")
            .then(|| ParsedVariant::Noarch { backend: backend.to_owned() });
    }
    let rest = name.strip_prefix("torch")?;
    let parts: Vec<&str> = rest.split('-').collect();
    let (torch, abi_tag, tail) = match parts.as_slice() {
        [v, tag @ ("cxx11" | "cxx98"), tail @ ..] => (*v, Some((*tag).to_owned()), tail),
        [v, tail @ ..] => (*v, None, tail),
        [] => return None,
    };
    let [compute, cpu, os] = tail else { return None };
    if !is_digits(torch) || torch.len() < 2 || !valid_compute(compute) || !valid_cpu_os(cpu, os) {
        return None;
    }
    if abi_tag.is_some() && *os != "linux" {
        return None;
    }
    Some(ParsedVariant::TorchArch {
        torch: torch.to_owned(),
        abi_tag,
        compute: (*compute).to_owned(),
        cpu: (*cpu).to_owned(),
        os: (*os).to_owned(),
    })
}

fn split_arch(rest: &str) -> Option<(String, String, String, String)> {
    let parts: Vec<&str> = rest.split('-').collect();
    let [ver, compute, cpu, os] = parts.as_slice() else { return None };
    if !is_digits(ver) || ver.len() < 2 || !valid_compute(compute) || !valid_cpu_os(cpu, os) {
        return None;
    }
    Some(((*ver).to_owned(), (*compute).to_owned(), (*cpu).to_owned(), (*os).to_owned()))
}

fn is_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

fn valid_compute(c: &str) -> bool {
    if ["cpu", "metal", "neuron", "tpu"].contains(&c) {
        return true;
    }
    ["cu", "rocm", "xpu", "cann"]
        .iter()
        .any(|p| c.strip_prefix(p).is_some_and(|v| is_digits(v) && v.len() >= 2))
}

fn valid_cpu_os(cpu: &str, os: &str) -> bool {
    ["x86_64", "aarch64"].contains(&cpu) && ["linux", "darwin", "windows"].contains(&os)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn compute_tags_flatten_major_minor() {
        assert_eq!(compute_tag(Backend::Cuda, Some(&v("12.6"))), "cu126");
        assert_eq!(compute_tag(Backend::Cuda, Some(&v("13.0"))), "cu130");
        assert_eq!(compute_tag(Backend::Cuda, Some(&v("13"))), "cu130");
        assert_eq!(compute_tag(Backend::Rocm, Some(&v("7.1"))), "rocm71");
        assert_eq!(compute_tag(Backend::Xpu, Some(&v("2025.3.2"))), "xpu20253");
        assert_eq!(compute_tag(Backend::Xpu, Some(&v("2026.0.0"))), "xpu20260");
        assert_eq!(compute_tag(Backend::Metal, None), "metal");
        assert_eq!(compute_tag(Backend::Tpu, None), "tpu");
        assert_eq!(compute_tag(Backend::Cann, Some(&v("8.2"))), "cann82");
    }

    #[test]
    fn compute_parts_name_their_backend() {
        assert_eq!(backend_of_compute("cu126"), Some(Backend::Cuda));
        assert_eq!(backend_of_compute("cpu"), Some(Backend::Cpu));
        assert_eq!(backend_of_compute("rocm71"), Some(Backend::Rocm));
        assert_eq!(backend_of_compute("xpu20253"), Some(Backend::Xpu));
        assert_eq!(backend_of_compute("cann82"), Some(Backend::Cann));
        assert_eq!(backend_of_compute("metal"), Some(Backend::Metal));
        assert_eq!(backend_of_compute("cuda"), None);
        assert_eq!(noarch_name(Backend::Cann), "torch-npu");
        assert_eq!(noarch_name(Backend::Rocm), "torch-rocm");
        assert!(has_abi_tag("aarch64-linux") && !has_abi_tag("aarch64-darwin"));
    }

    #[test]
    fn names_follow_the_upstream_formats() {
        assert_eq!(torch_arch_name(&v("2.13"), "cu130", "x86_64-linux"), "torch213-cxx11-cu130-x86_64-linux");
        assert_eq!(torch_arch_name(&v("2.13"), "cpu", "aarch64-darwin"), "torch213-cpu-aarch64-darwin");
        assert_eq!(
            stable_abi_name(&v("2.11"), "cu126", "x86_64-linux"),
            "torch-stable-abi211-cu126-x86_64-linux"
        );
        assert_eq!(tvm_ffi_name(&v("0.1"), "cu126", "x86_64-linux"), "tvm-ffi01-cu126-x86_64-linux");
    }

    #[test]
    fn loader_grammar_accepts_the_reference_examples() {
        for name in [
            "torch211-cxx11-cu130-x86_64-linux",
            "torch211-cu128-x86_64-linux",
            "torch212-cxx11-rocm71-x86_64-linux",
            "torch212-cxx11-xpu20253-x86_64-linux",
            "torch212-cpu-aarch64-darwin",
            "torch212-metal-aarch64-darwin",
            "torch-stable-abi210-cu126-x86_64-linux",
            "tvm-ffi01-cu128-x86_64-linux",
            "torch-cuda",
            "torch-universal",
            "torch-npu",
        ] {
            assert!(parse_variant_name(name).is_some(), "{name}");
        }
        assert_eq!(
            parse_variant_name("torch212-cxx11-cu126-x86_64-linux"),
            Some(ParsedVariant::TorchArch {
                torch: "212".into(),
                abi_tag: Some("cxx11".into()),
                compute: "cu126".into(),
                cpu: "x86_64".into(),
                os: "linux".into(),
            })
        );
    }

    #[test]
    fn loader_grammar_rejects_malformed_names() {
        for name in [
            "torch-gpu",
            "torch212-cxx11-cu126-x86_64",
            "torch212-cxx11-cuda-x86_64-linux",
            "torch212-cxx11-cpu-aarch64-darwin",
            "torch2-cpu-x86_64-linux",
            "tvm-ffi01-cu126-riscv64-linux",
            "torch-stable-abi-cu126-x86_64-linux",
            "relu",
        ] {
            assert_eq!(parse_variant_name(name), None, "{name}");
        }
    }

    /// The 0.19 spelling of each kind of name, as the 0.19.1 loader writes it for the same
    /// variant (probed with `kernels._internals.variants`; the Python test checks every cell).
    #[test]
    fn the_0_19_spelling_of_each_kind_of_name() {
        use crate::matrix::{Cell, CellKind};
        let cell = |name: &str, backend: Backend, version: Option<&str>, torch: &str, system: &str| Cell {
            name: name.to_owned(),
            system: system.to_owned(),
            backend,
            backend_version: version.map(str::to_owned),
            torch_version: torch.to_owned(),
            noarch: false,
            bundle: true,
            kind: CellKind::Torch,
            arch_variant: String::new(),
            cuda_capabilities: None,
            rocm_archs: None,
            matrix: String::new(),
            matrix_revision: String::new(),
        };
        for (c, expected) in [
            (
                cell(
                    "torch215-cxx11-cu132-x86_64-linux",
                    Backend::Cuda,
                    Some("13.2"),
                    "2.15",
                    "x86_64-linux",
                ),
                "torch-2.15-cxx11-cuda-13.2-cpython-3.9-abi3-x86_64-linux",
            ),
            (
                cell("torch215-metal-aarch64-darwin", Backend::Metal, None, "2.15", "aarch64-darwin"),
                "torch-2.15-metal-cpython-3.9-abi3-aarch64-darwin",
            ),
            (
                cell(
                    "torch-stable-abi210-cu126-x86_64-linux",
                    Backend::Cuda,
                    Some("12.6"),
                    "2.15",
                    "x86_64-linux",
                ),
                "torch-stable-abi-2.10-cuda-12.6-cpython-3.9-abi3-x86_64-linux",
            ),
            (
                cell("tvm-ffi01-cpu-x86_64-linux", Backend::Cpu, None, "2.15", "x86_64-linux"),
                "tvm-ffi-0.1-cpu-cpython-3.9-abi3-x86_64-linux",
            ),
            (
                cell(
                    "torch213-cxx11-xpu20253-x86_64-linux",
                    Backend::Xpu,
                    Some("2025.3.2"),
                    "2.13",
                    "x86_64-linux",
                ),
                "torch-2.13-cxx11-xpu-2025.3-cpython-3.9-abi3-x86_64-linux",
            ),
            (
                cell(
                    "torch213-cxx11-rocm71-x86_64-linux",
                    Backend::Rocm,
                    Some("7.1"),
                    "2.13",
                    "x86_64-linux",
                ),
                "torch-2.13-cxx11-rocm-7.1-cpython-3.9-abi3-x86_64-linux",
            ),
            (cell("torch-cuda", Backend::Cuda, Some("13.2"), "2.15", "x86_64-linux"), "torch-cuda"),
            (cell("mlx-metal", Backend::Metal, None, "2.15", "aarch64-darwin"), "mlx-metal"),
        ] {
            assert_eq!(loader_0_19_name(&c), expected);
            // And back: a name a user copies from kernels 0.19 is taken to the one we write.
            let back = legacy_name_of_0_19(expected);
            assert_eq!(back, (expected != c.name).then(|| c.name.clone()), "{expected}");
            // The same spelling from the parts `matrix check-wheel` has.
            if let Some(ParsedVariant::TorchArch { .. }) = parse_variant_name(&c.name) {
                let torch = Version::parse(&c.torch_version).unwrap();
                assert_eq!(
                    torch_arch_name_0_19(&torch, c.backend, c.backend_version.as_deref(), &c.system),
                    expected
                );
            }
        }
        assert_eq!(NameGrammar::Both.show("torch-cuda", "torch-cuda"), "torch-cuda\ttorch-cuda");
        assert_eq!(
            parse_variant_name("mlx-metal"),
            Some(ParsedVariant::MlxNoarch { backend: "metal".to_owned() })
        );
        assert_eq!(parse_variant_name("mlx-2.0"), None);
    }

    #[test]
    fn only_0_19_names_of_legacy_variants_have_a_legacy_name() {
        for other in [
            "torch215-cxx11-cu132-x86_64-linux",
            "torch-cuda",
            "torch-2.15-cxx11-cuda-13.2-cpython-3.12-x86_64-linux",
            "torch-2.15-cxx11-cuda-13.2-cpython-3.9-abi3t-x86_64-linux",
            "torch-2.15-cxx11-cuda-13-cpython-3.9-abi3-x86_64-linux",
            "torch-2.15-cxx11-gpu-13.2-cpython-3.9-abi3-x86_64-linux",
            "sdk-cuda-13.2-cpython-3.9-abi3-x86_64-linux",
            "-cpython-3.9-abi3-x86_64-linux",
        ] {
            assert_eq!(legacy_name_of_0_19(other), None, "{other}");
        }
    }
}
