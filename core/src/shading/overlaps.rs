//! The flat field's low orders refined from the registered overlaps.
//!
//! A statistic over the stack of tiles (`estimate.rs`) cannot tell shading from a gradient
//! of the specimen that every tile shows alike (one side of the slide brighter, a stain
//! that thins towards an edge): it lies at the same place of every tile. Where two
//! registered tiles overlap they record the same place of the specimen at two places of
//! the tile, so the ratio of what they record is the ratio of the flat field at those two
//! places, whatever the specimen. Fitted over every overlap, that corrects what the
//! statistic left.
//!
//! The residual field `G` (the true flat field over the one given) is `exp(p(u, v))`, `p`
//! a polynomial of degree 2 without constant term in the tile's coordinates scaled to
//! [-1, 1] (the tilt and the curvature: what a gradient of the specimen puts into the
//! statistic). Each square of each overlap ([`seam_squares`]), its two means `c_a`, `c_b`
//! corrected by the given field, gives `p(a's place) - p(b's place) = ln c_a - ln c_b`;
//! fitted by least squares with Huber's weights (a square that a misplacement, an edge of
//! the scene or noise spoils weighs less), a small ridge keeping at zero the terms no
//! overlap sees (a grid of one row says nothing of how the field runs along y).

use super::surface::{robust_fit, terms};
use super::Shading;
use crate::error::Result;
use crate::image::{AnyView, Image};
use crate::stitch::{seam_squares, FrameSource, SEAM_BLOCK};
use alloc::vec::Vec;

/// The fewest overlap squares a refinement is fitted from: five terms, each seen many times.
pub const MIN_SQUARES: usize = 40;

/// The ridge of the fit (see [`robust_fit`]): small against what any overlap contributes.
const RIDGE: f64 = 1e-6;

/// How a refinement went.
#[derive(Clone, Debug, PartialEq)]
pub struct OverlapFit {
    /// Overlaps and squares it was fitted from.
    pub pairs: usize,
    pub squares: usize,
    /// The root mean square of `ln c_a - ln c_b` over the squares: with the given field,
    /// then with the refined one (the squares' Huber weights alike in both).
    pub log_ratio_before: f64,
    pub log_ratio_after: f64,
    /// The refinement's range over the tile: `max G / min G - 1`.
    pub change: f64,
}

