//! The box kernel for `Pairwise` and `Threewise`: O(log N) merges per sample, as the tent.
//!
//! The window of `N = 2r + 1` samples is written in base `B` (2 for `Pairwise`, 3 for
//! `Threewise`), `N = sum_j d_j B^j`. Blocks of `B^j` samples are built level by level, each
//! from `B` adjacent blocks of the level below by an equal-weight merge (Chan et al.'s
//! pairwise merge for `B = 2`; the three-way merge of [`threewise`](super::threewise) with
//! weights 1, 1, 1 for `B = 3`), and the window joins `d_j` blocks of each level, left to
//! right, by weighted pairwise merges:
//!
//! ```text
//! m = w_a m_a + w_b m_b,   v = w_a v_a + w_b v_b + w_a w_b (m_a - m_b)^2,   w_a + w_b = 1
//! ```
//!
//! (the merge of two groups of `n_a` and `n_b` samples, `w_a = n_a / (n_a + n_b)`, on
//! variances `v = M2 / n`). At most `(B - 1) log_B N` joins and `log_B N` levels per sample.

use crate::cpu::multiversion;

/// One 1-D box pass (see [`super::LinePass`]) of `2r + 1` samples in base `BASE`: on return
/// the first `(n - 2r) * lanes` entries of `m`, `v` hold the statistics of the window
/// `[pos, pos + 2r]`, centred at `pos + r`.
pub(crate) fn box_pass<const BASE: usize>(s: &mut super::LineStats, n: usize, lanes: usize, r: usize) {
    let super::LineStats { m, v, tm, tv } = s;
    let total = 2 * r + 1;
    // `m`, `v`: the current level, blocks of `width` samples at every position that fits;
    // `tm`, `tv`: the window so far, `joined` samples from every position that fits.
    let (mut width, mut joined, mut rest) = (1, 0, total);
    loop {
        for _ in 0..rest % BASE {
            let out = (n - joined - width + 1) * lanes;
            let at = joined * lanes;
            if joined == 0 {
                tm[..out].copy_from_slice(&m[..out]);
                tv[..out].copy_from_slice(&v[..out]);
            } else {
                let wa = joined as f32 / (joined + width) as f32;
                join(&mut tm[..out], &mut tv[..out], &m[at..at + out], &v[at..at + out], wa, 1.0 - wa);
            }
            joined += width;
        }
        rest /= BASE;
        if rest == 0 {
            break;
        }
        let len = (n - BASE * width + 1) * lanes;
        next_level::<BASE>(m, v, width * lanes, len);
        width *= BASE;
    }
    core::mem::swap(m, tm);
    core::mem::swap(v, tv);
}

multiversion! {
    /// `(a, va) <- merge(a, b)` with weights `wa`, `wb` (module docs).
    fn join(am: &mut [f32], av: &mut [f32], bm: &[f32], bv: &[f32], wa: f32, wb: f32) {
        let n = am.len().min(av.len()).min(bm.len()).min(bv.len());
        let wab = wa * wb;
        for i in 0..n {
            let d = am[i] - bm[i];
            am[i] = wa * am[i] + wb * bm[i];
            av[i] = wa * av[i] + wb * bv[i] + wab * d * d;
        }
    }
}

multiversion! {
    /// In place, for `i` in `0..len`: the equal-weight merge of the `BASE` blocks at `i`,
    /// `i + off`, ... Ascending `i` reads only entries not yet overwritten; chunks of 16 are
    /// read whole before they are written, so the loop vectorizes even when `off` is smaller
    /// than a vector (the compiler's own alias check would fall back to scalar code there).
    fn next_level<const BASE: usize>(m: &mut [f32], v: &mut [f32], off: usize, len: usize) {
        const C: usize = 16;
        // Every block read lies below `len + (BASE - 1) off` (the caller's level arithmetic).
        let end = len + (BASE - 1) * off;
        let (m, v) = (&mut m[..end], &mut v[..end]);
        let load = |s: &[f32], at: usize| -> [f32; C] { s[at..at + C].try_into().unwrap_or([0.0; C]) };
        let mut i = 0;
        while i < len {
            let c = C.min(len - i);
            let (mut om, mut ov) = ([0.0f32; C], [0.0f32; C]);
            if c == C {
                let (ma, mb, va, vb) = (load(m, i), load(m, i + off), load(v, i), load(v, i + off));
                if BASE == 2 {
                    for k in 0..C {
                        let d = ma[k] - mb[k];
                        om[k] = 0.5 * (ma[k] + mb[k]);
                        ov[k] = 0.5 * (va[k] + vb[k]) + 0.25 * d * d;
                    }
                } else {
                    let (mc, vc) = (load(m, i + 2 * off), load(v, i + 2 * off));
                    for k in 0..C {
                        let (dab, dac, dbc) = (ma[k] - mb[k], ma[k] - mc[k], mb[k] - mc[k]);
                        om[k] = (ma[k] + mb[k] + mc[k]) * (1.0 / 3.0);
                        ov[k] = (va[k] + vb[k] + vc[k]) * (1.0 / 3.0) + (dab * dab + dac * dac + dbc * dbc) * (1.0 / 9.0);
                    }
                }
            } else {
                for k in 0..c {
                    let j = i + k;
                    let (a, b, va, vb) = (m[j], m[j + off], v[j], v[j + off]);
                    if BASE == 2 {
                        let d = a - b;
                        (om[k], ov[k]) = (0.5 * (a + b), 0.5 * (va + vb) + 0.25 * d * d);
                    } else {
                        let (cc, vc) = (m[j + 2 * off], v[j + 2 * off]);
                        let (dab, dac, dbc) = (a - b, a - cc, b - cc);
                        om[k] = (a + b + cc) * (1.0 / 3.0);
                        ov[k] = (va + vb + vc) * (1.0 / 3.0) + (dab * dab + dac * dac + dbc * dbc) * (1.0 / 9.0);
                    }
                }
            }
            m[i..i + c].copy_from_slice(&om[..c]);
            v[i..i + c].copy_from_slice(&ov[..c]);
            i += c;
        }
    }
}
