//! Drives `kernels/contrast.cu` (and variance.cu's tent moments): local contrast
//! enhancement on the device. The luminance, the global spread (a reduction), the local
//! means and variances of every scale (the exact recursive sums) and the enhanced image
//! all stay on the device; one upload, one download. Integers within one level of the CPU
//! (the same f32 arithmetic in the same order; the global spread is summed in another
//! order, which can move a rounding), f32 within 1e-5 relative.

use crate::device::{args, blocks, int, line_segment, Arg, DevBuf, Gpu, Pod};
use crate::filter::border_mode;
use crate::kernels::{Kernel, Module};
use tessera_core::contrast::ContrastParams;
use tessera_core::image::{check_same_size, Pixel};
use tessera_core::variance::{global_shift, VarianceSample};
use tessera_core::{AnyView, AnyViewMut, ImageView, ImageViewMut, Result, Rgba8};

const BLOCK: u32 = 256;

fn k(name: &'static str) -> Kernel {
    Kernel::new(Module::Contrast, name)
}

fn v(name: &'static str) -> Kernel {
    Kernel::new(Module::Variance, name)
}

/// Local contrast enhancement ([`tessera_core::contrast::contrast_enhance`]).
pub(crate) fn contrast_enhance(gpu: &Gpu, src: AnyView<'_>, dst: AnyViewMut<'_>, p: &ContrastParams) -> Result<()> {
    p.validate()?;
    match (src, dst) {
        (AnyView::U8(s), AnyViewMut::U8(d)) => gray::<u8>(gpu, s, d, p, "u8"),
        (AnyView::U16(s), AnyViewMut::U16(d)) => gray::<u16>(gpu, s, d, p, "u16"),
        (AnyView::F32(s), AnyViewMut::F32(d)) => gray::<f32>(gpu, s, d, p, "f32"),
        (AnyView::Rgba8(s), AnyViewMut::Rgba8(d)) => rgba(gpu, s, d, p),
        _ => Err(tessera_core::backend::type_mismatch("contrast enhancement")),
    }
}

fn gray<T: Pod + Pixel + VarianceSample>(gpu: &Gpu, src: ImageView<'_, T>, dst: ImageViewMut<'_, T>, p: &ContrastParams, lane: &'static str) -> Result<()> {
    check_same_size(src.size(), dst.size())?;
    p.border.validate(T::INTEGER_MAX)?;
    let (w, h) = src.size();
    let n = int(w * h, "pixel count")?;
    let dsrc = gpu.upload_view(src)?;
    let out = gpu.image::<T>(w, h)?;
    let shift = if T::INTEGER_MAX.is_some() { 0.0 } else { global_shift(src) };
    let (y, kernel) = match lane {
        "f32" => (None, "contrast_f32"),
        _ => {
            // Y as f32 for the formula and the global spread.
            let y = gpu.buffer::<f32>(w * h)?;
            let convert = if lane == "u8" { "to_f32_u8" } else { "to_f32_u16" };
            gpu.launch(k(convert), [blocks(w * h, BLOCK), 1, 1], [BLOCK, 1, 1], 0, args![&dsrc, &y, n])?;
            (Some(y), if lane == "u8" { "contrast_u8" } else { "contrast_u16" })
        }
    };
    let y_arg = y.as_ref().map_or(Arg::from(&dsrc), Arg::from);
    enhance(gpu, Arg::from(&dsrc), lane, y_arg, w, h, shift, p, Arg::from(&dsrc), Arg::from(&out), kernel)?;
    gpu.download_view(&out, dst)
}

fn rgba(gpu: &Gpu, src: ImageView<'_, Rgba8>, dst: ImageViewMut<'_, Rgba8>, p: &ContrastParams) -> Result<()> {
    check_same_size(src.size(), dst.size())?;
    p.border.validate(Some(255.0))?;
    let (w, h) = src.size();
    let n = int(w * h, "pixel count")?;
    let dsrc = gpu.upload_view(src)?;
    let luma8 = gpu.image::<u8>(w, h)?;
    let y = gpu.buffer::<f32>(w * h)?;
    gpu.launch(k("luma_rgba"), [blocks(w * h, BLOCK), 1, 1], [BLOCK, 1, 1], 0, args![&dsrc, &luma8, &y, n])?;
    let out = gpu.image::<Rgba8>(w, h)?;
    // Statistics on the rounded luma (exact integer sums), the formula on the unrounded one.
    enhance(gpu, Arg::from(&luma8), "u8", Arg::from(&y), w, h, 0.0, p, Arg::from(&dsrc), Arg::from(&out), "contrast_rgba")?;
    gpu.download_view(&out, dst)
}

