//! Exhaustive NCC search: every position of the search area, the accuracy baseline of the
//! logarithmic search (and what OpenCV's `matchTemplate(TM_CCOEFF_NORMED)` computes over
//! the same area).

use super::{Match, NccSample, SearchCache, SearchFrame, SearchParams, Template};
use crate::error::Result;

/// Evaluates every position of the search area around `start` (as in
/// [`super::log_search`]) and returns the best, first in raster order among equals, with
/// its subpixel refinement; `None` when every window is flat. Errors as `log_search`.
pub fn exhaustive_search<T: NccSample>(
    frame: &SearchFrame<'_, T>,
    tpl: &Template<T>,
    start: (isize, isize),
    p: &SearchParams,
    cache: &mut SearchCache,
) -> Result<Option<Match>> {
    let area = cache.begin(frame, tpl, start, p)?;
    let mut best = (f64::NEG_INFINITY, (area.x0, area.y0));
    // One row of positions at a time, so u8 cross terms run 16 positions per vector.
    let n = area.x1 - area.x0 + 1;
    let mut cross = alloc::vec![T::Cross::default(); n];
    let mut values = alloc::vec![0.0f64; n];
    for y in area.y0..=area.y1 {
        frame.eval_run(tpl, area.x0, y, &mut cross, &mut values);
        for (k, &v) in values.iter().enumerate() {
            let x = area.x0 + k;
            cache.put(x, y, v);
            if v > best.0 {
                best = (v, (x, y));
            }
        }
    }
    Ok(cache.finish(frame, tpl, &area, best.1, p.subpixel))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::Image;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// The row-run cross terms (16 positions per vector for u8) give exactly the
        /// per-position coefficients: the peak is the brute-force maximum, first in raster
        /// order.
        #[test]
        fn exhaustive_is_the_bruteforce_maximum(seed in any::<u64>(), tw in 1usize..20, th in 1usize..20, r in 0usize..14, sx in 0isize..60, sy in 0isize..50, f32_input in any::<bool>()) {
            let mut rng = crate::stitch::SplitMix64::new(seed);
            let img = Image::from_fn(64, 52, |_, _| (rng.next_u64() >> 56) as u8).unwrap();
            let tpl_img = img.view().crop(7, 5, tw, th).unwrap();
            let p = SearchParams { radius: r, subpixel: false, accept: None };
            let mut cache = SearchCache::new();
            let check = |best: Option<crate::ncc::Match>, coefs: &dyn Fn(usize, usize) -> Option<f64>| -> Result<(), TestCaseError> {
                let mut want: Option<(f64, usize, usize)> = None;
                for y in (sy - r as isize).max(0)..=(sy + r as isize).min(52 - th as isize) {
                    for x in (sx - r as isize).max(0)..=(sx + r as isize).min(64 - tw as isize) {
                        if let Some(v) = coefs(x as usize, y as usize) {
                            if want.is_none_or(|w| v > w.0) {
                                want = Some((v, x as usize, y as usize));
                            }
                        }
                    }
                }
                match (best, want) {
                    (Some(b), Some(w)) => prop_assert_eq!((b.coefficient, b.x, b.y), w),
                    (None, None) => {}
                    (b, w) => prop_assert!(false, "{:?} vs {:?}", b, w),
                }
                Ok(())
            };
            if sx + (r as isize) < 0 || sx - (r as isize) > 64 - tw as isize || sy - (r as isize) > 52 - th as isize {
                return Ok(());
            }
            if f32_input {
                let imgf = img.map(|v| v as f32);
                let frame = SearchFrame::new(imgf.view()).unwrap();
                let tpl = Template::new(imgf.view().crop(7, 5, tw, th).unwrap()).unwrap();
                let best = exhaustive_search(&frame, &tpl, (sx, sy), &p, &mut cache).unwrap();
                check(best, &|x, y| frame.coefficient(&tpl, x, y).unwrap())?;
            } else {
                let frame = SearchFrame::new(img.view()).unwrap();
                let tpl = Template::new(tpl_img).unwrap();
                let best = exhaustive_search(&frame, &tpl, (sx, sy), &p, &mut cache).unwrap();
                check(best, &|x, y| frame.coefficient(&tpl, x, y).unwrap())?;
            }
        }
    }
}
