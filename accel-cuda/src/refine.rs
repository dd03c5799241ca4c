//! Drives `kernels/refine.cu`: the subpixel refinement of a batch of stitched pairs'
//! shifts on the device ([`ShiftRefinement`], a block per pair and a warp per interior,
//! every pair of a window in one launch), to the bits of the core's refinement on the host.

use crate::device::{args, as_bytes, int, Arg, DevicePtr, FrameTable, Gpu, KernelCall};
use crate::kernels::{Kernel, Module};
use tessera_core::stitch::{ShiftRefinement, REFINED_TEMPLATES, REFINE_ITERATIONS};
use tessera_core::{Error, Result};

/// Interiors a pair refines on at most, and ints of a pair's record (`REFINE_PATCHES`,
/// `REFINE_TASK_INTS` of refine.cu).
const PATCHES: usize = 12;
const TASK_INTS: usize = 3 + 2 * PATCHES;
/// Threads of a pair's block, a warp per interior (`REFINE_THREADS`).
const THREADS: u32 = 32 * PATCHES as u32;
const _: () = assert!(PATCHES == REFINED_TEMPLATES, "refine.cu's REFINE_PATCHES is the core's REFINED_TEMPLATES");

/// The refined shift of each of `pairs` (reference and moving device addresses, every frame
/// `size`, of the kernel's pixel type), in order: one launch and one download for all. A
/// refinement whose interiors do not lie in the frames keeps its shift, as on the host.
pub(crate) fn refine_shifts(gpu: &Gpu, kernel: &'static str, size: (usize, usize), pairs: &[((DevicePtr, DevicePtr), &ShiftRefinement)]) -> Result<Vec<(f64, f64)>> {
    let mut shifts: Vec<(f64, f64)> = pairs.iter().map(|(_, r)| r.shift()).collect();
    let launched: Vec<usize> = (0..pairs.len()).filter(|&k| pairs[k].1.fits(size)).collect();
    let Some(&first) = launched.first() else { return Ok(shifts) };
    let side = pairs[first].1.side();
    if launched.iter().any(|&k| pairs[k].1.side() != side || pairs[k].1.corners().len() > PATCHES) {
        return Err(Error::Backend("internal: refinements of one launch with different template sides".into()));
    }
    // Corners lie inside the frame, whose sides fit an int.
    let (w, h) = (int(size.0, "width")?, int(size.1, "height")?);
    let mut frames = FrameTable::default();
    let mut tasks: Vec<i32> = Vec::with_capacity(launched.len() * TASK_INTS);
    let mut starts: Vec<f64> = Vec::with_capacity(2 * launched.len());
    for &k in &launched {
        let ((reference, moving), r) = pairs[k];
        let corners = r.corners();
        tasks.extend([frames.slot(reference), frames.slot(moving), corners.len() as i32]);
        tasks.extend(corners.iter().flat_map(|&(x, y)| [x as i32, y as i32]));
        tasks.resize(tasks.len() + 2 * (PATCHES - corners.len()), 0);
        starts.extend([r.shift().0, r.shift().1]);
    }
    // The frame table, the tasks and the starting shifts in one transfer.
    let (_records, at) = gpu.upload_packed(&[as_bytes(frames.addresses()), as_bytes(&tasks), as_bytes(&starts)])?;
    let out = gpu.buffer::<f64>(starts.len())?;
    let grid = [int(launched.len(), "refined pairs")? as u32, 1, 1];
    let list = args![Arg::Ptr(at[0]), w, h, side as i32, REFINE_ITERATIONS as i32, Arg::Ptr(at[1]), Arg::Ptr(at[2]), &out];
    let refined = gpu.launch_all_and_download(&[KernelCall::new(Kernel::new(Module::Refine, kernel), grid, [THREADS, 1, 1], list)], &out, starts.len())?;
    for (&k, s) in launched.iter().zip(refined.chunks_exact(2)) {
        shifts[k] = (s[0], s[1]);
    }
    Ok(shifts)
}

#[cfg(all(test, feature = "shim"))]
mod tests {
    use super::*;
    use crate::device::Pod;
    use tessera_core::image::Pixel;
    use tessera_core::stitch::{MotionVector, SplitMix64};
    use tessera_core::Parallelism;
    use tessera_core::Image;

    /// A smooth pattern with grain: what the frames sample, the moving one shifted.
    fn scene(seed: u64) -> impl Fn(f64, f64) -> f64 {
        let mut rng = SplitMix64::new(seed);
        let grain: Vec<f64> = (0..64 * 64).map(|_| (rng.next_u64() >> 61) as f64).collect();
        move |x: f64, y: f64| {
            let g = grain[(x.rem_euclid(64.0) as usize) + 64 * (y.rem_euclid(64.0) as usize)];
            120.0 + 50.0 * (0.31 * x + 0.17 * y).sin() + 35.0 * (0.23 * y - 0.11 * x).cos() + 20.0 * (0.07 * x * y / 40.0).sin() + g
        }
    }

