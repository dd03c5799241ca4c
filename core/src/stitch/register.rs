//! Registration of a frame pair, as in the original plugin: NPTS x NPTS square templates
//! of side rsz spread evenly over the reference frame, each found in the moving frame by a
//! logarithmic NCC search around the position the predicted shift gives, vectors below
//! cthresh dropped, and the rest combined into one shift.
//!
//! Which vectors count is decided by [`Acceptance`]: by default against each template's
//! own null sample ([`super::accept`]), so noisy or low-contrast footage registers with the
//! defaults and chance matches on ramps or repeated texture do not; `Acceptance::Fixed` is
//! the original's `cthresh` rule.
//!
//! Differences from the original, each for robustness: templates without texture (per-pixel
//! variance below `min_variance`) are not searched, since their coefficient is meaningless;
//! the grid is spread over the part of the reference whose search areas stay inside the
//! moving frame under the predicted shift (so every template has its full search area);
//! and the vectors are combined by consensus, not by a plain mean: the largest set of
//! vectors agreeing within `agreement` pixels (Chebyshev) with one of them wins, and the
//! shift is the mean of that set (RANSAC-like voting over translations, Fischler and
//! Bolles 1981, with every vector tried as the hypothesis).
//!
//! The shift `(x, y)` of a pair means: the moving frame's pixel `(u, v)` shows what the
//! reference shows at `(u + x, v + y)`.

use crate::error::{require_finite, require_range, Error, Result};
use crate::image::{AnyView, Image, ImageView};
use crate::ncc::{exhaustive_search, log_search, Integral, Match, NccSample, SearchCache, SearchFrame, SearchParams, Template, TemplateCut, TemplateStats, MAX_RADIUS};
use crate::parallel::{map_few, Parallelism};
use crate::stitch::accept::{ambiguous, null_sites, spaced_apart, Acceptance, NullPeak, NullSet, NullSets};
use crate::stitch::refine::{refine_motion, ShiftRefinement};
use crate::stitch::vote;
use crate::stitch::similarity::{self, Bounds, ConsensusCount, Correspondence, Similarity};
use crate::stitch::SynthPixel;
use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use smallvec::SmallVec;

/// Which search finds each template.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SearchMethod {
    /// The centre-biased logarithmic search, accepting a local maximum next to the
    /// prediction that reaches cthresh (default; see [`crate::ncc::log_search`]).
    #[default]
    Log,
    /// The plain logarithmic (three-step) search of the original.
    LogPlain,
    /// Every position of the search area (the accuracy baseline).
    Exhaustive,
}

/// The motion model a pair's vectors are fitted with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Motion {
    /// A shift only (the original).
    Translation,
    /// Rotation (and scale with [`RegisterParams::fit_scale`]) plus a shift, fitted by
    /// consensus and least squares (`similarity`); a pair whose rotation is not
    /// significant against the vectors' scatter keeps the translation result exactly.
    #[default]
    Similarity,
}

/// Parameters of pair registration, with the original plugin's tuned defaults.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RegisterParams {
    /// Template side in pixels (3..=255): 25 for half PAL, 31 for PAL.
    pub rsz: usize,
    /// Templates per side of the grid (1..=32): 6 for half PAL, 8 for PAL.
    pub npts: usize,
    /// With `Acceptance::Fixed`, vectors whose coefficient is below this are dropped; with
    /// `Adaptive` it is the level at which the centre-biased log search stops early and
    /// the threshold of a template with no null sample (in [-1, 1]).
    pub cthresh: f64,
    /// How vectors are accepted ([`Acceptance`]).
    pub acceptance: Acceptance,
    /// Adaptive acceptance: how far a peak must beat the template's largest null
    /// coefficient (in [0, 2]).
    pub null_margin: f64,
    /// Adaptive acceptance: the lowest coefficient ever accepted (in [-1, 1]).
    pub min_coefficient: f64,
    /// Search radius in pixels around the predicted position (1..=256).
    pub search_radius: usize,
    /// Templates whose per-pixel variance (in squared grey levels of the registered
    /// luminance) is below this are not searched (>= 0).
    pub min_variance: f64,
    /// Vectors within this many pixels (Chebyshev) of each other agree (> 0).
    pub agreement: f64,
    /// Fewest agreeing vectors for a registered pair (>= 1).
    pub min_vectors: usize,
    /// Refine each peak to subpixel precision.
    pub subpixel: bool,
    /// Refine the pair's shift on the agreeing templates' pixels (Lucas-Kanade), removing
    /// the peak fit's pull towards whole pixels (with `subpixel` only: without it, shifts
    /// stay whole pixels).
    pub refine: bool,
    pub method: SearchMethod,
    /// The motion model ([`Motion`]).
    pub motion: Motion,
    /// With [`Motion::Similarity`]: fit a scale too (a zoom; off: rotation only).
    pub fit_scale: bool,
    /// With [`Motion::Similarity`]: the largest rotation (degrees) a pair may show beyond
    /// what it was warped by (in (0, 45]).
    pub max_turn: f64,
}

impl Default for RegisterParams {
    fn default() -> Self {
        RegisterParams {
            rsz: 25,
            npts: 6,
            cthresh: 0.85,
            acceptance: Acceptance::Adaptive,
            null_margin: 0.2,
            min_coefficient: 0.3,
            search_radius: 32,
            min_variance: 4.0,
            agreement: 1.0,
            min_vectors: 3,
            subpixel: true,
            refine: true,
            method: SearchMethod::Log,
            motion: Motion::Similarity,
            fit_scale: false,
            max_turn: 6.0,
        }
    }
}

impl RegisterParams {
    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<()> {
        require_range("rsz", self.rsz, 3, 255)?;
        require_range("npts", self.npts, 1, MAX_NPTS as i64)?;
        require_range("search radius", self.search_radius, 1, MAX_RADIUS as i64)?;
        require_range("min vectors", self.min_vectors, 1, 1024)?;
        require_finite("cthresh", self.cthresh)?;
        if !(-1.0..=1.0).contains(&self.cthresh) {
            return Err(Error::InvalidFloat { name: "cthresh", value: self.cthresh, expected: "within [-1, 1]" });
        }
        require_finite("min variance", self.min_variance)?;
        if self.min_variance < 0.0 {
            return Err(Error::InvalidFloat { name: "min variance", value: self.min_variance, expected: ">= 0" });
        }
        for (name, value, range, expected) in [
            ("null margin", self.null_margin, 0.0..=2.0, "within [0, 2]"),
            ("min coefficient", self.min_coefficient, -1.0..=1.0, "within [-1, 1]"),
            ("max turn", self.max_turn, 1e-3..=45.0, "within (0, 45] degrees"),
        ] {
            require_finite(name, value)?;
            if !range.contains(&value) {
                return Err(Error::InvalidFloat { name, value, expected });
            }
        }
        crate::error::require_positive("agreement", self.agreement)
    }
}

/// One template's motion vector.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MotionVector {
    /// Top-left pixel of the template in the reference frame.
    pub template: (usize, usize),
    /// Where it was found in the moving frame (subpixel).
    pub found: (f64, f64),
    /// `template - found`: the pair's shift this vector votes for.
    pub shift: (f64, f64),
    pub coefficient: f64,
    /// The coefficient it had to reach (`cthresh`, or its null sample's bound).
    pub threshold: f64,
    pub evaluations: u32,
    /// In the consensus set.
    pub inlier: bool,
}

/// Why a pair could not be registered.
#[derive(Clone, Debug, PartialEq)]
pub enum SkipReason {
    /// The predicted shift leaves no room for a template and its search area.
    NoOverlap,
    /// No template of the reference has texture (variance >= min_variance).
    NoTexture,
    /// Too few vectors reached their threshold, or too few of them agree.
    TooFewVectors { above_threshold: usize, agreeing: usize, needed: usize },
    /// Two disjoint sets of vectors agree on different shifts (repeated texture).
    Ambiguous { agreeing: usize, rival: (f64, f64) },
    /// A minority of the templates agreed (or none, for a phase-correlation match), and the
    /// whole overlap does not correlate at that shift: its NCC is below `min_coefficient`
    /// and (where measured) does not stand above `null`, what the pair correlates where it
    /// cannot match ([`super::overlap_null_ncc`]).
    Unconfirmed { agreeing: usize, textured: usize, overlap_ncc: f64, null: Option<f64> },
    /// A whole-overlap match (no template agreeing) whose overlap is too featureless to
    /// judge it, or whose textured part does not correlate above its null there: `blocks`
    /// textured blocks of `needed`, their coefficient and null (`super::textured`).
    Featureless { blocks: usize, needed: usize, ncc: Option<f64>, null: Option<f64> },
    /// The frame could not be read (a file that does not decode, ...), with the reason.
    Unreadable(String),
    /// The frame's size or pixel type differs from the sequence's (said how).
    Mismatch(String),
    /// The frame holds NaN or infinite pixels (this many), which NCC cannot compare.
    NonFinite { pixels: usize },
    /// No frame after it registered against it: it could not serve as the reference, and
    /// the run took the first frame that registers with its successor instead.
    NoSuccessor { reference: usize },
}

impl SkipReason {
    /// A sentence for reports.
    pub fn describe(&self) -> String {
        match self {
            SkipReason::NoOverlap => "no overlap: the predicted shift leaves no room for a template and its search area".into(),
            SkipReason::NoTexture => "no texture: every template of the reference is flat".into(),
            SkipReason::TooFewVectors { above_threshold, agreeing, needed } => alloc::format!(
                "too few vectors: {above_threshold} reached their threshold, {agreeing} agree, {needed} needed"
            ),
            SkipReason::Ambiguous { agreeing, rival } => alloc::format!(
                "ambiguous: {agreeing} vectors agree, but as many agree on another shift ({:.1}, {:.1})",
                rival.0, rival.1
            ),
            SkipReason::Unconfirmed { agreeing, textured, overlap_ncc, null } => match null {
                Some(n) => alloc::format!(
                    "unconfirmed: {agreeing} of {textured} textured templates agree, and the overlap correlates only {overlap_ncc:.2} there ({n:.2} where it cannot match)"
                ),
                None => alloc::format!(
                    "unconfirmed: {agreeing} of {textured} textured templates agree, and the overlap correlates only {overlap_ncc:.2} there"
                ),
            },
            SkipReason::Featureless { blocks, needed, ncc, null } => match (ncc, null) {
                (Some(r), Some(n)) if blocks >= needed => alloc::format!(
                    "featureless: the overlap's {blocks} textured blocks correlate only {r:.2} there ({n:.2} where they cannot match)"
                ),
                (_, None) if blocks >= needed => alloc::format!(
                    "featureless: the overlap has {blocks} textured blocks, but too little texture where it cannot match to judge them"
                ),
                _ => alloc::format!("featureless: the overlap has {blocks} textured blocks, {needed} needed"),
            },
            SkipReason::Unreadable(why) => alloc::format!("unreadable: {why}"),
            SkipReason::Mismatch(why) => alloc::format!("does not match the sequence: {why}"),
            SkipReason::NonFinite { pixels } => {
                alloc::format!("{pixels} pixels are NaN or infinite, which NCC cannot compare")
            }
            SkipReason::NoSuccessor { reference } => alloc::format!(
                "no later frame registered against it; frame {reference}, the first that registers with its successor, is the reference"
            ),
        }
    }
}

/// The registration of one frame pair.
#[derive(Clone, Debug, PartialEq)]
pub struct PairRegistration {
    /// The shift (module doc), or `None` when the pair was skipped. With a rotation, the
    /// translation of the motion: the moving frame's `(u, v)` shows the reference at
    /// `shift + scale R(angle) (u, v)` ([`PairRegistration::motion`]).
    pub shift: Option<(f64, f64)>,
    /// Rotation in radians (0 for a translation).
    pub angle: f64,
    /// Scale (1 unless fitted).
    pub scale: f64,
    pub skip: Option<SkipReason>,
    /// Mean of `coefficient - threshold` over the vectors used (0 when none): how clearly
    /// the matches passed.
    pub margin: f64,
    /// Templates placed, textured (searched), above their threshold, and agreeing (used).
    pub templates: usize,
    pub textured: usize,
    pub above_threshold: usize,
    pub vectors_used: usize,
    /// Mean coefficient of the vectors used (0 when none).
    pub ncc: f64,
    /// `vectors_used / templates`.
    pub confidence: f64,
    /// NCC evaluations of all searches of the pair.
    pub evaluations: u64,
    /// Every searched template's vector.
    pub vectors: Vec<MotionVector>,
    /// Set where too few templates agreed and the pair was registered on its whole overlap
    /// instead, from a phase-correlation peak this many times the surface's RMS (faint
    /// texture; [`super::coarse::Peak::significance`]); `None` where the templates decided.
    pub phase_significance: Option<f64>,
}

impl PairRegistration {
    /// The pair's motion (moving `(u, v)` shows the reference at `motion(u, v)`), `None`
    /// when skipped.
    pub fn motion(&self) -> Option<Similarity> {
        self.shift.map(|(x, y)| Similarity { x, y, angle: self.angle, scale: self.scale })
    }
}

