//! `Pairwise`: Chan, Golub and LeVeque's merge of two partial statistics (1979),
//!
//! ```text
//! n = n_a + n_b,  delta = m_b - m_a,  m = m_a + delta n_b / n,  M2 = M2_a + M2_b + delta^2 n_a n_b / n
//! ```
//!
//! applied with kernel separation and the dilated decomposition of the tent:
//! `(z^-d + 2 + z^d) = z^-d (1 + z^d)^2`, so each of the `k` three-tap steps of
//! [`threewise`](super::threewise) becomes two equal-weight pairwise merges at distance `d`
//! (the first pairs `x` with `x + d`, the second pairs the result at `x - d` with that at
//! `x`, which puts the centre back). O(log N): `2k` merges per pixel per pass.
//!
//! With equal weights and variances `v = M2 / n` the merge needs no counts:
//! `m = (m_a + m_b) / 2`, `v = (v_a + v_b) / 2 + (m_a - m_b)^2 / 4` (`merge11`, what runs).

use super::threewise::Stats;
use crate::cpu::multiversion;

/// Chan et al.'s pairwise merge: the statistic of the union of two groups. An empty union
/// gives the default statistic.
pub fn merge2(a: Stats, b: Stats) -> Stats {
    let n = a.n + b.n;
    if n == 0.0 {
        return Stats::default();
    }
    let delta = b.mean - a.mean;
    Stats { n, mean: a.mean + delta * b.n / n, m2: a.m2 + b.m2 + delta * delta * a.n * b.n / n }
}

multiversion! {
    /// The equal-weight case of [`merge2`] on (mean, variance) lanes.
    pub(crate) fn merge11(om: &mut [f32], ov: &mut [f32], ma: &[f32], mb: &[f32], va: &[f32], vb: &[f32]) {
        let n = om.len().min(ov.len()).min(ma.len()).min(mb.len()).min(va.len()).min(vb.len());
        for i in 0..n {
            let d = ma[i] - mb[i];
            om[i] = 0.5 * (ma[i] + mb[i]);
            ov[i] = 0.5 * (va[i] + vb[i]) + 0.25 * d * d;
        }
    }
}

/// One 1-D tent pass (see [`super::LinePass`]): for each `d = 1, 2, ..., 2^(k-1)`, two
/// pairwise merges at distance `d`; each shrinks the valid positions by `d`, `2R` in all,
/// and output position `p` is centred at input position `p + R`.
pub(crate) fn tent_pass(s: &mut super::LineStats, n: usize, lanes: usize, r: usize) {
    let super::LineStats { m, v, tm, tv } = s;
    let mut len = n;
    let mut d = 1;
    while d <= r {
        for _ in 0..2 {
            let out = (len - d) * lanes;
            let dl = d * lanes;
            merge11(&mut tm[..out], &mut tv[..out], &m[..out], &m[dl..dl + out], &v[..out], &v[dl..dl + out]);
            core::mem::swap(m, tm);
            core::mem::swap(v, tv);
            len -= d;
        }
        d *= 2;
    }
}
