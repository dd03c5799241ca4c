//! What the Python arguments become: counts checked into `usize` (a negative count is a
//! `ValueError`, not an `OverflowError`), names parsed by the core's name tables (the
//! command line's names), and the defaults of every function, read from the Rust
//! `Default`s (`tessera.defaults()`).

use crate::errors::{to_py, value_error};
use pyo3::prelude::*;
use serde_json::{json, Value};
use tessera::filter::{BoxParams, GaussianParams};
use tessera::options::{RegisterOptions, StereoOptions, StitchOptions};
use tessera::stitch::SynthParams;
use tessera::{BackendChoice, Border, Choice, ContrastParams, GlareMode, GlareParams, VarianceKernel, VarianceParams};

/// The default of every `backend` argument, as the CLI's `--backend`.
pub const AUTO: &str = "auto";

/// A count: `value` as `usize`, or a `ValueError` naming `name`.
pub fn count(name: &str, value: i64) -> PyResult<usize> {
    usize::try_from(value).map_err(|_| value_error(format!("{name} = {value} is out of range (a count, >= 0)")))
}

/// A list of counts.
pub fn counts(name: &str, values: &[i64]) -> PyResult<Vec<usize>> {
    values.iter().map(|&v| count(name, v)).collect()
}

/// An optional count.
pub fn opt_count(name: &str, value: Option<i64>) -> PyResult<Option<usize>> {
    value.map(|v| count(name, v)).transpose()
}

/// A border by the core's names: `reflect101`, `replicate`, `normalize`, `constant:V`.
pub fn border(s: &str) -> PyResult<Border> {
    s.parse::<Border>().map_err(|e| value_error(format!("border: {e}")))
}

/// A choice by the core's name of it, as the CLI spells it (`method="log-plain"`,
/// `accept="fixed"`, ...), case-insensitive; an unknown name is a `ValueError` naming the
/// keyword `what` and listing the names.
pub fn choice<T: Choice>(what: &str, s: &str) -> PyResult<T> {
    T::from_name(s).map_err(|_| value_error(format!("{what}: unknown value {s:?}; expected one of {}", tessera::choice::names::<T>().join(", "))))
}

/// The name of a choice, as a keyword default.
pub fn name_of<T: Choice>(v: T) -> String {
    v.name().to_string()
}

pub fn glare_mode(s: &str) -> PyResult<GlareMode> {
    GlareMode::from_name(s).map_err(|_| value_error(format!("mode: unknown value {s:?}; expected {}", tessera::choice::listed::<GlareMode>())))
}

pub fn kernel_name(k: VarianceKernel) -> &'static str {
    match k {
        VarianceKernel::Tent { .. } => "tent",
        VarianceKernel::Box { .. } => "box",
    }
}

pub fn variance_kernel(kind: &str, radius: usize) -> PyResult<VarianceKernel> {
    match kind.to_ascii_lowercase().as_str() {
        "tent" => Ok(VarianceKernel::Tent { radius }),
        "box" => Ok(VarianceKernel::Box { radius }),
        _ => Err(value_error(format!("kernel: unknown value {kind:?}; expected tent or box"))),
    }
}

pub fn variance_method(s: &str) -> PyResult<tessera::VarianceMethod> {
    tessera::VarianceMethod::from_name(s).map_err(to_py)
}

