//! One frame's registration settled: its planned attempt, then, where that does not stand
//! clear, the other references, the reversed and zero predictions, the coarse seeds and grown
//! templates, the whole overlap for faint texture, and a turned pair registered through its
//! predicted turn.

use super::accept::Acceptance;
use super::coarse::{self, Spectrum};
use super::faint;
use super::prediction::{centre, keyframe_left, pair_prediction, Velocity};
use super::quality::{overlap_ncc, overlap_null_ncc};
use super::refine::{refine_overlap_smoothed, RefineScratch};
use super::register::{evident_zoom, fit_turn, register_pair, register_pair_turned, Motion, PairRegistration, RegisterParams, SkipReason};
use super::registrar::PairRequest;
use super::sequence::{FrameRecord, Run};
use super::similarity::Similarity;
use super::source::{GrayType, Held};
use super::textured::{coherence, noise_variance, structure_tensor, textured_overlap, MIN_TEXTURED_BLOCKS, Noise};
use super::warp::warp_with;
use super::window::Planned;
use crate::error::{Error, Result};
use crate::image::{Image, ImageView};
use crate::ncc::{Integral, SearchFrame};
use crate::parallel::Parallelism;
use alloc::vec::Vec;

impl<'a> Run<'a> {
    /// Registers `current` against `keyframe` alone (an earlier frame read again, at its
    /// chained pose) from the pair motion `motion`, with every stage of [`Run::settle`]:
    /// a loop's partner, a lost frame's candidate. Returns the registration and its NCC
    /// evaluations; `buffer` and `turn_buffer` are the moving frame's integral images, reused.
    pub(super) fn settle_against<T: GrayType>(&self, keyframe: &Held<'a>, current: &Held<'a>, motion: Similarity, buffer: &mut Integral<T>, turn_buffer: &mut Integral<T>) -> Result<(PairRegistration, u64)> {
        let k = keyframe.index;
        let frame = |idx: usize| if idx == k { Ok(keyframe) } else { Err(Error::Backend("internal: lost an earlier keyframe".into())) };
        let moving = match self.registrar {
            None => Some(self.search_frame(current.view::<T>()?, core::mem::take(buffer))?),
            Some(_) => None,
        };
        let settled = self.settle::<T>(&frame, current, moving.as_ref(), &[(k, motion)], turn_buffer, FirstAttempt::Every);
        if let Some(m) = moving {
            *buffer = m.into_integral();
        }
        settled.map(|(_, registration, evaluations)| (registration, evaluations))
    }

