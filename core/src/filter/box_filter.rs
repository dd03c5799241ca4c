//! Box (sum) and mean filters over any rectangular window, O(1) per pixel, and the naive
//! O(m^2) version kept as the reference and the benchmark baseline.

use super::sliding::{window_sums, LaneView, Window};
use crate::border::{inside_count, Border};
use crate::error::{Error, Result};
use crate::image::{check_same_size, rgba_as_bytes, rgba_as_bytes_mut, ImageView, ImageViewMut, Pixel, Rgba8};
use crate::parallel::{try_for_each_band_restarting, Parallelism};
use crate::simd::{self, Lane};

/// Parameters of the box / mean filter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BoxParams {
    /// Window width in pixels (1..=4095); the output pixel is at column `width / 2`.
    pub width: usize,
    /// Window height in pixels (1..=4095).
    pub height: usize,
    pub border: Border,
}

impl Default for BoxParams {
    fn default() -> Self {
        BoxParams { width: 3, height: 3, border: Border::Reflect101 }
    }
}

impl BoxParams {
    /// An `m x m` window.
    pub fn square(m: usize, border: Border) -> Self {
        BoxParams { width: m, height: m, border }
    }
    pub fn window(&self) -> Window {
        Window { width: self.width, height: self.height }
    }
}

/// A pixel type the mean filter handles: gray u8 / u16 / f32, and RGBA per channel.
pub trait BoxPixel: Pixel {
    type Lane: Lane;
    /// Channel lanes per pixel.
    const CHANNELS: usize;
    /// Largest value of an integer type (None for float), for border-constant checks.
    const INTEGER_MAX: Option<f32>;
    fn lanes(p: &[Self]) -> &[Self::Lane];
    fn lanes_mut(p: &mut [Self]) -> &mut [Self::Lane];
    /// Means of a row of window sums that all cover `area` pixels.
    fn mean_row(sums: &[<Self::Lane as Lane>::Acc], area: usize, out: &mut [Self::Lane]);
    /// Mean of one window sum over `area` pixels (the Normalize border's varying count).
    fn mean_one(sum: <Self::Lane as Lane>::Acc, area: usize) -> Self::Lane;
}

macro_rules! gray_box_pixel {
    ($t:ty, $max:expr, |$s:ident, $a:ident, $o:ident| $row:expr, |$s1:ident, $a1:ident| $one:expr) => {
        impl BoxPixel for $t {
            type Lane = $t;
            const CHANNELS: usize = 1;
            const INTEGER_MAX: Option<f32> = $max;
            fn lanes(p: &[$t]) -> &[$t] {
                p
            }
            fn lanes_mut(p: &mut [$t]) -> &mut [$t] {
                p
            }
            fn mean_row($s: &[<$t as Lane>::Acc], $a: usize, $o: &mut [$t]) {
                $row
            }
            fn mean_one($s1: <$t as Lane>::Acc, $a1: usize) -> $t {
                $one
            }
        }
    };
}
gray_box_pixel!(u8, Some(255.0), |s, a, o| simd::round_div_u32_to_u8(s, a as u32, o), |s, a| {
    ((2 * s as u64 + a as u64) / (2 * a as u64)) as u8
});
gray_box_pixel!(u16, Some(65535.0), |s, a, o| simd::round_div_u64_to_u16(s, a as u64, o), |s, a| {
    ((2 * s as u128 + a as u128) / (2 * a as u128)) as u16
});
gray_box_pixel!(f32, None, |s, a, o| simd::scale_f64_to_f32(s, 1.0 / a as f64, o), |s, a| (s / a as f64) as f32);

impl BoxPixel for Rgba8 {
    type Lane = u8;
    const CHANNELS: usize = 4;
    const INTEGER_MAX: Option<f32> = Some(255.0);
    fn lanes(p: &[Rgba8]) -> &[u8] {
        rgba_as_bytes(p)
    }
    fn lanes_mut(p: &mut [Rgba8]) -> &mut [u8] {
        rgba_as_bytes_mut(p)
    }
    fn mean_row(sums: &[u32], area: usize, out: &mut [u8]) {
        <u8 as BoxPixel>::mean_row(sums, area, out)
    }
    fn mean_one(sum: u32, area: usize) -> u8 {
        <u8 as BoxPixel>::mean_one(sum, area)
    }
}

fn lane_view<'a, P: BoxPixel>(src: &ImageView<'a, P>) -> LaneView<'a, P::Lane> {
    LaneView {
        data: P::lanes(src.span()),
        width: src.width(),
        height: src.height(),
        stride: src.stride() * P::CHANNELS,
        channels: P::CHANNELS,
    }
}

fn validate<P: BoxPixel>(src: &ImageView<'_, P>, dst_size: (usize, usize), p: &BoxParams) -> Result<()> {
    check_same_size(src.size(), dst_size)?;
    p.window().validate()?;
    p.border.validate(P::INTEGER_MAX)
}

