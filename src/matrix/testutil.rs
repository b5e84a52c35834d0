//! Build `BuildConfig` values directly, for the matrix's unit tests (no TOML involved).

use camino::Utf8PathBuf;
use indexmap::IndexMap;

use crate::config::*;

pub fn v(s: &str) -> Version {
    Version::parse(s).unwrap()
}

pub fn cap(s: &str) -> CudaCapability {
    CudaCapability::parse(s).unwrap()
}

/// A kernel of `backend` with nothing set but one source file.
pub fn kernel(backend: Backend) -> Kernel {
    Kernel {
        language: crate::config::Language::cpp_for(backend).expect("a backend kernels compile for"),
        backend,
        depends: vec![CppDependency::Torch],
        src: vec![format!("{}/kernel.cpp", backend.as_str())],
        include: Vec::new(),
        cxx_flags: Vec::new(),
        cuda_capabilities: None,
        cuda_flags: Vec::new(),
        cuda_minver: None,
        rocm_archs: None,
        hip_flags: Vec::new(),
        sycl_flags: Vec::new(),
        cargo_manifest: None,
        tileiras_minver: None,
    }
}

/// A CUDA kernel with these `cuda-capabilities` and `cuda-minver`.
pub fn cuda_kernel(caps: Option<&[&str]>, minver: Option<&str>) -> Kernel {
    Kernel {
        cuda_capabilities: caps.map(|c| c.iter().map(|s| cap(s)).collect()),
        cuda_minver: minver.map(v),
        ..kernel(Backend::Cuda)
    }
}

/// A ROCm kernel with these `rocm-archs`.
pub fn rocm_kernel(archs: &[&str]) -> Kernel {
    Kernel { rocm_archs: Some(archs.iter().map(|s| s.to_string()).collect()), ..kernel(Backend::Rocm) }
}

fn config(backends: &[Backend], kernel_backends: &[Backend], framework: Framework) -> BuildConfig {
    let mut kernels = IndexMap::new();
    for b in kernel_backends {
        kernels.insert(format!("k_{}", b.as_str()), kernel(*b));
    }
    BuildConfig {
        path: Utf8PathBuf::from("build.toml"),
        generation: Generation::Edition5,
        general: General {
            name: "relu".into(),
            version: 1,
            license: "Apache-2.0".into(),
            upstream: None,
            source: None,
            backends: backends.to_vec(),
            ..General::default()
        },
        framework,
        kernels,
    }
}

/// A `[torch]` kernel listing `backends`, with one `[kernel.k_<backend>]` per `kernel_backends`.
pub fn torch_config(backends: &[Backend], kernel_backends: &[Backend]) -> BuildConfig {
    config(backends, kernel_backends, Framework::Torch(TorchArch::default()))
}

/// A `[torch-noarch]` kernel for `backends`.
pub fn noarch_config(backends: &[Backend]) -> BuildConfig {
    config(backends, &[], Framework::TorchNoarch(TorchNoarch::default()))
}

/// A `[tvm-ffi]` kernel listing `backends`, with one kernel per `kernel_backends`.
pub fn tvm_ffi_config(backends: &[Backend], kernel_backends: &[Backend]) -> BuildConfig {
    config(backends, kernel_backends, Framework::TvmFfi(TvmFfi::default()))
}
