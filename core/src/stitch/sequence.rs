//! Registration of a whole sequence and the stitching pipeline.
//!
//! Each frame is registered against a reference frame, the search starting at the shift
//! predicted at constant velocity from the last good frame when the frame's window opened
//! (module `window`: a window's pairs register at once), and its position in frame-0
//! coordinates is the reference's position plus the pair's shift.
//!
//! Reference choice. The original registered every frame against its predecessor, so the
//! small subpixel error of each pair adds up along the sequence (a random walk plus any
//! bias). Here the reference is a *keyframe*: it stays the same while the predicted shift
//! from it is within `keyframe_shift` of the frame size, so errors only accumulate when the
//! keyframe changes (every few tens of frames instead of every frame); `keyframe_shift = 0`
//! gives the original frame-to-frame chaining.
//!
//! A pair that cannot be registered is reported as skipped with its reason, its frame is
//! left out of the panorama, and registration goes on from the last good frame (the next
//! frame's prediction spans the gap). Before skipping, the pair is retried against the last
//! good frame (if the keyframe is older), with the motion reversed (a sweep that turned
//! back) and with a zero prediction (if the motion model was wrong): nothing is lost
//! silently and one bad frame never aborts the run. A frame
//! that cannot be read, differs in size or pixel type from the sequence, or holds NaN or
//! infinite pixels is skipped the same way, with its reason. A frame that matches neither
//! is searched among the earlier keyframes (module `relocate`), and where nothing is found
//! the run starts an island that later joins the others (module `islands`).
//!
//! The reference frame (position (0, 0)) is the first frame that registers with a
//! successor, normally frame 0: a first frame that matches nothing (noise, a blank, a
//! corrupt file) is skipped and the next frame that registers with its successor takes its
//! place, as [`Panorama::reference`] says. A run in which no two frames register is an
//! error, not a panorama of one frame.
//!
//! Memory: frames come from a [`FrameSource`] one at a time, and the run holds only the
//! frames it registers against (the keyframe, the last good frame, a reference candidate)
//! and the current one; the composite reads each frame once more to paste it. A source
//! that decodes files therefore keeps a few frames in memory whatever the sequence's length.
//! The run reads a window of [`WINDOW`](super::WINDOW) to [`WINDOW_MAX`](super::WINDOW_MAX)
//! frames ahead (as many as the path lets its predictions hold, within 256 MiB), still each
//! once, and registers their planned pairs together (module `window`): over the CPU's
//! threads, or handed to a registrar in one batch ([`PairRegistrar::speculate`], a GPU
//! registering them in one launch).
//!
//! The run's stages, each in its module: `source` (the frames read and held), `prediction`
//! (where the next frame is expected), `window` (a window's pairs planned and registered at
//! once), `chain` (each frame's decisions in frame order over what its window registered),
//! `settle` (one frame's registration settled, with its fallbacks), `measure` (a pair's
//! quality measures), `registrar` (what a registrar other than the CPU's is asked); then
//! `relocate` and `islands` (lost frames), `loops` (loop closure and the global solve) and
//! `composite` (the panorama). This module holds the parameters, the records, the entry
//! points and the loop over the frames ([`Run`]).

use super::chain::Chain;
use super::composite::{Blend, Canvas, Compositor, Pasting};
use super::register::{RegisterParams, SkipReason};
use super::recycled::Spares;
use super::refine::RefineScratch;
use super::registrar::PairRegistrar;
use super::similarity::Similarity;
use super::source::{Frame, FrameSource, GrayType, InMemory};
use super::stage_times::StageTimes;
use crate::error::{Error, Result};
use crate::image::{AnyView, Image};
use crate::parallel::{KeepAwake, Parallelism};
use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use core::ops::ControlFlow;


/// Parameters of the whole stitching run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StitchParams {
    pub register: RegisterParams,
    pub blend: Blend,
    /// A frame is registered against the current keyframe while its predicted shift from
    /// it is at most this fraction of the frame width (x) and height (y); in [0, 0.75].
    /// 0: every frame against its predecessor (the original plugin).
    pub keyframe_shift: f64,
    /// Compute the quality measures of every registered pair (costs two passes over the
    /// overlap per pair).
    pub quality: bool,
    /// When a frame registers with no prediction, try this many coarse global estimates
    /// (`coarse`, phase correlation) as starts of the search against the last
    /// good frame (0..=8; 0: off, the original).
    pub coarse_candidates: usize,
    /// With adaptive acceptance, retry a pair on which too few templates agree with
    /// templates of twice the side (faint texture; false: off).
    pub grow_templates: bool,
    /// Register frames that come back over earlier keyframes against them too, and solve
    /// all positions together (`loops`; false: positions chained along the
    /// registrations, the original).
    pub close_loops: bool,
    /// With adaptive acceptance, let the whole overlap decide where templates are too faint:
    /// a pair on which too few templates agree registers from a clear phase-correlation peak
    /// refined on the whole overlap, and a faint template registration is refined there
    /// (`refine::refine_overlap`; false: off).
    pub whole_overlap: bool,
    /// Refine every registered pair on the whole overlap, not only faint ones and the
    /// keyframes' links: on the test footage twice to four times more precise (clean runs
    /// 0.008 to 0.015 px mean against 0.016 to 0.031; coffee at low contrast 0.032 against
    /// 0.136), at about a seventh of the speed on PAL frames (about 1 200 against 8 800 pairs/s
    /// on two threads of a 2-core machine; false: off).
    pub refine_every_pair: bool,
    /// Under [`Motion::Similarity`](super::Motion::Similarity) without [`RegisterParams::fit_scale`]: once a pair shows
    /// a clear zoom (`register::evident_zoom`: an endoscope advancing or
    /// withdrawing) that its whole overlap confirms, fit the scale from that pair on, as
    /// `fit_scale` would from the start
    /// (false: the scale stays 1, and a zooming sweep drifts).
    pub detect_zoom: bool,
}

impl Default for StitchParams {
    fn default() -> Self {
        StitchParams { register: RegisterParams::default(), blend: Blend::Overwrite, keyframe_shift: 0.25, quality: true, coarse_candidates: 3, grow_templates: true, close_loops: true, whole_overlap: true, refine_every_pair: false, detect_zoom: true }
    }
}

impl StitchParams {
    pub fn validate(&self) -> Result<()> {
        self.register.validate()?;
        crate::error::require_within("keyframe shift", self.keyframe_shift, 0.0, 0.75, "within [0, 0.75]")?;
        crate::error::require_range("coarse candidates", self.coarse_candidates, 0, 8)
    }
}

