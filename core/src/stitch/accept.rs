//! Deciding which template matches are real, with a rule that scales with the data.
//!
//! A fixed coefficient threshold (the original's `cthresh`) cannot serve clean and noisy
//! footage alike: a true match's NCC is bounded by the signal-to-noise ratio (about
//! `var_signal / (var_signal + var_noise)`), so on low-contrast tissue every true match
//! sits near 0.6, while on smooth images a template that is only a brightness ramp scores
//! 0.9 wherever the ramp continues. What tells a match from chance is how far the peak
//! stands above what the same template scores where it cannot match.
//!
//! So each template is also compared (one NCC each) with the windows where the *other*
//! templates of the grid are expected (at least one template side away from its own site,
//! so no overlap with its true match): its null sample, as ASHLAR compares a pair's NCC
//! with that of pairs that cannot overlap (Muhlich et al., "Stitching and registering
//! highly multiplexed whole-slide images of tissues and tumors using ASHLAR",
//! Bioinformatics 2022). A vector is kept when its peak beats the largest null value by
//! `null_margin` (and reaches `min_coefficient`). Templates that are only ramps or
//! repeat themselves have high null values and drop out; faint but distinctive texture is
//! kept at whatever coefficient the noise allows.

use crate::stitch::MotionVector;
use alloc::vec::Vec;
use smallvec::{smallvec, SmallVec};

/// How a vector's coefficient is judged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Acceptance {
    /// Against the template's own null sample (module doc): the default.
    #[default]
    Adaptive,
    /// Against the fixed `cthresh` (the original plugin's rule).
    Fixed,
}

impl Acceptance {
    /// The name the command line and reports use.
    pub fn name(self) -> &'static str {
        match self {
            Acceptance::Adaptive => "adaptive",
            Acceptance::Fixed => "fixed",
        }
    }
}

impl core::str::FromStr for Acceptance {
    type Err = alloc::string::String;
    fn from_str(s: &str) -> core::result::Result<Self, Self::Err> {
        match s {
            "adaptive" => Ok(Acceptance::Adaptive),
            "fixed" => Ok(Acceptance::Fixed),
            _ => Err(alloc::format!("unknown acceptance rule '{s}' (adaptive, fixed)")),
        }
    }
}

impl core::fmt::Display for Acceptance {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// Null samples per template.
pub const NULL_SAMPLES: usize = 8;

/// A template's null sites: the indices (into its grid's sites) of up to [`NULL_SAMPLES`]
/// other sites it is probed at, held inline (a pair's grid has one per template).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NullSet {
    len: usize,
    sites: [usize; NULL_SAMPLES],
}

impl NullSet {
    #[inline]
    pub fn as_slice(&self) -> &[usize] {
        &self.sites[..self.len]
    }

    /// The null sites among a template's far sites, of which there are `len`, the `i`-th
    /// `far(i)` (ascending), the first after the template's own position at `after` (`len`
    /// if none is): all of them, or [`NULL_SAMPLES`] spaced evenly over them from `after`
    /// (so that neighbouring templates do not all sample the same sites), the `k`-th
    /// `steps[k]` ([`Steps`]) on.
    #[inline(always)]
    fn spread(len: usize, after: usize, steps: &Steps, far: impl Fn(usize) -> usize) -> NullSet {
        if len <= NULL_SAMPLES {
            let mut set = NullSet { len, ..NullSet::default() };
            set.sites[..len].iter_mut().enumerate().for_each(|(i, s)| *s = far(i));
            return set;
        }
        let start = if after == len { 0 } else { after };
        // (start + k len / NULL_SAMPLES) mod len, both terms below len: no division.
        let sites = steps.0.map(|step| {
            let i = start + step;
            far(if i >= len { i - len } else { i })
        });
        NullSet { len: NULL_SAMPLES, sites }
    }
}

impl AsRef<[usize]> for NullSet {
    #[inline]
    fn as_ref(&self) -> &[usize] {
        self.as_slice()
    }
}

/// The sites by value, in order (a set made when asked is iterated where it was made).
impl IntoIterator for NullSet {
    type Item = usize;
    type IntoIter = core::iter::Take<core::array::IntoIter<usize, NULL_SAMPLES>>;

    fn into_iter(self) -> Self::IntoIter {
        self.sites.into_iter().take(self.len)
    }
}

/// The offsets of a template's null samples among `len` far sites: `k len / NULL_SAMPLES`
/// for the `k`-th ([`NullSet::spread`]), the same for every template with as many.
#[derive(Clone, Debug)]
pub(crate) struct Steps([usize; NULL_SAMPLES]);

impl Steps {
    fn over(len: usize) -> Steps {
        Steps(core::array::from_fn(|k| k * len / NULL_SAMPLES))
    }
}

