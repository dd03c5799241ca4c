//! tessera-cuda: the CUDA backend. Until its kernels land, [`open`] reports that no CUDA
//! backend is available, so `auto` falls back to the CPU.
//!
//! This crate sees both backends, so it is where a [`BackendChoice`] becomes an opened
//! backend ([`open_backend`]), for the CLI, the benchmarks and the tests alike.

use tessera_core::{Backend, BackendChoice, CpuBackend, Error, Opened, Parallelism};

/// Opens the CUDA backend on device 0.
pub fn open() -> Result<Box<dyn Backend>, Error> {
    Err(Error::BackendUnavailable("no CUDA device: this build has no CUDA kernels yet".into()))
}

/// Opens the backend `choice` names: the CPU backend with `parallelism`, or CUDA by
/// [`open`]. `auto` without a usable GPU gives the CPU backend and the reason in
/// [`Opened::fallback`]; `cuda` without one is [`Error::BackendUnavailable`].
pub fn open_backend(choice: BackendChoice, parallelism: Parallelism) -> Result<Opened, Error> {
    choice.resolve(|| Box::new(CpuBackend::new(parallelism)), open)
}
