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

use crate::device::{args, blocks, int, line_segment, Arg, DevImage, Gpu, Pod};
use crate::device_image::{AnySrc, Dst, Src};
use crate::filter::{border_mode, fused_launch, Prefix, Strips};
use crate::kernels::{Kernel, Module};
use crate::tuning::{self, Design};
use tessera_core::choice::Choice;
use tessera_core::image::{check_same_size, Pixel};
use tessera_core::variance::{global_shift, VarianceKernel, VarianceMethod, VarianceParams, VarianceSample};
use tessera_core::{Error, Image, Result};

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
    let (r, tent, total) = match p.kernel {
        VarianceKernel::Tent { radius } => (radius, 1, ((radius + 1) as u64).pow(4)),
        VarianceKernel::Box { radius } => (radius, 0, ((2 * radius + 1) as u64).pow(2)),
    };
    let integer = T::INTEGER_MAX.is_some();
    let dsrc = src.stage(gpu)?;
    let shift = if integer { 0.0 } else { shift_of(gpu, &src, &dsrc, lane)? };
    let inv = if integer { 1.0 / (total as f64 * total as f64) } else { 1.0 / total as f64 };
    let (mode, outside) = border_mode(p.border);
    let out = dst.open(gpu)?;
    let window = Window { r, tent: tent == 1, mode, outside };
    kernel_moments(gpu, Arg::from(&dsrc), lane, (w, h), &window, shift, Finish::Variance { out: Arg::from(&out.target), total, inv })?;
    drop(dsrc);
    out.finish(gpu)
}

/// The design of the recursive kernel moments (tuning family `variance_kernel`) under
/// the variance, the contrast enhancement and the glare detector: `two-pass` (the built-in
/// default: column sums through an intermediate image of 8-byte sums, then the rows) or
/// `fused` (one kernel reads the image once and writes the results once; integer images,
/// whose wrapping sums make its prefix differences exact; f32 and the RGBA luma keep the
/// two passes, whose running f64 sums hold the core's error bound).
const VARIANCE_KERNEL: &str = "variance_kernel";

/// Environment variable choosing the moments' design over the device's tuning table.
pub const VARIANCE_KERNEL_ENV: &str = "TESSERA_VARIANCE_KERNEL";

/// Which design computes the kernel moments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MomentsDesign {
    TwoPass,
    Fused,
}

impl Choice for MomentsDesign {
    const WHAT: &'static str = "kernel moments design";
    const ALL: &'static [Self] = &[MomentsDesign::TwoPass, MomentsDesign::Fused];
    fn name(self) -> &'static str {
        match self {
            MomentsDesign::TwoPass => "two-pass",
            MomentsDesign::Fused => "fused",
        }
    }
}

impl Design for MomentsDesign {
    const FAMILY: &'static str = VARIANCE_KERNEL;
}

/// The kernel of the moments: tent (or box) of radius `r`, and the border.
pub(crate) struct Window {
    pub r: usize,
    pub tent: bool,
    pub mode: i32,
    pub outside: f32,
}

/// What the moments become at each pixel, into f32 images on the device.
pub(crate) enum Finish {
    /// The variance as the core forms it (`inv`: 1 / total^2 for integer sums, 1 / total
    /// for the f32 methods' shifted f64 sums).
    Variance { out: Arg, total: u64, inv: f64 },
    /// The contrast's tent mean and variance (`inv_w`: 1 / total).
    Moments { mean: Arg, var: Arg, inv_w: f64 },
    /// The glare detector's mean and exact variance (integer images).
    MeanVar { mean: Arg, var: Arg, total: u64 },
}

/// The fused kernels' shapes (`kernels/variance.cu`): strips of up to 512 lanes, two rows a
/// step (n2r2), or 1024 lanes a row a step (n4r1) for windows too wide for the first;
/// segments of a quarter of the window's height, at least 32 rows (restarting the tent's
/// sums costs 2r + 2 rows of loads; shorter segments give a 1080p image at r = 63 more
/// blocks than an H200 has multiprocessors).
const MOMENT_SHAPES: [(Strips, &str); 2] = [
    (Strips { lanes_per_thread: 2, rows_per_step: 2, segment_windows: (1, 4), resident: 3 }, "n2r2"),
    (Strips { lanes_per_thread: 4, rows_per_step: 1, segment_windows: (1, 4), resident: 2 }, "n4r1"),
];