/// What happened to one frame.
#[derive(Clone, Debug, PartialEq)]
pub struct FrameRecord {
    pub index: usize,
    /// Position in the reference frame's coordinates: frame i's pixel (u, v) shows what the
    /// reference shows at `(x, y) + scale R(angle) (u, v)` (with no rotation, at
    /// `(u + x, v + y)`); `None` for a skipped frame.
    pub position: Option<(f64, f64)>,
    /// Rotation in radians (`similarity`; 0 with the translation model).
    pub angle: f64,
    /// Scale (1 unless fitted).
    pub scale: f64,
    /// The frame it was registered against (`None` for frame 0 and skipped frames).
    pub reference: Option<usize>,
    /// Why it was skipped (`None` when registered).
    pub skip: Option<SkipReason>,
    /// Mean coefficient of the vectors used (1 for frame 0).
    pub ncc: f64,
    pub vectors_used: usize,
    pub confidence: f64,
    /// How clearly its vectors passed their acceptance threshold (the pair's
    /// [`PairRegistration::margin`](super::PairRegistration::margin); 0 for the reference and skipped frames).
    pub margin: f64,
    /// NCC evaluations spent on this frame (all attempts).
    pub evaluations: u64,
    /// [`overlap_ncc`](super::overlap_ncc) with its reference, when computed.
    pub quality: Option<f64>,
    /// [`grid_ncc`](super::grid_ncc) (5 x 5 templates of side rsz) with its reference, when computed.
    pub quality_grid: Option<f64>,
    /// With [`StitchParams::close_loops`]: the largest residual (pixels) of the frame's
    /// registrations after the global solve (`loops`); 0 where no loop was closed.
    /// `None` for skipped frames and without the solve.
    pub residual: Option<f64>,
    /// The earlier keyframe this frame closed a loop with, if that loop was kept.
    pub loop_closure: Option<usize>,
    /// Registered on the whole overlap from a phase-correlation peak this significant
    /// ([`PairRegistration::phase_significance`](super::PairRegistration::phase_significance)); `None` where templates decided.
    pub phase_significance: Option<f64>,
    /// The island it was registered on, named by the island's first frame (the reference
    /// frame for the run's first island; module `islands`); `None` for a skipped frame.
    pub island: Option<usize>,
    /// The keyframe of another island this frame registered against, joining their sets.
    pub joined: Option<usize>,
    /// For a frame on an island the panorama does not hold: its position relative to its
    /// island's first frame, the frame `island` (with `angle` and `scale` so relative too);
    /// `position` is `None`.
    pub island_position: Option<(f64, f64)>,
}

impl FrameRecord {
    pub fn is_ok(&self) -> bool {
        self.position.is_some()
    }
    /// Its pose (position, angle, scale), `None` for a skipped frame.
    pub fn pose(&self) -> Option<Similarity> {
        self.position.map(|(x, y)| Similarity { x, y, angle: self.angle, scale: self.scale })
    }
}

/// A stitched sequence: the canvas and every frame's record.
#[derive(Clone, Debug, PartialEq)]
pub struct Panorama {
    pub canvas: Canvas,
    pub frames: Vec<FrameRecord>,
    /// The reference frame, at position (0, 0): positions and the canvas origin are in its
    /// coordinates. Frame 0 unless frame 0 registered with nothing (module doc).
    pub reference: usize,
}

impl Panorama {
    /// Mean of the registered pairs' coefficients (frame 0 excluded); `None` without any.
    pub fn mean_ncc(&self) -> Option<f64> {
        mean(self.frames.iter().skip(1).filter(|f| f.is_ok()).map(|f| f.ncc))
    }
    /// Mean [`overlap_ncc`](super::overlap_ncc) of the registered pairs that have one.
    pub fn mean_quality(&self) -> Option<f64> {
        mean(self.frames.iter().filter_map(|f| f.quality))
    }
    /// Mean [`grid_ncc`](super::grid_ncc) of the registered pairs that have one.
    pub fn mean_quality_grid(&self) -> Option<f64> {
        mean(self.frames.iter().filter_map(|f| f.quality_grid))
    }
    /// The panorama's keyframes ([`keyframes`]).
    pub fn keyframes(&self) -> Vec<usize> {
        keyframes(&self.frames)
    }
}

