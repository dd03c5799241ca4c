//! `Threewise`: the variance paper's algorithm. The tent of radius `R = 2^k - 1` is, in one
//! dimension, the product of `k` sparse three-tap kernels `(z^-d + 2 + z^d)`,
//! `d = 1, 2, 4, ..., 2^(k-1)`. Each step merges three partial statistics (at `x - d`, `x`,
//! `x + d`) with weights 1, 2, 1; kernel separation runs the `k` steps along rows, then the
//! same `k` steps along columns on the rows' statistics. O(log N) per pixel: `k` merges,
//! `2k + 1` reads per pixel per pass.
//!
//! ## The three-way merge, from first principles
//!
//! Three groups with counts `n_a, n_b, n_c`, means `m_a, m_b, m_c` and sums of squared
//! deviations `M2_a, M2_b, M2_c`, pooled: `n = n_a + n_b + n_c`,
//! `m = (n_a m_a + n_b m_b + n_c m_c) / n`. Splitting each deviation as
//! `x - m = (x - m_g) + (m_g - m)` and noting that `sum_g (x - m_g) = 0` in each group,
//!
//! ```text
//! M2 = M2_a + M2_b + M2_c + sum_g n_g (m_g - m)^2
//! ```
//!
//! and by Lagrange's identity the between-group term is
//! `sum_g n_g (m_g - m)^2 = (n_a n_b (m_a - m_b)^2 + n_a n_c (m_a - m_c)^2 + n_b n_c (m_b - m_c)^2) / n`,
//! a function of the pairwise differences only (with partial sums `S_g = n_g m_g`, each term
//! is `(n_h S_g - n_g S_h)^2 / (n_g n_h n)`, the form of the paper's formula 18). [`merge3`]
//! is this general formula; the tests check it against direct computation.
//!
//! In the tent steps the three groups are one statistic of weight `n0` at `x - d` and
//! `x + d` and one of weight `2 n0` at `x`, so with variances `v = M2 / n`:
//!
//! ```text
//! m = (m_a + 2 m_b + m_c) / 4
//! v = (v_a + 2 v_b + v_c) / 4 + (2 (m_a - m_b)^2 + (m_a - m_c)^2 + 2 (m_b - m_c)^2) / 16
//! ```
//!
//! which needs no counts at all (`merge121`: it is what runs, in f32).

use crate::cpu::multiversion;

/// A partial statistic: weight (count) `n`, mean, and `m2` = sum of squared deviations
/// from the mean.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stats {
    pub n: f64,
    pub mean: f64,
    pub m2: f64,
}

impl Stats {
    /// The statistic of `samples` with weights `weights`, directly (two passes).
    pub fn of(samples: &[f64], weights: &[f64]) -> Stats {
        let n: f64 = weights.iter().sum();
        let mean = samples.iter().zip(weights).map(|(x, w)| x * w).sum::<f64>() / n;
        let m2 = samples.iter().zip(weights).map(|(x, w)| w * (x - mean) * (x - mean)).sum();
        Stats { n, mean, m2 }
    }
}

/// The three-way merge derived in the module docs: the statistic of the union of three
/// groups. An empty union (`n = 0`) gives the default statistic.
pub fn merge3(a: Stats, b: Stats, c: Stats) -> Stats {
    let n = a.n + b.n + c.n;
    if n == 0.0 {
        return Stats::default();
    }
    let mean = (a.n * a.mean + b.n * b.mean + c.n * c.mean) / n;
    let (dab, dac, dbc) = (a.mean - b.mean, a.mean - c.mean, b.mean - c.mean);
    let between = (a.n * b.n * dab * dab + a.n * c.n * dac * dac + b.n * c.n * dbc * dbc) / n;
    Stats { n, mean, m2: a.m2 + b.m2 + c.m2 + between }
}

multiversion! {
    /// The 1-2-1 merge of [`merge3`] with weights `n0, 2 n0, n0`, on (mean, variance) lanes:
    /// `om[i], ov[i]` from `(ma, va)`, `(mb, vb)`, `(mc, vc)` at index `i`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn merge121(om: &mut [f32], ov: &mut [f32], ma: &[f32], mb: &[f32], mc: &[f32], va: &[f32], vb: &[f32], vc: &[f32]) {
        let n = om.len().min(ov.len()).min(ma.len()).min(mb.len()).min(mc.len()).min(va.len()).min(vb.len()).min(vc.len());
        for i in 0..n {
            let (a, b, c) = (ma[i], mb[i], mc[i]);
            let (dab, dac, dbc) = (a - b, a - c, b - c);
            om[i] = 0.25 * (a + c) + 0.5 * b;
            ov[i] = 0.25 * (va[i] + 2.0 * vb[i] + vc[i]) + 0.0625 * (2.0 * dab * dab + dac * dac + 2.0 * dbc * dbc);
        }
    }
}

/// One 1-D tent pass (see [`super::LinePass`]): `k` three-way steps with dilation
/// `d = 2^s`; each shrinks the valid positions by `d` on both sides, `2R` in all.
pub(crate) fn tent_pass(s: &mut super::LineStats, n: usize, lanes: usize, r: usize) {
    let super::LineStats { m, v, tm, tv } = s;
    let mut len = n;
    let mut d = 1;
    while d <= r {
        let out = (len - 2 * d) * lanes;
        let (dl, dl2) = (d * lanes, 2 * d * lanes);
        merge121(
            &mut tm[..out],
            &mut tv[..out],
            &m[..out],
            &m[dl..dl + out],
            &m[dl2..dl2 + out],
            &v[..out],
            &v[dl..dl + out],
            &v[dl2..dl2 + out],
        );
        core::mem::swap(m, tm);
        core::mem::swap(v, tv);
        len -= 2 * d;
        d *= 2;
    }
}
