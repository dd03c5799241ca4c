//! Tile grids: microscope slide scans, a grid of overlapping tiles at known nominal stage
//! positions. [`register_tiles`] runs these stages, as ASHLAR's aligner and MIST do:
//!
//! 1. every pair of neighbouring tiles (nominally in one row and overlapping or touching,
//!    or in one column) is registered from its nominal offset, as a sequence's pairs are,
//!    with the same adaptive acceptance; where that start fails or is weak, from the peaks
//!    of a phase correlation of the two overlap strips widened by
//!    [`GridParams::stage_error`] ([`pairs`]);
//! 2. the stage model is fitted to the pairs that registered: per direction the offset
//!    the stage really steps by (the overlap), and its repeatability ([`model`]); where too
//!    few pairs of a direction registered (a wrong nominal overlap), that direction's pairs
//!    are registered again from the phase correlation of the whole tiles, and the model
//!    fitted again;
//! 3. where the model's offset differs from the stage's, the pairs not yet verified are
//!    registered again from the model's offset, within its repeatability;
//! 4. each pair is verified: its offset within the model's repeatability, or one of
//!    several pairs of its direction that agree on an offset beyond it (a row the stage put
//!    off its place); a pair that is not stays out, and its tiles where the model puts them;
//! 5. the accepted pairs join tiles into components, each solved together by robust least
//!    squares, the worst pair rejected while one is left more than [`PAIR_REJECT`] px off,
//!    and each component placed as a whole where the model puts its tiles ([`place`]).
//!
//! The largest component is the mosaic (its tiles registered, "ok"); another component's
//! tiles are "detached" (placed relative to one another, the group by the model), and a
//! tile no accepted pair reaches is at the model's position ("nominal": the stage's, where
//! the model found nothing to correct). Positions are in the first tile's coordinates (its
//! pixel (u, v) shows what the mosaic's reference shows at (u + x, v + y), as for
//! sequences).

mod model;
mod overlap_peak;
mod pairs;
mod place;
mod seams;
mod strip;

pub use model::{direction, StageModel, Verification, MIN_SUPPORT};
pub use seams::{seam_squares, seam_steps, SeamSquare, SEAM_BLOCK};

use pairs::{register_tile_pair, strip_ncc, Found, Start};
use strip::{chance_threshold, MIN_STRIP};
use super::register::RegisterParams;
use super::source::{Frame, FrameSource};
use crate::error::{require_finite, Error, Result};
use crate::image::{AnyImage, AnyView, Pixel};
use crate::parallel::{alongside, map_indices, Parallelism};
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::ops::ControlFlow;

/// The overlap of neighbouring tiles assumed when none is given (a fraction of the tile):
/// the usual setting of microscope scanning software.
pub const DEFAULT_OVERLAP: f64 = 0.1;

/// The order in which a grid's tiles were acquired.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TileOrder {
    /// Row after row, each in the same direction.
    #[default]
    Row,
    /// Column after column.
    Column,
    /// Row after row, every other one reversed (a serpentine scan).
    SnakeRow,
    SnakeColumn,
}

/// The corner of the first tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Corner {
    #[default]
    TopLeft,
    TopRight,
    BottomLeft,
    BottomRight,
}

/// The nominal top-left corners (pixels, the first tile at its grid cell's place) of a
/// `cols x rows` grid of `tile` (width, height) tiles that overlap by `overlap` (a fraction
/// of the tile, in [0, 0.9]), listed in acquisition order. Errors: an empty grid, a zero
/// tile, an overlap out of range.
pub fn grid_positions(cols: usize, rows: usize, tile: (usize, usize), overlap: f64, order: TileOrder, start: Corner) -> Result<Vec<(f64, f64)>> {
    crate::error::require_range("grid columns", cols, 1, 100_000)?;
    crate::error::require_range("grid rows", rows, 1, 100_000)?;
    if tile.0 == 0 || tile.1 == 0 {
        return Err(Error::ZeroSize { width: tile.0, height: tile.1 });
    }
    require_finite("overlap", overlap)?;
    if !(0.0..=0.9).contains(&overlap) {
        return Err(Error::InvalidFloat { name: "overlap", value: overlap, expected: "a fraction within [0, 0.9]" });
    }
    let step = (tile.0 as f64 * (1.0 - overlap), tile.1 as f64 * (1.0 - overlap));
    let n = cols.checked_mul(rows).ok_or(Error::OutOfRange { name: "grid tiles", value: i64::MAX, min: 1, max: 10_000_000_000 })?;
    Ok((0..n)
        .map(|k| {
            let (major, minor, along) = match order {
                TileOrder::Row | TileOrder::SnakeRow => (k / cols, k % cols, cols),
                TileOrder::Column | TileOrder::SnakeColumn => (k / rows, k % rows, rows),
            };
            let snake = matches!(order, TileOrder::SnakeRow | TileOrder::SnakeColumn) && major % 2 == 1;
            let minor = if snake { along - 1 - minor } else { minor };
            let (mut c, mut r) = match order {
                TileOrder::Row | TileOrder::SnakeRow => (minor, major),
                TileOrder::Column | TileOrder::SnakeColumn => (major, minor),
            };
            if matches!(start, Corner::TopRight | Corner::BottomRight) {
                c = cols - 1 - c;
            }
            if matches!(start, Corner::BottomLeft | Corner::BottomRight) {
                r = rows - 1 - r;
            }
            (c as f64 * step.0, r as f64 * step.1)
        })
        .collect())
}

