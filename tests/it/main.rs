//! Integration tests: one binary, one module per concern.
mod build;
mod config;
mod corpus;
mod hash;
mod list_variants;
mod matrix_corpus;
mod nix;
mod update_build;
mod update_build_variants;
mod upload;
