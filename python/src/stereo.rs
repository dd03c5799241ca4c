//! Semi-global matching stereo and the matrix kernels.

use crate::array::{input, Accepts, Output};
use crate::backend::choose;
use crate::device::{host_view, lent, Lent};
use crate::errors::{to_py, value_error};
use crate::ops::MatOp;
use crate::params::{choice, count, to_python, AUTO};
use pyo3::prelude::*;
use serde_json::json;
use tessera::options::{census_window_default, mi_default, tiling_default, StereoOptions};
use tessera::stereo::{CostKind, StereoParams};
use tessera::{AnyView, ImageView};

/// Semi-global matching (Hirschmueller 2008) of a rectified pair into the left disparity
/// map: disparity ``d`` of left pixel ``(x, y)`` matches right pixel ``(x - d, y)``,
/// candidates ``0 .. max_disp - 1``. Matching ``cost``: ``"census"`` (``census_window``
/// ``"WxH"``, odd sides, at most 9x7, Hamming distance), ``"ad"`` (absolute difference) or
/// ``"mi"`` (mutual information, ``mi_iterations`` at the coarsest of ``mi_levels``
/// halvings). Costs summed along ``paths`` (4, 5, 8, 16) directions with penalties ``p1``
/// / ``p2`` (default per cost; adaptive P2 unless ``fixed_p2``); winner takes all, then
/// optional ``uniqueness`` ratio (percent), ``subpixel`` parabola, ``lr_check``, 3x3
/// ``median``, hole ``fill``. Memory: automatic bands within ``max_mem`` MiB, or tiles
/// ``tile="WxH"``, with ``overlap`` pixels.
///
/// ``left`` and ``right``: both uint8 ``(H, W)`` or both RGBA ``(H, W, 4)``, one shape: NumPy
/// arrays or any array with ``__dlpack__`` (host memory is read in place; a pair on the GPU,
/// ``CudaImage`` or CUDA arrays, is matched there and the map is a ``CudaImage``).
/// Returns ``(disparity, stats)``: float32 ``(H, W)`` with ``inf`` where invalid, and a dict
/// (``valid``, ``rejected_uniqueness``, ``rejected_lr``, ``filled``, ``tiles``,
/// ``peak_bytes``, ``p1``, ``p2``).
#[pyfunction]
#[pyo3(signature = (left, right, /, *, max_disp = StereoParams::default().max_disparity as i64,
                    cost = crate::params::name_of(StereoParams::default().cost.kind()),
                    census_window = census_window_default(), mi_iterations = mi_default().0 as i64,
                    mi_levels = mi_default().1 as i64, paths = StereoParams::default().paths.count() as i64,
                    p1 = None, p2 = None, fixed_p2 = !StereoParams::default().adaptive_p2,
                    uniqueness = StereoParams::default().uniqueness, subpixel = StereoParams::default().subpixel,
                    lr_check = StereoParams::default().lr_check, median = StereoParams::default().median,
                    fill = StereoParams::default().fill, tile = None, overlap = tiling_default().1 as i64,
                    max_mem = (tiling_default().0 >> 20) as i64, backend = AUTO, single_thread = false))]
#[allow(clippy::too_many_arguments)]
pub fn stereo<'py>(
    py: Python<'py>,
    left: &Bound<'py, PyAny>,
    right: &Bound<'py, PyAny>,
    max_disp: i64,
    cost: String,
    census_window: String,
    mi_iterations: i64,
    mi_levels: i64,
    paths: i64,
    p1: Option<u16>,
    p2: Option<u16>,
    fixed_p2: bool,
    uniqueness: u8,
    subpixel: bool,
    lr_check: bool,
    median: bool,
    fill: bool,
    tile: Option<String>,
    overlap: i64,
    max_mem: i64,
    backend: &str,
    single_thread: bool,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let options = StereoOptions {
        max_disp: count("max_disp", max_disp)?,
        cost: choice::<CostKind>("cost", &cost)?,
        census_window,
        mi_iterations: count("mi_iterations", mi_iterations)?,
        mi_levels: count("mi_levels", mi_levels)?,
        paths: count("paths", paths)?,
        p1,
        p2,
        fixed_p2,
        uniqueness,
        subpixel,
        lr_check,
        median,
        fill,
        tile,
        overlap: count("overlap", overlap)?,
        max_mem: count("max_mem", max_mem)?,
    };
    let p = options.params().map_err(|e| match e.downcast::<tessera::Error>() {
        Ok(core) => to_py(core),
        Err(e) => value_error(format!("{e:#}")),
    })?;
    let chosen = choose(backend, single_thread)?;
    let (map, s) = match (lent(left, "left", Accepts::U8_OR_RGBA, &chosen)?, lent(right, "right", Accepts::U8_OR_RGBA, &chosen)?) {
        (Some(Lent::Device(l)), Some(Lent::Device(r))) => crate::device::stereo_on_device(py, (l, r), &chosen, &p)?,
        (Some(Lent::Device(_)), _) | (_, Some(Lent::Device(_))) => {
            return Err(value_error("left and right: one is on the GPU and the other on the host; pass both on the same side (tessera.to_device, CudaImage.numpy)"))
        }
        (x, y) => {
            // Host memory: lent through DLPack or a NumPy array.
            let li = if x.is_none() { Some(input(left, "left", Accepts::U8_OR_RGBA)?) } else { None };
            let ri = if y.is_none() { Some(input(right, "right", Accepts::U8_OR_RGBA)?) } else { None };
            let (l, r) = (lent_or_array_view(&x, &li, "left")?, lent_or_array_view(&y, &ri, "right")?);
            let (w, h) = l.size();
            let out = Output::f32(py, w, h);
            let s = {
                let mut g = out.write()?;
                let dst = g.f32_mut()?;
                let b = chosen.backend;
                py.detach(move || b.stereo_sgm(l, r, dst, &p)).map_err(to_py)?
            };
            (out.into_any(), s)
        }
    };
    let stats = json!({"valid": s.valid, "rejected_uniqueness": s.rejected_uniqueness, "rejected_lr": s.rejected_lr,
                       "filled": s.filled, "tiles": s.tiles, "peak_bytes": s.peak_bytes, "p1": s.p1, "p2": s.p2});
    Ok((map, to_python(py, &stats)?))
}

