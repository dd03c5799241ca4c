//! Specular-highlight (glare) detection and correction, the application of the
//! sliding-window paper: small highlights on photographs of paintings are found as spots
//! that are much brighter than their neighbourhood, near saturation and weakly coloured,
//! and are then filled from their surroundings.
//!
//! Detection ([`detect`]), on the luminance `Y` (Rec. 601 luma for RGBA) in units of the
//! full scale `F` (255, 65535, or the largest value of an f32 image):
//! 1. local mean `mu_r` and standard deviation `sigma_r` over `(2r + 1)^2` boxes for each
//!    radius `r` in `radii` (exact O(1) [`local_mean_variance_pairs`](crate::variance::local_mean_variance_pairs));
//! 2. a pixel is a *seed* when `Y >= brightness`, its saturation `(max - min) / max` of
//!    R, G, B is at most `max_saturation` (0 for gray images), and for at least one radius
//!    `Y - mu_r >= max(k_sigma * sigma_r, min_contrast)`;
//! 3. 8-connected seeds form a spot's core; the core grows through its rim, the connected
//!    pixels whose excess `Y - mu_R` over the mean at the largest radius `R` is at least half
//!    the core's peak excess (the soft fringe where the highlight still makes up half of
//!    its peak), within the core's bounding box widened by the core's size;
//! 4. a spot is kept when its area lies in `min_area..=max_area` (large bright areas are not
//!    glare), its seed core makes up at least a tenth of it (a highlight's near-saturated
//!    core is a good part of the spot; a few bright specks on a large pale object are not
//!    glare), and the ratio of its principal axes is at most `max_elongation` (highlights
//!    are compact; bright lines and edges are not); kept spots are dilated by `grow`.
//!
//! `GlareMode::Adaptive` replaces `brightness` and `min_contrast` by values from the image:
//! `brightness = clamp(m + 0.75 (F - m), 0.88 F, 0.95 F)` with `m` the median of `Y` (robust
//! to the highlights themselves, which can cover more than 1 % of a small image), and
//! `min_contrast = max(4 * 1.4826 * median |Y - mu_r0|, 0.04 F)` (a robust estimate of the
//! texture / noise spread at the smallest radius `r0`).
//!
//! Correction ([`fill`]): each spot (the mask dilated by `fill_grow`, so the faint tail of
//! a highlight is not taken as the boundary) is filled from the pixels around it, first by
//! normalized convolution (a 1/d^2-weighted mean of the known pixels of its bounding box
//! plus a margin), then by `fill_iterations` Gauss-Seidel sweeps of the Laplace equation
//! restricted to the mask (the known pixels are the boundary condition), so the fill meets
//! its surroundings without a seam. RGBA fills R, G, B (alpha is kept). Pixels outside the
//! mask are copied unchanged.

pub(crate) mod detect;
pub(crate) mod fill;

pub use detect::{detect, finish_spots, quantile};
pub use fill::{fill, spots, MARGIN, WEIGHTED_INIT_LIMIT};

use crate::border::Border;
use crate::error::{require_positive, Error, Result};
use crate::image::{check_same_size, Image, ImageView, ImageViewMut, Pixel, Rgba8};
use crate::parallel::Parallelism;
use alloc::format;
use alloc::vec;
use alloc::vec::Vec;

/// How the brightness and contrast thresholds are chosen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GlareMode {
    /// `brightness` and `min_contrast` as given.
    Manual,
    /// Derived from the image's own statistics (see the module docs).
    #[default]
    Adaptive,
}

