//! Drives `kernels/ncc.cu`: pair registration with every template search of the pair in
//! one launch (a warp per template), through the core's seam
//! [`register_pair_with`](tessera_core::stitch::register_pair_with): the grid, the texture
//! test, the threshold and the consensus are the core's, the searches the device's.
//! Integer frames (u8, u16, RGBA on its u8 luma) give the CPU's registration exactly
//! (every coefficient, peak, evaluation count and shift); f32 frames within about 1e-6 of
//! the CPU's coefficients.

use crate::device::{args, int, Arg, Gpu, Pod};
use crate::kernels::{Kernel, Module};
use core::ops::ControlFlow;
use tessera_core::image::Pixel;
use tessera_core::ncc::{quadratic_peak, Integral, Match, NccSample, SearchParams};
use tessera_core::stitch::{
    register::{gray, luma_storage, Gray},
    register_pair_with, stitch_frames_with, FrameSource, PairRegistrar, PairRegistration, Panorama, RegisterParams, SearchMethod,
    StitchParams, TemplateSearch,
};
use tessera_core::{AnyView, Error, ImageView, Parallelism, Result};

/// Warps per block of the search launch.
const WARPS: u32 = 4;

/// The kernel and its per-frame constants for one sample type.
trait DeviceSample: NccSample + Pod + Pixel + Into<f64> {
    const KERNEL: &'static str;
    /// The frame's offset and flatness tolerance (f32 only: the core's integral image's).
    fn f32_terms(_moving: ImageView<'_, Self>) -> Result<(f64, f64)> {
        Ok((0.0, 0.0))
    }
    /// The template statistic the coefficient divides by: `n^2 var` (integers) or the
    /// zero-mean norm (f32).
    fn norm(t: &tessera_core::ncc::TemplateStats) -> f64 {
        t.n2_var
    }
}
impl DeviceSample for u8 {
    const KERNEL: &'static str = "ncc_search_u8";
}
impl DeviceSample for u16 {
    const KERNEL: &'static str = "ncc_search_u16";
}
impl DeviceSample for f32 {
    const KERNEL: &'static str = "ncc_search_f32";
    fn f32_terms(moving: ImageView<'_, f32>) -> Result<(f64, f64)> {
        let integral = Integral::new(moving)?;
        Ok((integral.offset(), 64.0 * f64::EPSILON * integral.squares_scale()))
    }
    fn norm(t: &tessera_core::ncc::TemplateStats) -> f64 {
        t.dev
    }
}

/// Registers `moving` against `reference` ([`tessera_core::stitch::register_pair_any`]).
pub(crate) fn register_pair(gpu: &Gpu, reference: AnyView<'_>, moving: AnyView<'_>, p: &RegisterParams, prediction: (f64, f64)) -> Result<PairRegistration> {
    if reference.type_name() != moving.type_name() {
        return Err(Error::UnsupportedType { op: "register pair", types: "frames of two different pixel types" });
    }
    let (ls, lm) = (luma_storage(&reference), luma_storage(&moving));
    match (gray(&reference, &ls)?, gray(&moving, &lm)?) {
        (Gray::U8(a), Gray::U8(b)) => register_gray(gpu, a, b, p, prediction),
        (Gray::U16(a), Gray::U16(b)) => register_gray(gpu, a, b, p, prediction),
        (Gray::F32(a), Gray::F32(b)) => register_gray(gpu, a, b, p, prediction),
        _ => Err(Error::UnsupportedType { op: "register pair", types: "frames of two different pixel types" }),
    }
}

fn register_gray<T: DeviceSample>(gpu: &Gpu, reference: ImageView<'_, T>, moving: ImageView<'_, T>, p: &RegisterParams, prediction: (f64, f64)) -> Result<PairRegistration> {
    // Non-finite f32 pixels are an error, as the CPU's search frame says (checked first,
    // as the CPU prepares the moving frame before validating).
    let (offset, flat_tol) = T::f32_terms(moving)?;
    let method = p.method;
    register_pair_with(reference, moving, p, prediction, &mut |searches, sp| {
        search_all(gpu, reference, moving, p.rsz, method, searches, sp, offset, flat_tol)
    })
}

