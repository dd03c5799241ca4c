//! Registration of one neighbouring pair of tiles: from a predicted offset (the stage's, or
//! the fitted stage model's) by NCC templates, then from the phase-correlation peaks of the
//! two overlap strips widened by how far the prediction may be off; across an overlap too
//! narrow for templates, by the whole overlap ([`super::strip`]); or, where nothing is
//! known of the offset (the nominal overlap is wrong), from the phase-correlation peaks of
//! the two whole tiles, as MIST does.

use super::overlap_peak::overlap_peak;
use super::strip::{match_strip, strip_seeds};
use super::GridParams;
use crate::error::{Error, Result};
use crate::image::{AnyView, ImageView};
use crate::ncc::{Integral, NccSample, SearchFrame};
use crate::parallel::Parallelism;
use crate::stitch::coarse::{self, Spectrum};
use crate::stitch::quality::{overlap_ncc, QualitySample};
use crate::stitch::register::{gray, luma_storage, register_pair, search_frame, Gray, Motion, PairRegistration, RegisterParams, SkipReason};
use alloc::string::String;
use alloc::vec::Vec;

/// Where a pair's search starts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Start {
    /// From `offset`, which may be off by up to `margin` px per axis.
    Near { offset: (f64, f64), margin: (f64, f64) },
    /// Anywhere the tiles overlap on the side of `towards` (the nominal offset): the whole
    /// tiles' phase correlation.
    Anywhere { towards: (f64, f64) },
}

/// A pair's registration as the grid keeps it.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Found {
    pub shift: Option<(f64, f64)>,
    pub skip: Option<String>,
    pub ncc: f64,
    pub margin: f64,
    pub vectors_used: usize,
    /// Matched by its whole overlap (too narrow for templates): judged against chance
    /// before it is used ([`super::strip::chance_threshold`]).
    pub by_strip: bool,
}

/// `on_grey_pair!(a, b, |x, y| body)`: `body` on the grey views `x`, `y` of two tiles of one
/// pixel type (RGBA through its luma); tiles of two types are an error.
macro_rules! on_grey_pair {
    ($a:expr, $b:expr, |$x:ident, $y:ident| $body:expr) => {{
        let (la, lb) = (luma_storage($a), luma_storage($b));
        match (gray($a, &la)?, gray($b, &lb)?) {
            (Gray::U8($x), Gray::U8($y)) => $body,
            (Gray::U16($x), Gray::U16($y)) => $body,
            (Gray::F32($x), Gray::F32($y)) => $body,
            _ => Err(Error::UnsupportedType { op: "grid", types: "tiles of two different pixel types" }),
        }
    }};
}

/// Registers tile `b` against tile `a` (both `size`) from `start`. The templates' search
/// radius shrinks to fit the overlap the start implies; a weak consensus must be confirmed
/// by the overlap's NCC (as a sequence's pairs). A start whose overlap is too narrow for
/// the smallest templates is matched by its whole overlap. A stage moves tiles without
/// turning them: grid pairs are translations, whatever the sequences' motion model.
pub(super) fn register_tile_pair(a: &AnyView<'_>, b: &AnyView<'_>, start: Start, size: (usize, usize), p: &GridParams, par: Parallelism) -> Result<Found> {
    on_grey_pair!(a, b, |x, y| register_typed(x, y, start, size, p, par))
}

/// The NCC of the best whole-overlap match of `b` against `a` from `predicted` within
/// `margin` ([`match_strip`]): a pair of unrelated tiles gives what a strip matches by
/// chance. `None` where nothing in reach can be compared.
pub(super) fn strip_ncc(a: &AnyView<'_>, b: &AnyView<'_>, predicted: (f64, f64), margin: (f64, f64), p: &GridParams) -> Result<Option<f64>> {
    on_grey_pair!(a, b, |x, y| Ok(match_strip(x, y, predicted, margin, p.coarse_candidates).map(|m| m.ncc)))
}