/// For each template site, the other sites its null sample is taken at ([`NullSet`]): up
/// to [`NULL_SAMPLES`] sites at least `rsz` away (Chebyshev), spread evenly over the grid
/// order. Empty where no site is far enough (a one-template grid).
pub fn null_sites(sites: &[(usize, usize)], rsz: usize) -> Vec<NullSet> {
    // Where the sites' distinct x positions, and their distinct y positions, lie at least
    // `rsz` apart (a registration grid, whose spacing exceeds its templates), two sites
    // differ by that much on an axis where they differ at all: every other site is far,
    // the `i`-th of them `i`, or `i + 1` from the template's own on, with no list and no
    // test per pair of sites.
    let spaced = |axis: fn(&(usize, usize)) -> usize| {
        let mut at: Vec<usize> = sites.iter().map(axis).collect();
        at.sort_unstable();
        at.dedup();
        spaced_apart(&at, rsz)
    };
    let n = sites.len();
    if spaced(|s| s.0) && spaced(|s| s.1) {
        return spaced_null_sites(n);
    }
    // One list of far sites, refilled per template.
    let mut far = Vec::with_capacity(n);
    sites
        .iter()
        .enumerate()
        .map(|(t, &(tx, ty))| {
            far.clear();
            far.extend((0..n).filter(|&u| u != t && (sites[u].0.abs_diff(tx) >= rsz || sites[u].1.abs_diff(ty) >= rsz)));
            NullSet::spread(far.len(), far.partition_point(|&u| u < t), &Steps::over(far.len()), |i| far[i])
        })
        .collect()
}

/// Whether ascending, distinct positions along an axis lie at least `rsz` apart, as
/// [`spaced_null_sites`] asks of both axes.
pub(crate) fn spaced_apart(at: &[usize], rsz: usize) -> bool {
    at.windows(2).all(|w| w[1] - w[0] >= rsz)
}

/// The null sites of each of `n` template sites whose distinct x positions, and distinct y
/// positions, lie at least the templates' side apart (a registration grid's, or any subset
/// of one): every other site is far, so that the sets depend on `n` alone (`null_sites`
/// of such sites).
pub fn spaced_null_sites(n: usize) -> Vec<NullSet> {
    let sets = NullSets::spaced(n);
    (0..n).map(|t| sets.get(t)).collect()
}

/// The null sets of a grid's templates: [`spaced_null_sites`]' of `n` sites, each made when
/// asked (a pair keeps no list of them), or those listed by [`null_sites`].
#[derive(Clone, Debug, Default)]
pub(crate) enum NullSets {
    /// No null probes (fixed acceptance, no textured template).
    #[default]
    None,
    Spaced { n: usize, steps: Steps },
    Listed(Vec<NullSet>),
}

impl NullSets {
    pub(crate) fn spaced(n: usize) -> NullSets {
        NullSets::Spaced { n, steps: Steps::over(n.saturating_sub(1)) }
    }

    /// Templates with a set.
    pub(crate) fn len(&self) -> usize {
        match self {
            NullSets::None => 0,
            NullSets::Spaced { n, .. } => *n,
            NullSets::Listed(sets) => sets.len(),
        }
    }

    /// Template `t`'s set (empty beyond [`len`](Self::len)).
    #[inline]
    pub(crate) fn get(&self, t: usize) -> NullSet {
        match self {
            // The far site at index `i` is `i`, or `i + 1` from the template's own on.
            NullSets::Spaced { n, steps } if t < *n => NullSet::spread(n - 1, t, steps, |i| i + usize::from(i >= t)),
            NullSets::Listed(sets) => sets.get(t).copied().unwrap_or_default(),
            _ => NullSet::default(),
        }
    }
}

/// A template's null sample as acceptance reads it (module doc): the largest coefficient
/// among its probes whose window was not flat, and how many were not flat (one evaluation
/// each). What a template's probes come to, so that a device reduces them on its side and
/// the host reads one peak a template, not one coefficient a probe.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct NullPeak {
    /// The largest coefficient; `None` where every window was flat, or there was no probe.
    pub largest: Option<f64>,
    /// The probes whose window was not flat.
    pub windows: u32,
}

impl NullPeak {
    /// The peak of a template's probes' coefficients (`None`: a flat window), taken in
    /// their order: a larger value replaces the peak, an equal one does not, and a NaN
    /// never displaces a number (as `f64::max`). The device's reduction (`ncc_null_peaks`
    /// of the CUDA backend) takes the same steps.
    pub fn of(probed: impl IntoIterator<Item = Option<f64>>) -> NullPeak {
        probed.into_iter().flatten().fold(NullPeak::default(), |peak, c| NullPeak { largest: Some(peak.largest.map_or(c, |m| if c > m || m.is_nan() { c } else { m })), windows: peak.windows + 1 })
    }

