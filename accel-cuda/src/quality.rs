//! Drives `kernels/quality.cu`: the sums of a stitched pair's quality measures on the
//! device, for integer frames ([`QualityPlan`]: the overlap and the grid's templates, every
//! region of a window's pairs in one launch). Integer sums, so the measures are the CPU's to the bit.

use crate::device::{args, as_bytes, int, Arg, DevicePtr, FrameTable, Gpu, KernelCall};
use crate::kernels::{Kernel, Module};
use tessera_core::stitch::{Moments, QualityPlan, Region};
use tessera_core::{Error, Result};

/// Threads per block: a few warps, each with many pixels, so that the warps' closing
/// shuffles (twenty sums each) are few beside the sums themselves.
const THREADS: u32 = 128;
/// Rows of a region per block, words of a region's sums, ints of a pair's record and of a
/// region's (`QUALITY_ROWS`, `QUALITY_WORDS`, `QUALITY_PAIR_INTS`, `QUALITY_REGION_INTS` of
/// quality.cu).
const ROWS: usize = 32;
const WORDS: usize = 20;
const PAIR_INTS: usize = 12;
const REGION_INTS: usize = 5;

/// The sums of a batch's regions as downloaded, `WORDS` words a region, pair after pair;
/// each pair's are read where they lie ([`of_pair`](Self::of_pair)).
pub(crate) struct RegionSums {
    words: Vec<u64>,
    /// Pair `k`'s regions are `firsts[k] .. firsts[k + 1]`.
    firsts: Vec<usize>,
}

impl RegionSums {
    /// The pairs summed.
    pub(crate) fn pairs(&self) -> usize {
        self.firsts.len().saturating_sub(1)
    }

    /// The sums of pair `k`'s regions (those of `plan`, the pair's), in order; an error where
    /// the batch summed another number of regions for it.
    pub(crate) fn of_pair<'a>(&'a self, k: usize, plan: &'a QualityPlan) -> Result<impl Iterator<Item = Moments<4>> + 'a> {
        let (first, end) = (self.firsts.get(k).copied().unwrap_or(0), self.firsts.get(k + 1).copied().unwrap_or(0));
        let words = self.words.get(WORDS * first..WORDS * end).filter(|_| end - first == plan.regions.len());
        let words = words.ok_or_else(|| Error::Backend(format!("{} quality sums for {} regions", end.saturating_sub(first), plan.regions.len())))?;
        Ok(plan.regions.iter().zip(words.chunks_exact(WORDS)).map(|(&region, s)| moments(region, s)))
    }
}

/// A region's sums as the core's [`Moments`] (the kernel's words: `sum a`, `sum a^2`, per
/// tap `sum t`, per tap `sum a t`, per pair of taps `sum t t`).
fn moments((x0, y0, x1, y1): Region, s: &[u64]) -> Moments<4> {
    let mut tt = [[0u64; 4]; 4];
    let mut q = 10;
    for k in 0..4 {
        for l in k..4 {
            tt[k][l] = s[q];
            q += 1;
        }
    }
    Moments { n: ((x1 - x0) * (y1 - y0)) as u64, a: s[0], aa: s[1], t: [s[2], s[3], s[4], s[5]], at: [s[6], s[7], s[8], s[9]], tt }
}