    /// Registers `current` by the first of `attempts` (reference index, predicted pair
    /// motion from that reference) that succeeds; where none did, or the match rests on a weak
    /// minority of templates, from the coarse estimates against the first attempt's reference
    /// (the keyframe) and with grown templates, and where the templates stay too faint, on
    /// the whole overlap; a weak consensus must then be confirmed by the whole overlap.
    /// `first`: whether every attempt is tried, the first alone (returned as it is where it
    /// does not stand clear, [`stands_clear`]: a planned pair, settled afresh then), or every
    /// attempt with the first one's registration known from that. `moving` is the CPU's
    /// prepared search of `current` (`None` with a registrar). Returns the reference of the
    /// registration that stands (the last tried when none succeeded), the registration, and
    /// the NCC evaluations of every attempt.
    pub(super) fn settle<'h, T: GrayType>(
        &self,
        frame: &dyn Fn(usize) -> Result<&'h Held<'a>>,
        current: &Held<'a>,
        moving: Option<&SearchFrame<'_, T>>,
        attempts: &[(usize, Similarity)],
        turn_buffer: &mut Integral<T>,
        first: FirstAttempt,
    ) -> Result<(usize, PairRegistration, u64)>
    where
        'a: 'h,
    {
        let mut s = Settling { run: self, frame, current, moving, attempts, turn_buffer, evaluations: 0, spectra: None };
        let first_only = matches!(first, FirstAttempt::Only);
        let mut outcome = s.by_attempts(first)?;
        if first_only && outcome.as_ref().is_some_and(|o| !stands_clear(&o.1)) {
            let Some((r, reg)) = outcome else { unreachable_attempts()? };
            return Ok((r, reg, s.evaluations));
        }
        s.seed_by_phase_correlation(&mut outcome)?;
        s.grow_templates(&mut outcome)?;
        let correlation_peak = s.on_the_whole_overlap(&mut outcome)?;
        let Some((r, mut reg)) = outcome else { unreachable_attempts()? };
        s.confirm_unpredicted_turn(r, &mut reg)?;
        s.confirm_on_the_overlap(r, &mut reg, correlation_peak)?;
        s.refine_faint_match(r, &mut reg)?;
        Ok((r, reg, s.evaluations))
    }

    /// Registration `reg` of `moving` against `reference`, predicted at pair motion
    /// `predicted`, where its turn departs from the predicted one by more than
    /// [`WARP_SPREAD`] at the frame's corners: the turn stands where the whole overlap,
    /// refined from it, keeps it within half the departure; otherwise the pair takes the
    /// overlap's motion. Templates along texture that runs one way (wood
    /// grain at low contrast) can agree on a turn the frames do not have, as on a zoom
    /// ([`Run::zoom_found`]), and a turn taken up is carried on by the run's spin to the
    /// frames after it (jerky low-contrast coffee: 0.6 to 1 degree on six frames that did
    /// not turn, 1.6 px off at the centre; the overlap put them within 0.06 degrees).
    fn confirm_turn<T: GrayType>(&self, reference: &Held<'_>, moving: &Held<'_>, predicted: &Similarity, reg: &mut PairRegistration) -> Result<()> {
        let Some(m) = reg.motion() else { return Ok(()) };
        let departure = m.angle - predicted.angle;
        let spread = Similarity { x: 0.0, y: 0.0, angle: departure, scale: 1.0 }.spread(self.size);
        if self.p.register.motion != Motion::Similarity || !self.refines_on_overlap() || spread <= WARP_SPREAD {
            return Ok(());
        }
        // Far enough to undo the whole departure.
        let reach = FAINT_REACH + spread;
        let Some(overlap) = self.refine_on_overlap::<T>(reference, moving, m, overlap_unknowns(&self.p.register, &m), reach)? else { return Ok(()) };
        if libm::fabs(overlap.angle - m.angle) > 0.5 * libm::fabs(departure) {
            (reg.shift, reg.angle, reg.scale) = (Some(overlap.shift()), overlap.angle, overlap.scale);
        }
        Ok(())
    }

    /// Whether the run's motion model follows the turn of `moving` against `reference` at
    /// pair motion `m`: the similarity model does; the translation model where the whole
    /// overlap, refined from `m` with a turn of its own, turns the frame's corners by at
    /// most [`WARP_SPREAD`] (a microscope stage's scan), not where it could not tell.
    fn follows_the_turn<T: GrayType>(&self, reference: &Held<'_>, moving: &Held<'_>, m: &Similarity) -> Result<bool> {
        if self.p.register.motion == Motion::Similarity {
            return Ok(true);
        }
        let turned = self.refine_on_overlap::<T>(reference, moving, *m, 3, SEED_REACH)?;
        Ok(turned.is_some_and(|t| t.spread(self.size) <= WARP_SPREAD))
    }

    /// A template registration at pair motion `m` refined on the whole overlap: within
    /// [`FAINT_REACH`], or, where the overlap leads further, within [`FAINT_REACH_FAR`] if
    /// the overlap correlates better there than at `m`. A faint match (few templates agree,
    /// along texture that runs one way, at low contrast) may sit 2 to 4 px from the truth
    /// where the search started that far off; the whole overlap then settled within 0.1 px
    /// of it, where it correlates better (low-contrast coffee: 0.90 to 0.95 at the templates'
    /// motion, 0.95 to 0.99 at the refined one, the same as at the truth). `None` where the
    /// overlap confirms no other motion.
    fn refine_faint<T: GrayType>(&self, reference: &Held<'_>, moving: &Held<'_>, m: Similarity) -> Result<Option<Similarity>> {
        let unknowns = overlap_unknowns(&self.p.register, &m);
        if let Some(near) = self.refine_on_overlap::<T>(reference, moving, m, unknowns, FAINT_REACH)? {
            return Ok(Some(near));
        }
        let Some(far) = self.refine_on_overlap::<T>(reference, moving, m, unknowns, FAINT_REACH_FAR)? else { return Ok(None) };
        let (at, there) = (self.overlap_correlation::<T>(reference, moving, &m)?, self.overlap_correlation::<T>(reference, moving, &far)?);
        Ok(match (at, there) {
            (Some(at), Some(there)) if there > at => Some(far),
            _ => None,
        })
    }

    /// Refines the registration of held frame `l` against its held reference on the whole
    /// overlap (`l` is about to become the keyframe): its pose, in `held` and in its record,
    /// moves where the refinement leads (unchanged where it finds nothing). The refinement
    /// starts from the pair motion `l` registered with, and is the one its window made ahead
    /// in the parallel stage where that one refined this same link (module `window`).
    pub(super) fn refine_keyframe<T: GrayType>(&self, held: &mut [Held<'_>], records: &mut [FrameRecord], l: usize) -> Result<()> {
        let Some(r) = records[l].reference else { return Ok(()) };
        // A faint pair's link already stands where its overlap correlation peaks.
        if self.faint_phase(&records[l]) {
            return Ok(());
        }
        let (Some(l_held), Some(r_held)) = (held.iter().find(|f| f.index == l), held.iter().find(|f| f.index == r)) else { return Ok(()) };
        let start = match &l_held.link {
            Some(link) if link.reference == r => link.motion,
            _ => r_held.pos.inverse().then(&l_held.pos),
        };
        let made = l_held.link.as_ref().and_then(|link| link.refined).filter(|made| made.refines(r, &start, &self.p.register));
        if let Some(times) = self.times {
            times.keyframe_link(made.is_some());
        }
        let link = match made {
            Some(made) => made,
            None => self.refine_link::<T>(r_held, l_held, start)?,
        };
        let Some((refined, quality)) = link.refined else { return Ok(()) };
        let pos = r_held.pos.then(&refined);
        let rec = &mut records[l];
        (rec.position, rec.angle, rec.scale) = (Some(pos.shift()), pos.angle, pos.scale);
        (rec.quality, rec.quality_grid) = quality;
        if let Some(f) = held.iter_mut().find(|f| f.index == l) {
            f.pos = pos;
        }
        Ok(())
    }

    /// The link of `moving` to `reference` at pair motion `start` refined on the whole
    /// overlap, with the quality measures of the refined link.
    pub(super) fn refine_link<T: GrayType>(&self, reference: &Held<'_>, moving: &Held<'_>, start: Similarity) -> Result<RefinedLink> {
        let unknowns = overlap_unknowns(&self.p.register, &start);
        let refined = match self.refine_on_overlap::<T>(reference, moving, start, unknowns, FAINT_REACH)? {
            Some(m) => Some((m, self.quality::<T>(reference, moving, &m)?)),
            None => None,
        };
        Ok(RefinedLink { reference: reference.index, start, unknowns, refined })
    }

    /// Whether frame `rec` registered on a phase-correlation match too faint for a fixed
    /// level, confirmed against its null ([`faint::overlap_peak`] placed it).
    pub(super) fn faint_phase(&self, rec: &FrameRecord) -> bool {
        self.phase_too_faint(rec.phase_significance, rec.ncc) && rec.angle == 0.0 && rec.scale == 1.0
    }

    /// Whether a registration of coefficient `ncc` rests on a phase-correlation match (of
    /// `phase_significance`) too faint for a fixed level.
    pub(super) fn phase_too_faint(&self, phase_significance: Option<f64>, ncc: f64) -> bool {
        phase_significance.is_some() && ncc < self.p.register.min_coefficient
    }

    /// Whether pairs are refined on the whole overlap (faint ones, and the keyframes' links).
    pub(super) fn refines_on_overlap(&self) -> bool {
        self.p.whole_overlap && self.p.register.acceptance == Acceptance::Adaptive
    }

    /// The pair motion `start` refined on the whole overlap of `reference` and `moving`
    /// ([`super::refine::refine_overlap_smoothed`]), on their kept smoothed copies.
    pub(super) fn refine_on_overlap<T: GrayType>(&self, reference: &Held<'_>, moving: &Held<'_>, start: Similarity, unknowns: usize, reach: f64) -> Result<Option<Similarity>> {
        let (r, m) = (reference.smoothed::<T>(self.par, self.spares)?, moving.smoothed::<T>(self.par, self.spares)?);
        let mut scratch = self.overlap_scratch.take(|_| true).unwrap_or_default();
        let refined = refine_overlap_smoothed(r.view(), m.view(), start, self.p.register.rsz, unknowns, reach, self.par, &mut scratch);
        self.overlap_scratch.put(scratch);
        Ok(refined?.map(|(m, _)| m))
    }

    /// Makes working memory for a whole-overlap refinement where the run keeps none, its
    /// pages written: done while the run waits on a device, it spares the next link the
    /// page faults of a fresh buffer.
    pub(super) fn keep_overlap_scratch(&self) {
        let kept = self.overlap_scratch.take(|_| true).unwrap_or_else(|| RefineScratch::for_tiles(self.p.register.rsz));
        self.overlap_scratch.put(kept);
    }

    /// Registers `moving` against `reference` when the predicted pair motion `motion` turns
    /// (or scales) the frame visibly, as if the moving frame were first turned back by it
    /// about its centre ([`register_pair_turned`]: the templates are turned, not the frame),
    /// so that the templates meet their matches upright and the pair is nearly a
    /// translation; then the pair's motion is composed with the turn. Always on the CPU (a
    /// registrar searches upright templates).
    pub(super) fn register_turned<T: GrayType>(&self, reference: ImageView<'_, T>, moving: &SearchFrame<'_, T>, rp: &RegisterParams, motion: &Similarity) -> Result<PairRegistration> {
        let turn = Similarity::about(centre(self.size), (0.0, 0.0), motion.angle, motion.scale);
        let back = turn.inverse();
        let mut reg = register_pair_turned(reference, moving, rp, motion.then(&back).shift(), &turn, self.par)?;
        if reg.motion().is_some_and(|m| m.is_translation()) {
            fit_turn(&mut reg, reference, moving.view(), &turn, rp, true);
        }
        if let Some(m) = reg.motion() {
            let total = m.then(&turn);
            (reg.shift, reg.angle, reg.scale) = (Some(total.shift()), total.angle, total.scale);
        }
        Ok(reg)
    }

    /// Every attempt for frame `i` (reference index, predicted pair motion), in order: the planned
    /// pair `planned` where the window has one; then, once a pair has registered, the keyframe
    /// with the prediction from the last good frame's motion, the last good frame with it (if
    /// the keyframe is older), then the last good frame with the motion reversed, then with
    /// no motion; before that, the
    /// reference candidate, then the pending frame, unmoved. The keyframe `key` moves to the
    /// last good frame where the prediction leaves `limit` of it.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn attempts<'h>(
        &self,
        find: &dyn Fn(usize) -> Result<&'h Held<'a>>,
        (k, key): (usize, &mut Option<usize>),
        last: Option<usize>,
        pending: Option<usize>,
        planned: Option<Planned>,
        vel: Velocity,
        i: usize,
        limit: (f64, f64),
    ) -> Result<Vec<(usize, Similarity)>>
    where
        'a: 'h,
    {
        let mut attempts: Vec<(usize, Similarity)> = Vec::with_capacity(4);
        attempts.extend(planned.map(|pl| pl.attempt()));
        let mut add = |r: usize, pose: Similarity| -> Result<()> {
            let a = (r, find(r)?.pos.inverse().then(&pose));
            if !attempts.contains(&a) {
                attempts.push(a);
            }
            Ok(())
        };
        match last {
            Some(l) => {
                let l_pos = find(l)?.pos;
                let predicted = vel.predict(&l_pos, (i - l) as f64, self.size);
                let k_pos = find(key.unwrap_or(k))?.pos;
                if keyframe_left(&predicted, &k_pos, limit, self.size) {
                    *key = Some(l);
                }
                // A sweep that turned back (serpentine rows, an endoscope pulled back):
                // the same speed the other way.
                let reversed = vel.reversed().predict(&l_pos, (i - l) as f64, self.size);
                for (r, pose) in [(key.unwrap_or(l), predicted), (l, predicted), (l, reversed), (l, l_pos)] {
                    add(r, pose)?;
                }
            }
            // Unmoved: the same pose as the candidate's.
            None => {
                for c in [Some(k), pending].into_iter().flatten() {
                    add(c, Similarity::IDENTITY)?;
                }
            }
        }
        Ok(attempts)
    }

    /// The moving frame `view` prepared for the run's searches in `buffer`
    /// ([`register::search_frame`](super::register::search_frame)).
    pub(super) fn search_frame<'v, T: GrayType>(&self, view: ImageView<'v, T>, buffer: Integral<T>) -> Result<SearchFrame<'v, T>> {
        super::register::search_frame(view, buffer, &self.p.register, self.par)
    }

    /// Whether registration `reg` of `moving` against `reference` shows a zoom the
    /// scale-free model cannot follow, where the run is to fit the scale once it does: its
    /// templates show one ([`evident_zoom`]) and the whole overlap, refined with a scale from
    /// the templates' motion, confirms it. Templates along texture that runs one way (wood
    /// grain at low contrast) each match a little along it, by as much as the search's start
    /// lets them, and can agree on a zoom of a percent the frames do not have; taken up,
    /// every later pair fits a scale and the run drifted (1 to 3 px in ten frames), while the
    /// whole overlap, started anywhere within a pixel or two, settles within 0.1 px.
    pub(super) fn zoom_found<T: GrayType>(&self, reference: &Held<'_>, moving: &Held<'_>, reg: &PairRegistration) -> Result<bool> {
        if !(self.p.detect_zoom && !self.p.register.fit_scale && self.p.register.motion == Motion::Similarity) {
            return Ok(false);
        }
        let Some(templates) = evident_zoom(reg, &self.p.register) else { return Ok(false) };
        let overlap = self.refine_on_overlap::<T>(reference, moving, templates, 4, FAINT_REACH)?;
        Ok(overlap.is_some_and(|m| zoom_confirmed(templates.scale, m.scale)))
    }
}

