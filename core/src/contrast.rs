//! Local contrast enhancement from the local mean and standard deviation, the application
//! of the variance paper, at several kernel sizes at once.
//!
//! For each tent radius `R_s` (s = 1..S) the local weighted mean `mu_s` and standard
//! deviation `sigma_s` of the luminance `Y` come from the exact O(1)
//! [`Recursive`](crate::variance::VarianceMethod::Recursive) local variance, and
//!
//! ```text
//! g_s = clamp(alpha * sigma_g / (sigma_s + noise * sigma_g), gain_min, gain_max)
//! Y'  = Y + (1/S) sum_s (g_s - 1) (Y - mu_s)          (= mean over s of mu_s + g_s (Y - mu_s))
//! ```
//!
//! with `sigma_g` the global standard deviation of `Y`. The gain is large where the local
//! spread is small (flat, low-contrast detail is lifted) and falls to `gain_min` where it is
//! already large. Why several sizes and centre-weighted kernels: at a strong edge the large
//! kernels have a large `sigma` and hence a gain near `gain_min` (no ring), while the small
//! ones, which do lift detail near the edge, only reach a few pixels (a short halo at
//! most); the tent's weights fall off linearly, so a pixel entering the window changes
//! `mu` gradually instead of by a step. The `noise` term bounds the gain in flat areas
//! (`g <= alpha / noise`) so sensor noise is not amplified without limit.
//!
//! Gray images (u8, u16, f32) are enhanced directly; the result is rounded and clamped to
//! the type's range for integers (f32 is not clamped). RGBA: the statistics are taken on
//! the Rec. 601 luma, and each pixel's R, G, B are multiplied by the same factor `Y' / Y`
//! (lowered if needed so no channel exceeds 255), which keeps hue and saturation; alpha is
//! kept. A constant image is returned unchanged. Borders: `border` (default Reflect101),
//! as in [`local_variance`](crate::variance::local_variance). NaN in f32 input spreads as in
//! the local variance: to the pixels whose largest kernel contains it.

use crate::border::Border;
use crate::cpu::multiversion;
use crate::error::{require_positive, try_filled, Error, Result};
use crate::image::{check_same_size, ConvertPixel, ImageView, ImageViewMut, Pixel, Rgba8};
use crate::parallel::{try_for_each_band, Parallelism};
use crate::variance::{VarianceKernel, VariancePixel, VarianceSample};
use alloc::format;
use alloc::vec;
use alloc::vec::Vec;

/// Parameters of [`contrast_enhance`].
#[derive(Clone, Debug, PartialEq)]
pub struct ContrastParams {
    /// Tent radii of the scales, each `2^k - 1` (1..=255). Default 7, 31, 127.
    pub radii: Vec<usize>,
    /// Target spread as a multiple of the global standard deviation. Default 1.0.
    pub alpha: f32,
    /// Largest gain. Default 3.0.
    pub gain_max: f32,
    /// Smallest gain; 1 (the default) never lowers contrast.
    pub gain_min: f32,
    /// Noise floor as a fraction of the global standard deviation, added to the local
    /// one: bounds the gain in flat areas to `alpha / noise`. Default 0.1.
    pub noise: f32,
    /// Border rule of the local statistics (Reflect101, Replicate or Constant).
    pub border: Border,
}

impl Default for ContrastParams {
    fn default() -> Self {
        ContrastParams { radii: vec![7, 31, 127], alpha: 1.0, gain_max: 3.0, gain_min: 1.0, noise: 0.1, border: Border::Reflect101 }
    }
}

impl ContrastParams {
    /// Checks every parameter (radii through [`VarianceKernel::validate`]).
    pub fn validate(&self) -> Result<()> {
        if self.radii.is_empty() {
            return Err(Error::InvalidParameter { name: "radii", reason: "at least one kernel radius is needed".into() });
        }
        for &r in &self.radii {
            VarianceKernel::Tent { radius: r }.validate()?;
        }
        require_positive("alpha", self.alpha as f64)?;
        require_positive("gain_min", self.gain_min as f64)?;
        require_positive("gain_max", self.gain_max as f64)?;
        require_positive("noise", self.noise as f64)?;
        if self.gain_max < self.gain_min {
            return Err(Error::InvalidParameter {
                name: "gain_max",
                reason: format!("{} is below gain_min {}", self.gain_max, self.gain_min),
            });
        }
        if self.border == Border::Normalize {
            return Err(Error::InvalidParameter { name: "border", reason: "Normalize is not supported".into() });
        }
        Ok(())
    }
}

