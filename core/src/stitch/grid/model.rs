//! The stage model, fitted from the pairs that register, and the verification of each pair
//! against it.
//!
//! A stage steps by a nominal offset from tile to tile; where the nominal overlap is wrong
//! every step of one direction is off by the same amount, and where the stage is sloppy
//! each tile is off by its own error. The model is, per direction (horizontal neighbours,
//! vertical neighbours), the median of the measured offsets minus the nominal ones (MIST's
//! overlap estimate), applied only where it stands clear of the spread of the pairs (so a
//! correct nominal overlap stays exactly the stage's); the stage's repeatability is four
//! times the median distance of the pairs from the model (about 4.7 standard deviations of
//! a Gaussian error), at least [`MIN_REPEATABILITY`]. Both need [`MIN_SUPPORT`] registered
//! pairs (of the direction, of all): with fewer, nothing tells a wrong match from a stage
//! error, the model is the stage's and the repeatability [`MIN_REPEATABILITY`].
//!
//! A pair is verified when its offset lies within the repeatability of the model's, or when
//! it is one of at least two pairs of its direction whose offsets agree with each other
//! within the repeatability: a row or column the stage put off its place (ASHLAR places what
//! no verified pair joins by its fitted stage model, which this is too).

use alloc::vec::Vec;

/// Registered pairs the model needs, per direction for its offsets and in all for the
/// repeatability.
pub const MIN_SUPPORT: usize = 3;
/// The smallest repeatability (pixels) assumed, and the one assumed without a fit.
pub const MIN_REPEATABILITY: f64 = 2.0;

/// The direction of a nominal offset: 0 horizontal (along a row), 1 vertical.
pub fn direction(d: (f64, f64)) -> usize {
    usize::from(libm::fabs(d.1) > libm::fabs(d.0))
}

/// The fitted stage model (module doc).
#[derive(Clone, Debug, PartialEq)]
pub struct StageModel {
    /// Per direction (horizontal, vertical): what is added to a pair's nominal offset,
    /// `(0, 0)` where the measurements do not stand clear of their spread.
    pub correction: [(f64, f64); 2],
    /// Per direction: the median measured offset of the registered pairs whose nominal
    /// offset points forwards (right, down), `None` with fewer than `MIN_SUPPORT`.
    pub measured: [Option<(f64, f64)>; 2],
    /// Per direction: the median nominal offset (pointing forwards) of its pairs.
    pub nominal: [Option<(f64, f64)>; 2],
    /// Registered pairs per direction.
    pub support: [usize; 2],
    /// The stage's repeatability between neighbours, pixels; `None` without a fit.
    pub repeatability: Option<f64>,
}

impl StageModel {
    /// The stage's model: nominal offsets, no fitted repeatability.
    pub fn stage() -> StageModel {
        StageModel { correction: [(0.0, 0.0); 2], measured: [None; 2], nominal: [None; 2], support: [0; 2], repeatability: None }
    }

    /// Fits the model to `pairs` (nominal offset, measured offset) of all neighbouring
    /// pairs, `None` for those that did not register.
    pub fn fit(pairs: &[((f64, f64), Option<(f64, f64)>)]) -> StageModel {
        let forwards = |v: (f64, f64), d: (f64, f64)| if d.0 + d.1 < 0.0 { (-v.0, -v.1) } else { v };
        let mut m = StageModel::stage();
        let mut spread: Vec<f64> = Vec::new();
        let mut deviations: [Vec<(f64, f64)>; 2] = [Vec::new(), Vec::new()];
        for dir in 0..2 {
            let of_dir: Vec<((f64, f64), Option<(f64, f64)>)> = pairs.iter().filter(|(d, _)| direction(*d) == dir).map(|&(d, s)| (forwards(d, d), s.map(|s| forwards(s, d)))).collect();
            m.nominal[dir] = median2(&of_dir.iter().map(|q| q.0).collect::<Vec<_>>());
            let measured: Vec<((f64, f64), (f64, f64))> = of_dir.iter().filter_map(|&(d, s)| s.map(|s| (d, s))).collect();
            m.support[dir] = measured.len();
            if measured.len() < MIN_SUPPORT {
                continue;
            }
            m.measured[dir] = median2(&measured.iter().map(|q| q.1).collect::<Vec<_>>());
            deviations[dir] = measured.iter().map(|(d, s)| (s.0 - d.0, s.1 - d.1)).collect();
            let centre = median2(&deviations[dir]).unwrap_or_default();
            spread.extend(deviations[dir].iter().map(|e| libm::hypot(e.0 - centre.0, e.1 - centre.1)));
        }
        if spread.len() < MIN_SUPPORT {
            return m;
        }
        let typical = median(&mut spread);
        let repeatability = (4.0 * typical).max(MIN_REPEATABILITY);
        m.repeatability = Some(repeatability);
        for dir in 0..2 {
            let Some(centre) = median2(&deviations[dir]) else { continue };
            // The median of n Gaussian errors of deviation sigma is off by about
            // 1.25 sigma / sqrt(n); sigma is about typical / 1.18 (Rayleigh's median).
            let uncertain = 3.0 * 1.25 * (typical / 1.18) / libm::sqrt(deviations[dir].len() as f64);
            if libm::hypot(centre.0, centre.1) > uncertain.max(MIN_REPEATABILITY) {
                m.correction[dir] = centre;
            }
        }
        m
    }

