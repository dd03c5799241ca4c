//! Tile-grid runs as every face runs them (`tessera stitch --grid`, the Python package's
//! `stitch_grid`): the tile size, the nominal positions from the layout the user gave
//! (a `COLSxROWS` grid, positions, or Fiji's tile configuration), the shading correction
//! (module [`crate::flatfield`]), the registration and solve (`stitch::register_tiles`),
//! the seams' brightness steps, and the report: the sequences' contract plus `pairs[]`,
//! `components[]`, `stage_model` and `shading`. Compositing stays with each face (a
//! file through [`crate::large`], an array in memory).

use crate::flatfield::{FieldSource, Prepared};
use crate::options::parse_grid;
use crate::report::round;
use crate::shading::Corrected;
use crate::frames::Block;
use crate::stitch::{grid_positions, register_pair_any, register_tiles, seam_steps, tile_shape, Corner, FrameSource, GridParams, Mosaic, RegisterParams, Similarity, StitchParams, TileOrder};
use crate::{AnyView, Choice, Parallelism};
use anyhow::{anyhow, bail, Result};
use serde_json::{json, Value};
use std::ops::ControlFlow;
use std::time::Instant;

/// Where the nominal positions of a run's tiles came from.
#[derive(Clone, Debug, PartialEq)]
pub enum Nominal {
    /// A `COLSxROWS` grid (as the user spelt it) with [`GridLayout::overlap_percent`],
    /// [`GridLayout::order`] and [`GridLayout::start`].
    Grid(String),
    /// Positions in pixels, one per tile, read from the CSV file named (or given in memory:
    /// `None`).
    Positions(Vec<(f64, f64)>, Option<String>),
    /// A Fiji tile configuration's positions, and the file.
    TileConfig(Vec<(f64, f64)>, String),
}

/// How the tiles nominally lie, as the user gave it.
#[derive(Clone, Debug)]
pub struct GridLayout {
    pub nominal: Nominal,
    /// Overlap of neighbouring tiles of a [`Nominal::Grid`], percent of the tile.
    pub overlap_percent: f64,
    pub order: TileOrder,
    pub start: Corner,
    /// Micrometres per pixel, where the positions were given in micrometres.
    pub pixel_size: Option<f64>,
}

impl GridLayout {
    /// The nominal top-left corner of each of `tiles` tiles of `tile` pixels. Errors: a grid
    /// or position list whose count is not the tiles'.
    pub fn positions(&self, tiles: usize, tile: (usize, usize)) -> Result<Vec<(f64, f64)>> {
        let given = |q: &Vec<(f64, f64)>, what: &str| {
            if q.len() != tiles {
                bail!("{what} has {} positions, but {tiles} tiles were given", q.len());
            }
            Ok(q.clone())
        };
        match &self.nominal {
            Nominal::Grid(g) => {
                let (cols, rows) = parse_grid(g)?;
                if cols * rows != tiles {
                    bail!("grid {g} is {} tiles, but {tiles} were given", cols * rows);
                }
                Ok(grid_positions(cols, rows, tile, self.overlap_percent / 100.0, self.order, self.start)?)
            }
            Nominal::Positions(q, file) => given(q, file.as_deref().unwrap_or("positions")),
            Nominal::TileConfig(q, file) => given(q, file),
        }
    }
}

/// A grid run's choices beyond the registration's.
#[derive(Clone, Debug)]
pub struct GridOptions {
    pub layout: GridLayout,
    /// How far (pixels) a pair may stand from the stage model and still be accepted.
    pub stage_error: f64,
    pub flatfield: Option<FieldSource>,
    pub darkfield: Option<FieldSource>,
}

/// A registered grid: the mosaic (tiles, pairs, components, stage model), the tile size,
/// the shading correction where one was asked for, and what the run measured.
pub struct GridRun {
    pub mosaic: Mosaic,
    pub tile: (usize, usize),
    pub prepared: Option<Prepared>,
    pub params: GridParams,
    /// Seconds spent on the shading estimate (or reading its files), and in all.
    pub shading_seconds: f64,
    pub seconds: f64,
}