/// Which attempts [`Run::settle`] tries.
pub(super) enum FirstAttempt {
    /// Every attempt in turn.
    Every,
    /// The first alone.
    Only,
    /// Every attempt, the first one's registration being this one.
    Known(PairRegistration),
}

/// Whether a pair's registration stands on its own: it registered on a clear majority of its
/// templates, so no other attempt, seed or stage would be tried after it.
pub(super) fn stands_clear(reg: &PairRegistration) -> bool {
    reg.shift.is_some() && !weak(reg)
}

/// A registration on a weak minority of its textured templates.
fn weak(reg: &PairRegistration) -> bool {
    reg.shift.is_some() && 3 * reg.vectors_used < reg.textured
}

/// Whether the agreeing templates of `reg` (of side `rsz` in `reference`) see gradients
/// that run one way ([`APERTURE_COHERENCE`]): their match is pinned across an edge only.
fn aperture_bound<T: GrayType>(reference: ImageView<'_, T>, reg: &PairRegistration, rsz: usize) -> bool {
    let mut j = (0.0, 0.0, 0.0);
    for v in reg.vectors.iter().filter(|v| v.inlier) {
        // Every other pixel each way: a quarter of the cost, the same direction.
        structure_tensor(&reference, (v.template.0, v.template.1, v.template.0 + rsz, v.template.1 + rsz), 2, &mut j);
    }
    coherence(j) > APERTURE_COHERENCE
}

