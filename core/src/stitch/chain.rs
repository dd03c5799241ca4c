//! The decisions a run takes frame by frame, in frame order, over what its windows
//! registered: which frame is the reference, the keyframe and the last good frame; whether
//! a frame stands on its plan, on another attempt, found again among earlier keyframes, on
//! a new island, or is skipped with its reason; its record; and the loop links and island
//! joins it brings. [`Chain`] is what the run carries from one frame's decision to the next;
//! `Run::register` (module `sequence`) walks the frames through its steps.

use super::islands::{Islands, JOIN_CANDIDATES};
use super::loops::{solve_loops, Loops};
use super::prediction::{Extrapolation, Velocity};
use super::register::{PairRegistration, SkipReason};
use super::relocate::{relocatable, Keyframes, RELOCATE_CANDIDATES};
use super::sequence::{check_progress, nothing_registered, FrameRecord, Run};
use super::settle::{stands_clear, FirstAttempt, RefinedLink};
use super::similarity::Similarity;
use super::source::{FrameSource, GrayType, Held, Link};
use super::window::{Buffers, Planned, Window, WindowSize};
use crate::error::{Error, Result};
use crate::ncc::Integral;
use crate::parallel::alongside;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::ops::ControlFlow;

/// A frame read ahead, or why it is skipped.
type Loaded<'a> = core::result::Result<Held<'a>, SkipReason>;

/// What a run carries from one frame's decision to the next.
pub(super) struct Chain<'a, T: GrayType> {
    /// The run's parameters change where a zoom is found (the scale is fitted from then on).
    run: Run<'a>,
    frames: &'a dyn FrameSource,
    /// How far the prediction may leave the keyframe before the last good frame takes its place.
    limit: (f64, f64),
    records: Vec<FrameRecord>,
    /// The frames the run may register against, found by index: the keyframe, the last
    /// good frame and, until the first pair registers, the latest readable frame that did
    /// not register against the reference candidate `key` (a candidate too).
    held: Vec<Held<'a>>,
    key: Option<usize>,
    last: Option<usize>,
    pending: Option<usize>,
    /// The frame at position (0, 0), once a pair has registered.
    reference: Option<usize>,
    vel: Velocity,
    extrapolation: Extrapolation,
    loops: Loops,
    /// The keyframes a lost frame is searched among (module `relocate`), the islands
    /// (module `islands`) and the frame that may start the next one.
    keyframes: Keyframes,
    islands: Islands,
    seed: Option<usize>,
    /// The window of planned pairs (module `window`) and its frames, read ahead once each:
    /// the run takes frame i from `ahead` when it gets there.
    window: Option<Window>,
    window_size: WindowSize,
    window_buffers: Vec<Buffers<T>>,
    ahead: VecDeque<(usize, Loaded<'a>)>,
    /// The integral images of a frame registered off the plan: upright, and turned.
    buffer: Integral<T>,
    turn_buffer: Integral<T>,
}

/// A frame's registration as the run decided it, before its record: against frame
/// `reference` (the last one tried where none succeeded).
pub(super) struct Decided<'a> {
    reference: usize,
    reg: PairRegistration,
    evaluations: u64,
    /// Its quality measures, where its window measured them.
    quality: Option<(Option<f64>, Option<f64>)>,
    /// Its link refined on the whole overlap, where its window refined it.
    keyframe_link: Option<RefinedLink>,
    /// The keyframe the frame was found again on, among the earlier ones (module `relocate`).
    relocated: Option<Held<'a>>,
    /// Registered against the seed of a new island (module `islands`).
    seeded: bool,
    /// The keyframe before the frame's plan or attempts moved it.
    key_before: Option<usize>,
    /// The reference the frame's window planned it against.
    planned_reference: Option<usize>,
}

impl<'a, T: GrayType> Chain<'a, T> {
    pub(super) fn new(run: Run<'a>, frames: &'a dyn FrameSource) -> Self {
        let (w, h) = run.size;
        Chain {
            run,
            frames,
            limit: (run.p.keyframe_shift * w as f64, run.p.keyframe_shift * h as f64),
            records: Vec::with_capacity(frames.len()),
            held: Vec::new(),
            key: None,
            last: None,
            pending: None,
            reference: None,
            vel: Velocity::default(),
            extrapolation: Extrapolation::default(),
            loops: Loops::default(),
            keyframes: Keyframes::default(),
            islands: Islands::default(),
            seed: None,
            window: None,
            window_size: WindowSize::new(run.size),
            window_buffers: Vec::new(),
            ahead: VecDeque::new(),
            buffer: Integral::default(),
            turn_buffer: Integral::default(),
        }
    }