/// The size of a grid's tiles: the shape the first two usable tiles share (one odd first
/// tile must not set it), else the first usable tile's. Errors: no tile can be read.
pub fn tile_size(source: &dyn FrameSource, labels: &[String]) -> Result<(usize, usize)> {
    let (mut first, mut previous, mut why) = (None, None, None);
    for i in 0..source.len() {
        let shape = match tile_shape(source, i) {
            Ok(s) => s.size,
            Err(e) => {
                why = why.or(Some(format!("{i} ({}): {e}", labels.get(i).map_or("", |l| l.as_str()))));
                continue;
            }
        };
        first = first.or(Some(shape));
        if previous == Some(shape) {
            return Ok(shape);
        }
        previous = Some(shape);
    }
    first.ok_or_else(|| anyhow!("no tile could be read (tile {})", why.as_deref().unwrap_or("-")))
}

/// Registers the tiles of `source` (labelled `labels`) as `o` lays them out: the shading
/// estimated or read first where asked for, the tiles corrected as they are read, then
/// every neighbouring pair registered and all positions solved.
pub fn register_grid(source: &dyn FrameSource, labels: &[String], p: &StitchParams, o: &GridOptions, par: Parallelism, progress: &mut dyn FnMut(usize) -> ControlFlow<()>) -> Result<GridRun> {
    let t0 = Instant::now();
    let tile = tile_size(source, labels)?;
    let nominal = o.layout.positions(source.len(), tile)?;
    let params = GridParams { register: p.register, stage_error: o.stage_error, coarse_candidates: p.coarse_candidates };
    let mut prepared = crate::flatfield::prepare(o.flatfield.as_ref(), o.darkfield.as_ref(), source, tile)?;
    let mut shading_seconds = t0.elapsed().as_secs_f64();
    let corrected = prepared.as_ref().map(|q| Corrected { inner: source, shading: &q.shading });
    let tiles: &dyn FrameSource = match &corrected {
        Some(c) => c,
        None => source,
    };
    let mosaic = register_tiles(tiles, &nominal, &params, par, progress)?;
    if let Some(q) = prepared.as_mut() {
        // The estimate's low orders corrected from the overlaps the registration found.
        let t1 = Instant::now();
        crate::flatfield::refine(q, source, &placed(&mosaic), &accepted(&mosaic))?;
        shading_seconds += t1.elapsed().as_secs_f64();
    }
    Ok(GridRun { mosaic, tile, prepared, params, shading_seconds, seconds: t0.elapsed().as_secs_f64() })
}

/// Each tile's position in `mosaic` (`None`: left out, unreadable).
fn placed(mosaic: &Mosaic) -> Vec<Option<(f64, f64)>> {
    mosaic.tiles.iter().map(|t| t.unreadable.is_none().then_some(t.position)).collect()
}

/// The tiles of each accepted pair of `mosaic`.
fn accepted(mosaic: &Mosaic) -> Vec<(usize, usize)> {
    mosaic.pairs.iter().filter(|q| q.shift.is_some()).map(|q| (q.a, q.b)).collect()
}

impl GridRun {
    /// The tiles as the registration and the mosaic see them: `raw` corrected for shading
    /// where the run corrects it.
    pub fn tiles<'a>(&'a self, raw: &'a dyn FrameSource) -> Box<dyn FrameSource + 'a> {
        match &self.prepared {
            Some(q) => Box::new(Corrected { inner: raw, shading: &q.shading }),
            None => Box::new(Passed(raw)),
        }
    }

    /// Each tile's position in the mosaic (`None`: left out, unreadable).
    pub fn placed(&self) -> Vec<Option<(f64, f64)>> {
        placed(&self.mosaic)
    }

    /// With shading corrected: the mean step of brightness across the accepted pairs' seams
    /// of `raw`'s tiles, uncorrected and corrected.
    pub fn seam_steps(&self, raw: &dyn FrameSource) -> Result<Option<(f64, f64)>> {
        if self.prepared.is_none() {
            return Ok(None);
        }
        let (placed, accepted) = (self.placed(), accepted(&self.mosaic));
        let mean = |s: Vec<Option<f64>>| {
            let v: Vec<f64> = s.into_iter().flatten().collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        };
        let before = mean(seam_steps(raw, &placed, &accepted)?);
        let after = mean(seam_steps(self.tiles(raw).as_ref(), &placed, &accepted)?);
        Ok(before.zip(after))
    }