/// The coherence ([`coherence`]) above which agreeing templates see one edge: the
/// consensus that put a fundus frame 13 px along its rim had 0.89; over the robustness
/// footage's 12 000 template registrations, 1 % had more than 0.8 (they are confirmed on
/// the textured overlap, as a weak consensus is).
const APERTURE_COHERENCE: f64 = 0.8;

/// Whether the whole overlap's scale `overlap` confirms the scale `templates` the templates
/// showed: a zoom the same way, at least half as large. (True zooms of 1 to 3 % were
/// confirmed within 0.1 % of the truth, where the templates were up to half a zoom off.)
fn zoom_confirmed(templates: f64, overlap: f64) -> bool {
    (overlap - 1.0) * (templates - 1.0) > 0.0 && libm::fabs(overlap - 1.0) >= 0.5 * libm::fabs(templates - 1.0)
}

/// How far (pixels, at the overlap's corners) the whole-overlap refinement may move a
/// phase-correlation seed (measured within 0.8 px on the fundus at contrast 0.3), and a
/// faint template registration.
const SEED_REACH: f64 = 3.0;
const FAINT_REACH: f64 = 2.0;
/// How far it may move a faint template registration where the overlap correlates better
/// there ([`Run::refine_faint`]).
const FAINT_REACH_FAR: f64 = 4.0;
/// How far a phase-correlation match's overlap NCC must beat the pair's null
/// ([`overlap_null_ncc`]) when it is under `min_coefficient`, and the least it may be then.
/// Measured on the fundus at contrast 0.3 (true matches 0.17 to 0.4, nulls 0.06 to 0.27).
const OVERLAP_NULL_MARGIN: f64 = 0.05;
const OVERLAP_FLOOR: f64 = 0.1;
/// Template registrations whose agreeing vectors correlate less than this on average are
/// faint (refined on the whole overlap), as are those on which fewer than half the textured
/// templates agree. (At 0.8 the bundled PAL sequence, whose pairs correlate 0.79 to 0.83 on
/// all 36 templates, was refined too, at a quarter of the speed and no gain.)
const FAINT_NCC: f64 = 0.7;

/// A frame's link to its reference refined on the whole overlap ([`Run::refine_link`]):
/// the link it started from (reference, pair motion, unknowns fitted), and the refined pair
/// motion with its quality measures (`None`: the refinement found nothing).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct RefinedLink {
    reference: usize,
    start: Similarity,
    unknowns: usize,
    refined: Option<(Similarity, (Option<f64>, Option<f64>))>,
}

impl RefinedLink {
    /// Whether this is the refinement of the link to `reference` from `start` with `p`: made
    /// ahead, it stands for the run's own only where all three are the same.
    fn refines(&self, reference: usize, start: &Similarity, p: &RegisterParams) -> bool {
        self.reference == reference && self.start == *start && self.unknowns == overlap_unknowns(p, start)
    }
}

/// The unknowns of a whole-overlap refinement from `start` ([`super::refine::refine_overlap_smoothed`]): the
/// translation; the angle too under the similarity model unless the start is a
/// translation (the template stage found no significant turn); the scale where fitted.
fn overlap_unknowns(p: &RegisterParams, start: &Similarity) -> usize {
    match p.motion {
        Motion::Translation => 2,
        Motion::Similarity if start.is_translation() => 2,
        Motion::Similarity if p.fit_scale => 4,
        Motion::Similarity => 3,
    }
}

/// A predicted pair motion that moves a frame's corners less than this (pixels) beyond the
/// shift of its centre is registered as it is; a larger turn is undone first
/// ([`Run::register_turned`]).
const WARP_SPREAD: f64 = 1.0;

/// Whether a pair predicted to move by `motion` (frames of `size`) is registered with its
/// turn undone first, on the host, rather than as it is (by the run's registrar, if any).
fn warps(p: &RegisterParams, motion: &Similarity, size: (usize, usize)) -> bool {
    p.motion == Motion::Similarity && motion.spread(size) > WARP_SPREAD
}

impl Run<'_> {
    /// Whether the run's registrar registers a pair predicted to move by `motion`: the host
    /// then only looks its registration up.
    pub(super) fn registrar_registers(&self, motion: &Similarity) -> bool {
        self.registrar.is_some() && !warps(&self.p.register, motion, self.size)
    }
}

/// A moving frame brought into line with its reference up to a translation, for the
/// measures that compare a pair at a shift (overlap NCC): the frame itself for a
/// translation, else the frame turned back about its centre.
pub(super) struct Aligned<'v, T: GrayType> {
    frame: ImageView<'v, T>,
    turned: Option<Image<T>>,
    /// The pair's shift between the reference and [`Aligned::view`].
    pub(super) shift: (f64, f64),
}

