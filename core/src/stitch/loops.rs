//! Closing loops: global consistency over long sweeps.
//!
//! A run registers each frame against one reference, so every frame hangs on a tree of
//! registrations rooted at the reference frame, and a frame's position carries the error of
//! every pair on its path to the root. Endoscopy sweeps and microscope raster scans come
//! back over regions they have seen; there two frames overlap whose tree path is long, and
//! their chained positions disagree by the accumulated error.
//!
//! After a frame registers, the run looks among the earlier keyframes (frames others were
//! registered against) for the one its position overlaps most, by at least
//! [`LOOP_OVERLAP`] of the frame, among those the sweep has left since (some later frame
//! overlapped it by less) and that the tree joins to it through [`LOOP_HOPS`] registrations
//! or more: a return, not the recent past (with frame-to-frame chaining every frame is a
//! keyframe, and the last few always overlap). It registers the frame against that keyframe as it registers any
//! frame (prediction from the chained positions, coarse seeds, grown templates, the same
//! acceptance). Every frame over a revisited region gets its loop, not one per keyframe
//! group: a loop measurement is one pair's measurement, as uncertain as the tree's pairs
//! (a few tenths of a pixel on smooth content), and the solve averages the loops of
//! neighbouring frames. A loop that moves the frame more than
//! [`LOOP_DRIFT`] from its chained position is not believed: chains drift by tenths of a
//! pixel, so such a match is a repeated pattern, not a return.
//!
//! Faint frames get more links than their one registration: a faint pair (registered on the
//! peak of its overlap's correlation, [`super::faint`]) is uncertain by about 0.2 px, and a
//! keyframe passes that on to every frame after it. Each such frame is also registered,
//! where its overlap's correlation peaks, against the faint frames 1, 2, 4, 8 and 16 before
//! it (their band-passed copies kept, [`FAINT_LINK_SPAN`] frames back at most), within
//! [`FAINT_LINK_REACH`] of their chained positions, and the solve below averages them:
//! measured on the fundus at contrast 0.3, such a graph solved together halves the error
//! of a chain of the same pairs.
//!
//! At the end, every registration (the tree and the loops) is a [`Constraint`], and
//! [`solve`] finds all positions together by robust least squares. A loop whose residual
//! after the solve exceeds [`LOOP_REJECT`] disagrees with the rest and is dropped (the worst
//! first, then the solve is repeated). Every registered frame reports the largest residual
//! of its constraints; without any loop the tree is fitted exactly and the positions are the
//! chained ones, unchanged.

use super::prediction::centre_offset;
use super::sequence::{FrameRecord, Run};
use super::source::{FrameSource, GrayType, Held};
use super::similarity::Similarity;
use super::faint;
use super::solve::{solve, Constraint, Solution};
use super::window::{register_batch, Buffers, WINDOW_BYTES};
use crate::error::Result;
use crate::image::Image;
use crate::parallel::Parallelism;
use alloc::collections::VecDeque;
use alloc::vec::Vec;

/// Fewest registrations on the tree path between a frame and a loop partner.
pub const LOOP_HOPS: usize = 4;
/// Least overlap of a frame and its loop partner, as a fraction of the frame's area.
pub const LOOP_OVERLAP: f64 = 0.5;
/// Largest move (pixels) a loop may ask of a frame's chained position.
pub const LOOP_DRIFT: f64 = 4.0;
/// Largest residual (pixels) of a loop after the solve.
pub const LOOP_REJECT: f64 = 1.0;
/// Returns found before they register together (module doc): enough to keep 16 threads
/// busy, and the frames a batch reads again are few.
pub const LOOP_BATCH: usize = 16;
/// Residual (pixels) beyond which the solve down-weights a constraint (Huber's scale).
const ROBUST_SCALE: f64 = 0.5;

/// Frames back a faint frame is linked to (module doc).
pub const FAINT_LINKS: [usize; 5] = [1, 2, 4, 8, 16];
/// Frames back whose band-passed copies a run keeps for faint links.
pub const FAINT_LINK_SPAN: usize = 16;
/// Largest move (pixels, each axis) a faint link may make from the chained positions.
pub const FAINT_LINK_REACH: f64 = 2.0;