/// Templates along a side of the grid at most ([`RegisterParams::npts`]).
const MAX_NPTS: usize = 32;

/// Templates of an 8 x 8 grid: a pair's lists of its templates, vectors and their
/// correspondences hold this many in line (the default grid's 36 too), without an
/// allocation.
const GRID_IN_LINE: usize = 64;

/// Indices of a pair's templates or vectors, in order.
type Indices = SmallVec<[usize; GRID_IN_LINE]>;

/// A pair's vectors as correspondences of template centres.
type Points = SmallVec<[Correspondence; GRID_IN_LINE]>;

/// The grid positions along one axis of length `len` for prediction `pred` (rounded):
/// `npts` positions evenly spread over `[max(0, pred + r), min(len - rsz, len - rsz + pred - r)]`.
/// Saturating: a finite prediction may be as far as `i64` goes (no overlap, not an overflow).
fn grid_axis(len: usize, rsz: usize, r: usize, pred: i64, npts: usize) -> Option<SmallVec<[usize; MAX_NPTS]>> {
    let (len, rsz, r) = (len as i64, rsz as i64, r as i64);
    let lo = 0.max(pred.saturating_add(r));
    let hi = (len - rsz).min((len - rsz).saturating_add(pred).saturating_sub(r));
    if hi < lo {
        return None;
    }
    let mut at: SmallVec<[usize; MAX_NPTS]> = (0..npts)
        .map(|k| {
            if npts == 1 {
                ((lo + hi) / 2) as usize
            } else {
                (lo + ((hi - lo) * k as i64 + (npts as i64 - 1) / 2) / (npts as i64 - 1)) as usize
            }
        })
        .collect();
    // Templates overlapping by three quarters or more are one piece of evidence, not
    // several: on a narrow overlap they would outvote the rest of the consensus with a
    // single chance match. Keep positions at least a quarter template apart.
    let gap = (rsz as usize).div_ceil(4);
    at.dedup_by(|next, kept| *next < *kept + gap);
    Some(at)
}

/// Registers `moving` (prepared for search) against `reference`; `prediction` is the
/// expected shift (module doc), the search starting there. Returns a skipped
/// [`PairRegistration`] (with its reason) when the pair cannot be registered.
///
/// Errors: invalid parameters, frames of different sizes, a non-finite prediction.
pub fn register_pair<T: NccSample + Into<f64>>(
    reference: ImageView<'_, T>,
    moving: &SearchFrame<'_, T>,
    p: &RegisterParams,
    prediction: (f64, f64),
    par: Parallelism,
) -> Result<PairRegistration> {
    register_pair_seen(reference, Seen::upright(moving.view()), p, prediction, &mut cpu_searches(moving, p, par), par)
}

/// [`register_pair`] for a pair predicted to turn (or scale) visibly: registered as if
/// `moving` were first turned back by `turn` (a rotation and scale about the frame's
/// centre, [`Similarity::about`]), where `prediction` is the shift that remains. The frame
/// is not resampled: each template is cut from the reference turned by `turn` about its
/// centre and searched in `moving` as it is, where the turn sends it, and the refinement
/// samples `moving` through the turn. The result is the motion as seen on the turned-back
/// frame (compose it with `turn` for the pair's).
pub fn register_pair_turned<T: NccSample + Into<f64> + SynthPixel>(
    reference: ImageView<'_, T>,
    moving: &SearchFrame<'_, T>,
    p: &RegisterParams,
    prediction: (f64, f64),
    turn: &Similarity,
    par: Parallelism,
) -> Result<PairRegistration> {
    if !(turn.scale > 0.0 && turn.angle.is_finite() && turn.scale.is_finite() && turn.x.is_finite() && turn.y.is_finite()) {
        return Err(Error::InvalidParameter { name: "turn", reason: "must be finite with a positive scale".into() });
    }
    let resample = |r: ImageView<'_, T>, cut: &Similarity, side: usize| super::warp::warp_sized(r, cut, (side, side));
    let seen = Seen { frame: moving.view(), turn: *turn, resample: Some(&resample) };
    register_pair_seen(reference, seen, p, prediction, &mut cpu_searches(moving, p, par), par)
}

/// The fewest template searches in a chunk of a pair's searches spread over threads
/// ([`cpu_searches`]). Searched in chunks of one on one thread, a PAL pair (36 templates of
/// 25 x 25) took 7 % longer than in one chunk, in chunks of five 2.4 %.
const MIN_CHUNK: usize = 4;

/// The CPU's template searches for [`register_pair_with`]: the searches split into
/// contiguous chunks, one search cache a chunk, the results in the searches' order.
fn cpu_searches<'s, T: NccSample>(
    moving: &'s SearchFrame<'_, T>,
    p: &'s RegisterParams,
    par: Parallelism,
) -> impl FnMut(&[TemplateSearch<'_, Template<T>>], &SearchParams) -> Result<Vec<Option<Match>>> + 's {
    move |searches, sp| {
        // Two chunks a thread ([`map_few`]: from outside the pool, claimed in order by
        // whichever thread is free, the caller among them), one on one thread. Handed whole
        // to the pool from there (one chunk a worker, the caller asleep until both were
        // done), a PAL pair's templates took longer on two threads than on one; in four
        // chunks a thread, each chunk's own search cache and setup cost more than the finer
        // balance won (one PAL pair on two threads 0.170 -> 0.139 ms with two). A chunk holds
        // at least `MIN_CHUNK` searches, since each starts a search cache of its own and does
        // not prefetch past its last template.
        let threads = par.threads();
        let chunks = if threads > 1 { (2 * threads).min(searches.len().div_ceil(MIN_CHUNK)) } else { 1 }.clamp(1, searches.len().max(1));
        let per = searches.len().div_ceil(chunks).max(1);
        let found = map_few(searches.len().div_ceil(per), par, |c| -> Result<Vec<Option<Match>>> {
            let mut cache = SearchCache::new();
            let mine = &searches[(c * per).min(searches.len())..((c + 1) * per).min(searches.len())];
            mine.iter()
                .enumerate()
                .map(|(k, s)| {
                    // The next template's first windows come into the cache while this one
                    // is searched (its climb reaches 2 pixels around the start first).
                    if let Some(next) = mine.get(k + 1) {
                        moving.prefetch(next.start, next.template.size(), 2);
                    }
                    match p.method {
                        SearchMethod::Log | SearchMethod::LogPlain => log_search(moving, s.template, s.start, sp, &mut cache),
                        SearchMethod::Exhaustive => exhaustive_search(moving, s.template, s.start, sp, &mut cache),
                    }
                })
                .collect()
        });
        let mut all = Vec::with_capacity(searches.len());
        for chunk in found {
            all.extend(chunk?);
        }
        Ok(all)
    }
}

/// One template search of a pair: the template cut from the reference at `site` (its
/// statistics computed once; `C`, a [`TemplateCut`], what was kept of it), to be found in
/// the moving frame around `start`. The template is borrowed: a pair's null probes search
/// its templates again at other starts.
#[derive(Debug)]
pub struct TemplateSearch<'t, C> {
    pub site: (usize, usize),
    pub template: &'t C,
    pub start: (isize, isize),
}

impl<C> Clone for TemplateSearch<'_, C> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<C> Copy for TemplateSearch<'_, C> {}

/// [`register_pair`] with the template searches run by `search`: it gets every textured
/// template of the pair at once (in grid order) with the search parameters, and returns
/// each one's [`Match`] (`None` for a flat best window) in the same order. The grid, the
/// texture test, the threshold and the consensus are this function's; only the searches
/// are the caller's: the seam through which a GPU backend runs all of a pair's searches in
/// one launch. The consensus shift is then refined on the agreeing templates' pixels
/// (`refine`) when `p.refine` and `p.subpixel` are set.
pub fn register_pair_with<T: NccSample + Into<f64>>(
    reference: ImageView<'_, T>,
    moving: ImageView<'_, T>,
    p: &RegisterParams,
    prediction: (f64, f64),
    search: &mut dyn FnMut(&[TemplateSearch<'_, Template<T>>], &SearchParams) -> Result<Vec<Option<Match>>>,
) -> Result<PairRegistration> {
    register_pair_seen(reference, Seen::upright(moving), p, prediction, search, Parallelism::Sequential)
}

/// A pair's registration up to its searches ([`plan_pair`]): the textured templates of its
/// grid with their search starts, and, for adaptive acceptance, each template's null probes
/// (the other templates' starts it is evaluated at). [`PairPlan::finish`] concludes the
/// registration from the searches' matches ([`PairPlan::conclude`] all but its subpixel
/// refinement): the seam through which a GPU backend runs the searches of many pairs in one
/// launch, their null probes in another and their refinements in a third, each pair's
/// templates cut once. `C` is what the plan keeps of each template ([`TemplateCut`]).
pub struct PairPlan<C> {
    out: PairRegistration,
    /// The textured templates' sites and search starts, in grid order (apart from their
    /// templates: what the conclusion reads of them, after the searches).
    places: Vec<Place>,
    /// Their templates, in the same order.
    templates: Vec<C>,
    /// Per textured template, the templates at whose starts it is probed.
    nulls: NullSets,
    /// The grid's positions lie at least a template apart on each axis, so that every
    /// other template's site is far from a template's own ([`spaced_null_sites`]).
    spaced: bool,
    search: SearchParams,
    /// The registration ended with the grid (no overlap): `out` is the result.
    ended: bool,
}

/// A template's site (its top-left pixel in the reference frame) and its search's start
/// in the moving frame.
type Place = ((usize, usize), (isize, isize));

/// The search of a null probe: the template's coefficient at one window.
const PROBE: SearchParams = SearchParams { radius: 0, subpixel: false, accept: None };

impl<C> PairPlan<C> {
    /// Every textured template's search, in grid order.
    pub fn searches(&self) -> impl ExactSizeIterator<Item = TemplateSearch<'_, C>> + Clone {
        self.places.iter().zip(&self.templates).map(|(&(site, start), template)| TemplateSearch { site, template, start })
    }

    /// The parameters of [`searches`](Self::searches).
    pub fn search_params(&self) -> SearchParams {
        self.search
    }

    /// The null probes (searches of radius 0, [`probe_params`](Self::probe_params)): each
    /// template at its null sites' starts, template after template. Empty with fixed
    /// acceptance.
    pub fn probes(&self) -> impl Iterator<Item = TemplateSearch<'_, C>> + Clone {
        self.probe_pairs().map(|(t, u)| {
            TemplateSearch { site: self.places[t].0, template: &self.templates[t], start: self.places[u].1 }
        })
    }

    /// The null probes as pairs of searches, in [`probes`](Self::probes)' order: `(t, u)`
    /// is search `t`'s template evaluated at search `u`'s start.
    pub fn probe_pairs(&self) -> impl Iterator<Item = (usize, usize)> + Clone + '_ {
        self.probe_sets().enumerate().flat_map(|(t, us)| us.into_iter().map(move |u| (t, u)))
    }

    /// The null probes by template: for each search `t` in order, the searches at whose
    /// starts its template is evaluated ([`probe_pairs`](Self::probe_pairs) grouped by `t`).
    pub fn probe_sets(&self) -> impl ExactSizeIterator<Item = NullSet> + Clone + '_ {
        (0..self.nulls.len()).map(|t| self.nulls.get(t))
    }

    /// `Some(n)` where [`probe_sets`](Self::probe_sets) are [`spaced_null_sites`](crate::stitch::spaced_null_sites)`(n)`, the
    /// same for every plan of `n` templates (a grid spaced at least a template apart), so
    /// that a caller may make them once for many pairs.
    pub fn spaced_probes(&self) -> Option<usize> {
        match self.nulls {
            NullSets::Spaced { n, .. } => Some(n),
            _ => None,
        }
    }

    /// The parameters of [`probes`](Self::probes).
    pub fn probe_params(&self) -> SearchParams {
        PROBE
    }

    /// Each template's [`NullPeak`] (one for each of [`probe_sets`](Self::probe_sets)) from
    /// the coefficients of [`probes`](Self::probes) (`probed`, in their order, `None` for a
    /// flat window), as [`finish`](Self::finish) takes them. An error where `probed` does
    /// not answer every probe.
    pub fn null_peaks(&self, probed: &[Option<f64>]) -> Result<Vec<NullPeak>> {
        let probes: usize = self.probe_sets().map(|us| us.as_slice().len()).sum();
        if probed.len() != probes {
            return Err(Error::Backend(alloc::format!("{} null probes answered for {}", probed.len(), probes)));
        }
        let mut rest = probed;
        Ok(self
            .probe_sets()
            .map(|us| {
                let (mine, after) = rest.split_at(us.as_slice().len());
                rest = after;
                NullPeak::of(mine.iter().copied())
            })
            .collect())
    }
}

/// [`register_pair_with`]'s first half: the grid, the templates and their texture test, and
/// the null probes, for the searches to be run by the caller ([`PairPlan::finish`]
/// concludes on the same frames and parameters). The plan keeps each template's
/// statistics, not its pixels: the searcher reads those from the reference at the site.
pub fn plan_pair<T: NccSample + Into<f64>>(reference: ImageView<'_, T>, moving: ImageView<'_, T>, p: &RegisterParams, prediction: (f64, f64)) -> Result<PairPlan<TemplateStats>> {
    plan_seen(reference, Seen::upright(moving), p, prediction)
}

