//! Drives `kernels/stereo.cu`.

use crate::device::Gpu;
use tessera_core::stereo::{StereoParams, StereoStats};
use tessera_core::{AnyView, Error, ImageViewMut, Result};

pub(crate) fn stereo_sgm(_gpu: &Gpu, _left: AnyView<'_>, _right: AnyView<'_>, _disp: ImageViewMut<'_, f32>, _p: &StereoParams) -> Result<StereoStats> {
    Err(Error::Backend("stereo_sgm: not on the CUDA backend yet".into()))
}