/// The global spread of `y`, the tent moments of `stats` (a device image of kernel type
/// `lane`) for every radius, then the output kernel `kernel` from `src` into `out`.
#[allow(clippy::too_many_arguments)]
fn enhance(gpu: &Gpu, stats: Arg, lane: &str, y: Arg, w: usize, h: usize, shift: f64, p: &ContrastParams, src: Arg, out: Arg, kernel: &'static str) -> Result<()> {
    let n = w * h;
    let ni = int(n, "pixel count")?;
    let sigma_g = global_sigma(gpu, y, n)?;
    let (num, floor) = (p.alpha * sigma_g, p.noise * sigma_g);
    let inv_s = 1.0 / p.radii.len() as f32;
    // A constant image (sigma_g = 0) needs no statistics: the delta is 0 (no scales).
    let scales = if sigma_g > 0.0 { p.radii.len() } else { 0 };
    let means = gpu.buffer::<f32>((scales * n).max(1))?;
    let vars = gpu.buffer::<f32>((scales * n).max(1))?;
    let (mode, outside) = border_mode(p.border);
    let (wi, hi) = (int(w, "width")?, int(h, "height")?);
    let (cols, rows) = match lane {
        "u8" => ("var_cols_u8", "moment_rows_u8"),
        "u16" => ("var_cols_u16", "moment_rows_u16"),
        _ => ("var_cols_f32", "moment_rows_f32"),
    };
    // Column sums: u64 for integers, f64 for f32 (both 8 bytes).
    let (c1, c2, bad) = (gpu.buffer::<u64>(n)?, gpu.buffer::<u64>(n)?, gpu.buffer::<u32>(n)?);
    for (s, &r) in p.radii.iter().take(scales).enumerate() {
        let inv_w = 1.0 / ((r + 1) as f64).powi(4);
        let mut list = vec![stats];
        let support = 2 * r + 1;
        let (seg_y, seg_x) = (line_segment(h, support), line_segment(w, support));
        list.extend_from_slice(args![&c1, &c2, &bad, wi, hi, r as i32, 1, mode, outside, shift, seg_y as i32]);
        gpu.launch(v(cols), [blocks(w, 64), blocks(h, seg_y as u32), 1], [64, 1, 1], 0, &list)?;
        let at = |b: &DevBuf<'_, f32>| Arg::Ptr(b.ptr() + (s * n * std::mem::size_of::<f32>()) as u64);
        let mut list = args![&c1, &c2, &bad].to_vec();
        list.extend([at(&means), at(&vars)]);
        list.extend_from_slice(args![wi, hi, r as i32, mode, outside, shift, inv_w, seg_x as i32]);
        gpu.launch(v(rows), [blocks(h, 64), blocks(w, seg_x as u32), 1], [64, 1, 1], 0, &list)?;
    }
    let mut list = vec![src, out, y];
    list.extend_from_slice(args![&means, &vars, scales as i32, ni, num, floor, p.gain_min, p.gain_max, inv_s]);
    gpu.launch(k(kernel), [blocks(n, BLOCK), 1, 1], [BLOCK, 1, 1], 0, &list)
}

/// The standard deviation of the finite values of `y` (two passes in f64 on the device:
/// the mean, then the squared deviations from it), as the core's `global_sigma`.
fn global_sigma(gpu: &Gpu, y: Arg, n: usize) -> Result<f32> {
    let ni = int(n, "pixel count")?;
    let pass = |mean: f64, power: i32| -> Result<(f64, u64)> {
        let sum = gpu.zeroed::<f64>(1)?;
        let count = gpu.zeroed::<u64>(1)?;
        let mut list = vec![y];
        list.extend_from_slice(args![ni, mean, power, &sum, &count]);
        gpu.launch(k("global_moments"), [blocks(n, BLOCK), 1, 1], [BLOCK, 1, 1], 0, &list)?;
        let (mut s, mut c) = ([0f64], [0u64]);
        gpu.download(&sum, &mut s)?;
        gpu.download(&count, &mut c)?;
        Ok((s[0], c[0]))
    };
    let (s, c) = pass(0.0, 1)?;
    if c == 0 {
        return Ok(0.0);
    }
    let (s2, _) = pass(s / c as f64, 2)?;
    Ok((s2 / c as f64).sqrt() as f32)
}
