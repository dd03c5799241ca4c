//! Running (prefix) sums along a row, vectorized along the row (u32 and f64).
//!
//! A prefix sum is a serial chain of adds, so a scalar loop costs about a cycle per
//! element (four for f64, whose add has that latency); it was half the time of the
//! sliding-window box filter. Vectorized with a look-back of one vector instead of an
//! in-register scan followed by a carry broadcast: with `L` lanes,
//! `P[i] = P[i - L] + (x[i - L + 1] + ... + x[i])`. The bracket is a window of `L` lanes,
//! built in log2(L) steps of "add the vector shifted by s lanes", where the lanes shifted
//! in come from the previous block's vector of the same step (`valignd`, one shuffle
//! each); `P[i - L]` is the previous output vector, so the only loop-carried chain is one
//! vector add per block. Interleaved channels (RGBA) shift by multiples of the channel
//! count, so each channel sums only its own lanes.
//!
//! Integer adds wrap; differences of prefix sums are exact while the true difference fits
//! (how the sliding window uses them). f64 sums come out in another order than the serial
//! loop's (each `P[i]` is a chain of `i / L` block sums of `L` terms), with no larger
//! error bound.

use crate::cpu::{multiversion, Level};

/// An element type with running sums.
pub trait ScanElem: Copy + 'static {
    const ZERO: Self;
    /// Wrapping for integers.
    fn plus(self, b: Self) -> Self;
    /// Writes the leading whole vectors with the kernel of `level`; returns how many
    /// elements it wrote (0: no kernel for this type, level or channel count).
    ///
    /// # Safety
    /// As the private `run`.
    unsafe fn vectorized(level: Level, src: *const Self, dst: *mut Self, n: usize, c: usize) -> usize {
        let _ = (level, src, dst, n, c);
        0
    }
}

/// `dst[i] = src[i] + dst[i - channels]` (`dst[i] = src[i]` for `i < channels`): running
/// sums of each of `channels` interleaved channels, over the common length of the slices.
pub fn prefix_sum<T: ScanElem>(src: &[T], dst: &mut [T], channels: usize) {
    let n = src.len().min(dst.len());
    // SAFETY: both pointers cover n elements; src and dst are distinct borrows.
    unsafe { run(crate::cpu::level(), src.as_ptr(), dst.as_mut_ptr(), n, channels) }
}

/// [`prefix_sum`] in place.
pub fn prefix_sum_in_place<T: ScanElem>(p: &mut [T], channels: usize) {
    let n = p.len();
    let ptr = p.as_mut_ptr();
    // SAFETY: one buffer of n elements; the kernels read each block before they write it.
    unsafe { run(crate::cpu::level(), ptr, ptr, n, channels) }
}

/// # Safety
/// `src` readable and `dst` writable for `n` elements; they are equal or do not overlap;
/// the CPU supports `level`.
unsafe fn run<T: ScanElem>(level: Level, src: *const T, dst: *mut T, n: usize, c: usize) {
    let c = c.max(1);
    // SAFETY: forwarded.
    let done = unsafe { T::vectorized(level, src, dst, n, c) };
    // The tail (and every unvectorized case): the scalar recurrence.
    for i in done..n {
        // SAFETY: i < n; i - c < i was written before.
        unsafe {
            let before = if i >= c { *dst.add(i - c) } else { T::ZERO };
            *dst.add(i) = before.plus(*src.add(i));
        }
    }
}

impl ScanElem for u64 {
    const ZERO: u64 = 0;
    #[inline(always)]
    fn plus(self, b: u64) -> u64 {
        self.wrapping_add(b)
    }
}

