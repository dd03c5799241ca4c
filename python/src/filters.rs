//! The per-image operations: mean, box sum, Gaussian, local variance, contrast, glare.
//! Each borrows its input, makes a new output array, and runs the backend with the GIL
//! released. The docstrings are the Python help: the math and the border rule of each, as
//! the core's docs state them.

use crate::array::{input, unary, Accepts, Output};
use crate::device::Lent;
use crate::ops::Op;
use crate::backend::choose;
use crate::errors::to_py;
use crate::params::{border, count, counts, glare_mode, opt_count, to_python, variance_kernel, variance_method, AUTO};
use pyo3::prelude::*;
use serde_json::json;
use tessera::filter::{BoxParams, GaussianMethod, GaussianParams};
use tessera::{ContrastParams, GlareParams, VarianceParams};

fn window(size: i64, width: Option<i64>, height: Option<i64>, border_name: &str) -> PyResult<BoxParams> {
    let size = count("size", size)?;
    Ok(BoxParams {
        width: opt_count("width", width)?.unwrap_or(size),
        height: opt_count("height", height)?.unwrap_or(size),
        border: border(border_name)?,
    })
}

/// The window operations take the same options (the CLI's `-m/--size`, `--width`,
/// `--height`, `--border`): one definition of their signature.
macro_rules! window_function {
    ($(#[$doc:meta])* $name:ident, |$py:ident, $image:ident, $b:ident, $p:ident| $body:expr) => {
        $(#[$doc])*
        #[pyfunction]
        #[pyo3(signature = (image, /, *, size = BoxParams::default().width as i64, width = None, height = None,
                            border = BoxParams::default().border.to_string(), backend = AUTO, single_thread = false))]
        #[allow(clippy::too_many_arguments)]
        pub fn $name<'py>(
            $py: Python<'py>,
            $image: &Bound<'py, PyAny>,
            size: i64,
            width: Option<i64>,
            height: Option<i64>,
            border: String,
            backend: &str,
            single_thread: bool,
        ) -> PyResult<Bound<'py, PyAny>> {
            let $p = window(size, width, height, &border)?;
            let $b = choose(backend, single_thread)?;
            $body
        }
    };
}

window_function!(
    /// Mean filter over a rectangular window, O(1) per pixel whatever its size.
    ///
    /// ``out[y, x]`` is the mean of ``image`` over the ``width x height`` window (``size x
    /// size`` unless ``width`` / ``height`` are given, each 1..=4095) whose anchor
    /// ``(width // 2, height // 2)`` sits on ``(x, y)``: columns ``x - width//2 ..= x - width//2
    /// + width - 1``, rows likewise. Outside the image, ``border``: ``"reflect101"`` (mirror
    /// without repeating the edge pixel, ``... 2 1 | 0 1 2 ...``; OpenCV's BORDER_REFLECT_101,
    /// scipy's ``mode="mirror"``), ``"replicate"`` (edge pixel repeated; scipy ``"nearest"``),
    /// ``"constant:V"`` (outside pixels are V), ``"normalize"`` (outside pixels left out: the
    /// mean of the in-bounds pixels only).
    ///
    /// uint8 / uint16: the exact integer window sum, rounded half up (``floor(sum / n + 1/2)``).
    /// float32: the sum accumulated in float64, then divided. RGBA ``(H, W, 4)`` uint8: each
    /// channel separately. Returns a new array of the input's dtype and shape.
    ///
    /// Raises ValueError (bad window, border, shape or strides), TypeError (dtype),
    /// RuntimeError (``backend="cuda"`` without a usable GPU).
    mean,
    |py, image, b, p| unary(py, image, Accepts::ALL, b, Op::Mean(p))
);

