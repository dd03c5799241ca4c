//! The textured part of an overlap: where a whole-overlap match is judged.
//!
//! A match made on the whole overlap (a phase-correlation peak, no template vouching for it)
//! used to be judged by the overlap's NCC over its whole area. Where most of the overlap is
//! featureless (an empty patch of slide, a hazy sky), the little texture left decides that
//! NCC alone, and a straight border of the empty patch correlates at any shift along it:
//! such a match stood 99 px from the truth at 0.97. Here the overlap is cut into blocks,
//! and only the blocks textured on both sides count:
//!
//! * the frames' noise variance is estimated by Immerkær's operator ("Fast noise variance
//!   estimation", CVIU 1996: the 3 x 3 mask `[1 -2 1; -2 4 -2; 1 -2 1]`, whose response to
//!   white noise of deviation s has mean absolute value `6 s sqrt(2 / pi)`), per block, and
//!   the [`NOISE_QUANTILE`] of the blocks taken (texture only raises a block's estimate);
//! * a block is textured where its variance exceeds what noise alone reaches in a block of
//!   its size ([`TEXTURE_SIGMAS`] standard errors of the sample variance above the noise
//!   variance, and never less than the templates' `min_variance`); on the moving side the
//!   noise is that left by the bilinear resampling;
//! * every block is taken less its least-squares plane (offset and ramps), on both sides:
//!   shading (a sky's gradient, a lens's fall-off) correlates at any shift and is no
//!   texture; a block is textured by what is left;
//! * the match's coefficient is Pearson's r of the textured blocks, less their planes, and
//!   its null is
//!   the same measure at the eight displacements of a quarter of the frame
//!   ([`super::overlap_null_ncc`]'s), where at least [`MIN_TEXTURED_BLOCKS`] are textured.
//!
//! A match with fewer textured blocks, under its null, or that correlates less than
//! [`SIGNAL_SHARE`] of what its texture's signal-to-noise ratio allows, is not confirmed.

use super::quality::{bilinear_gain, check, overlap, sampler, MIN_NULL_DISPLACEMENTS};
use crate::error::Result;
use crate::image::{ImageView, Pixel};
use crate::parallel::Parallelism;
use alloc::vec::Vec;

/// Fewest blocks textured on both sides of an overlap for it to judge a match: as many
/// template-sized blocks as the template stage needs agreeing templates, and one more.
pub const MIN_TEXTURED_BLOCKS: usize = 4;
/// How many standard errors of a block's sample variance its variance must stand above the
/// noise's to be textured (neighbouring noise samples are counted as a quarter sample each,
/// for the correlation a resampled frame's noise has).
pub const TEXTURE_SIGMAS: f64 = 4.0;
/// The least share of [`TexturedOverlap::expected`] a match's r must reach: a true match
/// loses little to resampling and residual misalignment (the fundus at contrast 0.3,
/// band-passed: 0.72 to 0.79 where 0.74 to 0.78 was expected), a match carried by a border or by
/// shading while the texture disagrees keeps little (a fundus frame's rim, 117 px off:
/// 0.27 of an expected 0.9).
pub const SIGNAL_SHARE: f64 = 0.7;
/// The least share of the gain a true match has over its null (from the null's r to
/// [`TexturedOverlap::expected`]) a match's r must reach: on texture that correlates with
/// itself far along (a sky, a coat, a lawn) a displacement that does not match keeps most
/// of the correlation, and a fixed margin over the null let a phase peak 420 px from the
/// truth stand (r 0.61 over a null of 0.56, of 0.85 expected: 0.17 of the gain), where
/// true matches reach 0.97 of it and more.
pub const NULL_GAIN_SHARE: f64 = 0.5;
/// [`SIGNAL_SHARE`] where no displacement has the texture to give a null.
pub const UNJUDGED_SHARE: f64 = 0.9;
/// The quantile of the blocks' noise estimates taken as a frame's noise.
pub const NOISE_QUANTILE: f64 = 0.1;