/// The frames of `records` that others registered against, in order: the keyframes (each
/// after the run's first with its own link to its reference, which the run refines on the
/// whole overlap with [`StitchParams::whole_overlap`]).
pub fn keyframes(records: &[FrameRecord]) -> Vec<usize> {
    let mut keys: Vec<usize> = records.iter().filter_map(|f| f.reference).collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

fn mean(it: impl Iterator<Item = f64>) -> Option<f64> {
    let (s, n) = it.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    (n > 0).then(|| s / n as f64)
}

/// Checks a frame list: not empty, every frame of frame 0's size and pixel type (the error
/// names the first frame that differs).
pub fn check_frames(frames: &[AnyView<'_>]) -> Result<()> {
    let Some(first) = frames.first() else {
        return Err(Error::InvalidParameter { name: "frames", reason: "no frames".into() });
    };
    for (i, f) in frames.iter().enumerate().skip(1) {
        if f.size() != first.size() || f.type_name() != first.type_name() {
            return Err(Error::InvalidParameter {
                name: "frames",
                reason: alloc::format!(
                    "frame {i} is {}x{} {}, but frame 0 is {}x{} {}",
                    f.size().0,
                    f.size().1,
                    f.type_name(),
                    first.size().0,
                    first.size().1,
                    first.type_name()
                ),
            });
        }
    }
    Ok(())
}

/// [`register_frames`] of frames held in memory.
pub fn register_sequence(
    frames: &[AnyView<'_>],
    p: &StitchParams,
    par: Parallelism,
    progress: &mut dyn FnMut(usize) -> ControlFlow<()>,
) -> Result<(Vec<FrameRecord>, usize)> {
    register_frames(&InMemory(frames), p, par, progress)
}

/// [`stitch_frames`] of frames held in memory.
pub fn stitch(
    frames: &[AnyView<'_>],
    p: &StitchParams,
    par: Parallelism,
    progress: &mut dyn FnMut(usize) -> ControlFlow<()>,
) -> Result<Panorama> {
    stitch_frames(&InMemory(frames), p, par, progress)
}

/// Registers every frame (module doc); `progress(done)` is called after each frame with the
/// number of frames done (1 after frame 0, ..., `frames.len()` after the last), and the run
/// stops with [`Error::Cancelled`] as soon as it returns `ControlFlow::Break(())` (no frame
/// after `done` is registered). Returns every frame's record and the reference frame.
/// Errors: bad parameters, no frames, no two frames registered, cancellation; a frame that
/// cannot be read or registered is not an error.
pub fn register_frames(
    frames: &dyn FrameSource,
    p: &StitchParams,
    par: Parallelism,
    progress: &mut dyn FnMut(usize) -> ControlFlow<()>,
) -> Result<(Vec<FrameRecord>, usize)> {
    register_frames_with(frames, p, par, progress, None)
}

/// [`register_frames`], its wall time and its parallel stage's added to `times` (module
/// `stage_times`): on one thread, the engine's serial fraction.
pub fn register_frames_timed(
    frames: &dyn FrameSource,
    p: &StitchParams,
    par: Parallelism,
    progress: &mut dyn FnMut(usize) -> ControlFlow<()>,
    times: &StageTimes,
) -> Result<(Vec<FrameRecord>, usize)> {
    times.whole(|| register_frames_in(frames, p, par, progress, None, Some(times)))
}


/// [`register_frames`] with the pairs registered by `registrar` (`None`: the CPU's
/// [`register_pair`](super::register_pair), each moving frame's integral images computed once for its attempts).
pub fn register_frames_with(
    frames: &dyn FrameSource,
    p: &StitchParams,
    par: Parallelism,
    progress: &mut dyn FnMut(usize) -> ControlFlow<()>,
    registrar: Option<&dyn PairRegistrar>,
) -> Result<(Vec<FrameRecord>, usize)> {
    register_frames_in(frames, p, par, progress, registrar, None)
}

fn register_frames_in(
    frames: &dyn FrameSource,
    p: &StitchParams,
    par: Parallelism,
    progress: &mut dyn FnMut(usize) -> ControlFlow<()>,
    registrar: Option<&dyn PairRegistrar>,
    times: Option<&StageTimes>,
) -> Result<(Vec<FrameRecord>, usize)> {
    p.validate()?;
    if frames.is_empty() {
        return Err(Error::InvalidParameter { name: "frames", reason: "no frames".into() });
    }
    // The sequence's pixel type and size: those of the first readable frame whose next
    // readable frame has them too (an odd first frame is then skipped, not the whole run),
    // else of the first readable frame.
    let shape = |i: usize| frames.frame(i).ok().and_then(|f| f.view().ok().map(|v| (v.size(), v.type_name())));
    let (mut first, mut previous) = (None, None);
    for i in (0..).take_while(|&i| i < frames.len()) {
        let Some(s) = shape(i) else { continue };
        first = first.or(Some(s));
        if previous == Some(s) {
            first = Some(s);
            break;
        }
        previous = Some(s);
    }
    let Some((size, type_name)) = first else {
        let why = frames.frame(0).err().unwrap_or_default();
        return Err(Error::InvalidParameter { name: "frames", reason: alloc::format!("no frame could be read (frame 0: {why})") });
    };
    // The run's other threads stay awake between its windows (module `parallel`), where
    // the host registers its pairs: a registrar's run does its host work between launches
    // on its own thread (the shim's device run took 0.06 ms a pair on the host with the
    // threads polling, 0.058 without).
    let awake = KeepAwake::new(if registrar.is_some() { Parallelism::Sequential } else { par });
    let (spares, overlap_scratch) = (Spares::default(), Spares::default());
    let run = Run { p: *p, par, size, type_name, registrar, times, confirm_every_match: false, awake: &awake, spares: &spares, overlap_scratch: &overlap_scratch };
    match type_name {
        "u16" => run.register::<u16>(frames, progress),
        "f32" => run.register::<f32>(frames, progress),
        _ => run.register::<u8>(frames, progress),
    }
}

/// The whole pipeline: [`register_frames`], then the composite of the registered frames,
/// each read once more from `frames`. Progress and cancellation as `register_frames` (a
/// run cancelled at any frame, the last included, composites nothing). Errors as
/// `register_frames`; a sequence of one frame is that frame alone.
pub fn stitch_frames(
    frames: &dyn FrameSource,
    p: &StitchParams,
    par: Parallelism,
    progress: &mut dyn FnMut(usize) -> ControlFlow<()>,
) -> Result<Panorama> {
    stitch_frames_with(frames, p, par, progress, None)
}

/// [`stitch_frames`] with the pairs registered by `registrar` (see [`register_frames_with`]).
pub fn stitch_frames_with(
    frames: &dyn FrameSource,
    p: &StitchParams,
    par: Parallelism,
    progress: &mut dyn FnMut(usize) -> ControlFlow<()>,
    registrar: Option<&dyn PairRegistrar>,
) -> Result<Panorama> {
    let mut host = |like: &AnyView<'_>, positions: &[Option<(f64, f64)>], blend| -> Result<Box<dyn Pasting>> {
        Ok(Box::new(Compositor::new(like, positions, blend)?.on(par)))
    };
    stitch_frames_into(frames, p, par, progress, registrar, &mut host)
}

/// A function that plans a canvas for frames like the first one at `positions` (as
/// [`Compositor::new`]) and returns it to be pasted into.
pub type NewCanvas<'c> = dyn FnMut(&AnyView<'_>, &[Option<(f64, f64)>], Blend) -> Result<Box<dyn Pasting + 'c>> + 'c;

/// [`stitch_frames_with`] pasting into the canvas `new_canvas` makes (a backend's on its
/// device): each placed frame read once more and pasted in sequence order.
pub fn stitch_frames_into<'c>(
    frames: &dyn FrameSource,
    p: &StitchParams,
    par: Parallelism,
    progress: &mut dyn FnMut(usize) -> ControlFlow<()>,
    registrar: Option<&dyn PairRegistrar>,
    new_canvas: &mut NewCanvas<'c>,
) -> Result<Panorama> {
    let (records, reference) = register_frames_with(frames, p, par, progress, registrar)?;
    let positions: Vec<_> = records.iter().map(|r| r.position).collect();
    // Turned frames are resampled into the canvas on the host (a backend's canvas pastes
    // upright frames).
    let poses: Vec<_> = records.iter().map(|r| r.pose()).collect();
    let turned = poses.iter().flatten().any(|p| !p.is_translation());
    let unreadable = |i: usize, why: String| Error::InvalidParameter { name: "frames", reason: alloc::format!("frame {i} could not be read again: {why}") };
    let mut canvas: Option<Box<dyn Pasting + 'c>> = None;
    // Frames read and not yet pasted: as many as the canvas takes at once.
    let mut pending = Vec::new();
    let paste = |c: &mut Box<dyn Pasting + 'c>, pending: &mut Vec<(usize, Frame<'_>)>| -> Result<()> {
        let views = pending.iter().map(|(i, f)| f.view().map(|v| (*i, v)).map_err(|why| unreadable(*i, why))).collect::<Result<Vec<_>>>()?;
        c.paste_many(&views)?;
        pending.clear();
        Ok(())
    };
    for (i, pos) in positions.iter().enumerate() {
        if pos.is_some() {
            let f = frames.frame(i).map_err(|why| unreadable(i, why))?;
            let v = f.view().map_err(|why| unreadable(i, why))?;
            let c = match &mut canvas {
                Some(c) => c,
                None if turned => canvas.insert(Box::new(Compositor::with_poses(&v, &poses, p.blend)?.on(par))),
                None => canvas.insert(new_canvas(&v, &positions, p.blend)?),
            };
            pending.push((i, f));
            if pending.len() >= c.batch() {
                paste(c, &mut pending)?;
            }
        }
    }
    let Some(mut canvas) = canvas else { return Err(nothing_registered(&records)) };
    paste(&mut canvas, &mut pending)?;
    Ok(Panorama { canvas: canvas.finish()?, frames: records, reference })
}


