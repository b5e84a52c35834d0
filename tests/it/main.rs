//! Integration tests: one binary, one module per concern.
mod config;
mod corpus;
mod update_build;
