//! Drives `kernels/quality.cu`: the sums of a stitched pair's quality measures on the
//! device, for integer frames ([`QualityPlan`]: the overlap and the grid's templates, every
//! region of a pair in one launch). Integer sums, so the measures are the CPU's to the bit.

use crate::device::{args, int, DevicePtr, Gpu};
use crate::kernels::{Kernel, Module};
use tessera_core::stitch::{Moments, QualityPlan};
use tessera_core::Result;

/// Threads per block: a few warps, each with many pixels, so that the warps' closing
/// shuffles (twenty sums each) are few beside the sums themselves.
const THREADS: u32 = 128;
/// Rows of a region per block, words of a region's sums, ints of a region's record
/// (`QUALITY_ROWS`, `QUALITY_WORDS`, `QUALITY_REGION_INTS` of quality.cu).
const ROWS: usize = 32;
const WORDS: usize = 20;
const REGION_INTS: usize = 16;

/// The sums of every region of `plan` over the frames at `reference` and `moving` (both
/// `size`, of the kernel's pixel type), in order. One launch and one download.
pub(crate) fn quality_sums(gpu: &Gpu, kernel: &'static str, (reference, moving): (DevicePtr, DevicePtr), size: (usize, usize), plan: &QualityPlan) -> Result<Vec<Moments<4>>> {
    if plan.regions.is_empty() {
        return Ok(Vec::new());
    }
    // Regions lie inside the frame and the origin within a frame of 0 (the overlap is not
    // empty): all fit i32 once the width does.
    int(size.0, "width")?;
    int(size.1, "height")?;
    let mut records: Vec<i32> = Vec::with_capacity(plan.regions.len() * REGION_INTS);
    for &(x0, y0, x1, y1) in &plan.regions {
        records.extend([0, 1, x0 as i32, y0 as i32, x1 as i32, y1 as i32, plan.origin.0 as i32, plan.origin.1 as i32]);
        for ((dx, dy), _) in plan.taps {
            records.extend([dx as i32, dy as i32]);
        }
    }
    // A block per band of ROWS rows of each region: its region and first row.
    let mut bands: Vec<i32> = Vec::new();
    for (k, &(_, y0, _, y1)) in plan.regions.iter().enumerate() {
        for first in (y0..y1).step_by(ROWS) {
            bands.extend([k as i32, first as i32]);
        }
    }
    let count = plan.regions.len();
    let frames = gpu.upload(&[reference, moving])?;
    let dregions = gpu.upload(&records)?;
    let dbands = gpu.upload(&bands)?;
    let out = gpu.zeroed::<u64>(count * WORDS)?;
    let grid = [int(bands.len() / 2, "quality bands")? as u32, 1, 1];
    gpu.launch(Kernel::new(Module::Quality, kernel), grid, [THREADS, 1, 1], 0, args![&frames, size.0 as i32, &dregions, &dbands, &out])?;
    let mut sums = vec![0u64; count * WORDS];
    gpu.download(&out, &mut sums)?;
    Ok(plan
        .regions
        .iter()
        .zip(sums.chunks_exact(WORDS))
        .map(|(&(x0, y0, x1, y1), s)| {
            let mut tt = [[0u64; 4]; 4];
            let mut q = 10;
            for k in 0..4 {
                for l in k..4 {
                    tt[k][l] = s[q];
                    q += 1;
                }
            }
            Moments { n: ((x1 - x0) * (y1 - y0)) as u64, a: s[0], aa: s[1], t: [s[2], s[3], s[4], s[5]], at: [s[6], s[7], s[8], s[9]], tt }
        })
        .collect())
}

#[cfg(all(test, feature = "shim"))]
mod tests {
    use super::*;
    use tessera_core::stitch::{grid_ncc, overlap_ncc, SplitMix64};
    use tessera_core::{Image, Parallelism};

    /// A pair of frames of one texture, the second cut `(5, -3)` further on, with noise.
    fn pair(seed: u64, (w, h): (usize, usize)) -> (Image<u8>, Image<u8>) {
        let mut rng = SplitMix64::new(seed);
        let noise = Image::from_fn(w + 10, h + 10, |_, _| (rng.next_u64() >> 56) as f64).unwrap();
        let smooth = |x: usize, y: usize| (noise.at(x, y) + noise.at(x + 1, y) + noise.at(x, y + 1) + noise.at(x + 1, y + 1)) / 4.0;
        let a = Image::from_fn(w, h, |x, y| smooth(x + 2, y + 5) as u8).unwrap();
        let b = Image::from_fn(w, h, |x, y| (smooth(x + 7, y + 2) + (rng.next_u64() >> 61) as f64) as u8).unwrap();
        (a, b)
    }

    #[test]
    fn device_sums_give_the_cpus_measures_bit_for_bit() {
        let gpu = Gpu::with_staging(Box::new(crate::shim::ShimDevice::new()), crate::transfer::StagingConfig::for_shim());
        let size = (61, 47);
        // Whole and fractional shifts each way, and overlaps too narrow for the grid.
        let shifts = [(5.0, -3.0), (4.75, -3.25), (-7.5, 2.0), (0.0, 0.0), (60.0, 0.0), (-12.0, 40.5), (0.5, -46.0), (30.25, 20.875)];
        for seed in 0..2 {
            let (a, b) = pair(seed, size);
            let (a16, b16) = (a.map(|v| v as u16 * 251), b.map(|v| v as u16 * 251 + 9));
            let (da, db) = (gpu.upload(a.as_slice()).unwrap(), gpu.upload(b.as_slice()).unwrap());
            let (da16, db16) = (gpu.upload(a16.as_slice()).unwrap(), gpu.upload(b16.as_slice()).unwrap());
            for shift in shifts {
                let plan = QualityPlan::new(size, shift, 9).unwrap();
                let sums = quality_sums(&gpu, "quality_sums_u8", (da.ptr(), db.ptr()), size, &plan).unwrap();
                assert_eq!(sums.len(), plan.regions.len());
                let want = (overlap_ncc(a.view(), b.view(), shift, Parallelism::Sequential).unwrap(), grid_ncc(a.view(), b.view(), shift, 9).unwrap());
                assert_eq!(plan.measures(&sums), want, "u8 seed {seed} shift {shift:?}");
                let sums = quality_sums(&gpu, "quality_sums_u16", (da16.ptr(), db16.ptr()), size, &plan).unwrap();
                let want = (overlap_ncc(a16.view(), b16.view(), shift, Parallelism::Sequential).unwrap(), grid_ncc(a16.view(), b16.view(), shift, 9).unwrap());
                assert_eq!(plan.measures(&sums), want, "u16 seed {seed} shift {shift:?}");
            }
        }
    }
}
