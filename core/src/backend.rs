//! The contract every backend fulfils: one object-safe trait holding every operation of the
//! project, so the CLI, the JNI bridge and the tests pick a `Box<dyn Backend>` at run time.
//! `CpuBackend` is the reference implementation; `tessera-cuda`'s `CudaBackend` is a
//! drop-in. Inputs are borrowed views, outputs caller-owned views; each method validates
//! its input and returns [`Error`] instead of panicking.

use crate::error::{Error, Result};
use crate::filter::{self, BoxParams, GaussianParams};
use crate::image::{AnyView, AnyViewMut, ImageView, ImageViewMut};
use crate::contrast::{self, ContrastParams};
use crate::glare::{self, GlareParams, GlareReport};
use crate::linalg;
use crate::parallel::Parallelism;
use crate::variance::{self, VarianceParams};
use crate::stitch::{self, PairRegistration, Panorama, RegisterParams, StitchParams};
use crate::stereo::{self, StereoParams, StereoStats};
use crate::workspace::Workspace;
use core::ops::ControlFlow;

/// One implementation of every tessera operation.
pub trait Backend: Send + Sync {
    /// Short name: "cpu", "cuda".
    fn name(&self) -> &str;

    /// Mean filter ([`filter::mean_filter`]); `dst` has the type and size of `src`.
    fn mean_filter(&self, src: AnyView<'_>, dst: AnyViewMut<'_>, p: &BoxParams) -> Result<()>;

    /// Box sum ([`filter::box_sum`]): u8 / u16 into u32 (exact), f32 into f32.
    fn box_sum(&self, src: AnyView<'_>, dst: AnyViewMut<'_>, p: &BoxParams) -> Result<()>;

    /// Gaussian blur ([`filter::gaussian_blur`]); `dst` has the type and size of `src`.
    fn gaussian_blur(&self, src: AnyView<'_>, dst: AnyViewMut<'_>, p: &GaussianParams) -> Result<()>;