/// Parameters of a grid registration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GridParams {
    /// The pairs' registration (always with [`Motion::Translation`](crate::stitch::Motion::Translation): tiles do not turn).
    pub register: RegisterParams,
    /// How far (fraction of the tile size, per axis, in [0, 0.5]) a tile may be from its
    /// nominal position (so a neighbouring pair from its nominal offset by twice that).
    pub stage_error: f64,
    /// Phase-correlation starts tried where the nominal one fails or is weak (0..=8).
    pub coarse_candidates: usize,
}

impl Default for GridParams {
    fn default() -> Self {
        GridParams { register: RegisterParams::default(), stage_error: 0.1, coarse_candidates: 3 }
    }
}

impl GridParams {
    pub fn validate(&self) -> Result<()> {
        self.register.validate()?;
        crate::error::require_within("stage error", self.stage_error, 0.0, 0.5, "a fraction within [0, 0.5]")?;
        crate::error::require_range("coarse candidates", self.coarse_candidates, 0, 8)
    }
}

/// One neighbouring pair: tile `b`'s offset from tile `a`.
#[derive(Clone, Debug, PartialEq)]
pub struct TilePair {
    pub a: usize,
    pub b: usize,
    /// The measured offset (`position[b] - position[a]`), `None` when not accepted.
    pub shift: Option<(f64, f64)>,
    /// How it was verified (accepted pairs).
    pub verified_by: Option<Verification>,
    /// How far (pixels) the offset found is from the stage model's (registered pairs,
    /// accepted or not).
    pub deviation: Option<f64>,
    /// Why the pair is not used (`None` when accepted).
    pub skip: Option<String>,
    pub ncc: f64,
    pub margin: f64,
    pub vectors_used: usize,
    /// `|position[b] - position[a] - shift|` after the solve (accepted pairs).
    pub residual: Option<f64>,
}

/// One tile's outcome.
#[derive(Clone, Debug, PartialEq)]
pub struct TileRecord {
    pub index: usize,
    /// Position in the first tile's coordinates.
    pub position: (f64, f64),
    /// Whether an accepted pair joins it to the mosaic (the largest component); `false`:
    /// detached, or where the stage model puts it.
    pub registered: bool,
    /// Its component (0: the mosaic, the largest), `None` when no accepted pair reaches it.
    pub component: Option<usize>,
    /// Why it could not be used at all (unreadable, another size or type): no position.
    pub unreadable: Option<String>,
}

/// A registered grid.
#[derive(Clone, Debug, PartialEq)]
pub struct Mosaic {
    pub tiles: Vec<TileRecord>,
    pub pairs: Vec<TilePair>,
    /// The tiles of each component, the mosaic's (0) first, then by size.
    pub components: Vec<Vec<usize>>,
    /// The stage model fitted to the pairs.
    pub model: StageModel,
}

impl TileRecord {
    /// The report's word for the tile: "ok" (joined to the mosaic by accepted pairs),
    /// "detached" (in another component), "nominal" (no accepted pair: where the stage
    /// model puts it) or "skipped" (unreadable, or of another size or type).
    pub fn status(&self) -> &'static str {
        match (&self.unreadable, self.component) {
            (Some(_), _) => "skipped",
            (None, Some(0)) => "ok",
            (None, Some(_)) => "detached",
            (None, None) => "nominal",
        }
    }
}

/// The neighbouring pairs of nominal positions: nominally in one row (vertical offset
/// under half a tile) and overlapping or touching, or in one column and overlapping or
/// touching (a nominal overlap of 0 leaves the grid's neighbours neighbours).
pub fn neighbours(nominal: &[(f64, f64)], tile: (usize, usize)) -> Vec<(usize, usize)> {
    let (w, h) = (tile.0 as f64, tile.1 as f64);
    let mut out = Vec::new();
    for a in 0..nominal.len() {
        for b in a + 1..nominal.len() {
            let (dx, dy) = (libm::fabs(nominal[b].0 - nominal[a].0), libm::fabs(nominal[b].1 - nominal[a].1));
            if (dy < h / 2.0 && dx <= w) || (dx < w / 2.0 && dy <= h) {
                out.push((a, b));
            }
        }
    }
    out
}

