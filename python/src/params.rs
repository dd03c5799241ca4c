//! What the Python arguments become: counts checked into `usize` (a negative count is a
//! `ValueError`, not an `OverflowError`), names parsed by the CLI's own parsers, and the
//! defaults of every function, read from the Rust `Default`s (`tessera.defaults()`).

use crate::errors::{to_py, value_error};
use clap::ValueEnum;
use pyo3::prelude::*;
use serde_json::{json, Value};
use tessera::cli::stereo::{census_window_default, mi_default, tiling_default};
use tessera::cli::stitch::{AcceptArg, BlendArg, MethodArg, MotionArg};
use tessera::filter::{BoxParams, GaussianParams};
use tessera::stereo::StereoParams;
use tessera::stitch::{RegisterParams, StitchParams, SynthParams};
use tessera::{BackendChoice, Border, ContrastParams, GlareMode, GlareParams, VarianceKernel, VarianceParams};

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

/// A border by the CLI's names: `reflect101`, `replicate`, `normalize`, `constant:V`.
pub fn border(s: &str) -> PyResult<Border> {
    tessera::cli::common::parse_border(s).map_err(|e| value_error(format!("border: {e}")))
}

/// A choice by its CLI name (`--method log-plain`, `--accept fixed`, ...).
pub fn choice<T: ValueEnum>(what: &str, s: &str) -> PyResult<T> {
    T::from_str(s, true).map_err(|_| {
        let names: Vec<String> =
            T::value_variants().iter().filter_map(|v| v.to_possible_value()).map(|p| p.get_name().to_string()).collect();
        value_error(format!("{what}: unknown value {s:?}; expected one of {}", names.join(", ")))
    })
}

/// The CLI name of a choice.
pub fn name_of<T: ValueEnum>(v: T) -> String {
    v.to_possible_value().map(|p| p.get_name().to_string()).unwrap_or_default()
}

pub fn glare_mode_name(m: GlareMode) -> &'static str {
    match m {
        GlareMode::Adaptive => "adaptive",
        GlareMode::Manual => "manual",
    }
}

pub fn glare_mode(s: &str) -> PyResult<GlareMode> {
    match s.to_ascii_lowercase().as_str() {
        "adaptive" => Ok(GlareMode::Adaptive),
        "manual" => Ok(GlareMode::Manual),
        _ => Err(value_error(format!("mode: unknown value {s:?}; expected adaptive or manual"))),
    }
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
    let r = RegisterParams::default();
    let register = json!({
        "rsz": r.rsz, "accept": name_of(AcceptArg::from(r.acceptance)), "cthresh": r.cthresh,
        "null_margin": r.null_margin, "min_coefficient": r.min_coefficient, "npts": r.npts,
        "search_radius": r.search_radius, "min_variance": null, "method": name_of(MethodArg::from(r.method)),
        "no_refine": !r.refine, "motion": name_of(MotionArg::from(r.motion)), "fit_scale": r.fit_scale, "max_turn": r.max_turn,
    });
    let s = StitchParams::default();
    let mut stitch = register.clone();
    for (k, val) in [
        ("blend", json!(name_of(BlendArg::from(s.blend)))),
        ("keyframe_shift", json!(s.keyframe_shift)),
        ("no_quality", json!(false)),
        ("coarse", json!(s.coarse_candidates)),
        ("no_grow", json!(false)),
        ("no_close_loops", json!(!s.close_loops)),
        ("no_whole_overlap", json!(!s.whole_overlap)),
        ("refine_every_pair", json!(s.refine_every_pair)),
        ("no_detect_zoom", json!(!s.detect_zoom)),
        ("frame_cache", json!(crate::stitch::FRAME_CACHE_MIB)),
    ] {
        stitch[k] = val;
    }
    let st = StereoParams::default();
    let (mi_iterations, mi_levels) = mi_default();
    let (max_mem, overlap) = tiling_default();
    let stereo = json!({
        "max_disp": st.max_disparity, "cost": name_of(tessera::cli::stereo::CostArg::of(st.cost)),
        "census_window": census_window_default(), "mi_iterations": mi_iterations, "mi_levels": mi_levels,
        "paths": st.paths.count(), "p1": null, "p2": null, "fixed_p2": !st.adaptive_p2, "uniqueness": st.uniqueness,
        "subpixel": st.subpixel, "lr_check": st.lr_check, "median": st.median, "fill": st.fill,
        "tile": null, "overlap": overlap, "max_mem": max_mem >> 20,
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
        "glare": merge(json!({"mode": glare_mode_name(gl.mode), "radii": gl.radii, "k_sigma": gl.k_sigma,
                              "brightness": gl.brightness, "min_contrast": gl.min_contrast, "max_saturation": gl.max_saturation,
                              "min_area": gl.min_area, "max_area": gl.max_area, "max_elongation": gl.max_elongation,
                              "grow": gl.grow, "fill_grow": gl.fill_grow, "fill_iterations": gl.fill_iterations,
                              "border": gl.border.to_string()}), &run),
        "register_pair": merge(merge(json!({"prediction": [0.0, 0.0]}), &register), &run),
        "stitch": merge(stitch, &run),
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