/// One registration run over a source whose first readable frame is `size` / `type_name`.
#[derive(Clone, Copy)]
pub(super) struct Run<'a> {
    /// The run's parameters; scale fitting turns on where a zoom is evident
    /// ([`StitchParams::detect_zoom`]).
    pub(super) p: StitchParams,
    pub(super) par: Parallelism,
    pub(super) size: (usize, usize),
    pub(super) type_name: &'static str,
    pub(super) registrar: Option<&'a dyn PairRegistrar>,
    /// Where the parallel stage's wall time is added, when it is measured.
    pub(super) times: Option<&'a StageTimes>,
    /// Every match must stand on the overlap's texture, as a weak one must (a lost frame
    /// found again among many keyframes, module `relocate`: more chances of a chance match).
    pub(super) confirm_every_match: bool,
    /// Keeps the run's other threads awake between its parallel stages, re-armed after each
    /// (none kept on one thread).
    pub(super) awake: &'a KeepAwake,
    /// Buffers for the frame copies some pairs need, passed on from departed frames.
    pub(super) spares: &'a Spares<Image<f32>>,
    /// The whole-overlap refinements' working memory, passed on from one to the next.
    pub(super) overlap_scratch: &'a Spares<RefineScratch>,
}

impl<'a> Run<'a> {
    /// The same run on the threads of `par`.
    pub(super) fn on(&self, par: Parallelism) -> Self {
        Run { par, ..*self }
    }


    /// The same run with every match confirmed on the overlap's texture.
    pub(super) fn confirming_every_match(&self) -> Self {
        Run { confirm_every_match: true, ..*self }
    }


    /// Registers the frames of `frames` in order: each frame's decision ([`Chain`]) over
    /// what its window registered; the records and the panorama's reference.
    fn register<T: GrayType>(self, frames: &'a dyn FrameSource, progress: &mut dyn FnMut(usize) -> ControlFlow<()>) -> Result<(Vec<FrameRecord>, usize)> {
        let mut chain = Chain::<T>::new(self, frames);
        // `len()` is read before each frame: a live source grows (FrameSource).
        for i in (0..).take_while(|&i| i < frames.len()) {
            let current = match chain.take(i) {
                Ok(f) => f,
                // The input ended while the run waited for this frame: there is none.
                Err(_) if i >= frames.len() => break,
                Err(reason) => {
                    chain.unreadable(i, reason);
                    chain.step(progress)?;
                    continue;
                }
            };
            if !chain.started() {
                chain.start(current);
                chain.step(progress)?;
                continue;
            }
            chain.open_window(i, &current)?;
            let decided = chain.register(i, &current)?;
            match decided.shift() {
                None => chain.lost(i, current, decided),
                Some(s) => chain.registered(i, current, decided, s)?,
            }
            chain.step(progress)?;
        }
        chain.finish()
    }

}

impl FrameRecord {
    /// The reference frame's record: position (0, 0).
    pub(super) fn reference(index: usize) -> Self {
        FrameRecord { island: Some(index), ..FrameRecord::placed(index, (0.0, 0.0)) }
    }
    /// A frame registered at `at`, on no island yet.
    pub(super) fn placed(index: usize, at: (f64, f64)) -> Self {
        FrameRecord { index, position: Some(at), angle: 0.0, scale: 1.0, reference: None, skip: None, ncc: 1.0, vectors_used: 0, confidence: 1.0, margin: 0.0, evaluations: 0, quality: None, quality_grid: None, residual: None, loop_closure: None, phase_significance: None, island: None, joined: None, island_position: None }
    }
    pub(super) fn skipped(index: usize, why: SkipReason, evaluations: u64) -> Self {
        FrameRecord { index, position: None, angle: 0.0, scale: 1.0, reference: None, skip: Some(why), ncc: 0.0, vectors_used: 0, confidence: 0.0, margin: 0.0, evaluations, quality: None, quality_grid: None, residual: None, loop_closure: None, phase_significance: None, island: None, joined: None, island_position: None }
    }
}

/// The error of a run in which no two frames registered, with the first reasons.
pub(super) fn nothing_registered(records: &[FrameRecord]) -> Error {
    let mut why: Vec<String> = records.iter().filter_map(|r| r.skip.as_ref().map(|s| alloc::format!("frame {}: {}", r.index, s.describe()))).take(3).collect();
    if records.iter().filter(|r| r.skip.is_some()).count() > 3 {
        why.push("...".into());
    }
    Error::NothingRegistered { frames: records.len(), why: why.join("; ") }
}

/// Reports `done` frames; [`Error::Cancelled`] when the callback asks to stop.
pub(super) fn check_progress(progress: &mut dyn FnMut(usize) -> ControlFlow<()>, done: usize) -> Result<()> {
    match progress(done) {
        ControlFlow::Continue(()) => Ok(()),
        ControlFlow::Break(()) => Err(Error::Cancelled),
    }
}


