//! `Recursive`: local variance from O(1) running sums, exact on integer images.
//!
//! The 1-D tent of radius `R = 2^k - 1` is a box of width `B = R + 1` convolved with itself:
//! `w(j) = R + 1 - |j| = #{(a, b) in [0, B)^2 : a + b - R = j}`. So with the image padded
//! once by `R` on every side by the border rule (`P(u, v) = I(u - R, v - R)`, borders taken
//! from the ORIGINAL image for the whole kernel), the tent sum at `(x, y)` is
//!
//! ```text
//! T(x, y) = sum_{a, b in [0,B)^2} A(x + a, y + b),   A(u, v) = sum_{a, b in [0,B)^2} P(u + a, v + b)
//! ```
//!
//! two B x B box sums with top-left anchors, neither of which reaches past the padded image:
//! no border effect inside the cascade (a cascade that reflected at each stage would differ
//! near the borders). Both box stages run on the crate's one running-sum engine,
//! [`window_sums`], for `x` and `x^2`. A box kernel is one stage of width `2r + 1`.
//!
//! u8 / u16: every sum is an integer (u32 / u64 with wrapping running sums, exact while a
//! window sum fits, which [`MAX_TENT_RADIUS`](super::MAX_TENT_RADIUS) guarantees), the
//! numerator `W S2 - S1^2` is formed exactly in u128, and one final division gives the
//! variance: the result is the exact rational rounded to f64, then to f32.
//!
//! f32: the sums run in f64 on `x - K`, `K` the rounded mean of the image's finite values
//! ([`global_shift`](super::global_shift)). The error is then bounded by about `2^-40 max (x - K)^2` absolute (f64 rounding
//! in running sums over at most a few thousand terms), independent of how large the mean
//! is against the spread, before the final rounding to f32. Non-finite inputs are replaced
//! by 0 in the sums and counted by the same cascade on a 0/1 image: a pixel whose kernel
//! contains one is NaN, every other pixel is unaffected.

use super::{non_negative, pad_map, VarianceKernel, VarianceParams};
use crate::border::Border;
use crate::error::{Error, Result};
use crate::filter::{window_sums, LaneView, Window};
use crate::image::{Image, ImageView, ImageViewMut, Pixel};
use crate::parallel::{for_each_band, Parallelism};
use crate::simd::Lane;
use core::sync::atomic::{AtomicBool, Ordering};
use multiversion::multiversion;

/// Running-sum lane for u32 partial sums (first-stage box sums), accumulating in u64.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(transparent)]
pub struct Sum32(pub u32);
/// Running-sum lane for u64 partial sums, accumulating in wrapping u64 (exact while a
/// window's sum fits u64).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(transparent)]
pub struct Sum64(pub u64);
/// Running-sum lane for f64 partial sums.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(transparent)]
pub struct SumF64(pub f64);

impl Pixel for Sum32 {
    const NAME: &'static str = "sum32";
}
impl Pixel for Sum64 {
    const NAME: &'static str = "sum64";
}
impl Pixel for SumF64 {
    const NAME: &'static str = "sumf64";
}

#[multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2+fma"))]
fn add_row_32(acc: &mut [u64], add: &[Sum32]) {
    for (a, x) in acc.iter_mut().zip(add) {
        *a = a.wrapping_add(x.0 as u64);
    }
}
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2+fma"))]
fn slide_row_32(acc: &mut [u64], add: &[Sum32], sub: &[Sum32]) {
    for ((a, x), y) in acc.iter_mut().zip(add).zip(sub) {
        *a = a.wrapping_add(x.0 as u64).wrapping_sub(y.0 as u64);
    }
}
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2+fma"))]
fn add_row_64(acc: &mut [u64], add: &[Sum64]) {
    for (a, x) in acc.iter_mut().zip(add) {
        *a = a.wrapping_add(x.0);
    }
}
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2+fma"))]
fn slide_row_64(acc: &mut [u64], add: &[Sum64], sub: &[Sum64]) {
    for ((a, x), y) in acc.iter_mut().zip(add).zip(sub) {
        *a = a.wrapping_add(x.0).wrapping_sub(y.0);
    }
}
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2+fma"))]
fn add_row_f64(acc: &mut [f64], add: &[SumF64]) {
    for (a, x) in acc.iter_mut().zip(add) {
        *a += x.0;
    }
}
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2+fma"))]
fn slide_row_f64(acc: &mut [f64], add: &[SumF64], sub: &[SumF64]) {
    for ((a, x), y) in acc.iter_mut().zip(add).zip(sub) {
        *a += x.0 - y.0;
    }
}

