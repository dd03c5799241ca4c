//! The few vector helpers shared by kernels, compiled for each CPU level and picked at run
//! time ([`crate::cpu::multiversion!`]): the shipped library runs on any x86-64 and uses
//! AVX2 or AVX-512 where the CPU has them. The loops are written so that LLVM vectorizes
//! them at the width of the level (checked in the generated code: `vpaddd zmm` in the
//! AVX-512 clone); `wide` carries the explicit f32 lanes where the arithmetic is not a
//! plain element-wise map.

use crate::cpu::multiversion;

/// The square root, correctly rounded (IEEE 754), so the same bits either way: with `std`
/// the compiler's own, which a loop vectorizes; without it `libm`'s, one at a time.
#[inline(always)]
pub(crate) fn sqrt(x: f64) -> f64 {
    #[cfg(feature = "std")]
    return x.sqrt();
    #[cfg(not(feature = "std"))]
    return libm::sqrt(x);
}

/// Helpers of the hand-written AVX2 integer kernels.
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use core::arch::x86_64::*;

    /// The 16 bytes at `p` as i16 lanes (zero-extended).
    ///
    /// # Safety
    /// `p..p + 16` is readable and the CPU has AVX2.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn widened_u8x16(p: *const u8) -> __m256i {
        // SAFETY: the caller's.
        _mm256_cvtepu8_epi16(unsafe { _mm_loadu_si128(p.cast()) })
    }

    /// The sum of the eight u32 lanes of `v`, in u64.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) fn u32_lanes_sum(v: __m256i) -> u64 {
        let wide = _mm256_add_epi64(_mm256_cvtepu32_epi64(_mm256_castsi256_si128(v)), _mm256_cvtepu32_epi64(_mm256_extracti128_si256::<1>(v)));
        let half = _mm_add_epi64(_mm256_castsi256_si128(wide), _mm256_extracti128_si256::<1>(wide));
        (_mm_cvtsi128_si64(half) as u64).wrapping_add(_mm_extract_epi64::<1>(half) as u64)
    }
}

/// A channel type whose running window sums accumulate exactly (integers) or without
/// drift (f32 in f64) in `Acc`.
pub trait Lane: Copy + Send + Sync + 'static {
    /// Accumulator: u32 for u8, u64 for u16, f64 for f32. Integer accumulators wrap, and
    /// differences of wrapped prefix sums are still exact while a window sum fits.
    type Acc: crate::prefix::ScanElem + Default + Send + Sync + PartialEq + core::fmt::Debug;
    /// `acc[i] += rows[0][i] + rows[1][i] + ...` over `acc.len()` lanes (every row at
    /// least that long): the column sums a sliding window starts from.
    fn add_rows(acc: &mut [Self::Acc], rows: &[&[Self]]);
    /// `acc[i] += add[i] - sub[i]`: one step of the vertical sliding window.
    fn slide_row(acc: &mut [Self::Acc], add: &[Self], sub: &[Self]);
    fn from_f32(v: f32) -> Self;
    fn acc_from_f64(v: f64) -> Self::Acc;
    fn acc_add(a: Self::Acc, b: Self::Acc) -> Self::Acc;
    fn acc_sub(a: Self::Acc, b: Self::Acc) -> Self::Acc;
    fn acc_to_f64(a: Self::Acc) -> f64;
    /// `out[i] = p[i + k] - p[i]`: window sums from prefix sums.
    fn window_diff(p: &[Self::Acc], k: usize, out: &mut [Self::Acc]);
}

