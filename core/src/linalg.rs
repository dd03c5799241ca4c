//! Matrix sum and product for f32 (the warm-up kernels of the OpenCL report). A matrix is
//! an `ImageView<f32>`: width = columns, height = rows. (Implementation lands with the
//! foundation's matrix work item.)

use crate::error::{Error, Result};
use crate::image::{ImageView, ImageViewMut};
use crate::parallel::Parallelism;

/// `out = a + b`, element-wise; all three the same size.
pub fn mat_add(a: ImageView<'_, f32>, b: ImageView<'_, f32>, out: ImageViewMut<'_, f32>, par: Parallelism) -> Result<()> {
    let _ = (a, b, out, par);
    Err(Error::UnsupportedType { op: "matrix sum", types: "f32 yet" })
}

/// `out = a * b` (rows of a x columns of b); a's width must equal b's height.
pub fn mat_mul(a: ImageView<'_, f32>, b: ImageView<'_, f32>, out: ImageViewMut<'_, f32>, par: Parallelism) -> Result<()> {
    let _ = (a, b, out, par);
    Err(Error::UnsupportedType { op: "matrix product", types: "f32 yet" })
}
