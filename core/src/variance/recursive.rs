//! `Recursive`: local variance from O(1) running sums, exact on integer images.
//!
//! The 1-D tent of radius `R = 2^k - 1` is a box of width `B = R + 1` convolved with itself:
//! `w(j) = R + 1 - |j| = #{(a, b) in [0, B)^2 : a + b - R = j}`, so the weighted sums of `x`
//! and `x^2` over the tent are two cascaded box sums per axis. The streaming engine computes
//! them row by row without any intermediate image (`TentStream`: vertical running boxes with a ring of
//! `B` rows, horizontal double prefix sums; see `tent_sums.rs`), outside pixels from the
//! border rule applied to the ORIGINAL image for the whole kernel. A box kernel is one
//! stage of width `2r + 1` on the crate's running-sum engine, [`window_sums`], with `x` and
//! `x^2` as two interleaved lanes of a padded image; the lane types here ([`Sum16`],
//! [`Sum32`], [`SumF64`]) keep each running prefix in a register.
//!
//! u8 / u16: every sum is an integer (wrapping u32 / u64 arithmetic, exact while a window
//! sum fits, which [`MAX_TENT_RADIUS`](super::MAX_TENT_RADIUS) guarantees). The numerator
//! `W S2 - S1^2 = W^2 var` is formed exactly, in wrapping u64 where it provably stays below
//! `2^64` (`W^2 max_var < 2^64`: u8 up to R = 63, one vectorized multiply) and in u128
//! beyond, and one final division gives the variance: within one f32 ulp of the exact
//! rational (zero exactly where it is zero).
//!
//! f32: the sums run in f64 on `x - K`, `K` the rounded mean of the image's finite values
//! ([`global_shift`](super::global_shift)), as running sums whose partial sums stay at
//! window scale; the error is then about `2^-40 max (x - K)^2` absolute (the tests check it
//! on rows of 4 000 pixels with regional offsets), independent of how large the mean is
//! against the spread, before the final rounding to f32. Non-finite inputs are replaced by
//! 0 in the sums and counted by the same sums of a 0/1 image: a pixel whose kernel contains
//! one is NaN, every other pixel is unaffected.

use super::tent_sums::{TentLanes, TentStream};
use super::{non_negative, pad_map, Outputs, VarianceKernel, VarianceParams};
use crate::border::Border;
use crate::error::{Error, Result};
use crate::filter::{window_sums, LaneView, Window};
use crate::image::{Image, ImageView, ImageViewMut, Pixel};
use crate::parallel::{for_each_band, Parallelism};
use crate::simd::Lane;
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, Ordering};
#[cfg(feature = "std")]
use multiversion::multiversion;

