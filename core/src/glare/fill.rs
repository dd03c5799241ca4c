//! Highlight correction: each connected spot of the mask is filled from the unmasked pixels
//! around it by normalized convolution, then relaxed by Gauss-Seidel sweeps of the Laplace
//! equation with the known pixels as boundary (a harmonic fill: no seam at the rim).

use super::{GlareParams, GlarePixel};
use crate::error::Result;
use crate::image::{check_same_size, Image, ImageView, ImageViewMut};
use crate::parallel::{map_indices, Parallelism};
use alloc::vec;
use alloc::vec::Vec;

/// Known pixels kept around a spot's bounding box.
pub const MARGIN: usize = 3;
/// Above this many (unknown x known) pairs the initial guess is the plain mean of the known
/// pixels instead of the 1/d^2-weighted one (the sweeps smooth it either way).
pub const WEIGHTED_INIT_LIMIT: usize = 4_000_000;

/// A connected spot: its pixels and bounding box `(x0, y0, x1, y1)` (inclusive).
pub struct Spot {
    /// Its pixels, in the order the search found them.
    pub pixels: Vec<(u32, u32)>,
    /// `(x0, y0, x1, y1)`, inclusive.
    pub bbox: (usize, usize, usize, usize),
}

/// Copies `src` into `dst` with every pixel where `mask != 0` (dilated by
/// `p.fill_grow`) filled from its surroundings (see the module docs of [`crate::glare`](mod@crate::glare)). A spot with no unmasked pixel
/// within its box plus margin keeps its values. Errors: invalid parameters or sizes that
/// differ.
pub fn fill<P: GlarePixel>(
    src: ImageView<'_, P>,
    mask: ImageView<'_, u8>,
    mut dst: ImageViewMut<'_, P>,
    p: &GlareParams,
    par: Parallelism,
) -> Result<()> {
    p.validate()?;
    check_same_size(src.size(), mask.size())?;
    check_same_size(src.size(), dst.size())?;
    dst.copy_from(src)?;
    let grown = dilate(mask, p.fill_grow)?;
    let mask = grown.view();
    let spots = spots(mask)?;
    let filled = map_indices(spots.len(), par, |i| solve(src, mask, &spots[i], p.fill_iterations));
    for (spot, values) in spots.iter().zip(filled) {
        for (&(x, y), v) in spot.pixels.iter().zip(values) {
            let (x, y) = (x as usize, y as usize);
            let mut px = src.row(y)[x];
            for (c, &vc) in v.iter().enumerate().take(P::CHANNELS) {
                px = px.with_channel(c, vc);
            }
            dst.row_mut(y)[x] = px;
        }
    }
    Ok(())
}

/// `mask != 0` dilated by `g` pixels (a (2g + 1) square), as 0 / 255.
fn dilate(mask: ImageView<'_, u8>, g: usize) -> Result<Image<u8>> {
    let (w, h) = mask.size();
    let mut out = mask.try_to_image()?;
    if g == 0 {
        return Ok(out);
    }
    for y in 0..h {
        for x in 0..w {
            if mask.row(y)[x] != 0 {
                for yy in y.saturating_sub(g)..(y + g + 1).min(h) {
                    out.row_mut(yy)[x.saturating_sub(g)..(x + g + 1).min(w)].fill(255);
                }
            }
        }
    }
    Ok(out)
}

/// The 8-connected spots of `mask != 0`; [`Error::OutOfMemory`](crate::Error::OutOfMemory)
/// where the image-sized map of visited pixels cannot be allocated.
pub fn spots(mask: ImageView<'_, u8>) -> Result<Vec<Spot>> {
    let (w, h) = mask.size();
    let mut seen = crate::error::try_filled(w * h, false)?;
    let mut out = Vec::new();
    let mut stack = Vec::new();
    for y0 in 0..h {
        for x0 in 0..w {
            if mask.row(y0)[x0] == 0 || seen[y0 * w + x0] {
                continue;
            }
            let mut pixels = Vec::new();
            let mut bbox = (x0, y0, x0, y0);
            seen[y0 * w + x0] = true;
            stack.push((x0, y0));
            while let Some((x, y)) = stack.pop() {
                pixels.push((x as u32, y as u32));
                bbox = (bbox.0.min(x), bbox.1.min(y), bbox.2.max(x), bbox.3.max(y));
                for yy in y.saturating_sub(1)..(y + 2).min(h) {
                    for xx in x.saturating_sub(1)..(x + 2).min(w) {
                        if mask.row(yy)[xx] != 0 && !seen[yy * w + xx] {
                            seen[yy * w + xx] = true;
                            stack.push((xx, yy));
                        }
                    }
                }
            }
            out.push(Spot { pixels, bbox });
        }
    }
    Ok(out)
}

