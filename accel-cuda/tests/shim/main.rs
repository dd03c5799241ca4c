//! The CUDA kernels on the CPU shim (`--features shim`) against the CPU backend, one module
//! per kernel family, in one test binary: a binary per family would compile and link the
//! shared helpers and the backends' generic code once each.
//!
//! One family: `cargo test --release -p tessera-cuda --features shim --test shim -- ncc::`.

#[path = "../common/mod.rs"]
mod common;

mod filter;
mod glare;
mod linalg;
mod ncc;
mod stereo;
mod variance;
