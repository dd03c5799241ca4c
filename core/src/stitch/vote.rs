//! The choice among hypotheses by their consensus sets, shared by the shift's consensus
//! and the similarity's: the largest set wins, ties go to the larger score (its points'
//! weights summed in point order), the first of equals stands.
//!
//! Each hypothesis's set is a bit mask over the points, filled 64 points a word by a
//! [`Test`] of the hypothesis: a loop of plain comparisons that [`fill_mask`], compiled per
//! instruction-set level, turns into 8-lane AVX-512 compares straight into mask registers
//! (4 lanes with AVX2, 2 at the baseline). The arithmetic is unfused, so every level gives
//! the same bits. A set equal to the best's has its score too (the same weights summed in
//! the same order), and a smaller set cannot win, so only a set that could win is scored:
//! on a clean pair, whose points all agree, one; and once a set holds every point, no
//! later hypothesis is tried.

use crate::cpu::multiversion;
use smallvec::{smallvec, SmallVec};

/// The bit mask of the points within a tolerance of a hypothesis: word `k / 64`, bit
/// `k % 64` for point `k`.
pub(super) type Mask = [u64];

/// One coordinate of the points, 64 a block, the last padded with NaN (which is near
/// nothing). A block in line: the default grid's 64 templates need no allocation.
pub(super) type Blocks = SmallVec<[[f64; 64]; 1]>;

/// A mask's words, in line up to 256 points.
pub(super) type MaskWords = SmallVec<[u64; 4]>;

/// `values` as [`Blocks`], written where they go.
pub(super) fn blocks(mut values: impl ExactSizeIterator<Item = f64>) -> Blocks {
    let count = values.len().div_ceil(64);
    let mut blocks = Blocks::with_capacity(count);
    for _ in 0..count {
        blocks.push([f64::NAN; 64]);
        if let Some(block) = blocks.last_mut() {
            // Each value written once, without an index to check.
            block.iter_mut().zip(values.by_ref()).for_each(|(slot, v)| *slot = v);
        }
    }
    blocks
}

/// A hypothesis's test of the points.
pub(super) trait Test {
    /// The bits of the points `64 w .. 64 w + 64` the hypothesis takes within its
    /// tolerance; `w` is below the blocks' count. Written as [`word`] of a plain
    /// comparison, so that it inlines into each level's [`fill_mask`] and vectorizes there.
    fn word(&self, w: usize) -> u64;
}

/// The 64 bits `near(0) .. near(63)`.
#[inline(always)]
pub(super) fn word(near: impl Fn(usize) -> bool) -> u64 {
    (0..64).fold(0, |bits, j| bits | u64::from(near(j)) << j)
}

multiversion! {
    /// Fills `mask` with `test`'s set and returns its count.
    pub(super) fn fill_mask<T: Test>(mask: &mut Mask, test: &T) -> usize {
        let mut count = 0;
        for (w, word) in mask.iter_mut().enumerate() {
            *word = test.word(w);
            count += word.count_ones() as usize;
        }
        count
    }
}

/// The best of `hypotheses` over the points of `weights`: `set` fills a hypothesis's mask
/// and returns its count; a set's score is its points' weights summed from `start` in
/// point order. Returns the winner's count, score and hypothesis, `None` with no
/// hypothesis.
///
/// A set as large as the best's is first compared by its sum taken eight lanes at a time
/// ([`masked_sum`]); only where that leaves the order of the two scores in doubt is its
/// score summed in point order, a chain of dependent additions.
pub(super) fn best_set<H>(weights: &[f64], hypotheses: impl IntoIterator<Item = H>, set: impl FnMut(&H, &mut Mask) -> usize, start: f64) -> Option<(usize, f64, H)> {
    best_set_and_mask(weights, hypotheses, set, start).map(|(n, s, h, _)| (n, s, h))
}

/// [`best_set`] with the winner's mask.
pub(super) fn best_set_and_mask<H>(weights: &[f64], hypotheses: impl IntoIterator<Item = H>, mut set: impl FnMut(&H, &mut Mask) -> usize, start: f64) -> Option<(usize, f64, H, MaskWords)> {
    let points = weights.len();
    let words = points.div_ceil(64);
    let (mut mask, mut best_mask): (MaskWords, MaskWords) = (smallvec![0; words], smallvec![0; words]);
    let mut best: Option<(usize, f64, H)> = None;
    // Made when a set first ties the best's size (never on a pair whose first set is
    // final): the weights in blocks, and the best set's lane sum and magnitude.
    let mut lanes: Option<Blocks> = None;
    let mut best_lanes: Option<(f64, f64)> = None;
    for h in hypotheses {
        let count = set(&h, &mut mask);
        let lane_sums = match &best {
            None => None,
            Some((n, _, _)) if count < *n => continue,
            // Compared word by word in line: a mask is a word or two, too short for memcmp.
            Some((n, _, _)) if count == *n && mask.iter().zip(&best_mask).all(|(a, b)| a == b) => continue,
            Some((n, _, _)) if count == *n => {
                let lanes = lanes.get_or_insert_with(|| blocks(weights.iter().copied()));
                let sums = masked_sum(&mask, lanes);
                let best_sums = *best_lanes.get_or_insert_with(|| masked_sum(&best_mask, lanes));
                if surely_below(sums, best_sums, points) {
                    continue;
                }
                Some(sums)
            }
            Some(_) => None,
        };
        let score = members(&mask).fold(start, |s, k| s + weights[k]);
        if best.as_ref().is_none_or(|&(n, s, _)| beats((count, score), (n, s))) {
            best = Some((count, score, h));
            best_mask.copy_from_slice(&mask);
            best_lanes = lane_sums;
            // A set of every point is final: a later one is this set again, which stands.
            if count == points {
                break;
            }
        }
    }
    best.map(|(n, s, h)| (n, s, h, best_mask))
}

