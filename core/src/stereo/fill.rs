//! Hole filling for a dense map (Hirschmueller 2008, sec. 4.3, with 8 directions): for each
//! invalid pixel, the nearest valid disparity is looked up along the 8 scanlines through it
//! (horizontal, vertical, diagonal; walking outwards until a valid pixel or the border).
//! A pixel the left-right check classified as *occluded* takes the second-lowest of the
//! values found (the background: occlusions belong to the farther surface; the lowest
//! alone would follow a single stray small value), or the lowest when only one was found;
//! a pixel whose match fell left of the right image (the left border strip) takes the nearest
//! valid value to its right on its row, the surface it most likely continues;
//! any other invalid pixel (a mismatch) takes the median of the values (the lower middle
//! one for an even count). Values are read from the map before filling, so the result does
//! not depend on the visiting order. A pixel with no valid pixel on any of its 8 lines stays
//! invalid.

use super::consistency::OUTSIDE;
use crate::error::Result;
use crate::image::{check_same_size, ImageView, ImageViewMut};
use crate::parallel::{for_each_band, Parallelism};
use core::sync::atomic::{AtomicUsize, Ordering};

const DIRS: [(isize, isize); 8] = [(1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (-1, 1), (1, -1), (-1, -1)];

/// Fills `disp` in place as described in the module doc; `occluded` (same size, classes
/// [`super::consistency::OCCLUDED`] / [`OUTSIDE`], 0 = mismatch) comes from [`super::consistency::lr_check`]; without it every hole is
/// treated as a mismatch. Rows run in parallel bands (each step reads only the map as it
/// was before the step). Returns the pixels filled. Errors: NaN in the map, a mask of
/// another size.
pub fn fill_holes(mut disp: ImageViewMut<'_, f32>, occluded: Option<ImageView<'_, u8>>, par: Parallelism) -> Result<usize> {
    super::check_no_nan("disparity", disp.as_view())?;
    if let Some(m) = occluded {
        check_same_size(disp.size(), m.size())?;
    }
    let (w, h) = disp.size();
    let filled = AtomicUsize::new(0);
    // Step 1, the left border strip: scanning each row right to left with the last valid
    // disparity `cur`, a pixel at `x < cur` lies where the surface to its right has its
    // match left of the right image; its own match (clamped cost) cannot be trusted even
    // when it passed the check, so it takes `cur`.
    for_each_band(disp.reborrow(), par, 16, |_, mut band| {
        let mut n = 0;
        for j in 0..band.height() {
            let row = band.row_mut(j);
            let mut cur = f32::INFINITY;
            for x in (0..w).rev() {
                if cur.is_finite() && (x as f32) < cur {
                    n += !row[x].is_finite() as usize;
                    row[x] = cur;
                } else if row[x].is_finite() {
                    cur = row[x];
                }
            }
        }
        filled.fetch_add(n, Ordering::Relaxed);
    });
    // Step 2: the 8-line fill, reading the map as it is after step 1.
    let src = disp.as_view().try_to_image()?;
    let data = src.as_slice();
    for_each_band(disp, par, 16, |y0, mut band| {
        let mut n = 0;
        for j in 0..band.height() {
            let y = y0 + j;
            let out = band.row_mut(j);
            for (x, o) in out.iter_mut().enumerate() {
                let at = y * w + x;
                if data[at].is_finite() {
                    continue;
                }
                let mut v = [0f32; 8];
                let mut found = 0;
                // The nearest valid pixel to the right (the first direction), for the left border strip.
                let mut right = None;
                for (k, (dx, dy)) in DIRS.into_iter().enumerate() {
                    // Steps until the border, and the index step of the direction.
                    let steps_x = match dx {
                        1 => w - 1 - x,
                        -1 => x,
                        _ => usize::MAX,
                    };
                    let steps_y = match dy {
                        1 => h - 1 - y,
                        -1 => y,
                        _ => usize::MAX,
                    };
                    let step = dy * w as isize + dx;
                    let mut i = at;
                    for _ in 0..steps_x.min(steps_y) {
                        i = i.wrapping_add_signed(step);
                        let d = data[i];
                        if d.is_finite() {
                            v[found] = d;
                            found += 1;
                            if k == 0 {
                                right = Some(d);
                            }
                            break;
                        }
                    }
                }
                if found == 0 {
                    continue;
                }
                let class = occluded.map_or(0, |m| m.row(y)[x]);
                let v = &mut v[..found];
                sort_small(v);
                *o = match (class, right) {
                    (OUTSIDE, Some(r)) => r,
                    (0, _) => v[(found - 1) / 2],
                    _ => v[1.min(found - 1)],
                };
                n += 1;
            }
        }
        filled.fetch_add(n, Ordering::Relaxed);
    });
    Ok(filled.into_inner())
}

/// Insertion sort of at most 8 finite values, inlined (the library sort's call and
/// generic comparator cost more than the sort itself at this size).
#[inline(always)]
fn sort_small(v: &mut [f32]) {
    for i in 1..v.len() {
        let x = v[i];
        let mut j = i;
        while j > 0 && v[j - 1] > x {
            v[j] = v[j - 1];
            j -= 1;
        }
        v[j] = x;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::Image;
    use alloc::vec::Vec;
    use proptest::prelude::*;

    #[test]
    fn hand_example() {
        let inf = f32::INFINITY;
        let mut a = Image::from_vec(8, 1, alloc::vec![inf, 1.0, inf, 2.0, inf, inf, 3.0, inf]).unwrap();
        let occ = Image::from_vec(8, 1, alloc::vec![0u8, 0, 1, 0, 0, 2, 0, 1]).unwrap();
        // Step 1 (border strip): x = 3 is not left of 3 (x = 6), but x = 1 and 0 lie left
        // of the disparity 2 at x = 3 -> 2.
        // Step 2: x = 2 occluded {2, 2} -> 2; x = 4 mismatch {2, 3} -> lower median 2;
        // x = 5 outside -> the value to its right, 3; x = 7 occluded {3} -> 3.
        assert_eq!(fill_holes(a.view_mut(), Some(occ.view()), Parallelism::AllThreads).unwrap(), 5);
        assert_eq!(a.row(0), &[2.0, 2.0, 2.0, 2.0, 2.0, 3.0, 3.0, 3.0]);
        // Second-lowest for occlusions, median for mismatches, on a column.
        let mut c = Image::from_vec(1, 5, alloc::vec![7.0, inf, 3.0, 9.0, inf]).unwrap();
        let occ = Image::from_vec(1, 5, alloc::vec![0u8, 1, 0, 0, 0]).unwrap();
        fill_holes(c.view_mut(), Some(occ.view()), Parallelism::Sequential).unwrap();
        assert_eq!(c.as_slice(), &[7.0, 7.0, 3.0, 9.0, 9.0]);
        let mut none = Image::<f32>::filled(3, 2, inf).unwrap();
        assert_eq!(fill_holes(none.view_mut(), None, Parallelism::AllThreads).unwrap(), 0);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn matches_reference(w in 1usize..12, h in 1usize..10, seed in any::<u64>()) {
            let mut s = seed | 1;
            let mut next = || { s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); s >> 33 };
            let src = Image::from_fn(w, h, |_, _| if next() % 3 == 0 { f32::INFINITY } else { (next() % 40) as f32 }).unwrap();
            let occ = Image::from_fn(w, h, |_, _| (next() % 3) as u8).unwrap();
            let mut got = src.clone();
            let n = fill_holes(got.view_mut(), Some(occ.view()), Parallelism::AllThreads).unwrap();
            let mut want_n = 0;
            // Step 1 by definition: a pixel left of (x < d) the nearest valid disparity d to
            // its right that itself survived takes d.
            let mut src = src.clone();
            for y in 0..h {
                let mut cur: Option<f32> = None;
                for x in (0..w).rev() {
                    match cur {
                        Some(d) if (x as f32) < d => {
                            if !src.at(x, y).is_finite() { want_n += 1; }
                            src.set(x, y, d);
                        }
                        _ => if src.at(x, y).is_finite() { cur = Some(src.at(x, y)); },
                    }
                }
            }
            for y in 0..h as i64 { for x in 0..w as i64 {
                let c = src.at(x as usize, y as usize);
                let want = if c.is_finite() { c as f64 } else {
                    let mut v: Vec<f64> = Vec::new();
                    for (dx, dy) in [(1i64, 0i64), (-1, 0), (0, 1), (0, -1), (1, 1), (-1, 1), (1, -1), (-1, -1)] {
                        for k in 1.. {
                            let (xx, yy) = (x + k * dx, y + k * dy);
                            if xx < 0 || yy < 0 || xx >= w as i64 || yy >= h as i64 { break; }
                            let d = src.at(xx as usize, yy as usize);
                            if d.is_finite() { v.push(d as f64); break; }
                        }
                    }
                    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
                    let right = (x + 1..w as i64).map(|xx| src.at(xx as usize, y as usize)).find(|d| d.is_finite());
                    if v.is_empty() { f64::INFINITY } else {
                        want_n += 1;
                        match occ.at(x as usize, y as usize) {
                            0 => v[(v.len() - 1) / 2],
                            2 if right.is_some() => right.unwrap() as f64,
                            _ => v[1.min(v.len() - 1)],
                        }
                    }
                };
                prop_assert_eq!(got.at(x as usize, y as usize) as f64, want);
            }}
            prop_assert_eq!(n, want_n);
        }
    }

    #[test]
    fn rejects_bad_input() {
        let mut a = Image::<f32>::filled(3, 1, f32::NAN).unwrap();
        assert!(fill_holes(a.view_mut(), None, Parallelism::Sequential).is_err());
        let mut b = Image::<f32>::new(3, 2).unwrap();
        let m = Image::<u8>::new(2, 2).unwrap();
        assert!(fill_holes(b.view_mut(), Some(m.view()), Parallelism::Sequential).is_err());
    }
}
