//! [`CudaBackend`]: each operation of [`Backend`] validated, then driven by the Rust module
//! of its kernel file on a [`Gpu`].

use crate::device::{Device, Gpu};
use crate::{contrast, filter, glare, linalg, ncc, stereo, variance};
use core::ops::ControlFlow;
use tessera_core::contrast::ContrastParams;
use tessera_core::filter::{BoxParams, GaussianParams};
use tessera_core::glare::{GlareParams, GlareReport};
use tessera_core::stereo::{StereoParams, StereoStats};
use tessera_core::stitch::{FrameSource, PairRegistration, Panorama, RegisterParams, StitchParams};
use tessera_core::variance::VarianceParams;
use tessera_core::{AnyView, AnyViewMut, Backend, ImageView, ImageViewMut, Result};

/// The CUDA backend: one device, its kernels and its pool of buffers. Each call uploads
/// its input, runs, and downloads its output; `stitch` and `stereo_sgm` keep their
/// intermediate data on the device.
pub struct CudaBackend {
    gpu: Gpu,
    description: String,
    /// The box / mean design, fixed; None: read from the environment at each call
    /// ([`filter::BOX_KERNEL_ENV`]).
    box_design: Option<filter::BoxDesign>,
    /// The FIR Gaussian's design, fixed; None: the environment's or the tuning table's.
    fir_design: Option<filter::FirDesign>,
}

impl CudaBackend {
    pub(crate) fn new(device: Box<dyn Device>, description: String) -> Self {
        Self::with_gpu(Gpu::new(device), description)
    }

    /// This backend with its box / mean design fixed (for tests of each design; the
    /// environment is process-wide).
    #[cfg(feature = "shim")]
    pub(crate) fn with_box_design(mut self, design: filter::BoxDesign) -> Self {
        self.box_design = Some(design);
        self
    }

    /// This backend with its FIR Gaussian design fixed (for tests of each design).
    #[cfg(feature = "shim")]
    pub(crate) fn with_fir_design(mut self, design: filter::FirDesign) -> Self {
        self.fir_design = Some(design);
        self
    }

    pub(crate) fn with_gpu(gpu: Gpu, description: String) -> Self {
        let description = match gpu.tuning().table() {
            Some(table) => format!("{description}, kernel designs of tuning/{table}.json"),
            None => description,
        };
        CudaBackend { gpu, description, box_design: None, fir_design: None }
    }

    /// The device: name, architecture, driver (or the shim), and the tuning table in use.
    pub fn description(&self) -> &str {
        &self.description
    }
}

impl Backend for CudaBackend {
    fn name(&self) -> &str {
        self.gpu.name()
    }

    fn mean_filter(&self, src: AnyView<'_>, dst: AnyViewMut<'_>, p: &BoxParams) -> Result<()> {
        filter::mean_filter(&self.gpu, self.box_design, src, dst, p)
    }

    fn box_sum(&self, src: AnyView<'_>, dst: AnyViewMut<'_>, p: &BoxParams) -> Result<()> {
        filter::box_sum(&self.gpu, self.box_design, src, dst, p)
    }

    fn gaussian_blur(&self, src: AnyView<'_>, dst: AnyViewMut<'_>, p: &GaussianParams) -> Result<()> {
        filter::gaussian_blur(&self.gpu, self.fir_design, src, dst, p)
    }

    fn mat_add(&self, a: ImageView<'_, f32>, b: ImageView<'_, f32>, out: ImageViewMut<'_, f32>) -> Result<()> {
        linalg::mat_add(&self.gpu, a, b, out)
    }

    fn mat_mul(&self, a: ImageView<'_, f32>, b: ImageView<'_, f32>, out: ImageViewMut<'_, f32>) -> Result<()> {
        linalg::mat_mul(&self.gpu, a, b, out)
    }

    fn local_variance(&self, src: AnyView<'_>, dst: ImageViewMut<'_, f32>, p: &VarianceParams) -> Result<()> {
        variance::local_variance(&self.gpu, src, dst, p)
    }

    fn contrast_enhance(&self, src: AnyView<'_>, dst: AnyViewMut<'_>, p: &ContrastParams) -> Result<()> {
        contrast::contrast_enhance(&self.gpu, src, dst, p)
    }

    fn glare(&self, src: AnyView<'_>, mask: ImageViewMut<'_, u8>, corrected: AnyViewMut<'_>, p: &GlareParams) -> Result<GlareReport> {
        glare::glare(&self.gpu, src, mask, corrected, p)
    }

    fn register_pair(&self, reference: AnyView<'_>, moving: AnyView<'_>, p: &RegisterParams, prediction: (f64, f64)) -> Result<PairRegistration> {
        ncc::register_pair(&self.gpu, reference, moving, p, prediction)
    }

    fn stitch(&self, frames: &dyn FrameSource, p: &StitchParams, progress: &mut dyn FnMut(usize) -> ControlFlow<()>) -> Result<Panorama> {
        ncc::stitch(&self.gpu, frames, p, progress)
    }

    fn stereo_sgm(&self, left: AnyView<'_>, right: AnyView<'_>, disp: ImageViewMut<'_, f32>, p: &StereoParams) -> Result<StereoStats> {
        stereo::stereo_sgm(&self.gpu, left, right, disp, p)
    }
}
