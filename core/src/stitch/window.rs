//! The window of pairs a sequence registers at once.
//!
//! A pair's registration depends on its two frames and the prediction its search starts
//! from, not on the pair before it. So the run plans the next [`WINDOW`] frames' first
//! attempts from what it knows when the window opens (the last good frame's pose, the
//! constant velocity, the keyframe rule applied to the predicted poses), registers those
//! pairs on every thread (or hands them to a registrar in one batch), and then decides the
//! frames in order, bookkeeping alone. A frame whose planned pair did not stand clear on its
//! own (it failed, rested on a weak minority of templates, or a zoom was found) is settled
//! afresh with every attempt, and the window closes there: the planned pairs after it
//! assumed it registered. The plan depends only on the frames and on decisions already
//! taken, never on the thread count, so one thread and many give the same records; one
//! thread registers the planned pairs as the decisions reach them, so it does no work that a
//! closed window discards.

use super::register::PairRegistration;
use super::prediction::{keyframe_left, pair_prediction, Extrapolation, Velocity};
use super::sequence::Run;
use super::settle::{stands_clear, FirstAttempt, RefinedLink};
use super::source::{GrayType, Held};
use super::similarity::Similarity;
use super::PairRequest;
use crate::error::{Error, Result};
use crate::ncc::Integral;
use crate::parallel::{alongside, map_slots, on_pool_thread, Parallelism};
use alloc::vec::Vec;

/// Frames a window plans at the start of a run, and never fewer. The constant-velocity
/// prediction's error grows with the square of the distance from the window's start on a
/// turning path: the sequence tests' sweep, which turns through a circle in 40 frames, was
/// predicted 16 px off 8 frames into a window of 16 (its pairs then registered on half
/// their templates), 4 px off in a window of 8. The run holds the window's frames, and
/// registers its pairs in batches of up to twice the thread count.
pub const WINDOW: usize = 4;

/// Frames a window plans at most, where the path is smooth enough (`WindowSize`): a
/// batch for 16 threads (two pairs each) or one device launch of as many pairs.
pub const WINDOW_MAX: usize = 32;

/// The frames a window holds, at most (their pixels at four bytes each): a window of 4K
/// frames stays near [`WINDOW`] where PAL frames may reach [`WINDOW_MAX`].
pub(super) const WINDOW_BYTES: usize = 256 << 20;

/// Prediction error, in pixels, within which a pair's search costs about what it costs from
/// the truth (demo sweeps of PAL frames: 1 650 evaluations a pair at 0.1 to 0.7 px, 1 800 at
/// 1.9 px, 2 150 at 3.9 px, 2 900 at 6.6 px).
const PREDICTION_BUDGET: f64 = 2.0;

/// How many frames the next window plans, from how far the last one's predictions fell from
/// the registrations: longer windows keep more pairs in flight (more threads busy, larger
/// device launches) and cost nothing where the path is smooth, as on a microscope stage's
/// scan or a slow sweep; on a turning path they would search from far off. The error of a
/// constant-velocity prediction grows with the square of the distance at most (with the
/// acceleration, the cube), so a window whose far half the next window's extrapolation
/// ([`Window::better_extrapolation`]) predicted within a quarter (an eighth) of
/// [`PREDICTION_BUDGET`] is followed by one twice as long, one whose far half it missed the
/// budget by one half as long, and one that closed early (a pair off its plan, a frame that
/// could not be read) by one half as long too. The size depends only on the registrations,
/// never on the thread count.
#[derive(Clone, Copy, Debug)]
pub(super) struct WindowSize {
    frames: usize,
    most: usize,
}

impl WindowSize {
    /// The first window's size, for frames of `size` (pixels).
    pub(super) fn new(size: (usize, usize)) -> Self {
        let frame_bytes = size.0.saturating_mul(size.1).saturating_mul(4).max(1);
        WindowSize { frames: WINDOW, most: (WINDOW_BYTES / frame_bytes).clamp(WINDOW, WINDOW_MAX) }
    }

