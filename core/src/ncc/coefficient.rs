//! The normalized cross-correlation coefficient (Pearson's r) between a template `t` and a
//! same-size window `w` of a frame:
//!
//! `r = sum((t - mean_t)(w - mean_w)) / sqrt(sum((t - mean_t)^2) * sum((w - mean_w)^2))`.
//!
//! Following Lewis ("Fast normalized cross-correlation", 1995), everything that depends on
//! the template alone (its sums, its norm) is computed once in [`Template::new`], the
//! window's sum and sum of squares come from the frame's [`Integral`] images, and per
//! candidate position only the cross term remains, a dot product:
//!
//! * u8 / u16: the exact integer `S_tw = sum(t w)` (vectorized widening multiply-adds), and
//!   `r = (n S_tw - S_t S_w) / sqrt((n S_tt - S_t^2)(n S_ww - S_w^2))` with every sum an
//!   exact integer: the only rounding is the final division and square roots in f64.
//! * f32: the template is stored zero-mean, `t' = t - mean_t`, so that
//!   `sum(t' w) = sum(t' (w - mean_w))` needs no window mean (`wide` f32x8 dot product per
//!   row, rows summed in f64).
//!
//! A logarithmic search evaluates a few dozen windows a template, so most of a frame's
//! tables were never read: on u8 frames it takes each window's sums from its pixels in the
//! same pass as its cross term instead ([`SearchFrame::for_few_windows`]), the same exact
//! integers, and no tables are made.
//!
//! A template or window with zero variance has no defined coefficient: [`coefficient`]
//! returns `None` for it, and the searches treat it as worse than any real coefficient, so
//! a flat window is never chosen as a match. Results are clamped to `[-1, 1]`.

use super::integral::{Integral, IntegralSample};
use crate::error::{Error, Result};
use crate::image::ImageView;
use crate::parallel::Parallelism;
use alloc::vec::Vec;
use crate::cpu::multiversion;

/// Largest template side accepted (the integer row dot products of u8 templates stay in
/// u32 up to this width); u8 templates are also limited in area by
/// [`IntegralSample::MAX_AREA`].
pub const MAX_TEMPLATE: usize = 4095;

/// The value the searches give a flat (zero-variance) window: below every coefficient.
pub(crate) const FLAT: f64 = f64::NEG_INFINITY;

/// A sample type the NCC accepts: gray u8, u16 (exact integer arithmetic) and f32.
pub trait NccSample: IntegralSample {
    /// Template element as stored for the cross term (the pixel itself for integers, the
    /// zero-mean value for f32).
    type Tpl: Copy + Default + Send + Sync + core::fmt::Debug + 'static;
    /// Accumulator of the cross term over a template: u64 (exact) or f64.
    type Cross: Copy + Default + Send + Sync + core::fmt::Debug + 'static;
    /// Stores one template pixel, `mean` being the template's mean.
    fn tpl(self, mean: f64) -> Self::Tpl;
    /// The cross term `sum(t * w)` of the template pixels `tpl` (rows of `tw`) against the
    /// window of `span` whose row r starts at `start + r * stride`.
    fn cross(tpl: &[Self::Tpl], tw: usize, span: &[Self], start: usize, stride: usize) -> Self::Cross;
    /// The cross terms of `out.len()` consecutive window positions along x, the first at
    /// `start` (`out[k]` = [`NccSample::cross`] at `start + k`), for the exhaustive search.
    fn cross_run(tpl: &[Self::Tpl], tw: usize, span: &[Self], start: usize, stride: usize, out: &mut [Self::Cross]) {
        for (k, o) in out.iter_mut().enumerate() {
            *o = Self::cross(tpl, tw, span, start + k, stride);
        }
    }
    /// The sums of the pixels of `src` and of their squares ([`IntegralSample::terms`]),
    /// added in row-major order.
    fn sums(src: ImageView<'_, Self>) -> [Self::Acc; 2] {
        plain_sums(src)
    }
    /// Whether a log search may take each window's sums from its pixels
    /// ([`NccSample::cross_sums`]) and make no integral images: where those sums are the
    /// tables' to the bit (integer sums, which wrap alike in any order) and cost little
    /// beside the cross term (u8, summed in its pass). The stitcher does so only where a
    /// frame is large for its searches (`stitch::register::search_frame`'s size rule).
    const DIRECT_SUMS: bool = false;
    /// [`NccSample::cross`] with the window's sum and sum of squares, from its pixels.
    fn cross_sums(tpl: &[Self::Tpl], tw: usize, span: &[Self], start: usize, stride: usize) -> (Self::Cross, [Self::Acc; 2]) {
        let rows = tpl.len() / tw;
        let mut sums = [Self::Acc::default(); 2];
        for r in 0..rows {
            for &p in &span[start + r * stride..start + r * stride + tw] {
                let [a, b] = p.terms(0.0);
                sums = [Self::add(sums[0], a), Self::add(sums[1], b)];
            }
        }
        (Self::cross(tpl, tw, span, start, stride), sums)
    }
    /// The template statistics from its sums and its stored pixels (in row-major order).
    fn stats(n: u64, s1: Self::Acc, s2: Self::Acc, pixels: impl Iterator<Item = Self::Tpl>) -> TemplateStats;
    /// True for a template with zero variance.
    fn is_flat(t: &TemplateStats) -> bool;
    /// `r` from the template statistics, the cross term, and the window's integral sums;
    /// `None` when either side is flat. `flat_tol` is the window variance (sum of squared
    /// deviations) at or below which an f32 window counts as flat.
    fn finish(t: &TemplateStats, cross: Self::Cross, wsum: Self::Acc, wsq: Self::Acc, flat_tol: f64) -> Option<f64>;
}

/// What [`Template::new`] computes once per template.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TemplateStats {
    /// Pixel count `n = width * height`.
    pub n: u64,
    /// `S_t` (exact for integers).
    pub sum: f64,
    /// Integer samples: `n S_tt - S_t^2`, exact (n^2 times the variance); 0 for f32.
    pub n2_var_int: i128,
    /// `n2_var_int` as f64 (converted once, not per candidate).
    pub n2_var: f64,
    /// `sum((t - mean_t)^2)`.
    pub dev: f64,
}

impl TemplateStats {
    /// The statistics of `src` as a template ([`Template::new`]'s, to the bit), without
    /// keeping its pixels: for a device that cuts templates from the frames it holds.
    /// The errors are [`Template::new`]'s.
    pub fn of<T: NccSample>(src: ImageView<'_, T>) -> Result<TemplateStats> {
        let sums = template_sums(src)?;
        let mean = sums.mean();
        Ok(T::stats(sums.n, sums.s1, sums.s2, src.rows().flat_map(|row| row.iter().map(move |&p| p.tpl(mean)))))
    }

    /// The statistics of an integer template of `n` pixels from its exact sums `s1` (of
    /// the pixels) and `s2` (of their squares): [`of`](Self::of)'s for u8 and u16 pixels,
    /// for a device that sums the templates it cuts.
    pub fn of_int_sums(n: u64, s1: u64, s2: u64) -> TemplateStats {
        int_stats(n, s1, s2)
    }