macro_rules! sum_lane {
    ($t:ident, $v:ty, $acc:ty, $add:ident, $slide:ident, $diff:ident, $plus:expr, $minus:expr) => {
        #[doc = concat!("Running-sum lane of `", stringify!($v), "` values, accumulating in `", stringify!($acc), "`.")]
        #[derive(Clone, Copy, Debug, Default, PartialEq)]
        #[repr(transparent)]
        pub struct $t(pub $v);
        impl Pixel for $t {
            const NAME: &'static str = stringify!($t);
        }
        #[cfg_attr(feature = "std", multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2+fma")))]
        fn $add(acc: &mut [$acc], add: &[$t]) {
            let plus: fn($acc, $acc) -> $acc = $plus;
            for (a, x) in acc.iter_mut().zip(add) {
                *a = plus(*a, x.0 as $acc);
            }
        }
        #[cfg_attr(feature = "std", multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2+fma")))]
        fn $slide(acc: &mut [$acc], add: &[$t], sub: &[$t]) {
            let (plus, minus): (fn($acc, $acc) -> $acc, fn($acc, $acc) -> $acc) = ($plus, $minus);
            for ((a, x), y) in acc.iter_mut().zip(add).zip(sub) {
                *a = minus(plus(*a, x.0 as $acc), y.0 as $acc);
            }
        }
        #[cfg_attr(feature = "std", multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2+fma")))]
        fn $diff(p: &[$acc], k: usize, out: &mut [$acc]) {
            let minus: fn($acc, $acc) -> $acc = $minus;
            for ((o, &hi), &lo) in out.iter_mut().zip(&p[k..]).zip(p) {
                *o = minus(hi, lo);
            }
        }
        impl Lane for $t {
            type Acc = $acc;
            #[inline]
            fn window_diff(p: &[$acc], k: usize, out: &mut [$acc]) {
                $diff(p, k, out)
            }
            #[inline]
            fn add_row(acc: &mut [$acc], add: &[$t]) {
                $add(acc, add)
            }
            #[inline]
            fn slide_row(acc: &mut [$acc], add: &[$t], sub: &[$t]) {
                $slide(acc, add, sub)
            }
            fn prefix_rows(p: &mut [$acc], len: usize, c: usize) {
                prefix_rows_in_registers(p, len, c, $plus)
            }
            #[inline]
            fn from_f32(v: f32) -> $t {
                $t(v as $v)
            }
            #[inline]
            fn acc_from_f64(v: f64) -> $acc {
                v as $acc
            }
            #[inline]
            fn acc_add(a: $acc, b: $acc) -> $acc {
                ($plus)(a, b)
            }
            #[inline]
            fn acc_sub(a: $acc, b: $acc) -> $acc {
                ($minus)(a, b)
            }
            #[inline]
            fn acc_to_f64(a: $acc) -> f64 {
                a as f64
            }
        }
    };
}
sum_lane!(Sum16, u16, u32, add_row_16, slide_row_16, diff_16, u32::wrapping_add, u32::wrapping_sub);
sum_lane!(Sum32, u32, u64, add_row_32, slide_row_32, diff_32, u64::wrapping_add, u64::wrapping_sub);
sum_lane!(SumF64, f64, f64, add_row_f64, slide_row_f64, diff_f64, |a: f64, b: f64| a + b, |a: f64, b: f64| a - b);

/// In-place running prefix of each row of `len` elements along `c` interleaved channels,
/// `p[i] += p[i - c]`, with the running sums in registers; four rows of one or two
/// channels run as four to eight interleaved chains (a prefix is a serial chain of adds:
/// independent chains side by side keep the adder busy, as in `simd.rs`).
#[inline]
#[allow(clippy::manual_is_multiple_of)] // `is_multiple_of` is newer than the workspace's rust-version
fn prefix_rows_in_registers<A: Copy + Default>(p: &mut [A], len: usize, c: usize, plus: fn(A, A) -> A) {
    if (c == 1 || c == 2) && len > 0 && len % c == 0 && p.len() == 4 * len {
        let (r0, rest) = p.split_at_mut(len);
        let (r1, rest) = rest.split_at_mut(len);
        let (r2, r3) = rest.split_at_mut(len);
        let mut a = [[A::default(); 2]; 4];
        let rows = r0.chunks_exact_mut(c).zip(r1.chunks_exact_mut(c)).zip(r2.chunks_exact_mut(c)).zip(r3.chunks_exact_mut(c));
        for (((v0, v1), v2), v3) in rows {
            for ch in 0..c {
                a[0][ch] = plus(a[0][ch], v0[ch]);
                a[1][ch] = plus(a[1][ch], v1[ch]);
                a[2][ch] = plus(a[2][ch], v2[ch]);
                a[3][ch] = plus(a[3][ch], v3[ch]);
                (v0[ch], v1[ch], v2[ch], v3[ch]) = (a[0][ch], a[1][ch], a[2][ch], a[3][ch]);
            }
        }
        return;
    }
    for row in p.chunks_mut(len.max(1)) {
        prefix_in_registers(row, c, plus);
    }
}

