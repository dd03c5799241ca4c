//! `tessera stitch --grid COLSxROWS` / `--positions FILE.csv` / `--tile-config FILE`:
//! microscope tile grids run by the library (`tessera::grid`: registration, solve, shading,
//! report), the mosaic written through `tessera::large`, and Fiji's
//! `TileConfiguration.registered.txt`.

use super::stitch::StitchArgs;
use anyhow::{anyhow, bail, Context, Result};
use serde_json::json;
use std::path::Path;
use std::time::Instant;
use tessera::flatfield::FieldSource;
use tessera::grid::{register_grid, register_planes, GridLayout, GridOptions, Nominal};
use tessera::options::{parse_grid, parse_positions};
use tessera::report::{peak_memory_mib, round};
use tessera::stitch::{FrameSource, Mosaic, StitchParams};
use tessera::Parallelism;

/// Nominal positions from the CSV file at `path` ([`tessera::options::parse_positions`]).
pub fn read_positions(path: &Path, pixel_size: Option<f64>) -> Result<Vec<(f64, f64)>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    parse_positions(&text, pixel_size, &path.display().to_string())
}

/// The layout the command line gives: `--grid` (with `--overlap`, `--order`, `--start`),
/// `--positions FILE.csv` or `--tile-config FILE`, for `tiles` tiles.
fn layout(a: &StitchArgs, tiles: usize) -> Result<GridLayout> {
    let nominal = match (&a.grid, &a.positions, &a.tile_config) {
        (Some(g), None, None) => {
            let (cols, rows) = parse_grid(g)?;
            if cols * rows != tiles {
                bail!("--grid {g} is {} tiles, but {tiles} were given", cols * rows);
            }
            Nominal::Grid(g.clone())
        }
        (None, Some(csv), None) => Nominal::Positions(read_positions(csv, a.pixel_size)?, Some(csv.display().to_string())),
        (None, None, Some(cfg)) => Nominal::TileConfig(tessera::tile_config::read(cfg)?.into_iter().map(|t| t.1).collect(), cfg.display().to_string()),
        _ => bail!("give one of --grid COLSxROWS, --positions FILE.csv or --tile-config FILE"),
    };
    Ok(GridLayout { nominal, overlap_percent: a.overlap, order: a.order, start: a.start, pixel_size: a.pixel_size })
}

/// The grid run: register, solve, composite, report.
pub fn run_grid(a: &StitchArgs, p: &StitchParams, source: &dyn FrameSource, labels: &[String]) -> Result<()> {
    if let Some(out) = &a.flatfield_out {
        if !tessera::io::is_tiff(out) {
            bail!("--flatfield-out {}: the flat field is written as a 32-bit float TIFF; name it .tif", out.display());
        }
    }
    if a.planes()?.asked() {
        return run_planes(a, p, source, labels);
    }
    let layout = layout(a, source.len())?;
    let field = |v: &Option<String>, flag: &str| v.as_deref().map(|s| FieldSource::parse(s, flag)).transpose();
    let options = GridOptions { layout, stage_error: a.stage_error, flatfield: field(&a.flatfield, "--flatfield")?, darkfield: field(&a.darkfield, "--darkfield")? };
    let t0 = Instant::now();
    let run = register_grid(source, labels, p, &options, Parallelism::AllThreads, &mut |_| std::ops::ControlFlow::Continue(()))?;
    if let Some(q) = &run.prepared {
        let how = match &q.estimate {
            Some(e) => format!(
                "estimated from {} tiles ({} left out, surface of degree {}){}{} in {:.2} s",
                e.tiles_used,
                e.excluded.len(),
                e.degree,
                if e.reliable { "" } else { "; few tiles: the estimate is unreliable, give a flat field from a file if the seams show" },
                e.dark_level.map_or(String::new(), |d| format!("; dark level {d:.1}{}", e.dark_note.as_deref().map_or(String::new(), |n| format!(" ({n})")))),
                run.shading_seconds
            ),
            None => "from the file".into(),
        };
        eprintln!("shading: flat field {how}; vignetting {:.1} % (the darkest pixel against the brightest)", q.shading.vignetting() * 100.0);
        if let Some(out) = &a.flatfield_out {
            tessera::flatfield::write_flat(&q.shading, out)?;
            println!("flat field -> {}", out.display());
        }
    }
    let mosaic = &run.mosaic;
    let tiles = run.tiles(source);
    let poses: Vec<_> = run.placed().iter().map(|p| p.map(tessera::stitch::Similarity::translation)).collect();
    // The composite takes the size and type of the tiles the registration kept (the
    // majority's), from the first of them.
    let kept = mosaic.tiles.iter().find(|t| t.unreadable.is_none()).ok_or_else(|| anyhow!("no tile could be used"))?;
    let first = tiles.frame(kept.index).map_err(|e| anyhow!("tile {} could not be read again: {e}", kept.index))?;
    let like = first.view().map_err(|e| anyhow!(e))?;
    let written = tessera::large::write_composite(tiles.as_ref(), &like, &poses, p.blend, &a.output, &super::stitch::output_options(a), &mut |_, _| Ok(())).map_err(|e| super::stitch::name_frame(e, labels))?;
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
        println!("tile {} ({}): {}", t.index, labels[t.index], run.tile_reason(t.index));
    }
    eprintln!("{}", run.describe_model(&options.layout));
    // With shading corrected, the step of brightness across the seams before and after.
    let seams = run.seam_steps(source)?;
    if let Some((b, c)) = seams {
        eprintln!("seams: mean step of brightness {b:.2} grey levels uncorrected, {c:.2} corrected");
    }
    write_registered_config(a, labels, mosaic, "")?;
    if let Some(path) = &a.report {
        let extra = json!({"seconds": round(secs, 4), "output": written.path.display().to_string(), "backend": "cpu",
                           "peak_memory_mib": peak_memory_mib().map(|m| round(m, 1)), "written": tessera::large::describe(&written)});
        let r = run.report(labels, (w, h), written.origin, &options.layout, seams, extra);
        tessera::io::write_bytes(path, serde_json::to_string_pretty(&r)?.as_bytes())?;
        println!("report -> {}", path.display());
    }
    Ok(())
}

