//! Drives `kernels/consensus.cu`: a pair's similarity consensus with its hypotheses' sets
//! counted on the device ([`DeviceConsensus`], the core's `ConsensusSets`), a thread per
//! hypothesis; the host makes the hypotheses, picks the winner and refits it, so the answer
//! is the CPU's to the bit.

use crate::device::{args, int, Gpu};
use crate::kernels::{Kernel, Module};
use tessera_core::stitch::{ConsensusSets, Correspondence, Hypothesis};
use tessera_core::Result;

/// Threads per block.
const THREADS: u32 = 128;

/// Fewest point tests (hypotheses times points) worth a launch: a round trip to a GPU
/// costs tens of microseconds, about what the host's vectorized test takes for this many
/// (a PAL pair's 630 hypotheses of 60 vectors are 37 800 tests, 0.1 ms on the host).
const DEVICE_TESTS: usize = 8192;

/// The device's count of a consensus's sets.
pub(crate) struct DeviceConsensus<'g> {
    pub gpu: &'g Gpu,
}

impl ConsensusSets for DeviceConsensus<'_> {
    /// The sets counted on the device where there are enough tests to send; `None` (the
    /// host counts them) for fewer, and where a device call fails.
    fn count(&self, points: &[Correspondence], weights: &[f64], tol: f64, start: f64, hypotheses: &[Hypothesis]) -> Option<Vec<(usize, f64)>> {
        if points.len() != weights.len() || hypotheses.len().saturating_mul(points.len()) < DEVICE_TESTS {
            return None;
        }
        consensus_sets(self.gpu, points, weights, tol, start, hypotheses).ok()
    }
}

/// Each hypothesis's count and score (`ConsensusSets`): one upload, one launch, one download.
fn consensus_sets(gpu: &Gpu, points: &[Correspondence], weights: &[f64], tol: f64, start: f64, hypotheses: &[Hypothesis]) -> Result<Vec<(usize, f64)>> {
    let (n, count) = (int(points.len(), "consensus points")?, int(hypotheses.len(), "consensus hypotheses")?);
    let mut data = Vec::with_capacity(5 * points.len() + 4 * hypotheses.len());
    data.extend(points.iter().flat_map(|p| [p.moving.0, p.moving.1, p.reference.0, p.reference.1]));
    data.extend_from_slice(weights);
    data.extend(hypotheses.iter().flat_map(|&(c, s, x, y)| [c, s, x, y]));
    let ddata = gpu.upload(&data)?;
    let out = gpu.buffer::<f64>(2 * hypotheses.len())?;
    let grid = [(count as u32).div_ceil(THREADS), 1, 1];
    gpu.launch(Kernel::new(Module::Consensus, "consensus_sets"), grid, [THREADS, 1, 1], 0, args![&ddata, n, count, tol, start, &out])?;
    let mut counted = vec![0f64; 2 * hypotheses.len()];
    gpu.download(&out, &mut counted)?;
    // Counts are exact in f64.
    Ok(counted.chunks_exact(2).map(|c| (c[0] as usize, c[1])).collect())
}

#[cfg(all(test, feature = "shim"))]
mod tests {
    use super::*;
    use tessera_core::stitch::SplitMix64;

    /// The device's counts and scores are the host's definition's, to the bit: a turn with
    /// noise and outliers, equal weights, points exactly at the tolerance, and few points
    /// (left to the host).
    #[test]
    fn device_sets_are_the_cores_to_the_bit() {
        let gpu = Gpu::with_staging(Box::new(crate::shim::ShimDevice::new()), crate::transfer::StagingConfig::for_shim());
        let consensus = DeviceConsensus { gpu: &gpu };
        let mut rng = SplitMix64::new(0xc0_5e75);
        for n in [60usize, 90, 3] {
            let points: Vec<Correspondence> = (0..n)
                .map(|k| {
                    let m = (400.0 * rng.uniform(), 300.0 * rng.uniform());
                    let off = if k % 7 == 0 { 20.0 * rng.normal() } else { 0.3 * rng.normal() };
                    // Every fifth point on a quarter-pixel grid, so that residuals of 1 (the
                    // tolerance) happen exactly.
                    let r = if k % 5 == 0 { ((m.0 * 4.0).round() / 4.0 + 1.0, (m.1 * 4.0).round() / 4.0) } else { (m.0 + 2.0 + off, m.1 - 1.0 + off) };
                    Correspondence { moving: if k % 5 == 0 { ((m.0 * 4.0).round() / 4.0, (m.1 * 4.0).round() / 4.0) } else { m }, reference: r }
                })
                .collect();
            let weights: Vec<f64> = (0..n).map(|k| if k % 3 == 0 { 0.75 } else { rng.uniform() }).collect();
            let hypotheses: Vec<Hypothesis> = (0..700)
                .map(|k| if k % 4 == 0 { (1.0, 0.0, 2.0, -1.0) } else { let a = 0.02 * rng.normal(); (a.cos(), a.sin(), 2.0 + rng.normal(), -1.0 + rng.normal()) })
                .collect();
            let got = consensus.count(&points, &weights, 1.0, 0.0, &hypotheses);
            if n * hypotheses.len() < DEVICE_TESTS {
                assert_eq!(got, None);
                continue;
            }
            let got = got.expect("counted on the device");
            for (&(c, s, x, y), &(count, score)) in hypotheses.iter().zip(&got) {
                let mut want = (0, 0.0f64);
                for (p, &w) in points.iter().zip(&weights) {
                    let ((u, v), (rx, ry)) = (p.moving, p.reference);
                    if (x + c * u - s * v - rx).abs() <= 1.0 && (y + s * u + c * v - ry).abs() <= 1.0 {
                        want = (want.0 + 1, want.1 + w);
                    }
                }
                assert_eq!((count, score.to_bits()), (want.0, want.1.to_bits()), "n {n} hypothesis {:?}", (c, s, x, y));
            }
            assert!(got.iter().any(|&(count, _)| count > n / 2) && got.iter().any(|&(count, _)| count < n / 2));
        }
    }
}
