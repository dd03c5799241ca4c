//! Disparity selection from the summed costs `S` (Hirschmueller 2008, sec. 2.4).
//!
//! * Left map: winner-takes-all `d* = argmin_d S(p, d)` (the smallest d on ties), with
//!   OpenCV's uniqueness test (the best must beat every candidate more than one step away
//!   by `u` percent: invalid if `S(p, d) * (100 - u) < S(p, d*) * 100` for some
//!   `|d - d*| > 1`), refined by the parabola through `(d* - 1, d*, d* + 1)`:
//!   `d* + (S- - S+) / (2 (S- - 2 S* + S+))` when `0 < d* < D - 1` and the denominator is
//!   positive (the offset then lies in [-0.5, 0.5] because `S*` is the minimum).
//! * Right map (for the left-right check) from the same volume, by searching along the
//!   diagonal: `D_R(x) = argmin_d S(x + d, d)` over `x + d < W` (paper eq. 16). This costs
//!   one pass over `S` instead of a second aggregation of the right image; the price is
//!   that the right map carries the left image's path costs, which the paper accepts.

use super::{SummedVolume, INVALID};
use crate::error::Result;
use crate::image::{check_same_size, ImageViewMut};
use crate::parallel::{for_each_band, Parallelism};
use core::sync::atomic::{AtomicUsize, Ordering};
#[cfg(feature = "std")]
use multiversion::multiversion;

/// Index and value of the first minimum.
#[cfg_attr(feature = "std", multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2+fma")))]
fn argmin(s: &[u16]) -> (usize, u16) {
    let m = s.iter().copied().fold(u16::MAX, u16::min);
    (s.iter().position(|&v| v == m).unwrap_or(0), m)
}

/// Left disparity map into `out` (same size as the volume): WTA, uniqueness `u` percent
/// (0 = off, at most 99), optional parabola subpixel. Returns the pixels the uniqueness test
/// invalidated (written as `f32::INFINITY`).
pub fn wta_left(
    sum: &SummedVolume,
    uniqueness: u8,
    subpixel: bool,
    out: ImageViewMut<'_, f32>,
    par: Parallelism,
) -> Result<usize> {
    sum.validate()?;
    check_same_size((sum.width, sum.height), out.size())?;
    crate::error::require_range("uniqueness", uniqueness as i64, 0, 99)?;
    let nd = sum.disparities;
    let rejected = AtomicUsize::new(0);
    let u = uniqueness as u32;
    for_each_band(out, par, 8, |y0, mut band| {
        let mut local = 0;
        for j in 0..band.height() {
            let y = y0 + j;
            let row = band.row_mut(j);
            for (x, o) in row.iter_mut().enumerate() {
                let s = sum.pixel(x, y);
                let (best, m) = argmin(s);
                if u > 0 {
                    let ambiguous = s.iter().enumerate().any(|(d, &v)| {
                        d.abs_diff(best) > 1 && (v as u32) * (100 - u) < (m as u32) * 100
                    });
                    if ambiguous {
                        *o = INVALID;
                        local += 1;
                        continue;
                    }
                }
                let mut v = best as f32;
                if subpixel && best > 0 && best + 1 < nd {
                    let (a, c) = (s[best - 1] as i32, s[best + 1] as i32);
                    let den = a + c - 2 * m as i32;
                    if den > 0 {
                        v += (a - c) as f32 / (2 * den) as f32;
                    }
                }
                *o = v;
            }
        }
        rejected.fetch_add(local, Ordering::Relaxed);
    });
    Ok(rejected.into_inner())
}

/// Right disparity map (integer) by the diagonal search of the module doc. Right pixels
/// `x >= W - ...` see fewer candidates (`d < W - x`); every pixel has at least `d = 0`.
/// Computed by reading `S` in memory order: left pixel `x` offers `S(x, d)` to right pixel
/// `x - d`; scanning `x` upwards and keeping strict improvements gives the smallest `d` on
/// ties.
pub fn wta_right(sum: &SummedVolume, out: ImageViewMut<'_, f32>, par: Parallelism) -> Result<()> {
    sum.validate()?;
    check_same_size((sum.width, sum.height), out.size())?;
    let (w, nd) = (sum.width, sum.disparities);
    for_each_band(out, par, 8, |y0, mut band| {
        // Indexed by w - 1 - x_r, so the right pixels x - d (d = 0, 1, ...) that left pixel x
        // reaches are the contiguous run starting at w - 1 - x.
        let mut cost = alloc::vec![u16::MAX; w];
        let mut best = alloc::vec![0u16; w];
        for j in 0..band.height() {
            let y = y0 + j;
            cost.fill(u16::MAX);
            best.fill(0);
            for x in 0..w {
                let k = nd.min(x + 1);
                let r = w - 1 - x;
                offer(&sum.pixel(x, y)[..k], &mut cost[r..r + k], &mut best[r..r + k]);
            }
            for (o, &b) in band.row_mut(j).iter_mut().zip(best.iter().rev()) {
                *o = b as f32;
            }
        }
    });
    Ok(())
}

