//! The contract every backend fulfils: one object-safe trait holding every operation of the
//! project, so the CLI, the JNI bridge and the tests pick a `Box<dyn Backend>` at run time.
//! [`CpuBackend`](crate::CpuBackend) (`cpu_backend.rs`) is the reference implementation;
//! `tessera-cuda`'s `CudaBackend` is a drop-in. Inputs are borrowed views, outputs
//! caller-owned views; each method validates its input and returns [`Error`] instead of
//! panicking.
//!
//! Also here, because every face of tessera chooses a backend the same way:
//! [`BackendChoice`] (the names `cpu`, `cuda`, `auto`) and [`BackendChoice::resolve`], the
//! one rule for `auto`'s fallback. Opening the backends themselves needs every backend's
//! crate and lives in the library the faces stand on (`tessera::open_backend`).

use crate::error::{Error, Result};
use crate::filter::{BoxParams, GaussianParams};
use crate::image::{AnyView, AnyViewMut, ImageView, ImageViewMut};
use crate::contrast::ContrastParams;
use crate::glare::{GlareParams, GlareReport};
use crate::variance::VarianceParams;
use crate::stitch::{FrameSource, PairRegistration, Panorama, RegisterParams, StitchParams};
use crate::stereo::{StereoParams, StereoStats};
use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use core::fmt;
use core::ops::ControlFlow;
use core::str::FromStr;

/// One implementation of every tessera operation.
pub trait Backend: Send + Sync {
    /// Short name: "cpu", "cuda".
    fn name(&self) -> &str;

    /// Mean filter ([`mean_filter`](crate::filter::mean_filter)); `dst` has the type and
    /// size of `src`.
    fn mean_filter(&self, src: AnyView<'_>, dst: AnyViewMut<'_>, p: &BoxParams) -> Result<()>;

    /// Box sum ([`box_sum`](crate::filter::box_sum)): u8 / u16 into u32 (exact), f32 into f32.
    fn box_sum(&self, src: AnyView<'_>, dst: AnyViewMut<'_>, p: &BoxParams) -> Result<()>;

    /// Gaussian blur ([`gaussian_blur`](crate::filter::gaussian_blur)); `dst` has the type
    /// and size of `src`.
    fn gaussian_blur(&self, src: AnyView<'_>, dst: AnyViewMut<'_>, p: &GaussianParams) -> Result<()>;

