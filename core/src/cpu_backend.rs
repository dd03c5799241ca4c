//! The CPU backend: every operation of [`Backend`] by the core's own implementations, on
//! one thread or over rayon's pool.

use crate::backend::Backend;
use crate::contrast::{self, ContrastParams};
use crate::error::{Error, Result};
use crate::filter::{self, BoxParams, GaussianParams};
use crate::glare::{self, GlareParams, GlareReport};
use crate::image::{AnyView, AnyViewMut, ImageView, ImageViewMut};
use crate::linalg;
use crate::parallel::Parallelism;
use crate::backend::same_type;
use crate::stereo::{self, StereoParams, StereoStats};
use crate::stitch::{self, FrameSource, PairRegistration, Panorama, RegisterParams, StitchParams};
use crate::variance::{self, VarianceParams};
use crate::workspace::Workspace;
use core::ops::ControlFlow;

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
            AnyView::Rgba8(s) => variance::local_variance_luma(s, dst, p, par),
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
        frames: &dyn FrameSource,
        p: &StitchParams,
        progress: &mut dyn FnMut(usize) -> ControlFlow<()>,
    ) -> Result<Panorama> {
        stitch::stitch_frames(frames, p, self.parallelism, progress)
    }

    fn stereo_sgm(&self, left: AnyView<'_>, right: AnyView<'_>, disp: ImageViewMut<'_, f32>, p: &StereoParams) -> Result<StereoStats> {
        self.with_workspace(|ws| stereo::stereo_sgm_with(left, right, disp, p, self.parallelism, ws))
    }
}
