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
use alloc::vec::Vec;

/// The bit mask of the points within a tolerance of a hypothesis: word `k / 64`, bit
/// `k % 64` for point `k`.
pub(super) type Mask = [u64];

/// One coordinate of the points, 64 a block, the last padded with NaN (which is near
/// nothing).
pub(super) type Blocks = Vec<[f64; 64]>;

/// `values` as [`Blocks`].
pub(super) fn blocks(values: impl Iterator<Item = f64>) -> Blocks {
    let values: Vec<f64> = values.collect();
    values.chunks(64).map(|c| core::array::from_fn(|k| c.get(k).copied().unwrap_or(f64::NAN))).collect()
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

/// The best of `hypotheses` over `points` points: `set` fills a hypothesis's mask and
/// returns its count; `weight(k)` is point `k`'s weight, summed from `start`. Returns the
/// winner's count, score and hypothesis, `None` with no hypothesis.
pub(super) fn best_set<H>(points: usize, hypotheses: impl IntoIterator<Item = H>, mut set: impl FnMut(&H, &mut Mask) -> usize, weight: impl Fn(usize) -> f64, start: f64) -> Option<(usize, f64, H)> {
    let words = points.div_ceil(64);
    let (mut mask, mut best_mask) = (alloc::vec![0u64; words], alloc::vec![0u64; words]);
    let mut best: Option<(usize, f64, H)> = None;
    for h in hypotheses {
        let count = set(&h, &mut mask);
        if let Some((n, _, _)) = &best {
            // Compared word by word in line: a mask is a word or two, too short for memcmp.
            if count < *n || (count == *n && mask.iter().zip(&best_mask).all(|(a, b)| a == b)) {
                continue;
            }
        }
        let score = members(&mask).fold(start, |s, k| s + weight(k));
        if best.as_ref().is_none_or(|(n, s, _)| count > *n || score > *s) {
            best = Some((count, score, h));
            best_mask.copy_from_slice(&mask);
            // A set of every point is final: a later one is this set again, which stands.
            if count == points {
                break;
            }
        }
    }
    best
}

/// The points of `mask`, in increasing order.
fn members(mask: &Mask) -> impl Iterator<Item = usize> + '_ {
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

    #[test]
    fn the_largest_set_wins_ties_go_to_the_larger_score_then_the_first() {
        // Points 0..4 at 0, 0, 1, 1 with weights 1, 1, 3, 3: hypotheses 0 and 1 give the set
        // {0, 1}, 2 and 3 the set {2, 3} of the larger score.
        let values = [0.0, 0.0, 1.0, 1.0];
        let xs = blocks(values.iter().copied());
        let weights = [1.0, 1.0, 3.0, 3.0];
        let set = |&h: &usize, mask: &mut Mask| fill_mask(mask, &Within { t: values[h], tol: 0.25, xs: &xs });
        assert_eq!(best_set(4, 0..4, set, |k| weights[k], 0.0), Some((2, 6.0, 2)));
        assert_eq!(best_set(4, [1, 0], set, |k| weights[k], 0.0), Some((2, 2.0, 1)));
        // A wider tolerance: every point in one set, the first hypothesis final.
        let all = |&h: &usize, mask: &mut Mask| fill_mask(mask, &Within { t: values[h], tol: 1.0, xs: &xs });
        assert_eq!(best_set(4, [3, 0], all, |k| weights[k], 0.0), Some((4, 8.0, 3)));
        assert_eq!(best_set(4, core::iter::empty(), set, |k| weights[k], 0.0), None);
    }
}