macro_rules! int_lane {
    ($t:ty, $acc:ty, $add:ident, $slide:ident, $diff:ident) => {
        multiversion! {
            fn $diff(p: &[$acc], k: usize, out: &mut [$acc]) {
                for ((o, &hi), &lo) in out.iter_mut().zip(&p[k..]).zip(p) {
                    *o = hi.wrapping_sub(lo);
                }
            }
        }
        multiversion! {
            fn $slide(acc: &mut [$acc], add: &[$t], sub: &[$t]) {
                for ((a, &x), &y) in acc.iter_mut().zip(add).zip(sub) {
                    *a = a.wrapping_add(x as $acc).wrapping_sub(y as $acc);
                }
            }
        }
        impl Lane for $t {
            type Acc = $acc;
            #[inline]
            fn add_rows(acc: &mut [$acc], rows: &[&[$t]]) {
                $add(acc, rows)
            }
            #[inline]
            fn slide_row(acc: &mut [$acc], add: &[$t], sub: &[$t]) {
                $slide(acc, add, sub)
            }
            #[inline]
            fn from_f32(v: f32) -> $t {
                v as $t
            }
            #[inline]
            fn acc_from_f64(v: f64) -> $acc {
                v as $acc
            }
            #[inline]
            fn acc_add(a: $acc, b: $acc) -> $acc {
                a.wrapping_add(b)
            }
            #[inline]
            fn acc_sub(a: $acc, b: $acc) -> $acc {
                a.wrapping_sub(b)
            }
            #[inline]
            fn acc_to_f64(a: $acc) -> f64 {
                a as f64
            }
            #[inline]
            fn window_diff(p: &[$acc], k: usize, out: &mut [$acc]) {
                $diff(p, k, out)
            }
        }
    };
}
int_lane!(u8, u32, add_rows_u8, slide_row_u8, diff_u32);
int_lane!(u16, u64, add_rows_u16, slide_row_u16, diff_u64);

/// `fn $name(acc: &mut [$acc], rows: &[&[$t]])`, [`Lane::add_rows`]: columns in blocks of
/// `$block` whose partial sums (in `$part`, exact over `$group` rows) stay in registers
/// while the rows go by, so a row costs a block a load and an add, not also a load and a
/// store of the accumulator; what is left is reading the rows (255 rows of 1024 u8 in about
/// 8 us, some 30 output rows' worth of the sliding window).
macro_rules! column_sums {
    ($name:ident, $t:ty, $acc:ty, $part:ty, $block:literal, $group:expr, $part_add:path, $acc_add:path) => {
        multiversion! {
            fn $name(acc: &mut [$acc], rows: &[&[$t]]) {
                const B: usize = $block;
                let whole = acc.len() / B * B;
                for x in (0..whole).step_by(B) {
                    for group in rows.chunks($group) {
                        let mut part = [<$part>::default(); B];
                        for row in group {
                            let row = &row[x..x + B];
                            for j in 0..B {
                                part[j] = $part_add(part[j], row[j] as $part);
                            }
                        }
                        for (a, &p) in acc[x..x + B].iter_mut().zip(&part) {
                            *a = $acc_add(*a, p as $acc);
                        }
                    }
                }
                for row in rows {
                    for (a, &v) in acc[whole..].iter_mut().zip(&row[whole..]) {
                        *a = $acc_add(*a, v as $acc);
                    }
                }
            }
        }
    };
}
// 257 * 255 = 65535 fits u16; 65537 * 65535 = 2^32 - 1 fits u32 (windows have at most
// 4095 rows). Four 512-bit vectors of partial sums a block.
column_sums!(add_rows_u8, u8, u32, u16, 128, 257, u16::wrapping_add, u32::wrapping_add);
column_sums!(add_rows_u16, u16, u64, u32, 64, 65537, u32::wrapping_add, u64::wrapping_add);
column_sums!(add_rows_f32, f32, f64, f64, 32, usize::MAX, core::ops::Add::add, core::ops::Add::add);

multiversion! {
    fn slide_row_f32(acc: &mut [f64], add: &[f32], sub: &[f32]) {
        for ((a, &x), &y) in acc.iter_mut().zip(add).zip(sub) {
            // add and subtract separately: (x - y) in f64 is exact for f32 inputs anyway.
            *a += x as f64 - y as f64;
        }
    }
}