    /// The model's offset for a pair of nominal offset `d`.
    pub fn offset(&self, d: (f64, f64)) -> (f64, f64) {
        let c = self.correction[direction(d)];
        if d.0 + d.1 < 0.0 { (d.0 - c.0, d.1 - c.1) } else { (d.0 + c.0, d.1 + c.1) }
    }

    /// The linear map from nominal to mosaic positions the corrections make: each
    /// direction's nominal step goes to the step plus its correction.
    pub fn linear(&self) -> [[f64; 2]; 2] {
        let mut a = [[1.0, 0.0], [0.0, 1.0]];
        for dir in 0..2 {
            let (Some(step), c) = (self.nominal[dir], self.correction[dir]) else { continue };
            let along = if dir == 0 { step.0 } else { step.1 };
            if libm::fabs(along) > 1e-9 {
                a[0][dir] += c.0 / along;
                a[1][dir] += c.1 / along;
            }
        }
        a
    }

    /// Where the model puts a tile whose nominal position is `v` (relative to any origin).
    pub fn position(&self, v: (f64, f64)) -> (f64, f64) {
        let a = self.linear();
        (a[0][0] * v.0 + a[0][1] * v.1, a[1][0] * v.0 + a[1][1] * v.1)
    }

    /// The overlap of neighbours per direction (fraction of the `tile`'s width, height)
    /// the measured offsets give, `None` where too few pairs registered.
    pub fn overlap(&self, tile: (usize, usize)) -> [Option<f64>; 2] {
        [self.measured[0].map(|s| 1.0 - libm::fabs(s.0) / tile.0 as f64), self.measured[1].map(|s| 1.0 - libm::fabs(s.1) / tile.1 as f64)]
    }

    /// The repeatability verification uses (the fitted one, or `MIN_REPEATABILITY`).
    pub fn tolerance(&self) -> f64 {
        self.repeatability.unwrap_or(MIN_REPEATABILITY)
    }
}

/// How an accepted pair was verified.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verification {
    /// Its offset is within the repeatability of the stage model's.
    StageModel,
    /// It is one of several pairs of its direction that agree on an offset beyond it.
    AgreeingPairs,
}

impl Verification {
    /// The report's word.
    pub fn name(self) -> &'static str {
        match self {
            Verification::StageModel => "stage model",
            Verification::AgreeingPairs => "agreeing pairs",
        }
    }
}

/// The fewest pairs of one direction that verify one another by agreeing on an offset
/// beyond the stage model's tolerance: two pairs of smooth, featureless tiles agreed on a
/// chance match by themselves (a grid cut from the coffee photograph enlarged three times:
/// two pairs 124 px apart where the tiles step 141, within the 15 px tolerance its stage
/// error gave).
pub const MIN_AGREEING: usize = 3;

/// Verifies `pairs` (nominal offset, measured offset or `None`) against `model`: per pair
/// how it is verified, `None` for one that is not (or did not register).
pub fn verify(pairs: &[((f64, f64), Option<(f64, f64)>)], model: &StageModel) -> Vec<Option<Verification>> {
    let tolerance = model.tolerance();
    let residual = |k: usize| pairs[k].1.map(|s| {
        let m = model.offset(pairs[k].0);
        (s.0 - m.0, s.1 - m.1)
    });
    let mut out: Vec<Option<Verification>> = (0..pairs.len()).map(|k| residual(k).filter(|r| libm::hypot(r.0, r.1) <= tolerance).map(|_| Verification::StageModel)).collect();
    // The rest, by direction: the largest set that agrees within the tolerance, while it
    // has [`MIN_AGREEING`] pairs or more.
    loop {
        let open: Vec<usize> = (0..pairs.len()).filter(|&k| out[k].is_none() && residual(k).is_some()).collect();
        let agreeing = |k: usize| -> Vec<usize> {
            let rk = residual(k).unwrap_or_default();
            open.iter().copied().filter(|&j| direction(pairs[j].0) == direction(pairs[k].0)).filter(|&j| residual(j).is_some_and(|rj| libm::hypot(rj.0 - rk.0, rj.1 - rk.1) <= tolerance)).collect()
        };
        let Some(best) = open.iter().map(|&k| agreeing(k)).max_by_key(|set| set.len()) else { break };
        if best.len() < MIN_AGREEING {
            break;
        }
        for k in best {
            out[k] = Some(Verification::AgreeingPairs);
        }
    }
    out
}

