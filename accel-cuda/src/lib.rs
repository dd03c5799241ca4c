//! tessera-cuda: the CUDA backend, a drop-in for the CPU backend.
//!
//! - `kernels/*.cu`: the CUDA C kernels, one file per core module, compiled at run time by
//!   NVRTC for the GPU at hand (`nvrtc.rs`, cached in memory and on disk).
//! - [`CudaBackend`] (`backend.rs`): every operation of [`Backend`], each driven by the Rust
//!   module of its kernel file (`filter.rs`, `variance.rs`, ..., `linalg.rs`) through
//!   `device::Gpu`: buffers, uploads, launches.
//! - Two devices behind `Gpu`: the GPU through the CUDA driver (`driver.rs`), and, with
//!   the `shim` feature, the same kernels compiled for the CPU and run on threads
//!   (`shim.rs`, `shim/`), so that CI, which never has a GPU, runs every kernel and every
//!   launch.
//!
//! [`open`] opens the CUDA backend or says why it cannot; choosing among the backends
//! (`cpu`, `cuda`, `auto` and its fallback) is the library's `tessera::open_backend`, with
//! the core's `BackendChoice::resolve`.

#[cfg(target_endian = "big")]
compile_error!("kernel arguments are passed as little-endian words");

mod backend;
mod device;
mod device_image;
mod driver;
pub mod kernel_clock;
pub mod kernels;
pub mod nvrtc;
pub mod occupancy;
mod tuning;
#[cfg(feature = "shim")]
mod shim;

mod consensus;
mod contrast;
mod filter;
mod glare;
mod host_count;
mod linalg;
mod ncc;
mod quality;
mod refine;
mod registrar;
mod stereo;
mod stitch;
mod transfer;
mod variance;

pub use backend::CudaBackend;
pub use device_image::{DeviceDst, DeviceImage, DevicePixel, DeviceSrc};
pub use filter::{BoxDesign, BoxKernel, BoxShape, FirDesign, IirDesign, BOX_KERNEL_ENV, BOX_SHAPES, BOX_SHAPE_ENV, GAUSS_FIR_ENV, GAUSS_IIR_ENV};
pub use stereo::{Aggregation as SgmAggregation, AGGREGATION_ENV as SGM_AGGREGATION_ENV};
pub use registrar::{HostWork as StitchHostWork, HOST_WORK_ENV as STITCH_HOST_WORK_ENV};
pub use tuning::Design;
pub use variance::{MomentsDesign, VARIANCE_KERNEL_ENV};
use tessera_core::{Backend, Error};

/// Opens the CUDA backend on device 0: an error saying why where there is no usable GPU
/// (no driver, no device, a driver older than CUDA 13.0, no NVRTC). Never panics.
pub fn open() -> Result<Box<dyn Backend>, Error> {
    Ok(Box::new(open_cuda()?))
}

/// [`open`] as the backend's own type, whose API goes beyond [`Backend`]: images that stay
/// on the device ([`DeviceImage`]) and the operations on them. The device is CUDA device 0
/// in its primary context (the one CuPy and PyTorch use, so their device memory is this
/// backend's too).
pub fn open_cuda() -> Result<CudaBackend, Error> {
    let device = driver::CudaDevice::open()?;
    let description = device.description().to_string();
    Ok(CudaBackend::new(Box::new(device), description))
}

/// The copy bandwidth of device 0 in GB/s (bytes read plus written by device-to-device
/// copies of `bytes`, median of `reps`): the ceiling the benchmarks measure memory-bound
/// kernels against, measured in the same run.
pub fn copy_bandwidth(bytes: usize, reps: usize) -> Result<f64, Error> {
    driver::CudaDevice::open()?.copy_bandwidth(bytes, reps)
}

pub use driver::HostMemory;

/// Host <-> device bandwidth of device 0 in GB/s.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkBandwidth {
    pub h2d_gb_s: f64,
    pub d2h_gb_s: f64,
}

/// The host link's bandwidth each way for copies of `bytes` with the host side in
/// `memory` (medians of `reps` after a warm-up): pageable memory as the driver copies it,
/// one pinned buffer (the link itself), or the backend's staged transfers from pageable
/// memory. What the benchmarks state an operation's end-to-end time against.
pub fn link_bandwidth(memory: HostMemory, bytes: usize, reps: usize) -> Result<LinkBandwidth, Error> {
    let device = driver::CudaDevice::open()?;
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| device.link_bandwidth(memory, bytes, reps)))
        .unwrap_or_else(|_| Err(Error::Backend("the CUDA driver library failed while measuring the link".into())))
        .map(|(h2d_gb_s, d2h_gb_s)| LinkBandwidth { h2d_gb_s, d2h_gb_s })
}

