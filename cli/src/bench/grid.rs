//! The grid case of the `stitch` suite: a 10 x 10 grid of 1392 x 1040 16-bit tiles (the
//! camera of MIST's public reference scans) overlapping by 10 %, registered and solved
//! (`stitch::register_tiles`), then composited in strips to a pyramidal OME-TIFF (the
//! command line's `write_composite`), each timed apart, with the process's peak resident
//! memory during each (Linux `VmHWM`, reset before it; the tiles themselves, held in
//! memory for the run, are part of it and recorded beside it, as is the resident memory
//! before, which the suite's earlier cases leave in the allocator) and the positions' error
//! against the truth, so a fast run that is wrong shows.
//!
//! The tiles are cut from a procedural specimen (value noise at three scales, the detail of
//! cells in tissue) at stage positions off by up to 2 % of a tile, subpixel, so the truth is
//! exact; each tile has camera noise (sigma 1 % of the range) and a vignetting that darkens
//! its corners by 15 %, which does not move with the content.

use super::memory::{current_rss, peak_rss, reset_peak};
use super::{Bench, Recorder};
use tessera::large::{write_composite, OutputOptions};
use anyhow::{anyhow, Result};
use serde_json::json;
use std::ops::ControlFlow;
use tessera::stitch::{grid_positions, register_tiles, Blend, Corner, GridParams, InMemory, Mosaic, SplitMix64, TileOrder};
use tessera::{AnyView, Image, Parallelism};

pub(super) const TILE: (usize, usize) = (1392, 1040);
pub(super) const OVERLAP: f64 = 0.1;
/// Largest stage error, a fraction of the tile, per axis.
const JITTER: f64 = 0.02;

pub fn run(b: &Bench, r: &mut Recorder) -> Result<()> {
    let (cols, rows) = if b.quick { (3, 3) } else { (10, 10) };
    let name = format!("grid_{cols}x{rows}");
    if !r.wants(&name) {
        return Ok(());
    }
    let (nominal, truth) = stage_and_truth(cols, rows, 20)?;
    let tiles = cut_tiles(&truth)?;
    let views: Vec<AnyView<'_>> = tiles.iter().map(|t| AnyView::U16(t.view())).collect();
    let source = InMemory(&views);
    let params = json!({"cols": cols, "rows": rows, "tile": [TILE.0, TILE.1], "bits": 16, "overlap_percent": OVERLAP * 100.0,
                        "stage_error_percent": JITTER * 100.0, "order": "snake-row"});
    let reps = if b.quick { 1 } else { 3 };
    let tiles_mib = (tiles.len() * TILE.0 * TILE.1 * 2) as f64 / (1 << 20) as f64;

    let mut mosaic = None;
    let before = current_rss();
    let reset = reset_peak();
    let register_ms = r.time(&format!("{name}_registration_and_solve"), params.clone(), "cpu", reps, || {
        mosaic = Some(register_tiles(&source, &nominal, &GridParams::default(), Parallelism::AllThreads, &mut |_| ControlFlow::Continue(()))?);
        Ok::<_, tessera::Error>(())
    });
    let register_peak = peak_rss().filter(|_| reset);
    let mosaic = mosaic.ok_or_else(|| anyhow!("the grid did not register"))?;

    let placed: Vec<_> = mosaic.tiles.iter().map(|t| Some(tessera::stitch::Similarity::translation(t.position))).collect();
    let out = std::env::temp_dir().join(format!("tessera-bench-grid-{}.ome.tif", std::process::id()));
    let opts = OutputOptions::default();
    let mut levels = 0;
    let reset = reset_peak();
    let composite_ms = r.time(&format!("{name}_composite_to_ome_tiff"), params.clone(), "cpu", reps, || {
        let w = write_composite(&source, &views[0], &placed, Blend::Overwrite, &out, &opts, &mut |_, _| Ok(()))?;
        levels = w.ome.map_or(0, |o| o.levels().len());
        Ok::<_, anyhow::Error>(())
    });
    let composite_peak = peak_rss().filter(|_| reset);
    let bytes = std::fs::metadata(&out).map(|m| m.len()).ok();
    let _ = std::fs::remove_file(&out);

    if let (Some(a), Some(c)) = (register_ms, composite_ms) {
        r.record(&format!("{name}_whole_ms"), params.clone(), "cpu", json!((a + c).round()));
    }
    let mib = |b: Option<u64>| b.map(|b| (b as f64 / (1 << 20) as f64).round());
    r.record(
        &format!("{name}_peak_rss_mib"),
        params.clone(),
        "cpu",
        json!({"registration": mib(register_peak), "composite": mib(composite_peak), "before": mib(before), "tiles_held": tiles_mib.round()}),
    );
    let (mean_error, max_error) = position_errors(&mosaic, &truth);
    r.record(
        &format!("{name}_accuracy"),
        params,
        "cpu",
        json!({
            "mean_error_px": mean_error,
            "max_error_px": max_error,
            "tiles_registered": mosaic.tiles.iter().filter(|t| t.registered).count(),
            "pairs_accepted": mosaic.pairs.iter().filter(|q| q.shift.is_some()).count(),
            "pairs": mosaic.pairs.len(),
            "ome_tiff_levels": levels,
            "ome_tiff_bytes": bytes,
        }),
    );
    Ok(())
}

