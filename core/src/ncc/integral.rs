//! Integral images (summed-area tables) of `x` and `x^2`, the source of every window sum and
//! sum of squares the NCC search needs: any window's sums cost four look-ups each, whatever
//! its size (Crow, "Summed-area tables for texture mapping", SIGGRAPH 1984; Lewis, "Fast
//! normalized cross-correlation", Vision Interface 1995, section 3).
//!
//! u8 frames accumulate in wrapping u32 and u16 frames in wrapping u64: a difference of
//! wrapped prefix sums is the exact window sum as long as that window sum fits the type,
//! which [`IntegralSample::MAX_AREA`] guarantees (u8: 66051 pixels, so squares sum to at
//! most 66051 * 255^2 < 2^32, templates up to 257 x 257; u16: 2^32 pixels). Half the memory
//! traffic of u64 for the 8-bit frames that dominate. f32 frames accumulate `x - offset` in f64, where `offset` is the frame's
//! first pixel: window variances are shift-invariant, and removing the offset keeps the
//! prefix sums small, which keeps the cancellation in `S2 - S1^2 / n` small.

use crate::cpu::multiversion;
use crate::error::{Error, Result};
use crate::image::{ImageView, Pixel};
use crate::parallel::{map_claimed, map_slots, Parallelism};
use alloc::vec;
use alloc::vec::Vec;

/// Rows a band holds at least where the tables are computed on several threads: each band
/// but the last reads its pixels once more to sum its columns, and a thread's job should
/// outweigh its start.
const MIN_BAND_ROWS: usize = 64;

multiversion! {
    /// Adds each column's terms over `rows` of `src` to `sums` (one entry a column), a row
    /// at a time: at each level's vector width.
    fn add_columns<T: IntegralSample>(sums: &mut [[T::Acc; 2]], src: ImageView<'_, T>, rows: core::ops::Range<usize>) {
        for y in rows {
            for (s, &p) in sums.iter_mut().zip(src.row(y)) {
                let t = p.terms(0.0);
                *s = [T::add(s[0], t[0]), T::add(s[1], t[1])];
            }
        }
    }
}

/// A gray sample type the integral image (and hence the NCC search) accepts.
pub trait IntegralSample: Pixel {
    /// Accumulator of the sums: wrapping u32 for u8, u64 for u16 (exact within
    /// `MAX_AREA`), f64 for f32.
    type Acc: Copy + Default + Send + Sync + PartialEq + core::fmt::Debug + 'static;
    /// Largest window area (pixels) whose sums the accumulator holds exactly.
    const MAX_AREA: u64;
    /// `(x - offset, (x - offset)^2)` in the accumulator (offset is 0 for integers).
    fn terms(self, offset: f64) -> [Self::Acc; 2];
    fn add(a: Self::Acc, b: Self::Acc) -> Self::Acc;
    fn sub(a: Self::Acc, b: Self::Acc) -> Self::Acc;
    fn to_f64(a: Self::Acc) -> f64;
    /// The offset to subtract for this frame (0 for integers).
    fn offset(first: Self) -> f64;
    /// Whether the sums come out the same to the bit in any order of the additions
    /// (wrapping integers), so the tables may be computed in row bands on several threads.
    const ANY_ORDER: bool;
    /// One row of the tables: `out[x]` = `above[x]` plus the sums of the terms of
    /// `row[..=x]` (the three of one length).
    #[inline]
    fn integral_row(row: &[Self], above: &[[Self::Acc; 2]], out: &mut [[Self::Acc; 2]], offset: f64) {
        scalar_row(row, above, out, offset, [Self::Acc::default(); 2]);
    }
}

