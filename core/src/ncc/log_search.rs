//! The two-dimensional logarithmic search of video motion estimation (Jain and Jain,
//! "Displacement measurement and its application in interframe image coding", IEEE Trans.
//! Communications 1981; the three-step search of Koga et al. 1981 is the same scheme with
//! three levels), on the NCC coefficient as in the original plugin.
//!
//! From the start position with step `s0`, evaluate the centre and its eight neighbours at
//! distance `s` (each clamped into the search area), move the centre to the best, halve
//! `s`, and stop after the level `s = 1`. A position is computed once ([`SearchCache`]).
//!
//! Centre-biased variant (`SearchParams::accept`, the default): in a sequence the search
//! starts at a predicted position that is usually within a pixel or two of the peak, while
//! on sharp images the correlation peak is only a few pixels wide, so the coarse steps'
//! probes, far outside it, compare noise and often lead the plain scheme away (measured in
//! `tests/stitch.rs`). So the search first climbs from the start by single pixels to a
//! local maximum (the "halfway stop" idea of the new three-step search, Li, Zeng and Liou,
//! IEEE TCSVT 1994); if that maximum reaches `accept` it is the answer (about 10 to 25
//! evaluations). Otherwise the logarithmic steps run from the start, followed by the same
//! climb, and the better of the two maxima wins.
//! With `s0` the smallest power of two `>= radius / 2` the search reaches `2 s0 - 1 >=
//! radius - 1` pixels from the start and costs at most `9 + 8 log2(s0)` evaluations
//! (41 for radius 32), against `(2 radius + 1)^2 = 4225` for the exhaustive search, plus
//! at most 5 for the subpixel refinement.

use super::{Match, NccSample, SearchCache, SearchFrame, SearchParams, Template};
use crate::error::Result;

/// The first step for a search radius: the smallest power of two `>= radius / 2`
/// (1 for radius 1 or 2; 0 for radius 0, where only the start is evaluated).
pub fn initial_step(radius: usize) -> usize {
    if radius == 0 {
        0
    } else {
        radius.div_ceil(2).next_power_of_two()
    }
}

