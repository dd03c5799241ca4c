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

use super::INVALID;
#[cfg(test)]
use super::SummedVolume;
#[cfg(test)]
use crate::error::Result;
#[cfg(test)]
use crate::image::{check_same_size, ImageViewMut};
#[cfg(test)]
use crate::parallel::{for_each_band, Parallelism};
#[cfg(test)]
use core::sync::atomic::{AtomicUsize, Ordering};
use crate::cpu::multiversion;

/// Lanes of the vectorized minimum searches (one AVX-512 register of u16).
const LANES: usize = 32;

/// The minimum (`u16::MAX` for an empty slice), by whole blocks (vpminuw).
#[inline(always)]
fn min_of(s: &[u16]) -> u16 {
    let blocks = s.chunks_exact(LANES);
    let tail = blocks.remainder();
    let mut mv = [u16::MAX; LANES];
    for b in blocks {
        for (m, &v) in mv.iter_mut().zip(b) {
            *m = (*m).min(v);
        }
    }
    tail.iter().copied().fold(mv.iter().copied().fold(u16::MAX, u16::min), u16::min)
}

/// The minimum over the candidates more than one step away from `best` (`u16::MAX` if
/// none), block by block with the excluded lanes masked by their index within the block.
#[inline(always)]
fn min_away(s: &[u16], best: usize) -> u16 {
    let (lo, hi) = (best.saturating_sub(1), best + 2);
    let blocks = s.chunks_exact(LANES);
    let tail = blocks.remainder();
    let mut mv = [u16::MAX; LANES];
    for (k, b) in blocks.enumerate() {
        let base = k * LANES;
        let (e0, e1) = (lo.saturating_sub(base).min(LANES) as u16, hi.saturating_sub(base).min(LANES) as u16);
        for (i, (m, &v)) in mv.iter_mut().zip(b).enumerate() {
            let excluded = (i as u16) >= e0 && (i as u16) < e1;
            *m = (*m).min(if excluded { u16::MAX } else { v });
        }
    }
    let base = s.len() - tail.len();
    let rest = tail.iter().enumerate().filter(|&(i, _)| !(lo..hi).contains(&(base + i))).map(|(_, &v)| v);
    rest.fold(mv.iter().copied().fold(u16::MAX, u16::min), u16::min)
}

/// Index and value of the first minimum: the minimum by whole blocks (vpminuw), then the
/// smallest index among the lanes equal to it, also by whole blocks (each lane holds its
/// index where it equals the minimum and MAX elsewhere: vpcmpeqw, vpblendmw, vpminuw).
#[inline(always)]
fn argmin(s: &[u16]) -> (usize, u16) {
    let m = min_of(s);
    if s.len() >= u16::MAX as usize {
        // Indices would not fit the u16 lanes.
        return (s.iter().position(|&v| v == m).unwrap_or(0), m);
    }
    let blocks = s.chunks_exact(LANES);
    let tail = blocks.remainder();
    let mut first = [u16::MAX; LANES];
    for (k, b) in blocks.enumerate() {
        for (i, (f, &v)) in first.iter_mut().zip(b).enumerate() {
            *f = (*f).min(if v == m { (k * LANES + i) as u16 } else { u16::MAX });
        }
    }
    let first = first.iter().copied().fold(u16::MAX, u16::min) as usize;
    if first < s.len() {
        return (first, m);
    }
    let base = s.len() - tail.len();
    (base + tail.iter().position(|&v| v == m).unwrap_or(0), m)
}

/// One row of the left map: pixel `x`'s sums are `s[x * stride..][..nd]` (`stride >= nd`).
/// Returns the pixels the uniqueness test invalidated.
pub(crate) fn wta_left_row(s: &[u16], stride: usize, nd: usize, uniqueness: u8, subpixel: bool, out: &mut [f32]) -> usize {
    #[cfg(target_arch = "x86_64")]
    if uniqueness == 0 && stride.is_multiple_of(LANES) && (crate::cpu::level() == crate::cpu::Level::Avx512) {
        // SAFETY: the CPU has AVX-512BW; the stride is whole blocks.
        unsafe { avx512::wta_left_row(s, stride, nd, subpixel, out) };
        return 0;
    }
    wta_left_row_portable(s, stride, nd, uniqueness, subpixel, out)
}

