//! `Koenig`: one pass of the weighted sums of x and x^2, `var = E[x^2] - E[x]^2`
//! (the Koenig-Huygens / Steiner identity), O(N^2) per pixel, in f32 arithmetic.
//!
//! It is the fastest of the O(N^2) methods and the least accurate: both terms are about
//! `mean^2` while their difference is the variance, so the relative error grows like
//! `eps * mean^2 / var` (the variance paper's warning, shown by the tests with values near
//! 10 000). A negative result (pure rounding) is clamped to 0.

use super::usual::{axpy, weights_2d};
use super::{non_negative, per_row, Padded, VarianceKernel};
use crate::error::Result;
use crate::image::ImageViewMut;
use crate::parallel::Parallelism;
use crate::cpu::multiversion;

multiversion! {
    /// `s2[i] += w * x[i]^2`.
    fn add_squares(s2: &mut [f32], x: &[f32], w: f32) {
        for (b, &v) in s2.iter_mut().zip(x) {
            *b += w * v * v;
        }
    }
}

/// `Koenig` on a padded image (see the module docs).
pub fn local_variance(src: &Padded, dst: ImageViewMut<'_, f32>, kernel: VarianceKernel, par: Parallelism) -> Result<()> {
    let w = dst.width();
    let n = 2 * kernel.radius() + 1;
    let (wt, total) = weights_2d(kernel);
    per_row(dst, par, 2, |y, out, scratch| {
        let [s1, s2] = scratch else { return };
        for j in 0..n {
            let row = src.row(y + j);
            for i in 0..n {
                let x = &row[i..i + w];
                axpy(s1, x, wt[j * n + i]);
                add_squares(s2, x, wt[j * n + i]);
            }
        }
        for ((o, &a), &b) in out.iter_mut().zip(s1.iter()).zip(s2.iter()) {
            let m = a / total;
            *o = non_negative(b / total - m * m);
        }
    })
}