impl<C> PairPlan<C> {
    /// The registration from the matches of [`searches`](Self::searches) (`found`, in their
    /// order) and each template's null peak (`nulls`, one for each of
    /// [`probe_sets`](Self::probe_sets): [`null_peaks`](Self::null_peaks) of the
    /// [`probes`](Self::probes)' coefficients, or the same reduced by a device), on the
    /// frames and parameters the plan was made with.
    pub fn finish<T: NccSample + Into<f64>>(self, reference: ImageView<'_, T>, moving: ImageView<'_, T>, p: &RegisterParams, found: &[Option<Match>], nulls: &[NullPeak]) -> Result<PairRegistration> {
        finish_seen(self, reference, Seen::upright(moving), p, found.iter().copied(), nulls, Parallelism::Sequential)
    }

    /// [`finish`](Self::finish) up to its last step, the subpixel refinement of the shift,
    /// which is left to the caller (a device refining a batch of pairs at once). A
    /// similarity consensus of at least `count_elsewhere` point tests stops the conclusion
    /// for its sets to be counted by the caller ([`Concluded::Counting`]: a device counting
    /// a batch of pairs' sets in one launch); `None`, every one is counted on the host.
    pub fn conclude<T: NccSample + Into<f64>>(
        self,
        reference: ImageView<'_, T>,
        moving: ImageView<'_, T>,
        p: &RegisterParams,
        found: impl IntoIterator<Item = Option<Match>, IntoIter: ExactSizeIterator>,
        nulls: &[NullPeak],
        count_elsewhere: Option<usize>,
    ) -> Result<Concluded> {
        conclude_seen(self, reference, Seen::upright(moving), p, found, nulls, count_elsewhere)
    }
}

/// A pair's conclusion ([`PairPlan::conclude`]).
#[derive(Clone, Debug)]
#[allow(clippy::large_enum_variant)] // the common variant in line, the rare one boxed
pub enum Concluded {
    /// Done but for the subpixel refinement of its shift.
    Unrefined(Unrefined),
    /// Waiting for the sets of its similarity consensus (boxed: few pairs wait, and every
    /// conclusion is moved at the size of the largest variant).
    Counting(Box<Counting>),
}

/// A pair's conclusion stopped at its similarity consensus, whose hypotheses' sets the
/// caller counts ([`sets`](Self::sets)) before it [`resume`](Self::resume)s.
#[derive(Clone, Debug)]
pub struct Counting {
    out: PairRegistration,
    agreed: ShiftConsensus,
    consensus: ConsensusCount,
}

impl Counting {
    /// The hypotheses and points to count.
    pub fn sets(&self) -> &ConsensusCount {
        &self.consensus
    }

    /// The conclusion from each hypothesis's `(count, score)` ([`ConsensusCount::finish`];
    /// `None`: counted on the host), on the frames and parameters it was begun with.
    pub fn resume<T: NccSample + Into<f64>>(self, reference: ImageView<'_, T>, moving: ImageView<'_, T>, p: &RegisterParams, counts: Option<&[(usize, f64)]>) -> Unrefined {
        let Counting { out, agreed, consensus } = self;
        let turn = consensus.finish(counts).and_then(|(_, set)| turned_candidate(&out.vectors, &agreed, p, consensus.points(), set));
        conclude_turned(out, &agreed, turn, reference, Seen::upright(moving), p)
    }
}

/// A pair's registration but for the subpixel refinement of its shift ([`PairPlan::conclude`]):
/// `refinement` is what the refinement reads, `None` where the shift stands as it is.
#[derive(Clone, Debug)]
pub struct Unrefined {
    pub registration: PairRegistration,
    pub refinement: Option<ShiftRefinement>,
}

impl Unrefined {
    /// The registration with the refined shift (`refinement`'s answer, on the host
    /// [`ShiftRefinement::on_host`]).
    pub fn refined(self, shift: (f64, f64)) -> PairRegistration {
        let mut out = self.registration;
        if self.refinement.is_some() {
            out.shift = Some(shift);
        }
        out
    }

    /// The registration, refined on the host.
    fn refined_on_host<T: NccSample + Into<f64>>(self, reference: ImageView<'_, T>, moving: ImageView<'_, T>, par: Parallelism) -> PairRegistration {
        match self.refinement.as_ref().map(|r| r.on_host(reference, moving, par)) {
            Some(shift) => self.refined(shift),
            None => self.registration,
        }
    }
}

impl From<PairRegistration> for Unrefined {
    fn from(registration: PairRegistration) -> Self {
        Unrefined { registration, refinement: None }
    }
}

