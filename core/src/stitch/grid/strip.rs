//! Registration of a pair across an overlap too narrow for templates and their search (5 %
//! of a tile: 8 to 13 px of the small tiles many microscopes take): the whole overlap is
//! the template. Seeds from the phase correlation of the two overlap strips, and the
//! prediction itself, each search the overlap's NCC (of the tiles high-passed) at
//! whole-pixel shifts around them and climb to the nearest maximum within the stage's
//! margin; the best maximum is refined to a subpixel shift by a parabola per axis.
//!
//! A strip a few pixels wide correlates well by chance (few pixels, one long axis, shading
//! the tiles share), so no fixed level tells a match: the match is judged against the same
//! search run on unrelated tile pairs ([`chance_threshold`]), a permutation test as
//! ASHLAR's aligner makes one.

use crate::image::{Image, ImageView};
use crate::ncc::NccSample;
use crate::parallel::Parallelism;
use crate::stitch::coarse::{self, Spectrum};
use crate::stitch::quality::pearson_region;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;

/// The narrowest overlap (px, across the strip) a match may be found at: narrower, a
/// strip's NCC is mostly chance.
pub(super) const MIN_STRIP: usize = 4;

/// A whole-overlap match.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct StripMatch {
    /// Tile `b`'s offset from tile `a`, subpixel.
    pub shift: (f64, f64),
    /// The overlap's NCC at the best whole-pixel shift.
    pub ncc: f64,
}

/// The best whole-overlap match of `b` against `a` within `margin` px per axis of
/// `predicted`, from the prediction and up to `candidates` phase-correlation seeds of the
/// strips (module doc). `None` when no shift in reach leaves [`MIN_STRIP`] px of overlap
/// with texture on both sides.
pub(super) fn match_strip<T: NccSample + Into<f64>>(a: ImageView<'_, T>, b: ImageView<'_, T>, predicted: (f64, f64), margin: (f64, f64), candidates: usize) -> Option<StripMatch> {
    let size = a.size();
    let reach = (libm::ceil(margin.0) as i64 + 1, libm::ceil(margin.1) as i64 + 1);
    let centre = (libm::round(predicted.0) as i64, libm::round(predicted.1) as i64);
    let within = |s: (i64, i64)| (s.0 - centre.0).abs() <= reach.0 && (s.1 - centre.1).abs() <= reach.1;
    let mut surface = Surface::new(a, b, centre, (reach.0 + 1, reach.1 + 1))?;
    let mut seeds = alloc::vec![centre];
    seeds.extend(strip_seeds(a, b, predicted, margin, size, candidates).into_iter().map(|s| (libm::round(s.0) as i64, libm::round(s.1) as i64)).filter(|&s| within(s)));
    // The seeds are as coarse as the strips' reduction for the phase correlation: every
    // shift that close to a seed is tried before climbing.
    let around = (size.0.max(size.1).div_ceil(coarse::SIDE) + 1) as i64;
    let mut best: Option<((i64, i64), f64)> = None;
    for seed in seeds {
        let mut top: Option<((i64, i64), f64)> = None;
        for dy in -around..=around {
            for dx in -around..=around {
                let s = (seed.0 + dx, seed.1 + dy);
                if let Some(r) = within(s).then(|| surface.ncc(s)).flatten() {
                    if top.is_none_or(|(_, t)| r > t) {
                        top = Some((s, r));
                    }
                }
            }
        }
        let Some(top) = top else { continue };
        // Steepest ascent from the best of the neighbourhood, within reach.
        let top = climb(top, &mut |s| within(s).then(|| surface.ncc(s)).flatten(), usize::MAX);
        // A maximum on the edge of what can be compared (the margin, or the narrowest
        // overlap) may be the flank of a peak beyond it: only one with all its neighbours
        // compared, and below it, is a match.
        let interior = surface.shared_region(top.0).is_some() && NEIGHBOURS.iter().all(|&(dx, dy)| surface.ncc((top.0 .0 + dx, top.0 .1 + dy)).is_some_and(|r| r <= top.1));
        if interior && best.is_none_or(|(_, r)| top.1 > r) {
            best = Some(top);
        }
    }
    let ((x, y), ncc) = best?;
    // A parabola per axis through the NCC at the neighbouring shifts, all over the region
    // the nine shifts around the best share (the overlap changes with the shift, and a
    // parabola through values over different pixels bends towards the wider one).
    let region = surface.shared_region((x, y))?;
    let at = |dx: i64, dy: i64| surface.ncc_over((x + dx, y + dy), region);
    let vertex = |m: Option<f64>, c: Option<f64>, p: Option<f64>| c.map_or(0.0, |c| parabola_vertex(m, c, p));
    let centre = at(0, 0);
    let (fx, fy) = (vertex(at(-1, 0), centre, at(1, 0)), vertex(at(0, -1), centre, at(0, 1)));
    Some(StripMatch { shift: (x as f64 + fx, y as f64 + fy), ncc })
}