    /// Why tile `i` was not registered into the mosaic.
    pub fn tile_reason(&self, i: usize) -> String {
        let m = &self.mosaic;
        match (&m.tiles[i].unreadable, m.tiles[i].component) {
            (Some(why), _) => format!("left out: {why}"),
            (None, Some(k)) => format!("detached: component {k}, which no accepted pair joins to the mosaic; placed as a whole by the stage model"),
            (None, None) => "no accepted pair: placed by the stage model".into(),
        }
    }

    /// The stage model in a line: the overlap each direction's pairs measured, against the
    /// nominal one, and the repeatability.
    pub fn describe_model(&self, layout: &GridLayout) -> String {
        let model = &self.mosaic.model;
        let overlap = model.overlap(self.tile);
        let pct = |o: Option<f64>| o.map_or("not measured".to_string(), |v| format!("{:.1} %", v * 100.0));
        let nominal = if matches!(layout.nominal, Nominal::Grid(_)) { format!(" (nominal {} %)", layout.overlap_percent) } else { String::new() };
        let corrected = if model.correction == [(0.0, 0.0); 2] { "the stage's offsets kept" } else { "the stage's offsets corrected" };
        let repeat = model.repeatability.map_or("not measured".to_string(), |r| format!("{r:.1} px"));
        format!(
            "stage model: overlap {} horizontally, {} vertically{nominal}, {corrected}; repeatability {repeat} (from {} + {} registered pairs)",
            pct(overlap[0]),
            pct(overlap[1]),
            model.support[0],
            model.support[1]
        )
    }

    /// The report's `frames[]`: each tile (labelled by `labels`) as a sequence's frame, its
    /// `status` "ok", "detached", "nominal" or "skipped", its `component` and largest residual.
    pub fn frames_report(&self, labels: &[String]) -> Vec<Value> {
        let m = &self.mosaic;
        m.tiles
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
                    o["reason"] = json!(self.tile_reason(t.index));
                }
                o
            })
            .collect()
    }

    /// The grid report: `frames[]` as for sequences (`status` "ok", "detached", "nominal" or
    /// "skipped", and `component`), `pairs[]` with each neighbouring pair's outcome, how it
    /// was verified and its residual, `components[]`, `stage_model` and `shading` (with the
    /// seams' steps `seams`), for a mosaic of `size` whose pixel (0, 0) is tile 0's `origin`.
    pub fn report(&self, labels: &[String], size: (usize, usize), origin: (i64, i64), layout: &GridLayout, seams: Option<(f64, f64)>, extra: Value) -> Value {
        let m = &self.mosaic;
        let frames = self.frames_report(labels);
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
        let r = &self.params.register;
        // `order` and `start` as this report has always spelt them: the variant names in
        // lower case, without the hyphens of the flags' values (`snakerow`, `topleft`).
        let unhyphenated = |name: &str| name.replace('-', "");
        let components: Vec<Value> = m
            .components
            .iter()
            .enumerate()
            .map(|(k, tiles)| json!({"index": k, "tiles": tiles, "status": if k == 0 { "ok" } else { "detached" }}))
            .collect();
        let md = &m.model;
        let overlap = md.overlap(self.tile);
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
        let (grid, positions, tile_config) = match &layout.nominal {
            Nominal::Grid(g) => (Some(g.clone()), None, None),
            Nominal::Positions(_, file) => (None, Some(file.clone().unwrap_or_else(|| "given".into())), None),
            Nominal::TileConfig(_, file) => (None, None, Some(file.clone())),
        };
        json!({
            "frames": frames,
            "pairs": pairs,
            "components": components,
            "stage_model": stage_model,
            "shading": crate::flatfield::describe(self.prepared.as_ref(), seams),
            "panorama": {"width": size.0, "height": size.1, "origin_x": origin.0, "origin_y": origin.1, "reference_frame": 0,
                         "origin_meaning": "panorama pixel (X, Y) shows what tile 0 shows at (X + origin_x, Y + origin_y)"},
            "params": {"mode": "grid", "grid": grid, "positions": positions, "tile_config": tile_config,
                       "overlap_percent": layout.overlap_percent, "order": unhyphenated(layout.order.name()), "start": unhyphenated(layout.start.name()),
                       "pixel_size": layout.pixel_size, "stage_error": self.params.stage_error, "coarse_candidates": self.params.coarse_candidates,
                       "rsz": r.rsz, "accept": r.acceptance.name(), "null_margin": r.null_margin, "min_coefficient": r.min_coefficient,
                       "npts": r.npts, "search_radius": r.search_radius},
            "run": extra,
        })
    }
}

