//! Pearson's r of a reference region and the bilinearly sampled moving frame, from exact
//! integer sums (u8 and u16 frames).
//!
//! Under a constant shift the bilinear weights are the same at every pixel, so the moving
//! sample is `b = sum_k w_k t_k` over at most four taps `t_k` (the moving frame read at four
//! fixed offsets). Pearson's sums then expand into sums of integers: `n`, `sum a`, `sum a^2`,
//! and per tap `sum t_k`, `sum a t_k`, per pair of taps `sum t_k t_l`. Those are exact in
//! 64 bits, and each centred moment `n sum xy - sum x sum y` is exact in 128, so the
//! coefficient carries one rounding per moment instead of one per pixel. Being integers,
//! the sums do not depend on the order they are added in: any split over threads (or
//! device blocks) gives the same bits.
//!
//! The row sums run as whole-vector integer multiply-adds: u8 products fit 16 bits and a
//! chunk of 65 536 of them fits u32 lanes (with AVX2 or AVX-512, two pixels' products a
//! lane each step);
//! u16 products fit 32 bits and add in u64 lanes.

use crate::cpu::multiversion;
use crate::image::{ImageView, Pixel};
use crate::ncc::coefficient::i128_as_f64;
use crate::parallel::{map_indices, Parallelism};

/// An integer sample type, with the lanes its row sums add in.
pub(crate) trait IntSample: Pixel {
    /// An accumulator that holds a chunk's sum of products exactly.
    type Acc: Copy + Default + core::ops::Add<Output = Self::Acc> + Into<u64>;
    /// Pixels of a row summed in `Acc` before the sums move to u64.
    const CHUNK: usize;
    fn acc(self) -> Self::Acc;
    /// `self * other`, exact, multiplied in the narrowest lanes that hold it.
    fn product(self, other: Self) -> Self::Acc;
    /// [`row_moments`] at the widest vectors the CPU has.
    fn row<const K: usize>(a: &[Self], t: [&[Self]; K]) -> Moments<K>;
}

impl IntSample for u8 {
    type Acc = u32;
    // 65 536 * 255^2 < 2^32.
    const CHUNK: usize = 1 << 16;
    #[inline(always)]
    fn acc(self) -> u32 {
        self as u32
    }
    #[inline(always)]
    fn product(self, other: u8) -> u32 {
        // 255^2 fits 16 bits: a 16-bit multiply, widened to add.
        (self as u16 * other as u16) as u32
    }
    fn row<const K: usize>(a: &[u8], t: [&[u8]; K]) -> Moments<K> {
        #[cfg(target_arch = "x86_64")]
        match crate::cpu::level() {
            // SAFETY: the CPU has AVX-512 F, BW and VL.
            crate::cpu::Level::Avx512 => return unsafe { x86::row_moments_u8_avx512(a, t) },
            // SAFETY: the CPU has AVX2.
            crate::cpu::Level::Avx2 => return unsafe { x86::row_moments_u8(a, t) },
            crate::cpu::Level::Portable => {}
        }
        row_moments(a, t)
    }
}

impl IntSample for u16 {
    type Acc = u64;
    const CHUNK: usize = usize::MAX;
    #[inline(always)]
    fn acc(self) -> u64 {
        self as u64
    }
    #[inline(always)]
    fn product(self, other: u16) -> u64 {
        (self as u32 * other as u32) as u64
    }
    fn row<const K: usize>(a: &[u16], t: [&[u16]; K]) -> Moments<K> {
        row_moments_u16(a, t)
    }
}

multiversion! {
    fn row_moments_u16<const K: usize>(a: &[u16], t: [&[u16]; K]) -> Moments<K> {
        row_moments(a, t)
    }
}

/// The exact sums of a region with `K` taps (module doc): over its `n` pixels, `sum a`,
/// `sum a^2`, and per tap `sum t_k`, `sum a t_k`, per pair of taps `sum t_k t_l`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Moments<const K: usize> {
    pub n: u64,
    pub a: u64,
    pub aa: u64,
    pub t: [u64; K],
    pub at: [u64; K],
    /// `sum t_k t_l` for `k <= l` (the lower triangle unused).
    pub tt: [[u64; K]; K],
}