/// In-place running prefix along `c` interleaved channels, `p[i] += p[i - c]`, with the
/// running sums of one or two channels carried in registers.
#[inline]
fn prefix_in_registers<A: Copy>(p: &mut [A], c: usize, plus: fn(A, A) -> A) {
    if p.len() < 2 * c {
        for i in c..p.len() {
            p[i] = plus(p[i], p[i - c]);
        }
        return;
    }
    match c {
        1 => {
            let mut s = p[0];
            for v in &mut p[1..] {
                s = plus(s, *v);
                *v = s;
            }
        }
        2 => {
            let (mut s0, mut s1) = (p[0], p[1]);
            for v in p[2..].chunks_exact_mut(2) {
                s0 = plus(s0, v[0]);
                s1 = plus(s1, v[1]);
                v[0] = s0;
                v[1] = s1;
            }
        }
        _ => {
            for i in c..p.len() {
                p[i] = plus(p[i], p[i - c]);
            }
        }
    }
}

/// A padded image of `c` interleaved lanes per pixel.
struct Lanes<L> {
    data: Vec<L>,
    width: usize,
    height: usize,
    c: usize,
}

impl<L> Lanes<L> {
    fn view(&self) -> LaneView<'_, L> {
        LaneView { data: &self.data, width: self.width, height: self.height, stride: self.width * self.c, channels: self.c }
    }
}

/// One box stage with a top-left anchor: for output row `y` (of `out`), `emit(sums, row)`
/// gets the `ow * c` sums of `src` over `[x, x + side) x [y, y + side)` for `x` in `0..ow`.
/// The caller guarantees `src` is at least `side - 1` larger than the output in both
/// directions, so no window reaches past `src`.
fn stage<L: Lane, O: Pixel>(
    src: LaneView<'_, L>,
    side: usize,
    ow: usize,
    out: ImageViewMut<'_, O>,
    par: Parallelism,
    emit: impl Fn(&[L::Acc], &mut [O]) + Send + Sync,
) -> Result<()> {
    let a = side / 2;
    let c = src.channels;
    let oh = out.height();
    if src.width + 1 < ow + side || src.height + 1 < oh + side {
        return Err(Error::SizeMismatch { expected: (ow + side - 1, oh + side - 1), got: (src.width, src.height) });
    }
    let failed = AtomicBool::new(false);
    for_each_band(out, par, side.max(16), |y0, mut band| {
        let rows = y0 + a..y0 + a + band.height();
        let r = window_sums(&src, Window::square(side), Border::Reflect101, rows, |y, sums| {
            emit(&sums[a * c..(a + ow) * c], band.row_mut(y - y0 - a));
        });
        if r.is_err() {
            failed.store(true, Ordering::Relaxed);
        }
    });
    if failed.into_inner() {
        return Err(Error::InvalidParameter { name: "window", reason: "the running-sum engine refused the window".into() });
    }
    Ok(())
}

/// Sum of the kernel weights: `(R + 1)^4` for the tent, `(2r + 1)^2` for the box.
fn total_weight(kernel: VarianceKernel) -> u64 {
    let s: u64 = kernel.weights_1d().iter().map(|&v| v as u64).sum();
    s * s
}

/// The variance from exact integer sums `s1`, `s2` of total weight `total`: the numerator
/// `W S2 - S1^2` formed exactly in u128, converted to f64 as `hi 2^64 + lo` (both parts
/// converted exactly or within 2^-53 relative), divided once by `W^2`, then rounded to f32.
#[inline]
fn exact_variance(s1: u64, s2: u64, total: u64, inv_w2: f64) -> f32 {
    let num = s2 as u128 * total as u128 - s1 as u128 * s1 as u128;
    let f = ((num >> 64) as u64) as f64 * 18446744073709551616.0 + (num as u64) as f64;
    (f * inv_w2) as f32
}