    pub(super) fn frames(&self) -> usize {
        self.frames
    }

    /// After a window all of whose pairs were decided on their plan.
    pub(super) fn followed(&mut self, window: &Window) {
        // Judged by the errors of the extrapolation the next window plans by.
        let next = window.better_extrapolation();
        let doubling = match next {
            Extrapolation::ConstantVelocity => 4.0,
            Extrapolation::Accelerating => 8.0,
        };
        match window.far_error_by(next) {
            // No far pair to judge by (a window of one frame).
            None => {}
            Some(e) if e <= PREDICTION_BUDGET / doubling => self.frames = (2 * self.frames).min(self.most),
            Some(e) if e <= PREDICTION_BUDGET => {}
            Some(_) => self.shrink(),
        }
    }

    /// After a window that closed before its last pair.
    pub(super) fn closed(&mut self) {
        self.shrink();
    }

    fn shrink(&mut self) {
        self.frames = (self.frames / 2).max(WINDOW);
    }
}

/// One planned pair: frame `moving` against frame `reference`, the search starting at the
/// pair motion `motion`; and the pair motion the other extrapolation predicted
/// (`alternative`), judged against the registration too.
#[derive(Clone, Copy, Debug)]
pub(super) struct Planned {
    pub(super) moving: usize,
    pub(super) reference: usize,
    pub(super) motion: Similarity,
    alternative: Similarity,
}

impl Planned {
    /// The attempt the run makes for this pair: reference, predicted pair motion.
    pub(super) fn attempt(&self) -> (usize, Similarity) {
        (self.reference, self.motion)
    }
}

/// A planned pair's registration, as settled from its planned attempt alone: the
/// reference, the registration, its NCC evaluations.
pub(super) type Settled = (usize, PairRegistration, u64);

/// A planned pair's registration and, where it stands clear, what was found with it on the
/// stage's threads rather than on the run's: whether it shows a zoom the run is to fit
/// ([`Run::zoom_found`]: the pair is then settled afresh, and nothing more is measured);
/// its quality measures ([`Run::quality`]); and, where the plan makes its moving frame the
/// next pair's reference (a keyframe, whose link the run then refines on the whole overlap:
/// [`Run::refine_keyframe`]), that refinement.
#[derive(Clone, Debug)]
pub(super) struct Measured {
    pub(super) settled: Settled,
    pub(super) zoom_found: bool,
    pub(super) quality: Option<(Option<f64>, Option<f64>)>,
    pub(super) keyframe_link: Option<RefinedLink>,
}

/// The window: the planned pairs from frame `first` on, those registered so far, the last
/// good frame they were predicted from, the extrapolation that predicted them, and the
/// largest prediction error of its far half among the pairs decided on their plan so far,
/// by that extrapolation and by the other.
pub(super) struct Window {
    pub(super) planned: Vec<Planned>,
    settled: Vec<Option<Measured>>,
    anchor: usize,
    extrapolation: Extrapolation,
    far_error: Option<f64>,
    far_error_other: Option<f64>,
}

