//! The one-image operations and the matrix operations as values, so that one call runs
//! them on host images (NumPy or host DLPack arrays, any backend) or on device images (CUDA
//! arrays, the CUDA backend) alike.

use tessera::contrast::ContrastParams;
use tessera::cuda::{CudaBackend, DeviceDst, DeviceImage, DeviceSrc};
use tessera::dlpack::PixelKind;
use tessera::filter::{BoxParams, GaussianParams};
use tessera::{AnyView, AnyViewMut, Backend, ImageView, ImageViewMut, Result, VarianceParams};

/// One image in, one new image out.
pub enum Op {
    Mean(BoxParams),
    BoxSum(BoxParams),
    Gaussian(GaussianParams),
    Variance(VarianceParams),
    Contrast(ContrastParams),
}

impl Op {
    /// The output's pixel type for an input of `input`.
    pub fn output(&self, input: PixelKind) -> PixelKind {
        match self {
            Op::Mean(_) | Op::Gaussian(_) | Op::Contrast(_) => input,
            Op::BoxSum(_) if input == PixelKind::F32 => PixelKind::F32,
            Op::BoxSum(_) => PixelKind::U32,
            Op::Variance(_) => PixelKind::F32,
        }
    }

    /// On host images, by `b`.
    pub fn host(&self, b: &dyn Backend, src: AnyView<'_>, dst: AnyViewMut<'_>) -> Result<()> {
        match self {
            Op::Mean(p) => b.mean_filter(src, dst, p),
            Op::BoxSum(p) => b.box_sum(src, dst, p),
            Op::Gaussian(p) => b.gaussian_blur(src, dst, p),
            Op::Variance(p) => match dst {
                AnyViewMut::F32(d) => b.local_variance(src, d, p),
                _ => Err(tessera::backend::type_mismatch("local variance (a float32 output)")),
            },
            Op::Contrast(p) => b.contrast_enhance(src, dst, p),
        }
    }

    /// On device images, by the CUDA backend `b`.
    pub fn device<'b>(&self, b: &CudaBackend, src: DeviceSrc<'_, 'b>, dst: DeviceDst<'_, 'b>) -> Result<()> {
        match self {
            Op::Mean(p) => b.mean_filter_on_device(src, dst, p),
            Op::BoxSum(p) => b.box_sum_on_device(src, dst, p),
            Op::Gaussian(p) => b.gaussian_blur_on_device(src, dst, p),
            Op::Variance(p) => match dst {
                DeviceDst::F32(d) => b.local_variance_on_device(src, d, p),
                _ => Err(tessera::backend::type_mismatch("local variance (a float32 output)")),
            },
            Op::Contrast(p) => b.contrast_enhance_on_device(src, dst, p),
        }
    }
}

/// Two float32 matrices in, one out.
#[derive(Clone, Copy)]
pub enum MatOp {
    Add,
    Mul,
}

impl MatOp {
    /// The output's `(width, height)` for inputs of these sizes (checked by the backend).
    pub fn output(self, (aw, ah): (usize, usize), (bw, _): (usize, usize)) -> (usize, usize) {
        match self {
            MatOp::Add => (aw, ah),
            MatOp::Mul => (bw, ah),
        }
    }

    pub fn host(self, b: &dyn Backend, x: ImageView<'_, f32>, y: ImageView<'_, f32>, out: ImageViewMut<'_, f32>) -> Result<()> {
        match self {
            MatOp::Add => b.mat_add(x, y, out),
            MatOp::Mul => b.mat_mul(x, y, out),
        }
    }

    pub fn device(self, b: &CudaBackend, x: &DeviceImage<'_, f32>, y: &DeviceImage<'_, f32>, out: &mut DeviceImage<'_, f32>) -> Result<()> {
        match self {
            MatOp::Add => b.mat_add_on_device(x, y, out),
            MatOp::Mul => b.mat_mul_on_device(x, y, out),
        }
    }
}

/// The pixel type of a host view.
pub fn kind_of(v: &AnyView<'_>) -> PixelKind {
    match v {
        AnyView::U8(_) => PixelKind::U8,
        AnyView::U16(_) => PixelKind::U16,
        AnyView::F32(_) => PixelKind::F32,
        AnyView::Rgba8(_) => PixelKind::Rgba8,
    }
}