/// The smallest template a narrow overlap shrinks the templates to: 15 x 15 pixels still
/// carry a reliable NCC peak on textured tiles, and the pair's consensus, the overlap's NCC
/// and the stage model check what they find.
const MIN_TEMPLATE: usize = 15;

/// The search radius a narrow overlap keeps around each template at least: the strip
/// seeds, from the overlaps' phase correlation, start within a pixel or two.
const MIN_RADIUS: usize = 3;

/// The registration parameters for a pair predicted at `predicted`: the search area must
/// fit the overlap beside each template, so a narrow overlap searches a small radius (the
/// strip seeds cover what lies beyond it), and one narrower than the templates and that
/// radius takes smaller templates, down to [`MIN_TEMPLATE`] (10 % overlaps of small tiles:
/// 10 % of 256 pixels is about the default template).
fn params_at(predicted: (f64, f64), size: (usize, usize), p: &RegisterParams) -> RegisterParams {
    let overlap = overlap_at(predicted, size);
    // An overlap too narrow even for the smallest templates keeps the given ones: templates
    // smaller still would find chance matches in seeds far off the overlap (tested).
    let fits = template_room(predicted, size);
    let rsz = if fits >= MIN_TEMPLATE { p.rsz.min(fits) } else { p.rsz };
    let radius = (((overlap - rsz as f64) / 2.0 - 1.0).max(2.0) as usize).min(p.search_radius);
    RegisterParams { rsz, search_radius: radius, motion: Motion::Translation, ..*p }
}

/// The overlap's narrower side (px) at offset `predicted`.
fn overlap_at(predicted: (f64, f64), size: (usize, usize)) -> f64 {
    (size.0 as f64 - libm::fabs(predicted.0)).min(size.1 as f64 - libm::fabs(predicted.1))
}

/// The template side the overlap at `predicted` leaves room for beside the smallest search.
fn template_room(predicted: (f64, f64), size: (usize, usize)) -> usize {
    (overlap_at(predicted, size).max(0.0) as usize).saturating_sub(2 * (MIN_RADIUS + 1))
}