/// The loops a run has found.
#[derive(Default)]
pub(super) struct Loops {
    /// Keyframes with their chained poses, in the order they became keyframes, and
    /// whether a later frame has overlapped them by less than [`LOOP_OVERLAP`].
    keyframes: Vec<(usize, Similarity, bool)>,
    /// Accepted loops: the earlier keyframe, the frame, and the pair's motion.
    found: Vec<(usize, usize, Similarity)>,
    /// Returns found and not registered yet, in frame order.
    returns: Vec<Return>,
    /// Recent faint frames: index, chained pose and band-passed copy.
    faint: VecDeque<(usize, Similarity, Image<f32>)>,
    /// Faint links: the earlier frame, the frame, and the pair's motion.
    links: Vec<(usize, usize, Similarity)>,
}

/// A return found and not registered yet: frame `frame` over keyframe `keyframe`, at the
/// chained poses the run had for them when it found it.
struct Return {
    keyframe: usize,
    k_pos: Similarity,
    frame: usize,
    pos: Similarity,
}

/// Returns registered at once for frames of `size`: [`LOOP_BATCH`], fewer where their two
/// frames each (at four bytes a pixel) would exceed what a window holds.
fn returns_at_once(size: (usize, usize)) -> usize {
    let frame_bytes = size.0.saturating_mul(size.1).saturating_mul(4).max(1);
    (WINDOW_BYTES / frame_bytes.saturating_mul(2)).clamp(1, LOOP_BATCH)
}

impl Loops {
    /// Whether enough returns wait to be registered together.
    pub(super) fn returns_due(&self) -> bool {
        self.returns.len() >= LOOP_BATCH
    }
}

impl<'a> Run<'a> {
    /// Looks for a loop from frame `current` (just registered against `reference` at
    /// chained position `current.pos`) with a keyframe `elsewhere` does not rule out (on
    /// another set of islands, whose poses are in other coordinates): a return found waits
    /// in `loops` to be registered ([`Run::register_returns`]).
    pub(super) fn close_loop(&self, current: &Held<'a>, reference: (usize, Similarity), records: &[FrameRecord], loops: &mut Loops, elsewhere: &dyn Fn(usize) -> bool) {
        let (r, r_pos) = reference;
        if !loops.keyframes.iter().any(|k| k.0 == r) {
            loops.keyframes.push((r, r_pos, false));
        }
        let (w, h) = (self.size.0 as f64, self.size.1 as f64);
        // The overlap of two frames as if upright (a turned frame's is a little less).
        let overlap = |p: Similarity| {
            let d = centre_offset(&p, &current.pos, self.size);
            let (dx, dy) = (libm::fabs(d.0), libm::fabs(d.1));
            if dx < w && dy < h { (w - dx) * (h - dy) / (w * h) } else { 0.0 }
        };
        for k in loops.keyframes.iter_mut() {
            k.2 |= overlap(k.1) < LOOP_OVERLAP;
        }
        let partner = loops
            .keyframes
            .iter()
            .filter(|k| k.2 && k.0 != r && !elsewhere(k.0) && overlap(k.1) >= LOOP_OVERLAP && !near_in_tree(records, current.index, k.0, LOOP_HOPS))
            .max_by(|a, b| overlap(a.1).total_cmp(&overlap(b.1)));
        if let Some(&(keyframe, k_pos, _)) = partner {
            loops.returns.push(Return { keyframe, k_pos, frame: current.index, pos: current.pos });
        }
    }

