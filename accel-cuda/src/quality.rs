//! Drives `kernels/quality.cu`: a stitched pair's quality measures on the device, for
//! integer frames ([`QualityPlan`]: the overlap and the grid's templates, every region of a
//! window's pairs in one launch): the regions' exact integer sums, then each region's
//! Pearson's r and the grid's mean in the core's f64 operations, so the measures are the
//! CPU's to the bit; the host reads two numbers a pair rather than twenty sums a region.

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
/// Words of a pair's answer (`QUALITY_MEASURE_WORDS`): the overlap's r, the grid's mean r
/// (NaN: none), and whether the host is to make them from the sums; threads per block of
/// the measures, a thread a pair.
const MEASURE_WORDS: usize = 3;
const MEASURE_THREADS: u32 = 64;

/// A pair's quality measures: the overlap's r and the grid's mean r.
type Measures = (Option<f64>, Option<f64>);

/// The sums of a batch's regions as downloaded, `WORDS` words a region, pair after pair;
/// each pair's are read where they lie ([`of_pair`](Self::of_pair)).
struct RegionSums {
    words: Vec<u64>,
    /// Pair `k`'s regions are `firsts[k] .. firsts[k + 1]`.
    firsts: Vec<usize>,
}

impl RegionSums {
    /// The sums of pair `k`'s regions (those of `plan`, the pair's), in order; an error where
    /// the batch summed another number of regions for it.
    fn of_pair<'a>(&'a self, k: usize, plan: &'a QualityPlan) -> Result<impl Iterator<Item = Moments<4>> + 'a> {
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

/// The quality measures of each pair's plan over its frames (reference and moving device
/// addresses, every frame `size`, of the kernel's pixel type), in order: every pair's
/// regions summed in one launch and turned into the measures by a second
/// (`quality_measures`, the CPU's to the bit), whose answers are the one download; where a
/// pair's sums pass 64-bit products (u16 frames), its measures are made on the host from
/// its sums, downloaded then.
pub(crate) fn quality_measures(gpu: &Gpu, kernel: &'static str, size: (usize, usize), pairs: &[((DevicePtr, DevicePtr), &QualityPlan)]) -> Result<Vec<Measures>> {
    let firsts: Vec<usize> = core::iter::once(0).chain(pairs.iter().scan(0, |at, (_, plan)| {
        *at += plan.regions.len();
        Some(*at)
    })).collect();
    let count = firsts.last().copied().unwrap_or(0);
    if count == 0 {
        return Ok(vec![(None, None); pairs.len()]);
    }
    // Regions lie inside the frame and the origin within a frame of 0 (the overlap is not
    // empty): all fit i32 once the width does.
    int(size.0, "width")?;
    int(size.1, "height")?;
    int(count, "quality regions")?;
    let mut frames = FrameTable::default();
    // A pair's frames and taps once, each region naming its pair.
    let mut pair_records: Vec<i32> = Vec::with_capacity(pairs.len() * PAIR_INTS);
    let mut weights: Vec<f64> = Vec::with_capacity(pairs.len() * 4);
    let mut records: Vec<i32> = Vec::with_capacity(count * REGION_INTS);
    // A block per band of ROWS rows of each region: its region and first row.
    let band_count: usize = pairs.iter().flat_map(|(_, plan)| &plan.regions).map(|&(_, y0, _, y1)| (y1 - y0).div_ceil(ROWS)).sum();
    let mut bands: Vec<i32> = Vec::with_capacity(2 * band_count);
    for (i, &((reference, moving), plan)) in pairs.iter().enumerate() {
        pair_records.extend([frames.slot(reference), frames.slot(moving), plan.origin.0 as i32, plan.origin.1 as i32]);
        pair_records.extend(plan.taps.iter().flat_map(|&((dx, dy), _)| [dx as i32, dy as i32]));
        weights.extend(plan.taps.iter().map(|&(_, w)| w));
        for &(x0, y0, x1, y1) in &plan.regions {
            let k = (records.len() / REGION_INTS) as i32;
            records.extend([i as i32, x0 as i32, y0 as i32, x1 as i32, y1 as i32]);
            for first in (y0..y1).step_by(ROWS) {
                bands.extend([k, first as i32]);
            }
        }
    }
    let first_regions: Vec<i32> = firsts.iter().map(|&f| f as i32).collect();
    let (_records, at) = gpu.upload_packed(&[as_bytes(frames.addresses()), as_bytes(&pair_records), as_bytes(&records), as_bytes(&bands), as_bytes(&first_regions), as_bytes(&weights)])?;
    let sums = gpu.zeroed::<u64>(count * WORDS)?;
    let out = gpu.buffer::<f64>(MEASURE_WORDS * pairs.len())?;
    let n = int(pairs.len(), "quality pairs")?;
    let sum_blocks = [int(bands.len() / 2, "quality bands")? as u32, 1, 1];
    let pair_blocks = [(n as u32).div_ceil(MEASURE_THREADS), 1, 1];
    let summing = args![Arg::Ptr(at[0]), size.0 as i32, Arg::Ptr(at[1]), Arg::Ptr(at[2]), Arg::Ptr(at[3]), &sums];
    let measuring = args![&sums, Arg::Ptr(at[2]), Arg::Ptr(at[4]), Arg::Ptr(at[5]), n, &out];
    let calls = [
        KernelCall::new(Kernel::new(Module::Quality, kernel), sum_blocks, [THREADS, 1, 1], summing),
        KernelCall::new(Kernel::new(Module::Quality, "quality_measures"), pair_blocks, [MEASURE_THREADS, 1, 1], measuring),
    ];
    let answers = gpu.launch_all_and_download(&calls, &out, MEASURE_WORDS * pairs.len())?;
    let measure = |r: f64| (!r.is_nan()).then_some(r);
    let mut measures: Vec<Measures> = answers.chunks_exact(MEASURE_WORDS).map(|a| (measure(a[0]), measure(a[1]))).collect();
    let wide: Vec<usize> = answers.chunks_exact(MEASURE_WORDS).enumerate().filter(|(_, a)| a[2] != 0.0).map(|(k, _)| k).collect();
    if !wide.is_empty() {
        let mut words = crate::device::zeroed_vec::<u64>(count * WORDS)?;
        gpu.download(&sums, &mut words)?;
        let region_sums = RegionSums { words, firsts };
        for k in wide {
            let plan = pairs[k].1;
            measures[k] = plan.measures(region_sums.of_pair(k, plan)?);
        }
    }
    Ok(measures)
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

    /// Whether `measures` are `want` to the bit (a NaN is no measure: never equal).
    fn same_bits(got: Measures, want: Measures) -> bool {
        let bits = |m: Measures| (m.0.map(f64::to_bits), m.1.map(f64::to_bits));
        bits(got) == bits(want)
    }

    #[test]
    fn device_measures_are_the_cpus_bit_for_bit() {
        let gpu = Gpu::with_staging(Box::new(crate::shim::ShimDevice::new()), crate::transfer::StagingConfig::for_shim());
        let size = (61, 47);
        // Whole and fractional shifts each way, and overlaps too narrow for the grid (or
        // none), all in one launch per pixel type; every other pair with its frames swapped.
        // u8 frames' measures are made on the device; u16 frames' sums pass 64-bit products
        // here, and their measures are made on the host from the sums.
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
            let got8 = quality_measures(&gpu, "quality_sums_u8", size, &frames8.iter().copied().zip(&plans).collect::<Vec<_>>()).unwrap();
            let got16 = quality_measures(&gpu, "quality_sums_u16", size, &frames16.iter().copied().zip(&plans).collect::<Vec<_>>()).unwrap();
            assert_eq!((got8.len(), got16.len()), (shifts.len(), shifts.len()));
            for (k, &shift) in shifts.iter().enumerate() {
                let (r, m) = if swapped(k) { (b.view(), a.view()) } else { (a.view(), b.view()) };
                let want = (overlap_ncc(r, m, shift, Parallelism::Sequential).unwrap(), grid_ncc(r, m, shift, 9).unwrap());
                assert!(same_bits(got8[k], want), "u8 seed {seed} shift {shift:?}: {:?} want {want:?}", got8[k]);
                let (r, m) = if swapped(k) { (b16.view(), a16.view()) } else { (a16.view(), b16.view()) };
                let want = (overlap_ncc(r, m, shift, Parallelism::Sequential).unwrap(), grid_ncc(r, m, shift, 9).unwrap());
                assert!(same_bits(got16[k], want), "u16 seed {seed} shift {shift:?}: {:?} want {want:?}", got16[k]);
            }
            // Most of the u8 pairs have measures to compare (not all none).
            assert!(got8.iter().filter(|m| m.0.is_some() && m.1.is_some()).count() >= 4, "{got8:?}");
        }
        // u16 frames whose overlap (395 x 297 pixels near 33 000) has sums past 64-bit
        // products (n sum a^2 about 1.5e19): that pair's measures come from its sums on the
        // host, the other pair's (no overlap's worth of pixels past it) from the device.
        let big = (400, 300);
        let (a, b) = pair(7, big);
        let (a16, b16) = (a.map(|v| v as u16 * 257), b.map(|v| v as u16 * 257 + 3));
        let (da16, db16) = (gpu.upload(a16.as_slice()).unwrap(), gpu.upload(b16.as_slice()).unwrap());
        let shifts = [(5.0, -3.0), (380.5, 2.25)];
        let plans: Vec<QualityPlan> = shifts.iter().map(|&s| QualityPlan::new(big, s, 31).unwrap()).collect();
        let got = quality_measures(&gpu, "quality_sums_u16", big, &[((da16.ptr(), db16.ptr()), &plans[0]), ((da16.ptr(), db16.ptr()), &plans[1])]).unwrap();
        for (k, &shift) in shifts.iter().enumerate() {
            let want = (overlap_ncc(a16.view(), b16.view(), shift, Parallelism::Sequential).unwrap(), grid_ncc(a16.view(), b16.view(), shift, 31).unwrap());
            assert!(want.0.is_some() && same_bits(got[k], want), "u16 {big:?} shift {shift:?}: {:?} want {want:?}", got[k]);
        }
        // No pairs: no launch, no measures.
        assert!(quality_measures(&gpu, "quality_sums_u8", size, &[]).unwrap().is_empty());
    }
}
