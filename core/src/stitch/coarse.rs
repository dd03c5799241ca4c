//! A coarse global estimate of a pair's shift by phase correlation (Kuglin and Hines, "The
//! phase correlation image alignment method", 1975), for the frames the log search cannot
//! reach: the search climbs from the predicted position and finds the peak only when the
//! prediction is within its radius, while a hand-held probe can jump by half a frame.
//!
//! Each frame is reduced by box averaging by an integer factor so it fits a [`SIDE`]
//! square, its mean removed, tapered at its edges (a Tukey window) (so the frame's edges do not
//! correlate) and zero-padded; the normalized cross-power spectrum of two frames, weighted
//! towards the low frequencies ([`FAINT_BAND`]), transforms back to a surface whose peaks are the
//! candidate shifts, found over the whole frame at once (up to half the grid, at least half
//! the frame). The candidates seed the fine registration, whose acceptance decides; a peak
//! that stands far above the surface's noise ([`Peak::significance`]) is itself evidence of
//! a match, which the sequence uses where the texture is too faint for templates.

use crate::fft::{fft2, fft2_rows, Complex};
use crate::image::ImageView;
use alloc::vec;
use alloc::vec::Vec;

/// Side of the coarse grid (a power of two).
pub const SIDE: usize = 128;

/// The band of [`weighted_candidates`] for faint frames: whitening gives the noise that
/// fills their high frequencies as much weight as the signal, and on the fundus at contrast
/// 0.3 the true peaks stood 6 to 12 times the surface's RMS, no clearer than unrelated
/// frames' (up to 7.4); weighted by this band, 11 to 22 (unrelated frames up to 7.5), while
/// well-textured pairs keep peaks of 30 to 90. (Not for seeds: on the narrow strips of a
/// tile grid's overlaps it blurs the peaks away.)
pub const FAINT_BAND: f32 = SIDE as f32 / 8.0;

/// A frame's spectrum, reusable against any other frame of the sequence.
#[derive(Clone, Debug)]
pub struct Spectrum {
    factor: usize,
    bins: Vec<Complex>,
}

impl Spectrum {
    /// The spectrum of a grey frame (module doc).
    pub fn new<T: crate::image::Pixel + Into<f64>>(frame: ImageView<'_, T>) -> Spectrum {
        let (w, h) = frame.size();
        // Frames are reduced to fit the grid: shifts up to half the grid (at least half the
        // frame) are told apart from their wrapped aliases.
        let factor = w.max(h).div_ceil(SIDE).max(1);
        let (cw, ch) = (w / factor, h / factor);
        let mut small = vec![0.0f64; cw * ch];
        for (y, row) in frame.rows().take(ch * factor).enumerate() {
            let out = &mut small[(y / factor) * cw..(y / factor + 1) * cw];
            for (o, block) in out.iter_mut().zip(row.chunks_exact(factor)) {
                *o += block.iter().map(|&v| v.into()).sum::<f64>();
            }
        }
        let mean = small.iter().sum::<f64>() / small.len().max(1) as f64;
        // A Tukey window (cosine tapers over the outer eighth on each side): flat enough
        // that the overlap of frames shifted by half their size still carries weight.
        let taper = |i: usize, n: usize| {
            let t = (i as f64 + 0.5) / n as f64;
            let edge = t.min(1.0 - t) / 0.125;
            if edge >= 1.0 { 1.0 } else { 0.5 - 0.5 * libm::cos(core::f64::consts::PI * edge) }
        };
        // Each column's and row's taper once (a cosine each), not each pixel's.
        let (across, down): (Vec<f64>, Vec<f64>) = ((0..cw).map(|x| taper(x, cw)).collect(), (0..ch).map(|y| taper(y, ch)).collect());
        let mut bins = vec![(0.0f32, 0.0f32); SIDE * SIDE];
        for y in 0..ch {
            for x in 0..cw {
                bins[y * SIDE + x].0 = ((small[y * cw + x] - mean) * across[x] * down[y]) as f32;
            }
        }
        fft2_rows(&mut bins, SIDE, ch, false);
        Spectrum { factor, bins }
    }
}