multiversion! {
    fn diff_f64(p: &[f64], k: usize, out: &mut [f64]) {
        for ((o, &hi), &lo) in out.iter_mut().zip(&p[k..]).zip(p) {
            *o = hi - lo;
        }
    }
}

impl Lane for f32 {
    type Acc = f64;
    #[inline]
    fn add_rows(acc: &mut [f64], rows: &[&[f32]]) {
        add_rows_f32(acc, rows)
    }
    #[inline]
    fn slide_row(acc: &mut [f64], add: &[f32], sub: &[f32]) {
        slide_row_f32(acc, add, sub)
    }
    #[inline]
    fn from_f32(v: f32) -> f32 {
        v
    }
    #[inline]
    fn acc_from_f64(v: f64) -> f64 {
        v
    }
    #[inline]
    fn acc_add(a: f64, b: f64) -> f64 {
        a + b
    }
    #[inline]
    fn acc_sub(a: f64, b: f64) -> f64 {
        a - b
    }
    #[inline]
    fn acc_to_f64(a: f64) -> f64 {
        a
    }
    #[inline]
    fn window_diff(p: &[f64], k: usize, out: &mut [f64]) {
        diff_f64(p, k, out)
    }
}

/// Called once a turn in a loop whose body is already one vector's work: keeps LLVM's loop
/// vectorizer off the loop (an empty `asm!` is an instruction it cannot widen), so the
/// body is vectorized as written. Otherwise, from 8 turns up, it widened the loop across
/// turns with gathers (the box filter's mirrored edges took 40 % longer at m = 255).
#[inline(always)]
pub fn vectorize_body_only() {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    // SAFETY: an empty instruction sequence; it touches no memory, stack or flags.
    unsafe {
        core::arch::asm!("", options(nomem, nostack, preserves_flags))
    };
}

/// A zeroed scratch row whose element `lead` starts a 64-byte line (the width of an
/// AVX-512 vector): a vector store that straddles two lines costs about twice one that
/// does not, and the allocator only promises 16-byte alignment.
pub struct AlignedRow<T> {
    storage: alloc::vec::Vec<T>,
    start: usize,
    len: usize,
}

impl<T: Copy + Default> AlignedRow<T> {
    pub fn new(len: usize, lead: usize) -> crate::Result<Self> {
        let per_line = (64 / core::mem::size_of::<T>().max(1)).max(1);
        let storage = crate::error::try_filled(len.saturating_add(per_line), T::default())?;
        // storage[start + lead] on a line boundary; unaligned if that cannot be had.
        let start = storage.as_ptr().wrapping_add(lead).align_offset(64);
        let start = if start < per_line { start } else { 0 };
        Ok(AlignedRow { storage, start, len })
    }
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.storage[self.start..self.start + self.len]
    }
}

/// Largest area whose means [`round_div_u32_to_u8`] take one f32 product.
pub const F32_MEAN_EXACT_AREA: u32 = 1 << 14;
/// Largest area whose means [`round_div_u32_to_u8`] take in f32 (every square window up to
/// 256 x 256).
pub const F32_MEAN_MAX_AREA: u32 = 1 << 16;

