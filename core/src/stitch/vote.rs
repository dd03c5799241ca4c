//! The choice among hypotheses by their consensus sets, shared by the shift's consensus
//! and the similarity's: the largest set wins, ties go to the larger score (its points'
//! weights summed in point order), the first of equals stands.
//!
//! Each hypothesis's set is a bit mask over the points, which its caller fills with
//! comparisons side by side (four points a SIMD vector). A set equal to the best's has its
//! score too (the same weights summed in the same order), and a smaller set cannot win, so
//! only a set that could win is scored: on a clean pair, whose points all agree, one; and
//! once a set holds every point, no later hypothesis is tried.

use alloc::vec::Vec;
use wide::f64x4;

/// The bit mask of the points within a tolerance of a hypothesis: word `k / 64`, bit
/// `k % 64` for point `k`.
pub(super) type Mask = [u64];

/// Words of a mask over `points` points.
pub(super) fn mask_words(points: usize) -> usize {
    points.div_ceil(64)
}

/// Fills `mask` from `near`, which answers for points `4 k .. 4 k + 4` as the low four bits
/// of its result (for the `chunks` groups of four).
pub(super) fn fill_mask(mask: &mut Mask, chunks: usize, mut near: impl FnMut(usize) -> u32) -> usize {
    let mut count = 0;
    for (w, word) in mask.iter_mut().enumerate() {
        let groups = (16 * w..(16 * w + 16).min(chunks)).enumerate();
        *word = groups.fold(0u64, |bits, (k, g)| bits | (u64::from(near(g) & 0xf) << (4 * k)));
        count += word.count_ones() as usize;
    }
    count
}

/// `values` four a vector, the last padded with NaN (which is near nothing).
pub(super) fn lanes(values: impl Iterator<Item = f64>) -> Vec<f64x4> {
    let values: Vec<f64> = values.collect();
    values.chunks(4).map(|c| f64x4::new(core::array::from_fn(|k| c.get(k).copied().unwrap_or(f64::NAN)))).collect()
}

/// The best of `hypotheses` over `points` points: `set` fills a hypothesis's mask and
/// returns its count; `weight(k)` is point `k`'s weight, summed from `start`. Returns the
/// winner's count, score and hypothesis, `None` with no hypothesis.
pub(super) fn best_set<H>(points: usize, hypotheses: impl IntoIterator<Item = H>, mut set: impl FnMut(&H, &mut Mask) -> usize, weight: impl Fn(usize) -> f64, start: f64) -> Option<(usize, f64, H)> {
    let words = mask_words(points);
    let (mut mask, mut best_mask) = (alloc::vec![0u64; words], alloc::vec![0u64; words]);
    let mut best: Option<(usize, f64, H)> = None;
    for h in hypotheses {
        let count = set(&h, &mut mask);
        if let Some((n, _, _)) = &best {
            if count < *n || (count == *n && mask == best_mask) {
                continue;
            }
        }
        let score = (0..points).filter(|&k| mask[k / 64] >> (k % 64) & 1 == 1).fold(start, |s, k| s + weight(k));
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