    /// The errors of [`of`](Self::of) that depend on a template's size `(w, h)` alone: a
    /// side above [`MAX_TEMPLATE`], an area above [`IntegralSample::MAX_AREA`].
    pub fn check_size<T: NccSample>((w, h): (usize, usize)) -> Result<()> {
        crate::error::require_range("template width", w, 1, MAX_TEMPLATE as i64)?;
        crate::error::require_range("template height", h, 1, MAX_TEMPLATE as i64)?;
        if (w * h) as u64 > T::MAX_AREA {
            return Err(Error::InvalidParameter {
                name: "template",
                reason: alloc::format!("{w}x{h} exceeds the {} pixels whose {} sums stay exact", T::MAX_AREA, T::NAME),
            });
        }
        Ok(())
    }

    /// Variance per pixel, `dev / n` (the texture measure of registration).
    pub fn variance(&self) -> f64 {
        self.dev / self.n as f64
    }
}

/// `sum(t * w)` over a template of `tw`-pixel rows against the window of `span` whose rows
/// start at `start + r * stride`: with AVX-512, 32 pixels of a row a step
/// ([`avx512::cross_sums_u8`]); with AVX2, rows of 16 pixels or more in whole vectors
/// ([`x86::cross_u8`]); otherwise in fixed chunks ([`cross_u8_chunks`]).
#[inline]
fn cross_u8(tpl: &[u8], tw: usize, span: &[u8], start: usize, stride: usize) -> u64 {
    #[cfg(target_arch = "x86_64")]
    match crate::cpu::level() {
        // SAFETY: the CPU has AVX-512 F, BW and VL.
        crate::cpu::Level::Avx512 => return unsafe { avx512::cross_sums_u8::<false>(tpl, tw, span, start, stride).0 },
        // SAFETY: the CPU has AVX2; rows are at least 16 pixels wide.
        crate::cpu::Level::Avx2 if tw >= 16 => return unsafe { x86::cross_u8(tpl, tw, span, start, stride) },
        _ => {}
    }
    cross_u8_chunks(tpl, tw, span, start, stride)
}

/// [`cross_u8`] with the window's sum and sum of squares ([`NccSample::cross_sums`]).
#[inline]
fn cross_sums_u8(tpl: &[u8], tw: usize, span: &[u8], start: usize, stride: usize) -> (u64, [u32; 2]) {
    #[cfg(target_arch = "x86_64")]
    match crate::cpu::level() {
        // SAFETY: the CPU has AVX-512 F, BW and VL.
        crate::cpu::Level::Avx512 => return unsafe { avx512::cross_sums_u8::<true>(tpl, tw, span, start, stride) },
        // SAFETY: the CPU has AVX2; rows are at least 16 pixels wide.
        crate::cpu::Level::Avx2 if tw >= 16 => return unsafe { x86::cross_sums_u8(tpl, tw, span, start, stride) },
        _ => {}
    }
    let rows = tpl.len() / tw;
    let window = ImageView::new(&span[start..start + (rows.max(1) - 1) * stride + tw], tw, rows, stride);
    let sums = match window {
        Ok(v) if rows > 0 => sums_u8(v),
        _ => [0, 0],
    };
    (cross_u8_chunks(tpl, tw, span, start, stride), sums)
}

multiversion! {
    /// [`cross_u8`] one dispatch per window, not per row. Rows go in fixed chunks of 16 and 8
    /// pixels that LLVM turns into widening multiply-adds (vpmaddwd), which the short rows of
    /// small templates (25 = 16 + 8 + 1) need: a plain loop would leave them to the scalar
    /// remainder. Exact: a row sums to at most 4095 * 255^2 < 2^32.
    fn cross_u8_chunks(tpl: &[u8], tw: usize, span: &[u8], start: usize, stride: usize) -> u64 {
        let mut total = 0u64;
        for (r, t) in tpl.chunks_exact(tw).enumerate() {
            let w = &span[start + r * stride..start + r * stride + tw];
            let mut acc = 0u32;
            let (t16, w16) = (t.chunks_exact(16), w.chunks_exact(16));
            let (tr, wr) = (t16.remainder(), w16.remainder());
            for (a, b) in t16.zip(w16) {
                acc = acc.wrapping_add(a.iter().zip(b).map(|(&x, &y)| x as u32 * y as u32).sum::<u32>());
            }
            let (t8, w8) = (tr.chunks_exact(8), wr.chunks_exact(8));
            let (tr, wr) = (t8.remainder(), w8.remainder());
            for (a, b) in t8.zip(w8) {
                acc = acc.wrapping_add(a.iter().zip(b).map(|(&x, &y)| x as u32 * y as u32).sum::<u32>());
            }
            for (&x, &y) in tr.iter().zip(wr) {
                acc = acc.wrapping_add(x as u32 * y as u32);
            }
            total += acc as u64;
        }
        total
    }
}

multiversion! {
    /// [`NccSample::cross_run`] for u8, 16 positions at a time: each template pixel is
    /// broadcast against 16 consecutive window pixels and accumulated into 16 u32 lanes (one
    /// widening multiply-add per template pixel for 16 positions, instead of 16 dot products
    /// over short rows). Exact: a position's sum is at most 66051 * 255^2 < 2^32
    /// ([`IntegralSample::MAX_AREA`]).
    fn cross_run_u8(tpl: &[u8], tw: usize, span: &[u8], start: usize, stride: usize, out: &mut [u64]) {
        const LANES: usize = 16;
        for (b, chunk) in out.chunks_mut(LANES).enumerate() {
            let s0 = start + b * LANES;
            if chunk.len() < LANES {
                for (k, o) in chunk.iter_mut().enumerate() {
                    *o = cross_u8(tpl, tw, span, s0 + k, stride);
                }
                continue;
            }
            let mut acc = [0u32; LANES];
            for (r, trow) in tpl.chunks_exact(tw).enumerate() {
                let wrow = &span[s0 + r * stride..s0 + r * stride + tw + LANES - 1];
                for (j, &t) in trow.iter().enumerate() {
                    for (a, &w) in acc.iter_mut().zip(&wrow[j..j + LANES]) {
                        *a = a.wrapping_add(t as u32 * w as u32);
                    }
                }
            }
            for (o, &a) in chunk.iter_mut().zip(&acc) {
                *o = a as u64;
            }
        }
    }
}

/// The sum and the sum of squares of the u8 pixels of `src` (a template's: the texture
/// test of every template of a pair). Exact within [`IntegralSample::MAX_AREA`] pixels
/// (66051 * 255^2 < 2^32).
fn sums_u8(src: ImageView<'_, u8>) -> [u32; 2] {
    #[cfg(target_arch = "x86_64")]
    if crate::cpu::level() >= crate::cpu::Level::Avx2 && src.width() >= 8 {
        // SAFETY: the CPU has AVX2; rows are at least 8 pixels wide.
        return unsafe { x86::sums_u8(src) };
    }
    plain_sums(src)
}

/// [`NccSample::sums`] pixel by pixel.
fn plain_sums<T: IntegralSample>(src: ImageView<'_, T>) -> [T::Acc; 2] {
    src.rows().flatten().fold([T::Acc::default(); 2], |[s1, s2], &p| {
        let [a, b] = p.terms(0.0);
        [T::add(s1, a), T::add(s2, b)]
    })
}