/// `shading` refined from the overlaps of `pairs` (tiles of `tiles`, the raw ones, at
/// `positions`, top-left corners; see the module doc). `None` where the overlaps hold fewer
/// than `MIN_SQUARES` usable squares (lit, unsaturated, in both tiles). Errors: a pair
/// naming a tile beyond `positions`, a tile of another size than the shading.
pub fn refine_from_overlaps(tiles: &dyn FrameSource, shading: &Shading, positions: &[Option<(f64, f64)>], pairs: &[(usize, usize)]) -> Result<Option<(Shading, OverlapFit)>> {
    let (w, h) = shading.size();
    let (flat, dark) = (shading.flat(), shading.dark());
    // A field's mean over the square at `at`.
    let square_mean = |field: &crate::image::ImageView<'_, f32>, at: (usize, usize)| -> f64 {
        (at.1..at.1 + SEAM_BLOCK).map(|y| field.row(y)[at.0..at.0 + SEAM_BLOCK].iter().map(|&v| v as f64).sum::<f64>()).sum::<f64>() / (SEAM_BLOCK * SEAM_BLOCK) as f64
    };
    // Per square: (a's centre, b's centre, corrected means a and b).
    let mut squares: Vec<((f64, f64), (f64, f64), f64, f64)> = Vec::new();
    let mut used_pairs = 0;
    for &(a, b) in pairs {
        let beyond = |i: usize| crate::error::Error::InvalidParameter { name: "overlap pairs", reason: alloc::format!("tile {i} of {} positions", positions.len()) };
        let (Some(pa), Some(pb)) = (*positions.get(a).ok_or_else(|| beyond(a))?, *positions.get(b).ok_or_else(|| beyond(b))?) else { continue };
        let (Some((ga, top)), Some((gb, _))) = (gray(tiles, a), gray(tiles, b)) else { continue };
        if ga.size() != (w, h) || gb.size() != (w, h) {
            return Err(crate::error::Error::SizeMismatch { expected: (w, h), got: if ga.size() != (w, h) { ga.size() } else { gb.size() } });
        }
        let d = (libm::round(pb.0 - pa.0) as i64, libm::round(pb.1 - pa.1) as i64);
        let before = squares.len();
        for q in seam_squares(&ga, &gb, d) {
            if q.mean_a >= 0.98 * top || q.mean_b >= 0.98 * top {
                continue;
            }
            let dark_at = |at| dark.as_ref().map_or(0.0, |d| square_mean(d, at));
            let ca = (q.mean_a - dark_at(q.at_a)) / square_mean(&flat, q.at_a);
            let cb = (q.mean_b - dark_at(q.at_b)) / square_mean(&flat, q.at_b);
            let centre = |at: (usize, usize)| (scaled(at.0, w), scaled(at.1, h));
            squares.push((centre(q.at_a), centre(q.at_b), ca, cb));
        }
        used_pairs += usize::from(squares.len() > before);
    }
    // Squares without light in either tile say nothing of a ratio: those below a fiftieth
    // of the typical level are left out.
    let mut levels: Vec<f64> = squares.iter().flat_map(|s| [s.2, s.3]).collect();
    levels.sort_by(f64::total_cmp);
    let floor = levels.get(levels.len() / 2).copied().unwrap_or(0.0) / 50.0;
    squares.retain(|s| s.2 > floor && s.3 > floor && floor > 0.0);
    if squares.len() < MIN_SQUARES {
        return Ok(None);
    }
    let t: Vec<(usize, usize)> = terms(2).into_iter().filter(|&(i, j)| i + j > 0).collect();
    let phi = |(u, v): (f64, f64)| t.iter().map(move |&(i, j)| libm::pow(u, i as f64) * libm::pow(v, j as f64));
    let rows: Vec<f64> = squares.iter().flat_map(|s| phi(s.0).zip(phi(s.1)).map(|(x, y)| x - y).collect::<Vec<_>>()).collect();
    let values: Vec<f64> = squares.iter().map(|s| libm::log(s.2) - libm::log(s.3)).collect();
    let coef = robust_fit(&rows, &values, &alloc::vec![1.0; values.len()], t.len(), RIDGE)?;
    let rms = |c: &[f64]| {
        let sum: f64 = rows
            .chunks_exact(t.len())
            .zip(&values)
            .map(|(r, v)| {
                let e = v - r.iter().zip(c).map(|(a, b)| a * b).sum::<f64>();
                e * e
            })
            .sum();
        libm::sqrt(sum / values.len() as f64)
    };
    let (before, after) = (rms(&alloc::vec![0.0; t.len()]), rms(&coef));
    // The refined field: the given one times G.
    let g = |x: usize, y: usize| libm::exp(phi((scaled_pixel(x, w), scaled_pixel(y, h))).zip(&coef).map(|(a, c)| a * c).sum::<f64>());
    let refined = Image::from_fn(w, h, |x, y| flat.row(y)[x] * g(x, y) as f32)?;
    let (lo, hi) = (0..h).flat_map(|y| (0..w).map(move |x| (x, y))).map(|(x, y)| g(x, y)).fold((f64::MAX, f64::MIN), |(l, u), v| (l.min(v), u.max(v)));
    let dark_image = dark.map(|d| d.to_image());
    Ok(Some((Shading::new(refined, dark_image)?, OverlapFit { pairs: used_pairs, squares: squares.len(), log_ratio_before: before, log_ratio_after: after, change: hi / lo - 1.0 })))
}

/// A square's centre from its top-left corner `at` along a side of `len` pixels, scaled to
/// [-1, 1] as [`scaled_pixel`].
fn scaled(at: usize, len: usize) -> f64 {
    scaled_pixel(at, len) + SEAM_BLOCK as f64 / len as f64 - 1.0 / len as f64
}

/// Pixel `x`'s centre along a side of `len` pixels scaled to [-1, 1].
fn scaled_pixel(x: usize, len: usize) -> f64 {
    (2.0 * x as f64 + 1.0) / len as f64 - 1.0
}

