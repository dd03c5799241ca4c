//! Drives `kernels/linalg.cu`: matrix sum and product.

use crate::device::{args, blocks, int, Gpu};
use crate::kernels::{Kernel, Module};
use tessera_core::image::check_same_size;
use tessera_core::{Error, ImageView, ImageViewMut, Result};

const MAT_ADD: Kernel = Kernel::new(Module::Linalg, "mat_add_f32");

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

pub(crate) fn mat_mul(_gpu: &Gpu, _a: ImageView<'_, f32>, _b: ImageView<'_, f32>, _out: ImageViewMut<'_, f32>) -> Result<()> {
    Err(Error::Backend("mat_mul: CUDA kernel not written yet".into()))
}
