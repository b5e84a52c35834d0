//! Content identity of built trees: NAR hashes equal to Nix's ([`nar`]), the per-file digest
//! that the `kernels` loader checks ([`digest`]), and the reproducibility manifest written
//! beside a bundle ([`manifest`]).

pub mod digest;
pub mod manifest;
pub mod nar;

pub use nar::{nar_hash, nar_hash_sri, sri};