impl<'v, T: GrayType> Aligned<'v, T> {
    /// `frame` aligned for `motion`, turned (if it turns) on `par`'s threads.
    pub(super) fn new(frame: ImageView<'v, T>, motion: &Similarity, par: Parallelism) -> Result<Self> {
        if motion.is_translation() {
            return Ok(Aligned { frame, turned: None, shift: motion.shift() });
        }
        let turn = Similarity::about(centre(frame.size()), (0.0, 0.0), motion.angle, motion.scale);
        let back = turn.inverse();
        Ok(Aligned { frame, turned: Some(warp_with(frame, &back, frame.size(), par)?), shift: motion.then(&back).shift() })
    }

    pub(super) fn view(&self) -> ImageView<'_, T> {
        self.turned.as_ref().map_or(self.frame, |t| t.view())
    }

    /// The NCC of the whole overlap of `reference` and this frame at its shift.
    pub(super) fn overlap_ncc(&self, reference: ImageView<'_, T>, par: Parallelism) -> Result<Option<f64>> {
        overlap_ncc(reference, self.view(), self.shift, par)
    }
}

/// One frame's registration as it is settled ([`Run::settle`]), stage by stage: the
/// frames it may register against (`frame`), the frame (`current`, prepared for the CPU's
/// searches as `moving`), the attempts, and what the stages share.
struct Settling<'s, 'h, 'a, 'v, T: GrayType> {
    run: &'s Run<'a>,
    frame: &'s dyn Fn(usize) -> Result<&'h Held<'a>>,
    current: &'s Held<'a>,
    moving: Option<&'s SearchFrame<'v, T>>,
    attempts: &'s [(usize, Similarity)],
    /// The frame's integral images for a turned search.
    turn_buffer: &'s mut Integral<T>,
    /// The NCC evaluations of every registration so far.
    evaluations: u64,
    /// The spectra of a reference (index) and the frame, once computed.
    spectra: Option<(usize, Spectrum, Spectrum)>,
}

/// A registration against a reference (its index).
type Outcome = Option<(usize, PairRegistration)>;

