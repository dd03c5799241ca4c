//! Drives `kernels/filter.cu`.

use crate::device::Gpu;
use tessera_core::filter::{BoxParams, GaussianParams};
use tessera_core::{AnyView, AnyViewMut, Error, Result};

pub(crate) fn mean_filter(_gpu: &Gpu, _src: AnyView<'_>, _dst: AnyViewMut<'_>, _p: &BoxParams) -> Result<()> {
    Err(Error::Backend("mean_filter: CUDA kernel not written yet".into()))
}
pub(crate) fn box_sum(_gpu: &Gpu, _src: AnyView<'_>, _dst: AnyViewMut<'_>, _p: &BoxParams) -> Result<()> {
    Err(Error::Backend("box_sum: CUDA kernel not written yet".into()))
}
pub(crate) fn gaussian_blur(_gpu: &Gpu, _src: AnyView<'_>, _dst: AnyViewMut<'_>, _p: &GaussianParams) -> Result<()> {
    Err(Error::Backend("gaussian_blur: CUDA kernel not written yet".into()))
}
