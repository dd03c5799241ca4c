//! Drives `kernels/glare.cu`.

use crate::device::Gpu;
use tessera_core::glare::{GlareParams, GlareReport};
use tessera_core::{AnyView, AnyViewMut, Error, ImageViewMut, Result};

pub(crate) fn glare(_gpu: &Gpu, _src: AnyView<'_>, _mask: ImageViewMut<'_, u8>, _corrected: AnyViewMut<'_>, _p: &GlareParams) -> Result<GlareReport> {
    Err(Error::Backend("glare: not on the CUDA backend yet".into()))
}