/// Steepest ascent of `ncc` from `top`, a pixel at a time (to the first of equally high
/// neighbours), for at most `steps` steps: the local maximum reached.
pub(super) fn climb(mut top: ((i64, i64), f64), ncc: &mut impl FnMut((i64, i64)) -> Option<f64>, steps: usize) -> ((i64, i64), f64) {
    for _ in 0..steps {
        let mut next = top;
        for (dx, dy) in NEIGHBOURS {
            let s = (top.0 .0 + dx, top.0 .1 + dy);
            if let Some(r) = ncc(s) {
                if r > next.1 {
                    next = (s, r);
                }
            }
        }
        if next.0 == top.0 {
            break;
        }
        top = next;
    }
    top
}

/// The offset (within half a pixel) of the vertex of the parabola through `minus`,
/// `centre` and `plus` at -1, 0 and 1; 0 where a side is missing or the three do not bend
/// down.
pub(super) fn parabola_vertex(minus: Option<f64>, centre: f64, plus: Option<f64>) -> f64 {
    match (minus, plus) {
        (Some(m), Some(p)) if m + p - 2.0 * centre < 0.0 => (0.5 * (m - p) / (m + p - 2.0 * centre)).clamp(-0.5, 0.5),
        _ => 0.0,
    }
}

/// The eight neighbouring shifts.
const NEIGHBOURS: [(i64, i64); 8] = [(-1, -1), (0, -1), (1, -1), (-1, 0), (1, 0), (-1, 1), (0, 1), (1, 1)];

/// The filter's reach (px) along the strip: the strips are taken this much longer than
/// what the search compares, and what lies this close to a tile's end is not compared.
const FILTER_REACH: i64 = 3;

/// The light blur across the strip ([1 2 1] / 4) halves the noise of each pixel and costs
/// a pixel of the overlap at each tile's edge: it is taken where the predicted overlap is
/// at least this wide (px), so that overlaps a third narrower still leave a compared strip
/// as wide as [`MIN_STRIP`] plus a pixel either side for the subpixel fit.
const BLUR_ACROSS_FROM: i64 = 12;

/// The overlap's NCC as a function of the whole-pixel shift, each shift computed once, on
/// the two strips high-passed along their length ([`strip_filtered`]): the shading and
/// smooth gradients that tiles share correlate at every shift, what only the texture's
/// detail does at the match. Across the strip nothing is filtered: a filter there would
/// have to leave out its reach at both tiles' edges, most of an overlap of 8 px.
struct Surface {
    /// `a`'s strip, its top-left corner at `a_at` of tile `a`; `b`'s likewise.
    a: Image<f32>,
    a_at: (i64, i64),
    b: Image<f32>,
    b_at: (i64, i64),
    size: (i64, i64),
    /// Whether the strip runs along y (the tiles side by side).
    vertical: bool,
    /// The reach of the filter across the strip (0 or 1, [`BLUR_ACROSS_FROM`]).
    across: i64,
    centre: (i64, i64),
    reach: (i64, i64),
    cache: BTreeMap<(i64, i64), Option<f64>>,
}

