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
    let mut out = [0.0f32; 3];
    for (c, o) in out.iter_mut().enumerate().take(P::COLOURS) {
        let t = top[x0].channel(c) + ax * (top[x1].channel(c) - top[x0].channel(c));
        let b = bottom[x0].channel(c) + ax * (bottom[x1].channel(c) - bottom[x0].channel(c));
        *o = t + ay * (b - t);
    }
    out
}

/// The frame `src` seen through `inverse`: output pixel `p` is `src` at `inverse(p)`
/// (bilinear; points off the frame take its nearest border pixel), of `src`'s size.
/// Errors: allocation.
pub fn warp<P: SynthPixel>(src: ImageView<'_, P>, inverse: &Similarity) -> Result<Image<P>> {
    warp_sized(src, inverse, src.size())
}

/// [`warp`] into an image of `size` (a turned frame cut from a larger picture). Errors: a
/// size of zero, allocation.
pub fn warp_sized<P: SynthPixel>(src: ImageView<'_, P>, inverse: &Similarity, (w, h): (usize, usize)) -> Result<Image<P>> {
    let mut out = Image::<P>::new(w, h)?;
    // Along a row the source point moves by a constant step.
    let (o, step) = (inverse.apply((0.0, 0.0)), inverse.apply((1.0, 0.0)));
    let step = (step.0 - o.0, step.1 - o.1);
    for y in 0..h {
        let start = inverse.apply((0.0, y as f64));
        for (x, px) in out.row_mut(y).iter_mut().enumerate() {
            let (sx, sy) = (start.0 + step.0 * x as f64, start.1 + step.1 * x as f64);
            *px = P::from_channels(bilinear(src, sx, sy));
        }
    }
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
}