/// [`IntegralSample::integral_row`] a pixel at a time: a running sum of each term, from
/// `start` (the sums of the row's pixels before `row`), plus the entry above, one pass.
#[inline]
fn scalar_row<T: IntegralSample>(row: &[T], above: &[[T::Acc; 2]], out: &mut [[T::Acc; 2]], offset: f64, start: [T::Acc; 2]) {
    let [mut r1, mut r2] = start;
    for ((o, &up), &p) in out.iter_mut().zip(above).zip(row) {
        let [a, b] = p.terms(offset);
        r1 = T::add(r1, a);
        r2 = T::add(r2, b);
        *o = [T::add(up[0], r1), T::add(up[1], r2)];
    }
}

macro_rules! int_sample {
    ($t:ty, $acc:ty, $max:expr $(, $extra:item)*) => {
        impl IntegralSample for $t {
            $($extra)*
            type Acc = $acc;
            const MAX_AREA: u64 = $max;
            const ANY_ORDER: bool = true;
            #[inline]
            fn terms(self, _offset: f64) -> [$acc; 2] {
                let v = self as $acc;
                [v, v.wrapping_mul(v)]
            }
            #[inline]
            fn add(a: $acc, b: $acc) -> $acc {
                a.wrapping_add(b)
            }
            #[inline]
            fn sub(a: $acc, b: $acc) -> $acc {
                a.wrapping_sub(b)
            }
            #[inline]
            fn to_f64(a: $acc) -> f64 {
                a as f64
            }
            #[inline]
            fn offset(_first: $t) -> f64 {
                0.0
            }
        }
    };
}
// 66051 * 255^2 = 4294892475 < 2^32; 2^32 * 65535^2 < 2^64.
int_sample!(
    u8,
    u32,
    66051,
    #[inline]
    fn integral_row(row: &[u8], above: &[[u32; 2]], out: &mut [[u32; 2]], _offset: f64) {
        #[cfg(target_arch = "x86_64")]
        if crate::cpu::level() >= crate::cpu::Level::Avx2 {
            // SAFETY: the CPU has AVX2.
            unsafe { x86::integral_row_u8(row, above, out) };
            return;
        }
        scalar_row(row, above, out, 0.0, [0; 2]);
    }
);
int_sample!(u16, u64, 1 << 32);

impl IntegralSample for f32 {
    type Acc = f64;
    const MAX_AREA: u64 = u64::MAX;
    // f64 sums in another order round differently.
    const ANY_ORDER: bool = false;
    #[inline]
    fn terms(self, offset: f64) -> [f64; 2] {
        let v = self as f64 - offset;
        [v, v * v]
    }
    #[inline]
    fn add(a: f64, b: f64) -> f64 {
        a + b
    }
    #[inline]
    fn sub(a: f64, b: f64) -> f64 {
        a - b
    }
    #[inline]
    fn to_f64(a: f64) -> f64 {
        a
    }
    fn offset(first: f32) -> f64 {
        if first.is_finite() {
            first as f64
        } else {
            0.0
        }
    }
}

/// The summed-area tables of one frame: entry `(x, y)` (0 <= x <= width, 0 <= y <= height)
/// holds the sums of `x - offset` and `(x - offset)^2` over the pixels `[0, x) x [0, y)`.
/// The two sums are interleaved so a window's four corners give both in four loads.
#[derive(Clone, Debug)]
pub struct Integral<T: IntegralSample> {
    width: usize,
    height: usize,
    offset: f64,
    table: Vec<[T::Acc; 2]>,
}

impl<T: IntegralSample> Integral<T> {
    /// The integral images of `src`. f32 input must be finite.
    pub fn new(src: ImageView<'_, T>) -> Result<Self> {
        let mut me = Integral { width: 0, height: 0, offset: 0.0, table: Vec::new() };
        me.compute(src)?;
        Ok(me)
    }

    /// Recomputes the tables for `src`, reusing the buffer (no allocation when the size
    /// does not grow).
    pub fn compute(&mut self, src: ImageView<'_, T>) -> Result<()> {
        self.compute_on(src, Parallelism::Sequential)
    }