/// A peak this many times the surface's RMS is a match ([`Peak::significance`]): unrelated
/// frames of the robustness footage reached 7.5, the fundus under noise 8 or at contrast
/// 0.3 (where templates fail) 11 and more.
pub const SIGNIFICANT_PEAK: f64 = 10.0;

/// A peak of the phase-correlation surface.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Peak {
    /// The shift it stands for, in the stitching convention (moving pixel `(u, v)` shows the
    /// reference at `(u + x, v + y)`).
    pub shift: (f64, f64),
    /// Its height: the fraction of the frames' energy that agrees with it.
    pub height: f64,
    /// Its height over the surface's root mean square. The whitened surface of unrelated
    /// frames is close to noise, whose highest cell stands about 4.5 times its RMS, so a
    /// peak far above that is a real match whatever the contrast or noise of the frames
    /// ([`SIGNIFICANT_PEAK`], for [`weighted_candidates`] in [`FAINT_BAND`]).
    pub significance: f64,
}

/// Up to `count` candidate shifts of `moving` against `reference`, strongest first, from
/// the whitened cross-power spectrum (every frequency weighs the same: the sharpest peaks,
/// for seeds). `None` when the spectra come from frames of different sizes.
pub fn candidates(reference: &Spectrum, moving: &Spectrum, count: usize) -> Option<Vec<Peak>> {
    weighted_candidates(reference, moving, count, None)
}

/// `candidates` from the whitened cross-power spectrum weighted by a Gaussian of sigma
/// `band` (bins of the grid; Nyquist is `SIDE / 2`; `None`: unweighted): for faint frames,
/// whose high frequencies are mostly noise ([`FAINT_BAND`]). `None` too for a band that
/// is not finite and positive.
pub fn weighted_candidates(reference: &Spectrum, moving: &Spectrum, count: usize, band: Option<f32>) -> Option<Vec<Peak>> {
    if reference.factor != moving.factor || reference.bins.len() != moving.bins.len() || band.is_some_and(|b| !(b.is_finite() && b > 0.0)) {
        return None;
    }
    let mut surface = whitened(&reference.bins, &moving.bins, band.map(BandWeights::new).as_ref());
    fft2(&mut surface, SIDE, true);
    let n = SIDE as isize;
    let at = |x: isize, y: isize| surface[(y.rem_euclid(n) * n + x.rem_euclid(n)) as usize].0;
    let total = (SIDE * SIDE) as f32;
    let rms = libm::sqrt(surface.iter().map(|c| c.0 as f64 * c.0 as f64).sum::<f64>() / total as f64);
    let peaks = local_maxima(&surface, count);
    let f = reference.factor as f64;
    Some(
        peaks
            .into_iter()
            .map(|((x, y), v)| {
                // Parabolic refinement per axis, then the wrap to signed shifts.
                let refine = |l: f32, c: f32, r: f32| {
                    let d = l - 2.0 * c + r;
                    if d < 0.0 { (0.5 * (l - r) / d) as f64 } else { 0.0 }
                };
                let sx = x as f64 + refine(at(x - 1, y), v, at(x + 1, y));
                let sy = y as f64 + refine(at(x, y - 1), v, at(x, y + 1));
                let wrap = |s: f64| if s >= SIDE as f64 / 2.0 { s - SIDE as f64 } else { s };
                Peak { shift: (wrap(sx) * f, wrap(sy) * f), height: (v / total) as f64, significance: if rms > 0.0 { v as f64 / rms } else { 0.0 } }
            })
            .collect(),
    )
}

