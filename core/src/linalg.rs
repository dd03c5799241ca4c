//! Matrix sum and product for f32 (the warm-up kernels of the OpenCL report). A matrix is
//! an `ImageView<f32>`: width = columns, height = rows, any row stride.
//!
//! The product follows the BLIS blocking (Van Zee and van de Geijn, "BLIS: A Framework for
//! Rapidly Instantiating BLAS Functionality", ACM TOMS 41(3), 2015): `B` is packed once
//! into `NR`-column panels, each thread packs `MC x KC` blocks of its rows of `A` into
//! `MR`-row panels, and a register-blocked micro-kernel accumulates an `MR x NR` tile of
//! `C` over `KC` with fused multiply-adds: 14 x 32 on AVX-512 (28 accumulator registers),
//! 6 x 16 on AVX2 + FMA (12), 6 x 16 portable. Rayon splits `C` into row bands.

use crate::error::{Error, Result};
use crate::cpu::Level;
use crate::fma::{dispatch, F32Vec};
use crate::image::{check_same_size, ImageView, ImageViewMut};
use crate::parallel::{for_each_band, Parallelism};
use alloc::vec;
use alloc::vec::Vec;
use crate::cpu::multiversion;

/// Depth of one packed block (`KC`): an `MR x KC` A panel and a `KC x NR` B panel fit L1.
const KC: usize = 256;
/// Rows of `A` packed per block (`MC`, a multiple of every `MR`): the block fits L2.
const MC: usize = 168;
/// Largest micro-tile (for the edge scratch): 14 x 32.
const MAX_TILE: usize = 14 * 32;

multiversion! {
    fn add_row(a: &[f32], b: &[f32], out: &mut [f32]) {
        for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
            *o = x + y;
        }
    }
}

/// `out = a + b`, element-wise; all three the same size (else [`Error::SizeMismatch`]).
/// Each element is the f32 sum, rounded once.
pub fn mat_add(a: ImageView<'_, f32>, b: ImageView<'_, f32>, out: ImageViewMut<'_, f32>, par: Parallelism) -> Result<()> {
    check_same_size(a.size(), b.size())?;
    check_same_size(a.size(), out.size())?;
    for_each_band(out, par, 64, |y0, mut band| {
        for y in 0..band.height() {
            add_row(a.row(y0 + y), b.row(y0 + y), band.row_mut(y));
        }
    });
    Ok(())
}

/// `out = a * b`: `out(j, i) = sum_p a(p, i) * b(j, p)` (column, row), for `a` with `k`
/// columns and `m` rows, `b` with `n` columns and `k` rows, `out` `n x m`. Accumulated in
/// f32 with fused multiply-adds, in blocks of 256 terms (error below `k * 2^-24` times
/// `sum_p |a b|`; tested against a float64 product within 1e-4 relative).
/// Errors: `a`'s width differs from `b`'s height, or `out` is not `b.width() x a.height()`
/// ([`Error::SizeMismatch`]).
pub fn mat_mul(a: ImageView<'_, f32>, b: ImageView<'_, f32>, out: ImageViewMut<'_, f32>, par: Parallelism) -> Result<()> {
    mat_mul_at(a, b, out, par, crate::cpu::level())
}

/// [`mat_mul`] with the micro-kernel of a given instruction-set level (a level the CPU
/// lacks falls back to the best it has): for tests comparing every variant.
pub fn mat_mul_at(
    a: ImageView<'_, f32>,
    b: ImageView<'_, f32>,
    out: ImageViewMut<'_, f32>,
    par: Parallelism,
    level: Level,
) -> Result<()> {
    if a.width() != b.height() {
        return Err(Error::SizeMismatch { expected: (b.width(), a.width()), got: b.size() });
    }
    check_same_size((b.width(), a.height()), out.size())?;
    let (mr, nr) = tile(level);
    let packed_b = pack_b(&b, nr, par)?;
    let k = a.width();
    for_each_band(out, par, mr, |y0, mut band| {
        let mut packed_a = vec![0.0f32; MC * KC];
        let rows = band.height();
        for pc in (0..k).step_by(KC) {
            let kc = KC.min(k - pc);
            for ic in (0..rows).step_by(MC) {
                let mc = MC.min(rows - ic);
                pack_a(&a, y0 + ic, mc, pc, kc, mr, &mut packed_a);
                let blk = Block { a: &packed_a, b: &packed_b, k, pc, kc, mc, accumulate: pc > 0 };
                block(level, &blk, &mut band, ic);
            }
        }
    });
    Ok(())
}

