//! [`CudaBackend`]: each operation of [`Backend`] validated, then driven by the Rust module
//! of its kernel file on a [`Gpu`].

use crate::device::{Device, Gpu};
use crate::device_image::{check_operands, checked, AnyDst, DeviceDst, DeviceImage, DevicePixel, DeviceSrc, Dst, Src};
use crate::{contrast, filter, glare, linalg, ncc, registrar, stereo, variance};
use core::ops::ControlFlow;
use tessera_core::contrast::ContrastParams;
use tessera_core::filter::{BoxParams, GaussianParams};
use tessera_core::glare::{GlareParams, GlareReport};
use tessera_core::stereo::{StereoParams, StereoStats};
use tessera_core::stitch::{FrameSource, PairRegistration, Panorama, RegisterParams, StitchParams};
use tessera_core::variance::VarianceParams;
use crate::device::DevImage;
use tessera_core::image::check_same_size;
use tessera_core::{AnyView, AnyViewMut, Backend, Error, ImageView, ImageViewMut, Result};

/// The CUDA backend: one device, its kernels and its pool of buffers. Each call uploads
/// its input, runs, and downloads its output; `stitch` and `stereo_sgm` keep their
/// intermediate data on the device.
pub struct CudaBackend {
    gpu: Gpu,
    description: String,
}

impl CudaBackend {
    pub(crate) fn new(device: Box<dyn Device>, description: String) -> Self {
        Self::with_gpu(Gpu::new(device), description)
    }

    pub(crate) fn with_gpu(gpu: Gpu, description: String) -> Self {
        let description = match gpu.tuning().table() {
            Some(table) => format!("{description}, kernel designs of tuning/{table}.json"),
            None => description,
        };
        CudaBackend { gpu, description }
    }

    /// The device: name, architecture, driver (or the shim), and the tuning table in use.
    pub fn description(&self) -> &str {
        &self.description
    }

    #[cfg(all(test, feature = "shim"))]
    pub(crate) fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// [`Backend::stitch`], with what the run did on the device and where its time went
    /// ([`StitchCounts`]: its launches, the wall time inside device calls, and so the host's
    /// share, which is what bounds a run's pairs a second once the device is fast).
    #[doc(hidden)]
    pub fn stitch_counted(&self, frames: &dyn FrameSource, p: &StitchParams, progress: &mut dyn FnMut(usize) -> ControlFlow<()>) -> Result<(Panorama, registrar::StitchCounts)> {
        registrar::stitch_counted(&self.gpu, frames, p, progress)
    }

    /// Waits until every operation queued on the device has completed. The operations on
    /// device images are queued on the legacy default stream and may still run when they
    /// return: work on that stream (and on streams that synchronize with it) is ordered
    /// after them; a non-blocking stream or another device's reader must wait here first.
    pub fn synchronize(&self) -> Result<()> {
        self.gpu.synchronize()
    }

    /// A copy of `src` on the device.
    pub fn upload<T: DevicePixel>(&self, src: ImageView<'_, T>) -> Result<DeviceImage<'_, T>> {
        Ok(DeviceImage { image: self.gpu.upload_view(src)? })
    }

    /// A `width x height` image on the device, every pixel zero.
    pub fn device_image<T: DevicePixel>(&self, width: usize, height: usize) -> Result<DeviceImage<'_, T>> {
        let len = width.checked_mul(height).ok_or(Error::OutOfMemory { bytes: usize::MAX })?;
        let buf = self.gpu.zeroed::<T>(len)?;
        Ok(DeviceImage { image: DevImage { buf, width, height } })
    }

    /// Copies `src` into `dst`, a host view of the same size (any stride).
    pub fn download<T: DevicePixel>(&self, src: &DeviceImage<'_, T>, dst: ImageViewMut<'_, T>) -> Result<()> {
        if !std::ptr::eq(src.image.buf.gpu(), &self.gpu) {
            return Err(Error::InvalidParameter { name: "device image", reason: "an image of another CUDA backend's device".into() });
        }
        check_same_size(src.size(), dst.size())?;
        self.gpu.download_view(&src.image, dst)
    }

