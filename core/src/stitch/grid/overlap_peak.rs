//! A grid pair's shift checked against its whole overlap.
//!
//! Templates placed along an edge that runs across the pair's way (the rim of a cup, a band
//! of stain) each match anywhere along it, and a handful of them can agree on a shift
//! several pixels off (a grid cut from the coffee photograph enlarged three times: 4
//! templates at NCC 0.94 agreed 7.7 px from the truth). The whole overlap holds the edge's
//! bends and everything else the tiles share, and correlates best at the true shift (there
//! 0.993 against 0.969 at the templates' shift). So the overlap's NCC is probed
//! [`STEP`] px either way along each axis from the templates' shift: where a probe
//! correlates more, the shift climbs the overlap's NCC to its peak, which overrules the
//! templates where it correlates much better ([`GAIN`]); elsewhere the templates' subpixel
//! shift stands.

use super::strip::{climb, parabola_vertex};
use crate::image::ImageView;
use crate::ncc::NccSample;

/// How far (px) the probes stand from the templates' shift: beyond the breadth of a true
/// peak's top at a subpixel shift, within the error a ridge leaves.
pub(super) const STEP: i64 = 2;

/// The most pixels one NCC samples: a larger overlap is sampled on a coarser lattice (the
/// check then costs the same on a MIST tile's 139 x 1040 overlap as on a small one).
const SAMPLES: usize = 16_384;

/// A probe must beat the templates' shift by this much to count: the sampling's noise on
/// an overlap correlating 0.9 or more.
const MARGIN: f64 = 0.002;

/// The fraction of the overlap's decorrelation (`1 - r` at the templates' shift) the peak
/// must leave at most to overrule them: the coffee grid's pair went from 0.969 to 0.993
/// (a quarter), the camera grid's uncorrected vignetting tilted a true pair's top by 0.7
/// px for a few thousandths.
const GAIN: f64 = 0.5;

/// The overlap's peak where it lies [`STEP`] px or more from `shift` (within `reach` px
/// per axis of it), climbed from the probes and from `seeds` (the strips' phase-correlation
/// peaks, for a pair that only the fewest templates hold: the overlap can peak a little at
/// a wrong shift too, and its true peak be out of the probes' reach): `Some(peak)`,
/// subpixel; `None` where nothing correlates enough more than `shift` (or the overlap is too
/// small or flat to judge).
pub(super) fn overlap_peak<T: NccSample + Into<f64>>(a: ImageView<'_, T>, b: ImageView<'_, T>, shift: (f64, f64), reach: f64, seeds: &[(f64, f64)]) -> Option<(f64, f64)> {
    let start = (libm::round(shift.0) as i64, libm::round(shift.1) as i64);
    let reach = libm::ceil(reach) as i64;
    let within = |s: (i64, i64)| (s.0 - start.0).abs() <= reach && (s.1 - start.1).abs() <= reach;
    let ncc = |s: (i64, i64)| within(s).then(|| sampled_ncc(&a, &b, s)).flatten();
    let here = ncc(start)?;
    let probes = [(STEP, 0), (-STEP, 0), (0, STEP), (0, -STEP)].map(|d| (start.0 + d.0, start.1 + d.1));
    let starts = probes.into_iter().chain(seeds.iter().map(|s| (libm::round(s.0) as i64, libm::round(s.1) as i64)).filter(|s| (s.0 - start.0).abs().max((s.1 - start.1).abs()) >= STEP));
    let climbed = starts.filter_map(|s| Some((s, ncc(s)?))).filter(|&(_, r)| r > here + MARGIN).map(|top| climb(top, &mut |s| ncc(s), 4 * reach.max(1) as usize));
    let top = climbed.max_by(|x, y| x.1.total_cmp(&y.1))?;
    let ((x, y), r) = top;
    // Only a peak that takes away at least half of what the overlap left uncorrelated
    // overrules the templates: shading the tiles do not share (uncorrected vignetting, a
    // sky) tilts a broad peak's top by a pixel or two, and there the templates are right.
    if 1.0 - r > GAIN * (1.0 - here) {
        return None;
    }
    Some((x as f64 + parabola_vertex(ncc((x - 1, y)), r, ncc((x + 1, y))), y as f64 + parabola_vertex(ncc((x, y - 1)), r, ncc((x, y + 1)))))
}