/// [`register_pair_with`] on the moving frame as `seen` ([`register_pair_turned`]; upright:
/// as it is, to the bit).
fn register_pair_seen<T: NccSample + Into<f64>>(
    reference: ImageView<'_, T>,
    seen: Seen<'_, '_, T>,
    p: &RegisterParams,
    prediction: (f64, f64),
    search: &mut dyn FnMut(&[TemplateSearch<'_, Template<T>>], &SearchParams) -> Result<Vec<Option<Match>>>,
    par: Parallelism,
) -> Result<PairRegistration> {
    let plan: PairPlan<Template<T>> = plan_seen(reference, seen, p, prediction)?;
    if plan.ended {
        return Ok(plan.out);
    }
    let searches: Vec<_> = plan.searches().collect();
    let found = if searches.is_empty() { Vec::new() } else { search(&searches, &plan.search)? };
    let probes: Vec<_> = plan.probes().collect();
    // A probe (radius 0) evaluates its one window: its match is the coefficient there.
    let probed: Vec<Option<f64>> = if probes.is_empty() { Vec::new() } else { search(&probes, &PROBE)?.iter().map(|m| m.map(|m| m.coefficient)).collect() };
    drop((searches, probes));
    let nulls = plan.null_peaks(&probed)?;
    finish_seen(plan, reference, seen, p, found.iter().copied(), &nulls, par)
}

fn plan_seen<T: NccSample + Into<f64>, C: TemplateCut<T>>(reference: ImageView<'_, T>, seen: Seen<'_, '_, T>, p: &RegisterParams, prediction: (f64, f64)) -> Result<PairPlan<C>> {
    let (mut plan, mut places) = grid_plan(reference.size(), seen.frame.size(), p, prediction)?;
    let pred = (libm::round(prediction.0) as i64, libm::round(prediction.1) as i64);
    // Each site's template cut and its start (the turned view's where the frame is turned).
    let mut templates = Vec::with_capacity(places.len());
    let mut cut = 0;
    for k in 0..places.len() {
        let site = places[k].0;
        if let Some((template, start)) = seen.template::<C>(reference, site, p, pred, prediction)? {
            places[cut] = (site, start);
            templates.push(template);
            cut += 1;
        }
    }
    places.truncate(cut);
    plan.keep_textured(places, templates, p);
    Ok(plan)
}

/// A pair's plan up to its templates: the checks of the parameters, frames and prediction,
/// and the grid's sites with their searches' starts in an upright moving frame (none, and
/// the plan ended, where the prediction leaves no overlap).
fn grid_plan<C>(size: (usize, usize), moving: (usize, usize), p: &RegisterParams, prediction: (f64, f64)) -> Result<(PairPlan<C>, Vec<Place>)> {
    p.validate()?;
    crate::image::check_same_size(size, moving)?;
    require_finite("prediction x", prediction.0)?;
    require_finite("prediction y", prediction.1)?;
    let (w, h) = size;
    let pred = (libm::round(prediction.0) as i64, libm::round(prediction.1) as i64);
    let out = PairRegistration {
        shift: None,
        skip: None,
        margin: 0.0,
        templates: 0,
        textured: 0,
        above_threshold: 0,
        vectors_used: 0,
        ncc: 0.0,
        confidence: 0.0,
        evaluations: 0,
        vectors: Vec::new(),
        angle: 0.0,
        scale: 1.0,
        phase_significance: None,
    };
    let r = p.search_radius;
    let search = SearchParams { radius: r, subpixel: p.subpixel, accept: (p.method == SearchMethod::Log).then_some(p.cthresh) };
    let mut plan = PairPlan { out, places: Vec::new(), templates: Vec::new(), nulls: NullSets::None, spaced: false, search, ended: false };
    let (Some(gx), Some(gy)) = (grid_axis(w, p.rsz, r, pred.0, p.npts), grid_axis(h, p.rsz, r, pred.1, p.npts)) else {
        plan.out.skip = Some(SkipReason::NoOverlap);
        plan.ended = true;
        return Ok((plan, Vec::new()));
    };
    // The axes' positions ascend, distinct (grid_axis).
    plan.spaced = spaced_apart(&gx, p.rsz) && spaced_apart(&gy, p.rsz);
    let start = |t: usize, pred: i64| t as isize - pred as isize;
    let mut places = Vec::with_capacity(gx.len() * gy.len());
    places.extend(gy.iter().flat_map(|&y| gx.iter().map(move |&x| ((x, y), (start(x, pred.0), start(y, pred.1))))));
    plan.out.templates = places.len();
    Ok((plan, places))
}

impl<C> PairPlan<C> {
    /// Keeps the templates `templates` (at `places`, in order) that have texture, and draws
    /// the null probes among them.
    fn keep_textured<T: NccSample>(&mut self, mut places: Vec<Place>, mut templates: Vec<C>, p: &RegisterParams)
    where
        C: TemplateCut<T>,
    {
        // In place, in order: each textured template moved down past the flat ones before
        // it (those before the first flat one not written: the places may be cold).
        let mut kept = 0;
        for k in 0..templates.len() {
            let stats = TemplateCut::<T>::stats(&templates[k]);
            if !(T::is_flat(stats) || stats.variance() < p.min_variance) {
                if kept != k {
                    places.swap(kept, k);
                    templates.swap(kept, k);
                }
                kept += 1;
            }
        }
        places.truncate(kept);
        templates.truncate(kept);
        (self.places, self.templates) = (places, templates);
        if p.acceptance != Acceptance::Fixed && kept > 0 {
            self.nulls = if self.spaced {
                NullSets::spaced(kept)
            } else {
                let textured_sites: Vec<(usize, usize)> = self.places.iter().map(|t| t.0).collect();
                NullSets::Listed(null_sites(&textured_sites, p.rsz))
            };
        }
    }
}

/// An upright pair's plan before its templates are measured ([`pair_sites`]): a device that
/// sums each site's template itself (integer frames) hands their statistics to
/// [`plan`](Self::plan), which gives [`plan_pair`]'s plan.
pub struct PairSites {
    plan: PairPlan<TemplateStats>,
    sites: Vec<Place>,
}

/// [`plan_pair`] up to the templates' statistics: the checks, the grid's sites and their
/// search starts, and the checks of the template's size.
pub fn pair_sites<T: NccSample>(reference: ImageView<'_, T>, moving: ImageView<'_, T>, p: &RegisterParams, prediction: (f64, f64)) -> Result<PairSites> {
    let (plan, sites) = grid_plan(reference.size(), moving.size(), p, prediction)?;
    if !sites.is_empty() {
        TemplateStats::check_size::<T>((p.rsz, p.rsz))?;
    }
    Ok(PairSites { plan, sites })
}

impl PairSites {
    /// The top-left pixels of the grid's templates, each of side `rsz`, in grid order.
    pub fn sites(&self) -> impl ExactSizeIterator<Item = (usize, usize)> + '_ {
        self.sites.iter().map(|s| s.0)
    }

    /// The plan, from the statistics of each site's template ([`sites`](Self::sites)'
    /// order; [`TemplateStats::of_int_sums`] for integer frames) of pixel type `T`.
    pub fn plan<T: NccSample>(self, stats: impl IntoIterator<Item = TemplateStats, IntoIter: ExactSizeIterator>, p: &RegisterParams) -> Result<PairPlan<TemplateStats>> {
        let stats = stats.into_iter();
        if stats.len() != self.sites.len() {
            return Err(Error::Backend(alloc::format!("{} template statistics answered for {}", stats.len(), self.sites.len())));
        }
        let mut plan = self.plan;
        plan.keep_textured::<T>(self.sites, stats.collect(), p);
        Ok(plan)
    }
}

/// The second half of a registration: the plan's matches made vectors, their thresholds,
/// the consensus and its checks, the refinement.
fn finish_seen<T: NccSample + Into<f64>, C>(
    plan: PairPlan<C>,
    reference: ImageView<'_, T>,
    seen: Seen<'_, '_, T>,
    p: &RegisterParams,
    found: impl IntoIterator<Item = Option<Match>, IntoIter: ExactSizeIterator>,
    nulls: &[NullPeak],
    par: Parallelism,
) -> Result<PairRegistration> {
    match conclude_seen(plan, reference, seen, p, found, nulls, None)? {
        Concluded::Unrefined(unrefined) => Ok(unrefined.refined_on_host(reference, seen.frame, par)),
        // Every consensus counted on the host.
        Concluded::Counting(_) => Err(Error::Backend("internal: a consensus left for a counter with none".into())),
    }
}

/// [`finish_seen`] but for the refinement of an upright pair's shift, stopping at a
/// similarity consensus of at least `count_elsewhere` point tests ([`PairPlan::conclude`]).
fn conclude_seen<T: NccSample + Into<f64>, C>(
    plan: PairPlan<C>,
    reference: ImageView<'_, T>,
    seen: Seen<'_, '_, T>,
    p: &RegisterParams,
    found: impl IntoIterator<Item = Option<Match>, IntoIter: ExactSizeIterator>,
    peaks: &[NullPeak],
    count_elsewhere: Option<usize>,
) -> Result<Concluded> {
    let PairPlan { mut out, places, nulls, search, ended, .. } = plan;
    if ended {
        return Ok(Concluded::Unrefined(out.into()));
    }
    let r = search.radius;
    let found = found.into_iter();
    if found.len() != places.len() {
        return Err(Error::Backend(alloc::format!("{} template searches answered for {}", found.len(), places.len())));
    }
    let (thresholds, null_evaluations) = thresholds(nulls.len(), places.len(), p, peaks)?;
    out.evaluations = null_evaluations;
    out.vectors.reserve(places.len());
    for ((&((tx, ty), start), m), threshold) in places.iter().zip(found).zip(thresholds) {
        // A flat best window has no vector; count it as searched.
        let (found, coefficient, evaluations) = match m {
            Some(m) => (seen.turned(m.position(), p.rsz), m.coefficient, m.evaluations),
            None => ((f64::NAN, f64::NAN), f64::NEG_INFINITY, 0),
        };
        // Adaptive: a best window on the edge of the search area is no peak; the match
        // lies beyond it (the search climbed towards it and hit the edge, as every
        // template of a badly predicted pair does, agreeing on a wrong shift).
        let on_edge = m.is_some_and(|m| (m.x as isize - start.0).unsigned_abs() == r || (m.y as isize - start.1).unsigned_abs() == r);
        let threshold = if on_edge && p.acceptance == Acceptance::Adaptive { f64::INFINITY } else { threshold };
        out.vectors.push(MotionVector {
            template: (tx, ty),
            found,
            shift: (tx as f64 - found.0, ty as f64 - found.1),
            coefficient,
            threshold,
            evaluations,
            inlier: false,
        });
    }
    out.textured = out.vectors.len();
    out.evaluations += out.vectors.iter().map(|v| v.evaluations as u64).sum::<u64>();
    if out.textured == 0 {
        out.skip = Some(SkipReason::NoTexture);
        return Ok(Concluded::Unrefined(out.into()));
    }
    let mut agreed = ShiftConsensus { kept: indices_where(out.vectors.len(), |i| out.vectors[i].coefficient >= out.vectors[i].threshold), inliers: Indices::new(), shift: (0.0, 0.0) };
    out.above_threshold = agreed.kept.len();
    agreed.shift = consensus(&out.vectors, &agreed.kept, p.agreement, &mut agreed.inliers);
    let turn = match p.motion {
        Motion::Similarity => {
            let points = correspondences(&out.vectors, &agreed.kept, p.rsz);
            match turned_set(&out.vectors, &points, &agreed, p, count_elsewhere) {
                TurnedSet::Counting(consensus) => return Ok(Concluded::Counting(Box::new(Counting { out, agreed, consensus }))),
                TurnedSet::Found(set) => turned_candidate(&out.vectors, &agreed, p, &points, set),
                TurnedSet::None => None,
            }
        }
        Motion::Translation => None,
    };
    Ok(Concluded::Unrefined(conclude_turned(out, &agreed, turn, reference, seen, p)))
}

/// The translation consensus of a pair's vectors: those `kept` (at or above their
/// thresholds), and the `inliers` among them that agree on `shift`.
#[derive(Clone, Debug)]
struct ShiftConsensus {
    kept: Indices,
    inliers: Indices,
    shift: (f64, f64),
}

/// The rest of a conclusion from the translation consensus and the similarity consensus's
/// candidate turn `turn` ([`turned_candidate`]): the turn where it stands, else the shift
/// where it stands clear of rivals, with what its refinement reads.
fn conclude_turned<T: NccSample + Into<f64>>(mut out: PairRegistration, agreed: &ShiftConsensus, turn: Option<(Similarity, Vec<usize>)>, reference: ImageView<'_, T>, seen: Seen<'_, '_, T>, p: &RegisterParams) -> Unrefined {
    let ShiftConsensus { kept, inliers, shift } = agreed;
    let shift = *shift;
    if let Some((candidate, turned)) = turn {
        mark_inliers(&mut out, &turned);
        let (refined, angle_error) = if p.refine && p.subpixel { seen.refine(reference, p.rsz, &out.vectors, candidate, p.fit_scale) } else { (candidate, 0.0) };
        if turn_stands(&refined, angle_error, &out.vectors, &turned, p) {
            if let Some(rival) = turned_rival(&out.vectors, &kept, &turned, p) {
                out.skip = Some(SkipReason::Ambiguous { agreeing: turned.len(), rival });
                return out.into();
            }
            (out.shift, out.angle, out.scale) = (Some(refined.shift()), refined.angle, refined.scale);
            return out.into();
        }
        // Back to the translation's result, as if never tried.
        out.vectors.iter_mut().for_each(|v| v.inlier = false);
        (out.vectors_used, out.margin, out.ncc, out.confidence) = (0, 0.0, 0.0, 0.0);
    }
    if inliers.len() < p.min_vectors {
        out.vectors_used = inliers.len();
        out.skip = Some(SkipReason::TooFewVectors {
            above_threshold: kept.len(),
            agreeing: inliers.len(),
            needed: p.min_vectors,
        });
        return out.into();
    }
    if let Some(rival) = ambiguous(&out.vectors, &kept, &inliers, shift, p.agreement, p.min_vectors) {
        out.vectors_used = inliers.len();
        out.skip = Some(SkipReason::Ambiguous { agreeing: inliers.len(), rival });
        return out.into();
    }
    mark_inliers(&mut out, inliers);
    // A turned pair's shift is refined with its turn by `fit_turn` (the shift's refinement reads
    // the frame as it lies, which a turned pair's templates do not match).
    let refinement = if p.refine && p.subpixel && seen.is_upright() { ShiftRefinement::new(p.rsz, &out.vectors, shift) } else { None };
    out.shift = Some(shift);
    Unrefined { registration: out, refinement }
}

/// Resamples a square of the given side from a frame, pixel `d` at `cut(d)` (bilinear):
/// a turned template. Passed in by [`register_pair_turned`], whose pixel types can be
/// resampled; upright pairs need none.
type Resample<'r, T> = &'r dyn Fn(ImageView<'_, T>, &Similarity, usize) -> Result<Image<T>>;

/// The moving frame as a pair's registration sees it: `frame` turned back by `turn` about
/// its centre ([`register_pair_turned`]), or as it is (the identity).
#[derive(Clone, Copy)]
struct Seen<'a, 'r, T> {
    frame: ImageView<'a, T>,
    turn: Similarity,
    resample: Option<Resample<'r, T>>,
}

impl<'a, T: NccSample + Into<f64>> Seen<'a, '_, T> {
    fn upright(frame: ImageView<'a, T>) -> Self {
        Seen { frame, turn: Similarity::IDENTITY, resample: None }
    }

    fn is_upright(&self) -> bool {
        self.turn.is_translation()
    }

    /// The template at `site` of `reference` and where its search starts in the frame,
    /// for the rounded prediction `pred` (exact: `prediction`): upright, the crop itself;
    /// turned, the reference resampled (bilinear) about the template's centre as the turn
    /// shows it in the frame. `None` where a turned template would leave the reference, or
    /// its search start the frame.
    fn template<C: TemplateCut<T>>(&self, reference: ImageView<'_, T>, (tx, ty): (usize, usize), p: &RegisterParams, pred: (i64, i64), prediction: (f64, f64)) -> Result<Option<(C, (isize, isize))>> {
        if self.is_upright() {
            let start = (tx as isize - pred.0 as isize, ty as isize - pred.1 as isize);
            return Ok(Some((C::cut(reference.crop(tx, ty, p.rsz, p.rsz)?)?, start)));
        }
        let half = (p.rsz as f64 - 1.0) / 2.0;
        let c = (tx as f64 + half, ty as f64 + half);
        // Template pixel d shows the reference at c + L (d - half), L the turn's matrix.
        let linear = Similarity { x: 0.0, y: 0.0, ..self.turn };
        let o = linear.apply((half, half));
        let cut = Similarity { x: c.0 - o.0, y: c.1 - o.1, ..linear };
        let (w, h) = reference.size();
        let last = p.rsz as f64 - 1.0;
        let inside = [(0.0, 0.0), (last, 0.0), (0.0, last), (last, last)].iter().all(|&q| {
            let (x, y) = cut.apply(q);
            x >= 0.0 && y >= 0.0 && x <= (w - 1) as f64 && y <= (h - 1) as f64
        });
        // Its centre in the frame: where the turned-back view shows it, turned forward.
        let at = self.turn.inverse().apply((c.0 - prediction.0, c.1 - prediction.1));
        let start = (libm::round(at.0 - half) as isize, libm::round(at.1 - half) as isize);
        // The start itself must be a window of the frame, as on an upright pair's grid: the
        // null probes evaluate the other templates there.
        let fits = |s: isize, len: usize| s >= 0 && s <= len as isize - p.rsz as isize;
        if !inside || !fits(start.0, w) || !fits(start.1, h) {
            return Ok(None);
        }
        let Some(resample) = self.resample else { return Err(Error::Backend("internal: a turned pair with no way to resample templates".into())) };
        let patch = resample(reference, &cut, p.rsz)?;
        Ok(Some((C::cut(patch.view())?, start)))
    }

    /// A match's top-left `position` in the frame, as the turned-back view has it.
    fn turned(&self, position: (f64, f64), rsz: usize) -> (f64, f64) {
        if self.is_upright() {
            return position;
        }
        let half = (rsz as f64 - 1.0) / 2.0;
        let c = self.turn.apply((position.0 + half, position.1 + half));
        (c.0 - half, c.1 - half)
    }

    /// [`refine_motion`] of `motion` (the turned-back view's): on the frame itself, through
    /// the turn.
    fn refine(&self, reference: ImageView<'_, T>, rsz: usize, vectors: &[MotionVector], motion: Similarity, with_scale: bool) -> (Similarity, f64) {
        if self.is_upright() {
            return refine_motion(reference, self.frame, rsz, vectors, motion, with_scale);
        }
        // A template that the turn sends across the frame's edge would stop the whole
        // refinement (an upright pair's grid keeps them inside): leave it out, with a
        // pixel to spare for the refinement's own moves.
        let total = motion.then(&self.turn);
        let back = total.inverse().mapping();
        let (w, h) = self.frame.size();
        let last = rsz as f64 - 1.0;
        let inside = |v: &MotionVector| {
            [(0.0, 0.0), (last, 0.0), (0.0, last), (last, last)].iter().all(|&(u, t)| {
                let (x, y) = back((v.template.0 as f64 + u, v.template.1 as f64 + t));
                x >= 1.0 && y >= 1.0 && x <= (w as f64) - 3.0 && y <= (h as f64) - 3.0
            })
        };
        let kept: Vec<MotionVector> = vectors.iter().map(|v| MotionVector { inlier: v.inlier && inside(v), ..v.clone() }).collect();
        let (m, error) = refine_motion(reference, self.frame, rsz, &kept, total, with_scale);
        (m.then(&self.turn.inverse()), error)
    }
}

/// Marks the vectors used and fills the pair's statistics from them.
fn mark_inliers(out: &mut PairRegistration, inliers: &[usize]) {
    for &i in inliers {
        out.vectors[i].inlier = true;
    }
    out.vectors_used = inliers.len();
    out.margin = inliers.iter().map(|&i| out.vectors[i].coefficient - out.vectors[i].threshold).sum::<f64>() / inliers.len() as f64;
    out.ncc = inliers.iter().map(|&i| out.vectors[i].coefficient).sum::<f64>() / inliers.len() as f64;
    out.confidence = inliers.len() as f64 / out.templates as f64;
}

/// A rotation is a candidate when the angle fitted to the vectors' peaks exceeds this many
/// standard errors (the peaks are noisy: pixel locking, broad peaks on smooth texture).
const TURN_CANDIDATE: f64 = 3.0;
/// A candidate rotation stands when, refined on the templates' pixels, it moves a typical
/// template this far (pixels) beyond the shift; the translation result stands otherwise.
const VISIBLE_TURN: f64 = 0.1;
/// ... and its angle exceeds this many of the refinement's standard errors (an error that
/// takes pixels as independent: blur correlates them, hence the wide margin).
const TURN_SIGNIFICANCE: f64 = 8.0;
/// ... and this many standard errors of the angle fitted to the vectors' peaks.
const PEAK_SIGNIFICANCE: f64 = 3.0;
/// Noise (pixels) assumed per vector at least, so that a perfect fit of few vectors does
/// not make any angle significant.
const VECTOR_NOISE: f64 = 0.1;

/// Fewest vectors a rotated registration rests on: two make a hypothesis, two more confirm.
const MIN_TURNED_VECTORS: usize = 4;

/// The similarity consensus's set among a pair's kept vectors ([`turned_set`]): found (the
/// set's indices among their correspondences), to be counted by the caller, or none.
enum TurnedSet {
    Found(Vec<usize>),
    Counting(ConsensusCount),
    None,
}

/// With [`Motion::Similarity`]: the similarity consensus of the vectors `agreed.kept`
/// (their correspondences `points`), where there are enough of them. Where every kept
/// vector agrees on the shift already, the similarity is fitted to them all, with no search
/// for a consensus; otherwise the search's sets are counted on the host, or left to the
/// caller where there are at least `count_elsewhere` point tests ([`Counting`]).
fn turned_set(v: &[MotionVector], points: &[Correspondence], agreed: &ShiftConsensus, p: &RegisterParams, count_elsewhere: Option<usize>) -> TurnedSet {
    let kept = &agreed.kept;
    if kept.len() < p.min_vectors.max(MIN_TURNED_VECTORS) {
        return TurnedSet::None;
    }
    if agreed.inliers.len() == kept.len() {
        return TurnedSet::Found((0..kept.len()).collect());
    }
    let weights: Vec<f64> = kept.iter().map(|&k| v[k].coefficient).collect();
    let found = match count_elsewhere {
        None => similarity::consensus(points, &weights, p.agreement, &turn_bounds(p)),
        Some(fewest) => match ConsensusCount::new(points.to_vec(), weights, p.agreement, &turn_bounds(p)) {
            Some(counting) if counting.tests() >= fewest => return TurnedSet::Counting(counting),
            Some(counting) => counting.finish(None),
            None => None,
        },
    };
    match found {
        Some((_, set)) => TurnedSet::Found(set),
        None => TurnedSet::None,
    }
}

/// The similarity fitted to the consensus `set` of the kept vectors' correspondences
/// `points` ([`turned_set`]), a candidate when its rotation (or scale) stands out of the
/// peaks' noise and it explains at least as many vectors as the translation consensus;
/// `None` otherwise (the translation result stands, to the bit). The candidate's inliers
/// are indices of the vectors.
fn turned_candidate(v: &[MotionVector], agreed: &ShiftConsensus, p: &RegisterParams, points: &[Correspondence], set: Vec<usize>) -> Option<(Similarity, Vec<usize>)> {
    let needed = p.min_vectors.max(MIN_TURNED_VECTORS);
    let bounds = turn_bounds(p);
    let f = similarity::fit_set(points, &set, p.fit_scale, VECTOR_NOISE)?;
    let turned = libm::fabs(f.motion.angle) > TURN_CANDIDATE * f.angle_error;
    let zoomed = p.fit_scale && libm::fabs(f.motion.scale - 1.0) > TURN_CANDIDATE * f.angle_error;
    // A weak consensus (a minority of the textured templates, as on faint texture) shows
    // no turn: chance agreement bends a few peaks as easily as it moves them, and a false
    // turn, once chained, misplaces every later frame. Grown templates see it if it is there.
    let weak = 3 * set.len() < v.len();
    if weak || set.len() < agreed.inliers.len() || set.len() < needed || !(turned || zoomed) || libm::fabs(f.motion.angle) > bounds.max_angle {
        return None;
    }
    Some((f.motion, set.iter().map(|&k| agreed.kept[k]).collect()))
}

/// Whether the refined similarity `m` of a pair, fitted to the vectors `inliers`, is a turn
/// worth reporting: it moves a typical template (at the root mean square distance from
/// their centroid) by at least [`VISIBLE_TURN`] beyond the shift, and its angle (with a
/// fitted scale, its angle or its zoom) is [`TURN_SIGNIFICANCE`] of the refinement's
/// standard errors (`angle_error`) and [`PEAK_SIGNIFICANCE`] of the peaks' from 0. On
/// smooth, faint texture the refinement's error (pixels independent) is far too small, and
/// the peaks' scatter tells.
fn turn_stands(m: &Similarity, angle_error: f64, v: &[MotionVector], inliers: &[usize], p: &RegisterParams) -> bool {
    if !(libm::fabs(m.angle) >= TURN_SIGNIFICANCE * angle_error) && !(p.fit_scale && libm::fabs(m.scale - 1.0) >= TURN_SIGNIFICANCE * angle_error) {
        return false;
    }
    let points = correspondences(v, inliers, p.rsz);
    let radius = rms_radius(&points);
    let turn = Similarity { x: 0.0, y: 0.0, angle: m.angle, scale: m.scale };
    let moved = turn.apply((radius, 0.0));
    // The peaks' scatter about their own fit says how well the pair shows a turn at all.
    let peaks = similarity::fit(&points, p.fit_scale, VECTOR_NOISE).map_or(f64::INFINITY, |f| f.angle_error);
    // A fitted zoom counts as a turn does: the peaks' error of the angle is that of the
    // relative scale too (both are the fit's spread over the points' radius), and a pure
    // zoom (an endoscope advancing without roll) has no angle to show; judged on the angle
    // alone it never stood, and a zooming sweep was chained at scale 1.
    let shown = libm::fabs(m.angle) >= PEAK_SIGNIFICANCE * peaks || (p.fit_scale && libm::fabs(m.scale - 1.0) >= PEAK_SIGNIFICANCE * peaks);
    libm::hypot(moved.0 - radius, moved.1) >= VISIBLE_TURN && shown
}

/// A zoom is evident in a pair when its inlier vectors fitted with a scale move a typical
/// template (at their root mean square distance from the centroid) this far (pixels)...
const EVIDENT_ZOOM: f64 = 0.3;
/// ... and the relative scale change exceeds this many of the fit's standard errors. (At
/// 0.5 px and 10 errors, a sweep zooming 1 % a frame and rolling 0.5 degrees showed it only
/// after four frames, whose chained error then stayed; at these values no run of the
/// robustness footage without zoom switched.)
const EVIDENT_ZOOM_SIGNIFICANCE: f64 = 5.0;

/// The scale of a pair registered without one (`fit_scale` off) when its vectors show a
/// zoom clearly: a clear majority of the textured templates agree ([`mark_inliers`]'s
/// inliers, at least half), and their correspondences fitted with a scale move a typical
/// template by [`EVIDENT_ZOOM`] at [`EVIDENT_ZOOM_SIGNIFICANCE`] standard errors: the pair
/// motion those correspondences fit. An
/// endoscope advancing zooms by a percent a frame; a pair registered at scale 1 then fits
/// one part of the frame, and the chained positions drifted 8 px in 80 frames, every frame
/// reported `ok`. `None` otherwise (a weak consensus, a phase-correlation match, no zoom).
pub fn evident_zoom(reg: &PairRegistration, p: &RegisterParams) -> Option<Similarity> {
    let inliers = indices_where(reg.vectors.len(), |i| reg.vectors[i].inlier);
    if reg.shift.is_none() || inliers.len() < p.min_vectors.max(MIN_TURNED_VECTORS) || 2 * inliers.len() < reg.textured {
        return None;
    }
    let points = correspondences(&reg.vectors, &inliers, p.rsz);
    let f = similarity::fit(&points, true, VECTOR_NOISE)?;
    let zoom = libm::fabs(f.motion.scale - 1.0);
    (zoom * rms_radius(&points) >= EVIDENT_ZOOM && zoom >= EVIDENT_ZOOM_SIGNIFICANCE * f.angle_error).then_some(f.motion)
}

/// The root mean square distance of the correspondences' moving points from their
/// centroid: where a typical template lies, for judging how far a turn or zoom moves it.
fn rms_radius(points: &[Correspondence]) -> f64 {
    let n = points.len().max(1) as f64;
    let (cx, cy) = points.iter().fold((0.0, 0.0), |c, q| (c.0 + q.moving.0 / n, c.1 + q.moving.1 / n));
    libm::sqrt(points.iter().map(|q| (q.moving.0 - cx) * (q.moving.0 - cx) + (q.moving.1 - cy) * (q.moving.1 - cy)).sum::<f64>() / n)
}

/// The vectors `ks` as correspondences of template centres.
fn correspondences(v: &[MotionVector], ks: &[usize], rsz: usize) -> Points {
    let half = (rsz as f64 - 1.0) / 2.0;
    ks.iter().map(|&k| Correspondence { reference: (v[k].template.0 as f64 + half, v[k].template.1 as f64 + half), moving: (v[k].found.0 + half, v[k].found.1 + half) }).collect()
}

/// The indices below `n` where `keep` holds, in order, in line for a default grid and
/// otherwise allocated once at the most there can be (a filtered collect grows from
/// nothing).
fn indices_where(n: usize, keep: impl Fn(usize) -> bool) -> Indices {
    let mut at = Indices::with_capacity(n);
    at.extend((0..n).filter(|&i| keep(i)));
    at
}

/// The hypotheses a similarity consensus considers: turns up to `max_turn`, zooms up to 20 %
/// when fitted, from vectors at least two templates apart.
fn turn_bounds(p: &RegisterParams) -> Bounds {
    Bounds { max_angle: p.max_turn.to_radians(), max_scale_change: if p.fit_scale { 0.2 } else { 0.0 }, min_baseline: 2.0 * p.rsz as f64 }
}

/// Whether the vectors `kept` outside the similarity consensus `inliers` agree among
/// themselves on another motion as strongly (repeated texture): the rival's centre shift.
fn turned_rival(v: &[MotionVector], kept: &[usize], inliers: &[usize], p: &RegisterParams) -> Option<(f64, f64)> {
    let rest: Vec<usize> = kept.iter().copied().filter(|k| !inliers.contains(k)).collect();
    let needed = p.min_vectors.max(MIN_TURNED_VECTORS);
    if rest.len() < needed {
        return None;
    }
    let weights: Vec<f64> = rest.iter().map(|&k| v[k].coefficient).collect();
    let (f, set) = similarity::consensus(&correspondences(v, &rest, p.rsz), &weights, p.agreement, &turn_bounds(p))?;
    (set.len() >= needed && 2 * set.len() >= inliers.len()).then(|| f.motion.shift())
}

/// A registered pair's similarity, fitted to its agreeing vectors by least squares and
/// refined, for a pair of a sequence that turns, where the registration may have kept a
/// translation because the peaks alone did not show the turn. With `always` (a pair
/// registered on a frame turned back by its predicted turn, whose own turn is then only the
/// prediction) the fit stands whatever its size; otherwise only a turn that is visible and
/// significant once refined, as [`register_pair_with`] decides. `reference` and `moving`
/// are the frames the pair was registered on, `moving` seen turned back by `turn`
/// ([`register_pair_turned`]; the identity for a pair registered upright). Nothing changes for a skipped pair, or one of
/// fewer than three agreeing vectors.
pub fn fit_turn<T: NccSample + Into<f64>>(reg: &mut PairRegistration, reference: ImageView<'_, T>, moving: ImageView<'_, T>, turn: &Similarity, p: &RegisterParams, always: bool) {
    let inliers = indices_where(reg.vectors.len(), |k| reg.vectors[k].inlier);
    if reg.shift.is_none() || inliers.len() < 3 {
        return;
    }
    let Some(f) = similarity::fit(&correspondences(&reg.vectors, &inliers, p.rsz), p.fit_scale, VECTOR_NOISE) else { return };
    if libm::fabs(f.motion.angle - reg.angle) > turn_bounds(p).max_angle {
        return;
    }
    let seen = Seen { frame: moving, turn: *turn, resample: None };
    let (m, angle_error) = if p.refine && p.subpixel { seen.refine(reference, p.rsz, &reg.vectors, f.motion, p.fit_scale) } else { (f.motion, 0.0) };
    if always || turn_stands(&m, angle_error, &reg.vectors, &inliers, p) {
        (reg.shift, reg.angle, reg.scale) = (Some(m.shift()), m.angle, m.scale);
    }
}

/// Each template's acceptance threshold from its null peak (`peaks`, one for each of the
/// plan's `sets` null sets: none with fixed acceptance), in order as they are read, and the
/// probes' evaluations (one a window not flat): the fixed threshold for all `templates`
/// where there are no null sets.
fn thresholds<'a>(sets: usize, templates: usize, p: &'a RegisterParams, peaks: &'a [NullPeak]) -> Result<(impl Iterator<Item = f64> + 'a, u64)> {
    if peaks.len() != sets {
        return Err(Error::Backend(alloc::format!("{} null peaks answered for {} templates", peaks.len(), sets)));
    }
    let fixed = p.acceptance == Acceptance::Fixed || sets == 0;
    let peaks = if fixed { &[] } else { peaks };
    let evaluations = peaks.iter().map(|n| u64::from(n.windows)).sum();
    let from_peaks = peaks.iter().map(|n| n.threshold(p.acceptance, p.cthresh, p.null_margin, p.min_coefficient));
    Ok((from_peaks.chain(core::iter::repeat_n(p.cthresh, if fixed { templates } else { 0 })), evaluations))
}