/// `out[i] = variance(sums[2i], sums[2i + 1])` (and `mean_out`, if given, interleaved as
/// `[mean, var]` pairs in a row twice as wide).
#[inline]
fn emit_exact(sums: impl Iterator<Item = (u64, u64)>, row: &mut [f32], total: u64, with_mean: bool) {
    let inv_w2 = 1.0 / (total as f64 * total as f64);
    let inv_w = 1.0 / total as f64;
    if with_mean {
        for (o, (a, b)) in row.chunks_exact_mut(2).zip(sums) {
            o[0] = (a as f64 * inv_w) as f32;
            o[1] = exact_variance(a, b, total, inv_w2);
        }
    } else {
        for (o, (a, b)) in row.iter_mut().zip(sums) {
            *o = exact_variance(a, b, total, inv_w2);
        }
    }
}

/// Runs `compute(view, with_mean)` into the requested outputs: directly into the variance
/// or the pairs image, or through an interleaved `[mean, var]` image split afterwards.
fn run_outputs(
    out: Outputs<'_>,
    par: Parallelism,
    compute: impl FnOnce(ImageViewMut<'_, f32>, bool) -> Result<()>,
) -> Result<()> {
    let (mean, var) = match out {
        Outputs::Var(v) => return compute(v, false),
        Outputs::Pairs(v) => return compute(v, true),
        Outputs::MeanVar { mean, var } => (mean, var),
    };
    let (w, h) = var.size();
    let mut both = Image::<f32>::new(2 * w, h)?;
    compute(both.view_mut(), true)?;
    let both = &both;
    for_each_band(var, par, 16, |y0, mut band| {
        for i in 0..band.height() {
            for (o, p) in band.row_mut(i).iter_mut().zip(both.row(y0 + i).chunks_exact(2)) {
                *o = p[1];
            }
        }
    });
    for_each_band(mean, par, 16, |y0, mut band| {
        for i in 0..band.height() {
            for (o, p) in band.row_mut(i).iter_mut().zip(both.row(y0 + i).chunks_exact(2)) {
                *o = p[0];
            }
        }
    });
    Ok(())
}

/// The tent kernel on the streaming engine ([`tent_sums`]): for each band of output rows,
/// `emit(prefixes, row)` turns one row's double prefix sums into output pixels.
fn tent<L: TentLanes + Clone, O: Pixel>(
    src: ImageView<'_, L::In>,
    lanes: L,
    p: &VarianceParams,
    outside: L::In,
    out: ImageViewMut<'_, O>,
    par: Parallelism,
    emit: impl Fn([&[L::H]; 2], &mut [O]) + Send + Sync,
) {
    let b = p.kernel.radius() + 1;
    // A band starts with 2B vertical steps: keep bands several times longer than that.
    for_each_band(out, par, 2 * b, |y0, mut band| {
        let mut stream = TentStream::new(src, lanes.clone(), b, p.border, outside, y0);
        for i in 0..band.height() {
            emit(stream.next_row(), band.row_mut(i));
        }
    });
}

/// The box kernel: one running-sum stage of width `2r + 1` over the image padded by `r`
/// and mapped to the lanes `[x, x^2]`.
fn boxed<P: Pixel, B: Lane + Pixel, O: Pixel>(
    src: ImageView<'_, P>,
    p: &VarianceParams,
    out: ImageViewMut<'_, O>,
    par: Parallelism,
    outside: [B; 2],
    lanes: impl Fn(P) -> [B; 2],
    emit: impl Fn(&[B::Acc], &mut [O]) + Send + Sync,
) -> Result<()> {
    let (w, h) = src.size();
    let r = p.kernel.radius();
    let padded = Lanes { data: pad_map(src, r, p.border, outside, lanes), width: w + 2 * r, height: h + 2 * r, c: 2 };
    stage(padded.view(), 2 * r + 1, w, out, par, emit)
}

/// x and x^2 of u8 pixels: u32 column sums (a column tent is at most `255^2 * 256^2 < 2^32`),
/// u64 tents.
#[derive(Clone, Copy)]
struct U8Lanes;
impl TentLanes for U8Lanes {
    type In = u8;
    type V = u32;
    type H = u64;
    #[inline(always)]
    fn lanes(&self, v: u8) -> [u32; 2] {
        [v as u32, v as u32 * v as u32]
    }
}

/// x and x^2 of u16 pixels: u64 throughout (a tent is at most `65535^2 * 2^32 < 2^64`).
#[derive(Clone, Copy)]
struct U16Lanes;
impl TentLanes for U16Lanes {
    type In = u16;
    type V = u64;
    type H = u64;
    #[inline(always)]
    fn lanes(&self, v: u16) -> [u64; 2] {
        [v as u64, v as u64 * v as u64]
    }
}

/// `x - K` and its square in f64, non-finite values as 0 (counted by [`NonFinite`]).
#[derive(Clone, Copy)]
struct F32Lanes {
    shift: f64,
}
impl TentLanes for F32Lanes {
    type In = f32;
    type V = f64;
    type H = f64;
    #[inline(always)]
    fn lanes(&self, v: f32) -> [f64; 2] {
        let d = if v.is_finite() { v as f64 - self.shift } else { 0.0 };
        [d, d * d]
    }
}

/// 1 for a non-finite f32 value (the second lane is unused).
#[derive(Clone, Copy)]
struct NonFinite;
impl TentLanes for NonFinite {
    type In = f32;
    type V = u32;
    type H = u64;
    #[inline(always)]
    fn lanes(&self, v: f32) -> [u32; 2] {
        [u32::from(!v.is_finite()), 0]
    }
}

/// Tent variances (and means) of one row from exact integer tent sums: the numerator
/// `W S2 - S1^2` in wrapping u64 when the caller has checked that it stays below `2^64`
/// (`W^2 max_var < 2^64`: one vectorized multiply), else in u128 ([`exact_variance`]).
#[cfg_attr(feature = "std", multiversion(targets("x86_64+avx512f+avx512bw+avx512vl+avx512dq", "x86_64+avx2+fma")))]
fn emit_tent_exact(sums: [&[u64]; 2], row: &mut [f32], total: u64, numerator_fits_u64: bool, with_mean: bool) {
    let inv_w2 = 1.0 / (total as f64 * total as f64);
    let inv_w = 1.0 / total as f64;
    let n = row.len() / if with_mean { 2 } else { 1 };
    let (t1, t2) = (&sums[0][..n], &sums[1][..n]);
    let (s1, s2) = (|x: usize| t1[x], |x: usize| t2[x]);
    let wrapped = |x: usize| {
        let (a, b) = (s1(x), s2(x));
        (b.wrapping_mul(total).wrapping_sub(a.wrapping_mul(a)) as f64 * inv_w2) as f32
    };
    match (with_mean, numerator_fits_u64) {
        (false, true) => row.iter_mut().enumerate().for_each(|(x, o)| *o = wrapped(x)),
        (true, true) => row.chunks_exact_mut(2).enumerate().for_each(|(x, o)| {
            o[0] = (s1(x) as f64 * inv_w) as f32;
            o[1] = wrapped(x);
        }),
        (false, false) => row.iter_mut().enumerate().for_each(|(x, o)| *o = exact_variance(s1(x), s2(x), total, inv_w2)),
        (true, false) => row.chunks_exact_mut(2).enumerate().for_each(|(x, o)| {
            o[0] = (s1(x) as f64 * inv_w) as f32;
            o[1] = exact_variance(s1(x), s2(x), total, inv_w2);
        }),
    }
}

/// Whether `W S2 - S1^2 = W^2 var` stays below `2^64` for values in `0..=max`
/// (`var <= (max / 2)^2`).
fn numerator_fits_u64(total: u64, max: u64) -> bool {
    let max_var = (max * max).div_ceil(4);
    (total as u128 * total as u128).saturating_mul(max_var as u128 + 1) <= u64::MAX as u128
}

/// The exact pipeline of an integer image: the tent on the streaming engine with `lanes`,
/// the box on one running-sum stage through the lanes `B`.
fn exact<L: TentLanes<H = u64> + Clone, B: Lane + Pixel>(
    src: ImageView<'_, L::In>,
    out: Outputs<'_>,
    p: &VarianceParams,
    par: Parallelism,
    lanes: L,
    outside: L::In,
    max: u64,
    box_lanes: impl Fn(L::In) -> [B; 2],
) -> Result<()>
where
    B::Acc: Into<u64>,
{
    let total = total_weight(p.kernel);
    let fits = numerator_fits_u64(total, max);
    run_outputs(out, par, |out, with_mean| match p.kernel {
        VarianceKernel::Tent { .. } => {
            tent(src, lanes.clone(), p, outside, out, par, |sums, row| emit_tent_exact(sums, row, total, fits, with_mean));
            Ok(())
        }
        VarianceKernel::Box { .. } => boxed(src, p, out, par, box_lanes(outside), &box_lanes, |s, row| {
            emit_exact(s.chunks_exact(2).map(|v| (v[0].into(), v[1].into())), row, total, with_mean)
        }),
    })
}

/// The border constant as an integer pixel value (validated beforehand: whole, in range).
fn outside_int(border: Border) -> u32 {
    border.outside_value() as u32
}

/// `Recursive` for u8. Tent: [`U8Lanes`]. Box: u16 lanes with u32 sums up to radius 127
/// (`65025 * 255^2 < 2^32`), u32 lanes with u64 sums beyond. Exact.
pub(crate) fn local_variance_u8(src: ImageView<'_, u8>, out: Outputs<'_>, p: &VarianceParams, par: Parallelism) -> Result<()> {
    let outside = outside_int(p.border) as u8;
    let small = |v: u8| [Sum16(v as u16), Sum16(v as u16 * v as u16)];
    let wide = |v: u8| [Sum32(v as u32), Sum32(v as u32 * v as u32)];
    match p.kernel {
        VarianceKernel::Box { radius } if radius > 127 => exact(src, out, p, par, U8Lanes, outside, 255, wide),
        _ => exact(src, out, p, par, U8Lanes, outside, 255, small),
    }
}

/// `Recursive` for u16. Tent: [`U16Lanes`]. Box: u32 lanes, u64 sums. Exact.
pub(crate) fn local_variance_u16(src: ImageView<'_, u16>, out: Outputs<'_>, p: &VarianceParams, par: Parallelism) -> Result<()> {
    let lanes = |v: u16| [Sum32(v as u32), Sum32(v as u32 * v as u32)];
    exact(src, out, p, par, U16Lanes, outside_int(p.border) as u16, 65535, lanes)
}

/// `[mean, var]` (or `var`) of one row from shifted f64 sums.
fn emit_f64(sums: impl Iterator<Item = (f64, f64)>, row: &mut [f32], inv: f64, shift: f64, with_mean: bool) {
    let stats = sums.map(|(s1, s2)| {
        let m = s1 * inv;
        (m, non_negative((s2 * inv - m * m) as f32))
    });
    if with_mean {
        for (o, (m, v)) in row.chunks_exact_mut(2).zip(stats) {
            o[0] = (shift + m) as f32;
            o[1] = v;
        }
    } else {
        for (o, (_, v)) in row.iter_mut().zip(stats) {
            *o = v;
        }
    }
}

/// `Recursive` for f32: shifted f64 sums (see the module docs for the bound and NaN).
pub(crate) fn local_variance_f32(
    src: ImageView<'_, f32>,
    out: Outputs<'_>,
    p: &VarianceParams,
    par: Parallelism,
) -> Result<()> {
    let (w, h) = src.size();
    let shift = super::global_shift(src);
    let outside = p.border.outside_value();
    let inv = 1.0 / total_weight(p.kernel) as f64;
    // Pixels whose kernel holds a non-finite input: the same sums of a 0/1 indicator.
    let nonfinite = if src.rows().any(|row| row.iter().any(|v| !v.is_finite())) {
        let mut cnt = Image::<u8>::new(w, h)?;
        match p.kernel {
            VarianceKernel::Tent { .. } => tent(src, NonFinite, p, outside, cnt.view_mut(), par, |sums, row| {
                for (o, &n) in row.iter_mut().zip(sums[0]) {
                    *o = u8::from(n > 0);
                }
            }),
            VarianceKernel::Box { .. } => {
                let bad = |v: f32| [Sum16(u16::from(!v.is_finite())), Sum16(0)];
                boxed(src, p, cnt.view_mut(), par, bad(outside), bad, |s, row| {
                    row.iter_mut().zip(s.chunks_exact(2)).for_each(|(o, n)| *o = u8::from(n[0] > 0))
                })?
            }
        }
        Some(cnt)
    } else {
        None
    };
    run_outputs(out, par, |mut out, with_mean| {
        match p.kernel {
            VarianceKernel::Tent { .. } => {
                let lanes = F32Lanes { shift };
                tent(src, lanes, p, outside, out.reborrow(), par, |sums, row| {
                    let n = row.len() / if with_mean { 2 } else { 1 };
                    emit_f64(sums[0][..n].iter().copied().zip(sums[1][..n].iter().copied()), row, inv, shift, with_mean)
                })
            }
            VarianceKernel::Box { .. } => {
                let lanes = |v: f32| {
                    let d = if v.is_finite() { v as f64 - shift } else { 0.0 };
                    [SumF64(d), SumF64(d * d)]
                };
                boxed(src, p, out.reborrow(), par, lanes(outside), lanes, |s, row| {
                    emit_f64(s.chunks_exact(2).map(|v| (v[0], v[1])), row, inv, shift, with_mean)
                })?
            }
        }
        if let Some(cnt) = &nonfinite {
            let c = if with_mean { 2 } else { 1 };
            for y in 0..h {
                for (o, &bad) in out.row_mut(y).chunks_exact_mut(c).zip(cnt.row(y)) {
                    if bad != 0 {
                        o.fill(f32::NAN);
                    }
                }
            }
        }
        Ok(())
    })
}

/// Local tent means and variances row after row, for callers that combine several scales
/// per row (the contrast enhancement) instead of reading whole images. The sums are the
/// same as [`local_variance`](super::local_variance)'s, but the variance is formed in f64
/// as `S2 / W - (S1 / W)^2` (error about `2^-52 E[x^2]`), not by the exact integer path.
pub trait TentMomentRows {
    /// Means and variances of the next row into `mean` and `var` (each the image width).
    fn next_row(&mut self, mean: &mut [f32], var: &mut [f32]);
}

/// `mean = S1 / W`, `var = S2 / W - mean^2` (clamped at 0) from f64 sums of one row.
#[inline(always)]
fn moments(s1: f64, s2: f64, inv_w: f64, shift: f64) -> (f32, f32) {
    let m = s1 * inv_w;
    ((shift + m) as f32, (s2 * inv_w - m * m).max(0.0) as f32)
}

#[cfg_attr(feature = "std", multiversion(targets("x86_64+avx512f+avx512bw+avx512vl+avx512dq", "x86_64+avx2+fma")))]
fn moments_u64(sums: [&[u64]; 2], inv_w: f64, mean: &mut [f32], var: &mut [f32]) {
    let n = mean.len().min(var.len());
    let (t1, t2) = (&sums[0][..n], &sums[1][..n]);
    for x in 0..n {
        (mean[x], var[x]) = moments(t1[x] as f64, t2[x] as f64, inv_w, 0.0);
    }
}

#[cfg_attr(feature = "std", multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2+fma")))]
fn moments_f64(sums: [&[f64]; 2], inv_w: f64, shift: f64, mean: &mut [f32], var: &mut [f32]) {
    let n = mean.len().min(var.len());
    let (t1, t2) = (&sums[0][..n], &sums[1][..n]);
    for x in 0..n {
        (mean[x], var[x]) = moments(t1[x], t2[x], inv_w, shift);
    }
}

struct IntegerMoments<'a, L: TentLanes<H = u64>> {
    stream: TentStream<'a, L>,
    inv_w: f64,
}