/// A grid in several channels and time points: the inputs are its blocks of tiles, channel
/// by channel within each time point (the order of an OME-TIFF's planes, XYCZT).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Planes {
    pub channels: usize,
    pub time_points: usize,
    /// The channel (from 0) each time point is registered on.
    pub register_channel: usize,
    /// Later time points placed where the first registered (a stage that revisits its
    /// positions), not registered.
    pub reuse_positions: bool,
    /// The time points are cycles of a re-stained slide (ASHLAR's cycles): each registered
    /// and brought onto the first as a time point is, wherever the slide was put back, and
    /// the mosaic holds every cycle's channels as its channels ([`Planes::output`]).
    pub cycles: bool,
}

impl Default for Planes {
    fn default() -> Self {
        Planes { channels: 1, time_points: 1, register_channel: 0, reuse_positions: false, cycles: false }
    }
}

impl Planes {
    /// The planes the faces ask for: `channels` within each of `time_points` time points or
    /// of `cycles` cycles (not both; each at least 1). Errors: both time points and cycles,
    /// positions reused across cycles (the slide was put back elsewhere), as
    /// [`Planes::tiles_per_block`] later checks.
    pub fn new(channels: usize, time_points: usize, cycles: usize, register_channel: usize, reuse_positions: bool) -> Result<Planes> {
        if time_points > 1 && cycles > 1 {
            bail!("give time points or cycles, not both");
        }
        if reuse_positions && cycles > 1 {
            bail!("each cycle is registered: the slide was put back between them, so positions cannot be reused");
        }
        let cycles_asked = cycles > 1;
        Ok(Planes { channels, time_points: if cycles_asked { cycles } else { time_points }, register_channel, reuse_positions, cycles: cycles_asked })
    }

    /// Whether there is more than one plane, or a choice that only planes take.
    pub fn asked(&self) -> bool {
        *self != Planes::default()
    }

    /// The mosaic's channels and time points: with cycles, every cycle's channels one after
    /// the other at one time point; otherwise the channels at each time point.
    pub fn output(&self) -> (usize, usize) {
        if self.cycles { (self.channels * self.time_points, 1) } else { (self.channels, self.time_points) }
    }

    /// The tiles of one block of `inputs`. Errors: no plane, a registration channel beyond
    /// the channels, reuse without later time points, inputs that are not whole blocks.
    pub fn tiles_per_block(&self, inputs: usize) -> Result<usize> {
        let (c, t) = (self.channels, self.time_points);
        if c == 0 || t == 0 {
            bail!("channels and time points must be at least 1");
        }
        if self.register_channel >= c {
            bail!("register channel {} of {c} channels (they count from 0)", self.register_channel);
        }
        if self.reuse_positions && t == 1 {
            bail!("reusing positions places later time points as the first: give time points");
        }
        if inputs < c * t || !inputs.is_multiple_of(c * t) {
            bail!("{inputs} inputs are not {c} channels x {t} time points of the same number of tiles");
        }
        Ok(inputs / (c * t))
    }
}

/// A grid registered in its planes: each registered time point's run, its offset onto time
/// point 0 (`None` where none of its tiles matched time point 0's), with cycles each later
/// cycle's tiles aligned one by one onto the first's, and each channel's shading correction
/// where one was asked for.
pub struct PlanesRun {
    pub planes: Planes,
    /// Tiles per block.
    pub tiles: usize,
    pub runs: Vec<GridRun>,
    pub offsets: Vec<Option<(f64, f64)>>,
    /// Per registered time point, with cycles: each tile's position on cycle 0 where it was
    /// aligned onto cycle 0's same tile (`align_tiles`), `None` where it was not (then
    /// its cycle's solve and offset place it). Empty for time points.
    pub aligned: Vec<Vec<Option<(f64, f64)>>>,
    pub shading: Vec<Option<Prepared>>,
}