/// Whether a set of `count` points scoring `score` beats the best so far, `(n, s)`: it is
/// larger, or as large and scores higher. The first of equals stands, and a NaN score never
/// wins a tie.
pub(super) fn beats((count, score): (usize, f64), (n, s): (usize, f64)) -> bool {
    count > n || (count == n && score > s)
}

/// Whether a set whose [`masked_sum`] is `(sum, magnitude)` surely scores below the best
/// set's `(best, best_magnitude)`, both sets of at most `points` weights. A sum of `m`
/// terms in any order lies within `(m - 1) u / (1 - (m - 1) u)` times the sum of their
/// magnitudes of the exact sum (`u` = 2^-53, the unit roundoff; Higham, "Accuracy and
/// Stability of Numerical Algorithms", 2nd ed. 2002, ch. 4), so a set's lane sum and its
/// score (the sum in point order) differ by at most twice that; the margin covers both
/// sets with a factor of two to spare. Sums that are not finite leave the order in doubt.
fn surely_below((sum, magnitude): (f64, f64), (best, best_magnitude): (f64, f64), points: usize) -> bool {
    let margin = 4.0 * (points as f64 + 1.0) * (f64::EPSILON / 2.0) * (magnitude + best_magnitude);
    margin.is_finite() && sum + margin < best
}

multiversion! {
    /// The weights of `mask`'s points summed, and their magnitudes summed: eight
    /// accumulators a word, in whatever order vectorizes (not the score's, see
    /// [`surely_below`]).
    fn masked_sum(mask: &Mask, weights: &Blocks) -> (f64, f64) {
        let (mut sum, mut magnitude) = ([0.0f64; 8], [0.0f64; 8]);
        for (&word, w) in mask.iter().zip(weights) {
            for (c, chunk) in w.chunks_exact(8).enumerate() {
                for (j, &x) in chunk.iter().enumerate() {
                    let x = if word >> (8 * c + j) & 1 == 1 { x } else { 0.0 };
                    sum[j] += x;
                    magnitude[j] += x.abs();
                }
            }
        }
        (sum.iter().sum(), magnitude.iter().sum())
    }
}

