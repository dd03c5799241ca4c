//! Local variance: for every pixel, the weighted variance of the pixels in a kernel around
//! it, `var(x, y) = sum w (p - mu_w)^2 / sum w` with `mu_w = sum w p / sum w`, as many
//! outputs as inputs. Pixels outside the image come from the border rule (Reflect101 by
//! default) applied to the ORIGINAL image for the whole kernel.
//!
//! Two kernels ([`VarianceKernel`]):
//! - `Tent { radius: R }`, `R = 2^k - 1`: the separable, centre-weighted ("pyramidal")
//!   kernel `w(i, j) = (R + 1 - |i|) (R + 1 - |j|)` of the variance paper. In one dimension it
//!   is the product over `s = 0..k-1` of `(z^-d + 2 + z^d)`, `d = 2^s`, which is also a box of
//!   width `2^k` convolved with itself.
//! - `Box { radius: r }`: uniform weights over the `(2r + 1)^2` square, any `r`.
//!
//! Six methods ([`VarianceMethod`]) compute the same quantity: the paper's five
//! (`Usual`, `Koenig`, `Welford`, `Pairwise`, `Threewise`) and an exact O(1) one
//! (`Recursive`). All but `Recursive` compute in f32 arithmetic as the paper's GPU code
//! did, on data shifted by the image's mean ([`global_shift`]); `Recursive` is exact on
//! integer images (see [`recursive`]).
//!
//! Accuracy of the f32 methods, with `kappa = |m - K| / sigma` for a local mean `m`, spread
//! `sigma` and the global shift `K`: Usual (corrected two-pass) stays near `n eps` whatever
//! `kappa`; Welford, Pairwise and Threewise carry an f32 mean, so their relative error grows
//! like `kappa eps` (about 1e-3 at `kappa = 1e4`); Koenig's grows like `kappa^2 eps`.
//!
//! NaN: a NaN input pixel makes NaN exactly the output pixels whose kernel contains it
//! (every tent and box weight inside the kernel is > 0); other outputs are unaffected.
//! `Recursive` treats infinities like NaN; the other methods give NaN or an infinity there.
//! Results are never negative: rounding residue below zero is clamped to 0.

mod box_blocks;
pub mod koenig;
pub mod pairwise;
pub mod recursive;
mod kernel_sums;
pub mod threewise;
pub mod usual;
pub mod welford;

use crate::border::Border;
use crate::error::{Error, Result};
use crate::image::{check_same_size, ConvertPixel, Image, ImageView, ImageViewMut, Pixel, Rgba8};
use crate::parallel::{for_each_band, map_indices, try_for_each_band, Parallelism};
use alloc::format;
use alloc::vec;
use alloc::vec::Vec;

/// The six ways to compute the same local variance (Figure 7 of the variance paper, plus
/// `Recursive`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum VarianceMethod {
    /// Two passes per pixel: the weighted mean, then the weighted squared deviations
    /// (with the correction term of Chan, Golub and LeVeque's "corrected two-pass"
    /// algorithm). O(N^2) per pixel for an N x N kernel.
    Usual,
    /// One pass of the weighted sums of x and x^2: `E[x^2] - E[x]^2` (Koenig / Steiner).
    /// O(N^2); numerically fragile in f32 when the mean is large against the spread.
    Koenig,
    /// Welford's online algorithm, weighted form (West 1979): mean and M2 updated per
    /// sample. O(N^2).
    Welford,
    /// Chan, Golub and LeVeque's two-way merge of (mean, M2) statistics, with kernel
    /// separation and the dilated decomposition `(z^-d + 2 + z^d) = z^-d (1 + z^d)^2`:
    /// 2 log2(R + 1) merges per pixel per pass. Box kernel: blocks of `2^j` samples joined
    /// by the binary digits of the width (`box_blocks.rs`), O(log N) too.
    Pairwise,
    /// The paper's three-way merge with weights 1, 2, 1 at dilations d = 1, 2, ..., 2^(k-1):
    /// log2(R + 1) merges (2 log2(R + 1) + 1 reads) per pixel per pass. Box kernel: blocks of
    /// `3^j` samples by 1-1-1 three-way merges, joined by the ternary digits of the width.
    Threewise,
    /// Cascaded O(1) running sums of x and x^2 (the tent is a box of width R + 1 convolved
    /// with itself): exact on u8 / u16 input, shifted f64 sums on f32 input.
    #[default]
    Recursive,
}

