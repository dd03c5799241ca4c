//! `Welford`: the online algorithm (Welford 1962) in its weighted form (West 1979),
//! O(N^2) per pixel, in f32 arithmetic. For each sample `x` of weight `w`, with `W` the
//! weight seen so far including `w`:
//!
//! ```text
//! delta = x - mean;  mean += delta * w / W;  M2 += w * delta * (x - mean)
//! ```
//!
//! and the variance is `M2 / W`. The samples are visited in the same order for every pixel
//! of a row, so `w / W` is one scalar per step and the update runs as vector code across
//! the row.

use super::usual::weights_2d;
use super::{non_negative, per_row, Padded, VarianceKernel};
use crate::error::Result;
use crate::image::ImageViewMut;
use crate::parallel::Parallelism;
use crate::cpu::multiversion;

multiversion! {
    /// One Welford update of every lane with sample `x[i]`, weight `w`, `f = w / W`.
    fn update(mean: &mut [f32], m2: &mut [f32], x: &[f32], w: f32, f: f32) {
        for ((m, s), &v) in mean.iter_mut().zip(m2.iter_mut()).zip(x) {
            let delta = v - *m;
            *m += delta * f;
            *s += w * delta * (v - *m);
        }
    }
}

/// `Welford` on a padded image (see the module docs).
pub fn local_variance(src: &Padded, dst: ImageViewMut<'_, f32>, kernel: VarianceKernel, par: Parallelism) -> Result<()> {
    let w = dst.width();
    let n = 2 * kernel.radius() + 1;
    let (wt, total) = weights_2d(kernel);
    per_row(dst, par, 2, |y, out, scratch| {
        let [mean, m2] = scratch else { return };
        // The running weight in f64: exact (integers below 2^53).
        let mut seen = 0.0f64;
        for j in 0..n {
            let row = src.row(y + j);
            for i in 0..n {
                let wk = wt[j * n + i];
                seen += wk as f64;
                update(mean, m2, &row[i..i + w], wk, (wk as f64 / seen) as f32);
            }
        }
        for (o, &s) in out.iter_mut().zip(m2.iter()) {
            *o = non_negative(s / total);
        }
    })
}
