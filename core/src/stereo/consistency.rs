//! Left-right consistency check (Hirschmueller 2008, eq. 16): a left disparity `D_L(x, y)`
//! is kept when its match `x_r = x - round(D_L)` lies in the image and
//! `|round(D_L(x, y)) - D_R(x_r, y)| <= max_diff`; otherwise it becomes `f32::INFINITY`
//! (an occlusion or a mismatch), with `round(d) = floor(d + 0.5)`. Invalid left pixels stay
//! invalid; an invalid right pixel fails the check.

use super::INVALID;
use crate::error::Result;
use crate::image::{check_same_size, ImageView, ImageViewMut};

/// Applies the check in place on `left` against `right`; returns the pixels invalidated.
/// Errors: differing sizes, NaN in either map.
pub fn lr_check(mut left: ImageViewMut<'_, f32>, right: ImageView<'_, f32>, max_diff: u16) -> Result<usize> {
    check_same_size(left.size(), right.size())?;
    super::check_no_nan("left disparity", left.as_view())?;
    super::check_no_nan("right disparity", right)?;
    let w = left.width();
    let mut rejected = 0;
    for y in 0..left.height() {
        let rrow = right.row(y);
        for (x, d) in left.row_mut(y).iter_mut().enumerate() {
            if !d.is_finite() {
                continue;
            }
            let di = libm::floor(*d as f64 + 0.5);
            let xr = x as f64 - di;
            let ok = xr >= 0.0 && xr < w as f64 && {
                let dr = rrow[xr as usize];
                dr.is_finite() && (di - dr as f64).abs() <= max_diff as f64
            };
            if !ok {
                *d = INVALID;
                rejected += 1;
            }
        }
    }
    Ok(rejected)
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
            let n = lr_check(got.view_mut(), r.view(), md).unwrap();
            let mut want_n = 0;
            for y in 0..h { for x in 0..w {
                let d = l.at(x, y) as f64;
                let want = if !d.is_finite() { f64::INFINITY } else {
                    let di = (d + 0.5).floor();
                    let xr = x as f64 - di;
                    if xr >= 0.0 && xr < w as f64 && (di - r.at(xr as usize, y) as f64).abs() <= md as f64 { d } else { want_n += 1; f64::INFINITY }
                };
                prop_assert_eq!(got.at(x, y) as f64, want);
            }}
            prop_assert_eq!(n, want_n);
        }
    }

    #[test]
    fn rejects_bad_input() {
        let mut l = Image::<f32>::new(4, 2).unwrap();
        let r = Image::<f32>::new(3, 2).unwrap();
        assert!(lr_check(l.view_mut(), r.view(), 1).is_err());
        let r = Image::<f32>::filled(4, 2, f32::NAN).unwrap();
        assert!(lr_check(l.view_mut(), r.view(), 1).is_err());
    }
}