    /// The `width x height` image of packed rows at device address `ptr`, allocated by
    /// another library (CuPy, PyTorch, through DLPack), read and written in place and never
    /// freed here. Errors: an empty image, a size past the address space, or a `ptr` not
    /// aligned for `T`.
    ///
    /// # Safety
    /// `ptr` is memory of this backend's device and context (the device's primary context,
    /// which CuPy and PyTorch use) holding `width * height` elements of `T`; it stays
    /// allocated while the image lives, and nothing else writes it (or reads it, where the
    /// image is an output) until the operations given the image have returned.
    pub unsafe fn borrow_device_image<T: DevicePixel>(&self, ptr: u64, width: usize, height: usize) -> Result<DeviceImage<'_, T>> {
        if width == 0 || height == 0 {
            return Err(Error::ZeroSize { width, height });
        }
        let len = width.checked_mul(height).filter(|n| n.checked_mul(std::mem::size_of::<T>()).is_some_and(|b| ptr.checked_add(b as u64).is_some()));
        let len = len.ok_or_else(|| Error::InvalidParameter { name: "device image", reason: format!("{width} x {height} pixels at {ptr:#x} pass the end of the address space") })?;
        if ptr == 0 || !ptr.is_multiple_of(std::mem::align_of::<T>() as u64) {
            return Err(Error::InvalidParameter { name: "device image", reason: format!("address {ptr:#x} is null or not aligned for its pixel type") });
        }
        // SAFETY: the caller's contract above.
        let buf = unsafe { self.gpu.borrowed::<T>(ptr, len) };
        Ok(DeviceImage { image: DevImage { buf, width, height } })
    }

    /// [`Backend::mean_filter`] on images already on the device.
    pub fn mean_filter_on_device<'s, 'd, 'b: 's + 'd>(&self, src: impl Into<DeviceSrc<'s, 'b>>, dst: impl Into<DeviceDst<'d, 'b>>, p: &BoxParams) -> Result<()> {
        let (src, dst) = checked(&self.gpu, src.into(), dst.into())?;
        filter::mean_filter(&self.gpu, src, dst, p)
    }

    /// [`Backend::box_sum`] on images already on the device.
    pub fn box_sum_on_device<'s, 'd, 'b: 's + 'd>(&self, src: impl Into<DeviceSrc<'s, 'b>>, dst: impl Into<DeviceDst<'d, 'b>>, p: &BoxParams) -> Result<()> {
        let (src, dst) = checked(&self.gpu, src.into(), dst.into())?;
        filter::box_sum(&self.gpu, src, dst, p)
    }

    /// [`Backend::gaussian_blur`] on images already on the device.
    pub fn gaussian_blur_on_device<'s, 'd, 'b: 's + 'd>(&self, src: impl Into<DeviceSrc<'s, 'b>>, dst: impl Into<DeviceDst<'d, 'b>>, p: &GaussianParams) -> Result<()> {
        let (src, dst) = checked(&self.gpu, src.into(), dst.into())?;
        filter::gaussian_blur(&self.gpu, src, dst, p)
    }

    /// [`Backend::local_variance`] on images already on the device.
    pub fn local_variance_on_device<'s, 'd, 'b: 's + 'd>(&self, src: impl Into<DeviceSrc<'s, 'b>>, dst: &'d mut DeviceImage<'b, f32>, p: &VarianceParams) -> Result<()> {
        let (src, dst) = checked(&self.gpu, src.into(), DeviceDst::F32(dst))?;
        let AnyDst::F32(dst) = dst else { unreachable!("an f32 output stays f32") };
        variance::local_variance(&self.gpu, src, dst, p)
    }

    /// [`Backend::mat_add`] on matrices already on the device.
    pub fn mat_add_on_device(&self, a: &DeviceImage<'_, f32>, b: &DeviceImage<'_, f32>, out: &mut DeviceImage<'_, f32>) -> Result<()> {
        check_operands(&self.gpu, &[a.operand(), b.operand()], out.operand())?;
        linalg::mat_add(&self.gpu, Src::Device(&a.image), Src::Device(&b.image), Dst::Device(&out.image))
    }

    /// [`Backend::mat_mul`] on matrices already on the device.
    pub fn mat_mul_on_device(&self, a: &DeviceImage<'_, f32>, b: &DeviceImage<'_, f32>, out: &mut DeviceImage<'_, f32>) -> Result<()> {
        check_operands(&self.gpu, &[a.operand(), b.operand()], out.operand())?;
        linalg::mat_mul(&self.gpu, Src::Device(&a.image), Src::Device(&b.image), Dst::Device(&out.image))
    }

    /// [`Backend::glare`] on images already on the device: the mask and the corrected image
    /// written in place (the spots grow on the host between launches, as in `glare`).
    pub fn glare_on_device<'s, 'd, 'b: 's + 'd>(&self, src: impl Into<DeviceSrc<'s, 'b>>, mask: &'d mut DeviceImage<'b, u8>, corrected: impl Into<DeviceDst<'d, 'b>>, p: &GlareParams) -> Result<GlareReport> {
        let (src, corrected) = (src.into(), corrected.into());
        check_operands(&self.gpu, &[src.operand(), corrected.operand()], mask.operand())?;
        let (src, corrected) = checked(&self.gpu, src, corrected)?;
        glare::glare(&self.gpu, src, Dst::Device(&mask.image), corrected, p)
    }

    /// [`Backend::stereo_sgm`] on a pair already on the device (u8 or RGBA), the disparity
    /// map written in place. The mutual-information cost builds its table on the host from
    /// the pair's lumas, which it downloads for that.
    pub fn stereo_sgm_on_device<'s, 'd, 'b: 's + 'd>(
        &self,
        left: impl Into<DeviceSrc<'s, 'b>>,
        right: impl Into<DeviceSrc<'s, 'b>>,
        disp: &'d mut DeviceImage<'b, f32>,
        p: &StereoParams,
    ) -> Result<StereoStats> {
        let (left, right) = (left.into(), right.into());
        check_operands(&self.gpu, &[left.operand(), right.operand()], disp.operand())?;
        stereo::stereo_sgm(&self.gpu, left.into(), right.into(), Dst::Device(&disp.image), p)
    }

    /// [`Backend::contrast_enhance`] on images already on the device.
    pub fn contrast_enhance_on_device<'s, 'd, 'b: 's + 'd>(&self, src: impl Into<DeviceSrc<'s, 'b>>, dst: impl Into<DeviceDst<'d, 'b>>, p: &ContrastParams) -> Result<()> {
        let (src, dst) = checked(&self.gpu, src.into(), dst.into())?;
        contrast::contrast_enhance(&self.gpu, src, dst, p)
    }
}