macro_rules! int_sum_lane {
    ($t:ident, $add:ident, $slide:ident) => {
        impl Lane for $t {
            type Acc = u64;
            #[inline]
            fn add_row(acc: &mut [u64], add: &[$t]) {
                $add(acc, add)
            }
            #[inline]
            fn slide_row(acc: &mut [u64], add: &[$t], sub: &[$t]) {
                $slide(acc, add, sub)
            }
            fn prefix(p: &mut [u64], c: usize) {
                for i in c..p.len() {
                    p[i] = p[i].wrapping_add(p[i - c]);
                }
            }
            #[inline]
            fn from_f32(v: f32) -> $t {
                $t(v as _)
            }
            #[inline]
            fn acc_from_f64(v: f64) -> u64 {
                v as u64
            }
            #[inline]
            fn acc_add(a: u64, b: u64) -> u64 {
                a.wrapping_add(b)
            }
            #[inline]
            fn acc_sub(a: u64, b: u64) -> u64 {
                a.wrapping_sub(b)
            }
            #[inline]
            fn acc_to_f64(a: u64) -> f64 {
                a as f64
            }
        }
    };
}
int_sum_lane!(Sum32, add_row_32, slide_row_32);
int_sum_lane!(Sum64, add_row_64, slide_row_64);