/// The filled values (up to 3 channels) of one spot's pixels, in the order of `spot.pixels`.
fn solve<P: GlarePixel>(src: ImageView<'_, P>, mask: ImageView<'_, u8>, spot: &Spot, iterations: usize) -> Vec<[f32; 3]> {
    let (w, h) = src.size();
    let x0 = spot.bbox.0.saturating_sub(MARGIN);
    let y0 = spot.bbox.1.saturating_sub(MARGIN);
    let x1 = (spot.bbox.2 + MARGIN).min(w - 1);
    let y1 = (spot.bbox.3 + MARGIN).min(h - 1);
    let (gw, gh) = (x1 - x0 + 1, y1 - y0 + 1);
    let c = P::CHANNELS;
    // Grid values (c per cell) and which cells are unknown (masked).
    let mut val = vec![0.0f32; gw * gh * c];
    let mut unknown = Vec::new();
    let mut known = Vec::new();
    for gy in 0..gh {
        for gx in 0..gw {
            let px = src.row(y0 + gy)[x0 + gx];
            for ch in 0..c {
                val[(gy * gw + gx) * c + ch] = px.channel(ch);
            }
            if mask.row(y0 + gy)[x0 + gx] != 0 {
                unknown.push((gx, gy));
            } else {
                known.push((gx, gy));
            }
        }
    }
    let own = |values: &[f32]| -> Vec<[f32; 3]> {
        spot.pixels
            .iter()
            .map(|&(x, y)| {
                let g = (y as usize - y0) * gw + (x as usize - x0);
                let mut v = [0.0; 3];
                v[..c].copy_from_slice(&values[g * c..g * c + c]);
                v
            })
            .collect()
    };
    if known.is_empty() {
        return own(&val);
    }
    // Normalized convolution: 1/d^2-weighted mean of the known cells.
    let weighted = unknown.len().saturating_mul(known.len()) <= WEIGHTED_INIT_LIMIT;
    let mut plain = [0.0f32; 3];
    for &(gx, gy) in &known {
        for ch in 0..c {
            plain[ch] += val[(gy * gw + gx) * c + ch] / known.len() as f32;
        }
    }
    for &(ux, uy) in &unknown {
        let g = uy * gw + ux;
        if !weighted {
            val[g * c..g * c + c].copy_from_slice(&plain[..c]);
            continue;
        }
        let (mut acc, mut sw) = ([0.0f32; 3], 0.0f32);
        for &(kx, ky) in &known {
            let (dx, dy) = (kx as f32 - ux as f32, ky as f32 - uy as f32);
            let wgt = 1.0 / (dx * dx + dy * dy);
            sw += wgt;
            for ch in 0..c {
                acc[ch] += wgt * val[(ky * gw + kx) * c + ch];
            }
        }
        for ch in 0..c {
            val[g * c + ch] = acc[ch] / sw;
        }
    }
    // Gauss-Seidel sweeps of the Laplace equation over the unknown cells (4-neighbours
    // inside the grid; known cells stay fixed).
    for _ in 0..iterations {
        for &(ux, uy) in &unknown {
            let mut acc = [0.0f32; 3];
            let mut n = 0.0f32;
            let mut add = |gx: usize, gy: usize| {
                let g = (gy * gw + gx) * c;
                for ch in 0..c {
                    acc[ch] += val[g + ch];
                }
                n += 1.0;
            };
            if ux > 0 {
                add(ux - 1, uy);
            }
            if ux + 1 < gw {
                add(ux + 1, uy);
            }
            if uy > 0 {
                add(ux, uy - 1);
            }
            if uy + 1 < gh {
                add(ux, uy + 1);
            }
            let g = (uy * gw + ux) * c;
            for ch in 0..c {
                val[g + ch] = acc[ch] / n;
            }
        }
    }
    own(&val)
}