/// The points of `mask`, in increasing order.
pub(super) fn members(mask: &Mask) -> impl Iterator<Item = usize> + '_ {
    mask.iter().enumerate().flat_map(|(w, &word)| {
        let mut rest = word;
        core::iter::from_fn(move || {
            (rest != 0).then(|| {
                let k = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                64 * w + k
            })
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{at_every_level, Rng};
    use alloc::vec::Vec;

    /// A test of `|x_k - t| <= tol` on one coordinate, for the kernel's own check.
    struct Within<'a> {
        t: f64,
        tol: f64,
        xs: &'a Blocks,
    }

    impl Test for Within<'_> {
        #[inline(always)]
        fn word(&self, w: usize) -> u64 {
            let xs = &self.xs[w];
            word(|j| (xs[j] - self.t).abs() <= self.tol)
        }
    }

    #[test]
    fn every_level_fills_the_mask_of_the_plain_test() {
        let mut rng = Rng(0x5eed_0f_b175);
        for n in [0usize, 1, 3, 63, 64, 65, 130] {
            // Values on a coarse grid, so that many lie exactly at the tolerance.
            let values: Vec<f64> = (0..n).map(|_| (rng.next() % 16) as f64 * 0.25).collect();
            let xs = blocks(values.iter().copied());
            assert_eq!(xs.len(), n.div_ceil(64));
            for t in [0.0, 1.0, 2.25, f64::NAN] {
                let want: Vec<usize> = (0..n).filter(|&k| libm::fabs(values[k] - t) <= 0.5).collect();
                at_every_level(|_| {
                    let mut mask = alloc::vec![!0u64; n.div_ceil(64)];
                    let count = fill_mask(&mut mask, &Within { t, tol: 0.5, xs: &xs });
                    assert_eq!(members(&mask).collect::<Vec<_>>(), want, "n {n} t {t}");
                    assert_eq!(count, want.len());
                });
            }
        }
    }

    /// [`best_set`] by its definition: every hypothesis's set counted and scored in point
    /// order.
    fn best_set_reference(weights: &[f64], hypotheses: &[f64], xs: &[f64], tol: f64, start: f64) -> Option<(usize, f64, usize)> {
        let mut best: Option<(usize, f64, usize)> = None;
        for (h, &t) in hypotheses.iter().enumerate() {
            let set: Vec<usize> = (0..xs.len()).filter(|&k| libm::fabs(xs[k] - t) <= tol).collect();
            let score = set.iter().fold(start, |s, &k| s + weights[k]);
            if best.is_none_or(|(n, s, _)| set.len() > n || (set.len() == n && score > s)) {
                best = Some((set.len(), score, h));
            }
        }
        best
    }

    #[test]
    fn best_set_matches_the_reference_on_near_ties() {
        let mut rng = Rng(0x0dd_ba11);
        // Few distinct positions and weights: many sets of equal size whose scores tie
        // exactly or differ in their last bits, which only the sums in point order decide.
        let palette = [0.1, 0.2, 0.3, 0.7, 1.1, 1e-17, 0.6000000000000001, -0.25];
        for round in 0..2000 {
            let n = 1 + (rng.next() % 130) as usize;
            let xs: Vec<f64> = (0..n).map(|_| (rng.next() % 6) as f64).collect();
            let weights: Vec<f64> = (0..n).map(|_| palette[(rng.next() % (3 + round % 6)) as usize]).collect();
            let hypotheses: Vec<f64> = (0..1 + rng.next() % 12).map(|_| (rng.next() % 8) as f64 - 1.0).collect();
            let lanes = blocks(xs.iter().copied());
            let start = if round % 2 == 0 { 0.0 } else { -0.0 };
            let want = best_set_reference(&weights, &hypotheses, &xs, 1.0, start);
            at_every_level(|_| {
                let set = |&h: &usize, mask: &mut Mask| fill_mask(mask, &Within { t: hypotheses[h], tol: 1.0, xs: &lanes });
                let got = best_set(&weights, 0..hypotheses.len(), set, start);
                assert_eq!(got.map(|(n, s, h)| (n, s.to_bits(), h)), want.map(|(n, s, h)| (n, s.to_bits(), h)), "round {round}");
            });
        }
    }

    #[test]
    fn a_lane_sum_rules_a_set_out_only_beyond_the_rounding_of_both_sums() {
        // Sets of equal exact sum 0.6 whose scores in point order differ in the last bit.
        let (a, b) = ([0.1, 0.2, 0.3], [0.3, 0.2, 0.1]);
        assert!(a.iter().sum::<f64>() > b.iter().sum::<f64>());
        let magnitude = 0.6;
        assert!(!surely_below((0.6, magnitude), (0.6000000000000001, magnitude), 3));
        assert!(!surely_below((0.6000000000000001, magnitude), (0.6, magnitude), 3));
        assert!(surely_below((0.5, magnitude), (0.6, magnitude), 3));
        assert!(!surely_below((f64::NAN, magnitude), (0.6, magnitude), 3));
        assert!(!surely_below((0.5, f64::INFINITY), (0.6, magnitude), 3));
        // The lane sums at every level, against the sums by definition.
        let mut rng = Rng(0xfeed);
        let weights: Vec<f64> = (0..130).map(|_| rng.unit() - 0.25).collect();
        let lanes = blocks(weights.iter().copied());
        let mask: Vec<u64> = (0..3).map(|w| if w == 2 { rng.next() & 0b11 } else { rng.next() }).collect();
        let members: Vec<usize> = members(&mask).collect();
        let (sum, magnitude): (f64, f64) = (members.iter().map(|&k| weights[k]).sum(), members.iter().map(|&k| weights[k].abs()).sum());
        at_every_level(|_| {
            let (s, m) = masked_sum(&mask, &lanes);
            assert!(libm::fabs(s - sum) <= 1e-13 && libm::fabs(m - magnitude) <= 1e-13, "{s} {sum} {m} {magnitude}");
        });
    }

    #[test]
    fn the_largest_set_wins_ties_go_to_the_larger_score_then_the_first() {
        // Points 0..4 at 0, 0, 1, 1 with weights 1, 1, 3, 3: hypotheses 0 and 1 give the set
        // {0, 1}, 2 and 3 the set {2, 3} of the larger score.
        let values = [0.0, 0.0, 1.0, 1.0];
        let xs = blocks(values.iter().copied());
        let weights = [1.0, 1.0, 3.0, 3.0];
        let set = |&h: &usize, mask: &mut Mask| fill_mask(mask, &Within { t: values[h], tol: 0.25, xs: &xs });
        assert_eq!(best_set(&weights, 0..4, set, 0.0), Some((2, 6.0, 2)));
        assert_eq!(best_set(&weights, [1, 0], set, 0.0), Some((2, 2.0, 1)));
        // A wider tolerance: every point in one set, the first hypothesis final.
        let all = |&h: &usize, mask: &mut Mask| fill_mask(mask, &Within { t: values[h], tol: 1.0, xs: &xs });
        assert_eq!(best_set(&weights, [3, 0], all, 0.0), Some((4, 8.0, 3)));
        assert_eq!(best_set(&weights, core::iter::empty(), set, 0.0), None);
    }
}