impl VarianceMethod {
    /// All six, in the paper's order.
    pub const ALL: [VarianceMethod; 6] = [
        VarianceMethod::Usual,
        VarianceMethod::Koenig,
        VarianceMethod::Welford,
        VarianceMethod::Pairwise,
        VarianceMethod::Threewise,
        VarianceMethod::Recursive,
    ];

    /// Lower-case name ("usual", "koenig", ...), as the CLI spells it.
    pub fn name(self) -> &'static str {
        match self {
            VarianceMethod::Usual => "usual",
            VarianceMethod::Koenig => "koenig",
            VarianceMethod::Welford => "welford",
            VarianceMethod::Pairwise => "pairwise",
            VarianceMethod::Threewise => "threewise",
            VarianceMethod::Recursive => "recursive",
        }
    }

    /// The method of a name (case-insensitive), or an error listing the six names.
    pub fn from_name(s: &str) -> Result<Self> {
        Self::ALL.into_iter().find(|m| m.name().eq_ignore_ascii_case(s)).ok_or_else(|| Error::InvalidParameter {
            name: "variance method",
            reason: format!("{s:?} is not one of usual, koenig, welford, pairwise, threewise, recursive"),
        })
    }
}

impl core::fmt::Display for VarianceMethod {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// Largest tent radius (k = 8): keeps every integer sum of the exact path within u64
/// (65535^2 * 256^4 < 2^64) and the kernel at most 511 pixels wide.
pub const MAX_TENT_RADIUS: usize = 255;
/// Largest box radius: the window side 2r + 1 stays within the sliding-window engine's
/// [`MAX_WINDOW`](crate::filter::MAX_WINDOW).
pub const MAX_BOX_RADIUS: usize = (crate::filter::MAX_WINDOW - 1) / 2;

/// The weights of the variance kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VarianceKernel {
    /// `w(i, j) = (R + 1 - |i|)(R + 1 - |j|)` for `|i|, |j| <= R`, with `R = 2^k - 1`
    /// (1, 3, 7, ..., 255).
    Tent { radius: usize },
    /// Uniform weights over `|i|, |j| <= r`, any `r` in `0..=2047`.
    Box { radius: usize },
}

impl Default for VarianceKernel {
    fn default() -> Self {
        VarianceKernel::Tent { radius: 7 }
    }
}

impl VarianceKernel {
    pub fn radius(self) -> usize {
        match self {
            VarianceKernel::Tent { radius } | VarianceKernel::Box { radius } => radius,
        }
    }

    /// For a tent, `k` with `R = 2^k - 1` (the number of dilated steps); `None` for a box.
    pub fn tent_steps(self) -> Option<u32> {
        match self {
            VarianceKernel::Tent { radius } => Some((radius + 1).trailing_zeros()),
            VarianceKernel::Box { .. } => None,
        }
    }

    /// Checks the radius, with an error that names the allowed values.
    pub fn validate(self) -> Result<()> {
        match self {
            VarianceKernel::Tent { radius } => {
                if radius == 0 || radius > MAX_TENT_RADIUS || !(radius + 1).is_power_of_two() {
                    return Err(Error::InvalidParameter {
                        name: "tent radius",
                        reason: format!("{radius}: a tent radius must be 2^k - 1: 1, 3, 7, 15, 31, 63, 127, 255"),
                    });
                }
                Ok(())
            }
            VarianceKernel::Box { radius } => {
                crate::error::require_range("box radius", radius, 0, MAX_BOX_RADIUS as i64)
            }
        }
    }

