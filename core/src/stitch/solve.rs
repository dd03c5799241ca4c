//! The global solve: positions of many frames from pairwise shift measurements, all
//! together, by robust least squares.
//!
//! Each [`Constraint`] says `position[to] - position[from] = shift` (the convention of
//! [`super::register`]). With more constraints than a spanning tree (a sweep that comes back
//! over a region, a tile grid), the measurements disagree a little, and chaining them along
//! any one path accumulates the error of every pair on it; the least-squares positions
//! spread the disagreement over all pairs instead. One wrong measurement would pull its
//! neighbours with it, so the fit is iteratively reweighted with Huber's weight (a pair whose
//! residual exceeds `scale` counts as `scale / |residual|`): the result is the Huber
//! M-estimate, which follows the consensus and leaves an outlier with a large residual for
//! the caller to reject.
//!
//! Translation only, so x and y separate into two linear systems with the same matrix, the
//! weighted Laplacian of the constraint graph with the anchor held fixed. It is sparse
//! (a handful of constraints per frame) and symmetric positive definite on the anchor's
//! connected component, so conjugate gradients with a diagonal preconditioner solve it in a
//! few hundred cheap iterations for thousands of frames, starting from the caller's guess.

use crate::error::{require_finite, Error, Result};
use alloc::vec;
use alloc::vec::Vec;

/// A measured shift between two frames: `position[to] - position[from] = shift`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Constraint {
    pub from: usize,
    pub to: usize,
    pub shift: (f64, f64),
    /// Relative trust (> 0): 1 for an ordinary pair.
    pub weight: f64,
}

/// The solved positions and each constraint's residual.
#[derive(Clone, Debug, PartialEq)]
pub struct Solution {
    /// `None` for a frame no chain of constraints connects to the anchor.
    pub positions: Vec<Option<(f64, f64)>>,
    /// Per constraint, in pixels: `|position[to] - position[from] - shift|`.
    pub residuals: Vec<f64>,
}

/// Reweighting rounds at most; the Huber estimate settles in a few.
const ROUNDS: usize = 20;

/// Solves for `frames` positions with frame `anchor` held at `at`, from `constraints`,
/// starting from `guess` (per frame; `None` or a frame outside the anchor's component starts
/// at the anchor's position). `scale` (pixels, > 0) is the residual beyond which a constraint
/// is down-weighted. Errors: an anchor or constraint index out of range, a non-finite shift
/// or guess, a weight that is not finite and positive, a constraint of a frame with itself.
pub fn solve(frames: usize, anchor: usize, at: (f64, f64), constraints: &[Constraint], guess: &[Option<(f64, f64)>], scale: f64) -> Result<Solution> {
    crate::error::require_range("anchor", anchor, 0, frames as i64 - 1)?;
    crate::error::require_positive("robust scale", scale)?;
    require_finite("anchor position", at.0)?;
    require_finite("anchor position", at.1)?;
    if guess.len() != frames {
        return Err(Error::InvalidParameter { name: "guess", reason: alloc::format!("{} positions for {frames} frames", guess.len()) });
    }
    for c in constraints {
        crate::error::require_range("constraint frame", c.from, 0, frames as i64 - 1)?;
        crate::error::require_range("constraint frame", c.to, 0, frames as i64 - 1)?;
        if c.from == c.to {
            return Err(Error::InvalidParameter { name: "constraints", reason: alloc::format!("frame {} constrained to itself", c.from) });
        }
        require_finite("constraint shift", c.shift.0)?;
        require_finite("constraint shift", c.shift.1)?;
        crate::error::require_positive("constraint weight", c.weight)?;
    }
    for g in guess.iter().flatten() {
        require_finite("guess", g.0)?;
        require_finite("guess", g.1)?;
    }
    let connected = component(frames, anchor, constraints);
    let live: Vec<&Constraint> = constraints.iter().filter(|c| connected[c.from]).collect();
    let mut x: Vec<(f64, f64)> = (0..frames).map(|i| if connected[i] { guess[i].unwrap_or(at) } else { at }).collect();
    x[anchor] = at;
    let mut weights: Vec<f64> = live.iter().map(|c| c.weight).collect();
    for _ in 0..ROUNDS {
        let before = x.clone();
        for axis in 0..2 {
            let pick = |p: (f64, f64)| if axis == 0 { p.0 } else { p.1 };
            let mut v: Vec<f64> = x.iter().map(|&p| pick(p)).collect();
            conjugate_gradients(&live, &weights, anchor, &connected, &mut v, |c| pick(c.shift));
            for (p, vi) in x.iter_mut().zip(v) {
                if axis == 0 { p.0 = vi } else { p.1 = vi }
            }
        }
        // Huber's weights from the new residuals.
        for (w, c) in weights.iter_mut().zip(&live) {
            let r = residual(&x, c);
            *w = c.weight * if r <= scale { 1.0 } else { scale / r };
        }
        let moved = x.iter().zip(&before).map(|(a, b)| libm::hypot(a.0 - b.0, a.1 - b.1)).fold(0.0, f64::max);
        if moved < 1e-6 {
            break;
        }
    }
    let residuals = constraints.iter().map(|c| if connected[c.from] { residual(&x, c) } else { 0.0 }).collect();
    let positions = x.into_iter().zip(&connected).map(|(p, &c)| c.then_some(p)).collect();
    Ok(Solution { positions, residuals })
}

