//! Integration tests: one binary, one module per concern.
mod abi;
mod build;
mod codegen;
mod compiled;
mod config;
mod corpus;
mod hash;
mod init;
mod list_variants;
mod matrix_corpus;
mod matrix_user_reports;
mod nix;
mod nix_compiled;
mod update_build;
mod update_build_variants;
mod upload;