    /// The one-dimensional weights `w(-R) ..= w(R)` (the 2-D kernel is their outer product).
    pub fn weights_1d(self) -> Vec<u32> {
        match self {
            VarianceKernel::Tent { radius } => {
                (0..2 * radius + 1).map(|i| (radius + 1 - i.abs_diff(radius)) as u32).collect()
            }
            VarianceKernel::Box { radius } => vec![1; 2 * radius + 1],
        }
    }
}

/// Parameters of [`local_variance`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct VarianceParams {
    pub method: VarianceMethod,
    pub kernel: VarianceKernel,
    /// Reflect101 (default), Replicate or Constant; `Normalize` is not supported (it would
    /// make the weights depend on the position).
    pub border: Border,
}

impl VarianceParams {
    pub fn new(method: VarianceMethod, kernel: VarianceKernel) -> Self {
        VarianceParams { method, kernel, border: Border::Reflect101 }
    }

    /// Checks kernel, border and method/kernel combination for pixels of type `P`.
    pub fn validate<P: VarianceSample>(&self) -> Result<()> {
        self.kernel.validate()?;
        if self.border == Border::Normalize {
            return Err(Error::InvalidParameter {
                name: "border",
                reason: "local variance supports Reflect101, Replicate and Constant, not Normalize".into(),
            });
        }
        self.border.validate(P::INTEGER_MAX)
    }
}

/// A pixel as one value the variance is taken of: u8, u16, f32, and RGBA as its
/// unrounded Rec. 601 luma (read on the fly, so no converted image is made).
pub trait VarianceSample: Pixel + crate::sealed::Sealed {
    /// Largest value for integer types (for the Constant border check), `None` for f32
    /// and the luma.
    const INTEGER_MAX: Option<f32>;
    /// Every value is finite (no NaN or infinity to look for).
    const ALWAYS_FINITE: bool;
    fn to_f32(self) -> f32;
}