/// `(MR, NR)` of the micro-kernel at `level`.
fn tile(level: Level) -> (usize, usize) {
    fn shape<V: F32Vec>() -> (usize, usize) {
        ((V::REGISTERS - 3) / 2, 2 * V::LANES)
    }
    #[cfg(target_arch = "x86_64")]
    {
        match crate::cpu::capped(level) {
            Level::Avx512 => return shape::<crate::fma::Avx512>(),
            Level::Avx2 => return shape::<crate::fma::Avx2>(),
            Level::Portable => {}
        }
    }
    let _ = level;
    shape::<crate::fma::Portable>()
}

/// `b` packed as `NR`-column panels: panel `j` holds, for each row `p < k`, columns
/// `j NR .. j NR + NR` (zero beyond `n`) at `(j k + p) NR`. Panels are packed in parallel
/// (one "row" of a view each), so the packing is not a serial fraction of the product.
fn pack_b(b: &ImageView<'_, f32>, nr: usize, par: Parallelism) -> Result<Vec<f32>> {
    let (n, k) = b.size();
    let panels = n.div_ceil(nr);
    let mut out = crate::error::try_filled(panels.saturating_mul(k).saturating_mul(nr), 0.0f32)?;
    let view = ImageViewMut::from_slice(&mut out, k * nr, panels)?;
    for_each_band(view, par, 4, |j0, mut band| {
        for jj in 0..band.height() {
            let c0 = (j0 + jj) * nr;
            let len = nr.min(n - c0);
            let panel = band.row_mut(jj);
            for p in 0..k {
                panel[p * nr..p * nr + len].copy_from_slice(&b.row(p)[c0..c0 + len]);
            }
        }
    });
    Ok(out)
}

/// Rows `r0 .. r0 + mc`, columns `pc .. pc + kc` of `a` as `MR`-row panels: panel `i` holds,
/// for each `p < kc`, rows `i MR .. i MR + MR` (zero beyond `mc`) at `(i kc + p) MR`.
fn pack_a(a: &ImageView<'_, f32>, r0: usize, mc: usize, pc: usize, kc: usize, mr: usize, out: &mut [f32]) {
    for i in 0..mc.div_ceil(mr) {
        let panel = &mut out[i * kc * mr..(i + 1) * kc * mr];
        for ii in 0..mr {
            let r = i * mr + ii;
            if r < mc {
                let row = &a.row(r0 + r)[pc..pc + kc];
                for (p, &v) in row.iter().enumerate() {
                    panel[p * mr + ii] = v;
                }
            } else {
                for p in 0..kc {
                    panel[p * mr + ii] = 0.0;
                }
            }
        }
    }
}

/// One packed `mc x kc` block of `A` against all of `B`'s panels at depth `pc`.
struct Block<'a> {
    a: &'a [f32],
    b: &'a [f32],
    k: usize,
    pc: usize,
    kc: usize,
    mc: usize,
    /// Add to `C` (a later depth block) rather than overwrite it.
    accumulate: bool,
}

/// Runs the micro-kernel over the block's tiles: rows `ic .. ic + mc` of the band.
#[inline(always)]
fn block_kernel<V: F32Vec>(blk: &Block<'_>, band: &mut ImageViewMut<'_, f32>, ic: usize) {
    let (mr, nr) = ((V::REGISTERS - 3) / 2, 2 * V::LANES);
    let n = band.width();
    let mut edge = [0.0f32; MAX_TILE];
    for j in 0..n.div_ceil(nr) {
        let bp = &blk.b[(j * blk.k + blk.pc) * nr..(j * blk.k + blk.pc + blk.kc) * nr];
        let cols = nr.min(n - j * nr);
        for i in 0..blk.mc.div_ceil(mr) {
            let ap = &blk.a[i * blk.kc * mr..(i + 1) * blk.kc * mr];
            let rows = mr.min(blk.mc - i * mr);
            let acc = micro_tile::<V>(ap, bp, blk.kc);
            let y = ic + i * mr;
            if rows == mr && cols == nr {
                for (r, accr) in acc.iter().enumerate().take(mr) {
                    let c = &mut band.row_mut(y + r)[j * nr..j * nr + nr];
                    for (h, v) in accr.iter().enumerate() {
                        // SAFETY: c has nr = 2 LANES elements.
                        let p = unsafe { c.as_mut_ptr().add(h * V::LANES) };
                        let v = if blk.accumulate { unsafe { V::load(p) }.add(*v) } else { *v };
                        unsafe { v.store(p) };
                    }
                }
            } else {
                for (r, accr) in acc.iter().enumerate().take(rows) {
                    for (h, v) in accr.iter().enumerate() {
                        // SAFETY: edge holds MAX_TILE >= nr elements.
                        unsafe { v.store(edge.as_mut_ptr().add(h * V::LANES)) };
                    }
                    let c = &mut band.row_mut(y + r)[j * nr..j * nr + cols];
                    for (o, &v) in c.iter_mut().zip(&edge[..cols]) {
                        *o = if blk.accumulate { *o + v } else { v };
                    }
                }
            }
        }
    }
}
dispatch!(fn block(blk: &Block<'_>, band: &mut ImageViewMut<'_, f32>, ic: usize) => block_kernel);