/// Logarithmic search (module doc; centre-biased when `p.accept` is set) for `tpl` in
/// `frame` around `start` (top-left window position,
/// which may lie outside the frame: the search area is the part of the square of side
/// `2 radius + 1` around it where the window fits in the frame; the first centre is the
/// nearest such position). Returns `None` when the best window found is flat (no
/// coefficient), else the best [`Match`] with its evaluation count.
///
/// Errors: radius above [`super::MAX_RADIUS`], template larger than the frame, or a
/// search area with no position inside the frame.
pub fn log_search<T: NccSample>(
    frame: &SearchFrame<'_, T>,
    tpl: &Template<T>,
    start: (isize, isize),
    p: &SearchParams,
    cache: &mut SearchCache,
) -> Result<Option<Match>> {
    let area = cache.begin(frame, tpl, start, p)?;
    let clamp = |x: isize, y: isize| -> (usize, usize) {
        (
            x.clamp(area.x0 as isize, area.x1 as isize) as usize,
            y.clamp(area.y0 as isize, area.y1 as isize) as usize,
        )
    };
    const RING: [(isize, isize); 8] = [(-1, -1), (0, -1), (1, -1), (-1, 0), (1, 0), (-1, 1), (0, 1), (1, 1)];
    // The 16 positions at Chebyshev distance 2.
    const RING2: [(isize, isize); 16] = [
        (-2, -2), (-1, -2), (0, -2), (1, -2), (2, -2), (-2, -1), (2, -1), (-2, 0),
        (2, 0), (-2, 1), (2, 1), (-2, 2), (-1, 2), (0, 2), (1, 2), (2, 2),
    ];
    // Probes the ring of step `s` around `at.0`, moving `at` to a strictly better position
    // (ties keep the earlier one, the closer to the start).
    let probe = |s: isize, at: &mut ((usize, usize), f64), cache: &mut SearchCache| {
        let centre = at.0;
        for (dx, dy) in RING {
            let q = clamp(centre.0 as isize + dx * s, centre.1 as isize + dy * s);
            let v = cache.get(frame, tpl, q.0, q.1);
            if v > at.1 {
                *at = (q, v);
            }
        }
    };
    // Ascent to a maximum of the 5 x 5 neighbourhood (rings at distance 1 and 2): the
    // values strictly increase, so it ends, and the cache keeps each move cheap. The ring
    // at 2 steps over the secondary maxima that edges and ridges put next to the peak.
    let climb = |at: &mut ((usize, usize), f64), cache: &mut SearchCache| loop {
        let before = at.0;
        probe(1, at, cache);
        if at.0 == before {
            for q in RING2 {
                let q = clamp(before.0 as isize + q.0, before.1 as isize + q.1);
                let v = cache.get(frame, tpl, q.0, q.1);
                if v > at.1 {
                    *at = (q, v);
                }
            }
            if at.0 == before {
                break;
            }
        }
    };
    let c = clamp(start.0, start.1);
    let first = (c, cache.get(frame, tpl, c.0, c.1));
    let mut near = first;
    if let Some(accept) = p.accept {
        climb(&mut near, cache);
        if near.1 >= accept {
            return Ok(cache.finish(frame, tpl, &area, near.0, p.subpixel));
        }
    }
    let mut far = first;
    let mut s = initial_step(p.radius) as isize;
    while s >= 1 {
        probe(s, &mut far, cache);
        s /= 2;
    }
    if p.accept.is_some() {
        climb(&mut far, cache);
    }
    let c = if near.1 >= far.1 { near.0 } else { far.0 };
    Ok(cache.finish(frame, tpl, &area, c, p.subpixel))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::Image;
    use crate::ncc::exhaustive_search;

    /// A smooth, well-textured test scene (sum of incommensurate sinusoids).
    pub(crate) fn scene(w: usize, h: usize) -> Image<u8> {
        Image::from_fn(w, h, |x, y| {
            let (x, y) = (x as f64, y as f64);
            let v = 128.0 + 50.0 * libm::sin(x * 0.21 + y * 0.05) + 40.0 * libm::cos(y * 0.17 - x * 0.07)
                + 25.0 * libm::sin((x + 2.0 * y) * 0.11);
            v as u8
        })
        .unwrap()
    }

    #[test]
    fn finds_a_known_displacement_with_few_evaluations() {
        let img = scene(160, 140);
        let frame = SearchFrame::new(img.view()).unwrap();
        let mut cache = SearchCache::new();
        let p = SearchParams { radius: 16, ..Default::default() };
        let plain = SearchParams { accept: None, ..p };
        for (tx, ty, dx, dy) in [(60usize, 50usize, 3isize, -2isize), (70, 60, -7, 5), (50, 55, 0, 0), (64, 64, 12, -9)] {
            let tpl = Template::new(img.view().crop(tx, ty, 25, 25).unwrap()).unwrap();
            let start = (tx as isize - dx, ty as isize - dy);
            let m = log_search(&frame, &tpl, start, &p, &mut cache).unwrap().unwrap();
            assert_eq!((m.x, m.y), (tx, ty));
            assert_eq!(m.coefficient, 1.0);
            // An exact match peaks at the integer position; the 3 x 3 quadratic, fitted to a
            // surface that is not exactly quadratic nor symmetric, stays close to it.
            assert!(m.offset.0.abs() < 0.1 && m.offset.1.abs() < 0.1, "{:?}", m.offset);
            assert!(m.evaluations <= 120, "{}", m.evaluations);
            // The plain scheme: at most 9 + 8 log2(s0) evaluations, plus 5 to refine.
            let q = log_search(&frame, &tpl, start, &plain, &mut cache).unwrap().unwrap();
            assert_eq!((q.x, q.y), (tx, ty));
            assert!(q.evaluations <= 9 + 8 * 3 + 5, "{}", q.evaluations);
            let e = exhaustive_search(&frame, &tpl, start, &p, &mut cache).unwrap().unwrap();
            assert_eq!((e.x, e.y), (m.x, m.y));
            assert_eq!(e.evaluations, 33 * 33);
        }
    }

    #[test]
    fn steps() {
        assert_eq!(initial_step(0), 0);
        assert_eq!(initial_step(1), 1);
        assert_eq!(initial_step(2), 1);
        assert_eq!(initial_step(3), 2);
        assert_eq!(initial_step(16), 8);
        assert_eq!(initial_step(32), 16);
        assert_eq!(initial_step(33), 32);
    }

    #[test]
    fn flat_frame_gives_no_match_and_is_clamped() {
        let flat = Image::<u8>::filled(60, 50, 9).unwrap();
        let img = scene(60, 50);
        let frame = SearchFrame::new(flat.view()).unwrap();
        let tpl = Template::new(img.view().crop(10, 10, 15, 15).unwrap()).unwrap();
        let mut cache = SearchCache::new();
        let p = SearchParams::default();
        assert_eq!(log_search(&frame, &tpl, (20, 20), &p, &mut cache).unwrap(), None);
        // A start far outside is clamped into the frame when the area still overlaps it.
        let frame = SearchFrame::new(img.view()).unwrap();
        let m = log_search(&frame, &tpl, (-20, 5), &p, &mut cache).unwrap().unwrap();
        assert!(m.x <= 12 && m.y <= 35);
    }

    #[test]
    fn bad_searches_are_errors() {
        let img = scene(40, 30);
        let frame = SearchFrame::new(img.view()).unwrap();
        let mut cache = SearchCache::new();
        let tpl = Template::new(img.view().crop(0, 0, 10, 10).unwrap()).unwrap();
        let big = Template::new(scene(41, 10).view()).unwrap();
        let p = SearchParams::default();
        assert!(log_search(&frame, &big, (0, 0), &p, &mut cache).is_err());
        assert!(log_search(&frame, &tpl, (100, 0), &p, &mut cache).is_err());
        assert!(log_search(&frame, &tpl, (0, -40), &p, &mut cache).is_err());
        let far = SearchParams { radius: super::super::MAX_RADIUS + 1, ..Default::default() };
        assert!(log_search(&frame, &tpl, (0, 0), &far, &mut cache).is_err());
        assert!(exhaustive_search(&frame, &big, (0, 0), &p, &mut cache).is_err());
    }
}