/// The median of `v` (reordered); 0 when empty.
pub(super) fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { 0.5 * (v[n / 2 - 1] + v[n / 2]) }
}

/// The coordinate-wise median of `v`, `None` when empty.
fn median2(v: &[(f64, f64)]) -> Option<(f64, f64)> {
    if v.is_empty() {
        return None;
    }
    let (mut x, mut y): (Vec<f64>, Vec<f64>) = v.iter().copied().unzip();
    Some((median(&mut x), median(&mut y)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row_pairs(step: (f64, f64), errors: &[(f64, f64)]) -> Vec<((f64, f64), Option<(f64, f64)>)> {
        errors.iter().map(|e| ((100.0, 0.0), Some((step.0 + e.0, step.1 + e.1)))).collect()
    }

    #[test]
    fn a_wrong_overlap_is_measured_and_a_right_one_left_alone() {
        // Nominal step 100 px, measured 75 with a pixel or two of play: the overlap is 25 px
        // more than the stage said.
        let play = [(0.5, -1.0), (-1.2, 0.3), (0.8, 1.1), (0.0, -0.4), (1.5, 0.2)];
        let mut pairs = row_pairs((75.0, 0.0), &play);
        pairs.extend(play.iter().map(|e| ((0.0, 80.0), Some((e.1, 60.0 + e.0)))));
        pairs.push(((100.0, 0.0), None));
        let m = StageModel::fit(&pairs);
        assert_eq!(m.support, [5, 5]);
        assert!((m.correction[0].0 + 25.0).abs() < 1.0 && (m.correction[1].1 + 20.0).abs() < 1.0, "{m:?}");
        let o = m.overlap((100, 80));
        assert!((o[0].unwrap() - 0.25).abs() < 0.01 && (o[1].unwrap() - 0.25).abs() < 0.02, "{o:?}");
        let r = m.repeatability.unwrap();
        assert!((2.0..6.0).contains(&r), "{r}");
        let a = m.linear();
        assert!((a[0][0] - 0.75).abs() < 0.01 && (a[1][1] - 0.75).abs() < 0.02, "{a:?}");
        assert!(verify(&pairs, &m)[..10].iter().all(|v| *v == Some(Verification::StageModel)));
        // Backwards pairs are corrected backwards.
        assert!((m.offset((-100.0, 0.0)).0 + 75.0).abs() < 1.0);
        // The same play about the nominal step: no correction.
        let m = StageModel::fit(&row_pairs((100.0, 0.0), &play));
        assert_eq!(m.correction, [(0.0, 0.0); 2]);
    }

    #[test]
    fn a_lone_far_pair_is_not_verified_agreeing_ones_are() {
        // Too few pairs for a fit: only pairs within MIN_REPEATABILITY of the stage count.
        let few = [((100.0, 0.0), Some((73.0, -51.0))), ((0.0, 100.0), Some((-20.0, 66.0))), ((100.0, 0.0), Some((101.0, 0.5)))];
        let m = StageModel::fit(&few);
        assert_eq!((m.repeatability, m.correction), (None, [(0.0, 0.0); 2]));
        assert_eq!(verify(&few, &m), [None, None, Some(Verification::StageModel)]);
        // A row 60 px off: four vertical pairs agree on it among good ones.
        let mut pairs = row_pairs((100.0, 0.0), &[(0.5, -1.0), (-1.2, 0.3), (0.8, 1.1), (0.0, -0.4), (1.5, 0.2), (-0.3, 0.9)]);
        pairs.extend([(0.0, 0.0), (1.0, -1.0), (-1.0, 0.5), (0.6, 0.6), (-0.2, 1.2), (0.9, -0.1)].iter().map(|e| ((0.0, 100.0), Some((e.0, 100.0 + e.1)))));
        pairs.extend([(60.0, 0.0), (61.5, -0.5), (59.0, 1.0), (60.5, 0.3)].iter().map(|e| ((0.0, 100.0), Some((e.0, 100.0 + e.1)))));
        // And one pair 30 px off alone.
        pairs.push(((100.0, 0.0), Some((130.0, 0.0))));
        let m = StageModel::fit(&pairs);
        let v = verify(&pairs, &m);
        assert!(v[..12].iter().all(|x| *x == Some(Verification::StageModel)), "{v:?} {m:?}");
        assert!(v[12..16].iter().all(|x| *x == Some(Verification::AgreeingPairs)), "{v:?}");
        assert_eq!(v[16], None);
    }
}