impl<const K: usize> Default for Moments<K> {
    fn default() -> Self {
        Moments { n: 0, a: 0, aa: 0, t: [0; K], at: [0; K], tt: [[0; K]; K] }
    }
}

impl<const K: usize> Moments<K> {
    pub(crate) fn add(&mut self, o: &Self) {
        self.n += o.n;
        self.a += o.a;
        self.aa += o.aa;
        for k in 0..K {
            self.t[k] += o.t[k];
            self.at[k] += o.at[k];
            for l in k..K {
                self.tt[k][l] += o.tt[k][l];
            }
        }
    }

    /// Pearson's r of `a` and `b = sum_k weights[k] t_k`; `None` where either side is flat
    /// (the reference exactly; the sample up to the rounding of its combination).
    pub fn pearson(&self, weights: &[f64; K]) -> Option<f64> {
        self.pearson_in(weights, self.products_fit_i64())
    }

    /// Whether every product [`pearson`](Self::pearson) takes (`n` times a second sum, a
    /// first sum times another) fits i64: regions of u8 frames up to some 10^7 pixels.
    fn products_fit_i64(&self) -> bool {
        let largest_sum = self.t.iter().fold(self.a, |m, &v| m.max(v));
        let largest_product = self.tt.iter().flatten().chain(&self.at).fold(self.aa, |m, &v| m.max(v));
        largest_sum.checked_mul(largest_sum).zip(self.n.checked_mul(largest_product)).is_some_and(|(s, p)| s <= i64::MAX as u64 && p <= i64::MAX as u64)
    }

    /// [`pearson`](Self::pearson) with its centred moments in i64 (`narrow`: every product
    /// fits, [`products_fit_i64`](Self::products_fit_i64)) or in i128: the same values,
    /// without the wide products and the test of each conversion where they are not needed.
    fn pearson_in(&self, weights: &[f64; K], narrow: bool) -> Option<f64> {
        // n * centred moment, exact; then one rounding and the division.
        let count = self.n as f64;
        let centred = |x: u64, y: u64, xy: u64| {
            let v = if narrow { ((self.n * xy) as i64 - (x * y) as i64) as f64 } else { i128_as_f64(self.n as i128 * xy as i128 - x as i128 * y as i128) };
            v / count
        };
        let saa = centred(self.a, self.a, self.aa);
        let (mut sab, mut sbb, mut scale) = (0.0, 0.0, 0.0);
        for k in 0..K {
            sab += weights[k] * centred(self.a, self.t[k], self.at[k]);
            for l in k..K {
                let c = (if k == l { 1.0 } else { 2.0 }) * weights[k] * weights[l] * centred(self.t[k], self.t[l], self.tt[k][l]);
                sbb += c;
                scale += libm::fabs(c);
            }
        }
        // A sample flat by cancellation (a pattern the taps average out) is left as the
        // rounding of its terms.
        (self.n > 0 && saa > 0.0 && sbb > 1e-12 * scale).then(|| (sab / libm::sqrt(saa * sbb)).clamp(-1.0, 1.0))
    }
}