/// Registers the tiles of `tiles` (one per nominal position, `nominal[i]` the top-left
/// corner of tile i in pixels), fits the stage model, verifies the pairs, and solves and
/// places the tiles (module doc). A tile that cannot be read, or differs in size or pixel
/// type from most tiles, is reported and left out.
/// `progress` is called before each neighbouring pair and once after the last with the
/// number of pairs done (of `neighbours(nominal, tile size).len()`), then with that number
/// again before each pair registered once more (from the whole tiles or the fitted model);
/// `ControlFlow::Break` stops the run there with [`Error::Cancelled`].
/// Errors: bad parameters, a nominal list of another length, non-finite positions, no
/// readable tile, cancelled.
pub fn register_tiles(
    tiles: &dyn FrameSource,
    nominal: &[(f64, f64)],
    p: &GridParams,
    par: Parallelism,
    progress: &mut dyn FnMut(usize) -> ControlFlow<()>,
) -> Result<Mosaic> {
    p.validate()?;
    if nominal.len() != tiles.len() || nominal.is_empty() {
        return Err(Error::InvalidParameter { name: "positions", reason: alloc::format!("{} positions for {} tiles", nominal.len(), tiles.len()) });
    }
    for q in nominal {
        require_finite("position", q.0)?;
        require_finite("position", q.1)?;
    }
    // The size and type most tiles have (not the first tile's: one odd tile must not
    // leave all the others out); a tile of another shape, unreadable, or with a non-finite
    // pixel is left out with its reason.
    let shapes: Vec<core::result::Result<TileShape, String>> = (0..tiles.len()).map(|i| tile_shape(tiles, i)).collect();
    let Some(common) = majority_shape(&shapes) else {
        let why = shapes.iter().find_map(|s| s.as_ref().err()).cloned().unwrap_or_default();
        return Err(Error::InvalidParameter { name: "tiles", reason: alloc::format!("no tile could be read (tile 0: {why})") });
    };
    let unreadable: Vec<Option<String>> = shapes
        .iter()
        .map(|s| match s {
            Err(why) => Some(why.clone()),
            Ok(t) if (t.size, t.type_name) != (common.size, common.type_name) => {
                Some(alloc::format!("it is {}x{} {}, most tiles {}x{} {}", t.size.0, t.size.1, t.type_name, common.size.0, common.size.1, common.type_name))
            }
            Ok(_) => None,
        })
        .collect();
    let size = common.size;
    let neighbouring: Vec<(usize, usize)> = neighbours(nominal, size).into_iter().filter(|&(a, b)| unreadable[a].is_none() && unreadable[b].is_none()).collect();
    let total = neighbours(nominal, size).len();
    let offset = |k: usize| {
        let (a, b) = neighbouring[k];
        (nominal[b].0 - nominal[a].0, nominal[b].1 - nominal[a].1)
    };
    let run = Registrar { tiles, size, p, par };

    // 1. Every pair from its nominal offset, within the stage error.
    let prior = (p.stage_error * size.0 as f64, p.stage_error * size.1 as f64);
    let jobs: Vec<((usize, usize), Start)> = (0..neighbouring.len()).map(|k| (neighbouring[k], Start::Near { offset: offset(k), margin: prior })).collect();
    let mut found = run.pairs(&jobs, &mut |k| report(progress, k))?;
    report(progress, total)?;
    // Whole-overlap matches of overlaps too narrow for templates, judged against chance.
    let mut chance = Chance::default();
    for k in 0..found.len() {
        if found[k].by_strip {
            chance.judge(&run, &mut found[k], offset(k), prior, nominal, &unreadable)?;
        }
    }
    let measured = |found: &[Found]| -> Vec<((f64, f64), Option<(f64, f64)>)> { (0..found.len()).map(|k| (offset(k), found[k].shift)).collect() };

    // 2. The stage model; a direction too few pairs of which registered is searched over
    // the whole tiles.
    let mut model = StageModel::fit(&measured(&found));
    let sparse: Vec<usize> = (0..2).filter(|&dir| model.support[dir] < MIN_SUPPORT).collect();
    let unfound: Vec<usize> = (0..found.len()).filter(|&k| found[k].shift.is_none() && sparse.contains(&direction(offset(k)))).collect();
    let jobs: Vec<((usize, usize), Start)> = unfound.iter().map(|&k| (neighbouring[k], Start::Anywhere { towards: offset(k) })).collect();
    let again = run.pairs(&jobs, &mut |_| report(progress, total))?;
    for (&k, again) in unfound.iter().zip(again) {
        if again.shift.is_some() {
            found[k] = again;
        }
    }
    if !unfound.is_empty() {
        model = StageModel::fit(&measured(&found));
    }

    // 3. Where the model corrects the stage, the pairs it does not yet verify from the
    // model's offset.
    let mut verdicts = model::verify(&measured(&found), &model);
    if model.correction != [(0.0, 0.0); 2] {
        let margin = model.tolerance() + 1.0;
        let unverified: Vec<usize> = (0..found.len()).filter(|&k| verdicts[k].is_none()).collect();
        let jobs: Vec<((usize, usize), Start)> = unverified.iter().map(|&k| (neighbouring[k], Start::Near { offset: model.offset(offset(k)), margin: (margin, margin) })).collect();
        let again = run.pairs(&jobs, &mut |_| report(progress, total))?;
        for (&k, mut again) in unverified.iter().zip(again) {
            if again.by_strip {
                chance.judge(&run, &mut again, model.offset(offset(k)), (margin, margin), nominal, &unreadable)?;
            }
            if again.shift.is_some() {
                found[k] = again;
            }
        }
        verdicts = model::verify(&measured(&found), &model);
    }

    // 4. The verdicts.
    let tolerance = model.tolerance();
    let mut pairs: Vec<TilePair> = (0..found.len())
        .map(|k| {
            let f = &found[k];
            let m = model.offset(offset(k));
            let deviation = f.shift.map(|s| libm::hypot(s.0 - m.0, s.1 - m.1));
            let skip = match (&f.skip, verdicts[k], deviation) {
                (Some(why), _, _) => Some(why.clone()),
                (None, Some(_), _) => None,
                (None, None, d) => Some(alloc::format!(
                    "not verified: the offset found is {:.1} px from the stage model's, beyond its repeatability of {tolerance:.1} px, and no other pair of its direction agrees with it",
                    d.unwrap_or(f64::NAN)
                )),
            };
            let (a, b) = neighbouring[k];
            TilePair { a, b, shift: f.shift.filter(|_| skip.is_none()), verified_by: verdicts[k].filter(|_| skip.is_none()), deviation, skip, ncc: f.ncc, margin: f.margin, vectors_used: f.vectors_used, residual: None }
        })
        .collect();

    // 5. Components, solved and placed.
    let placed = place::place(nominal, &mut pairs, &model)?;
    let tiles = (0..tiles.len())
        .map(|i| {
            let component = placed.component[i].filter(|_| unreadable[i].is_none());
            TileRecord { index: i, position: placed.positions[i], registered: component == Some(0), component, unreadable: unreadable[i].clone() }
        })
        .collect();
    Ok(Mosaic { tiles, pairs, components: placed.components, model })
}

