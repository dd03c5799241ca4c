//! Highlight detection: seeds from local statistics at several window sizes, grown through
//! the soft rim, spots filtered by area (see the module docs of [`crate::glare`](mod@crate::glare)).

use super::{GlareMode, GlareParams, GlarePixel, GlareReport, Luma};
use crate::error::Result;
use crate::image::{check_same_size, Image, ImageView, ImageViewMut};
use crate::parallel::{for_each_band, Parallelism};
use crate::variance::{local_mean_variance_pairs, VarianceKernel, VariancePixel};
use alloc::vec;
use alloc::vec::Vec;

/// Contrast passed at some radius (`Y - mu >= max(k sigma, c)`).
const SEED_CONTRAST: u8 = 1;
/// The rim of a spot: pixels whose excess over the local mean is at least this fraction
/// of the spot's peak excess.
const RIM_FRACTION: f32 = 0.5;
/// Least share of a spot taken by its seed core. A highlight's near-saturated core is a
/// good part of it (about a quarter for a Gaussian profile); a few bright specks on a large
/// pale object, which the rim growth would otherwise take whole, are not glare.
const MIN_CORE_FRACTION: f32 = 0.1;
// Classes in the mask while it is being built.
/// The seed mark [`finish_spots`] reads.
pub const SEED: u8 = 2;
const SEEN: u8 = 3;
const KEPT: u8 = 4;
const RIM: u8 = 5;

/// Writes the glare mask of `src` (255 = glare, 0 = not) and returns what was found.
/// Errors: invalid parameters ([`GlareParams::validate`]) or sizes that differ.
pub fn detect<P: GlarePixel>(
    src: ImageView<'_, P>,
    mut mask: ImageViewMut<'_, u8>,
    p: &GlareParams,
    par: Parallelism,
) -> Result<GlareReport> {
    p.validate()?;
    check_same_size(src.size(), mask.size())?;
    let (luma, full_scale) = P::luminance(src);
    let (w, h) = src.size();
    let mut flags = Image::<u8>::new(w, h)?;
    let mut excess = Image::<f32>::new(w, h)?;
    let (bright, cmin) = match &luma {
        Luma::U8(y) => contrast_flags(y, &mut flags, &mut excess, 255, p, par)?,
        Luma::U16(y) => contrast_flags(y, &mut flags, &mut excess, 65535, p, par)?,
    };
    // Seeds: bright, weakly coloured, contrasted.
    let flags = &flags;
    let luma = &luma;
    for_each_band(mask.reborrow(), par, 16, |y0, mut band| {
        for i in 0..band.height() {
            let y = y0 + i;
            let (fr, sr) = (flags.row(y), src.row(y));
            let out = band.row_mut(i);
            for x in 0..w {
                // Flags first: seeds are rare, most pixels stop there.
                let seed = fr[x] & SEED_CONTRAST != 0 && {
                    let v = match luma {
                        Luma::U8(l) => l.row(y)[x] as f32 / 255.0,
                        Luma::U16(l) => l.row(y)[x] as f32 / 65535.0,
                    };
                    v >= bright && sr[x].saturation() <= p.max_saturation
                };
                out[x] = if seed { SEED } else { 0 };
            }
        }
    });
    finish_spots(mask, excess.view(), p, bright, cmin, full_scale)
}

/// Steps 3 and 4 of detection on a mask holding `SEED` (2) at the seeds and 0 elsewhere,
/// with `excess` the excess `Y - mu_R` over the mean at the largest radius: grows the
/// spots, keeps those that pass the area, core and elongation tests, dilates them by
/// `grow`, and leaves 255 on glare and 0 elsewhere in `mask`. Sequential and
/// order-dependent (a spot claims its rim before the next one in raster order), so a GPU
/// backend that computes the seeds and the excess on the device runs this part here.
pub fn finish_spots(mut mask: ImageViewMut<'_, u8>, excess: ImageView<'_, f32>, p: &GlareParams, bright: f32, cmin: f32, full_scale: f32) -> Result<GlareReport> {
    check_same_size(mask.size(), excess.size())?;
    let (w, h) = mask.size();
    let (spots, kept) = grow_spots(&mut mask, excess, p);
    // Final mask: kept spots dilated by `grow`, everything else 0.
    for y in 0..h {
        for v in mask.row_mut(y) {
            *v = if *v == KEPT { 255 } else { 0 };
        }
    }
    let g = p.grow;
    if g > 0 {
        for &(x, y) in &kept {
            let (x, y) = (x as usize, y as usize);
            for yy in y.saturating_sub(g)..(y + g + 1).min(h) {
                mask.row_mut(yy)[x.saturating_sub(g)..(x + g + 1).min(w)].fill(255);
            }
        }
    }
    let pixels = (0..h).map(|y| mask.row(y).iter().filter(|&&v| v == 255).count()).sum();
    Ok(GlareReport { spots, pixels, brightness: bright, min_contrast: cmin, full_scale })
}


