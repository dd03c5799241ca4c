//! The original CUDA port's "modified absolute difference": per pixel
//! `C(x, y, d) = |I_L(x, y) - I_R(max(x - d, 0), y)|`. Where `x - d` falls left of the
//! image the match is clamped to column 0 instead of leaving the cost undefined, so every
//! pixel has all D costs. Colour input: the rounded mean of the three channel differences,
//! `(|dR| + |dG| + |dB| + 1) / 3` (integer division), which keeps the cost in a u8.

use super::{reversed_clamped, Pair, RowCost};
#[cfg(test)]
use crate::image::{ImageView, Rgba8};
#[cfg(test)]
use super::{cost_volume_of, CostVolume, Rect};
#[cfg(test)]
use crate::error::{require_range, Result};
#[cfg(test)]
use crate::image::check_same_size;
#[cfg(test)]
use crate::parallel::Parallelism;
use alloc::vec::Vec;
use crate::cpu::multiversion;

multiversion! {
    /// `out[d] = |l - rev[d]|`.
    fn ad_run_gray(l: u8, rev: &[u8], out: &mut [u8]) {
        for (o, &r) in out.iter_mut().zip(rev) {
            *o = l.abs_diff(r);
        }
    }
}

multiversion! {
    /// `out[d] = (|r - R[d]| + |g - G[d]| + |b - B[d]| + 1) / 3` over reversed channel rows.
    fn ad_run_rgb(l: [u8; 3], rr: &[u8], rg: &[u8], rb: &[u8], out: &mut [u8]) {
        for (((o, &r), &g), &b) in out.iter_mut().zip(rr).zip(rg).zip(rb) {
            let s = l[0].abs_diff(r) as u16 + l[1].abs_diff(g) as u16 + l[2].abs_diff(b) as u16;
            *o = ((s + 1) / 3) as u8;
        }
    }
}

/// The AD cost as rows (see [`super::RowCost`]).
pub(crate) struct AdCost<'a> {
    pair: Pair<'a>,
}

impl<'a> AdCost<'a> {
    pub(crate) fn new(pair: Pair<'a>) -> Self {
        AdCost { pair }
    }
}

impl RowCost for AdCost<'_> {
    fn cost_row(&self, y: usize, x0: usize, n: usize, d: usize, stride: usize, out: &mut [u8]) {
        match self.pair {
            Pair::Gray(l, r) => {
                let w = l.width();
                let mut rev = Vec::with_capacity(w + d);
                reversed_clamped(r.row(y), d, &mut rev);
                let lr = l.row(y);
                for (i, o) in out.chunks_exact_mut(stride).take(n).enumerate() {
                    let x = x0 + i;
                    ad_run_gray(lr[x], &rev[w - 1 - x..w - 1 - x + d], &mut o[..d]);
                }
            }
            Pair::Rgb(l, r) => {
                let w = l.width();
                let rrow = r.row(y);
                let chan = |c: usize| -> Vec<u8> {
                    let plane: Vec<u8> = rrow.iter().map(|p| p.to_array()[c]).collect();
                    let mut rev = Vec::with_capacity(w + d);
                    reversed_clamped(&plane, d, &mut rev);
                    rev
                };
                let (rr, rg, rb) = (chan(0), chan(1), chan(2));
                let lr = l.row(y);
                for (i, o) in out.chunks_exact_mut(stride).take(n).enumerate() {
                    let x = x0 + i;
                    let p = lr[x];
                    let s = w - 1 - x;
                    ad_run_rgb([p.r, p.g, p.b], &rr[s..s + d], &rg[s..s + d], &rb[s..s + d], &mut o[..d]);
                }
            }
        }
    }
}

#[cfg(test)]
fn volume(pair: Pair<'_>, size: (usize, usize), disparities: usize, par: Parallelism) -> Result<CostVolume> {
    require_range("disparities", disparities, 1, size.0 as i64)?;
    let r = Rect { x: 0, y: 0, width: size.0, height: size.1 };
    cost_volume_of(&AdCost::new(pair), r, disparities, par)
}

