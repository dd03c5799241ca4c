//! Drives `kernels/contrast.cu` (and variance.cu's tent moments): local contrast
//! enhancement on the device. The luminance, the global spread (a reduction), the local
//! means and variances of every scale (the exact recursive sums) and the enhanced image
//! all stay on the device; one upload, one download. Integers within one level of the CPU
//! (the same f32 arithmetic in the same order; the global spread is summed in another
//! order, which can move a rounding), f32 within 1e-5 relative.

use crate::device::{args, blocks, int, Arg, DevBuf, DevImage, Gpu, Pod};
use crate::device_image::{AnyDst, AnySrc, Dst, Src};
use crate::filter::border_mode;
use crate::kernels::{Kernel, Module};
use crate::variance::{kernel_moments, Finish, Window};
use tessera_core::contrast::ContrastParams;
use tessera_core::image::{check_same_size, Pixel};
use tessera_core::variance::VarianceSample;
use tessera_core::{Result, Rgba8};

const BLOCK: u32 = 256;

fn k(name: &'static str) -> Kernel {
    Kernel::new(Module::Contrast, name)
}

/// Local contrast enhancement ([`tessera_core::contrast::contrast_enhance`]).
pub(crate) fn contrast_enhance(gpu: &Gpu, src: AnySrc<'_>, dst: AnyDst<'_>, p: &ContrastParams) -> Result<()> {
    p.validate()?;
    match (src, dst) {
        (AnySrc::U8(s), AnyDst::U8(d)) => gray::<u8>(gpu, s, d, p, "u8"),
        (AnySrc::U16(s), AnyDst::U16(d)) => gray::<u16>(gpu, s, d, p, "u16"),
        (AnySrc::F32(s), AnyDst::F32(d)) => gray::<f32>(gpu, s, d, p, "f32"),
        (AnySrc::Rgba8(s), AnyDst::Rgba8(d)) => rgba(gpu, s, d, p),
        _ => Err(tessera_core::backend::type_mismatch("contrast enhancement")),
    }
}

fn gray<T: Pod + Pixel + VarianceSample>(gpu: &Gpu, src: Src<'_, T>, dst: Dst<'_, T>, p: &ContrastParams, lane: &'static str) -> Result<()> {
    check_same_size(src.size(), dst.size())?;
    p.border.validate(T::INTEGER_MAX)?;
    let (w, h) = src.size();
    let dsrc = src.stage(gpu)?;
    let out = dst.open(gpu)?;
    let shift = if T::INTEGER_MAX.is_some() { 0.0 } else { crate::variance::shift_of(gpu, &src, &dsrc, lane)? };
    // Y as f32 for the formula and the global spread.
    let y = as_f32(gpu, &dsrc, lane)?;
    let kernel = match lane {
        "u8" => "contrast_u8",
        "u16" => "contrast_u16",
        _ => "contrast_f32",
    };
    let y_arg = y.as_ref().map_or(Arg::from(&dsrc), Arg::from);
    enhance(gpu, Arg::from(&dsrc), lane, y_arg, w, h, shift, p, Arg::from(&dsrc), Arg::from(&out.target), kernel)?;
    out.finish(gpu)
}

fn rgba(gpu: &Gpu, src: Src<'_, Rgba8>, dst: Dst<'_, Rgba8>, p: &ContrastParams) -> Result<()> {
    check_same_size(src.size(), dst.size())?;
    p.border.validate(Some(255.0))?;
    let (w, h) = src.size();
    let dsrc = src.stage(gpu)?;
    let (luma8, y) = luma(gpu, &dsrc)?;
    let out = dst.open(gpu)?;
    // Statistics on the rounded luma (exact integer sums), the formula on the unrounded one.
    enhance(gpu, Arg::from(&luma8), "u8", Arg::from(&y), w, h, 0.0, p, Arg::from(&dsrc), Arg::from(&out.target), "contrast_rgba")?;
    out.finish(gpu)
}

