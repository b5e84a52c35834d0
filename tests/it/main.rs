//! Integration tests: one binary, one module per concern.
mod build;
mod config;
mod hash;
mod list_variants;
mod matrix_corpus;
mod matrix_user_reports;