/// The u8 cross term with AVX-512: a row's pixels 32 a step, template and window widened to
/// the i16 lanes of a 512-bit vector and multiplied in pairs into i32 lanes (`vpmaddwd`), a
/// row's last partial step loaded under a mask (the lanes past the row zero, their bytes not
/// read). A PAL template's row of 25 or 31 pixels is one step, where AVX2 takes two and
/// zeroes the overlap of the second.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use core::arch::x86_64::*;

    /// `sum(t * w)` over the window ([`super::cross_u8`]) and, with `SUMS`, the window's sum
    /// and sum of squares in lanes of their own (its pixels multiplied by ones and by
    /// themselves; 0 and 0 without). Exact as the AVX2 kernels are: every product is
    /// positive and the lanes together hold the window's sums, below 2^32 for the largest
    /// template ([`super::IntegralSample::MAX_AREA`]), so no lane wraps and the lanes' sum
    /// taken wrapping in 32 bits is the sum; the window's sums wrap to u32 as the plain sums
    /// do.
    ///
    /// # Safety
    /// The CPU has AVX-512 F, BW and VL.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub(super) unsafe fn cross_sums_u8<const SUMS: bool>(tpl: &[u8], tw: usize, span: &[u8], start: usize, stride: usize) -> (u64, [u32; 2]) {
        let rows = if tw == 0 { 0 } else { tpl.len() / tw };
        if rows == 0 {
            return (0, [0, 0]);
        }
        // The window's rows checked once (as slicing each row would): they end in `span`.
        let window = &span[start..start + (rows - 1) * stride + tw];
        let whole = tw / 32 * 32;
        // The bytes of the row's last partial step.
        let tail: __mmask32 = (1u64 << (tw % 32)) as u32 - 1;
        let ones = _mm512_set1_epi16(1);
        let (mut acc, mut s, mut q) = (_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512());
        let mut add = |t: __m512i, w: __m512i| {
            acc = _mm512_add_epi32(acc, _mm512_madd_epi16(t, w));
            if SUMS {
                s = _mm512_add_epi32(s, _mm512_madd_epi16(w, ones));
                q = _mm512_add_epi32(q, _mm512_madd_epi16(w, w));
            }
        };
        for r in 0..rows {
            // SAFETY: template row r is tpl[r tw..(r + 1) tw] and window row r is
            // window[r stride..r stride + tw], both in bounds; each whole step reads 32 bytes
            // of the row, the masked step only the row's remaining bytes.
            unsafe {
                let (t, w) = (tpl.as_ptr().add(r * tw), window.as_ptr().add(r * stride));
                let mut x = 0;
                while x < whole {
                    add(_mm512_cvtepu8_epi16(_mm256_loadu_si256(t.add(x).cast())), _mm512_cvtepu8_epi16(_mm256_loadu_si256(w.add(x).cast())));
                    x += 32;
                }
                if tail != 0 {
                    add(_mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(tail, t.add(x).cast())), _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(tail, w.add(x).cast())));
                }
            }
        }
        let lanes = |v: __m512i| _mm512_reduce_add_epi32(v) as u32;
        (lanes(acc) as u64, [lanes(s), lanes(q)])
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use crate::image::ImageView;
    use crate::simd::x86::{u32_lanes_sum, widened_u8x16 as widened};
    use core::arch::x86_64::*;

    /// [`super::sums_u8`] with 8 pixels a step widened to the u32 lanes of a vector (each
    /// lane's square a multiply-add of its low half), a row's last partial step read as its
    /// last 8 pixels with the lanes already counted zeroed; the lanes summed once at the
    /// end. A template's rows are short (31 pixels in PAL): loops over whole rows, or a
    /// vector sum per chunk, spend most of their time outside the vector adds.
    ///
    /// # Safety
    /// The CPU has AVX2, and `src` is at least 8 pixels wide.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn sums_u8(src: ImageView<'_, u8>) -> [u32; 2] {
        let w = src.width();
        let rest = (w % 8) as i32;
        // Lanes k >= 8 - rest of the row's last 8 pixels are not in its whole steps.
        let keep = _mm256_cmpgt_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(7 - rest));
        let (mut s, mut q) = (_mm256_setzero_si256(), _mm256_setzero_si256());
        for row in src.rows() {
            let row = &row[..w];
            let mut add = |v: __m256i| {
                s = _mm256_add_epi32(s, v);
                q = _mm256_add_epi32(q, _mm256_madd_epi16(v, v));
            };
            for c in row.chunks_exact(8) {
                // SAFETY: c holds 8 bytes.
                add(_mm256_cvtepu8_epi32(unsafe { _mm_loadl_epi64(c.as_ptr().cast()) }));
            }
            if rest != 0 {
                // SAFETY: w >= 8: the row's last 8 bytes.
                let tail = _mm256_cvtepu8_epi32(unsafe { _mm_loadl_epi64(row[w - 8..].as_ptr().cast()) });
                add(_mm256_and_si256(tail, keep));
            }
        }
        // Wrapped to u32, as the plain sums wrap.
        [u32_lanes_sum(s) as u32, u32_lanes_sum(q) as u32]
    }

    /// [`super::cross_u8`] for rows of 16 pixels or more: 16 pixels of a row a step,
    /// template and window widened to i16 and multiplied in pairs into i32 lanes
    /// (`vpmaddwd`) that add up over the whole template; a row's partial step read as its
    /// last 16 pixels with the template lanes already counted zeroed; one horizontal sum a
    /// window. The per-row vector sums of the chunked loop were most of its time on 25- and
    /// 31-pixel rows. Exact: every product pair is positive and the lanes together hold the
    /// window's sum, at most 66051 * 255^2 < 2^32 ([`super::IntegralSample::MAX_AREA`]), so
    /// no lane wraps.
    ///
    /// # Safety
    /// The CPU has AVX2, and `tw >= 16`.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn cross_u8(tpl: &[u8], tw: usize, span: &[u8], start: usize, stride: usize) -> u64 {
        let rest = (tw % 16) as i16;
        // Lanes k >= 16 - rest of the row's last 16 pixels are not in its whole steps.
        let keep = _mm256_cmpgt_epi16(_mm256_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm256_set1_epi16(15 - rest));
        let rows = tpl.len() / tw;
        // The window's rows checked once (as slicing each row would): they end in `span`.
        if rows == 0 {
            return 0;
        }
        let window = &span[start..start + (rows - 1) * stride + tw];
        let mut acc = _mm256_setzero_si256();
        for r in 0..rows {
            // SAFETY: template row r is tpl[r tw..(r + 1) tw] and window row r is
            // window[r stride..r stride + tw], both in bounds; each load reads 16 bytes of
            // one of them, at most its last 16 (tw >= 16).
            unsafe {
                let (t, w) = (tpl.as_ptr().add(r * tw), window.as_ptr().add(r * stride));
                let mut x = 0;
                while x + 16 <= tw {
                    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(widened(t.add(x)), widened(w.add(x))));
                    x += 16;
                }
                if rest != 0 {
                    let tail = _mm256_and_si256(widened(t.add(tw - 16)), keep);
                    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(tail, widened(w.add(tw - 16))));
                }
            }
        }
        u32_lanes_sum(acc)
    }

    /// [`cross_u8`] with the window's sum and sum of squares in lanes of their own (the
    /// window's pixels multiplied by ones and by themselves), exact as the cross term is.
    ///
    /// # Safety
    /// The CPU has AVX2, and `tw >= 16`.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn cross_sums_u8(tpl: &[u8], tw: usize, span: &[u8], start: usize, stride: usize) -> (u64, [u32; 2]) {
        let rest = (tw % 16) as i16;
        let keep = _mm256_cmpgt_epi16(_mm256_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm256_set1_epi16(15 - rest));
        let rows = tpl.len() / tw;
        if rows == 0 {
            return (0, [0, 0]);
        }
        let window = &span[start..start + (rows - 1) * stride + tw];
        let ones = _mm256_set1_epi16(1);
        let (mut acc, mut s, mut q) = (_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256());
        for r in 0..rows {
            // SAFETY: as in cross_u8.
            unsafe {
                let (t, w) = (tpl.as_ptr().add(r * tw), window.as_ptr().add(r * stride));
                let mut x = 0;
                while x + 16 <= tw {
                    let wv = widened(w.add(x));
                    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(widened(t.add(x)), wv));
                    s = _mm256_add_epi32(s, _mm256_madd_epi16(wv, ones));
                    q = _mm256_add_epi32(q, _mm256_madd_epi16(wv, wv));
                    x += 16;
                }
                if rest != 0 {
                    let tail = _mm256_and_si256(widened(t.add(tw - 16)), keep);
                    let wv = _mm256_and_si256(widened(w.add(tw - 16)), keep);
                    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(tail, wv));
                    s = _mm256_add_epi32(s, _mm256_madd_epi16(wv, ones));
                    q = _mm256_add_epi32(q, _mm256_madd_epi16(wv, wv));
                }
            }
        }
        (u32_lanes_sum(acc), [u32_lanes_sum(s) as u32, u32_lanes_sum(q) as u32])
    }
}

