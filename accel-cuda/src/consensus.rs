//! Drives `kernels/consensus.cu`: the similarity consensuses of a launch's pairs with their
//! hypotheses' sets counted on the device (the core's `ConsensusSets`), every pair's in one
//! launch, a thread per hypothesis; the host makes the hypotheses, picks each winner and
//! refits it, so the answer is the CPU's to the bit.
//!
//! A pair's conclusion asks for its sets in the middle of its work, and a round trip to a
//! device costs tens of microseconds. So a launch's pairs conclude first with a
//! [`Deferred`] each, which records what its pair asks and answers
//! [`SetCounts::Later`]; the sets all of them asked for are then counted in one launch
//! ([`count_sets`]), and those pairs conclude again with an [`Answered`] each.

use crate::device::{args, as_bytes, int, Arg, Gpu};
use crate::kernels::{Kernel, Module};
use std::sync::Mutex;
use tessera_core::stitch::{ConsensusSets, Correspondence, Hypothesis, SetCounts};
use tessera_core::Result;

/// Threads per block.
const THREADS: u32 = 128;

/// Fewest point tests (hypotheses times points) of a pair worth counting on the device: a
/// launch costs tens of microseconds, about what the host's vectorized test takes for this
/// many (a PAL pair's 630 hypotheses of 60 vectors are 37 800 tests, 0.1 ms on the host).
const DEVICE_TESTS: usize = 8192;

/// What one consensus asked to have counted ([`ConsensusSets::count`]'s arguments).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SetsRequest {
    points: Vec<Correspondence>,
    weights: Vec<f64>,
    tol: f64,
    start: f64,
    hypotheses: Vec<Hypothesis>,
}

impl SetsRequest {
    fn is(&self, points: &[Correspondence], weights: &[f64], tol: f64, start: f64, hypotheses: &[Hypothesis]) -> bool {
        self.points == points && self.weights == weights && self.tol == tol && self.start == start && self.hypotheses == hypotheses
    }
}

/// A pair's first conclusion: where its sets are worth a device's count, what it asks is
/// kept and the count left for later; fewer are counted on the host at once.
#[derive(Default)]
pub(crate) struct Deferred {
    asked: Mutex<Option<SetsRequest>>,
}

impl Deferred {
    /// What the pair asked to have counted later, if it did.
    pub(crate) fn take(self) -> Option<SetsRequest> {
        self.asked.into_inner().ok().flatten()
    }
}

impl ConsensusSets for Deferred {
    fn count(&self, points: &[Correspondence], weights: &[f64], tol: f64, start: f64, hypotheses: &[Hypothesis]) -> SetCounts {
        if points.len() != weights.len() || hypotheses.len().saturating_mul(points.len()) < DEVICE_TESTS {
            return SetCounts::OnHost;
        }
        let Ok(mut asked) = self.asked.lock() else { return SetCounts::OnHost };
        *asked = Some(SetsRequest { points: points.to_vec(), weights: weights.to_vec(), tol, start, hypotheses: hypotheses.to_vec() });
        SetCounts::Later
    }
}

/// A pair's second conclusion: the counts of the request it made the first time (`None`
/// where the device's count failed, and the host counts them). A different request (which
/// the same plan and matches do not make) is counted on the host.
pub(crate) struct Answered<'a> {
    pub request: &'a SetsRequest,
    pub counts: Option<&'a [(usize, f64)]>,
}

impl ConsensusSets for Answered<'_> {
    fn count(&self, points: &[Correspondence], weights: &[f64], tol: f64, start: f64, hypotheses: &[Hypothesis]) -> SetCounts {
        match self.counts {
            Some(counts) if self.request.is(points, weights, tol, start, hypotheses) => SetCounts::Counted(counts.to_vec()),
            _ => SetCounts::OnHost,
        }
    }
}