/// Parameters of [`glare`], [`detect`] and [`fill`].
#[derive(Clone, Debug, PartialEq)]
pub struct GlareParams {
    pub mode: GlareMode,
    /// Box radii of the local statistics. Default 5, 15, 45.
    pub radii: Vec<usize>,
    /// A seed is at least `k_sigma` local standard deviations above the local mean. Default 3.
    pub k_sigma: f32,
    /// Least brightness of a seed, as a fraction of the full scale (Manual). Default 0.88.
    pub brightness: f32,
    /// Least excess over the local mean, as a fraction of the full scale (Manual). Default 0.08.
    pub min_contrast: f32,
    /// Largest saturation `(max - min) / max` of a seed's R, G, B. Default 0.35.
    pub max_saturation: f32,
    /// Smallest and largest spot area in pixels (before `grow`). Default 2 and 2000.
    pub min_area: usize,
    pub max_area: usize,
    /// Largest ratio of a spot's principal axes (1 = round): highlights are compact, bright
    /// lines and edges are not. Default 3.
    pub max_elongation: f32,
    /// Dilation of the kept spots, in pixels (the faint rim). Default 1.
    pub grow: usize,
    /// The fill also replaces the pixels within this distance of the mask (the faint tail of
    /// a highlight would otherwise bias the boundary of the fill). Default 2.
    pub fill_grow: usize,
    /// Laplace sweeps of the fill. Default 100.
    pub fill_iterations: usize,
    /// Border rule of the local statistics. Default Reflect101.
    pub border: Border,
}

impl Default for GlareParams {
    fn default() -> Self {
        GlareParams {
            mode: GlareMode::Adaptive,
            radii: vec![5, 15, 45],
            k_sigma: 3.0,
            brightness: 0.88,
            min_contrast: 0.08,
            max_saturation: 0.35,
            min_area: 2,
            max_area: 2000,
            max_elongation: 3.0,
            grow: 1,
            fill_grow: 2,
            fill_iterations: 100,
            border: Border::Reflect101,
        }
    }
}

/// Largest `grow`: a dilation wider than this is not a rim any more.
pub const MAX_GROW: usize = 64;
/// Largest number of fill sweeps.
pub const MAX_FILL_ITERATIONS: usize = 100_000;

impl GlareParams {
    pub fn validate(&self) -> Result<()> {
        if self.radii.is_empty() {
            return Err(Error::InvalidParameter { name: "radii", reason: "at least one window radius is needed".into() });
        }
        for &r in &self.radii {
            crate::variance::VarianceKernel::Box { radius: r }.validate()?;
        }
        require_positive("k_sigma", self.k_sigma as f64)?;
        if !(self.max_elongation >= 1.0 && self.max_elongation.is_finite()) {
            return Err(Error::InvalidFloat {
                name: "max_elongation",
                value: self.max_elongation as f64,
                expected: "a finite ratio >= 1",
            });
        }
        for (name, v) in [("brightness", self.brightness), ("min_contrast", self.min_contrast)] {
            if !(v > 0.0 && v <= 1.0) {
                return Err(Error::InvalidFloat { name, value: v as f64, expected: "a fraction of the full scale in (0, 1]" });
            }
        }
        if !(0.0..=1.0).contains(&self.max_saturation) {
            return Err(Error::InvalidFloat {
                name: "max_saturation",
                value: self.max_saturation as f64,
                expected: "a number in [0, 1]",
            });
        }
        if self.min_area == 0 || self.max_area < self.min_area {
            return Err(Error::InvalidParameter {
                name: "area limits",
                reason: format!("need 1 <= min_area <= max_area, got {}..={}", self.min_area, self.max_area),
            });
        }
        crate::error::require_range("grow", self.grow, 0, MAX_GROW as i64)?;
        crate::error::require_range("fill_grow", self.fill_grow, 0, MAX_GROW as i64)?;
        crate::error::require_range("fill_iterations", self.fill_iterations, 0, MAX_FILL_ITERATIONS as i64)?;
        if self.border == Border::Normalize {
            return Err(Error::InvalidParameter { name: "border", reason: "Normalize is not supported".into() });
        }
        self.border.validate(Some(255.0))
    }
}

/// What [`detect`] found and the thresholds it used.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GlareReport {
    /// Spots kept.
    pub spots: usize,
    /// Pixels in the mask (after `grow`).
    pub pixels: usize,
    /// Brightness and contrast thresholds used, as fractions of the full scale.
    pub brightness: f32,
    pub min_contrast: f32,
    /// The full scale `F`.
    pub full_scale: f32,
}

