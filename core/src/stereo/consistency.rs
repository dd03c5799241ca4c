//! Left-right consistency check (Hirschmueller 2008, eq. 16): a left disparity `D_L(x, y)`
//! is kept when its match `x_r = x - round(D_L)` lies in the image and
//! `|round(D_L(x, y)) - D_R(x_r, y)| <= max_diff`; otherwise it becomes `f32::INFINITY`
//! (an occlusion or a mismatch), with `round(d) = floor(d + 0.5)`. Invalid left pixels stay
//! invalid; an invalid right pixel fails the check.
//!
//! Failures are classified for hole filling (paper sec. 4.3): a pixel is *occluded* when its
//! match falls outside the image or the right pixel it lands on belongs to a nearer surface
//! (`D_R(x_r) > round(D_L(x))`: something in front hides `x` in the right view); any other
//! failure is a mismatch. Matches outside the image get their own class: the left border
//! strip, which only the pixels to its right can say anything about.

use super::INVALID;

/// Occlusion class: hidden behind a nearer surface in the right view.
pub const OCCLUDED: u8 = 1;
/// Occlusion class: the match falls left of the right image (the left border strip).
pub const OUTSIDE: u8 = 2;
#[cfg(test)]
use crate::error::Result;
#[cfg(test)]
use crate::image::{check_same_size, ImageView, ImageViewMut};

/// Applies the check in place on `left` against `right`; returns the pixels invalidated.
/// `occluded`, when given (same size), receives [`OCCLUDED`] or [`OUTSIDE`] for the pixels
/// the check classified as occluded and 0 for every other pixel. Errors: differing sizes, NaN in either map.
#[cfg(test)]
pub fn lr_check(
    mut left: ImageViewMut<'_, f32>,
    right: ImageView<'_, f32>,
    max_diff: u16,
    mut occluded: Option<ImageViewMut<'_, u8>>,
) -> Result<usize> {
    check_same_size(left.size(), right.size())?;
    if let Some(m) = occluded.as_mut() {
        check_same_size(left.size(), m.size())?;
    }
    super::check_no_nan("left disparity", left.as_view())?;
    super::check_no_nan("right disparity", right)?;
    let mut rejected = 0;
    for y in 0..left.height() {
        let occ = occluded.as_mut().map(|m| m.row_mut(y));
        rejected += lr_check_row(left.row_mut(y), right.row(y), max_diff, occ);
    }
    Ok(rejected)
}

/// `round(d) = floor(d + 0.5)` of a finite `d` as an integer (saturating far outside any
/// image: such a match is outside either way). `d + 0.5` is exact in f64.
#[inline(always)]
fn round_half_up(d: f32) -> i64 {
    let v = d as f64 + 0.5;
    let t = v as i64;
    t - ((t as f64) > v) as i64
}

/// [`lr_check`] on one row (no NaN allowed, same lengths); `occluded` receives every
/// pixel's class. Returns the pixels invalidated. Integer match positions and a clamped
/// (branch-free) read of the right map: only a failing pixel branches.
pub(crate) fn lr_check_row(left: &mut [f32], right: &[f32], max_diff: u16, mut occluded: Option<&mut [u8]>) -> usize {
    let w = left.len();
    let mut rejected = 0;
    if let Some(m) = occluded.as_mut() {
        m.fill(0);
    }
    if w == 0 || right.len() < w {
        return 0;
    }
    for (x, d) in left.iter_mut().enumerate() {
        if !d.is_finite() {
            continue;
        }
        let di = round_half_up(*d);
        let xr = (x as i64).saturating_sub(di);
        let inside = xr >= 0 && xr < w as i64;
        let dr = right[xr.clamp(0, w as i64 - 1) as usize];
        let ok = inside && dr.is_finite() && (di as f64 - dr as f64).abs() <= max_diff as f64;
        if !ok {
            *d = INVALID;
            rejected += 1;
            if let Some(m) = occluded.as_mut() {
                m[x] = if !inside { OUTSIDE } else if dr.is_finite() && dr as f64 > di as f64 { OCCLUDED } else { 0 };
            }
        }
    }
    rejected
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::Image;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn matches_reference(w in 1usize..16, h in 1usize..4, seed in any::<u64>(), md in 0u16..3) {
            let mut s = seed | 1;
            let mut next = |m: u64| { s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); (s >> 33) % m };
            let l = Image::from_fn(w, h, |_, _| if next(9) == 0 { f32::INFINITY } else { next(60) as f32 / 10.0 }).unwrap();
            let r = Image::from_fn(w, h, |_, _| if next(9) == 0 { f32::INFINITY } else { next(7) as f32 }).unwrap();
            let mut got = l.clone();
            let mut occ = Image::<u8>::filled(w, h, 7).unwrap();
            let n = lr_check(got.view_mut(), r.view(), md, Some(occ.view_mut())).unwrap();
            let mut want_n = 0;
            for y in 0..h { for x in 0..w {
                let d = l.at(x, y) as f64;
                let want = if !d.is_finite() { f64::INFINITY } else {
                    let di = (d + 0.5).floor();
                    let xr = x as f64 - di;
                    if xr >= 0.0 && xr < w as f64 && (di - r.at(xr as usize, y) as f64).abs() <= md as f64 { d } else { want_n += 1; f64::INFINITY }
                };
                prop_assert_eq!(got.at(x, y) as f64, want);
                let want_occ = if d.is_finite() && !want.is_finite() {
                    let xr = x as f64 - (d + 0.5).floor();
                    if xr < 0.0 || xr >= w as f64 { 2 } else {
                        let dr = r.at(xr as usize, y) as f64;
                        if dr.is_finite() && dr > (d + 0.5).floor() { 1 } else { 0 }
                    }
                } else { 0 };
                prop_assert_eq!(occ.at(x, y), want_occ);
            }}
            prop_assert_eq!(n, want_n);
        }
    }

    #[test]
    fn rejects_bad_input() {
        let mut l = Image::<f32>::new(4, 2).unwrap();
        let r = Image::<f32>::new(3, 2).unwrap();
        assert!(lr_check(l.view_mut(), r.view(), 1, None).is_err());
        let r2 = Image::<f32>::new(4, 2).unwrap();
        let mut m = Image::<u8>::new(3, 2).unwrap();
        assert!(lr_check(l.view_mut(), r2.view(), 1, Some(m.view_mut())).is_err());
        let r = Image::<f32>::filled(4, 2, f32::NAN).unwrap();
        assert!(lr_check(l.view_mut(), r.view(), 1, None).is_err());
    }
}
