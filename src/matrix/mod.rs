//! The build matrix (from `nix/build-matrix.json` and its named snapshots) and variant naming.
//!
//! - [`data`]: the matrix as typed data;
//! - [`mod@cells`]: the build variants (cells) one kernel builds on one system, named;
//! - [`check()`]: findings about a `build.toml` that depend on the matrix;
//! - [`naming`]: the variant-name formats and the `kernels` loader's grammar;
//! - [`wheel`]: a torch wheel's facts, compared with a matrix (`matrix check-wheel`);
//! - [`resolve_cuda_capabilities`] and [`rocm::resolve_rocm_archs`]: the architectures a kernel
//!   compiles in one cell.

pub mod cells;
pub mod check;
pub mod cuda;
pub mod data;
pub mod naming;
pub mod rocm;
pub mod wheel;

#[cfg(test)]
mod proptests;
#[cfg(test)]
pub(crate) mod testutil;

pub use cells::{cells, cells_in, cells_on, host_system, Cell, CellKind, KernelCells, Scope};
pub use check::check;
pub use cuda::{resolve_cuda_capabilities, resolve_cuda_capabilities_in, unbuildable_cuda_capabilities_in};