impl Surface {
    /// The strips every shift within `reach` of `centre` compares; `None` when no such
    /// shift overlaps the tiles.
    fn new<T: NccSample + Into<f64>>(a: ImageView<'_, T>, b: ImageView<'_, T>, centre: (i64, i64), reach: (i64, i64)) -> Option<Surface> {
        let size = (a.width() as i64, a.height() as i64);
        // The tiles side by side when the offset is mostly across x: their overlap is a
        // column strip.
        let vertical = libm::fabs(centre.0 as f64) >= libm::fabs(centre.1 as f64);
        // Reference pixel X overlaps at shift s when 0 <= X - s < W: over the shifts in
        // reach, tile a's columns [max(0, c - r), min(W, W + c + r)), b's [max(0, -c - r),
        // min(W, W - c + r)); padded along the strip within the tile.
        let overlap = if vertical { size.0 - centre.0.abs() } else { size.1 - centre.1.abs() };
        let across = i64::from(overlap >= BLUR_ACROSS_FROM);
        let span = |lo: i64, hi: i64, len: i64, along: bool| {
            let p = if along { FILTER_REACH } else { across };
            ((lo - p).max(0), (hi + p).min(len))
        };
        let ax = span(centre.0 - reach.0, size.0 + centre.0 + reach.0, size.0, !vertical);
        let ay = span(centre.1 - reach.1, size.1 + centre.1 + reach.1, size.1, vertical);
        let bx = span(-centre.0 - reach.0, size.0 - centre.0 + reach.0, size.0, !vertical);
        let by = span(-centre.1 - reach.1, size.1 - centre.1 + reach.1, size.1, vertical);
        let fa = strip_filtered(&a, (ax.0, ay.0, ax.1 - ax.0, ay.1 - ay.0), vertical, across == 1)?;
        let fb = strip_filtered(&b, (bx.0, by.0, bx.1 - bx.0, by.1 - by.0), vertical, across == 1)?;
        Some(Surface { a: fa, a_at: (ax.0, ay.0), b: fb, b_at: (bx.0, by.0), size, vertical, across, centre, reach, cache: BTreeMap::new() })
    }

    /// Pearson's r of the filtered `a` and `b` moved by `s` over what they compare
    /// ([`Surface::compared`]); `None` where that is narrower than [`MIN_STRIP`], flat on a
    /// side, or `s` out of reach.
    fn ncc(&mut self, s: (i64, i64)) -> Option<f64> {
        if let Some(&r) = self.cache.get(&s) {
            return r;
        }
        let r = self.compared(s).and_then(|region| self.ncc_over(s, region));
        self.cache.insert(s, r);
        r
    }

    /// The pixels of `a` (tile coordinates, `(x0, y0, x1, y1)`) shift `s` compares: the
    /// overlap less what lies within the filter's reach of either tile's ends along the
    /// strip (clamped there, it differs between the tiles); `None` when narrower than
    /// [`MIN_STRIP`] or out of reach.
    fn compared(&self, s: (i64, i64)) -> Option<(i64, i64, i64, i64)> {
        if (s.0 - self.centre.0).abs() > self.reach.0 || (s.1 - self.centre.1).abs() > self.reach.1 {
            return None;
        }
        let (w, h) = self.size;
        let (ex, ey) = if self.vertical { (self.across, FILTER_REACH) } else { (FILTER_REACH, self.across) };
        let (x0, x1) = (ex.max(s.0 + ex), (w - ex).min(w + s.0 - ex));
        let (y0, y1) = (ey.max(s.1 + ey), (h - ey).min(h + s.1 - ey));
        (x1 - x0 >= MIN_STRIP as i64 && y1 - y0 >= MIN_STRIP as i64).then_some((x0, y0, x1, y1))
    }

