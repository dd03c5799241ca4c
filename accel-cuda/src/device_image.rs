//! Images that stay on the device between operations.
//!
//! Every [`Backend`](tessera_core::Backend) call uploads its input and downloads its
//! output, which is right for one operation and wasteful for a chain: a Gaussian, then the
//! local variance, then contrast enhancement would cross the link six times for data that
//! could stay put. A [`DeviceImage`] is an image in device memory that the backend's
//! `*_on_device` operations read and write, so such a chain uploads once and downloads
//! once. It is either allocated by the backend (and returned to its pool when dropped) or
//! borrowed from another library's allocation (a CuPy or PyTorch array handed over by
//! DLPack), which the backend reads and writes in place and never frees.
//!
//! The drivers take their input as a [`Src`] (a host view, uploaded for the call, or an
//! image already on the device) and their output as a [`Dst`] (a host view, downloaded
//! into, or a device image written in place): one launch sequence serves both.

use crate::device::{Arg, DevImage, DevicePtr, Gpu, Pod};
use std::ops::Deref;
use tessera_core::image::Pixel;
use tessera_core::{AnyView, AnyViewMut, Error, ImageView, ImageViewMut, Result, Rgba8};

mod sealed {
    /// The pixel types kernels read and write (the crate's `Pod` element types that are
    /// pixels).
    pub trait Sealed: crate::device::Pod + tessera_core::image::Pixel {}
    impl Sealed for u8 {}
    impl Sealed for u16 {}
    impl Sealed for u32 {}
    impl Sealed for f32 {}
    impl Sealed for tessera_core::Rgba8 {}
}

/// A pixel type a [`DeviceImage`] can hold: `u8`, `u16`, `u32`, `f32`, [`Rgba8`].
pub trait DevicePixel: sealed::Sealed {}
impl<T: sealed::Sealed> DevicePixel for T {}

/// A `width x height` image in device memory, rows packed: pixel `(x, y)` is element
/// `y * width + x` from [`device_ptr`](Self::device_ptr). Made by
/// [`CudaBackend::upload`](crate::CudaBackend::upload),
/// [`CudaBackend::device_image`](crate::CudaBackend::device_image) or
/// [`CudaBackend::borrow_device_image`](crate::CudaBackend::borrow_device_image); read
/// back with [`CudaBackend::download`](crate::CudaBackend::download).
pub struct DeviceImage<'b, T> {
    pub(crate) image: DevImage<'b, T>,
}

impl<T: DevicePixel> DeviceImage<'_, T> {
    pub fn width(&self) -> usize {
        self.image.width
    }

    pub fn height(&self) -> usize {
        self.image.height
    }

    /// `(width, height)`.
    pub fn size(&self) -> (usize, usize) {
        (self.image.width, self.image.height)
    }

    /// The device address of pixel `(0, 0)` (a `CUdeviceptr`; on the CPU shim, a host
    /// address).
    pub fn device_ptr(&self) -> u64 {
        self.image.buf.ptr()
    }

    /// Whether the memory belongs to another library (borrowed, never freed here).
    pub fn is_borrowed(&self) -> bool {
        !self.image.buf.is_owned()
    }

    /// The bytes the image spans on the device.
    fn span(&self) -> std::ops::Range<DevicePtr> {
        let start = self.device_ptr();
        start..start + (self.image.buf.len() * std::mem::size_of::<T>()) as u64
    }

    /// The image as an operand of [`check_operands`].
    pub(crate) fn operand(&self) -> (*const Gpu, std::ops::Range<DevicePtr>) {
        (self.image.buf.gpu(), self.span())
    }
}

/// An operation's input on the device, by pixel type.
pub enum DeviceSrc<'a, 'b> {
    U8(&'a DeviceImage<'b, u8>),
    U16(&'a DeviceImage<'b, u16>),
    F32(&'a DeviceImage<'b, f32>),
    Rgba8(&'a DeviceImage<'b, Rgba8>),
}

/// An operation's output on the device, by pixel type.
pub enum DeviceDst<'a, 'b> {
    U8(&'a mut DeviceImage<'b, u8>),
    U16(&'a mut DeviceImage<'b, u16>),
    U32(&'a mut DeviceImage<'b, u32>),
    F32(&'a mut DeviceImage<'b, f32>),
    Rgba8(&'a mut DeviceImage<'b, Rgba8>),
}

