//! Background-favouring hole filling along scanlines, for a dense map: each run of invalid
//! pixels in a row takes the smaller of the two valid disparities that bound it (the
//! farther surface: holes next to a depth edge are mostly occlusions of the background,
//! Hirschmueller 2008 sec. 4.3); a run touching the row's start or end takes its one valid
//! neighbour; a row with no valid pixel stays invalid.

use crate::error::Result;
use crate::image::ImageViewMut;

/// Fills `disp` in place as described in the module doc; returns the pixels filled.
/// Errors: NaN in the map.
pub fn fill_scanlines(mut disp: ImageViewMut<'_, f32>) -> Result<usize> {
    super::check_no_nan("disparity", disp.as_view())?;
    let mut filled = 0;
    for y in 0..disp.height() {
        let row = disp.row_mut(y);
        let w = row.len();
        let mut x = 0;
        while x < w {
            if row[x].is_finite() {
                x += 1;
                continue;
            }
            let start = x;
            while x < w && !row[x].is_finite() {
                x += 1;
            }
            let before = if start > 0 { Some(row[start - 1]) } else { None };
            let after = if x < w { Some(row[x]) } else { None };
            let v = match (before, after) {
                (Some(a), Some(b)) => a.min(b),
                (Some(a), None) => a,
                (None, Some(b)) => b,
                (None, None) => continue,
            };
            row[start..x].fill(v);
            filled += x - start;
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::Image;
    use proptest::prelude::*;

    #[test]
    fn hand_example() {
        let inf = f32::INFINITY;
        let mut a = Image::from_vec(7, 2, alloc::vec![inf, 3.0, inf, inf, 5.0, 2.0, inf, inf, inf, inf, inf, inf, inf, inf]).unwrap();
        assert_eq!(fill_scanlines(a.view_mut()).unwrap(), 4);
        assert_eq!(a.row(0), &[3.0, 3.0, 3.0, 3.0, 5.0, 2.0, 2.0]);
        assert!(a.row(1).iter().all(|v| v.is_infinite()));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn matches_reference(w in 1usize..20, seed in any::<u64>()) {
            let mut s = seed | 1;
            let src = Image::from_fn(w, 1, |_, _| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                if (s >> 62) < 2 { f32::INFINITY } else { ((s >> 33) % 40) as f32 }
            }).unwrap();
            let mut got = src.clone();
            let n = fill_scanlines(got.view_mut()).unwrap();
            let r = src.row(0);
            let mut want_n = 0;
            for x in 0..w {
                let want = if r[x].is_finite() { r[x] as f64 } else {
                    let left = (0..x).rev().map(|i| r[i]).find(|v| v.is_finite());
                    let right = (x + 1..w).map(|i| r[i]).find(|v| v.is_finite());
                    let v = match (left, right) { (Some(a), Some(b)) => a.min(b) as f64, (Some(a), None) | (None, Some(a)) => a as f64, _ => f64::INFINITY };
                    if v.is_finite() { want_n += 1; }
                    v
                };
                prop_assert_eq!(got.at(x, 0) as f64, want);
            }
            prop_assert_eq!(n, want_n);
        }
    }

    #[test]
    fn rejects_nan() {
        let mut a = Image::<f32>::filled(3, 1, f32::NAN).unwrap();
        assert!(fill_scanlines(a.view_mut()).is_err());
    }
}