impl Backend for CudaBackend {
    fn name(&self) -> &str {
        self.gpu.name()
    }

    fn mean_filter(&self, src: AnyView<'_>, dst: AnyViewMut<'_>, p: &BoxParams) -> Result<()> {
        filter::mean_filter(&self.gpu, src.into(), dst.into(), p)
    }

    fn box_sum(&self, src: AnyView<'_>, dst: AnyViewMut<'_>, p: &BoxParams) -> Result<()> {
        filter::box_sum(&self.gpu, src.into(), dst.into(), p)
    }

    fn gaussian_blur(&self, src: AnyView<'_>, dst: AnyViewMut<'_>, p: &GaussianParams) -> Result<()> {
        filter::gaussian_blur(&self.gpu, src.into(), dst.into(), p)
    }

    fn mat_add(&self, a: ImageView<'_, f32>, b: ImageView<'_, f32>, out: ImageViewMut<'_, f32>) -> Result<()> {
        linalg::mat_add(&self.gpu, Src::Host(a), Src::Host(b), Dst::Host(out))
    }

    fn mat_mul(&self, a: ImageView<'_, f32>, b: ImageView<'_, f32>, out: ImageViewMut<'_, f32>) -> Result<()> {
        linalg::mat_mul(&self.gpu, Src::Host(a), Src::Host(b), Dst::Host(out))
    }

    fn local_variance(&self, src: AnyView<'_>, dst: ImageViewMut<'_, f32>, p: &VarianceParams) -> Result<()> {
        variance::local_variance(&self.gpu, src.into(), Dst::Host(dst), p)
    }

    fn contrast_enhance(&self, src: AnyView<'_>, dst: AnyViewMut<'_>, p: &ContrastParams) -> Result<()> {
        contrast::contrast_enhance(&self.gpu, src.into(), dst.into(), p)
    }

    fn glare(&self, src: AnyView<'_>, mask: ImageViewMut<'_, u8>, corrected: AnyViewMut<'_>, p: &GlareParams) -> Result<GlareReport> {
        glare::glare(&self.gpu, src.into(), Dst::Host(mask), corrected.into(), p)
    }

    fn register_pair(&self, reference: AnyView<'_>, moving: AnyView<'_>, p: &RegisterParams, prediction: (f64, f64)) -> Result<PairRegistration> {
        ncc::register_pair(&self.gpu, reference, moving, p, prediction)
    }

    fn stitch(&self, frames: &dyn FrameSource, p: &StitchParams, progress: &mut dyn FnMut(usize) -> ControlFlow<()>) -> Result<Panorama> {
        registrar::stitch(&self.gpu, frames, p, progress)
    }

    fn stereo_sgm(&self, left: AnyView<'_>, right: AnyView<'_>, disp: ImageViewMut<'_, f32>, p: &StereoParams) -> Result<StereoStats> {
        stereo::stereo_sgm(&self.gpu, left.into(), right.into(), Dst::Host(disp), p)
    }
}