/// Modified-AD cost volume of a gray pair (see the module doc). `disparities` in 1 ..= width.
#[cfg(test)]
pub fn ad_cost_volume_gray(
    left: ImageView<'_, u8>,
    right: ImageView<'_, u8>,
    disparities: usize,
    par: Parallelism,
) -> Result<CostVolume> {
    check_same_size(left.size(), right.size())?;
    volume(Pair::Gray(left, right), left.size(), disparities, par)
}

/// Modified-AD cost volume of a colour pair (alpha ignored; see the module doc).
#[cfg(test)]
pub fn ad_cost_volume_rgb(
    left: ImageView<'_, Rgba8>,
    right: ImageView<'_, Rgba8>,
    disparities: usize,
    par: Parallelism,
) -> Result<CostVolume> {
    check_same_size(left.size(), right.size())?;
    volume(Pair::Rgb(left, right), left.size(), disparities, par)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::image::Image;
    use proptest::prelude::*;

    fn lcg_image<T: crate::image::Pixel>(w: usize, h: usize, seed: u64, f: impl Fn(u64) -> T) -> Image<T> {
        let mut s = seed | 1;
        Image::from_fn(w, h, |_, _| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            f(s)
        })
        .unwrap()
    }

    /// Both cost volumes of random `w x h` pairs with `d` disparities against the formula.
    fn check_against_reference(w: usize, h: usize, seed: u64, d: usize, par: Parallelism) {
        let l = lcg_image(w, h, seed, |s| (s >> 56) as u8);
        let r = lcg_image(w, h, seed ^ 77, |s| (s >> 56) as u8);
        let v = ad_cost_volume_gray(l.view(), r.view(), d, par).unwrap();
        let lc = lcg_image(w, h, seed, |s| Rgba8::from_array(((s >> 32) as u32).to_le_bytes()));
        let rc = lcg_image(w, h, seed ^ 5, |s| Rgba8::from_array(((s >> 32) as u32).to_le_bytes()));
        let vc = ad_cost_volume_rgb(lc.view(), rc.view(), d, Parallelism::Sequential).unwrap();
        for y in 0..h { for x in 0..w { for k in 0..d {
            let xr = (x as i64 - k as i64).max(0) as usize;
            let want = (l.at(x, y) as f64 - r.at(xr, y) as f64).abs();
            assert_eq!(v.pixel(x, y)[k] as f64, want);
            let (a, b) = (lc.at(x, y).to_array(), rc.at(xr, y).to_array());
            let mean: f64 = (0..3).map(|c| (a[c] as f64 - b[c] as f64).abs()).sum::<f64>() / 3.0;
            assert_eq!(vc.pixel(x, y)[k] as f64, libm::floor(mean + 0.5));
        }}}
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        #[test]
        fn gray_and_rgb_match_reference(w in 1usize..20, h in 1usize..8, seed in any::<u64>(), dsel in 0usize..100) {
            check_against_reference(w, h, seed, 1 + dsel % w, Parallelism::AllThreads);
        }
    }

    #[test]
    fn every_level_matches_reference() {
        crate::testing::at_every_level(|_| check_against_reference(83, 3, 9, 70, Parallelism::Sequential));
    }

    #[test]
    fn rejects_bad_input() {
        let a = Image::<u8>::new(6, 4).unwrap();
        let b = Image::<u8>::new(5, 4).unwrap();
        assert!(matches!(ad_cost_volume_gray(a.view(), b.view(), 2, Parallelism::Sequential), Err(Error::SizeMismatch { .. })));
        assert!(matches!(ad_cost_volume_gray(a.view(), a.view(), 0, Parallelism::Sequential), Err(Error::OutOfRange { .. })));
        assert!(matches!(ad_cost_volume_gray(a.view(), a.view(), 7, Parallelism::Sequential), Err(Error::OutOfRange { .. })));
    }
}
