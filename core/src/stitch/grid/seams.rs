//! The step of brightness across the seams of a mosaic: what shading leaves where one tile
//! meets the next, measured on the tiles at their positions.

use super::super::source::FrameSource;
use crate::error::{Error, Result};
use crate::image::Image;
use alloc::vec::Vec;

/// The side (pixels) of the squares along a seam whose means are compared, and the band's
/// width across it.
pub const SEAM_BLOCK: usize = 8;

/// The step of brightness across the seam of each pair `(a, b)` of `pairs` (tiles of
/// `tiles` at `positions`, top-left corners, rounded to whole pixels): the two tiles'
/// overlap is cut into squares of [`SEAM_BLOCK`] pixels, each square averaged in each
/// tile, and the step is the mean over the squares of `|mean_a - mean_b|`, in grey levels
/// (RGB tiles: luma). Wherever a blend puts the seam inside the overlap, this is the step
/// it shows on average: vignetting darkens the overlap at a's far edge in a and at b's near
/// edge in b, so the two disagree most at the ends of the overlap, not at its midline.
/// Averaging a square takes out the noise and the texture a subpixel misplacement would
/// leave, so what stays is the difference of brightness the two tiles record for the same
/// place. `None` for a
/// pair that does not overlap by a whole square, or with a tile that has no position or
/// cannot be read. Errors: a pair naming a tile beyond `positions`.
pub fn seam_steps(tiles: &dyn FrameSource, positions: &[Option<(f64, f64)>], pairs: &[(usize, usize)]) -> Result<Vec<Option<f64>>> {
    let gray = |i: usize| -> Option<Image<f32>> { tiles.frame(i).ok().and_then(|f| f.view().ok().map(|v| v.to_gray_f32())) };
    let mut out = Vec::with_capacity(pairs.len());
    for &(a, b) in pairs {
        let (Some(pa), Some(pb)) = (positions.get(a).ok_or_else(|| beyond(a, positions.len()))?, positions.get(b).ok_or_else(|| beyond(b, positions.len()))?) else {
            out.push(None);
            continue;
        };
        let (Some(ta), Some(tb)) = (gray(a), gray(b)) else {
            out.push(None);
            continue;
        };
        let d = (libm::round(pb.0 - pa.0) as i64, libm::round(pb.1 - pa.1) as i64);
        out.push(step(&ta, &tb, d));
    }
    Ok(out)
}

fn beyond(i: usize, n: usize) -> Error {
    Error::InvalidParameter { name: "seam pairs", reason: alloc::format!("tile {i} of {n} positions") }
}

/// The seam step of `b` at offset `d` (whole pixels) from `a` (see [`seam_steps`]).
fn step(a: &Image<f32>, b: &Image<f32>, d: (i64, i64)) -> Option<f64> {
    let squares = seam_squares(a, b, d);
    (!squares.is_empty()).then(|| squares.iter().map(|q| libm::fabs(q.mean_a - q.mean_b)).sum::<f64>() / squares.len() as f64)
}

/// One square of an overlap: its top-left corner in tile a's and in tile b's pixels, and
/// each tile's mean over it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SeamSquare {
    pub at_a: (usize, usize),
    pub at_b: (usize, usize),
    pub mean_a: f64,
    pub mean_b: f64,
}

/// The squares of [`SEAM_BLOCK`] pixels the overlap of `b` at offset `d` (whole pixels)
/// from `a` is cut into, from the overlap's top-left corner; none where it does not hold
/// one.
pub fn seam_squares(a: &Image<f32>, b: &Image<f32>, d: (i64, i64)) -> Vec<SeamSquare> {
    // The overlap in a's coordinates.
    let (x0, x1) = (d.0.max(0), (a.width() as i64).min(d.0 + b.width() as i64));
    let (y0, y1) = (d.1.max(0), (a.height() as i64).min(d.1 + b.height() as i64));
    let s = SEAM_BLOCK as i64;
    if x1 - x0 < s || y1 - y0 < s {
        return Vec::new();
    }
    let mean = |img: &Image<f32>, x: i64, y: i64| -> f64 {
        let mut sum = 0.0;
        for yy in y..y + s {
            sum += img.row(yy as usize)[x as usize..(x + s) as usize].iter().map(|&v| v as f64).sum::<f64>();
        }
        sum / (s * s) as f64
    };
    (0..(y1 - y0) / s)
        .flat_map(|j| (0..(x1 - x0) / s).map(move |i| (x0 + i * s, y0 + j * s)))
        .map(|(x, y)| SeamSquare { at_a: (x as usize, y as usize), at_b: ((x - d.0) as usize, (y - d.1) as usize), mean_a: mean(a, x, y), mean_b: mean(b, x - d.0, y - d.1) })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::AnyView;
    use crate::stitch::InMemory;

    #[test]
    fn the_step_is_the_difference_of_brightness_at_the_seam() {
        // One scene (a ramp) seen by two tiles 60 px apart in a row; b 12 levels darker.
        let scene = |x: usize, y: usize| (x + 2 * y) as f32;
        let a = Image::from_fn(100, 40, scene).unwrap();
        let b = Image::from_fn(100, 40, |x, y| scene(x + 60, y) - 12.0).unwrap();
        let c = Image::from_fn(100, 40, |x, y| scene(x, y + 30) + 5.0).unwrap();
        let views = [AnyView::F32(a.view()), AnyView::F32(b.view()), AnyView::F32(c.view())];
        let at = [Some((0.0, 0.0)), Some((60.2, -0.3)), Some((0.0, 30.0))];
        let s = seam_steps(&InMemory(&views), &at, &[(0, 1), (0, 2), (1, 2)]).unwrap();
        assert!((s[0].unwrap() - 12.0).abs() < 1e-9, "{s:?}");
        assert!((s[1].unwrap() - 5.0).abs() < 1e-9, "{s:?}");
        // Tiles 1 and 2 overlap by 40 x 10 px: one row of squares; no position: none.
        assert!(s[2].is_some());
        assert_eq!(seam_steps(&InMemory(&views), &[Some((0.0, 0.0)), None, Some((0.0, 39.0))], &[(0, 1), (0, 2)]).unwrap(), [None, None]);
        assert!(seam_steps(&InMemory(&views), &at, &[(0, 3)]).is_err());
    }
}