/// The whitened cross-power spectrum of two spectra's bins, weighted by `weights` (none:
/// every bin weighs one): `w R conj(M) / |R conj(M)|`, zero where that magnitude is not
/// above 1e-12. Eight bins at a time in explicit lanes (`wide`: packed square roots and
/// divisions, each lane computed as one bin alone would be).
fn whitened(reference: &[Complex], moving: &[Complex], weights: Option<&BandWeights>) -> Vec<Complex> {
    use wide::f32x8;
    const LANES: usize = 8;
    let mut out = vec![(0.0f32, 0.0f32); reference.len().min(moving.len())];
    let (tiny, zero) = (f32x8::splat(1e-12), f32x8::splat(0.0));
    for (k, ((r, m), o)) in reference.chunks_exact(LANES).zip(moving.chunks_exact(LANES)).zip(out.chunks_exact_mut(LANES)).enumerate() {
        let lanes = |f: &dyn Fn(usize) -> f32| f32x8::new(core::array::from_fn(f));
        let (rr, ri, mr, mi) = (lanes(&|j| r[j].0), lanes(&|j| r[j].1), lanes(&|j| m[j].0), lanes(&|j| m[j].1));
        // M = e^{ikx} R when m(u) = r(u + x), so R conj(M) = |R|^2 e^{-ikx}, whose inverse
        // transform peaks at u = x.
        let (p0, p1) = (rr * mr + ri * mi, ri * mr - rr * mi);
        let norm = (p0 * p0 + p1 * p1).sqrt();
        let weight = weights.map_or(f32x8::splat(1.0), |w| lanes(&|j| w.of(k * LANES + j)));
        let keep = norm.simd_gt(tiny);
        let (re, im) = (keep.select(weight * p0 / norm, zero).to_array(), keep.select(weight * p1 / norm, zero).to_array());
        for (j, o) in o.iter_mut().enumerate() {
            *o = (re[j], im[j]);
        }
    }
    out
}

/// The weights of a Gaussian band of sigma `b` over the grid's bins: `exp(-|k|^2 / (2 b^2))`
/// at the signed frequency `k` of each. A bin's weight depends on the magnitudes of its two
/// frequencies alone (0 ..= SIDE / 2 each), so a quarter of the grid's exponentials serve
/// the four signs.
struct BandWeights(Vec<f32>);

const HALF: usize = SIDE / 2;

impl BandWeights {
    fn new(b: f32) -> Self {
        BandWeights(
            (0..(HALF + 1) * (HALF + 1))
                .map(|i| {
                    let (kx, ky) = ((i % (HALF + 1)) as f32, (i / (HALF + 1)) as f32);
                    libm::expf(-(kx * kx + ky * ky) / (2.0 * b * b))
                })
                .collect(),
        )
    }

    /// The weight of bin `i` of the grid (row major).
    fn of(&self, i: usize) -> f32 {
        let magnitude = |k: usize| if k > HALF { SIDE - k } else { k };
        self.0[magnitude(i / SIDE) * (HALF + 1) + magnitude(i % SIDE)]
    }
}

