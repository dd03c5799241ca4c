//! Drives `kernels/variance.cu`: local variance. The `Recursive` method (the exact O(1)
//! one) runs on the device for every input type and both kernels: identical to the CPU on
//! u8 / u16 (exact integer sums and the core's final step); on f32 (and the RGBA luma) the
//! same shifted f64 sums accumulated as running sums, within the core's stated bound
//! (about `2^-40 max (x - K)^2` absolute before the f32 rounding) of the CPU.
//!
//! The variance paper's five f32 methods (usual, koenig, welford, pairwise, threewise)
//! run on the device as the core runs them: the same shifted, padded data, the same f32
//! operations in the same order (the file is compiled without fused multiply-adds), so
//! their results are the CPU's, errors and all, which is what comparing them is for.

use crate::device::{args, blocks, int, line_segment, DevImage, Gpu, Pod};
use crate::device_image::{AnySrc, Dst, Src};
use crate::filter::border_mode;
use crate::kernels::{Kernel, Module};
use tessera_core::image::{check_same_size, Pixel};
use tessera_core::variance::{global_shift, VarianceKernel, VarianceMethod, VarianceParams, VarianceSample};
use tessera_core::{Image, Result};

const fn k(name: &'static str) -> Kernel {
    Kernel::new(Module::Variance, name)
}

/// Threads per block (one thread per column, then per row).
const BLOCK: u32 = 64;

/// Local variance ([`tessera_core::variance::local_variance`]; RGBA: of the unrounded
/// Rec. 601 luma). Errors as the CPU's.
pub(crate) fn local_variance(gpu: &Gpu, src: AnySrc<'_>, dst: Dst<'_, f32>, p: &VarianceParams) -> Result<()> {
    match src {
        AnySrc::U8(s) => recursive::<u8>(gpu, s, dst, p, "u8"),
        AnySrc::U16(s) => recursive::<u16>(gpu, s, dst, p, "u16"),
        AnySrc::F32(s) => recursive::<f32>(gpu, s, dst, p, "f32"),
        AnySrc::Rgba8(s) => {
            p.validate::<f32>()?;
            check_same_size(s.size(), dst.size())?;
            // The luma as the core takes it (ConvertPixel): converted once on the host, or
            // on the device for an image already there (the same f32 operations).
            match s {
                Src::Host(v) => {
                    let luma: Image<f32> = v.convert();
                    recursive::<f32>(gpu, Src::Host(luma.view()), dst, p, "f32")
                }
                Src::Device(i) => {
                    let (_, luma) = crate::contrast::luma(gpu, i)?;
                    recursive::<f32>(gpu, Src::Device(&luma), dst, p, "f32")
                }
            }
        }
    }
}

/// The core's [`global_shift`] of `src` (`staged`: the same image on the device): on the
/// host for a host view; on the device for an image already there, from a device sum of
/// its values (exact for integers, so the same shift; for f32 summed in another order,
/// which can move the rounded mean by one where it falls on a half).
pub(crate) fn shift_of<T: Pod + Pixel + VarianceSample>(gpu: &Gpu, src: &Src<'_, T>, staged: &DevImage<'_, T>, lane: &str) -> Result<f64> {
    if let Some(v) = src.host() {
        return Ok(global_shift(v));
    }
    let n = staged.width * staged.height;
    let ni = int(n, "pixel count")?;
    let converted = crate::contrast::as_f32(gpu, staged, lane)?;
    let values = converted.as_ref().map_or(crate::device::Arg::from(staged), crate::device::Arg::from);
    let (sum, count) = crate::contrast::global_moment(gpu, values, n, 0.0, 1)?;
    if count == 0 {
        return Ok(0.0);
    }
    let mean = (sum / count as f64).round();
    if T::INTEGER_MAX.is_some() {
        return Ok(mean);
    }
    let lossy = gpu.zeroed::<u32>(1)?;
    gpu.launch(k("shift_lossy_f32"), [blocks(n, 256), 1, 1], [256, 1, 1], 0, args![staged, ni, mean, &lossy])?;
    let mut l = [0u32];
    gpu.download(&lossy, &mut l)?;
    Ok(if l[0] == 0 { mean } else { 0.0 })
}