/// Each request's hypotheses' counts and scores (`ConsensusSets`), all of them in one
/// upload, one launch and one download.
pub(crate) fn count_sets(gpu: &Gpu, requests: &[&SetsRequest]) -> Result<Vec<Vec<(usize, f64)>>> {
    // Per request: where its points and weights start in `data`, their count, the
    // tolerance and the score's start. Per hypothesis: (c, s, x, y) and its request.
    let mut tasks = Vec::with_capacity(4 * requests.len());
    let mut data = Vec::with_capacity(requests.iter().map(|r| 5 * r.points.len()).sum());
    let mut hypotheses = Vec::with_capacity(requests.iter().map(|r| 5 * r.hypotheses.len()).sum());
    for (t, r) in requests.iter().enumerate() {
        int(r.points.len(), "consensus points")?;
        tasks.extend([data.len() as f64, r.points.len() as f64, r.tol, r.start]);
        data.extend(r.points.iter().flat_map(|p| [p.moving.0, p.moving.1, p.reference.0, p.reference.1]));
        data.extend_from_slice(&r.weights);
        hypotheses.extend(r.hypotheses.iter().flat_map(|&(c, s, x, y)| [c, s, x, y, t as f64]));
    }
    let count = int(hypotheses.len() / 5, "consensus hypotheses")?;
    if count == 0 {
        return Ok(requests.iter().map(|_| Vec::new()).collect());
    }
    let (_records, at) = gpu.upload_packed(&[as_bytes(&tasks), as_bytes(&hypotheses), as_bytes(&data)])?;
    let out = gpu.buffer::<f64>(2 * count as usize)?;
    let grid = [(count as u32).div_ceil(THREADS), 1, 1];
    gpu.launch(Kernel::new(Module::Consensus, "consensus_sets"), grid, [THREADS, 1, 1], 0, args![Arg::Ptr(at[0]), Arg::Ptr(at[1]), Arg::Ptr(at[2]), count, &out])?;
    let mut counted = vec![0f64; 2 * count as usize];
    gpu.download(&out, &mut counted)?;
    // Counts are exact in f64.
    let mut counted = counted.chunks_exact(2).map(|c| (c[0] as usize, c[1]));
    Ok(requests.iter().map(|r| counted.by_ref().take(r.hypotheses.len()).collect()).collect())
}

#[cfg(all(test, feature = "shim"))]
mod tests {
    use super::*;
    use tessera_core::stitch::SplitMix64;

    /// A pair's points: a turn with noise and outliers, every fifth point on a
    /// quarter-pixel grid so that residuals of 1 (the tolerance) happen exactly.
    fn points(n: usize, rng: &mut SplitMix64) -> Vec<Correspondence> {
        (0..n)
            .map(|k| {
                let m = (400.0 * rng.uniform(), 300.0 * rng.uniform());
                let off = if k % 7 == 0 { 20.0 * rng.normal() } else { 0.3 * rng.normal() };
                let r = if k % 5 == 0 { ((m.0 * 4.0).round() / 4.0 + 1.0, (m.1 * 4.0).round() / 4.0) } else { (m.0 + 2.0 + off, m.1 - 1.0 + off) };
                Correspondence { moving: if k % 5 == 0 { ((m.0 * 4.0).round() / 4.0, (m.1 * 4.0).round() / 4.0) } else { m }, reference: r }
            })
            .collect()
    }

    fn request(n: usize, hypotheses: usize, tol: f64, start: f64, rng: &mut SplitMix64) -> SetsRequest {
        let points = points(n, rng);
        let weights: Vec<f64> = (0..n).map(|k| if k % 3 == 0 { 0.75 } else { rng.uniform() }).collect();
        let hypotheses: Vec<Hypothesis> = (0..hypotheses)
            .map(|k| if k % 4 == 0 { (1.0, 0.0, 2.0, -1.0) } else { let a = 0.02 * rng.normal(); (a.cos(), a.sin(), 2.0 + rng.normal(), -1.0 + rng.normal()) })
            .collect();
        SetsRequest { points, weights, tol, start, hypotheses }
    }