#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::{AnyImage, Image, Rgba8};
    use crate::ncc::SearchFrame;
    use crate::stitch::{register_pair, synth_sequence, Frame, Gray, PairRegistration, PairRequest, SynthParams};
    use crate::stitch::{texture, warp_sized};
    use crate::stitch::{WINDOW, WINDOW_MAX};

    fn sequence(frames: usize, seed: u64) -> (Vec<Image<u8>>, Vec<(f64, f64)>) {
        let src = texture(320, 260, seed).map(|v| v.round() as u8);
        let sp = SynthParams { frame_width: 140, frame_height: 110, frames, max_step: 2.5, noise_sigma: 3.0, blur_passes: 1, seed, ..Default::default() };
        let s = synth_sequence(src.view(), &sp, Parallelism::Sequential).unwrap();
        (s.frames, s.positions)
    }

    fn any(frames: &[Image<u8>]) -> Vec<AnyView<'_>> {
        frames.iter().map(|f| AnyView::U8(f.view())).collect()
    }

    /// The progress callback that never stops the run.
    fn go_on(_: usize) -> ControlFlow<()> {
        ControlFlow::Continue(())
    }

    fn err(rec: &FrameRecord, t: (f64, f64)) -> f64 {
        let p = rec.position.unwrap();
        libm::hypot(p.0 - t.0, p.1 - t.1)
    }

    #[test]
    fn recovers_the_path_and_reports_progress() {
        let (frames, truth) = sequence(30, 3);
        for ks in [0.0, 0.25] {
            let p = StitchParams { keyframe_shift: ks, ..Default::default() };
            let mut done = Vec::new();
            let pano = stitch(&any(&frames), &p, Parallelism::AllThreads, &mut |d| {
                done.push(d);
                ControlFlow::Continue(())
            }).unwrap();
            assert_eq!(done, (1..=30).collect::<Vec<_>>());
            let mean = pano.frames.iter().zip(&truth).map(|(r, &t)| err(r, t)).sum::<f64>() / 30.0;
            assert!(mean < 0.25, "keyframe {ks}: mean error {mean}");
            assert!(pano.frames.iter().all(|f| f.is_ok()));
            assert!(pano.mean_ncc().unwrap() > 0.9 && pano.mean_quality().unwrap() > 0.9 && pano.mean_quality_grid().unwrap() > 0.9);
            // Every frame but the last against its predecessor, or a few keyframes.
            let keyframes = pano.keyframes();
            if ks == 0.0 {
                assert_eq!(keyframes, (0..29).collect::<Vec<_>>());
            } else {
                assert!(keyframes[0] == 0 && keyframes.len() > 1 && keyframes.len() < 10, "{keyframes:?}");
            }
            // Canvas: the union of the rounded placements.
            let xs: Vec<i64> = pano.frames.iter().map(|f| libm::round(f.position.unwrap().0) as i64).collect();
            let ys: Vec<i64> = pano.frames.iter().map(|f| libm::round(f.position.unwrap().1) as i64).collect();
            let (x0, x1) = (*xs.iter().min().unwrap(), *xs.iter().max().unwrap());
            let (y0, y1) = (*ys.iter().min().unwrap(), *ys.iter().max().unwrap());
            assert_eq!(pano.canvas.origin, (x0, y0));
            assert_eq!(pano.canvas.image.size(), ((x1 - x0) as usize + 140, (y1 - y0) as usize + 110));
        }
    }

    #[test]
    fn one_thread_and_all_give_the_same_records() {
        // All threads: a window's planned pairs register at once, and a pair with threads to
        // spare (the first, a frame off the plan) searches its templates on them.
        let (mut frames, _) = sequence(24, 12);
        frames[7] = Image::filled(140, 110, 9).unwrap();
        let views = any(&frames);
        let p = StitchParams::default();
        let one = register_sequence(&views, &p, Parallelism::Sequential, &mut go_on).unwrap();
        let all = register_sequence(&views, &p, Parallelism::AllThreads, &mut go_on).unwrap();
        assert_eq!(one, all);
        // Three and five threads, the run on a worker of their pool: every pair spreads its
        // templates (from a caller outside a pool, the pairs handed out last spread).
        #[cfg(feature = "parallel")]
        for threads in [3, 5] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            assert_eq!(pool.install(|| register_sequence(&views, &p, Parallelism::AllThreads, &mut go_on)).unwrap(), one, "{threads} threads");
        }
    }

    #[test]
    fn a_timed_run_gives_the_same_records_and_splits_its_time() {
        let (frames, _) = sequence(16, 5);
        let views = any(&frames);
        let p = StitchParams::default();
        let plain = register_sequence(&views, &p, Parallelism::Sequential, &mut go_on).unwrap();
        let times = StageTimes::default();
        assert_eq!(times.serial_fraction(), None);
        let timed = register_frames_timed(&InMemory(&views), &p, Parallelism::Sequential, &mut go_on, &times).unwrap();
        assert_eq!(plain, timed);
        // Windows registered pairs (parallel stage), and the run did more than that.
        assert!(times.parallel_ns() > 0 && times.parallel_ns() < times.total_ns(), "{times:?}");
        let s = times.serial_fraction().unwrap();
        assert!(s > 0.0 && s < 1.0, "{s}");
        // Every frame but the first registered as a planned pair, each timed within the
        // stage; on one thread the pairs fill the stage, and nothing runs beside them.
        let (pairs, pair_ns) = times.pair_tasks();
        assert_eq!(pairs, frames.len() as u64 - 1, "{times:?}");
        assert!(pair_ns > 0 && pair_ns <= times.parallel_ns(), "{times:?}");
        let e = times.stage_efficiency(1).unwrap();
        assert!(e > 0.5 && e <= 1.0, "{e}");
        assert!(times.mean_pair_ns().unwrap() > 0.0);
        assert_eq!(StageTimes::default().stage_efficiency(2), None);
        // The first pair alone, then windows that planned every other frame at least once.
        let (windows, planned) = times.windows();
        assert!(windows >= 2 && planned >= frames.len() as u64 - 1, "{times:?}");
        assert_eq!(StageTimes::default().mean_window(), None);
    }

    #[test]
    fn cancelling_after_frame_k_stops_there() {
        let (frames, _) = sequence(6, 4);
        let views = any(&frames);
        // k = 1: right after frame 0; k = 6: after the last frame, before the composite.
        for k in [1, 3, 6] {
            let mut seen = Vec::new();
            let mut stop_at_k = |d: usize| {
                seen.push(d);
                if d == k { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
            };
            let e = stitch(&views, &StitchParams::default(), Parallelism::AllThreads, &mut stop_at_k).unwrap_err();
            assert_eq!(e, Error::Cancelled, "k = {k}");
            assert_eq!(seen, (1..=k).collect::<Vec<_>>(), "k = {k}");
            let mut seen = Vec::new();
            let r = register_sequence(&views, &StitchParams::default(), Parallelism::Sequential, &mut |d| {
                seen.push(d);
                if d == k { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
            });
            assert_eq!(r, Err(Error::Cancelled), "k = {k}");
            assert_eq!(seen, (1..=k).collect::<Vec<_>>(), "k = {k}");
        }
        // Bad input is reported before any progress, not as a cancellation.
        let mut calls = 0;
        let e = stitch(&[], &StitchParams::default(), Parallelism::Sequential, &mut |_| {
            calls += 1;
            ControlFlow::Break(())
        })
        .unwrap_err();
        assert!(matches!(e, Error::InvalidParameter { .. }) && calls == 0, "{e}");
        assert!(alloc::format!("{}", Error::Cancelled).contains("cancelled"));
    }

    #[test]
    fn bad_frames_are_skipped_and_the_rest_is_stitched() {
        let (mut frames, truth) = sequence(16, 8);
        frames[4] = Image::filled(140, 110, 128).unwrap();
        let mut rng = crate::stitch::SplitMix64::new(1);
        frames[9] = Image::from_fn(140, 110, |_, _| (rng.next_u64() >> 56) as u8).unwrap();
        frames[12] = texture(140, 110, 99).map(|v| v as u8);
        let pano = stitch(&any(&frames), &StitchParams::default(), Parallelism::Sequential, &mut go_on).unwrap();
        for (i, rec) in pano.frames.iter().enumerate() {
            if [4, 9, 12].contains(&i) {
                assert!(rec.position.is_none() && rec.skip.is_some() && rec.reference.is_none(), "frame {i}: {rec:?}");
            } else {
                assert!(err(rec, truth[i]) < 0.3, "frame {i}: {rec:?} vs {:?}", truth[i]);
            }
        }
        // Frame 5 was registered across the gap, against frame 3 or earlier.
        assert!(pano.frames[5].reference.unwrap() <= 3);
    }

    #[test]
    fn single_frame_and_a_first_frame_that_matches_nothing() {
        let (frames, truth) = sequence(8, 1);
        let pano = stitch(&any(&frames[..1]), &StitchParams::default(), Parallelism::Sequential, &mut go_on).unwrap();
        assert_eq!((pano.frames.len(), pano.reference), (1, 0));
        assert_eq!(pano.canvas.origin, (0, 0));
        assert_eq!(pano.canvas.image, AnyImage::U8(frames[0].clone()));
        // A flat or noisy frame 0 registers with nothing: frame 1, the first frame that
        // registers with its successor, is the reference, and frame 0 says why it is out.
        let mut rng = crate::stitch::SplitMix64::new(3);
        let noise = Image::from_fn(140, 110, |_, _| (rng.next_u64() >> 56) as u8).unwrap();
        for bad in [Image::<u8>::filled(140, 110, 7).unwrap(), noise] {
            let mut seq = frames.clone();
            seq[0] = bad;
            let pano = stitch(&any(&seq), &StitchParams::default(), Parallelism::Sequential, &mut go_on).unwrap();
            assert_eq!(pano.reference, 1);
            assert_eq!(pano.frames[0].skip, Some(SkipReason::NoSuccessor { reference: 1 }));
            assert!(pano.frames[0].position.is_none());
            assert_eq!((pano.frames[1].position, pano.frames[1].reference), (Some((0.0, 0.0)), None));
            let rel = |i: usize| (truth[i].0 - truth[1].0, truth[i].1 - truth[1].1);
            for i in 2..8 {
                assert!(err(&pano.frames[i], rel(i)) < 0.3, "frame {i}: {:?}", pano.frames[i]);
            }
        }
        // A bad second frame does not move the reference.
        let mut seq = frames.clone();
        seq[1] = Image::<u8>::filled(140, 110, 7).unwrap();
        let pano = stitch(&any(&seq), &StitchParams::default(), Parallelism::Sequential, &mut go_on).unwrap();
        assert_eq!((pano.reference, pano.frames[2].reference), (0, Some(0)));
        assert!(pano.frames[1].skip.is_some());
        // No two frames register: an error saying why, not a panorama of one frame.
        let flat = [Image::<u8>::filled(140, 110, 7).unwrap(), Image::<u8>::filled(140, 110, 9).unwrap()];
        let e = stitch(&any(&flat), &StitchParams::default(), Parallelism::Sequential, &mut go_on).unwrap_err();
        assert!(matches!(e, Error::NothingRegistered { frames: 2, .. }), "{e}");
        assert!(alloc::format!("{e}").contains("no texture"), "{e}");
    }

    /// A source that reads frames "from disk": owned images, some unreadable, counting
    /// the reads.
    struct Disk {
        frames: Vec<Option<Image<u8>>>,
        reads: core::cell::RefCell<Vec<usize>>,
    }

    impl FrameSource for Disk {
        fn len(&self) -> usize {
            self.frames.len()
        }
        fn frame(&self, i: usize) -> core::result::Result<Frame<'_>, String> {
            self.reads.borrow_mut()[i] += 1;
            match &self.frames[i] {
                Some(f) => Ok(Frame::Image(AnyImage::U8(f.clone()))),
                None => Err("truncated file".into()),
            }
        }
    }

    #[test]
    fn a_source_is_read_once_to_register_and_once_to_paste() {
        let (frames, truth) = sequence(12, 6);
        let mut disk = Disk { frames: frames.iter().cloned().map(Some).collect(), reads: core::cell::RefCell::new(alloc::vec![0; 12]) };
        disk.frames[5] = None;
        let pano = stitch_frames(&disk, &StitchParams::default(), Parallelism::Sequential, &mut go_on).unwrap();
        assert_eq!(pano.frames[5].skip, Some(SkipReason::Unreadable("truncated file".into())));
        for i in (0..12).filter(|&i| i != 5) {
            assert!(err(&pano.frames[i], truth[i]) < 0.3, "frame {i}");
        }
        // The first two readable frames are also read once to learn the sequence's type
        // and size (they agree); the unreadable one is tried once.
        let reads = disk.reads.borrow();
        let want: Vec<usize> = (0..12).map(|i| match i { 0 | 1 => 3, 5 => 1, _ => 2 }).collect();
        assert_eq!(*reads, want);
        // Read from "disk" or held in memory, the same frames give the same panorama.
        let whole = Disk { frames: frames.iter().cloned().map(Some).collect(), reads: core::cell::RefCell::new(alloc::vec![0; 12]) };
        let from_disk = stitch_frames(&whole, &StitchParams::default(), Parallelism::Sequential, &mut go_on).unwrap();
        let in_memory = stitch(&any(&frames), &StitchParams::default(), Parallelism::Sequential, &mut go_on).unwrap();
        assert_eq!(from_disk, in_memory);
    }

    /// A source whose frames arrive one at a time: `len()` counts the arrived frames and
    /// promises one more until the input ends after `end`; asking for the next frame makes
    /// it arrive, or finds the input ended.
    struct Arriving {
        frames: Vec<Image<u8>>,
        end: usize,
        arrived: core::cell::Cell<usize>,
        heard: core::cell::RefCell<Vec<usize>>,
    }

    impl FrameSource for Arriving {
        fn len(&self) -> usize {
            let a = self.arrived.get();
            if a < self.end { a + 1 } else { a }
        }
        fn frame(&self, i: usize) -> core::result::Result<Frame<'_>, String> {
            if i >= self.end {
                return Err("the input ended".into());
            }
            self.arrived.set(self.arrived.get().max(i + 1));
            Ok(Frame::Image(AnyImage::U8(self.frames[i].clone())))
        }
        fn recorded(&self, records: &[FrameRecord]) {
            self.heard.borrow_mut().push(records.len());
        }
        fn ready(&self) -> usize {
            self.arrived.get()
        }
    }

    #[test]
    fn a_growing_source_is_registered_up_to_the_end_of_its_input() {
        let (frames, _) = sequence(12, 7);
        for par in [Parallelism::Sequential, Parallelism::AllThreads] {
            let live = Arriving { frames: frames.clone(), end: 9, arrived: Default::default(), heard: Default::default() };
            let got = register_frames(&live, &StitchParams::default(), par, &mut go_on).unwrap();
            // The frame the run waited for when the input ended is no skipped frame.
            assert_eq!(got, register_sequence(&any(&frames[..9]), &StitchParams::default(), par, &mut go_on).unwrap());
            assert_eq!(*live.heard.borrow(), (1..=9).collect::<Vec<_>>());
        }
    }

    extern crate std;

    /// A registrar that registers as the CPU does and records what the run asks and
    /// offers: the speculation seam seen from the core.
    #[derive(Default)]
    struct Recorder {
        asked: std::sync::Mutex<Vec<(usize, usize, (f64, f64))>>,
        offered: std::sync::Mutex<Vec<Vec<(usize, usize, (f64, f64))>>>,
    }

    fn ids(r: &PairRequest<'_>) -> (usize, usize, (f64, f64)) {
        (r.reference.0, r.moving.0, r.prediction)
    }

    impl PairRegistrar for Recorder {
        fn register(&self, pair: &PairRequest<'_>, p: &RegisterParams) -> Result<PairRegistration> {
            self.asked.lock().unwrap().push(ids(pair));
            match (&pair.reference.1, &pair.moving.1) {
                (Gray::U8(a), Gray::U8(b)) => register_pair(*a, &SearchFrame::new(*b)?, p, pair.prediction, Parallelism::Sequential),
                _ => Err(Error::Backend("u8 only".into())),
            }
        }
        fn speculate(&self, pairs: &[PairRequest<'_>], _: &RegisterParams) -> Result<()> {
            self.offered.lock().unwrap().push(pairs.iter().map(ids).collect());
            Ok(())
        }
    }

    #[test]
    fn a_speculating_registrar_is_offered_each_window_and_changes_nothing() {
        let (frames, _) = sequence(40, 6);
        let mut disk = Disk { frames: frames.iter().cloned().map(Some).collect(), reads: core::cell::RefCell::new(alloc::vec![0; 40]) };
        disk.frames[11] = None;
        let p = StitchParams::default();
        let want = stitch_frames(&disk, &p, Parallelism::Sequential, &mut go_on).unwrap();
        let cpu_reads = disk.reads.replace(alloc::vec![0; 40]);
        let rec = Recorder::default();
        let got = stitch_frames_with(&disk, &p, Parallelism::Sequential, &mut go_on, Some(&rec)).unwrap();
        assert_eq!(got, want);
        // The window's frames are read early, but each as often as without.
        assert_eq!(*disk.reads.borrow(), cpu_reads);
        let (asked, offered) = (rec.asked.lock().unwrap(), rec.offered.lock().unwrap());
        // Each offer is a window: consecutive frames, at most WINDOW_MAX, stopping before the
        // unreadable frame; on this smooth footage every pair asked for was offered first,
        // to the bit, so a registrar that batches the window answers every request from it.
        for offer in offered.iter() {
            assert!(!offer.is_empty() && offer.len() <= WINDOW_MAX);
            assert!(offer.iter().all(|o| o.1 != 11) && offer.windows(2).all(|w| w[1].1 == w[0].1 + 1), "{offer:?}");
        }
        // The first request for each frame (after the first pair) was offered, to the bit:
        // a registrar that batches the window answers it from its batch. (A frame whose
        // planned pair does not stand clear asks for more, which no window foresees.)
        for (n, a) in asked.iter().enumerate().filter(|(n, a)| a.1 > 1 && (*n == 0 || asked[n - 1].1 != a.1)) {
            assert!(offered.iter().flatten().any(|o| o == a), "request {n}, {a:?}, was not offered");
        }
        // Windows close only at the unreadable frame and at the sequence's end.
        assert!(offered.len() <= 2 * (40 / WINDOW + 1), "{}", offered.len());
    }

    /// `frames` frames of 140 x 110 cut from a texture along a straight path at `step`
    /// pixels a frame, and their true positions.
    fn straight(frames: usize, step: (f64, f64), seed: u64) -> (Vec<Image<u8>>, Vec<(f64, f64)>) {
        let src = texture(360, 300, seed).map(|v| v.round() as u8);
        let shift = |i: usize| (step.0 * i as f64, step.1 * i as f64);
        let cut = |i: usize| warp_sized(src.view(), &Similarity { x: 10.0 + shift(i).0, y: 20.0 + shift(i).1, angle: 0.0, scale: 1.0 }, (140, 110)).unwrap();
        ((0..frames).map(cut).collect(), (0..frames).map(shift).collect())
    }

    #[test]
    fn a_steady_path_widens_the_window_and_changes_no_record() {
        let (frames, truth) = straight(60, (1.7, 0.9), 21);
        let views = any(&frames);
        let p = StitchParams::default();
        let want = stitch_frames(&InMemory(&views), &p, Parallelism::Sequential, &mut go_on).unwrap();
        for (rec, t) in want.frames.iter().zip(&truth) {
            assert!(err(rec, *t) < 0.1, "{rec:?} against {t:?}");
        }
        assert_eq!(stitch_frames(&InMemory(&views), &p, Parallelism::AllThreads, &mut go_on).unwrap(), want);
        let rec = Recorder::default();
        assert_eq!(stitch_frames_with(&InMemory(&views), &p, Parallelism::Sequential, &mut go_on, Some(&rec)).unwrap(), want);
        let (asked, offered) = (rec.asked.lock().unwrap(), rec.offered.lock().unwrap());
        // Predicted within a fraction of a pixel, the windows double: 4, 8, 16, then the
        // rest of the sequence, every first request answered from its window's offer.
        let sizes: Vec<usize> = offered.iter().map(Vec::len).collect();
        assert_eq!(&sizes[1..5], &[WINDOW, 2 * WINDOW, 4 * WINDOW, 58 - 7 * WINDOW], "{sizes:?}");
        // The engine's own count: one pair, then windows of 4, 8, 16 and 32 frames.
        let times = StageTimes::default();
        let records = register_frames_timed(&InMemory(&views), &p, Parallelism::Sequential, &mut go_on, &times).unwrap();
        assert_eq!(times.windows(), (5, 1 + 4 + 8 + 16 + 32));
        // The path leaves a keyframe every 20 frames or so, each time within a window: the
        // new keyframe's link was refined ahead in the window's stage, never on the run's
        // thread. On the CPU the link smooths the new keyframe itself.
        let (ahead, on_run) = times.keyframe_links();
        assert!(ahead >= 2 && on_run == 0, "{times:?}");
        assert_eq!((times.keyframe_links_found_smoothed(), times.keyframe_links_beside_quality()), (0, 0), "{times:?}");
        // With a registrar, each link's frames were smoothed while its window's launch was
        // made, and the link refined while its window's quality was measured; the run
        // decides the same.
        for par in [Parallelism::Sequential, Parallelism::AllThreads] {
            let launched = StageTimes::default();
            let got = register_frames_in(&InMemory(&views), &p, par, &mut go_on, Some(&Recorder::default()), Some(&launched)).unwrap();
            assert_eq!(got, records);
            assert_eq!(launched.keyframe_links(), (ahead, 0), "{launched:?}");
            assert_eq!(launched.keyframe_links_found_smoothed(), ahead, "{launched:?}");
            assert_eq!(launched.keyframe_links_beside_quality(), ahead, "{launched:?}");
        }
        // Without quality measures no call waits on the device: the links are refined on the
        // run's threads, the same.
        let quiet = StitchParams { quality: false, ..p };
        let records = register_frames_in(&InMemory(&views), &quiet, Parallelism::Sequential, &mut go_on, None, None).unwrap();
        let launched = StageTimes::default();
        assert_eq!(register_frames_in(&InMemory(&views), &quiet, Parallelism::AllThreads, &mut go_on, Some(&Recorder::default()), Some(&launched)).unwrap(), records);
        assert_eq!((launched.keyframe_links(), launched.keyframe_links_beside_quality()), ((ahead, 0), 0), "{launched:?}");
        for (n, a) in asked.iter().enumerate().filter(|(n, a)| a.1 > 1 && (*n == 0 || asked[n - 1].1 != a.1)) {
            assert!(offered.iter().flatten().any(|o| o == a), "request {n}, {a:?}, was not offered");
        }
    }

    /// A sweep that starts zooming 1.5 % a frame after its first frames: the zoom shows in
    /// a window's planned pair, settled with its window's others (a registrar's batch, the
    /// CPU's one thread or all). The run takes the zoom up there, with the same records.
    #[test]
    fn a_zoom_found_in_a_windows_planned_pair_is_taken_up_alike_on_every_path() {
        let src = texture(420, 360, 9).map(|v| v.round() as u8);
        let zoom = |i: usize| libm::pow(1.015, i.saturating_sub(6) as f64);
        let cut = |i: usize| warp_sized(src.view(), &Similarity::about((100.0, 80.0), (40.0 + 1.5 * i as f64, 30.0 + 1.0 * i as f64), 0.0, zoom(i)), (200, 160)).unwrap();
        let frames: Vec<Image<u8>> = (0..16).map(cut).collect();
        let views = any(&frames);
        let p = StitchParams::default();
        let want = stitch_frames(&InMemory(&views), &p, Parallelism::Sequential, &mut go_on).unwrap();
        assert!(want.frames.iter().all(|f| f.skip.is_none()), "{:?}", want.frames);
        // The zoom taken up at its first frame, 7, a planned pair of the window after the
        // first (a pair that did not test it there would register at scale 1 and leave it
        // to a later one off its plan), and followed at every frame after.
        for (i, f) in want.frames.iter().enumerate() {
            assert!((f.scale - zoom(i)).abs() < 2e-3, "frame {i}: {f:?}");
        }
        assert_eq!(stitch_frames(&InMemory(&views), &p, Parallelism::AllThreads, &mut go_on).unwrap(), want);
        for par in [Parallelism::Sequential, Parallelism::AllThreads] {
            assert_eq!(stitch_frames_with(&InMemory(&views), &p, par, &mut go_on, Some(&Recorder::default())).unwrap(), want);
        }
    }

    #[test]
    fn an_odd_first_frame_is_skipped_not_the_run() {
        let (frames, truth) = sequence(6, 4);
        for odd in [AnyImage::U8(Image::filled(100, 100, 9).unwrap()), AnyImage::U16(frames[0].map(|v| v as u16 * 257))] {
            let mut views: Vec<AnyView<'_>> = frames.iter().map(|f| AnyView::U8(f.view())).collect();
            views[0] = odd.view().unwrap();
            let pano = stitch(&views, &StitchParams::default(), Parallelism::Sequential, &mut go_on).unwrap();
            let why = pano.frames[0].skip.as_ref().map(|s| s.describe()).unwrap_or_default();
            assert!(matches!(pano.frames[0].skip, Some(SkipReason::Mismatch(_))) && why.contains("140x110 u8"), "{why}");
            let base = truth[pano.reference];
            for i in 1..6 {
                let t = (truth[i].0 - base.0, truth[i].1 - base.1);
                assert!(err(&pano.frames[i], t) < 0.3, "frame {i}: {:?}", pano.frames[i]);
            }
        }
    }

    #[test]
    fn frames_that_differ_or_hold_non_finite_pixels_are_skipped_naming_why() {
        let (frames, truth) = sequence(8, 2);
        let mut f32s: Vec<Image<f32>> = frames.iter().map(|f| f.convert()).collect();
        f32s[3].set(10, 20, f32::NAN);
        f32s[3].set(11, 20, f32::INFINITY);
        let other = Image::<f32>::filled(141, 110, 1.0).unwrap();
        let u8_frame = frames[5].clone();
        let mut views: Vec<AnyView<'_>> = f32s.iter().map(|f| AnyView::F32(f.view())).collect();
        views[4] = AnyView::F32(other.view());
        views[5] = AnyView::U8(u8_frame.view());
        let pano = stitch(&views, &StitchParams::default(), Parallelism::Sequential, &mut go_on).unwrap();
        assert_eq!(pano.frames[3].skip, Some(SkipReason::NonFinite { pixels: 2 }));
        for i in [4, 5] {
            let why = pano.frames[i].skip.as_ref().map(|s| s.describe()).unwrap_or_default();
            assert!(matches!(pano.frames[i].skip, Some(SkipReason::Mismatch(_))) && why.contains("140x110 f32"), "frame {i}: {why}");
        }
        for i in [0, 1, 2, 6, 7] {
            assert!(err(&pano.frames[i], truth[i]) < 0.3, "frame {i}");
        }
    }

    #[test]
    fn rgba_frames_register_on_luma_and_paste_colour() {
        let (frames, truth) = sequence(8, 5);
        let rgba: Vec<Image<Rgba8>> = frames.iter().map(|f| f.map(|v| Rgba8::new(v, v / 2, 255 - v, 255))).collect();
        let views: Vec<AnyView<'_>> = rgba.iter().map(|f| AnyView::Rgba8(f.view())).collect();
        let pano = stitch(&views, &StitchParams::default(), Parallelism::Sequential, &mut go_on).unwrap();
        for (r, &t) in pano.frames.iter().zip(&truth) {
            assert!(err(r, t) < 0.3);
        }
        assert!(matches!(pano.canvas.image, AnyImage::Rgba8(_)));
    }

    #[test]
    fn bad_input_is_an_error() {
        let (frames, _) = sequence(3, 2);
        let s = Parallelism::Sequential;
        assert!(stitch(&[], &StitchParams::default(), s, &mut go_on).is_err());
        for ks in [-0.1, 0.8, f64::NAN] {
            assert!(stitch(&any(&frames), &StitchParams { keyframe_shift: ks, ..Default::default() }, s, &mut go_on).is_err());
        }
        let p = StitchParams { register: RegisterParams { npts: 0, ..Default::default() }, ..Default::default() };
        assert!(stitch(&any(&frames), &p, s, &mut go_on).is_err());
        let p = StitchParams { coarse_candidates: 9, ..Default::default() };
        assert!(matches!(stitch(&any(&frames), &p, s, &mut go_on), Err(Error::OutOfRange { name: "coarse candidates", .. })));
        let none = Disk { frames: alloc::vec![None, None], reads: core::cell::RefCell::new(alloc::vec![0; 2]) };
        let e = stitch_frames(&none, &StitchParams::default(), s, &mut go_on).unwrap_err();
        assert!(alloc::format!("{e}").contains("no frame could be read") && alloc::format!("{e}").contains("truncated file"), "{e}");
    }
}
