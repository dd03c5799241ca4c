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
    for y in area.y0..=area.y1 {
        for x in area.x0..=area.x1 {
            let v = cache.get(frame, tpl, x, y);
            if v > best.0 {
                best = (v, (x, y));
            }
        }
    }
    Ok(cache.finish(frame, tpl, &area, best.1, p.subpixel))
}
