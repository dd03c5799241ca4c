//! Gaussian blur: parameters, validation, the sampled weights and the choice between the
//! separable FIR ([`super::gaussian_fir`]) and the recursive IIR
//! ([`super::gaussian_iir`]) implementations.
//!
//! Both work on f32 lanes: integer inputs are converted to f32 as they are read, every
//! intermediate stays in f32 (no rounding between the two 1-D passes), and the result is
//! rounded once at the end, half up (`floor(v + 0.5)`), saturating to the type's range.

use crate::border::Border;
use crate::error::{require_positive, require_range, Error, Result};
use crate::filter::BoxPixel;
use crate::fma::LoadF32;
use crate::image::{check_same_size, ImageView, ImageViewMut};
use crate::parallel::Parallelism;
use crate::simd::Lane;
use alloc::vec::Vec;
use crate::cpu::multiversion;

use super::{gaussian_fir, gaussian_iir};

/// Largest FIR radius (the window side 2 r + 1 stays within the box filter's 4095 limit
/// on each side of the centre).
pub const MAX_RADIUS: usize = 4095;

/// Largest sigma: its default radius `ceil(3 sigma)` is at most [`MAX_RADIUS`].
pub const MAX_SIGMA: f64 = 1365.0;

/// Smallest sigma of the recursive filter (its error there is already 9.5 % of the range;
/// see [`super::gaussian_iir`]).
pub const MIN_IIR_SIGMA: f64 = 0.5;

/// `Auto` runs the FIR below this sigma on gray images and the IIR from it up. Measured
/// (one thread, CPU time per call, 1920x1080 f32, Xeon with AVX-512, loaded machine):
/// sigma 5: FIR 4.8 ms, IIR 9-11 ms; sigma 8: 9.9 / 13.0; sigma 10: 11.4 / 9.1; sigma 15:
/// 12.2 / 8.9. The FIR's cost grows with its 2 ceil(3 sigma) + 1 taps, the IIR's is flat.
pub const IIR_FROM_SIGMA: f64 = 9.0;

/// The same switch for RGBA, where the FIR gains more from the 8-bit lanes: 1920x1080
/// RGBA, sigma 10: FIR 26 ms, IIR 44 ms; sigma 14: 38 / 46; sigma 20: 80 / 62.
pub const IIR_FROM_SIGMA_RGBA: f64 = 16.0;

/// Which Gaussian implementation to run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GaussianMethod {
    /// FIR for small sigma, IIR where its cost independent of sigma wins
    /// (from sigma 9 for gray, 16 for RGBA); an explicit `radius` asks for the FIR.
    #[default]
    Auto,
    /// Separable convolution with normalized sampled weights, radius `ceil(3 sigma)` by default.
    Fir,
    /// Recursive (IIR) Gaussian whose cost does not grow with sigma (sigma >= 0.5).
    Iir,
}

impl GaussianMethod {
    /// Lower-case name ("auto", "fir", "iir"), as the command line spells it.
    pub fn name(self) -> &'static str {
        match self {
            GaussianMethod::Auto => "auto",
            GaussianMethod::Fir => "fir",
            GaussianMethod::Iir => "iir",
        }
    }

    /// The method of a name, or an error listing the three.
    pub fn from_name(s: &str) -> Result<Self> {
        [GaussianMethod::Auto, GaussianMethod::Fir, GaussianMethod::Iir]
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| Error::InvalidParameter { name: "gaussian method", reason: alloc::format!("{s:?} is not one of fir, iir, auto") })
    }
}

impl core::fmt::Display for GaussianMethod {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// Parameters of the Gaussian blur.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GaussianParams {
    /// Standard deviation in pixels (finite, > 0, at most 1365).
    pub sigma: f64,
    /// FIR kernel radius (1..=4095); `None` means `ceil(3 sigma)`. The IIR has
    /// no radius: giving one with `Auto` selects the FIR.
    pub radius: Option<usize>,
    pub method: GaussianMethod,
    pub border: Border,
}

impl Default for GaussianParams {
    fn default() -> Self {
        GaussianParams { sigma: 2.0, radius: None, method: GaussianMethod::Auto, border: Border::Reflect101 }
    }
}

impl GaussianParams {
    /// The FIR radius: the given one, or `ceil(3 sigma)` (at least 1).
    pub fn fir_radius(&self) -> usize {
        self.radius.unwrap_or_else(|| (libm::ceil(3.0 * self.sigma) as usize).max(1))
    }