impl Window {
    /// Plans frames `first .. first + frames`: each frame predicted from the last good frame
    /// `last` (index, pose) with velocity `vel` by `extrapolation`, registered against the
    /// keyframe `key` (index, pose) until the prediction leaves `limit`, then against the
    /// frame before it (at its predicted pose), as the run's keyframe rule does.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn plan(first: usize, frames: usize, key: (usize, Similarity), last: (usize, Similarity), vel: Velocity, extrapolation: Extrapolation, limit: (f64, f64), size: (usize, usize)) -> Self {
        let (l, l_pos) = last;
        let guess_by = |m: usize, e: Extrapolation| if m == l { l_pos } else { vel.predict_by(&l_pos, (m - l) as f64, size, e) };
        let guess = |m: usize| guess_by(m, extrapolation);
        let (mut key, mut key_pos) = key;
        let mut planned = Vec::with_capacity(frames);
        for m in first..first + frames {
            let predicted = guess(m);
            if keyframe_left(&predicted, &key_pos, limit, size) {
                // The frame before this one: the last good frame for the window's first.
                let previous = if m == first { l } else { m - 1 };
                (key, key_pos) = (previous, guess(previous));
            }
            let alternative = key_pos.inverse().then(&guess_by(m, extrapolation.other()));
            planned.push(Planned { moving: m, reference: key, motion: key_pos.inverse().then(&predicted), alternative });
        }
        Window { settled: alloc::vec![None; planned.len()], planned, anchor: l, extrapolation, far_error: None, far_error_other: None }
    }

    /// Records that the window's pair `j` was decided on its plan at pair motion `found`:
    /// how far its prediction was, where the pair lies in the window's far half (more than
    /// half the distance of the window's last frame from the frame predicted from, and at
    /// least two frames away: the first frame's error is the registrations' own).
    pub(super) fn decided(&mut self, j: usize, found: &Similarity) {
        let (Some(p), Some(last)) = (self.planned.get(j), self.planned.last()) else { return };
        let (d, far) = (p.moving - self.anchor, last.moving - self.anchor);
        if d >= 2 && 2 * d > far {
            let error = |m: &Similarity| libm::hypot(found.x - m.x, found.y - m.y);
            let worst = |was: Option<f64>, e: f64| Some(was.map_or(e, |w: f64| w.max(e)));
            self.far_error = worst(self.far_error, error(&p.motion));
            self.far_error_other = worst(self.far_error_other, error(&p.alternative));
        }
    }

    /// The extrapolation to plan the next window by, once this one was decided on its plan:
    /// the acceleration only where constant velocity missed the far half by more than
    /// [`PREDICTION_BUDGET`] and the acceleration would have come closer (on footage whose
    /// registrations are noisy, faint or low in contrast, an acceleration from three noisy
    /// poses misleads more than it helps, and constant velocity there stays within the
    /// budget); constant velocity again as soon as it would have come closer.
    pub(super) fn better_extrapolation(&self) -> Extrapolation {
        let (Some(used), Some(other)) = (self.far_error, self.far_error_other) else { return self.extrapolation };
        match self.extrapolation {
            Extrapolation::ConstantVelocity if used > PREDICTION_BUDGET && other < used => Extrapolation::Accelerating,
            Extrapolation::Accelerating if other < used => Extrapolation::ConstantVelocity,
            kept => kept,
        }
    }

    /// The worst error of the window's far half had it been planned by `extrapolation`.
    fn far_error_by(&self, extrapolation: Extrapolation) -> Option<f64> {
        match extrapolation == self.extrapolation {
            true => self.far_error,
            false => self.far_error_other,
        }
    }

    /// Whether the plan makes the moving frame of its pair `j` the next pair's reference: a
    /// keyframe to be, whose pair also refines its link on the whole overlap.
    fn plans_keyframe(&self, j: usize) -> bool {
        self.planned.get(j + 1).is_some_and(|next| next.reference == self.planned[j].moving)
    }

    /// The links the plan refines on the whole overlap, as (reference, keyframe to be).
    pub(super) fn keyframe_links(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        (0..self.planned.len()).filter(|&j| self.plans_keyframe(j)).map(|j| (self.planned[j].reference, self.planned[j].moving))
    }

    /// The plan for frame `i`, if the window holds it.
    pub(super) fn get(&self, i: usize) -> Option<(usize, &Planned)> {
        let first = self.planned.first()?.moving;
        let j = i.checked_sub(first)?;
        self.planned.get(j).map(|p| (j, p))
    }

    /// The pairs the window asks for, for a registrar that registers a batch at once
    /// ([`super::PairRegistrar::speculate`]), each as the run's attempt will ask for it.
    pub(super) fn requests<'h, 'a: 'h, T: GrayType>(&self, find: &dyn Fn(usize) -> Option<&'h Held<'a>>, size: (usize, usize)) -> Result<Vec<PairRequest<'h>>> {
        let mut pairs = Vec::with_capacity(self.planned.len());
        for p in &self.planned {
            let (Some(r), Some(m)) = (find(p.reference), find(p.moving)) else { break };
            let prediction = pair_prediction(&p.motion, size);
            pairs.push(PairRequest { reference: (p.reference, T::gray(r.view::<T>()?)), moving: (p.moving, T::gray(m.view::<T>()?)), prediction });
        }
        Ok(pairs)
    }

    /// The settled registration of the window's pair `j`: registered now, with the pairs
    /// after it up to twice the thread count on `run`'s threads (one pair to a thread), if
    /// it was not registered yet. `find` gives the held frames by index; `buffers` are the
    /// integral images each pair of a batch computes where its searches use them (not a u8
    /// frame's log search), kept for the next batch ([`register_batch`]).
    pub(super) fn settled<'h, 'a: 'h, T: GrayType>(&mut self, j: usize, run: &Run<'a>, find: &(dyn Fn(usize) -> Option<&'h Held<'a>> + Sync), buffers: &mut Vec<Buffers<T>>) -> Result<Measured> {
        if self.settled[j].is_none() {
            let threads = run.par.threads().max(1);
            // A registrar registered the window's pairs when it opened: the batch is then
            // the rest of the window, whatever the threads, so that its quality sums take
            // one call.
            let batch = if run.registrar.is_some() { self.planned.len() } else if threads == 1 { 1 } else { 2 * threads };
            // The pairs whose frames the run holds (a live source may not have them all yet).
            let held = |p: &Planned| find(p.reference).is_some() && find(p.moving).is_some();
            let end = j + 1 + self.planned[j + 1..].iter().take(batch - 1).take_while(|p| held(p)).count();
            let planned = &self.planned[j..end];
            // With a registrar, the quality sums of the batch's pairs are added in one call
            // after their registrations (one launch for the batch, not one per pair).
            let batched = run.registrar.is_some() && run.p.quality;
            // Pairs the registrar registered are looked up, too little work to wake threads for.
            let looked_up = planned.iter().all(|p| run.registrar_registers(&p.motion));
            let par = if looked_up { Parallelism::Sequential } else { run.par };
            // The frames the plan makes the next pair's reference: keyframes to be, whose
            // pairs also refine their links (several pairs' work).
            let keyframe = |k: usize| self.plans_keyframe(j + k);
            // One pair to a thread, handed out longest first: a keyframe's, then the window's
            // later pairs, predicted from further away, which search longest, so that the
            // shorter ones fill in after them (handed out in order, the last pair would start
            // late and run on alone after the other threads were done). Slot `s` is pair
            // `order[s]`.
            let mut order: Vec<usize> = (0..planned.len()).rev().collect();
            order.sort_by_key(|&k| !keyframe(k));
            let done = register_batch(run, par, buffers, planned.len(), |on, s, b| settle_planned::<T>(on, &planned[order[s]], keyframe(order[s]), run.par, find, b, batched));
            // Back in the window's order, each moved once to its place (a sort would move
            // these large results past each other).
            let mut in_order: Vec<Option<Result<Settling>>> = core::iter::repeat_with(|| None).take(planned.len()).collect();
            for (&k, settling) in order.iter().zip(done) {
                in_order[k] = Some(settling);
            }
            let mut done = in_order.into_iter().map(|s| s.unwrap_or_else(|| Err(Error::Backend("internal: a pair of a batch went unsettled".into())))).collect::<Result<Vec<Settling>>>()?;
            measure_batch::<T>(run, &mut done, find)?;
            for (k, s) in done.into_iter().enumerate() {
                self.settled[j + k] = Some(s.measured);
            }
        }
        self.settled[j].take().ok_or_else(|| Error::Backend("internal: a planned pair was settled twice".into()))
    }
}