/// `cost[d], best[d] = s[d], d` where `s[d] < cost[d]`: branch-free, vectorized.
#[cfg_attr(feature = "std", multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2+fma")))]
fn offer(s: &[u16], cost: &mut [u16], best: &mut [u16]) {
    for (d, ((&v, c), b)) in s.iter().zip(cost.iter_mut()).zip(best.iter_mut()).enumerate() {
        let better = v < *c;
        *c = if better { v } else { *c };
        *b = if better { d as u16 } else { *b };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;
    use crate::image::Image;
    use proptest::prelude::*;

    fn random_sum(w: usize, h: usize, d: usize, seed: u64) -> SummedVolume {
        let mut s = seed | 1;
        let data = (0..w * h * d)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((s >> 33) % 300) as u16
            })
            .collect();
        SummedVolume { width: w, height: h, disparities: d, data }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn left_and_right_match_reference(w in 1usize..12, h in 1usize..6, d in 1usize..12, seed in any::<u64>(),
                                          u in 0u8..40, subpixel in any::<bool>()) {
            let s = random_sum(w, h, d, seed);
            let mut l = Image::<f32>::new(w, h).unwrap();
            let rej = wta_left(&s, u, subpixel, l.view_mut(), Parallelism::AllThreads).unwrap();
            let mut r = Image::<f32>::new(w, h).unwrap();
            wta_right(&s, r.view_mut(), Parallelism::AllThreads).unwrap();
            let mut want_rej = 0;
            for y in 0..h { for x in 0..w {
                let c: Vec<f64> = s.pixel(x, y).iter().map(|&v| v as f64).collect();
                let mut b = 0;
                for k in 1..d { if c[k] < c[b] { b = k; } }
                let unique = (0..d).all(|k| k.abs_diff(b) <= 1 || c[k] * (100.0 - u as f64) >= c[b] * 100.0);
                let want = if !unique { want_rej += 1; f64::INFINITY } else if subpixel && b > 0 && b + 1 < d && c[b-1] + c[b+1] - 2.0 * c[b] > 0.0 {
                    b as f64 + (c[b-1] - c[b+1]) / (2.0 * (c[b-1] + c[b+1] - 2.0 * c[b]))
                } else { b as f64 };
                let got = l.at(x, y) as f64;
                prop_assert!(got == want || (got - want).abs() < 1e-6, "({x},{y}) {got} vs {want}");
                if want.is_finite() { prop_assert!((got - b as f64).abs() <= 0.5); }
                // Right: diagonal minimum, first on ties.
                let mut rb = 0; let mut rm = f64::INFINITY;
                for k in 0..d { if x + k < w { let v = s.pixel(x + k, y)[k] as f64; if v < rm { rm = v; rb = k; } } }
                prop_assert_eq!(r.at(x, y) as usize, rb);
            }}
            prop_assert_eq!(rej, want_rej);
        }
    }

    #[test]
    fn rejects_bad_input() {
        let s = random_sum(4, 3, 5, 1);
        let mut o = Image::<f32>::new(3, 3).unwrap();
        assert!(wta_left(&s, 0, true, o.view_mut(), Parallelism::Sequential).is_err());
        assert!(wta_right(&s, o.view_mut(), Parallelism::Sequential).is_err());
        let mut o = Image::<f32>::new(4, 3).unwrap();
        assert!(wta_left(&s, 100, true, o.view_mut(), Parallelism::Sequential).is_err());
        let broken = SummedVolume { width: 4, height: 3, disparities: 5, data: alloc::vec![0; 7] };
        assert!(wta_left(&broken, 0, true, o.view_mut(), Parallelism::Sequential).is_err());
        assert!(wta_right(&broken, o.view_mut(), Parallelism::Sequential).is_err());
    }
}