/// Sets `SEED_CONTRAST` in `flags` from the local statistics of `luma` (full scale `q`),
/// writes `excess = Y - mu` at the largest radius, and returns the brightness and contrast thresholds used (fractions of
/// the full scale), adaptive ones computed from the image.
fn contrast_flags<T: VariancePixel + Into<u32>>(
    luma: &Image<T>,
    flags: &mut Image<u8>,
    excess: &mut Image<f32>,
    q: u32,
    p: &GlareParams,
    par: Parallelism,
) -> Result<(f32, f32)> {
    let (w, h) = luma.size();
    let mut radii = p.radii.clone();
    radii.sort_unstable();
    radii.dedup();
    let qf = q as f32;
    let bright = match p.mode {
        GlareMode::Manual => p.brightness,
        GlareMode::Adaptive => {
            let mut hist = vec![0usize; q as usize + 1];
            for &v in luma.as_slice() {
                hist[v.into() as usize] += 1;
            }
            // Three quarters of the way from the median to the full scale: robust to the
            // highlights themselves (which can be more than 1 % of a small image).
            let median = quantile(&hist, 0.5) as f32 / qf;
            (median + 0.75 * (1.0 - median)).clamp(0.88, 0.95)
        }
    };
    let mut cmin = p.min_contrast;
    let mut pairs = Image::<f32>::new(2 * w, h)?;
    for (i, &r) in radii.iter().enumerate() {
        local_mean_variance_pairs(luma.view(), pairs.view_mut(), VarianceKernel::Box { radius: r }, p.border, par)?;
        if i == 0 && p.mode == GlareMode::Adaptive {
            // Robust spread of Y - mu at the smallest radius: 1.4826 * median |Y - mu|.
            let mut hist = vec![0usize; q as usize + 1];
            for y in 0..h {
                for (v, m) in luma.row(y).iter().zip(pairs.row(y).chunks_exact(2)) {
                    // Round half up of a non-negative value (`as` saturates; NaN gives 0).
                    let d = (((*v).into() as f32 - m[0]).abs() + 0.5) as usize;
                    hist[d.min(q as usize)] += 1;
                }
            }
            let mad = quantile(&hist, 0.5) as f32 / qf;
            cmin = (4.0 * 1.4826 * mad).max(0.04);
        }
        let seed_c = cmin * qf;
        // d >= k sigma as d >= 0 and d^2 >= k^2 var: no square root per pixel.
        let (pairs, k2) = (&pairs, p.k_sigma * p.k_sigma);
        for_each_band(flags.view_mut(), par, 16, |y0, mut band| {
            for j in 0..band.height() {
                let y = y0 + j;
                let (lr, pr) = (luma.row(y), pairs.row(y));
                for ((f, v), m) in band.row_mut(j).iter_mut().zip(lr).zip(pr.chunks_exact(2)) {
                    let d = (*v).into() as f32 - m[0];
                    if d >= seed_c && d * d >= k2 * m[1] {
                        *f |= SEED_CONTRAST;
                    }
                }
            }
        });
        if i + 1 == radii.len() {
            for_each_band(excess.view_mut(), par, 16, |y0, mut band| {
                for j in 0..band.height() {
                    let y = y0 + j;
                    for ((e, v), m) in band.row_mut(j).iter_mut().zip(luma.row(y)).zip(pairs.row(y).chunks_exact(2)) {
                        *e = (*v).into() as f32 - m[0];
                    }
                }
            });
        }
    }
    Ok((bright, cmin))
}

/// Smallest value whose cumulative count reaches the fraction `f` of a histogram.
pub fn quantile(hist: &[usize], f: f64) -> usize {
    let total: usize = hist.iter().sum();
    let target = libm::ceil(f * total as f64) as usize;
    let mut acc = 0;
    for (v, &n) in hist.iter().enumerate() {
        acc += n;
        if acc >= target.max(1) {
            return v;
        }
    }
    hist.len() - 1
}