multiversion! {
    /// As [`cross_u8`] for u16 (products in u32, row sums in u64).
    fn cross_u16(tpl: &[u16], tw: usize, span: &[u16], start: usize, stride: usize) -> u64 {
        let mut total = 0u64;
        for (r, t) in tpl.chunks_exact(tw).enumerate() {
            let w = &span[start + r * stride..start + r * stride + tw];
            let (t8, w8) = (t.chunks_exact(8), w.chunks_exact(8));
            let (tr, wr) = (t8.remainder(), w8.remainder());
            for (a, b) in t8.zip(w8) {
                total += a.iter().zip(b).map(|(&x, &y)| (x as u32 * y as u32) as u64).sum::<u64>();
            }
            for (&x, &y) in tr.iter().zip(wr) {
                total += (x as u32 * y as u32) as u64;
            }
        }
        total
    }
}

fn int_stats(n: u64, s1: u64, s2: u64) -> TemplateStats {
    // Exact: S_t and S_tt fit u64 for every template up to MAX_TEMPLATE^2 u16 pixels, and
    // the products are formed in i128.
    let v = n as i128 * s2 as i128 - s1 as i128 * s1 as i128;
    let n2_var = i128_as_f64(v);
    TemplateStats { n, sum: s1 as f64, n2_var_int: v, n2_var, dev: n2_var / n as f64 }
}

/// `v as f64` (the nearest f64), through i64 where `v` fits it: the same rounding, without
/// the library call that converting an i128 takes (only made where it does not).
#[inline]
pub(crate) fn i128_as_f64(v: i128) -> f64 {
    /// Out of line: LLVM takes an inline i128 conversion for a cheap instruction and
    /// makes the library call before the test, on every value.
    #[cold]
    #[inline(never)]
    fn wide(v: i128) -> f64 {
        v as f64
    }
    i64::try_from(v).map_or_else(|_| wide(v), |v| v as f64)
}

/// `r` from exact integer sums, in the integer type `$w` wide enough for the products
/// (i64 for u8, whose sums are bounded by MAX_AREA; i128 for u16). Only the final division
/// and square root round.
macro_rules! finish_int {
    ($name:ident, $w:ty) => {
        #[inline]
        fn $name(t: &TemplateStats, stw: u64, wsum: u64, wsq: u64) -> Option<f64> {
            let n = t.n as $w;
            let (sw, sww) = (wsum as $w, wsq as $w);
            let var_w = n * sww - sw * sw;
            if t.n2_var_int <= 0 || var_w <= 0 {
                return None;
            }
            // t.sum is an exact integer below 2^53, so the cast back is exact.
            let num = n * stw as $w - (t.sum as $w) * sw;
            #[allow(clippy::unnecessary_cast)]
            let r = i128_as_f64(num as i128) / libm::sqrt(t.n2_var * i128_as_f64(var_w as i128));
            Some(r.clamp(-1.0, 1.0))
        }
    };
}
// u8: n <= 66051, S_tw, S_ww <= 66051 * 255^2, so n * S_tw < 2^48 and S_w^2 < 2^49.
finish_int!(finish_u8, i64);
finish_int!(finish_u16, i128);

macro_rules! int_ncc {
    ($t:ty, $acc:ty, $finish:ident, $cross:ident $(, $run:ident, $sums:ident)?) => {
        impl NccSample for $t {
            type Tpl = $t;
            type Cross = u64;
            #[inline]
            fn tpl(self, _mean: f64) -> $t {
                self
            }
            #[inline]
            fn cross(tpl: &[$t], tw: usize, span: &[$t], start: usize, stride: usize) -> u64 {
                $cross(tpl, tw, span, start, stride)
            }
            $(
            fn sums(src: ImageView<'_, $t>) -> [$acc; 2] {
                $sums(src)
            }
            )?
            $(
            fn cross_run(tpl: &[$t], tw: usize, span: &[$t], start: usize, stride: usize, out: &mut [u64]) {
                $run(tpl, tw, span, start, stride, out)
            }
            // (The types with vectorized runs and sums, u8, sum their windows in the cross
            // term's pass.)
            const DIRECT_SUMS: bool = true;
            #[inline]
            fn cross_sums(tpl: &[$t], tw: usize, span: &[$t], start: usize, stride: usize) -> (u64, [$acc; 2]) {
                cross_sums_u8(tpl, tw, span, start, stride)
            }
            )?
            fn stats(n: u64, s1: $acc, s2: $acc, _pixels: impl Iterator<Item = $t>) -> TemplateStats {
                int_stats(n, s1 as u64, s2 as u64)
            }
            fn is_flat(t: &TemplateStats) -> bool {
                t.n2_var_int <= 0
            }
            #[inline]
            fn finish(t: &TemplateStats, cross: u64, wsum: $acc, wsq: $acc, _tol: f64) -> Option<f64> {
                $finish(t, cross, wsum as u64, wsq as u64)
            }
        }
    };
}
int_ncc!(u8, u32, finish_u8, cross_u8, cross_run_u8, sums_u8);
int_ncc!(u16, u64, finish_u16, cross_u16);

