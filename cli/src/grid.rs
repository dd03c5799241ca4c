//! `tessera stitch --grid COLSxROWS` / `--positions FILE.csv`: microscope tile grids
//! (`tessera::stitch::grid`), the mosaic and a report in the sequences' contract plus
//! `pairs[]`.

use super::stitch::StitchArgs;
use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Instant;
use tessera::options::{parse_grid, parse_positions};
use tessera::report::{peak_memory_mib, round};
use tessera::stitch::{grid_positions, register_tiles, FrameSource, GridParams, Mosaic, StitchParams};
use tessera::{Choice, Parallelism};

/// Nominal positions from the CSV file at `path` ([`tessera::options::parse_positions`]).
pub fn read_positions(path: &Path, pixel_size: Option<f64>) -> Result<Vec<(f64, f64)>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    parse_positions(&text, pixel_size, &path.display().to_string())
}

/// The grid run: register, solve, composite, report.
pub fn run_grid(a: &StitchArgs, p: &StitchParams, source: &dyn FrameSource, labels: &[String]) -> Result<()> {
    // The nominal grid's tile size: the shape the first two usable tiles share (one odd
    // first tile must not set it), else the first usable tile's.
    let (mut first, mut previous, mut shared, mut why) = (None, None, None, None);
    let shapes = (0..source.len()).filter_map(|i| tessera::stitch::tile_shape(source, i).map_err(|e| why = why.take().or(Some(format!("{} ({}): {e}", i, labels[i])))).ok());
    for shape in shapes {
        first = first.or(Some(shape));
        if previous == Some(shape) {
            shared = Some(shape);
            break;
        }
        previous = Some(shape);
    }
    let tile = shared.or(first).ok_or_else(|| anyhow!("no tile could be read (tile {})", why.as_deref().unwrap_or("-")))?.size;
    let nominal = match (&a.grid, &a.positions) {
        (Some(g), None) => {
            let (cols, rows) = parse_grid(g)?;
            if cols * rows != source.len() {
                bail!("--grid {g} is {} tiles, but {} were given", cols * rows, source.len());
            }
            grid_positions(cols, rows, tile, a.overlap / 100.0, a.order, a.start)?
        }
        (None, Some(csv)) => {
            let q = read_positions(csv, a.pixel_size)?;
            if q.len() != source.len() {
                bail!("{} has {} positions, but {} tiles were given", csv.display(), q.len(), source.len());
            }
            q
        }
        _ => bail!("give either --grid COLSxROWS or --positions FILE.csv"),
    };
    let gp = GridParams { register: p.register, stage_error: a.stage_error, coarse_candidates: p.coarse_candidates };
    let t0 = Instant::now();
    let mosaic = register_tiles(source, &nominal, &gp, Parallelism::AllThreads, &mut |_| std::ops::ControlFlow::Continue(()))?;
    let placed: Vec<Option<(f64, f64)>> = mosaic.tiles.iter().map(|t| t.unreadable.is_none().then_some(t.position)).collect();
    let poses: Vec<_> = placed.iter().map(|p| p.map(tessera::stitch::Similarity::translation)).collect();
    // The composite takes the size and type of the tiles the registration kept (the
    // majority's), from the first of them.
    let kept = mosaic.tiles.iter().find(|t| t.unreadable.is_none()).ok_or_else(|| anyhow!("no tile could be used"))?;
    let first = source.frame(kept.index).map_err(|e| anyhow!("tile {} could not be read again: {e}", kept.index))?;
    let like = first.view().map_err(|e| anyhow!(e))?;
    let written = tessera::large::write_composite(source, &like, &poses, p.blend, &a.output, &super::stitch::output_options(a), &mut |_, _| Ok(())).map_err(|e| super::stitch::name_frame(e, labels))?;
    let secs = t0.elapsed().as_secs_f64();
    let (w, h) = written.size;
    let accepted = mosaic.pairs.iter().filter(|q| q.shift.is_some()).count();
    let registered = mosaic.tiles.iter().filter(|t| t.registered).count();
    println!(
        "{} tiles: {registered} placed by registration, {} at their stage position; {accepted} of {} pairs accepted; mosaic {w}x{h} -> {} ({secs:.2} s)",
        mosaic.tiles.len(),
        mosaic.tiles.len() - registered,
        mosaic.pairs.len(),
        written.path.display()
    );
    for t in mosaic.tiles.iter().filter(|t| !t.registered) {
        println!("tile {} ({}): {}", t.index, labels[t.index], tile_reason(&mosaic, t.index));
    }
    if let Some(path) = &a.report {
        let extra = json!({"seconds": round(secs, 4), "output": written.path.display().to_string(), "backend": "cpu",
                           "peak_memory_mib": peak_memory_mib().map(|m| round(m, 1)), "written": tessera::large::describe(&written)});
        let r = grid_report(&mosaic, labels, (w, h), written.origin, &gp, a, extra);
        tessera::io::write_bytes(path, serde_json::to_string_pretty(&r)?.as_bytes())?;
        println!("report -> {}", path.display());
    }
    Ok(())
}

