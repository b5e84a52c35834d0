//! kernel-builder: builds PyTorch compute kernels for every cell of the compatibility matrix
//! and lays them out as Hub-ready trees that the `kernels` Python library loads.
//!
//! Data flows one way: `build.toml` → [`config`] (one typed model for every edition) →
//! [`matrix`] (the cells to build) → [`toolchain`] (what builds a compiled cell: the host's,
//! found, or pinned wheels, provisioned) → [`source`] (the files a build reads, their id and
//! provenance) → `assemble` (one variant directory per cell, natively or as the builder
//! inside a Nix derivation, see [`nixdrv`]) → [`bundle`] (the variants of `build/`, planned once
//! and written all-or-nothing, the cell cache, `verify`) → [`hash`] (NAR hashes, digests and
//! the reproducibility manifest) → [`hub`] (publishing to a Hub repository). `init` scaffolds
//! new kernel projects. [`abi`] checks the shared objects of compiled variants against the
//! manylinux, CPython abi3 and torch stable-ABI rules. [`layout`] says what is part of a variant
//! directory. [`tune`] pre-tunes Helion kernels on a GPU. [`interrupt`] cleans up after Ctrl-C.
//! [`kernel`] is where a kernel is loaded: its `build.toml` through [`config`], then the
//! [`matrix`] checks, then its source set. [`shell`] prepares devshell's and testshell's
//! environment.
//!
//! Operations (a native build, [`hub::publish()`], [`shell::prepare`], [`tune::tune`]) take their
//! options and a [`report::Reporter`], say what they do through it and return a typed outcome;
//! a CLI command builds the options, calls one and renders the outcome. The workers below
//! them that still speak for themselves (a lock being waited on, a Nix build's lines, a
//! download retried, `+ cmd` under `--verbose`) write through `printer`, at the level the
//! command chose; only [`cli`] and `printer` print (the lints below, `cargo clippy
//! --all-targets`).
//!
//! The public surface is a deliberate list: the modules a caller (the binary, the tests, a
//! program driving builds) reads kernels, cells, toolchains, hashes and errors through are
//! `pub`; the workers behind them (`assemble`, `helion`, `init`, `kdeps`, `output`, `printer`,
//! `process`, `suggest`, `tls`) are the crate's own, reached through [`bundle`], [`kernel`],
//! [`cli`] and [`error`].
#![deny(clippy::print_stdout, clippy::print_stderr)]
// The documentation is for developers (`cargo doc --document-private-items`, checked with
// `-D warnings` by scripts/test.sh): public items may point at the private workers they use.
#![allow(rustdoc::private_intra_doc_links)]

pub mod abi;
pub(crate) mod assemble;
pub mod bundle;
pub mod ci;
#[allow(clippy::print_stdout, clippy::print_stderr)]
pub mod cli;
pub mod codegen;
pub mod config;
pub mod env;
pub mod error;
pub mod fsutil;
pub mod hash;
pub(crate) mod helion;
pub mod hub;
pub(crate) mod init;
pub mod interrupt;
pub(crate) mod kdeps;
pub mod kernel;
pub mod layout;
pub mod matrix;
pub mod nixdrv;
pub(crate) mod output;
#[allow(clippy::print_stderr)]
pub(crate) mod printer;
pub(crate) mod process;
pub mod report;
pub mod shell;
pub mod source;
pub(crate) mod suggest;
pub(crate) mod tls;
pub mod toolchain;
pub mod tune;
