//! Mutual-information matching cost (Hirschmueller 2008, sec. 2.1, eq. 5-9; Kim et al.'s
//! Taylor expansion of the joint entropy into a sum over pixels).
//!
//! From a disparity map `D`, the correspondences `(I_L(x, y), I_R(x - D(x, y), y))` of the
//! pixels with a finite `D` whose match lies inside the image (`D` rounded to the nearest
//! integer) fill a joint 256 x 256 histogram, normalised to probabilities `P`. With `g` the
//! 7-tap Gaussian Parzen window (sigma 1, taps `exp(-k^2 / 2)`, k = -3..3, normalised; zero
//! outside 0..255):
//!
//! * `h_LR(i, k) = -[log(max(P (*) g, eps)) (*) g](i, k)` (2-D, separable)
//! * `h_L(i) = -[log(max(P_L (*) g, eps)) (*) g](i)`, `P_L(i) = sum_k P(i, k)`; likewise `h_R`
//! * cost `c(i, k) = h_LR(i, k) - h_L(i) - h_R(k)` (= -mi(i, k)), in nats.
//!
//! The paper's `1 / n` factor is left out: it scales every cost alike and only the ratio to
//! P1 / P2 matters. The table is stored as u8: `round((c - min c) * 16)` saturated at 255
//! (1/16 nat per step, 16 nats of range above the best match). `eps = 1e-7`.
//!
//! The disparity map the table comes from is itself the result of matching with an earlier
//! table: `hierarchical_table` runs that loop (the paper's iterations, on a pyramid when
//! asked), with the matching pass handed in by the driver.

use super::{check_no_nan, reversed_clamped, Cost, RowCost, StereoParams, Tiling};
use crate::error::{Error, Result};
use crate::image::{check_same_size, Image, ImageView, ImageViewMut};
use alloc::vec;
use alloc::vec::Vec;

/// Steps per nat of the quantised table.
pub const MI_SCALE: f64 = 16.0;
/// Floor under smoothed probabilities before the logarithm.
pub const MI_EPS: f64 = 1e-7;

/// A quantised MI cost table: `cost(i, k)` for left intensity `i`, right intensity `k`.
#[derive(Clone, Debug, PartialEq)]
pub struct MiTable {
    costs: Vec<u8>,
    /// Correspondences the histogram was built from.
    pub samples: usize,
}

impl MiTable {
    #[inline]
    pub fn cost(&self, i: u8, k: u8) -> u8 {
        self.costs[(i as usize) << 8 | k as usize]
    }
}

/// The 7 Parzen taps.
fn parzen() -> [f64; 7] {
    let mut g = [0.0; 7];
    for (k, t) in g.iter_mut().enumerate() {
        let x = k as f64 - 3.0;
        *t = libm::exp(-x * x / 2.0);
    }
    let s: f64 = g.iter().sum();
    g.map(|t| t / s)
}

/// 1-D convolution with `g`, zero outside `0..n`, of `n` values `stride` apart from `off`.
fn conv1(v: &mut [f64], off: usize, stride: usize, n: usize, g: &[f64; 7], tmp: &mut [f64]) {
    for (i, out) in tmp.iter_mut().enumerate().take(n) {
        let mut s = 0.0;
        for (k, &t) in g.iter().enumerate() {
            let j = i as isize + k as isize - 3;
            if (0..n as isize).contains(&j) {
                s += t * v[off + j as usize * stride];
            }
        }
        *out = s;
    }
    for i in 0..n {
        v[off + i * stride] = tmp[i];
    }
}

fn conv2(v: &mut [f64], g: &[f64; 7]) {
    let mut tmp = [0.0; 256];
    for r in 0..256 {
        conv1(v, r * 256, 1, 256, g, &mut tmp);
    }
    for c in 0..256 {
        conv1(v, c, 256, 256, g, &mut tmp);
    }
}

/// Entropy terms `-(log(max(x (*) g, eps)) (*) g)` of a 1-D or 2-D (256 x 256) table.
fn entropy_1d(p: &mut [f64; 256], g: &[f64; 7]) {
    let mut tmp = [0.0; 256];
    conv1(p, 0, 1, 256, g, &mut tmp);
    for v in p.iter_mut() {
        *v = -libm::log(v.max(MI_EPS));
    }
    conv1(p, 0, 1, 256, g, &mut tmp);
}