fn residual(x: &[(f64, f64)], c: &Constraint) -> f64 {
    let (a, b) = (x[c.from], x[c.to]);
    libm::hypot(b.0 - a.0 - c.shift.0, b.1 - a.1 - c.shift.1)
}

/// The frames connected to `anchor` through constraints.
fn component(frames: usize, anchor: usize, constraints: &[Constraint]) -> Vec<bool> {
    let mut neighbours: Vec<Vec<usize>> = vec![Vec::new(); frames];
    for c in constraints {
        neighbours[c.from].push(c.to);
        neighbours[c.to].push(c.from);
    }
    let mut seen = vec![false; frames];
    let mut stack = vec![anchor];
    seen[anchor] = true;
    while let Some(i) = stack.pop() {
        for &j in &neighbours[i] {
            if !seen[j] {
                seen[j] = true;
                stack.push(j);
            }
        }
    }
    seen
}

/// One axis of the weighted least squares, min sum w (v[to] - v[from] - d)^2 with
/// v[anchor] fixed: the normal equations L v = b over the free frames of the component,
/// by Jacobi-preconditioned conjugate gradients from the current `v`.
fn conjugate_gradients(live: &[&Constraint], weights: &[f64], anchor: usize, connected: &[bool], v: &mut [f64], d: impl Fn(&Constraint) -> f64) {
    let n = v.len();
    let free = |i: usize| i != anchor && connected[i];
    // L p (rows of fixed frames zero), from the constraint list.
    let apply = |p: &[f64], out: &mut [f64]| {
        out.iter_mut().for_each(|o| *o = 0.0);
        for (c, &w) in live.iter().zip(weights) {
            let diff = w * (p[c.to] - p[c.from]);
            if free(c.to) {
                out[c.to] += diff;
            }
            if free(c.from) {
                out[c.from] -= diff;
            }
        }
    };
    let mut diag = vec![0.0; n];
    let mut b = vec![0.0; n];
    for (c, &w) in live.iter().zip(weights) {
        diag[c.to] += w;
        diag[c.from] += w;
        b[c.to] += w * d(c);
        b[c.from] -= w * d(c);
    }
    // Residual of the normal equations at the start: r = b - L v (the anchor's value enters
    // through L v; its own row is not an unknown).
    let mut lv = vec![0.0; n];
    apply(v, &mut lv);
    let mut r: Vec<f64> = (0..n).map(|i| if free(i) { b[i] - lv[i] } else { 0.0 }).collect();
    let precondition = |r: &[f64], z: &mut [f64]| {
        for i in 0..n {
            z[i] = if free(i) && diag[i] > 0.0 { r[i] / diag[i] } else { 0.0 };
        }
    };
    let mut z = vec![0.0; n];
    precondition(&r, &mut z);
    let mut p = z.clone();
    let mut rz: f64 = r.iter().zip(&z).map(|(a, b)| a * b).sum();
    let norm_b = b.iter().enumerate().filter(|&(i, _)| free(i)).map(|(_, x)| x * x).sum::<f64>().max(1.0);
    let mut q = vec![0.0; n];
    // Exact arithmetic would finish in (free frames) steps; the cap only guards rounding.
    for _ in 0..(2 * n + 10) {
        if r.iter().map(|x| x * x).sum::<f64>() <= 1e-24 * norm_b {
            break;
        }
        apply(&p, &mut q);
        let pq: f64 = p.iter().zip(&q).map(|(a, b)| a * b).sum();
        if pq <= 0.0 {
            break;
        }
        let alpha = rz / pq;
        for i in 0..n {
            v[i] += alpha * p[i];
            r[i] -= alpha * q[i];
        }
        precondition(&r, &mut z);
        let rz_next: f64 = r.iter().zip(&z).map(|(a, b)| a * b).sum();
        let beta = rz_next / rz;
        rz = rz_next;
        for i in 0..n {
            p[i] = z[i] + beta * p[i];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stitch::SplitMix64;

    fn c(from: usize, to: usize, shift: (f64, f64)) -> Constraint {
        Constraint { from, to, shift, weight: 1.0 }
    }

    /// A dense float64 least-squares reference: normal equations by Gaussian elimination.
    fn reference(frames: usize, anchor: usize, cs: &[Constraint], weights: &[f64]) -> Vec<(f64, f64)> {
        let idx: Vec<usize> = (0..frames).filter(|&i| i != anchor).collect();
        let m = idx.len();
        let pos = |i: usize| idx.iter().position(|&j| j == i);
        let mut out = vec![(0.0, 0.0); frames];
        for axis in 0..2 {
            let mut a = vec![vec![0.0; m + 1]; m];
            for (k, cst) in cs.iter().enumerate() {
                let d = if axis == 0 { cst.shift.0 } else { cst.shift.1 };
                let w = weights[k];
                // residual v[to] - v[from] - d
                let terms = [(cst.to, 1.0), (cst.from, -1.0)];
                for &(i, si) in &terms {
                    let Some(pi) = pos(i) else { continue };
                    for &(j, sj) in &terms {
                        if let Some(pj) = pos(j) {
                            a[pi][pj] += w * si * sj;
                        }
                    }
                    a[pi][m] += w * si * d;
                }
            }
            for col in 0..m {
                let piv = (col..m).max_by(|&x, &y| a[x][col].abs().partial_cmp(&a[y][col].abs()).unwrap()).unwrap();
                a.swap(col, piv);
                for row in 0..m {
                    if row != col {
                        let f = a[row][col] / a[col][col];
                        for k in col..=m {
                            a[row][k] -= f * a[col][k];
                        }
                    }
                }
            }
            for (k, &i) in idx.iter().enumerate() {
                let v = a[k][m] / a[k][k];
                if axis == 0 { out[i].0 = v } else { out[i].1 = v }
            }
        }
        out
    }

    #[test]
    fn a_tree_is_fitted_exactly_and_matches_chaining() {
        let cs = [c(0, 1, (3.0, -1.0)), c(1, 2, (2.5, 0.5)), c(1, 3, (-4.0, 2.0))];
        let s = solve(4, 0, (0.0, 0.0), &cs, &[None; 4], 0.5).unwrap();
        let want = [(0.0, 0.0), (3.0, -1.0), (5.5, -0.5), (-1.0, 1.0)];
        for (got, want) in s.positions.iter().zip(want) {
            let g = got.unwrap();
            assert!((g.0 - want.0).abs() < 1e-9 && (g.1 - want.1).abs() < 1e-9, "{g:?} vs {want:?}");
        }
        assert!(s.residuals.iter().all(|&r| r < 1e-9));
    }

    #[test]
    fn random_graphs_match_the_dense_reference() {
        let mut rng = SplitMix64::new(7);
        for trial in 0..20 {
            let n = 5 + trial;
            let truth: Vec<(f64, f64)> = (0..n).map(|_| (rng.uniform() * 100.0, rng.uniform() * 100.0)).collect();
            let mut cs = Vec::new();
            for i in 1..n {
                let j = (rng.next_u64() as usize) % i;
                cs.push(c(j, i, (truth[i].0 - truth[j].0 + 0.3 * rng.normal(), truth[i].1 - truth[j].1 + 0.3 * rng.normal())));
            }
            for _ in 0..n {
                let (a, b) = ((rng.next_u64() as usize) % n, (rng.next_u64() as usize) % n);
                if a != b {
                    cs.push(Constraint { from: a, to: b, shift: (truth[b].0 - truth[a].0 + 0.3 * rng.normal(), truth[b].1 - truth[a].1 + 0.3 * rng.normal()), weight: 0.5 + rng.uniform() });
                }
            }
            // A scale larger than every residual: plain weighted least squares.
            let s = solve(n, 0, truth[0], &cs, &[None; 64][..n], 1e6).unwrap();
            let weights: Vec<f64> = cs.iter().map(|c| c.weight).collect();
            let want = reference(n, 0, &cs, &weights);
            for (i, (got, w)) in s.positions.iter().zip(&want).enumerate().skip(1) {
                let g = got.unwrap();
                let w = (w.0 + truth[0].0, w.1 + truth[0].1);
                assert!((g.0 - w.0).abs() < 1e-6 && (g.1 - w.1).abs() < 1e-6, "trial {trial} frame {i}: {g:?} vs {w:?}");
            }
        }
    }

    #[test]
    fn an_outlier_is_left_with_its_residual_and_the_consensus_holds() {
        // A ring of 12 frames 10 px apart around a square, measured with small noise, one
        // measurement wrong by 15 px.
        let truth: Vec<(f64, f64)> = (0..12).map(|i| ((i as f64 * 0.5236).cos() * 40.0, (i as f64 * 0.5236).sin() * 40.0)).collect();
        let mut rng = SplitMix64::new(3);
        let mut cs: Vec<Constraint> = (0..12)
            .map(|i| {
                let j = (i + 1) % 12;
                c(i, j, (truth[j].0 - truth[i].0 + 0.05 * rng.normal(), truth[j].1 - truth[i].1 + 0.05 * rng.normal()))
            })
            .collect();
        for i in 0..12 {
            let j = (i + 2) % 12;
            cs.push(c(i, j, (truth[j].0 - truth[i].0 + 0.05 * rng.normal(), truth[j].1 - truth[i].1 + 0.05 * rng.normal())));
        }
        cs[5].shift.0 += 15.0;
        let s = solve(12, 0, truth[0], &cs, &[None; 12], 0.5).unwrap();
        for (i, p) in s.positions.iter().enumerate() {
            let p = p.unwrap();
            assert!(libm::hypot(p.0 - truth[i].0, p.1 - truth[i].1) < 0.6, "frame {i}: {p:?} vs {:?}", truth[i]);
        }
        assert!(s.residuals[5] > 10.0);
        assert!(s.residuals.iter().enumerate().all(|(k, &r)| k == 5 || r < 1.5), "{:?}", s.residuals);
    }

    #[test]
    fn a_long_chain_converges_and_a_loop_spreads_its_error() {
        // 2000 frames on a line, each step measured 0.01 px long, closed by one constraint
        // from the last frame back to the first that says where it really is.
        let n = 2000;
        let mut cs: Vec<Constraint> = (1..n).map(|i| c(i - 1, i, (1.01, 0.0))).collect();
        cs.push(c(0, n - 1, ((n - 1) as f64, 0.0)));
        let chained: Vec<Option<(f64, f64)>> = (0..n).map(|i| Some((1.01 * i as f64, 0.0))).collect();
        let s = solve(n, 0, (0.0, 0.0), &cs, &chained, 1e6).unwrap();
        // The 19.99 px of disagreement spread over the n edges of the cycle.
        let last = s.positions[n - 1].unwrap().0;
        let residual_per_edge = 0.01 * (n - 1) as f64 / n as f64;
        for (k, r) in s.residuals.iter().enumerate() {
            assert!((r - residual_per_edge).abs() < 1e-6, "constraint {k}: {r}");
        }
        assert!((last - ((n - 1) as f64 * 1.01 - residual_per_edge * (n - 1) as f64)).abs() < 1e-6, "{last}");
    }

    #[test]
    fn unconnected_frames_have_no_position_and_bad_input_is_an_error() {
        let cs = [c(0, 1, (1.0, 0.0)), c(2, 3, (1.0, 0.0))];
        let s = solve(4, 0, (5.0, 5.0), &cs, &[None; 4], 0.5).unwrap();
        assert_eq!(s.positions, alloc::vec![Some((5.0, 5.0)), Some((6.0, 5.0)), None, None]);
        let none = [None; 4];
        assert!(solve(4, 4, (0.0, 0.0), &cs, &none, 0.5).is_err());
        assert!(solve(4, 0, (0.0, 0.0), &cs, &none, 0.0).is_err());
        assert!(solve(4, 0, (f64::NAN, 0.0), &cs, &none, 0.5).is_err());
        assert!(solve(4, 0, (0.0, 0.0), &cs, &none[..3], 0.5).is_err());
        for bad in [c(0, 4, (1.0, 0.0)), c(1, 1, (0.0, 0.0)), c(0, 1, (f64::INFINITY, 0.0)), Constraint { weight: 0.0, ..c(0, 1, (1.0, 0.0)) }, Constraint { weight: f64::NAN, ..c(0, 1, (1.0, 0.0)) }] {
            assert!(solve(4, 0, (0.0, 0.0), &[bad], &none, 0.5).is_err(), "{bad:?}");
        }
        assert!(solve(4, 0, (0.0, 0.0), &cs, &[Some((f64::NAN, 0.0)), None, None, None], 0.5).is_err());
        assert!(solve(0, 0, (0.0, 0.0), &[], &[], 0.5).is_err());
    }
}
