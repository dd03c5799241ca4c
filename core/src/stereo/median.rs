//! 3x3 median of a disparity map that has invalid pixels. An invalid centre stays invalid
//! (the filter must not invent disparities; hole filling is a separate, explicit step); a
//! valid centre becomes the median of the valid pixels of its 3x3 window inside the image,
//! the lower of the two middle values when their count is even. Removes isolated outliers
//! the way Hirschmueller's 3x3 median does, without spreading the invalid marker.

use crate::error::Result;
use crate::image::{check_same_size, ImageView, ImageViewMut};
use crate::parallel::{try_for_each_band, Parallelism};
use crate::cpu::multiversion;

/// `dst = median3x3(src)` as described in the module doc. Errors: differing sizes, NaN.
///
/// Every pixel takes the same branch-free path, vectorized across x: out-of-image and
/// invalid neighbours enter the window as `+inf`, so after a partial sort the median of
/// the `n` valid values is the `(n - 1) / 2`-th smallest of the nine.
pub fn median3x3(src: ImageView<'_, f32>, dst: ImageViewMut<'_, f32>, par: Parallelism) -> Result<()> {
    check_same_size(src.size(), dst.size())?;
    super::check_no_nan("disparity", src)?;
    let (w, h) = src.size();
    try_for_each_band(dst, par, 16, |y0, mut band| {
        // Rows y - 1, y, y + 1 with one +inf pixel on either side (+inf rows outside).
        let mut padded = crate::error::try_filled(3 * (w + 2), f32::INFINITY)?;
        for j in 0..band.height() {
            let y = y0 + j;
            for (k, p) in padded.chunks_exact_mut(w + 2).enumerate() {
                let inside = (y + k).checked_sub(1).filter(|&yy| yy < h);
                match inside {
                    Some(yy) => p[1..=w].copy_from_slice(src.row(yy)),
                    None => p.fill(f32::INFINITY),
                }
            }
            let (r0, rest) = padded.split_at(w + 2);
            let (r1, r2) = rest.split_at(w + 2);
            median_row(r0, r1, r2, band.row_mut(j));
        }
        Ok(())
    })
}

multiversion! {
    /// `out[x]` = the median of the valid values of the 3x3 window centred on `x + 1` of the
    /// padded rows `r0, r1, r2` (`out.len() + 2` values each), or the centre itself when it is
    /// not finite.
    fn median_row(r0: &[f32], r1: &[f32], r2: &[f32], out: &mut [f32]) {
        let n = out.len();
        let (r0, r1, r2) = (&r0[..n + 2], &r1[..n + 2], &r2[..n + 2]);
        for (i, o) in out.iter_mut().enumerate() {
            let v = [r0[i], r0[i + 1], r0[i + 2], r1[i], r1[i + 1], r1[i + 2], r2[i], r2[i + 1], r2[i + 2]];
            let valid = v.iter().fold(0u32, |a, d| a + d.is_finite() as u32);
            let low = lowest5(v.map(|d| if d.is_finite() { d } else { f32::INFINITY }));
            // valid >= 1 whenever the centre is finite, so the rank (valid - 1) / 2 is 0..=4.
            let rank = valid.saturating_sub(1) / 2;
            let pick = |k: u32, l: f32, m: f32| if rank == k { l } else { m };
            let m = pick(4, low[4], pick(3, low[3], pick(2, low[2], pick(1, low[1], low[0]))));
            let c = v[4];
            *o = if c.is_finite() { m } else { c };
        }
    }
}