    /// Registers the returns waiting in `loops`, a pair to a thread of the run (one at a
    /// time where a registrar registers them), each against its keyframe as any frame is
    /// registered, from the motion between their chained poses: a loop is kept where the
    /// match moves the frame at most [`LOOP_DRIFT`] from its chained position, in frame
    /// order, and the pair's NCC evaluations are added to the frame's record. A frame that
    /// cannot be read again (a file removed during the run) closes nothing. `buffers` are
    /// the pairs' integral images, kept for the next batch; the frames a batch reads are
    /// held within a window's bytes.
    pub(super) fn register_returns<T: GrayType>(&self, frames: &'a dyn FrameSource, records: &mut [FrameRecord], loops: &mut Loops, buffers: &mut Vec<Buffers<T>>) -> Result<()> {
        let returns = core::mem::take(&mut loops.returns);
        // At most a batch's frames held and integral images made at once.
        for batch in returns.chunks(returns_at_once(self.size)) {
            // Read on this thread (a source is not shared between threads), in frame order.
            let pairs: Vec<_> = batch
                .iter()
                .filter_map(|l| {
                    let (Ok(earlier), Ok(current)) = (self.load(frames, l.keyframe), self.load(frames, l.frame)) else { return None };
                    Some((l, earlier.placed_at(l.k_pos), current.placed_at(l.pos)))
                })
                .collect();
            if pairs.is_empty() {
                continue;
            }
            // One at a time where a registrar registers them, as a window's pairs otherwise.
            let par = if self.registrar.is_some() { Parallelism::Sequential } else { self.par };
            let settled = register_batch(self, par, buffers, pairs.len(), |on, s, b| {
                let (l, earlier, current) = &pairs[s];
                let (search, turned) = b.integrals();
                on.settle_against::<T>(earlier, current, l.k_pos.inverse().then(&l.pos), search, turned)
            });
            for ((l, _, _), result) in pairs.iter().zip(settled) {
                let (reg, evaluations) = result?;
                records[l.frame].evaluations += evaluations;
                if let Some(m) = reg.motion() {
                    let d = centre_offset(&l.k_pos.then(&m), &l.pos, self.size);
                    if libm::hypot(d.0, d.1) <= LOOP_DRIFT {
                        loops.found.push((l.keyframe, l.frame, m));
                    }
                }
            }
        }
        Ok(())
    }

    /// Links faint frame `current` (registered against `reference`, module doc) to the
    /// recent faint frames [`FAINT_LINKS`] before it, then keeps its band-passed copy.
    pub(super) fn link_faint<T: GrayType>(&self, current: &Held<'a>, reference: usize, loops: &mut Loops) -> Result<()> {
        let i = current.index;
        loops.faint.retain(|f| f.0 + FAINT_LINK_SPAN >= i);
        if !current.pos.is_translation() {
            return Ok(());
        }
        let band = current.band::<T>(self.par, self.spares)?;
        for (j, pose, earlier) in loops.faint.iter().filter(|f| f.0 != reference && f.0 < i && FAINT_LINKS.contains(&(i - f.0))) {
            let start = pose.inverse().then(&current.pos);
            if let Some(s) = faint::overlap_peak(earlier.view(), band.view(), start.shift(), FAINT_LINK_REACH, self.par)? {
                loops.links.push((*j, i, Similarity::translation(s)));
            }
        }
        loops.faint.push_back((i, current.pos, band.clone()));
        Ok(())
    }
}

impl Loops {
    /// The frames `moved` took pose `t` then their own (their set of islands joined another).
    pub(super) fn join(&mut self, moved: &dyn Fn(usize) -> bool, t: &Similarity) {
        for k in self.keyframes.iter_mut().filter(|k| moved(k.0)) {
            k.1 = t.then(&k.1);
        }
        for f in self.faint.iter_mut().filter(|f| moved(f.0)) {
            f.1 = t.then(&f.1);
        }
    }

    /// The chain starts again (a new island): the recent faint frames are in other coordinates.
    pub(super) fn restart_faint(&mut self) {
        self.faint.clear();
    }
}

