//! `tessera._tessera`: the native half of the Python package `tessera` (the Python half,
//! `tessera/__init__.py`, gives each function its signature with the defaults shown and
//! adds `tessera.dask`). Every function borrows its NumPy inputs without copying
//! ([`array`]), checks its arguments into the core's parameter structs ([`params`]),
//! releases the GIL while the backend computes, and turns the core's errors into Python
//! exceptions ([`errors`]).

mod array;
mod backend;
mod device;
mod errors;
mod filters;
mod grid;
mod ops;
mod params;
mod stereo;
mod stitch;

use pyo3::prelude::*;

/// defaults()
///
/// Every function's keyword defaults, read from the Rust parameter structs' ``Default``
/// (and the CLI's own defaults where only the CLI defines one): ``{function: {name:
/// value}}``.
#[pyfunction]
fn defaults(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    params::to_python(py, &params::defaults())
}

/// Which backend ``backend`` opens here: ``{"name": "cpu" | "cuda", "fallback": None or
/// why "auto" is the CPU}``. ``backend="cuda"`` without a usable GPU raises RuntimeError
/// with the reason.
#[pyfunction]
#[pyo3(signature = (backend = params::AUTO, single_thread = false))]
fn backend_info<'py>(py: Python<'py>, backend: &str, single_thread: bool) -> PyResult<Bound<'py, PyAny>> {
    let c = backend::choose(backend, single_thread)?;
    params::to_python(py, &serde_json::json!({"name": c.backend.name(), "fallback": c.fallback}))
}

/// The Rust call alone, for the call-overhead benchmark: ``repeats`` mean filters of the
/// borrowed ``image`` into one preallocated output, each timed inside Rust (seconds).
#[pyfunction]
#[pyo3(signature = (image, size, repeats, single_thread = false))]
fn _bench_mean(py: Python<'_>, image: &Bound<'_, PyAny>, size: i64, repeats: i64, single_thread: bool) -> PyResult<Vec<f64>> {
    let b = backend::choose("cpu", single_thread)?.backend;
    let p = tessera::filter::BoxParams::square(params::count("size", size)?, tessera::Border::Reflect101);
    let inp = array::input(image, "image", array::Accepts::ALL)?;
    let src = inp.view("image")?;
    let out = array::Output::like(py, &src);
    let mut g = out.write()?;
    let mut times = Vec::new();
    for _ in 0..params::count("repeats", repeats)? {
        let dst = g.view_mut()?;
        let t0 = std::time::Instant::now();
        b.mean_filter(src, dst, &p).map_err(errors::to_py)?;
        times.push(t0.elapsed().as_secs_f64());
    }
    Ok(times)
}

#[pymodule]
fn _tessera(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(filters::mean, m)?)?;
    m.add_function(wrap_pyfunction!(filters::box_sum, m)?)?;
    m.add_function(wrap_pyfunction!(filters::gaussian, m)?)?;
    m.add_function(wrap_pyfunction!(filters::gaussian_plan, m)?)?;
    m.add_function(wrap_pyfunction!(filters::local_variance, m)?)?;
    m.add_function(wrap_pyfunction!(filters::contrast, m)?)?;
    m.add_function(wrap_pyfunction!(filters::glare, m)?)?;
    m.add_function(wrap_pyfunction!(stitch::register_pair, m)?)?;
    m.add_function(wrap_pyfunction!(stitch::stitch, m)?)?;
    m.add_function(wrap_pyfunction!(grid::stitch_grid, m)?)?;
    m.add_function(wrap_pyfunction!(stitch::synth_sequence, m)?)?;
    m.add_function(wrap_pyfunction!(stitch::load, m)?)?;
    m.add_function(wrap_pyfunction!(stitch::save, m)?)?;
    m.add_function(wrap_pyfunction!(stereo::stereo, m)?)?;
    m.add_function(wrap_pyfunction!(stereo::matmul, m)?)?;
    m.add_function(wrap_pyfunction!(stereo::mat_add, m)?)?;
    m.add_function(wrap_pyfunction!(device::to_device, m)?)?;
    m.add_function(wrap_pyfunction!(device::_lend_host, m)?)?;
    m.add_class::<device::CudaImage>()?;
    m.add_function(wrap_pyfunction!(defaults, m)?)?;
    m.add_function(wrap_pyfunction!(backend_info, m)?)?;
    m.add_function(wrap_pyfunction!(_bench_mean, m)?)?;
    m.add("BACKENDS", params::backend_names())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