multiversion! {
    /// `out[i] = round_half_up(sum[i] / area)` for exact integer window sums `sum[i] <= 255 area`,
    /// vectorized. round_half_up(s / a) = q = floor(t / a) with t = s + floor(a / 2) (for odd
    /// a, 2s + a is odd, so floor((2s + a) / 2a) = floor((2s + a - 1) / 2a)).
    ///
    /// Areas up to 2^16, in f32 (16 lanes of AVX-512): t <= 255.5 a < 2^24 converts exactly,
    /// and t / a = q + f / a with 0 <= f <= a - 1.
    /// - a <= 2^14, one product: with r = 1/a rounded up to f32 (r - 1/a < ulp(r) <= 2^-23 r,
    ///   so r a < 1 / (1 - 2^-23)), y = fl(t r) >= q: t r >= t / a >= q, and rounding is
    ///   monotone with q representable. Above, t r - t / a < 255.5 (1 / (1 - 2^-23) - 1)
    ///   < 2^-15, so t r < q + 1 - 1/a + 2^-15 <= q + 1 - 2^-15, a representable number below
    ///   q + 1 <= 256, so y < q + 1 and trunc(y) = q.
    /// - a <= 2^16, with FMA: 1/a split in two f32, r + r_lo (r nearest, r_lo the f32 nearest
    ///   1/a - r, |r_lo| <= 2^-24 r), and y = fma(t, r, fl(t r_lo)) rounds once. Before that
    ///   rounding, v = t / a + e with |e| <= (t / a) (2^-48 + 2^-48 + 2^-53) < 2^-38 (the
    ///   split's error, fl(t r_lo)'s, 1/a's in f64). For f = 0, q >= 1 (t >= a / 2 > 0) and v
    ///   is within 2^-38 of q, closer than any other f32, so y = q. Else
    ///   q < v <= q + 1 - 2^-16 + 2^-38, below the midpoint q + 1 - 2^-17 between q + 1 and the
    ///   f32 under it (f32 spacing <= 2^-16 below 256), so q <= y < q + 1: one more instruction
    ///   per vector than one product.
    /// - a <= 2^16, without FMA: trunc(fl(t r)) = q0 is q or q + 1 (t r < q + 2 by the same
    ///   bound), and q0 a <= 2^24 is exact in f32, so `q0 a > t` tells q0 = q + 1 exactly.
    ///
    /// Larger areas, in f64: with q = (2 s + a) / (2 a) <= 65536 and a < 2^25, the f64 product
    /// is within 2^-36 of q, and a non-integer q is at least 2^-25 below the next integer, so
    /// adding 2^-30 before the floor gives exactly floor(q).
    pub fn round_div_u32_to_u8(sums: &[u32], area: u32, out: &mut [u8]) {
        if area <= F32_MEAN_EXACT_AREA {
            let r = recip_up_f32(area);
            return round_div_f32::<false, false>(sums, area, r, 0.0, out);
        }
        if area <= F32_MEAN_MAX_AREA {
            // The level this call was dispatched at: whether its clone has an FMA instruction.
            if crate::cpu::level().has_fma() {
                let inv = 1.0 / area as f64;
                let r = inv as f32;
                return round_div_f32::<true, false>(sums, area, r, (inv - r as f64) as f32, out);
            }
            return round_div_f32::<false, true>(sums, area, recip_up_f32(area), 0.0, out);
        }
        let inv = 1.0 / (2.0 * area as f64);
        let bias = area as f64 * inv + 1.0 / (1u64 << 30) as f64;
        if (area as u64) * 255 < 1 << 31 {
            // Sums fit i32, whose conversion to f64 is one instruction (u32's is not before
            // AVX-512); the quotient is <= 255, so the i32 -> u8 truncation is exact.
            for (o, &s) in out.iter_mut().zip(sums) {
                let q = 2.0 * (s as i32) as f64 * inv + bias;
                // SAFETY: 0 <= q < 256.5, so it is in i32's range.
                *o = unsafe { q.to_int_unchecked::<i32>() } as u8;
            }
        } else {
            for (o, &s) in out.iter_mut().zip(sums) {
                *o = (2.0 * s as f64 * inv + bias) as u8;
            }
        }
    }
}

