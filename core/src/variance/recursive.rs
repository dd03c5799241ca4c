//! `Recursive`: local variance from O(1) running sums, exact on integer images.
//!
//! The 1-D tent of radius `R = 2^k - 1` is a box of width `B = R + 1` convolved with itself:
//! `w(j) = R + 1 - |j| = #{(a, b) in [0, B)^2 : a + b - R = j}`, so the weighted sums of `x`
//! and `x^2` over the tent are two cascaded box sums per axis. The streaming engine computes
//! them row by row without any intermediate image (`KernelStream`: vertical running boxes with a ring of
//! `B` rows, horizontal double prefix sums; see `kernel_sums.rs`), outside pixels from the
//! border rule applied to the ORIGINAL image for the whole kernel. A box kernel of width
//! `2r + 1` is the same stream with one box per axis.
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

use super::kernel_sums::{Shape, MomentLanes, KernelStream};
use super::{non_negative, Outputs, VarianceKernel, VarianceParams, VarianceSample};
use crate::border::Border;
use crate::error::Result;
use crate::image::{Image, ImageView, ImageViewMut, Pixel};
use crate::parallel::{for_each_band, try_for_each_band, Parallelism};
use alloc::boxed::Box;
use crate::cpu::multiversion;
use core::marker::PhantomData;