    /// The region the nine shifts around `s` all compare.
    fn shared_region(&self, s: (i64, i64)) -> Option<(i64, i64, i64, i64)> {
        let (a, b) = (self.compared((s.0 - 1, s.1 - 1))?, self.compared((s.0 + 1, s.1 + 1))?);
        let r = (a.0.max(b.0), a.1.max(b.1), a.2.min(b.2), a.3.min(b.3));
        (r.2 - r.0 >= MIN_STRIP as i64 && r.3 - r.1 >= MIN_STRIP as i64).then_some(r)
    }

    /// Pearson's r of the filtered `a` and `b` moved by `s` over `region` of `a`.
    fn ncc_over(&self, s: (i64, i64), (x0, y0, x1, y1): (i64, i64, i64, i64)) -> Option<f64> {
        // In the strips' own coordinates: a's pixel X - a_at sees b's X - s - b_at.
        let local = (s.0 + self.b_at.0 - self.a_at.0, s.1 + self.b_at.1 - self.a_at.1);
        let region = ((x0 - self.a_at.0) as usize, (y0 - self.a_at.1) as usize, (x1 - self.a_at.0) as usize, (y1 - self.a_at.1) as usize);
        pearson_region(&self.a.view(), &self.b.view(), (local.0 as f64, local.1 as f64), region, Parallelism::Sequential)
    }
}

/// The second derivative of a Gaussian of sigma about 1 along the strip (the 5-tap
/// binomial blur, then the second difference; along y when `vertical`) of `v`'s rectangle
/// `(x, y, w, h)`, blurred across by [1 2 1] / 4 when `blur_across`, its edges clamped;
/// `None` for an empty rectangle or a failed allocation.
fn strip_filtered<T: NccSample + Into<f64>>(v: &ImageView<'_, T>, (x, y, w, h): (i64, i64, i64, i64), vertical: bool, blur_across: bool) -> Option<Image<f32>> {
    if w <= 0 || h <= 0 {
        return None;
    }
    let (w, h) = (w as usize, h as usize);
    let src = v.crop(x as usize, y as usize, w, h).ok()?;
    // The blur and the second difference in one 7-tap kernel: [1 4 6 4 1] / 16 * [1 -2 1].
    const TAPS: [f32; 7] = [1.0 / 16.0, 2.0 / 16.0, -1.0 / 16.0, -4.0 / 16.0, -1.0 / 16.0, 2.0 / 16.0, 1.0 / 16.0];
    let at = |i: isize, n: usize| i.clamp(0, n as isize - 1) as usize;
    let along = Image::from_fn(w, h, |i, j| {
        TAPS.iter()
            .enumerate()
            .map(|(k, t)| {
                let d = k as isize - 3;
                let p = if vertical { src.row(at(j as isize + d, h))[i] } else { src.row(j)[at(i as isize + d, w)] };
                t * p.into() as f32
            })
            .sum::<f32>()
    })
    .ok()?;
    if !blur_across {
        return Some(along);
    }
    let g = along.view();
    Image::from_fn(w, h, |i, j| {
        let p = |d: isize| {
            if vertical {
                g.row(j)[at(i as isize + d, w)]
            } else {
                g.row(at(j as isize + d, h))[i]
            }
        };
        0.25 * p(-1) + 0.5 * p(0) + 0.25 * p(1)
    })
    .ok()
}

/// Starting offsets from the phase correlation of the two tiles' overlap around
/// `predicted`, widened by `margin` px per axis: the strip of `a` that `b` should cover and
/// the strip of `b` that should cover it, cut to the same size; up to `count`, strongest
/// first.
pub(super) fn strip_seeds<T: NccSample + Into<f64>>(a: ImageView<'_, T>, b: ImageView<'_, T>, predicted: (f64, f64), margin: (f64, f64), size: (usize, usize), count: usize) -> Vec<(f64, f64)> {
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
    if cw < 8 || ch < 8 || count == 0 {
        return Vec::new();
    }
    // b's strip: the same extent moved by the predicted offset, clamped into b.
    let bx = (x0 as f64 - predicted.0).clamp(0.0, (size.0 - cw) as f64) as usize;
    let by = (y0 as f64 - predicted.1).clamp(0.0, (size.1 - ch) as f64) as usize;
    let (Ok(sa), Ok(sb)) = (a.crop(x0, y0, cw, ch), b.crop(bx, by, cw, ch)) else {
        return Vec::new();
    };
    let found = coarse::candidates(&Spectrum::new(sa), &Spectrum::new(sb), count).unwrap_or_default();
    // A strip shift s (b's strip shows a's strip at +s) is the tile offset s + (a's strip
    // corner - b's strip corner).
    found.into_iter().map(|peak| (peak.shift.0 + x0 as f64 - bx as f64, peak.shift.1 + y0 as f64 - by as f64)).collect()
}