    /// [`Integral::compute`] on `par`'s threads: integer frames in row bands of at least 64
    /// rows, one a thread, the same tables to the bit; f32 frames on this thread (their f64
    /// sums would round differently in another order).
    pub fn compute_on(&mut self, src: ImageView<'_, T>, par: Parallelism) -> Result<()> {
        let (w, h) = src.size();
        let first = src.row(0)[0];
        self.offset = T::offset(first);
        let stride = w + 1;
        let len = stride.checked_mul(h + 1).ok_or(Error::BufferTooShort { needed: usize::MAX, got: 0 })?;
        // Row 0 and column 0 are the zeros every entry's sum starts from; the rest is
        // overwritten below, so a buffer of the same shape is reused without refilling it
        // (the fill cost as much as the sums).
        if (self.width, self.height) != (w, h) || self.table.len() != len {
            // Sized by the input: an allocation that fails is an error, not an abort.
            self.table = Vec::new();
            self.table = crate::error::try_filled(len, [T::Acc::default(); 2])?;
        }
        self.width = w;
        self.height = h;
        let bands = if T::ANY_ORDER { par.threads().min(h / MIN_BAND_ROWS) } else { 1 };
        if bands > 1 {
            self.compute_bands(src, bands, par)?;
        } else {
            for y in 0..h {
                let row = src.row(y);
                let (above, below) = self.table.split_at_mut((y + 1) * stride);
                let above = &above[y * stride + 1..];
                T::integral_row(&row[..w], &above[..w], &mut below[1..stride], self.offset);
            }
        }
        // (Integer tables wrap by design; only f32 can be non-finite.)
        if let Some(bad) = self.table.last().filter(|s| !T::to_f64(s[1]).is_finite()) {
            return Err(Error::InvalidFloat {
                name: "pixel",
                value: T::to_f64(bad[1]),
                expected: "finite pixel values (the sum of squares overflowed or a pixel is NaN/inf)",
            });
        }
        Ok(())
    }

    /// The tables of `src` (integer samples, the buffer sized for it) in `bands` row bands
    /// on `par`'s threads. A band's rows need the table row above the band: the prefix
    /// sums along x of the columns' sums over every row above it. So each band but the
    /// last first sums its pixels down the columns (a pass that reads the pixels once and
    /// writes one row), the rows above each band are added from those, and then every band
    /// runs the row recurrence from its own row above, as one thread would from row 0.
    /// Wrapping sums in another order are the same sums, so the tables are the same bits.
    fn compute_bands(&mut self, src: ImageView<'_, T>, bands: usize, par: Parallelism) -> Result<()> {
        let (w, h) = src.size();
        let rows = h.div_ceil(bands);
        let bands = h.div_ceil(rows);
        let zero = [T::Acc::default(); 2];
        let column_sums = map_claimed(bands - 1, par, |b| -> Result<Vec<[T::Acc; 2]>> {
            let mut sums = crate::error::try_filled(w, zero)?;
            add_columns(&mut sums, src, b * rows..(b + 1) * rows);
            Ok(sums)
        });
        // The table row above band b, entries 1..=w: the columns' sums over bands before b,
        // summed along x.
        let mut above_bands = crate::error::try_with_capacity(bands - 1)?;
        let mut columns = crate::error::try_filled(w, zero)?;
        for sums in column_sums {
            let mut along = zero;
            let mut above = crate::error::try_filled(w, zero)?;
            for ((c, s), a) in columns.iter_mut().zip(sums?).zip(above.iter_mut()) {
                *c = [T::add(c[0], s[0]), T::add(c[1], s[1])];
                along = [T::add(along[0], c[0]), T::add(along[1], c[1])];
                *a = along;
            }
            above_bands.push(above);
        }
        let stride = w + 1;
        let (first_row, rest) = self.table.split_at_mut(stride);
        let first_row = &first_row[1..];
        let mut parts: Vec<&mut [[T::Acc; 2]]> = rest.chunks_mut(rows * stride).collect();
        map_slots(&mut parts, par, |b, part| {
            let mut above: &[[T::Acc; 2]] = if b == 0 { first_row } else { &above_bands[b - 1] };
            let mut part: &mut [[T::Acc; 2]] = part;
            for y in b * rows..((b + 1) * rows).min(h) {
                let (out, next) = core::mem::take(&mut part).split_at_mut(stride);
                T::integral_row(&src.row(y)[..w], &above[..w], &mut out[1..], 0.0);
                above = &out[1..];
                part = next;
            }
        });
        Ok(())
    }

