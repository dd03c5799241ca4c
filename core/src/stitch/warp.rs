//! Resampling a frame under a [`Similarity`]: bilinear interpolation, as a whole warped
//! image (registration matches templates in a moving frame first turned by the predicted
//! rotation) or point by point (compositing a turned frame into the canvas).
//!
//! Bilinear, not bicubic: a warp for registration only has to bring the texture within the
//! log search's reach and the templates' tolerance (the subpixel answer comes from the
//! refinement on the original pixels), and a turned frame in a panorama is resampled
//! anyway; bilinear is four taps instead of sixteen.

use super::similarity::Similarity;
use super::synth::SynthPixel;
use crate::error::Result;
use crate::image::{Image, ImageView};
use crate::parallel::{for_each_band, Parallelism};

/// The bilinear value of `src` at `(x, y)`, channel by channel, or `None` outside the
/// frame's pixel centres (`0 <= x <= w - 1`, `0 <= y <= h - 1`).
pub fn sample<P: SynthPixel>(src: ImageView<'_, P>, (x, y): (f64, f64)) -> Option<[f32; 3]> {
    let (w, h) = src.size();
    if !(x >= 0.0 && y >= 0.0 && x <= (w - 1) as f64 && y <= (h - 1) as f64) {
        return None;
    }
    Some(bilinear(src, x, y))
}

/// Bilinear interpolation at `(x, y)` with coordinates clamped to the frame (its border
/// replicated outwards).
fn bilinear<P: SynthPixel>(src: ImageView<'_, P>, x: f64, y: f64) -> [f32; 3] {
    let (w, h) = src.size();
    let x = x.clamp(0.0, (w - 1) as f64);
    let y = y.clamp(0.0, (h - 1) as f64);
    // Non-negative: truncation is the floor (and cheaper than `libm::floor` without std).
    let (x0, y0) = (x as usize, y as usize);
    let (x1, y1) = ((x0 + 1).min(w - 1), (y0 + 1).min(h - 1));
    let (ax, ay) = ((x - x0 as f64) as f32, (y - y0 as f64) as f32);
    let (top, bottom) = (src.row(y0), src.row(y1));
    blend::<P>([top[x0], top[x1], bottom[x0], bottom[x1]], ax, ay)
}

/// The bilinear mix of the four neighbours (top left, top right, bottom left, bottom
/// right) at fractions `ax`, `ay`, channel by channel.
#[inline(always)]
fn blend<P: SynthPixel>([tl, tr, bl, br]: [P; 4], ax: f32, ay: f32) -> [f32; 3] {
    let mut out = [0.0f32; 3];
    for (c, o) in out.iter_mut().enumerate().take(P::COLOURS) {
        let t = tl.channel(c) + ax * (tr.channel(c) - tl.channel(c));
        let b = bl.channel(c) + ax * (br.channel(c) - bl.channel(c));
        *o = t + ay * (b - t);
    }
    out
}

/// The columns `a..b` of an output row whose source points `start + x step` all have
/// their four neighbours inside a `w x h` frame (`0 <= sx < w - 1`, `0 <= sy < h - 1`):
/// there the warp needs no clamping. Found from the line's equation, then checked with
/// the very expression the loop evaluates, so rounding cannot let a point out.
fn interior((sx, sy): (f64, f64), (dx, dy): (f64, f64), (w, h): (usize, usize), n: usize) -> (usize, usize) {
    let at = |x: usize| (sx + dx * x as f64, sy + dy * x as f64);
    let inside = |x: usize| {
        let (px, py) = at(x);
        px >= 0.0 && py >= 0.0 && px < (w - 1) as f64 && py < (h - 1) as f64
    };
    // The x where `s + d x` stays in [0, limit): an interval of the real line.
    if w > i32::MAX as usize || h > i32::MAX as usize {
        return (0, 0);
    }
    let (mut lo, mut hi) = (0.0f64, n as f64);
    for (s, d, limit) in [(sx, dx, (w - 1) as f64), (sy, dy, (h - 1) as f64)] {
        if d == 0.0 {
            if !(s >= 0.0 && s < limit) {
                return (0, 0);
            }
        } else {
            let (e0, e1) = ((0.0 - s) / d, (limit - s) / d);
            lo = lo.max(e0.min(e1));
            hi = hi.min(e0.max(e1));
        }
    }
    if !(lo < hi) {
        return (0, 0);
    }
    let (mut a, mut b) = ((libm::ceil(lo) as usize).min(n), (libm::ceil(hi) as usize).min(n));
    while a < b && !inside(a) {
        a += 1;
    }
    while a > 0 && inside(a - 1) {
        a -= 1;
    }
    while b > a && !inside(b - 1) {
        b -= 1;
    }
    while b < n && inside(b) {
        b += 1;
    }
    (a, b)
}