/// The noise of the frames an overlap is judged on: its variance per pixel, how many
/// independent noise samples a pixel counts for, and whether it is white (so bilinear
/// resampling attenuates it) or already smooth.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Noise {
    pub variance: f64,
    pub samples_per_pixel: f64,
    pub white: bool,
}

impl Noise {
    /// White noise of `variance` on raw frames (neighbours counted a quarter sample each,
    /// for the correlation a resampled frame's noise has).
    pub fn white(variance: f64) -> Self {
        Noise { variance, samples_per_pixel: 0.25, white: true }
    }

    /// White noise of `variance` seen through [`super::faint::band_passed_into`]: the
    /// difference of Gaussians keeps `1/(4 pi n^2) + 1/(4 pi w^2) - 2/(2 pi (n^2 + w^2))`
    /// of its variance, smooth over about `4 pi n^2` pixels.
    pub fn band_passed(variance: f64) -> Self {
        use super::faint::{BAND_NARROW as n, BAND_WIDE as w};
        let pi = core::f64::consts::PI;
        let gain = 1.0 / (4.0 * pi * n * n) + 1.0 / (4.0 * pi * w * w) - 1.0 / (pi * (n * n + w * w));
        Noise { variance: variance * gain, samples_per_pixel: 1.0 / (4.0 * pi * n * n), white: false }
    }
}

/// What the textured part of an overlap says about a match.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TexturedOverlap {
    /// Blocks textured on both sides at the match.
    pub blocks: usize,
    /// Their Pearson's r, less their planes (`None` with no textured block).
    pub ncc: Option<f64>,
    /// The r a true match would reach with that texture under that noise: each block's
    /// variance above the noise is its signal, shared by both sides at a true match.
    pub expected: f64,
    /// The largest such r at the null displacements with [`MIN_TEXTURED_BLOCKS`] textured
    /// blocks; `None` where fewer than [`MIN_NULL_DISPLACEMENTS`] have them.
    pub null: Option<f64>,
}

impl TexturedOverlap {
    /// Whether the match stands on texture: enough textured blocks, a coefficient at least
    /// `floor`, [`SIGNAL_SHARE`] of the expected one, `margin` above its null and
    /// [`NULL_GAIN_SHARE`] of the gain a true match has over it (where
    /// there is none: twice the blocks and [`UNJUDGED_SHARE`]).
    pub fn confirms(&self, margin: f64, floor: f64) -> bool {
        match self.ncc {
            Some(r) => {
                let stands = self.blocks >= MIN_TEXTURED_BLOCKS && r >= floor && r >= SIGNAL_SHARE * self.expected;
                match self.null {
                    Some(n) => stands && r >= n + margin && r >= n + NULL_GAIN_SHARE * (self.expected - n),
                    // Nothing to tell it from chance: twice the texture, and nearly all the
                    // correlation it allows (a border of an empty patch carried such
                    // matches on 4 blocks at 0.8 of 0.99; the faint fundus's true pairs
                    // without a null, 10 blocks at 0.97).
                    None => stands && self.blocks >= 2 * MIN_TEXTURED_BLOCKS && r >= UNJUDGED_SHARE * self.expected,
                }
            }
            None => false,
        }
    }
}