impl NccSample for f32 {
    type Tpl = f32;
    type Cross = f64;
    #[inline]
    fn tpl(self, mean: f64) -> f32 {
        (self as f64 - mean) as f32
    }
    #[inline]
    fn cross(tpl: &[f32], tw: usize, span: &[f32], start: usize, stride: usize) -> f64 {
        // f32x8 lanes per row (`simd::dot_f32`), rows summed in f64.
        tpl.chunks_exact(tw)
            .enumerate()
            .map(|(r, t)| crate::simd::dot_f32(t, &span[start + r * stride..start + r * stride + tw]) as f64)
            .sum()
    }
    fn stats(n: u64, s1: f64, _s2: f64, pixels: impl Iterator<Item = f32>) -> TemplateStats {
        // The norm of the stored zero-mean values, so numerator and norm use the same t'.
        let dev = pixels.map(|t| t as f64 * t as f64).sum();
        TemplateStats { n, sum: s1, n2_var_int: 0, n2_var: 0.0, dev }
    }
    fn is_flat(t: &TemplateStats) -> bool {
        t.dev <= 0.0
    }
    #[inline]
    fn finish(t: &TemplateStats, cross: f64, wsum: f64, wsq: f64, tol: f64) -> Option<f64> {
        let var_w = wsq - wsum * wsum / t.n as f64;
        if t.dev <= 0.0 || var_w <= tol {
            return None;
        }
        let r = cross / libm::sqrt(t.dev * var_w);
        Some(r.clamp(-1.0, 1.0))
    }
}

/// What a registration keeps of a template it cuts: the [`Template`] itself, to search
/// on the CPU, or only its [`TemplateStats`], for a device that reads the template's
/// pixels from the reference frame it holds.
pub trait TemplateCut<T: NccSample>: Sized {
    /// `src` as a template (the errors of [`Template::new`]).
    fn cut(src: ImageView<'_, T>) -> Result<Self>;
    fn stats(&self) -> &TemplateStats;
}

impl<T: NccSample> TemplateCut<T> for Template<T> {
    fn cut(src: ImageView<'_, T>) -> Result<Self> {
        Template::new(src)
    }
    fn stats(&self) -> &TemplateStats {
        &self.stats
    }
}

impl<T: NccSample> TemplateCut<T> for TemplateStats {
    fn cut(src: ImageView<'_, T>) -> Result<Self> {
        TemplateStats::of(src)
    }
    fn stats(&self) -> &TemplateStats {
        self
    }
}

/// A template's pixel count and sums (of the pixels and their squares).
struct TemplateSums<T: NccSample> {
    n: u64,
    s1: T::Acc,
    s2: T::Acc,
}

impl<T: NccSample> TemplateSums<T> {
    fn mean(&self) -> f64 {
        T::to_f64(self.s1) / self.n as f64
    }
}

/// The sums of `src` as a template, checked: a side above [`MAX_TEMPLATE`], an area above
/// [`IntegralSample::MAX_AREA`], non-finite f32 sums.
fn template_sums<T: NccSample>(src: ImageView<'_, T>) -> Result<TemplateSums<T>> {
    TemplateStats::check_size::<T>(src.size())?;
    let [s1, s2] = T::sums(src);
    let (sum, sq) = (T::to_f64(s1), T::to_f64(s2));
    if !sum.is_finite() || !sq.is_finite() {
        return Err(Error::InvalidFloat { name: "template pixel", value: sq, expected: "finite values" });
    }
    Ok(TemplateSums { n: (src.width() * src.height()) as u64, s1, s2 })
}

/// A template prepared for correlation: its pixels (contiguous, in the form the cross term
/// wants) and its statistics.
#[derive(Clone, Debug)]
pub struct Template<T: NccSample> {
    width: usize,
    height: usize,
    pixels: Vec<T::Tpl>,
    stats: TemplateStats,
}

impl<T: NccSample> Default for Template<T> {
    /// An empty template, a buffer for [`Template::set`].
    fn default() -> Self {
        Template { width: 0, height: 0, pixels: Vec::new(), stats: TemplateStats { n: 0, sum: 0.0, n2_var_int: 0, n2_var: 0.0, dev: 0.0 } }
    }
}

impl<T: NccSample> Template<T> {
    /// Prepares `src` as a template. Errors: a side above [`MAX_TEMPLATE`], an area above
    /// [`IntegralSample::MAX_AREA`] (u8: 66051 pixels, e.g. 257 x 257), non-finite f32.
    pub fn new(src: ImageView<'_, T>) -> Result<Self> {
        let mut me = Self::default();
        me.set(src)?;
        Ok(me)
    }

    /// Re-prepares this template from `src`, reusing its buffer.
    pub fn set(&mut self, src: ImageView<'_, T>) -> Result<()> {
        let sums = template_sums(src)?;
        let mean = sums.mean();
        self.pixels.clear();
        // Room for every pixel at once (grown row by row, a new template's buffer would be
        // reallocated and copied about log2(n) times).
        self.pixels.reserve(src.width() * src.height());
        for row in src.rows() {
            self.pixels.extend(row.iter().map(|&p| p.tpl(mean)));
        }
        self.stats = T::stats(sums.n, sums.s1, sums.s2, self.pixels.iter().copied());
        (self.width, self.height) = src.size();
        Ok(())
    }

    pub fn size(&self) -> (usize, usize) {
        (self.width, self.height)
    }
    pub fn stats(&self) -> &TemplateStats {
        &self.stats
    }
    /// True when the template has zero variance (no coefficient is defined for it).
    pub fn is_flat(&self) -> bool {
        T::is_flat(&self.stats)
    }
}

/// A frame prepared for searching: the pixels and their integral images.
#[derive(Clone, Debug)]
pub struct SearchFrame<'a, T: NccSample> {
    view: ImageView<'a, T>,
    integral: Integral<T>,
    flat_tol: f64,
    /// Whether `integral` holds the frame's tables; without them a window's sums are taken
    /// from its pixels ([`NccSample::cross_sums`]).
    tables: bool,
}

impl<'a, T: NccSample> SearchFrame<'a, T> {
    /// Computes the integral images of `view`. Errors: non-finite f32 pixels.
    pub fn new(view: ImageView<'a, T>) -> Result<Self> {
        Self::with_buffer(view, Integral::default())
    }
    /// As [`SearchFrame::new`], computing the integral images into `buffer` (reused).
    pub fn with_buffer(view: ImageView<'a, T>, buffer: Integral<T>) -> Result<Self> {
        Self::with_buffer_on(view, buffer, Parallelism::Sequential)
    }
    /// As [`SearchFrame::with_buffer`], the integral images on `par`'s threads
    /// ([`Integral::compute_on`]: the same tables).
    pub fn with_buffer_on(view: ImageView<'a, T>, mut buffer: Integral<T>, par: Parallelism) -> Result<Self> {
        buffer.compute_on(view, par)?;
        Self::with_integral(view, buffer)
    }
    /// As [`SearchFrame::with_buffer`] with `integral` already computed from `view` (on
    /// another thread, while the previous frame was registered). Errors: sizes differ.
    pub(crate) fn with_integral(view: ImageView<'a, T>, integral: Integral<T>) -> Result<Self> {
        if integral.size() != view.size() {
            return Err(Error::SizeMismatch { expected: view.size(), got: integral.size() });
        }
        // An f32 window variance is a difference of prefix sums whose rounding error is
        // about 4 eps times the largest prefix; at or below 64 eps of it a window is flat.
        let flat_tol = 64.0 * f64::EPSILON * integral.squares_scale();
        Ok(SearchFrame { view, integral, flat_tol, tables: true })
    }

