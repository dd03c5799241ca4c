//! Tile grids: `stitch_grid`, the library's grid run (`tessera::grid`, as `tessera stitch
//! --grid` runs it) with the mosaic composited in memory and the report of `tessera stitch
//! --grid --report`.

use crate::array::image_to_numpy;
use crate::errors::{to_py, type_error, value_error};
use crate::params::{choice, count, name_of, to_python};
use crate::stitch::{frames_arg, with_registration_keywords, Frames, FRAME_CACHE_MIB};
use pyo3::exceptions::{PyFileNotFoundError, PyOSError};
use pyo3::prelude::*;
use serde_json::json;
use std::ops::ControlFlow;
use std::path::PathBuf;
use tessera::flatfield::FieldSource;
use tessera::frames::{grid_source, read_ahead_depth};
use tessera::grid::{register_grid, register_planes, GridLayout, GridOptions, Nominal, Planes};
use tessera::large::{composite_in_memory, planes_in_memory};
use tessera::options::{parse_positions, scale_min_variance, RegisterOptions, StitchOptions};
use tessera::report::{peak_memory_mib, round};
use tessera::stitch::{Acceptance, Blend, Corner, FrameSource, GridParams, InMemory, Motion, RegisterParams, SearchMethod, StitchParams, TileOrder, DEFAULT_OVERLAP};
use tessera::{AnyImage, AnyView, Parallelism};

/// The nominal positions `positions` names: a list of ``(x, y)`` pairs, or the path of a CSV
/// file (as ``--positions``); in micrometres where `pixel_size` is given.
fn positions_arg(positions: &Bound<'_, PyAny>, pixel_size: Option<f64>) -> PyResult<Nominal> {
    if let Ok(path) = positions.extract::<PathBuf>() {
        let text = std::fs::read_to_string(&path).map_err(|e| PyFileNotFoundError::new_err(format!("{}: {e}", path.display())))?;
        let q = parse_positions(&text, pixel_size, &path.display().to_string()).map_err(|e| value_error(format!("{e:#}")))?;
        return Ok(Nominal::Positions(q, Some(path.display().to_string())));
    }
    let pairs: Vec<(f64, f64)> = positions.extract().map_err(|_| type_error("positions: expected a list of (x, y) pairs or the path of a CSV file"))?;
    if let Some(bad) = pairs.iter().position(|q| !q.0.is_finite() || !q.1.is_finite()) {
        return Err(value_error(format!("positions[{bad}] is not finite")));
    }
    let scale = match pixel_size {
        Some(s) if !(s.is_finite() && s > 0.0) => return Err(value_error(format!("pixel_size = {s} must be finite and positive"))),
        Some(s) => s,
        None => 1.0,
    };
    Ok(Nominal::Positions(pairs.into_iter().map(|(x, y)| (x / scale, y / scale)).collect(), None))
}

/// `estimate` or an image file, as ``--flatfield`` / ``--darkfield``.
fn field_arg(value: Option<String>, name: &str) -> PyResult<Option<FieldSource>> {
    value.map(|v| FieldSource::parse(&v, name).map_err(|e| value_error(format!("{e:#}")))).transpose()
}

/// A grid's mosaic: one image, or its planes (channel by channel within each time point)
/// on one canvas.
enum Mosaic {
    One(AnyImage),
    Planes(Vec<AnyImage>),
}

/// The run and its mosaic composited in memory from the tiles as corrected, and the report.
fn run_and_composite(source: &dyn FrameSource, labels: &[String], p: StitchParams, given: Option<f64>, o: &GridOptions, planes: &Planes, par: Parallelism) -> anyhow::Result<(Mosaic, serde_json::Value)> {
    let p = scale_min_variance(p, given, source);
    let mut progress = |_| match Python::attach(|py| py.check_signals()) {
        Ok(()) => ControlFlow::Continue(()),
        Err(_) => ControlFlow::Break(()),
    };
    let extra = |secs: f64| json!({"backend": "cpu", "seconds": round(secs, 4), "output": null});
    if planes.asked() {
        let t0 = std::time::Instant::now();
        let run = register_planes(source, labels, &p, o, planes, par, &mut progress)?;
        let poses = run.poses(source.len());
        let (images, origin) = planes_in_memory(run.tiles(source).as_ref(), &poses, p.blend, usize::MAX)?;
        let size = images[0].size();
        let rep = run.report(labels, size, origin, &o.layout, extra(t0.elapsed().as_secs_f64()));
        return Ok((Mosaic::Planes(images), rep));
    }
    let run = register_grid(source, labels, &p, o, par, &mut progress)?;
    let canvas = composite_in_memory(run.tiles(source).as_ref(), &run.placed(), p.blend)?;
    let seams = run.seam_steps(source)?;
    let rep = run.report(labels, canvas.image.size(), canvas.origin, &o.layout, seams, extra(run.seconds));
    Ok((Mosaic::One(canvas.image), rep))
}