multiversion! {
    /// [`wta_left_row`] for any CPU, stride and uniqueness.
    fn wta_left_row_portable(s: &[u16], stride: usize, nd: usize, uniqueness: u8, subpixel: bool, out: &mut [f32]) -> usize {
        let u = uniqueness as u32;
        let mut rejected = 0;
        // Padding lanes (u16::MAX, after the real ones) never change a first minimum, so a
        // padded stride is searched whole: no scalar tail.
        let searched = if stride.is_multiple_of(LANES) { stride } else { nd };
        for (o, px) in out.iter_mut().zip(s.chunks_exact(stride)) {
            let (best, m) = argmin(&px[..searched]);
            let s = &px[..nd];
            if u > 0 {
                let away = min_away(&px[..searched], best);
                if (away as u32) * (100 - u) < (m as u32) * 100 {
                    *o = INVALID;
                    rejected += 1;
                    continue;
                }
            }
            *o = refine(s, best, m, subpixel);
        }
        rejected
    }
}

/// The disparity `best` (the minimum `m` of the pixel's sums `s`), moved by the parabola
/// fit when `subpixel` and both neighbours exist.
#[inline(always)]
fn refine(s: &[u16], best: usize, m: u16, subpixel: bool) -> f32 {
    let mut v = best as f32;
    if subpixel && best > 0 && best + 1 < s.len() {
        let (a, c) = (s[best - 1] as i32, s[best + 1] as i32);
        let den = a + c - 2 * m as i32;
        if den > 0 {
            v += (a - c) as f32 / (2 * den) as f32;
        }
    }
    v
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{refine, LANES};
    use core::arch::x86_64::*;

    /// The left map's row without the uniqueness test: per pixel the minimum over whole
    /// blocks (vpminuw), one horizontal reduction, then the first block whose equality mask
    /// against it is not empty (vpcmpeqw into a mask register, tzcnt).
    ///
    /// # Safety
    /// The CPU has AVX-512F and BW; `stride` is a multiple of [`LANES`] and at least `nd`.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) unsafe fn wta_left_row(s: &[u16], stride: usize, nd: usize, subpixel: bool, out: &mut [f32]) {
        let blocks = stride / LANES;
        for (o, px) in out.iter_mut().zip(s.chunks_exact(stride)) {
            let p = px.as_ptr();
            // SAFETY: px holds `blocks` whole blocks.
            let (best, m) = unsafe {
                let mut mv = _mm512_loadu_si512(p.cast());
                for k in 1..blocks {
                    mv = _mm512_min_epu16(mv, _mm512_loadu_si512(p.add(k * LANES).cast()));
                }
                let h = _mm256_min_epu16(_mm512_castsi512_si256(mv), _mm512_extracti64x4_epi64::<1>(mv));
                let h = _mm_min_epu16(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h));
                let m = _mm_cvtsi128_si32(_mm_minpos_epu16(h)) as u16;
                let mb = _mm512_set1_epi16(m as i16);
                let mut best = 0;
                for k in 0..blocks {
                    let hit = _mm512_cmpeq_epi16_mask(_mm512_loadu_si512(p.add(k * LANES).cast()), mb);
                    if hit != 0 {
                        best = k * LANES + hit.trailing_zeros() as usize;
                        break;
                    }
                }
                (best, m)
            };
            *o = refine(&px[..nd], best, m, subpixel);
        }
    }
}

/// Left disparity map into `out` (same size as the volume): WTA, uniqueness `u` percent
/// (0 = off, at most 99), optional parabola subpixel. Returns the pixels the uniqueness test
/// invalidated (written as `f32::INFINITY`).
#[cfg(test)]
pub fn wta_left(
    sum: &SummedVolume,
    uniqueness: u8,
    subpixel: bool,
    out: ImageViewMut<'_, f32>,
    par: Parallelism,
) -> Result<usize> {
    sum.validate()?;
    check_same_size((sum.width, sum.height), out.size())?;
    crate::error::require_range("uniqueness", uniqueness, 0, 99)?;
    let (w, nd) = (sum.width, sum.disparities);
    let rejected = AtomicUsize::new(0);
    for_each_band(out, par, 8, |y0, mut band| {
        let mut local = 0;
        for j in 0..band.height() {
            let y = y0 + j;
            local += wta_left_row(&sum.data[y * w * nd..(y + 1) * w * nd], nd, nd, uniqueness, subpixel, band.row_mut(j));
        }
        rejected.fetch_add(local, Ordering::Relaxed);
    });
    Ok(rejected.into_inner())
}

/// Scratch of [`wta_right_row`].
pub(crate) struct RightScratch {
    /// Per right pixel (indexed by w - 1 - x_r, then a tail that takes the candidates
    /// x - d < 0 a whole block of lanes offers, so no lane needs masking): the best
    /// candidate so far as `S << 16 | d`.
    key: alloc::vec::Vec<u32>,
}

impl RightScratch {
    pub(crate) fn new(width: usize, stride: usize) -> Self {
        RightScratch { key: alloc::vec![u32::MAX; width + stride + LANES] }
    }
}