/// Fewest unrelated pairs a chance threshold is drawn from.
pub(super) const MIN_CHANCE_SAMPLES: usize = 8;

/// The NCC a strip match must exceed not to be chance, from `nulls`, the best matches the
/// same search found on unrelated tile pairs: the larger of their largest and their mean
/// plus four standard deviations (the largest of a few dozen samples alone would let about
/// one chance match in thirty through). `None` with fewer than [`MIN_CHANCE_SAMPLES`].
pub(super) fn chance_threshold(nulls: &[f64]) -> Option<f64> {
    if nulls.len() < MIN_CHANCE_SAMPLES {
        return None;
    }
    let n = nulls.len() as f64;
    let mean = nulls.iter().sum::<f64>() / n;
    let sd = libm::sqrt(nulls.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1.0));
    Some(nulls.iter().cloned().fold(mean + 4.0 * sd, f64::max))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::Image;
    use crate::stitch::texture;

    /// Two 200 x 160 tiles of one texture, `b` at `offset` from `a` (whole pixels).
    fn pair(offset: (usize, usize)) -> (Image<f32>, Image<f32>) {
        let src = texture(600, 400, 7);
        (src.view().crop(20, 30, 200, 160).unwrap().to_image(), src.view().crop(20 + offset.0, 30 + offset.1, 200, 160).unwrap().to_image())
    }

    #[test]
    fn a_ten_pixel_overlap_is_found_from_a_prediction_off_by_the_stage_error() {
        for (offset, predicted) in [((190, 3), (184.0, 0.0)), ((193, 0), (190.0, 6.0)), ((2, 150), (-3.0, 152.0))] {
            let (a, b) = pair(offset);
            let m = match_strip(a.view(), b.view(), predicted, (8.0, 8.0), 3).unwrap();
            assert!(libm::hypot(m.shift.0 - offset.0 as f64, m.shift.1 - offset.1 as f64) < 0.3 && m.ncc > 0.9, "{offset:?}: {m:?}");
        }
    }

    #[test]
    fn nothing_beyond_the_margin_or_the_narrowest_strip_is_a_match() {
        let (a, b) = pair((190, 3));
        // The true offset 12 px beyond a margin of 4: the best within reach is chance.
        let m = match_strip(a.view(), b.view(), (174.0, 3.0), (4.0, 4.0), 3).unwrap();
        assert!(m.ncc < 0.5 && libm::fabs(m.shift.0 - 190.0) > 5.0, "{m:?}");
        // Every shift in reach leaves under MIN_STRIP px of overlap.
        assert_eq!(match_strip(a.view(), b.view(), (199.0, 0.0), (1.0, 1.0), 3), None);
        let flat = Image::<f32>::filled(200, 160, 5.0).unwrap();
        assert_eq!(match_strip(a.view(), flat.view(), (190.0, 0.0), (4.0, 4.0), 3), None);
    }

    #[test]
    fn the_chance_threshold_stands_above_every_null_and_needs_enough_of_them() {
        assert_eq!(chance_threshold(&[0.3; 7]), None);
        let nulls = [0.2, 0.25, 0.3, 0.22, 0.28, 0.24, 0.26, 0.21, 0.5];
        let t = chance_threshold(&nulls).unwrap();
        assert!(t > 0.5 && t < 0.9, "{t}");
        assert!(chance_threshold(&[0.4; 8]).is_some_and(|t| libm::fabs(t - 0.4) < 1e-9));
    }
}