    /// A frame for searches that evaluate few windows each (the logarithmic search): where
    /// a window's sums from its pixels are the tables' to the bit ([`NccSample::DIRECT_SUMS`],
    /// integer pixels), no tables are made and each evaluation sums its window with its
    /// cross term; otherwise [`SearchFrame::with_buffer_on`]. `buffer` is kept either way.
    pub fn for_few_windows(view: ImageView<'a, T>, buffer: Integral<T>, par: Parallelism) -> Result<Self> {
        if !T::DIRECT_SUMS {
            return Self::with_buffer_on(view, buffer, par);
        }
        Ok(SearchFrame { view, integral: buffer, flat_tol: 0.0, tables: false })
    }
    pub fn view(&self) -> ImageView<'a, T> {
        self.view
    }
    pub fn size(&self) -> (usize, usize) {
        self.view.size()
    }
    /// Whether the frame's integral images were made ([`SearchFrame::for_few_windows`] makes
    /// none for u8).
    #[cfg(test)]
    pub(crate) fn has_tables(&self) -> bool {
        self.tables
    }
    /// Gives back the integral images (to reuse their buffer).
    pub fn into_integral(self) -> Integral<T> {
        self.integral
    }

    /// Asks the CPU to bring into its cache the rows of the windows a search around `start`
    /// (top-left window position) begins with: the `size` window and `margin` pixels around
    /// it, clipped to the frame. A hint: nothing is read, and a search gives the same result
    /// with it or without. A search's first windows otherwise wait on the frame's rows
    /// coming from L2 or further, one window's 25 or 31 rows after another: asked while the
    /// previous template is searched, PAL registration on one thread ran 8 % faster.
    pub(crate) fn prefetch(&self, start: (isize, isize), (tw, th): (usize, usize), margin: usize) {
        let (w, h) = self.size();
        let m = margin as isize;
        let (x0, x1) = ((start.0 - m).clamp(0, w as isize) as usize, (start.0 + tw as isize + m).clamp(0, w as isize) as usize);
        let (y0, y1) = ((start.1 - m).clamp(0, h as isize) as usize, (start.1 + th as isize + m).clamp(0, h as isize) as usize);
        if x0 >= x1 {
            return;
        }
        for y in y0..y1 {
            let row = &self.view.row(y)[x0..x1];
            prefetch_bytes(row);
        }
    }

    /// The coefficient of `tpl` against the window whose top-left pixel is `(x, y)`;
    /// `None` when the template or the window is flat. Errors: window outside the frame.
    pub fn coefficient(&self, tpl: &Template<T>, x: usize, y: usize) -> Result<Option<f64>> {
        let (w, h) = tpl.size();
        let (fw, fh) = self.view.size();
        if !(x.checked_add(w).is_some_and(|r| r <= fw) && y.checked_add(h).is_some_and(|b| b <= fh)) {
            return Err(Error::InvalidParameter { name: "window", reason: alloc::format!("{w}x{h} at ({x}, {y}) is outside the {fw}x{fh} frame") });
        }
        let r = self.eval(tpl, x, y);
        Ok((r != FLAT).then_some(r))
    }

    /// The coefficients of `out.len()` consecutive positions along x from `(x, y)`, all
    /// checked by the caller ([`NccSample::cross_run`]); `cross` is scratch of that length.
    pub(crate) fn eval_run(&self, tpl: &Template<T>, x: usize, y: usize, cross: &mut [T::Cross], out: &mut [f64]) {
        let (w, h) = (tpl.width, tpl.height);
        if !self.tables {
            out.iter_mut().enumerate().for_each(|(k, o)| *o = self.eval(tpl, x + k, y));
            return;
        }
        let stride = self.view.stride();
        T::cross_run(&tpl.pixels, w, self.view.span(), y * stride + x, stride, cross);
        for (k, (o, &c)) in out.iter_mut().zip(cross.iter()).enumerate() {
            let [s1, s2] = self.integral.window_unchecked(x + k, y, w, h);
            *o = T::finish(&tpl.stats, c, s1, s2, self.flat_tol).unwrap_or(FLAT);
        }
    }

    /// The coefficient at a position the caller has checked, [`FLAT`] for a flat side.
    #[inline]
    pub(crate) fn eval(&self, tpl: &Template<T>, x: usize, y: usize) -> f64 {
        let (w, h) = (tpl.width, tpl.height);
        let stride = self.view.stride();
        if !self.tables {
            let (cross, [s1, s2]) = T::cross_sums(&tpl.pixels, w, self.view.span(), y * stride + x, stride);
            return T::finish(&tpl.stats, cross, s1, s2, self.flat_tol).unwrap_or(FLAT);
        }
        let [s1, s2] = self.integral.window_unchecked(x, y, w, h);
        let cross = T::cross(&tpl.pixels, w, self.view.span(), y * stride + x, stride);
        T::finish(&tpl.stats, cross, s1, s2, self.flat_tol).unwrap_or(FLAT)
    }
}

/// Prefetches the cache lines that hold `data` (a hint; see [`SearchFrame::prefetch`]).
#[inline]
fn prefetch_bytes<T>(data: &[T]) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let bytes = core::mem::size_of_val(data);
        let p = data.as_ptr().cast::<i8>();
        let mut at = 0;
        while at < bytes {
            // SAFETY: a prefetch reads nothing and cannot fault; the address is inside `data`.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.add(at)) };
            at += 64;
        }
        if bytes > 0 {
            // The last line, where the row does not start on a line's boundary.
            // SAFETY: as above.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.add(bytes - 1)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = data;
}