macro_rules! device_conversions {
    ($($t:ty => $v:ident),*) => {$(
        impl<'a, 'b> From<&'a DeviceImage<'b, $t>> for DeviceSrc<'a, 'b> {
            fn from(i: &'a DeviceImage<'b, $t>) -> Self {
                DeviceSrc::$v(i)
            }
        }
        impl<'a, 'b> From<&'a mut DeviceImage<'b, $t>> for DeviceDst<'a, 'b> {
            fn from(i: &'a mut DeviceImage<'b, $t>) -> Self {
                DeviceDst::$v(i)
            }
        }
    )*};
}
device_conversions!(u8 => U8, u16 => U16, f32 => F32, Rgba8 => Rgba8);

impl<'a, 'b> From<&'a mut DeviceImage<'b, u32>> for DeviceDst<'a, 'b> {
    fn from(i: &'a mut DeviceImage<'b, u32>) -> Self {
        DeviceDst::U32(i)
    }
}

impl DeviceSrc<'_, '_> {
    /// The image as an operand of [`check_operands`].
    pub(crate) fn operand(&self) -> (*const Gpu, std::ops::Range<DevicePtr>) {
        match self {
            DeviceSrc::U8(i) => i.operand(),
            DeviceSrc::U16(i) => i.operand(),
            DeviceSrc::F32(i) => i.operand(),
            DeviceSrc::Rgba8(i) => i.operand(),
        }
    }
}

impl DeviceDst<'_, '_> {
    /// The image as an operand of [`check_operands`].
    pub(crate) fn operand(&self) -> (*const Gpu, std::ops::Range<DevicePtr>) {
        match self {
            DeviceDst::U8(i) => i.operand(),
            DeviceDst::U16(i) => i.operand(),
            DeviceDst::U32(i) => i.operand(),
            DeviceDst::F32(i) => i.operand(),
            DeviceDst::Rgba8(i) => i.operand(),
        }
    }
}

/// `src` and `dst` as the drivers take them, once checked ([`check_operands`]).
pub(crate) fn checked<'s, 'd>(gpu: &Gpu, src: DeviceSrc<'s, '_>, dst: DeviceDst<'d, '_>) -> Result<(AnySrc<'s>, AnyDst<'d>)> {
    check_operands(gpu, &[src.operand()], dst.operand())?;
    Ok((src.into(), dst.into()))
}

/// Device operands (each its `Gpu` and the bytes it spans) checked: all on `gpu` (an image
/// of another backend's device is an error, not a crash), and the output overlapping no
/// input (the kernels read their inputs while others write the output, so in place is
/// never safe).
pub(crate) fn check_operands(gpu: &Gpu, inputs: &[(*const Gpu, std::ops::Range<DevicePtr>)], output: (*const Gpu, std::ops::Range<DevicePtr>)) -> Result<()> {
    if inputs.iter().chain([&output]).any(|(g, _)| !std::ptr::eq(*g, gpu)) {
        return Err(Error::InvalidParameter { name: "device image", reason: "an image of another CUDA backend's device".into() });
    }
    let d = &output.1;
    if inputs.iter().any(|(_, s)| s.start < d.end && d.start < s.end) {
        return Err(Error::InvalidParameter { name: "device image", reason: "an input and the output overlap (in place is not supported)".into() });
    }
    Ok(())
}

/// A driver's input: a host view (uploaded for the call) or an image on the device.
pub(crate) enum Src<'a, T> {
    Host(ImageView<'a, T>),
    Device(&'a DevImage<'a, T>),
}

/// A driver's output: a host view (downloaded into) or an image on the device (written in
/// place).
pub(crate) enum Dst<'a, T> {
    Host(ImageViewMut<'a, T>),
    Device(&'a DevImage<'a, T>),
}

/// An image on the device for the length of a call: uploaded (or allocated) for it, or the
/// caller's.
pub(crate) enum Staged<'a, T> {
    Own(DevImage<'a, T>),
    Caller(&'a DevImage<'a, T>),
}

impl<'a, T> Deref for Staged<'a, T> {
    type Target = DevImage<'a, T>;
    fn deref(&self) -> &DevImage<'a, T> {
        match self {
            Staged::Own(i) => i,
            Staged::Caller(i) => i,
        }
    }
}

impl<T> From<&Staged<'_, T>> for Arg {
    fn from(s: &Staged<'_, T>) -> Arg {
        Arg::from(&**s)
    }
}

impl<'a, T: Pod + Pixel> Src<'a, T> {
    pub(crate) fn size(&self) -> (usize, usize) {
        match self {
            Src::Host(v) => v.size(),
            Src::Device(i) => (i.width, i.height),
        }
    }