/// [`warp_sized`] of `src`'s size.
#[cfg(test)]
pub fn warp<P: SynthPixel>(src: ImageView<'_, P>, inverse: &Similarity) -> Result<Image<P>> {
    warp_sized(src, inverse, src.size())
}

/// The frame `src` seen through `inverse`, into an image of `size` (a turned frame cut from
/// a larger picture): output pixel `p` is `src` at `inverse(p)` (bilinear; points off the
/// frame take its nearest border pixel). Errors: a size of zero, allocation.
pub fn warp_sized<P: SynthPixel>(src: ImageView<'_, P>, inverse: &Similarity, size: (usize, usize)) -> Result<Image<P>> {
    warp_with(src, inverse, size, Parallelism::Sequential)
}

/// [`warp_sized`] in row bands on `par`'s threads (the same pixels however many).
pub fn warp_with<P: SynthPixel>(src: ImageView<'_, P>, inverse: &Similarity, (w, h): (usize, usize), par: Parallelism) -> Result<Image<P>> {
    let mut out = Image::<P>::new(w, h)?;
    // Along a row the source point moves by a constant step.
    let (o, step) = (inverse.apply((0.0, 0.0)), inverse.apply((1.0, 0.0)));
    let step = (step.0 - o.0, step.1 - o.1);
    let (span, stride) = (src.span(), src.stride());
    for_each_band(out.view_mut(), par, 16, |y0, mut band| {
        for j in 0..band.height() {
            let start = inverse.apply((0.0, (y0 + j) as f64));
            let (a, b) = interior(start, step, src.size(), w);
            let row = band.row_mut(j);
            let at = |x: f64| (start.0 + step.0 * x, start.1 + step.1 * x);
            for x in (0..a).chain(b..w) {
                let (sx, sy) = at(x as f64);
                row[x] = P::from_channels(bilinear(src, sx, sy));
            }
            // Inside, the same arithmetic as `bilinear` without its clamps and bounds
            // checks; the column counts in a float (exact for integers) to spare a
            // conversion per pixel.
            let mut x = a as f64;
            for px in &mut row[a..b] {
                let (sx, sy) = at(x);
                x += 1.0;
                // SAFETY: `interior` keeps `0 <= sx < w - 1` and `0 <= sy < h - 1` with
                // both sides at most `i32::MAX`, so the truncations are in range (and are
                // floors): one instruction each, where a checked conversion takes several.
                let (x0, y0) = unsafe { (sx.to_int_unchecked::<i32>(), sy.to_int_unchecked::<i32>()) };
                let (ax, ay) = ((sx - x0 as f64) as f32, (sy - y0 as f64) as f32);
                let i = y0 as usize * stride + x0 as usize;
                let q = &span[i..i + stride + 2];
                *px = P::from_channels(blend::<P>([q[0], q[1], q[stride], q[stride + 1]], ax, ay));
            }
        }
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warping_matches_the_float64_reference() {
        let src = Image::<f32>::from_fn(23, 17, |x, y| ((x * 7 + y * 13) % 31) as f32 + 0.25 * x as f32).unwrap();
        let inv = Similarity::about((11.0, 8.0), (0.6, -0.3), 0.2, 1.05);
        let out = warp(src.view(), &inv).unwrap();
        for y in 0..17 {
            for x in 0..23 {
                let (sx, sy) = inv.apply((x as f64, y as f64));
                let (cx, cy) = (sx.clamp(0.0, 22.0), sy.clamp(0.0, 16.0));
                let (x0, y0) = (cx.floor() as usize, cy.floor() as usize);
                let (x1, y1) = ((x0 + 1).min(22), (y0 + 1).min(16));
                let (ax, ay) = (cx - x0 as f64, cy - y0 as f64);
                let f = |x: usize, y: usize| src.at(x, y) as f64;
                let want = (1.0 - ay) * ((1.0 - ax) * f(x0, y0) + ax * f(x1, y0)) + ay * ((1.0 - ax) * f(x0, y1) + ax * f(x1, y1));
                assert!((out.at(x, y) as f64 - want).abs() < 1e-3, "({x}, {y}): {} vs {want}", out.at(x, y));
            }
        }
        // The identity copies; integer frames round.
        let u = src.map(|v| v as u8);
        assert_eq!(warp(u.view(), &Similarity::IDENTITY).unwrap(), u);
        assert_eq!(sample(src.view(), (22.5, 0.0)), None);
        assert_eq!(sample(src.view(), (2.0, 3.0)).map(|v| v[0]), Some(src.at(2, 3)));
    }

    #[test]
    fn the_unclamped_interior_equals_the_clamped_path_bit_for_bit() {
        // Every pixel as `bilinear` computes it with its clamps: the interior's columns
        // must give the same bits, and no source point may fall outside (which the slice
        // indexing would catch as a panic). Turns, zooms, pure shifts (a step of 0 in y),
        // points leaving every side, views with a stride.
        let big = Image::<u8>::from_fn(41, 33, |x, y| ((x * 37 + y * 101 + x * y) % 251) as u8).unwrap();
        let src = big.view().crop(3, 2, 31, 25).unwrap();
        let mut rng = super::super::synth::SplitMix64::new(7);
        let mut shapes = alloc::vec![Similarity::IDENTITY, Similarity::translation((0.5, -0.25)), Similarity::translation((-40.0, 3.0))];
        for _ in 0..200 {
            let angle = [0.0, 0.01, 1.3, -0.4, core::f64::consts::FRAC_PI_2][(rng.uniform() * 5.0) as usize];
            let scale = 0.6 + 0.8 * rng.uniform();
            shapes.push(Similarity::about((15.0, 12.0), (40.0 * rng.uniform() - 20.0, 30.0 * rng.uniform() - 15.0), angle, scale));
        }
        for inv in shapes {
            let out = warp_sized(src, &inv, (37, 29)).unwrap();
            for y in 0..29 {
                for x in 0..37 {
                    let start = inv.apply((0.0, y as f64));
                    let step = (inv.apply((1.0, 0.0)).0 - inv.apply((0.0, 0.0)).0, inv.apply((1.0, 0.0)).1 - inv.apply((0.0, 0.0)).1);
                    let want = u8::from_channels(bilinear(src, start.0 + step.0 * x as f64, start.1 + step.1 * x as f64));
                    assert_eq!(out.at(x, y), want, "{inv:?} at ({x}, {y})");
                }
            }
        }
    }

    #[test]
    fn integer_pixels_round_as_roundf_does() {
        let cases = [0.0f32, 0.49999997, 0.5, 0.50000006, 1.5, 2.5, 254.49998, 254.5, 255.2, 300.0, -0.3, -7.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 65534.5, 70000.0];
        for x in cases.into_iter().chain((0..5000).map(|i| i as f32 * 0.0731 - 3.0)) {
            assert_eq!(u8::from_channels([x, 0.0, 0.0]), libm::roundf(x).clamp(0.0, 255.0) as u8, "{x}");
            assert_eq!(u16::from_channels([x, 0.0, 0.0]), libm::roundf(x).clamp(0.0, 65535.0) as u16, "{x}");
        }
    }
}