/// Solves the run's poses from its tree of registrations and its `loops` (module doc), with
/// the reference frame `anchor` at (0, 0), for frames of `size`: updates the registered
/// frames' positions (and angles), residuals and loop partners. Without a loop (none found,
/// or all rejected) the tree fits exactly: the chained poses stay, to the bit, with
/// residual 0.
///
/// Turned frames: the angles and the logs of the scales are solved first (they chain by
/// sums, like positions), then the positions with every pair's shift turned and scaled by
/// its `from` frame's solved angle and scale, which makes them linear again. A constraint's
/// residual is then its position residual and its angle and scale residual at the frame's
/// corners, whichever is larger.
///
/// Islands (module `islands`): the pair that joined two is a registration of the tree;
/// frames the anchor's set does not hold keep their chained poses.
pub(super) fn solve_loops(records: &mut [FrameRecord], anchor: usize, loops: &Loops, size: (usize, usize)) -> Result<()> {
    // Every registration as (from, to, the pair's motion).
    let tree: Vec<(usize, usize, Similarity)> = records
        .iter()
        .flat_map(|rec| [rec.reference, rec.joined].map(|r| Some((r?, rec.index, records[r?].pose()?.inverse().then(&rec.pose()?)))))
        .flatten()
        .collect();
    // Loops and faint links alike, each marked whether it is a loop.
    let mut kept: Vec<(usize, usize, Similarity, bool)> = loops.found.iter().map(|&(a, b, m)| (a, b, m, true)).chain(loops.links.iter().map(|&(a, b, m)| (a, b, m, false))).collect();
    for rec in records.iter_mut() {
        rec.residual = rec.position.map(|_| 0.0);
        rec.loop_closure = None;
    }
    let turned = records.iter().any(|r| r.pose().is_some_and(|p| !p.is_translation())) || kept.iter().any(|l| !l.2.is_translation());
    // Angles in pixels: the arc the frame's corner travels, so one robust scale serves both;
    // log scales likewise, as the second coordinate: the corner's move under the zoom. The
    // scales were once kept as chained, so a loop could not correct a zooming sweep's scale
    // drift, and the positions were solved with the chained scales the loops disagreed with.
    // Unscaled frames (log 1 = 0 exactly) solve to scale 1 exactly, as before.
    let radius = libm::hypot(size.0 as f64, size.1 as f64) / 2.0;
    while !kept.is_empty() {
        let all: Vec<(usize, usize, Similarity)> = tree.iter().copied().chain(kept.iter().map(|&(a, b, m, _)| (a, b, m))).collect();
        let angles = if turned {
            let constraints: Vec<Constraint> = all.iter().map(|&(from, to, m)| Constraint { from, to, shift: (m.angle * radius, libm::log(m.scale) * radius), weight: 1.0 }).collect();
            let guess: Vec<Option<(f64, f64)>> = records.iter().map(|r| r.position.map(|_| (r.angle * radius, libm::log(r.scale) * radius))).collect();
            Some(solve(records.len(), anchor, (0.0, 0.0), &constraints, &guess, ROBUST_SCALE)?)
        } else {
            None
        };
        let angle_of = |i: usize| angles.as_ref().and_then(|a| a.positions[i]).map_or(0.0, |p| p.0 / radius);
        let scale_of = |i: usize| angles.as_ref().and_then(|a| a.positions[i]).map_or(records[i].scale, |p| libm::exp(p.1 / radius));
        let constraints: Vec<Constraint> = all
            .iter()
            .map(|&(from, to, m)| {
                let shift = if turned { Similarity { x: 0.0, y: 0.0, angle: angle_of(from), scale: scale_of(from) }.apply(m.shift()) } else { m.shift() };
                Constraint { from, to, shift, weight: 1.0 }
            })
            .collect();
        let guess: Vec<Option<(f64, f64)>> = records.iter().map(|r| r.position).collect();
        let solution = solve(records.len(), anchor, (0.0, 0.0), &constraints, &guess, ROBUST_SCALE)?;
        let residual = |c: usize| match &angles {
            Some(a) => solution.residuals[c].max(a.residuals[c]),
            None => solution.residuals[c],
        };
        let worst = (tree.len()..all.len()).max_by(|&a, &b| residual(a).total_cmp(&residual(b)));
        if let Some(wi) = worst.filter(|&wi| residual(wi) > LOOP_REJECT) {
            kept.remove(wi - tree.len());
            continue;
        }
        apply(records, &solution, angles.as_ref(), radius);
        for (c, &(from, to, _)) in all.iter().enumerate() {
            for f in [from, to] {
                if let Some(r) = records[f].residual.as_mut() {
                    *r = r.max(residual(c));
                }
            }
        }
        for &(from, to, _, _) in kept.iter().filter(|k| k.3) {
            records[to].loop_closure = Some(from);
        }
        break;
    }
    Ok(())
}

/// Writes the solved positions (and angles and log scales, in pixels of arc and of zoom at
/// `radius`) into the registered frames' records.
fn apply(records: &mut [FrameRecord], positions: &Solution, angles: Option<&Solution>, radius: f64) {
    for rec in records.iter_mut().filter(|r| r.position.is_some()) {
        // Off the anchor's component: another set of islands, unchanged.
        let Some(p) = positions.positions[rec.index] else { continue };
        rec.position = Some(p);
        if let Some(a) = angles.and_then(|a| a.positions[rec.index]) {
            rec.angle = a.0 / radius;
            rec.scale = libm::exp(a.1 / radius);
        }
    }
}

