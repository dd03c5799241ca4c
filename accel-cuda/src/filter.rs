//! Drives `kernels/filter.cu`: box sums and means (two passes, each a running sum, so the
//! cost per pixel does not depend on the window), and the Gaussian blur.
//!
//! Exactness: u8 / u16 sums and means are the CPU backend's, bit for bit (exact integer
//! sums, the same half-up rounding). f32 sums run in f64 as on the CPU, but as running
//! sums where the CPU takes differences of a prefix: the f32 results agree to within one
//! f32 rounding of the window's sum of |x| (tested: `tests/shim_filter.rs`).

use crate::device::{args, blocks, int, line_segment, Gpu, Pod};
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

/// The column pass: window sums down each lane column, into an `h x lanes` image of `A`
/// (transposed: each lane's column sums are one line).
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
    let seg = line_segment(height, p.height);
    gpu.launch(
        kernel,
        [blocks(lanes, BLOCK), blocks(height, seg as u32), 1],
        [BLOCK, 1, 1],
        0,
        args![src, &cols, int(width, "width")?, int(height, "height")?, channels as i32, p.height as i32, mode, outside, seg as i32],
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
    let seg = line_segment(w, p.width);
    let grid = [blocks(h, BLOCK), blocks(w, seg as u32), channels as u32];
    let seg = seg as i32;
    if rows_take_channels {
        gpu.launch(rows_kernel, grid, [BLOCK, 1, 1], 0, args![&cols, &out, w32, hi, channels as i32, ww, wh, mode, outside, seg])?;
    } else {
        gpu.launch(rows_kernel, grid, [BLOCK, 1, 1], 0, args![&cols, &out, w32, hi, ww, wh, mode, outside, seg])?;
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

/// The recursive Gaussian on the device: the core's coefficients
/// ([`IirCoefficients`](tessera_core::filter::IirCoefficients)), margin and edges, the same
/// f64 recursion in the same order, no fused multiply-adds: identical to the CPU on the
/// shim (tested bit for bit), the same IEEE operations on the GPU.
fn gaussian_iir(gpu: &Gpu, src: AnyView<'_>, dst: AnyViewMut<'_>, p: &GaussianParams) -> Result<()> {
    match (src, dst) {
        (AnyView::U8(s), AnyViewMut::U8(d)) => iir::<u8>(gpu, s, d, 1, p, "u8"),
        (AnyView::U16(s), AnyViewMut::U16(d)) => iir::<u16>(gpu, s, d, 1, p, "u16"),
        (AnyView::F32(s), AnyViewMut::F32(d)) => iir::<f32>(gpu, s, d, 1, p, "f32"),
        (AnyView::Rgba8(s), AnyViewMut::Rgba8(d)) => iir::<Rgba8>(gpu, s, d, 4, p, "u8"),
        _ => Err(tessera_core::backend::type_mismatch("gaussian blur")),
    }
}

/// Mirrored samples added on each side of a line for reflect-101 (as the core: the
/// response beyond 4 sigma is below 1e-4 of the mass, and what lies further is replicated).
fn iir_margin(sigma: f64, border: Border) -> usize {
    if border == Border::Reflect101 {
        (4.0 * sigma).ceil() as usize + 4
    } else {
        0
    }
}

fn iir<T: Pod + Pixel>(gpu: &Gpu, src: ImageView<'_, T>, dst: ImageViewMut<'_, T>, channels: usize, p: &GaussianParams, lane: &str) -> Result<()> {
    let (w, h) = src.size();
    let lanes = w * channels;
    let margin = iir_margin(p.sigma, p.border);
    let (tn, hn) = (h + 2 * margin, w + 2 * margin);
    int(lanes.max(tn).max(hn * h * channels), "image size")?;
    let c = tessera_core::filter::IirCoefficients::new(p.sigma);
    let mut coef = vec![c.gain, c.a[0], c.a[1], c.a[2]];
    coef.extend(c.m.iter().flatten());
    let dcoef = gpu.upload(&coef)?;
    let (mode, outside) = border_mode(p.border);
    let (cols, rows) = match lane {
        "u8" => ("iir_cols_u8", "iir_rows_u8"),
        "u16" => ("iir_cols_u16", "iir_rows_u16"),
        _ => ("iir_cols_f32", "iir_rows_f32"),
    };
    // Normalize divides by the filter's response to the image's indicator, D(x) D(y):
    // the same recursion on a line of ones with a zero border.
    let (inv_nx, inv_ny) = if p.border == Border::Normalize {
        (iir_inverse_ones(gpu, w, &dcoef)?, iir_inverse_ones(gpu, h, &dcoef)?)
    } else {
        (vec![1.0f32], vec![1.0f32])
    };
    let (dnx, dny) = (gpu.upload(&inv_nx)?, gpu.upload(&inv_ny)?);
    let dsrc = gpu.upload_view(src)?;
    let pad = gpu.buffer::<f32>(lanes * tn)?;
    gpu.launch(k(cols), [blocks(lanes, BLOCK), 1, 1], [BLOCK, 1, 1], 0, args![&dsrc, &pad, &dcoef, lanes as i32, h as i32, margin as i32, mode, outside])?;
    drop(dsrc);
    let lines = h * channels;
    let line = gpu.buffer::<f32>(lines * hn)?;
    let out = gpu.image::<T>(w, h)?;
    gpu.launch(
        k(rows),
        [blocks(lines, BLOCK), 1, 1],
        [BLOCK, 1, 1],
        0,
        args![&pad, &line, &out, &dcoef, &dnx, &dny, w as i32, h as i32, channels as i32, margin as i32, mode, outside],
    )?;
    gpu.download_view(&out, dst)
}

/// `1 / D(i)` for `i < n`: `D` the recursive filter's response to `n` ones with a zero
/// border, run by the column kernel on a one-lane image.
fn iir_inverse_ones(gpu: &Gpu, n: usize, dcoef: &crate::device::DevBuf<'_, f64>) -> Result<Vec<f32>> {
    let ones = gpu.upload(&vec![1.0f32; n])?;
    let pad = gpu.buffer::<f32>(n)?;
    let (mode, _) = border_mode(Border::Normalize);
    gpu.launch(k("iir_cols_f32"), [1, 1, 1], [32, 1, 1], 0, args![&ones, &pad, dcoef, 1, n as i32, 0, mode, 0.0f32])?;
    let mut d = vec![0.0f32; n];
    gpu.download(&pad, &mut d)?;
    Ok(d.iter().map(|v| 1.0 / v).collect())
}
