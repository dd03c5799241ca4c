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
//! chunk of 65 536 of them fits u32 lanes; u16 products fit 32 bits and add in u64 lanes.

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
        row_moments_u8(a, t)
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
    fn row_moments_u8<const K: usize>(a: &[u8], t: [&[u8]; K]) -> Moments<K> {
        row_moments(a, t)
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
    fn add(&mut self, o: &Self) {
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
        let n = self.n as i128;
        // n * centred moment, exact; then one rounding and the division.
        let count = self.n as f64;
        let centred = |x: u64, y: u64, xy: u64| i128_as_f64(n * xy as i128 - x as i128 * y as i128) / count;
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
/// each CPU level's clone, which vectorizes it at that level's width.
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
    let rows = map_indices(y1 - y0, par, |k| {
        let y = y0 + k;
        let a = &r.row(y)[x0..x1];
        let t: [&[S]; K] = core::array::from_fn(|j| {
            let (dx, dy) = offsets[j];
            let (mx, my) = ((x0 as i64 - ox) as usize + dx, (y as i64 - oy) as usize + dy);
            &m.row(my)[mx..mx + (x1 - x0)]
        });
        S::row(a, t)
    });
    rows.iter().fold(Moments::default(), |mut s, r| {
        s.add(r);
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::Image;
    use crate::stitch::quality::bilinear_taps;
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
        // A row of 70 000 pixels of 255: one chunk's u32 sums would wrap past 65 536.
        let a = Image::<u8>::filled(70_000, 2, 255).unwrap();
        let m = region_moments::<u8, 1>(&a.view(), &a.view(), (0, 0), [(0, 0)], (0, 0, 70_000, 2), Parallelism::Sequential);
        assert_eq!((m.n, m.a, m.aa, m.tt[0][0]), (140_000, 140_000 * 255, 140_000 * 255 * 255, 140_000 * 255 * 255));
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