impl<L: TentLanes<H = u64>> TentMomentRows for IntegerMoments<'_, L> {
    fn next_row(&mut self, mean: &mut [f32], var: &mut [f32]) {
        moments_u64(self.stream.next_row(), self.inv_w, mean, var);
    }
}

/// f32 moments of `x - K`, and NaN where the kernel holds a non-finite input.
struct FloatMoments<'a> {
    stream: TentStream<'a, F32Lanes>,
    nonfinite: Option<TentStream<'a, NonFinite>>,
    inv_w: f64,
    shift: f64,
}

impl TentMomentRows for FloatMoments<'_> {
    fn next_row(&mut self, mean: &mut [f32], var: &mut [f32]) {
        moments_f64(self.stream.next_row(), self.inv_w, self.shift, mean, var);
        if let Some(bad) = &mut self.nonfinite {
            let [count, _] = bad.next_row();
            for ((m, v), &n) in mean.iter_mut().zip(var.iter_mut()).zip(count) {
                if n > 0 {
                    (*m, *v) = (f32::NAN, f32::NAN);
                }
            }
        }
    }
}

/// Opens [`TentMomentRows`] over one image: the image-wide preparation (the f32 shift, the
/// non-finite check) is done once, streams are opened per band and radius.
pub struct TentMoments<'a> {
    #[allow(clippy::type_complexity)]
    open: Box<dyn Fn(usize, usize) -> Box<dyn TentMomentRows + 'a> + Send + Sync + 'a>,
}