window_function!(
    /// Box sum over a rectangular window, O(1) per pixel: ``out[y, x] = sum`` of ``image`` over
    /// the window of :func:`mean` (same anchor, same ``border`` rules; ``"normalize"`` sums the
    /// in-bounds pixels only).
    ///
    /// uint8 / uint16 gray: the exact integer sum as uint32 (uint16 needs ``65535 * area <
    /// 2**32``, so a window of at most 65537 pixels). float32: accumulated in float64, rounded
    /// once to float32. RGBA is a TypeError (the CLI's ``box`` takes gray images only).
    box_sum,
    |py, image, b, p| unary(py, image, Accepts::GRAY, b, Op::BoxSum(p))
);

/// Gaussian blur with standard deviation ``sigma`` (finite, > 0, at most 1365).
///
/// ``method="fir"``: separable convolution with the normalized sampled weights
/// ``w(i) = exp(-i**2 / (2 sigma**2)) / sum_j w(j)`` for ``|i| <= radius`` (default
/// ``ceil(3 sigma)``, 1..=4095). ``"iir"``: the recursive Gaussian, whose cost does not grow
/// with sigma (sigma >= 0.5; infinite support). ``"auto"``: the FIR below sigma 9 (16 for
/// RGBA) or when a ``radius`` is given, else the IIR. ``border`` as in :func:`mean` (outside
/// pixels of the whole kernel come from the original image).
///
/// Every intermediate is float32 (no rounding between the two 1-D passes); integer outputs
/// are rounded once, half up, saturating. Returns the input's dtype and shape.
#[pyfunction]
#[pyo3(signature = (image, /, *, sigma = GaussianParams::default().sigma, radius = None,
                    method = GaussianParams::default().method.name().to_string(),
                    border = GaussianParams::default().border.to_string(), backend = AUTO, single_thread = false))]
#[allow(clippy::too_many_arguments)]
pub fn gaussian<'py>(
    py: Python<'py>,
    image: &Bound<'py, PyAny>,
    sigma: f64,
    radius: Option<i64>,
    method: String,
    border: String,
    backend: &str,
    single_thread: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let p = GaussianParams {
        sigma,
        radius: opt_count("radius", radius)?,
        method: GaussianMethod::from_name(&method).map_err(to_py)?,
        border: crate::params::border(&border)?,
    };
    unary(py, image, Accepts::ALL, choose(backend, single_thread)?, Op::Gaussian(p))
}

/// What :func:`gaussian` runs for these parameters: ``("fir", radius)`` or ``("iir", None)``
/// (after checking them). For halos: the FIR reads ``radius`` pixels on each side; the IIR
/// has infinite support.
#[pyfunction]
#[pyo3(signature = (sigma, radius = None, method = GaussianParams::default().method.name().to_string(), channels = 1))]
pub fn gaussian_plan(sigma: f64, radius: Option<i64>, method: String, channels: i64) -> PyResult<(String, Option<usize>)> {
    let p = GaussianParams {
        sigma,
        radius: opt_count("radius", radius)?,
        method: GaussianMethod::from_name(&method).map_err(to_py)?,
        ..Default::default()
    };
    let channels = count("channels", channels)?;
    p.validate(None).map_err(to_py)?;
    Ok(match p.resolved_method(channels) {
        GaussianMethod::Iir => ("iir".into(), None),
        m => (m.name().into(), Some(p.fir_radius())),
    })
}

