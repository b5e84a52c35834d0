//! Integration tests: one binary, one module per concern.
mod matrix_corpus;
mod list_variants;