/// The pixel types [`contrast_enhance`] takes: u8, u16, f32 gray and RGBA.
pub trait ContrastPixel: Pixel + ConvertPixel<f32> + crate::sealed::Sealed {
    #[doc(hidden)]
    fn enhance(src: ImageView<'_, Self>, dst: ImageViewMut<'_, Self>, p: &ContrastParams, par: Parallelism) -> Result<()>;
}

macro_rules! gray {
    ($t:ty, $max:expr) => {
        impl ContrastPixel for $t {
            fn enhance(src: ImageView<'_, $t>, dst: ImageViewMut<'_, $t>, p: &ContrastParams, par: Parallelism) -> Result<()> {
                p.border.validate(<$t as VarianceSample>::INTEGER_MAX)?;
                enhance_rows(src, src, dst, p, par, |_, y, d, out| {
                    for ((o, &v), &d) in out.iter_mut().zip(y).zip(d) {
                        *o = round_non_negative((v + d).clamp(0.0, $max)) as $t;
                    }
                })
            }
        }
    };
}
gray!(u8, 255.0);
gray!(u16, 65535.0);

impl ContrastPixel for f32 {
    fn enhance(src: ImageView<'_, f32>, dst: ImageViewMut<'_, f32>, p: &ContrastParams, par: Parallelism) -> Result<()> {
        p.border.validate(None)?;
        enhance_rows(src, src, dst, p, par, |_, y, d, out| {
            for ((o, &v), &d) in out.iter_mut().zip(y).zip(d) {
                *o = v + d;
            }
        })
    }
}

impl ContrastPixel for Rgba8 {
    fn enhance(src: ImageView<'_, Rgba8>, dst: ImageViewMut<'_, Rgba8>, p: &ContrastParams, par: Parallelism) -> Result<()> {
        p.border.validate(Some(255.0))?;
        // Statistics on the rounded luma (exact integer sums); the formula on the unrounded one.
        let luma8 = src.try_convert::<u8>()?;
        enhance_rows(luma8.view(), src, dst, p, par, |s, y, d, out| {
            for (((o, &px), &l), &d) in out.iter_mut().zip(s).zip(y).zip(d) {
                *o = scale_rgb(px, l, l + d);
            }
        })
    }
}

/// Round half up of a value in `0..=65535` (what `roundf` gives there) in operations that
/// vectorize (libm's `roundf` does not). NaN gives 0.
#[inline(always)]
fn round_non_negative(v: f32) -> u16 {
    let t = v as u16;
    t + u16::from(v - t as f32 >= 0.5)
}

/// `px` with R, G, B multiplied by `target / luma` (at most `255 / max channel`, so hue and
/// saturation are kept); a black pixel becomes the gray of the target luma.
#[inline]
fn scale_rgb(px: Rgba8, luma: f32, target: f32) -> Rgba8 {
    let target = target.clamp(0.0, 255.0);
    let to8 = |v: f32| round_non_negative(v.clamp(0.0, 255.0)) as u8;
    if luma <= 0.0 {
        let g = to8(target);
        return Rgba8::new(g, g, g, px.a);
    }
    let top = px.r.max(px.g).max(px.b) as f32;
    let k = (target / luma).min(255.0 / top);
    Rgba8::new(to8(px.r as f32 * k), to8(px.g as f32 * k), to8(px.b as f32 * k), px.a)
}