impl<'h, 'a: 'h, T: GrayType> Settling<'_, 'h, 'a, '_, T> {
    /// The frame registered against frame `r` from pair motion `motion` with `rp`: through
    /// the turn where the motion turns the frame visibly, else by the CPU's searches or the
    /// run's registrar.
    fn attempt_with(&mut self, r: usize, motion: Similarity, rp: &RegisterParams) -> Result<PairRegistration> {
        let run = self.run;
        let (r_held, current) = ((self.frame)(r)?, self.current);
        if warps(rp, &motion, run.size) {
            // With a registrar, the frame's integral images are computed here.
            let own = match self.moving {
                Some(_) => None,
                None => Some(run.search_frame(current.view::<T>()?, core::mem::take(self.turn_buffer))?),
            };
            let reg = run.register_turned(r_held.view::<T>()?, self.moving.or(own.as_ref()).ok_or_else(|| Error::Backend("internal: no moving frame".into()))?, rp, &motion);
            if let Some(o) = own {
                *self.turn_buffer = o.into_integral();
            }
            let reg = reg?;
            self.evaluations += reg.evaluations;
            return Ok(reg);
        }
        let pred = pair_prediction(&motion, run.size);
        let mut reg = match (self.moving, run.registrar) {
            (Some(m), _) => register_pair(r_held.view::<T>()?, m, rp, pred, run.par)?,
            (None, Some(g)) => {
                let pair = PairRequest { reference: (r, T::gray(r_held.view::<T>()?)), moving: (current.index, T::gray(current.view::<T>()?)), prediction: pred };
                g.register(&pair, rp)?
            }
            (None, None) => return Err(Error::Backend("internal: no way to register a pair".into())),
        };
        if rp.motion == Motion::Similarity && !motion.is_translation() && reg.motion().is_some_and(|m| m.is_translation()) {
            // With a fitted scale, a pair the sequence's zoom reaches (its predicted
            // motion scales) keeps its fitted similarity, as a turned-back pair does:
            // such a pair zooms by less than the warp threshold (just after a keyframe
            // change, where the zoom turns round), so its zoom seldom clears the
            // significance test, and the scale 1 that then stood was off by the whole
            // zoom (up to 2.4e-3 on smooth texture), carried on to every frame
            // registered against it.
            let zooming = rp.fit_scale && motion.scale != 1.0;
            fit_turn(&mut reg, r_held.view::<T>()?, current.view::<T>()?, &Similarity::IDENTITY, rp, zooming);
        }
        self.evaluations += reg.evaluations;
        Ok(reg)
    }

    /// [`attempt_with`](Self::attempt_with) the run's parameters.
    fn attempt(&mut self, r: usize, motion: Similarity) -> Result<PairRegistration> {
        let rp = self.run.p.register;
        self.attempt_with(r, motion, &rp)
    }

    /// The attempts in order up to the first that succeeds (the first alone with
    /// [`FirstAttempt::Only`]; the first one's registration taken as known with
    /// [`FirstAttempt::Known`]); the last tried where none did.
    fn by_attempts(&mut self, first: FirstAttempt) -> Result<Outcome> {
        let mut outcome = None;
        let first_only = matches!(first, FirstAttempt::Only);
        let mut known = match first {
            FirstAttempt::Known(reg) => Some(reg),
            _ => None,
        };
        let attempts = self.attempts;
        for &(r, motion) in attempts.iter().take(if first_only { 1 } else { attempts.len() }) {
            let reg = match known.take() {
                Some(reg) => reg,
                None => self.attempt(r, motion)?,
            };
            let done = reg.shift.is_some();
            outcome = Some((r, reg));
            if done {
                break;
            }
        }
        Ok(outcome)
    }

    /// The frame the global estimates are made against: the reference of a weak match,
    /// else the first attempt's (the keyframe), so that frames that fail do not chain frame
    /// to frame. (The seeds were once made against the last good frame; they moved to the
    /// keyframe with the whole-overlap stage, and the robustness footage is measured so.)
    fn base_of(&self, (r, reg): &(usize, PairRegistration)) -> usize {
        if reg.shift.is_some() {
            *r
        } else {
            self.attempts.first().map_or(*r, |a| a.0)
        }
    }

    /// The turn the frame is predicted to make against frame `b` (at pose `b_pos`): the
    /// first attempt's, seen from `b`.
    fn predicted_turn(&self, b: usize, b_pos: Similarity) -> Result<Similarity> {
        Ok(match self.attempts.first() {
            Some(&(r, motion)) if r == b => motion,
            Some(&(r, motion)) => b_pos.inverse().then(&(self.frame)(r)?.pos.then(&motion)),
            None => Similarity::IDENTITY,
        })
    }

    /// A seed (a shift of the frame's centre) with the predicted `turn`.
    fn seeded(&self, seed: (f64, f64), turn: &Similarity) -> Similarity {
        if turn.is_translation() {
            Similarity::translation(seed)
        } else {
            Similarity::about(centre(self.run.size), seed, turn.angle, turn.scale)
        }
    }

    /// The coarse global estimates (phase correlation) seed the search where the motion's
    /// prediction did not: a pair that failed (a jump, or a prediction made over skipped
    /// frames), and a pair that registered on a weak minority of its templates, which a
    /// local search that started far from the peak can lock onto (a lattice, a field of
    /// grass). A seeded registration wins with more agreeing vectors; the first stays
    /// otherwise.
    fn seed_by_phase_correlation(&mut self, outcome: &mut Outcome) -> Result<()> {
        let p = self.run.p;
        let Some(o) = outcome.as_ref().filter(|o| p.coarse_candidates > 0 && (o.1.shift.is_none() || weak(&o.1))) else { return Ok(()) };
        let base = self.base_of(o);
        let b_held = (self.frame)(base)?;
        let (b_spectrum, c_spectrum) = (Spectrum::new(b_held.view::<T>()?), Spectrum::new(self.current.view::<T>()?));
        let seeds = coarse::candidates(&b_spectrum, &c_spectrum, p.coarse_candidates).unwrap_or_default();
        self.spectra = Some((base, b_spectrum, c_spectrum));
        // Seeds are shifts of the frame's centre; the turn stays the predicted one.
        let turn = self.predicted_turn(base, b_held.pos)?;
        for seed in seeds.into_iter().map(|peak| peak.shift) {
            if let Some(s) = outcome.as_ref().and_then(|o| o.1.shift) {
                // Already where this seed leads.
                if libm::fabs(s.0 - seed.0) < 4.0 && libm::fabs(s.1 - seed.1) < 4.0 {
                    continue;
                }
            }
            let start = self.seeded(seed, &turn);
            let reg = self.attempt(base, start)?;
            let better = match outcome.as_ref() {
                Some((_, o)) => reg.shift.is_some() && (o.shift.is_none() || reg.vectors_used > o.vectors_used),
                None => true,
            };
            if better {
                *outcome = Some((base, reg));
            }
            if outcome.as_ref().is_some_and(|o| o.1.shift.is_some() && !weak(&o.1)) {
                break;
            }
        }
        Ok(())
    }

    /// Faint texture (low contrast, strong noise): where too few templates agree, grow them
    /// to twice the side, from the shift found or the prediction, so each averages more
    /// signal; the grown registration stands if it is not weak too.
    fn grow_templates(&mut self, outcome: &mut Outcome) -> Result<()> {
        let p = self.run.p;
        let short = |reg: &PairRegistration| weak(reg) || matches!(reg.skip, Some(SkipReason::TooFewVectors { .. }));
        let Some((r, reg)) = outcome.as_ref().filter(|o| p.grow_templates && p.register.acceptance == Acceptance::Adaptive && short(&o.1)) else { return Ok(()) };
        let r = *r;
        let start = reg.motion().or(self.attempts.iter().find(|a| a.0 == r).map(|a| a.1)).unwrap_or(Similarity::IDENTITY);
        let grown = RegisterParams { rsz: (2 * p.register.rsz + 1).min(255), ..p.register };
        let g = self.attempt_with(r, start, &grown)?;
        if g.shift.is_some() && (reg.shift.is_none() || !weak(&g)) {
            *outcome = Some((r, g));
        }
        Ok(())
    }

    /// Texture too faint for templates (the fundus at low contrast or under strong noise):
    /// where no registration stands on a clear majority of them, the whole overlap decides,
    /// from the band-limited phase correlation's peak where it stands clear of the noise.
    /// Against the keyframe first, then the other frames attempted (the last good frame):
    /// a faint pair's peak sinks into the noise as the overlap shrinks (the fundus at
    /// contrast 0.3, 30 px from its keyframe: significance 9, against 23 for the frame
    /// before it). Returns where the overlap's correlation peaks on band-passed frames, if
    /// the match stands there.
    fn on_the_whole_overlap(&mut self, outcome: &mut Outcome) -> Result<Option<(f64, f64)>> {
        let (run, current) = (self.run, self.current);
        let Some(o) = outcome.as_ref().filter(|o| run.refines_on_overlap() && (o.1.shift.is_none() || weak(&o.1))).cloned() else { return Ok(None) };
        let mut bases: Vec<usize> = Vec::with_capacity(self.attempts.len() + 1);
        for b in core::iter::once(self.base_of(&o)).chain(self.attempts.iter().map(|a| a.0)) {
            if !bases.contains(&b) {
                bases.push(b);
            }
        }
        for base in bases {
            let (b_spectrum, c_spectrum) = match self.spectra.take() {
                Some((b, r, c)) if b == base => (r, c),
                Some((_, _, c)) => (Spectrum::new((self.frame)(base)?.view::<T>()?), c),
                None => (Spectrum::new((self.frame)(base)?.view::<T>()?), Spectrum::new(current.view::<T>()?)),
            };
            let found = coarse::weighted_candidates(&b_spectrum, &c_spectrum, 1, Some(coarse::FAINT_BAND)).unwrap_or_default();
            self.spectra = Some((base, b_spectrum, c_spectrum));
            let Some(peak) = found.first().filter(|k| k.significance >= coarse::SIGNIFICANT_PEAK) else { continue };
            let b_held = (self.frame)(base)?;
            let start = self.seeded(peak.shift, &self.predicted_turn(base, b_held.pos)?);
            // From the phase peak to where the overlap's correlation peaks on band-passed
            // frames ([`faint`]), then the overlap refinement from there: on faint texture
            // the refinement stops near its start (PAL at contrast 0.3 under noise 6: 0.46
            // px from the phase peak, 0.26 from the correlation's), while on clear texture
            // it converges to its own optimum, whose per-patch ramps take up a vignetting
            // fixed to the lens that pulls the correlation's peak (0.3 px on the fundus
            // under 40 % vignetting).
            let peaked = match start.is_translation() {
                true => faint::overlap_peak(b_held.band::<T>(run.par, run.spares)?.view(), current.band::<T>(run.par, run.spares)?.view(), start.shift(), SEED_REACH, run.par)?,
                false => None,
            };
            let start = peaked.map_or(start, Similarity::translation);
            let unknowns = overlap_unknowns(&run.p.register, &start);
            if let Some(m) = run.refine_on_overlap::<T>(b_held, current, start, unknowns, SEED_REACH)? {
                let mut phased = PairRegistration { skip: None, phase_significance: Some(peak.significance), margin: peak.significance - coarse::SIGNIFICANT_PEAK, ..o.1.clone() };
                (phased.shift, phased.angle, phased.scale) = (Some(m.shift()), m.angle, m.scale);
                *outcome = Some((base, phased));
                return Ok(peaked);
            }
        }
        Ok(None)
    }

    /// A turn the run did not predict (against frame `r`) stands where the whole overlap
    /// shows it too ([`Run::confirm_turn`]); a phase-correlation match's turn is the
    /// overlap's already.
    fn confirm_unpredicted_turn(&self, r: usize, reg: &mut PairRegistration) -> Result<()> {
        match (self.attempts.iter().find(|a| a.0 == r), reg.phase_significance) {
            (Some(&(_, predicted)), None) => self.run.confirm_turn::<T>((self.frame)(r)?, self.current, &predicted, reg),
            _ => Ok(()),
        }
    }

    /// A weak consensus must be confirmed by the whole overlap: chance agreement of a
    /// few templates between unrelated frames is rare but, over a long run with
    /// several attempts per frame, not rare enough to report a position on it.
    /// A whole-overlap match is always confirmed: with no template textured (a frame over an
    /// empty patch of slide) none is weak, and its overlap may still correlate well on
    /// the border of the empty patch, at any shift along it.
    /// So must a consensus of templates that see one edge running one way (a fundus's
    /// rim past an empty patch): each pins the shift across the edge and not along it,
    /// and four such agreed on a place 13 px along the rim. A straight edge crosses at
    /// most 2 npts - 1 of the npts x npts templates, a curved rim more (with a bound of
    /// 2 npts the fundus sweep's frames moved up to 0.2 px); 3 npts or more agreeing
    /// are not on one edge, and their gradients are not summed.
    fn confirm_on_the_overlap(&self, r: usize, reg: &mut PairRegistration, correlation_peak: Option<(f64, f64)>) -> Result<()> {
        let (run, p, current) = (self.run, self.run.p, self.current);
        let r_held = (self.frame)(r)?;
        let few = reg.vectors_used < 3 * p.register.npts;
        let along_an_edge = reg.phase_significance.is_none() && reg.shift.is_some() && few && aperture_bound(r_held.view::<T>()?, reg, p.register.rsz);
        if let (Some(m), true) = (reg.motion(), (weak(reg) || along_an_edge || run.confirm_every_match || reg.phase_significance.is_some()) && p.register.acceptance == Acceptance::Adaptive) {
            let aligned = Aligned::new(current.view::<T>()?, &m, run.par)?;
            let reference = r_held.view::<T>()?;
            let overlap = aligned.overlap_ncc(reference, run.par)?.unwrap_or(f64::NEG_INFINITY);
            // A phase-correlation match, already significant against its surface's noise,
            // stands under `min_coefficient` where its overlap beats what the pair correlates
            // where it cannot match (faint frames: the true match's NCC is bounded by their
            // signal-to-noise ratio; the fundus at contrast 0.3 went from 7 to 37 of 40
            // frames). Only where the model follows the pair's turn: under the translation
            // model a turned pair correlates near its centre of rotation alone, faintly, and
            // stood above the null too (gravel rolling 1.9 degrees a frame: 20 frames more
            // than 2 px off), so there the overlap must show no turn (the fundus at contrast
            // 0.3 under the translation model: 9 -> 40 of 40 frames). Template consensus
            // keeps the fixed floor: a few templates agreeing by chance have no such second
            // test behind them.
            let null = match reg.phase_significance {
                Some(_) if overlap < p.register.min_coefficient && run.follows_the_turn::<T>(r_held, current, &m)? => overlap_null_ncc(reference, aligned.view(), aligned.shift, run.par)?,
                _ => None,
            };
            let beats_null = null.is_some_and(|n| overlap >= n + OVERLAP_NULL_MARGIN && overlap >= OVERLAP_FLOOR);
            // Neither a whole-overlap match nor a weak consensus has a clear majority of
            // templates behind it: it must stand on the overlap's textured part, above what
            // that part correlates where it cannot match (`textured`), not on a featureless
            // area (a few templates agreeing by chance near an empty patch of slide, whose
            // overlap correlated 0.53 137 px from the truth).
            // Judged on the band-passed frames where the pair is a translation: their
            // noise is averaged, so faint texture (the fundus at contrast 0.3) still counts.
            let noise = match (noise_variance(reference, p.register.rsz), noise_variance(current.view::<T>()?, p.register.rsz)) {
                (Some(a), Some(b)) => a.min(b),
                _ => 0.0,
            };
            let textured = Some(match m.is_translation() {
                true => {
                    let band = Noise::band_passed(noise);
                    let floor = p.register.min_variance * band.variance / noise.max(f64::MIN_POSITIVE);
                    textured_overlap(r_held.band::<T>(run.par, run.spares)?.view(), current.band::<T>(run.par, run.spares)?.view(), m.shift(), p.register.rsz, band, floor.min(p.register.min_variance), run.par)?
                }
                false => textured_overlap(reference, aligned.view(), aligned.shift, p.register.rsz, Noise::white(noise), p.register.min_variance, run.par)?,
            });
            // Template consensus keeps its fixed floor there too (see above).
            let floor = if reg.phase_significance.is_some() { OVERLAP_FLOOR } else { p.register.min_coefficient };
            let featureless = textured.filter(|t| !t.confirms(OVERLAP_NULL_MARGIN, floor));
            if overlap < p.register.min_coefficient && !beats_null {
                reg.skip = Some(SkipReason::Unconfirmed { agreeing: reg.vectors_used, textured: reg.textured, overlap_ncc: overlap, null });
                reg.shift = None;
                reg.phase_significance = None;
            } else if let Some(t) = featureless {
                reg.skip = Some(SkipReason::Featureless { blocks: t.blocks, needed: MIN_TEXTURED_BLOCKS, ncc: t.ncc, null: t.null });
                reg.shift = None;
                reg.phase_significance = None;
            } else if reg.phase_significance.is_some() {
                // No template vouches for it: its coefficient is the overlap's.
                reg.ncc = overlap;
                // Too faint for the overlap refinement's linearisation (its few steps from
                // the correlation's peak drift towards its biased optimum): the peak stands.
                if let (true, true, Some(s)) = (beats_null, m.is_translation(), correlation_peak) {
                    reg.shift = Some(s);
                }
            }
        }
        Ok(())
    }

    /// Faint matches (few templates agree, or agree weakly) leave the motion uncertain by
    /// up to a pixel: the whole overlap refines it.
    /// Or every pair, when asked for.
    fn refine_faint_match(&self, r: usize, reg: &mut PairRegistration) -> Result<()> {
        let (run, p, current) = (self.run, self.run.p, self.current);
        let faint = |reg: &PairRegistration| reg.phase_significance.is_none() && (2 * reg.vectors_used < reg.textured || reg.ncc < FAINT_NCC);
        let every = |reg: &PairRegistration| p.refine_every_pair && reg.phase_significance.is_none();
        if let Some(m) = reg.motion().filter(|_| (run.refines_on_overlap() && faint(reg)) || every(reg)) {
            if let Some(refined) = run.refine_faint::<T>((self.frame)(r)?, current, m)? {
                (reg.shift, reg.angle, reg.scale) = (Some(refined.shift()), refined.angle, refined.scale);
            }
        }
        Ok(())
    }
}

