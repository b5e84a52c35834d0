//! Property tests: invariants of the cells of any kernel configuration.

use proptest::prelude::*;

use super::cells::{cells, KernelCells, Scope};
use super::check::check;
use super::data::matrix;
use super::naming::parse_variant_name;
use super::testutil::*;
use crate::config::{Backend, BuildConfig, CudaCapability, Framework, StableAbi};

const BACKENDS: [Backend; 7] =
    [Backend::Cpu, Backend::Cuda, Backend::Metal, Backend::Neuron, Backend::Rocm, Backend::Tpu, Backend::Xpu];
const COMPILED: [Backend; 5] = [Backend::Cpu, Backend::Cuda, Backend::Metal, Backend::Rocm, Backend::Xpu];
const CAPS: [&str; 14] = [
    "3.5", "5.0", "7.0", "8.0", "8.0a", "8.9", "9.0", "9.0a", "9.0+PTX", "10.0f", "10.1", "11.0", "12.0a",
    "99.0",
];
const VERSIONS: [&str; 9] = ["2.10", "2.11", "2.12", "2.13", "12.4", "12.6", "13", "13.0", "13.2"];
const GFX: [&str; 5] = ["gfx90a", "gfx940", "gfx942", "gfx1100", "gfx9999"];

fn subset<T: Copy + std::fmt::Debug + 'static>(all: &'static [T]) -> impl Strategy<Value = Vec<T>> {
    proptest::collection::vec(any::<bool>(), all.len())
        .prop_map(move |mask| all.iter().zip(mask).filter(|(_, m)| *m).map(|(b, _)| *b).collect())
}

fn opt_version() -> impl Strategy<Value = Option<&'static str>> {
    proptest::option::of(proptest::sample::select(&VERSIONS[..]))
}

prop_compose! {
    fn any_config()(
        backends in subset(&BACKENDS),
        kernel_backends in subset(&COMPILED),
        framework in 0..3u8,
        stable in proptest::option::of(proptest::sample::select(&["2.9", "2.10", "2.11"][..])),
        torch_min in opt_version(), torch_max in opt_version(),
        cuda_min in opt_version(), cuda_max in opt_version(),
        caps in proptest::option::of(subset(&CAPS)),
        cuda_minver in opt_version(),
        archs in proptest::option::of(subset(&GFX)),
    ) -> BuildConfig {
        let mut c = match framework {
            0 => torch_config(&backends, &kernel_backends),
            1 => noarch_config(&backends),
            _ => tvm_ffi_config(&backends, &kernel_backends),
        };
        if let Framework::Torch(t) = &mut c.framework {
            t.stable_abi = stable.map(|s| StableAbi::All(v(s))).unwrap_or_default();
            t.minver = torch_min.map(v);
            t.maxver = torch_max.map(v);
        }
        c.general.cuda.minver = cuda_min.map(v);
        c.general.cuda.maxver = cuda_max.map(v);
        for k in c.kernels.values_mut() {
            if k.backend == Backend::Cuda {
                k.cuda_capabilities = caps.as_ref().map(|l| l.iter().map(|s| cap(s)).collect());
                k.cuda_minver = cuda_minver.map(v);
            }
            if k.backend == Backend::Rocm {
                k.rocm_archs = archs.as_ref().map(|l| l.iter().map(|s| s.to_string()).collect());
            }
        }
        c
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn every_cell_is_valid_and_uniquely_named(config in any_config()) {
        for system in &matrix().systems {
            let all = cells(&config, system, Scope::All);
            let bundle = cells(&config, system, Scope::Bundle);
            // Sorted and unique.
            prop_assert!(all.windows(2).all(|w| w[0].name < w[1].name));
            prop_assert!(bundle.windows(2).all(|w| w[0].name < w[1].name));
            // The bundle is part of the whole, described identically.
            for c in &bundle {
                prop_assert!(c.bundle);
                prop_assert!(all.contains(c), "{} differs between scopes", c.name);
            }
            for c in &all {
                prop_assert!(parse_variant_name(&c.name).is_some(), "{} does not parse", c.name);
                prop_assert!(parse_variant_name(&c.arch_variant).is_some(), "{} does not parse", c.arch_variant);
                prop_assert_eq!(&c.system, system);
                prop_assert!(config.general.backends.contains(&c.backend));
                prop_assert_eq!(c.noarch, c.name == crate::matrix::naming::noarch_name(c.backend));
                prop_assert!(c.noarch || c.name.ends_with(system.as_str()));
                if let Framework::TvmFfi(_) = config.framework {
                    prop_assert!(!c.noarch && c.name.starts_with("tvm-ffi"), "{} of a tvm-ffi kernel", c.name);
                }
                // Never a fallback: compiled CUDA cells claim only what some kernel asked for.
                let explicit = config.kernels.values().filter(|k| k.backend == Backend::Cuda).all(|k| k.cuda_capabilities.is_some());
                if !c.noarch && c.backend == Backend::Cuda && explicit {
                    let asked: Vec<&CudaCapability> = config.kernels.values().filter_map(|k| k.cuda_capabilities.as_ref()).flatten().collect();
                    for got in c.cuda_capabilities.as_deref().unwrap_or_default() {
                        let got = CudaCapability::parse(got).unwrap();
                        let renamed = |k: &CudaCapability| (k.major, k.minor) == (10, 1) && (got.major, got.minor) == (11, 0);
                        prop_assert!(
                            asked.iter().any(|k| k.suffix == got.suffix && k.ptx == got.ptx
                                && ((k.major, k.minor) == (got.major, got.minor) || renamed(k))),
                            "{} claims {} that no kernel asked for", c.name, got
                        );
                    }
                }
            }
        }
        // And the checks never panic.
        let _ = check(&config, &KernelCells::of(&config));
    }
}