/// The enhancement row by row: `Y` is `src` as f32, its local statistics come from `stats`
/// (the same image, or the rounded luma of RGBA), and for each row `finish(src_row, Y_row,
/// delta_row, dst_row)` writes the result from `Y' - Y = (1/S) sum_s (g_s - 1)(Y - mu_s)`.
/// All scales advance together, one row at a time, so nothing but a few rows per band is
/// stored. Errors: [`Error::OutOfMemory`](crate::Error::OutOfMemory) where the bands'
/// rows cannot be allocated.
fn enhance_rows<S: VariancePixel, P: ContrastPixel, O: Pixel>(
    stats: ImageView<'_, S>,
    src: ImageView<'_, P>,
    dst: ImageViewMut<'_, O>,
    p: &ContrastParams,
    par: Parallelism,
    finish: impl Fn(&[P], &[f32], &[f32], &mut [O]) + Send + Sync,
) -> Result<()> {
    let w = src.width();
    let luma_row = |y: usize, out: &mut [f32]| {
        for (o, &v) in out.iter_mut().zip(src.row(y)) {
            *o = v.convert();
        }
    };
    let sigma_g = global_sigma(src.height(), w, &luma_row);
    let (num, floor) = (p.alpha * sigma_g, p.noise * sigma_g);
    let inv_s = 1.0 / p.radii.len() as f32;
    let moments = S::tent_moments(stats, p.border);
    let longest = p.radii.iter().max().map_or(1, |r| r + 1);
    // Each band allocates its rows of state (per scale a ring of about R / 2 + 3 rows of two
    // f64 lanes, and four f32 rows) fallibly: an image too wide for the memory left is an
    // error, not an abort.
    try_for_each_band(dst, par, 2 * longest, |y0, mut band| {
        // A constant image (sigma_g = 0) needs no statistics: the delta is 0.
        let mut scales: Vec<_> = if sigma_g > 0.0 { p.radii.iter().map(|&r| moments.rows(r, y0)).collect::<Result<_>>()? } else { Vec::new() };
        let row = || try_filled(w, 0.0f32);
        let (mut y, mut delta, mut mean, mut var) = (row()?, row()?, row()?, row()?);
        for i in 0..band.height() {
            luma_row(y0 + i, &mut y);
            delta.fill(0.0);
            for scale in &mut scales {
                scale.next_row(&mut mean, &mut var);
                accumulate(&mut delta, &y, &mean, &var, num, floor, p.gain_min, p.gain_max, inv_s);
            }
            finish(src.row(y0 + i), &y, &delta, band.row_mut(i));
        }
        Ok(())
    })
}

/// The standard deviation of the finite values of the image whose row `y` `luma_row`
/// writes (two passes in f64: the mean, then the squared deviations from it).
fn global_sigma(h: usize, w: usize, luma_row: &(impl Fn(usize, &mut [f32]) + Sync)) -> f32 {
    let mut row = vec![0.0f32; w];
    let (mut s, mut n) = (0.0f64, 0u64);
    for y in 0..h {
        luma_row(y, &mut row);
        let (rs, rn) = finite_deviation_sums(&row, 0.0, 1);
        s += rs;
        n += rn;
    }
    if n == 0 {
        return 0.0;
    }
    let mean = s / n as f64;
    let mut s2 = 0.0f64;
    for y in 0..h {
        luma_row(y, &mut row);
        s2 += finite_deviation_sums(&row, mean, 2).0;
    }
    libm::sqrt(s2 / n as f64) as f32
}

multiversion! {
    /// Sum of `(v - mean)^power` (power 1 or 2) over the finite values of `row`, and their
    /// count; eight f64 accumulators so the additions vectorize.
    fn finite_deviation_sums(row: &[f32], mean: f64, power: u32) -> (f64, u64) {
        let (mut acc, mut cnt) = ([0.0f64; 8], [0u64; 8]);
        let chunks = row.chunks_exact(8);
        let tail = chunks.remainder();
        let mut add = |lane: usize, v: f32| {
            let ok = v.is_finite();
            let d = if ok { v as f64 - mean } else { 0.0 };
            acc[lane] += if power == 2 { d * d } else { d };
            cnt[lane] += u64::from(ok);
        };
        for c in chunks {
            for (lane, &v) in c.iter().enumerate() {
                add(lane, v);
            }
        }
        for (lane, &v) in tail.iter().enumerate() {
            add(lane, v);
        }
        (acc.iter().sum(), cnt.iter().sum())
    }
}