impl<'a> TentMoments<'a> {
    /// The moments of tent radius `radius` (validated by the caller) from output row `y0`.
    pub fn rows(&self, radius: usize, y0: usize) -> Box<dyn TentMomentRows + 'a> {
        (self.open)(radius, y0)
    }
}

fn integer_moments<'a, L: TentLanes<H = u64> + Copy + Send + Sync + 'a>(src: ImageView<'a, L::In>, lanes: L, border: Border, outside: L::In) -> TentMoments<'a>
where
    L::In: Send + Sync,
{
    TentMoments {
        open: Box::new(move |radius, y0| {
            let stream = TentStream::new(src, lanes, radius + 1, border, outside, y0);
            Box::new(IntegerMoments { stream, inv_w: 1.0 / total_weight(VarianceKernel::Tent { radius }) as f64 })
        }),
    }
}

pub(crate) fn tent_moments_u8(src: ImageView<'_, u8>, border: Border) -> TentMoments<'_> {
    integer_moments(src, U8Lanes, border, outside_int(border) as u8)
}

pub(crate) fn tent_moments_u16(src: ImageView<'_, u16>, border: Border) -> TentMoments<'_> {
    integer_moments(src, U16Lanes, border, outside_int(border) as u16)
}

pub(crate) fn tent_moments_f32(src: ImageView<'_, f32>, border: Border) -> TentMoments<'_> {
    let shift = super::global_shift(src);
    let has_nonfinite = src.rows().any(|row| row.iter().any(|v| !v.is_finite()));
    let outside = border.outside_value();
    TentMoments {
        open: Box::new(move |radius, y0| {
            let b = radius + 1;
            Box::new(FloatMoments {
                stream: TentStream::new(src, F32Lanes { shift }, b, border, outside, y0),
                nonfinite: has_nonfinite.then(|| TentStream::new(src, NonFinite, b, border, outside, y0)),
                inv_w: 1.0 / total_weight(VarianceKernel::Tent { radius }) as f64,
                shift,
            })
        }),
    }
}