/// Registers a batch of `n` pairs, `register(on, s, buffers)` for slot `s`, one pair to a
/// thread of `par` (slot after slot where it is sequential), each with buffers of its own
/// from `buffers`, kept for the next batch (a PAL frame's integral images are 3.3 MB in u8
/// and 6.6 MB in u16, which a fresh allocation would fault in page by page). A pair that
/// runs `on` the run's threads searches its templates in chunks that a thread out of pairs
/// takes instead of waiting for the slowest pair. Where the run's thread is one of the
/// pool's, every pair does: the chunks are rayon's, and only an idle worker steals them.
/// From a caller outside the pool a pair's chunks are helper jobs, which wake a worker
/// beside the threads already busy (the caller is one more than the pool's), so there
/// only the pairs still running when a thread finds none left to take spread (the last
/// `threads - 1` handed out, all of them with more threads than pairs), the others
/// searching theirs alone. Where the run is timed, the batch is its parallel stage and
/// each pair a task of it.
pub(super) fn register_batch<'a, T: GrayType, R: Send>(run: &Run<'a>, par: Parallelism, buffers: &mut Vec<Buffers<T>>, n: usize, register: impl Fn(&Run<'a>, usize, &mut Buffers<T>) -> R + Send + Sync) -> Vec<R> {
    if buffers.len() < n {
        buffers.resize_with(n, Default::default);
    }
    let threads = run.par.threads().max(1);
    let (alone, spread) = (run.on(Parallelism::Sequential), run.on(run.par));
    let every_pair_spreads = on_pool_thread();
    let task = |s: usize, b: &mut Buffers<T>| {
        let on = if every_pair_spreads || s + threads > n { &spread } else { &alone };
        match run.times {
            Some(times) => times.pair(|| register(on, s, b)),
            None => register(on, s, b),
        }
    };
    let mut all = || map_slots(&mut buffers[..n], par, task);
    let done = match run.times {
        Some(times) => times.parallel(&mut all),
        None => all(),
    };
    // Awake for the next stage: the pollers may have left during a long one.
    run.awake.rearm();
    done
}