    /// The input on the device: uploaded now, or the caller's image.
    pub(crate) fn stage(&self, gpu: &'a Gpu) -> Result<Staged<'a, T>> {
        match *self {
            Src::Host(v) => Ok(Staged::Own(gpu.upload_view(v)?)),
            Src::Device(i) => Ok(Staged::Caller(i)),
        }
    }

    /// The host view, where the input is one.
    pub(crate) fn host(&self) -> Option<ImageView<'a, T>> {
        match *self {
            Src::Host(v) => Some(v),
            Src::Device(_) => None,
        }
    }
}

impl<'a, T: Pod + Pixel> Dst<'a, T> {
    pub(crate) fn size(&self) -> (usize, usize) {
        match self {
            Dst::Host(v) => v.size(),
            Dst::Device(i) => (i.width, i.height),
        }
    }

    /// Where the kernels write, and the host view to download it into afterwards (see
    /// [`Output::finish`]).
    pub(crate) fn open(self, gpu: &'a Gpu) -> Result<Output<'a, T>> {
        Ok(match self {
            Dst::Host(v) => {
                let (w, h) = v.size();
                Output { target: Staged::Own(gpu.image::<T>(w, h)?), host: Some(v) }
            }
            Dst::Device(i) => Output { target: Staged::Caller(i), host: None },
        })
    }
}

/// A driver's output while its kernels run: `target` on the device, downloaded into the
/// host view by [`finish`](Self::finish) where there is one.
pub(crate) struct Output<'a, T> {
    pub(crate) target: Staged<'a, T>,
    host: Option<ImageViewMut<'a, T>>,
}

impl<T: Pod + Pixel> Output<'_, T> {
    pub(crate) fn finish(self, gpu: &Gpu) -> Result<()> {
        match self.host {
            Some(v) => gpu.download_view(&self.target, v),
            None => Ok(()),
        }
    }
}