/// The `MR x NR` micro-kernel: `acc[r][h] = sum_p a[p MR + r] * b[p NR + h LANES ..]`,
/// 2 MR accumulator registers, one broadcast of `a` and two loads of `b` per step.
#[inline(always)]
fn micro_tile<V: F32Vec>(ap: &[f32], bp: &[f32], kc: usize) -> [[V; 2]; 14] {
    let (mr, nr) = ((V::REGISTERS - 3) / 2, 2 * V::LANES);
    let mut acc = [[V::splat(0.0); 2]; 14];
    let (ap, bp) = (&ap[..kc * mr], &bp[..kc * nr]);
    for p in 0..kc {
        // SAFETY: p < kc, so p nr + 2 LANES <= kc nr = bp.len().
        let (b0, b1) = unsafe { (V::load(bp.as_ptr().add(p * nr)), V::load(bp.as_ptr().add(p * nr + V::LANES))) };
        let a = &ap[p * mr..p * mr + mr];
        for (r, accr) in acc.iter_mut().enumerate().take(mr) {
            let ar = V::splat(a[r]);
            accr[0] = ar.mul_add(b0, accr[0]);
            accr[1] = ar.mul_add(b1, accr[1]);
        }
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::Image;
    use proptest::prelude::*;

    fn naive(a: &ImageView<'_, f32>, b: &ImageView<'_, f32>) -> Vec<f64> {
        let (k, m, n) = (a.width(), a.height(), b.width());
        let mut c = vec![0.0f64; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k).map(|p| a.get(p, i).unwrap() as f64 * b.get(j, p).unwrap() as f64).sum();
            }
        }
        c
    }

    fn filled(h: usize, stride: usize, seed: u64) -> Vec<f32> {
        let v = crate::filter::gaussian::tests::noise(stride * h, seed);
        v.iter().map(|x| (*x * 2.0 - 1.0) as f32).collect()
    }

    /// Checks `got` against the f64 product: |error| <= 1e-4 * sum_p |a b| (relative to
    /// the magnitude of the terms, the meaningful scale when terms cancel).
    fn check(a: ImageView<'_, f32>, b: ImageView<'_, f32>, got: &Image<f32>) -> core::result::Result<(), TestCaseError> {
        let want = naive(&a, &b);
        let (k, n) = (a.width(), b.width());
        for i in 0..a.height() {
            for j in 0..n {
                let scale: f64 = (0..k).map(|p| (a.get(p, i).unwrap() as f64 * b.get(j, p).unwrap() as f64).abs()).sum();
                let g = got.at(j, i) as f64;
                prop_assert!((g - want[i * n + j]).abs() <= 1e-4 * scale.max(1e-30), "({j}, {i}): {g} vs {}", want[i * n + j]);
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        #[test]
        fn product_matches_float64(
            m in 1usize..40, k in 1usize..300, n in 1usize..70,
            pad_a in 0usize..3, pad_b in 0usize..3, seed in any::<u64>(), par in any::<bool>(),
        ) {
            let da = filled(m, k + pad_a, seed);
            let db = filled(k, n + pad_b, seed ^ 1);
            let a = ImageView::new(&da, k, m, k + pad_a).unwrap();
            let b = ImageView::new(&db, n, k, n + pad_b).unwrap();
            let par = if par { Parallelism::AllThreads } else { Parallelism::Sequential };
            for level in Level::available() {
                let mut c = Image::<f32>::new(n, m).unwrap();
                mat_mul_at(a, b, c.view_mut(), par, level).unwrap();
                check(a, b, &c)?;
            }
        }

        #[test]
        fn sum_matches(w in 1usize..90, h in 1usize..20, pad in 0usize..3, seed in any::<u64>()) {
            let da = filled(h, w + pad, seed);
            let db = filled(h, w, seed ^ 7);
            let a = ImageView::new(&da, w, h, w + pad).unwrap();
            let b = ImageView::from_slice(&db, w, h).unwrap();
            let mut c = Image::<f32>::new(w, h).unwrap();
            mat_add(a, b, c.view_mut(), Parallelism::AllThreads).unwrap();
            for y in 0..h {
                for x in 0..w {
                    prop_assert_eq!(c.at(x, y), a.get(x, y).unwrap() + b.get(x, y).unwrap());
                }
            }
        }
    }

    #[test]
    fn sum_matches_at_every_level() {
        let (w, h) = (83, 5);
        let (da, db) = (filled(h, w + 2, 3), filled(h, w, 4));
        let a = ImageView::new(&da, w, h, w + 2).unwrap();
        let b = ImageView::from_slice(&db, w, h).unwrap();
        crate::testing::at_every_level(|_| {
            let mut c = Image::<f32>::new(w, h).unwrap();
            mat_add(a, b, c.view_mut(), Parallelism::Sequential).unwrap();
            for y in 0..h {
                for x in 0..w {
                    assert_eq!(c.at(x, y), a.get(x, y).unwrap() + b.get(x, y).unwrap(), "({x}, {y})");
                }
            }
        });
    }

    #[test]
    fn large_product_with_several_depth_blocks() {
        // k = 600 crosses two KC boundaries; m = 200 two MC blocks; n = 75 a partial panel.
        let (m, k, n) = (200, 600, 75);
        let da = filled(m, k, 3);
        let db = filled(k, n, 4);
        let a = ImageView::from_slice(&da, k, m).unwrap();
        let b = ImageView::from_slice(&db, n, k).unwrap();
        for level in Level::available() {
            let mut c = Image::<f32>::new(n, m).unwrap();
            mat_mul_at(a, b, c.view_mut(), Parallelism::AllThreads, level).unwrap();
            check(a, b, &c).unwrap();
        }
    }

    #[test]
    fn inner_dimension_mismatch_is_an_error() {
        let a = Image::<f32>::new(3, 2).unwrap();
        let b = Image::<f32>::new(4, 5).unwrap();
        let mut c = Image::<f32>::new(4, 2).unwrap();
        let e = mat_mul(a.view(), b.view(), c.view_mut(), Parallelism::Sequential);
        assert!(matches!(e, Err(Error::SizeMismatch { .. })), "{e:?}");
    }

    #[test]
    fn wrong_output_size_is_an_error() {
        let a = Image::<f32>::new(3, 2).unwrap();
        let b = Image::<f32>::new(4, 3).unwrap();
        for (w, h) in [(2, 4), (4, 3), (3, 2)] {
            let mut c = Image::<f32>::new(w, h).unwrap();
            let e = mat_mul(a.view(), b.view(), c.view_mut(), Parallelism::Sequential);
            assert!(matches!(e, Err(Error::SizeMismatch { .. })), "{w}x{h}: {e:?}");
        }
        let mut c = Image::<f32>::new(4, 2).unwrap();
        assert!(mat_mul(a.view(), b.view(), c.view_mut(), Parallelism::Sequential).is_ok());
    }

    #[test]
    fn sum_size_mismatch_is_an_error() {
        let a = Image::<f32>::new(3, 2).unwrap();
        let b = Image::<f32>::new(3, 3).unwrap();
        let mut c = Image::<f32>::new(3, 2).unwrap();
        assert!(matches!(mat_add(a.view(), b.view(), c.view_mut(), Parallelism::Sequential), Err(Error::SizeMismatch { .. })));
        let b = Image::<f32>::new(3, 2).unwrap();
        let mut c = Image::<f32>::new(2, 3).unwrap();
        assert!(matches!(mat_add(a.view(), b.view(), c.view_mut(), Parallelism::Sequential), Err(Error::SizeMismatch { .. })));
    }
}
