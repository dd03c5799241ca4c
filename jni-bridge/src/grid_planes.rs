//! Tile grids in channels and time points or cycles through `Native.stitchGrid` (options
//! `channels`, `time-points`, `cycles`, `register-channel`, `reuse-positions`): the tiles are the grid's blocks,
//! channel by channel within each time point, registered and brought together by the
//! library's `grid::register_planes` (as `tessera stitch --grid ... --channels C
//! --time-points T` does), and every plane composited on one canvas in memory
//! (`large::planes_in_memory`), for ImageJ to show as a hyperstack. A mosaic of planes too
//! large for memory, or one asked to be saved, is left to the command line, which streams
//! every plane into one OME-TIFF: the error says how.

use crate::error::{bad_arg, BridgeError, Result};
use crate::grid::{grid_result, GridRun};
use crate::options::OptValue;
use crate::progress::with_java_progress;
use jni::objects::JObject;
use jni::Env;
use tessera::grid::{register_planes, GridLayout, GridOptions, Nominal, Planes, PlanesRun};
use tessera::large::planes_in_memory;
use tessera::stitch::{InMemory, StitchParams};
use tessera_core::stitch::{grid_positions, neighbours};
use tessera_core::{AnyImage, AnyView, Parallelism};

/// Registers and composites the `tiles` (`C x T` blocks of a `cols x rows` grid) with the
/// options of `run`; the mosaic's planes together take at most `limit` pixels. The result's
/// tables are time point 0's, of its registration channel.
pub(crate) fn stitch_planes<'l>(env: &mut Env<'l>, progress: &JObject<'_>, tiles: &[AnyImage], (cols, rows): (usize, usize), run: &GridRun, force: bool, limit: usize) -> Result<JObject<'l>> {
    let q = run.planes;
    let planes = Planes::new(q.channels, q.time_points, run.cycles, q.register_channel, q.reuse_positions).map_err(|e| bad_arg(format!("{e:#}")))?;
    let n = planes.tiles_per_block(tiles.len()).map_err(|e| bad_arg(format!("{e:#}")))?;
    if n != cols * rows {
        return Err(bad_arg(format!(
            "a {cols}x{rows} grid in {} channels and {} {} is {} tiles, but {} were given",
            planes.channels,
            planes.time_points,
            if planes.cycles { "cycles" } else { "time points" },
            cols * rows * planes.channels * planes.time_points,
            tiles.len()
        )));
    }
    if force {
        return Err(bad_arg(format!("channels and time points are saved as one OME-TIFF by the command line: {}", command_line(cols, rows, run, &planes))));
    }
    let views = tiles.iter().map(|t| t.view().ok_or_else(|| BridgeError::State("internal: a tile image without a view".into()))).collect::<Result<Vec<AnyView<'_>>>>()?;
    let source = InMemory(&views);
    let labels: Vec<String> = (1..=tiles.len()).map(|i| format!("tile {i}")).collect();
    let layout = GridLayout { nominal: Nominal::Grid(format!("{cols}x{rows}")), overlap_percent: run.overlap_percent, order: run.order, start: run.start, pixel_size: None };
    let options = GridOptions { layout, stage_error: run.grid.stage_error, flatfield: run.flatfield.source("flatfield")?, darkfield: run.darkfield.source("darkfield")? };
    if options.darkfield.is_some() && options.flatfield.is_none() {
        return Err(bad_arg("darkfield needs flatfield (estimate, or a file)".to_string()));
    }
    let p = StitchParams { register: run.grid.register, coarse_candidates: run.grid.coarse_candidates, blend: run.blend, ..StitchParams::default() };
    // Progress counts the pairs of each registered time point in turn.
    let nominal = grid_positions(cols, rows, views[0].size(), run.overlap_percent / 100.0, run.order, run.start)?;
    let pairs = neighbours(&nominal, views[0].size()).len();
    let mut failure = None;
    let registered: Option<PlanesRun> = with_java_progress(env, progress, pairs, ("grid stitching", "pair"), |report| {
        match register_planes(&source, &labels, &p, &options, &planes, Parallelism::AllThreads, report) {
            Ok(r) => Ok(Some(r)),
            Err(e) if matches!(e.downcast_ref::<tessera_core::Error>(), Some(tessera_core::Error::Cancelled)) => Err(tessera_core::Error::Cancelled),
            Err(e) => {
                failure = Some(e);
                Ok(None)
            }
        }
    })?;
    let Some(registered) = registered else {
        return Err(failure.map_or_else(|| BridgeError::State("internal: the grid run ended without a result".into()), |e| bad_arg(format!("{e:#}"))));
    };
    let poses = registered.poses(tiles.len());
    let per_plane = limit / poses.len().max(1);
    let (images, origin) = planes_in_memory(registered.tiles(&source).as_ref(), &poses, run.blend, per_plane).map_err(|e| {
        bad_arg(format!("{e:#}; the command line streams every plane into one OME-TIFF: {}", command_line(cols, rows, run, &planes)))
    })?;
    grid_result(env, &images, origin, &registered.runs[0].mosaic, None, planes.output())
}

/// The command line that stitches the same planes into an OME-TIFF.
fn command_line(cols: usize, rows: usize, run: &GridRun, q: &Planes) -> String {
    format!(
        "tessera stitch FOLDER --grid {cols}x{rows} --overlap {} --order {} --start {} --channels {} --{} {} --register-channel {}{} -o mosaic.ome.tif",
        run.overlap_percent,
        run.order.show(),
        run.start.show(),
        q.channels,
        if q.cycles { "cycles" } else { "time-points" },
        q.time_points,
        q.register_channel,
        if q.reuse_positions { " --reuse-positions" } else { "" }
    )
}