/// The unquantised cost table in nats (`c(i, k)` at `i * 256 + k`) from the
/// correspondences of `disp`, and the number of correspondences; an error when there are none.
pub fn mi_costs_f64(left: ImageView<'_, u8>, right: ImageView<'_, u8>, disp: ImageView<'_, f32>) -> Result<(Vec<f64>, usize)> {
    check_same_size(left.size(), right.size())?;
    check_same_size(left.size(), disp.size())?;
    check_no_nan("disparity", disp)?;
    let (w, h) = left.size();
    let mut hist = vec![0u32; 256 * 256];
    let mut n = 0usize;
    for y in 0..h {
        let (l, r, d) = (left.row(y), right.row(y), disp.row(y));
        for x in 0..w {
            if !d[x].is_finite() {
                continue;
            }
            let xr = x as f64 - libm::floor(d[x] as f64 + 0.5);
            if xr < 0.0 || xr >= w as f64 {
                continue;
            }
            hist[(l[x] as usize) << 8 | r[xr as usize] as usize] += 1;
            n += 1;
        }
    }
    if n == 0 {
        return Err(Error::InvalidParameter {
            name: "disparity",
            reason: "no pixel has a correspondence inside the image to estimate mutual information from".into(),
        });
    }
    let g = parzen();
    let inv = 1.0 / n as f64;
    let mut joint: Vec<f64> = hist.iter().map(|&c| c as f64 * inv).collect();
    let mut pl = [0.0f64; 256];
    let mut pr = [0.0f64; 256];
    for i in 0..256 {
        for k in 0..256 {
            pl[i] += joint[i * 256 + k];
            pr[k] += joint[i * 256 + k];
        }
    }
    conv2(&mut joint, &g);
    for v in joint.iter_mut() {
        *v = -libm::log(v.max(MI_EPS));
    }
    conv2(&mut joint, &g);
    entropy_1d(&mut pl, &g);
    entropy_1d(&mut pr, &g);
    for i in 0..256 {
        for k in 0..256 {
            joint[i * 256 + k] -= pl[i] + pr[k];
        }
    }
    Ok((joint, n))
}

/// The quantised MI table of the module doc, from the correspondences of `disp`
/// (same size as the images; non-finite = no correspondence; NaN is an error).
pub fn mi_table(left: ImageView<'_, u8>, right: ImageView<'_, u8>, disp: ImageView<'_, f32>) -> Result<MiTable> {
    let (c, n) = mi_costs_f64(left, right, disp)?;
    let min = c.iter().copied().fold(f64::INFINITY, f64::min);
    let costs = c.iter().map(|&v| libm::floor((v - min) * MI_SCALE + 0.5).min(255.0) as u8).collect();
    Ok(MiTable { costs, samples: n })
}

/// The MI cost as rows: `C(x, y, d) = table(I_L(x, y), I_R(max(x - d, 0), y))`.
pub(crate) struct MiCost<'a> {
    left: ImageView<'a, u8>,
    right: ImageView<'a, u8>,
    table: &'a MiTable,
}

impl<'a> MiCost<'a> {
    pub(crate) fn new(left: ImageView<'a, u8>, right: ImageView<'a, u8>, table: &'a MiTable) -> Self {
        MiCost { left, right, table }
    }
}

impl RowCost for MiCost<'_> {
    fn cost_row(&self, y: usize, x0: usize, n: usize, d: usize, stride: usize, out: &mut [u8]) {
        let w = self.left.width();
        let mut rev = Vec::with_capacity(w + d);
        reversed_clamped(self.right.row(y), d, &mut rev);
        let l = self.left.row(y);
        for (i, o) in out.chunks_exact_mut(stride).take(n).enumerate() {
            let x = x0 + i;
            let t = &self.table.costs[(l[x] as usize) << 8..((l[x] as usize) << 8) + 256];
            for (c, &r) in o[..d].iter_mut().zip(&rev[w - 1 - x..w - 1 - x + d]) {
                *c = t[r as usize];
            }
        }
    }
}

