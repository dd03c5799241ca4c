//! Tile grids: microscope slide scans, a grid of overlapping tiles at known nominal stage
//! positions.
//!
//! Every pair of neighbouring tiles (nominally in the same row and overlapping, or in the
//! same column and overlapping) is registered from its nominal offset, as a sequence's pairs
//! are, with the same adaptive acceptance. The stage may be off by up to
//! [`GridParams::stage_error`] of a tile, more than the search reaches from the nominal
//! start, so where that start fails or is weak the pair is also started from the peaks of
//! a phase correlation of the two overlap strips (widened by the stage error). A weak
//! consensus must be confirmed by the whole overlap's NCC, and a measured offset further
//! from the nominal one than the stage error allows is rejected.
//!
//! All positions are then solved together ([`super::solve`]): each accepted pair is a
//! constraint weighted by its number of agreeing templates (where a cycle of pairs
//! disagrees, the least supported pair takes most of the residual, and is the one
//! rejected), and every tile is also tied to its nominal position relative to
//! the first tile by a constraint of weight [`STAGE_WEIGHT`], which places tiles (or groups
//! of tiles) that no accepted pair connects to the rest where the stage says, and moves the
//! others by a few thousandths of a pixel at most. A pair left with a residual over
//! [`PAIR_REJECT`] px disagrees with the rest: the worst is rejected and the solve repeated.
//! Positions are in the first tile's coordinates (its pixel (u, v) shows what the mosaic's
//! reference shows at (u + x, v + y), as for sequences).

use super::coarse::{self, Spectrum};
use super::quality::overlap_ncc;
use super::register::{gray, luma_storage, register_pair, Gray, Motion, PairRegistration, RegisterParams, SkipReason};
use super::sequence::FrameSource;
use super::solve::{solve, Constraint};
use crate::error::{require_finite, Error, Result};
use crate::image::{AnyView, ImageView};
use crate::ncc::{NccSample, SearchFrame};
use crate::parallel::Parallelism;
use alloc::string::String;
use alloc::vec::Vec;
use core::ops::ControlFlow;

/// The overlap of neighbouring tiles assumed when none is given (a fraction of the tile):
/// the usual setting of microscope scanning software.
pub const DEFAULT_OVERLAP: f64 = 0.1;
/// Weight of a tile's tie to its nominal position, against a registered pair's number of
/// agreeing templates.
pub const STAGE_WEIGHT: f64 = 1e-4;
/// Largest residual (pixels) of an accepted pair after the solve.
pub const PAIR_REJECT: f64 = 1.0;

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
    /// The pairs' registration (always with [`Motion::Translation`]: tiles do not turn).
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
        require_finite("stage error", self.stage_error)?;
        if !(0.0..=0.5).contains(&self.stage_error) {
            return Err(Error::InvalidFloat { name: "stage error", value: self.stage_error, expected: "a fraction within [0, 0.5]" });
        }
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
    /// Whether an accepted pair places it; `false`: at its nominal stage position.
    pub registered: bool,
    /// Why it could not be used at all (unreadable, another size or type): no position.
    pub unreadable: Option<String>,
}

/// A registered grid.
#[derive(Clone, Debug, PartialEq)]
pub struct Mosaic {
    pub tiles: Vec<TileRecord>,
    pub pairs: Vec<TilePair>,
}

/// The neighbouring pairs of nominal positions: nominally in one row (vertical offset
/// under half a tile) and overlapping, or in one column and overlapping.
pub fn neighbours(nominal: &[(f64, f64)], tile: (usize, usize)) -> Vec<(usize, usize)> {
    let (w, h) = (tile.0 as f64, tile.1 as f64);
    let mut out = Vec::new();
    for a in 0..nominal.len() {
        for b in a + 1..nominal.len() {
            let (dx, dy) = (libm::fabs(nominal[b].0 - nominal[a].0), libm::fabs(nominal[b].1 - nominal[a].1));
            if (dy < h / 2.0 && dx < w) || (dx < w / 2.0 && dy < h) {
                out.push((a, b));
            }
        }
    }
    out
}