/// The vectors `kept`'s shifts as the shift consensus tests them, 64 a block.
struct KeptShifts {
    xs: vote::Blocks,
    ys: vote::Blocks,
}

impl KeptShifts {
    fn new(v: &[MotionVector], kept: &[usize]) -> Self {
        KeptShifts { xs: vote::blocks(kept.iter().map(|&j| v[j].shift.0)), ys: vote::blocks(kept.iter().map(|&j| v[j].shift.1)) }
    }

    /// Fills `mask` with the kept vectors within `tol` (Chebyshev) of `shift` (bit `k`:
    /// `kept[k]`) and returns their count.
    fn near(&self, shift: (f64, f64), tol: f64, mask: &mut vote::Mask) -> usize {
        vote::fill_mask(mask, &ShiftNear { shift, tol, xs: &self.xs, ys: &self.ys })
    }
}

/// Among the vectors `kept` (their shifts `shifts`), the hypothesis (a vector's shift) with
/// the largest set within `tol` (Chebyshev), ties to the larger score (the set's
/// coefficients summed in its order from -0.0, as an iterator's sum), the first of equals:
/// its count, score, vector and set (bit `k`: `kept[k]`).
fn best_hypothesis_of(v: &[MotionVector], kept: &[usize], shifts: &KeptShifts, tol: f64) -> Option<(usize, f64, usize, vote::MaskWords)> {
    let weights: SmallVec<[f64; GRID_IN_LINE]> = kept.iter().map(|&j| v[j].coefficient).collect();
    vote::best_set_and_mask(&weights, kept.iter().copied(), |&i, mask| shifts.near(v[i].shift, tol, mask), -0.0)
}