/// Registers the grid of `o` in the blocks of `source` that `planes` describes: each time
/// point on its registration channel (or, reusing positions, the first alone), and each
/// later one brought onto the first by registering one of its tiles against the same tile
/// of time point 0 (the same stage position: a full overlap). With shading correction,
/// each channel's is found from its tiles at time point 0 (or read from the files, the same
/// for every channel), and every block of that channel is corrected by it, for the
/// registration and the mosaic ([`PlanesRun::tiles`]). Errors as
/// [`Planes::tiles_per_block`], [`crate::flatfield::prepare`] and [`register_grid`].
pub fn register_planes(source: &dyn FrameSource, labels: &[String], p: &StitchParams, o: &GridOptions, planes: &Planes, par: Parallelism, progress: &mut dyn FnMut(usize) -> ControlFlow<()>) -> Result<PlanesRun> {
    let n = planes.tiles_per_block(source.len())?;
    let block = |b: usize| Block { inner: source, start: b * n, len: n };
    let tile = tile_size(&block(planes.register_channel), &labels[planes.register_channel * n..(planes.register_channel + 1) * n])?;
    let shading = (0..planes.channels)
        .map(|c| crate::flatfield::prepare(o.flatfield.as_ref(), o.darkfield.as_ref(), &block(c), tile).map_err(|e| anyhow!("channel {c}: {e:#}")))
        .collect::<Result<Vec<_>>>()?;
    // The blocks as corrected; each time point registered on its own without a second estimate.
    let corrected = ByChannel { inner: source, shading: &shading, tiles: n, channels: planes.channels };
    let registration = GridOptions { flatfield: None, darkfield: None, ..o.clone() };
    let registered = if planes.reuse_positions { 1 } else { planes.time_points };
    let mut runs = Vec::with_capacity(registered);
    for t in 0..registered {
        let b = t * planes.channels + planes.register_channel;
        let tiles = Block { inner: &corrected, start: b * n, len: n };
        runs.push(register_grid(&tiles, &labels[b * n..(b + 1) * n], p, &registration, par, progress)?);
    }
    let corrected_block = |b: usize| Block { inner: &corrected, start: b * n, len: n };
    let mut offsets = vec![Some((0.0, 0.0)); runs.len()];
    let mut aligned = vec![Vec::new(); runs.len()];
    for (t, run) in runs.iter().enumerate().skip(1) {
        let (first, later) = (corrected_block(planes.register_channel), corrected_block(t * planes.channels + planes.register_channel));
        offsets[t] = align_time_point(&first, &later, &runs[0], run, &p.register, par);
        // A re-stained slide shows the same cells: each tile is matched to the first
        // cycle's (a time point's cells may have moved: its tiles keep their own solve).
        if let (true, Some(offset)) = (planes.cycles, offsets[t]) {
            let margin = o.stage_error * run.tile.0.max(run.tile.1) as f64;
            aligned[t] = align_tiles(&first, &later, &runs[0], run, offset, margin, &p.register, par);
        }
    }
    // Each channel's estimate refined from the overlaps of its tiles where time point 0
    // placed them (every channel's tile of a stage position lies where that time point's
    // registration put it).
    let (positions, pairs) = (runs[0].placed(), accepted(&runs[0].mosaic));
    let mut shading = shading;
    for (c, q) in shading.iter_mut().enumerate() {
        if let Some(q) = q {
            crate::flatfield::refine(q, &block(c), &positions, &pairs).map_err(|e| anyhow!("channel {c}: {e:#}"))?;
        }
    }
    Ok(PlanesRun { planes: *planes, tiles: n, runs, offsets, aligned, shading })
}

/// The inputs of a grid in channels, each tile corrected by its channel's shading (none
/// where its channel has none).
struct ByChannel<'a> {
    inner: &'a dyn FrameSource,
    shading: &'a [Option<Prepared>],
    tiles: usize,
    channels: usize,
}

impl FrameSource for ByChannel<'_> {
    fn len(&self) -> usize {
        self.inner.len()
    }
    fn frame(&self, i: usize) -> std::result::Result<crate::stitch::Frame<'_>, String> {
        match self.shading.get((i / self.tiles) % self.channels).and_then(Option::as_ref) {
            // A corrected frame is an image of its own, whatever it was read from.
            Some(q) => match (Corrected { inner: self.inner, shading: &q.shading }).frame(i)? {
                crate::stitch::Frame::Image(image) => Ok(crate::stitch::Frame::Image(image)),
                _ => Err("internal: a corrected frame that is not an image".into()),
            },
            None => self.inner.frame(i),
        }
    }
}