with_registration_keywords! {
/// Stitches the tiles of a microscope scan, as ``tessera stitch --grid`` does: every
/// neighbouring pair registered by NCC (see :func:`register_pair`) from its nominal offset,
/// pairs verified against the stage model fitted from the pairs that register (the overlap
/// and offsets per direction, the repeatability), positions solved together, tiles no
/// accepted pair reaches placed by the stage model (``"nominal"``) or, in a group joined to
/// the rest by none, ``"detached"`` with a component number; then the mosaic (``blend``).
///
/// ``tiles``: a list of arrays (one dtype and shape), a list of paths or one path (a
/// directory, a glob, a multi-page TIFF), in acquisition order; ``None`` with
/// ``tile_config``, whose file names them. The nominal layout is one of ``grid``
/// (``"COLSxROWS"``, with ``overlap`` percent, ``order`` ``"row"``, ``"column"``,
/// ``"snake-row"``, ``"snake-column"`` and ``start`` corner ``"top-left"`` ...),
/// ``positions`` (``(x, y)`` per tile, or a CSV file; micrometres where ``pixel_size``
/// gives micrometres per pixel) or ``tile_config`` (Fiji's TileConfiguration.txt).
/// ``stage_error``: how far (px) a pair may stand from the stage model. ``flatfield``:
/// ``"estimate"`` (from the tiles) or an image file, ``darkfield`` likewise: the tiles are
/// corrected for shading before registration and in the mosaic.
///
/// ``tiles`` may be a pattern of fields in the file name,
/// ``"scan/img_r{yy}_c{xx}_ch{c}.tif"`` (``{x}`` column, ``{y}`` row, ``{i}`` tile, ``{c}``
/// channel, ``{t}`` time point or cycle; ``{iii}`` three digits; ``*`` any text), which
/// gives the tiles' order, the grid, the channels and the time points (as the command
/// line's pattern input).
///
/// ``channels`` and ``time_points``: ``tiles`` holds the grid's blocks of tiles, channel by
/// channel within each time point; each time point is registered on ``register_channel``
/// (or placed as the first with ``reuse_positions``) and brought onto the first, every
/// channel placed with it, and the mosaic is then ``(time_points, channels, H, W)`` on one
/// canvas, the report with ``planes`` and ``time_points`` (as ``tessera stitch --channels
/// C --time-points T``). ``cycles`` instead of ``time_points``: cycles of a re-stained
/// slide, each registered and brought onto the first wherever the slide was put back, the
/// mosaic ``(1, cycles * channels, H, W)`` (as ``--cycles``).
///
/// Returns ``(mosaic, report)``: the mosaic array (the tiles' dtype) and the report dict
/// of ``tessera stitch --grid --report`` (``frames``, ``pairs``, ``components``,
/// ``stage_model``, ``shading``, ``panorama``, ``params``, ``run``). Raises ValueError for
/// a layout that does not fit the tiles or bad parameters, FileNotFoundError for paths
/// that name no tiles, KeyboardInterrupt on Ctrl-C. The pairs register on the CPU (on one
/// thread with ``single_thread``).
pub fn stitch_grid<'py>(
    py: Python<'py>,
    tiles: &Bound<'py, PyAny>,
    /, *,
    grid: Option<String> = None,
    positions: Option<Bound<'py, PyAny>> = None,
    tile_config: Option<PathBuf> = None,
    overlap: f64 = DEFAULT_OVERLAP * 100.0,
    order: String = name_of(TileOrder::default()),
    start: String = name_of(Corner::default()),
    pixel_size: Option<f64> = None,
    stage_error: f64 = GridParams::default().stage_error,
    flatfield: Option<String> = None,
    darkfield: Option<String> = None,
    channels: i64 = 1,
    time_points: i64 = 1,
    cycles: i64 = 1,
    register_channel: i64 = 0,
    reuse_positions: bool = false,
    ..args: RegisterOptions,
    blend: String = name_of(StitchParams::default().blend),
    coarse: i64 = StitchParams::default().coarse_candidates as i64,
    frame_cache: i64 = FRAME_CACHE_MIB as i64,
    single_thread: bool = false,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let par = if single_thread { Parallelism::Sequential } else { Parallelism::AllThreads };
    let options = StitchOptions { register: args, blend: choice::<Blend>("blend", &blend)?, coarse: count("coarse", coarse)?, ..StitchOptions::default() };
    let p = options.params().map_err(to_py)?;
    if darkfield.is_some() && flatfield.is_none() {
        return Err(value_error("darkfield needs flatfield (\"estimate\", or a file)"));
    }
    // Tiles named by a pattern give their grid, channels and time points (or cycles).
    let named = match tiles.extract::<PathBuf>() {
        Ok(path) if tessera::tile_names::is_pattern(&path) => Some(tessera::tile_names::resolve(&path).map_err(|e| PyFileNotFoundError::new_err(format!("{e:#}")))?),
        _ => None,
    };
    let (mut channels, mut time_points, mut cycles) = (count("channels", channels)?, count("time_points", time_points)?, count("cycles", cycles)?);
    let mut grid = grid;
    if let Some(named) = &named {
        (channels, time_points, cycles) = named.planes(channels, time_points, cycles).map_err(|e| value_error(format!("{e:#}")))?;
        if positions.is_none() && tile_config.is_none() {
            grid = named.grid(grid.as_deref(), order != name_of(TileOrder::default()) || start != name_of(Corner::default())).map_err(|e| value_error(format!("{e:#}")))?;
        } else if named.grid.is_some() {
            return Err(value_error("the file names give each tile's column and row: not with positions or tile_config"));
        }
    }
    let frames = |tiles: &Bound<'py, PyAny>| -> PyResult<Frames<'py>> {
        match &named {
            Some(n) => Ok(Frames::Files(n.files.clone())),
            None => frames_arg(tiles),
        }
    };
    let (tiles, nominal) = match (grid, positions, tile_config) {
        (Some(g), None, None) => (frames(tiles)?, Nominal::Grid(g)),
        (None, Some(q), None) => (frames(tiles)?, positions_arg(&q, pixel_size)?),
        (None, None, Some(cfg)) => {
            if !tiles.is_none() {
                return Err(value_error("tile_config names the tiles itself: give tiles=None"));
            }
            let entries = tessera::tile_config::read(&cfg).map_err(|e| PyFileNotFoundError::new_err(format!("{e:#}")))?;
            let files = entries.iter().map(|t| t.0.clone()).collect();
            (Frames::Files(files), Nominal::TileConfig(entries.into_iter().map(|t| t.1).collect(), cfg.display().to_string()))
        }
        _ => return Err(value_error("give exactly one of grid=\"COLSxROWS\", positions or tile_config")),
    };
    let layout = GridLayout { nominal, overlap_percent: overlap, order: choice::<TileOrder>("order", &order)?, start: choice::<Corner>("start", &start)?, pixel_size };
    let o = GridOptions { layout, stage_error, flatfield: field_arg(flatfield, "flatfield")?, darkfield: field_arg(darkfield, "darkfield")? };
    let planes = Planes::new(channels, time_points, cycles, count("register_channel", register_channel)?, reuse_positions)
        .map_err(|e| value_error(format!("{e:#}")))?;
    let cache_bytes = count("frame_cache", frame_cache)?.saturating_mul(1 << 20);
    let given = options.register.min_variance;
    let failed = |e: anyhow::Error| -> PyErr {
        if let Some(core) = e.downcast_ref::<tessera::Error>() {
            return match core {
                tessera::Error::Cancelled => pyo3::exceptions::PyKeyboardInterrupt::new_err("interrupted"),
                _ => value_error(format!("{e:#}")),
            };
        }
        let msg = format!("{e:#}");
        if msg.contains("cannot read") || msg.contains("could not be read") { PyOSError::new_err(msg) } else { value_error(msg) }
    };
    let result = match tiles {
        Frames::Files(files) => py.detach(|| {
            // Labels as the command line's: a multi-page TIFF names its pages.
            let (c, t) = planes.output();
            let (source, labels) = grid_source(&files, c * t, cache_bytes, read_ahead_depth(par))?;
            run_and_composite(source.as_ref(), &labels, p, given, &o, &planes, par)
        }),
        Frames::Arrays(arrays) => {
            let views = arrays.iter().enumerate().map(|(i, a)| a.view(&format!("tiles[{i}]"))).collect::<PyResult<Vec<AnyView<'_>>>>()?;
            let labels: Vec<String> = (0..views.len()).map(|i| format!("tiles[{i}]")).collect();
            py.detach(|| run_and_composite(&InMemory(&views), &labels, p, given, &o, &planes, par))
        }
    };
    let (mosaic, mut rep) = result.map_err(failed)?;
    py.check_signals()?;
    rep["run"]["peak_memory_mib"] = json!(peak_memory_mib().map(|m| round(m, 1)));
    let out = match mosaic {
        Mosaic::One(image) => image_to_numpy(py, image)?,
        Mosaic::Planes(images) => {
            let arrays = images.into_iter().map(|i| image_to_numpy(py, i)).collect::<PyResult<Vec<_>>>()?;
            let stacked = py.import("numpy")?.getattr("stack")?.call1((arrays,))?;
            let shape: Vec<usize> = stacked.getattr("shape")?.extract()?;
            let (c, t) = planes.output();
            let mut planes_shape = vec![t, c];
            planes_shape.extend(&shape[1..]);
            stacked.call_method1("reshape", (planes_shape,))?
        }
    };
    Ok((out, to_python(py, &rep)?))
}
}