/// Mean filter: `dst(x, y)` = the mean of `src` over the `p.width x p.height` window whose
/// anchor `(width / 2, height / 2)` sits on `(x, y)`, with `p.border` outside the image
/// (`Normalize`: the mean of the in-bounds pixels only). Integer images: the exact window
/// sum, rounded half up to the nearest integer. f32: the window sum accumulated in f64,
/// then divided (error <= 2^-24 relative to the sum of |x| over the window, plus f64
/// rounding). RGBA: each channel separately. O(1) per pixel.
pub fn mean_filter<P: BoxPixel>(
    src: ImageView<'_, P>,
    dst: ImageViewMut<'_, P>,
    p: &BoxParams,
    par: Parallelism,
) -> Result<()> {
    validate(&src, dst.size(), p)?;
    let win = p.window();
    let (w, h) = src.size();
    let normalize = p.border == Border::Normalize;
    let (up, down) = Window::reach(win.height);
    let (left, right) = Window::reach(win.width);
    let c = P::CHANNELS;
    banded_window_sums(&src, dst, p, par, |y, sums, out: &mut [P]| {
        let out = P::lanes_mut(out);
        if normalize {
            let ny = inside_count(y, up, down, h);
            for x in 0..w {
                let area = ny * inside_count(x, left, right, w);
                for ch in 0..c {
                    out[x * c + ch] = P::mean_one(sums[x * c + ch], area);
                }
            }
        } else {
            P::mean_row(sums, win.area(), out);
        }
    })
}

/// Runs the sliding-window sums of `src` over row bands of `dst` (in parallel when
/// allowed) and lets `write(y, sums, dst_row)` turn each row of window sums into output.
fn banded_window_sums<P: BoxPixel, O: Pixel>(
    src: &ImageView<'_, P>,
    dst: ImageViewMut<'_, O>,
    p: &BoxParams,
    par: Parallelism,
    write: impl Fn(usize, &[<P::Lane as Lane>::Acc], &mut [O]) + Send + Sync,
) -> Result<()> {
    let lanes = lane_view(src);
    let win = p.window();
    try_for_each_band_restarting(dst, par, win.height, |y0, mut band| {
        let rows = y0..y0 + band.height();
        window_sums(&lanes, win, p.border, rows, |y, sums| write(y, sums, band.row_mut(y - y0)))
    })
}

/// Box sum of 8-bit or 16-bit gray: `dst(x, y)` = the exact integer sum over the window
/// (border as in [`mean_filter`]; `Normalize` sums the in-bounds pixels only).
/// 16-bit input needs `65535 * area < 2^32`, so its window area is limited to 65537.
pub fn box_sum<P: BoxPixel>(
    src: ImageView<'_, P>,
    dst: ImageViewMut<'_, u32>,
    p: &BoxParams,
    par: Parallelism,
) -> Result<()>
where
    <P::Lane as Lane>::Acc: Into<u64>,
{
    validate(&src, dst.size(), p)?;
    if P::CHANNELS != 1 {
        return Err(Error::UnsupportedType { op: "box sum", types: "RGBA (use the mean filter)" });
    }
    let max = P::INTEGER_MAX.unwrap_or(0.0) as u64;
    if max * p.window().area() as u64 > u32::MAX as u64 {
        return Err(Error::OutOfRange {
            name: "window area",
            value: p.window().area() as i64,
            min: 1,
            max: (u32::MAX as u64 / max.max(1)) as i64,
        });
    }
    banded_window_sums(&src, dst, p, par, |_, sums, out: &mut [u32]| {
        for (o, &s) in out.iter_mut().zip(sums) {
            *o = Into::<u64>::into(s) as u32;
        }
    })
}

/// Box sum of f32 gray, accumulated in f64 and rounded once to f32.
pub fn box_sum_f32(
    src: ImageView<'_, f32>,
    dst: ImageViewMut<'_, f32>,
    p: &BoxParams,
    par: Parallelism,
) -> Result<()> {
    validate(&src, dst.size(), p)?;
    banded_window_sums(&src, dst, p, par, |_, sums, out: &mut [f32]| simd::scale_f64_to_f32(sums, 1.0, out))
}

/// The direct O(m^2)-per-pixel mean filter: the reference the O(1) version is tested
/// against and the baseline of the benchmark. Same border and rounding rules as
/// [`mean_filter`]; sums in f64 (exact for integer inputs).
pub fn mean_filter_naive<P: BoxPixel>(
    src: ImageView<'_, P>,
    mut dst: ImageViewMut<'_, P>,
    p: &BoxParams,
) -> Result<()>
where
    P::Lane: Into<f64>,
{
    validate(&src, dst.size(), p)?;
    let lanes = lane_view(&src);
    let (w, h, c) = (src.width(), src.height(), P::CHANNELS);
    let (up, _) = Window::reach(p.height);
    let (left, _) = Window::reach(p.width);
    let outside = p.border.outside_value() as f64;
    for y in 0..h {
        for x in 0..w {
            for ch in 0..c {
                let (mut s, mut n) = (0.0f64, 0usize);
                for dy in 0..p.height {
                    let yy = p.border.source_index(y as isize + dy as isize - up as isize, h);
                    for dx in 0..p.width {
                        let xx = p.border.source_index(x as isize + dx as isize - left as isize, w);
                        match (xx, yy) {
                            (Some(xx), Some(yy)) => {
                                s += lanes.data[yy * lanes.stride + xx * c + ch].into();
                                n += 1;
                            }
                            _ => s += outside,
                        }
                    }
                }
                let area = if p.border == Border::Normalize { n } else { p.width * p.height };
                let out = P::lanes_mut(dst.row_mut(y));
                out[x * c + ch] = P::mean_one(<P::Lane as Lane>::acc_from_f64(s), area);
            }
        }
    }
    Ok(())
}