/// Tile `i` as grey f32 (RGB: luma) and the largest value its type holds (a saturated
/// square says nothing of the light); `None` where it cannot be read.
fn gray(tiles: &dyn FrameSource, i: usize) -> Option<(Image<f32>, f64)> {
    let f = tiles.frame(i).ok()?;
    let v = f.view().ok()?;
    let top = match v {
        AnyView::U8(_) | AnyView::Rgba8(_) => 255.0,
        AnyView::U16(_) => 65535.0,
        AnyView::F32(_) => f64::INFINITY,
    };
    Some((v.to_gray_f32(), top))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stitch::{texture, InMemory};

    /// A 4 x 3 grid of 120 x 100 tiles stepping 96 x 80 px over a specimen that brightens
    /// by 60 % from left to right (a gradient every tile shows alike), recorded through a
    /// flat field `1 - 0.3 r^2`, with a dark level of 20.
    fn grid() -> (Vec<Image<f32>>, Vec<Option<(f64, f64)>>, Vec<(usize, usize)>, Image<f32>) {
        let scene = texture(520, 400, 3);
        let true_flat = Image::from_fn(120, 100, |x, y| {
            let (u, v) = (scaled_pixel(x, 120), scaled_pixel(y, 100));
            (1.0 - 0.3 * (u * u + v * v) / 2.0) as f32
        })
        .unwrap();
        let (mut tiles, mut positions) = (Vec::new(), Vec::new());
        for r in 0..3 {
            for c in 0..4 {
                let (x0, y0) = (c * 96, r * 80);
                tiles.push(Image::from_fn(120, 100, |x, y| {
                    let specimen = (40.0 + scene.view().row(y0 + y)[x0 + x]) * (1.0 + 0.6 * (x0 + x) as f32 / 520.0);
                    20.0 + specimen * true_flat.view().row(y)[x]
                }).unwrap());
                positions.push(Some((x0 as f64, y0 as f64)));
            }
        }
        let mut pairs = Vec::new();
        for i in 0..12 {
            if i % 4 < 3 {
                pairs.push((i, i + 1));
            }
            if i < 8 {
                pairs.push((i, i + 4));
            }
        }
        (tiles, positions, pairs, true_flat)
    }

    /// The root mean square of `a / mean(a) - b / mean(b)`.
    fn distance(a: crate::image::ImageView<'_, f32>, b: crate::image::ImageView<'_, f32>) -> f64 {
        let mean = |v: &crate::image::ImageView<'_, f32>| v.rows().flatten().map(|&p| p as f64).sum::<f64>() / (v.width() * v.height()) as f64;
        let (ma, mb) = (mean(&a), mean(&b));
        let sum: f64 = a.rows().flatten().zip(b.rows().flatten()).map(|(&x, &y)| (x as f64 / ma - y as f64 / mb).powi(2)).sum();
        libm::sqrt(sum / (a.width() * a.height()) as f64)
    }

    #[test]
    fn a_gradient_of_the_specimen_left_in_the_field_is_taken_out_by_the_overlaps() {
        let (tiles, positions, pairs, true_flat) = grid();
        let views: Vec<AnyView<'_>> = tiles.iter().map(|t| AnyView::F32(t.view())).collect();
        // What a statistic over the stack finds: the field times the specimen's gradient
        // across one tile (60 % over 520 px: 14 % over 120).
        let biased = Image::from_fn(120, 100, |x, y| true_flat.view().row(y)[x] * (1.0 + 0.6 * x as f32 / 520.0)).unwrap();
        let dark = Image::filled(120, 100, 20.0f32).unwrap();
        let given = Shading::new(biased, Some(dark)).unwrap();
        let (refined, fit) = refine_from_overlaps(&InMemory(&views), &given, &positions, &pairs).unwrap().unwrap();
        let (before, after) = (distance(given.flat(), true_flat.view()), distance(refined.flat(), true_flat.view()));
        assert!(before > 0.03 && after < before / 10.0, "field off by {before} before, {after} after ({fit:?})");
        assert!(fit.log_ratio_after < fit.log_ratio_before / 5.0 && fit.pairs == pairs.len(), "{fit:?}");
        // The true field is left as it is.
        let truth = Shading::new(true_flat.clone(), Some(Image::filled(120, 100, 20.0f32).unwrap())).unwrap();
        let (same, fit) = refine_from_overlaps(&InMemory(&views), &truth, &positions, &pairs).unwrap().unwrap();
        assert!(distance(same.flat(), true_flat.view()) < 0.002 && fit.change < 0.01, "{fit:?}");
    }

    #[test]
    fn too_few_squares_is_no_refinement_and_bad_pairs_are_errors() {
        let (tiles, positions, pairs, true_flat) = grid();
        let views: Vec<AnyView<'_>> = tiles.iter().map(|t| AnyView::F32(t.view())).collect();
        let shading = Shading::new(true_flat, None).unwrap();
        assert_eq!(refine_from_overlaps(&InMemory(&views), &shading, &positions, &pairs[..0]).unwrap(), None);
        let unplaced: Vec<Option<(f64, f64)>> = alloc::vec![None; 12];
        assert_eq!(refine_from_overlaps(&InMemory(&views), &shading, &unplaced, &pairs).unwrap(), None);
        assert!(refine_from_overlaps(&InMemory(&views), &shading, &positions, &[(0, 12)]).is_err());
        let small = Shading::new(Image::filled(60, 50, 1.0f32).unwrap(), None).unwrap();
        assert!(refine_from_overlaps(&InMemory(&views), &small, &positions, &pairs).is_err());
    }
}