/// `impl ScanElem` for a type with kernels on both x86 levels: `$v512` / `$v256` are the
/// vector types; each scans the channel counts (powers of two) below its lane count.
macro_rules! vector_scan {
    ($t:ty, $zero:expr, |$a:ident, $b:ident| $plus:expr, $v512:ident, $v256:ident) => {
        impl ScanElem for $t {
            const ZERO: $t = $zero;
            #[inline(always)]
            fn plus(self, $b: $t) -> $t {
                let $a = self;
                $plus
            }
            unsafe fn vectorized(level: Level, src: *const $t, dst: *mut $t, n: usize, c: usize) -> usize {
                multiversion! {
                    on level;
                    type V = x86::$v512, x86::$v256, OneLane<$t>;
                    /// # Safety
                    /// As `run`.
                    unsafe fn scan_at(level: Level, src: *const $t, dst: *mut $t, n: usize, c: usize) -> usize {
                        let _ = level;
                        // SAFETY: forwarded contract of `run`; the clone enables V's features.
                        unsafe {
                            match c {
                                1 => scan::<V, 1>(src, dst, n),
                                2 => scan::<V, 2>(src, dst, n),
                                4 => scan::<V, 4>(src, dst, n),
                                8 => scan::<V, 8>(src, dst, n),
                                _ => 0,
                            }
                        }
                    }
                }
                // SAFETY: forwarded contract of `run`.
                unsafe { scan_at(level, src, dst, n, c) }
            }
        }
    };
}
vector_scan!(u32, 0, |a, b| a.wrapping_add(b), Avx512U32, Avx2U32);
vector_scan!(f64, 0.0, |a, b| a + b, Avx512F64, Avx2F64);

/// The portable level's "vector": one lane, so [`scan`] leaves every element to the
/// scalar loop of `run` (a serial chain either way).
#[derive(Clone, Copy)]
struct OneLane<T>(T);

impl<T: ScanElem> ScanVec for OneLane<T> {
    type T = T;
    const LANES: usize = 1;
    fn zero() -> Self {
        OneLane(T::ZERO)
    }
    unsafe fn load(p: *const T) -> Self {
        // SAFETY: the caller's contract.
        OneLane(unsafe { *p })
    }
    unsafe fn store(self, p: *mut T) {
        // SAFETY: the caller's contract.
        unsafe { *p = self.0 }
    }
    fn add(self, b: Self) -> Self {
        OneLane(self.0.plus(b.0))
    }
    fn shift_in(self, prev: Self, _s: usize) -> Self {
        prev
    }
}

/// A vector of lanes, only constructed inside functions compiled for its level.
trait ScanVec: Copy {
    type T;
    const LANES: usize;
    fn zero() -> Self;
    /// # Safety
    /// `p` points to `LANES` readable elements.
    unsafe fn load(p: *const Self::T) -> Self;
    /// # Safety
    /// `p` points to `LANES` writable elements.
    unsafe fn store(self, p: *mut Self::T);
    fn add(self, b: Self) -> Self;
    /// `self` moved up by `s` lanes (`s` a power of two below `LANES`), the `s` lanes
    /// shifted in taken from the top of `prev`: lane `i` is `self[i - s]` or
    /// `prev[LANES - s + i]`.
    fn shift_in(self, prev: Self, s: usize) -> Self;
}

/// The vector kernel: whole blocks of `V::LANES`; returns the elements written.
///
/// # Safety
/// As [`run`]; the caller's function enables `V`'s target features.
#[inline(always)]
unsafe fn scan<V: ScanVec, const C: usize>(src: *const V::T, dst: *mut V::T, n: usize) -> usize {
    if C >= V::LANES {
        return 0;
    }
    // levels[k]: the previous block's input to step k (shift by C << k); out: the
    // previous block's prefix.
    let mut levels = [V::zero(); 4];
    let mut out = V::zero();
    let mut i = 0;
    // Two blocks a turn: the loop-carried vectors then need no register moves.
    while i + 2 * V::LANES <= n {
        // SAFETY: i + 2 LANES <= n.
        unsafe {
            block::<V, C>(src.add(i), dst.add(i), &mut levels, &mut out);
            block::<V, C>(src.add(i + V::LANES), dst.add(i + V::LANES), &mut levels, &mut out);
        }
        i += 2 * V::LANES;
    }
    if i + V::LANES <= n {
        // SAFETY: i + LANES <= n.
        unsafe { block::<V, C>(src.add(i), dst.add(i), &mut levels, &mut out) };
        i += V::LANES;
    }
    i
}

