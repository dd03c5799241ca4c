//! Placing the tiles: the accepted pairs join tiles into components; each component's
//! positions are solved together ([`crate::stitch::solve`]), a pair left more than
//! [`PAIR_REJECT`] px off by its component's solve is rejected (the worst first) and the
//! solve repeated; then every component is placed as a whole where the fitted stage model
//! puts its tiles (the median displacement), and a tile no accepted pair reaches where the model puts it
//! (ASHLAR's placement of what its spanning tree cannot reach).

use super::model::{median, StageModel};
use super::TilePair;
use crate::error::Result;
use crate::stitch::solve::{solve, Constraint};
use alloc::vec;
use alloc::vec::Vec;

/// Largest residual (pixels) of an accepted pair after the solve.
pub const PAIR_REJECT: f64 = 1.0;

/// Where the tiles go and which component each is in.
pub(super) struct Placement {
    /// Per tile, in tile 0's coordinates.
    pub positions: Vec<(f64, f64)>,
    /// Per tile: its component (0 the largest), `None` for a tile no accepted pair reaches.
    pub component: Vec<Option<usize>>,
    /// The components' tiles, largest first (ties: the one with the lowest tile first).
    pub components: Vec<Vec<usize>>,
}

/// Solves and places (module doc): `nominal` positions, the `pairs` (rejected ones get
/// their reason, accepted ones their residual), the fitted `model`.
pub(super) fn place(nominal: &[(f64, f64)], pairs: &mut [TilePair], model: &StageModel) -> Result<Placement> {
    let n = nominal.len();
    let modelled: Vec<(f64, f64)> = nominal.iter().map(|q| model.position((q.0 - nominal[0].0, q.1 - nominal[0].1))).collect();
    loop {
        let used: Vec<usize> = (0..pairs.len()).filter(|&k| pairs[k].shift.is_some()).collect();
        let constraints: Vec<Constraint> = used
            .iter()
            .map(|&k| Constraint { from: pairs[k].a, to: pairs[k].b, shift: pairs[k].shift.unwrap_or_default(), weight: pairs[k].vectors_used.max(1) as f64 })
            .collect();
        let components = components(n, &constraints);
        let mut solved: Vec<Option<(f64, f64)>> = vec![None; n];
        let mut residuals = vec![0.0f64; constraints.len()];
        for c in &components {
            let anchor = c[0];
            let guess: Vec<Option<(f64, f64)>> = modelled.iter().map(|m| Some((m.0 - modelled[anchor].0, m.1 - modelled[anchor].1))).collect();
            let s = solve(n, anchor, (0.0, 0.0), &constraints, &guess, 0.5)?;
            for &i in c {
                solved[i] = s.positions[i];
            }
            for (r, &t) in residuals.iter_mut().zip(&s.residuals) {
                *r = r.max(t);
            }
        }
        let worst = (0..used.len()).max_by(|&x, &y| residuals[x].total_cmp(&residuals[y]));
        if let Some(w) = worst.filter(|&w| residuals[w] > PAIR_REJECT) {
            let q = &mut pairs[used[w]];
            q.skip = Some(alloc::format!("inconsistent with the other pairs: {:.2} px off after the solve", residuals[w]));
            q.shift = None;
            q.verified_by = None;
            continue;
        }
        for (j, &k) in used.iter().enumerate() {
            pairs[k].residual = Some(residuals[j]);
        }
        // Each component where the model puts its tiles on average; the rest where the
        // model puts them.
        let mut positions = modelled.clone();
        let mut component = vec![None; n];
        for (number, c) in components.iter().enumerate() {
            // The median displacement, not the mean: a row the stage put off its place,
            // joined by its agreeing pairs, must not pull the rest off the model.
            let (mut dx, mut dy): (Vec<f64>, Vec<f64>) = c
                .iter()
                .map(|&i| {
                    let p = solved[i].unwrap_or_default();
                    (modelled[i].0 - p.0, modelled[i].1 - p.1)
                })
                .unzip();
            let lag = (median(&mut dx), median(&mut dy));
            for &i in c {
                let p = solved[i].unwrap_or_default();
                positions[i] = (p.0 + lag.0, p.1 + lag.1);
                component[i] = Some(number);
            }
        }
        let origin = positions[0];
        for p in &mut positions {
            *p = (p.0 - origin.0, p.1 - origin.1);
        }
        return Ok(Placement { positions, component, components });
    }
}

/// The groups of two tiles or more that `constraints` join, largest first (ties: the one
/// with the lowest tile first), each listing its tiles in order.
fn components(n: usize, constraints: &[Constraint]) -> Vec<Vec<usize>> {
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    for c in constraints {
        let (a, b) = (root(&mut parent, c.from), root(&mut parent, c.to));
        if a != b {
            parent[a.max(b)] = a.min(b);
        }
    }
    let mut groups: Vec<Vec<usize>> = vec![Vec::new(); n];
    for i in 0..n {
        let r = root(&mut parent, i);
        groups[r].push(i);
    }
    let mut out: Vec<Vec<usize>> = groups.into_iter().filter(|g| g.len() >= 2).collect();
    out.sort_by(|x, y| y.len().cmp(&x.len()).then(x[0].cmp(&y[0])));
    out
}