/// Every function's keyword defaults, from the parameter structs' `Default` (and, for what
/// only the CLI defines, the CLI's own defaults). The Python layer shows these in each
/// function's signature; the Rust signatures use the same expressions.
pub fn defaults() -> Value {
    let run = json!({"backend": AUTO, "single_thread": false});
    let b = BoxParams::default();
    let window = json!({"size": b.width, "width": null, "height": null, "border": b.border.to_string()});
    let g = GaussianParams::default();
    let v = VarianceParams::default();
    let c = ContrastParams::default();
    let gl = GlareParams::default();
    let r = RegisterOptions::default();
    let register = json!({
        "rsz": r.rsz, "accept": r.accept.name(), "cthresh": r.cthresh,
        "null_margin": r.null_margin, "min_coefficient": r.min_coefficient, "npts": r.npts,
        "search_radius": r.search_radius, "min_variance": r.min_variance, "method": r.method.name(),
        "no_refine": r.no_refine, "motion": r.motion.name(), "fit_scale": r.fit_scale, "max_turn": r.max_turn,
    });
    let s = StitchOptions::default();
    let mut stitch = register.clone();
    for (k, val) in [
        ("blend", json!(s.blend.name())),
        ("keyframe_shift", json!(s.keyframe_shift)),
        ("no_quality", json!(s.no_quality)),
        ("coarse", json!(s.coarse)),
        ("no_grow", json!(s.no_grow)),
        ("no_close_loops", json!(s.no_close_loops)),
        ("no_whole_overlap", json!(s.no_whole_overlap)),
        ("refine_every_pair", json!(s.refine_every_pair)),
        ("no_detect_zoom", json!(s.no_detect_zoom)),
        ("frame_cache", json!(crate::stitch::FRAME_CACHE_MIB)),
    ] {
        stitch[k] = val;
    }
    let gd = tessera::stitch::GridParams::default();
    let mut grid = register.clone();
    for (k, val) in [
        ("grid", Value::Null),
        ("positions", Value::Null),
        ("tile_config", Value::Null),
        ("overlap", json!(tessera::stitch::DEFAULT_OVERLAP * 100.0)),
        ("order", json!(tessera::stitch::TileOrder::default().name())),
        ("start", json!(tessera::stitch::Corner::default().name())),
        ("pixel_size", Value::Null),
        ("stage_error", json!(gd.stage_error)),
        ("flatfield", Value::Null),
        ("darkfield", Value::Null),
        ("channels", json!(1)),
        ("time_points", json!(1)),
        ("cycles", json!(1)),
        ("register_channel", json!(0)),
        ("reuse_positions", json!(false)),
        ("blend", json!(s.blend.name())),
        ("coarse", json!(s.coarse)),
        ("frame_cache", json!(crate::stitch::FRAME_CACHE_MIB)),
        ("single_thread", json!(false)),
    ] {
        grid[k] = val;
    }
    let st = StereoOptions::default();
    let stereo = json!({
        "max_disp": st.max_disp, "cost": st.cost.name(),
        "census_window": st.census_window, "mi_iterations": st.mi_iterations, "mi_levels": st.mi_levels,
        "paths": st.paths, "p1": st.p1, "p2": st.p2, "fixed_p2": st.fixed_p2, "uniqueness": st.uniqueness,
        "subpixel": st.subpixel, "lr_check": st.lr_check, "median": st.median, "fill": st.fill,
        "tile": st.tile, "overlap": st.overlap, "max_mem": st.max_mem,
    });
    let sy = SynthParams::default();
    let merge = |mut a: Value, b: &Value| {
        if let (Some(a), Some(b)) = (a.as_object_mut(), b.as_object()) {
            a.extend(b.clone());
        }
        a
    };
    json!({
        "mean": merge(window.clone(), &run),
        "box_sum": merge(window, &run),
        "gaussian": merge(json!({"sigma": g.sigma, "radius": null, "method": g.method.name(), "border": g.border.to_string()}), &run),
        "local_variance": merge(json!({"method": v.method.name(), "kernel": kernel_name(v.kernel), "radius": v.kernel.radius(),
                                       "border": v.border.to_string()}), &run),
        "contrast": merge(json!({"radii": c.radii, "alpha": c.alpha, "gain_max": c.gain_max, "gain_min": c.gain_min,
                                 "noise": c.noise, "border": c.border.to_string()}), &run),
        "glare": merge(json!({"mode": gl.mode.name(), "radii": gl.radii, "k_sigma": gl.k_sigma,
                              "brightness": gl.brightness, "min_contrast": gl.min_contrast, "max_saturation": gl.max_saturation,
                              "min_area": gl.min_area, "max_area": gl.max_area, "max_elongation": gl.max_elongation,
                              "grow": gl.grow, "fill_grow": gl.fill_grow, "fill_iterations": gl.fill_iterations,
                              "border": gl.border.to_string()}), &run),
        "register_pair": merge(merge(json!({"prediction": [0.0, 0.0]}), &register), &run),
        "stitch": merge(stitch, &run),
        "stitch_grid": grid,
        "stereo": merge(stereo, &run),
        "matmul": run.clone(),
        "mat_add": run.clone(),
        "synth_sequence": {"frames": sy.frames, "width": sy.frame_width, "height": sy.frame_height, "zoom": sy.zoom,
                           "max_step": sy.max_step, "noise": sy.noise_sigma, "gain_drift": sy.gain_drift,
                           "blur": sy.blur_passes, "seed": sy.seed},
        "backend_info": {"backend": AUTO, "single_thread": false},
    })
}

/// Every backend name, for the stubs' and errors' sake.
pub fn backend_names() -> Vec<&'static str> {
    BackendChoice::ALL.iter().map(|c| c.name()).collect()
}

/// A JSON value as the Python object `json.loads` makes of it.
pub fn to_python<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(v).map_err(|e| value_error(e.to_string()))?;
    py.import("json")?.call_method1("loads", (text,))
}