/// A planned pair settled, and, where its quality measures wait for the batch's one
/// registrar call ([`add_batch_quality`]), its moving frame and pair motion; likewise
/// where its keyframe link waits to be refined beside that call ([`measure_batch`]).
struct Settling {
    measured: Measured,
    batch_quality: Option<(usize, Similarity)>,
    link_due: Option<(usize, Similarity)>,
}

/// What the batch's settled pairs wait for: their quality measures ([`add_batch_quality`])
/// and the keyframes' links left to refine then, on the pool's threads while the quality
/// call runs on this one (a registrar's call waits on its device: a host's cores would
/// otherwise idle through it, and the links are the costliest host work of a long run);
/// with no call to make, on the run's threads.
fn measure_batch<'h, 'a: 'h, T: GrayType>(run: &Run<'a>, done: &mut [Settling], find: &(dyn Fn(usize) -> Option<&'h Held<'a>> + Sync)) -> Result<()> {
    let lost = || Error::Backend("internal: lost a planned frame".into());
    let due: Vec<(usize, usize, usize, Similarity)> = done.iter().enumerate().filter_map(|(k, s)| s.link_due.map(|(moving, start)| (k, s.measured.settled.0, moving, start))).collect();
    if due.is_empty() {
        return add_batch_quality::<T>(run, done, find);
    }
    let links = || due.iter().map(|&(_, r, m, start)| refine_planned_link::<T>(run, run.par, find(r).ok_or_else(lost)?, find(m).ok_or_else(lost)?, start)).collect::<Result<Vec<RefinedLink>>>();
    // Without a quality call to wait on (measures off, or every pair's taken already), the
    // links are refined here, this thread taking part.
    let links = if done.iter().any(|s| s.batch_quality.is_some()) {
        let (links, quality) = alongside(run.par, links, || add_batch_quality::<T>(run, done, find));
        quality?;
        let links = links.ok_or_else(|| Error::Backend("internal: the batch's links were not refined".into()))??;
        if let Some(times) = run.times {
            times.links_beside_quality(links.len());
        }
        links
    } else {
        links()?
    };
    for (&(k, ..), link) in due.iter().zip(links) {
        done[k].measured.keyframe_link = Some(link);
        done[k].link_due = None;
    }
    Ok(())
}