/// The noise variance of `frame` (module doc), from blocks of side `block`: `None` for a
/// frame under 3 x 3.
pub fn noise_variance<T: Pixel + Into<f64>>(frame: ImageView<'_, T>, block: usize) -> Option<f64> {
    let (w, h) = frame.size();
    if w < 3 || h < 3 || block == 0 {
        return None;
    }
    let (bx, by) = ((w - 2).div_ceil(block), (h - 2).div_ceil(block));
    let mut sums = alloc::vec![(0.0f64, 0usize); bx * by];
    for y in 1..h - 1 {
        let (a, b, c) = (frame.row(y - 1), frame.row(y), frame.row(y + 1));
        for x in 1..w - 1 {
            let v = |r: &[T], i: usize| -> f64 { r[i].into() };
            let e = v(a, x - 1) - 2.0 * v(a, x) + v(a, x + 1) - 2.0 * (v(b, x - 1) - 2.0 * v(b, x) + v(b, x + 1)) + v(c, x - 1) - 2.0 * v(c, x) + v(c, x + 1);
            let s = &mut sums[((y - 1) / block) * bx + (x - 1) / block];
            s.0 += libm::fabs(e);
            s.1 += 1;
        }
    }
    let k = libm::sqrt(core::f64::consts::FRAC_PI_2) / 6.0;
    let mut v: Vec<f64> = sums.iter().filter(|s| 2 * s.1 >= block * block).map(|s| (k * s.0 / s.1 as f64) * (k * s.0 / s.1 as f64)).collect();
    if v.is_empty() {
        v = sums.iter().filter(|s| s.1 > 0).map(|s| (k * s.0 / s.1 as f64) * (k * s.0 / s.1 as f64)).collect();
    }
    v.sort_by(f64::total_cmp);
    v.get(((v.len() as f64 - 1.0) * NOISE_QUANTILE) as usize).copied()
}

/// [`TexturedOverlap`] of `reference` and `moving` aligned by `shift` (as
/// [`super::overlap_ncc`]), with blocks of side `block`, frames whose noise variance is
/// `noise` and `min_variance` the least variance ever textured.
/// Errors: sizes differ, non-finite shift.
pub fn textured_overlap<T: Pixel + Into<f64>>(
    reference: ImageView<'_, T>,
    moving: ImageView<'_, T>,
    shift: (f64, f64),
    block: usize,
    noise: Noise,
    min_variance: f64,
    par: Parallelism,
) -> Result<TexturedOverlap> {
    check(&reference, &moving, shift)?;
    let block = block.max(3);
    let (blocks, ncc, expected) = textured_at(&reference, &moving, shift, block, noise, min_variance, par);
    let (w, h) = (reference.width() as f64, reference.height() as f64);
    let (dx, dy) = (libm::round(w / 4.0), libm::round(h / 4.0));
    let mut nulls = Vec::with_capacity(12);
    // A block's side away along each axis, and along the overlap's grain: a straight border
    // (of an empty patch, of a fundus's rim) correlates at any shift along it, and so does
    // a match it carries (a fundus frame 99 px off matched the rim's diagonal at 0.75 of
    // 10 blocks, where the axes' displacements correlated 0.13).
    let b = block as f64;
    let far = [(-1.0, -1.0), (0.0, -1.0), (1.0, -1.0), (-1.0, 0.0), (1.0, 0.0), (-1.0, 1.0), (0.0, 1.0), (1.0, 1.0)].map(|(i, j)| (i * dx, j * dy));
    let (gx, gy) = overlap(reference.size(), shift).map_or((1.0, 0.0), |rect| grain(&reference, rect));
    let along = [(-b * gx, -b * gy), (b * gx, b * gy)];
    for (ox, oy) in far.into_iter().chain([(-b, 0.0), (b, 0.0), (0.0, -b), (0.0, b)]).chain(along) {
        let s = (shift.0 + ox, shift.1 + oy);
        let area = (w - libm::fabs(s.0)).max(0.0) * (h - libm::fabs(s.1)).max(0.0);
        if 4.0 * area < w * h {
            continue;
        }
        if let (n, Some(r), _) = textured_at(&reference, &moving, s, block, noise, min_variance, par) {
            if n >= MIN_TEXTURED_BLOCKS {
                nulls.push(r);
            }
        }
    }
    let null = (nulls.len() >= MIN_NULL_DISPLACEMENTS).then(|| nulls.into_iter().fold(f64::NEG_INFINITY, f64::max));
    Ok(TexturedOverlap { blocks, ncc, expected, null })
}

