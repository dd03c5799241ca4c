//! Drives `kernels/filter.cu`: box sums and means (two passes, each a running sum, so the
//! cost per pixel does not depend on the window), and the Gaussian blur.
//!
//! Exactness: u8 / u16 sums and means are the CPU backend's, bit for bit (exact integer
//! sums, the same half-up rounding). f32 sums run in f64 as on the CPU, but as running
//! sums where the CPU takes differences of a prefix: the f32 results agree to within one
//! f32 rounding of the window's sum of |x| (tested: `tests/shim_filter.rs`).

use crate::device::{args, blocks, int, Gpu, Pod};
use crate::kernels::{Kernel, Module};
use tessera_core::filter::{BoxParams, GaussianMethod, GaussianParams};
use tessera_core::image::{check_same_size, Pixel};
use tessera_core::{AnyView, AnyViewMut, Border, Error, ImageView, ImageViewMut, Result, Rgba8};

const fn k(name: &'static str) -> Kernel {
    Kernel::new(Module::Filter, name)
}

/// Threads per block of the one-dimensional launches.
const BLOCK: u32 = 128;

/// The kernels' border code and outside value.
pub(crate) fn border_mode(b: Border) -> (i32, f32) {
    match b {
        Border::Reflect101 => (0, 0.0),
        Border::Replicate => (1, 0.0),
        Border::Constant(v) => (2, v),
        Border::Normalize => (3, 0.0),
    }
}

fn validate(src: (usize, usize), dst: (usize, usize), p: &BoxParams, integer_max: Option<f32>) -> Result<()> {
    check_same_size(src, dst)?;
    p.window().validate()?;
    p.border.validate(integer_max)
}

/// The column pass: window sums down each lane column, into a `lanes x h` image of `A`.
fn column_sums<'g, T: Pod + Pixel, A: Pod>(
    gpu: &'g Gpu,
    kernel: Kernel,
    src: &crate::device::DevImage<'_, T>,
    width: usize,
    height: usize,
    channels: usize,
    p: &BoxParams,
) -> Result<crate::device::DevBuf<'g, A>> {
    let lanes = width * channels;
    let cols = gpu.buffer::<A>(lanes * height)?;
    let (mode, outside) = border_mode(p.border);
    gpu.launch(
        kernel,
        [blocks(lanes, BLOCK), 1, 1],
        [BLOCK, 1, 1],
        0,
        args![src, &cols, int(width, "width")?, int(height, "height")?, channels as i32, p.height as i32, mode, outside],
    )?;
    Ok(cols)
}

/// Runs the column pass `cols_kernel` then the row pass `rows_kernel` (whose arguments
/// carry the channel count when `rows_take_channels`) on `src`, into `dst`.
#[allow(clippy::too_many_arguments)]
fn two_passes<T: Pod + Pixel, A: Pod, O: Pod + Pixel>(
    gpu: &Gpu,
    src: ImageView<'_, T>,
    dst: ImageViewMut<'_, O>,
    channels: usize,
    p: &BoxParams,
    cols_kernel: Kernel,
    rows_kernel: Kernel,
    rows_take_channels: bool,
) -> Result<()> {
    let (w, h) = src.size();
    int(w * channels, "width")?;
    let hi = int(h, "height")?;
    let dsrc = gpu.upload_view(src)?;
    let cols = column_sums::<T, A>(gpu, cols_kernel, &dsrc, w, h, channels, p)?;
    drop(dsrc);
    let out = gpu.image::<O>(w, h)?;
    let (mode, outside) = border_mode(p.border);
    let (ww, wh) = (p.width as i32, p.height as i32);
    let w32 = w as i32;
    let grid = [blocks(h * channels, BLOCK), 1, 1];
    if rows_take_channels {
        gpu.launch(rows_kernel, grid, [BLOCK, 1, 1], 0, args![&cols, &out, w32, hi, channels as i32, ww, wh, mode, outside])?;
    } else {
        gpu.launch(rows_kernel, grid, [BLOCK, 1, 1], 0, args![&cols, &out, w32, hi, ww, wh, mode, outside])?;
    }
    gpu.download_view(&out, dst)
}