/// The link of `moving`, a keyframe to be, to `reference` from pair motion `start`, refined
/// on the whole overlap on `link_par`'s threads.
fn refine_planned_link<T: GrayType>(run: &Run<'_>, link_par: Parallelism, reference: &Held<'_>, moving: &Held<'_>, start: Similarity) -> Result<RefinedLink> {
    if let Some(times) = run.times {
        times.link_found_smoothed(reference.is_smoothed() && moving.is_smoothed());
    }
    run.on(link_par).refine_link::<T>(reference, moving, start)
}

/// The quality measures of the batch's pairs that wait for them: from the registrar in one
/// call, or, where it measures none (f32 frames), on the host over `run`'s threads.
fn add_batch_quality<'h, 'a: 'h, T: GrayType>(run: &Run<'a>, done: &mut [Settling], find: &(dyn Fn(usize) -> Option<&'h Held<'a>> + Sync)) -> Result<()> {
    let lost = || Error::Backend("internal: lost a planned frame".into());
    let waiting: Vec<usize> = (0..done.len()).filter(|&k| done[k].batch_quality.is_some()).collect();
    if waiting.is_empty() {
        return Ok(());
    }
    let mut pairs = Vec::with_capacity(waiting.len());
    for &k in &waiting {
        let s = &done[k];
        let (moving, motion) = s.batch_quality.ok_or_else(lost)?;
        pairs.push((find(s.measured.settled.0).ok_or_else(lost)?, find(moving).ok_or_else(lost)?, motion));
    }
    let measures = match run.registrar_quality::<T>(&pairs)? {
        Some(m) => m,
        None => run.host_quality_of_pairs::<T>(&pairs)?,
    };
    for (k, q) in waiting.into_iter().zip(measures) {
        done[k].measured.quality = Some(q);
        done[k].batch_quality = None;
    }
    Ok(())
}