fn register_typed<T: NccSample + QualitySample>(a: ImageView<'_, T>, b: ImageView<'_, T>, start: Start, size: (usize, usize), p: &GridParams, par: Parallelism) -> Result<Found> {
    if let Start::Near { offset, margin } = start {
        if template_room(offset, size) < MIN_TEMPLATE {
            let m = match_strip(a, b, offset, margin, p.coarse_candidates);
            let skip = m.is_none().then(|| "no match: within the stage error the overlap is narrower than 4 px or flat".into());
            return Ok(Found { shift: m.map(|m| m.shift), skip, ncc: m.map_or(0.0, |m| m.ncc), margin: 0.0, vectors_used: 0, by_strip: true });
        }
    }
    let mut moving = MovingTile::new(a, b, start, &p.register)?;
    let weak = |r: &PairRegistration| r.shift.is_some() && 3 * r.vectors_used < r.textured;
    let (first, seeds) = match start {
        Start::Near { offset, margin } => {
            let first = moving.register(&params_at(offset, size, &p.register), offset, par)?;
            let seeds = if p.coarse_candidates > 0 && (first.shift.is_none() || weak(&first)) { strip_seeds(a, b, offset, margin, size, p.coarse_candidates) } else { Vec::new() };
            (Some(first), seeds)
        }
        Start::Anywhere { towards } => (None, whole_tile_seeds(a, b, towards, size, p.coarse_candidates.max(1))),
    };
    let mut best = first;
    for seed in seeds {
        if best.as_ref().is_some_and(|r| r.shift.is_some_and(|s| libm::fabs(s.0 - seed.0) < 4.0 && libm::fabs(s.1 - seed.1) < 4.0)) {
            continue;
        }
        // Seeds near a predicted offset search as that prediction's overlap allows (a seed
        // at a narrower overlap is still found from the wider search); a seed from the whole
        // tiles, as its own overlap allows.
        let at = if matches!(start, Start::Near { .. }) { towards_of(start) } else { seed };
        let r = moving.register(&params_at(at, size, &p.register), seed, par)?;
        let better = |best: &PairRegistration| r.shift.is_some() && (best.shift.is_none() || r.vectors_used > best.vectors_used);
        if best.as_ref().is_none_or(better) {
            best = Some(r);
        }
        if best.as_ref().is_some_and(|r| r.shift.is_some() && !weak(r)) {
            break;
        }
    }
    let mut best = match best {
        Some(r) => r,
        // No seed at all: the overlap the phase correlation could see is empty.
        None => moving.register(&params_at(towards_of(start), size, &p.register), towards_of(start), par)?,
    };
    if let (Some(s), true) = (best.shift, weak(&best)) {
        let overlap = overlap_ncc(a, b, s, par)?.unwrap_or(f64::NEG_INFINITY);
        if overlap < p.register.min_coefficient {
            best.skip = Some(SkipReason::Unconfirmed { agreeing: best.vectors_used, textured: best.textured, overlap_ncc: overlap, null: None });
            best.shift = None;
        }
    }
    // Templates along an edge can agree a few pixels off along it; the whole overlap says
    // where it really peaks.
    if let Some(s) = best.shift {
        let reach = p.register.search_radius as f64;
        let seeds = if best.vectors_used <= p.register.min_vectors { strip_seeds(a, b, s, (reach, reach), size, p.coarse_candidates.max(1)) } else { Vec::new() };
        best.shift = Some(overlap_peak(a, b, s, reach, &seeds).unwrap_or(s));
    }
    Ok(Found { shift: best.shift, skip: best.skip.map(|s| s.describe()), ncc: best.ncc, margin: best.margin, vectors_used: best.vectors_used, by_strip: false })
}

/// Tile `b` prepared for template searches against tile `a`. Near a known offset only the
/// overlap and what the searches can reach around it are prepared (the integral images of
/// a whole tile cost more than a pair's searches at 10 % overlap): both tiles are cut to
/// the overlap widened by the margin and the search radius, where the templates, their
/// grid and their searches are those of the whole tiles. A seed beyond the margin, or a
/// start anywhere, searches the whole tile (prepared when first needed).
struct MovingTile<'a, T: NccSample> {
    a: ImageView<'a, T>,
    b: ImageView<'a, T>,
    near: Option<Cut<'a, T>>,
    whole: Option<SearchFrame<'a, T>>,
}

/// The tiles cut to a start's overlap: `a`'s part, `b`'s search frame of the same size,
/// their corners in the tiles, and the seeds it serves (within `margin` of `offset`, with
/// a search radius up to `radius`).
struct Cut<'a, T: NccSample> {
    a: ImageView<'a, T>,
    b: SearchFrame<'a, T>,
    corners: ((usize, usize), (usize, usize)),
    offset: (f64, f64),
    margin: (f64, f64),
    radius: usize,
}