multiversion! {
    /// One row of the right map (see [`wta_right`]); `s` as in [`wta_left_row`], and lanes
    /// `nd..stride` of each pixel, if any, must be `u16::MAX` (they then never win).
    ///
    /// Left pixel x offers `S(x, d)` to right pixel `x - d`, at index `w - 1 - x + d`. The key
    /// `S << 16 | d` makes the minimum the smallest sum and, on ties, the smallest d whatever
    /// the order of the offers, so pixels are visited by residue of `x` modulo the stride:
    /// consecutive offers then touch disjoint runs of `key` (no store-to-load stalls).
    pub(crate) fn wta_right_row(s: &[u16], stride: usize, nd: usize, t: &mut RightScratch, out: &mut [f32]) {
        let w = out.len();
        t.key.fill(u32::MAX);
        for j in 0..stride.min(w) {
            for x in (j..w).step_by(stride) {
                let px = &s[x * stride..(x + 1) * stride];
                let r = w - 1 - x;
                let lanes = px.chunks_exact(LANES);
                let tail = lanes.remainder();
                for (k, b) in lanes.enumerate() {
                    // Whole blocks by value: no aliasing for the compiler to guard against.
                    let o = k * LANES;
                    let mut key: [u32; LANES] = t.key[r + o..r + o + LANES].try_into().unwrap();
                    for i in 0..LANES {
                        key[i] = key[i].min((b[i] as u32) << 16 | (o + i) as u32);
                    }
                    t.key[r + o..r + o + LANES].copy_from_slice(&key);
                }
                let base = stride - tail.len();
                for (i, &v) in tail.iter().enumerate().take(nd.saturating_sub(base)) {
                    let k = &mut t.key[r + base + i];
                    *k = (*k).min((v as u32) << 16 | (base + i) as u32);
                }
            }
        }
        for (o, &k) in out.iter_mut().zip(t.key[..w].iter().rev()) {
            *o = (k & 0xffff) as f32;
        }
    }
}