/// MI cost volume of a gray pair with a table from [`mi_table`]. `disparities` in 1 ..= width.
#[cfg(test)]
pub fn mi_cost_volume(
    left: ImageView<'_, u8>,
    right: ImageView<'_, u8>,
    table: &MiTable,
    disparities: usize,
    par: crate::parallel::Parallelism,
) -> Result<super::CostVolume> {
    check_same_size(left.size(), right.size())?;
    crate::error::require_range("disparities", disparities, 1, left.width() as i64)?;
    let r = super::Rect { x: 0, y: 0, width: left.width(), height: left.height() };
    super::cost_volume_of(&MiCost::new(left, right, table), r, disparities, par)
}

/// One matching pass of the MI estimation, between two tables: the pair `left`, `right` of
/// pyramid level `level` (0: full resolution) matched by the MI costs of `table` with the
/// settings `params`.
#[derive(Clone, Copy)]
pub struct MiPass<'a> {
    pub level: usize,
    pub left: ImageView<'a, u8>,
    pub right: ImageView<'a, u8>,
    pub table: &'a MiTable,
    pub params: &'a StereoParams,
}

impl MiPass<'_> {
    /// The pass's costs as rows, for the CPU's pipeline.
    pub(crate) fn costs(&self) -> MiCost<'_> {
        MiCost::new(self.left, self.right, self.table)
    }
}

/// A full SGM pass the MI estimation runs between two tables ([`MiPass`]), writing the
/// disparity map of the pass's left image into `out` (of its size). Each backend passes its
/// own per-tile pipeline.
pub type MatchLevel<'m> = dyn FnMut(&MiPass<'_>, ImageViewMut<'_, f32>) -> Result<()> + 'm;

/// The MI table of the final matching run for `p.cost = Cost::Mi { iterations, levels }`
/// (paper sec. 2.1, iterative and hierarchical computation): the pair is halved `levels`
/// times (`half`); at the coarsest level the table is estimated `iterations` times,
/// starting from a zero disparity map, each estimate followed by a matching pass
/// (`match_level`) whose disparities feed the next; each finer level starts from the
/// level below's disparities, doubled (`upsample`), and is estimated once. The last
/// estimate, at full resolution, is returned without a pass: it is the caller's run.
/// Intermediate passes keep only the checked integer disparities (no subpixel, median or
/// filling; LR check on) over `max_disparity / 2^k` candidates at level `k`.
pub fn hierarchical_table(
    left: ImageView<'_, u8>,
    right: ImageView<'_, u8>,
    p: &StereoParams,
    match_level: &mut MatchLevel<'_>,
) -> Result<MiTable> {
    check_same_size(left.size(), right.size())?;
    p.validate(left.width())?;
    let Cost::Mi { iterations, levels } = p.cost else {
        return Err(Error::InvalidParameter { name: "cost", reason: "the MI hierarchy needs Cost::Mi".into() });
    };
    let mut pyramid: Vec<(Image<u8>, Image<u8>)> = Vec::with_capacity(levels);
    for _ in 0..levels {
        let (l, r) = pyramid.last().map_or((left, right), |(l, r)| (l.view(), r.view()));
        let next = (half(l)?, half(r)?);
        pyramid.push(next);
    }
    let level = |k: usize| if k == 0 { (left, right) } else { (pyramid[k - 1].0.view(), pyramid[k - 1].1.view()) };
    let inter = StereoParams { subpixel: false, median: false, fill: false, lr_check: true, ..*p };
    let (cw, ch) = level(levels).0.size();
    let mut disp = Image::<f32>::new(cw, ch)?;
    for k in (0..=levels).rev() {
        let (l, r) = level(k);
        let (wk, hk) = l.size();
        let estimates = if k == levels { iterations } else { 1 };
        let passes = if k == 0 { estimates - 1 } else { estimates };
        let q = StereoParams {
            max_disparity: p.max_disparity.div_ceil(1 << k).clamp(1, wk - 1),
            // Coarse levels are small: the default plan holds them whole.
            tiling: if k == 0 { p.tiling } else { Tiling::default() },
            ..inter
        };
        for _ in 0..passes {
            let table = mi_table(l, r, disp.view())?;
            let mut out = Image::<f32>::new(wk, hk)?;
            match_level(&MiPass { level: k, left: l, right: r, table: &table, params: &q }, out.view_mut())?;
            disp = out;
        }
        if k > 0 {
            disp = upsample(disp.view(), level(k - 1).0.size())?;
        }
    }
    mi_table(left, right, disp.view())
}