/// What every pair's registration shares.
struct Registrar<'a> {
    tiles: &'a dyn FrameSource,
    size: (usize, usize),
    p: &'a GridParams,
    par: Parallelism,
}

/// Memory the tiles of a batch of pairs and those kept for later batches may take.
const BATCH_BYTES: usize = 256 << 20;

/// A tile read for a batch of pairs: shared, so that the next batch can keep it while this
/// one still registers on it.
#[derive(Clone)]
enum HeldTile<'s> {
    View(AnyView<'s>),
    Shared(Arc<AnyImage>),
}

impl HeldTile<'_> {
    fn view(&self) -> Result<AnyView<'_>> {
        match self {
            HeldTile::View(v) => Ok(*v),
            HeldTile::Shared(i) => i.view().ok_or_else(|| bad_tile("32-bit integer images are not tiles".into())),
        }
    }
}

impl Registrar<'_> {
    /// Registers each pair of `jobs` from its start, in order, a batch of pairs at a time
    /// over the cores (a pair's own work, preparing its overlap and its phase correlation,
    /// is one thread's). Each tile is read once while it fits in [`BATCH_BYTES`] with the
    /// tiles kept for the batches that need it next (a grid's row above), and the next
    /// batch's tiles are read while this one registers. `before(k)` is told of each job
    /// `k` of a batch before the batch runs.
    fn pairs(&self, jobs: &[((usize, usize), Start)], before: &mut dyn FnMut(usize) -> Result<()>) -> Result<Vec<Found>> {
        // Four pairs a thread even out pairs of unequal cost. Sized for tiles of four bytes a
        // pixel; what is kept, for the tiles as they are.
        let batch = (4 * self.par.threads()).min(BATCH_BYTES / (4 * (self.size.0 * self.size.1 * 4).max(1))).max(1);
        let chunks: Vec<&[((usize, usize), Start)]> = jobs.chunks(batch).collect();
        // Where each tile is used: the chunks, in order.
        let mut uses: Vec<Vec<usize>> = Vec::new();
        for (n, chunk) in chunks.iter().enumerate() {
            for &((a, b), _) in chunk.iter() {
                for t in [a, b] {
                    if uses.len() <= t {
                        uses.resize(t + 1, Vec::new());
                    }
                    if uses[t].last() != Some(&n) {
                        uses[t].push(n);
                    }
                }
            }
        }
        let next_use = |t: usize, after: usize| uses.get(t).and_then(|u| u.iter().find(|&&n| n > after).copied());
        let mut held = self.hold(chunks.first().copied().unwrap_or(&[]), &[])?;
        let tile_bytes = held.first().map_or(Ok(1), |(_, t)| t.view().map(|v| v.bytes()))?.max(1);
        let mut found = Vec::with_capacity(jobs.len());
        for (n, chunk) in chunks.iter().enumerate() {
            for k in n * batch..n * batch + chunk.len() {
                before(k)?;
            }
            // Kept for later: the tiles used again soonest, within the budget.
            let mut kept: Vec<(usize, usize)> = held.iter().filter_map(|(t, _)| next_use(*t, n).map(|u| (u, *t))).collect();
            kept.sort_unstable();
            kept.truncate((BATCH_BYTES / tile_bytes).saturating_sub(2 * batch));
            let keep: Vec<(usize, HeldTile<'_>)> = held.iter().filter(|(t, _)| kept.iter().any(|k| k.1 == *t)).cloned().collect();
            let next = chunks.get(n + 1).copied().unwrap_or(&[]);
            let (size, p, par) = (self.size, self.p, self.par);
            let register = || -> Result<Vec<Result<Found>>> {
                let view = |i: usize| match held.binary_search_by_key(&i, |(t, _)| *t) {
                    Ok(at) => held[at].1.view(),
                    Err(_) => Err(Error::Backend("internal: a batch's tile was not read".into())),
                };
                Ok(map_indices(chunk.len(), par, |j| {
                    let ((a, b), start) = chunk[j];
                    register_tile_pair(&view(a)?, &view(b)?, start, size, p, par)
                }))
            };
            let (done, read) = alongside(par, register, || self.hold(next, &keep));
            for f in done.ok_or_else(|| Error::Backend("internal: a batch was not registered".into()))?? {
                found.push(f?);
            }
            held = read?;
        }
        Ok(found)
    }

    /// The tiles of the pairs of `chunk` and those `kept` for later, by index: the kept ones
    /// taken from there, the rest read.
    fn hold<'s>(&'s self, chunk: &[((usize, usize), Start)], kept: &[(usize, HeldTile<'s>)]) -> Result<Vec<(usize, HeldTile<'s>)>> {
        let mut ids: Vec<usize> = chunk.iter().flat_map(|&((a, b), _)| [a, b]).chain(kept.iter().map(|(t, _)| *t)).collect();
        ids.sort_unstable();
        ids.dedup();
        ids.into_iter()
            .map(|t| {
                if let Some((_, tile)) = kept.iter().find(|(k, _)| *k == t) {
                    return Ok((t, tile.clone()));
                }
                let tile = match self.tiles.frame(t).map_err(bad_tile)? {
                    Frame::View(v) => HeldTile::View(v),
                    Frame::Image(i) => HeldTile::Shared(Arc::new(i)),
                    Frame::Shared(i) => HeldTile::Shared(i),
                };
                Ok((t, tile))
            })
            .collect()
    }

}

/// How many unrelated tile pairs a chance threshold is drawn from: at least
/// [`strip::MIN_CHANCE_SAMPLES`] are needed, more sharpen the estimate of its spread.
const CHANCE_SAMPLES: usize = 32;

/// Per direction, what a whole-overlap match reaches by chance (`None` until needed) and
/// from how many unrelated pairs.
#[derive(Default)]
struct Chance {
    thresholds: [Option<(Option<f64>, usize)>; 2],
}

impl Chance {
    /// Keeps the whole-overlap match `f` of a pair at nominal offset `geometry`, searched
    /// within `margin`, only where it beats chance: the same search run on pairs of tiles
    /// that cannot overlap so (the first need of a direction draws them).
    fn judge(&mut self, run: &Registrar<'_>, f: &mut Found, geometry: (f64, f64), margin: (f64, f64), nominal: &[(f64, f64)], unreadable: &[Option<String>]) -> Result<()> {
        let Some(ncc) = f.shift.map(|_| f.ncc) else { return Ok(()) };
        let dir = direction(geometry);
        let (threshold, samples) = match self.thresholds[dir] {
            Some(t) => t,
            None => *self.thresholds[dir].insert(run.chance(geometry, margin, nominal, unreadable)?),
        };
        let why = match threshold {
            None => Some(alloc::format!("unjudged: the whole overlap correlates {ncc:.2}, and {samples} unrelated tile pairs are too few to tell a match from chance")),
            Some(t) if ncc <= t => Some(alloc::format!("chance: the whole overlap correlates {ncc:.2} at its best, not above {t:.2}, what its search reaches on {samples} unrelated tile pairs")),
            Some(t) => {
                f.margin = ncc - t;
                None
            }
        };
        if why.is_some() {
            (f.shift, f.skip) = (None, why);
        }
        Ok(())
    }
}

impl Registrar<'_> {
    /// The chance threshold of a whole-overlap match at nominal offset `geometry` within
    /// `margin` ([`strip::chance_threshold`]) and the number of unrelated pairs it is drawn
    /// from: ordered pairs of readable tiles (a tile with itself too) whose true offset
    /// lies beyond the search's reach, drawn at random (seeded: runs repeat).
    fn chance(&self, geometry: (f64, f64), margin: (f64, f64), nominal: &[(f64, f64)], unreadable: &[Option<String>]) -> Result<(Option<f64>, usize)> {
        let n = nominal.len();
        // A pair's true offset is within twice the stage error of its nominal one, so one
        // more than three margins off the geometry is out of the search's reach.
        let reach = (3.0 * margin.0 + MIN_STRIP as f64, 3.0 * margin.1 + MIN_STRIP as f64);
        let unrelated = |i: usize, j: usize| {
            let d = (nominal[j].0 - nominal[i].0, nominal[j].1 - nominal[i].1);
            unreadable[i].is_none() && unreadable[j].is_none() && (libm::fabs(d.0 - geometry.0) > reach.0 || libm::fabs(d.1 - geometry.1) > reach.1)
        };
        let mut rng = super::SplitMix64::new(0x5EED_0FC4_A2CE);
        let mut drawn = alloc::collections::BTreeSet::new();
        let mut nulls = Vec::with_capacity(CHANCE_SAMPLES);
        for _ in 0..64 * CHANCE_SAMPLES {
            if drawn.len() == CHANCE_SAMPLES {
                break;
            }
            let (i, j) = ((rng.next_u64() % n as u64) as usize, (rng.next_u64() % n as u64) as usize);
            if unrelated(i, j) && drawn.insert((i, j)) {
                let (fa, fb) = (self.tiles.frame(i).map_err(bad_tile)?, self.tiles.frame(j).map_err(bad_tile)?);
                if let Some(r) = strip_ncc(&fa.view().map_err(bad_tile)?, &fb.view().map_err(bad_tile)?, geometry, margin, self.p)? {
                    nulls.push(r);
                }
            }
        }
        Ok((chance_threshold(&nulls), nulls.len()))
    }
}