multiversion! {
    /// `d[i] += w (g - 1)(y[i] - m[i])`, `g = clamp(num / (sqrt(v[i]) + floor), gmin, gmax)`;
    /// eight lanes at a time with `wide` (libm's `sqrtf` does not vectorize).
    #[allow(clippy::too_many_arguments)]
    fn accumulate(d: &mut [f32], y: &[f32], m: &[f32], v: &[f32], num: f32, floor: f32, gmin: f32, gmax: f32, w: f32) {
        use wide::f32x8;
        let n = d.len().min(y.len()).min(m.len()).min(v.len());
        let lanes = |s: &[f32], i: usize| f32x8::from(<[f32; 8]>::try_from(&s[i..i + 8]).unwrap_or_default());
        let (numv, floorv, gminv, gmaxv, wv, one) = (f32x8::splat(num), f32x8::splat(floor), f32x8::splat(gmin), f32x8::splat(gmax), f32x8::splat(w), f32x8::ONE);
        let mut i = 0;
        while i + 8 <= n {
            let g = (numv / (lanes(v, i).sqrt() + floorv)).fast_max(gminv).fast_min(gmaxv);
            let out = lanes(d, i) + wv * (g - one) * (lanes(y, i) - lanes(m, i));
            d[i..i + 8].copy_from_slice(&out.to_array());
            i += 8;
        }
        for i in i..n {
            let g = (num / (libm::sqrtf(v[i]) + floor)).max(gmin).min(gmax);
            d[i] += w * (g - 1.0) * (y[i] - m[i]);
        }
    }
}

