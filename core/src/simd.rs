//! The few vector helpers shared by kernels, compiled for several x86-64 levels and picked
//! at run time (`multiversion`): the shipped library runs on any x86-64 and uses AVX2 or
//! AVX-512 where the CPU has them. Run-time detection needs std (the `multiversion` crate
//! links it), so a `no_std` build compiles one version for its target's features: kernels
//! write `#[cfg_attr(feature = "std", multiversion(targets(...)))]`. The loops are written so that LLVM vectorizes them at
//! the width of the selected target (checked in the generated code: `vpaddd zmm` on the
//! AVX-512 clone); `wide` carries the explicit f32 lanes where the arithmetic is not a
//! plain element-wise map.

#[cfg(feature = "std")]
use multiversion::multiversion;

/// A channel type whose running window sums accumulate exactly (integers) or without
/// drift (f32 in f64) in `Acc`.
pub trait Lane: Copy + Send + Sync + 'static {
    /// Accumulator: u32 for u8, u64 for u16, f64 for f32. Integer accumulators wrap, and
    /// differences of wrapped prefix sums are still exact while a window sum fits.
    type Acc: Copy + Default + Send + Sync + PartialEq + core::fmt::Debug + 'static;
    /// `acc[i] += add[i]`.
    fn add_row(acc: &mut [Self::Acc], add: &[Self]);
    /// `acc[i] += add[i] - sub[i]`: one step of the vertical sliding window.
    fn slide_row(acc: &mut [Self::Acc], add: &[Self], sub: &[Self]);
    /// In-place running prefix of each row of `row_len` elements in `p`, along interleaved
    /// channels: `p[i] += p[i - channels]`. Four single-channel rows run as four
    /// interleaved chains: a prefix sum is a serial chain of adds, and independent chains
    /// side by side keep the adder busy (4x for f64, whose add has 4 cycles of latency).
    fn prefix_rows(p: &mut [Self::Acc], row_len: usize, channels: usize);
    fn from_f32(v: f32) -> Self;
    fn acc_from_f64(v: f64) -> Self::Acc;
    fn acc_add(a: Self::Acc, b: Self::Acc) -> Self::Acc;
    fn acc_sub(a: Self::Acc, b: Self::Acc) -> Self::Acc;
    fn acc_to_f64(a: Self::Acc) -> f64;
    /// `out[i] = p[i + k] - p[i]`: window sums from prefix sums.
    fn window_diff(p: &[Self::Acc], k: usize, out: &mut [Self::Acc]);
}

