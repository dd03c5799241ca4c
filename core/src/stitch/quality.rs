//! Quality of a registered pair, measured on the registered luminance after alignment:
//!
//! * [`overlap_ncc`]: Pearson's r between the reference and the moving frame over their
//!   whole overlap, the moving frame resampled bilinearly at the subpixel shift;
//! * [`grid_ncc`]: the original plugin's measure: a 5 x 5 grid of templates spread over the
//!   bounding box of the overlap, the mean of their coefficients (flat templates left out).
//!
//! Both are computed in f64 straight from the definition: they judge the registration, so
//! they share no code with the search that produced it.

use crate::error::{require_finite, require_range, Result};
use crate::image::{ImageView, Pixel};

/// The overlap of the reference with the moving frame shifted by `shift`, in reference
/// coordinates, keeping one pixel of margin for bilinear sampling: `(x0, y0, x1, y1)`
/// exclusive ends; `None` when empty.
fn overlap(size: (usize, usize), shift: (f64, f64)) -> Option<(usize, usize, usize, usize)> {
    // Reference pixel X sees moving pixel X - sx, which needs 0 <= X - sx <= W - 2 to
    // sample bilinearly with both neighbours inside.
    let (w, h) = (size.0 as f64, size.1 as f64);
    let x0 = libm::ceil(shift.0).max(0.0);
    let y0 = libm::ceil(shift.1).max(0.0);
    let x1 = libm::floor(w - 2.0 + shift.0).min(w - 1.0) + 1.0;
    let y1 = libm::floor(h - 2.0 + shift.1).min(h - 1.0) + 1.0;
    (x1 > x0 && y1 > y0).then(|| (x0 as usize, y0 as usize, x1 as usize, y1 as usize))
}

#[inline]
fn bilinear<T: Pixel + Into<f64>>(m: &ImageView<'_, T>, x: f64, y: f64) -> f64 {
    let (fx, fy) = (libm::floor(x), libm::floor(y));
    let (tx, ty) = (x - fx, y - fy);
    let (i, j) = (fx as usize, fy as usize);
    let (r0, r1) = (m.row(j), m.row((j + 1).min(m.height() - 1)));
    let i1 = (i + 1).min(m.width() - 1);
    let top = r0[i].into() * (1.0 - tx) + r0[i1].into() * tx;
    let bot = r1[i].into() * (1.0 - tx) + r1[i1].into() * tx;
    top * (1.0 - ty) + bot * ty
}

/// Pearson's r of the reference and the aligned moving frame over the rectangle
/// `[x0, x1) x [y0, y1)` of reference coordinates.
fn pearson_region<T: Pixel + Into<f64>>(
    r: &ImageView<'_, T>,
    m: &ImageView<'_, T>,
    shift: (f64, f64),
    (x0, y0, x1, y1): (usize, usize, usize, usize),
) -> Option<f64> {
    // Two passes (means, then centred sums) for accuracy.
    let n = ((x1 - x0) * (y1 - y0)) as f64;
    let (mut sa, mut sb) = (0.0, 0.0);
    for y in y0..y1 {
        for x in x0..x1 {
            sa += r.row(y)[x].into();
            sb += bilinear(m, x as f64 - shift.0, y as f64 - shift.1);
        }
    }
    let (ma, mb) = (sa / n, sb / n);
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for y in y0..y1 {
        for x in x0..x1 {
            let a = r.row(y)[x].into() - ma;
            let b = bilinear(m, x as f64 - shift.0, y as f64 - shift.1) - mb;
            sab += a * b;
            saa += a * a;
            sbb += b * b;
        }
    }
    (saa > 0.0 && sbb > 0.0).then(|| (sab / libm::sqrt(saa * sbb)).clamp(-1.0, 1.0))
}

fn check<T: Pixel>(r: &ImageView<'_, T>, m: &ImageView<'_, T>, shift: (f64, f64)) -> Result<()> {
    crate::image::check_same_size(r.size(), m.size())?;
    require_finite("shift x", shift.0)?;
    require_finite("shift y", shift.1)
}

/// Pearson's r over the whole overlap of `reference` and `moving` aligned by `shift`
/// (moving pixel `(u, v)` shows reference `(u + x, v + y)`; moving sampled bilinearly).
/// `None` when the overlap is empty or flat. Errors: sizes differ, non-finite shift.
pub fn overlap_ncc<T: Pixel + Into<f64>>(reference: ImageView<'_, T>, moving: ImageView<'_, T>, shift: (f64, f64)) -> Result<Option<f64>> {
    check(&reference, &moving, shift)?;
    Ok(overlap(reference.size(), shift).and_then(|o| pearson_region(&reference, &moving, shift, o)))
}