/// Local contrast enhancement of `src` into `dst` (same type and size) as described in the
/// module docs. Errors: invalid parameters (see [`ContrastParams::validate`]), a Constant
/// border that does not fit the pixel type, or sizes that differ.
pub fn contrast_enhance<P: ContrastPixel>(
    src: ImageView<'_, P>,
    dst: ImageViewMut<'_, P>,
    p: &ContrastParams,
    par: Parallelism,
) -> Result<()> {
    p.validate()?;
    check_same_size(src.size(), dst.size())?;
    P::enhance(src, dst, p, par)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::Image;
    use crate::variance::{local_variance_reference, VarianceMethod, VarianceParams};

    fn noisy(w: usize, h: usize, seed: u64, f: impl Fn(usize, usize) -> f32) -> Image<f32> {
        let mut s = seed | 1;
        Image::from_fn(w, h, |x, y| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            f(x, y) + (s % 1000) as f32 / 1000.0 * 6.0
        })
        .unwrap()
    }

    /// Straight from the formula with the float64 reference statistics.
    fn reference(img: &Image<f32>, p: &ContrastParams) -> Vec<f64> {
        let (w, h) = img.size();
        let v: Vec<f64> = img.as_slice().iter().map(|&x| x as f64).collect();
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let sg = (v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / v.len() as f64).sqrt();
        let mut out = v.clone();
        for &r in &p.radii {
            let vp = VarianceParams::new(VarianceMethod::Usual, VarianceKernel::Tent { radius: r });
            let var = local_variance_reference(img.view(), &vp).unwrap();
            let wt = vp.kernel.weights_1d();
            for y in 0..h {
                for x in 0..w {
                    let (mut s, mut sw) = (0.0, 0.0);
                    for j in 0..wt.len() {
                        for i in 0..wt.len() {
                            let xx = crate::border::reflect101(x as isize + i as isize - r as isize, w);
                            let yy = crate::border::reflect101(y as isize + j as isize - r as isize, h);
                            let k = (wt[i] * wt[j]) as f64;
                            s += k * img.at(xx, yy) as f64;
                            sw += k;
                        }
                    }
                    let mu = s / sw;
                    let g = (p.alpha as f64 * sg / (var[y * w + x].sqrt() + p.noise as f64 * sg))
                        .clamp(p.gain_min as f64, p.gain_max as f64);
                    out[y * w + x] += (g - 1.0) * (v[y * w + x] - mu) / p.radii.len() as f64;
                }
            }
        }
        out
    }

    #[test]
    fn matches_the_formula_for_f32_and_u8() {
        crate::testing::at_every_level(|_| {
            let img = noisy(23, 19, 3, |x, y| if x > 11 { 120.0 } else { 40.0 } + (y % 5) as f32);
            let p = ContrastParams { radii: vec![1, 3, 7], ..Default::default() };
            let want = reference(&img, &p);
            let mut out = Image::<f32>::new(23, 19).unwrap();
            contrast_enhance(img.view(), out.view_mut(), &p, Parallelism::Sequential).unwrap();
            for (&g, &w) in out.as_slice().iter().zip(&want) {
                assert!((g as f64 - w).abs() < 1e-3 * (1.0 + w.abs()), "{g} vs {w}");
            }
            let img8 = img.map(|v| libm::roundf(v) as u8);
            let want8 = reference(&img8.convert::<f32>(), &p);
            let mut out8 = Image::<u8>::new(23, 19).unwrap();
            contrast_enhance(img8.view(), out8.view_mut(), &p, Parallelism::Sequential).unwrap();
            for (&g, &w) in out8.as_slice().iter().zip(&want8) {
                assert!((g as f64 - w.clamp(0.0, 255.0)).abs() <= 0.5 + 1e-3, "{g} vs {w}");
            }
        });
    }

    #[test]
    fn bands_give_the_same_bits_and_match_the_formula() {
        // Tall enough for several row bands per scale.
        let img = noisy(21, 150, 11, |x, y| 30.0 + 2.0 * x as f32 + if (y / 9) % 2 == 0 { 50.0 } else { 0.0 });
        let p = ContrastParams { radii: vec![1, 7, 15], ..Default::default() };
        let img8 = img.map(|v| libm::roundf(v) as u8);
        let run = |par| {
            let mut out = Image::<u8>::new(21, 150).unwrap();
            contrast_enhance(img8.view(), out.view_mut(), &p, par).unwrap();
            out
        };
        let all = run(Parallelism::AllThreads);
        assert_eq!(all, run(Parallelism::Sequential));
        let want = reference(&img8.convert::<f32>(), &p);
        for (&g, &w) in all.as_slice().iter().zip(&want) {
            assert!((g as f64 - w.clamp(0.0, 255.0)).abs() <= 0.5 + 1e-3, "{g} vs {w}");
        }
    }

    #[test]
    fn nan_spreads_only_within_the_largest_kernel() {
        let mut img = noisy(40, 30, 4, |x, _| 10.0 * x as f32);
        img.view_mut().row_mut(15)[20] = f32::NAN;
        let p = ContrastParams { radii: vec![1, 3], ..Default::default() };
        let mut out = Image::<f32>::new(40, 30).unwrap();
        contrast_enhance(img.view(), out.view_mut(), &p, Parallelism::AllThreads).unwrap();
        for y in 0..30usize {
            for x in 0..40usize {
                let inside = x.abs_diff(20) <= 3 && y.abs_diff(15) <= 3;
                assert_eq!(out.at(x, y).is_nan(), inside, "({x}, {y})");
            }
        }
    }

    #[test]
    fn low_contrast_detail_is_lifted_and_bounded() {
        // Weak texture (amplitude 6) on a strong global ramp: locally the gain is large.
        let img = noisy(64, 48, 9, |x, _| 2.0 * x as f32);
        let p = ContrastParams { radii: vec![3, 7], ..Default::default() };
        let mut out = Image::<f32>::new(64, 48).unwrap();
        contrast_enhance(img.view(), out.view_mut(), &p, Parallelism::AllThreads).unwrap();
        // Local detail: difference from a horizontal neighbour, away from the borders.
        let detail = |im: &Image<f32>| {
            let mut s = 0.0f64;
            for y in 8..40 {
                for x in 8..56 {
                    s += ((im.at(x, y) - im.at(x, y + 1)) as f64).abs();
                }
            }
            s
        };
        let ratio = detail(&out) / detail(&img);
        assert!(ratio > 1.5 && ratio <= p.gain_max as f64 + 1e-3, "detail ratio {ratio}");
    }

    #[test]
    fn multi_scale_rings_less_than_one_large_kernel() {
        // A step edge with weak texture; overshoot beyond the step's levels is the halo.
        let img = noisy(96, 8, 5, |x, _| if x < 48 { 50.0 } else { 200.0 });
        let overshoot = |radii: Vec<usize>| {
            let p = ContrastParams { radii, gain_min: 0.5, ..Default::default() };
            let mut out = Image::<f32>::new(96, 8).unwrap();
            contrast_enhance(img.view(), out.view_mut(), &p, Parallelism::Sequential).unwrap();
            out.as_slice().iter().map(|&v| (50.0 - v).max(v - 206.0).max(0.0)).fold(0.0f32, f32::max)
        };
        let single = overshoot(vec![31]);
        let multi = overshoot(vec![3, 15, 31]);
        assert!(multi < single, "multi-scale overshoot {multi} vs single {single}");
    }

    #[test]
    fn rgb_keeps_hue() {
        let mut s = 77u64;
        let img = Image::from_fn(30, 20, |x, y| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let v = 60 + (x * 3 + y) as u8 + (s % 8) as u8;
            Rgba8::new(v, v / 2, v / 3 + 10, 200)
        })
        .unwrap();
        let mut out = Image::<Rgba8>::new(30, 20).unwrap();
        contrast_enhance(img.view(), out.view_mut(), &ContrastParams { radii: vec![3, 7], ..Default::default() }, Parallelism::AllThreads)
            .unwrap();
        let mut changed = 0;
        for (a, b) in img.as_slice().iter().zip(out.as_slice()) {
            assert_eq!(b.a, 200);
            // Same chromaticity: r/g and b/g ratios within rounding.
            let ra = a.r as f32 / a.g as f32;
            let rb = b.r as f32 / b.g.max(1) as f32;
            assert!((ra - rb).abs() < 0.06 * ra, "{a:?} -> {b:?}");
            changed += usize::from(a != b);
        }
        assert!(changed > 100);
    }

    #[test]
    fn constant_image_is_unchanged() {
        let img = Image::filled(16, 9, 77u16).unwrap();
        let mut out = Image::<u16>::new(16, 9).unwrap();
        contrast_enhance(img.view(), out.view_mut(), &ContrastParams::default(), Parallelism::Sequential).unwrap();
        assert_eq!(out, img);
    }

    #[test]
    fn bad_parameters_are_errors() {
        let img = Image::filled(8, 8, 1u8).unwrap();
        let mut out = Image::<u8>::new(8, 8).unwrap();
        let bad = [
            ContrastParams { radii: vec![], ..Default::default() },
            ContrastParams { radii: vec![3, 5], ..Default::default() },
            ContrastParams { alpha: f32::NAN, ..Default::default() },
            ContrastParams { alpha: 0.0, ..Default::default() },
            ContrastParams { gain_max: 0.5, gain_min: 1.0, ..Default::default() },
            ContrastParams { noise: -1.0, ..Default::default() },
            ContrastParams { border: Border::Normalize, ..Default::default() },
            ContrastParams { border: Border::Constant(0.5), ..Default::default() },
        ];
        for p in bad {
            assert!(contrast_enhance(img.view(), out.view_mut(), &p, Parallelism::Sequential).is_err(), "{p:?}");
        }
        let mut small = Image::<u8>::new(8, 7).unwrap();
        assert!(matches!(
            contrast_enhance(img.view(), small.view_mut(), &ContrastParams::default(), Parallelism::Sequential),
            Err(Error::SizeMismatch { .. })
        ));
        let e = contrast_enhance(img.view(), out.view_mut(), &ContrastParams { radii: vec![5], ..Default::default() }, Parallelism::Sequential)
            .unwrap_err();
        assert!(format!("{e}").contains("1, 3, 7, 15"));
    }
}