impl<'a, T: NccSample + Into<f64>> MovingTile<'a, T> {
    /// `p`'s search radius sizes the cut, and its search method prepares the frames
    /// ([`search_frame`]).
    fn new(a: ImageView<'a, T>, b: ImageView<'a, T>, start: Start, p: &RegisterParams) -> Result<Self> {
        let search_radius = p.search_radius;
        let near = match start {
            Start::Near { offset, margin } => {
                // The cut per axis, for the rounded offset `o` widened by `reach`: the
                // overlap of a `len`-long axis is [max(0, o), min(len, len + o)) in `a`.
                let cut = |len: usize, o: f64, m: f64| -> Option<(usize, usize, usize)> {
                    let (len, o) = (len as i64, libm::round(o) as i64);
                    let reach = libm::ceil(m) as i64 + search_radius as i64 + 2;
                    let (a0, b0) = (0.max(o - reach), 0.max(-o - reach));
                    let n = len.min(len + o + reach) - a0;
                    (n > 0).then_some((a0 as usize, b0 as usize, n as usize))
                };
                let (w, h) = a.size();
                match (cut(w, offset.0, margin.0), cut(h, offset.1, margin.1)) {
                    (Some((ax, bx, cw)), Some((ay, by, ch))) if (cw, ch) != (w, h) => {
                        let b = search_frame(b.crop(bx, by, cw, ch)?, Integral::default(), p, Parallelism::Sequential)?;
                        Some(Cut { a: a.crop(ax, ay, cw, ch)?, b, corners: ((ax, ay), (bx, by)), offset, margin, radius: search_radius })
                    }
                    _ => None,
                }
            }
            Start::Anywhere { .. } => None,
        };
        Ok(MovingTile { a, b, near, whole: None })
    }

    /// [`register_pair`] of the tiles from `seed`, on the cut where it serves the seed.
    fn register(&mut self, p: &RegisterParams, seed: (f64, f64), par: Parallelism) -> Result<PairRegistration> {
        if let Some(cut) = &self.near {
            let within = |s: f64, o: f64, m: f64| libm::fabs(s - o) <= m;
            if within(seed.0, cut.offset.0, cut.margin.0) && within(seed.1, cut.offset.1, cut.margin.1) && p.search_radius <= cut.radius {
                let ((ax, ay), (bx, by)) = cut.corners;
                let (dx, dy) = (ax as f64 - bx as f64, ay as f64 - by as f64);
                let mut r = register_pair(cut.a, &cut.b, p, (seed.0 - dx, seed.1 - dy), par)?;
                // Back to the whole tiles' coordinates.
                r.shift = r.shift.map(|(x, y)| (x + dx, y + dy));
                for v in &mut r.vectors {
                    v.template = (v.template.0 + ax, v.template.1 + ay);
                    v.found = (v.found.0 + bx as f64, v.found.1 + by as f64);
                    v.shift = (v.shift.0 + dx, v.shift.1 + dy);
                }
                return Ok(r);
            }
        }
        let frame = match self.whole.take() {
            Some(frame) => frame,
            None => search_frame(self.b, Integral::default(), p, Parallelism::Sequential)?,
        };
        register_pair(self.a, self.whole.insert(frame), p, seed, par)
    }
}

fn towards_of(start: Start) -> (f64, f64) {
    match start {
        Start::Near { offset, .. } => offset,
        Start::Anywhere { towards } => towards,
    }
}