    pub fn size(&self) -> (usize, usize) {
        (self.width, self.height)
    }

    /// The offset subtracted from every pixel before summing (0 for integer frames).
    pub fn offset(&self) -> f64 {
        self.offset
    }

    /// Sums of `x - offset` and `(x - offset)^2` over the `w x h` window whose top-left
    /// pixel is `(x, y)`; the window must lie inside the frame and hold at most
    /// [`IntegralSample::MAX_AREA`] pixels.
    pub fn window(&self, x: usize, y: usize, w: usize, h: usize) -> Result<[T::Acc; 2]> {
        let fits = w > 0
            && h > 0
            && (w as u64).saturating_mul(h as u64) <= T::MAX_AREA
            && x.checked_add(w).is_some_and(|r| r <= self.width)
            && y.checked_add(h).is_some_and(|b| b <= self.height);
        if !fits {
            return Err(Error::InvalidParameter {
                name: "window",
                reason: alloc::format!("{w}x{h} at ({x}, {y}) is outside the {}x{} frame", self.width, self.height),
            });
        }
        Ok(self.window_unchecked(x, y, w, h))
    }

    /// As [`Integral::window`] for a window the caller has checked (the search loops).
    /// An out-of-frame window panics on the slice index, it never reads wrong memory.
    #[inline]
    pub(crate) fn window_unchecked(&self, x: usize, y: usize, w: usize, h: usize) -> [T::Acc; 2] {
        let s = self.width + 1;
        let t = &self.table;
        let (a, b, c, d) = (t[y * s + x], t[y * s + x + w], t[(y + h) * s + x], t[(y + h) * s + x + w]);
        [
            T::add(T::sub(T::sub(d[0], b[0]), c[0]), a[0]),
            T::add(T::sub(T::sub(d[1], b[1]), c[1]), a[1]),
        ]
    }

    /// Largest absolute prefix sum of squares: the scale of the rounding error of f32 window
    /// variances (about `4 * f64::EPSILON` times this), used to call an f32 window flat.
    pub fn squares_scale(&self) -> f64 {
        self.table.last().map_or(0.0, |s| libm::fabs(T::to_f64(s[1])))
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use core::arch::x86_64::*;

    /// The running sums of the 4 `[sum, squares]` pairs in the u32 lanes of `t` (pair k:
    /// pairs 0..=k): a shift-and-add within each 128-bit half, then the low half's last
    /// pair added to the high half's pairs.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn pair_prefix(t: __m256i) -> __m256i {
        let t = _mm256_add_epi32(t, _mm256_slli_si256::<8>(t));
        let low_last = _mm256_permutevar8x32_epi32(t, _mm256_setr_epi32(2, 3, 2, 3, 2, 3, 2, 3));
        _mm256_add_epi32(t, _mm256_blend_epi32::<0xF0>(_mm256_setzero_si256(), low_last))
    }