/// The shift that brings time point `later`'s mosaic (of `run`) onto the first's (`first`,
/// of tiles `first_tiles`): from the first tile registered by both runs whose pair across
/// the two time points registers, searched from no shift and then from the phase
/// correlation's strongest candidates (a slide put back a few hundred pixels away, a stage
/// re-homed); `None` where none does.
fn align_time_point(first_tiles: &dyn FrameSource, later: &dyn FrameSource, first: &GridRun, run: &GridRun, p: &RegisterParams, par: Parallelism) -> Option<(f64, f64)> {
    for j in 0..first_tiles.len() {
        if !(first.mosaic.tiles[j].registered && run.mosaic.tiles[j].registered) {
            continue;
        }
        let (Ok(a), Ok(b)) = (first_tiles.frame(j), later.frame(j)) else { continue };
        let (Ok(va), Ok(vb)) = (a.view(), b.view()) else { continue };
        let seeds = core::iter::once((0.0, 0.0)).chain(coarse_seeds(&va, &vb));
        for seed in seeds {
            let Ok(reg) = register_pair_any(va, vb, p, seed, par) else { continue };
            if let Some(s) = reg.shift {
                let (p0, pt) = (first.mosaic.tiles[j].position, run.mosaic.tiles[j].position);
                return Some((p0.0 + s.0 - pt.0, p0.1 + s.1 - pt.1));
            }
        }
    }
    None
}

/// Each tile of a later cycle (of `run`, brought onto the first by `offset`) registered
/// against the same tile of the first cycle (of `first`; the same stage position, a full
/// overlap), as ASHLAR's layer aligner places a cycle's tiles onto the first cycle's mosaic:
/// its position on cycle 0 where that pair registers within `margin` px of where its own
/// cycle's solve and the offset put it, else `None` (that place kept). So a tile its own
/// cycle could not join (its neighbours' overlaps blank in that stain) still lies on the
/// first cycle, and every channel of every cycle lines up tile by tile.
#[allow(clippy::too_many_arguments)]
fn align_tiles(first_tiles: &dyn FrameSource, later: &dyn FrameSource, first: &GridRun, run: &GridRun, offset: (f64, f64), margin: f64, p: &RegisterParams, par: Parallelism) -> Vec<Option<(f64, f64)>> {
    (0..first_tiles.len())
        .map(|j| {
            let (q, own) = (&first.mosaic.tiles[j], &run.mosaic.tiles[j]);
            if q.unreadable.is_some() || own.unreadable.is_some() {
                return None;
            }
            let placed = (own.position.0 + offset.0, own.position.1 + offset.1);
            let predicted = (placed.0 - q.position.0, placed.1 - q.position.1);
            let (a, b) = (first_tiles.frame(j).ok()?, later.frame(j).ok()?);
            let s = register_pair_any(a.view().ok()?, b.view().ok()?, p, predicted, par).ok()?.shift?;
            let at = (q.position.0 + s.0, q.position.1 + s.1);
            ((at.0 - placed.0).hypot(at.1 - placed.1) <= margin).then_some(at)
        })
        .collect()
}

/// The three strongest shifts of `moving` against `reference` by phase correlation of their
/// reduced spectra (gray tiles; none for colour).
fn coarse_seeds(reference: &AnyView<'_>, moving: &AnyView<'_>) -> Vec<(f64, f64)> {
    use crate::stitch::coarse::{candidates, Spectrum};
    let spectrum = |v: &AnyView<'_>| match v {
        AnyView::U8(v) => Some(Spectrum::new(*v)),
        AnyView::U16(v) => Some(Spectrum::new(*v)),
        AnyView::F32(v) => Some(Spectrum::new(*v)),
        AnyView::Rgba8(_) => None,
    };
    match (spectrum(reference), spectrum(moving)) {
        (Some(a), Some(b)) => candidates(&a, &b, 3).unwrap_or_default().into_iter().map(|peak| peak.shift).collect(),
        _ => Vec::new(),
    }
}

impl PlanesRun {
    /// The inputs as the registration and the mosaic see them: each corrected for its
    /// channel's shading where the run corrects it.
    pub fn tiles<'a>(&'a self, raw: &'a dyn FrameSource) -> Box<dyn FrameSource + 'a> {
        Box::new(ByChannel { inner: raw, shading: &self.shading, tiles: self.tiles, channels: self.planes.channels })
    }