/// Mean filter ([`tessera_core::filter::mean_filter`]): identical to the CPU for u8, u16
/// and RGBA; f32 within one f32 rounding of the window's sum of |x| divided by its area.
pub(crate) fn mean_filter(gpu: &Gpu, src: AnyView<'_>, dst: AnyViewMut<'_>, p: &BoxParams) -> Result<()> {
    let cols = k;
    match (src, dst) {
        (AnyView::U8(s), AnyViewMut::U8(d)) => {
            validate(s.size(), d.size(), p, Some(255.0))?;
            two_passes::<u8, u32, u8>(gpu, s, d, 1, p, cols("box_cols_u8"), k("mean_rows_u8"), true)
        }
        (AnyView::U16(s), AnyViewMut::U16(d)) => {
            validate(s.size(), d.size(), p, Some(65535.0))?;
            two_passes::<u16, u32, u16>(gpu, s, d, 1, p, cols("box_cols_u16"), k("mean_rows_u16"), false)
        }
        (AnyView::F32(s), AnyViewMut::F32(d)) => {
            validate(s.size(), d.size(), p, None)?;
            two_passes::<f32, f64, f32>(gpu, s, d, 1, p, cols("box_cols_f32"), k("mean_rows_f32"), false)
        }
        (AnyView::Rgba8(s), AnyViewMut::Rgba8(d)) => {
            validate(s.size(), d.size(), p, Some(255.0))?;
            // Each channel is a lane of its own: the passes step over whole pixels.
            two_passes::<Rgba8, u32, Rgba8>(gpu, s, d, 4, p, cols("box_cols_u8"), k("mean_rows_u8"), true)
        }
        _ => Err(tessera_core::backend::type_mismatch("mean filter")),
    }
}

/// Box sum ([`tessera_core::filter::box_sum`]): u8 / u16 into u32, exact and identical to
/// the CPU; f32 into f32 summed in f64 (within one f32 rounding of the CPU's).
pub(crate) fn box_sum(gpu: &Gpu, src: AnyView<'_>, dst: AnyViewMut<'_>, p: &BoxParams) -> Result<()> {
    match (src, dst) {
        (AnyView::U8(s), AnyViewMut::U32(d)) => {
            validate(s.size(), d.size(), p, Some(255.0))?;
            two_passes::<u8, u32, u32>(gpu, s, d, 1, p, k("box_cols_u8"), k("box_sum_rows_u8"), false)
        }
        (AnyView::U16(s), AnyViewMut::U32(d)) => {
            validate(s.size(), d.size(), p, Some(65535.0))?;
            let area = p.window().area() as u64;
            if 65535 * area > u32::MAX as u64 {
                return Err(Error::OutOfRange { name: "window area", value: area as i64, min: 1, max: (u32::MAX as u64 / 65535) as i64 });
            }
            two_passes::<u16, u32, u32>(gpu, s, d, 1, p, k("box_cols_u16"), k("box_sum_rows_u16"), false)
        }
        (AnyView::F32(s), AnyViewMut::F32(d)) => {
            validate(s.size(), d.size(), p, None)?;
            two_passes::<f32, f64, f32>(gpu, s, d, 1, p, k("box_cols_f32"), k("box_sum_rows_f32"), false)
        }
        _ => Err(Error::UnsupportedType { op: "box sum", types: "other than u8 -> u32, u16 -> u32 or f32 -> f32" }),
    }
}