    /// The vectors of templates of side `rsz` on a grid with `step` between sites, every
    /// one agreeing.
    fn grid(size: (usize, usize), rsz: usize, step: usize) -> Vec<MotionVector> {
        let sites = |len: usize| (6..len.saturating_sub(rsz + 6)).step_by(step).collect::<Vec<_>>();
        let (xs, ys) = (sites(size.0), sites(size.1));
        ys.iter()
            .flat_map(|&y| xs.iter().map(move |&x| (x, y)))
            .map(|template| MotionVector { template, found: (0.0, 0.0), shift: (0.0, 0.0), coefficient: 1.0, threshold: 0.5, evaluations: 0, inlier: true })
            .collect()
    }

    fn check<T: Pod + Pixel + Into<f64>>(gpu: &Gpu, kernel: &'static str, make: impl Fn(f64) -> T) {
        let size = (96, 80);
        let f = scene(3);
        let truth = (3.37, -2.61);
        // moving (u, v) shows the reference at (u + x, v + y).
        let reference = Image::from_fn(size.0, size.1, |x, y| make(f(x as f64, y as f64))).unwrap();
        let moving = Image::from_fn(size.0, size.1, |x, y| make(f(x as f64 + truth.0, y as f64 + truth.1))).unwrap();
        let flat = Image::from_fn(size.0, size.1, |_, _| make(90.0)).unwrap();
        let (dr, dm, df) = (gpu.upload(reference.as_slice()).unwrap(), gpu.upload(moving.as_slice()).unwrap(), gpu.upload(flat.as_slice()).unwrap());
        let rsz = 15;
        let mut vectors = grid(size, rsz, 9);
        assert!(vectors.len() > REFINED_TEMPLATES, "more agreeing templates than the refinement takes");
        let few: Vec<MotionVector> = vectors.iter().take(5).cloned().collect();
        let mut edge = few.clone();
        edge[0].template = (size.0 - rsz + 1, 30);
        vectors[3].inlier = false;
        let none: Vec<MotionVector> = few.iter().map(|v| MotionVector { inlier: false, ..v.clone() }).collect();
        // Close starts on many and on few templates, a start off by more than the
        // linearisation holds, starts that send interiors off the moving frame, a template
        // on the reference's edge, a flat frame, and no agreeing template.
        let cases: Vec<(&[MotionVector], (f64, f64), bool)> = vec![
            (&vectors, (3.0, -3.0), false),
            (&vectors, (4.0, -2.0), false),
            (&few, (3.5, -2.5), false),
            (&vectors, (2.6, -2.2), false),
            (&few, (-40.0, 0.0), false),
            (&few, (0.0, 50.0), false),
            (&edge, (3.0, -3.0), false),
            (&few, (3.0, -3.0), true),
            (&none, (3.0, -3.0), false),
        ];
        let asks: Vec<ShiftRefinement> = cases.iter().map(|&(v, s, _)| ShiftRefinement::new(rsz, v, s).unwrap()).collect();
        assert!(!asks[6].fits(size));
        let pairs: Vec<_> = asks.iter().zip(&cases).map(|(r, c)| ((dr.ptr(), if c.2 { df.ptr() } else { dm.ptr() }), r)).collect();
        let got = refine_shifts(gpu, kernel, size, &pairs).unwrap();
        let mut moved = 0;
        for (k, (r, c)) in asks.iter().zip(&cases).enumerate() {
            let want = r.on_host(reference.view(), if c.2 { flat.view() } else { moving.view() }, Parallelism::Sequential);
            assert_eq!((got[k].0.to_bits(), got[k].1.to_bits()), (want.0.to_bits(), want.1.to_bits()), "{kernel} case {k}: {:?} against {want:?}", got[k]);
            moved += usize::from(want != r.shift());
        }
        // The close starts are refined (towards the truth), the others stand.
        assert!(moved >= 3, "{kernel}: only {moved} refined");
        assert!((got[0].0 - truth.0).abs() < 0.1 && (got[0].1 - truth.1).abs() < 0.1, "{kernel}: {:?}", got[0]);
    }

    #[test]
    fn device_refinements_are_the_cpus_to_the_bit() {
        let gpu = Gpu::with_staging(Box::new(crate::shim::ShimDevice::new()), crate::transfer::StagingConfig::for_shim());
        check(&gpu, "refine_shift_u8", |v| v.round().clamp(0.0, 255.0) as u8);
        check(&gpu, "refine_shift_u16", |v| (v * 200.0).round() as u16);
        check(&gpu, "refine_shift_f32", |v| (v / 255.0) as f32);
    }
}