/// Half-size image: each pixel the rounded mean of a 2x2 block (the last row / column of an
/// odd size averages with itself).
fn half(img: ImageView<'_, u8>) -> Result<Image<u8>> {
    let (w, h) = img.size();
    Image::from_fn(w.div_ceil(2), h.div_ceil(2), |x, y| {
        let (x0, y0) = (2 * x, 2 * y);
        let (x1, y1) = ((x0 + 1).min(w - 1), (y0 + 1).min(h - 1));
        let (r0, r1) = (img.row(y0), img.row(y1));
        let s = r0[x0] as u32 + r0[x1] as u32 + r1[x0] as u32 + r1[x1] as u32;
        ((s + 2) / 4) as u8
    })
}

/// A coarse disparity map brought to the finer `size` (at most twice as large): each pixel
/// takes its 2x2 block's coarse disparity, doubled (disparities scale with the width).
fn upsample(coarse: ImageView<'_, f32>, size: (usize, usize)) -> Result<Image<f32>> {
    let (cw, ch) = coarse.size();
    Image::from_fn(size.0, size.1, |x, y| 2.0 * coarse.row((y / 2).min(ch - 1))[(x / 2).min(cw - 1)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parallel::Parallelism;

    fn lcg(w: usize, h: usize, seed: u64, levels: u64) -> Image<u8> {
        let mut s = seed | 1;
        Image::from_fn(w, h, |_, _| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 33) % levels) as u8
        })
        .unwrap()
    }

    /// Direct float64 reference: a full 2-D 7x7 Gaussian kernel (not separable), direct sums.
    fn reference(l: &Image<u8>, r: &Image<u8>, d: &Image<f32>) -> Vec<f64> {
        let (w, h) = l.size();
        let mut p = vec![0.0f64; 65536];
        let mut n = 0.0;
        for y in 0..h {
            for x in 0..w {
                let dv = d.at(x, y);
                if !dv.is_finite() {
                    continue;
                }
                let xr = x as i64 - (dv as f64 + 0.5).floor() as i64;
                if xr < 0 || xr >= w as i64 {
                    continue;
                }
                p[l.at(x, y) as usize * 256 + r.at(xr as usize, y) as usize] += 1.0;
                n += 1.0;
            }
        }
        p.iter_mut().for_each(|v| *v /= n);
        let g: Vec<f64> = (-3..=3).map(|k: i32| (-(k * k) as f64 / 2.0).exp()).collect();
        let gs: f64 = g.iter().sum();
        let g: Vec<f64> = g.iter().map(|v| v / gs).collect();
        let smooth2 = |t: &[f64]| -> Vec<f64> {
            let mut o = vec![0.0; 65536];
            for i in 0..256i32 {
                for k in 0..256i32 {
                    let mut s = 0.0;
                    for a in -3..=3i32 {
                        for b in -3..=3i32 {
                            let (ii, kk) = (i + a, k + b);
                            if (0..256).contains(&ii) && (0..256).contains(&kk) {
                                s += g[(a + 3) as usize] * g[(b + 3) as usize] * t[(ii * 256 + kk) as usize];
                            }
                        }
                    }
                    o[(i * 256 + k) as usize] = s;
                }
            }
            o
        };
        let smooth1 = |t: &[f64]| -> Vec<f64> {
            (0..256i32)
                .map(|i| (-3..=3i32).filter(|a| (0..256).contains(&(i + a))).map(|a| g[(a + 3) as usize] * t[(i + a) as usize]).sum())
                .collect()
        };
        let ent2: Vec<f64> = smooth2(&smooth2(&p).iter().map(|v| -(v.max(MI_EPS)).ln()).collect::<Vec<_>>());
        let pl: Vec<f64> = (0..256).map(|i| (0..256).map(|k| p[i * 256 + k]).sum()).collect();
        let pr: Vec<f64> = (0..256).map(|k| (0..256).map(|i| p[i * 256 + k]).sum()).collect();
        let el = smooth1(&smooth1(&pl).iter().map(|v| -(v.max(MI_EPS)).ln()).collect::<Vec<_>>());
        let er = smooth1(&smooth1(&pr).iter().map(|v| -(v.max(MI_EPS)).ln()).collect::<Vec<_>>());
        (0..65536).map(|j| ent2[j] - el[j / 256] - er[j % 256]).collect()
    }

    #[test]
    fn table_matches_direct_reference() {
        let (w, h) = (23, 9);
        let l = lcg(w, h, 3, 256);
        let r = lcg(w, h, 4, 256);
        let d = Image::from_fn(w, h, |x, y| if (x + y) % 7 == 0 { f32::INFINITY } else { ((x * 3 + y) % 5) as f32 + 0.3 }).unwrap();
        let want = reference(&l, &r, &d);
        let (got, n) = mi_costs_f64(l.view(), r.view(), d.view()).unwrap();
        assert!(n > 0);
        for (j, (&g, &wv)) in got.iter().zip(&want).enumerate() {
            assert!((g - wv).abs() < 1e-9 * wv.abs().max(1.0), "{j}: {g} vs {wv}");
        }
        let t = mi_table(l.view(), r.view(), d.view()).unwrap();
        let min = want.iter().copied().fold(f64::INFINITY, f64::min);
        for (j, &wv) in want.iter().enumerate() {
            let q = ((wv - min) * MI_SCALE + 0.5).floor().min(255.0);
            assert!((t.cost((j / 256) as u8, (j % 256) as u8) as f64 - q).abs() <= 1.0);
        }
        // The volume reads the table at the clamped match.
        let v = mi_cost_volume(l.view(), r.view(), &t, 4, Parallelism::AllThreads).unwrap();
        for y in 0..h {
            for x in 0..w {
                for k in 0..4 {
                    assert_eq!(v.pixel(x, y)[k], t.cost(l.at(x, y), r.at(x.saturating_sub(k), y)));
                }
            }
        }
    }

    #[test]
    fn identical_images_make_the_diagonal_cheapest() {
        // At zero disparity a pair of equal images gives a diagonal joint histogram: matching
        // intensities must cost less than any mismatch far from the diagonal.
        let l = lcg(64, 32, 9, 200);
        let z = Image::<f32>::new(64, 32).unwrap();
        let t = mi_table(l.view(), l.view(), z.view()).unwrap();
        assert_eq!(t.samples, 64 * 32);
        for i in (0..200u8).step_by(17) {
            let k = ((i as u16 + 100) % 200) as u8;
            assert!(t.cost(i, i) as u16 + 40 < t.cost(i, k) as u16, "{i}");
        }
    }

    #[test]
    fn rejects_bad_input() {
        let l = lcg(8, 4, 1, 256);
        let bad = Image::<u8>::new(7, 4).unwrap();
        let z = Image::<f32>::new(8, 4).unwrap();
        assert!(matches!(mi_table(l.view(), bad.view(), z.view()), Err(Error::SizeMismatch { .. })));
        let inf = Image::<f32>::filled(8, 4, f32::INFINITY).unwrap();
        assert!(matches!(mi_table(l.view(), l.view(), inf.view()), Err(Error::InvalidParameter { .. })));
        let nan = Image::<f32>::filled(8, 4, f32::NAN).unwrap();
        assert!(mi_table(l.view(), l.view(), nan.view()).is_err());
    }

    /// One pass as the hierarchy asks for it: level size, candidates, tiling.
    type Pass = ((usize, usize), usize, Tiling);

    /// The passes [`hierarchical_table`] asks for, each answered with disparity 1
    /// everywhere, and the table it returns.
    fn schedule(l: &Image<u8>, r: &Image<u8>, p: &StereoParams) -> (Vec<Pass>, MiTable) {
        let mut calls = Vec::new();
        let mut pass = |pass: &MiPass<'_>, mut out: ImageViewMut<'_, f32>| {
            let q = pass.params;
            assert!(!q.subpixel && !q.median && !q.fill && q.lr_check);
            assert_eq!((pass.left.size(), pass.right.size()), (out.size(), out.size()));
            calls.push((pass.left.size(), q.max_disparity, q.tiling));
            for y in 0..out.height() {
                out.row_mut(y).fill(1.0);
            }
            Ok(())
        };
        let table = hierarchical_table(l.view(), r.view(), p, &mut pass).unwrap();
        (calls, table)
    }

    #[test]
    fn hierarchy_runs_the_papers_schedule() {
        // 3 estimates at quarter resolution, one at half, and the last (full resolution)
        // left to the caller: four passes, each on its level's pair and candidates.
        let (l, r) = (lcg(40, 18, 5, 256), lcg(40, 18, 6, 256));
        let p = StereoParams { max_disparity: 16, cost: Cost::MI_HIERARCHICAL, ..Default::default() };
        let (calls, table) = schedule(&l, &r, &p);
        let coarse = Tiling::default();
        assert_eq!(calls, [((10, 5), 4, coarse), ((10, 5), 4, coarse), ((10, 5), 4, coarse), ((20, 9), 8, coarse)]);
        // The last pass's disparity 1 at half resolution is 2 at full resolution.
        let two = Image::<f32>::filled(40, 18, 2.0).unwrap();
        assert_eq!(table, mi_table(l.view(), r.view(), two.view()).unwrap());

        // Without levels: `iterations - 1` passes at full resolution, then the caller's.
        let tiled = StereoParams { cost: Cost::Mi { iterations: 2, levels: 0 }, tiling: Tiling::Tiles { width: 16, height: 16, overlap: 2 }, ..p };
        let (calls, table) = schedule(&l, &r, &tiled);
        assert_eq!(calls, [((40, 18), 16, tiled.tiling)]);
        let one = Image::<f32>::filled(40, 18, 1.0).unwrap();
        assert_eq!(table, mi_table(l.view(), r.view(), one.view()).unwrap());
        // One iteration: the table from zero disparities, no pass at all.
        let once = StereoParams { cost: Cost::Mi { iterations: 1, levels: 0 }, ..p };
        let (calls, table) = schedule(&l, &r, &once);
        let zero = Image::<f32>::new(40, 18).unwrap();
        assert!(calls.is_empty());
        assert_eq!(table, mi_table(l.view(), r.view(), zero.view()).unwrap());
    }

    #[test]
    fn hierarchy_rejects_bad_input_and_passes_errors_on() {
        let l = lcg(8, 4, 1, 256);
        let mut pass = |_: &MiPass<'_>, _: ImageViewMut<'_, f32>| -> Result<()> {
            Err(Error::InvalidParameter { name: "pass", reason: "failed".into() })
        };
        let p = StereoParams { max_disparity: 4, cost: Cost::MI, ..Default::default() };
        assert!(matches!(hierarchical_table(l.view(), l.view(), &p, &mut pass), Err(Error::InvalidParameter { name: "pass", .. })));
        let census = StereoParams { cost: Cost::CENSUS_7X5, ..p };
        assert!(hierarchical_table(l.view(), l.view(), &census, &mut pass).is_err());
        let bad = Image::<u8>::new(7, 4).unwrap();
        assert!(matches!(hierarchical_table(l.view(), bad.view(), &p, &mut pass), Err(Error::SizeMismatch { .. })));
    }

    #[test]
    fn half_and_upsample() {
        let img = Image::from_vec(3, 3, vec![0u8, 4, 8, 1, 3, 9, 200, 100, 7]).unwrap();
        let h = half(img.view()).unwrap();
        // (0+4+1+3+2)/4 = 2; (8+8+9+9+2)/4 = 9; (200+100+200+100+2)/4 = 150; 7.
        assert_eq!(h.as_slice(), &[2, 9, 150, 7]);
        let d = Image::from_vec(2, 1, vec![1.5f32, f32::INFINITY]).unwrap();
        let u = upsample(d.view(), (3, 2)).unwrap();
        assert_eq!(u.as_slice(), &[3.0, 3.0, f32::INFINITY, 3.0, 3.0, f32::INFINITY]);
    }
}
