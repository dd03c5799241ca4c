//! tessera: an image-processing engine with a portable `no_std` core, drop-in GPU
//! acceleration and an ImageJ plugin. This crate is the facade (everything of
//! `tessera-core` re-exported), the backend chooser, image I/O, the stereo file formats
//! and scores ([`stereo`]), and the `tessera` CLI.

pub use tessera_core::*;

pub mod io;
pub mod stereo;

use anyhow::bail;

/// Which backend the user asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendChoice {
    /// The CPU backend (SIMD, all threads).
    Cpu,
    /// The CUDA backend; an error where there is no usable GPU.
    Cuda,
    /// CUDA where available, else the CPU (saying so on stderr).
    Auto,
}

/// Opens the backend for `choice`. With `Auto` and no GPU, returns the CPU backend and
/// the reason CUDA was not used, for the caller to report.
pub fn open_backend(choice: BackendChoice, parallelism: Parallelism) -> anyhow::Result<(Box<dyn Backend>, Option<String>)> {
    match choice {
        BackendChoice::Cpu => Ok((Box::new(CpuBackend::new(parallelism)), None)),
        BackendChoice::Cuda => match tessera_cuda::open() {
            Ok(b) => Ok((b, None)),
            Err(e) => bail!("{e}"),
        },
        BackendChoice::Auto => match tessera_cuda::open() {
            Ok(b) => Ok((b, None)),
            Err(e) => Ok((
                Box::new(CpuBackend::new(parallelism)),
                Some(format!("{e}; falling back to the CPU backend")),
            )),
        },
    }
}