/// A planned pair settled from its planned attempt alone ([`Run::settle`], stopping where
/// that attempt does not stand clear); its quality measures now, or, with `batched` and a
/// translation, left to the batch; and, where its moving frame is a `keyframe` to be, its
/// link refined on the whole overlap on `link_par`'s threads, or, with a registrar, left to
/// the batch ([`measure_batch`]).
fn settle_planned<'h, 'a: 'h, T: GrayType>(run: &Run<'a>, planned: &Planned, keyframe: bool, link_par: Parallelism, find: &(dyn Fn(usize) -> Option<&'h Held<'a>> + Sync), buffers: &mut Buffers<T>, batched: bool) -> Result<Settling> {
    let lost = || Error::Backend("internal: lost a planned frame".into());
    let current = find(planned.moving).ok_or_else(lost)?;
    let frame = |idx: usize| find(idx).ok_or_else(lost);
    let moving = match run.registrar {
        None => Some(run.search_frame(current.view::<T>()?, core::mem::take(&mut buffers.search))?),
        Some(_) => None,
    };
    let settled = run.settle::<T>(&frame, current, moving.as_ref(), &[planned.attempt()], &mut buffers.turned, FirstAttempt::Only);
    if let Some(m) = moving {
        buffers.search = m.into_integral();
    }
    let settled = settled?;
    let Some(motion) = settled.1.motion().filter(|_| stands_clear(&settled.1)) else {
        return Ok(Settling { measured: Measured { settled, zoom_found: false, quality: None, keyframe_link: None }, batch_quality: None, link_due: None });
    };
    // The run's parameters are those of the decision: they change only at a pair off its
    // plan, which closes the window and drops what it registered ahead.
    if run.zoom_found::<T>(frame(settled.0)?, current, &settled.1)? {
        return Ok(Settling { measured: Measured { settled, zoom_found: true, quality: None, keyframe_link: None }, batch_quality: None, link_due: None });
    }
    let reference = find(settled.0).ok_or_else(lost)?;
    // A faint match found by phase correlation keeps its link as it stands (the run does
    // not refine it). A link's refinement costs several pairs' registrations: it runs on
    // `link_par`'s threads (the run's), those done with their pairs taking part of it.
    // With a registrar the link waits for the batch's quality call, and is refined on the
    // pool's threads while that call keeps the run's thread waiting on the device.
    let faint = run.phase_too_faint(settled.1.phase_significance, settled.1.ncc);
    let (keyframe_link, link_due) = match (keyframe && run.refines_on_overlap() && !faint, run.registrar.is_some()) {
        (false, _) => (None, None),
        (true, false) => (Some(refine_planned_link::<T>(run, link_par, reference, current, motion)?), None),
        (true, true) => (None, Some((planned.moving, motion))),
    };
    if batched && motion.is_translation() {
        return Ok(Settling { measured: Measured { settled, zoom_found: false, quality: None, keyframe_link }, batch_quality: Some((planned.moving, motion)), link_due });
    }
    // A translation's measures on the run's threads, those done with their pairs taking
    // part of them, as the link's; a turned pair's (the moving frame resampled first) on
    // the pair's.
    let measuring = if motion.is_translation() { run.on(link_par) } else { *run };
    let quality = measuring.quality::<T>(reference, current, &motion)?;
    Ok(Settling { measured: Measured { settled, zoom_found: false, quality: Some(quality), keyframe_link }, batch_quality: None, link_due })
}

/// The integral images one pair's registration computes where its searches use them: the
/// moving frame's search, and its turned search where the pair turns.
#[derive(Default)]
pub(super) struct Buffers<T: GrayType> {
    search: Integral<T>,
    turned: Integral<T>,
}