    /// The implementation `gaussian_blur` runs for these parameters on pixels of
    /// `channels` lanes (1 gray, 4 RGBA); never `Auto`.
    pub fn resolved_method(&self, channels: usize) -> GaussianMethod {
        let from = if channels == 1 { IIR_FROM_SIGMA } else { IIR_FROM_SIGMA_RGBA };
        match self.method {
            GaussianMethod::Auto if self.radius.is_some() || self.sigma < from => GaussianMethod::Fir,
            GaussianMethod::Auto => GaussianMethod::Iir,
            m => m,
        }
    }

    /// Checks sigma, radius and border for pixels whose integer maximum is `integer_max`.
    pub fn validate(&self, integer_max: Option<f32>) -> Result<()> {
        require_positive("sigma", self.sigma)?;
        if self.sigma > MAX_SIGMA {
            return Err(Error::InvalidFloat { name: "sigma", value: self.sigma, expected: "at most 1365" });
        }
        if let Some(r) = self.radius {
            require_range("radius", r, 1, MAX_RADIUS as i64)?;
        }
        if self.method == GaussianMethod::Iir && self.sigma < MIN_IIR_SIGMA {
            return Err(Error::InvalidFloat {
                name: "sigma",
                value: self.sigma,
                expected: "at least 0.5 for the recursive (IIR) Gaussian",
            });
        }
        self.border.validate(integer_max)
    }
}

/// The normalized sampled Gaussian `w_k = exp(-k^2 / (2 sigma^2)) / sum_j exp(-j^2 / (2 sigma^2))`
/// for `k = -radius..=radius` (index `k + radius`), computed in f64 and rounded to f32.
pub fn gaussian_weights(sigma: f64, radius: usize) -> Vec<f32> {
    let g: Vec<f64> = (0..=2 * radius)
        .map(|i| {
            // (k / sigma)^2 rather than k^2 / sigma^2: for a tiny sigma, sigma^2 underflows
            // to 0 and 0 / 0 would make the centre weight NaN.
            let t = (i as f64 - radius as f64) / sigma;
            libm::exp(-0.5 * t * t)
        })
        .collect();
    let sum: f64 = g.iter().sum();
    g.iter().map(|&v| (v / sum) as f32).collect()
}

/// A channel type the Gaussian reads as f32 and writes back rounded once.
pub trait GaussLane: Lane + LoadF32 {
    /// `dst[i] = src[i]` for f32; for integers rounded half up (`floor(v + 0.5)`) and
    /// saturated to the type's range (NaN cannot occur: outputs are convex combinations).
    fn store_row(src: &[f32], dst: &mut [Self]);
    /// `dst[i] = src[i] as f32`.
    fn load_row(src: &[Self], dst: &mut [f32]);
    /// The row itself when the lanes are f32 (a kernel then writes into it directly).
    fn as_f32_mut(row: &mut [Self]) -> Option<&mut [f32]>;
}

macro_rules! gauss_lane {
    ($t:ty, $store:ident, $load:ident, |$v:ident| $round:expr, |$r:ident| $as_f32:expr) => {
        multiversion! {
            fn $store(src: &[f32], dst: &mut [$t]) {
                for (d, &$v) in dst.iter_mut().zip(src) {
                    *d = $round;
                }
            }
        }
        multiversion! {
            fn $load(src: &[$t], dst: &mut [f32]) {
                for (d, &v) in dst.iter_mut().zip(src) {
                    *d = v as f32;
                }
            }
        }
        impl GaussLane for $t {
            #[inline]
            fn store_row(src: &[f32], dst: &mut [$t]) {
                $store(src, dst)
            }
            #[inline]
            fn load_row(src: &[$t], dst: &mut [f32]) {
                $load(src, dst)
            }
            #[inline]
            fn as_f32_mut($r: &mut [$t]) -> Option<&mut [f32]> {
                $as_f32
            }
        }
    };
}
/// `floor(v + 0.5)` clamped to `0..=max`, as an i32. The clamp (NaN becomes 0: `f32::max`
/// returns the other operand) makes the unchecked conversion exact and lets it vectorize,
/// which the saturating `as` does not.
#[inline(always)]
fn round_clamp(v: f32, max: f32) -> i32 {
    let c = (v + 0.5).max(0.0).min(max);
    // SAFETY: c is finite and within 0..=65535, so its truncation fits an i32.
    unsafe { c.to_int_unchecked::<i32>() }
}
gauss_lane!(u8, store_u8, load_u8, |v| round_clamp(v, 255.0) as u8, |_r| None);
gauss_lane!(u16, store_u16, load_u16, |v| round_clamp(v, 65535.0) as u16, |_r| None);
gauss_lane!(f32, store_f32, load_f32, |v| v, |r| Some(r));