/// The f32 cases of [`round_div_u32_to_u8`] (inlined into each of its compiled versions):
/// one product by `r`, the two-part product `fma(t, r, t r_lo)` (`SPLIT`), or one product
/// and the exact correction (`CHECK`).
#[inline(always)]
fn round_div_f32<const SPLIT: bool, const CHECK: bool>(sums: &[u32], area: u32, r: f32, r_lo: f32, out: &mut [u8]) {
    let (half, max, a) = (area / 2, 255 * area, area as f32);
    for (o, &s) in out.iter_mut().zip(sums) {
        // (The min only keeps a sum beyond the contract in range.)
        let t = (s.min(max) + half) as i32 as f32;
        let y = if SPLIT { fma_f32(t, r, t * r_lo) } else { t * r };
        // SAFETY: 0 <= y < 257, in i32's range (a plain truncating conversion instead of
        // Rust's saturating one, which does not vectorize well).
        let q0 = unsafe { y.to_int_unchecked::<i32>() };
        *o = if CHECK { q0 - ((q0 as f32 * a > t) as i32) } else { q0 } as u8;
    }
}

/// `a b + c` rounded once (an FMA instruction where the compiled target has one).
#[inline(always)]
fn fma_f32(a: f32, b: f32, c: f32) -> f32 {
    #[cfg(feature = "std")]
    return a.mul_add(b, c);
    #[cfg(not(feature = "std"))]
    return libm::fmaf(a, b, c);
}

/// The smallest f32 >= 1 / a, for 1 <= a <= 2^24 (r a is exact in f64 there).
fn recip_up_f32(a: u32) -> f32 {
    let r = 1.0 / a as f32;
    if (r as f64) * (a as f64) < 1.0 {
        f32::from_bits(r.to_bits() + 1)
    } else {
        r
    }
}

multiversion! {
    /// As [`round_div_u32_to_u8`] for 16-bit means of u64 sums.
    pub fn round_div_u64_to_u16(sums: &[u64], area: u64, out: &mut [u16]) {
        let inv = 1.0 / (2.0 * area as f64);
        let bias = area as f64 * inv + 1.0 / (1u64 << 30) as f64;
        for (o, &s) in out.iter_mut().zip(sums) {
            let q = 2.0 * s as f64 * inv + bias;
            // SAFETY: 0 <= q < 65536.5 for means of u16 sums, in i32's range.
            *o = unsafe { q.to_int_unchecked::<i32>() } as u16;
        }
    }
}

multiversion! {
    /// `out[i] = sum[i] * scale` for f64 sums into f32.
    pub fn scale_f64_to_f32(sums: &[f64], scale: f64, out: &mut [f32]) {
        for (o, &s) in out.iter_mut().zip(sums) {
            *o = (s * scale) as f32;
        }
    }
}