    /// The host's definition of a hypothesis's set.
    fn counted_on_host(r: &SetsRequest, (c, s, x, y): Hypothesis) -> (usize, f64) {
        let mut want = (0, r.start);
        for (p, &w) in r.points.iter().zip(&r.weights) {
            let ((u, v), (rx, ry)) = (p.moving, p.reference);
            if (x + c * u - s * v - rx).abs() <= r.tol && (y + s * u + c * v - ry).abs() <= r.tol {
                want = (want.0 + 1, want.1 + w);
            }
        }
        want
    }

    /// Several pairs' sets in one launch, each request with its own points, tolerance and
    /// start, are the host's definition's to the bit.
    #[test]
    fn a_batch_of_requests_is_counted_as_the_host_counts_each() {
        let gpu = Gpu::with_staging(Box::new(crate::shim::ShimDevice::new()), crate::transfer::StagingConfig::for_shim());
        let mut rng = SplitMix64::new(0xc0_5e75);
        let requests = [request(60, 700, 1.0, 0.0, &mut rng), request(90, 130, 1.5, 0.25, &mut rng), request(1, 3, 1.0, 0.0, &mut rng), request(33, 0, 1.0, 0.0, &mut rng), request(64, 129, 0.5, 0.0, &mut rng)];
        let got = count_sets(&gpu, &requests.iter().collect::<Vec<_>>()).unwrap();
        assert_eq!(got.len(), requests.len());
        for (r, got) in requests.iter().zip(&got) {
            assert_eq!(got.len(), r.hypotheses.len());
            for (&h, &(count, score)) in r.hypotheses.iter().zip(got) {
                let want = counted_on_host(r, h);
                assert_eq!((count, score.to_bits()), (want.0, want.1.to_bits()), "{} points, hypothesis {h:?}", r.points.len());
            }
        }
        let first = &got[0];
        assert!(first.iter().any(|&(count, _)| count > 30) && first.iter().any(|&(count, _)| count < 30));
        assert_eq!(count_sets(&gpu, &[]).unwrap(), Vec::<Vec<(usize, f64)>>::new());
    }

    /// A request worth a device's count is kept for later, a small one counted on the host;
    /// the second conclusion's counts answer only the request they were made for.
    #[test]
    fn requests_are_deferred_and_answered_only_for_themselves() {
        let mut rng = SplitMix64::new(7);
        let big = request(60, 700, 1.0, 0.0, &mut rng);
        let small = request(3, 10, 1.0, 0.0, &mut rng);
        let ask = |d: &dyn ConsensusSets, r: &SetsRequest| d.count(&r.points, &r.weights, r.tol, r.start, &r.hypotheses);
        let deferred = Deferred::default();
        assert_eq!(ask(&deferred, &small), SetCounts::OnHost);
        assert_eq!(ask(&deferred, &big), SetCounts::Later);
        let kept = deferred.take().expect("the large request kept");
        assert_eq!(kept, big);
        let counts: Vec<(usize, f64)> = big.hypotheses.iter().map(|&h| counted_on_host(&big, h)).collect();
        let answered = Answered { request: &kept, counts: Some(&counts) };
        assert_eq!(ask(&answered, &big), SetCounts::Counted(counts.clone()));
        let mut other = big.clone();
        other.tol = 2.0;
        assert_eq!(ask(&answered, &other), SetCounts::OnHost);
        assert_eq!(ask(&Answered { request: &kept, counts: None }, &big), SetCounts::OnHost);
        // Points and weights of different lengths are the host's to refuse.
        let deferred = Deferred::default();
        assert_eq!(deferred.count(&big.points, &big.weights[1..], 1.0, 0.0, &big.hypotheses), SetCounts::OnHost);
        assert_eq!(deferred.take(), None);
    }
}