/// The `count` highest positive local maxima of the surface's real part (a cell above its
/// eight neighbours on the torus, or equal to those after it in raster order), highest
/// first, ties in raster order: each as its cell and height.
fn local_maxima(surface: &[Complex], count: usize) -> Vec<((isize, isize), f32)> {
    let n = SIDE;
    // The real parts with a wrapped border of one cell: row `y + 1`, column `x + 1` holds
    // cell (x, y), so every neighbour is read without a wrap.
    let p = n + 2;
    let mut padded = vec![0.0f32; p * p];
    for y in 0..p {
        let row = &surface[(y + n - 1) % n * n..][..n];
        let out = &mut padded[y * p..][..p];
        out[0] = row[n - 1].0;
        out[p - 1] = row[0].0;
        for (o, c) in out[1..=n].iter_mut().zip(row) {
            *o = c.0;
        }
    }
    let mut peaks: Vec<(usize, f32)> = Vec::new();
    let mut is_max = [false; SIDE];
    for y in 0..n {
        let (above, here, below) = (&padded[y * p..][..p], &padded[(y + 1) * p..][..p], &padded[(y + 2) * p..][..p]);
        // A neighbour before the cell in raster order (the row above, the left one) must be
        // lower; one after it (the row below, the right one) lower or equal. Every
        // comparison made (no short cut), so the row's test vectorizes.
        for (x, m) in is_max.iter_mut().enumerate() {
            let v = here[x + 1];
            *m = (v > 0.0)
                & (above[x] < v)
                & (above[x + 1] < v)
                & (above[x + 2] < v)
                & (here[x] < v)
                & (here[x + 2] <= v)
                & (below[x] <= v)
                & (below[x + 1] <= v)
                & (below[x + 2] <= v);
        }
        peaks.extend(is_max.iter().enumerate().filter(|(_, &m)| m).map(|(x, _)| (y * n + x, here[x + 1])));
    }
    // Highest first, ties in raster order: a total order, so selecting the first `count`
    // and sorting them gives what sorting all would.
    let order = |a: &(usize, f32), b: &(usize, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    if count < peaks.len() {
        if count == 0 {
            peaks.clear();
        } else {
            peaks.select_nth_unstable_by(count - 1, order);
            peaks.truncate(count);
        }
    }
    peaks.sort_unstable_by(order);
    peaks.into_iter().map(|(i, v)| (((i % n) as isize, (i / n) as isize), v)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::Image;
    use crate::stitch::texture;

    #[test]
    fn finds_large_shifts_of_either_sign() {
        let src = texture(900, 800, 4);
        for (fw, fh) in [(200usize, 160usize), (320, 240), (150, 150)] {
            let a = Image::from_fn(fw, fh, |x, y| src.row(y + 200)[x + 250]).unwrap();
            let sa = Spectrum::new(a.view());
            for shift in [(0isize, 0isize), (37, -12), (-90, 61), (fw as isize / 2 - 1, -(fh as isize) / 2 + 1)] {
                // moving(u, v) = reference(u + x, v + y)
                let b = Image::from_fn(fw, fh, |x, y| src.row((y as isize + 200 + shift.1) as usize)[(x as isize + 250 + shift.0) as usize]).unwrap();
                let c = candidates(&sa, &Spectrum::new(b.view()), 3).unwrap();
                let f = fw.max(fh).div_ceil(SIDE) as f64;
                assert!((c[0].shift.0 - shift.0 as f64).abs() <= f && (c[0].shift.1 - shift.1 as f64).abs() <= f, "{fw}x{fh} {shift:?}: {c:?}");
            }
        }
    }

    /// Every cell's 3 x 3 neighbourhood read through wrapped coordinates, then a stable sort
    /// of all maxima: the definition [`local_maxima`] follows.
    fn local_maxima_by_definition(surface: &[Complex], count: usize) -> Vec<((isize, isize), f32)> {
        let n = SIDE as isize;
        let at = |x: isize, y: isize| surface[(y.rem_euclid(n) * n + x.rem_euclid(n)) as usize].0;
        let mut peaks = Vec::new();
        for y in 0..n {
            for x in 0..n {
                let v = at(x, y);
                let is_max = (-1..=1).all(|dy| (-1..=1).all(|dx| (dx, dy) == (0, 0) || at(x + dx, y + dy) < v || (at(x + dx, y + dy) == v && (y + dy, x + dx) > (y, x))));
                if is_max && v > 0.0 {
                    peaks.push(((x, y), v));
                }
            }
        }
        peaks.sort_by(|a, b| b.1.total_cmp(&a.1));
        peaks.truncate(count);
        peaks
    }

    #[test]
    fn whitening_in_lanes_is_each_bins_own_to_the_bit() {
        let mut rng = crate::stitch::SplitMix64::new(17);
        // Ordinary bins, exact zeros, magnitudes about the 1e-12 cut, a NaN.
        let bin = |rng: &mut crate::stitch::SplitMix64, k: usize| -> Complex {
            match k % 7 {
                0 => (0.0, 0.0),
                1 => (1e-7 * rng.normal() as f32, 1e-7 * rng.normal() as f32),
                2 if k % 5 == 0 => (f32::NAN, 1.0),
                _ => (1e3 * rng.normal() as f32, 1e3 * rng.normal() as f32),
            }
        };
        let (r, m): (Vec<Complex>, Vec<Complex>) = (0..SIDE * SIDE).map(|k| (bin(&mut rng, k), bin(&mut rng, k / 3))).unzip();
        for band in [None, Some(FAINT_BAND)] {
            let weights = band.map(BandWeights::new);
            let got = whitened(&r, &m, weights.as_ref());
            for (i, ((&r, &m), g)) in r.iter().zip(&m).zip(&got).enumerate() {
                let p = (r.0 * m.0 + r.1 * m.1, r.1 * m.0 - r.0 * m.1);
                let norm = libm::sqrtf(p.0 * p.0 + p.1 * p.1);
                let w = weights.as_ref().map_or(1.0, |w| w.of(i));
                let want = if norm > 1e-12 { (w * p.0 / norm, w * p.1 / norm) } else { (0.0, 0.0) };
                assert_eq!((g.0.to_bits(), g.1.to_bits()), (want.0.to_bits(), want.1.to_bits()), "bin {i}, band {band:?}");
            }
        }
    }

    #[test]
    fn band_weights_are_each_bins_exponential_to_the_bit() {
        for b in [FAINT_BAND, 3.7, 100.0] {
            let table = BandWeights::new(b);
            for i in 0..SIDE * SIDE {
                let signed = |k: usize| if k > SIDE / 2 { k as f32 - SIDE as f32 } else { k as f32 };
                let (kx, ky) = (signed(i % SIDE), signed(i / SIDE));
                assert_eq!(table.of(i).to_bits(), libm::expf(-(kx * kx + ky * ky) / (2.0 * b * b)).to_bits(), "band {b}, bin {i}");
            }
        }
    }

    #[test]
    fn local_maxima_follow_their_definition_ties_and_wrap_included() {
        let mut rng = crate::stitch::SplitMix64::new(21);
        for levels in [3.0, 20.0, 1e6] {
            // Few levels give plateaus: ties between neighbours, across the edges too.
            let surface: Vec<Complex> = (0..SIDE * SIDE).map(|_| (libm::round(rng.normal() * levels) as f32, 0.0)).collect();
            for count in [0, 1, 3, 50, SIDE * SIDE] {
                assert_eq!(local_maxima(&surface, count), local_maxima_by_definition(&surface, count), "{levels} levels, {count}");
            }
        }
        // A plateau over the whole torus: every cell has an equal neighbour before it.
        let flat = vec![(1.0f32, 0.0f32); SIDE * SIDE];
        assert_eq!(local_maxima(&flat, 5), local_maxima_by_definition(&flat, 5));
        assert!(local_maxima(&flat, 5).is_empty());
    }

    #[test]
    fn unrelated_frames_give_weak_peaks() {
        let a = texture(200, 160, 1);
        let b = texture(200, 160, 2);
        let c = candidates(&Spectrum::new(a.view()), &Spectrum::new(b.view()), 1).unwrap();
        let same = candidates(&Spectrum::new(a.view()), &Spectrum::new(a.view()), 1).unwrap();
        assert!(c[0].height < 0.25 * same[0].height, "{c:?} vs {same:?}");
        let other = Spectrum::new(texture(100, 80, 3).view());
        assert!(candidates(&Spectrum::new(a.view()), &other, 1).is_none());
        for band in [0.0, -1.0, f32::NAN, f32::INFINITY] {
            assert!(weighted_candidates(&Spectrum::new(a.view()), &Spectrum::new(b.view()), 1, Some(band)).is_none(), "{band}");
        }
        assert!(weighted_candidates(&Spectrum::new(a.view()), &Spectrum::new(a.view()), 1, Some(FAINT_BAND)).unwrap()[0].significance > SIGNIFICANT_PEAK);
    }
}
