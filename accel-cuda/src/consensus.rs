//! Drives `kernels/consensus.cu`: the sets of a launch's similarity consensuses (the core's
//! [`ConsensusCount`]: a pair's conclusion stopped at its consensus) counted on the device,
//! every pair's in one launch, a thread per hypothesis; the host made the hypotheses, and
//! picks each winner and refits it, so the answer is the CPU's to the bit.

use crate::device::{args, as_bytes, int, Arg, Gpu, KernelCall};
use crate::kernels::{Kernel, Module};
use tessera_core::stitch::ConsensusCount;
use tessera_core::Result;

/// Threads per block.
const THREADS: u32 = 128;

/// Fewest point tests (hypotheses times points) of a pair worth counting on the device: a
/// launch costs tens of microseconds, about what the host's vectorized test takes for this
/// many (a PAL pair's 630 hypotheses of 60 vectors are 37 800 tests, 0.1 ms on the host).
pub(crate) const DEVICE_TESTS: usize = 8192;

/// Each consensus's hypotheses' counts and scores ([`ConsensusCount::finish`]'s), all of
/// them in one upload, one launch and one download.
pub(crate) fn count_sets(gpu: &Gpu, consensuses: &[&ConsensusCount]) -> Result<Vec<Vec<(usize, f64)>>> {
    // Per consensus: where its points and weights start in `data`, their count, the
    // tolerance, and its first hypothesis; the hypotheses uploaded from where they lie.
    let mut tasks = Vec::with_capacity(4 * consensuses.len());
    let mut data = Vec::with_capacity(consensuses.iter().map(|c| 5 * c.points().len()).sum());
    let mut count = 0usize;
    for c in consensuses {
        int(c.points().len(), "consensus points")?;
        tasks.extend([data.len() as f64, c.points().len() as f64, c.tol(), count as f64]);
        data.extend(c.points().iter().flat_map(|p| [p.moving.0, p.moving.1, p.reference.0, p.reference.1]));
        data.extend_from_slice(c.weights());
        count += c.hypotheses().len();
    }
    let count = int(count, "consensus hypotheses")?;
    if count == 0 {
        return Ok(consensuses.iter().map(|_| Vec::new()).collect());
    }
    let hypotheses: Vec<&[u8]> = consensuses.iter().map(|c| as_bytes(c.hypotheses().as_flattened())).collect();
    let (_records, at) = gpu.upload_gathered(&[vec![as_bytes(&tasks)], hypotheses, vec![as_bytes(&data)]])?;
    let out = gpu.buffer::<f64>(2 * count as usize)?;
    let grid = [(count as u32).div_ceil(THREADS), 1, 1];
    let pairs = int(consensuses.len(), "consensus pairs")?;
    let counted = gpu.launch_all_and_download(&[KernelCall::new(Kernel::new(Module::Consensus, "consensus_sets"), grid, [THREADS, 1, 1], args![Arg::Ptr(at[0]), pairs, Arg::Ptr(at[1]), Arg::Ptr(at[2]), count, &out])], &out, 2 * count as usize)?;
    // Counts are exact in f64.
    let mut counted = counted.chunks_exact(2).map(|c| (c[0] as usize, c[1]));
    Ok(consensuses.iter().map(|c| counted.by_ref().take(c.hypotheses().len()).collect()).collect())
}

#[cfg(all(test, feature = "shim"))]
mod tests {
    use super::*;
    use tessera_core::stitch::{Correspondence, Hypothesis, SplitMix64};

    /// A pair's consensus: a turn with noise and outliers, every fifth point on a
    /// quarter-pixel grid so that residuals of exactly the tolerance happen, weights with
    /// ties.
    fn consensus(n: usize, tol: f64, rng: &mut SplitMix64) -> ConsensusCount {
        let points: Vec<Correspondence> = (0..n)
            .map(|k| {
                let m = (400.0 * rng.uniform(), 300.0 * rng.uniform());
                let off = if k % 7 == 0 { 20.0 * rng.normal() } else { 0.3 * rng.normal() };
                let (c, s) = (0.01f64.cos(), 0.01f64.sin());
                let turned = (c * m.0 - s * m.1 + 2.0 + off, s * m.0 + c * m.1 - 1.0 + off);
                if k % 5 == 0 {
                    let q = ((m.0 * 4.0).round() / 4.0, (m.1 * 4.0).round() / 4.0);
                    Correspondence { moving: q, reference: (q.0 + tol, q.1) }
                } else {
                    Correspondence { moving: m, reference: turned }
                }
            })
            .collect();
        let weights: Vec<f64> = (0..n).map(|k| if k % 3 == 0 { 0.75 } else { rng.uniform() }).collect();
        let bounds = tessera_core::stitch::Bounds { max_angle: 0.1, max_scale_change: 0.0, min_baseline: 20.0 };
        ConsensusCount::new(points, weights, tol, &bounds).unwrap()
    }

    /// The host's definition of a hypothesis's set.
    fn counted_on_host(c: &ConsensusCount, [cos, sin, x, y]: Hypothesis) -> (usize, f64) {
        let mut want = (0, 0.0);
        for (p, &w) in c.points().iter().zip(c.weights()) {
            let ((u, v), (rx, ry)) = (p.moving, p.reference);
            if (x + cos * u - sin * v - rx).abs() <= c.tol() && (y + sin * u + cos * v - ry).abs() <= c.tol() {
                want = (want.0 + 1, want.1 + w);
            }
        }
        want
    }

    /// Several pairs' sets in one launch, each with its own points and tolerance, are the
    /// host's definition's to the bit, and give the consensus the host gives; pairs without
    /// a hypothesis first, between and last take none of the others'.
    #[test]
    fn a_launch_of_consensuses_is_counted_as_the_host_counts_each() {
        let gpu = Gpu::with_staging(Box::new(crate::shim::ShimDevice::new()), crate::transfer::StagingConfig::for_shim());
        let mut rng = SplitMix64::new(0xc0_5e75);
        let mut next = |n: usize, tol: f64| consensus(n, tol, &mut rng);
        let all = [next(1, 1.0), next(60, 1.0), next(36, 1.5), next(1, 1.0), next(2, 1.0), next(64, 0.5), next(1, 1.0)];
        assert!(all[1].hypotheses().len() > 300, "{}", all[1].hypotheses().len());
        assert!([0, 3, 6].iter().all(|&k| all[k].hypotheses().is_empty()));
        let got = count_sets(&gpu, &all.iter().collect::<Vec<_>>()).unwrap();
        assert_eq!(got.len(), all.len());
        for (c, got) in all.iter().zip(&got) {
            assert_eq!(got.len(), c.hypotheses().len());
            for (&h, &(count, score)) in c.hypotheses().iter().zip(got) {
                let want = counted_on_host(c, h);
                assert_eq!((count, score.to_bits()), (want.0, want.1.to_bits()), "{} points, hypothesis {h:?}", c.points().len());
            }
            assert_eq!(c.finish(Some(got)), c.finish(None));
        }
        let first = &got[1];
        assert!(first.iter().any(|&(count, _)| count > 30) && first.iter().any(|&(count, _)| count < 30));
        assert_eq!(count_sets(&gpu, &[]).unwrap(), Vec::<Vec<(usize, f64)>>::new());
    }
}