/// The original plugin's measure: the mean coefficient of a 5 x 5 grid of `side x side`
/// templates spread evenly over the overlap's bounding box (each compared with the aligned
/// moving frame, sampled bilinearly); flat templates are left out. `None` when the overlap
/// is smaller than one template or every template is flat.
/// Errors: sizes differ, non-finite shift, `side` outside 3..=255.
pub fn grid_ncc<T: Pixel + Into<f64>>(reference: ImageView<'_, T>, moving: ImageView<'_, T>, shift: (f64, f64), side: usize) -> Result<Option<f64>> {
    check(&reference, &moving, shift)?;
    require_range("quality template side", side as i64, 3, 255)?;
    let Some((x0, y0, x1, y1)) = overlap(reference.size(), shift) else { return Ok(None) };
    if x1 - x0 < side || y1 - y0 < side {
        return Ok(None);
    }
    let spread = |lo: usize, hi: usize, k: usize| lo + (hi - side - lo) * k / 4;
    let (mut sum, mut count) = (0.0, 0);
    for j in 0..5 {
        for i in 0..5 {
            let (tx, ty) = (spread(x0, x1, i), spread(y0, y1, j));
            if let Some(r) = pearson_region(&reference, &moving, shift, (tx, ty, tx + side, ty + side)) {
                sum += r;
                count += 1;
            }
        }
    }
    Ok((count > 0).then(|| sum / count as f64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::Image;

    fn scene(w: usize, h: usize, dx: f64, dy: f64) -> Image<f32> {
        // A smooth scene sampled at (x + dx, y + dy): exactly bilinear-friendly shifts
        // are not needed, the tests use integer shifts for exact results.
        Image::from_fn(w, h, |x, y| {
            let (x, y) = (x as f64 + dx, y as f64 + dy);
            (100.0 + 40.0 * libm::sin(x * 0.3) * libm::cos(y * 0.2) + 20.0 * libm::sin((x + y) * 0.13)) as f32
        })
        .unwrap()
    }

    #[test]
    fn aligned_frames_score_one() {
        let a = scene(80, 60, 0.0, 0.0);
        // b's pixel (u, v) shows a's (u + 7, v - 4).
        let b = scene(80, 60, 7.0, -4.0);
        let r = overlap_ncc(a.view(), b.view(), (7.0, -4.0)).unwrap().unwrap();
        assert!((r - 1.0).abs() < 1e-9, "{r}");
        let g = grid_ncc(a.view(), b.view(), (7.0, -4.0), 9).unwrap().unwrap();
        assert!((g - 1.0).abs() < 1e-9, "{g}");
        // A wrong shift scores lower.
        let bad = overlap_ncc(a.view(), b.view(), (4.0, -1.0)).unwrap().unwrap();
        assert!(bad < 0.9, "{bad}");
        let badg = grid_ncc(a.view(), b.view(), (4.0, -1.0), 9).unwrap().unwrap();
        assert!(badg < 0.9, "{badg}");
    }

    #[test]
    fn overlap_region_matches_reference_count() {
        // The region is exactly the reference pixels whose bilinear sample lies inside.
        for (sx, sy) in [(0.0, 0.0), (3.5, -2.25), (-10.0, 5.0), (79.5, 0.0)] {
            let (w, h) = (40usize, 30usize);
            let mut want = 0;
            for y in 0..h {
                for x in 0..w {
                    let (mx, my) = (x as f64 - sx, y as f64 - sy);
                    if mx >= 0.0 && my >= 0.0 && mx <= (w - 2) as f64 && my <= (h - 2) as f64 {
                        want += 1;
                    }
                }
            }
            let got = overlap((w, h), (sx, sy)).map_or(0, |(a, b, c, d)| (c - a) * (d - b));
            assert_eq!(got, want, "{sx} {sy}");
        }
    }

    #[test]
    fn no_overlap_and_flat_give_none_and_bad_input_errors() {
        let a = scene(40, 30, 0.0, 0.0);
        assert_eq!(overlap_ncc(a.view(), a.view(), (45.0, 0.0)).unwrap(), None);
        assert_eq!(grid_ncc(a.view(), a.view(), (0.0, 29.5), 5).unwrap(), None);
        let flat = Image::<f32>::filled(40, 30, 3.0).unwrap();
        assert_eq!(overlap_ncc(flat.view(), a.view(), (1.0, 1.0)).unwrap(), None);
        assert_eq!(grid_ncc(flat.view(), a.view(), (1.0, 1.0), 5).unwrap(), None);
        let c = scene(41, 30, 0.0, 0.0);
        assert!(overlap_ncc(a.view(), c.view(), (0.0, 0.0)).is_err());
        assert!(overlap_ncc(a.view(), a.view(), (f64::NAN, 0.0)).is_err());
        assert!(grid_ncc(a.view(), a.view(), (0.0, 0.0), 2).is_err());
        assert!(grid_ncc(a.view(), a.view(), (0.0, f64::INFINITY), 5).is_err());
    }
}