/// One block of [`scan`] (a function, not a closure: closures do not inherit the
/// caller's target features, so the intrinsics would not inline into one).
///
/// # Safety
/// `src` / `dst` readable / writable for `LANES` elements; `V`'s features enabled.
#[inline(always)]
unsafe fn block<V: ScanVec, const C: usize>(src: *const V::T, dst: *mut V::T, levels: &mut [V; 4], out: &mut V) {
    // SAFETY: the caller's contract.
    let mut w = unsafe { V::load(src) };
    let (mut s, mut k) = (C, 0);
    while s < V::LANES {
        let shifted = w.shift_in(levels[k], s);
        levels[k] = w;
        w = w.add(shifted);
        s *= 2;
        k += 1;
    }
    // w[j] = x[i + j - L + C] + ... + x[i + j] (the lanes of j's channel).
    *out = out.add(w);
    // SAFETY: the caller's contract.
    unsafe { out.store(dst) };
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::ScanVec;
    use core::arch::x86_64::*;

    // Crate-private, and only constructed inside `scan_at`'s clones.
    #[derive(Clone, Copy)]
    pub struct Avx512U32(__m512i);
    #[derive(Clone, Copy)]
    pub struct Avx2U32(__m256i);
    #[derive(Clone, Copy)]
    pub struct Avx512F64(__m512d);
    #[derive(Clone, Copy)]
    pub struct Avx2F64(__m256d);

    // SAFETY (all methods): the intrinsics need the level's features, which the callers
    // (the clones of `vectorized`'s `scan_at`) enable and have checked; pointer contracts
    // are the trait's.
    impl ScanVec for Avx512U32 {
        type T = u32;
        const LANES: usize = 16;
        #[inline(always)]
        fn zero() -> Self {
            Avx512U32(unsafe { _mm512_setzero_si512() })
        }
        #[inline(always)]
        unsafe fn load(p: *const u32) -> Self {
            Avx512U32(unsafe { _mm512_loadu_si512(p.cast()) })
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut u32) {
            unsafe { _mm512_storeu_si512(p.cast(), self.0) }
        }
        #[inline(always)]
        fn add(self, b: Self) -> Self {
            Avx512U32(unsafe { _mm512_add_epi32(self.0, b.0) })
        }
        #[inline(always)]
        fn shift_in(self, prev: Self, s: usize) -> Self {
            // valignd: the top s lanes of prev, then self's low lanes.
            Avx512U32(unsafe {
                match s {
                    1 => _mm512_alignr_epi32::<15>(self.0, prev.0),
                    2 => _mm512_alignr_epi32::<14>(self.0, prev.0),
                    4 => _mm512_alignr_epi32::<12>(self.0, prev.0),
                    _ => _mm512_alignr_epi32::<8>(self.0, prev.0),
                }
            })
        }
    }

    impl ScanVec for Avx2U32 {
        type T = u32;
        const LANES: usize = 8;
        #[inline(always)]
        fn zero() -> Self {
            Avx2U32(unsafe { _mm256_setzero_si256() })
        }
        #[inline(always)]
        unsafe fn load(p: *const u32) -> Self {
            Avx2U32(unsafe { _mm256_loadu_si256(p.cast()) })
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut u32) {
            unsafe { _mm256_storeu_si256(p.cast(), self.0) }
        }
        #[inline(always)]
        fn add(self, b: Self) -> Self {
            Avx2U32(unsafe { _mm256_add_epi32(self.0, b.0) })
        }
        #[inline(always)]
        fn shift_in(self, prev: Self, s: usize) -> Self {
            // [prev's high half, self's low half], then byte-align within 128-bit halves.
            Avx2U32(unsafe {
                let mid = _mm256_permute2x128_si256::<0x21>(prev.0, self.0);
                match s {
                    1 => _mm256_alignr_epi8::<12>(self.0, mid),
                    2 => _mm256_alignr_epi8::<8>(self.0, mid),
                    _ => mid,
                }
            })
        }
    }

    impl ScanVec for Avx512F64 {
        type T = f64;
        const LANES: usize = 8;
        #[inline(always)]
        fn zero() -> Self {
            Avx512F64(unsafe { _mm512_setzero_pd() })
        }
        #[inline(always)]
        unsafe fn load(p: *const f64) -> Self {
            Avx512F64(unsafe { _mm512_loadu_pd(p) })
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut f64) {
            unsafe { _mm512_storeu_pd(p, self.0) }
        }
        #[inline(always)]
        fn add(self, b: Self) -> Self {
            Avx512F64(unsafe { _mm512_add_pd(self.0, b.0) })
        }
        #[inline(always)]
        fn shift_in(self, prev: Self, s: usize) -> Self {
            // valignq on the bits: the top s lanes of prev, then self's low lanes.
            Avx512F64(unsafe {
                let (a, b) = (_mm512_castpd_si512(self.0), _mm512_castpd_si512(prev.0));
                _mm512_castsi512_pd(match s {
                    1 => _mm512_alignr_epi64::<7>(a, b),
                    2 => _mm512_alignr_epi64::<6>(a, b),
                    _ => _mm512_alignr_epi64::<4>(a, b),
                })
            })
        }
    }

    impl ScanVec for Avx2F64 {
        type T = f64;
        const LANES: usize = 4;
        #[inline(always)]
        fn zero() -> Self {
            Avx2F64(unsafe { _mm256_setzero_pd() })
        }
        #[inline(always)]
        unsafe fn load(p: *const f64) -> Self {
            Avx2F64(unsafe { _mm256_loadu_pd(p) })
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut f64) {
            unsafe { _mm256_storeu_pd(p, self.0) }
        }
        #[inline(always)]
        fn add(self, b: Self) -> Self {
            Avx2F64(unsafe { _mm256_add_pd(self.0, b.0) })
        }
        #[inline(always)]
        fn shift_in(self, prev: Self, s: usize) -> Self {
            // mid = [prev[2], prev[3], self[0], self[1]]; s = 1 interleaves mid and self.
            Avx2F64(unsafe {
                let mid = _mm256_permute2f128_pd::<0x21>(prev.0, self.0);
                match s {
                    1 => _mm256_shuffle_pd::<0b0101>(mid, self.0),
                    _ => mid,
                }
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    fn scalar<T: ScanElem>(src: &[T], c: usize) -> Vec<T> {
        let mut d = src.to_vec();
        for i in c..d.len() {
            d[i] = d[i - c].plus(d[i]);
        }
        d
    }

    /// Every level and the public entry points, copying and in place, against `scalar`.
    fn check<T: ScanElem + PartialEq + core::fmt::Debug>(src: &[T], c: usize) {
        let n = src.len();
        let want = scalar(src, c);
        for level in Level::available() {
            let mut got = src.to_vec();
            got.reverse();
            // SAFETY: distinct buffers of n elements; level available.
            unsafe { run(level, src.as_ptr(), got.as_mut_ptr(), n, c) };
            assert_eq!(got, want, "{level:?}, c = {c}, n = {n}");
            let mut inplace = src.to_vec();
            let p = inplace.as_mut_ptr();
            // SAFETY: one buffer of n elements; level available.
            unsafe { run(level, p, p, n, c) };
            assert_eq!(inplace, want, "{level:?}, in place, c = {c}, n = {n}");
        }
        let mut got = src.to_vec();
        got.reverse();
        prefix_sum(src, &mut got, c);
        assert_eq!(got, want);
        let mut inplace = src.to_vec();
        prefix_sum_in_place(&mut inplace, c);
        assert_eq!(inplace, want);
    }

    #[test]
    fn matches_scalar_for_every_length_and_channel_count() {
        let src: Vec<u32> = (0..300u32).map(|i| i.wrapping_mul(2_654_435_761) >> 3).collect();
        // Small integers: f64 sums are exact, so any order must match the serial loop.
        let srcf: Vec<f64> = src.iter().map(|&v| (v % 1000) as f64).collect();
        let src64: Vec<u64> = src.iter().map(|&v| v as u64 * 3).collect();
        for c in [1, 2, 3, 4, 8, 16, 17] {
            for n in (0..80).chain([255, 256, 257, 300]) {
                check(&src[..n], c);
                check(&srcf[..n], c);
                check(&src64[..n], c);
            }
        }
    }

    #[test]
    fn wraps_like_the_scalar_recurrence() {
        check(&alloc::vec![u32::MAX - 3; 100], 1);
        check(&alloc::vec![u32::MAX; 37], 4);
    }

    #[test]
    fn f64_order_keeps_the_error_small() {
        // Fractions that do not sum exactly: the vector order may differ from the serial
        // loop in the last bits only.
        let src: Vec<f64> = (0..1000).map(|i| 1.0 / (i as f64 + 3.0)).collect();
        let want = scalar(&src, 1);
        let mut got = alloc::vec![0.0; src.len()];
        prefix_sum(&src, &mut got, 1);
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-14 * w.abs(), "{g} vs {w}");
        }
    }
}