/// Two float32 matrices in, a new float32 matrix out: NumPy (or host DLPack) inputs give a
/// NumPy array; inputs on the GPU (a `CudaImage` or a CUDA array, both) a `CudaImage`.
fn matrices<'py>(py: Python<'py>, (a, b): (&Bound<'py, PyAny>, &Bound<'py, PyAny>), (backend, single_thread): (&str, bool), op: MatOp) -> PyResult<Bound<'py, PyAny>> {
    let chosen = choose(backend, single_thread)?;
    match (lent(a, "a", Accepts::F32, &chosen)?, lent(b, "b", Accepts::F32, &chosen)?) {
        (Some(Lent::Device(x)), Some(Lent::Device(y))) => crate::device::matrices_on_device(py, (x, y), &chosen, op),
        (Some(Lent::Device(_)), _) | (_, Some(Lent::Device(_))) => {
            Err(value_error("a and b: one is on the GPU and the other on the host; pass both on the same side (tessera.to_device, CudaImage.numpy)"))
        }
        (x, y) => {
            // Host memory: lent through DLPack or a NumPy array.
            let (xi, yi) = (if x.is_none() { Some(input(a, "a", Accepts::F32)?) } else { None }, if y.is_none() { Some(input(b, "b", Accepts::F32)?) } else { None });
            let (av, bv) = (matrix_view(&x, &xi, "a")?, matrix_view(&y, &yi, "b")?);
            let (w, h) = op.output(av.size(), bv.size());
            let out = Output::f32(py, w, h);
            {
                let mut g = out.write()?;
                let dst = g.f32_mut()?;
                let be = chosen.backend;
                py.detach(move || op.host(be, av, bv, dst)).map_err(to_py)?;
            }
            Ok(out.into_any())
        }
    }
}

/// A host image's view: lent through DLPack (`lent`), or the NumPy array `array`.
fn lent_or_array_view<'v>(lent: &'v Option<Lent>, array: &'v Option<crate::array::Input<'_>>, what: &str) -> PyResult<AnyView<'v>> {
    match (lent, array) {
        (Some(Lent::Host { image, .. }), _) => host_view(image),
        (_, Some(a)) => a.view(what),
        _ => Err(value_error(format!("internal: {what} has no view"))),
    }
}

/// A host matrix's view: lent through DLPack (`lent`), or the NumPy array `array`.
fn matrix_view<'v>(lent: &'v Option<Lent>, array: &'v Option<crate::array::Input<'_>>, what: &str) -> PyResult<ImageView<'v, f32>> {
    match lent_or_array_view(lent, array, what)? {
        AnyView::F32(v) => Ok(v),
        _ => Err(value_error("internal: matrices are float32")),
    }
}

/// Matrix product ``a @ b`` of float32 2-D arrays (``a`` is m x k, ``b`` k x n; the result
/// m x n float32): ``out[i, j] = sum_p a[i, p] b[p, j]``, accumulated in float32 with fused
/// multiply-adds in blocks of 256 terms (error below ``k 2**-24 sum_p |a b|``). Shapes that
/// do not chain: ValueError.
#[pyfunction]
#[pyo3(signature = (a, b, /, *, backend = AUTO, single_thread = false))]
pub fn matmul<'py>(py: Python<'py>, a: &Bound<'py, PyAny>, b: &Bound<'py, PyAny>, backend: &str, single_thread: bool) -> PyResult<Bound<'py, PyAny>> {
    matrices(py, (a, b), (backend, single_thread), MatOp::Mul)
}

/// Element-wise sum ``a + b`` of float32 2-D arrays of one shape, each element the float32
/// sum rounded once.
#[pyfunction]
#[pyo3(signature = (a, b, /, *, backend = AUTO, single_thread = false))]
pub fn mat_add<'py>(py: Python<'py>, a: &Bound<'py, PyAny>, b: &Bound<'py, PyAny>, backend: &str, single_thread: bool) -> PyResult<Bound<'py, PyAny>> {
    matrices(py, (a, b), (backend, single_thread), MatOp::Add)
}