    /// Frame `i`: read ahead with its window, or read now; or why it is skipped.
    pub(super) fn take(&mut self, i: usize) -> Loaded<'a> {
        match self.ahead.pop_front() {
            Some((j, f)) if j == i => f,
            _ => self.run.load(self.frames, i),
        }
    }

    /// Frame `i` skipped unread (`reason`); the window closes here.
    pub(super) fn unreadable(&mut self, i: usize, reason: SkipReason) {
        self.records.push(FrameRecord::skipped(i, reason, 0));
        self.close_window();
    }

    /// Whether a readable frame came: the first is the reference candidate.
    pub(super) fn started(&self) -> bool {
        self.key.is_some()
    }

    /// The first readable frame: the reference candidate.
    pub(super) fn start(&mut self, current: Held<'a>) {
        self.records.push(FrameRecord::reference(current.index));
        self.key = Some(current.index);
        self.held.push(current);
    }

    /// Opens a window at frame `i` where the window open does not hold it, and reads its
    /// frames ahead as far as the source has them.
    ///
    /// Once a pair has registered, each frame's first attempt comes from the window's plan,
    /// made when the window opens. Before any pair has registered, the next frame alone is
    /// planned against the reference at rest: the first pair, too, registers in the
    /// parallel stage. A registrar hears the planned pairs of a window that opens
    /// ([`PairRegistrar::speculate`](super::PairRegistrar::speculate)).
    pub(super) fn open_window(&mut self, i: usize, current: &Held<'a>) -> Result<()> {
        let opened = self.window.as_ref().and_then(|w| w.get(i)).is_none() && self.plan_window(i)?;
        if let Some(end) = self.window.as_ref().and_then(|w| w.planned.last()).map(|p| p.moving) {
            while i + 1 + self.ahead.len() <= end && i + 1 + self.ahead.len() < self.frames.ready() {
                let j = i + 1 + self.ahead.len();
                self.ahead.push_back((j, self.run.load(self.frames, j)));
            }
        }
        if let (Some(g), Some(w), true) = (self.run.registrar, self.window.as_ref(), opened) {
            let find = |idx: usize| window_frame(&self.held, current, &self.ahead, idx);
            let requests = w.requests::<T>(&find, self.run.size)?;
            // The frames of the links the window will refine on the whole overlap are smoothed
            // on the pool's threads while this one waits on the registrar's launch, and the
            // refinement's working memory made where the run has none yet: a host's other
            // cores are idle while a device registers, and the links then find the copies
            // they would have made (a plan the pairs leave has smoothed a frame no link
            // reads, which the frame recycles when it departs). A frame that fails to smooth
            // here is smoothed again by its link, which reports why.
            let smoothing: Vec<usize> = match self.run.refines_on_overlap() {
                true => w.keyframe_links().flat_map(|(r, m)| [r, m]).collect(),
                false => Vec::new(),
            };
            let (run, p) = (&self.run, &self.run.p.register);
            let launch = || g.speculate(&requests, p);
            let smooth = || {
                smoothing.iter().filter_map(|&idx| find(idx)).for_each(|f| drop(f.smoothed::<T>(run.par, run.spares)));
                run.keep_overlap_scratch();
            };
            match smoothing.is_empty() {
                true => launch()?,
                false => alongside(run.par, smooth, launch).1?,
            }
        }
        Ok(())
    }

    /// Plans the window from frame `i` on; whether there was a frame to plan it from.
    fn plan_window(&mut self, i: usize) -> Result<bool> {
        let Some(k) = self.key else { return Ok(false) };
        // The window before, all of it decided on its plan, sizes this one.
        if let Some(w) = self.window.take() {
            self.window_size.followed(&w);
            self.extrapolation = w.better_extrapolation();
        }
        // Between windows, the returns found so far register together (module `loops`).
        if self.loops.returns_due() {
            self.run.register_returns::<T>(self.frames, &mut self.records, &mut self.loops, &mut self.window_buffers)?;
        }
        // Planned from the last good frame; before any pair registered, the next frame
        // alone from the reference candidate; with a pending candidate, no plan.
        let (l, frames) = match (self.last, self.pending) {
            (Some(l), _) => (l, self.window_size.frames()),
            (None, None) => (k, 1),
            (None, Some(_)) => return Ok(false),
        };
        if let Some(times) = self.run.times {
            times.window(frames);
        }
        let at = |idx: usize| held_frame(&self.held, idx).map(|f| f.pos);
        self.window = Some(Window::plan(i, frames, (k, at(k)?), (l, at(l)?), self.vel, self.extrapolation, self.limit, self.run.size));
        Ok(true)
    }

    fn close_window(&mut self) {
        if self.window.take().is_some() {
            self.window_size.closed();
        }
    }

    /// Frame `i`'s registration: on its plan where the pair its window registered stands
    /// clear, else over every attempt (module `settle`), the window closing there; then,
    /// where it registered nowhere, searched among the earlier keyframes and against the
    /// seed of a new island.
    pub(super) fn register(&mut self, i: usize, current: &Held<'a>) -> Result<Decided<'a>> {
        let k = self.key.ok_or_else(|| Error::Backend("internal: a frame registered before the reference candidate".into()))?;
        let planned = self.window.as_ref().and_then(|w| w.get(i)).map(|(j, p)| (j, *p));
        let key_before = self.key;
        // The last good frame about to become the keyframe carries its registration's error
        // to every frame registered after it: that link is refined on the whole overlap.
        // (A frame off its plan may register against it too: refined then, in `record`.)
        if let (Some(l), Some((_, pl)), true) = (self.last, planned, self.run.refines_on_overlap()) {
            if pl.reference == l && becomes_keyframe(&self.records, l, self.key) {
                self.run.refine_keyframe::<T>(&mut self.held, &mut self.records, l)?;
            }
        }
        let mut decided = match self.on_plan(planned, current)? {
            Ok(decided) => decided,
            Err(first) => self.off_plan(i, k, current, planned.map(|(_, p)| p), first)?,
        };
        (decided.key_before, decided.planned_reference) = (key_before, planned.map(|(_, p)| p.reference));
        if decided.reg.shift.is_none() {
            self.search_lost(k, current, &mut decided)?;
        }
        Ok(decided)
    }

    /// The planned pair, registered with its window's others: decided where it stood clear
    /// on its own (no other attempt would have been made) and found no zoom; else how the
    /// attempts off the plan begin (a first attempt that did not stand clear need not
    /// register again).
    fn on_plan(&mut self, planned: Option<(usize, Planned)>, current: &Held<'a>) -> Result<core::result::Result<Decided<'a>, FirstAttempt>> {
        let (Some((j, pl)), Some(w)) = (planned, self.window.as_mut()) else { return Ok(Err(FirstAttempt::Every)) };
        self.key = Some(pl.reference);
        let shared = |idx: usize| window_frame(&self.held, current, &self.ahead, idx);
        let measured = w.settled::<T>(j, &self.run, &shared, &mut self.window_buffers)?;
        if !stands_clear(&measured.settled.1) {
            return Ok(Err(FirstAttempt::Known(measured.settled.1)));
        }
        if measured.zoom_found {
            return Ok(Err(FirstAttempt::Every));
        }
        if let Some(found) = measured.settled.1.motion() {
            w.decided(j, &found);
        }
        let (reference, reg, evaluations) = measured.settled;
        Ok(Ok(Decided { quality: measured.quality, keyframe_link: measured.keyframe_link, ..Decided::new(reference, reg, evaluations) }))
    }

    /// Off the plan: every attempt, and the window closes here. A zoom the scale-free model
    /// cannot follow has the scale fitted from this pair on.
    fn off_plan(&mut self, i: usize, k: usize, current: &Held<'a>, planned: Option<Planned>, first: FirstAttempt) -> Result<Decided<'a>> {
        self.close_window();
        let find = |idx: usize| held_frame(&self.held, idx);
        let attempts = self.run.attempts(&find, (k, &mut self.key), self.last, self.pending, planned, self.vel, i, self.limit)?;
        // The known first attempt's evaluations were made once, in the window.
        let known = match &first {
            FirstAttempt::Known(reg) => reg.evaluations,
            _ => 0,
        };
        let buffer = core::mem::take(&mut self.buffer);
        let (mut r, mut reg, mut evaluations) = self.settle(current, &attempts, buffer, first)?;
        evaluations += known;
        if self.run.zoom_found::<T>(held_frame(&self.held, r)?, current, &reg)? {
            self.run.p.register.fit_scale = true;
            let (zr, zreg, zevaluations) = self.settle(current, &attempts, Integral::default(), FirstAttempt::Every)?;
            (r, reg, evaluations) = (zr, zreg, evaluations + zevaluations);
        }
        Ok(Decided::new(r, reg, evaluations))
    }

    /// [`Run::settle`] over `attempts` against the held frames, the CPU's searches in
    /// `buffer` (kept as the run's buffer).
    fn settle(&mut self, current: &Held<'a>, attempts: &[(usize, Similarity)], buffer: Integral<T>, first: FirstAttempt) -> Result<(usize, PairRegistration, u64)> {
        let moving = match self.run.registrar {
            None => Some(self.run.search_frame(current.view::<T>()?, buffer)?),
            Some(_) => None,
        };
        let find = |idx: usize| held_frame(&self.held, idx);
        let settled = self.run.settle::<T>(&find, current, moving.as_ref(), attempts, &mut self.turn_buffer, first);
        if let Some(m) = moving {
            self.buffer = m.into_integral();
        }
        settled
    }

    /// A frame registered nowhere: searched among the earlier keyframes, the chain
    /// continuing from the one it registers against; found nowhere, a new island where it
    /// registers against the seed (module `islands`), its match confirmed on texture as a
    /// lost frame's must be.
    fn search_lost(&mut self, k: usize, current: &Held<'a>, decided: &mut Decided<'a>) -> Result<()> {
        if self.reference.is_none() {
            return Ok(());
        }
        if relocatable(decided.reg.skip.as_ref()) && self.keyframes.len() > 0 {
            let tried: Vec<usize> = [Some(k), self.key, self.last].into_iter().flatten().collect();
            let (found, spent) = self.run.relocate::<T>(self.frames, current, &mut self.keyframes, &|idx, _| tried.contains(&idx), RELOCATE_CANDIDATES, &mut self.buffer, &mut self.turn_buffer)?;
            decided.evaluations += spent;
            if let Some(f) = found {
                (decided.reference, decided.reg) = (f.keyframe.index, f.registration);
                decided.relocated = Some(f.keyframe);
                return Ok(());
            }
        }
        if let Some(s) = self.seed.and_then(|s| self.held.iter().find(|f| f.index == s)) {
            let (registration, spent) = self.run.confirming_every_match().settle_against::<T>(s, current, Similarity::IDENTITY, &mut self.buffer, &mut self.turn_buffer)?;
            decided.evaluations += spent;
            if registration.shift.is_some() {
                (decided.reference, decided.reg, decided.seeded) = (s.index, registration, true);
            }
        }
        Ok(())
    }

    /// Frame `i` registered nowhere: skipped with its reason. Before the first pair it is
    /// the next reference candidate; after, a frame lost with texture enough to be searched
    /// for is the next island's seed.
    pub(super) fn lost(&mut self, i: usize, mut current: Held<'a>, decided: Decided<'a>) {
        self.records.push(FrameRecord::skipped(i, decided.reg.skip.unwrap_or(SkipReason::NoOverlap), decided.evaluations));
        if self.reference.is_none() {
            self.pending = Some(i);
            let candidate = decided.key_before;
            self.keep_held(|f| Some(f) == candidate);
            self.held.push(current);
            return;
        }
        // The keyframe may have moved to the last good frame.
        if relocatable(self.records[i].skip.as_ref()) {
            self.seed = Some(i);
        }
        let (key, last, seed) = (self.key, self.last, self.seed);
        self.keep_held(|f| Some(f) == key || Some(f) == last || Some(f) == seed);
        match seed == Some(i) {
            true => self.held.push(current),
            false => current.recycle(self.run.spares),
        }
    }

    /// Keeps the held frames whose indices `keep` picks; the others depart, their copies
    /// passed on to the run's spares.
    fn keep_held(&mut self, keep: impl Fn(usize) -> bool) {
        let spares = self.run.spares;
        self.held.retain_mut(|f| {
            let kept = keep(f.index);
            if !kept {
                f.recycle(spares);
            }
            kept
        });
    }

    /// Frame `i` registered with pair shift `s`: placed, recorded, held as the last good
    /// frame; then the loops it closes and, for a new keyframe while islands stand apart,
    /// the islands it joins.
    pub(super) fn registered(&mut self, i: usize, current: Held<'a>, mut decided: Decided<'a>, s: (f64, f64)) -> Result<()> {
        let r = decided.reference;
        let (reg, evaluations) = (&decided.reg, decided.evaluations);
        if let (None, Some(k)) = (self.reference, decided.key_before) {
            if r != k {
                // The pending frame is the reference: the candidate before it matched nothing.
                self.records[k] = FrameRecord::skipped(k, SkipReason::NoSuccessor { reference: r }, self.records[k].evaluations);
                self.records[r] = FrameRecord { evaluations: self.records[r].evaluations, ..FrameRecord::reference(r) };
            }
            self.reference = Some(r);
            self.islands.start(r);
            self.pending = None;
        }
        if decided.seeded {
            self.records[r] = FrameRecord { evaluations: self.records[r].evaluations, ..FrameRecord::reference(r) };
            self.islands.start(r);
            self.loops.restart_faint();
        }
        self.seed = None;
        // A frame off its plan that registered against the last good frame makes that the
        // keyframe: its link is refined now, as a planned pair's is before it registers (the
        // pair's motion is relative to it), unless the plan made it the keyframe and its
        // link was refined then.
        if let (None, Some(l), true) = (&decided.relocated, self.last, self.run.refines_on_overlap()) {
            if r == l && decided.planned_reference != Some(l) && becomes_keyframe(&self.records, l, decided.key_before) {
                self.run.refine_keyframe::<T>(&mut self.held, &mut self.records, l)?;
            }
        }
        let r_held = match &decided.relocated {
            Some(keyframe) => keyframe,
            None => held_frame(&self.held, r)?,
        };
        let r_pos = r_held.pos;
        let island = self.records[r].island.ok_or_else(|| Error::Backend("internal: a reference on no island".into()))?;
        let set = self.islands.set_of(island);
        let newly_kept = self.keyframes.keep(r, r_pos, set, self.run.size);
        let motion = Similarity { x: s.0, y: s.1, angle: reg.angle, scale: reg.scale };
        let pos = r_pos.then(&motion);
        let mut rec = FrameRecord::skipped(i, SkipReason::NoOverlap, evaluations);
        rec = FrameRecord { position: Some(pos.shift()), angle: pos.angle, scale: pos.scale, reference: Some(r), island: Some(island), skip: None, ncc: reg.ncc, vectors_used: reg.vectors_used, confidence: reg.confidence, margin: reg.margin, phase_significance: reg.phase_significance, ..rec };
        (rec.quality, rec.quality_grid) = match decided.quality {
            Some(q) => q,
            None => self.run.quality::<T>(r_held, &current, &motion)?,
        };
        let (l, l_pos) = match self.last {
            Some(l) => (l, held_frame(&self.held, l)?.pos),
            None => (r, r_held.pos),
        };
        // Found again far from where the sweep was lost: its motion is unknown; a new
        // island's is from its first frame.
        self.vel = match (&decided.relocated, decided.seeded) {
            (Some(_), _) => Velocity::default(),
            (None, true) => Velocity::between(&r_pos, &pos, (i - r) as f64, self.run.size),
            (None, false) => self.vel.then(Velocity::between(&l_pos, &pos, (i - l) as f64, self.run.size)),
        };
        self.key = Some(r);
        self.last = Some(i);
        self.keep_held(|f| f == r);
        self.held.extend(decided.relocated.take());
        self.records.push(rec);
        let current = current.placed_at(pos).linked(Link { reference: r, motion, refined: decided.keyframe_link });
        if self.run.p.close_loops {
            self.close_loops(i, &current, (r, r_pos), set)?;
        }
        self.held.push(current);
        if newly_kept && self.islands.many() {
            self.join_islands(i, r, r_pos, set)?;
        }
        Ok(())
    }

    /// The loops frame `i` (`current`, registered against `reference` at its pose) closes
    /// with the earlier frames of its set `set`, and its faint link where it matched faintly.
    fn close_loops(&mut self, i: usize, current: &Held<'a>, reference: (usize, Similarity), set: usize) -> Result<()> {
        // Another set's keyframes are in other coordinates.
        let elsewhere: Vec<usize> = match self.islands.many() {
            true => self.records.iter().filter(|x| self.islands.set_of_record(x).is_some_and(|s| s != set)).map(|x| x.index).collect(),
            false => Vec::new(),
        };
        self.run.close_loop(current, reference, &self.records, &mut self.loops, &|k| elsewhere.binary_search(&k).is_ok());
        if self.run.faint_phase(&self.records[i]) {
            self.run.link_faint::<T>(current, reference.0, &mut self.loops)?;
        }
        Ok(())
    }

    /// A new keyframe `r` (at `r_pos`, of set `set`) while islands stand apart, searched on
    /// the others; where it is found, its set moves into the other's coordinates and joins
    /// it (frame `i` pays the search's evaluations).
    fn join_islands(&mut self, i: usize, r: usize, r_pos: Similarity, set: usize) -> Result<()> {
        let keyframe = held_frame(&self.held, r)?;
        let (found, spent) = self.run.relocate::<T>(self.frames, keyframe, &mut self.keyframes, &|_, s| s == set, JOIN_CANDIDATES, &mut self.buffer, &mut self.turn_buffer)?;
        self.records[i].evaluations += spent;
        let (Some(f), Some(m)) = (found.as_ref(), found.as_ref().and_then(|f| f.registration.motion())) else { return Ok(()) };
        // The pose that moves this set into the other's coordinates.
        let t = f.keyframe.pos.then(&m).then(&r_pos.inverse());
        let moved: Vec<bool> = self.records.iter().map(|x| self.islands.set_of_record(x) == Some(set)).collect();
        self.loops.join(&|idx| moved[idx], &t);
        self.islands.move_set(&mut self.records, set, &t);
        self.keyframes.join(set, f.set, &t);
        for h in self.held.iter_mut() {
            h.pos = t.then(&h.pos);
        }
        self.records[r].joined = Some(f.keyframe.index);
        self.islands.join(set, f.set);
        // The window's plan and the velocity were in the old coordinates.
        self.window = None;
        if !t.is_translation() {
            self.vel = Velocity::default();
        }
        Ok(())
    }

    /// After each frame: the source hears the records (as published, module `islands`),
    /// `progress` the count.
    pub(super) fn step(&self, progress: &mut dyn FnMut(usize) -> ControlFlow<()>) -> Result<()> {
        if self.islands.many() {
            let mut published = self.records.to_vec();
            self.islands.publish(&mut published);
            self.frames.recorded(&published);
        } else {
            self.frames.recorded(&self.records);
        }
        check_progress(progress, self.records.len())
    }

    /// The records once every frame is decided: the returns still due registered, the
    /// loops solved, the islands published; and the panorama's reference (the largest
    /// island's where several stand apart).
    pub(super) fn finish(mut self) -> Result<(Vec<FrameRecord>, usize)> {
        match (self.reference, self.key) {
            (Some(r), _) => {
                let anchor = if self.islands.many() { self.islands.panorama_set(&self.records).unwrap_or(r) } else { r };
                if self.run.p.close_loops {
                    self.run.register_returns::<T>(self.frames, &mut self.records, &mut self.loops, &mut self.window_buffers)?;
                    solve_loops(&mut self.records, anchor, &self.loops, self.run.size)?;
                }
                self.islands.publish(&mut self.records);
                Ok((self.records, anchor))
            }
            (None, Some(k)) if self.frames.len() == 1 => Ok((self.records, k)),
            _ => Err(nothing_registered(&self.records)),
        }
    }
}

impl Decided<'_> {
    /// The pair's shift, where the frame registered.
    pub(super) fn shift(&self) -> Option<(f64, f64)> {
        self.reg.shift
    }

    /// Registration `reg` against frame `reference` for `evaluations`, measured and
    /// refined later if at all.
    fn new(reference: usize, reg: PairRegistration, evaluations: u64) -> Self {
        Decided { reference, reg, evaluations, quality: None, keyframe_link: None, relocated: None, seeded: false, key_before: None, planned_reference: None }
    }
}

/// Whether the last good frame `l` becomes the keyframe in place of `key` when a frame
/// registers against it: it is not the keyframe yet and registered against it, so that its
/// link's error would be carried to every frame after it.
fn becomes_keyframe(records: &[FrameRecord], l: usize, key: Option<usize>) -> bool {
    key != Some(l) && records[l].reference == key
}

/// Held frame `idx`; an internal error if the run let it go while a pair still refers to it.
pub(super) fn held_frame<'h, 'a>(held: &'h [Held<'a>], idx: usize) -> Result<&'h Held<'a>> {
    held.iter().find(|f| f.index == idx).ok_or_else(|| Error::Backend("internal: lost a reference frame".into()))
}

/// Frame `idx` among the frames a window's pairs may use: those held, the current one, and
/// those read ahead.
fn window_frame<'h, 'a>(held: &'h [Held<'a>], current: &'h Held<'a>, ahead: &'h VecDeque<(usize, Loaded<'a>)>, idx: usize) -> Option<&'h Held<'a>> {
    held.iter().chain([current]).chain(ahead.iter().filter_map(|(_, f)| f.as_ref().ok())).find(|f| f.index == idx)
}
