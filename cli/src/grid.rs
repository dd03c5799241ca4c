//! `tessera stitch --grid COLSxROWS` / `--positions FILE.csv` / `--tile-config FILE`:
//! microscope tile grids (`tessera::stitch::register_tiles`), the mosaic, a report in the
//! sequences' contract plus `pairs[]`, `components[]` and `stage_model`, and Fiji's
//! `TileConfiguration.registered.txt`; with `--flatfield`, the tiles corrected for shading
//! (`tessera::flatfield`) before registration and in the mosaic.

use super::stitch::StitchArgs;
use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Instant;
use tessera::options::{parse_grid, parse_positions};
use tessera::report::{peak_memory_mib, round};
use tessera::flatfield::FieldSource;
use tessera::shading::Corrected;
use tessera::stitch::{grid_positions, register_tiles, seam_steps, FrameSource, GridParams, Mosaic, StitchParams};
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
        (None, None) if a.tile_config.is_some() => {
            let cfg = a.tile_config.as_deref().unwrap_or(Path::new(""));
            tessera::tile_config::read(cfg)?.into_iter().map(|t| t.1).collect()
        }
        _ => bail!("give one of --grid COLSxROWS, --positions FILE.csv or --tile-config FILE"),
    };
    let gp = GridParams { register: p.register, stage_error: a.stage_error, coarse_candidates: p.coarse_candidates };
    let t0 = Instant::now();
    // Shading: the tiles corrected as they are read, for registration and the mosaic.
    let field = |v: &Option<String>, flag: &str| v.as_deref().map(|s| FieldSource::parse(s, flag)).transpose();
    let (flat, dark) = (field(&a.flatfield, "--flatfield")?, field(&a.darkfield, "--darkfield")?);
    if let Some(out) = &a.flatfield_out {
        if !tessera::io::is_tiff(out) {
            bail!("--flatfield-out {}: the flat field is written as a 32-bit float TIFF; name it .tif", out.display());
        }
    }
    let shading_t0 = Instant::now();
    let prepared = tessera::flatfield::prepare(flat.as_ref(), dark.as_ref(), source, tile)?;
    let shading_secs = shading_t0.elapsed().as_secs_f64();
    let raw = source;
    let corrected = prepared.as_ref().map(|q| Corrected { inner: raw, shading: &q.shading });
    let source: &dyn FrameSource = match &corrected {
        Some(c) => c,
        None => raw,
    };
    if let Some(q) = &prepared {
        let how = match &q.estimate {
            Some(e) => format!(
                "estimated from {} tiles ({} left out, surface of degree {}){}{} in {shading_secs:.2} s",
                e.tiles_used,
                e.excluded.len(),
                e.degree,
                if e.reliable { "" } else { "; few tiles: the estimate is unreliable, give a flat field from a file if the seams show" },
                e.dark_level.map_or(String::new(), |d| format!("; dark level {d:.1}{}", e.dark_note.as_deref().map_or(String::new(), |n| format!(" ({n})"))))
            ),
            None => "from the file".into(),
        };
        eprintln!("shading: flat field {how}; vignetting {:.1} % (the darkest pixel against the brightest)", q.shading.vignetting() * 100.0);
        if let Some(out) = &a.flatfield_out {
            tessera::flatfield::write_flat(&q.shading, out)?;
            println!("flat field -> {}", out.display());
        }
    }
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
    let count = |status: &str| mosaic.tiles.iter().filter(|t| t.status() == status).count();
    println!(
        "{} tiles: {} joined by registration, {} detached, {} where the stage model puts them, {} left out; {accepted} of {} pairs accepted; mosaic {w}x{h} -> {} ({secs:.2} s)",
        mosaic.tiles.len(),
        count("ok"),
        count("detached"),
        count("nominal"),
        count("skipped"),
        mosaic.pairs.len(),
        written.path.display()
    );
    for t in mosaic.tiles.iter().filter(|t| !t.registered) {
        println!("tile {} ({}): {}", t.index, labels[t.index], tile_reason(&mosaic, t.index));
    }
    eprintln!("{}", describe_model(&mosaic, tile, a));
    // With shading corrected, the step of brightness across the seams before and after.
    let seams = match &prepared {
        Some(_) => {
            let accepted: Vec<(usize, usize)> = mosaic.pairs.iter().filter(|q| q.shift.is_some()).map(|q| (q.a, q.b)).collect();
            let mean = |s: Vec<Option<f64>>| {
                let v: Vec<f64> = s.into_iter().flatten().collect();
                (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
            };
            let before = mean(seam_steps(raw, &placed, &accepted)?);
            let after = mean(seam_steps(source, &placed, &accepted)?);
            if let (Some(b), Some(c)) = (before, after) {
                eprintln!("seams: mean step of brightness {b:.2} grey levels uncorrected, {c:.2} corrected");
            }
            before.zip(after)
        }
        None => None,
    };
    // Fiji's registered configuration, beside the report (or the mosaic).
    let beside = a.report.as_deref().unwrap_or(&a.output);
    let registered_config = beside.parent().unwrap_or(Path::new("")).join(tessera::tile_config::REGISTERED_NAME);
    let files: Vec<std::path::PathBuf> = labels.iter().map(std::path::PathBuf::from).collect();
    tessera::tile_config::write(&registered_config, &files, &mosaic.tiles.iter().map(|t| t.position).collect::<Vec<_>>())?;
    println!("registered positions -> {}", registered_config.display());
    if let Some(path) = &a.report {
        let extra = json!({"seconds": round(secs, 4), "output": written.path.display().to_string(), "backend": "cpu",
                           "peak_memory_mib": peak_memory_mib().map(|m| round(m, 1)), "written": tessera::large::describe(&written)});
        let mut r = grid_report(&mosaic, labels, tile, (w, h), written.origin, &gp, a, extra);
        r["shading"] = tessera::flatfield::describe(prepared.as_ref(), seams);
        tessera::io::write_bytes(path, serde_json::to_string_pretty(&r)?.as_bytes())?;
        println!("report -> {}", path.display());
    }
    Ok(())
}