/// How many blocks of side `block` of `frame` are textured (as [`textured_overlap`] counts
/// them, the frame against itself): where fewer than [`MIN_TEXTURED_BLOCKS`] are, no
/// overlap of the frame can confirm a match.
pub(super) fn textured_blocks<T: Pixel + Into<f64>>(frame: ImageView<'_, T>, block: usize, noise: Noise, min_variance: f64, par: Parallelism) -> usize {
    textured_at(&frame, &frame, (0.0, 0.0), block.max(3), noise, min_variance, par).0
}

/// The blocks textured on both sides of the overlap at `shift`, their r less their planes,
/// and the r their signal allows ([`TexturedOverlap::expected`]).
fn textured_at<T: Pixel + Into<f64>>(r: &ImageView<'_, T>, m: &ImageView<'_, T>, shift: (f64, f64), block: usize, noise: Noise, min_variance: f64, par: Parallelism) -> (usize, Option<f64>, f64) {
    let Some((x0, y0, x1, y1)) = overlap(r.size(), shift) else { return (0, None, 0.0) };
    // Blocks of `block` from the overlap's corner; a remainder under half a block joins the
    // last block of its row or column.
    let cuts = |lo: usize, hi: usize| -> Vec<(usize, usize)> {
        let n = ((hi - lo) / block).max(1);
        (0..n).map(|k| (lo + k * block, if k + 1 == n { hi } else { lo + (k + 1) * block })).collect()
    };
    let (xs, ys) = (cuts(x0, x1), cuts(y0, y1));
    let gain = if noise.white { bilinear_gain(shift) } else { 1.0 };
    let (sps, noise) = (noise.samples_per_pixel, noise.variance);
    let cells: Vec<(usize, usize, usize, usize)> = ys.iter().flat_map(|&(ya, yb)| xs.iter().map(move |&(xa, xb)| (xa, ya, xb, yb))).collect();
    let sample = sampler(m, shift);
    let moments = crate::parallel::map_indices(cells.len(), par, |k| deramped(r, &sample, cells[k]));
    let (mut n, mut saa, mut sbb, mut sab, mut shared) = (0usize, 0.0, 0.0, 0.0, 0.0);
    for (&(xa, ya, xb, yb), &(a, b, ab)) in cells.iter().zip(&moments) {
        let px = ((xb - xa) * (yb - ya)) as f64;
        if px < 9.0 {
            continue;
        }
        // The sample variance of `px * sps` independent noise samples errs by
        // sqrt(2 / (px * sps)) of the noise variance.
        let excess = 1.0 + TEXTURE_SIGMAS * libm::sqrt(2.0 / (px * sps));
        let (fa, fb) = ((noise * excess).max(min_variance), (noise * gain * excess).max(min_variance * gain));
        if a / px > fa && b / px > fb {
            n += 1;
            (saa, sbb, sab) = (saa + a, sbb + b, sab + ab);
            shared += libm::sqrt((a - noise * px).max(0.0) * (b - noise * gain * px).max(0.0));
        }
    }
    let flat = !(n > 0 && saa > 0.0 && sbb > 0.0);
    (n, (!flat).then(|| (sab / libm::sqrt(saa * sbb)).clamp(-1.0, 1.0)), if flat { 0.0 } else { shared / libm::sqrt(saa * sbb) })
}

/// The structure tensor of `frame` over the rectangle `[x0, x1) x [y0, y1)`, sampled every
/// `step` pixels along each axis: the sums of its central-difference gradients' squares and
/// product, `(jxx, jyy, jxy)`, added to `sums`.
pub(super) fn structure_tensor<T: Pixel + Into<f64>>(frame: &ImageView<'_, T>, (x0, y0, x1, y1): (usize, usize, usize, usize), step: usize, sums: &mut (f64, f64, f64)) {
    let v = |x: usize, y: usize| -> f64 { frame.row(y)[x].into() };
    let step = step.max(1);
    for y in (y0.max(1)..y1.min(frame.height()).saturating_sub(1)).step_by(step) {
        for x in (x0.max(1)..x1.min(frame.width()).saturating_sub(1)).step_by(step) {
            let (gx, gy) = (v(x + 1, y) - v(x - 1, y), v(x, y + 1) - v(x, y - 1));
            *sums = (sums.0 + gx * gx, sums.1 + gy * gy, sums.2 + gx * gy);
        }
    }
}