    /// [`super::IntegralSample::integral_row`] for u8, 8 pixels a step as two vectors of 4
    /// `[value, square]` pairs (the square a multiply-add of the lane's low half), the
    /// tables' own layout: each summed along its pairs ([`pair_prefix`]), the second onto
    /// the first's last pair, both onto the running total of the row before them, and added
    /// to the entries above. The running total is the only chain between steps. Wrapping
    /// u32 adds in any order give the scalar pass's tables exactly; the row's last
    /// `len % 8` pixels go through the scalar pass, from the running total.
    ///
    /// # Safety
    /// The CPU has AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn integral_row_u8(row: &[u8], above: &[[u32; 2]], out: &mut [[u32; 2]]) {
        let n = row.len().min(above.len()).min(out.len());
        let (low, high) = (_mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3), _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7));
        let last = _mm256_setr_epi32(6, 7, 6, 7, 6, 7, 6, 7);
        // Each pair's value lane kept, its square lane from the multiply-add.
        let terms = |v: __m256i| _mm256_blend_epi32::<0xAA>(v, _mm256_madd_epi16(v, v));
        let mut run = _mm256_setzero_si256();
        let mut x = 0;
        while x + 8 <= n {
            // SAFETY: row[x..x + 8] is in bounds.
            let v = _mm256_cvtepu8_epi32(unsafe { _mm_loadl_epi64(row.as_ptr().add(x).cast()) });
            let first = pair_prefix(terms(_mm256_permutevar8x32_epi32(v, low)));
            let second = pair_prefix(terms(_mm256_permutevar8x32_epi32(v, high)));
            let second = _mm256_add_epi32(second, _mm256_permutevar8x32_epi32(first, last));
            let (first, second) = (_mm256_add_epi32(first, run), _mm256_add_epi32(second, run));
            run = _mm256_permutevar8x32_epi32(second, last);
            // SAFETY: above[x..x + 8] and out[x..x + 8] are in bounds: 8 entries of two u32,
            // 64 bytes each.
            unsafe {
                let up = above.as_ptr().add(x).cast::<__m256i>();
                let o = out.as_mut_ptr().add(x).cast::<__m256i>();
                _mm256_storeu_si256(o, _mm256_add_epi32(first, _mm256_loadu_si256(up)));
                _mm256_storeu_si256(o.add(1), _mm256_add_epi32(second, _mm256_loadu_si256(up.add(1))));
            }
            x += 8;
        }
        let mut total = [0u32; 8];
        // SAFETY: total holds 32 bytes.
        unsafe { _mm256_storeu_si256(total.as_mut_ptr().cast(), run) };
        super::scalar_row(&row[x..n], &above[x..n], &mut out[x..n], 0.0, [total[0], total[1]]);
    }
}

