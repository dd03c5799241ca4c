//! Drives `kernels/ncc.cu`.

use crate::device::Gpu;
use core::ops::ControlFlow;
use tessera_core::stitch::{FrameSource, PairRegistration, Panorama, RegisterParams, StitchParams};
use tessera_core::{AnyView, Error, Result};

pub(crate) fn register_pair(_gpu: &Gpu, _reference: AnyView<'_>, _moving: AnyView<'_>, _p: &RegisterParams, _prediction: (f64, f64)) -> Result<PairRegistration> {
    Err(Error::Backend("register_pair: CUDA kernel not written yet".into()))
}
pub(crate) fn stitch(_gpu: &Gpu, _frames: &dyn FrameSource, _p: &StitchParams, _progress: &mut dyn FnMut(usize) -> ControlFlow<()>) -> Result<Panorama> {
    Err(Error::Backend("stitch: CUDA kernel not written yet".into()))
}
