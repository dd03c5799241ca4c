//! Drives `kernels/linalg.cu`: matrix sum and product.

use crate::device::{args, blocks, int, Gpu};
use crate::kernels::{Kernel, Module};
use tessera_core::image::check_same_size;
use tessera_core::{Error, ImageView, ImageViewMut, Result};

const MAT_ADD: Kernel = Kernel::new(Module::Linalg, "mat_add_f32");
const MAT_MUL: Kernel = Kernel::new(Module::Linalg, "mat_mul_f32");
/// Output tile of one block of `mat_mul_f32` (16 x 16 threads, 4 x 4 each).
const MM_TILE: usize = 64;

/// `out = a + b` ([`tessera_core::linalg::mat_add`]): the same f32 sums, bit for bit.
pub(crate) fn mat_add(gpu: &Gpu, a: ImageView<'_, f32>, b: ImageView<'_, f32>, out: ImageViewMut<'_, f32>) -> Result<()> {
    check_same_size(a.size(), b.size())?;
    check_same_size(a.size(), out.size())?;
    let (w, h) = a.size();
    let (wi, hi) = (int(w, "width")?, int(h, "height")?);
    let da = gpu.upload_view(a)?;
    let db = gpu.upload_view(b)?;
    let dout = gpu.image::<f32>(w, h)?;
    gpu.launch(MAT_ADD, [blocks(w, 32), blocks(h, 8), 1], [32, 8, 1], 0, args![&da, &db, &dout, wi, hi, wi])?;
    gpu.download_view(&dout, out)
}

/// `out = a * b` ([`tessera_core::linalg::mat_mul`]): f32 with fused multiply-adds, in
/// 16-term steps; within `k * 2^-24 * sum_p |a b|` of the exact product, like the CPU's
/// (tested against a float64 product within 1e-4 relative). Errors as the CPU's.
pub(crate) fn mat_mul(gpu: &Gpu, a: ImageView<'_, f32>, b: ImageView<'_, f32>, out: ImageViewMut<'_, f32>) -> Result<()> {
    if a.width() != b.height() {
        return Err(Error::SizeMismatch { expected: (b.width(), a.width()), got: b.size() });
    }
    check_same_size((b.width(), a.height()), out.size())?;
    let (m, n, k) = (a.height(), b.width(), a.width());
    let (mi, ni, ki) = (int(m, "rows")?, int(n, "columns")?, int(k, "inner size")?);
    let da = gpu.upload_view(a)?;
    let db = gpu.upload_view(b)?;
    let dout = gpu.image::<f32>(n, m)?;
    gpu.launch(MAT_MUL, [blocks(n, MM_TILE as u32), blocks(m, MM_TILE as u32), 1], [16, 16, 1], 0, args![&da, &db, &dout, mi, ni, ki])?;
    gpu.download_view(&dout, out)
}
