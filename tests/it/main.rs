//! Integration tests: one binary, one module per concern.
mod build;
mod config;
mod hash;
mod init;
mod list_variants;
mod matrix_corpus;