/// A grid in several channels and time points or cycles (`--channels`, `--time-points`,
/// `--cycles`; `tessera::grid::register_planes`): every plane composited on one canvas and
/// streamed into one OME-TIFF or OME-Zarr with C and T dimensions; the report with `planes`
/// and `time_points`.
fn run_planes(a: &StitchArgs, p: &StitchParams, source: &dyn FrameSource, labels: &[String]) -> Result<()> {
    let planes = a.planes()?;
    let n = planes.tiles_per_block(source.len()).map_err(|e| anyhow!("--channels / --time-points / --cycles / --register-channel / --reuse-positions: {e}"))?;
    let what = if planes.cycles { "cycle" } else { "time point" };
    if a.flatfield_out.is_some() && a.channels > 1 {
        bail!("--flatfield-out writes one flat field; with --channels each channel has its own (the report's shading_per_channel)");
    }
    let field = |v: &Option<String>, flag: &str| v.as_deref().map(|s| FieldSource::parse(s, flag)).transpose();
    let options = GridOptions { layout: layout(a, n)?, stage_error: a.stage_error, flatfield: field(&a.flatfield, "--flatfield")?, darkfield: field(&a.darkfield, "--darkfield")? };
    let t0 = Instant::now();
    let run = register_planes(source, labels, p, &options, &planes, Parallelism::AllThreads, &mut |_| std::ops::ControlFlow::Continue(()))?;
    for (t, r) in run.runs.iter().enumerate() {
        let ok = r.mosaic.tiles.iter().filter(|t| t.status() == "ok").count();
        println!("{what} {t}: {ok} of {n} tiles joined by registration on channel {}", a.register_channel);
        if run.offsets[t].is_none() {
            eprintln!("warning: {what} {t} matched {what} 0 at no tile: its mosaic stays in its own tile 0's coordinates");
        }
        if let Some(aligned) = run.aligned.get(t).filter(|a| !a.is_empty()) {
            println!("{what} {t}: {} of {n} tiles aligned onto cycle 0's, the rest placed by their own cycle", aligned.iter().flatten().count());
        }
    }
    for (c, q) in run.shading.iter().enumerate() {
        if let Some(q) = q {
            eprintln!("shading: channel {c}: vignetting {:.1} % (the darkest pixel against the brightest)", q.shading.vignetting() * 100.0);
        }
    }
    if let (Some(out), Some(Some(q))) = (&a.flatfield_out, run.shading.first()) {
        tessera::flatfield::write_flat(&q.shading, out)?;
        println!("flat field -> {}", out.display());
    }
    let tiles = run.tiles(source);
    let poses = run.poses(source.len());
    let first = poses.iter().flat_map(|q| q.iter().enumerate()).find(|q| q.1.is_some()).map(|q| q.0).ok_or_else(|| anyhow!("no tile could be used"))?;
    let like_frame = tiles.frame(first).map_err(|e| anyhow!("tile {first} could not be read again: {e}"))?;
    let like = like_frame.view().map_err(|e| anyhow!(e))?;
    let mut out = super::stitch::output_options(a);
    out.ome.planes = planes.output();
    let written = tessera::large::write_planes(tiles.as_ref(), &like, &poses, p.blend, &a.output, &out).map_err(|e| super::stitch::name_frame(e, labels))?;
    let secs = t0.elapsed().as_secs_f64();
    let (w, h) = written.size;
    println!("{} planes ({} channels x {} {what}s) of {n} tiles: mosaic {w}x{h} -> {} ({secs:.2} s)", poses.len(), planes.channels, planes.time_points, written.path.display());
    for (i, why) in &written.lost {
        eprintln!("warning: tile {i} ({}) could not be read again; it is missing from its plane: {why}", labels[*i]);
    }
    eprintln!("{}", run.runs[0].describe_model(&options.layout));
    let k = a.register_channel;
    write_registered_config(a, &labels[k * n..(k + 1) * n], &run.runs[0].mosaic, " (time point 0)")?;
    if let Some(path) = &a.report {
        let extra = json!({"seconds": round(secs, 4), "output": written.path.display().to_string(), "backend": "cpu",
                           "peak_memory_mib": peak_memory_mib().map(|m| round(m, 1)), "written": tessera::large::describe(&written)});
        let r = run.report(labels, (w, h), written.origin, &options.layout, extra);
        tessera::io::write_bytes(path, serde_json::to_string_pretty(&r)?.as_bytes())?;
        println!("report -> {}", path.display());
    }
    Ok(())
}

/// Fiji's `TileConfiguration.registered.txt` of `mosaic`'s tiles (files `labels`), beside
/// the report (or the mosaic); `which` says which positions these are, for the message.
fn write_registered_config(a: &StitchArgs, labels: &[String], mosaic: &Mosaic, which: &str) -> Result<()> {
    let beside = a.report.as_deref().unwrap_or(&a.output);
    let path = beside.parent().unwrap_or(Path::new("")).join(tessera::tile_config::REGISTERED_NAME);
    let files: Vec<std::path::PathBuf> = labels.iter().map(std::path::PathBuf::from).collect();
    tessera::tile_config::write(&path, &files, &mosaic.tiles.iter().map(|t| t.position).collect::<Vec<_>>())?;
    println!("registered positions{which} -> {}", path.display());
    Ok(())
}