/// The sums of every region of each pair's plan over its frames (reference and moving
/// device addresses, every frame `size`, of the kernel's pixel type), pair by pair in
/// order: all pairs' regions in one launch, their records in one upload and their sums in
/// one download.
pub(crate) fn quality_sums(gpu: &Gpu, kernel: &'static str, size: (usize, usize), pairs: &[((DevicePtr, DevicePtr), &QualityPlan)]) -> Result<RegionSums> {
    let firsts: Vec<usize> = core::iter::once(0).chain(pairs.iter().scan(0, |at, (_, plan)| {
        *at += plan.regions.len();
        Some(*at)
    })).collect();
    let count = firsts.last().copied().unwrap_or(0);
    if count == 0 {
        return Ok(RegionSums { words: Vec::new(), firsts });
    }
    // Regions lie inside the frame and the origin within a frame of 0 (the overlap is not
    // empty): all fit i32 once the width does.
    int(size.0, "width")?;
    int(size.1, "height")?;
    let mut frames = FrameTable::default();
    // A pair's frames and taps once, each region naming its pair.
    let mut pair_records: Vec<i32> = Vec::with_capacity(pairs.len() * PAIR_INTS);
    let mut records: Vec<i32> = Vec::with_capacity(count * REGION_INTS);
    // A block per band of ROWS rows of each region: its region and first row.
    let band_count: usize = pairs.iter().flat_map(|(_, plan)| &plan.regions).map(|&(_, y0, _, y1)| (y1 - y0).div_ceil(ROWS)).sum();
    let mut bands: Vec<i32> = Vec::with_capacity(2 * band_count);
    for (i, &((reference, moving), plan)) in pairs.iter().enumerate() {
        pair_records.extend([frames.slot(reference), frames.slot(moving), plan.origin.0 as i32, plan.origin.1 as i32]);
        pair_records.extend(plan.taps.iter().flat_map(|&((dx, dy), _)| [dx as i32, dy as i32]));
        for &(x0, y0, x1, y1) in &plan.regions {
            let k = (records.len() / REGION_INTS) as i32;
            records.extend([i as i32, x0 as i32, y0 as i32, x1 as i32, y1 as i32]);
            for first in (y0..y1).step_by(ROWS) {
                bands.extend([k, first as i32]);
            }
        }
    }
    let (_records, at) = gpu.upload_packed(&[as_bytes(frames.addresses()), as_bytes(&pair_records), as_bytes(&records), as_bytes(&bands)])?;
    let out = gpu.zeroed::<u64>(count * WORDS)?;
    let grid = [int(bands.len() / 2, "quality bands")? as u32, 1, 1];
    let words = gpu.launch_all_and_download(&[KernelCall::new(Kernel::new(Module::Quality, kernel), grid, [THREADS, 1, 1], args![Arg::Ptr(at[0]), size.0 as i32, Arg::Ptr(at[1]), Arg::Ptr(at[2]), Arg::Ptr(at[3]), &out])], &out, count * WORDS)?;
    Ok(RegionSums { words, firsts })
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
        // Whole and fractional shifts each way, and overlaps too narrow for the grid (or
        // none), all in one launch per pixel type; every other pair with its frames swapped.
        let shifts = [(5.0, -3.0), (4.75, -3.25), (-7.5, 2.0), (0.0, 0.0), (60.0, 0.0), (-12.0, 40.5), (0.5, -46.0), (30.25, 20.875)];
        for seed in 0..2 {
            let (a, b) = pair(seed, size);
            let (a16, b16) = (a.map(|v| v as u16 * 251), b.map(|v| v as u16 * 251 + 9));
            let (da, db) = (gpu.upload(a.as_slice()).unwrap(), gpu.upload(b.as_slice()).unwrap());
            let (da16, db16) = (gpu.upload(a16.as_slice()).unwrap(), gpu.upload(b16.as_slice()).unwrap());
            let plans: Vec<QualityPlan> = shifts.iter().map(|&s| QualityPlan::new(size, s, 9).unwrap()).collect();
            let swapped = |k: usize| k % 2 == 1;
            let frames8: Vec<(DevicePtr, DevicePtr)> = (0..shifts.len()).map(|k| if swapped(k) { (db.ptr(), da.ptr()) } else { (da.ptr(), db.ptr()) }).collect();
            let frames16: Vec<(DevicePtr, DevicePtr)> = (0..shifts.len()).map(|k| if swapped(k) { (db16.ptr(), da16.ptr()) } else { (da16.ptr(), db16.ptr()) }).collect();
            let sums8 = quality_sums(&gpu, "quality_sums_u8", size, &frames8.iter().copied().zip(&plans).collect::<Vec<_>>()).unwrap();
            let sums16 = quality_sums(&gpu, "quality_sums_u16", size, &frames16.iter().copied().zip(&plans).collect::<Vec<_>>()).unwrap();
            assert_eq!((sums8.pairs(), sums16.pairs()), (shifts.len(), shifts.len()));
            for (k, &shift) in shifts.iter().enumerate() {
                let plan = &plans[k];
                let (r, m) = if swapped(k) { (b.view(), a.view()) } else { (a.view(), b.view()) };
                let want = (overlap_ncc(r, m, shift, Parallelism::Sequential).unwrap(), grid_ncc(r, m, shift, 9).unwrap());
                assert_eq!(plan.measures(sums8.of_pair(k, plan).unwrap()), want, "u8 seed {seed} shift {shift:?}");
                let (r, m) = if swapped(k) { (b16.view(), a16.view()) } else { (a16.view(), b16.view()) };
                let want = (overlap_ncc(r, m, shift, Parallelism::Sequential).unwrap(), grid_ncc(r, m, shift, 9).unwrap());
                assert_eq!(plan.measures(sums16.of_pair(k, plan).unwrap()), want, "u16 seed {seed} shift {shift:?}");
                // Another pair's plan asks for another number of regions: an error, not a measure.
                let other = plans.iter().find(|o| o.regions.len() != plan.regions.len()).unwrap();
                assert!(sums8.of_pair(k, other).is_err());
            }
        }
    }
}