/// Right disparity map (integer) by the diagonal search of the module doc. Right pixels
/// `x >= W - ...` see fewer candidates (`d < W - x`); every pixel has at least `d = 0`.
/// Computed by reading `S` in memory order: left pixel `x` offers `S(x, d)` to right pixel
/// `x - d`; scanning `x` upwards and keeping strict improvements gives the smallest `d` on
/// ties.
#[cfg(test)]
pub fn wta_right(sum: &SummedVolume, out: ImageViewMut<'_, f32>, par: Parallelism) -> Result<()> {
    sum.validate()?;
    check_same_size((sum.width, sum.height), out.size())?;
    let (w, nd) = (sum.width, sum.disparities);
    for_each_band(out, par, 8, |y0, mut band| {
        let mut t = RightScratch::new(w, nd);
        for j in 0..band.height() {
            let y = y0 + j;
            wta_right_row(&sum.data[y * w * nd..(y + 1) * w * nd], nd, nd, &mut t, band.row_mut(j));
        }
    });
    Ok(())
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

    /// Both maps of random sums against the reference: the first minimum, the uniqueness
    /// test, the parabola; the right map's diagonal minimum.
    fn check_against_reference(w: usize, h: usize, d: usize, seed: u64, u: u8, subpixel: bool, par: Parallelism) {
        let s = random_sum(w, h, d, seed);
        let mut l = Image::<f32>::new(w, h).unwrap();
        let rej = wta_left(&s, u, subpixel, l.view_mut(), par).unwrap();
        let mut r = Image::<f32>::new(w, h).unwrap();
        wta_right(&s, r.view_mut(), par).unwrap();
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
            assert!(got == want || (got - want).abs() < 1e-6 * (1.0 + want.abs()), "({x},{y}) {got} vs {want}");
            if want.is_finite() { assert!((got - b as f64).abs() <= 0.5); }
            // Right: diagonal minimum, first on ties.
            let mut rb = 0; let mut rm = f64::INFINITY;
            for k in 0..d { if x + k < w { let v = s.pixel(x + k, y)[k] as f64; if v < rm { rm = v; rb = k; } } }
            assert_eq!(r.at(x, y) as usize, rb);
        }}
        assert_eq!(rej, want_rej);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn left_and_right_match_reference(w in 1usize..12, h in 1usize..6, d in 1usize..12, seed in any::<u64>(),
                                          u in 0u8..40, subpixel in any::<bool>()) {
            check_against_reference(w, h, d, seed, u, subpixel, Parallelism::AllThreads);
        }
    }

    #[test]
    fn every_level_matches_reference() {
        crate::testing::at_every_level(|_| {
            for (d, u, subpixel) in [(40, 15, true), (LANES, 0, true), (70, 0, false), (9, 30, false)] {
                check_against_reference(83, 3, d, d as u64, u, subpixel, Parallelism::Sequential);
            }
        });
    }

    #[test]
    fn whole_blocks_match_reference() {
        crate::testing::at_every_level(|_| {
            // Depths of one, two and a partial block of the vectorized searches.
            for d in [LANES, 2 * LANES, LANES + 13] {
                let (w, h) = (70, 3);
                let s = random_sum(w, h, d, d as u64);
                let mut l = Image::<f32>::new(w, h).unwrap();
                wta_left(&s, 0, false, l.view_mut(), Parallelism::Sequential).unwrap();
                let mut r = Image::<f32>::new(w, h).unwrap();
                wta_right(&s, r.view_mut(), Parallelism::Sequential).unwrap();
                for y in 0..h {
                    for x in 0..w {
                        let c = s.pixel(x, y);
                        let b = (0..d).fold(0, |b, k| if c[k] < c[b] { k } else { b });
                        assert_eq!(l.at(x, y) as usize, b, "left ({x}, {y}) d {d}");
                        let mut rb = 0;
                        for k in 0..d {
                            if x + k < w && s.pixel(x + k, y)[k] < s.pixel(x + rb, y)[rb] {
                                rb = k;
                            }
                        }
                        assert_eq!(r.at(x, y) as usize, rb, "right ({x}, {y}) d {d}");
                    }
                }
            }
        });
    }

    #[test]
    fn argmin_is_the_first_minimum() {
        let mut seed = 99u64;
        for len in 1..3 * LANES + 5 {
            for range in [2u64, 5, 70000] {
                let s: Vec<u16> = (0..len)
                    .map(|_| {
                        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        ((seed >> 33) % range).min(u16::MAX as u64) as u16 | if range == 2 { 0xfffe } else { 0 }
                    })
                    .collect();
                let m = *s.iter().min().unwrap();
                let want = (s.iter().position(|&v| v == m).unwrap(), m);
                assert_eq!(argmin(&s), want, "{s:?}");
                assert_eq!(argmin(&alloc::vec![u16::MAX; len]), (0, u16::MAX));
            }
        }
        // Longer than the u16 lane indices reach.
        let mut long = alloc::vec![9u16; 70_000];
        long[66_000] = 3;
        long[69_000] = 3;
        assert_eq!(argmin(&long), (66_000, 3));
    }

    #[test]
    fn padded_rows_give_the_unpadded_result() {
        // The pipeline's rows: each pixel's sums padded with u16::MAX to whole blocks.
        for (d, stride) in [(40, 2 * LANES), (LANES, LANES), (3, LANES)] {
            let w = 50;
            let s = random_sum(w, 1, d, 7 + d as u64);
            let mut padded = alloc::vec![u16::MAX; w * stride];
            for (p, q) in padded.chunks_exact_mut(stride).zip(s.data.chunks_exact(d)) {
                p[..d].copy_from_slice(q);
            }
            for u in [0, 5, 30] {
                let (mut a, mut b) = (alloc::vec![0f32; w], alloc::vec![0f32; w]);
                let ra = wta_left_row(&s.data, d, d, u, true, &mut a);
                let rb = wta_left_row(&padded, stride, d, u, true, &mut b);
                assert_eq!((ra, &a), (rb, &b), "d {d} u {u}");
            }
        }
    }

    #[test]
    fn vector_row_matches_the_portable_one_with_ties() {
        crate::testing::at_every_level(|_| {
            // Sums from a small range (many equal minima, at every lane position), padded rows
            // of one to four blocks: the dispatched row (the AVX-512 one where the CPU has it)
            // and the portable one agree on the first minimum and the parabola.
            let mut seed = 5u64;
            for (d, stride) in [(1, LANES), (31, LANES), (32, LANES), (33, 2 * LANES), (64, 2 * LANES), (100, 4 * LANES)] {
                let w = 40;
                let mut s = alloc::vec![u16::MAX; w * stride];
                for px in s.chunks_exact_mut(stride) {
                    for v in &mut px[..d] {
                        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        *v = 100 + ((seed >> 33) % 4) as u16;
                    }
                }
                for subpixel in [false, true] {
                    let (mut a, mut b) = (alloc::vec![0f32; w], alloc::vec![0f32; w]);
                    wta_left_row(&s, stride, d, 0, subpixel, &mut a);
                    wta_left_row_portable(&s, stride, d, 0, subpixel, &mut b);
                    assert_eq!(a, b, "d {d} subpixel {subpixel}");
                }
            }
        });
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