fn tile_reason(m: &Mosaic, i: usize) -> String {
    match &m.tiles[i].unreadable {
        Some(why) => format!("left out: {why}"),
        None => "no accepted pair: placed at its stage position".into(),
    }
}

/// The grid report: `frames[]` as for sequences (`status` "ok", "nominal" or "skipped"),
/// `pairs[]` with each neighbouring pair's outcome and residual.
fn grid_report(m: &Mosaic, labels: &[String], (w, h): (usize, usize), origin: (i64, i64), gp: &GridParams, a: &StitchArgs, extra: Value) -> Value {
    let frames: Vec<Value> = m
        .tiles
        .iter()
        .map(|t| {
            let placed = t.unreadable.is_none();
            let mut o = json!({
                "index": t.index,
                "file": labels.get(t.index).cloned().unwrap_or_default(),
                "x": placed.then(|| round(t.position.0, 3)),
                "y": placed.then(|| round(t.position.1, 3)),
                "status": if t.registered { "ok" } else if placed { "nominal" } else { "skipped" },
                "residual": m.pairs.iter().filter(|q| q.a == t.index || q.b == t.index).filter_map(|q| q.residual).fold(None, |acc: Option<f64>, r| Some(acc.map_or(r, |x| x.max(r)))).map(|r| round(r, 4)),
            });
            if !t.registered {
                o["reason"] = json!(tile_reason(m, t.index));
            }
            o
        })
        .collect();
    let pairs: Vec<Value> = m
        .pairs
        .iter()
        .map(|q| {
            json!({
                "a": q.a, "b": q.b,
                "status": if q.shift.is_some() { "accepted" } else { "rejected" },
                "dx": q.shift.map(|s| round(s.0, 3)), "dy": q.shift.map(|s| round(s.1, 3)),
                "ncc": round(q.ncc, 4), "margin": round(q.margin, 4), "vectors_used": q.vectors_used,
                "residual": q.residual.map(|r| round(r, 4)),
                "reason": q.skip,
            })
        })
        .collect();
    let r = &gp.register;
    // `order` and `start` as this report has always spelt them: the variant names in lower
    // case, without the hyphens of the flags' values (`snakerow`, `topleft`).
    let unhyphenated = |name: &str| name.replace('-', "");
    json!({
        "frames": frames,
        "pairs": pairs,
        "panorama": {"width": w, "height": h, "origin_x": origin.0, "origin_y": origin.1, "reference_frame": 0,
                     "origin_meaning": "panorama pixel (X, Y) shows what tile 0 shows at (X + origin_x, Y + origin_y)"},
        "params": {"mode": "grid", "grid": a.grid, "positions": a.positions.as_ref().map(|p| p.display().to_string()),
                   "overlap_percent": a.overlap, "order": unhyphenated(a.order.name()), "start": unhyphenated(a.start.name()),
                   "pixel_size": a.pixel_size, "stage_error": gp.stage_error, "coarse_candidates": gp.coarse_candidates,
                   "rsz": r.rsz, "accept": r.acceptance.name(), "null_margin": r.null_margin, "min_coefficient": r.min_coefficient,
                   "npts": r.npts, "search_radius": r.search_radius},
        "run": extra,
    })
}
