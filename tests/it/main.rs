//! Integration tests: one binary, one module per concern.
mod build;
mod hash;
mod init;