/// Sum of the kernel weights: `(R + 1)^4` for the tent, `(2r + 1)^2` for the box.
fn total_weight(kernel: VarianceKernel) -> u64 {
    let s = shape_of(kernel).weight();
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

/// The kernel of `p` on the streaming engine ([`KernelStream`]): for each band of output
/// rows, `emit(sums, row)` turns one row's sums of `x` and `x^2` into output pixels.
fn stream<L: MomentLanes + Clone, O: Pixel>(
    src: ImageView<'_, L::In>,
    lanes: L,
    p: &VarianceParams,
    outside: L::In,
    out: ImageViewMut<'_, O>,
    par: Parallelism,
    emit: impl Fn([&[L::H]; 2], &mut [O]) + Send + Sync,
) -> Result<()> {
    let shape = shape_of(p.kernel);
    // A band starts with one to two kernel heights of vertical steps: keep bands longer.
    let min_rows = match shape {
        Shape::Tent { b } => 2 * b,
        Shape::Box { n } => n,
    };
    try_for_each_band(out, par, min_rows, |y0, mut band| {
        let mut rows = KernelStream::new(src, lanes.clone(), shape, p.border, outside, y0)?;
        for i in 0..band.height() {
            emit(rows.next_row(), band.row_mut(i));
        }
        Ok(())
    })
}

fn shape_of(kernel: VarianceKernel) -> Shape {
    match kernel {
        VarianceKernel::Tent { radius } => Shape::Tent { b: radius + 1 },
        VarianceKernel::Box { radius } => Shape::Box { n: 2 * radius + 1 },
    }
}

/// x and x^2 of u8 pixels: u32 column sums (a column tent is at most `255^2 * 256^2`, a
/// column of the widest box `255^2 * 4095`, both below 2^32), u64 kernel sums.
#[derive(Clone, Copy)]
struct U8Lanes;
impl MomentLanes for U8Lanes {
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
impl MomentLanes for U16Lanes {
    type In = u16;
    type V = u64;
    type H = u64;
    #[inline(always)]
    fn lanes(&self, v: u16) -> [u64; 2] {
        [v as u64, v as u64 * v as u64]
    }
}

/// `x - K` and its square in f64 for the f32 value `x` of a `P` pixel (f32 itself, or the
/// luma of RGBA), non-finite values as 0 (counted by [`NonFinite`]).
#[derive(Clone, Copy)]
struct F32Lanes<P> {
    shift: f64,
    pixel: PhantomData<P>,
}
impl<P> F32Lanes<P> {
    fn new(shift: f64) -> Self {
        F32Lanes { shift, pixel: PhantomData }
    }
}
impl<P: VarianceSample> MomentLanes for F32Lanes<P> {
    type In = P;
    type V = f64;
    type H = f64;
    #[inline(always)]
    fn lanes(&self, v: P) -> [f64; 2] {
        let v = v.to_f32();
        let d = if v.is_finite() { v as f64 - self.shift } else { 0.0 };
        [d, d * d]
    }
}

/// 1 for a non-finite f32 value of a `P` pixel (the second lane is unused).
#[derive(Clone, Copy)]
struct NonFinite<P>(PhantomData<P>);
impl<P: VarianceSample> MomentLanes for NonFinite<P> {
    type In = P;
    type V = u32;
    type H = u64;
    #[inline(always)]
    fn lanes(&self, v: P) -> [u32; 2] {
        [u32::from(!v.to_f32().is_finite()), 0]
    }
}

multiversion! {
    /// Variances (and means) of one row from exact integer kernel sums: the numerator
    /// `W S2 - S1^2` in wrapping u64 when the caller has checked that it stays below `2^64`
    /// (`W^2 max_var < 2^64`: one vectorized multiply), else in u128 ([`exact_variance`]).
    fn emit_exact(sums: [&[u64]; 2], row: &mut [f32], total: u64, numerator_fits_u64: bool, with_mean: bool) {
        let inv_w2 = 1.0 / (total as f64 * total as f64);
        let inv_w = 1.0 / total as f64;
        let n = row.len() / if with_mean { 2 } else { 1 };
        let (s1, s2) = (&sums[0][..n], &sums[1][..n]);
        let wrapped = |x: usize| (s2[x].wrapping_mul(total).wrapping_sub(s1[x].wrapping_mul(s1[x])) as f64 * inv_w2) as f32;
        match (with_mean, numerator_fits_u64) {
            (false, true) => row.iter_mut().enumerate().for_each(|(x, o)| *o = wrapped(x)),
            (true, true) => row.chunks_exact_mut(2).enumerate().for_each(|(x, o)| {
                o[0] = (s1[x] as f64 * inv_w) as f32;
                o[1] = wrapped(x);
            }),
            (false, false) => row.iter_mut().enumerate().for_each(|(x, o)| *o = exact_variance(s1[x], s2[x], total, inv_w2)),
            (true, false) => row.chunks_exact_mut(2).enumerate().for_each(|(x, o)| {
                o[0] = (s1[x] as f64 * inv_w) as f32;
                o[1] = exact_variance(s1[x], s2[x], total, inv_w2);
            }),
        }
    }
}

/// Whether `W S2 - S1^2 = W^2 var` stays below `2^64` for values in `0..=max`
/// (`var <= (max / 2)^2`).
fn numerator_fits_u64(total: u64, max: u64) -> bool {
    let max_var = (max * max).div_ceil(4);
    (total as u128 * total as u128).saturating_mul(max_var as u128 + 1) <= u64::MAX as u128
}

/// The exact pipeline of an integer image with values in `0..=max`.
fn exact<L: MomentLanes<H = u64> + Clone>(src: ImageView<'_, L::In>, out: Outputs<'_>, p: &VarianceParams, par: Parallelism, lanes: L, outside: L::In, max: u64) -> Result<()> {
    let total = total_weight(p.kernel);
    let fits = numerator_fits_u64(total, max);
    run_outputs(out, par, |out, with_mean| {
        stream(src, lanes, p, outside, out, par, |sums, row| emit_exact(sums, row, total, fits, with_mean))
    })
}

/// The border constant as an integer pixel value (validated beforehand: whole, in range).
fn outside_int(border: Border) -> u32 {
    border.outside_value() as u32
}

/// `Recursive` for u8 ([`U8Lanes`]). Exact.
pub(crate) fn local_variance_u8(src: ImageView<'_, u8>, out: Outputs<'_>, p: &VarianceParams, par: Parallelism) -> Result<()> {
    exact(src, out, p, par, U8Lanes, outside_int(p.border) as u8, 255)
}

/// `Recursive` for u16 ([`U16Lanes`]). Exact.
pub(crate) fn local_variance_u16(src: ImageView<'_, u16>, out: Outputs<'_>, p: &VarianceParams, par: Parallelism) -> Result<()> {
    exact(src, out, p, par, U16Lanes, outside_int(p.border) as u16, 65535)
}

/// `[mean, var]` (or `var`) of one row from shifted f64 sums.
fn emit_f64(sums: [&[f64]; 2], row: &mut [f32], inv: f64, shift: f64, with_mean: bool) {
    let n = row.len() / if with_mean { 2 } else { 1 };
    let stats = sums[0][..n].iter().zip(&sums[1][..n]).map(|(&s1, &s2)| {
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
pub(crate) fn local_variance_f32(src: ImageView<'_, f32>, out: Outputs<'_>, p: &VarianceParams, par: Parallelism) -> Result<()> {
    local_variance_float(src, out, p, par, p.border.outside_value())
}

/// `Recursive` on the f32 values of `P` pixels (f32 itself, or the luma of RGBA), the
/// Constant border's outside pixels being `outside`.
pub(crate) fn local_variance_float<P: VarianceSample>(
    src: ImageView<'_, P>,
    out: Outputs<'_>,
    p: &VarianceParams,
    par: Parallelism,
    outside: P,
) -> Result<()> {
    let (w, h) = src.size();
    let shift = super::global_shift(src);
    let inv = 1.0 / total_weight(p.kernel) as f64;
    // Pixels whose kernel holds a non-finite input: the same sums of a 0/1 indicator.
    let nonfinite = if !P::ALWAYS_FINITE && src.rows().any(|row| row.iter().any(|v| !v.to_f32().is_finite())) {
        let mut cnt = Image::<u8>::new(w, h)?;
        stream(src, NonFinite(PhantomData), p, outside, cnt.view_mut(), par, |sums, row| {
            for (o, &n) in row.iter_mut().zip(sums[0]) {
                *o = u8::from(n > 0);
            }
        })?;
        Some(cnt)
    } else {
        None
    };
    run_outputs(out, par, |mut out, with_mean| {
        stream(src, F32Lanes::new(shift), p, outside, out.reborrow(), par, |sums, row| emit_f64(sums, row, inv, shift, with_mean))?;
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

multiversion! {
    fn moments_u64(sums: [&[u64]; 2], inv_w: f64, mean: &mut [f32], var: &mut [f32]) {
        let n = mean.len().min(var.len());
        let (t1, t2) = (&sums[0][..n], &sums[1][..n]);
        for x in 0..n {
            (mean[x], var[x]) = moments(t1[x] as f64, t2[x] as f64, inv_w, 0.0);
        }
    }
}

multiversion! {
    fn moments_f64(sums: [&[f64]; 2], inv_w: f64, shift: f64, mean: &mut [f32], var: &mut [f32]) {
        let n = mean.len().min(var.len());
        let (t1, t2) = (&sums[0][..n], &sums[1][..n]);
        for x in 0..n {
            (mean[x], var[x]) = moments(t1[x], t2[x], inv_w, shift);
        }
    }
}

struct IntegerMoments<'a, L: MomentLanes<H = u64>> {
    stream: KernelStream<'a, L>,
    inv_w: f64,
}

impl<L: MomentLanes<H = u64>> TentMomentRows for IntegerMoments<'_, L> {
    fn next_row(&mut self, mean: &mut [f32], var: &mut [f32]) {
        moments_u64(self.stream.next_row(), self.inv_w, mean, var);
    }
}

/// f32 moments of `x - K`, and NaN where the kernel holds a non-finite input.
struct FloatMoments<'a> {
    stream: KernelStream<'a, F32Lanes<f32>>,
    nonfinite: Option<KernelStream<'a, NonFinite<f32>>>,
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
    open: Box<dyn Fn(usize, usize) -> Result<Box<dyn TentMomentRows + 'a>> + Send + Sync + 'a>,
}

impl<'a> TentMoments<'a> {
    /// The moments of tent radius `radius` (validated by the caller) from output row `y0`;
    /// [`Error::OutOfMemory`](crate::Error::OutOfMemory) where its rows of state cannot be
    /// allocated.
    pub fn rows(&self, radius: usize, y0: usize) -> Result<Box<dyn TentMomentRows + 'a>> {
        (self.open)(radius, y0)
    }
}

fn integer_moments<'a, L: MomentLanes<H = u64> + Copy + Send + Sync + 'a>(src: ImageView<'a, L::In>, lanes: L, border: Border, outside: L::In) -> TentMoments<'a>
where
    L::In: Send + Sync,
{
    TentMoments {
        open: Box::new(move |radius, y0| {
            let stream = KernelStream::new(src, lanes, Shape::Tent { b: radius + 1 }, border, outside, y0)?;
            Ok(Box::new(IntegerMoments { stream, inv_w: 1.0 / total_weight(VarianceKernel::Tent { radius }) as f64 }) as Box<dyn TentMomentRows + 'a>)
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
            let nonfinite = if has_nonfinite { Some(KernelStream::new(src, NonFinite(PhantomData), Shape::Tent { b }, border, outside, y0)?) } else { None };
            Ok(Box::new(FloatMoments {
                stream: KernelStream::new(src, F32Lanes::new(shift), Shape::Tent { b }, border, outside, y0)?,
                nonfinite,
                inv_w: 1.0 / total_weight(VarianceKernel::Tent { radius }) as f64,
                shift,
            }) as Box<dyn TentMomentRows + '_>)
        }),
    }
}