/// A tile's size and pixel type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileShape {
    pub size: (usize, usize),
    pub type_name: &'static str,
}

/// Tile `i`'s shape, or why it cannot be used: it cannot be read, or a float tile holds a
/// non-finite pixel (named: registration and the composite need finite values).
pub fn tile_shape(tiles: &dyn FrameSource, i: usize) -> core::result::Result<TileShape, String> {
    let (size, type_name) = tiles.shape(i)?;
    if type_name != f32::NAME {
        return Ok(TileShape { size, type_name });
    }
    let f = tiles.frame(i)?;
    let v = f.view()?;
    if let AnyView::F32(img) = &v {
        for y in 0..img.height() {
            if let Some(x) = img.row(y).iter().position(|p| !p.is_finite()) {
                return Err(alloc::format!("pixel ({x}, {y}) is {}: a float tile must be finite", img.row(y)[x]));
            }
        }
    }
    Ok(TileShape { size: v.size(), type_name: v.type_name() })
}

/// The shape most of `shapes` have (ties: the one that comes first); `None` when none is
/// readable.
pub fn majority_shape(shapes: &[core::result::Result<TileShape, String>]) -> Option<TileShape> {
    let readable = || shapes.iter().filter_map(|s| s.as_ref().ok());
    let count = |t: &TileShape| readable().filter(|u| *u == t).count();
    let mut best: Option<(usize, TileShape)> = None;
    for t in readable() {
        let n = count(t);
        if best.is_none_or(|(m, _)| n > m) {
            best = Some((n, *t));
        }
    }
    best.map(|(_, t)| t)
}