/// The nominal snake-row positions of a `cols x rows` grid of [`TILE`] tiles overlapping by
/// [`OVERLAP`], and the true ones: each off by a stage error drawn from `seed`.
pub(super) fn stage_and_truth(cols: usize, rows: usize, seed: u64) -> Result<(Vec<(f64, f64)>, Vec<(f64, f64)>)> {
    let nominal = grid_positions(cols, rows, TILE, OVERLAP, TileOrder::SnakeRow, Corner::TopLeft)?;
    let mut rng = SplitMix64::new(seed);
    let truth = nominal.iter().map(|q| (q.0 + jitter(&mut rng, TILE.0), q.1 + jitter(&mut rng, TILE.1))).collect();
    Ok((nominal, truth))
}

/// The mean and largest distance of the mosaic's tiles from `truth` (relative to tile 0),
/// rounded to 1e-4 px.
pub(super) fn position_errors(mosaic: &Mosaic, truth: &[(f64, f64)]) -> (f64, f64) {
    let errors: Vec<f64> = mosaic
        .tiles
        .iter()
        .map(|t| (t.position.0 - (truth[t.index].0 - truth[0].0)).hypot(t.position.1 - (truth[t.index].1 - truth[0].1)))
        .collect();
    let round = |v: f64| (v * 1e4).round() / 1e4;
    (round(errors.iter().sum::<f64>() / errors.len() as f64), round(errors.iter().cloned().fold(0.0, f64::max)))
}

/// A stage error in pixels, uniform within +-[`JITTER`] of `side`.
fn jitter(rng: &mut SplitMix64, side: usize) -> f64 {
    (rng.uniform() * 2.0 - 1.0) * JITTER * side as f64
}

/// The tiles whose top-left corners lie at `corners` on the specimen, cut on two threads.
fn cut_tiles(corners: &[(f64, f64)]) -> Result<Vec<Image<u16>>> {
    let half = corners.len().div_ceil(2);
    let (first, second) = std::thread::scope(|s| {
        let a = s.spawn(|| corners[..half].iter().enumerate().map(|(i, &c)| tile(c, i as u64)).collect::<Result<Vec<_>>>());
        let b = corners[half..].iter().enumerate().map(|(i, &c)| tile(c, (half + i) as u64)).collect::<Result<Vec<_>>>();
        (a.join(), b)
    });
    let mut tiles = first.map_err(|_| anyhow!("a tile-cutting thread panicked"))??;
    tiles.extend(second?);
    Ok(tiles)
}

/// One 16-bit tile at `corner`: the specimen (offset 2 000, range 40 000), darkened towards
/// the corners by 15 %, plus camera noise of sigma 400.
pub(super) fn tile(corner: (f64, f64), seed: u64) -> Result<Image<u16>> {
    let mut rng = SplitMix64::new(1000 + seed);
    let (cx, cy) = (TILE.0 as f64 / 2.0, TILE.1 as f64 / 2.0);
    Ok(Image::from_fn(TILE.0, TILE.1, |u, v| {
        let r2 = ((u as f64 - cx) / cx).powi(2) / 2.0 + ((v as f64 - cy) / cy).powi(2) / 2.0;
        let value = 2000.0 + 40000.0 * specimen(corner.0 + u as f64, corner.1 + v as f64) * (1.0 - 0.15 * r2) + 400.0 * rng.normal();
        value.clamp(0.0, 65535.0).round() as u16
    })?)
}

/// The specimen's brightness in [0, 1] at any real position: value noise at scales of 23,
/// 7 and 2.5 pixels.
fn specimen(x: f64, y: f64) -> f64 {
    0.55 * value_noise(x / 23.0, y / 23.0, 1) + 0.3 * value_noise(x / 7.0, y / 7.0, 2) + 0.15 * value_noise(x / 2.5, y / 2.5, 3)
}

/// Random values at the integer lattice, joined by smoothstep-weighted bilinear
/// interpolation (continuous, so a subpixel shift of the sampling is a true one).
fn value_noise(x: f64, y: f64, octave: u64) -> f64 {
    let (x0, y0) = (x.floor(), y.floor());
    let smooth = |t: f64| t * t * (3.0 - 2.0 * t);
    let (fx, fy) = (smooth(x - x0), smooth(y - y0));
    let (i, j) = (x0 as i64, y0 as i64);
    let at = |di: i64, dj: i64| lattice(i + di, j + dj, octave);
    let top = at(0, 0) + (at(1, 0) - at(0, 0)) * fx;
    let bottom = at(0, 1) + (at(1, 1) - at(0, 1)) * fx;
    top + (bottom - top) * fy
}

/// A uniform value in [0, 1) for lattice point (i, j) of an octave.
fn lattice(i: i64, j: i64, octave: u64) -> f64 {
    let key = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (j as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F) ^ octave.wrapping_mul(0x1656_67B1_9E37_79F9);
    SplitMix64::new(key).uniform()
}