    /// The threshold a vector's coefficient must reach under `rule`: `cthresh` (fixed), or
    /// the largest null coefficient plus `margin`, at least `floor` (adaptive; with no
    /// null coefficient the fixed threshold stands in).
    pub fn threshold(self, rule: Acceptance, cthresh: f64, margin: f64, floor: f64) -> f64 {
        match (rule, self.largest) {
            (Acceptance::Adaptive, Some(null)) => (null + margin).max(floor),
            _ => cthresh,
        }
    }
}

/// The shift of a second consensus among the vectors `kept` large enough to doubt the
/// first (`inliers`, around `shift`): at least `min_vectors` and half the winner's count,
/// disjoint from the winner and more than `2 tol` away from its shift. Repetitive texture
/// (tiles, bricks, a lattice of cells) matches at several shifts; such a pair is skipped,
/// not guessed.
pub fn ambiguous(v: &[MotionVector], kept: &[usize], inliers: &[usize], shift: (f64, f64), tol: f64, min_vectors: usize) -> Option<(f64, f64)> {
    let away = |s: (f64, f64)| libm::fabs(s.0 - shift.0) > 2.0 * tol || libm::fabs(s.1 - shift.1) > 2.0 * tol;
    let mut agreeing: SmallVec<[bool; 64]> = smallvec![false; v.len()];
    for &j in inliers {
        if let Some(a) = agreeing.get_mut(j) {
            *a = true;
        }
    }
    let rest: Vec<usize> = kept.iter().copied().filter(|&j| !agreeing[j] && away(v[j].shift)).collect();
    let near = |a: (f64, f64), b: (f64, f64)| libm::fabs(a.0 - b.0) <= tol && libm::fabs(a.1 - b.1) <= tol;
    let (count, at) = rest.iter().map(|&i| (rest.iter().filter(|&&j| near(v[i].shift, v[j].shift)).count(), v[i].shift)).max_by_key(|c| c.0)?;
    (count >= min_vectors && 2 * count >= inliers.len()).then_some(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The selection [`null_sites`] makes, from its definition: the far sites listed, and
    /// spaced evenly from the first after the template.
    fn null_sites_reference(sites: &[(usize, usize)], rsz: usize) -> Vec<Vec<usize>> {
        (0..sites.len())
            .map(|t| {
                let (tx, ty) = sites[t];
                let far: Vec<usize> = (0..sites.len()).filter(|&u| u != t && (sites[u].0.abs_diff(tx) >= rsz || sites[u].1.abs_diff(ty) >= rsz)).collect();
                if far.len() <= NULL_SAMPLES {
                    return far;
                }
                let start = far.iter().position(|&u| u > t).unwrap_or(0);
                (0..NULL_SAMPLES).map(|k| far[(start + k * far.len() / NULL_SAMPLES) % far.len()]).collect()
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Grids of up to 12 x 12 sites (more than one word of bits), some dropped as an
        /// untextured template is, against the reference.
        #[test]
        fn null_sites_match_the_reference(nx in 1usize..13, ny in 1usize..13, spacing in 1usize..40, rsz in 1usize..60, drop in any::<u64>()) {
            let sites: Vec<(usize, usize)> =
                (0..ny).flat_map(|y| (0..nx).map(move |x| (x * spacing, y * spacing))).enumerate().filter(|(k, _)| drop >> (k % 64) & 1 == 0 || k % 7 == 0).map(|(_, s)| s).collect();
            let got: Vec<Vec<usize>> = null_sites(&sites, rsz).iter().map(|n| n.as_slice().to_vec()).collect();
            prop_assert_eq!(got, null_sites_reference(&sites, rsz));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// [`spaced_null_sites`] of grids spaced at least a template apart, with sites
        /// dropped, against the reference.
        #[test]
        fn spaced_null_sites_match_the_reference(nx in 1usize..13, ny in 1usize..13, rsz in 1usize..40, extra in 0usize..20, drop in any::<u64>()) {
            let spacing = rsz + extra;
            let sites: Vec<(usize, usize)> =
                (0..ny).flat_map(|y| (0..nx).map(move |x| (x * spacing, y * spacing))).enumerate().filter(|(k, _)| drop >> (k % 64) & 1 == 0).map(|(_, s)| s).collect();
            let got: Vec<Vec<usize>> = spaced_null_sites(sites.len()).iter().map(|n| n.as_slice().to_vec()).collect();
            prop_assert_eq!(got, null_sites_reference(&sites, rsz));
        }
    }

    #[test]
    fn null_sites_are_far_and_spread() {
        let sites: Vec<(usize, usize)> = (0..6).flat_map(|y| (0..6).map(move |x| (x * 20, y * 20))).collect();
        let nulls = null_sites(&sites, 25);
        for (t, n) in nulls.iter().map(NullSet::as_slice).enumerate() {
            assert_eq!(n.len(), NULL_SAMPLES);
            for &u in n {
                assert!(u != t && (sites[u].0.abs_diff(sites[t].0) >= 25 || sites[u].1.abs_diff(sites[t].1) >= 25));
            }
            let mut d = n.to_vec();
            d.sort();
            d.dedup();
            assert_eq!(d.len(), NULL_SAMPLES, "{n:?}");
        }
        assert!(null_sites(&[(5, 5)], 25)[0].as_slice().is_empty());
        assert!(null_sites(&[(5, 5), (10, 10)], 25).iter().all(|n| n.as_slice().is_empty()));
    }

    #[test]
    fn thresholds_follow_the_rule() {
        let threshold = |rule, nulls: &[f64], cthresh, margin, floor| NullPeak::of(nulls.iter().map(|&c| Some(c))).threshold(rule, cthresh, margin, floor);
        assert_eq!(threshold(Acceptance::Fixed, &[0.9], 0.85, 0.2, 0.3), 0.85);
        assert!((threshold(Acceptance::Adaptive, &[0.1, 0.4, -0.2], 0.85, 0.2, 0.3) - 0.6).abs() < 1e-12);
        assert_eq!(threshold(Acceptance::Adaptive, &[-0.5], 0.85, 0.2, 0.3), 0.3);
        assert_eq!(threshold(Acceptance::Adaptive, &[], 0.85, 0.2, 0.3), 0.85);
        assert_eq!("fixed".parse::<Acceptance>(), Ok(Acceptance::Fixed));
        assert!("other".parse::<Acceptance>().is_err());
    }

    /// A peak is the largest of the windows that were not flat, each counted; NaN displaces
    /// no number (as `f64::max`), and of equal values (signed zeros) the first stays.
    #[test]
    fn a_null_peak_is_the_largest_of_the_windows_not_flat() {
        assert_eq!(NullPeak::of([]), NullPeak { largest: None, windows: 0 });
        assert_eq!(NullPeak::of([None, None]), NullPeak { largest: None, windows: 0 });
        assert_eq!(NullPeak::of([Some(0.2), None, Some(0.7), Some(-0.1)]), NullPeak { largest: Some(0.7), windows: 3 });
        assert_eq!(NullPeak::of([Some(f64::NAN), Some(0.3), Some(f64::NAN)]), NullPeak { largest: Some(0.3), windows: 3 });
        assert!(NullPeak::of([Some(f64::NAN)]).largest.is_some_and(f64::is_nan));
        let zero = |probed: [Option<f64>; 2]| NullPeak::of(probed).largest.map(f64::to_bits);
        assert_eq!(zero([Some(-0.0), Some(0.0)]), Some((-0.0f64).to_bits()));
        assert_eq!(zero([Some(0.0), Some(-0.0)]), Some(0.0f64.to_bits()));
        // Over numbers, taken in order, the same as `reduce(f64::max)`.
        let mut rng = crate::stitch::SplitMix64::new(11);
        for _ in 0..200 {
            let probed: Vec<Option<f64>> = (0..(rng.next_u64() % 9)).map(|_| (rng.next_u64() % 4 != 0).then(|| (rng.next_u64() >> 11) as f64 / (1u64 << 52) as f64 - 1.0)).collect();
            let want = probed.iter().flatten().copied().reduce(f64::max);
            assert_eq!(NullPeak::of(probed.iter().copied()).largest, want, "{probed:?}");
        }
    }

    #[test]
    fn a_second_cluster_of_equal_weight_is_ambiguous() {
        let v = |sx: f64| MotionVector { template: (0, 0), found: (0.0, 0.0), shift: (sx, 0.0), coefficient: 0.9, threshold: 0.5, evaluations: 0, inlier: false };
        let vs = [v(0.0), v(0.1), v(0.2), v(0.1), v(10.0), v(10.1), v(10.2), v(30.0)];
        let all: Vec<usize> = (0..vs.len()).collect();
        assert!(ambiguous(&vs, &all, &[0, 1, 2, 3], (0.1, 0.0), 1.0, 3).is_some_and(|s| (s.0 - 10.0).abs() < 0.3));
        // A lone outlier and a pair are no rival.
        assert_eq!(ambiguous(&vs, &[0, 1, 2, 3, 4, 5, 7], &[0, 1, 2, 3], (0.1, 0.0), 1.0, 3), None);
    }
}
