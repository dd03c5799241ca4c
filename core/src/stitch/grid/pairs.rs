//! Registration of one neighbouring pair of tiles: from a predicted offset (the stage's, or
//! the fitted stage model's) by NCC templates, then from the phase-correlation peaks of the
//! two overlap strips widened by how far the prediction may be off; or, where nothing is
//! known of the offset (the nominal overlap is wrong), from the phase-correlation peaks of
//! the two whole tiles, as MIST does.

use super::GridParams;
use crate::error::{Error, Result};
use crate::image::{AnyView, ImageView};
use crate::ncc::{NccSample, SearchFrame};
use crate::parallel::Parallelism;
use crate::stitch::coarse::{self, Spectrum};
use crate::stitch::quality::overlap_ncc;
use crate::stitch::register::{gray, luma_storage, register_pair, Gray, Motion, PairRegistration, RegisterParams, SkipReason};
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

/// Registers tile `b` against tile `a` (both `size`) from `start`. The templates' search
/// radius shrinks to fit the overlap the start implies; a weak consensus must be confirmed
/// by the overlap's NCC (as a sequence's pairs). A stage moves tiles without turning them:
/// grid pairs are translations, whatever the sequences' motion model.
pub(super) fn register_tile_pair(a: &AnyView<'_>, b: &AnyView<'_>, start: Start, size: (usize, usize), p: &GridParams, par: Parallelism) -> Result<PairRegistration> {
    let (la, lb) = (luma_storage(a), luma_storage(b));
    match (gray(a, &la)?, gray(b, &lb)?) {
        (Gray::U8(x), Gray::U8(y)) => register_typed(x, y, start, size, p, par),
        (Gray::U16(x), Gray::U16(y)) => register_typed(x, y, start, size, p, par),
        (Gray::F32(x), Gray::F32(y)) => register_typed(x, y, start, size, p, par),
        _ => Err(Error::UnsupportedType { op: "grid", types: "tiles of two different pixel types" }),
    }
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
    let overlap = (size.0 as f64 - libm::fabs(predicted.0)).min(size.1 as f64 - libm::fabs(predicted.1));
    // An overlap too narrow even for the smallest templates keeps the given ones: templates
    // smaller still would find chance matches in seeds far off the overlap (tested).
    let fits = (overlap.max(0.0) as usize).saturating_sub(2 * (MIN_RADIUS + 1));
    let rsz = if fits >= MIN_TEMPLATE { p.rsz.min(fits) } else { p.rsz };
    let radius = (((overlap - rsz as f64) / 2.0 - 1.0).max(2.0) as usize).min(p.search_radius);
    RegisterParams { rsz, search_radius: radius, motion: Motion::Translation, ..*p }
}

fn register_typed<T: NccSample + Into<f64>>(a: ImageView<'_, T>, b: ImageView<'_, T>, start: Start, size: (usize, usize), p: &GridParams, par: Parallelism) -> Result<PairRegistration> {
    let moving = SearchFrame::new(b)?;
    let weak = |r: &PairRegistration| r.shift.is_some() && 3 * r.vectors_used < r.textured;
    let (first, seeds) = match start {
        Start::Near { offset, margin } => {
            let first = register_pair(a, &moving, &params_at(offset, size, &p.register), offset, par)?;
            let seeds = if p.coarse_candidates > 0 && (first.shift.is_none() || weak(&first)) { strip_seeds(a, b, offset, margin, size, p.coarse_candidates)? } else { Vec::new() };
            (Some(first), seeds)
        }
        Start::Anywhere { towards } => (None, whole_tile_seeds(a, b, towards, size, p.coarse_candidates.max(1))),
    };
    let mut evaluations = first.as_ref().map_or(0, |r| r.evaluations);
    let mut best = first;
    for seed in seeds {
        if best.as_ref().is_some_and(|r| r.shift.is_some_and(|s| libm::fabs(s.0 - seed.0) < 4.0 && libm::fabs(s.1 - seed.1) < 4.0)) {
            continue;
        }
        // Seeds near a predicted offset search as that prediction's overlap allows (a seed
        // at a narrower overlap is still found from the wider search); a seed from the whole
        // tiles, as its own overlap allows.
        let at = if matches!(start, Start::Near { .. }) { towards_of(start) } else { seed };
        let r = register_pair(a, &moving, &params_at(at, size, &p.register), seed, par)?;
        evaluations += r.evaluations;
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
        None => register_pair(a, &moving, &params_at(towards_of(start), size, &p.register), towards_of(start), par)?,
    };
    best.evaluations = evaluations.max(best.evaluations);
    if let (Some(s), true) = (best.shift, weak(&best)) {
        let overlap = overlap_ncc(a, b, s, par)?.unwrap_or(f64::NEG_INFINITY);
        if overlap < p.register.min_coefficient {
            best.skip = Some(SkipReason::Unconfirmed { agreeing: best.vectors_used, textured: best.textured, overlap_ncc: overlap, null: None });
            best.shift = None;
        }
    }
    Ok(best)
}

fn towards_of(start: Start) -> (f64, f64) {
    match start {
        Start::Near { offset, .. } => offset,
        Start::Anywhere { towards } => towards,
    }
}

/// Starting offsets from the phase correlation of the two tiles' overlap around
/// `predicted`, widened by `margin` px per axis: the strip of `a` that `b` should cover and
/// the strip of `b` that should cover it, cut to the same size.
fn strip_seeds<T: NccSample + Into<f64>>(a: ImageView<'_, T>, b: ImageView<'_, T>, predicted: (f64, f64), margin: (f64, f64), size: (usize, usize), count: usize) -> Result<Vec<(f64, f64)>> {
    let (w, h) = (size.0 as f64, size.1 as f64);
    // The overlap's extent in a's coordinates, widened, clamped to the tile.
    let span = |pred: f64, len: f64, m: f64| -> (usize, usize) {
        let lo = (pred - m).max(0.0);
        let hi = (pred + len + m).min(len);
        (libm::floor(lo) as usize, libm::ceil(hi).max(lo + 1.0) as usize)
    };
    let (x0, x1) = span(predicted.0, w, margin.0);
    let (y0, y1) = span(predicted.1, h, margin.1);
    let (cw, ch) = ((x1.saturating_sub(x0)).min(size.0), (y1.saturating_sub(y0)).min(size.1));
    if cw < 8 || ch < 8 {
        return Ok(Vec::new());
    }
    // b's strip: the same extent moved by the predicted offset, clamped into b.
    let bx = (x0 as f64 - predicted.0).clamp(0.0, (size.0 - cw) as f64) as usize;
    let by = (y0 as f64 - predicted.1).clamp(0.0, (size.1 - ch) as f64) as usize;
    let (sa, sb) = (a.crop(x0, y0, cw, ch)?, b.crop(bx, by, cw, ch)?);
    let found = coarse::candidates(&Spectrum::new(sa), &Spectrum::new(sb), count).unwrap_or_default();
    // A strip shift s (b's strip shows a's strip at +s) is the tile offset s + (a's strip
    // corner - b's strip corner).
    Ok(found.into_iter().map(|peak| (peak.shift.0 + x0 as f64 - bx as f64, peak.shift.1 + y0 as f64 - by as f64)).collect())
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
