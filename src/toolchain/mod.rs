//! What builds a compiled cell: the host's toolchain, found ([`host`]: torch, tvm_ffi
//! ([`tvm_ffi`]), CMake, Ninja, the C++ compiler, nvcc), or, for a bundle cell, its pinned
//! wheels. Cell toolchains as data: the pins of every CPU and CUDA cell ([`pins`], from
//! `nix/torch-wheels.json`), the content-addressed cache they are fetched into ([`store`]),
//! and the provisioning of a bundle cell from them ([`provision`]).
//!
//! `build-and-copy --nix never` without `--python` builds every bundle cell of this system that
//! [`crate::bundle::pinned_plan`] can provision (`[torch]` kernels' CPU and CUDA cells); a cell that cannot be (no
//! hash pinned, the index unreachable, offline) is named with the reason and what to do, and
//! the others still build. With `--python`, the one-cell-per-backend host mode of
//! [`crate::assemble::compiled`] is used instead, unchanged.
//!
//! A Nix cell fetches the same pins as fixed-output derivations, unpacks them with
//! [`store::unpack_into`] (`kernel-builder nix-support unpack-wheels`) and hands them to
//! `kernel-builder assemble --torch-wheel … --torch-tree … [--cuda-tree …]`, which builds with
//! [`provision::from_unpacked`]: the same torch facts and tools as a native pinned build, so the
//! two give the same bytes given the same compiler.

pub mod host;
mod http;
pub mod pins;
pub mod provision;
pub mod seal;
pub mod store;
pub mod test_env;
pub mod tvm_ffi;