impl Lane for SumF64 {
    type Acc = f64;
    #[inline]
    fn add_row(acc: &mut [f64], add: &[SumF64]) {
        add_row_f64(acc, add)
    }
    #[inline]
    fn slide_row(acc: &mut [f64], add: &[SumF64], sub: &[SumF64]) {
        slide_row_f64(acc, add, sub)
    }
    fn prefix(p: &mut [f64], c: usize) {
        for i in c..p.len() {
            p[i] += p[i - c];
        }
    }
    #[inline]
    fn from_f32(v: f32) -> SumF64 {
        SumF64(v as f64)
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
}

fn lanes<L>(img: &Image<L>) -> LaneView<'_, L>
where
    L: Pixel,
{
    LaneView { data: img.as_slice(), width: img.width(), height: img.height(), stride: img.width(), channels: 1 }
}

/// One box stage with a top-left anchor: `out(x, y) = conv(sum of src over
/// [x, x + side) x [y, y + side))`. The caller guarantees `src` is at least
/// `side - 1` larger than `out` in both directions, so no window reaches past `src`.
fn stage<L: Lane, O: Pixel>(
    src: LaneView<'_, L>,
    side: usize,
    out: ImageViewMut<'_, O>,
    par: Parallelism,
    conv: impl Fn(L::Acc) -> O + Send + Sync,
) -> Result<()> {
    let a = side / 2;
    let (ow, oh) = out.size();
    if src.width + 1 < ow + side || src.height + 1 < oh + side {
        return Err(Error::SizeMismatch { expected: (ow + side - 1, oh + side - 1), got: (src.width, src.height) });
    }
    let failed = AtomicBool::new(false);
    for_each_band(out, par, side.max(16), |y0, mut band| {
        let rows = y0 + a..y0 + a + band.height();
        let r = window_sums(&src, Window::square(side), Border::Reflect101, rows, |y, sums| {
            let row = band.row_mut(y - y0 - a);
            for (o, &s) in row.iter_mut().zip(&sums[a..a + ow]) {
                *o = conv(s);
            }
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

/// The kernel sums of a padded lane image (`pad` = kernel radius on every side) into
/// `out` (`w x h`): a tent is two box stages of width `R + 1` through an intermediate
/// image of type `A`; a box is one stage of width `2r + 1`.
fn kernel_sums<L: Lane + Pixel, A: Lane + Pixel>(
    padded: &Image<L>,
    kernel: VarianceKernel,
    out: ImageViewMut<'_, Sum64>,
    par: Parallelism,
    narrow: impl Fn(L::Acc) -> A + Send + Sync,
    widen: impl Fn(A::Acc) -> u64 + Send + Sync,
    direct: impl Fn(L::Acc) -> u64 + Send + Sync,
) -> Result<()> {
    let (w, h) = out.size();
    match kernel {
        VarianceKernel::Tent { radius } => {
            let b = radius + 1;
            let mut mid = Image::<A>::new(w + radius, h + radius)?;
            stage(lanes(padded), b, mid.view_mut(), par, narrow)?;
            stage(lanes(&mid), b, out, par, |s| Sum64(widen(s)))
        }
        VarianceKernel::Box { radius } => stage(lanes(padded), 2 * radius + 1, out, par, |s| Sum64(direct(s))),
    }
}

/// Sum of the kernel weights: `(R + 1)^4` for the tent, `(2r + 1)^2` for the box.
fn total_weight(kernel: VarianceKernel) -> u64 {
    let s: u64 = kernel.weights_1d().iter().map(|&v| v as u64).sum();
    s * s
}

/// `var = (W S2 - S1^2) / W^2` from exact integer sums, formed in u128 and divided once.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2+fma"))]
fn combine_exact(s1: &[Sum64], s2: &[Sum64], total: u64, out: &mut [f32]) {
    let w2 = total as f64 * total as f64;
    for ((o, a), b) in out.iter_mut().zip(s1).zip(s2) {
        let num = b.0 as u128 * total as u128 - a.0 as u128 * a.0 as u128;
        *o = (num as f64 / w2) as f32;
    }
}

/// The exact pipeline for an integer image whose values map to lanes `X` (for `x`) and
/// `Q` (for `x^2`), with first-stage sums narrowed to `AX` / `AQ`.
#[allow(clippy::too_many_arguments)]
fn exact<P, X, Q, AX, AQ>(
    src: ImageView<'_, P>,
    mut var: ImageViewMut<'_, f32>,
    mean: Option<ImageViewMut<'_, f32>>,
    p: &VarianceParams,
    par: Parallelism,
    outside: P,
    fx: impl Fn(P) -> X,
    fq: impl Fn(P) -> Q,
) -> Result<()>
where
    P: Pixel,
    X: Lane + Pixel,
    Q: Lane + Pixel,
    X::Acc: Into<u64>,
    Q::Acc: Into<u64>,
    AX: Lane<Acc = u64> + Pixel + Narrow,
    AQ: Lane<Acc = u64> + Pixel + Narrow,
{
    let (w, h) = src.size();
    let r = p.kernel.radius();
    let px = Image::from_vec(w + 2 * r, h + 2 * r, pad_map(src, r, p.border, fx(outside), &fx))?;
    let pq = Image::from_vec(w + 2 * r, h + 2 * r, pad_map(src, r, p.border, fq(outside), &fq))?;
    let mut s1 = Image::<Sum64>::new(w, h)?;
    let mut s2 = Image::<Sum64>::new(w, h)?;
    kernel_sums(&px, p.kernel, s1.view_mut(), par, |a| AX::narrow(a.into()), |a| a, |a| a.into())?;
    drop(px);
    kernel_sums(&pq, p.kernel, s2.view_mut(), par, |a| AQ::narrow(a.into()), |a| a, |a| a.into())?;
    drop(pq);
    let total = total_weight(p.kernel);
    let (s1, s2) = (&s1, &s2);
    for_each_band(var.reborrow(), par, 16, |y0, mut band| {
        for i in 0..band.height() {
            combine_exact(s1.row(y0 + i), s2.row(y0 + i), total, band.row_mut(i));
        }
    });
    if let Some(mean) = mean {
        let inv = 1.0 / total as f64;
        for_each_band(mean, par, 16, |y0, mut band| {
            for i in 0..band.height() {
                for (o, s) in band.row_mut(i).iter_mut().zip(s1.row(y0 + i)) {
                    *o = (s.0 as f64 * inv) as f32;
                }
            }
        });
    }
    Ok(())
}

/// Narrowing of an exact first-stage sum into the intermediate lane type (the radius
/// limits guarantee that it fits).
pub trait Narrow {
    fn narrow(v: u64) -> Self;
}
impl Narrow for Sum32 {
    #[inline]
    fn narrow(v: u64) -> Self {
        Sum32(v as u32)
    }
}
impl Narrow for Sum64 {
    #[inline]
    fn narrow(v: u64) -> Self {
        Sum64(v)
    }
}

/// The border constant as an integer pixel value (validated beforehand: whole, in range).
fn outside_int(border: Border) -> u32 {
    border.outside_value() as u32
}

/// `Recursive` for u8: x in u8 lanes (u32 sums), x^2 in u16 lanes (u64 sums), first-stage
/// sums in u32 (`255^2 * 256^2 < 2^32`), final sums in u64; exact.
pub(crate) fn local_variance_u8(
    src: ImageView<'_, u8>,
    var: ImageViewMut<'_, f32>,
    mean: Option<ImageViewMut<'_, f32>>,
    p: &VarianceParams,
    par: Parallelism,
) -> Result<()> {
    exact::<u8, u8, u16, Sum32, Sum32>(src, var, mean, p, par, outside_int(p.border) as u8, |v| v, |v| {
        (v as u16) * (v as u16)
    })
}

/// `Recursive` for u16: x in u16 lanes (u64 sums), x^2 in u32 lanes (u64 sums),
/// first-stage sums of x in u32 (`65535 * 256^2 < 2^32`) and of x^2 in u64; exact.
pub(crate) fn local_variance_u16(
    src: ImageView<'_, u16>,
    var: ImageViewMut<'_, f32>,
    mean: Option<ImageViewMut<'_, f32>>,
    p: &VarianceParams,
    par: Parallelism,
) -> Result<()> {
    exact::<u16, u16, Sum32, Sum32, Sum64>(src, var, mean, p, par, outside_int(p.border) as u16, |v| v, |v| {
        Sum32(v as u32 * v as u32)
    })
}

/// `Recursive` for f32: shifted f64 sums (see the module docs for the bound and NaN).
pub(crate) fn local_variance_f32(
    src: ImageView<'_, f32>,
    mut var: ImageViewMut<'_, f32>,
    mean: Option<ImageViewMut<'_, f32>>,
    p: &VarianceParams,
    par: Parallelism,
) -> Result<()> {
    let (w, h) = src.size();
    let r = p.kernel.radius();
    let bad = src.rows().any(|row| row.iter().any(|v| !v.is_finite()));
    let k = super::global_shift(src);
    let (pw, ph) = (w + 2 * r, h + 2 * r);
    let outside = p.border.outside_value();
    let shift = |v: f32| if v.is_finite() { v as f64 - k } else { 0.0 };
    let px = pad_map(src, r, p.border, SumF64(shift(outside)), |v| SumF64(shift(v)));
    let pq: alloc::vec::Vec<SumF64> = px.iter().map(|v| SumF64(v.0 * v.0)).collect();
    let (px, pq) = (Image::from_vec(pw, ph, px)?, Image::from_vec(pw, ph, pq)?);
    let mut s1 = Image::<SumF64>::new(w, h)?;
    let mut s2 = Image::<SumF64>::new(w, h)?;
    f64_sums(&px, p.kernel, s1.view_mut(), par)?;
    drop(px);
    f64_sums(&pq, p.kernel, s2.view_mut(), par)?;
    drop(pq);
    // Pixels whose kernel holds a non-finite input: the same cascade on a 0/1 image.
    let nonfinite = if bad {
        let ind = pad_map(src, r, p.border, 0u8, |v| u8::from(!v.is_finite()));
        let ind = Image::from_vec(pw, ph, ind)?;
        let mut cnt = Image::<Sum64>::new(w, h)?;
        kernel_sums::<u8, Sum32>(&ind, p.kernel, cnt.view_mut(), par, Sum32, |a| a, |a| a as u64)?;
        Some(cnt)
    } else {
        None
    };
    let inv = 1.0 / total_weight(p.kernel) as f64;
    let (s1, s2, nf) = (&s1, &s2, &nonfinite);
    let is_bad = |x: usize, y: usize| nf.as_ref().is_some_and(|c| c.row(y)[x].0 > 0);
    for_each_band(var.reborrow(), par, 16, |y0, mut band| {
        for i in 0..band.height() {
            let y = y0 + i;
            for (x, o) in band.row_mut(i).iter_mut().enumerate() {
                let m = s1.row(y)[x].0 * inv;
                let v = s2.row(y)[x].0 * inv - m * m;
                *o = if is_bad(x, y) { f32::NAN } else { non_negative(v as f32) };
            }
        }
    });
    if let Some(mean) = mean {
        for_each_band(mean, par, 16, |y0, mut band| {
            for i in 0..band.height() {
                let y = y0 + i;
                for (x, o) in band.row_mut(i).iter_mut().enumerate() {
                    *o = if is_bad(x, y) { f32::NAN } else { (k + s1.row(y)[x].0 * inv) as f32 };
                }
            }
        });
    }
    Ok(())
}

/// Kernel sums of a padded f64 image (the f32 path), into `out`.
fn f64_sums(padded: &Image<SumF64>, kernel: VarianceKernel, out: ImageViewMut<'_, SumF64>, par: Parallelism) -> Result<()> {
    let (w, h) = out.size();
    match kernel {
        VarianceKernel::Tent { radius } => {
            let b = radius + 1;
            let mut mid = Image::<SumF64>::new(w + radius, h + radius)?;
            stage(lanes(padded), b, mid.view_mut(), par, SumF64)?;
            stage(lanes(&mid), b, out, par, SumF64)
        }
        VarianceKernel::Box { radius } => stage(lanes(padded), 2 * radius + 1, out, par, SumF64),
    }
}
