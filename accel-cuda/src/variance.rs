//! Drives `kernels/variance.cu`: local variance. The `Recursive` method (the exact O(1)
//! one) runs on the device for every input type and both kernels: identical to the CPU on
//! u8 / u16 (exact integer sums and the core's final step); on f32 (and the RGBA luma) the
//! same shifted f64 sums accumulated as running sums, within the core's stated bound
//! (about `2^-40 max (x - K)^2` absolute before the f32 rounding) of the CPU.
//!
//! The five f32 methods of the variance paper (usual, koenig, welford, pairwise,
//! threewise) are not on the device yet: they return [`Error::Backend`] saying so.

use crate::device::{args, blocks, int, Gpu, Pod};
use crate::filter::border_mode;
use crate::kernels::{Kernel, Module};
use tessera_core::image::{check_same_size, Pixel};
use tessera_core::variance::{global_shift, VarianceKernel, VarianceMethod, VarianceParams, VarianceSample};
use tessera_core::{AnyView, Error, Image, ImageView, ImageViewMut, Result};

const fn k(name: &'static str) -> Kernel {
    Kernel::new(Module::Variance, name)
}

/// Threads per block (one thread per column, then per row).
const BLOCK: u32 = 64;

/// Local variance ([`tessera_core::variance::local_variance`]; RGBA: of the unrounded
/// Rec. 601 luma). Errors as the CPU's.
pub(crate) fn local_variance(gpu: &Gpu, src: AnyView<'_>, dst: ImageViewMut<'_, f32>, p: &VarianceParams) -> Result<()> {
    match src {
        AnyView::U8(s) => recursive::<u8>(gpu, s, dst, p, "u8"),
        AnyView::U16(s) => recursive::<u16>(gpu, s, dst, p, "u16"),
        AnyView::F32(s) => recursive::<f32>(gpu, s, dst, p, "f32"),
        AnyView::Rgba8(s) => {
            p.validate::<f32>()?;
            check_same_size(s.size(), dst.size())?;
            // The luma as the core takes it (ConvertPixel), converted once on the host.
            let luma: Image<f32> = s.convert();
            recursive::<f32>(gpu, luma.view(), dst, p, "f32")
        }
    }
}

fn recursive<T: Pod + Pixel + VarianceSample>(gpu: &Gpu, src: ImageView<'_, T>, dst: ImageViewMut<'_, f32>, p: &VarianceParams, lane: &str) -> Result<()> {
    p.validate::<T>()?;
    check_same_size(src.size(), dst.size())?;
    if p.method != VarianceMethod::Recursive {
        return Err(Error::Backend(format!(
            "local variance: the {} method is not on the CUDA backend yet (recursive is)",
            p.method.name()
        )));
    }
    let (w, h) = src.size();
    let (wi, hi) = (int(w, "width")?, int(h, "height")?);
    let (r, tent, total) = match p.kernel {
        VarianceKernel::Tent { radius } => (radius, 1, ((radius + 1) as u64).pow(4)),
        VarianceKernel::Box { radius } => (radius, 0, ((2 * radius + 1) as u64).pow(2)),
    };
    let integer = T::INTEGER_MAX.is_some();
    let shift = if integer { 0.0 } else { global_shift(src) };
    let inv = if integer { 1.0 / (total as f64 * total as f64) } else { 1.0 / total as f64 };
    let (mode, outside) = border_mode(p.border);
    let dsrc = gpu.upload_view(src)?;
    let n = w * h;
    let out = gpu.image::<f32>(w, h)?;
    let bad = gpu.buffer::<u32>(n)?;
    let (cols, rows) = match lane {
        "u8" => ("var_cols_u8", "var_rows_u8"),
        "u16" => ("var_cols_u16", "var_rows_u16"),
        _ => ("var_cols_f32", "var_rows_f32"),
    };
    // Column sums: u64 for integers, f64 for f32 (both 8 bytes).
    let (c1, c2) = (gpu.buffer::<u64>(n)?, gpu.buffer::<u64>(n)?);
    let (ri, total_arg) = (r as i32, crate::device::Arg::U64(total));
    gpu.launch(k(cols), [blocks(w, BLOCK), 1, 1], [BLOCK, 1, 1], 0, args![&dsrc, &c1, &c2, &bad, wi, hi, ri, tent, mode, outside, shift])?;
    drop(dsrc);
    let mut list = args![&c1, &c2, &bad, &out, wi, hi, ri, tent, mode, outside, shift].to_vec();
    list.push(total_arg);
    list.push(crate::device::Arg::F64(inv));
    gpu.launch(k(rows), [blocks(h, BLOCK), 1, 1], [BLOCK, 1, 1], 0, &list)?;
    gpu.download_view(&out, dst)
}
