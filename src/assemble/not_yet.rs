//! What `build.toml` may describe but this kernel-builder cannot build natively yet: the Rust
//! CUDA kernels (`rust-cuda-oxide`, `rust-cutile`, edition 6; `rust-cpu` builds with cargo,
//! [`super::compiled::cargo`]), and a generated CMake project for any Rust kernel. They are
//! read, validated and planned into cells like every other kernel; a build that reaches one
//! refuses it with a [`NotYet`] that names the toolchain it needs, instead of compiling a crate
//! as C++.

use crate::config::{Backend, BuildConfig, Language};

/// A cell this kernel-builder cannot build natively yet, and what it would need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotYet {
    /// A `[kernel.<kernel>]` written in a Rust `language`.
    RustKernel { kernel: String, language: Language },
}

impl NotYet {
    /// The first Rust kernel that a cell of `backend` would compile and that is not built
    /// natively yet (`rust-cpu` is, with cargo: [`super::compiled::cargo`]), if any.
    pub fn for_backend(config: &BuildConfig, backend: Backend) -> Option<NotYet> {
        config
            .kernels
            .iter()
            .find(|(_, k)| k.backend == backend && k.language.is_rust() && k.language != Language::RustCpu)
            .map(|(name, k)| NotYet::RustKernel { kernel: name.clone(), language: k.language })
    }

    /// The first Rust kernel of any backend (for steps that handle every kernel at once, such
    /// as the generated CMake project, which has no place for a crate).
    pub fn any_rust(config: &BuildConfig) -> Option<NotYet> {
        config
            .kernels
            .iter()
            .find(|(_, k)| k.language.is_rust())
            .map(|(name, k)| NotYet::RustKernel { kernel: name.clone(), language: k.language })
    }

    /// The toolchain the cell needs and kernel-builder does not drive yet.
    pub fn toolchain(&self) -> &'static str {
        match self {
            NotYet::RustKernel { language: Language::RustCpu, .. } => "cargo (`build-and-copy --nix never`)",
            NotYet::RustKernel { language: Language::RustCudaOxide, .. } => {
                "cargo with the cuda-oxide rustc backend (Rust to PTX) and a CUDA toolkit"
            }
            NotYet::RustKernel { language: Language::RustCutile, .. } => {
                "cargo with cutile-rs and the CUDA tileiras compiler (CUDA 13.2 or later)"
            }
            NotYet::RustKernel { .. } => "a Rust toolchain",
        }
    }
}

impl std::fmt::Display for NotYet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotYet::RustKernel { kernel, language: Language::RustCpu } => write!(
                f,
                "`[kernel.{kernel}]` is a rust-cpu kernel, whose crate cargo builds: a generated CMake project has no place for it; build the kernel with `kernel-builder build-and-copy --nix never`"
            ),
            NotYet::RustKernel { kernel, language } => write!(
                f,
                "cannot build natively yet: `[kernel.{kernel}]` is a {language} kernel, which needs {}; this kernel-builder reads, checks and plans Rust kernels but does not build them",
                self.toolchain()
            ),
        }
    }
}

impl std::error::Error for NotYet {}

impl crate::error::Diagnostic for NotYet {
    fn kind(&self) -> crate::error::Kind {
        crate::error::Kind::Toolchain
    }

    fn hints(&self) -> Vec<String> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::config::config_for_tests as config;

    #[test]
    fn rust_kernels_are_refused_per_backend_with_the_toolchain_named() {
        let c = config(
            "[general]\nname = \"kk\"\nversion = 1\nedition = 6\nlicense = \"MIT\"\nbackends = [\"cpu\", \"cuda\"]\n\
             [tvm-ffi]\nsrc = [\"tvm-ffi-ext/b.cpp\"]\n\
             [kernel.a]\nlanguage = \"cpp-cpu\"\ndepends = []\nsrc = [\"a.cpp\"]\n\
             [kernel.b]\nlanguage = \"rust-cutile\"\ncargo-manifest = \"Cargo.toml\"\nsrc = [\"src/lib.rs\"]\ntileiras-minver = \"13.2\"\n",
        );
        assert_eq!(NotYet::for_backend(&c, Backend::Cpu), None);
        let refusal = NotYet::for_backend(&c, Backend::Cuda).expect("the cuda cell compiles a Rust kernel");
        assert_eq!(refusal, NotYet::RustKernel { kernel: "b".to_owned(), language: Language::RustCutile });
        assert_eq!(
            refusal.to_string(),
            "cannot build natively yet: `[kernel.b]` is a rust-cutile kernel, which needs cargo with cutile-rs and the CUDA tileiras compiler (CUDA 13.2 or later); this kernel-builder reads, checks and plans Rust kernels but does not build them"
        );
        assert_eq!(NotYet::any_rust(&c), Some(refusal));
    }
}