/// How much a structure tensor's gradients run one way: `(l1 - l2) / (l1 + l2)` of its
/// eigenvalues, 0 for texture that varies alike in every direction, 1 for a straight edge
/// (which pins a match across it and not along it: the aperture problem); 0 where flat.
pub(super) fn coherence((jxx, jyy, jxy): (f64, f64, f64)) -> f64 {
    let trace = jxx + jyy;
    if trace <= 0.0 {
        return 0.0;
    }
    libm::sqrt((jxx - jyy) * (jxx - jyy) + 4.0 * jxy * jxy) / trace
}

/// The direction along which `frame` varies least over the rectangle `rect` (a unit
/// vector): the eigenvector of the smaller eigenvalue of its structure tensor, the run of
/// its edges.
fn grain<T: Pixel + Into<f64>>(frame: &ImageView<'_, T>, rect: (usize, usize, usize, usize)) -> (f64, f64) {
    let mut j = (0.0, 0.0, 0.0);
    structure_tensor(frame, rect, 1, &mut j);
    // The gradients' dominant direction is at half the angle of (jxx - jyy, 2 jxy); the grain
    // runs across it.
    let theta = 0.5 * libm::atan2(2.0 * j.2, j.0 - j.1);
    (-libm::sin(theta), libm::cos(theta))
}

