//! Content identity of built trees: NAR hashes equal to Nix's ([`nar`]), the per-file digest
//! that the `kernels` loader checks ([`digest`]), the reproducibility manifest written
//! beside a bundle ([`manifest`]), and the first difference between two trees ([`tree_diff`]).

pub mod digest;
pub mod manifest;
pub mod nar;
pub mod tree_diff;

pub use nar::{nar_hash, nar_hash_sri, sri, unpacked_tree_nar_hash_sri, variant_nar_hash_sri};
