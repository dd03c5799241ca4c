//! Drives `kernels/filter.cu`: box sums and means (two passes, each a running sum, so the
//! cost per pixel does not depend on the window), and the Gaussian blur.
//!
//! Exactness: u8 / u16 sums and means are the CPU backend's, bit for bit (exact integer
//! sums, the same half-up rounding). f32 sums run in f64 as on the CPU, but as running
//! sums where the CPU takes differences of a prefix: the f32 results agree to within one
//! f32 rounding of the window's sum of |x| (tested: `tests/shim_filter.rs`).

use crate::device::{args, blocks, int, Gpu, Pod};
use crate::kernels::{Kernel, Module};
use tessera_core::filter::{BoxParams, GaussianParams};
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

pub(crate) fn gaussian_blur(_gpu: &Gpu, _src: AnyView<'_>, _dst: AnyViewMut<'_>, _p: &GaussianParams) -> Result<()> {
    Err(Error::Backend("gaussian_blur: CUDA kernel not written yet".into()))
}