/// Reports `done` pairs; [`Error::Cancelled`] when the callback asks to stop.
fn report(progress: &mut dyn FnMut(usize) -> ControlFlow<()>, done: usize) -> Result<()> {
    match progress(done) {
        ControlFlow::Continue(()) => Ok(()),
        ControlFlow::Break(()) => Err(Error::Cancelled),
    }
}

fn bad_tile(why: String) -> Error {
    Error::InvalidParameter { name: "tiles", reason: alloc::format!("a tile could not be read again: {why}") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::{AnyView, Image};
    use crate::stitch::{texture, InMemory, SplitMix64};

    #[test]
    fn grid_orders_and_corners() {
        let at = |o, c| grid_positions(3, 2, (100, 50), 0.1, o, c).unwrap();
        let cell = |c: usize, r: usize| (c as f64 * 90.0, r as f64 * 45.0);
        assert_eq!(at(TileOrder::Row, Corner::TopLeft), alloc::vec![cell(0, 0), cell(1, 0), cell(2, 0), cell(0, 1), cell(1, 1), cell(2, 1)]);
        assert_eq!(at(TileOrder::SnakeRow, Corner::TopLeft), alloc::vec![cell(0, 0), cell(1, 0), cell(2, 0), cell(2, 1), cell(1, 1), cell(0, 1)]);
        assert_eq!(at(TileOrder::Column, Corner::TopLeft), alloc::vec![cell(0, 0), cell(0, 1), cell(1, 0), cell(1, 1), cell(2, 0), cell(2, 1)]);
        assert_eq!(at(TileOrder::SnakeColumn, Corner::BottomRight), alloc::vec![cell(2, 1), cell(2, 0), cell(1, 0), cell(1, 1), cell(0, 1), cell(0, 0)]);
        assert_eq!(at(TileOrder::Row, Corner::TopRight)[..3], [cell(2, 0), cell(1, 0), cell(0, 0)]);
        assert!(grid_positions(0, 2, (100, 50), 0.1, TileOrder::Row, Corner::TopLeft).is_err());
        assert!(grid_positions(2, 2, (0, 50), 0.1, TileOrder::Row, Corner::TopLeft).is_err());
        for bad in [-0.1, 0.95, f64::NAN] {
            assert!(grid_positions(2, 2, (100, 50), bad, TileOrder::Row, Corner::TopLeft).is_err());
        }
        // Neighbours: rows and columns, not diagonals.
        let n = neighbours(&grid_positions(3, 2, (100, 50), 0.1, TileOrder::Row, Corner::TopLeft).unwrap(), (100, 50));
        assert_eq!(n, alloc::vec![(0, 1), (0, 3), (1, 2), (1, 4), (2, 5), (3, 4), (4, 5)]);
    }

    /// A 4 x 3 grid of 240 x 200 tiles overlapping by 25 %, cut from a texture at stage
    /// positions off by up to 5 % of a tile each, so neighbours are off by up to 10 %
    /// (whole pixels: the truth is exact).
    fn grid(seed: u64) -> (Image<u8>, Vec<(f64, f64)>, Vec<(usize, usize)>) {
        let src = texture(900, 600, seed).map(|v| v.round() as u8);
        let nominal = grid_positions(4, 3, TILE, 0.25, TileOrder::SnakeRow, Corner::TopLeft).unwrap();
        let mut rng = SplitMix64::new(seed);
        let jitter = |rng: &mut SplitMix64, q: f64, side: usize| (q + 30.0 + (rng.uniform() * 2.0 - 1.0) * 0.05 * side as f64).round() as usize;
        let truth = nominal.iter().map(|q| (jitter(&mut rng, q.0, TILE.0), jitter(&mut rng, q.1, TILE.1))).collect();
        (src, nominal, truth)
    }

    const TILE: (usize, usize) = (240, 200);

    fn go_on(_: usize) -> ControlFlow<()> {
        ControlFlow::Continue(())
    }

    #[test]
    fn a_grid_with_stage_error_registers_exactly() {
        for seed in 1..4 {
            let (src, nominal, truth) = grid(seed);
            let tiles: Vec<Image<u8>> = truth.iter().map(|&(x, y)| src.view().crop(x, y, TILE.0, TILE.1).unwrap().to_image()).collect();
            let views: Vec<AnyView<'_>> = tiles.iter().map(|t| AnyView::U8(t.view())).collect();
            let m = register_tiles(&InMemory(&views), &nominal, &GridParams::default(), Parallelism::Sequential, &mut go_on).unwrap();
            assert_eq!(m.pairs.len(), 17);
            for t in &m.tiles {
                let want = (truth[t.index].0 as f64 - truth[0].0 as f64, truth[t.index].1 as f64 - truth[0].1 as f64);
                assert!(t.registered && libm::hypot(t.position.0 - want.0, t.position.1 - want.1) < 0.1, "seed {seed} tile {}: {:?} vs {want:?}", t.index, t.position);
            }
            assert!(m.pairs.iter().all(|q| q.shift.is_some() && q.residual.is_some_and(|r| r < 0.2)), "{:?}", m.pairs);
        }
    }

    /// Tiles made on each read (as a file is decoded), counting the reads.
    struct Decoded<'a> {
        tiles: &'a [Image<u8>],
        reads: core::cell::RefCell<Vec<usize>>,
    }

    impl FrameSource for Decoded<'_> {
        fn len(&self) -> usize {
            self.tiles.len()
        }
        fn frame(&self, i: usize) -> core::result::Result<Frame<'_>, String> {
            self.reads.borrow_mut()[i] += 1;
            Ok(Frame::Image(AnyImage::U8(self.tiles[i].clone())))
        }
    }

    #[test]
    fn all_threads_register_as_one_and_a_tile_is_read_once_for_all_its_pairs() {
        let (src, nominal, truth) = grid(2);
        let tiles: Vec<Image<u8>> = truth.iter().map(|&(x, y)| src.view().crop(x, y, TILE.0, TILE.1).unwrap().to_image()).collect();
        let mut runs = Vec::new();
        for par in [Parallelism::Sequential, Parallelism::AllThreads] {
            let source = Decoded { tiles: &tiles, reads: core::cell::RefCell::new(alloc::vec![0; tiles.len()]) };
            runs.push(register_tiles(&source, &nominal, &GridParams::default(), par, &mut go_on).unwrap());
            // Once for its shape, once for all its pairs (read pair by pair, a tile of four
            // pairs would be read five times): a tile of the row above is kept until the
            // pairs of the row below it need it.
            let reads = source.reads.borrow();
            assert_eq!(*reads, alloc::vec![2; tiles.len()], "{par:?}");
        }
        assert_eq!(runs[0], runs[1]);
        assert!(runs[0].tiles.iter().all(|t| t.registered));
    }

    #[test]
    fn blank_and_missing_tiles_keep_their_stage_position_flagged() {
        let (src, nominal, truth) = grid(5);
        let mut tiles: Vec<Image<u8>> = truth.iter().map(|&(x, y)| src.view().crop(x, y, TILE.0, TILE.1).unwrap().to_image()).collect();
        tiles[5] = Image::filled(TILE.0, TILE.1, 77).unwrap();
        let odd = Image::<u8>::filled(60, 200, 1).unwrap();
        let mut views: Vec<AnyView<'_>> = tiles.iter().map(|t| AnyView::U8(t.view())).collect();
        views[9] = AnyView::U8(odd.view());
        let m = register_tiles(&InMemory(&views), &nominal, &GridParams::default(), Parallelism::Sequential, &mut go_on).unwrap();
        // Where the stage puts them, relative to where the stage puts the registered tiles
        // on average (the same displacement for both), so within the stage's error of the
        // truth (each tile up to 5 % of a tile off, so two up to 10 %).
        let lag = |i: usize| (m.tiles[i].position.0 - (nominal[i].0 - nominal[0].0), m.tiles[i].position.1 - (nominal[i].1 - nominal[0].1));
        assert!(libm::hypot(lag(5).0 - lag(9).0, lag(5).1 - lag(9).1) < 1e-9, "{:?} {:?}", lag(5), lag(9));
        for i in [5, 9] {
            let t = &m.tiles[i];
            let truth = (truth[i].0 as f64 - truth[0].0 as f64, truth[i].1 as f64 - truth[0].1 as f64);
            assert!(!t.registered && t.component.is_none() && t.status() != "ok", "tile {i}: {t:?}");
            assert!(libm::fabs(t.position.0 - truth.0) <= 0.1 * TILE.0 as f64 && libm::fabs(t.position.1 - truth.1) <= 0.1 * TILE.1 as f64, "tile {i}: {t:?} vs {truth:?}");
            assert!(m.pairs.iter().filter(|q| q.a == i || q.b == i).all(|q| q.shift.is_none()));
        }
        assert_eq!((m.tiles[5].status(), m.tiles[9].status()), ("nominal", "skipped"));
        assert!(m.tiles[9].unreadable.as_ref().is_some_and(|w| w.contains("60x200")));
        for t in m.tiles.iter().filter(|t| ![5, 9].contains(&t.index)) {
            let want = (truth[t.index].0 as f64 - truth[0].0 as f64, truth[t.index].1 as f64 - truth[0].1 as f64);
            assert!(t.registered && libm::hypot(t.position.0 - want.0, t.position.1 - want.1) < 0.1, "tile {}: {:?} vs {want:?}", t.index, t.position);
        }
    }

    #[test]
    fn an_odd_first_tile_and_a_non_finite_tile_are_left_out_not_the_grid() {
        let (src, nominal, truth) = grid(5);
        let tiles: Vec<Image<f32>> = truth.iter().map(|&(x, y)| src.view().crop(x, y, TILE.0, TILE.1).unwrap().to_image().convert()).collect();
        // Tile 0 smaller than the rest, tile 7 with one NaN pixel.
        let small = Image::<f32>::filled(60, 50, 9.0).unwrap();
        let mut nan = tiles[7].clone();
        nan.view_mut().row_mut(3)[4] = f32::NAN;
        let mut views: Vec<AnyView<'_>> = tiles.iter().map(|t| AnyView::F32(t.view())).collect();
        views[0] = AnyView::F32(small.view());
        views[7] = AnyView::F32(nan.view());
        let m = register_tiles(&InMemory(&views), &nominal, &GridParams::default(), Parallelism::Sequential, &mut go_on).unwrap();
        assert!(m.tiles[0].unreadable.as_ref().is_some_and(|w| w.contains("60x50") && w.contains("most tiles")), "{:?}", m.tiles[0]);
        assert!(m.tiles[7].unreadable.as_ref().is_some_and(|w| w.contains("pixel (4, 3) is NaN")), "{:?}", m.tiles[7]);
        for i in [0, 7] {
            assert!(!m.tiles[i].registered && m.pairs.iter().filter(|q| q.a == i || q.b == i).all(|q| q.shift.is_none()));
        }
        // Every other tile registers, placed relative to one another as the truth says.
        let ok: Vec<&TileRecord> = m.tiles.iter().filter(|t| ![0, 7].contains(&t.index)).collect();
        assert!(ok.iter().all(|t| t.registered), "{ok:?}");
        let (a, b) = (ok[0], ok[ok.len() - 1]);
        let got = (b.position.0 - a.position.0, b.position.1 - a.position.1);
        let want = (truth[b.index].0 as f64 - truth[a.index].0 as f64, truth[b.index].1 as f64 - truth[a.index].1 as f64);
        assert!(libm::hypot(got.0 - want.0, got.1 - want.1) < 0.2, "{got:?} vs {want:?}");
    }

    #[test]
    fn the_majority_shape_wins_ties_go_to_the_first() {
        let s = |w: usize, t: &'static str| Ok(TileShape { size: (w, 10), type_name: t });
        let shapes = [s(5, "u8"), Err("gone".into()), s(6, "u8"), s(6, "u8"), s(5, "u16")];
        assert_eq!(majority_shape(&shapes), Some(TileShape { size: (6, 10), type_name: "u8" }));
        assert_eq!(majority_shape(&shapes[..2]), Some(TileShape { size: (5, 10), type_name: "u8" }));
        assert_eq!(majority_shape(&[s(7, "f32"), s(5, "u8")]), Some(TileShape { size: (7, 10), type_name: "f32" }));
        assert_eq!(majority_shape(&[Err("x".into())]), None);
    }

    #[test]
    fn progress_counts_the_pairs_and_can_cancel() {
        let (src, nominal, truth) = grid(2);
        let tiles: Vec<Image<u8>> = truth.iter().map(|&(x, y)| src.view().crop(x, y, TILE.0, TILE.1).unwrap().to_image()).collect();
        let views: Vec<AnyView<'_>> = tiles.iter().map(|t| AnyView::U8(t.view())).collect();
        let mut seen = Vec::new();
        let mut stop_at_3 = |done: usize| {
            seen.push(done);
            if done == 3 { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
        };
        let r = register_tiles(&InMemory(&views), &nominal, &GridParams::default(), Parallelism::Sequential, &mut stop_at_3);
        assert_eq!(r, Err(Error::Cancelled));
        assert_eq!(seen, [0, 1, 2, 3]);
    }

    #[test]
    fn bad_input_is_an_error() {
        let t = Image::<u8>::filled(50, 40, 3).unwrap();
        let views = [AnyView::U8(t.view()), AnyView::U8(t.view())];
        let ok = [(0.0, 0.0), (40.0, 0.0)];
        let s = Parallelism::Sequential;
        assert!(register_tiles(&InMemory(&views), &ok[..1], &GridParams::default(), s, &mut go_on).is_err());
        assert!(register_tiles(&InMemory(&views), &[(0.0, 0.0), (f64::NAN, 0.0)], &GridParams::default(), s, &mut go_on).is_err());
        for bad in [GridParams { stage_error: 0.6, ..Default::default() }, GridParams { coarse_candidates: 9, ..Default::default() }] {
            assert!(register_tiles(&InMemory(&views), &ok, &bad, s, &mut go_on).is_err());
        }
        // Flat tiles: nothing registers, both stay at the stage positions.
        let m = register_tiles(&InMemory(&views), &ok, &GridParams::default(), s, &mut go_on).unwrap();
        assert_eq!((m.tiles[1].position, m.tiles[1].registered), ((40.0, 0.0), false));
        assert!(m.pairs[0].skip.is_some());
    }
}