/// Every search of a pair in one launch; each result as the core's search returns it.
#[allow(clippy::too_many_arguments)]
fn search_all<T: DeviceSample>(
    gpu: &Gpu,
    reference: ImageView<'_, T>,
    moving: ImageView<'_, T>,
    rsz: usize,
    method: SearchMethod,
    searches: &[TemplateSearch<T>],
    sp: &SearchParams,
    offset: f64,
    flat_tol: f64,
) -> Result<Vec<Option<Match>>> {
    let (w, h) = moving.size();
    let (wi, hi) = (int(w, "width")?, int(h, "height")?);
    let count = searches.len();
    let r = sp.radius;
    // The core's checks of a search start (SearchCache::begin).
    let (xmax, ymax) = (w as isize - rsz as isize, h as isize - rsz as isize);
    let mut sites = Vec::with_capacity(4 * count);
    let mut stats = Vec::with_capacity(2 * count);
    for s in searches {
        let (sx, sy) = s.start;
        let ri = r as isize;
        let (x0, x1) = (sx.saturating_sub(ri).max(0), sx.saturating_add(ri).min(xmax));
        let (y0, y1) = (sy.saturating_sub(ri).max(0), sy.saturating_add(ri).min(ymax));
        if x0 > x1 || y0 > y1 {
            return Err(Error::InvalidParameter {
                name: "search start",
                reason: format!("({sx}, {sy}) with radius {r} leaves no window position inside the frame"),
            });
        }
        // Sites lie inside the frame and starts within a search radius of it: all fit i32.
        sites.extend([s.site.0 as i32, s.site.1 as i32, sx as i32, sy as i32]);
        stats.extend([s.template.stats().sum, T::norm(s.template.stats())]);
    }
    let side = 2 * (r + 1) + 1;
    let cells = side * side;
    let words = cells.div_ceil(32);
    let dref = gpu.upload_view(reference)?;
    let dmov = gpu.upload_view(moving)?;
    let dsites = gpu.upload(&sites)?;
    let dstats = gpu.upload(&stats)?;
    let values = gpu.buffer::<f64>(count * cells)?;
    let bits = gpu.zeroed::<u32>(count * words)?;
    let best_xy = gpu.buffer::<i32>(2 * count)?;
    let best = gpu.buffer::<f64>(count)?;
    let evals = gpu.buffer::<u32>(count)?;
    let nbhd = gpu.buffer::<f64>(9 * count)?;
    let method_code = match method {
        SearchMethod::Log => 0,
        SearchMethod::LogPlain => 1,
        SearchMethod::Exhaustive => 2,
    };
    let accept = sp.accept.unwrap_or(f64::INFINITY);
    let list: Vec<Arg> = args![
        &dref, &dmov, wi, hi, rsz as i32, &dsites, &dstats, count as i32, r as i32, method_code, accept,
        i32::from(sp.subpixel), offset, flat_tol, &values, &bits, &best_xy, &best, &evals, &nbhd
    ]
    .to_vec();
    let threads = 32 * WARPS;
    gpu.launch(Kernel::new(Module::Ncc, T::KERNEL), [(count as u32).div_ceil(WARPS), 1, 1], [threads, 1, 1], 0, &list)?;
    let mut xy = vec![0i32; 2 * count];
    let mut coef = vec![0f64; count];
    let mut n_eval = vec![0u32; count];
    let mut nb = vec![0f64; 9 * count];
    gpu.download(&best_xy, &mut xy)?;
    gpu.download(&best, &mut coef)?;
    gpu.download(&evals, &mut n_eval)?;
    if sp.subpixel {
        gpu.download(&nbhd, &mut nb)?;
    }
    Ok((0..count)
        .map(|i| {
            if coef[i] == f64::NEG_INFINITY {
                return None;
            }
            let offset = if sp.subpixel {
                let v: [[f64; 3]; 3] = core::array::from_fn(|j| core::array::from_fn(|k| nb[9 * i + 3 * j + k]));
                quadratic_peak(&v)
            } else {
                (0.0, 0.0)
            };
            Some(Match { x: xy[2 * i] as usize, y: xy[2 * i + 1] as usize, coefficient: coef[i], offset, evaluations: n_eval[i] })
        })
        .collect())
}

/// The device's pair registration as the core's stitching run asks for it.
struct DeviceRegistrar<'g>(&'g Gpu);

impl PairRegistrar for DeviceRegistrar<'_> {
    fn register(&self, reference: Gray<'_>, moving: Gray<'_>, p: &RegisterParams, prediction: (f64, f64)) -> Result<PairRegistration> {
        match (reference, moving) {
            (Gray::U8(a), Gray::U8(b)) => register_gray(self.0, a, b, p, prediction),
            (Gray::U16(a), Gray::U16(b)) => register_gray(self.0, a, b, p, prediction),
            (Gray::F32(a), Gray::F32(b)) => register_gray(self.0, a, b, p, prediction),
            _ => Err(Error::UnsupportedType { op: "stitch", types: "frames of differing pixel types" }),
        }
    }
}

/// Stitches a sequence ([`tessera_core::stitch::stitch_frames`]): the core's run (frame
/// reading, attempts, keyframes, skips, progress and cancellation, the composite) with
/// every pair registered on the device. The same panorama as the CPU for integer frames.
///
/// Not yet as the GPU design wants it: each pair uploads its two frames (not each frame
/// once), and the quality measures and the composite run on the host.
pub(crate) fn stitch(gpu: &Gpu, frames: &dyn FrameSource, p: &StitchParams, progress: &mut dyn FnMut(usize) -> ControlFlow<()>) -> Result<Panorama> {
    stitch_frames_with(frames, p, Parallelism::AllThreads, progress, Some(&DeviceRegistrar(gpu)))
}
