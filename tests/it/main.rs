//! Integration tests: one binary, one module per concern.
mod config;
mod list_variants;
mod matrix_corpus;
mod matrix_user_reports;