/// The source as rows of channel lanes, f32-readable.
#[derive(Clone, Copy)]
pub(crate) struct Lanes<'a, L> {
    pub data: &'a [L],
    pub width: usize,
    pub height: usize,
    /// Lanes between row starts.
    pub stride: usize,
    /// Lanes per pixel.
    pub channels: usize,
}

impl<'a, L> Lanes<'a, L> {
    #[inline]
    pub fn row(&self, y: usize) -> &'a [L] {
        let s = y * self.stride;
        &self.data[s..s + self.width * self.channels]
    }
}

/// Gaussian blur of gray u8 / u16 / f32 or RGBA (each channel separately):
///
/// `dst(x, y) = sum_{i, j} w_i w_j src(x + i, y + j)` with `p.border` outside the image,
/// where `w` is the normalized sampled Gaussian of [`gaussian_weights`].
///
/// - [`GaussianMethod::Fir`] computes exactly that with radius `p.fir_radius()`
///   (`ceil(3 sigma)` by default), in f32 (tested against a float64 convolution within
///   1e-5 of the value range). `Normalize` renormalizes the weights over the in-bounds taps:
///   `sum w_i w_j src / sum w_i w_j` over in-bounds pixels only.
/// - [`GaussianMethod::Iir`] approximates the untruncated Gaussian with Young and van
///   Vliet's third-order recursive filter (its boundary handling is documented in
///   `filter/gaussian_iir.rs`); its error is at most 0.3 % of the value range for sigma >= 3.
/// - [`GaussianMethod::Auto`] runs the FIR when a radius is given or sigma is below
///   9 (gray) / 16 (RGBA), the IIR otherwise.
///
/// Integer inputs are filtered in f32 and rounded once, half up, at the end.
/// Errors: sigma NaN / infinite / <= 0 / above 1365 (or < 0.5 with `Iir`), radius 0
/// or above 4095, a border constant that is not a valid pixel value, or `dst` of
/// another size than `src`.
pub fn gaussian_blur<P: BoxPixel>(
    src: ImageView<'_, P>,
    dst: ImageViewMut<'_, P>,
    p: &GaussianParams,
    par: Parallelism,
) -> Result<()>
where
    P::Lane: GaussLane,
{
    blur_into(src, dst, p, par)
}

/// [`gaussian_blur`] of a gray u8 / u16 / f32 image into f32, unrounded: the filter reads
/// every type as exact f32, so this is the image converted to f32 and blurred, to the bit,
/// with no converted copy made.
/// Errors: those of [`gaussian_blur`], and pixels of more than one channel.
pub fn gaussian_blur_f32<P: BoxPixel>(
    src: ImageView<'_, P>,
    dst: ImageViewMut<'_, f32>,
    p: &GaussianParams,
    par: Parallelism,
) -> Result<()>
where
    P::Lane: GaussLane,
{
    if P::CHANNELS != 1 {
        return Err(Error::UnsupportedType { op: "gaussian blur into f32", types: "pixels of more than one channel" });
    }
    blur_into(src, dst, p, par)
}

