//! The build matrix (from `nix/build-matrix.json`) and variant naming.

pub mod data;