/// [`best_hypothesis_of`]'s count, score and vector (`(0, -inf, None)` with no vector).
#[cfg(test)]
fn best_hypothesis(v: &[MotionVector], kept: &[usize], tol: f64) -> (usize, f64, Option<usize>) {
    best_hypothesis_of(v, kept, &KeptShifts::new(v, kept), tol).map_or((0, f64::NEG_INFINITY, None), |(n, s, i, _)| (n, s, Some(i)))
}

/// [`best_hypothesis`]'s test of a hypothesis `shift` over the vectors' shifts in blocks:
/// within `tol` of it on both axes, 64 vectors a word.
struct ShiftNear<'a> {
    shift: (f64, f64),
    tol: f64,
    xs: &'a vote::Blocks,
    ys: &'a vote::Blocks,
}

impl vote::Test for ShiftNear<'_> {
    #[inline(always)]
    fn word(&self, w: usize) -> u64 {
        let (xs, ys) = (&self.xs[w], &self.ys[w]);
        vote::word(|j| shift_near((xs[j], ys[j]), self.shift, self.tol))
    }
}

/// Whether the shift `a` lies within `tol` (Chebyshev) of `b`: the shift consensus's test,
/// inlined into its vectorized form too (both axes tested, `&` not `&&`: a branch-free
/// test reads every lane with plain loads, not masked ones).
#[inline(always)]
fn shift_near(a: (f64, f64), b: (f64, f64), tol: f64) -> bool {
    ((a.0 - b.0).abs() <= tol) & ((a.1 - b.1).abs() <= tol)
}

/// The consensus of the vectors `kept`: for each as hypothesis, the set within `tol`
/// (Chebyshev) of it; the largest set (ties: larger coefficient sum) wins; its mean is
/// the shift, and the set is re-gathered once around that mean where that keeps at least
/// as many. Returns the shift; `set` becomes its vectors, in order (gathered in place: a
/// pair's index lists are held in line, and moving one copies all of it).
fn consensus(v: &[MotionVector], kept: &[usize], tol: f64, set: &mut Indices) -> (f64, f64) {
    let mean = |set: &[usize]| -> (f64, f64) {
        let n = set.len().max(1) as f64;
        (set.iter().map(|&j| v[j].shift.0).sum::<f64>() / n, set.iter().map(|&j| v[j].shift.1).sum::<f64>() / n)
    };
    set.clear();
    let shifts = KeptShifts::new(v, kept);
    // The sets are read from the vote's masks, not gathered again from the shifts.
    let Some((_, _, _, winner)) = best_hypothesis_of(v, kept, &shifts, tol) else { return (0.0, 0.0) };
    set.extend(vote::members(&winner).map(|k| kept[k]));
    if set.is_empty() {
        return (0.0, 0.0);
    }
    let m = mean(set);
    let mut around_mean = winner;
    // Counted before it is gathered, in place of the winner's set.
    if shifts.near(m, tol, &mut around_mean) < set.len() {
        return m;
    }
    set.clear();
    set.extend(vote::members(&around_mean).map(|k| kept[k]));
    mean(set)
}

/// The luminance a frame is registered on: gray frames as they are, RGBA as Rec. 601 luma
/// (u8).
#[derive(Clone, Debug)]
pub enum Gray<'a> {
    U8(ImageView<'a, u8>),
    U16(ImageView<'a, u16>),
    F32(ImageView<'a, f32>),
}

/// The luma image an RGBA frame needs (None for gray frames, registered in place).
pub fn luma_storage(v: &AnyView<'_>) -> Option<Image<u8>> {
    match v {
        AnyView::Rgba8(v) => Some(v.convert::<u8>()),
        _ => None,
    }
}

/// The [`Gray`] view of `v`, using `storage` (from [`luma_storage`]) for RGBA.
pub fn gray<'a>(v: &AnyView<'a>, storage: &'a Option<Image<u8>>) -> Result<Gray<'a>> {
    Ok(match (v, storage) {
        (AnyView::U8(v), _) => Gray::U8(*v),
        (AnyView::U16(v), _) => Gray::U16(*v),
        (AnyView::F32(v), _) => Gray::F32(*v),
        (AnyView::Rgba8(_), Some(l)) => Gray::U8(l.view()),
        (AnyView::Rgba8(_), None) => {
            return Err(Error::InvalidParameter { name: "luma storage", reason: "missing for an RGBA frame".into() })
        }
    })
}

/// Windows a logarithmic search evaluates a template, about (null probes included): 2 100
/// to 2 300 a pair of 36 templates, 3 700 to 4 000 of 64, on the PAL and half-PAL
/// benchmarks.
const LOG_EVALUATIONS: usize = 60;

/// Above this many window pixels summed per frame pixel, a frame's integral images cost
/// less than summing each window with its cross term. Measured on the stitching benchmarks
/// (2-core x86-64 VM, u8): at 3 to 9 window pixels a frame pixel (PAL, 720 x 576) the sums
/// were 10 to 36 % faster; at 13 to 20 (half PAL, 360 x 288, 36 templates) as fast; at 23
/// to 36 (half PAL, 64 templates) up to 15 % slower.
const DIRECT_SUMS_PER_PIXEL: usize = 16;

/// The moving frame `view` prepared for `p`'s searches in `buffer` (its integral images,
/// reused): without them where the searches evaluate few enough windows for the frame's
/// size and a window's sums from its pixels are the tables' ([`SearchFrame::for_few_windows`]:
/// the same coefficients).
pub(crate) fn search_frame<'v, T: NccSample>(view: ImageView<'v, T>, buffer: Integral<T>, p: &RegisterParams, par: Parallelism) -> Result<SearchFrame<'v, T>> {
    let summed = p.npts.saturating_mul(p.npts).saturating_mul(LOG_EVALUATIONS).saturating_mul(p.rsz.saturating_mul(p.rsz));
    let few = summed <= DIRECT_SUMS_PER_PIXEL.saturating_mul(view.width().saturating_mul(view.height()));
    match p.method {
        SearchMethod::Log | SearchMethod::LogPlain if few => SearchFrame::for_few_windows(view, buffer, par),
        _ => SearchFrame::with_buffer_on(view, buffer, par),
    }
}

/// [`register_pair`] on run-time typed frames (of the same type; RGBA registers on luma).
pub fn register_pair_any(
    reference: AnyView<'_>,
    moving: AnyView<'_>,
    p: &RegisterParams,
    prediction: (f64, f64),
    par: Parallelism,
) -> Result<PairRegistration> {
    if reference.type_name() != moving.type_name() {
        return Err(Error::UnsupportedType { op: "register pair", types: "frames of two different pixel types" });
    }
    let (ls, lm) = (luma_storage(&reference), luma_storage(&moving));
    match (gray(&reference, &ls)?, gray(&moving, &lm)?) {
        (Gray::U8(a), Gray::U8(b)) => register_pair(a, &search_frame(b, Default::default(), p, par)?, p, prediction, par),
        (Gray::U16(a), Gray::U16(b)) => register_pair(a, &search_frame(b, Default::default(), p, par)?, p, prediction, par),
        (Gray::F32(a), Gray::F32(b)) => register_pair(a, &search_frame(b, Default::default(), p, par)?, p, prediction, par),
        _ => Err(Error::UnsupportedType { op: "register pair", types: "frames of two different pixel types" }),
    }
}

#[cfg(test)]
mod tests {
    /// A log search's frame goes without integral images where its windows sum to few
    /// pixels for the frame's size (PAL with either grid), with them where they sum to many
    /// (half PAL with 64 templates of 31), for an exhaustive search, and for f32 frames.
    #[test]
    fn frames_without_tables_where_few_windows_are_summed() {
        let tables = |w: usize, h: usize, npts: usize, rsz: usize, method: SearchMethod| {
            let img = crate::image::Image::from_fn(w, h, |x, y| (x * 3 + y * 5) as u8).unwrap();
            let p = RegisterParams { npts, rsz, method, ..Default::default() };
            search_frame(img.view(), Integral::default(), &p, Parallelism::Sequential).unwrap().has_tables()
        };
        assert!(!tables(720, 576, 6, 25, SearchMethod::Log) && !tables(720, 576, 8, 31, SearchMethod::LogPlain));
        assert!(!tables(360, 288, 6, 25, SearchMethod::Log));
        assert!(tables(360, 288, 8, 31, SearchMethod::Log) && tables(720, 576, 6, 25, SearchMethod::Exhaustive));
        let floats = crate::image::Image::from_fn(720, 576, |x, _| x as f32).unwrap();
        assert!(search_frame(floats.view(), Integral::default(), &RegisterParams::default(), Parallelism::Sequential).unwrap().has_tables());
    }

    /// [`best_hypothesis`] by its definition: every hypothesis counted and scored.
    fn best_hypothesis_reference(v: &[MotionVector], kept: &[usize], tol: f64) -> (usize, f64, Option<usize>) {
        let near = |a: (f64, f64), b: (f64, f64)| libm::fabs(a.0 - b.0) <= tol && libm::fabs(a.1 - b.1) <= tol;
        let mut best: (usize, f64, Option<usize>) = (0, f64::NEG_INFINITY, None);
        for &i in kept {
            let (count, score) = kept.iter().filter(|&&j| near(v[j].shift, v[i].shift)).fold((0, -0.0), |(n, s), &j| (n + 1, s + v[j].coefficient));
            if count > best.0 || (count == best.0 && score > best.1) {
                best = (count, score, Some(i));
            }
        }
        best
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        /// Up to 150 vectors (three words of bits) in a few clusters with outliers, some
        /// at equal shifts and coefficients (ties), some left out of `kept`.
        #[test]
        fn best_hypothesis_matches_the_reference(n in 0usize..150, clusters in 1usize..4, seed in proptest::prelude::any::<u64>(), tol in 0.1f64..2.0) {
            let mut rng = crate::stitch::SplitMix64::new(seed);
            let mut unit = move || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            let centres: Vec<(f64, f64)> = (0..clusters).map(|_| (20.0 * unit() - 10.0, 20.0 * unit() - 10.0)).collect();
            let v: Vec<MotionVector> = (0..n)
                .map(|k| {
                    let c = centres[k % clusters];
                    let shift = if unit() < 0.2 { (40.0 * unit() - 20.0, 40.0 * unit() - 20.0) } else if unit() < 0.3 { c } else { (c.0 + tol * (unit() - 0.5), c.1 + tol * (unit() - 0.5)) };
                    let coefficient = if unit() < 0.3 { 0.75 } else { unit() };
                    MotionVector { template: (k, k), found: (0.0, 0.0), shift, coefficient, threshold: 0.0, evaluations: 0, inlier: false }
                })
                .collect();
            let kept: Vec<usize> = (0..n).filter(|_| unit() < 0.9).collect();
            let (want, got) = (best_hypothesis_reference(&v, &kept, tol), best_hypothesis(&v, &kept, tol));
            proptest::prop_assert_eq!((want.0, want.1.to_bits(), want.2), (got.0, got.1.to_bits(), got.2));
        }
    }

    use super::*;
    use crate::image::Rgba8;
    use crate::stitch::{synth_sequence, SynthParams};
    use crate::stitch::texture;
    use alloc::vec;

    fn pair<P: crate::stitch::SynthPixel>(src: &Image<P>, seed: u64) -> (Image<P>, Image<P>, (f64, f64)) {
        let sp = SynthParams { frame_width: 150, frame_height: 120, frames: 8, max_step: 3.0, noise_sigma: 2.0, seed, ..Default::default() };
        let mut s = synth_sequence(src.view(), &sp, Parallelism::Sequential).unwrap();
        let t = (s.positions[7].0 - s.positions[6].0, s.positions[7].1 - s.positions[6].1);
        let b = s.frames.pop().unwrap();
        let a = s.frames.pop().unwrap();
        (a, b, t)
    }