/// Pearson's r between two same-size views (`None` when either is flat), computed as the
/// searches compute it. Errors: sizes differ, a side above [`MAX_TEMPLATE`], non-finite f32.
pub fn coefficient<T: NccSample>(template: ImageView<'_, T>, window: ImageView<'_, T>) -> Result<Option<f64>> {
    crate::image::check_same_size(template.size(), window.size())?;
    let tpl = Template::new(template)?;
    let frame = SearchFrame::new(window)?;
    frame.coefficient(&tpl, 0, 0)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::image::Image;
    use proptest::prelude::*;

    /// The float64 reference: Pearson's r straight from its definition.
    pub(crate) fn pearson(a: &[f64], b: &[f64]) -> Option<f64> {
        let n = a.len() as f64;
        let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
        let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
        for (x, y) in a.iter().zip(b) {
            sab += (x - ma) * (y - mb);
            saa += (x - ma) * (x - ma);
            sbb += (y - mb) * (y - mb);
        }
        (saa > 0.0 && sbb > 0.0).then(|| sab / (saa * sbb).sqrt())
    }

    fn lcg(seed: u64) -> impl FnMut() -> u64 {
        let mut s = seed;
        move || {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            s >> 33
        }
    }

    fn vals<T: crate::image::Pixel + Into<f64>>(img: &Image<T>) -> Vec<f64> {
        img.as_slice().iter().map(|&v| v.into()).collect()
    }

    /// The window cross sums at every level against a plain sum: templates of one pixel,
    /// one 8-chunk, 16 + 8 + 1 and more, windows at several starts, runs with a tail.
    #[test]
    fn cross_sums_match_scalar_at_every_level() {
        let (stride, rows) = (90, 7);
        let mut r = lcg(7);
        let span8: Vec<u8> = (0..stride * (rows + 1)).map(|_| (r() % 256) as u8).collect();
        let span16: Vec<u16> = (0..stride * (rows + 1)).map(|_| (r() % 65536) as u16).collect();
        let tpl8: Vec<u8> = (0..40 * rows).map(|_| (r() % 256) as u8).collect();
        let tpl16: Vec<u16> = (0..40 * rows).map(|_| (r() % 65536) as u16).collect();
        let plain = |tpl: &[u64], span: &[u64], tw: usize, start: usize| -> u64 {
            (0..rows).flat_map(|y| (0..tw).map(move |x| tpl[y * tw + x] * span[start + y * stride + x])).sum()
        };
        let wide8: Vec<u64> = span8.iter().map(|&v| v as u64).collect();
        let wide16: Vec<u64> = span16.iter().map(|&v| v as u64).collect();
        crate::testing::at_every_level(|level| {
            for tw in [1, 8, 15, 16, 17, 25, 31, 32, 33, 40] {
                let (t8, t16) = (&tpl8[..tw * rows], &tpl16[..tw * rows]);
                let (w8, w16): (Vec<u64>, Vec<u64>) =
                    (t8.iter().map(|&v| v as u64).collect(), t16.iter().map(|&v| v as u64).collect());
                for start in [0, 3, 17] {
                    assert_eq!(cross_u8(t8, tw, &span8, start, stride), plain(&w8, &wide8, tw, start), "{level:?} u8 {tw} {start}");
                    assert_eq!(cross_u16(t16, tw, &span16, start, stride), plain(&w16, &wide16, tw, start), "{level:?} u16 {tw} {start}");
                }
                let mut out = alloc::vec![0u64; 37];
                cross_run_u8(t8, tw, &span8, 2, stride, &mut out);
                for (k, &o) in out.iter().enumerate() {
                    assert_eq!(o, plain(&w8, &wide8, tw, 2 + k), "{level:?} run {tw} {k}");
                }
            }
        });
    }

    /// The largest u8 template, 257 x 257 pixels of 255 against a window of 255: its cross
    /// sum, 66049 * 255^2, is above 2^31 and just below 2^32; and so is the window's sum of
    /// squares taken with it.
    #[test]
    fn the_largest_u8_templates_cross_sum_is_exact_at_every_level() {
        let side = 257;
        let (tpl, span) = (alloc::vec![255u8; side * side], alloc::vec![255u8; (side + 3) * side]);
        crate::testing::at_every_level(|level| {
            assert_eq!(cross_u8(&tpl, side, &span, 2, side + 3), 66049 * 255 * 255, "{level:?}");
            assert_eq!(cross_sums_u8(&tpl, side, &span, 2, side + 3), (66049 * 255 * 255, [66049 * 255, 66049 * 255 * 255]), "{level:?}");
        });
    }

    /// A window's sums taken with its cross term ([`NccSample::cross_sums`]) are its cross
    /// term and its integral images' sums, to the bit, at every level: u8 (fused with the
    /// cross term where rows are 16 pixels or more) and the generic form for u16; every
    /// width below, at and above a vector step, windows all over a frame, dark and bright.
    #[test]
    fn a_windows_sums_with_its_cross_term_are_the_tables_sums() {
        fn check<T: NccSample>(frame: &Image<T>, tpl: &[T::Tpl], level: crate::cpu::Level) {
            let search = SearchFrame::new(frame.view()).unwrap();
            let (fw, fh) = frame.size();
            let stride = frame.view().stride();
            for tw in [1, 7, 8, 15, 16, 17, 24, 25, 31, 32, 33, 47] {
                for th in [1, 5, 25] {
                    for (x, y) in [(0, 0), (3, 1), (fw - tw, fh - th), (fw / 2 - tw / 2, 7)] {
                        let (cross, sums) = T::cross_sums(&tpl[..tw * th], tw, frame.view().span(), y * stride + x, stride);
                        let bits = |v: T::Cross| alloc::format!("{v:?}");
                        assert_eq!(bits(cross), bits(T::cross(&tpl[..tw * th], tw, frame.view().span(), y * stride + x, stride)), "{level:?} {tw}x{th} at ({x}, {y})");
                        let table = search.integral.window(x, y, tw, th).unwrap();
                        assert_eq!(alloc::format!("{sums:?}"), alloc::format!("{table:?}"), "{level:?} {tw}x{th} at ({x}, {y})");
                    }
                }
            }
        }
        let mut r = lcg(23);
        let (w, h) = (61, 40);
        let dark = Image::from_fn(w, h, |_, _| (r() % 256) as u8).unwrap();
        let bright = Image::from_fn(w, h, |_, _| 255 - (r() % 3) as u8).unwrap();
        let words = Image::from_fn(w, h, |_, _| (r() % 65536) as u16).unwrap();
        let tpl8: Vec<u8> = (0..47 * 25).map(|_| (r() % 256) as u8).collect();
        let tpl16: Vec<u16> = (0..47 * 25).map(|_| (r() % 65536) as u16).collect();
        crate::testing::at_every_level(|level| {
            check(&dark, &tpl8, level);
            check(&bright, &tpl8, level);
            check(&words, &tpl16, level);
        });
    }

    /// A frame searched without integral images ([`SearchFrame::for_few_windows`]) gives
    /// every coefficient the frame with them gives, to the bit, and the same errors; f32
    /// frames keep their tables.
    #[test]
    fn a_frame_without_tables_gives_the_tables_coefficients() {
        let mut r = lcg(29);
        let frame = Image::from_fn(50, 37, |x, y| ((x * 7 + y * 13) % 97) as u8 + (r() % 40) as u8).unwrap();
        let with = SearchFrame::new(frame.view()).unwrap();
        let without = SearchFrame::for_few_windows(frame.view(), Integral::default(), Parallelism::Sequential).unwrap();
        assert!(with.tables && !without.tables);
        let flat = Image::from_fn(50, 37, |_, _| 9u8).unwrap();
        let flat_frame = SearchFrame::for_few_windows(flat.view(), Integral::default(), Parallelism::Sequential).unwrap();
        crate::testing::at_every_level(|level| {
            for (tw, th) in [(5, 4), (16, 16), (25, 25), (31, 20)] {
                let tpl = Template::new(frame.view().crop(11, 6, tw, th).unwrap()).unwrap();
                for y in 0..=37 - th {
                    for x in 0..=50 - tw {
                        let (a, b) = (with.coefficient(&tpl, x, y).unwrap(), without.coefficient(&tpl, x, y).unwrap());
                        assert_eq!(a.map(f64::to_bits), b.map(f64::to_bits), "{level:?} {tw}x{th} at ({x}, {y})");
                    }
                }
                let mut cross = alloc::vec![0u64; 9];
                let (mut a, mut b) = (alloc::vec![0.0; 9], alloc::vec![0.0; 9]);
                with.eval_run(&tpl, 3, 2, &mut cross, &mut a);
                without.eval_run(&tpl, 3, 2, &mut cross, &mut b);
                assert_eq!(a.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), b.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "{level:?} run");
                assert_eq!(flat_frame.coefficient(&tpl, 0, 0).unwrap(), None);
                assert!(without.coefficient(&tpl, 50 - tw + 1, 0).is_err() && without.coefficient(&tpl, 0, 37 - th + 1).is_err());
                assert!(without.coefficient(&tpl, usize::MAX, 0).is_err());
            }
        });
        let floats = frame.map(|v| v as f32);
        assert!(SearchFrame::for_few_windows(floats.view(), Integral::default(), Parallelism::Sequential).unwrap().tables);
    }

    /// A template's sums at every level against a plain u64 sum: widths below, at and
    /// above a vector step with every remainder, crops of a wider frame; and the statistics
    /// kept without the pixels equal to the template's to the bit (u8, u16, f32).
    #[test]
    fn template_sums_match_a_plain_sum_at_every_level() {
        let mut r = lcg(11);
        let frame8 = Image::from_fn(70, 9, |_, _| (r() % 256) as u8).unwrap();
        let frame16 = Image::from_fn(70, 9, |_, _| (r() % 65536) as u16).unwrap();
        let frame32 = frame16.map(|v| v as f32 / 7.0 - 1000.0);
        crate::testing::at_every_level(|level| {
            for w in [1, 5, 7, 8, 9, 15, 16, 17, 25, 31, 33, 64] {
                for (x, h) in [(0, 1), (3, 9), (6, 5)] {
                    let v = frame8.view().crop(x, 0, w, h).unwrap();
                    let plain = v.rows().flatten().fold([0u64; 2], |[a, b], &p| [a + p as u64, b + p as u64 * p as u64]);
                    assert_eq!(sums_u8(v).map(u64::from), plain, "{level:?} {w}x{h} at {x}");
                    assert_eq!(TemplateStats::of(v).unwrap(), *Template::new(v).unwrap().stats(), "{level:?} {w}x{h} at {x}");
                    let v = frame16.view().crop(x, 0, w, h).unwrap();
                    assert_eq!(TemplateStats::of(v).unwrap(), *Template::new(v).unwrap().stats(), "u16 {w}x{h} at {x}");
                    let v = frame32.view().crop(x, 0, w, h).unwrap();
                    assert_eq!(TemplateStats::of(v).unwrap(), *Template::new(v).unwrap().stats(), "f32 {w}x{h} at {x}");
                }
            }
        });
        // The errors are the template's.
        let big = Image::<u8>::new(300, 300).unwrap();
        assert!(TemplateStats::of(big.view()).is_err() && Template::new(big.view()).is_err());
        let nan = Image::from_fn(4, 4, |x, _| if x == 2 { f32::NAN } else { 1.0 }).unwrap();
        assert!(TemplateStats::of(nan.view()).is_err() && Template::new(nan.view()).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn u8_matches_reference(w in 1usize..40, h in 1usize..40, seed in any::<u64>(), corr in 0u32..4) {
            let mut r = lcg(seed);
            let a = Image::from_fn(w, h, |_, _| (r() % 256) as u8).unwrap();
            // Partly correlated second image, so r spans [-1, 1].
            let b = a.map(|v| match corr { 0 => v, 1 => 255 - v, 2 => v / 2 + (r() % 128) as u8, _ => (r() % 256) as u8 });
            let got = coefficient(a.view(), b.view()).unwrap();
            let want = pearson(&vals(&a), &vals(&b));
            match (got, want) {
                (Some(g), Some(x)) => prop_assert!((g - x).abs() < 1e-12, "{g} vs {x}"),
                (None, None) => {}
                other => prop_assert!(false, "{other:?}"),
            }
        }

        #[test]
        fn u16_and_f32_match_reference(w in 1usize..32, h in 1usize..32, seed in any::<u64>()) {
            let mut r = lcg(seed);
            let a = Image::from_fn(w, h, |_, _| (r() % 65536) as u16).unwrap();
            let b = a.map(|v| v / 3 + (r() % 20000) as u16);
            let want = pearson(&vals(&a), &vals(&b));
            let got = coefficient(a.view(), b.view()).unwrap();
            prop_assert!(matches!((got, want), (Some(g), Some(x)) if (g - x).abs() < 1e-12) || (got.is_none() && want.is_none()));
            let (af, bf) = (a.map(|v| v as f32 / 7.0 - 1000.0), b.map(|v| v as f32 / 7.0 + 55.5));
            let want = pearson(&vals(&af), &vals(&bf));
            let got = coefficient(af.view(), bf.view()).unwrap();
            prop_assert!(matches!((got, want), (Some(g), Some(x)) if (g - x).abs() < 1e-4) || (got.is_none() && want.is_none()), "{got:?} {want:?}");
        }
    }

    #[test]
    fn flat_sides_have_no_coefficient() {
        let flat = Image::<u8>::filled(9, 9, 77).unwrap();
        let tex = Image::from_fn(9, 9, |x, y| (x * 13 + y * 7) as u8).unwrap();
        assert_eq!(coefficient(flat.view(), tex.view()).unwrap(), None);
        assert_eq!(coefficient(tex.view(), flat.view()).unwrap(), None);
        let (ff, tf) = (flat.map(|v| v as f32 * 1000.0), tex.map(|v| v as f32));
        assert_eq!(coefficient(tf.view(), ff.view()).unwrap(), None);
        assert_eq!(coefficient(ff.view(), tf.view()).unwrap(), None);
        assert!(Template::new(flat.view()).unwrap().is_flat());
        assert!(!Template::new(tex.view()).unwrap().is_flat());
    }

    #[test]
    fn identical_and_inverted_give_plus_minus_one() {
        let tex = Image::from_fn(31, 17, |x, y| ((x * x + 3 * y) % 251) as u8).unwrap();
        let inv = tex.map(|v| 255 - v);
        assert_eq!(coefficient(tex.view(), tex.view()).unwrap(), Some(1.0));
        assert_eq!(coefficient(tex.view(), inv.view()).unwrap(), Some(-1.0));
    }

    #[test]
    fn bad_input_is_an_error() {
        let a = Image::<u8>::filled(5, 5, 1).unwrap();
        let b = Image::<u8>::filled(5, 6, 1).unwrap();
        assert!(matches!(coefficient(a.view(), b.view()), Err(Error::SizeMismatch { .. })));
        let big = Image::<u8>::filled(MAX_TEMPLATE + 1, 1, 1).unwrap();
        assert!(matches!(Template::new(big.view()), Err(Error::OutOfRange { .. })));
        let wide = Image::<u8>::filled(258, 257, 1).unwrap();
        assert!(matches!(Template::new(wide.view()), Err(Error::InvalidParameter { .. })));
        assert!(Template::new(wide.view().crop(0, 0, 257, 257).unwrap()).is_ok());
        assert!(Template::new(wide.map(|v| v as u16).view()).is_ok());
        let mut nan = Image::<f32>::filled(4, 4, 1.0).unwrap();
        nan.set(1, 1, f32::NAN);
        assert!(Template::new(nan.view()).is_err());
        assert!(SearchFrame::new(nan.view()).is_err());
        let frame = SearchFrame::new(a.view()).unwrap();
        let tpl = Template::new(Image::<u8>::filled(3, 3, 1).unwrap().view()).unwrap();
        assert!(frame.coefficient(&tpl, 3, 0).is_err());
        assert!(frame.coefficient(&tpl, 2, 2).is_ok());
    }
}
