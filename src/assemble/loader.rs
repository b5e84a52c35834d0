//! Which release of the `kernels` loader a variant needs, computed from what its
//! `metadata.json` uses, and whether that release accepts it (kernels-loader-and-helion.md
//! A8, A9, A12).
//!
//! The rules (each a fact about a release, in [`RULES`]):
//!
//! - a `helion` python dependency: kernels 0.17.0, the first release whose dependency table
//!   has it (0.16.x refuses it as "unsupported kernel dependency: helion");
//! - a `backend.archs` list: kernels 0.17.0, the first release whose arch check
//!   (`check_arch`) reads it, in the format it parses (`X.Y`, `X.Ya`, `X.Yf`, `X.Y+PTX`, gfx
//!   names); an older loader ignores the list and loads the variant on any GPU;
//! - the zip build layout (`"build-layout": "zip"`): kernels 0.19.0, the first release whose
//!   importer reads `<id>.zip` (0.18.3 and older look for `__init__.py` in the variant
//!   directory and fail with "No kernel module found");
//! - an MLX noarch variant (`mlx-metal`): kernels 0.19.0, the first release whose variant
//!   grammar has MLX (`MlxNoarch`) and selects it where `mlx` is installed.
//!
//! `kernels-minver` is the highest version any rule asks for, absent when none applies (any
//! release loads the variant). [`check_loadable`] then checks the variant against what that
//! release accepts (its dependency table, the kernel name rule): a variant the named release
//! could not load is refused before anything is written.

use crate::config::{deps, validate, Backend};

use super::metadata::Metadata;

/// A `kernels` release, `major.minor.patch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct LoaderVersion(pub u32, pub u32, pub u32);

impl std::fmt::Display for LoaderVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// One fact: variants that use `feature` need at least `min`.
pub struct Rule {
    /// What the variant uses, as shown in messages.
    pub feature: &'static str,
    /// The first release that accepts it.
    pub min: LoaderVersion,
    /// Whether a variant's metadata uses it.
    pub applies: fn(&Metadata) -> bool,
}

/// Every rule, oldest requirement first.
pub const RULES: &[Rule] = &[
    Rule {
        feature: "the `helion` python dependency",
        min: LoaderVersion(0, 17, 0),
        applies: |m| m.python_depends.iter().any(|d| d == "helion"),
    },
    Rule {
        feature: "a `backend.archs` list (the loader's arch check)",
        min: LoaderVersion(0, 17, 0),
        applies: |m| m.backend.archs.as_ref().is_some_and(|a| !a.is_empty()),
    },
    Rule {
        feature: "the zip build layout",
        min: LoaderVersion(0, 19, 0),
        applies: |m| m.build_layout == super::build_layout::BuildLayout::Zip,
    },
    Rule { feature: "an MLX noarch variant (`mlx-metal`)", min: LoaderVersion(0, 19, 0), applies: |m| m.mlx },
];

/// The release the variant needs and the features that ask for it; `None` when no rule
/// applies.
pub fn kernels_minver(m: &Metadata) -> Option<(LoaderVersion, Vec<&'static str>)> {
    let applying: Vec<&Rule> = RULES.iter().filter(|r| (r.applies)(m)).collect();
    let max = applying.iter().map(|r| r.min).max()?;
    Some((max, applying.iter().filter(|r| r.min == max).map(|r| r.feature).collect()))
}

/// Check that release `release` (from [`kernels_minver`], or any release when `None`) loads
/// a variant with metadata `m`: every python dependency is in that release's table (general
/// names, then the backend's), the kernel name matches the loader's rule, and every rule the
/// variant uses is satisfied by `release`.
///
/// Errors: one line per reason, naming the dependency or the rule.
pub fn check_loadable(m: &Metadata, release: Option<LoaderVersion>) -> anyhow::Result<()> {
    let mut why = Vec::new();
    let at = release.map(|r| format!("kernels {r}")).unwrap_or_else(|| "any kernels release".to_owned());
    if !validate::is_valid_name(&m.name) {
        why.push(format!("the kernel name `{}` does not match the loader's name rule", m.name));
    }
    let backend: Backend = m.backend.kind;
    for d in &m.python_depends {
        if deps::python_dependency(d, None).is_none() && deps::python_dependency(d, Some(backend)).is_none() {
            why.push(format!("{at} does not know the {backend} python dependency `{d}` (it would raise \"unsupported kernel dependency\")"));
        }
    }
    for r in RULES.iter().filter(|r| (r.applies)(m)) {
        if release.is_none_or(|v| v < r.min) {
            why.push(format!("{} needs kernels {} or newer, not {at}", r.feature, r.min));
        }
    }
    anyhow::ensure!(why.is_empty(), "{}", why.join("; "));
    Ok(())
}