    fn close(got: Option<(f64, f64)>, want: (f64, f64), tol: f64) -> bool {
        got.is_some_and(|g| (g.0 - want.0).abs() < tol && (g.1 - want.1).abs() < tol)
    }

    #[test]
    fn registers_every_pixel_type_to_subpixel_accuracy() {
        let src = texture(260, 220, 5);
        let p = RegisterParams::default();
        let s = Parallelism::Sequential;
        for seed in 1..4 {
            let (a, b, t) = pair(&src.map(|v| v.round() as u8), seed);
            let r = register_pair(a.view(), &SearchFrame::new(b.view()).unwrap(), &p, (0.0, 0.0), s).unwrap();
            assert!(close(r.shift, t, 0.15), "u8 {:?} vs {t:?}", r.shift);
            assert!(r.vectors_used >= 20 && r.ncc > 0.9 && r.confidence > 0.5, "{r:?}");
            // The searches, and one evaluation per null probe.
            assert!(r.evaluations <= 36 * (9 + 8 * 4 + 5 + crate::stitch::accept::NULL_SAMPLES as u64));
            let (a, b, t) = pair(&src.map(|v| (v * 200.0) as u16), seed);
            let q = RegisterParams { min_variance: 4.0 * 200.0 * 200.0, ..p };
            let r = register_pair(a.view(), &SearchFrame::new(b.view()).unwrap(), &q, (0.0, 0.0), s).unwrap();
            assert!(close(r.shift, t, 0.15), "u16 {:?} vs {t:?}", r.shift);
            let (a, b, t) = pair(&src, seed);
            let r = register_pair(a.view(), &SearchFrame::new(b.view()).unwrap(), &p, (0.0, 0.0), s).unwrap();
            assert!(close(r.shift, t, 0.15), "f32 {:?} vs {t:?}", r.shift);
            let rgba = src.map(|v| Rgba8::new(v as u8, (255.0 - v) as u8, (v / 2.0) as u8, 255));
            let (a, b, t) = pair(&rgba, seed);
            let r = register_pair_any(AnyView::Rgba8(a.view()), AnyView::Rgba8(b.view()), &p, (0.0, 0.0), s).unwrap();
            assert!(close(r.shift, t, 0.15), "rgba {:?} vs {t:?}", r.shift);
        }
    }

    /// A pair turned by up to 3 degrees about a point of the frame: the similarity motion
    /// comes back within a hundredth of a degree and a tenth of a pixel at the corners; the
    /// translation model cannot describe it; a translated pair keeps its translation result
    /// to the bit.
    #[test]
    fn a_turned_pair_registers_its_rotation() {
        use crate::stitch::warp::warp;
        let src = texture(260, 220, 4).map(|v| v.round() as u8);
        let reference = src.view().crop(30, 20, 200, 160).unwrap().to_image();
        let s = Parallelism::Sequential;
        for (angle, shift) in [(1.0f64, (2.5, -1.5)), (-3.0, (-4.0, 3.0)), (0.3, (0.7, 0.2))] {
            let truth = Similarity::about((90.0, 70.0), shift, angle.to_radians(), 1.0);
            // The moving frame's pixel p shows the reference at truth(p).
            let moving = warp(src.view(), &Similarity::translation((30.0, 20.0)).then(&truth)).unwrap().view().crop(0, 0, 200, 160).unwrap().to_image();
            let m = SearchFrame::new(moving.view()).unwrap();
            let r = register_pair(reference.view(), &m, &RegisterParams::default(), (0.0, 0.0), s).unwrap();
            let got = r.motion().unwrap_or_else(|| panic!("{angle}: {r:?}"));
            assert!((got.angle - truth.angle).abs().to_degrees() < 0.01, "{angle}: {got:?} vs {truth:?}");
            for corner in [(0.0, 0.0), (199.0, 0.0), (0.0, 159.0), (199.0, 159.0)] {
                let (a, b) = (got.apply(corner), truth.apply(corner));
                assert!((a.0 - b.0).hypot(a.1 - b.1) < 0.1, "{angle}: corner {corner:?}");
            }
            let t = RegisterParams { motion: Motion::Translation, ..Default::default() };
            let r = register_pair(reference.view(), &m, &t, (0.0, 0.0), s).unwrap();
            assert_eq!(r.angle, 0.0);
        }
        // A zoom of 3 % with a turn, with the scale fitted (`fit_scale`); without, no
        // similarity of scale 1 explains it well enough to stand for it.
        let truth = Similarity::about((100.0, 80.0), (1.5, -2.0), 1.5f64.to_radians(), 1.03);
        let moving = warp(src.view(), &Similarity::translation((30.0, 20.0)).then(&truth)).unwrap().view().crop(0, 0, 200, 160).unwrap().to_image();
        let m = SearchFrame::new(moving.view()).unwrap();
        let zoom = RegisterParams { fit_scale: true, ..Default::default() };
        let got = register_pair(reference.view(), &m, &zoom, (0.0, 0.0), s).unwrap().motion().unwrap();
        assert!((got.scale - 1.03).abs() < 1e-3 && (got.angle - truth.angle).abs().to_degrees() < 0.02, "{got:?}");
        for corner in [(0.0, 0.0), (199.0, 159.0)] {
            let (a, b) = (got.apply(corner), truth.apply(corner));
            assert!((a.0 - b.0).hypot(a.1 - b.1) < 0.1, "zoom: corner {corner:?}");
        }
        let (a, b, _) = pair(&src, 2);
        let m = SearchFrame::new(b.view()).unwrap();
        let sim = register_pair(a.view(), &m, &RegisterParams::default(), (0.0, 0.0), s).unwrap();
        let tra = register_pair(a.view(), &m, &RegisterParams { motion: Motion::Translation, ..Default::default() }, (0.0, 0.0), s).unwrap();
        assert_eq!(sim, tra);
    }

    /// A pair zoomed by 1.5 % registers without a scale (the default) on most templates,
    /// and its vectors show the zoom: `evident_zoom` gives it back within 2e-3; a translated
    /// pair, a zoom of 0.2 %, and a failed pair show none.
    #[test]
    fn a_zoom_is_evident_in_the_vectors_of_a_scale_free_registration() {
        use crate::stitch::warp::warp;
        let src = texture(260, 220, 6).map(|v| v.round() as u8);
        let reference = src.view().crop(30, 20, 200, 160).unwrap().to_image();
        let p = RegisterParams::default();
        let zoomed = |scale: f64| {
            let truth = Similarity::about((100.0, 80.0), (1.0, -0.5), 0.0, scale);
            let moving = warp(src.view(), &Similarity::translation((30.0, 20.0)).then(&truth)).unwrap().view().crop(0, 0, 200, 160).unwrap().to_image();
            register_pair(reference.view(), &SearchFrame::new(moving.view()).unwrap(), &p, (0.0, 0.0), Parallelism::Sequential).unwrap()
        };
        let r = zoomed(1.015);
        assert!(r.shift.is_some() && r.scale == 1.0, "{r:?}");
        let got = evident_zoom(&r, &p).unwrap_or_else(|| panic!("{r:?}")).scale;
        assert!((got - 1.015).abs() < 2e-3, "{got}");
        assert_eq!(evident_zoom(&zoomed(1.002), &p), None);
        let (a, b, _) = pair(&src, 2);
        let r = register_pair(a.view(), &SearchFrame::new(b.view()).unwrap(), &p, (0.0, 0.0), Parallelism::Sequential).unwrap();
        assert!(r.shift.is_some());
        assert_eq!(evident_zoom(&r, &p), None);
        let failed = PairRegistration { shift: None, ..r };
        assert_eq!(evident_zoom(&failed, &p), None);
    }

    #[test]
    fn exhaustive_method_agrees_and_costs_more() {
        let src = texture(260, 220, 9).map(|v| v.round() as u8);
        let (a, b, t) = pair(&src, 3);
        let m = SearchFrame::new(b.view()).unwrap();
        let log = register_pair(a.view(), &m, &RegisterParams::default(), (0.0, 0.0), Parallelism::AllThreads).unwrap();
        let ex = RegisterParams { method: SearchMethod::Exhaustive, ..Default::default() };
        let ex = register_pair(a.view(), &m, &ex, (0.0, 0.0), Parallelism::AllThreads).unwrap();
        assert!(close(log.shift, t, 0.15) && close(ex.shift, t, 0.15));
        assert!(ex.evaluations >= 10 * log.evaluations, "{} vs {}", ex.evaluations, log.evaluations);
    }

    #[test]
    fn degenerate_pairs_are_skipped_with_a_reason() {
        let src = texture(260, 220, 2).map(|v| v.round() as u8);
        let (a, b, _) = pair(&src, 1);
        let p = RegisterParams::default();
        let s = Parallelism::Sequential;
        let flat = Image::<u8>::filled(150, 120, 90).unwrap();
        // Flat reference: no template has texture.
        let r = register_pair(flat.view(), &SearchFrame::new(b.view()).unwrap(), &p, (0.0, 0.0), s).unwrap();
        assert_eq!((r.shift, r.skip.clone()), (None, Some(SkipReason::NoTexture)));
        // Flat moving frame: every window is flat, no vector reaches cthresh.
        let r = register_pair(a.view(), &SearchFrame::new(flat.view()).unwrap(), &p, (0.0, 0.0), s).unwrap();
        assert!(matches!(r.skip, Some(SkipReason::TooFewVectors { above_threshold: 0, .. })), "{r:?}");
        // Pure noise: vectors are weak and disagree.
        let mut rng = crate::stitch::SplitMix64::new(4);
        let noise = Image::from_fn(150, 120, |_, _| (rng.next_u64() >> 56) as u8).unwrap();
        let r = register_pair(a.view(), &SearchFrame::new(noise.view()).unwrap(), &p, (0.0, 0.0), s).unwrap();
        assert!(r.shift.is_none() && matches!(r.skip, Some(SkipReason::TooFewVectors { .. })), "{r:?}");
        assert!(r.skip.unwrap().describe().contains("too few vectors"));
        // A prediction that leaves no overlap.
        let r = register_pair(a.view(), &SearchFrame::new(b.view()).unwrap(), &p, (140.0, 0.0), s).unwrap();
        assert_eq!(r.skip, Some(SkipReason::NoOverlap));
        for far in [(1e300, 0.0), (0.0, -1e300), (f64::MAX, f64::MIN)] {
            let r = register_pair(a.view(), &SearchFrame::new(b.view()).unwrap(), &p, far, s).unwrap();
            assert_eq!(r.skip, Some(SkipReason::NoOverlap), "{far:?}");
        }
        // An unrelated frame (no overlap in content): no consensus.
        let other = texture(150, 120, 77).map(|v| v.round() as u8);
        let r = register_pair(a.view(), &SearchFrame::new(other.view()).unwrap(), &p, (0.0, 0.0), s).unwrap();
        assert!(r.shift.is_none(), "{r:?}");
    }

    #[test]
    fn consensus_ignores_outliers() {
        let v = |sx: f64, sy: f64, c: f64| MotionVector { template: (0, 0), found: (0.0, 0.0), shift: (sx, sy), coefficient: c, threshold: 0.5, evaluations: 0, inlier: false };
        let vs = [v(3.0, 1.0, 0.9), v(3.2, 0.9, 0.95), v(2.9, 1.1, 0.9), v(-8.0, 4.0, 0.99), v(-8.1, 4.0, 0.99), v(20.0, 20.0, 1.0)];
        let kept: Vec<usize> = (0..vs.len()).collect();
        let mut set = Indices::new();
        let s = consensus(&vs, &kept, 1.0, &mut set);
        assert_eq!(set[..], [0, 1, 2]);
        assert!((s.0 - 3.1 / 1.0 * 1.0).abs() < 0.2 && (s.1 - 1.0).abs() < 1e-9, "{s:?}");
        assert!((s.0 - (3.0 + 3.2 + 2.9) / 3.0).abs() < 1e-12);
        assert_eq!(consensus(&vs, &[], 1.0, &mut set), (0.0, 0.0));
        assert!(set.is_empty());
    }

    /// [`consensus`] as defined: the winner's set gathered, then gathered again around its
    /// mean, the larger (the regathered one on a tie) kept.
    fn consensus_reference(v: &[MotionVector], kept: &[usize], tol: f64) -> ((f64, f64), Vec<usize>) {
        let gather = |c: (f64, f64)| -> Vec<usize> { kept.iter().copied().filter(|&j| shift_near(v[j].shift, c, tol)).collect() };
        let mean = |set: &[usize]| -> (f64, f64) {
            let n = set.len().max(1) as f64;
            (set.iter().map(|&j| v[j].shift.0).sum::<f64>() / n, set.iter().map(|&j| v[j].shift.1).sum::<f64>() / n)
        };
        let Some(i) = best_hypothesis(v, kept, tol).2 else { return ((0.0, 0.0), Vec::new()) };
        let best = gather(v[i].shift);
        let m = mean(&best);
        let again = gather(m);
        if again.len() >= best.len() {
            (mean(&again), again)
        } else {
            (m, best)
        }
    }