/// Registers the tiles of `tiles` (one per nominal position, `nominal[i]` the top-left
/// corner of tile i in pixels) and solves their positions (module doc). A tile that cannot
/// be read, or differs in size or pixel type from the first, is reported and left out.
/// `progress` is called before each neighbouring pair and once after the last with the
/// number of pairs done (of `neighbours(nominal, tile size).len()`); `ControlFlow::Break`
/// stops the run there with [`Error::Cancelled`].
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
    let mut pairs = Vec::new();
    let neighbouring = neighbours(nominal, size);
    for (done, &(a, b)) in neighbouring.iter().enumerate() {
        report(progress, done)?;
        if unreadable[a].is_some() || unreadable[b].is_some() {
            continue;
        }
        let predicted = (nominal[b].0 - nominal[a].0, nominal[b].1 - nominal[a].1);
        let (fa, fb) = (tiles.frame(a).map_err(bad_tile)?, tiles.frame(b).map_err(bad_tile)?);
        let (va, vb) = (fa.view().map_err(bad_tile)?, fb.view().map_err(bad_tile)?);
        // The search area must fit the overlap beside each template: a narrow overlap
        // searches a small radius, and the strip seeds cover the stage error beyond it.
        let overlap = (size.0 as f64 - libm::fabs(predicted.0)).min(size.1 as f64 - libm::fabs(predicted.1));
        let radius = (((overlap - p.register.rsz as f64) / 2.0 - 1.0).max(2.0) as usize).min(p.register.search_radius);
        // A stage moves tiles without turning them: grid pairs are translations, whatever
        // the sequences' motion model.
        let pp = GridParams { register: RegisterParams { search_radius: radius, motion: Motion::Translation, ..p.register }, ..*p };
        let reg = register_tile_pair(&va, &vb, predicted, size, &pp, par)?;
        // Each tile may be off by the stage error, so a pair by twice it.
        let tolerance = (2.0 * p.stage_error * size.0 as f64 + 1.0, 2.0 * p.stage_error * size.1 as f64 + 1.0);
        let far = reg.shift.is_some_and(|s| libm::fabs(s.0 - predicted.0) > tolerance.0 || libm::fabs(s.1 - predicted.1) > tolerance.1);
        let skip = match (&reg.skip, far) {
            (Some(why), _) => Some(why.describe()),
            (None, true) => Some(alloc::format!("the offset found is further from the stage's than the stage error {} allows", p.stage_error)),
            (None, false) => None,
        };
        pairs.push(TilePair { a, b, shift: reg.shift.filter(|_| skip.is_none()), skip, ncc: reg.ncc, margin: reg.margin, vectors_used: reg.vectors_used, residual: None });
    }
    report(progress, neighbouring.len())?;
    let solved = solve_grid(nominal, &mut pairs)?;
    let tiles = (0..tiles.len())
        .map(|i| TileRecord {
            index: i,
            position: solved[i],
            registered: unreadable[i].is_none() && pairs.iter().any(|q| q.shift.is_some() && (q.a == i || q.b == i)),
            unreadable: unreadable[i].clone(),
        })
        .collect();
    Ok(Mosaic { tiles, pairs })
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

/// Solves the positions from the accepted pairs and the stage ties, rejecting the worst
/// pair while one disagrees by more than [`PAIR_REJECT`]; sets the pairs' residuals.
fn solve_grid(nominal: &[(f64, f64)], pairs: &mut [TilePair]) -> Result<Vec<(f64, f64)>> {
    let n = nominal.len();
    let origin = nominal[0];
    let stage: Vec<Constraint> = (1..n)
        .map(|i| Constraint { from: 0, to: i, shift: (nominal[i].0 - origin.0, nominal[i].1 - origin.1), weight: STAGE_WEIGHT })
        .collect();
    let guess: Vec<Option<(f64, f64)>> = nominal.iter().map(|q| Some((q.0 - origin.0, q.1 - origin.1))).collect();
    loop {
        let used: Vec<usize> = (0..pairs.len()).filter(|&k| pairs[k].shift.is_some()).collect();
        let constraints: Vec<Constraint> = used
            .iter()
            .map(|&k| Constraint { from: pairs[k].a, to: pairs[k].b, shift: pairs[k].shift.unwrap_or_default(), weight: pairs[k].vectors_used.max(1) as f64 })
            .chain(stage.iter().copied())
            .collect();
        let s = solve(n, 0, (0.0, 0.0), &constraints, &guess, 0.5)?;
        let worst = (0..used.len()).max_by(|&x, &y| s.residuals[x].total_cmp(&s.residuals[y]));
        if let Some(w) = worst.filter(|&w| s.residuals[w] > PAIR_REJECT) {
            let q = &mut pairs[used[w]];
            q.skip = Some(alloc::format!("inconsistent with the other pairs: {:.2} px off after the solve", s.residuals[w]));
            q.shift = None;
            continue;
        }
        for (j, &k) in used.iter().enumerate() {
            pairs[k].residual = Some(s.residuals[j]);
        }
        return Ok(s.positions.iter().zip(&guess).map(|(p, g)| p.or(*g).unwrap_or_default()).collect());
    }
}

/// Registers tile `b` against tile `a` from the nominal offset `predicted`, then from the
/// phase-correlation peaks of their overlap strips where that fails or is weak; a weak
/// consensus must be confirmed by the overlap's NCC (as a sequence's pairs).
fn register_tile_pair(a: &AnyView<'_>, b: &AnyView<'_>, predicted: (f64, f64), size: (usize, usize), p: &GridParams, par: Parallelism) -> Result<PairRegistration> {
    let (la, lb) = (luma_storage(a), luma_storage(b));
    match (gray(a, &la)?, gray(b, &lb)?) {
        (Gray::U8(x), Gray::U8(y)) => register_typed(x, y, predicted, size, p, par),
        (Gray::U16(x), Gray::U16(y)) => register_typed(x, y, predicted, size, p, par),
        (Gray::F32(x), Gray::F32(y)) => register_typed(x, y, predicted, size, p, par),
        _ => Err(Error::UnsupportedType { op: "grid", types: "tiles of two different pixel types" }),
    }
}