/// Local variance: for every pixel, the weighted variance of the pixels in a kernel
/// around it, ``var = sum w (p - mu)**2 / sum w`` with ``mu = sum w p / sum w``.
///
/// ``kernel="tent"``: ``w(i, j) = (R + 1 - |i|) (R + 1 - |j|)`` for ``|i|, |j| <= R``, with
/// ``radius`` R = 2**k - 1 (1, 3, 7, ..., 255). ``kernel="box"``: uniform over the
/// ``(2r + 1)**2`` square, any ``radius`` r in 0..=2047. The kernel reads ``radius`` pixels
/// on each side; outside pixels come from ``border`` (``"reflect101"``, ``"replicate"``,
/// ``"constant:V"``; not ``"normalize"``) applied to the original image.
///
/// ``method``: ``"recursive"`` (exact O(1) running sums: on uint8 / uint16 within one
/// float32 ulp of the exact rational; float64 sums on float32), or the variance paper's
/// ``"usual"``, ``"koenig"``, ``"welford"``, ``"pairwise"``, ``"threewise"`` (float32
/// arithmetic on data shifted by the image's mean). RGBA: the variance of the unrounded
/// Rec. 601 luma. Returns float32 ``(H, W)``; never negative.
#[pyfunction]
#[pyo3(signature = (image, /, *, method = VarianceParams::default().method.name().to_string(),
                    kernel = crate::params::kernel_name(VarianceParams::default().kernel).to_string(),
                    radius = VarianceParams::default().kernel.radius() as i64,
                    border = VarianceParams::default().border.to_string(), backend = AUTO, single_thread = false))]
#[allow(clippy::too_many_arguments)]
pub fn local_variance<'py>(
    py: Python<'py>,
    image: &Bound<'py, PyAny>,
    method: String,
    kernel: String,
    radius: i64,
    border: String,
    backend: &str,
    single_thread: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let p = VarianceParams {
        method: variance_method(&method)?,
        kernel: variance_kernel(&kernel, count("radius", radius)?)?,
        border: crate::params::border(&border)?,
    };
    unary(py, image, Accepts::ALL, choose(backend, single_thread)?, Op::Variance(p))
}

/// Multi-scale local contrast enhancement from the local mean and variance.
///
/// For each tent radius ``R_s`` in ``radii`` (each 2**k - 1), the local weighted mean
/// ``mu_s`` and standard deviation ``sigma_s`` of the luminance ``Y`` (exact O(1)
/// ``"recursive"`` local variance, :func:`local_variance`) give
/// ``g_s = clamp(alpha * sigma_g / (sigma_s + noise * sigma_g), gain_min, gain_max)`` and
/// ``Y' = Y + (1/S) sum_s (g_s - 1) (Y - mu_s)``, ``sigma_g`` the global standard deviation
/// of ``Y``. Integer outputs are rounded and clamped to the type's range. RGBA: statistics
/// on the Rec. 601 luma, R, G, B multiplied by the same factor ``Y' / Y`` (hue kept, alpha
/// kept). ``border`` applies to the local statistics (reflect101, replicate, constant:V).
/// Returns the input's dtype and shape.
/// Uses the whole image's standard deviation, so it has no exact chunked form.
#[pyfunction]
#[pyo3(signature = (image, /, *, radii = ContrastParams::default().radii.iter().map(|&r| r as i64).collect(),
                    alpha = ContrastParams::default().alpha, gain_max = ContrastParams::default().gain_max,
                    gain_min = ContrastParams::default().gain_min, noise = ContrastParams::default().noise,
                    border = ContrastParams::default().border.to_string(), backend = AUTO, single_thread = false))]
#[allow(clippy::too_many_arguments)]
pub fn contrast<'py>(
    py: Python<'py>,
    image: &Bound<'py, PyAny>,
    radii: Vec<i64>,
    alpha: f32,
    gain_max: f32,
    gain_min: f32,
    noise: f32,
    border: String,
    backend: &str,
    single_thread: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let p = ContrastParams { radii: counts("radii", &radii)?, alpha, gain_max, gain_min, noise, border: crate::params::border(&border)? };
    unary(py, image, Accepts::ALL, choose(backend, single_thread)?, Op::Contrast(p))
}