/// The pixel types of the glare operations: u8, u16, f32 gray and RGBA.
pub trait GlarePixel: Pixel + crate::sealed::Sealed {
    /// Colour channels to fill (1 or 3).
    #[doc(hidden)]
    const CHANNELS: usize;
    /// Channel `c` as f32.
    #[doc(hidden)]
    fn channel(self, c: usize) -> f32;
    /// `self` with channel `c` set to `v` (rounded and clamped for integer types).
    #[doc(hidden)]
    fn with_channel(self, c: usize, v: f32) -> Self;
    /// Saturation `(max - min) / max` of R, G, B (0 for gray and black).
    #[doc(hidden)]
    fn saturation(self) -> f32;
    /// The luminance quantized for the exact statistics: u8 (scale 255) or u16 (scale
    /// 65535), with the full scale in the input's units.
    #[doc(hidden)]
    fn luminance(src: ImageView<'_, Self>) -> (Luma, f32);
}

/// Quantized luminance on which the statistics run.
#[doc(hidden)]
pub enum Luma {
    U8(Image<u8>),
    U16(Image<u16>),
}

impl GlarePixel for u8 {
    const CHANNELS: usize = 1;
    fn channel(self, _: usize) -> f32 {
        self as f32
    }
    fn with_channel(self, _: usize, v: f32) -> Self {
        libm::roundf(v.clamp(0.0, 255.0)) as u8
    }
    fn saturation(self) -> f32 {
        0.0
    }
    fn luminance(src: ImageView<'_, u8>) -> (Luma, f32) {
        (Luma::U8(src.to_image()), 255.0)
    }
}

impl GlarePixel for u16 {
    const CHANNELS: usize = 1;
    fn channel(self, _: usize) -> f32 {
        self as f32
    }
    fn with_channel(self, _: usize, v: f32) -> Self {
        libm::roundf(v.clamp(0.0, 65535.0)) as u16
    }
    fn saturation(self) -> f32 {
        0.0
    }
    fn luminance(src: ImageView<'_, u16>) -> (Luma, f32) {
        (Luma::U16(src.to_image()), 65535.0)
    }
}

impl GlarePixel for f32 {
    const CHANNELS: usize = 1;
    fn channel(self, _: usize) -> f32 {
        self
    }
    fn with_channel(self, _: usize, v: f32) -> Self {
        v
    }
    fn saturation(self) -> f32 {
        0.0
    }
    /// Full scale: the largest finite value (1 if none is positive); NaN counts as 0.
    fn luminance(src: ImageView<'_, f32>) -> (Luma, f32) {
        let top = src.rows().flat_map(|r| r.iter()).filter(|v| v.is_finite()).fold(0.0f32, |a, &b| a.max(b));
        let fs = if top > 0.0 { top } else { 1.0 };
        let q = 65535.0 / fs;
        let img = src.convert::<f32>().map(|v| if v.is_finite() { libm::roundf((v * q).clamp(0.0, 65535.0)) as u16 } else { 0 });
        (Luma::U16(img), fs)
    }
}

impl GlarePixel for Rgba8 {
    const CHANNELS: usize = 3;
    fn channel(self, c: usize) -> f32 {
        self.to_array()[c] as f32
    }
    fn with_channel(self, c: usize, v: f32) -> Self {
        let mut a = self.to_array();
        a[c] = libm::roundf(v.clamp(0.0, 255.0)) as u8;
        Rgba8::from_array(a)
    }
    fn saturation(self) -> f32 {
        let hi = self.r.max(self.g).max(self.b);
        let lo = self.r.min(self.g).min(self.b);
        if hi == 0 {
            0.0
        } else {
            (hi - lo) as f32 / hi as f32
        }
    }
    fn luminance(src: ImageView<'_, Rgba8>) -> (Luma, f32) {
        (Luma::U8(src.convert::<u8>()), 255.0)
    }
}

/// Detection and correction in one call: `mask` gets 255 on glare and 0 elsewhere,
/// `corrected` a copy of `src` with the masked pixels filled. All three the same size.
pub fn glare<P: GlarePixel>(
    src: ImageView<'_, P>,
    mut mask: ImageViewMut<'_, u8>,
    corrected: ImageViewMut<'_, P>,
    p: &GlareParams,
    par: Parallelism,
) -> Result<GlareReport> {
    check_same_size(src.size(), corrected.size())?;
    let report = detect(src, mask.reborrow(), p, par)?;
    fill(src, mask.as_view(), corrected, p, par)?;
    Ok(report)
}

#[cfg(test)]
pub(crate) mod tests;