/// Gaussian blur ([`tessera_core::filter::gaussian_blur`]): the FIR as the core computes
/// it (same weights, vertical then horizontal pass, f32 fused multiply-adds, integers
/// rounded once), within 1e-5 relative (f32) or one level (integers, where the sums land
/// within rounding of a half) of the CPU; the IIR as `gaussian_iir` on the device.
pub(crate) fn gaussian_blur(gpu: &Gpu, src: AnyView<'_>, dst: AnyViewMut<'_>, p: &GaussianParams) -> Result<()> {
    let (integer_max, channels) = match (&src, &dst) {
        (AnyView::U8(_), AnyViewMut::U8(_)) => (Some(255.0), 1),
        (AnyView::U16(_), AnyViewMut::U16(_)) => (Some(65535.0), 1),
        (AnyView::F32(_), AnyViewMut::F32(_)) => (None, 1),
        (AnyView::Rgba8(_), AnyViewMut::Rgba8(_)) => (Some(255.0), 4),
        _ => return Err(tessera_core::backend::type_mismatch("gaussian blur")),
    };
    check_same_size(src.size(), dst.size())?;
    p.validate(integer_max)?;
    if p.resolved_method(channels) == GaussianMethod::Iir {
        return gaussian_iir(gpu, src, dst, p);
    }
    let wts = tessera_core::filter::gaussian_weights(p.sigma, p.fir_radius());
    match (src, dst) {
        (AnyView::U8(s), AnyViewMut::U8(d)) => fir::<u8>(gpu, s, d, 1, &wts, p.border, "u8"),
        (AnyView::U16(s), AnyViewMut::U16(d)) => fir::<u16>(gpu, s, d, 1, &wts, p.border, "u16"),
        (AnyView::F32(s), AnyViewMut::F32(d)) => fir::<f32>(gpu, s, d, 1, &wts, p.border, "f32"),
        (AnyView::Rgba8(s), AnyViewMut::Rgba8(d)) => fir::<Rgba8>(gpu, s, d, 4, &wts, p.border, "u8"),
        _ => Err(tessera_core::backend::type_mismatch("gaussian blur")),
    }
}

/// The two FIR passes for pixels of `channels` lanes of kernel type `lane`.
fn fir<T: Pod + Pixel>(gpu: &Gpu, src: ImageView<'_, T>, dst: ImageViewMut<'_, T>, channels: usize, wts: &[f32], border: Border, lane: &str) -> Result<()> {
    let (w, h) = src.size();
    let lanes = w * channels;
    int(lanes, "width")?;
    let hi = int(h, "height")?;
    let r = (wts.len() / 2) as i32;
    let (mode, outside) = border_mode(border);
    let dsrc = gpu.upload_view(src)?;
    let dw = gpu.upload(wts)?;
    let tmp = gpu.buffer::<f32>(lanes * h)?;
    let grid = [blocks(lanes, BLOCK), h as u32, 1];
    let (cols, rows) = match lane {
        "u8" => ("gauss_fir_cols_u8", "gauss_fir_rows_u8"),
        "u16" => ("gauss_fir_cols_u16", "gauss_fir_rows_u16"),
        _ => ("gauss_fir_cols_f32", "gauss_fir_rows_f32"),
    };
    let args = |a: crate::device::Arg, b: crate::device::Arg| -> Vec<crate::device::Arg> { args![a, b, &dw, r, w as i32, hi, channels as i32, mode, outside].to_vec() };
    gpu.launch(k(cols), grid, [BLOCK, 1, 1], 0, &args(crate::device::Arg::from(&dsrc), crate::device::Arg::from(&tmp)))?;
    drop(dsrc);
    let out = gpu.image::<T>(w, h)?;
    gpu.launch(k(rows), grid, [BLOCK, 1, 1], 0, &args(crate::device::Arg::from(&tmp), crate::device::Arg::from(&out)))?;
    gpu.download_view(&out, dst)
}

fn gaussian_iir(_gpu: &Gpu, _src: AnyView<'_>, _dst: AnyViewMut<'_>, _p: &GaussianParams) -> Result<()> {
    Err(Error::Backend("gaussian_blur: the recursive (IIR) CUDA kernel is not written yet; use --method fir".into()))
}