    /// `out = a + b` for f32 matrices ([`linalg::mat_add`]).
    fn mat_add(&self, a: ImageView<'_, f32>, b: ImageView<'_, f32>, out: ImageViewMut<'_, f32>) -> Result<()>;

    /// `out = a * b` for f32 matrices ([`linalg::mat_mul`]).
    fn mat_mul(&self, a: ImageView<'_, f32>, b: ImageView<'_, f32>, out: ImageViewMut<'_, f32>) -> Result<()>;

    /// Local variance ([`variance::local_variance`]) of u8, u16 or f32 input into f32; for
    /// RGBA input, the local variance of the unrounded Rec. 601 luma.
    fn local_variance(&self, src: AnyView<'_>, dst: ImageViewMut<'_, f32>, p: &VarianceParams) -> Result<()>;

    /// Local contrast enhancement ([`contrast::contrast_enhance`]); `dst` has the type and
    /// size of `src` (RGBA: on the luma, keeping hue).
    fn contrast_enhance(&self, src: AnyView<'_>, dst: AnyViewMut<'_>, p: &ContrastParams) -> Result<()>;

    /// Highlight detection and correction ([`glare::glare`]): `mask` gets 255 on glare,
    /// `corrected` (type and size of `src`) the filled image.
    fn glare(&self, src: AnyView<'_>, mask: ImageViewMut<'_, u8>, corrected: AnyViewMut<'_>, p: &GlareParams) -> Result<GlareReport>;
    /// Registers `moving` against `reference` ([`stitch::register_pair`]): all the
    /// templates of the pair in one call (the unit of work a GPU batches). Frames of one
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

    /// Stitches a sequence ([`stitch::stitch`]): registration of every frame, then the
    /// composite. `progress(done)` is called after each frame registered; returning
    /// `ControlFlow::Break(())` stops the run with [`Error::Cancelled`] before the next
    /// frame. Errors: bad parameters, no frames, frames of differing size or type (naming
    /// the frame), cancellation.
    fn stitch(
        &self,
        frames: &[AnyView<'_>],
        p: &StitchParams,
        progress: &mut dyn FnMut(usize) -> ControlFlow<()>,
    ) -> Result<Panorama>;
    /// Semi-global matching stereo ([`stereo::stereo_sgm`]): `left` and `right` both `u8`
    /// gray or both `Rgba8`, same size; `disp` (f32, same size) receives the left disparity
    /// map, invalid pixels as `f32::INFINITY`.
    fn stereo_sgm(&self, left: AnyView<'_>, right: AnyView<'_>, disp: ImageViewMut<'_, f32>, p: &StereoParams) -> Result<StereoStats>;
}

/// The CPU backend: the core's own implementations, on one thread or rayon's pool. With
/// `std` it keeps a [`Workspace`] of scratch buffers between calls (at most
/// [`crate::workspace::DEFAULT_LIMIT_BYTES`]); without, each call allocates its own.
#[derive(Debug)]
pub struct CpuBackend {
    pub parallelism: Parallelism,
    #[cfg(feature = "std")]
    cache: std::sync::Mutex<Workspace>,
}

impl CpuBackend {
    pub const fn new(parallelism: Parallelism) -> Self {
        CpuBackend {
            parallelism,
            #[cfg(feature = "std")]
            cache: std::sync::Mutex::new(Workspace::new(crate::workspace::DEFAULT_LIMIT_BYTES)),
        }
    }

    /// Runs `f` with the kept workspace, or with a fresh one while another call holds it.
    fn with_workspace<R>(&self, f: impl FnOnce(&mut Workspace) -> R) -> R {
        #[cfg(feature = "std")]
        if let Ok(mut ws) = self.cache.try_lock() {
            return f(&mut ws);
        }
        f(&mut Workspace::default())
    }

    /// Frees the scratch buffers kept between calls.
    pub fn release_workspace(&self) {
        #[cfg(feature = "std")]
        if let Ok(mut ws) = self.cache.lock() {
            ws.clear();
        }
    }
}

impl Default for CpuBackend {
    fn default() -> Self {
        CpuBackend::new(Parallelism::default())
    }
}

impl Clone for CpuBackend {
    /// The same settings, with a workspace of its own.
    fn clone(&self) -> Self {
        CpuBackend::new(self.parallelism)
    }
}

/// The error for an output view whose type does not go with the input's.
pub fn type_mismatch(op: &'static str) -> Error {
    Error::UnsupportedType { op, types: "this combination of input and output pixel types" }
}

/// Runs `$body` with `$s` and `$d` bound to same-typed views of a pair, for the four
/// pixel types; any other combination is a type error naming `$op`.
#[macro_export]
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

impl Backend for CpuBackend {
    fn name(&self) -> &str {
        "cpu"
    }

    fn mean_filter(&self, src: AnyView<'_>, dst: AnyViewMut<'_>, p: &BoxParams) -> Result<()> {
        same_type!("mean filter", src, dst, |s, d| filter::mean_filter(s, d, p, self.parallelism))
    }

    fn box_sum(&self, src: AnyView<'_>, dst: AnyViewMut<'_>, p: &BoxParams) -> Result<()> {
        match (src, dst) {
            (AnyView::U8(s), AnyViewMut::U32(d)) => filter::box_sum(s, d, p, self.parallelism),
            (AnyView::U16(s), AnyViewMut::U32(d)) => filter::box_sum(s, d, p, self.parallelism),
            (AnyView::F32(s), AnyViewMut::F32(d)) => filter::box_sum_f32(s, d, p, self.parallelism),
            _ => Err(Error::UnsupportedType {
                op: "box sum",
                types: "other than u8 -> u32, u16 -> u32 or f32 -> f32",
            }),
        }
    }

    fn gaussian_blur(&self, src: AnyView<'_>, dst: AnyViewMut<'_>, p: &GaussianParams) -> Result<()> {
        same_type!("gaussian blur", src, dst, |s, d| filter::gaussian_blur(s, d, p, self.parallelism))
    }

    fn mat_add(&self, a: ImageView<'_, f32>, b: ImageView<'_, f32>, out: ImageViewMut<'_, f32>) -> Result<()> {
        linalg::mat_add(a, b, out, self.parallelism)
    }

    fn mat_mul(&self, a: ImageView<'_, f32>, b: ImageView<'_, f32>, out: ImageViewMut<'_, f32>) -> Result<()> {
        linalg::mat_mul(a, b, out, self.parallelism)
    }

    fn local_variance(&self, src: AnyView<'_>, dst: ImageViewMut<'_, f32>, p: &VarianceParams) -> Result<()> {
        let par = self.parallelism;
        match src {
            AnyView::U8(s) => variance::local_variance(s, dst, p, par),
            AnyView::U16(s) => variance::local_variance(s, dst, p, par),
            AnyView::F32(s) => variance::local_variance(s, dst, p, par),
            AnyView::Rgba8(s) => variance::local_variance(s.convert::<f32>().view(), dst, p, par),
        }
    }

    fn contrast_enhance(&self, src: AnyView<'_>, dst: AnyViewMut<'_>, p: &ContrastParams) -> Result<()> {
        same_type!("contrast enhancement", src, dst, |s, d| contrast::contrast_enhance(s, d, p, self.parallelism))
    }

    fn glare(&self, src: AnyView<'_>, mask: ImageViewMut<'_, u8>, corrected: AnyViewMut<'_>, p: &GlareParams) -> Result<GlareReport> {
        same_type!("glare correction", src, corrected, |s, d| glare::glare(s, mask, d, p, self.parallelism))
    }

    fn register_pair(
        &self,
        reference: AnyView<'_>,
        moving: AnyView<'_>,
        p: &RegisterParams,
        prediction: (f64, f64),
    ) -> Result<PairRegistration> {
        stitch::register_pair_any(reference, moving, p, prediction, self.parallelism)
    }

    fn stitch(
        &self,
        frames: &[AnyView<'_>],
        p: &StitchParams,
        progress: &mut dyn FnMut(usize) -> ControlFlow<()>,
    ) -> Result<Panorama> {
        stitch::stitch(frames, p, self.parallelism, progress)
    }

    fn stereo_sgm(&self, left: AnyView<'_>, right: AnyView<'_>, disp: ImageViewMut<'_, f32>, p: &StereoParams) -> Result<StereoStats> {
        self.with_workspace(|ws| stereo::stereo_sgm_with(left, right, disp, p, self.parallelism, ws))
    }
}