    /// `out = a + b` for f32 matrices ([`mat_add`](crate::linalg::mat_add)).
    fn mat_add(&self, a: ImageView<'_, f32>, b: ImageView<'_, f32>, out: ImageViewMut<'_, f32>) -> Result<()>;

    /// `out = a * b` for f32 matrices ([`mat_mul`](crate::linalg::mat_mul)).
    fn mat_mul(&self, a: ImageView<'_, f32>, b: ImageView<'_, f32>, out: ImageViewMut<'_, f32>) -> Result<()>;

    /// Local variance ([`local_variance`](crate::variance::local_variance)) of u8, u16 or
    /// f32 input into f32; for RGBA input, the local variance of the unrounded Rec. 601 luma.
    fn local_variance(&self, src: AnyView<'_>, dst: ImageViewMut<'_, f32>, p: &VarianceParams) -> Result<()>;

    /// Local contrast enhancement ([`contrast_enhance`](crate::contrast::contrast_enhance));
    /// `dst` has the type and size of `src` (RGBA: on the luma, keeping hue).
    fn contrast_enhance(&self, src: AnyView<'_>, dst: AnyViewMut<'_>, p: &ContrastParams) -> Result<()>;

    /// Highlight detection and correction ([`glare`](crate::glare::glare)): `mask` gets 255
    /// on glare, `corrected` (type and size of `src`) the filled image.
    fn glare(&self, src: AnyView<'_>, mask: ImageViewMut<'_, u8>, corrected: AnyViewMut<'_>, p: &GlareParams) -> Result<GlareReport>;

    /// Registers `moving` against `reference` ([`register_pair`](crate::stitch::register_pair)):
    /// all the templates of the pair in one call (the unit of work a GPU batches). Frames of one
    /// type (u8, u16, f32, or RGBA registered on luma) and one size; `prediction` is the
    /// expected shift (moving pixel (u, v) shows reference (u + x, v + y)). A pair that
    /// cannot be registered is `Ok` with `shift: None` and its reason.
    fn register_pair(
        &self,
        reference: AnyView<'_>,
        moving: AnyView<'_>,
        p: &RegisterParams,
        prediction: (f64, f64),
    ) -> Result<PairRegistration>;

    /// Stitches a sequence ([`stitch_frames`](crate::stitch::stitch_frames)): registration
    /// of every frame, then the composite, the frames read from `frames` as the run needs
    /// them (frames in memory: [`InMemory`](crate::stitch::InMemory)). `progress(done)` is
    /// called after each frame; returning `ControlFlow::Break(())` stops the run with
    /// [`Error::Cancelled`] before the next frame. A frame that cannot be read, differs in
    /// size or type, or cannot be registered is skipped with its reason. Errors: bad
    /// parameters, no frames, no two frames registered, cancellation.
    fn stitch(
        &self,
        frames: &dyn FrameSource,
        p: &StitchParams,
        progress: &mut dyn FnMut(usize) -> ControlFlow<()>,
    ) -> Result<Panorama>;

    /// Semi-global matching stereo ([`stereo_sgm`](crate::stereo::stereo_sgm)): `left` and
    /// `right` both `u8` gray or both `Rgba8`, same size; `disp` (f32, same size) receives
    /// the left disparity map, invalid pixels as `f32::INFINITY`.
    fn stereo_sgm(&self, left: AnyView<'_>, right: AnyView<'_>, disp: ImageViewMut<'_, f32>, p: &StereoParams) -> Result<StereoStats>;
}

// What every implementation shares to dispatch on run-time pixel types.

/// The error for an output view whose type does not go with the input's.
pub fn type_mismatch(op: &'static str) -> Error {
    Error::UnsupportedType { op, types: "this combination of input and output pixel types" }
}

/// Runs `$body` with `$s` and `$d` bound to same-typed views of a pair, for the four
/// pixel types; any other combination is a type error naming `$op`.
macro_rules! same_type {
    ($op:expr, $src:expr, $dst:expr, |$s:ident, $d:ident| $body:expr) => {
        match ($src, $dst) {
            ($crate::AnyView::U8($s), $crate::AnyViewMut::U8($d)) => $body,
            ($crate::AnyView::U16($s), $crate::AnyViewMut::U16($d)) => $body,
            ($crate::AnyView::F32($s), $crate::AnyViewMut::F32($d)) => $body,
            ($crate::AnyView::Rgba8($s), $crate::AnyViewMut::Rgba8($d)) => $body,
            _ => Err($crate::backend::type_mismatch($op)),
        }
    };
}
pub(crate) use same_type;

/// Which backend a user asked for, by the name every face of tessera accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BackendChoice {
    /// The CPU backend.
    Cpu,
    /// The CUDA backend; an error where there is no usable GPU.
    Cuda,
    /// CUDA where it opens, else the CPU, with the reason CUDA was not used.
    Auto,
}

impl BackendChoice {
    /// All choices, in the order help texts list them.
    pub const ALL: [BackendChoice; 3] = [BackendChoice::Cpu, BackendChoice::Cuda, BackendChoice::Auto];

    /// The name a user types: "cpu", "cuda" or "auto".
    pub fn name(self) -> &'static str {
        match self {
            BackendChoice::Cpu => "cpu",
            BackendChoice::Cuda => "cuda",
            BackendChoice::Auto => "auto",
        }
    }

    /// One line for help texts.
    pub fn describe(self) -> &'static str {
        match self {
            BackendChoice::Cpu => "the CPU backend (SIMD, all threads unless told otherwise)",
            BackendChoice::Cuda => "the CUDA backend; an error where there is no usable GPU",
            BackendChoice::Auto => "CUDA where a GPU is usable, else the CPU (saying why)",
        }
    }

    /// The backend for this choice, given how to open each one: `cpu` cannot fail, `cuda`
    /// returns the reason it is unavailable. `Cuda` passes that error on; `Auto` falls
    /// back to the CPU and keeps the reason in [`Opened::fallback`]. `B` is whatever the
    /// caller holds a backend by (`Box<dyn Backend>`, or a `&'static dyn Backend` from a
    /// per-process cache).
    pub fn resolve<B>(self, cpu: impl FnOnce() -> B, cuda: impl FnOnce() -> Result<B>) -> Result<Opened<B>> {
        let backend = match self {
            BackendChoice::Cpu => cpu(),
            BackendChoice::Cuda => cuda()?,
            BackendChoice::Auto => match cuda() {
                Ok(b) => b,
                Err(e) => return Ok(Opened { backend: cpu(), fallback: Some(format!("{e}; falling back to the CPU backend")) }),
            },
        };
        Ok(Opened { backend, fallback: None })
    }
}

impl FromStr for BackendChoice {
    type Err = Error;

