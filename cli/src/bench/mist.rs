//! The tile grid at MIST's published workload size (`tessera bench stitch --filter mist`;
//! run only when asked, it writes about 15 GB): 42 x 59 = 2 478 16-bit tiles of 1392 x 1040
//! pixels, 10 % overlap, snake-row, cut as the 10 x 10 case's are (`grid.rs`: stage error up
//! to 2 % of a tile, camera noise, 15 % vignetting), saved once as TIFF files under
//! `$TESSERA_BENCH_DATA` (else the system's temporary folder) and kept for the next run.
//! Timed as the command line runs it, once: the tiles read from disk on demand through the
//! frame cache, registration and solve (`tessera::grid::register_grid`), then the composite
//! streamed to a pyramidal OME-TIFF (`tessera::large::write_composite`), with the peak
//! resident memory of the whole run and the positions' error against the truth. MIST
//! reports 43 s for this size with one GPU and two quad-core Xeons.

use super::grid::{position_errors, stage_and_truth, tile, OVERLAP, TILE};
use super::memory::{peak_rss, reset_peak};
use super::Recorder;
use anyhow::{anyhow, Context, Result};
use rayon::prelude::*;
use serde_json::json;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::Instant;
use tessera::grid::{register_grid, GridLayout, GridOptions, Nominal};
use tessera::large::{write_composite, OutputOptions};
use tessera::stitch::{Blend, Corner, GridParams, Similarity, StitchParams, TileOrder};
use tessera::{AnyImage, Parallelism};

const COLS: usize = 42;
const ROWS: usize = 59;

pub fn run(r: &mut Recorder) -> Result<()> {
    let name = format!("grid_mist_{COLS}x{ROWS}");
    if !r.asks_for(&name) {
        return Ok(());
    }
    let (_, truth) = stage_and_truth(COLS, ROWS, 42)?;
    let dir = std::env::var_os("TESSERA_BENCH_DATA").map_or_else(std::env::temp_dir, PathBuf::from).join(format!("tessera-mist-{COLS}x{ROWS}"));
    let t = Instant::now();
    let files = tiles_on_disk(&dir, &truth)?;
    eprintln!("{name}: {} tiles in {} ({:.0} s to make the missing ones)", files.len(), dir.display(), t.elapsed().as_secs_f64());

    let params = json!({"cols": COLS, "rows": ROWS, "tile": [TILE.0, TILE.1], "bits": 16, "overlap_percent": OVERLAP * 100.0,
                        "stage_error_percent": 2.0, "order": "snake-row", "source": "TIFF files through the 64 MiB frame cache"});
    let out = dir.with_extension("ome.tif");
    let reset = reset_peak();
    let t0 = Instant::now();
    let (source, labels) = tessera::frames::frame_source(&files, 64 << 20, tessera::frames::read_ahead_depth(Parallelism::AllThreads))?;
    let layout = GridLayout { nominal: Nominal::Grid(format!("{COLS}x{ROWS}")), overlap_percent: OVERLAP * 100.0, order: TileOrder::SnakeRow, start: Corner::TopLeft, pixel_size: None };
    let options = GridOptions { layout, stage_error: GridParams::default().stage_error, flatfield: None, darkfield: None };
    let run = register_grid(source.as_ref(), &labels, &StitchParams::default(), &options, Parallelism::AllThreads, &mut |_| ControlFlow::Continue(()))?;
    let register_ms = t0.elapsed().as_secs_f64() * 1e3;
    let poses: Vec<_> = run.placed().iter().map(|p| p.map(Similarity::translation)).collect();
    let like = source.frame(0).map_err(|e| anyhow!(e))?;
    let written = write_composite(source.as_ref(), &like.view().map_err(|e| anyhow!(e))?, &poses, Blend::Overwrite, &out, &OutputOptions::default(), &mut |_, _| Ok(()))?;
    let whole_ms = t0.elapsed().as_secs_f64() * 1e3;
    let peak = peak_rss().filter(|_| reset);
    let bytes = std::fs::metadata(&written.path).map(|m| m.len()).ok();
    let _ = std::fs::remove_file(&written.path);

    let mosaic = &run.mosaic;
    let (mean_error, max_error) = position_errors(mosaic, &truth);
    r.record(
        &name,
        params,
        "cpu",
        json!({
            "whole_ms": whole_ms.round(),
            "registration_and_solve_ms": register_ms.round(),
            "composite_to_ome_tiff_ms": (whole_ms - register_ms).round(),
            "peak_rss_mib": peak.map(|b| (b as f64 / (1 << 20) as f64).round()),
            "mosaic": [written.size.0, written.size.1],
            "ome_tiff_bytes": bytes,
            "ome_tiff_levels": written.ome.as_ref().map_or(0, |o| o.levels().len()),
            "mean_error_px": mean_error,
            "max_error_px": max_error,
            "tiles_ok": mosaic.tiles.iter().filter(|t| t.status() == "ok").count(),
            "pairs_accepted": mosaic.pairs.iter().filter(|q| q.shift.is_some()).count(),
            "pairs": mosaic.pairs.len(),
        }),
    );
    Ok(())
}

/// The tiles at `truth` as 16-bit TIFF files in `dir`, in acquisition order; the ones
/// missing (a first run, or one stopped part way) are cut and written on every core.
fn tiles_on_disk(dir: &std::path::Path, truth: &[(f64, f64)]) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let files: Vec<PathBuf> = (0..truth.len()).map(|i| dir.join(format!("tile_{i:04}.tif"))).collect();
    files
        .par_iter()
        .enumerate()
        .filter(|(_, f)| !f.exists())
        .try_for_each(|(i, f)| tessera::io::save(&AnyImage::U16(tile(truth[i], i as u64)?), f))?;
    Ok(files)
}
