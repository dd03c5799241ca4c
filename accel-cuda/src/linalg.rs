//! Drives `kernels/linalg.cu`: matrix sum and product.

use crate::device::{args, blocks, int, Gpu};
use crate::device_image::{Dst, Src};
use crate::kernels::{Kernel, Module};
use tessera_core::image::check_same_size;
use tessera_core::{Error, Result};

const MAT_ADD: Kernel = Kernel::new(Module::Linalg, "mat_add_f32");
const MAT_MUL: Kernel = Kernel::new(Module::Linalg, "mat_mul_f32");
/// Output tile of one block of `mat_mul_f32` (16 x 16 threads, 4 x 4 each).
const MM_TILE: usize = 64;

/// `out = a + b` ([`tessera_core::linalg::mat_add`]): the same f32 sums, bit for bit.
pub(crate) fn mat_add(gpu: &Gpu, a: Src<'_, f32>, b: Src<'_, f32>, out: Dst<'_, f32>) -> Result<()> {
    check_same_size(a.size(), b.size())?;
    check_same_size(a.size(), out.size())?;
    let (w, h) = a.size();
    let (wi, hi) = (int(w, "width")?, int(h, "height")?);
    let (da, db) = (a.stage(gpu)?, b.stage(gpu)?);
    let dout = out.open(gpu)?;
    gpu.launch(MAT_ADD, [blocks(w, 32), blocks(h, 8), 1], [32, 8, 1], 0, args![&da, &db, &dout.target, wi, hi, wi])?;
    dout.finish(gpu)
}

/// `out = a * b` ([`tessera_core::linalg::mat_mul`]): f32 with fused multiply-adds, in
/// 16-term steps; within `k * 2^-24 * sum_p |a b|` of the exact product, like the CPU's
/// (tested against a float64 product within 1e-4 relative). Errors as the CPU's.
pub(crate) fn mat_mul(gpu: &Gpu, a: Src<'_, f32>, b: Src<'_, f32>, out: Dst<'_, f32>) -> Result<()> {
    let ((aw, ah), (bw, bh)) = (a.size(), b.size());
    if aw != bh {
        return Err(Error::SizeMismatch { expected: (bw, aw), got: (bw, bh) });
    }
    check_same_size((bw, ah), out.size())?;
    let (m, n, k) = (ah, bw, aw);
    let (mi, ni, ki) = (int(m, "rows")?, int(n, "columns")?, int(k, "inner size")?);
    let (da, db) = (a.stage(gpu)?, b.stage(gpu)?);
    let dout = out.open(gpu)?;
    gpu.launch(MAT_MUL, [blocks(n, MM_TILE as u32), blocks(m, MM_TILE as u32), 1], [16, 16, 1], 0, args![&da, &db, &dout.target, mi, ni, ki])?;
    dout.finish(gpu)
}