/// Grows spots: the 8-connected core of seed pixels, then its rim, the connected pixels
/// whose excess over the local mean is at least `RIM_FRACTION` of the core's peak excess
/// (where the highlight still makes up half of its peak). A spot whose area lies in
/// `min_area..=max_area` is marked `KEPT`; growth stops early once a spot is too large.
/// Returns the number of kept spots and their pixels.
fn grow_spots(mask: &mut ImageViewMut<'_, u8>, excess: ImageView<'_, f32>, p: &GlareParams) -> (usize, Vec<(u32, u32)>) {
    let (w, h) = mask.size();
    let mut kept = Vec::new();
    let mut spots = 0;
    let mut stack: Vec<(u32, u32)> = Vec::new();
    let mut spot: Vec<(u32, u32)> = Vec::new();
    for y0 in 0..h {
        for x0 in 0..w {
            if mask.row(y0)[x0] != SEED {
                continue;
            }
            // Core: seeds only.
            spot.clear();
            stack.push((x0 as u32, y0 as u32));
            mask.row_mut(y0)[x0] = SEEN;
            let mut peak = f32::MIN;
            while let Some((x, y)) = stack.pop() {
                spot.push((x, y));
                let (x, y) = (x as usize, y as usize);
                peak = peak.max(excess.row(y)[x]);
                for yy in y.saturating_sub(1)..(y + 2).min(h) {
                    for xx in x.saturating_sub(1)..(x + 2).min(w) {
                        let v = &mut mask.row_mut(yy)[xx];
                        if *v == SEED {
                            *v = SEEN;
                            stack.push((xx as u32, yy as u32));
                        }
                    }
                }
            }
            // Rim: unclaimed pixels above the fraction of the peak, connected to the core and
            // within the core's box widened by the core's size (at least 2 pixels): a soft
            // profile's half-height rim lies about twice as far out as its near-saturated
            // core, and the limit keeps the growth out of a bright surface around the spot.
            let core = spot.len();
            let rim = RIM_FRACTION * peak;
            let (mut bx0, mut by0, mut bx1, mut by1) = (usize::MAX, usize::MAX, 0, 0);
            for &(x, y) in &spot {
                let (x, y) = (x as usize, y as usize);
                (bx0, by0, bx1, by1) = (bx0.min(x), by0.min(y), bx1.max(x), by1.max(y));
            }
            let e = (bx1 - bx0 + 1).max(by1 - by0 + 1).max(2);
            let (bx0, by0, bx1, by1) = (bx0.saturating_sub(e), by0.saturating_sub(e), bx1 + e, by1 + e);
            stack.extend_from_slice(&spot);
            while let Some((x, y)) = stack.pop() {
                if spot.len() > p.max_area {
                    break;
                }
                let (x, y) = (x as usize, y as usize);
                for yy in y.saturating_sub(1).max(by0)..(y + 2).min(h).min(by1 + 1) {
                    for xx in x.saturating_sub(1).max(bx0)..(x + 2).min(w).min(bx1 + 1) {
                        let v = &mut mask.row_mut(yy)[xx];
                        if *v == 0 && excess.row(yy)[xx] >= rim {
                            *v = RIM;
                            spot.push((xx as u32, yy as u32));
                            stack.push((xx as u32, yy as u32));
                        }
                    }
                }
            }
            stack.clear();
            let keep = (p.min_area..=p.max_area).contains(&spot.len())
                && core as f32 >= MIN_CORE_FRACTION * spot.len() as f32
                && elongation(&spot) <= p.max_elongation;
            if keep {
                spots += 1;
                kept.extend_from_slice(&spot);
            }
            for &(x, y) in &spot {
                mask.row_mut(y as usize)[x as usize] = if keep { KEPT } else { SEEN };
            }
        }
    }
    (spots, kept)
}

/// Ratio of the principal axes (square root of the ratio of the eigenvalues of the
/// coordinates' covariance) of a spot: 1 for a disc, large for a line. Highlights are
/// compact; bright edges and thin bright structures are not.
fn elongation(spot: &[(u32, u32)]) -> f32 {
    let n = spot.len() as f64;
    let (mx, my) = spot.iter().fold((0.0, 0.0), |(a, b), &(x, y)| (a + x as f64 / n, b + y as f64 / n));
    let (mut sxx, mut syy, mut sxy) = (0.0, 0.0, 0.0);
    for &(x, y) in spot {
        let (dx, dy) = (x as f64 - mx, y as f64 - my);
        sxx += dx * dx / n;
        syy += dy * dy / n;
        sxy += dx * dy / n;
    }
    // Pixels are unit squares: add their own variance 1/12 so a single pixel or a line
    // one pixel thick has a finite ratio.
    let (sxx, syy) = (sxx + 1.0 / 12.0, syy + 1.0 / 12.0);
    let tr = sxx + syy;
    let det = sxx * syy - sxy * sxy;
    let disc = libm::sqrt((tr * tr / 4.0 - det).max(0.0));
    let (l1, l2) = (tr / 2.0 + disc, tr / 2.0 - disc);
    libm::sqrt(l1 / l2.max(1e-12)) as f32
}
