//! Integration tests: one binary, one module per concern.
mod init;