/// The input types of [`local_variance`]: u8, u16 (exact integer path in `Recursive`) and
/// f32.
pub trait VariancePixel: VarianceSample {
    /// The `Recursive` method for this type (see [`recursive`]).
    #[doc(hidden)]
    fn recursive(
        src: ImageView<'_, Self>,
        out: Outputs<'_>,
        p: &VarianceParams,
        par: Parallelism,
    ) -> Result<()>;
    /// Tent moments row by row (see [`recursive::TentMoments`]).
    #[doc(hidden)]
    fn tent_moments(src: ImageView<'_, Self>, border: Border) -> recursive::TentMoments<'_>;
}

macro_rules! variance_pixel {
    ($t:ty, $max:expr, $recursive:ident, $moments:ident) => {
        impl VarianceSample for $t {
            const INTEGER_MAX: Option<f32> = $max;
            const ALWAYS_FINITE: bool = Self::INTEGER_MAX.is_some();
            #[inline]
            fn to_f32(self) -> f32 {
                self as f32
            }
        }
        impl VariancePixel for $t {
            fn recursive(src: ImageView<'_, $t>, out: Outputs<'_>, p: &VarianceParams, par: Parallelism) -> Result<()> {
                recursive::$recursive(src, out, p, par)
            }
            fn tent_moments(src: ImageView<'_, $t>, border: Border) -> recursive::TentMoments<'_> {
                recursive::$moments(src, border)
            }
        }
    };
}
variance_pixel!(u8, Some(255.0), local_variance_u8, tent_moments_u8);
variance_pixel!(u16, Some(65535.0), local_variance_u16, tent_moments_u16);
variance_pixel!(f32, None, local_variance_f32, tent_moments_f32);

impl VarianceSample for Rgba8 {
    const INTEGER_MAX: Option<f32> = None;
    const ALWAYS_FINITE: bool = true;
    /// The unrounded luma, exactly as [`ConvertPixel`] turns RGBA into f32.
    #[inline]
    fn to_f32(self) -> f32 {
        ConvertPixel::<f32>::convert(self)
    }
}

/// Local variance of `src` into `dst` (same size) with the method, kernel and border of
/// `p`: `dst(x, y) = sum_{i,j} w(i, j) (s(x+i, y+j) - mu)^2 / sum w`, `mu` the weighted mean,
/// outside pixels from `p.border` applied to the original image. See the module docs for
/// the methods' arithmetic and NaN handling.
///
/// Any allowed radius works on any image size: every border rule defines all outside
/// pixels (Reflect101 repeats with period `2n - 2`), so a kernel wider than the image is
/// not an error. Errors: a tent radius that is not `2^k - 1` (1..=255), a box radius above
/// 2047, the Normalize border, a Constant border that does not fit the pixel type,
/// or sizes that differ.
pub fn local_variance<P: VariancePixel>(
    src: ImageView<'_, P>,
    dst: ImageViewMut<'_, f32>,
    p: &VarianceParams,
    par: Parallelism,
) -> Result<()> {
    p.validate::<P>()?;
    check_same_size(src.size(), dst.size())?;
    match p.method {
        VarianceMethod::Recursive => P::recursive(src, Outputs::Var(dst), p, par),
        VarianceMethod::Usual => usual::local_variance(&Padded::new(src, p)?, dst, p.kernel, par),
        VarianceMethod::Koenig => koenig::local_variance(&Padded::new(src, p)?, dst, p.kernel, par),
        VarianceMethod::Welford => welford::local_variance(&Padded::new(src, p)?, dst, p.kernel, par),
        VarianceMethod::Pairwise | VarianceMethod::Threewise => {
            let pass: LinePass = match (p.method, p.kernel) {
                (VarianceMethod::Pairwise, VarianceKernel::Tent { .. }) => pairwise::tent_pass,
                (VarianceMethod::Pairwise, VarianceKernel::Box { .. }) => box_blocks::box_pass::<2>,
                (_, VarianceKernel::Tent { .. }) => threewise::tent_pass,
                (_, VarianceKernel::Box { .. }) => box_blocks::box_pass::<3>,
            };
            separable_log(&Padded::new(src, p)?, dst, p.kernel.radius(), par, pass)
        }
    }
}

/// Local variance of the unrounded Rec. 601 luma of `src` (`0.299 R + 0.587 G + 0.114 B`
/// in f32, alpha ignored): bit-identical to [`local_variance`] of that f32 image. The
/// `Recursive` method reads the luma on the fly (no converted image) under Reflect101
/// and Replicate. Errors as [`local_variance`] on f32 input.
pub fn local_variance_luma(
    src: ImageView<'_, Rgba8>,
    dst: ImageViewMut<'_, f32>,
    p: &VarianceParams,
    par: Parallelism,
) -> Result<()> {
    p.validate::<f32>()?;
    check_same_size(src.size(), dst.size())?;
    match (p.method, p.border) {
        // Reflect101 and Replicate take every outside pixel from the image: the outside
        // pixel given is never read.
        (VarianceMethod::Recursive, Border::Reflect101 | Border::Replicate) => {
            recursive::local_variance_float(src, Outputs::Var(dst), p, par, Rgba8::default())
        }
        // A Constant border's value is a luma that no RGBA pixel need have, and the other
        // methods copy the image padded in f32 anyway: there one conversion first costs
        // less than the luma computed again in each of their passes.
        _ => local_variance(src.convert::<f32>().view(), dst, p, par),
    }
}

/// Local weighted mean and variance together, by the `Recursive` method (what the contrast
/// enhancement and the glare detector need): `mean` and `var` as in [`local_variance`].
pub fn local_mean_variance<P: VariancePixel>(
    src: ImageView<'_, P>,
    mean: ImageViewMut<'_, f32>,
    var: ImageViewMut<'_, f32>,
    kernel: VarianceKernel,
    border: Border,
    par: Parallelism,
) -> Result<()> {
    let p = VarianceParams { method: VarianceMethod::Recursive, kernel, border };
    p.validate::<P>()?;
    check_same_size(src.size(), mean.size())?;
    check_same_size(src.size(), var.size())?;
    P::recursive(src, Outputs::MeanVar { mean, var }, &p, par)
}

/// Local weighted mean and variance by the `Recursive` method as interleaved pairs:
/// `pairs` is `2 w` wide and row `y` holds `[mean(0, y), var(0, y), mean(1, y), ...]`
/// (one buffer for the callers that read both per pixel: contrast, glare).
pub fn local_mean_variance_pairs<P: VariancePixel>(
    src: ImageView<'_, P>,
    pairs: ImageViewMut<'_, f32>,
    kernel: VarianceKernel,
    border: Border,
    par: Parallelism,
) -> Result<()> {
    let p = VarianceParams { method: VarianceMethod::Recursive, kernel, border };
    p.validate::<P>()?;
    check_same_size((2 * src.width(), src.height()), pairs.size())?;
    P::recursive(src, Outputs::Pairs(pairs), &p, par)
}

/// Where the `Recursive` method writes: the variance, mean and variance as two images, or
/// interleaved `[mean, var]` pairs.
#[doc(hidden)]
pub enum Outputs<'a> {
    Var(ImageViewMut<'a, f32>),
    MeanVar { mean: ImageViewMut<'a, f32>, var: ImageViewMut<'a, f32> },
    Pairs(ImageViewMut<'a, f32>),
}

/// The float64 two-pass reference, straight from the definition: for each pixel the
/// weighted mean, then the weighted mean of squared deviations, outside pixels from
/// `p.border` (the method in `p` is ignored). O(N^2) per pixel: for tests and small images.
/// Returns the variances row by row (`w * h` values, pixel `(x, y)` at `y * w + x`).
pub fn local_variance_reference<P: VarianceSample>(src: ImageView<'_, P>, p: &VarianceParams) -> Result<Vec<f64>> {
    let p = VarianceParams { method: VarianceMethod::Usual, ..*p };
    p.validate::<P>()?;
    let (w, h) = src.size();
    let r = p.kernel.radius() as isize;
    let wt = p.kernel.weights_1d();
    let value = |x: isize, y: isize| -> f64 {
        match (p.border.source_index(x, w), p.border.source_index(y, h)) {
            (Some(xx), Some(yy)) => src.row(yy)[xx].to_f32() as f64,
            _ => p.border.outside_value() as f64,
        }
    };
    let mut out = crate::error::try_filled(w * h, 0.0f64)?;
    for y in 0..h {
        for x in 0..w {
            let (mut sw, mut s1) = (0.0, 0.0);
            for j in -r..=r {
                for i in -r..=r {
                    let k = wt[(j + r) as usize] as f64 * wt[(i + r) as usize] as f64;
                    sw += k;
                    s1 += k * value(x as isize + i, y as isize + j);
                }
            }
            let mu = s1 / sw;
            let mut s2 = 0.0;
            for j in -r..=r {
                for i in -r..=r {
                    let k = wt[(j + r) as usize] as f64 * wt[(i + r) as usize] as f64;
                    let d = value(x as isize + i, y as isize + j) - mu;
                    s2 += k * d * d;
                }
            }
            out[y * w + x] = s2 / sw;
        }
    }
    Ok(out)
}

/// The input converted to f32 and extended by the kernel radius on every side with the
/// border rule (outside pixels computed once from the original image), so the f32 methods
/// run without any border logic: padded pixel `(x + R, y + R)` is source pixel `(x, y)`.
pub struct Padded {
    pub data: Vec<f32>,
    pub width: usize,
    pub height: usize,
    /// The pad on every side (the kernel radius).
    pub pad: usize,
}

impl Padded {
    /// The padded image of `x - K`, `K` the image's mean rounded to a whole number (see
    /// [`global_shift`]); NaN stays NaN.
    pub fn new<P: VarianceSample>(src: ImageView<'_, P>, p: &VarianceParams) -> Result<Self> {
        let pad = p.kernel.radius();
        let k = global_shift(src);
        let outside = (p.border.outside_value() as f64 - k) as f32;
        let data = pad_map(src, pad, p.border, [outside], |v| [(v.to_f32() as f64 - k) as f32])?;
        let (w, h) = src.size();
        Ok(Padded { data, width: w + 2 * pad, height: h + 2 * pad, pad })
    }
    #[inline]
    pub fn row(&self, y: usize) -> &[f32] {
        &self.data[y * self.width..(y + 1) * self.width]
    }
}

/// The shift `K` that the f32 methods subtract before any arithmetic: the mean of the
/// image's finite values, rounded to a whole number, when `x - K` is exact in f32 for every
/// pixel (always for integer images; for f32 values within a factor 2 of `K` by Sterbenz's
/// lemma), else 0 (also when there are no finite values). Variance is shift-invariant, so the results are unchanged, but a large common
/// offset no longer costs precision: this is the "shifted data" remedy of Chan, Golub and
/// LeVeque (1983). It removes only the image-wide offset: where a local mean `m` is far
/// from `K`, the f32 methods' errors still grow with `|m - K| / sigma` (and Koenig's with
/// its square), as the tests show.
pub fn global_shift<P: VarianceSample>(src: ImageView<'_, P>) -> f64 {
    let (mut s, mut n) = (0.0f64, 0usize);
    for row in src.rows() {
        for &v in row {
            let v = v.to_f32();
            if v.is_finite() {
                s += v as f64;
                n += 1;
            }
        }
    }
    if n == 0 {
        return 0.0;
    }
    let k = libm::round(s / n as f64);
    if P::INTEGER_MAX.is_some() {
        // Whole numbers below 2^24 minus a whole K in range: always exact in f32.
        return k;
    }
    // Only a shift that loses nothing: a value far below K (say 1.234 against K = 10 000)
    // would be rounded by the f32 subtraction, and that input error is worse than the offset.
    let lossless = src.rows().all(|row| {
        row.iter().all(|&v| {
            let v = v.to_f32();
            !v.is_finite() || ((v as f64 - k) as f32) as f64 + k == v as f64
        })
    });
    if lossless {
        k
    } else {
        0.0
    }
}

/// `src` mapped by `f` to `C` lanes per pixel and extended by `pad` pixels on every side by
/// `border` (`outside` for Constant): a contiguous `(w + 2 pad) x (h + 2 pad)` buffer of
/// interleaved lanes.
pub(crate) fn pad_map<P: Pixel, Q: Copy + Default, const C: usize>(
    src: ImageView<'_, P>,
    pad: usize,
    border: Border,
    outside: [Q; C],
    f: impl Fn(P) -> [Q; C],
) -> Result<Vec<Q>> {
    let (w, h) = src.size();
    let (pw, ph) = (w + 2 * pad, h + 2 * pad);
    let mut out = crate::error::try_filled(pw.saturating_mul(ph).saturating_mul(C), Q::default())?;
    let cols: Vec<Option<usize>> = (0..pw).map(|i| border.source_index(i as isize - pad as isize, w)).collect();
    for (py, row) in out.chunks_exact_mut(pw * C).enumerate() {
        match border.source_index(py as isize - pad as isize, h) {
            Some(sy) => {
                let s = src.row(sy);
                for (o, &x) in row[pad * C..(pad + w) * C].chunks_exact_mut(C).zip(s) {
                    o.copy_from_slice(&f(x));
                }
                for i in (0..pad).chain(pad + w..pw) {
                    row[i * C..(i + 1) * C].copy_from_slice(&cols[i].map_or(outside, |c| f(s[c])));
                }
            }
            None => {
                for o in row.chunks_exact_mut(C) {
                    o.copy_from_slice(&outside);
                }
            }
        }
    }
    Ok(out)
}

/// A variance value with the rounding residue below zero removed; NaN stays NaN.
#[inline]
pub(crate) fn non_negative(v: f32) -> f32 {
    if v < 0.0 {
        0.0
    } else {
        v
    }
}

/// Shared driver of the O(N^2) methods: calls `row_fn(y, out, scratch)` for every row `y`
/// of `dst`, computed from the padded image (in parallel bands when allowed), with `out` its
/// row and `scratch` rows of states, `rows` of them, each of `dst`'s
/// width and zeroed before each call. A band allocates its scratch once, fallibly: an image
/// too wide for the memory left is an error, not an abort.
pub(crate) fn per_row(dst: ImageViewMut<'_, f32>, par: Parallelism, rows: usize, row_fn: impl Fn(usize, &mut [f32], &mut [Vec<f32>]) + Send + Sync) -> Result<()> {
    let w = dst.width();
    try_for_each_band(dst, par, 4, |y0, mut band| {
        let mut scratch = (0..rows).map(|_| crate::error::try_filled(w, 0.0f32)).collect::<Result<Vec<_>>>()?;
        for i in 0..band.height() {
            if i > 0 {
                scratch.iter_mut().for_each(|s| s.fill(0.0));
            }
            row_fn(y0 + i, band.row_mut(i), &mut scratch);
        }
        Ok(())
    })
}

/// Columns per strip of the vertical pass of the separable O(log N) methods.
const STRIP: usize = 64;

/// The statistics a [`LinePass`] works on: `n` positions of `lanes` parallel lines stored
/// position-major (`m[pos * lanes + lane]`, means; `v` variances, i.e. M2 / n), and `tm`,
/// `tv`, scratch of the same length.
pub(crate) struct LineStats {
    pub m: Vec<f32>,
    pub v: Vec<f32>,
    pub tm: Vec<f32>,
    pub tv: Vec<f32>,
}

/// One-dimensional pass of a separable O(log N) method over `n` positions of `lanes`
/// parallel lines ([`LineStats`]): on return the first `(n - 2R) * lanes` entries hold the
/// statistics of the 1-D kernel centred at position `pos + R`.
pub(crate) type LinePass = fn(s: &mut LineStats, n: usize, lanes: usize, r: usize);

/// Kernel separation for `Pairwise` and `Threewise`: a horizontal pass over every padded
/// row (starting from mean = pixel, variance = 0), then a vertical pass over strips of
/// columns of the horizontal statistics (each row's (mean, variance) is one group of
/// equal weight, so the same merges combine them).
pub(crate) fn separable_log(src: &Padded, dst: ImageViewMut<'_, f32>, r: usize, par: Parallelism, pass: LinePass) -> Result<()> {
    let (w, h) = dst.size();
    let ph = src.height;
    // Horizontal statistics of every padded row: [means (w) | variances (w)].
    let mut hs = Image::<f32>::new(2 * w, ph)?;
    for_each_band(hs.view_mut(), par, 8, |y0, mut band| {
        let n = src.width;
        let mut s = LineStats { m: Vec::with_capacity(n), v: vec![0.0f32; n], tm: vec![0.0f32; n], tv: vec![0.0f32; n] };
        for i in 0..band.height() {
            s.m.clear();
            s.m.extend_from_slice(src.row(y0 + i));
            s.v.clear();
            s.v.resize(n, 0.0);
            pass(&mut s, n, 1, r);
            let out = band.row_mut(i);
            out[..w].copy_from_slice(&s.m[..w]);
            out[w..].copy_from_slice(&s.v[..w]);
        }
    });
    // Vertical pass per strip of columns; each strip's variances come back strip-major.
    let strips = w.div_ceil(STRIP);
    let hs = &hs;
    let cols: Vec<Vec<f32>> = map_indices(strips, par, |s| {
        let c0 = s * STRIP;
        let sw = STRIP.min(w - c0);
        let len = ph * sw;
        let mut s = LineStats { m: vec![0.0f32; len], v: vec![0.0f32; len], tm: vec![0.0f32; len], tv: vec![0.0f32; len] };
        for y in 0..ph {
            let row = hs.row(y);
            s.m[y * sw..(y + 1) * sw].copy_from_slice(&row[c0..c0 + sw]);
            s.v[y * sw..(y + 1) * sw].copy_from_slice(&row[w + c0..w + c0 + sw]);
        }
        pass(&mut s, ph, sw, r);
        s.v.truncate(h * sw);
        s.v
    });
    for_each_band(dst, par, 16, |y0, mut band| {
        for i in 0..band.height() {
            let row = band.row_mut(i);
            for (s, strip) in cols.iter().enumerate() {
                let c0 = s * STRIP;
                let sw = STRIP.min(w - c0);
                for (o, &v) in row[c0..c0 + sw].iter_mut().zip(&strip[(y0 + i) * sw..(y0 + i + 1) * sw]) {
                    *o = non_negative(v);
                }
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests;