/// The attempt list is never empty; this keeps that invariant out of a panic.
fn unreachable_attempts<T>() -> Result<T> {
    Err(Error::Backend("internal: no registration attempt was made".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parallel::KeepAwake;

    #[test]
    fn a_link_refined_ahead_stands_only_for_the_same_link() {
        let turned = Similarity { x: 12.5, y: -3.25, angle: 0.02, scale: 1.0 };
        let p = RegisterParams::default();
        let made = RefinedLink { reference: 7, start: turned, unknowns: overlap_unknowns(&p, &turned), refined: None };
        assert!(made.refines(7, &turned, &p));
        // Another reference, a start one rounding step away, a model that fits more unknowns.
        assert!(!made.refines(6, &turned, &p));
        assert!(!made.refines(7, &Similarity { x: f64::from_bits(turned.x.to_bits() + 1), ..turned }, &p));
        assert!(!made.refines(7, &turned, &RegisterParams { fit_scale: true, ..p }));
        assert!(!made.refines(7, &turned, &RegisterParams { motion: Motion::Translation, ..p }));
    }

    /// A pair whose templates agree on a zoom the frames do not have (their matches moved
    /// as a zoom of 1.5 % would move them) does not turn the scale on; a pair zoomed by
    /// 1.5 % does, and neither does anything where the scale is fitted already or the
    /// detection is off.
    #[test]
    fn a_zoom_is_taken_up_only_where_the_whole_overlap_confirms_it() {
        use crate::image::AnyView;
        use crate::stitch::source::InMemory;
        use crate::stitch::StitchParams;
        use crate::stitch::{texture, warp::warp};
        let src = texture(260, 220, 6).map(|v| v.round() as u8);
        let framed = |truth: Similarity| warp(src.view(), &Similarity::translation((30.0, 20.0)).then(&truth)).unwrap().view().crop(0, 0, 200, 160).unwrap().to_image();
        let reference = framed(Similarity::IDENTITY);
        let shifted = framed(Similarity::translation((1.0, -0.5)));
        let zoomed = framed(Similarity::about((100.0, 80.0), (1.0, -0.5), 0.0, 1.015));
        let views = [AnyView::U8(reference.view()), AnyView::U8(shifted.view()), AnyView::U8(zoomed.view())];
        let run = Run { p: StitchParams::default(), par: Parallelism::Sequential, size: (200, 160), type_name: "u8", registrar: None, times: None, confirm_every_match: false, awake: &KeepAwake::new(Parallelism::Sequential), spares: &Default::default(), overlap_scratch: &Default::default() };
        let frames = InMemory(&views);
        let held: Vec<Held<'_>> = (0..3).map(|i| run.load(&frames, i).unwrap()).collect();
        let register = |m: &Image<u8>| register_pair(reference.view(), &SearchFrame::new(m.view()).unwrap(), &run.p.register, (0.0, 0.0), Parallelism::Sequential).unwrap();

        let zoom = register(&zoomed);
        assert!(run.zoom_found::<u8>(&held[0], &held[2], &zoom).unwrap(), "{zoom:?}");

        let mut seeming = register(&shifted);
        let (half, c) = ((run.p.register.rsz as f64 - 1.0) / 2.0, (99.5, 79.5));
        for v in seeming.vectors.iter_mut() {
            let at = (c.0 + (v.found.0 + half - c.0) / 1.015 - half, c.1 + (v.found.1 + half - c.1) / 1.015 - half);
            v.found = at;
            v.shift = (v.template.0 as f64 - at.0, v.template.1 as f64 - at.1);
        }
        let shown = evident_zoom(&seeming, &run.p.register).map(|m| m.scale);
        assert!(shown.is_some_and(|s| (s - 1.015).abs() < 2e-3), "{shown:?}");
        assert!(!run.zoom_found::<u8>(&held[0], &held[1], &seeming).unwrap());

        let fitting = Run { p: StitchParams { register: RegisterParams { fit_scale: true, ..run.p.register }, ..run.p }, ..run };
        let off = Run { p: StitchParams { detect_zoom: false, ..run.p }, ..run };
        for r in [fitting, off] {
            assert!(!r.zoom_found::<u8>(&held[0], &held[2], &zoom).unwrap());
        }
    }
}
