//! 3x3 median of a disparity map that has invalid pixels. An invalid centre stays invalid
//! (the filter must not invent disparities; hole filling is a separate, explicit step); a
//! valid centre becomes the median of the valid pixels of its 3x3 window inside the image,
//! the lower of the two middle values when their count is even. Removes isolated outliers
//! the way Hirschmueller's 3x3 median does, without spreading the invalid marker.

use crate::error::Result;
use crate::image::{check_same_size, ImageView, ImageViewMut};
use crate::parallel::{for_each_band, Parallelism};
#[cfg(feature = "std")]
use multiversion::multiversion;

/// `dst = median3x3(src)` as described in the module doc. Errors: differing sizes, NaN.
pub fn median3x3(src: ImageView<'_, f32>, dst: ImageViewMut<'_, f32>, par: Parallelism) -> Result<()> {
    check_same_size(src.size(), dst.size())?;
    super::check_no_nan("disparity", src)?;
    let (w, h) = src.size();
    for_each_band(dst, par, 16, |y0, mut band| {
        let mut fast = alloc::vec![0f32; w.saturating_sub(2)];
        let mut ok = alloc::vec![false; w.saturating_sub(2)];
        for j in 0..band.height() {
            let y = y0 + j;
            let rows = [src.row(y.saturating_sub(1)), src.row(y), src.row((y + 1).min(h - 1))];
            let ys = [y > 0, true, y + 1 < h];
            // Interior pixels whose 3x3 window is all valid (the common case): the exchange
            // network for the whole row at once (vectorized across x).
            let interior = y > 0 && y + 1 < h && w > 2;
            if interior {
                median_row(rows[0], rows[1], rows[2], &mut fast, &mut ok);
            }
            let out = band.row_mut(j);
            for (x, o) in out.iter_mut().enumerate() {
                let c = rows[1][x];
                if !c.is_finite() {
                    *o = c;
                    continue;
                }
                if interior && x > 0 && x + 1 < w && ok[x - 1] {
                    *o = fast[x - 1];
                    continue;
                }
                let mut v = [0f32; 9];
                let mut n = 0;
                for (r, &inside) in rows.iter().zip(&ys) {
                    if !inside {
                        continue;
                    }
                    for xx in x.saturating_sub(1)..(x + 2).min(w) {
                        let d = r[xx];
                        if d.is_finite() {
                            v[n] = d;
                            n += 1;
                        }
                    }
                }
                let v = &mut v[..n];
                // n <= 9: insertion sort, no allocation.
                for i in 1..n {
                    let mut k = i;
                    while k > 0 && v[k - 1] > v[k] {
                        v.swap(k - 1, k);
                        k -= 1;
                    }
                }
                *o = v[(n - 1) / 2];
            }
        }
    });
    Ok(())
}

/// `med[i]` = the network's median of the 3x3 window centred on `(i + 1)` of the rows
/// `r0, r1, r2`, and `ok[i]` whether all nine values are finite (only then is it the
/// median of the valid values). Branch-free, so it vectorizes across `i`.
#[cfg_attr(feature = "std", multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2+fma")))]
fn median_row(r0: &[f32], r1: &[f32], r2: &[f32], med: &mut [f32], ok: &mut [bool]) {
    let n = med.len();
    let (r0, r1, r2) = (&r0[..n + 2], &r1[..n + 2], &r2[..n + 2]);
    for (i, (m, k)) in med.iter_mut().zip(ok.iter_mut()).enumerate() {
        let v = [r0[i], r0[i + 1], r0[i + 2], r1[i], r1[i + 1], r1[i + 2], r2[i], r2[i + 1], r2[i + 2]];
        *k = v.iter().fold(true, |a, d| a & d.is_finite());
        *m = median9(v);
    }
}

/// Median of 9 finite values with the 19-exchange network of Paeth (Graphics Gems, 1990),
/// branch-free.
/// Plain compares instead of `f32::min` / `max` (whose NaN rules cost extra instructions):
/// the values are never NaN.
#[inline(always)]
fn median9(mut p: [f32; 9]) -> f32 {
    let mut s = |a: usize, b: usize| {
        let (x, y) = (p[a], p[b]);
        let (lo, hi) = if y < x { (y, x) } else { (x, y) };
        p[a] = lo;
        p[b] = hi;
    };
    s(1, 2); s(4, 5); s(7, 8); s(0, 1); s(3, 4); s(6, 7); s(1, 2); s(4, 5); s(7, 8);
    s(0, 3); s(5, 8); s(4, 7); s(3, 6); s(1, 4); s(2, 5); s(4, 7); s(4, 2); s(6, 4); s(4, 2);
    p[4]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::Image;
    use alloc::vec::Vec;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn matches_reference(w in 1usize..14, h in 1usize..9, seed in any::<u64>()) {
            let mut s = seed | 1;
            let src = Image::from_fn(w, h, |_, _| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                if (s >> 60) < 3 { f32::INFINITY } else { ((s >> 33) % 50) as f32 * 0.25 }
            }).unwrap();
            let mut dst = Image::<f32>::new(w, h).unwrap();
            median3x3(src.view(), dst.view_mut(), Parallelism::AllThreads).unwrap();
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
                prop_assert_eq!(dst.at(x, y) as f64, want);
            }}
        }
    }

    #[test]
    fn network_is_a_median() {
        // Every permutation pattern of a few value sets.
        let mut s = 12345u64;
        for _ in 0..2000 {
            let mut v = [0f32; 9];
            for x in v.iter_mut() {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                *x = ((s >> 33) % 6) as f32;
            }
            let mut sorted = v;
            sorted.sort_by(|a, b| a.partial_cmp(b).unwrap());
            assert_eq!(median9(v), sorted[4], "{v:?}");
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