macro_rules! int_lane {
    ($t:ty, $acc:ty, $add:ident, $slide:ident, $prefix:ident, $diff:ident) => {
        #[cfg_attr(feature = "std", multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2+fma")))]
        fn $diff(p: &[$acc], k: usize, out: &mut [$acc]) {
            for ((o, &hi), &lo) in out.iter_mut().zip(&p[k..]).zip(p) {
                *o = hi.wrapping_sub(lo);
            }
        }
        #[cfg_attr(feature = "std", multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2+fma")))]
        fn $add(acc: &mut [$acc], add: &[$t]) {
            for (a, &x) in acc.iter_mut().zip(add) {
                *a = a.wrapping_add(x as $acc);
            }
        }
        #[cfg_attr(feature = "std", multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2+fma")))]
        fn $slide(acc: &mut [$acc], add: &[$t], sub: &[$t]) {
            for ((a, &x), &y) in acc.iter_mut().zip(add).zip(sub) {
                *a = a.wrapping_add(x as $acc).wrapping_sub(y as $acc);
            }
        }
        fn $prefix(p: &mut [$acc], len: usize, c: usize) {
            if c == 1 && p.len() == 4 * len {
                let (r0, rest) = p.split_at_mut(len);
                let (r1, rest) = rest.split_at_mut(len);
                let (r2, r3) = rest.split_at_mut(len);
                let mut a: [$acc; 4] = [0; 4];
                for (((v0, v1), v2), v3) in r0.iter_mut().zip(r1.iter_mut()).zip(r2.iter_mut()).zip(r3.iter_mut()) {
                    a[0] = a[0].wrapping_add(*v0);
                    a[1] = a[1].wrapping_add(*v1);
                    a[2] = a[2].wrapping_add(*v2);
                    a[3] = a[3].wrapping_add(*v3);
                    (*v0, *v1, *v2, *v3) = (a[0], a[1], a[2], a[3]);
                }
                return;
            }
            for row in p.chunks_exact_mut(len) {
                // One running register per channel: no reload of the previous element.
                match c {
                    1 => {
                        let mut a: $acc = 0;
                        for v in row.iter_mut() {
                            a = a.wrapping_add(*v);
                            *v = a;
                        }
                    }
                    4 => {
                        let mut a = [0 as $acc; 4];
                        for px in row.chunks_exact_mut(4) {
                            for (acc, v) in a.iter_mut().zip(px) {
                                *acc = acc.wrapping_add(*v);
                                *v = *acc;
                            }
                        }
                    }
                    _ => {
                        for i in c..row.len() {
                            row[i] = row[i].wrapping_add(row[i - c]);
                        }
                    }
                }
            }
        }
        impl Lane for $t {
            type Acc = $acc;
            #[inline]
            fn add_row(acc: &mut [$acc], add: &[$t]) {
                $add(acc, add)
            }
            #[inline]
            fn slide_row(acc: &mut [$acc], add: &[$t], sub: &[$t]) {
                $slide(acc, add, sub)
            }
            #[inline]
            fn prefix_rows(p: &mut [$acc], len: usize, c: usize) {
                $prefix(p, len, c)
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
int_lane!(u8, u32, add_row_u8, slide_row_u8, prefix_u32, diff_u32);
int_lane!(u16, u64, add_row_u16, slide_row_u16, prefix_u64, diff_u64);

#[cfg_attr(feature = "std", multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2+fma")))]
fn add_row_f32(acc: &mut [f64], add: &[f32]) {
    for (a, &x) in acc.iter_mut().zip(add) {
        *a += x as f64;
    }
}
#[cfg_attr(feature = "std", multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2+fma")))]
fn slide_row_f32(acc: &mut [f64], add: &[f32], sub: &[f32]) {
    for ((a, &x), &y) in acc.iter_mut().zip(add).zip(sub) {
        // add and subtract separately: (x - y) in f64 is exact for f32 inputs anyway.
        *a += x as f64 - y as f64;
    }
}

#[cfg_attr(feature = "std", multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2+fma")))]
fn diff_f64(p: &[f64], k: usize, out: &mut [f64]) {
    for ((o, &hi), &lo) in out.iter_mut().zip(&p[k..]).zip(p) {
        *o = hi - lo;
    }
}

impl Lane for f32 {
    type Acc = f64;
    #[inline]
    fn add_row(acc: &mut [f64], add: &[f32]) {
        add_row_f32(acc, add)
    }
    #[inline]
    fn slide_row(acc: &mut [f64], add: &[f32], sub: &[f32]) {
        slide_row_f32(acc, add, sub)
    }
    fn prefix_rows(p: &mut [f64], len: usize, c: usize) {
        if c == 1 && p.len() == 4 * len {
            let (r0, rest) = p.split_at_mut(len);
            let (r1, rest) = rest.split_at_mut(len);
            let (r2, r3) = rest.split_at_mut(len);
            let mut a = [0.0f64; 4];
            for (((v0, v1), v2), v3) in r0.iter_mut().zip(r1.iter_mut()).zip(r2.iter_mut()).zip(r3.iter_mut()) {
                a[0] += *v0;
                a[1] += *v1;
                a[2] += *v2;
                a[3] += *v3;
                (*v0, *v1, *v2, *v3) = (a[0], a[1], a[2], a[3]);
            }
            return;
        }
        for row in p.chunks_exact_mut(len) {
            for i in c..row.len() {
                row[i] += row[i - c];
            }
        }
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

/// `out[i] = round_half_up(sum[i] / area)` for exact integer window sums, vectorized.
/// Exact: with q = (2 s + a) / (2 a) <= 65536 and a < 2^25, the f64 product is within
/// 2^-36 of q, and a non-integer q is at least 2^-25 below the next integer, so adding
/// 2^-30 before the floor gives exactly floor(q).
#[cfg_attr(feature = "std", multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2+fma")))]
pub fn round_div_u32_to_u8(sums: &[u32], area: u32, out: &mut [u8]) {
    let inv = 1.0 / (2.0 * area as f64);
    let bias = area as f64 * inv + 1.0 / (1u64 << 30) as f64;
    if (area as u64) * 255 < 1 << 31 {
        // Sums fit i32, whose conversion to f64 is one instruction (u32's is not before
        // AVX-512); the quotient is <= 255, so the i32 -> u8 truncation is exact.
        for (o, &s) in out.iter_mut().zip(sums) {
            let q = 2.0 * (s as i32) as f64 * inv + bias;
            // SAFETY: 0 <= q < 256.5, so it is in i32's range (a plain truncating
            // conversion instead of Rust's saturating one, which does not vectorize well).
            *o = unsafe { q.to_int_unchecked::<i32>() } as u8;
        }
    } else {
        for (o, &s) in out.iter_mut().zip(sums) {
            *o = (2.0 * s as f64 * inv + bias) as u8;
        }
    }
}

/// As [`round_div_u32_to_u8`] for 16-bit means of u64 sums.
#[cfg_attr(feature = "std", multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2+fma")))]
pub fn round_div_u64_to_u16(sums: &[u64], area: u64, out: &mut [u16]) {
    let inv = 1.0 / (2.0 * area as f64);
    let bias = area as f64 * inv + 1.0 / (1u64 << 30) as f64;
    for (o, &s) in out.iter_mut().zip(sums) {
        let q = 2.0 * s as f64 * inv + bias;
        // SAFETY: 0 <= q < 65536.5 for means of u16 sums, in i32's range.
        *o = unsafe { q.to_int_unchecked::<i32>() } as u16;
    }
}

/// `out[i] = sum[i] * scale` for f64 sums into f32.
#[cfg_attr(feature = "std", multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2+fma")))]
pub fn scale_f64_to_f32(sums: &[f64], scale: f64, out: &mut [f32]) {
    for (o, &s) in out.iter_mut().zip(sums) {
        *o = (s * scale) as f32;
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
    use alloc::vec::Vec;

    #[test]
    fn round_div_is_exact_round_half_up() {
        for area in [1u32, 2, 3, 7, 9, 25, 255, 1000, 65025] {
            let sums: Vec<u32> = (0..=255 * area).step_by((area as usize / 7).max(1)).collect();
            let mut out = alloc::vec![0u8; sums.len()];
            round_div_u32_to_u8(&sums, area, &mut out);
            for (&s, &o) in sums.iter().zip(&out) {
                assert_eq!(o as u32, (2 * s + area) / (2 * area), "s = {s}, area = {area}");
            }
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