/// The sums of one row: `a` against the taps `t` (slices of the same length). Inlined into
/// each CPU level's clone of the u16 sums, which vectorizes it at that level's width; u8
/// rows below AVX2, and the last pixels of an AVX2 row.
#[inline(always)]
fn row_moments<S: IntSample, const K: usize>(a: &[S], t: [&[S]; K]) -> Moments<K> {
    let mut total = Moments::<K> { n: a.len() as u64, ..Default::default() };
    let mut start = 0;
    while start < a.len() {
        let end = a.len().min(start.saturating_add(S::CHUNK));
        let ra = &a[start..end];
        let rt: [&[S]; K] = core::array::from_fn(|k| &t[k][start..end]);
        let zero = S::Acc::default();
        let (mut sa, mut saa) = (zero, zero);
        let (mut st, mut sat, mut stt) = ([zero; K], [zero; K], [[zero; K]; K]);
        for i in 0..ra.len() {
            let x = ra[i].acc();
            let v: [S::Acc; K] = core::array::from_fn(|k| rt[k][i].acc());
            sa = sa + x;
            saa = saa + ra[i].product(ra[i]);
            for k in 0..K {
                st[k] = st[k] + v[k];
                sat[k] = sat[k] + ra[i].product(rt[k][i]);
                for l in k..K {
                    stt[k][l] = stt[k][l] + rt[k][i].product(rt[l][i]);
                }
            }
        }
        total.a += sa.into();
        total.aa += saa.into();
        for k in 0..K {
            total.t[k] += st[k].into();
            total.at[k] += sat[k].into();
            for l in k..K {
                total.tt[k][l] += stt[k][l].into();
            }
        }
        start = end;
    }
    total
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{row_moments, Moments};
    use crate::simd::x86::{u32_lanes_sum as lanes_sum, widened_u8x16 as widened};
    use core::arch::x86_64::*;

    /// 16-pixel steps summed in u32 lanes before the sums move to u64: a lane takes at most
    /// 2 * 255^2 a step, and 4096 * 130 050 < 2^32.
    const CHUNK_STEPS: usize = 4096;

    /// [`super::row_moments`] for u8, 16 pixels a step: every product (and every plain sum,
    /// as a product with 1) is a multiply-add of i16 lanes, two pixels' products added into
    /// each i32 lane (`vpmaddwd`, half the instructions of widening each product to add
    /// it). Two passes over each chunk, the plain sums and the reference's products first,
    /// then the taps' products with each other, so that each pass's sums stay in AVX2's 16
    /// registers for four taps. Integer sums in any order: the scalar pass's sums exactly.
    /// The row's last `len % 16` pixels go through the scalar pass.
    ///
    /// # Safety
    /// The CPU has AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn row_moments_u8<const K: usize>(a: &[u8], t: [&[u8]; K]) -> Moments<K> {
        let n = t.iter().fold(a.len(), |n, t| n.min(t.len()));
        let steps = n / 16;
        let ones = _mm256_set1_epi16(1);
        let zero = _mm256_setzero_si256();
        let mut total = Moments::<K>::default();
        let mut chunk = 0;
        while chunk < steps {
            let end = steps.min(chunk + CHUNK_STEPS);
            let (mut sa, mut saa, mut st, mut sat) = (zero, zero, [zero; K], [zero; K]);
            for x in (16 * chunk..16 * end).step_by(16) {
                // SAFETY: x + 16 <= n, within `a` and every tap.
                let va = unsafe { widened(a.as_ptr().add(x)) };
                sa = _mm256_add_epi32(sa, _mm256_madd_epi16(va, ones));
                saa = _mm256_add_epi32(saa, _mm256_madd_epi16(va, va));
                for k in 0..K {
                    // SAFETY: as above.
                    let vt = unsafe { widened(t[k].as_ptr().add(x)) };
                    st[k] = _mm256_add_epi32(st[k], _mm256_madd_epi16(vt, ones));
                    sat[k] = _mm256_add_epi32(sat[k], _mm256_madd_epi16(va, vt));
                }
            }
            let mut stt = [[zero; K]; K];
            for x in (16 * chunk..16 * end).step_by(16) {
                // SAFETY: as above.
                let vt: [__m256i; K] = core::array::from_fn(|k| unsafe { widened(t[k].as_ptr().add(x)) });
                for k in 0..K {
                    for l in k..K {
                        stt[k][l] = _mm256_add_epi32(stt[k][l], _mm256_madd_epi16(vt[k], vt[l]));
                    }
                }
            }
            total.a += lanes_sum(sa);
            total.aa += lanes_sum(saa);
            for k in 0..K {
                total.t[k] += lanes_sum(st[k]);
                total.at[k] += lanes_sum(sat[k]);
                for l in k..K {
                    total.tt[k][l] += lanes_sum(stt[k][l]);
                }
            }
            chunk = end;
        }
        let done = 16 * steps;
        total.add(&row_moments(&a[done..n], core::array::from_fn(|k| &t[k][done..n])));
        total.n = n as u64;
        total
    }

    /// [`row_moments_u8`] with AVX-512, 32 pixels a step in one pass: AVX-512's 32
    /// registers hold all twenty sums of four taps, so each pixel is loaded and widened once
    /// (AVX2 takes the taps twice). The row's last `len % 32` pixels are loaded under a mask,
    /// the lanes past the row zero (their products and sums zero).
    ///
    /// # Safety
    /// The CPU has AVX-512 F, BW and VL.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub(super) unsafe fn row_moments_u8_avx512<const K: usize>(a: &[u8], t: [&[u8]; K]) -> Moments<K> {
        let n = t.iter().fold(a.len(), |n, t| n.min(t.len()));
        let ones = _mm512_set1_epi16(1);
        let zero = _mm512_setzero_si512();
        // The pixels from `x` on, up to 32, as i16 lanes.
        let load = |row: &[u8], x: usize, mask: __mmask32| -> __m512i {
            // SAFETY: the mask covers only pixels x..min(x + 32, n), all within `row`.
            _mm512_cvtepu8_epi16(unsafe { _mm256_maskz_loadu_epi8(mask, row.as_ptr().add(x).cast()) })
        };
        let lanes = |v: __m512i| -> u64 {
            let wide = _mm512_add_epi64(_mm512_cvtepu32_epi64(_mm512_castsi512_si256(v)), _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64::<1>(v)));
            _mm512_reduce_add_epi64(wide) as u64
        };
        let mut total = Moments::<K> { n: n as u64, ..Default::default() };
        let mut x = 0;
        while x < n {
            // A chunk of steps whose u32 lanes cannot wrap (as AVX2's: two products a lane
            // a step).
            let end = n.min(x + 32 * CHUNK_STEPS);
            let (mut sa, mut saa, mut st, mut sat, mut stt) = (zero, zero, [zero; K], [zero; K], [[zero; K]; K]);
            while x < end {
                let mask: __mmask32 = if end - x >= 32 { u32::MAX } else { (1u32 << (end - x)) - 1 };
                let va = load(a, x, mask);
                let vt: [__m512i; K] = core::array::from_fn(|k| load(t[k], x, mask));
                sa = _mm512_add_epi32(sa, _mm512_madd_epi16(va, ones));
                saa = _mm512_add_epi32(saa, _mm512_madd_epi16(va, va));
                for k in 0..K {
                    st[k] = _mm512_add_epi32(st[k], _mm512_madd_epi16(vt[k], ones));
                    sat[k] = _mm512_add_epi32(sat[k], _mm512_madd_epi16(va, vt[k]));
                    for l in k..K {
                        stt[k][l] = _mm512_add_epi32(stt[k][l], _mm512_madd_epi16(vt[k], vt[l]));
                    }
                }
                x += 32;
            }
            x = end;
            // Written out in each kernel: through a helper taking the sums by reference,
            // they left the registers for memory, and the stitch with the defaults ran 11 %
            // slower.
            total.a += lanes(sa);
            total.aa += lanes(saa);
            for k in 0..K {
                total.t[k] += lanes(st[k]);
                total.at[k] += lanes(sat[k]);
                for l in k..K {
                    total.tt[k][l] += lanes(stt[k][l]);
                }
            }
        }
        total
    }
}

