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
use crate::error::{require_positive, Error, Result};
use crate::image::{check_same_size, Image, ImageView, ImageViewMut, Pixel, Rgba8};
use crate::parallel::{for_each_band, Parallelism};
use crate::variance::{local_mean_variance, VarianceKernel, VariancePixel};
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

mod sealed {
    pub trait Sealed {}
    impl Sealed for u8 {}
    impl Sealed for u16 {}
    impl Sealed for f32 {}
    impl Sealed for crate::image::Rgba8 {}
}

/// The pixel types [`contrast_enhance`] takes: u8, u16, f32 gray and RGBA.
pub trait ContrastPixel: Pixel + sealed::Sealed {
    #[doc(hidden)]
    fn enhance(src: ImageView<'_, Self>, dst: ImageViewMut<'_, Self>, p: &ContrastParams, par: Parallelism) -> Result<()>;
}

macro_rules! gray {
    ($t:ty, $out:expr) => {
        impl ContrastPixel for $t {
            fn enhance(src: ImageView<'_, $t>, mut dst: ImageViewMut<'_, $t>, p: &ContrastParams, par: Parallelism) -> Result<()> {
                p.border.validate(<$t as VariancePixel>::INTEGER_MAX)?;
                let y = src.convert::<f32>();
                let delta = luminance_delta(src, &y, p, par)?;
                let (y, delta) = (&y, &delta);
                for_each_band(dst.reborrow(), par, 16, |y0, mut band| {
                    for i in 0..band.height() {
                        let (yr, dr) = (y.row(y0 + i), delta.row(y0 + i));
                        for ((o, &v), &d) in band.row_mut(i).iter_mut().zip(yr).zip(dr) {
                            *o = $out(v + d);
                        }
                    }
                });
                Ok(())
            }
        }
    };
}
gray!(u8, |v: f32| libm::roundf(v.clamp(0.0, 255.0)) as u8);
gray!(u16, |v: f32| libm::roundf(v.clamp(0.0, 65535.0)) as u16);
gray!(f32, |v: f32| v);

impl ContrastPixel for Rgba8 {
    fn enhance(src: ImageView<'_, Rgba8>, mut dst: ImageViewMut<'_, Rgba8>, p: &ContrastParams, par: Parallelism) -> Result<()> {
        p.border.validate(Some(255.0))?;
        // Statistics on the rounded luma (exact integer path); the formula on the unrounded one.
        let luma8 = src.convert::<u8>();
        let y = src.convert::<f32>();
        let delta = luminance_delta(luma8.view(), &y, p, par)?;
        let (y, delta) = (&y, &delta);
        for_each_band(dst.reborrow(), par, 16, |y0, mut band| {
            for i in 0..band.height() {
                let (sr, yr, dr) = (src.row(y0 + i), y.row(y0 + i), delta.row(y0 + i));
                for (((o, s), &l), &d) in band.row_mut(i).iter_mut().zip(sr).zip(yr).zip(dr) {
                    *o = scale_rgb(*s, l, l + d);
                }
            }
        });
        Ok(())
    }
}

/// `px` with R, G, B multiplied by `target / luma` (at most `255 / max channel`, so hue and
/// saturation are kept); a black pixel becomes the gray of the target luma.
fn scale_rgb(px: Rgba8, luma: f32, target: f32) -> Rgba8 {
    let target = target.clamp(0.0, 255.0);
    let to8 = |v: f32| libm::roundf(v.clamp(0.0, 255.0)) as u8;
    if luma <= 0.0 {
        let g = to8(target);
        return Rgba8::new(g, g, g, px.a);
    }
    let top = px.r.max(px.g).max(px.b) as f32;
    let k = (target / luma).min(255.0 / top);
    Rgba8::new(to8(px.r as f32 * k), to8(px.g as f32 * k), to8(px.b as f32 * k), px.a)
}

/// `Y' - Y = (1/S) sum_s (g_s - 1)(Y - mu_s)` with the statistics of `stats` (the luminance
/// in its own type) and `y` the luminance as f32.
fn luminance_delta<S: VariancePixel>(stats: ImageView<'_, S>, y: &Image<f32>, p: &ContrastParams, par: Parallelism) -> Result<Image<f32>> {
    let (w, h) = y.size();
    let (mut s, mut s2, mut n) = (0.0f64, 0.0f64, 0usize);
    for &v in y.as_slice() {
        if v.is_finite() {
            s += v as f64;
            n += 1;
        }
    }
    let mean = if n > 0 { s / n as f64 } else { 0.0 };
    for &v in y.as_slice() {
        if v.is_finite() {
            s2 += (v as f64 - mean) * (v as f64 - mean);
        }
    }
    let sigma_g = if n > 0 { libm::sqrt(s2 / n as f64) as f32 } else { 0.0 };
    let mut delta = Image::<f32>::new(w, h)?;
    if sigma_g == 0.0 {
        return Ok(delta);
    }
    let (mut mu, mut var) = (Image::<f32>::new(w, h)?, Image::<f32>::new(w, h)?);
    let (num, floor) = (p.alpha * sigma_g, p.noise * sigma_g);
    let inv_s = 1.0 / p.radii.len() as f32;
    for &r in &p.radii {
        local_mean_variance(stats, mu.view_mut(), var.view_mut(), VarianceKernel::Tent { radius: r }, p.border, par)?;
        let (mu, var) = (&mu, &var);
        for_each_band(delta.view_mut(), par, 16, |y0, mut band| {
            for i in 0..band.height() {
                let (yr, mr, vr) = (y.row(y0 + i), mu.row(y0 + i), var.row(y0 + i));
                accumulate(band.row_mut(i), yr, mr, vr, num, floor, p.gain_min, p.gain_max, inv_s);
            }
        });
    }
    Ok(delta)
}

/// `d[i] += w (g - 1)(y[i] - m[i])`, `g = clamp(num / (sqrt(v[i]) + floor), gmin, gmax)`.
#[cfg_attr(feature = "std", multiversion::multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2+fma")))]
#[allow(clippy::too_many_arguments)]
fn accumulate(d: &mut [f32], y: &[f32], m: &[f32], v: &[f32], num: f32, floor: f32, gmin: f32, gmax: f32, w: f32) {
    for (((o, &yy), &mm), &vv) in d.iter_mut().zip(y).zip(m).zip(v) {
        let g = (num / (libm::sqrtf(vv) + floor)).max(gmin).min(gmax);
        *o += w * (g - 1.0) * (yy - mm);
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
        let img = noisy(23, 19, 3, |x, y| if x > 11 { 120.0 } else { 40.0 } + (y % 5) as f32);
        let p = ContrastParams { radii: vec![1, 3, 7], ..Default::default() };
        let want = reference(&img, &p);
        let mut out = Image::<f32>::new(23, 19).unwrap();
        contrast_enhance(img.view(), out.view_mut(), &p, Parallelism::AllThreads).unwrap();
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