/// The kernel moments of the device image `src` (`lane`: u8, u16 or f32; `w x h`) over
/// `window`, finished as `finish`: the fused kernel where the design chosen for `gpu` is
/// it, the lane is an integer one and the window fits a strip, else the two passes.
/// `shift`: the f32 lane's global shift (0 for integers).
pub(crate) fn kernel_moments(gpu: &Gpu, src: Arg, lane: &str, (w, h): (usize, usize), window: &Window, shift: f64, finish: Finish) -> Result<()> {
    let design = tuning::chosen::<MomentsDesign>(gpu)?;
    let (wi, hi) = (int(w, "width")?, int(h, "height")?);
    let Window { r, tent, mode, outside } = *window;
    let (ri, tent_arg) = (r as i32, tent as i32);
    let support = 2 * r + 1;
    if design == MomentsDesign::Fused && lane != "f32" {
        let prefix = Prefix { planes: 2, lead: 2, bytes: 8 };
        for (cut, shape) in &MOMENT_SHAPES {
            let Some(plan) = fused_launch(cut, (w, h, 1), (support, support), &prefix, gpu.multiprocessors()) else { continue };
            let (kind, a, b, total, inv_w2, inv_w) = match finish {
                Finish::Variance { out, total, inv } => ("var", out, out, total, inv, 0.0),
                Finish::Moments { mean, var, inv_w } => ("contrast", mean, var, 0, 0.0, inv_w),
                Finish::MeanVar { mean, var, total } => ("glare", mean, var, total, 1.0 / (total as f64 * total as f64), 1.0 / total as f64),
            };
            let name = fused_kernel_name(kind, lane, shape)?;
            let mut list = vec![src, a, b];
            list.extend_from_slice(args![wi, hi, ri, tent_arg, mode, outside]);
            list.extend([Arg::U64(total), Arg::F64(inv_w2), Arg::F64(inv_w), Arg::I32(plan.strip as i32), Arg::I32(plan.seg as i32)]);
            return gpu.launch(k(name), plan.grid, [plan.threads, 1, 1], plan.shared, &list);
        }
    }
    let n = w * h;
    // Column sums: u64 for integers, f64 for f32 (both 8 bytes), and the non-finite count.
    let (c1, c2, bad) = (gpu.buffer::<u64>(n)?, gpu.buffer::<u64>(n)?, gpu.buffer::<u32>(n)?);
    let (seg_y, seg_x) = (line_segment(h, support), line_segment(w, support));
    let cols = match lane {
        "u8" => "var_cols_u8",
        "u16" => "var_cols_u16",
        _ => "var_cols_f32",
    };
    let mut list = vec![src];
    list.extend_from_slice(args![&c1, &c2, &bad, wi, hi, ri, tent_arg, mode, outside, shift, seg_y as i32]);
    gpu.launch(k(cols), [blocks(w, BLOCK), blocks(h, seg_y as u32), 1], [BLOCK, 1, 1], 0, &list)?;
    let mut list = args![&c1, &c2, &bad].to_vec();
    let rows = match finish {
        Finish::Variance { out, total, inv } => {
            list.push(out);
            list.extend_from_slice(args![wi, hi, ri, tent_arg, mode, outside, shift]);
            list.extend([Arg::U64(total), Arg::F64(inv)]);
            lane_kernel(lane, ["var_rows_u8", "var_rows_u16", "var_rows_f32"])
        }
        Finish::Moments { mean, var, inv_w } => {
            if !tent {
                return Err(Error::Backend("the contrast's moments are tent moments".into()));
            }
            list.extend([mean, var]);
            list.extend_from_slice(args![wi, hi, ri, mode, outside, shift, inv_w]);
            lane_kernel(lane, ["moment_rows_u8", "moment_rows_u16", "moment_rows_f32"])
        }
        Finish::MeanVar { mean, var, total } => {
            if lane == "f32" {
                return Err(Error::Backend("the glare detector's moments are of integer images".into()));
            }
            list.extend([mean, var]);
            list.extend_from_slice(args![wi, hi, ri, tent_arg, mode, outside]);
            list.extend([Arg::U64(total), Arg::F64(1.0 / (total as f64 * total as f64)), Arg::F64(1.0 / total as f64)]);
            lane_kernel(lane, ["mean_var_rows_u8", "mean_var_rows_u16", "mean_var_rows_u16"])
        }
    };
    list.push(Arg::I32(seg_x as i32));
    gpu.launch(k(rows), [blocks(h, BLOCK), blocks(w, seg_x as u32), 1], [BLOCK, 1, 1], 0, &list)
}

/// Of a kernel's u8, u16 and f32 forms, `lane`'s.
fn lane_kernel(lane: &str, [u8k, u16k, f32k]: [&'static str; 3]) -> &'static str {
    match lane {
        "u8" => u8k,
        "u16" => u16k,
        _ => f32k,
    }
}

/// The fused kernel of `kind` (var, contrast, glare) for `lane` in `shape`.
fn fused_kernel_name(kind: &str, lane: &str, shape: &str) -> Result<&'static str> {
    const NAMES: [&str; 12] = [
        "moments_fused_var_u8_n2r2",
        "moments_fused_var_u16_n2r2",
        "moments_fused_contrast_u8_n2r2",
        "moments_fused_contrast_u16_n2r2",
        "moments_fused_glare_u8_n2r2",
        "moments_fused_glare_u16_n2r2",
        "moments_fused_var_u8_n4r1",
        "moments_fused_var_u16_n4r1",
        "moments_fused_contrast_u8_n4r1",
        "moments_fused_contrast_u16_n4r1",
        "moments_fused_glare_u8_n4r1",
        "moments_fused_glare_u16_n4r1",
    ];
    let want = format!("moments_fused_{kind}_{lane}_{shape}");
    NAMES.iter().copied().find(|n| *n == want).ok_or_else(|| Error::Backend(format!("no fused moments kernel {want}")))
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