/// The CUDA backend on the CPU shim: every kernel compiled for the CPU and run on threads,
/// one block at a time. For tests of the kernels and their launches on machines without a
/// GPU; its speed means nothing.
#[cfg(feature = "shim")]
pub fn open_shim() -> Box<dyn Backend> {
    Box::new(shim_backend())
}

/// The shim as the backend's own type (its device-image API beyond [`Backend`]).
#[cfg(feature = "shim")]
pub fn open_shim_cuda() -> CudaBackend {
    shim_backend()
}

#[cfg(feature = "shim")]
fn shim_backend() -> CudaBackend {
    CudaBackend::with_gpu(shim_gpu(), SHIM.into())
}

/// The shim's device, with its pinned staging as small as the shim needs.
#[cfg(feature = "shim")]
fn shim_gpu() -> device::Gpu {
    device::Gpu::with_staging(Box::new(shim::ShimDevice::new()), transfer::StagingConfig::for_shim())
}

#[cfg(feature = "shim")]
const SHIM: &str = "CPU shim (kernels on host threads)";

/// The shim backend with its box / mean design fixed to `kernel` (`fused` or `two-pass`)
/// and, for the fused one, `shape` (a name of [`BOX_SHAPES`], or None for the window's
/// pick), whatever the environment says: for the tests of each design.
#[cfg(feature = "shim")]
pub fn open_shim_box(kernel: &str, shape: Option<&str>) -> Result<Box<dyn Backend>, Error> {
    BoxDesign::parse(Some(kernel), shape)?;
    let gpu = shim_gpu().with_design(filter::BOX_KERNEL, kernel).with_design(filter::BOX_SHAPE, shape.unwrap_or(""));
    Ok(Box::new(CudaBackend::with_gpu(gpu, SHIM.into())))
}

/// The shim backend with family `D`'s design fixed to the one named `design`, whatever the
/// environment says: for the tests of each design (`open_shim_design::<FirDesign>("fused")`).
#[cfg(feature = "shim")]
pub fn open_shim_design<D: Design>(design: &str) -> Result<Box<dyn Backend>, Error> {
    let gpu = shim_gpu().with_design(D::FAMILY, D::from_name(design)?.name());
    Ok(Box::new(CudaBackend::with_gpu(gpu, SHIM.into())))
}

/// The shim posing as the GPU `model` (with its tuning table's kernel designs), recording
/// every launch the drivers make instead of running it: the launch shapes an operation gets
/// on that GPU, for the occupancy check (`tests/occupancy.rs`). Outputs mean nothing.
#[cfg(feature = "shim")]
#[doc(hidden)]
pub fn open_shim_dry_run(model: &str) -> (Box<dyn Backend>, shim::LaunchLog) {
    let log = shim::LaunchLog::default();
    let gpu = device::Gpu::with_staging(Box::new(shim::ShimDevice::dry_run(model, log.clone())), transfer::StagingConfig::for_shim());
    (Box::new(CudaBackend::with_gpu(gpu, format!("CPU shim posing as {model}, launches recorded"))), log)
}

#[cfg(feature = "shim")]
#[doc(hidden)]
pub use shim::{Launch, LaunchLog};

/// Whether the shim build holds the kernel `name` (for the tests that every kernel of every
/// file is in it).
#[cfg(feature = "shim")]
pub fn shim_has_kernel(name: &str) -> bool {
    shim::ShimDevice::has(name)
}

/// Stitches on the shim as [`CudaBackend`]'s `stitch` does, returning also what the run did
/// on the device (uploads per frame, launches, pairs answered by speculative launches,
/// composite transfers): for the tests that frames are uploaded once and pairs batched.
#[cfg(feature = "shim")]
#[doc(hidden)]
pub fn shim_stitch_counted(
    frames: &dyn tessera_core::stitch::FrameSource,
    p: &tessera_core::stitch::StitchParams,
    progress: &mut dyn FnMut(usize) -> core::ops::ControlFlow<()>,
) -> Result<(tessera_core::stitch::Panorama, StitchCounts), Error> {
    registrar::stitch_counted(&shim_gpu(), frames, p, progress)
}

#[doc(hidden)]
pub use registrar::{HostSteps as StitchHostSteps, StitchCounts};

