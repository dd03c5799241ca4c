//! Middlebury scores of a disparity map against ground truth (Scharstein and Szeliski,
//! IJCV 2002): over the pixels with known ground truth (`gt > 0` and finite; Middlebury
//! stores 0 for unknown), the percentage whose disparity is off by more than 1 (bad 1.0)
//! and 2 (bad 2.0) pixels, with an invalid (non-finite) disparity counted as bad; the same
//! over the known pixels that have a disparity; the mean absolute error over the latter;
//! and the density, the share of known pixels that have a disparity.

use tessera_core::error::{require_positive, Error, Result};
use tessera_core::image::{check_same_size, Image, ImageView};
use tessera_core::stereo::check_no_nan;

/// Scores in percent (MAE in pixels).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StereoScores {
    /// Pixels with known ground truth.
    pub known: usize,
    /// Known pixels with a (finite) disparity.
    pub valid: usize,
    /// Bad 1.0 over all known pixels, invalid counted as bad.
    pub bad1_all: f64,
    /// Bad 2.0 over all known pixels, invalid counted as bad.
    pub bad2_all: f64,
    /// Bad 1.0 over the known pixels that have a disparity.
    pub bad1_valid: f64,
    /// Bad 2.0 over the known pixels that have a disparity.
    pub bad2_valid: f64,
    /// Mean |d - gt| over the known pixels that have a disparity.
    pub mae_valid: f64,
    /// `100 * valid / known`.
    pub density: f64,
}

/// Scores `disp` against `gt` (same size, disparities in pixels, `<= 0` = unknown).
/// Errors: differing sizes, NaN in either map, no known pixel.
pub fn evaluate(disp: ImageView<'_, f32>, gt: ImageView<'_, f32>) -> Result<StereoScores> {
    check_same_size(gt.size(), disp.size())?;
    check_no_nan("disparity", disp)?;
    check_no_nan("ground truth", gt)?;
    let (mut known, mut valid, mut bad1, mut bad2, mut vb1, mut vb2) = (0usize, 0usize, 0usize, 0usize, 0usize, 0usize);
    let mut abs = 0.0f64;
    for y in 0..gt.height() {
        for (&d, &g) in disp.row(y).iter().zip(gt.row(y)) {
            if !(g.is_finite() && g > 0.0) {
                continue;
            }
            known += 1;
            if !d.is_finite() {
                bad1 += 1;
                bad2 += 1;
                continue;
            }
            valid += 1;
            let e = (d as f64 - g as f64).abs();
            abs += e;
            if e > 1.0 {
                bad1 += 1;
                vb1 += 1;
            }
            if e > 2.0 {
                bad2 += 1;
                vb2 += 1;
            }
        }
    }
    if known == 0 {
        return Err(Error::InvalidParameter { name: "ground truth", reason: "no pixel has a known disparity".into() });
    }
    let pct = |a: usize, b: usize| if b == 0 { 0.0 } else { 100.0 * a as f64 / b as f64 };
    Ok(StereoScores {
        known,
        valid,
        bad1_all: pct(bad1, known),
        bad2_all: pct(bad2, known),
        bad1_valid: pct(vb1, valid),
        bad2_valid: pct(vb2, valid),
        mae_valid: if valid == 0 { 0.0 } else { abs / valid as f64 },
        density: pct(valid, known),
    })
}

/// Ground truth stored as integers times `scale` (Middlebury: x4 in 8 bits, 0 unknown)
/// to disparities in pixels: `raw / scale`, 0 stays 0 (unknown). `scale` finite, > 0.
pub fn ground_truth_from_u8(raw: ImageView<'_, u8>, scale: f32) -> Result<Image<f32>> {
    require_positive("ground-truth scale", scale as f64)?;
    Ok(raw.convert::<f32>().map(|v| v / scale))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_example() {
        let inf = f32::INFINITY;
        // gt: 4 known pixels (one unknown 0).
        let gt = Image::from_vec(5, 1, vec![10.0, 10.0, 10.0, 0.0, 20.0]).unwrap();
        let d = Image::from_vec(5, 1, vec![10.5, 11.5, inf, 3.0, 17.0]).unwrap();
        let s = evaluate(d.view(), gt.view()).unwrap();
        assert_eq!((s.known, s.valid), (4, 3));
        assert_eq!(s.bad1_all, 75.0); // 11.5 (1.5), inf, 17 (3)
        assert_eq!(s.bad2_all, 50.0); // inf, 17
        assert!((s.bad1_valid - 200.0 / 3.0).abs() < 1e-12);
        assert!((s.bad2_valid - 100.0 / 3.0).abs() < 1e-12);
        assert!((s.mae_valid - 5.0 / 3.0).abs() < 1e-12);
        assert_eq!(s.density, 75.0);
        // Exactly 1.0 off is not bad (strictly greater).
        let d = Image::from_vec(5, 1, vec![11.0, 9.0, 12.0, 0.0, 22.0]).unwrap();
        let s = evaluate(d.view(), gt.view()).unwrap();
        assert_eq!((s.bad1_all, s.bad2_all), (50.0, 0.0));
    }

    #[test]
    fn ground_truth_scaling() {
        let raw = Image::from_vec(3, 1, vec![0u8, 4, 255]).unwrap();
        let g = ground_truth_from_u8(raw.view(), 4.0).unwrap();
        assert_eq!(g.row(0), &[0.0, 1.0, 63.75]);
        assert!(ground_truth_from_u8(raw.view(), 0.0).is_err());
        assert!(ground_truth_from_u8(raw.view(), f32::NAN).is_err());
    }

    #[test]
    fn rejects_bad_input() {
        let gt = Image::<f32>::new(3, 2).unwrap();
        let d = Image::<f32>::new(3, 2).unwrap();
        assert!(matches!(evaluate(d.view(), gt.view()), Err(Error::InvalidParameter { .. })));
        let d2 = Image::<f32>::new(2, 2).unwrap();
        assert!(matches!(evaluate(d2.view(), gt.view()), Err(Error::SizeMismatch { .. })));
        let g1 = Image::<f32>::filled(3, 2, 1.0).unwrap();
        let dn = Image::<f32>::filled(3, 2, f32::NAN).unwrap();
        assert!(evaluate(dn.view(), g1.view()).is_err());
    }
}