/// Zero-size table, handy as a reusable buffer before the first [`Integral::compute`].
impl<T: IntegralSample> Default for Integral<T> {
    fn default() -> Self {
        Integral { width: 0, height: 0, offset: 0.0, table: vec![] }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::Image;
    use crate::testing::at_every_level;
    use proptest::prelude::*;

    fn naive<T: IntegralSample + Into<f64>>(img: &Image<T>, x: usize, y: usize, w: usize, h: usize, off: f64) -> (f64, f64) {
        let (mut s, mut q) = (0.0, 0.0);
        for yy in y..y + h {
            for xx in x..x + w {
                let v: f64 = img.at(xx, yy).into() - off;
                s += v;
                q += v * v;
            }
        }
        (s, q)
    }

    /// Every entry of `ii`'s tables against the exact prefix sums of `view`, wrapped to u32.
    fn assert_u8_tables_exact(ii: &Integral<u8>, view: ImageView<'_, u8>) {
        let (w, h) = view.size();
        let mut column = vec![[0u64; 2]; w + 1];
        for y in 0..=h {
            let mut along = [0u64; 2];
            for x in 0..=w {
                if y > 0 && x > 0 {
                    let p = view.row(y - 1)[x - 1] as u64;
                    column[x] = [column[x][0] + p, column[x][1] + p * p];
                }
                along = [along[0] + column[x][0], along[1] + column[x][1]];
                let want = [along[0] as u32, along[1] as u32];
                assert_eq!(ii.table[y * (w + 1) + x], want, "entry ({x}, {y}) of {w}x{h}");
            }
        }
    }

    #[test]
    fn u8_tables_are_the_exact_wrapped_prefix_sums_at_every_level() {
        let mut s = 0x1badb002u64;
        let mut next = move || {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (s >> 56) as u8
        };
        // Widths around the 8-pixel steps; a strided view (a crop); a frame of 255 whose
        // squares' sum, 255^2 * 257 * 260, exceeds 2^32: its last entries wrap.
        let noise = Image::from_fn(83, 9, |_, _| next()).unwrap();
        let bright = Image::from_fn(257, 260, |_, _| 255u8).unwrap();
        let mut views: Vec<ImageView<'_, u8>> = (1..=40).chain([63, 64, 65]).map(|w| noise.view().crop(0, 0, w, 9).unwrap()).collect();
        views.push(noise.view().crop(3, 2, 71, 7).unwrap());
        views.push(bright.view());
        at_every_level(|_| {
            let mut reused = Integral::default();
            for &view in &views {
                assert_u8_tables_exact(&Integral::new(view).unwrap(), view);
                reused.compute(view).unwrap();
                assert_u8_tables_exact(&reused, view);
            }
        });
    }

    /// The tables of `view` computed in `bands` row bands, over a buffer whose entries were
    /// first set to junk (a band that skipped an entry would leave it), on `par`.
    fn banded<T: IntegralSample>(view: ImageView<'_, T>, bands: usize, par: Parallelism, junk: T::Acc) -> Integral<T> {
        let mut ii = Integral::new(view).unwrap();
        let stride = ii.width + 1;
        for (i, e) in ii.table.iter_mut().enumerate() {
            if i >= stride && i % stride != 0 {
                *e = [junk; 2];
            }
        }
        ii.compute_bands(view, bands, par).unwrap();
        ii
    }

    #[test]
    fn tables_in_row_bands_are_one_threads_to_the_bit() {
        let mut s = 0x5eed_0f_ba4d5u64;
        let mut next = move || {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            s >> 40
        };
        let noise8 = Image::from_fn(75, 131, |_, _| next() as u8).unwrap();
        let noise16 = Image::from_fn(75, 131, |_, _| next() as u16).unwrap();
        // 255^2 summed over 257 x 260 pixels passes 2^32: the u8 tables wrap inside a band.
        let bright = Image::from_fn(257, 260, |_, _| 255u8).unwrap();
        at_every_level(|_| {
            for par in [Parallelism::Sequential, Parallelism::AllThreads] {
                // Every band count up to one row a band, and more bands than rows; a strided crop.
                for bands in (1..=12).chain([64, 130, 131, 500]) {
                    for view in [noise8.view(), noise8.view().crop(5, 3, 61, 97).unwrap()] {
                        assert_eq!(banded(view, bands, par, 0xdead_beef).table, Integral::new(view).unwrap().table, "u8, {bands} bands");
                    }
                    let view = noise16.view().crop(2, 1, 70, 120).unwrap();
                    assert_eq!(banded(view, bands, par, u64::MAX).table, Integral::new(view).unwrap().table, "u16, {bands} bands");
                }
                for bands in [2, 3, 7] {
                    assert_u8_tables_exact(&banded(bright.view(), bands, par, 1), bright.view());
                }
            }
        });
    }

    #[test]
    fn tables_on_threads_are_one_threads_in_every_sample_type() {
        // Tall enough for bands on any pool of two threads or more; f32 stays on one thread
        // (its sums' order is the pixels').
        let a = Image::from_fn(97, 300, |x, y| ((x * 7 + y * 13) % 251) as u8).unwrap();
        let b = a.map(|v| v as u16 * 257);
        let f = a.map(|v| v as f32 * 0.37 - 11.0);
        let mut reused = Integral::<u8>::default();
        for view in [a.view(), a.view().crop(1, 2, 60, 250).unwrap(), a.view().crop(0, 0, 9, 3).unwrap()] {
            reused.compute_on(view, Parallelism::AllThreads).unwrap();
            assert_eq!(reused.table, Integral::new(view).unwrap().table);
        }
        let mut on = Integral::<u16>::default();
        on.compute_on(b.view(), Parallelism::AllThreads).unwrap();
        assert_eq!(on.table, Integral::new(b.view()).unwrap().table);
        let mut on = Integral::<f32>::default();
        on.compute_on(f.view(), Parallelism::AllThreads).unwrap();
        assert_eq!(on.table, Integral::new(f.view()).unwrap().table);
        // A non-finite f32 pixel is still an error.
        let mut bad = f.clone();
        bad.set(3, 200, f32::NAN);
        assert!(Integral::<f32>::default().compute_on(bad.view(), Parallelism::AllThreads).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn u8_windows_are_exact(w in 1usize..30, h in 1usize..30, seed in any::<u64>(), a in any::<(u8, u8, u8, u8)>()) {
            let mut s = seed;
            let img = Image::from_fn(w, h, |_, _| { s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); (s >> 56) as u8 }).unwrap();
            let ii = Integral::new(img.view()).unwrap();
            let x = a.0 as usize % w; let y = a.1 as usize % h;
            let ww = 1 + a.2 as usize % (w - x); let hh = 1 + a.3 as usize % (h - y);
            let got = ii.window(x, y, ww, hh).unwrap();
            let want = naive(&img, x, y, ww, hh, 0.0);
            prop_assert_eq!(got[0] as f64, want.0);
            prop_assert_eq!(got[1] as f64, want.1);
        }

        #[test]
        fn u16_and_f32_windows_match_reference(w in 1usize..24, h in 1usize..24, seed in any::<u64>(), a in any::<(u8, u8, u8, u8)>()) {
            let mut s = seed;
            let mut next = move || { s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); (s >> 48) as u16 };
            let img16 = Image::from_fn(w, h, |_, _| next()).unwrap();
            let imgf = img16.map(|v| v as f32 * 0.01 - 100.0);
            let x = a.0 as usize % w; let y = a.1 as usize % h;
            let ww = 1 + a.2 as usize % (w - x); let hh = 1 + a.3 as usize % (h - y);
            let g = Integral::new(img16.view()).unwrap().window(x, y, ww, hh).unwrap();
            let want = naive(&img16, x, y, ww, hh, 0.0);
            prop_assert_eq!((g[0] as f64, g[1] as f64), want);
            let ii = Integral::new(imgf.view()).unwrap();
            let gf = ii.window(x, y, ww, hh).unwrap();
            let want = naive(&imgf, x, y, ww, hh, ii.offset());
            prop_assert!((gf[0] - want.0).abs() <= 1e-9 * (1.0 + want.0.abs()));
            prop_assert!((gf[1] - want.1).abs() <= 1e-9 * (1.0 + want.1.abs()));
        }
    }