/// Pearson's r of `a` and `b` moved by the whole-pixel shift `s` over their overlap,
/// sampled on a lattice of at most [`SAMPLES`] pixels; `None` for an overlap under 8 px a
/// side or flat.
fn sampled_ncc<T: NccSample + Into<f64>>(a: &ImageView<'_, T>, b: &ImageView<'_, T>, s: (i64, i64)) -> Option<f64> {
    let (w, h) = (a.width() as i64, a.height() as i64);
    let (x0, x1, y0, y1) = (s.0.max(0), (w + s.0).min(w), s.1.max(0), (h + s.1).min(h));
    if x1 - x0 < 8 || y1 - y0 < 8 {
        return None;
    }
    let area = ((x1 - x0) * (y1 - y0)) as usize;
    let stride = (libm::ceil(libm::sqrt(area as f64 / SAMPLES as f64)) as usize).max(1);
    let (mut n, mut sa, mut sb, mut saa, mut sbb, mut sab) = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    for y in (y0..y1).step_by(stride) {
        let (ra, rb) = (a.row(y as usize), b.row((y - s.1) as usize));
        for x in (x0..x1).step_by(stride) {
            let (p, q): (f64, f64) = (ra[x as usize].into(), rb[(x - s.0) as usize].into());
            n += 1.0;
            sa += p;
            sb += q;
            saa += p * p;
            sbb += q * q;
            sab += p * q;
        }
    }
    let (va, vb, cov) = (saa - sa * sa / n, sbb - sb * sb / n, sab - sa * sb / n);
    (va > 1e-9 * (saa + 1.0) && vb > 1e-9 * (sbb + 1.0)).then(|| cov / libm::sqrt(va * vb))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::Image;
    use crate::stitch::texture;

    /// Two 200 x 160 tiles side by side, `b` 170 px right of `a` and 2 px down.
    fn pair(f: impl Fn(usize, usize) -> f32) -> (Image<f32>, Image<f32>) {
        (Image::from_fn(200, 160, |x, y| f(x + 20, y + 20)).unwrap(), Image::from_fn(200, 160, |x, y| f(x + 190, y + 22)).unwrap())
    }

    #[test]
    fn a_shift_off_along_an_edge_climbs_to_the_overlaps_peak_and_a_true_one_stands() {
        // A texture smeared along x (a running mean 41 px wide): templates find little to
        // hold them along x, the whole overlap its slow changes.
        let tex = texture(600, 400, 4);
        let smeared = Image::from_fn(560, 400, |x, y| tex.view().row(y)[x..x + 41].iter().sum::<f32>() / 41.0).unwrap();
        let (a, b) = pair(|x, y| smeared.view().row(y)[x]);
        let moved = overlap_peak(a.view(), b.view(), (162.3, 2.0), 32.0, &[]).unwrap();
        assert!(libm::hypot(moved.0 - 170.0, moved.1 - 2.0) < 0.5, "{moved:?}");
        // Texture: the true subpixel shift is confirmed, and so are shifts a pixel off (the
        // probes stand two away).
        let tex = texture(600, 400, 9);
        let (a, b) = pair(|x, y| tex.view().row(y)[x]);
        for s in [(170.0, 2.0), (170.4, 1.6), (171.0, 2.0)] {
            assert_eq!(overlap_peak(a.view(), b.view(), s, 32.0, &[(150.0, 10.0)]), None, "{s:?}");
        }
        // A flat overlap is not judged.
        let flat = Image::<f32>::filled(200, 160, 3.0).unwrap();
        assert_eq!(overlap_peak(flat.view(), flat.view(), (170.0, 0.0), 32.0, &[]), None);
    }
}