fn register_typed<T: NccSample + Into<f64>>(a: ImageView<'_, T>, b: ImageView<'_, T>, predicted: (f64, f64), size: (usize, usize), p: &GridParams, par: Parallelism) -> Result<PairRegistration> {
    let moving = SearchFrame::new(b)?;
    let weak = |r: &PairRegistration| r.shift.is_some() && 3 * r.vectors_used < r.textured;
    let mut best = register_pair(a, &moving, &p.register, predicted, par)?;
    let mut evaluations = best.evaluations;
    if p.coarse_candidates > 0 && (best.shift.is_none() || weak(&best)) {
        for seed in strip_seeds(a, b, predicted, size, p)? {
            if best.shift.is_some_and(|s| libm::fabs(s.0 - seed.0) < 4.0 && libm::fabs(s.1 - seed.1) < 4.0) {
                continue;
            }
            let r = register_pair(a, &moving, &p.register, seed, par)?;
            evaluations += r.evaluations;
            if r.shift.is_some() && (best.shift.is_none() || r.vectors_used > best.vectors_used) {
                best = r;
            }
            if best.shift.is_some() && !weak(&best) {
                break;
            }
        }
    }
    best.evaluations = evaluations;
    if let (Some(s), true) = (best.shift, weak(&best)) {
        let overlap = overlap_ncc(a, b, s, par)?.unwrap_or(f64::NEG_INFINITY);
        if overlap < p.register.min_coefficient {
            best.skip = Some(SkipReason::Unconfirmed { agreeing: best.vectors_used, textured: best.textured, overlap_ncc: overlap, null: None });
            best.shift = None;
        }
    }
    Ok(best)
}

/// Starting offsets from the phase correlation of the two tiles' nominal overlap widened by
/// the stage error: the strip of `a` that `b` should cover and the strip of `b` that should
/// cover it, cut to the same size.
fn strip_seeds<T: NccSample + Into<f64>>(a: ImageView<'_, T>, b: ImageView<'_, T>, predicted: (f64, f64), size: (usize, usize), p: &GridParams) -> Result<Vec<(f64, f64)>> {
    let (w, h) = (size.0 as f64, size.1 as f64);
    let margin = (p.stage_error * w, p.stage_error * h);
    // The overlap's extent in a's coordinates, widened, clamped to the tile.
    let span = |pred: f64, len: f64, m: f64| -> (usize, usize) {
        let lo = (pred - m).max(0.0);
        let hi = (pred + len + m).min(len);
        (libm::floor(lo) as usize, libm::ceil(hi).max(lo + 1.0) as usize)
    };
    let (x0, x1) = span(predicted.0, w, margin.0);
    let (y0, y1) = span(predicted.1, h, margin.1);
    let (cw, ch) = ((x1 - x0).min(size.0), (y1 - y0).min(size.1));
    if cw < 8 || ch < 8 {
        return Ok(Vec::new());
    }
    // b's strip: the same extent moved by the nominal offset, clamped into b.
    let bx = (x0 as f64 - predicted.0).clamp(0.0, (size.0 - cw) as f64) as usize;
    let by = (y0 as f64 - predicted.1).clamp(0.0, (size.1 - ch) as f64) as usize;
    let (sa, sb) = (a.crop(x0, y0, cw, ch)?, b.crop(bx, by, cw, ch)?);
    let found = coarse::candidates(&Spectrum::new(sa), &Spectrum::new(sb), p.coarse_candidates).unwrap_or_default();
    // A strip shift s (b's strip shows a's strip at +s) is the tile offset s + (a's strip
    // corner - b's strip corner).
    Ok(found.into_iter().map(|peak| (peak.shift.0 + x0 as f64 - bx as f64, peak.shift.1 + y0 as f64 - by as f64)).collect())
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

    #[test]
    fn blank_and_missing_tiles_keep_their_stage_position_flagged() {
        let (src, nominal, truth) = grid(5);
        let mut tiles: Vec<Image<u8>> = truth.iter().map(|&(x, y)| src.view().crop(x, y, TILE.0, TILE.1).unwrap().to_image()).collect();
        tiles[5] = Image::filled(TILE.0, TILE.1, 77).unwrap();
        let odd = Image::<u8>::filled(60, 200, 1).unwrap();
        let mut views: Vec<AnyView<'_>> = tiles.iter().map(|t| AnyView::U8(t.view())).collect();
        views[9] = AnyView::U8(odd.view());
        let m = register_tiles(&InMemory(&views), &nominal, &GridParams::default(), Parallelism::Sequential, &mut go_on).unwrap();
        for i in [5, 9] {
            let t = &m.tiles[i];
            let want = (nominal[i].0 - nominal[0].0, nominal[i].1 - nominal[0].1);
            // Tied to the stage only, relative to tile 0's registered position.
            assert!(!t.registered && libm::hypot(t.position.0 - want.0, t.position.1 - want.1) < 1.0, "tile {i}: {t:?} vs {want:?}");
            assert!(m.pairs.iter().filter(|q| q.a == i || q.b == i).all(|q| q.shift.is_none()));
        }
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