    #[test]
    fn window_outside_is_an_error() {
        let img = Image::<u8>::filled(5, 4, 3).unwrap();
        let ii = Integral::new(img.view()).unwrap();
        assert!(ii.window(3, 0, 3, 1).is_err());
        assert!(ii.window(0, 2, 1, 3).is_err());
        assert!(ii.window(0, 0, 0, 1).is_err());
        assert!(ii.window(usize::MAX, 0, 2, 1).is_err());
        assert_eq!(ii.window(0, 0, 5, 4).unwrap(), [60, 180]);
        // u8 windows above MAX_AREA could wrap: refused.
        let big = Image::<u8>::filled(300, 300, 255).unwrap();
        let ii = Integral::new(big.view()).unwrap();
        // The table wraps (the frame's squares sum to 300^2 * 255^2 > 2^32), windows do not.
        assert_eq!(ii.window(43, 43, 257, 257).unwrap(), [257 * 257 * 255, 257 * 257 * 65025]);
        assert_eq!(ii.window(299, 0, 1, 300).unwrap(), [300 * 255, 300 * 65025]);
        assert!(ii.window(0, 0, 258, 257).is_err());
    }

    #[test]
    fn non_finite_f32_is_an_error() {
        let mut img = Image::<f32>::filled(4, 4, 1.0).unwrap();
        img.set(2, 2, f32::NAN);
        assert!(Integral::new(img.view()).is_err());
        img.set(2, 2, f32::INFINITY);
        assert!(Integral::new(img.view()).is_err());
    }
}