/// Whether the tree of registrations (each frame to its reference) joins frames `a` and
/// `b` through fewer than `hops` registrations.
fn near_in_tree(records: &[FrameRecord], a: usize, b: usize, hops: usize) -> bool {
    let mut up: Vec<(usize, usize)> = Vec::with_capacity(hops);
    let mut x = Some(a);
    for d in 0..hops {
        let Some(v) = x else { break };
        up.push((v, d));
        x = records[v].reference;
    }
    let mut y = Some(b);
    for d in 0..hops {
        let Some(v) = y else { break };
        if up.iter().any(|&(u, du)| u == v && du + d < hops) {
            return true;
        }
        y = records[v].reference;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::{AnyView, Image};
    use crate::parallel::Parallelism;
    use crate::stitch::{synth_sequence, SynthParams};
    use crate::stitch::{register_sequence, texture, StitchParams};
    use core::ops::ControlFlow;

    fn run(frames: &[Image<u8>], close_loops: bool) -> Vec<FrameRecord> {
        let views: Vec<AnyView<'_>> = frames.iter().map(|f| AnyView::U8(f.view())).collect();
        let p = StitchParams { close_loops, quality: false, ..Default::default() };
        register_sequence(&views, &p, Parallelism::Sequential, &mut |_| ControlFlow::Continue(())).unwrap().0
    }

    #[test]
    fn large_frames_register_fewer_returns_at_once() {
        assert_eq!(returns_at_once((720, 576)), LOOP_BATCH);
        assert_eq!(returns_at_once((3840, 2160)), 4);
        assert_eq!(returns_at_once((20_000, 20_000)), 1);
        assert_eq!(returns_at_once((usize::MAX, 2)), 1);
    }

    /// A Lissajous sweep of 160 frames that comes back over its own path (this seed's;
    /// most seeds' sweeps come back beside it, overlapping less than LOOP_OVERLAP).
    fn sweep_over_its_own_path() -> crate::stitch::SynthSequence<u8> {
        let src = texture(420, 340, 5).map(|v| v.round() as u8);
        let sp = SynthParams { frame_width: 120, frame_height: 96, frames: 160, max_step: 3.0, noise_sigma: 6.0, blur_passes: 1, seed: 6, ..Default::default() };
        synth_sequence(src.view(), &sp, Parallelism::Sequential).unwrap()
    }

    #[test]
    fn returns_register_in_batches_on_the_stage_with_the_records_of_one_thread() {
        // More returns than a batch, so that they register between windows and at the end.
        let s = sweep_over_its_own_path();
        let views: alloc::vec::Vec<AnyView<'_>> = s.frames.iter().map(|f| AnyView::U8(f.view())).collect();
        let p = StitchParams { quality: false, ..Default::default() };
        let times = crate::stitch::StageTimes::default();
        let one = crate::stitch::register_frames_timed(&crate::stitch::InMemory(&views), &p, Parallelism::Sequential, &mut |_| ControlFlow::Continue(()), &times).unwrap();
        assert_eq!(one, register_sequence(&views, &p, Parallelism::Sequential, &mut |_| ControlFlow::Continue(())).unwrap());
        // Each return's registration is a pair task of the parallel stage, beside the
        // frames' own pairs.
        let (pairs, _) = times.pair_tasks();
        assert!(pairs as usize > views.len() - 1 + LOOP_BATCH, "{pairs} pair tasks");
        assert!(one.0.iter().filter(|r| r.loop_closure.is_some()).count() >= 20);
        #[cfg(feature = "parallel")]
        for threads in [2, 3, 5, 16] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            let many = pool.install(|| register_sequence(&views, &p, Parallelism::AllThreads, &mut |_| ControlFlow::Continue(()))).unwrap();
            assert_eq!(many, one, "{threads} threads");
        }
    }

    #[test]
    fn a_sweep_over_its_own_path_closes_loops_and_drifts_less() {
        let s = sweep_over_its_own_path();
        let err = |recs: &[FrameRecord]| {
            let e: alloc::vec::Vec<f64> = recs.iter().zip(&s.positions).map(|(r, t)| libm::hypot(r.position.unwrap().0 - t.0, r.position.unwrap().1 - t.1)).collect();
            (e.iter().sum::<f64>() / e.len() as f64, e.iter().cloned().fold(0.0, f64::max))
        };
        let (chained, solved) = (run(&s.frames, false), run(&s.frames, true));
        let loops = solved.iter().filter(|r| r.loop_closure.is_some()).count();
        assert!(loops >= 20, "{loops} loops");
        let (before, after) = (err(&chained), err(&solved));
        assert!(after.0 < before.0 && after.1 <= before.1 + 0.05, "mean / max error {before:?} -> {after:?}");
        // Residuals: every registered frame has one with the solve, none without it.
        assert!(chained.iter().all(|r| r.residual.is_none() && r.loop_closure.is_none()));
        assert!(solved.iter().all(|r| r.residual.is_some_and(|x| (0.0..LOOP_REJECT).contains(&x))));
        // A loop partner is an earlier frame, far in the tree.
        for r in solved.iter().filter(|r| r.loop_closure.is_some()) {
            let k = r.loop_closure.unwrap();
            assert!(k < r.index && !near_in_tree(&solved, r.index, k, LOOP_HOPS), "{} -> {k}", r.index);
        }
    }

    #[test]
    fn without_a_loop_the_chained_positions_stand_to_the_bit() {
        // A short sweep never comes back LOOP_HOPS registrations away.
        let src = texture(320, 260, 2).map(|v| v.round() as u8);
        let sp = SynthParams { frame_width: 140, frame_height: 110, frames: 12, max_step: 2.5, noise_sigma: 3.0, blur_passes: 1, seed: 2, ..Default::default() };
        let s = synth_sequence(src.view(), &sp, Parallelism::Sequential).unwrap();
        let (chained, solved) = (run(&s.frames, false), run(&s.frames, true));
        for (a, b) in chained.iter().zip(&solved) {
            assert_eq!((a.position, b.residual, b.loop_closure), (b.position, Some(0.0), None));
        }
    }

    #[test]
    fn frame_to_frame_chaining_closes_no_loop_with_its_recent_past() {
        // Every frame is a keyframe, and the last few always overlap it by more than half.
        let src = texture(320, 260, 4).map(|v| v.round() as u8);
        let sp = SynthParams { frame_width: 140, frame_height: 110, frames: 16, max_step: 2.0, noise_sigma: 3.0, blur_passes: 1, seed: 4, ..Default::default() };
        let s = synth_sequence(src.view(), &sp, Parallelism::Sequential).unwrap();
        let views: alloc::vec::Vec<AnyView<'_>> = s.frames.iter().map(|f| AnyView::U8(f.view())).collect();
        let p = StitchParams { keyframe_shift: 0.0, quality: false, ..Default::default() };
        let (recs, _) = register_sequence(&views, &p, Parallelism::Sequential, &mut |_| ControlFlow::Continue(())).unwrap();
        assert!(recs.iter().all(|r| r.loop_closure.is_none() && r.residual == Some(0.0)), "{recs:?}");
        assert!(recs.iter().all(|r| r.evaluations < 20_000), "no extra registrations");
    }

    #[test]
    fn tree_distance_counts_registrations_through_the_common_ancestor() {
        // 0 <- 1 <- 2 <- 3, 1 <- 4, 4 <- 5
        let parents = [None, Some(0), Some(1), Some(2), Some(1), Some(4)];
        let recs: alloc::vec::Vec<FrameRecord> = parents
            .iter()
            .enumerate()
            .map(|(i, &p)| FrameRecord { index: i, position: Some((0.0, 0.0)), angle: 0.0, scale: 1.0, reference: p, skip: None, ncc: 1.0, vectors_used: 0, confidence: 1.0, margin: 0.0, evaluations: 0, quality: None, quality_grid: None, residual: None, loop_closure: None, phase_significance: None, island: None, joined: None, island_position: None })
            .collect();
        // 3 to 5: 3-2-1-4-5, four registrations.
        assert!(near_in_tree(&recs, 3, 5, 5) && !near_in_tree(&recs, 3, 5, 4));
        assert!(near_in_tree(&recs, 5, 3, 5) && !near_in_tree(&recs, 5, 3, 4));
        assert!(near_in_tree(&recs, 3, 0, 4) && !near_in_tree(&recs, 3, 0, 3));
        assert!(near_in_tree(&recs, 2, 2, 1));
    }
}