/// Dot product of two f32 slices with 8 explicit lanes (`wide::f32x8`) and an f32
/// accumulator per lane; the building block of FIR filters and NCC cross terms.
#[inline]
pub fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    use wide::f32x8;
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = f32x8::ZERO;
    let chunks = n / 8;
    for i in 0..chunks {
        let x = f32x8::from(<[f32; 8]>::try_from(&a[i * 8..i * 8 + 8]).unwrap_or_default());
        let y = f32x8::from(<[f32; 8]>::try_from(&b[i * 8..i * 8 + 8]).unwrap_or_default());
        acc = x.mul_add(y, acc);
    }
    let mut s = acc.reduce_add();
    for i in chunks * 8..n {
        s += a[i] * b[i];
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`Lane::add_rows`] against a plain sum in u64 / f64: row counts across the u8
    /// partials' 257-row groups, widths with and without a partial block, full-scale rows.
    fn check_add_rows<L: Lane>(value: impl Fn(usize, usize) -> L, to_f64: impl Fn(L) -> f64) {
        for (width, height) in [(1, 1), (127, 3), (128, 257), (300, 258), (700, 600), (64, 4095)] {
            let data: alloc::vec::Vec<alloc::vec::Vec<L>> =
                (0..height).map(|y| (0..width + 5).map(|x| value(x, y)).collect()).collect();
            let rows: alloc::vec::Vec<&[L]> = data.iter().map(|r| &r[..]).collect();
            let mut acc = alloc::vec![L::acc_from_f64(7.0); width];
            L::add_rows(&mut acc, &rows);
            for (x, &a) in acc.iter().enumerate() {
                let want = 7.0 + data.iter().map(|r| to_f64(r[x])).sum::<f64>();
                assert_eq!(L::acc_to_f64(a), want, "{width} x {height}, column {x}");
            }
        }
    }

    #[test]
    fn add_rows_matches_plain_sums() {
        let noise = |x: usize, y: usize| (x * 131 + y * 71 + (x * y) % 7) % 256;
        // Full scale in the first 300 rows: more than one group of partials at the maximum.
        check_add_rows::<u8>(|x, y| if y < 300 { 255 } else { noise(x, y) as u8 }, |v| v as f64);
        check_add_rows::<u16>(|x, y| if y < 300 { 65535 } else { (noise(x, y) * 251) as u16 }, |v| v as f64);
        check_add_rows::<f32>(|x, y| noise(x, y) as f32 * 0.25 - 20.0, |v| v as f64);
    }
    use alloc::vec::Vec;

    fn check_round_div(area: u32, sums: &[u32]) {
        check_round_div_with(area, sums, "dispatched", round_div_u32_to_u8);
    }

    fn check_round_div_with(area: u32, sums: &[u32], path: &str, div: impl Fn(&[u32], u32, &mut [u8])) {
        let mut out = alloc::vec![0u8; sums.len()];
        div(sums, area, &mut out);
        for (&s, &o) in sums.iter().zip(&out) {
            assert_eq!(o as u64, (2 * s as u64 + area as u64) / (2 * area as u64), "s = {s}, area = {area}, {path}");
        }
    }

    #[test]
    fn round_div_f32_paths_are_exact_at_every_area() {
        // Every area of the f32 paths, at the sums whose quotient t / a (t = s + a / 2) is
        // an integer or closest below the next one (t = q a, q a + a - 1): the ends of the
        // proofs' margins. Each f32 path directly too, not only the one this CPU picks: the
        // two-part product here with a portable FMA, and the no-FMA correction.
        for area in 1..=F32_MEAN_MAX_AREA {
            let half = area / 2;
            let sums: Vec<u32> = (0..=256u32)
                .flat_map(|q| [q * area, q * area + area - 1])
                .filter_map(|t| t.checked_sub(half))
                .filter(|&s| s <= 255 * area)
                .collect();
            check_round_div(area, &sums);
            if area > F32_MEAN_EXACT_AREA {
                let inv = 1.0 / area as f64;
                let r = inv as f32;
                let lo = (inv - r as f64) as f32;
                check_round_div_with(area, &sums, "split", |s, a, o| round_div_f32::<true, false>(s, a, r, lo, o));
                let r = recip_up_f32(area);
                check_round_div_with(area, &sums, "checked", |s, a, o| round_div_f32::<false, true>(s, a, r, 0.0, o));
            }
        }
    }

    #[test]
    fn round_div_is_exact_round_half_up() {
        // Every sum of: every area up to 2048, every square window of the f32 paths (up to
        // 256 x 256), the largest areas of each (the smallest margins in the proofs); then
        // the f64 path's around its limits.
        let mut areas: Vec<u32> = (1..=2048).collect();
        areas.extend((46..=256u32).map(|m| m * m));
        areas.extend(F32_MEAN_EXACT_AREA - 15..=F32_MEAN_EXACT_AREA + 15);
        areas.extend(F32_MEAN_MAX_AREA - 15..=F32_MEAN_MAX_AREA);
        for area in areas {
            let sums: Vec<u32> = (0..=255 * area).collect();
            check_round_div(area, &sums);
        }
        for area in [F32_MEAN_MAX_AREA + 1, 65025, 1 << 20, 4095 * 4095] {
            let sums: Vec<u32> = (0..=255 * area).step_by((area as usize / 7).max(1)).collect();
            check_round_div(area, &sums);
        }
    }

    /// The remaining [`Lane`] steps and the mean conversions at every level against plain
    /// arithmetic: long enough for whole vectors of each level and a tail.
    #[test]
    fn lane_steps_and_means_match_scalar_at_every_level() {
        fn check_lane<L: Lane>(value: impl Fn(usize) -> L, to_f64: impl Fn(L) -> f64) {
            let n = 203;
            let (add, sub): (Vec<L>, Vec<L>) = ((0..n).map(&value).collect(), (0..n).map(|i| value(i * 7 + 3)).collect());
            let mut acc: Vec<L::Acc> = (0..n).map(|i| L::acc_from_f64(1e6 + i as f64)).collect();
            L::slide_row(&mut acc, &add, &sub);
            for i in 0..n {
                let want = 1e6 + i as f64 + to_f64(add[i]) - to_f64(sub[i]);
                assert_eq!(L::acc_to_f64(acc[i]), want, "slide {i}");
            }
            let k = 9;
            let mut out = alloc::vec![L::Acc::default(); n - k];
            L::window_diff(&acc, k, &mut out);
            for (i, &o) in out.iter().enumerate() {
                assert_eq!(o, L::acc_sub(acc[i + k], acc[i]), "diff {i}");
            }
        }
        crate::testing::at_every_level(|_| {
            check_lane::<u8>(|i| (i * 131 % 256) as u8, |v| v as f64);
            check_lane::<u16>(|i| (i * 40503 % 65536) as u16, |v| v as f64);
            check_lane::<f32>(|i| (i * 37 % 1000) as f32 * 0.25 - 60.0, |v| v as f64);
            check_add_rows::<u8>(|x, y| ((x * 131 + y * 71) % 256) as u8, |v| v as f64);
            check_add_rows::<f32>(|x, y| ((x * 7 + y * 3) % 97) as f32 * 0.5, |v| v as f64);
            for area in [1, 9, 225, F32_MEAN_EXACT_AREA, F32_MEAN_EXACT_AREA + 1, 65025, F32_MEAN_MAX_AREA, F32_MEAN_MAX_AREA + 1, 1 << 20] {
                let sums: Vec<u32> = (0..=255 * area).step_by((area as usize / 13).max(1)).collect();
                check_round_div(area, &sums);
            }
            let sums: Vec<u64> = (0..300u64).map(|i| i * 65535 * 49 / 299).collect();
            let mut means = alloc::vec![0u16; sums.len()];
            round_div_u64_to_u16(&sums, 49, &mut means);
            for (&s, &m) in sums.iter().zip(&means) {
                assert_eq!(m as u64, (2 * s + 49) / 98, "{s}");
            }
            let sums: Vec<f64> = (0..300).map(|i| i as f64 * 1.37 - 99.0).collect();
            let mut out = alloc::vec![0f32; sums.len()];
            scale_f64_to_f32(&sums, 1.0 / 49.0, &mut out);
            for (&s, &o) in sums.iter().zip(&out) {
                assert_eq!(o, (s * (1.0 / 49.0)) as f32);
            }
        });
    }

    #[test]
    fn recip_up_is_the_least_f32_above() {
        for a in (1..=70_000u32).chain([1 << 24, 16_777_215]) {
            let r = recip_up_f32(a);
            assert!(r as f64 * a as f64 >= 1.0, "{a}");
            assert!((f32::from_bits(r.to_bits() - 1) as f64) * (a as f64) < 1.0, "{a}");
        }
    }

    #[test]
    fn dot_matches_scalar() {
        let a: Vec<f32> = (0..37).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..37).map(|i| 1.0 - i as f32 * 0.25).collect();
        let want: f64 = a.iter().zip(&b).map(|(x, y)| *x as f64 * *y as f64).sum();
        assert!((dot_f32(&a, &b) as f64 - want).abs() < 1e-3);
    }
}