/// The luma of an RGBA image on the device: rounded to u8 ([`Rgba8::luma`]) and unrounded
/// in f32 (the core's `ConvertPixel<f32>`, the same operations in the same order).
pub(crate) fn luma<'g>(gpu: &'g Gpu, src: &DevImage<'_, Rgba8>) -> Result<(DevImage<'g, u8>, DevImage<'g, f32>)> {
    let (w, h) = (src.width, src.height);
    let n = int(w * h, "pixel count")?;
    let (luma8, y) = (gpu.image::<u8>(w, h)?, gpu.image::<f32>(w, h)?);
    gpu.launch(k("luma_rgba"), [blocks(w * h, BLOCK), 1, 1], [BLOCK, 1, 1], 0, args![src, &luma8, &y, n])?;
    Ok((luma8, y))
}

/// An integer image (`lane` "u8" or "u16") converted to f32 on the device; None for f32,
/// which is its own.
pub(crate) fn as_f32<'g, T>(gpu: &'g Gpu, src: &DevImage<'_, T>, lane: &str) -> Result<Option<DevBuf<'g, f32>>> {
    let convert = match lane {
        "u8" => "to_f32_u8",
        "u16" => "to_f32_u16",
        _ => return Ok(None),
    };
    let n = src.width * src.height;
    let y = gpu.buffer::<f32>(n)?;
    gpu.launch(k(convert), [blocks(n, BLOCK), 1, 1], [BLOCK, 1, 1], 0, args![src, &y, int(n, "pixel count")?])?;
    Ok(Some(y))
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
    for (s, &r) in p.radii.iter().take(scales).enumerate() {
        let at = |b: &DevBuf<'_, f32>| Arg::Ptr(b.ptr() + (s * n * std::mem::size_of::<f32>()) as u64);
        let window = Window { r, tent: true, mode, outside };
        let inv_w = 1.0 / ((r + 1) as f64).powi(4);
        kernel_moments(gpu, stats, lane, (w, h), &window, shift, Finish::Moments { mean: at(&means), var: at(&vars), inv_w })?;
    }
    let mut list = vec![src, out, y];
    list.extend_from_slice(args![&means, &vars, scales as i32, ni, num, floor, p.gain_min, p.gain_max, inv_s]);
    gpu.launch(k(kernel), [blocks(n, BLOCK), 1, 1], [BLOCK, 1, 1], 0, &list)
}

/// The standard deviation of the finite values of `y` (two passes in f64 on the device:
/// the mean, then the squared deviations from it), as the core's `global_sigma`.
fn global_sigma(gpu: &Gpu, y: Arg, n: usize) -> Result<f32> {
    let (s, c) = global_moment(gpu, y, n, 0.0, 1)?;
    if c == 0 {
        return Ok(0.0);
    }
    let (s2, _) = global_moment(gpu, y, n, s / c as f64, 2)?;
    Ok((s2 / c as f64).sqrt() as f32)
}

/// The sum of `(v - mean)^power` (power 1 or 2) over the finite values `v` of the `n` f32
/// values at `y`, and their count.
pub(crate) fn global_moment(gpu: &Gpu, y: Arg, n: usize, mean: f64, power: i32) -> Result<(f64, u64)> {
    let ni = int(n, "pixel count")?;
    let sum = gpu.zeroed::<f64>(1)?;
    let count = gpu.zeroed::<u64>(1)?;
    let mut list = vec![y];
    list.extend_from_slice(args![ni, mean, power, &sum, &count]);
    gpu.launch(k("global_moments"), [blocks(n, BLOCK), 1, 1], [BLOCK, 1, 1], 0, &list)?;
    let (mut s, mut c) = ([0f64], [0u64]);
    gpu.download(&sum, &mut s)?;
    gpu.download(&count, &mut c)?;
    Ok((s[0], c[0]))
}