/// Starting offsets from the phase correlation of the two whole tiles (MIST's translation
/// computation): each of the `count` strongest peaks stands for a shift modulo the
/// correlation's period, so each alias within the tile's extent that keeps at least an
/// eighth of the tile on both axes and lies on the side of `towards` is a seed, in the
/// peaks' order.
fn whole_tile_seeds<T: NccSample + Into<f64>>(a: ImageView<'_, T>, b: ImageView<'_, T>, towards: (f64, f64), size: (usize, usize), count: usize) -> Vec<(f64, f64)> {
    let peaks = coarse::candidates(&Spectrum::new(a), &Spectrum::new(b), count).unwrap_or_default();
    let period = (coarse::SIDE * size.0.max(size.1).div_ceil(coarse::SIDE).max(1)) as f64;
    let (w, h) = (size.0 as f64, size.1 as f64);
    let mut seeds = Vec::new();
    for peak in peaks {
        for i in [-1.0, 0.0, 1.0] {
            for j in [-1.0, 0.0, 1.0] {
                let s = (peak.shift.0 + i * period, peak.shift.1 + j * period);
                let keeps = libm::fabs(s.0) < w * 0.875 && libm::fabs(s.1) < h * 0.875;
                let side = s.0 * towards.0 + s.1 * towards.1 > 0.0;
                if keeps && side {
                    seeds.push(s);
                }
            }
        }
    }
    seeds
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::Image;
    use crate::stitch::texture;

    /// Two 320 x 240 tiles of one texture, `b` at `offset` from `a`, as `T`.
    fn tiles<T: crate::image::Pixel>(offset: (usize, usize), to: impl Fn(f32) -> T) -> (Image<T>, Image<T>) {
        let src = texture(720, 560, 11).map(to);
        let cut = |x, y| src.view().crop(x, y, 320, 240).unwrap().to_image();
        (cut(10, 20), cut(10 + offset.0, 20 + offset.1))
    }

    /// Registration on the tiles cut to the overlap gives the whole tiles' registration
    /// exactly, for every seed the cut serves; a seed beyond it searches the whole tiles.
    fn cut_registers_as_the_whole_tiles<T: NccSample + Into<f64>>(a: ImageView<'_, T>, b: ImageView<'_, T>, offset: (f64, f64), truth: (usize, usize)) {
        let margin = (24.0, 24.0);
        let start = Start::Near { offset, margin };
        let mut tile = MovingTile::new(a, b, start, &RegisterParams { search_radius: 32, ..Default::default() }).unwrap();
        assert!(tile.near.is_some(), "a 10 % overlap is cut");
        let whole = SearchFrame::new(b).unwrap();
        for (k, seed) in [offset, (offset.0 - 24.0, offset.1 + 17.0), (offset.0 + 23.6, offset.1 - 24.0), (offset.0 + 40.0, offset.1)].into_iter().enumerate() {
            let p = params_at(seed, a.size(), &RegisterParams::default());
            let want = register_pair(a, &whole, &p, seed, Parallelism::Sequential).unwrap();
            let got = tile.register(&p, seed, Parallelism::Sequential).unwrap();
            if k == 0 {
                let (x, y) = want.shift.unwrap_or((f64::NAN, f64::NAN));
                assert!(libm::hypot(x - truth.0 as f64, y - truth.1 as f64) < 0.5, "{want:?}");
            }
            // The same searches, coefficients and decisions; positions moved back from the
            // cut differ from the whole tiles' in the last bits only.
            let close = |u: (f64, f64), v: (f64, f64)| libm::fabs(u.0 - v.0) < 1e-9 && libm::fabs(u.1 - v.1) < 1e-9;
            assert!(got.shift.zip(want.shift).is_none_or(|(u, v)| close(u, v)) && got.shift.is_some() == want.shift.is_some(), "{seed:?}");
            assert_eq!(got.vectors.len(), want.vectors.len());
            for (u, v) in got.vectors.iter().zip(&want.vectors) {
                assert!(close(u.found, v.found) && close(u.shift, v.shift), "{seed:?}: {u:?} {v:?}");
                assert_eq!((u.template, u.coefficient, u.threshold, u.evaluations, u.inlier), (v.template, v.coefficient, v.threshold, v.evaluations, v.inlier));
            }
            let strip = |r: &PairRegistration| PairRegistration { shift: None, vectors: Vec::new(), ..r.clone() };
            assert_eq!(strip(&got), strip(&want), "{seed:?}");
        }
        assert!(tile.whole.is_some(), "the seed beyond the margin searched the whole tiles");
    }

    #[test]
    fn a_pair_cut_to_its_overlap_registers_exactly_as_the_whole_tiles() {
        for (offset, predicted) in [((282, 9), (284.0, 6.0)), ((3, 204), (0.0, 202.0))] {
            let (a, b) = tiles(offset, |v| v as u8);
            cut_registers_as_the_whole_tiles(a.view(), b.view(), predicted, offset);
            let (a, b) = tiles(offset, |v| (v * 250.0) as u16);
            cut_registers_as_the_whole_tiles(a.view(), b.view(), predicted, offset);
        }
    }
}