fn recursive<T: Pod + Pixel + VarianceSample>(gpu: &Gpu, src: Src<'_, T>, dst: Dst<'_, f32>, p: &VarianceParams, lane: &str) -> Result<()> {
    p.validate::<T>()?;
    check_same_size(src.size(), dst.size())?;
    if p.method != VarianceMethod::Recursive {
        return f32_method(gpu, src, dst, p, lane);
    }
    let (w, h) = src.size();
    let (wi, hi) = (int(w, "width")?, int(h, "height")?);
    let (r, tent, total) = match p.kernel {
        VarianceKernel::Tent { radius } => (radius, 1, ((radius + 1) as u64).pow(4)),
        VarianceKernel::Box { radius } => (radius, 0, ((2 * radius + 1) as u64).pow(2)),
    };
    let integer = T::INTEGER_MAX.is_some();
    let dsrc = src.stage(gpu)?;
    let shift = if integer { 0.0 } else { shift_of(gpu, &src, &dsrc, lane)? };
    let inv = if integer { 1.0 / (total as f64 * total as f64) } else { 1.0 / total as f64 };
    let (mode, outside) = border_mode(p.border);
    let n = w * h;
    let out = dst.open(gpu)?;
    let bad = gpu.buffer::<u32>(n)?;
    let (cols, rows) = match lane {
        "u8" => ("var_cols_u8", "var_rows_u8"),
        "u16" => ("var_cols_u16", "var_rows_u16"),
        _ => ("var_cols_f32", "var_rows_f32"),
    };
    // Column sums: u64 for integers, f64 for f32 (both 8 bytes).
    let (c1, c2) = (gpu.buffer::<u64>(n)?, gpu.buffer::<u64>(n)?);
    let (ri, total_arg) = (r as i32, crate::device::Arg::U64(total));
    let support = 2 * r + 1;
    let (seg_y, seg_x) = (line_segment(h, support), line_segment(w, support));
    gpu.launch(k(cols), [blocks(w, BLOCK), blocks(h, seg_y as u32), 1], [BLOCK, 1, 1], 0, args![&dsrc, &c1, &c2, &bad, wi, hi, ri, tent, mode, outside, shift, seg_y as i32])?;
    drop(dsrc);
    let mut list = args![&c1, &c2, &bad, &out.target, wi, hi, ri, tent, mode, outside, shift].to_vec();
    list.push(total_arg);
    list.push(crate::device::Arg::F64(inv));
    list.push(crate::device::Arg::I32(seg_x as i32));
    gpu.launch(k(rows), [blocks(h, BLOCK), blocks(w, seg_x as u32), 1], [BLOCK, 1, 1], 0, &list)?;
    out.finish(gpu)
}

/// The five f32 methods: the padded image of `x - K` on the device, then the direct
/// O(N^2) kernel (usual, koenig, welford) or the two logarithmic line passes (pairwise,
/// threewise; tent or box).
fn f32_method<T: Pod + Pixel + VarianceSample>(gpu: &Gpu, src: Src<'_, T>, dst: Dst<'_, f32>, p: &VarianceParams, lane: &str) -> Result<()> {
    let (w, h) = src.size();
    let r = p.kernel.radius();
    let (pw, ph) = (w + 2 * r, h + 2 * r);
    let (wi, hi) = (int(w, "width")?, int(h, "height")?);
    int(pw.max(ph) * 4 * pw.max(ph).max(2 * w), "padded size")?;
    let dsrc = src.stage(gpu)?;
    let shift = shift_of(gpu, &src, &dsrc, lane)?;
    let (mode, outside) = border_mode(p.border);
    let outside_shifted = (outside as f64 - shift) as f32;
    let padded = gpu.buffer::<f32>(pw * ph)?;
    let pad_kernel = match lane {
        "u8" => "pad_shift_u8",
        "u16" => "pad_shift_u16",
        _ => "pad_shift_f32",
    };
    gpu.launch(k(pad_kernel), [blocks(pw, BLOCK), ph as u32, 1], [BLOCK, 1, 1], 0, args![&dsrc, &padded, wi, hi, r as i32, mode, outside_shifted, shift])?;
    drop(dsrc);
    let out = dst.open(gpu)?;
    let ri = r as i32;
    match p.method {
        VarianceMethod::Usual | VarianceMethod::Koenig | VarianceMethod::Welford => {
            // The core's 2-D weights: products of the 1-D ones, and their total.
            let w1 = p.kernel.weights_1d();
            let wt: Vec<f32> = w1.iter().flat_map(|&a| w1.iter().map(move |&b| (a * b) as f32)).collect();
            let s: u64 = w1.iter().map(|&v| v as u64).sum();
            let total = (s * s) as f32;
            let dwt = gpu.upload(&wt)?;
            let method = match p.method {
                VarianceMethod::Usual => 0,
                VarianceMethod::Koenig => 1,
                _ => 2,
            };
            gpu.launch(k("var_direct"), [blocks(w, BLOCK), h as u32, 1], [BLOCK, 1, 1], 0, args![&padded, &out.target, wi, hi, ri, &dwt, total, method])?;
        }
        VarianceMethod::Pairwise | VarianceMethod::Threewise | VarianceMethod::Recursive => {
            let kind = match (p.method, p.kernel) {
                (VarianceMethod::Pairwise, VarianceKernel::Tent { .. }) => 0,
                (_, VarianceKernel::Tent { .. }) => 1,
                (VarianceMethod::Pairwise, VarianceKernel::Box { .. }) => 2,
                _ => 3,
            };
            let hs = gpu.buffer::<f32>(2 * w * ph)?;
            let scratch = gpu.buffer::<f32>(4 * pw.max(ph) * ph.max(w))?;
            gpu.launch(k("var_log_rows"), [blocks(ph, BLOCK), 1, 1], [BLOCK, 1, 1], 0, args![&padded, &hs, &scratch, wi, hi, ri, kind])?;
            gpu.launch(k("var_log_cols"), [blocks(w, BLOCK), 1, 1], [BLOCK, 1, 1], 0, args![&hs, &out.target, &scratch, wi, hi, ri, kind])?;
        }
    }
    out.finish(gpu)
}
