//! `Usual`: the two-pass local variance, O(N^2) per pixel, in f32 arithmetic.
//!
//! Pass 1 sums `w x` for the weighted mean `m`; pass 2 sums `w d` and `w d^2` with
//! `d = x - m`, and the variance is `(sum w d^2 - (sum w d)^2 / W) / W`. The second term is
//! the correction of Chan, Golub and LeVeque's "corrected two-pass algorithm" (1983): it
//! removes, to first order, the error that the rounded mean leaves in the squared
//! deviations, so the result stays accurate when the mean is large against the spread.
//! Loops run over whole output rows so the inner loops are plain vector code.

use super::{non_negative, per_row, Padded, VarianceKernel};
use crate::error::Result;
use crate::image::ImageViewMut;
use crate::parallel::Parallelism;
use alloc::vec::Vec;
use crate::cpu::multiversion;

multiversion! {
    /// `acc[i] += w * x[i]`.
    pub(crate) fn axpy(acc: &mut [f32], x: &[f32], w: f32) {
        for (a, &v) in acc.iter_mut().zip(x) {
            *a += w * v;
        }
    }
}

multiversion! {
    /// `d = x[i] - m[i]`; `s1[i] += w d`; `s2[i] += w d^2`.
    fn deviations(s1: &mut [f32], s2: &mut [f32], x: &[f32], m: &[f32], w: f32) {
        for (((a, b), &v), &mu) in s1.iter_mut().zip(s2.iter_mut()).zip(x).zip(m) {
            let d = v - mu;
            let wd = w * d;
            *a += wd;
            *b += wd * d;
        }
    }
}

/// The 2-D weights `w(j) w(i)` as f32 (exact: at most 256^2), row-major, and their sum
/// (exact in f32: a power of two for the tent, at most 4095^2 < 2^24 for the box).
pub(crate) fn weights_2d(kernel: VarianceKernel) -> (Vec<f32>, f32) {
    let w1 = kernel.weights_1d();
    let mut out = Vec::with_capacity(w1.len() * w1.len());
    for &a in &w1 {
        for &b in &w1 {
            out.push((a * b) as f32);
        }
    }
    let s: u64 = w1.iter().map(|&v| v as u64).sum();
    (out, (s * s) as f32)
}

/// `Usual` on a padded image (see the module docs).
pub fn local_variance(src: &Padded, dst: ImageViewMut<'_, f32>, kernel: VarianceKernel, par: Parallelism) -> Result<()> {
    let w = dst.width();
    let n = 2 * kernel.radius() + 1;
    let (wt, total) = weights_2d(kernel);
    per_row(dst, par, 3, |y, out, scratch| {
        let [m, s1, s2] = scratch else { return };
        for j in 0..n {
            let row = src.row(y + j);
            for i in 0..n {
                axpy(m, &row[i..i + w], wt[j * n + i]);
            }
        }
        for v in m.iter_mut() {
            *v /= total;
        }
        for j in 0..n {
            let row = src.row(y + j);
            for i in 0..n {
                deviations(s1, s2, &row[i..i + w], m, wt[j * n + i]);
            }
        }
        for ((o, &a), &b) in out.iter_mut().zip(s1.iter()).zip(s2.iter()) {
            *o = non_negative((b - a * a / total) / total);
        }
    })
}