    /// The run and offset that place time point `t`.
    fn of(&self, t: usize) -> (&GridRun, Option<(f64, f64)>) {
        let r = if self.planes.reuse_positions { 0 } else { t };
        (&self.runs[r], self.offsets[r])
    }

    /// Per plane (channel by channel within each time point), a pose for each of the
    /// `inputs` tiles: those of the plane's block where their time point placed them,
    /// brought onto time point 0.
    pub fn poses(&self, inputs: usize) -> Vec<Vec<Option<Similarity>>> {
        let (c, n) = (self.planes.channels, self.tiles);
        let mut planes = Vec::with_capacity(c * self.planes.time_points);
        for t in 0..self.planes.time_points {
            let (run, offset) = self.of(t);
            let (placed, d) = (run.placed(), offset.unwrap_or((0.0, 0.0)));
            let aligned = self.aligned.get(t).map_or(&[][..], Vec::as_slice);
            for ch in 0..c {
                let mut poses = vec![None; inputs];
                for (j, q) in placed.iter().enumerate() {
                    let at = aligned.get(j).copied().flatten().or(q.map(|q| (q.0 + d.0, q.1 + d.1)));
                    poses[(t * c + ch) * n + j] = at.map(Similarity::translation);
                }
                planes.push(poses);
            }
        }
        planes
    }

    /// The report: time point 0's grid report (of its registration channel's tiles, of
    /// `labels`), with `planes` and, under `time_points`, each time point's frames and its
    /// offset onto time point 0.
    pub fn report(&self, labels: &[String], size: (usize, usize), origin: (i64, i64), layout: &GridLayout, extra: Value) -> Value {
        let (c, n, k) = (self.planes.channels, self.tiles, self.planes.register_channel);
        let block_labels = |t: usize| &labels[(t * c + k) * n..(t * c + k + 1) * n];
        let mut r = self.runs[0].report(block_labels(0), size, origin, layout, None, extra);
        r["shading"] = crate::flatfield::describe(self.shading[k].as_ref(), None);
        r["shading_per_channel"] = json!(self.shading.iter().map(|q| crate::flatfield::describe(q.as_ref(), None)).collect::<Vec<_>>());
        r["planes"] = json!({"channels": c, "time_points": self.planes.time_points, "cycles": self.planes.cycles, "register_channel": k,
                             "reuse_positions": self.planes.reuse_positions, "output": {"channels": self.planes.output().0, "time_points": self.planes.output().1},
                             "order": "the inputs: channel by channel within each time point (or cycle); the mosaic's planes: XYCZT, a cycle's channels after the cycle before's"});
        let per_time: Vec<Value> = (0..self.planes.time_points)
            .map(|t| {
                let (run, offset) = self.of(t);
                let mut entry = json!({"time_point": t, "registered": !self.planes.reuse_positions || t == 0,
                       "offset_to_time_point_0": offset.map(|d| json!([round(d.0, 3), round(d.1, 3)])),
                       "frames": run.frames_report(block_labels(t))});
                if let (Some(aligned), Some(d)) = (self.aligned.get(t).filter(|a| !a.is_empty()), offset) {
                    // How far each aligned tile moved from where its own cycle put it.
                    let moved: Vec<f64> = aligned.iter().zip(run.placed()).filter_map(|(a, q)| Some((a.as_ref()?, q?))).map(|(a, q)| (a.0 - q.0 - d.0).hypot(a.1 - q.1 - d.1)).collect();
                    entry["tiles_aligned_to_cycle_0"] = json!(moved.len());
                    entry["largest_tile_alignment_px"] = json!(round(moved.iter().cloned().fold(0.0, f64::max), 3));
                    entry["positions_on_cycle_0"] = json!(aligned.iter().map(|a| a.map(|a| json!([round(a.0, 3), round(a.1, 3)]))).collect::<Vec<_>>());
                }
                entry
            })
            .collect();
        r["time_points"] = json!(per_time);
        r
    }
}

/// A frame source passed through unchanged (the tiles of a run without shading correction).
struct Passed<'a>(&'a dyn FrameSource);

impl FrameSource for Passed<'_> {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn frame(&self, i: usize) -> core::result::Result<crate::stitch::Frame<'_>, String> {
        self.0.frame(i)
    }
}