/// Specular-highlight (glare) detection and correction. Returns ``(corrected, mask,
/// report)``: ``corrected`` of the input's dtype and shape, ``mask`` uint8 ``(H, W)`` with
/// 255 on glare, ``report`` a dict (``spots``, ``pixels``, and the thresholds used:
/// ``brightness``, ``min_contrast``, ``full_scale``).
///
/// A seed pixel is at least ``k_sigma`` local standard deviations above its local mean
/// (box statistics of the ``radii``, ``border`` outside the image), bright and excessive
/// enough (``"adaptive"``: thresholds from the image's statistics; ``"manual"``:
/// ``brightness`` and ``min_contrast`` as fractions of full scale) and of saturation
/// ``(max - min) / max`` at most ``max_saturation``. Spots between ``min_area`` and
/// ``max_area`` pixels and at most ``max_elongation`` long are kept, dilated by ``grow``,
/// and filled by ``fill_iterations`` Laplace sweeps (reaching ``fill_grow`` pixels
/// further).
#[pyfunction]
#[pyo3(signature = (image, /, *, mode = tessera::Choice::name(GlareParams::default().mode).to_string(),
                    radii = GlareParams::default().radii.iter().map(|&r| r as i64).collect(),
                    k_sigma = GlareParams::default().k_sigma, brightness = GlareParams::default().brightness,
                    min_contrast = GlareParams::default().min_contrast, max_saturation = GlareParams::default().max_saturation,
                    min_area = GlareParams::default().min_area as i64, max_area = GlareParams::default().max_area as i64,
                    max_elongation = GlareParams::default().max_elongation, grow = GlareParams::default().grow as i64,
                    fill_grow = GlareParams::default().fill_grow as i64, fill_iterations = GlareParams::default().fill_iterations as i64,
                    border = GlareParams::default().border.to_string(), backend = AUTO, single_thread = false))]
#[allow(clippy::too_many_arguments)]
pub fn glare<'py>(
    py: Python<'py>,
    image: &Bound<'py, PyAny>,
    mode: String,
    radii: Vec<i64>,
    k_sigma: f32,
    brightness: f32,
    min_contrast: f32,
    max_saturation: f32,
    min_area: i64,
    max_area: i64,
    max_elongation: f32,
    grow: i64,
    fill_grow: i64,
    fill_iterations: i64,
    border: String,
    backend: &str,
    single_thread: bool,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let p = GlareParams {
        mode: glare_mode(&mode)?,
        radii: counts("radii", &radii)?,
        k_sigma,
        brightness,
        min_contrast,
        max_saturation,
        min_area: count("min_area", min_area)?,
        max_area: count("max_area", max_area)?,
        max_elongation,
        grow: count("grow", grow)?,
        fill_grow: count("fill_grow", fill_grow)?,
        fill_iterations: count("fill_iterations", fill_iterations)?,
        border: crate::params::border(&border)?,
    };
    let chosen = choose(backend, single_thread)?;
    let b = chosen.backend;
    let report = |py: Python<'py>, r: tessera::GlareReport| {
        to_python(py, &json!({"spots": r.spots, "pixels": r.pixels, "brightness": r.brightness, "min_contrast": r.min_contrast, "full_scale": r.full_scale}))
    };
    let lent = crate::device::lent(image, "image", Accepts::ALL, &chosen)?;
    if let Some(Lent::Device(d)) = lent {
        let (corrected, mask, r) = crate::device::glare_on_device(py, d, &chosen, &p)?;
        return Ok((corrected, mask, report(py, r)?));
    }
    let inp = if lent.is_none() { Some(input(image, "image", Accepts::ALL)?) } else { None };
    let src = match (&lent, &inp) {
        (Some(Lent::Host { image, .. }), _) => crate::device::host_view(image)?,
        (_, Some(i)) => i.view("image")?,
        _ => return Err(crate::errors::value_error("internal: an image with no view")),
    };
    let (w, h) = src.size();
    let out = Output::like(py, &src);
    let mask = Output::u8(py, w, h);
    let r = {
        let mut g = out.write()?;
        let mut m = mask.write()?;
        let (dst, mdst) = (g.view_mut()?, m.u8_mut()?);
        py.detach(|| b.glare(src, mdst, dst, &p)).map_err(to_py)?
    };
    Ok((out.into_any(), mask.into_any(), report(py, r)?))
}