    /// Parses "cpu", "cuda" or "auto" (case-insensitive).
    fn from_str(s: &str) -> Result<Self> {
        Self::ALL.into_iter().find(|c| c.name().eq_ignore_ascii_case(s)).ok_or_else(|| Error::InvalidParameter {
            name: "backend",
            reason: format!("unknown backend {s:?}: expected cpu, cuda or auto"),
        })
    }
}

impl fmt::Display for BackendChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An opened backend, and why it is not the one asked for (`auto` without a GPU).
#[derive(Debug)]
pub struct Opened<B = Box<dyn Backend>> {
    /// The backend to run on.
    pub backend: B,
    /// `Some(reason)` when `auto` fell back to the CPU, for the caller to report.
    pub fallback: Option<String>,
}

/// A backend prints as its name (so an [`Opened`] can be printed).
impl fmt::Debug for dyn Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Backend({})", self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CpuBackend;

    #[test]
    fn names_round_trip_and_unknown_names_are_errors() {
        for c in BackendChoice::ALL {
            assert_eq!(c.name().parse::<BackendChoice>(), Ok(c));
            assert_eq!(c.name().to_ascii_uppercase().parse::<BackendChoice>(), Ok(c));
        }
        let e = "gpu".parse::<BackendChoice>().unwrap_err();
        assert!(format!("{e}").contains("unknown backend \"gpu\""), "{e}");
    }

    #[test]
    fn auto_falls_back_to_the_cpu_saying_why_and_cuda_fails() {
        let cpu = || Box::new(CpuBackend::default()) as Box<dyn Backend>;
        let no_gpu = || Err(Error::BackendUnavailable("no CUDA device".into()));
        let auto = BackendChoice::Auto.resolve(cpu, no_gpu).unwrap();
        assert_eq!(auto.backend.name(), "cpu");
        assert!(auto.fallback.as_deref().is_some_and(|r| r.contains("no CUDA device") && r.contains("CPU")));
        assert_eq!(BackendChoice::Cuda.resolve(cpu, no_gpu).unwrap_err(), no_gpu().unwrap_err());
        assert!(BackendChoice::Cpu.resolve(cpu, no_gpu).unwrap().fallback.is_none());
        // A GPU that opens is taken by both `cuda` and `auto`, without a note.
        let gpu = || Ok(Box::new(CpuBackend::default()) as Box<dyn Backend>);
        assert!(BackendChoice::Auto.resolve(cpu, gpu).unwrap().fallback.is_none());
    }
}