/// The five smallest of nine values, in order: Batcher's odd-even merge sort for 16
/// inputs restricted to the first nine wires and to the comparators that reach outputs
/// 0..=4 (25 exchanges), branch-free and written out so every index is a constant (the
/// array then lives in registers and the caller's loop vectorizes). Plain compares
/// instead of `f32::min` / `max` (whose NaN rules cost extra instructions): the values
/// are never NaN.
#[inline(always)]
#[rustfmt::skip]
fn lowest5(mut p: [f32; 9]) -> [f32; 5] {
    let mut s = |a: usize, b: usize| {
        let (x, y) = (p[a], p[b]);
        let (lo, hi) = if y < x { (y, x) } else { (x, y) };
        p[a] = lo;
        p[b] = hi;
    };
    s(0, 1); s(2, 3); s(0, 2); s(1, 3); s(1, 2); s(4, 5); s(6, 7); s(4, 6); s(5, 7); s(5, 6); s(0, 4); s(2, 6); s(2, 4);
    s(1, 5); s(3, 7); s(3, 5); s(1, 2); s(3, 4); s(5, 6); s(0, 8); s(4, 8); s(2, 4); s(3, 5); s(1, 2); s(3, 4);
    [p[0], p[1], p[2], p[3], p[4]]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::Image;
    use alloc::vec::Vec;
    use proptest::prelude::*;

    /// The filter of a random `w x h` map (with invalid pixels) against sorting.
    fn check_against_reference(w: usize, h: usize, seed: u64, par: Parallelism) {
        let mut s = seed | 1;
        let src = Image::from_fn(w, h, |_, _| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            if (s >> 60) < 3 { f32::INFINITY } else { ((s >> 33) % 50) as f32 * 0.25 }
        }).unwrap();
        let mut dst = Image::<f32>::new(w, h).unwrap();
        median3x3(src.view(), dst.view_mut(), par).unwrap();
        for y in 0..h { for x in 0..w {
            let c = src.at(x, y);
            let want = if !c.is_finite() { f64::INFINITY } else {
                let mut v: Vec<f64> = Vec::new();
                for yy in y as i64 - 1..=y as i64 + 1 { for xx in x as i64 - 1..=x as i64 + 1 {
                    if yy >= 0 && xx >= 0 && (yy as usize) < h && (xx as usize) < w {
                        let d = src.at(xx as usize, yy as usize);
                        if d.is_finite() { v.push(d as f64); }
                    }
                }}
                v.sort_by(|a, b| a.partial_cmp(b).unwrap());
                v[(v.len() - 1) / 2]
            };
            assert_eq!(dst.at(x, y) as f64, want, "({x}, {y})");
        }}
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn matches_reference(w in 1usize..14, h in 1usize..9, seed in any::<u64>()) {
            check_against_reference(w, h, seed, Parallelism::AllThreads);
        }
    }

    #[test]
    fn every_level_matches_reference() {
        crate::testing::at_every_level(|_| check_against_reference(83, 5, 21, Parallelism::Sequential));
    }

    #[test]
    fn network_finds_the_five_smallest() {
        // The 0-1 principle: every 0/1 input, then random multi-valued ones.
        for bits in 0u32..512 {
            let v: [f32; 9] = core::array::from_fn(|i| ((bits >> i) & 1) as f32);
            let mut sorted = v;
            sorted.sort_by(|a, b| a.partial_cmp(b).unwrap());
            assert_eq!(lowest5(v), sorted[..5], "{v:?}");
        }
        let mut s = 12345u64;
        for _ in 0..2000 {
            let mut v = [0f32; 9];
            for x in v.iter_mut() {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                *x = if (s >> 61) == 0 { f32::INFINITY } else { ((s >> 33) % 6) as f32 };
            }
            let mut sorted = v;
            sorted.sort_by(|a, b| a.partial_cmp(b).unwrap());
            assert_eq!(lowest5(v), sorted[..5], "{v:?}");
        }
    }

    #[test]
    fn rejects_bad_input() {
        let a = Image::<f32>::new(4, 3).unwrap();
        let mut b = Image::<f32>::new(4, 2).unwrap();
        assert!(median3x3(a.view(), b.view_mut(), Parallelism::Sequential).is_err());
        let n = Image::<f32>::filled(4, 2, f32::NAN).unwrap();
        assert!(median3x3(n.view(), b.view_mut(), Parallelism::Sequential).is_err());
    }
}