/// `metadata.json`'s bytes for a variant with metadata `m`, with `kernels-minver` from
/// [`kernels_minver`].
///
/// Errors when that release could not load the variant ([`check_loadable`]: a python
/// dependency unknown to it, a kernel name it rejects): nothing is written then.
pub fn metadata_json(m: &Metadata) -> anyhow::Result<Vec<u8>> {
    let minver = kernels_minver(m).map(|(v, _)| v);
    if let Err(why) = check_loadable(m, minver) {
        anyhow::bail!(
            "refusing to write metadata.json of `{}` ({} variant): the kernels loader could not load it: {why}",
            m.id,
            m.backend.kind
        );
    }
    m.to_json_bytes(minver.map(|v| v.to_string()))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::build_layout::BuildLayout;
    use super::super::metadata::{BackendInfo, Provenance};
    use super::*;
    use crate::hash::digest::{Algorithm, Digest};
    use crate::source::provenance::BuilderProvenance;

    fn meta(deps: &[&str], archs: Option<&[&str]>) -> Metadata {
        Metadata {
            name: "vector-add".into(),
            id: "_vector_add_cuda_abc1234".into(),
            version: 1,
            license: "Apache-2.0".into(),
            upstream: None,
            source: None,
            python_depends: deps.iter().map(|s| s.to_string()).collect(),
            kernel_depends: Vec::new(),
            backend: BackendInfo {
                kind: Backend::Cuda,
                archs: archs.map(|a| a.iter().map(|s| s.to_string()).collect()),
            },
            build_layout: BuildLayout::Files,
            digest: Digest { algorithm: Algorithm::Sha256, files: BTreeMap::new() },
            provenance: Provenance {
                kernel_builder: BuilderProvenance { version: "0.1.0".into(), commit: None, dirty: None },
                kernel: None,
            },
            build: None,
            mlx: false,
        }
    }

    #[test]
    fn an_mlx_variant_needs_0_19() {
        let mut m = meta(&[], None);
        m.backend.kind = Backend::Metal;
        m.mlx = true;
        assert_eq!(
            kernels_minver(&m),
            Some((LoaderVersion(0, 19, 0), vec!["an MLX noarch variant (`mlx-metal`)"]))
        );
        assert_eq!(
            check_loadable(&m, Some(LoaderVersion(0, 18, 3))).map_err(|e| e.to_string()),
            Err("an MLX noarch variant (`mlx-metal`) needs kernels 0.19.0 or newer, not kernels 0.18.3"
                .into())
        );
    }

    #[test]
    fn helion_and_archs_need_0_17() {
        assert_eq!(kernels_minver(&meta(&[], None)), None);
        assert_eq!(kernels_minver(&meta(&["einops"], Some(&[]))), None);
        assert_eq!(
            kernels_minver(&meta(&["helion"], None)),
            Some((LoaderVersion(0, 17, 0), vec!["the `helion` python dependency"]))
        );
        let (v, why) = kernels_minver(&meta(&["helion"], Some(&["9.0"]))).unwrap();
        assert_eq!(v.to_string(), "0.17.0");
        assert_eq!(why.len(), 2);
    }

    #[test]
    fn the_zip_layout_needs_0_19() {
        let mut m = meta(&["helion"], Some(&["9.0"]));
        m.build_layout = BuildLayout::Zip;
        assert_eq!(kernels_minver(&m), Some((LoaderVersion(0, 19, 0), vec!["the zip build layout"])));
        assert_eq!(
            check_loadable(&m, Some(LoaderVersion(0, 18, 3))).map_err(|e| e.to_string()),
            Err("the zip build layout needs kernels 0.19.0 or newer, not kernels 0.18.3".into())
        );
        let text = String::from_utf8(metadata_json(&m).unwrap()).unwrap();
        assert!(text.contains("\"build-layout\": \"zip\",\n  \"kernels-minver\": \"0.19.0\",\n"), "{text}");
    }

    #[test]
    fn the_named_release_must_load_the_variant() {
        let m = meta(&["helion"], None);
        assert!(check_loadable(&m, kernels_minver(&m).map(|v| v.0)).is_ok());
        assert_eq!(
            check_loadable(&m, Some(LoaderVersion(0, 16, 2))).map_err(|e| e.to_string()),
            Err("the `helion` python dependency needs kernels 0.17.0 or newer, not kernels 0.16.2".into())
        );
        let m = meta(&["nvidia-cutlass-dsl"], None);
        assert!(check_loadable(&m, None).is_ok(), "a cuda dependency on a cuda variant");
        let mut rocm = meta(&["nvidia-cutlass-dsl", "helion-nightly"], None);
        rocm.backend.kind = Backend::Rocm;
        let err = check_loadable(&rocm, None).unwrap_err().to_string();
        assert!(err.contains("does not know the rocm python dependency `nvidia-cutlass-dsl`"), "{err}");
        assert!(err.contains("`helion-nightly`"), "{err}");
    }

    #[test]
    fn no_kernels_minver_without_a_feature_that_needs_one_and_refusal_of_unknown_deps() {
        let mut m = Metadata {
            name: "relu".into(),
            id: "_relu_cpu_abc1234".into(),
            version: 1,
            license: "MIT".into(),
            upstream: None,
            source: None,
            python_depends: vec!["einops".into()],
            kernel_depends: vec![],
            backend: BackendInfo { kind: Backend::Cpu, archs: None },
            build_layout: BuildLayout::Files,
            digest: Digest { algorithm: Algorithm::Sha256, files: BTreeMap::new() },
            provenance: Provenance {
                kernel_builder: BuilderProvenance { version: "0.1.0".into(), commit: None, dirty: None },
                kernel: None,
            },
            build: None,
            mlx: false,
        };
        let text = String::from_utf8(metadata_json(&m).unwrap()).unwrap();
        assert!(!text.contains("kernels-minver"), "{text}");
        m.python_depends.push("nvidia-cutlass-dsl".into());
        let err = metadata_json(&m).unwrap_err().to_string();
        assert_eq!(
            err,
            "refusing to write metadata.json of `_relu_cpu_abc1234` (cpu variant): the kernels loader could not load it: \
             any kernels release does not know the cpu python dependency `nvidia-cutlass-dsl` (it would raise \"unsupported kernel dependency\")"
        );
    }
}