fn tile_reason(m: &Mosaic, i: usize) -> String {
    match (&m.tiles[i].unreadable, m.tiles[i].component) {
        (Some(why), _) => format!("left out: {why}"),
        (None, Some(k)) => format!("detached: component {k}, which no accepted pair joins to the mosaic; placed as a whole by the stage model"),
        (None, None) => "no accepted pair: placed by the stage model".into(),
    }
}

/// The stage model in a line: the overlap each direction's pairs measured, against the
/// nominal one, and the repeatability.
fn describe_model(m: &Mosaic, tile: (usize, usize), a: &StitchArgs) -> String {
    let overlap = m.model.overlap(tile);
    let pct = |o: Option<f64>| o.map_or("not measured".to_string(), |v| format!("{:.1} %", v * 100.0));
    let nominal = if a.grid.is_some() { format!(" (nominal {} %)", a.overlap) } else { String::new() };
    let corrected = if m.model.correction == [(0.0, 0.0); 2] { "the stage's offsets kept" } else { "the stage's offsets corrected" };
    let repeat = m.model.repeatability.map_or("not measured".to_string(), |r| format!("{r:.1} px"));
    format!(
        "stage model: overlap {} horizontally, {} vertically{nominal}, {corrected}; repeatability {repeat} (from {} + {} registered pairs)",
        pct(overlap[0]),
        pct(overlap[1]),
        m.model.support[0],
        m.model.support[1]
    )
}

/// The grid report: `frames[]` as for sequences (`status` "ok", "detached", "nominal" or
/// "skipped", and `component`), `pairs[]` with each neighbouring pair's outcome, how it was
/// verified and its residual, `components[]` and `stage_model`.
#[allow(clippy::too_many_arguments)]
fn grid_report(m: &Mosaic, labels: &[String], tile: (usize, usize), (w, h): (usize, usize), origin: (i64, i64), gp: &GridParams, a: &StitchArgs, extra: Value) -> Value {
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
                "status": t.status(),
                "component": t.component,
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
                "verified_by": q.verified_by.map(|v| v.name()),
                "deviation": q.deviation.map(|d| round(d, 3)),
                "residual": q.residual.map(|r| round(r, 4)),
                "reason": q.skip,
            })
        })
        .collect();
    let r = &gp.register;
    // `order` and `start` as this report has always spelt them: the variant names in lower
    // case, without the hyphens of the flags' values (`snakerow`, `topleft`).
    let unhyphenated = |name: &str| name.replace('-', "");
    let components: Vec<Value> = m
        .components
        .iter()
        .enumerate()
        .map(|(k, tiles)| json!({"index": k, "tiles": tiles, "status": if k == 0 { "ok" } else { "detached" }}))
        .collect();
    let md = &m.model;
    let overlap = md.overlap(tile);
    let pair = |v: Option<(f64, f64)>| v.map(|(x, y)| json!([round(x, 3), round(y, 3)]));
    let stage_model = json!({
        "overlap_x_percent": overlap[0].map(|o| round(o * 100.0, 2)),
        "overlap_y_percent": overlap[1].map(|o| round(o * 100.0, 2)),
        "horizontal_offset": pair(md.measured[0]), "vertical_offset": pair(md.measured[1]),
        "horizontal_correction": pair(Some(md.correction[0])), "vertical_correction": pair(Some(md.correction[1])),
        "repeatability_px": md.repeatability.map(|r| round(r, 3)),
        "pairs": md.support,
        "meaning": "overlap and offsets (dx, dy) measured per direction (the median of the registered pairs, forwards); corrections added to the nominal offsets where they stand clear of the pairs' spread; repeatability: the distance from the model within which a pair is verified",
    });
    json!({
        "frames": frames,
        "pairs": pairs,
        "components": components,
        "stage_model": stage_model,
        "panorama": {"width": w, "height": h, "origin_x": origin.0, "origin_y": origin.1, "reference_frame": 0,
                     "origin_meaning": "panorama pixel (X, Y) shows what tile 0 shows at (X + origin_x, Y + origin_y)"},
        "params": {"mode": "grid", "grid": a.grid, "positions": a.positions.as_ref().map(|p| p.display().to_string()),
                   "tile_config": a.tile_config.as_ref().map(|p| p.display().to_string()),
                   "overlap_percent": a.overlap, "order": unhyphenated(a.order.name()), "start": unhyphenated(a.start.name()),
                   "pixel_size": a.pixel_size, "stage_error": gp.stage_error, "coarse_candidates": gp.coarse_candidates,
                   "rsz": r.rsz, "accept": r.acceptance.name(), "null_margin": r.null_margin, "min_coefficient": r.min_coefficient,
                   "npts": r.npts, "search_radius": r.search_radius},
        "run": extra,
    })
}