/// A driver's input by pixel type.
pub(crate) enum AnySrc<'a> {
    U8(Src<'a, u8>),
    U16(Src<'a, u16>),
    F32(Src<'a, f32>),
    Rgba8(Src<'a, Rgba8>),
}

/// A driver's output by pixel type.
pub(crate) enum AnyDst<'a> {
    U8(Dst<'a, u8>),
    U16(Dst<'a, u16>),
    U32(Dst<'a, u32>),
    F32(Dst<'a, f32>),
    Rgba8(Dst<'a, Rgba8>),
}

impl AnySrc<'_> {
    pub(crate) fn size(&self) -> (usize, usize) {
        match self {
            AnySrc::U8(s) => s.size(),
            AnySrc::U16(s) => s.size(),
            AnySrc::F32(s) => s.size(),
            AnySrc::Rgba8(s) => s.size(),
        }
    }
}

impl AnyDst<'_> {
    pub(crate) fn size(&self) -> (usize, usize) {
        match self {
            AnyDst::U8(d) => d.size(),
            AnyDst::U16(d) => d.size(),
            AnyDst::U32(d) => d.size(),
            AnyDst::F32(d) => d.size(),
            AnyDst::Rgba8(d) => d.size(),
        }
    }
}

impl<'a> From<AnyView<'a>> for AnySrc<'a> {
    fn from(v: AnyView<'a>) -> Self {
        match v {
            AnyView::U8(v) => AnySrc::U8(Src::Host(v)),
            AnyView::U16(v) => AnySrc::U16(Src::Host(v)),
            AnyView::F32(v) => AnySrc::F32(Src::Host(v)),
            AnyView::Rgba8(v) => AnySrc::Rgba8(Src::Host(v)),
        }
    }
}

impl<'a> From<AnyViewMut<'a>> for AnyDst<'a> {
    fn from(v: AnyViewMut<'a>) -> Self {
        match v {
            AnyViewMut::U8(v) => AnyDst::U8(Dst::Host(v)),
            AnyViewMut::U16(v) => AnyDst::U16(Dst::Host(v)),
            AnyViewMut::U32(v) => AnyDst::U32(Dst::Host(v)),
            AnyViewMut::F32(v) => AnyDst::F32(Dst::Host(v)),
            AnyViewMut::Rgba8(v) => AnyDst::Rgba8(Dst::Host(v)),
        }
    }
}

impl<'a> From<DeviceSrc<'a, '_>> for AnySrc<'a> {
    fn from(v: DeviceSrc<'a, '_>) -> Self {
        match v {
            DeviceSrc::U8(i) => AnySrc::U8(Src::Device(&i.image)),
            DeviceSrc::U16(i) => AnySrc::U16(Src::Device(&i.image)),
            DeviceSrc::F32(i) => AnySrc::F32(Src::Device(&i.image)),
            DeviceSrc::Rgba8(i) => AnySrc::Rgba8(Src::Device(&i.image)),
        }
    }
}

impl<'a> From<DeviceDst<'a, '_>> for AnyDst<'a> {
    fn from(v: DeviceDst<'a, '_>) -> Self {
        match v {
            DeviceDst::U8(i) => AnyDst::U8(Dst::Device(&i.image)),
            DeviceDst::U16(i) => AnyDst::U16(Dst::Device(&i.image)),
            DeviceDst::U32(i) => AnyDst::U32(Dst::Device(&i.image)),
            DeviceDst::F32(i) => AnyDst::F32(Dst::Device(&i.image)),
            DeviceDst::Rgba8(i) => AnyDst::Rgba8(Dst::Device(&i.image)),
        }
    }
}

#[cfg(all(test, feature = "shim"))]
mod tests {
    use super::*;
    use crate::backend::CudaBackend;
    use crate::shim::ShimDevice;
    use crate::transfer::StagingConfig;
    use tessera_core::contrast::ContrastParams;
    use tessera_core::filter::{BoxParams, GaussianMethod, GaussianParams};
    use tessera_core::variance::{VarianceMethod, VarianceParams};
    use tessera_core::{Backend, Image};

    /// Images of at least 1 000 bytes take the staged path, anything shorter (a kernel's
    /// weights, a reduction's scalar) the pageable one: the staged count is the images'.
    fn backend() -> CudaBackend {
        let config = StagingConfig { chunk: 4099, workers: 1, cap: 4 * 4099, min_bytes: 1000 };
        CudaBackend::with_gpu(crate::device::Gpu::with_staging(Box::new(ShimDevice::new()), config), "shim".into())
    }

    fn image<T>(w: usize, h: usize, seed: u64, f: impl Fn(u64) -> T) -> Image<T>
    where
        T: Pixel,
    {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        Image::from_fn(w, h, |x, y| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            // Smooth structure plus noise, so the statistics are not those of white noise.
            f((s >> 40) % 64 + ((x * 7 + y * 3) % 192) as u64)
        })
        .unwrap()
    }

    fn staged(b: &CudaBackend) -> u64 {
        b.gpu().transfer_counts().staged
    }

    /// Gaussian, then the local variance and contrast enhancement of the blurred image:
    /// through device images (one upload, two downloads) and through the host calls (an
    /// upload and a download each), with the same bits.
    fn chain<T: DevicePixel + PartialEq + core::fmt::Debug>(src: &Image<T>, gauss: &GaussianParams, var: &VarianceParams)
    where
        for<'a> ImageView<'a, T>: Into<AnyView<'a>>,
        for<'a> ImageViewMut<'a, T>: Into<AnyViewMut<'a>>,
        for<'a, 'b> &'a DeviceImage<'b, T>: Into<DeviceSrc<'a, 'b>>,
        for<'a, 'b> &'a mut DeviceImage<'b, T>: Into<DeviceDst<'a, 'b>>,
    {
        let b = backend();
        let (w, h) = src.size();
        let contrast = ContrastParams::default();
        let mut blurred = Image::<T>::new(w, h).unwrap();
        let (mut variance, mut enhanced) = (Image::<f32>::new(w, h).unwrap(), Image::<T>::new(w, h).unwrap());
        let before = staged(&b);
        b.gaussian_blur(src.view().into(), blurred.view_mut().into(), gauss).unwrap();
        b.local_variance(blurred.view().into(), variance.view_mut(), var).unwrap();
        b.contrast_enhance(blurred.view().into(), enhanced.view_mut().into(), &contrast).unwrap();
        assert_eq!(staged(&b) - before, 6, "host calls: an upload and a download each");

        let before = staged(&b);
        let up = b.upload(src.view()).unwrap();
        let mut d_blurred = b.device_image::<T>(w, h).unwrap();
        b.gaussian_blur_on_device(&up, &mut d_blurred, gauss).unwrap();
        let mut d_variance = b.device_image::<f32>(w, h).unwrap();
        b.local_variance_on_device(&d_blurred, &mut d_variance, var).unwrap();
        let mut d_enhanced = b.device_image::<T>(w, h).unwrap();
        b.contrast_enhance_on_device(&d_blurred, &mut d_enhanced, &contrast).unwrap();
        let (mut variance2, mut enhanced2) = (Image::<f32>::new(w, h).unwrap(), Image::<T>::new(w, h).unwrap());
        b.download(&d_variance, variance2.view_mut()).unwrap();
        b.download(&d_enhanced, enhanced2.view_mut()).unwrap();
        assert_eq!(staged(&b) - before, 3, "device chain: one upload, two downloads");
        let bits = |i: &Image<f32>| i.as_slice().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&variance2), bits(&variance));
        assert_eq!(enhanced2.as_slice(), enhanced.as_slice());
    }

    #[test]
    fn a_chain_on_device_images_uploads_once_and_gives_the_host_calls_bits() {
        let fir = GaussianParams { sigma: 1.5, ..Default::default() };
        let iir = GaussianParams { sigma: 3.0, method: GaussianMethod::Iir, ..Default::default() };
        let exact = VarianceParams::default();
        let usual = VarianceParams { method: VarianceMethod::Usual, ..Default::default() };
        let (w, h) = (61, 47);
        chain(&image(w, h, 1, |v| v as u8), &fir, &exact);
        chain(&image(w, h, 2, |v| (v * 257) as u16), &iir, &usual);
        chain(&image(w, h, 3, |v| v as f32 * 0.37 + 900.0), &fir, &exact);
        chain(&image(w, h, 4, |v| v as f32 * 0.37 - 40.0), &iir, &usual);
        chain(&image(w, h, 5, |v| Rgba8 { r: v as u8, g: (v * 3) as u8, b: (v * 7) as u8, a: 255 }), &fir, &exact);
    }

    #[test]
    fn box_filters_on_device_images_match_the_host_calls() {
        let b = backend();
        let src = image(53, 29, 9, |v| v as u8);
        let p = BoxParams { width: 5, height: 9, ..Default::default() };
        let (mut mean, mut sum) = (Image::<u8>::new(53, 29).unwrap(), Image::<u32>::new(53, 29).unwrap());
        b.mean_filter(src.view().into(), mean.view_mut().into(), &p).unwrap();
        b.box_sum(src.view().into(), sum.view_mut().into(), &p).unwrap();
        let up = b.upload(src.view()).unwrap();
        let (mut d_mean, mut d_sum) = (b.device_image::<u8>(53, 29).unwrap(), b.device_image::<u32>(53, 29).unwrap());
        b.mean_filter_on_device(&up, &mut d_mean, &p).unwrap();
        b.box_sum_on_device(&up, &mut d_sum, &p).unwrap();
        let (mut mean2, mut sum2) = (Image::<u8>::new(53, 29).unwrap(), Image::<u32>::new(53, 29).unwrap());
        b.download(&d_mean, mean2.view_mut()).unwrap();
        b.download(&d_sum, sum2.view_mut()).unwrap();
        assert_eq!(mean2.as_slice(), mean.as_slice());
        assert_eq!(sum2.as_slice(), sum.as_slice());
    }

    #[test]
    fn matrix_operations_on_device_images_match_the_host_calls() {
        let b = backend();
        let x = image(37, 23, 3, |v| v as f32 / 64.0);
        let y = image(37, 23, 4, |v| v as f32 / 32.0 - 2.0);
        let z = image(19, 37, 5, |v| v as f32 / 128.0);
        let (mut sum, mut product) = (Image::<f32>::new(37, 23).unwrap(), Image::<f32>::new(19, 23).unwrap());
        b.mat_add(x.view(), y.view(), sum.view_mut()).unwrap();
        b.mat_mul(x.view(), z.view(), product.view_mut()).unwrap();
        let (dx, dy, dz) = (b.upload(x.view()).unwrap(), b.upload(y.view()).unwrap(), b.upload(z.view()).unwrap());
        let (mut dsum, mut dproduct) = (b.device_image::<f32>(37, 23).unwrap(), b.device_image::<f32>(19, 23).unwrap());
        b.mat_add_on_device(&dx, &dy, &mut dsum).unwrap();
        b.mat_mul_on_device(&dx, &dz, &mut dproduct).unwrap();
        let (mut sum2, mut product2) = (Image::<f32>::new(37, 23).unwrap(), Image::<f32>::new(19, 23).unwrap());
        b.download(&dsum, sum2.view_mut()).unwrap();
        b.download(&dproduct, product2.view_mut()).unwrap();
        assert_eq!(sum2.as_slice(), sum.as_slice());
        assert_eq!(product2.as_slice(), product.as_slice());
        // Shapes that do not multiply, and an output that is an input.
        assert!(b.mat_mul_on_device(&dx, &dy, &mut dproduct).is_err());
        // SAFETY: `dy` holds 37 x 23 f32 and outlives `alias`.
        let mut alias = unsafe { b.borrow_device_image::<f32>(dy.device_ptr(), 37, 23) }.unwrap();
        assert!(b.mat_add_on_device(&dx, &dy, &mut alias).is_err());
    }

    #[test]
    fn borrowed_memory_is_read_and_written_in_place_and_never_freed() {
        let b = backend();
        let src = image(40, 30, 11, |v| v as f32);
        let owner_in = b.upload(src.view()).unwrap();
        let owner_out = b.device_image::<f32>(40, 30).unwrap();
        {
            // SAFETY: both allocations hold 40 x 30 f32 and outlive the borrowed images.
            let input = unsafe { b.borrow_device_image::<f32>(owner_in.device_ptr(), 40, 30) }.unwrap();
            let mut output = unsafe { b.borrow_device_image::<f32>(owner_out.device_ptr(), 40, 30) }.unwrap();
            assert!(input.is_borrowed() && !owner_in.is_borrowed());
            b.gaussian_blur_on_device(&input, &mut output, &GaussianParams::default()).unwrap();
        }
        let mut expected = Image::<f32>::new(40, 30).unwrap();
        b.gaussian_blur(src.view().into(), expected.view_mut().into(), &GaussianParams::default()).unwrap();
        let mut got = Image::<f32>::new(40, 30).unwrap();
        b.download(&owner_out, got.view_mut()).unwrap();
        assert_eq!(got.as_slice(), expected.as_slice(), "written in place");
        // Had the borrowed images been given to the pool, these would reuse the owners' memory.
        let again = [b.device_image::<f32>(40, 30).unwrap(), b.device_image::<f32>(40, 30).unwrap()];
        for a in &again {
            assert!(a.device_ptr() != owner_in.device_ptr() && a.device_ptr() != owner_out.device_ptr());
        }
    }

    #[test]
    fn bad_device_images_are_errors() {
        let (b, other) = (backend(), backend());
        let up = b.upload(image(20, 10, 1, |v| v as u8).view()).unwrap();
        let p = BoxParams::default();
        // Another backend's image, on either side.
        let mut foreign = other.device_image::<u8>(20, 10).unwrap();
        assert!(b.mean_filter_on_device(&up, &mut foreign, &p).is_err());
        let mut out = b.device_image::<u8>(20, 10).unwrap();
        let theirs = other.upload(image(20, 10, 1, |v| v as u8).view()).unwrap();
        assert!(b.mean_filter_on_device(&theirs, &mut out, &p).is_err());
        assert!(b.download(&theirs, Image::<u8>::new(20, 10).unwrap().view_mut()).is_err());
        // Sizes and types that do not match.
        let mut small = b.device_image::<u8>(20, 9).unwrap();
        assert!(b.mean_filter_on_device(&up, &mut small, &p).is_err());
        assert!(b.download(&up, Image::<u8>::new(19, 10).unwrap().view_mut()).is_err());
        let mut wrong = b.device_image::<f32>(20, 10).unwrap();
        assert!(b.mean_filter_on_device(&up, &mut wrong, &p).is_err());
        assert!(b.gaussian_blur_on_device(&up, &mut wrong, &GaussianParams::default()).is_err());
        // In place (the same memory borrowed as the output).
        // SAFETY: `up` holds 20 x 10 u8 and outlives `alias`.
        let mut alias = unsafe { b.borrow_device_image::<u8>(up.device_ptr(), 20, 10) }.unwrap();
        assert!(b.mean_filter_on_device(&up, &mut alias, &p).is_err());
        // Addresses that cannot hold the image.
        // SAFETY: each is refused before any use.
        unsafe {
            assert!(b.borrow_device_image::<f32>(0, 4, 4).is_err());
            assert!(b.borrow_device_image::<f32>(up.device_ptr() + 1, 4, 4).is_err());
            assert!(b.borrow_device_image::<f32>(up.device_ptr(), 0, 4).is_err());
            assert!(b.borrow_device_image::<f32>(u64::MAX - 15, 4, 4).is_err());
            assert!(b.borrow_device_image::<u8>(up.device_ptr(), usize::MAX, 2).is_err());
        }
        // An image too large to allocate is an error, not an abort.
        assert!(b.device_image::<f32>(usize::MAX / 2, 3).is_err());
    }
}