/// The sums of the reference region `[x0, x1) x [y0, y1)` against the moving frame's taps
/// `offsets` for integer offset `(ox, oy)`: reference pixel `(x, y)` meets moving pixel
/// `(x - ox + dx, y - oy + dy)` at tap `(dx, dy)`; every tap must lie inside the frame.
/// Rows in parallel when allowed.
pub(crate) fn region_moments<S: IntSample, const K: usize>(
    r: &ImageView<'_, S>,
    m: &ImageView<'_, S>,
    (ox, oy): (i64, i64),
    offsets: [(usize, usize); K],
    (x0, y0, x1, y1): (usize, usize, usize, usize),
    par: Parallelism,
) -> Moments<K> {
    let row = |k: usize| {
        let y = y0 + k;
        let a = &r.row(y)[x0..x1];
        let t: [&[S]; K] = core::array::from_fn(|j| {
            let (dx, dy) = offsets[j];
            let (mx, my) = ((x0 as i64 - ox) as usize + dx, (y as i64 - oy) as usize + dy);
            &m.row(my)[mx..mx + (x1 - x0)]
        });
        S::row(a, t)
    };
    let add = |mut s: Moments<K>, r: &Moments<K>| {
        s.add(r);
        s
    };
    // On one thread the rows are added as they come, not collected first.
    if par.threads() <= 1 {
        return (0..y1 - y0).fold(Moments::default(), |s, k| add(s, &row(k)));
    }
    map_indices(y1 - y0, par, row).iter().fold(Moments::default(), add)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::Image;
    use crate::stitch::quality::bilinear_taps;
    use crate::testing::at_every_level;
    use alloc::vec;
    use alloc::vec::Vec;

    /// Pearson in f64 from the definition, two passes.
    fn pearson(a: &[f64], b: &[f64]) -> Option<f64> {
        crate::ncc::coefficient::tests::pearson(a, b)
    }

    fn frames(seed: u64, w: usize, h: usize) -> (Image<u8>, Image<u8>) {
        let mut rng = crate::stitch::SplitMix64::new(seed);
        let a = Image::from_fn(w, h, |_, _| (rng.next_u64() >> 56) as u8).unwrap();
        let b = Image::from_fn(w, h, |x, y| (a.at(x, y) / 2).wrapping_add((rng.next_u64() >> 58) as u8)).unwrap();
        (a, b)
    }

    #[test]
    fn moments_are_the_sums_and_any_split_of_rows_gives_the_same_bits() {
        let (a, b) = frames(3, 70, 50);
        let region = (4, 3, 61, 47);
        let m = region_moments::<u8, 2>(&a.view(), &b.view(), (2, 1), [(0, 0), (1, 0)], region, Parallelism::Sequential);
        let mut want = Moments::<2>::default();
        for y in region.1..region.3 {
            for x in region.0..region.2 {
                let v = a.at(x, y) as u64;
                let t = [b.at(x - 2, y - 1) as u64, b.at(x - 1, y - 1) as u64];
                want.n += 1;
                want.a += v;
                want.aa += v * v;
                for k in 0..2 {
                    want.t[k] += t[k];
                    want.at[k] += v * t[k];
                    for l in k..2 {
                        want.tt[k][l] += t[k] * t[l];
                    }
                }
            }
        }
        assert_eq!(m, want);
        assert_eq!(region_moments::<u8, 2>(&a.view(), &b.view(), (2, 1), [(0, 0), (1, 0)], region, Parallelism::AllThreads), want);
    }

    #[test]
    fn u8_rows_longer_than_a_chunk_sum_exactly() {
        // Rows of 600 000 pixels of 255: u32 sums of a product a pixel would wrap past
        // 66 051 pixels, the AVX2 lanes' (two products a step of 16) past 528 416.
        let a = Image::<u8>::filled(600_000, 2, 255).unwrap();
        at_every_level(|_| {
            let m = region_moments::<u8, 1>(&a.view(), &a.view(), (0, 0), [(0, 0)], (0, 0, 600_000, 2), Parallelism::Sequential);
            assert_eq!((m.n, m.a, m.aa, m.tt[0][0]), (1_200_000, 1_200_000 * 255, 1_200_000 * 255 * 255, 1_200_000 * 255 * 255));
        });
    }

    /// The sums of one row from their definition, in u64.
    fn exact_row<const K: usize>(a: &[u8], t: [&[u8]; K]) -> Moments<K> {
        let mut m = Moments::<K> { n: a.len() as u64, ..Default::default() };
        for (i, &v) in a.iter().enumerate() {
            let (v, tap) = (v as u64, |k: usize| t[k][i] as u64);
            m.a += v;
            m.aa += v * v;
            for k in 0..K {
                m.t[k] += tap(k);
                m.at[k] += v * tap(k);
                for l in k..K {
                    m.tt[k][l] += tap(k) * tap(l);
                }
            }
        }
        m
    }

    #[test]
    fn u8_row_sums_are_exact_at_every_level_and_length() {
        let mut rng = crate::stitch::SplitMix64::new(11);
        let mut bytes = |n: usize| -> Vec<u8> { (0..n).map(|_| (rng.next_u64() >> 56) as u8).collect() };
        // Lengths around the 16- and 32-pixel steps, a PAL row, and rows of 255 (the largest
        // products).
        let lengths: Vec<usize> = (0..=40).chain([47, 48, 49, 63, 64, 65, 95, 96, 97, 127, 128, 129, 720]).collect();
        let rows: Vec<[Vec<u8>; 5]> = lengths.iter().map(|&n| core::array::from_fn(|_| bytes(n))).chain([core::array::from_fn(|_| vec![255; 721])]).collect();
        at_every_level(|_| {
            for [a, t0, t1, t2, t3] in &rows {
                assert_eq!(u8::row(a, [t0.as_slice()]), exact_row(a, [t0.as_slice()]), "1 tap, {} pixels", a.len());
                assert_eq!(u8::row(a, [t0.as_slice(), t1]), exact_row(a, [t0.as_slice(), t1]), "2 taps, {} pixels", a.len());
                let four = [t0.as_slice(), t1, t2, t3];
                assert_eq!(u8::row(a, four), exact_row(a, four), "4 taps, {} pixels", a.len());
            }
        });
    }

    #[test]
    fn pearson_of_the_moments_is_the_definitions() {
        for seed in 0..20 {
            let (a, b) = frames(seed, 40, 30);
            let (a16, b16) = (a.map(|v| v as u16 * 250 + (seed as u16 & 7)), b.map(|v| v as u16 * 250));
            for shift in [(3.0, -2.0), (2.25, 1.0), (-1.5, 0.75), (0.125, -3.625)] {
                let ((ox, oy), taps) = bilinear_taps(shift);
                let region = (6, 5, 34, 25);
                let (mut va, mut vb) = (Vec::new(), Vec::new());
                for y in region.1..region.3 {
                    for x in region.0..region.2 {
                        va.push(a.at(x, y) as f64);
                        vb.push(taps.iter().map(|&((dx, dy), w)| w * b.at((x as i64 - ox) as usize + dx, (y as i64 - oy) as usize + dy) as f64).sum());
                    }
                }
                let want = pearson(&va, &vb).unwrap();
                let got = match taps.len() {
                    1 => region_moments::<u8, 1>(&a.view(), &b.view(), (ox, oy), [taps[0].0], region, Parallelism::Sequential).pearson(&[taps[0].1]),
                    2 => region_moments::<u8, 2>(&a.view(), &b.view(), (ox, oy), [taps[0].0, taps[1].0], region, Parallelism::Sequential).pearson(&[taps[0].1, taps[1].1]),
                    _ => {
                        let offs = core::array::from_fn(|k| taps[k].0);
                        let w = core::array::from_fn(|k| taps[k].1);
                        let m8 = region_moments::<u8, 4>(&a.view(), &b.view(), (ox, oy), offs, region, Parallelism::Sequential).pearson(&w);
                        let m16 = region_moments::<u16, 4>(&a16.view(), &b16.view(), (ox, oy), offs, region, Parallelism::Sequential).pearson(&w);
                        // u16 frames that are the u8 ones scaled (and offset) correlate alike.
                        assert!((m16.unwrap() - m8.unwrap()).abs() < 1e-12, "{m16:?} {m8:?} want {:?}", pearson(&va, &vb));
                        m8
                    }
                };
                assert!((got.unwrap() - want).abs() < 1e-12, "seed {seed} shift {shift:?}: {got:?} vs {want}");
            }
        }
    }

    /// [`Moments::pearson`] with every centred moment taken in i128, as it is where the
    /// products do not fit i64.
    fn pearson_wide<const K: usize>(m: &Moments<K>, weights: &[f64; K]) -> Option<f64> {
        m.pearson_in(weights, false)
    }

    #[test]
    fn pearson_in_i64_where_it_fits_is_the_wide_arithmetics_to_the_bit() {
        let mut rng = crate::stitch::SplitMix64::new(41);
        let mut regimes = [0usize; 2];
        // Sums of `n` samples below `top`: first sums up to n top / 2, second sums the
        // product of the first two over n (the least they can be) plus up to n top more; up
        // to sums whose products pass i64 (u16 frames of some millions of pixels).
        for (n, top) in [(900u64, 256u64), (414_720, 256), (1 << 22, 65_536), (1 << 26, 65_536)] {
            for _ in 0..200 {
                let mut first = || n / 2 * (rng.next_u64() % top);
                let (a, t) = (first(), [first(), first(), first(), first()]);
                let mut second = |x: u64, y: u64| (x as u128 * y as u128 / n as u128) as u64 + rng.next_u64() % (n * top);
                let mut m = Moments::<4> { n, a, aa: second(a, a), t, at: [0; 4], tt: [[0; 4]; 4] };
                for k in 0..4 {
                    m.at[k] = second(a, t[k]);
                    for l in k..4 {
                        m.tt[k][l] = second(t[k], t[l]);
                    }
                }
                regimes[usize::from(m.products_fit_i64())] += 1;
                let w = [0.125, 0.375, 0.0625, 0.4375];
                let (got, want) = (m.pearson(&w), pearson_wide(&m, &w));
                assert_eq!(got.map(f64::to_bits), want.map(f64::to_bits), "{m:?}");
            }
        }
        assert!(regimes.iter().all(|&c| c > 100), "moments with products past i64 and within it: {regimes:?}");
        // At the edge: n^2 just within i64 (3 037 000 499^2) and just past it.
        for (n, fits) in [(3_037_000_499u64, true), (3_037_000_500, false)] {
            let m = Moments::<2> { n, a: n - 7, aa: n, t: [n - 3, n - 11], at: [n - 5, n - 9], tt: [[n - 1, n - 13], [0, n - 2]] };
            assert_eq!(m.products_fit_i64(), fits, "n {n}");
            let w = [0.25, 0.75];
            assert!(pearson_wide(&m, &w).is_some());
            assert_eq!(m.pearson(&w).map(f64::to_bits), pearson_wide(&m, &w).map(f64::to_bits), "n {n}");
        }
        // Sums whose products pass u64 take the wide path.
        let big = Moments::<1> { n: u64::MAX / 3, a: u64::MAX / 5, aa: u64::MAX / 2, t: [u64::MAX / 7], at: [u64::MAX / 3], tt: [[u64::MAX / 2]] };
        assert!(!big.products_fit_i64());
        assert_eq!(big.pearson(&[1.0]).map(f64::to_bits), pearson_wide(&big, &[1.0]).map(f64::to_bits));
    }

    #[test]
    fn flat_sides_and_samples_flat_by_cancellation_have_no_coefficient() {
        let (a, _) = frames(1, 40, 30);
        let flat = Image::<u8>::filled(40, 30, 9).unwrap();
        let region = (2, 2, 30, 20);
        assert_eq!(region_moments::<u8, 1>(&flat.view(), &a.view(), (0, 0), [(0, 0)], region, Parallelism::Sequential).pearson(&[1.0]), None);
        assert_eq!(region_moments::<u8, 1>(&a.view(), &flat.view(), (0, 0), [(0, 0)], region, Parallelism::Sequential).pearson(&[1.0]), None);
        // Columns alternating 0 and 200 sampled half way between: every sample is 100.
        let stripes = Image::from_fn(40, 30, |x, _| if x % 2 == 0 { 0u8 } else { 200 }).unwrap();
        let m = region_moments::<u8, 2>(&a.view(), &stripes.view(), (1, 0), [(0, 0), (1, 0)], region, Parallelism::Sequential);
        assert_eq!(m.pearson(&[0.5, 0.5]), None);
    }
}