    #[test]
    fn the_consensus_regathered_around_its_mean_grows_or_stays_as_defined() {
        // Shifts in a few loose clusters a tolerance wide, so that the mean's set is now
        // larger, now smaller than the winner's; every kept subset, in and out of line.
        let mut rng = crate::stitch::SplitMix64::new(17);
        let mut unit = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let (mut grew, mut shrank) = (0, 0);
        for case in 0..3000 {
            let n = [3, 9, 40, 70][case % 4];
            let centres = [(0.0, 0.0), (1.7, 0.4), (-1.2, 2.1)];
            let vs: Vec<MotionVector> = (0..n)
                .map(|k| {
                    let c = centres[k % (1 + case % 3)];
                    let shift = (c.0 + 2.2 * unit() - 1.1, c.1 + 2.2 * unit() - 1.1);
                    MotionVector { template: (0, 0), found: (0.0, 0.0), shift, coefficient: 0.5 + 0.5 * unit(), threshold: 0.5, evaluations: 0, inlier: false }
                })
                .collect();
            let kept: Vec<usize> = (0..n).filter(|_| unit() < 0.8).collect();
            let (want_shift, want_set) = consensus_reference(&vs, &kept, 1.0);
            let mut set = Indices::new();
            let shift = consensus(&vs, &kept, 1.0, &mut set);
            assert_eq!((shift, &set[..]), (want_shift, &want_set[..]), "case {case}");
            if let Some(i) = best_hypothesis(&vs, &kept, 1.0).2 {
                let first = kept.iter().filter(|&&j| shift_near(vs[j].shift, vs[i].shift, 1.0)).count();
                grew += usize::from(set.len() > first);
                shrank += usize::from(set.len() == first && kept.iter().filter(|&&j| shift_near(vs[j].shift, shift, 1.0)).count() < first);
            }
        }
        // Both ways out of the regathering occur.
        assert!(grew > 0 && shrank > 0, "grew {grew}, kept the winner's {shrank}");
    }

    #[test]
    fn grid_spreads_over_the_valid_range() {
        assert_eq!(grid_axis(200, 25, 32, 0, 3).as_deref(), Some(&[32, 88, 143][..]));
        assert_eq!(grid_axis(200, 25, 32, 10, 2).as_deref(), Some(&[42, 153][..]));
        assert_eq!(grid_axis(200, 25, 32, -10, 2).as_deref(), Some(&[22, 133][..]));
        assert_eq!(grid_axis(200, 25, 32, 0, 1).as_deref(), Some(&[87][..]));
        // A narrow range: positions closer than a quarter template merge.
        assert_eq!(grid_axis(200, 25, 32, 130, 6).as_deref(), Some(&[162, 170][..]));
        assert_eq!(grid_axis(200, 25, 32, 140, 6).as_deref(), Some(&[172][..]));
        assert_eq!(grid_axis(80, 25, 32, 0, 2), None);
        assert_eq!(grid_axis(200, 25, 32, 200, 2), None);
        // Found by fuzzing: predictions of 1e300 (i64::MAX once rounded) overflowed.
        assert_eq!(grid_axis(200, 25, 32, i64::MAX, 2), None);
        assert_eq!(grid_axis(200, 25, 32, i64::MIN, 2), None);
    }

    /// The plan a device makes from its own template sums (`pair_sites`, then
    /// `PairSites::plan` with `of_int_sums`) is `plan_pair`'s, errors included; statistics
    /// of the wrong count are an error.
    #[test]
    fn a_plan_from_template_sums_is_plan_pairs() {
        let a = texture(160, 120, 3).map(|v| v as u8);
        let b = texture(160, 120, 4).map(|v| (v as u16) * 200);
        let d = RegisterParams { rsz: 21, npts: 4, search_radius: 8, ..Default::default() };
        fn check<T: NccSample + Into<f64>>(r: ImageView<'_, T>, p: &RegisterParams, prediction: (f64, f64)) {
            let want = plan_pair(r, r, p, prediction);
            let got = pair_sites(r, r, p, prediction).and_then(|sites| {
                let stats = sites
                    .sites()
                    .map(|(x, y)| {
                        let t = r.crop(x, y, p.rsz, p.rsz).unwrap();
                        let (s1, s2) = t.rows().flatten().fold((0u64, 0u64), |(a, b), &v| {
                            let v: f64 = v.into();
                            (a + v as u64, b + (v * v) as u64)
                        });
                        TemplateStats::of_int_sums((p.rsz * p.rsz) as u64, s1, s2)
                    })
                    .collect::<Vec<_>>();
                sites.plan::<T>(stats, p)
            });
            match (want, got) {
                (Ok(want), Ok(got)) => {
                    let key = |s: TemplateSearch<'_, TemplateStats>| (s.site, *s.template, s.start);
                    assert_eq!(want.searches().map(key).collect::<Vec<_>>(), got.searches().map(key).collect::<Vec<_>>(), "{p:?} {prediction:?}");
                    assert_eq!(want.probes().map(key).collect::<Vec<_>>(), got.probes().map(key).collect::<Vec<_>>(), "{p:?} {prediction:?}");
                    assert_eq!(want.out, got.out);
                }
                // Debug text: a NaN in the error is not equal to itself.
                (Err(want), Err(got)) => assert_eq!(alloc::format!("{want:?}"), alloc::format!("{got:?}"), "{p:?} {prediction:?}"),
                (want, got) => panic!("{p:?} {prediction:?}: plan_pair {:?}, from sums {:?}", want.err(), got.err()),
            }
        }
        for p in [d, RegisterParams { min_variance: 400.0, ..d }, RegisterParams { acceptance: Acceptance::Fixed, ..d }, RegisterParams { rsz: 2, ..d }, RegisterParams { rsz: 200, ..d }] {
            for prediction in [(0.0, 0.0), (12.4, -7.6), (150.0, 0.0), (f64::NAN, 0.0)] {
                check(a.view(), &p, prediction);
                check(b.view(), &p, prediction);
            }
        }
        let sites = pair_sites(a.view(), a.view(), &d, (0.0, 0.0)).unwrap();
        assert!(matches!(sites.plan::<u8>(Vec::new(), &d), Err(Error::Backend(_))));
    }

    /// A plan's null peaks come one a template from its probes' coefficients, each counting
    /// the windows that were not flat; coefficients or peaks of the wrong count are an error.
    #[test]
    fn null_peaks_are_a_templates_and_their_count_is_checked() {
        let a = texture(160, 120, 3).map(|v| v as u8);
        let p = RegisterParams { rsz: 21, npts: 4, search_radius: 8, ..Default::default() };
        let plan = plan_pair(a.view(), a.view(), &p, (0.0, 0.0)).unwrap();
        let (templates, probes) = (plan.probe_sets().len(), plan.probes().count());
        assert!(templates > 1 && probes > templates, "{templates} {probes}");
        // The first probe's window flat; the others' coefficients rising with their index.
        let probed: Vec<Option<f64>> = (0..probes).map(|k| (k > 0).then_some(k as f64 / probes as f64)).collect();
        let peaks = plan.null_peaks(&probed).unwrap();
        assert_eq!(peaks.len(), templates);
        assert_eq!(peaks.iter().map(|n| n.windows as usize).sum::<usize>(), probes - 1);
        let mut first = 0;
        for (set, peak) in plan.probe_sets().zip(&peaks) {
            let last = first + set.as_slice().len() - 1;
            assert_eq!(peak.largest, (last > 0).then_some(last as f64 / probes as f64));
            first = last + 1;
        }
        assert!(matches!(plan.null_peaks(&probed[1..]), Err(Error::Backend(_))));
        let found = vec![None; plan.searches().len()];
        let finish = |nulls: &[NullPeak]| plan_pair(a.view(), a.view(), &p, (0.0, 0.0)).unwrap().finish(a.view(), a.view(), &p, &found, nulls);
        assert!(matches!(finish(&peaks[1..]), Err(Error::Backend(_))));
        assert!(matches!(finish(&[peaks.as_slice(), &peaks[..1]].concat()), Err(Error::Backend(_))));
        let reg = finish(&peaks).unwrap();
        // Every window of the probes not flat counted as an evaluation.
        assert_eq!(reg.evaluations, probes as u64 - 1);
    }

    /// A plan's null probes are [`null_sites`] of its textured templates, whether its grid
    /// is spaced a template apart (the plan's shortcut) or not (narrow overlaps, whose
    /// positions crowd; templates wider than the grid's spacing), with templates left out
    /// for want of texture.
    #[test]
    fn a_plans_null_probes_are_the_null_sites_of_its_textured_templates() {
        let frame = texture(200, 150, 7).map(|v| if v > 128.0 { v.round() as u8 } else { 128 });
        let (mut spaced, mut thinned) = ([0; 2], 0);
        for rsz in [5, 15, 31, 61] {
            for npts in [2, 3, 5, 8] {
                for prediction in [(0.0, 0.0), (12.4, -7.6), (120.0, 3.0), (-3.0, 90.0), (150.0, 100.0)] {
                    let p = RegisterParams { rsz, npts, search_radius: 8, min_variance: 50.0, ..Default::default() };
                    let Ok(plan) = plan_pair(frame.view(), frame.view(), &p, prediction) else { continue };
                    let sites: Vec<(usize, usize)> = plan.searches().map(|s| s.site).collect();
                    let want: Vec<Vec<usize>> = null_sites(&sites, rsz).iter().map(|n| n.as_slice().to_vec()).collect();
                    let got: Vec<Vec<usize>> = plan.probe_sets().map(|s| s.as_slice().to_vec()).collect();
                    assert_eq!(got, want, "rsz {rsz} npts {npts} {prediction:?}");
                    spaced[usize::from(plan.spaced)] += 1;
                    thinned += usize::from(sites.len() < plan.out.templates);
                }
            }
        }
        // Both kinds of grid were met, and grids thinned by the texture test.
        assert!(spaced.iter().all(|&n| n > 5) && thinned > 5, "{spaced:?} {thinned}");
    }

    #[test]
    fn bad_input_is_an_error() {
        let a = texture(120, 100, 1).map(|v| v as u8);
        let m = SearchFrame::new(a.view()).unwrap();
        let s = Parallelism::Sequential;
        let d = RegisterParams::default();
        let bad = [
            RegisterParams { rsz: 2, ..d },
            RegisterParams { rsz: 256, ..d },
            RegisterParams { npts: 0, ..d },
            RegisterParams { npts: 33, ..d },
            RegisterParams { cthresh: f64::NAN, ..d },
            RegisterParams { cthresh: 1.5, ..d },
            RegisterParams { search_radius: 0, ..d },
            RegisterParams { search_radius: MAX_RADIUS + 1, ..d },
            RegisterParams { min_variance: -1.0, ..d },
            RegisterParams { min_variance: f64::INFINITY, ..d },
            RegisterParams { agreement: 0.0, ..d },
            RegisterParams { min_vectors: 0, ..d },
            RegisterParams { null_margin: -0.1, ..d },
            RegisterParams { null_margin: f64::NAN, ..d },
            RegisterParams { min_coefficient: 1.5, ..d },
            RegisterParams { min_coefficient: f64::NEG_INFINITY, ..d },
            RegisterParams { max_turn: 0.0, ..d },
            RegisterParams { max_turn: 46.0, ..d },
            RegisterParams { max_turn: f64::NAN, ..d },
        ];
        for p in bad {
            assert!(register_pair(a.view(), &m, &p, (0.0, 0.0), s).is_err(), "{p:?}");
        }
        assert!(register_pair(a.view(), &m, &d, (f64::NAN, 0.0), s).is_err());
        // A turn that is no similarity; and bad parameters on the turned path too.
        for turn in [Similarity { angle: f64::NAN, ..Similarity::IDENTITY }, Similarity { scale: 0.0, ..Similarity::IDENTITY }, Similarity { scale: -1.0, ..Similarity::IDENTITY }, Similarity { x: f64::INFINITY, ..Similarity::IDENTITY }] {
            assert!(register_pair_turned(a.view(), &m, &d, (0.0, 0.0), &turn, s).is_err(), "{turn:?}");
        }
        let turn = Similarity::about((59.5, 49.5), (0.0, 0.0), 0.05, 1.0);
        assert!(register_pair_turned(a.view(), &m, &RegisterParams { rsz: 2, ..d }, (0.0, 0.0), &turn, s).is_err());
        assert!(register_pair_turned(a.view(), &m, &d, (f64::NAN, 0.0), &turn, s).is_err());
        let b = texture(121, 100, 1).map(|v| v as u8);
        assert!(matches!(register_pair(b.view(), &m, &d, (0.0, 0.0), s), Err(Error::SizeMismatch { .. })));
        let f = a.map(|v| v as f32);
        assert!(register_pair_any(AnyView::U8(a.view()), AnyView::F32(f.view()), &d, (0.0, 0.0), s).is_err());
        // Template bigger than the frame's room: skipped, not an error.
        let r = register_pair(a.view(), &m, &RegisterParams { rsz: 101, ..d }, (0.0, 0.0), s).unwrap();
        assert_eq!(r.skip, Some(SkipReason::NoOverlap));
    }
}