/// The sums of squares and products of the reference and the sampled moving frame over the
/// rectangle `[xa, xb) x [ya, yb)`, each less its least-squares plane (offset and ramps):
/// `(saa, sbb, sab)`. Shading, a sky's gradient, correlates at any shift; a plane per block
/// takes it out, and what is left is texture.
fn deramped<T: Pixel + Into<f64>>(r: &ImageView<'_, T>, sample: &dyn Fn(usize, usize) -> f64, (xa, ya, xb, yb): (usize, usize, usize, usize)) -> (f64, f64, f64) {
    let (cx, cy) = ((xa + xb - 1) as f64 / 2.0, (ya + yb - 1) as f64 / 2.0);
    let (a0, b0) = (r.row(ya)[xa].into(), sample(xa, ya));
    // Sums of a, b, aa, bb, ab, ua, va, ub, vb with u, v the centred coordinates.
    let mut s = [0.0f64; 9];
    for y in ya..yb {
        let row = r.row(y);
        let v = y as f64 - cy;
        for (x, &p) in row.iter().enumerate().take(xb).skip(xa) {
            let (a, b, u) = (p.into() - a0, sample(x, y) - b0, x as f64 - cx);
            for (t, d) in s.iter_mut().zip([a, b, a * a, b * b, a * b, u * a, v * a, u * b, v * b]) {
                *t += d;
            }
        }
    }
    let (nx, ny) = ((xb - xa) as f64, (yb - ya) as f64);
    let n = nx * ny;
    // Sums of u² and v² over the grid (the centred coordinates are orthogonal to 1 and each other).
    let (suu, svv) = (ny * nx * (nx * nx - 1.0) / 12.0, nx * ny * (ny * ny - 1.0) / 12.0);
    let fit = |p: f64, q: f64, up: f64, uq: f64, vp: f64, vq: f64, pq: f64| {
        let mut c = pq - p * q / n;
        if suu > 0.0 {
            c -= up * uq / suu;
        }
        if svv > 0.0 {
            c -= vp * vq / svv;
        }
        c
    };
    let saa = fit(s[0], s[0], s[5], s[5], s[6], s[6], s[2]).max(0.0);
    let sbb = fit(s[1], s[1], s[7], s[7], s[8], s[8], s[3]).max(0.0);
    let sab = fit(s[0], s[1], s[5], s[7], s[6], s[8], s[4]);
    (saa, sbb, sab)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::Image;
    use crate::stitch::{texture, SplitMix64};

    /// Gaussian-ish noise of deviation `s` (sum of 4 uniforms).
    fn noise(w: usize, h: usize, s: f64, seed: u64) -> Image<f32> {
        let mut rng = SplitMix64::new(seed);
        Image::from_fn(w, h, |_, _| ((0..4).map(|_| rng.uniform()).sum::<f64>() - 2.0) as f32 * (s * libm::sqrt(3.0)) as f32).unwrap()
    }

    #[test]
    fn the_noise_of_a_flat_frame_and_of_a_textured_one_is_found() {
        let n = noise(200, 160, 2.0, 1);
        let flat = Image::from_fn(200, 160, |x, y| 100.0 + n.row(y)[x]).unwrap();
        let v = noise_variance(flat.view(), 25).unwrap();
        assert!((v - 4.0).abs() < 0.6, "{v}");
        // Texture raises the blocks' estimates; the lowest decile of a half-flat frame is the noise's.
        let t = texture(200, 160, 3);
        let half = Image::from_fn(200, 160, |x, y| if x < 100 { 100.0 + n.row(y)[x] } else { t.row(y)[x] + n.row(y)[x] }).unwrap();
        let v = noise_variance(half.view(), 25).unwrap();
        assert!((v - 4.0).abs() < 0.6, "{v}");
        assert_eq!(noise_variance(Image::<f32>::new(2, 2).unwrap().view(), 25), None);
    }

    #[test]
    fn a_featureless_overlap_confirms_nothing_and_texture_does() {
        let (w, h) = (200, 160);
        let scene = texture(400, 300, 7);
        let n = |seed| noise(w, h, 2.0, seed);
        // The scene, flat outside `textured` (scene coordinates x0, y0, x1, y1), cut at (x0, y0).
        let cut = |x0: usize, y0: usize, textured: (usize, usize, usize, usize), seed: u64| {
            let nn = n(seed);
            let inside = |x: usize, y: usize| x >= textured.0 && y >= textured.1 && x < textured.2 && y < textured.3;
            Image::from_fn(w, h, |x, y| if inside(x0 + x, y0 + y) { scene.row(y0 + y)[x0 + x] + nn.row(y)[x] } else { 128.0 + nn.row(y)[x] }).unwrap()
        };
        let all = (0, 0, 400, 300);
        // Textured frames: the true shift confirms, a wrong one does not.
        let (a, b) = (cut(50, 40, all, 1), cut(78, 52, all, 2));
        let nv = noise_variance(a.view(), 25).unwrap().min(noise_variance(b.view(), 25).unwrap());
        let at = |s| textured_overlap(a.view(), b.view(), s, 25, Noise::white(nv), 4.0, Parallelism::Sequential).unwrap();
        let right = at((28.0, 12.0));
        assert!(right.confirms(0.05, 0.1) && right.blocks >= 20, "{right:?}");
        assert!(!at((4.0, 30.0)).confirms(0.05, 0.1));
        // Frames flat but for a small patch of texture: too few textured blocks to judge.
        let patch = (110, 80, 130, 100);
        let (a, b) = (cut(50, 40, patch, 3), cut(78, 52, patch, 4));
        let thin = textured_overlap(a.view(), b.view(), (28.0, 12.0), 25, Noise::white(4.0), 4.0, Parallelism::Sequential).unwrap();
        assert!(thin.blocks < MIN_TEXTURED_BLOCKS && !thin.confirms(0.05, 0.1), "{thin:?}");
        // Bad input is an error.
        assert!(textured_overlap(a.view(), b.view(), (f64::NAN, 0.0), 25, Noise::white(4.0), 4.0, Parallelism::Sequential).is_err());
    }
}
