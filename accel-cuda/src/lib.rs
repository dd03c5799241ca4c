//! tessera-cuda: the CUDA backend. Until its kernels land, `CudaBackend::new` reports that
//! no CUDA backend is available, so `auto` falls back to the CPU.

use tessera_core::Error;

/// Opens the CUDA backend on device 0.
pub fn open() -> Result<Box<dyn tessera_core::Backend>, Error> {
    Err(Error::BackendUnavailable("no CUDA device: this build has no CUDA kernels yet".into()))
}