/// [`gaussian_blur`] of `src`'s lanes into `dst`'s (the same number per pixel).
fn blur_into<P: BoxPixel, Q: BoxPixel>(
    src: ImageView<'_, P>,
    dst: ImageViewMut<'_, Q>,
    p: &GaussianParams,
    par: Parallelism,
) -> Result<()>
where
    P::Lane: GaussLane,
    Q::Lane: GaussLane,
{
    check_same_size(src.size(), dst.size())?;
    p.validate(P::INTEGER_MAX)?;
    if (P::CHANNELS != 1 && P::CHANNELS != 4) || P::CHANNELS != Q::CHANNELS {
        return Err(Error::UnsupportedType { op: "gaussian blur", types: "pixels of other than 1 or 4 channels" });
    }
    let lanes = Lanes {
        data: P::lanes(src.span()),
        width: src.width(),
        height: src.height(),
        stride: src.stride() * P::CHANNELS,
        channels: P::CHANNELS,
    };
    match p.resolved_method(P::CHANNELS) {
        GaussianMethod::Iir => gaussian_iir::blur::<P::Lane, Q>(lanes, dst, p.sigma, p.border, par)?,
        _ => {
            let wts = gaussian_weights(p.sigma, p.fir_radius());
            gaussian_fir::blur::<P::Lane, Q>(lanes, dst, &wts, p.border, par, crate::cpu::level())?
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::image::{Image, Rgba8};
    use alloc::vec;
    use proptest::prelude::*;

    /// The lane conversions at every level: rounding half up and saturating, exact widening.
    #[test]
    fn lane_conversions_at_every_level() {
        let src: Vec<f32> = (0..203).map(|i| i as f32 * 401.3 - 900.0).collect();
        crate::testing::at_every_level(|_| {
            let mut u8s = vec![0u8; src.len()];
            u8::store_row(&src, &mut u8s);
            let mut u16s = vec![0u16; src.len()];
            u16::store_row(&src, &mut u16s);
            let (mut back8, mut back16) = (vec![0f32; src.len()], vec![0f32; src.len()]);
            u8::load_row(&u8s, &mut back8);
            u16::load_row(&u16s, &mut back16);
            for i in 0..src.len() {
                let want = libm::floor(src[i] as f64 + 0.5);
                assert_eq!(u8s[i] as f64, want.clamp(0.0, 255.0), "{}", src[i]);
                assert_eq!(u16s[i] as f64, want.clamp(0.0, 65535.0), "{}", src[i]);
                assert_eq!((back8[i], back16[i]), (u8s[i] as f32, u16s[i] as f32));
            }
        });
    }

    /// f64 sampled Gaussian, normalized over `-radius..=radius`.
    pub(crate) fn weights_f64(sigma: f64, radius: usize) -> Vec<f64> {
        let g: Vec<f64> = (0..=2 * radius)
            .map(|i| {
                let k = i as f64 - radius as f64;
                libm::exp(-k * k / (2.0 * sigma * sigma))
            })
            .collect();
        let s: f64 = g.iter().sum();
        g.iter().map(|v| v / s).collect()
    }

    /// Direct 2-D float64 convolution of one channel plane (`img[y * w + x]`) with the
    /// outer product of `wts`, following the border rule literally.
    pub(crate) fn convolve_2d(img: &[f64], w: usize, h: usize, wts: &[f64], border: Border) -> Vec<f64> {
        let r = wts.len() / 2;
        let mut out = vec![0.0; w * h];
        for y in 0..h {
            for x in 0..w {
                let (mut s, mut norm) = (0.0, 0.0);
                for (j, &wy) in wts.iter().enumerate() {
                    let sy = border.source_index(y as isize + j as isize - r as isize, h);
                    for (i, &wx) in wts.iter().enumerate() {
                        let sx = border.source_index(x as isize + i as isize - r as isize, w);
                        match (sx, sy) {
                            (Some(sx), Some(sy)) => {
                                s += wy * wx * img[sy * w + sx];
                                norm += wy * wx;
                            }
                            _ => s += wy * wx * border.outside_value() as f64,
                        }
                    }
                }
                out[y * w + x] = if border == Border::Normalize { s / norm } else { s };
            }
        }
        out
    }

    /// The same convolution done separably in float64 (identical in exact arithmetic: the
    /// in-bounds region is a rectangle), for the larger images of the IIR tests.
    pub(crate) fn convolve_separable(img: &[f64], w: usize, h: usize, wts: &[f64], border: Border) -> Vec<f64> {
        let pass = |data: &[f64], n: usize, lines: usize, at: &dyn Fn(usize, usize) -> usize| -> Vec<f64> {
            let r = wts.len() / 2;
            let mut out = vec![0.0; data.len()];
            for line in 0..lines {
                for i in 0..n {
                    let (mut s, mut norm) = (0.0, 0.0);
                    for (k, &wk) in wts.iter().enumerate() {
                        match border.source_index(i as isize + k as isize - r as isize, n) {
                            Some(j) => {
                                s += wk * data[at(line, j)];
                                norm += wk;
                            }
                            None => s += wk * border.outside_value() as f64,
                        }
                    }
                    out[at(line, i)] = if border == Border::Normalize { s / norm } else { s };
                }
            }
            out
        };
        let v = pass(img, h, w, &|x, y| y * w + x);
        pass(&v, w, h, &|y, x| y * w + x)
    }

    /// Deterministic pseudo-random values in `0..1` (xorshift).
    pub(crate) fn noise(n: usize, seed: u64) -> Vec<f64> {
        let mut r = crate::testing::Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        (0..n).map(|_| r.unit()).collect()
    }

    fn borders() -> impl Strategy<Value = Border> {
        prop_oneof![
            Just(Border::Reflect101),
            Just(Border::Replicate),
            Just(Border::Normalize),
            (0u8..=255).prop_map(|v| Border::Constant(v as f32)),
        ]
    }

    /// A `w x h` view into a buffer with `pad` extra elements per row.
    fn strided<T: crate::image::Pixel>(vals: &[T], w: usize, h: usize, pad: usize) -> Vec<T> {
        let stride = w + pad;
        let mut buf = vec![T::default(); stride * h];
        for y in 0..h {
            buf[y * stride..y * stride + w].copy_from_slice(&vals[y * w..(y + 1) * w]);
        }
        buf
    }

    fn params(sigma: f64, radius: Option<usize>, method: GaussianMethod, border: Border) -> GaussianParams {
        GaussianParams { sigma, radius, method, border }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// f32 FIR vs the direct float64 2-D convolution: within 1e-5 of the value range.
        #[test]
        fn fir_f32_matches_direct_convolution(
            w in 1usize..24, h in 1usize..24, pad in 0usize..4,
            sigma in 0.2f64..4.0, radius in prop::option::of(1usize..14),
            border in borders(), seed in any::<u64>(), par in any::<bool>(),
        ) {
            let vals: Vec<f32> = noise(w * h, seed).iter().map(|v| (v * 255.0) as f32).collect();
            let buf = strided(&vals, w, h, pad);
            let src = ImageView::new(&buf, w, h, w + pad).unwrap();
            let mut out = Image::<f32>::new(w, h).unwrap();
            let p = params(sigma, radius, GaussianMethod::Fir, border);
            let par = if par { Parallelism::AllThreads } else { Parallelism::Sequential };
            gaussian_blur(src, out.view_mut(), &p, par).unwrap();
            let plane: Vec<f64> = vals.iter().map(|&v| v as f64).collect();
            let want = convolve_2d(&plane, w, h, &weights_f64(sigma, p.fir_radius()), border);
            for (i, (&g, &e)) in out.as_slice().iter().zip(&want).enumerate() {
                prop_assert!((g as f64 - e).abs() <= 1e-5 * 255.0, "pixel {} got {} want {}", i, g, e);
            }
        }

        /// Integer and RGBA FIR: the float64 result rounded once (at most 0.5 away, plus
        /// the f32 error), every channel separately.
        #[test]
        fn fir_integer_and_rgba_round_once(
            w in 1usize..16, h in 1usize..16, pad in 0usize..3,
            sigma in 0.3f64..3.0, border in borders(), seed in any::<u64>(),
        ) {
            let r = (libm::ceil(3.0 * sigma) as usize).max(1);
            let wts = weights_f64(sigma, r);
            let p = params(sigma, None, GaussianMethod::Fir, border);
            let vals = noise(w * h * 4, seed);
            // u8
            let u: Vec<u8> = vals[..w * h].iter().map(|v| (v * 255.0) as u8).collect();
            let buf = strided(&u, w, h, pad);
            let mut out = Image::<u8>::new(w, h).unwrap();
            gaussian_blur(ImageView::new(&buf, w, h, w + pad).unwrap(), out.view_mut(), &p, Parallelism::Sequential).unwrap();
            let want = convolve_2d(&u.iter().map(|&v| v as f64).collect::<Vec<_>>(), w, h, &wts, border);
            for (&g, &e) in out.as_slice().iter().zip(&want) {
                prop_assert!((g as f64 - e).abs() <= 0.5 + 1e-3, "u8 got {} want {}", g, e);
            }
            // u16 (border constants are whole numbers, valid for u16 too)
            let u: Vec<u16> = vals[..w * h].iter().map(|v| (v * 65535.0) as u16).collect();
            let mut out = Image::<u16>::new(w, h).unwrap();
            gaussian_blur(ImageView::from_slice(&u, w, h).unwrap(), out.view_mut(), &p, Parallelism::AllThreads).unwrap();
            let want = convolve_2d(&u.iter().map(|&v| v as f64).collect::<Vec<_>>(), w, h, &wts, border);
            for (&g, &e) in out.as_slice().iter().zip(&want) {
                prop_assert!((g as f64 - e).abs() <= 0.5 + 0.5, "u16 got {} want {}", g, e);
            }
            // RGBA
            let px: Vec<Rgba8> = (0..w * h)
                .map(|i| Rgba8::from_array(core::array::from_fn(|ch| (vals[i * 4 + ch] * 255.0) as u8)))
                .collect();
            let buf = strided(&px, w, h, pad);
            let mut out = Image::<Rgba8>::new(w, h).unwrap();
            gaussian_blur(ImageView::new(&buf, w, h, w + pad).unwrap(), out.view_mut(), &p, Parallelism::AllThreads).unwrap();
            for ch in 0..4 {
                let plane: Vec<f64> = px.iter().map(|p| p.to_array()[ch] as f64).collect();
                let want = convolve_2d(&plane, w, h, &wts, border);
                for (g, &e) in out.as_slice().iter().zip(&want) {
                    let g = g.to_array()[ch];
                    prop_assert!((g as f64 - e).abs() <= 0.5 + 1e-3, "rgba ch {} got {} want {}", ch, g, e);
                }
            }
        }

        /// Into f32 from every grey type, FIR and IIR: the image converted to f32 and
        /// blurred, to the bit (the filter reads each type as exact f32).
        #[test]
        fn into_f32_is_the_converted_image_blurred(
            w in 1usize..40, h in 1usize..40, pad in 0usize..3,
            sigma in 0.6f64..12.0, iir in any::<bool>(), border in borders(), seed in any::<u64>(), par in any::<bool>(),
        ) {
            let method = if iir { GaussianMethod::Iir } else { GaussianMethod::Fir };
            let p = params(sigma, None, method, border);
            let par = if par { Parallelism::AllThreads } else { Parallelism::Sequential };
            let vals = noise(w * h, seed);
            fn check<T: BoxPixel<Lane: GaussLane> + Into<f64>>(vals: &[T], (w, h, pad): (usize, usize, usize), p: &GaussianParams, par: Parallelism) -> core::result::Result<(), TestCaseError> {
                let buf = strided(vals, w, h, pad);
                let src = ImageView::new(&buf, w, h, w + pad).unwrap();
                let mut got = Image::<f32>::new(w, h).unwrap();
                gaussian_blur_f32(src, got.view_mut(), p, par).unwrap();
                let converted = Image::<f32>::from_fn(w, h, |x, y| Into::<f64>::into(src.row(y)[x]) as f32).unwrap();
                let mut want = Image::<f32>::new(w, h).unwrap();
                gaussian_blur(converted.view(), want.view_mut(), p, par).unwrap();
                for (i, (g, e)) in got.as_slice().iter().zip(want.as_slice()).enumerate() {
                    prop_assert_eq!(g.to_bits(), e.to_bits(), "pixel {}: {} against {}", i, g, e);
                }
                Ok(())
            }
            check(&vals.iter().map(|v| (v * 255.0) as u8).collect::<Vec<_>>(), (w, h, pad), &p, par)?;
            check(&vals.iter().map(|v| (v * 65535.0) as u16).collect::<Vec<_>>(), (w, h, pad), &p, par)?;
            check(&vals.iter().map(|v| (v * 255.0) as f32).collect::<Vec<_>>(), (w, h, pad), &p, par)?;
        }
    }

    #[test]
    fn into_f32_checks_channels_sizes_and_parameters() {
        let rgba = Image::<Rgba8>::new(6, 5).unwrap();
        let mut out = Image::<f32>::new(6, 5).unwrap();
        let e = gaussian_blur_f32(rgba.view(), out.view_mut(), &GaussianParams::default(), Parallelism::Sequential);
        assert!(matches!(e, Err(Error::UnsupportedType { .. })), "{e:?}");
        let grey = Image::<u8>::new(6, 5).unwrap();
        let mut small = Image::<f32>::new(6, 4).unwrap();
        let e = gaussian_blur_f32(grey.view(), small.view_mut(), &GaussianParams::default(), Parallelism::Sequential);
        assert!(matches!(e, Err(Error::SizeMismatch { .. })), "{e:?}");
        // The border constant is checked against the source's type.
        let p = params(1.0, None, GaussianMethod::Fir, Border::Constant(300.0));
        assert!(gaussian_blur_f32(grey.view(), out.view_mut(), &p, Parallelism::Sequential).is_err());
        assert!(gaussian_blur_f32(grey.view(), out.view_mut(), &params(f64::NAN, None, GaussianMethod::Fir, Border::Reflect101), Parallelism::Sequential).is_err());
    }

    #[test]
    fn weights_are_normalized_and_symmetric() {
        for (sigma, r) in [(0.5, 2), (1.0, 3), (2.7, 9), (10.0, 30)] {
            let w = gaussian_weights(sigma, r);
            assert_eq!(w.len(), 2 * r + 1);
            let s: f64 = w.iter().map(|&v| v as f64).sum();
            assert!((s - 1.0).abs() < 1e-6, "sum {s}");
            for k in 0..r {
                assert_eq!(w[k], w[2 * r - k]);
                assert!(w[k] < w[k + 1]);
            }
        }
    }

    #[test]
    fn long_rows_stay_within_the_bound() {
        // A 300 x 3 image crosses several 64-lane chunks and their tails.
        let (w, h) = (300, 3);
        let vals: Vec<f32> = noise(w * h, 7).iter().map(|v| (v * 255.0) as f32).collect();
        for border in [Border::Reflect101, Border::Normalize, Border::Constant(9.0)] {
            let p = params(2.0, None, GaussianMethod::Fir, border);
            let mut out = Image::<f32>::new(w, h).unwrap();
            gaussian_blur(ImageView::from_slice(&vals, w, h).unwrap(), out.view_mut(), &p, Parallelism::AllThreads).unwrap();
            let plane: Vec<f64> = vals.iter().map(|&v| v as f64).collect();
            let want = convolve_2d(&plane, w, h, &weights_f64(2.0, 6), border);
            for (&g, &e) in out.as_slice().iter().zip(&want) {
                assert!((g as f64 - e).abs() <= 1e-5 * 255.0);
            }
        }
    }

    #[test]
    fn tiny_sigma_is_the_identity() {
        // sigma^2 underflows here; the weights must still be (0, 1, 0).
        assert_eq!(gaussian_weights(1e-200, 1), [0.0, 1.0, 0.0]);
        let img = Image::<f32>::from_fn(9, 4, |x, y| (x * 3 + y) as f32).unwrap();
        let mut out = Image::<f32>::new(9, 4).unwrap();
        let p = params(1e-200, None, GaussianMethod::Auto, Border::Reflect101);
        gaussian_blur(img.view(), out.view_mut(), &p, Parallelism::Sequential).unwrap();
        assert_eq!(out, img);
    }

    #[test]
    fn long_kernels_stay_within_the_bound() {
        // 361 and 1201 taps: the f32 sums are longest here.
        let (w, h) = (50, 37);
        let vals: Vec<f32> = noise(w * h, 8).iter().map(|v| (v * 255.0) as f32).collect();
        for (sigma, r, border) in [(60.0, 180, Border::Reflect101), (200.0, 600, Border::Normalize)] {
            let p = params(sigma, Some(r), GaussianMethod::Fir, border);
            let mut out = Image::<f32>::new(w, h).unwrap();
            gaussian_blur(ImageView::from_slice(&vals, w, h).unwrap(), out.view_mut(), &p, Parallelism::AllThreads).unwrap();
            let plane: Vec<f64> = vals.iter().map(|&v| v as f64).collect();
            let want = convolve_separable(&plane, w, h, &weights_f64(sigma, r), border);
            for (&g, &e) in out.as_slice().iter().zip(&want) {
                assert!((g as f64 - e).abs() <= 1e-5 * 255.0, "sigma {sigma}: {g} vs {e}");
            }
        }
    }

    #[test]
    fn constant_image_is_unchanged() {
        let img = Image::<u8>::filled(37, 11, 200).unwrap();
        for method in [GaussianMethod::Fir, GaussianMethod::Iir] {
            for border in [Border::Reflect101, Border::Replicate, Border::Normalize, Border::Constant(200.0)] {
                let mut out = Image::<u8>::new(37, 11).unwrap();
                let p = params(4.0, None, method, border);
                gaussian_blur(img.view(), out.view_mut(), &p, Parallelism::AllThreads).unwrap();
                assert!(out.as_slice().iter().all(|&v| v == 200), "{method:?} {border:?}");
            }
        }
    }

    #[test]
    fn auto_picks_by_sigma_and_radius() {
        let p = |sigma, radius, c| params(sigma, radius, GaussianMethod::Auto, Border::Reflect101).resolved_method(c);
        assert_eq!(p(1.0, None, 1), GaussianMethod::Fir);
        assert_eq!(p(IIR_FROM_SIGMA, None, 1), GaussianMethod::Iir);
        assert_eq!(p(IIR_FROM_SIGMA, None, 4), GaussianMethod::Fir);
        assert_eq!(p(IIR_FROM_SIGMA_RGBA, None, 4), GaussianMethod::Iir);
        assert_eq!(p(30.0, Some(30), 1), GaussianMethod::Fir);
        assert_eq!(params(1.0, None, GaussianMethod::Iir, Border::Normalize).resolved_method(1), GaussianMethod::Iir);
    }

    #[test]
    fn backend_runs_the_same_blur_and_checks_types() {
        use crate::{Backend, CpuBackend};
        use crate::image::{AnyView, AnyViewMut};
        let img = Image::<u16>::from_fn(31, 17, |x, y| (x * 1000 + y * 77) as u16).unwrap();
        let p = params(11.0, None, GaussianMethod::Auto, Border::Replicate);
        let mut want = Image::<u16>::new(31, 17).unwrap();
        gaussian_blur(img.view(), want.view_mut(), &p, Parallelism::Sequential).unwrap();
        let mut got = Image::<u16>::new(31, 17).unwrap();
        let be = CpuBackend::new(Parallelism::AllThreads);
        be.gaussian_blur(AnyView::U16(img.view()), AnyViewMut::U16(got.view_mut()), &p).unwrap();
        assert_eq!(got, want);
        let mut wrong = Image::<u8>::new(31, 17).unwrap();
        let e = be.gaussian_blur(AnyView::U16(img.view()), AnyViewMut::U8(wrong.view_mut()), &p);
        assert!(matches!(e, Err(Error::UnsupportedType { .. })));
    }

    fn run(p: GaussianParams) -> Result<()> {
        let img = Image::<f32>::new(8, 8).unwrap();
        let mut out = Image::<f32>::new(8, 8).unwrap();
        gaussian_blur(img.view(), out.view_mut(), &p, Parallelism::Sequential)
    }

    #[test]
    fn bad_sigma_is_an_error() {
        for s in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -1.0, MAX_SIGMA * 1.01] {
            for method in [GaussianMethod::Auto, GaussianMethod::Fir, GaussianMethod::Iir] {
                let e = run(params(s, None, method, Border::Reflect101)).unwrap_err();
                assert!(matches!(e, Error::InvalidFloat { name: "sigma", .. }), "{s}: {e:?}");
            }
        }
        // The recursive filter's fit starts at sigma = 0.5; the FIR takes any sigma.
        assert!(matches!(
            run(params(0.3, None, GaussianMethod::Iir, Border::Reflect101)),
            Err(Error::InvalidFloat { name: "sigma", .. })
        ));
        assert!(run(params(0.3, None, GaussianMethod::Fir, Border::Reflect101)).is_ok());
        assert!(run(params(MAX_SIGMA, None, GaussianMethod::Iir, Border::Reflect101)).is_ok());
    }

    #[test]
    fn bad_radius_is_an_error() {
        for r in [0, MAX_RADIUS + 1, usize::MAX] {
            let e = run(params(1.0, Some(r), GaussianMethod::Fir, Border::Reflect101)).unwrap_err();
            assert!(matches!(e, Error::OutOfRange { name: "radius", .. }), "{r}: {e:?}");
        }
        assert!(run(params(1.0, Some(MAX_RADIUS), GaussianMethod::Fir, Border::Reflect101)).is_ok());
    }

    #[test]
    fn mismatched_sizes_are_an_error() {
        let img = Image::<u8>::new(8, 6).unwrap();
        for (w, h) in [(8, 5), (7, 6), (6, 8)] {
            let mut out = Image::<u8>::new(w, h).unwrap();
            let e = gaussian_blur(img.view(), out.view_mut(), &GaussianParams::default(), Parallelism::Sequential);
            assert!(matches!(e, Err(Error::SizeMismatch { .. })));
        }
    }

    #[test]
    fn bad_border_constant_is_an_error() {
        let img = Image::<u8>::new(4, 4).unwrap();
        let mut out = Image::<u8>::new(4, 4).unwrap();
        for v in [2.5f32, -1.0, 256.0, f32::NAN] {
            let p = params(1.0, None, GaussianMethod::Fir, Border::Constant(v));
            assert!(gaussian_blur(img.view(), out.view_mut(), &p, Parallelism::Sequential).is_err(), "{v}");
        }
        assert!(run(params(1.0, None, GaussianMethod::Iir, Border::Constant(f32::INFINITY))).is_err());
    }
}
