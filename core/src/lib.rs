//! tessera-core: the portable, `no_std` (+ `alloc`) core of tessera. Every algorithm runs
//! here on the CPU with explicit SIMD; `std` adds run-time CPU feature detection and
//! `std::error::Error`, `parallel` adds rayon over row bands.
//!
//! Operations take borrowed views and write into caller-owned views; every public function
//! validates its input and returns [`Error`] rather than panicking.

#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]

extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

pub mod backend;
pub mod border;
pub mod choice;
pub mod contrast;
pub mod cpu;
pub mod cpu_backend;
pub mod error;
pub mod fft;
pub mod filter;
pub(crate) mod fma;
pub mod glare;
pub mod image;
pub mod linalg;
pub mod ncc;
pub mod parallel;
pub mod shading;
pub(crate) mod prefix;
pub(crate) mod simd;
/// The seal of the pixel traits of the local-statistics operations (`VarianceSample`,
/// `ContrastPixel`, `GlarePixel`): public but unnameable outside the crate, so only the
/// four types below implement them.
mod sealed {
    pub trait Sealed {}
    impl Sealed for u8 {}
    impl Sealed for u16 {}
    impl Sealed for f32 {}
    impl Sealed for crate::image::Rgba8 {}
}
#[cfg(test)]
mod testing;
pub mod variance;
pub mod workspace;
pub mod stitch;
pub mod stereo;

pub use backend::{Backend, BackendChoice, Opened};
pub use cpu_backend::CpuBackend;
pub use border::Border;
pub use choice::Choice;
pub use contrast::{contrast_enhance, ContrastParams};
pub use error::{Error, Result};
pub use glare::{glare, GlareMode, GlareParams, GlareReport};
pub use image::{AnyImage, AnyView, AnyViewMut, ConvertPixel, Image, ImageView, ImageViewMut, Pixel, Rgba8};
pub use parallel::Parallelism;
pub use workspace::Workspace;
pub use variance::{local_mean_variance, local_variance, VarianceKernel, VarianceMethod, VarianceParams};