impl<T: GrayType> Buffers<T> {
    /// The moving frame's integral images: upright, and for a turned search.
    pub(super) fn integrals(&mut self) -> (&mut Integral<T>, &mut Integral<T>) {
        (&mut self.search, &mut self.turned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judged(far_error: Option<f64>) -> Window {
        Window { planned: Vec::new(), settled: Vec::new(), anchor: 0, extrapolation: Extrapolation::ConstantVelocity, far_error, far_error_other: None }
    }

    #[test]
    fn a_window_predicted_well_is_followed_by_a_longer_one_and_a_miss_or_a_close_by_a_shorter_one() {
        let mut size = WindowSize::new((720, 576));
        assert_eq!(size.frames(), WINDOW);
        // Within a quarter of the budget: doubled, up to the largest window.
        for want in [8, 16, 32, 32] {
            size.followed(&judged(Some(0.25 * PREDICTION_BUDGET)));
            assert_eq!(size.frames(), want);
        }
        // Between a quarter of the budget and the budget, or nothing to judge by: kept.
        size.followed(&judged(Some(0.9 * PREDICTION_BUDGET)));
        size.followed(&judged(None));
        assert_eq!(size.frames(), 32);
        // Over the budget, or closed early: halved, never below the first window's size.
        size.followed(&judged(Some(1.01 * PREDICTION_BUDGET)));
        assert_eq!(size.frames(), 16);
        for want in [8, 4, 4] {
            size.closed();
            assert_eq!(size.frames(), want);
        }
        size.followed(&judged(Some(f64::INFINITY)));
        assert_eq!(size.frames(), WINDOW);
        // A NaN error (no registration gives one) is not a good prediction.
        size.followed(&judged(Some(0.0)));
        size.followed(&judged(Some(f64::NAN)));
        assert_eq!(size.frames(), WINDOW);
        // Judged by the extrapolation the next window plans by: constant velocity that missed
        // the budget where the acceleration came within it keeps the size; with the
        // acceleration, whose error grows with the cube of the distance, doubled within an
        // eighth of the budget only.
        let judged_both = |extrapolation, used: f64, other: f64| Window { extrapolation, far_error: Some(used), far_error_other: Some(other), ..judged(None) };
        let mut size = WindowSize::new((720, 576));
        size.followed(&judged_both(Extrapolation::ConstantVelocity, 3.0, 1.0));
        assert_eq!(size.frames(), WINDOW);
        size.followed(&judged_both(Extrapolation::ConstantVelocity, 3.0, 0.2 * PREDICTION_BUDGET));
        assert_eq!(size.frames(), WINDOW);
        size.followed(&judged_both(Extrapolation::Accelerating, 0.1 * PREDICTION_BUDGET, 3.0));
        assert_eq!(size.frames(), 2 * WINDOW);
        size.followed(&judged_both(Extrapolation::ConstantVelocity, 3.0, 0.1 * PREDICTION_BUDGET));
        assert_eq!(size.frames(), 4 * WINDOW);
    }

    #[test]
    fn large_frames_keep_the_window_short() {
        let mut size = WindowSize::new((3840, 2160));
        for _ in 0..4 {
            size.followed(&judged(Some(0.0)));
        }
        // 256 MiB of 4K frames at four bytes a pixel: eight.
        assert_eq!(size.frames(), 8);
        let mut huge = WindowSize::new((usize::MAX, 3));
        huge.followed(&judged(Some(0.0)));
        assert_eq!(huge.frames(), WINDOW);
    }

    #[test]
    fn only_the_far_half_of_a_window_is_judged() {
        let motion = |x: f64| Similarity { x, y: 0.0, angle: 0.0, scale: 1.0 };
        // The other extrapolation (constant velocity) predicted every frame 1 px further on.
        let planned = |m: usize| Planned { moving: m, reference: 9, motion: motion(m as f64), alternative: motion(m as f64 + 1.0) };
        // Frames 10 .. 17 predicted from frame 9: distances 1 to 8, the far half 5 to 8.
        let mut w = Window { planned: (10..18).map(planned).collect(), settled: alloc::vec![None; 8], anchor: 9, extrapolation: Extrapolation::Accelerating, far_error: None, far_error_other: None };
        w.decided(0, &motion(10.0 + 50.0));
        w.decided(3, &motion(13.0 + 50.0));
        assert_eq!((w.far_error, w.far_error_other), (None, None));
        assert_eq!(w.better_extrapolation(), Extrapolation::Accelerating);
        w.decided(4, &motion(14.0 + 0.5));
        w.decided(7, &motion(17.0 - 1.5));
        w.decided(6, &motion(16.0 + 1.0));
        assert_eq!((w.far_error, w.far_error_other), (Some(1.5), Some(2.5)));
        assert_eq!(w.better_extrapolation(), Extrapolation::Accelerating);
        // Where the other extrapolation came closer, the next window is planned by it.
        w.decided(5, &motion(15.0 + 3.5));
        assert_eq!((w.far_error, w.far_error_other), (Some(3.5), Some(2.5)));
        assert_eq!(w.better_extrapolation(), Extrapolation::ConstantVelocity);
        // At constant velocity, the acceleration is taken up only where constant velocity
        // missed the budget and the acceleration came closer.
        let missed = |used: f64, other: f64| Window { far_error: Some(used), far_error_other: Some(other), ..judged(None) };
        assert_eq!(missed(1.9, 0.1).better_extrapolation(), Extrapolation::ConstantVelocity);
        assert_eq!(missed(2.5, 2.6).better_extrapolation(), Extrapolation::ConstantVelocity);
        assert_eq!(missed(2.5, 1.0).better_extrapolation(), Extrapolation::Accelerating);
    }
}
