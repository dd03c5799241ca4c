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
//! The run reads a window of up to [`WINDOW`] frames ahead, still each once, and registers
//! their planned pairs together (module `window`): over the CPU's threads, or handed to a
//! registrar in one batch ([`PairRegistrar::speculate`], a GPU registering them in one
//! launch).

use super::coarse::{self, Spectrum};
use super::faint;
use super::loops::{solve_loops, Loops};
use super::composite::{Blend, Canvas, Compositor, Pasting};
use super::moments::Moments;
use super::quality::{grid_ncc, overlap_ncc, overlap_null_ncc, QualityPlan, QualitySample};
use super::refine::{overlap_smoothed, refine_overlap_smoothed};
use super::accept::Acceptance;
use super::islands::{Islands, JOIN_CANDIDATES};
use super::relocate::{relocatable, Keyframes, RELOCATE_CANDIDATES};
use super::register::{evident_zoom, fit_turn, gray, luma_storage, register_pair, register_pair_turned, Gray, Motion, PairRegistration, RegisterParams, SkipReason};
use super::similarity::Similarity;
use super::stage_times::StageTimes;
use super::synth::SynthPixel;
use super::textured::{coherence, noise_variance, structure_tensor, textured_overlap, Noise, MIN_TEXTURED_BLOCKS};
use super::warp::warp_with;
use super::window::{Buffers, Planned, Window};
use super::window::WINDOW;
use crate::error::{Error, Result};
use crate::image::{AnyImage, AnyView, Image, ImageView};
use crate::ncc::{Integral, NccSample, SearchFrame};
use crate::parallel::Parallelism;
use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use once_cell::race::OnceBox;
use core::ops::ControlFlow;

/// Where a stitching run reads its frames: by index, each as often as the run needs it
/// (twice: to register, then to paste), so a sequence need not be held in memory whole.
///
/// A live source (frames still arriving) may grow: the run reads `len()` again before each
/// frame, so such a source promises the next frame, waits for it in `frame(i)`, and if its
/// input ends first, returns an error with `len()` now `i`: the run then ends as if the
/// sequence had `i` frames. It reports progress from [`recorded`](FrameSource::recorded).
pub trait FrameSource {
    /// Number of frames.
    fn len(&self) -> usize;
    /// Whether there is no frame.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Frame `i` (< `len()`), or why it cannot be had; such a frame is skipped with that
    /// reason ([`SkipReason::Unreadable`]) and the run goes on.
    fn frame(&self, i: usize) -> core::result::Result<Frame<'_>, String>;
    /// Told after each frame every record the run has made so far (an earlier record may
    /// still change, and with [`StitchParams::close_loops`] the positions are the chained
    /// ones until the global solve at the end). The default does nothing.
    fn recorded(&self, _records: &[FrameRecord]) {}
    /// How many frames can be had without waiting: `len()` but for a live source. The run
    /// reads ahead only these, so that a frame's record never waits for the next frame.
    fn ready(&self) -> usize {
        self.len()
    }
    /// Frame `i`'s size and pixel type name ([`AnyView::type_name`]), or why it cannot be
    /// had, as [`frame`](FrameSource::frame) would give them: by default from the frame; a
    /// source that can tell them for sure without its pixels (a file's header) does.
    fn shape(&self, i: usize) -> core::result::Result<((usize, usize), &'static str), String> {
        self.frame(i)?.shape()
    }
}

/// A frame from a [`FrameSource`]: borrowed from memory, decoded for the occasion, or
/// shared with a cache of decoded frames.
pub enum Frame<'a> {
    View(AnyView<'a>),
    Image(AnyImage),
    Shared(Arc<AnyImage>),
}

impl Frame<'_> {
    /// The frame's view; a 32-bit integer image is not a frame type.
    pub fn view(&self) -> core::result::Result<AnyView<'_>, String> {
        let owned = match self {
            Frame::View(v) => return Ok(*v),
            Frame::Image(i) => i,
            Frame::Shared(i) => i.as_ref(),
        };
        owned.view().ok_or_else(|| "32-bit integer images are not frames".into())
    }

    /// The frame's size and pixel type name ([`FrameSource::shape`]).
    pub fn shape(&self) -> core::result::Result<((usize, usize), &'static str), String> {
        self.view().map(|v| (v.size(), v.type_name()))
    }
}

/// Frames held in memory, as a [`FrameSource`].
pub struct InMemory<'s, 'a>(pub &'s [AnyView<'a>]);

impl FrameSource for InMemory<'_, '_> {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn frame(&self, i: usize) -> core::result::Result<Frame<'_>, String> {
        self.0.get(i).map(|v| Frame::View(*v)).ok_or_else(|| alloc::format!("no frame {i}"))
    }
}

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
    /// 0.136), at about a seventh of the speed on PAL frames (about 300 against 2 200 pairs/s
    /// on a 2-core machine; false: off).
    pub refine_every_pair: bool,
    /// Under [`Motion::Similarity`] without [`RegisterParams::fit_scale`]: once a pair shows
    /// a clear zoom (`register::evident_zoom`: an endoscope advancing or
    /// withdrawing), fit the scale from that pair on, as `fit_scale` would from the start
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
    /// [`PairRegistration::margin`]; 0 for the reference and skipped frames).
    pub margin: f64,
    /// NCC evaluations spent on this frame (all attempts).
    pub evaluations: u64,
    /// [`overlap_ncc`] with its reference, when computed.
    pub quality: Option<f64>,
    /// [`grid_ncc`] (5 x 5 templates of side rsz) with its reference, when computed.
    pub quality_grid: Option<f64>,
    /// With [`StitchParams::close_loops`]: the largest residual (pixels) of the frame's
    /// registrations after the global solve (`loops`); 0 where no loop was closed.
    /// `None` for skipped frames and without the solve.
    pub residual: Option<f64>,
    /// The earlier keyframe this frame closed a loop with, if that loop was kept.
    pub loop_closure: Option<usize>,
    /// Registered on the whole overlap from a phase-correlation peak this significant
    /// ([`PairRegistration::phase_significance`]); `None` where templates decided.
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
    /// Mean [`overlap_ncc`] of the registered pairs that have one.
    pub fn mean_quality(&self) -> Option<f64> {
        mean(self.frames.iter().filter_map(|f| f.quality))
    }
    /// Mean [`grid_ncc`] of the registered pairs that have one.
    pub fn mean_quality_grid(&self) -> Option<f64> {
        mean(self.frames.iter().filter_map(|f| f.quality_grid))
    }
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

/// Registers pairs of grey frames (of one type and size) for a stitching run: the seam
/// through which another backend (the GPU) runs the pairs of [`stitch_frames_with`], the
/// sequence logic (attempts, keyframes, skips, reference) staying the core's. It must
/// answer as [`register_pair`] would.
///
/// Frames come with their index in the [`FrameSource`]: within one run an index always
/// names the same pixels, so a registrar may keep a copy of a frame (on its device) by
/// index, and answer a pair from work it did earlier ([`PairRegistrar::speculate`]).
pub trait PairRegistrar: Sync {
    fn register(&self, pair: &PairRequest<'_>, p: &RegisterParams) -> Result<PairRegistration>;
    /// The planned pairs of the run's next window (up to [`WINDOW`] of them, in frame
    /// order), called when the window opens: `pairs[0]` is the very next
    /// [`register`](PairRegistrar::register) call, `pairs[j]` the first attempt of the frame
    /// `j` further on if the frames before it register as planned. A registrar may register
    /// them all at once and answer a later `register` call from them when it is the same
    /// pair (same indices, parameters and prediction, all that [`register_pair`] depends
    /// on); anything else it must register afresh. The default does nothing.
    fn speculate(&self, _pairs: &[PairRequest<'_>], _p: &RegisterParams) -> Result<()> {
        Ok(())
    }
    /// The sums of registered pairs' quality measures (a window's at once): for each
    /// request, one per region of its plan in order, the moving frame as it is (a pair that
    /// turns is measured on the host). `None`, the default and the answer for f32 frames:
    /// the run adds them on the host.
    fn quality_sums(&self, _requests: &[QualityRequest<'_>]) -> Option<Result<Vec<Vec<Moments<4>>>>> {
        None
    }
}

/// The quality measures of one registered pair a run asks a [`PairRegistrar`] to sum:
/// frames `reference.0` and `moving.0` (integer frames), and the plan of their regions and
/// taps for the pair's shift.
#[derive(Clone, Debug)]
pub struct QualityRequest<'a> {
    pub reference: (usize, Gray<'a>),
    pub moving: (usize, Gray<'a>),
    pub plan: QualityPlan,
}

/// One pair registration a run asks a [`PairRegistrar`] for: frame `moving.0` against frame
/// `reference.0`, starting at the predicted shift `prediction`.
#[derive(Clone, Debug)]
pub struct PairRequest<'a> {
    pub reference: (usize, Gray<'a>),
    pub moving: (usize, Gray<'a>),
    pub prediction: (f64, f64),
}

/// [`register_frames`] with the pairs registered by `registrar` (`None`: the CPU's
/// [`register_pair`], each moving frame's integral images computed once for its attempts).
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
    let run = Run { p: *p, par, size, type_name, registrar, times, confirm_every_match: false };
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
        Ok(Box::new(Compositor::new(like, positions, blend)?))
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
    for (i, pos) in positions.iter().enumerate() {
        if pos.is_some() {
            let f = frames.frame(i).map_err(|why| unreadable(i, why))?;
            let v = f.view().map_err(|why| unreadable(i, why))?;
            let c = match &mut canvas {
                Some(c) => c,
                None if turned => canvas.insert(Box::new(Compositor::with_poses(&v, &poses, p.blend)?)),
                None => canvas.insert(new_canvas(&v, &positions, p.blend)?),
            };
            c.paste(i, &v)?;
        }
    }
    let Some(canvas) = canvas else { return Err(nothing_registered(&records)) };
    Ok(Panorama { canvas: canvas.finish()?, frames: records, reference })
}

/// The grey type registration runs on, and its view of a frame's [`Gray`].
pub(super) trait GrayType: NccSample + QualitySample + SynthPixel {
    fn typed<'a>(g: Gray<'a>) -> Option<ImageView<'a, Self>>;
    fn gray(v: ImageView<'_, Self>) -> Gray<'_>;
}

macro_rules! gray_type {
    ($t:ty, $var:ident) => {
        impl GrayType for $t {
            fn typed<'a>(g: Gray<'a>) -> Option<ImageView<'a, Self>> {
                match g {
                    Gray::$var(v) => Some(v),
                    _ => None,
                }
            }
            fn gray(v: ImageView<'_, Self>) -> Gray<'_> {
                Gray::$var(v)
            }
        }
    };
}
gray_type!(u8, U8);
gray_type!(u16, U16);
gray_type!(f32, F32);

/// A frame the run holds: the registration reference candidates and the current frame.
pub(super) struct Held<'s> {
    pub(super) index: usize,
    frame: Frame<'s>,
    /// The luma of an RGBA frame (registration runs on grey).
    luma: Option<Image<u8>>,
    /// Pose in the reference's coordinates (for a candidate not yet registered: the
    /// identity).
    pub(super) pos: Similarity,
    /// The frame as the whole-overlap refinement sees it ([`overlap_smoothed`]), made the
    /// first time a pair needs it and kept for the others the frame is in.
    smoothed: OnceBox<Image<f32>>,
    /// The frame band-passed for faint pairs ([`faint::band_passed`]), made and kept likewise.
    band: OnceBox<Image<f32>>,
}

impl Held<'_> {
    pub(super) fn view<T: GrayType>(&self) -> Result<ImageView<'_, T>> {
        let v = self.frame.view().map_err(|why| Error::InvalidParameter { name: "frames", reason: why })?;
        let g = gray(&v, &self.luma)?;
        T::typed(g).ok_or(Error::UnsupportedType { op: "stitch", types: "frames of differing pixel types" })
    }

    /// The frame smoothed for the whole-overlap refinement.
    fn smoothed<T: GrayType>(&self, par: Parallelism) -> Result<&Image<f32>> {
        if let Some(s) = self.smoothed.get() {
            return Ok(s);
        }
        let s = overlap_smoothed(self.view::<T>()?, par)?;
        Ok(self.smoothed.get_or_init(|| alloc::boxed::Box::new(s)))
    }

    /// The frame band-passed for faint pairs.
    pub(super) fn band<T: GrayType>(&self, par: Parallelism) -> Result<&Image<f32>> {
        if let Some(b) = self.band.get() {
            return Ok(b);
        }
        let b = faint::band_passed(self.view::<T>()?, par)?;
        Ok(self.band.get_or_init(|| alloc::boxed::Box::new(b)))
    }
}

/// One registration run over a source whose first readable frame is `size` / `type_name`.
#[derive(Clone, Copy)]
pub(super) struct Run<'a> {
    /// The run's parameters; scale fitting turns on where a zoom is evident
    /// ([`StitchParams::detect_zoom`]).
    pub(super) p: StitchParams,
    pub(super) par: Parallelism,
    pub(super) size: (usize, usize),
    type_name: &'static str,
    pub(super) registrar: Option<&'a dyn PairRegistrar>,
    /// Where the parallel stage's wall time is added, when it is measured.
    pub(super) times: Option<&'a StageTimes>,
    /// Every match must stand on the overlap's texture, as a weak one must (a lost frame
    /// found again among many keyframes, module `relocate`: more chances of a chance match).
    pub(super) confirm_every_match: bool,
}

impl<'a> Run<'a> {
    /// The same run on the threads of `par`.
    pub(super) fn on(&self, par: Parallelism) -> Self {
        Run { par, ..*self }
    }

    /// Registers `current` against `keyframe` alone (an earlier frame read again, at its
    /// chained pose) from the pair motion `motion`, with every stage of [`Run::settle`]:
    /// a loop's partner, a lost frame's candidate. Returns the registration and its NCC
    /// evaluations; `buffer` and `turn_buffer` are the moving frame's integral images, reused.
    pub(super) fn settle_against<T: GrayType>(&self, keyframe: &Held<'a>, current: &Held<'a>, motion: Similarity, buffer: &mut Integral<T>, turn_buffer: &mut Integral<T>) -> Result<(PairRegistration, u64)> {
        let k = keyframe.index;
        let frame = |idx: usize| if idx == k { Ok(keyframe) } else { Err(Error::Backend("internal: lost an earlier keyframe".into())) };
        let moving = match self.registrar {
            None => Some(SearchFrame::with_buffer(current.view::<T>()?, core::mem::take(buffer))?),
            Some(_) => None,
        };
        let settled = self.settle::<T>(&frame, current, moving.as_ref(), &[(k, motion)], turn_buffer, FirstAttempt::Every);
        if let Some(m) = moving {
            *buffer = m.into_integral();
        }
        settled.map(|(_, registration, evaluations)| (registration, evaluations))
    }

    /// The same run with every match confirmed on the overlap's texture.
    pub(super) fn confirming_every_match(&self) -> Self {
        Run { confirm_every_match: true, ..*self }
    }

    /// Frame `i`, held, or why it is skipped.
    pub(super) fn load<'s>(&self, frames: &'s dyn FrameSource, i: usize) -> core::result::Result<Held<'s>, SkipReason> {
        let frame = frames.frame(i).map_err(SkipReason::Unreadable)?;
        let v = frame.view().map_err(SkipReason::Mismatch)?;
        if v.size() != self.size || v.type_name() != self.type_name {
            return Err(SkipReason::Mismatch(alloc::format!(
                "it is {}x{} {}, the sequence {}x{} {}",
                v.size().0,
                v.size().1,
                v.type_name(),
                self.size.0,
                self.size.1,
                self.type_name
            )));
        }
        if let AnyView::F32(f) = v {
            let pixels = f.rows().flatten().filter(|x| !x.is_finite()).count();
            if pixels > 0 {
                return Err(SkipReason::NonFinite { pixels });
            }
        }
        let luma = luma_storage(&v);
        Ok(Held { index: i, frame, luma, pos: Similarity::IDENTITY, smoothed: OnceBox::new(), band: OnceBox::new() })
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
        let p = self.p;
        let mut evaluations = 0;
        let mut attempt_with = |r: usize, motion: Similarity, rp: &RegisterParams| -> Result<PairRegistration> {
            let r_held = frame(r)?;
            if rp.motion == Motion::Similarity && motion.spread(self.size) > WARP_SPREAD {
                // With a registrar, the frame's integral images are computed here.
                let own = match moving {
                    Some(_) => None,
                    None => Some(SearchFrame::with_buffer(current.view::<T>()?, core::mem::take(turn_buffer))?),
                };
                let reg = self.register_turned(r_held.view::<T>()?, moving.or(own.as_ref()).ok_or(Error::Backend("internal: no moving frame".into()))?, rp, &motion);
                if let Some(o) = own {
                    *turn_buffer = o.into_integral();
                }
                let reg = reg?;
                evaluations += reg.evaluations;
                return Ok(reg);
            }
            let pred = pair_prediction(&motion, self.size);
            let mut reg = match (moving, self.registrar) {
                (Some(m), _) => register_pair(r_held.view::<T>()?, m, rp, pred, self.par)?,
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
            evaluations += reg.evaluations;
            Ok(reg)
        };
        let mut attempt = |r: usize, motion: Similarity| attempt_with(r, motion, &p.register);
        let mut outcome: Option<(usize, PairRegistration)> = None;
        let first_only = matches!(first, FirstAttempt::Only);
        let mut known = match first {
            FirstAttempt::Known(reg) => Some(reg),
            _ => None,
        };
        for &(r, motion) in attempts.iter().take(if first_only { 1 } else { attempts.len() }) {
            let reg = match known.take() {
                Some(reg) => reg,
                None => attempt(r, motion)?,
            };
            let done = reg.shift.is_some();
            outcome = Some((r, reg));
            if done {
                break;
            }
        }
        if first_only {
            if let Some((r, reg)) = outcome.as_ref().filter(|o| !stands_clear(&o.1)) {
                return Ok((*r, reg.clone(), evaluations));
            }
        }
        // The coarse global estimates (phase correlation) seed the search where the
        // motion's prediction did not: a pair that failed (a jump, or a prediction
        // made over skipped frames), and a pair that
        // registered on a weak minority of its templates, which a local search that
        // started far from the peak can lock onto (a lattice, a field of grass). A
        // seeded registration wins with more agreeing vectors; the first stays
        // otherwise.
        // The frame the global estimates are made against: the reference of a weak match, else
        // the first attempt's (the keyframe), so that frames that fail do not chain frame to
        // frame. (The seeds were once made against the last good frame; they moved to the
        // keyframe with the whole-overlap stage, and the robustness footage is measured so.)
        let base_of = |(r, reg): &(usize, PairRegistration)| if reg.shift.is_some() { *r } else { attempts.first().map_or(*r, |a| a.0) };
        // Seeds are shifts of the frame's centre; the turn stays the predicted one (from the
        // pose `b_pos` of the frame registered against).
        let first = match attempts.first() {
            Some(&(r, motion)) => Some((r, frame(r)?.pos, motion)),
            None => None,
        };
        let predicted_turn = |b: usize, b_pos: Similarity| match first {
            Some((r, _, motion)) if r == b => motion,
            Some((_, r_pos, motion)) => b_pos.inverse().then(&r_pos.then(&motion)),
            None => Similarity::IDENTITY,
        };
        let seeded = |seed: (f64, f64), turn: &Similarity| if turn.is_translation() { Similarity::translation(seed) } else { Similarity::about(centre(self.size), seed, turn.angle, turn.scale) };
        // The spectra of a reference (index) and the frame, once computed.
        let mut spectra: Option<(usize, Spectrum, Spectrum)> = None;
        match &outcome {
            Some(o) if p.coarse_candidates > 0 && (o.1.shift.is_none() || weak(&o.1)) => {
                let base = base_of(o);
                let b_held = frame(base)?;
                let (b_spectrum, c_spectrum) = (Spectrum::new(b_held.view::<T>()?), Spectrum::new(current.view::<T>()?));
                let seeds = coarse::candidates(&b_spectrum, &c_spectrum, p.coarse_candidates).unwrap_or_default();
                spectra = Some((base, b_spectrum, c_spectrum));
                let b_pos = b_held.pos;
                let turn = predicted_turn(base, b_pos);
                for seed in seeds.into_iter().map(|peak| peak.shift) {
                    if let Some(s) = outcome.as_ref().and_then(|o| o.1.shift) {
                        // Already where this seed leads.
                        if libm::fabs(s.0 - seed.0) < 4.0 && libm::fabs(s.1 - seed.1) < 4.0 {
                            continue;
                        }
                    }
                    let reg = attempt(base, seeded(seed, &turn))?;
                    let better = match &outcome {
                        Some((_, o)) => reg.shift.is_some() && (o.shift.is_none() || reg.vectors_used > o.vectors_used),
                        None => true,
                    };
                    if better {
                        outcome = Some((base, reg));
                    }
                    if outcome.as_ref().is_some_and(|o| o.1.shift.is_some() && !weak(&o.1)) {
                        break;
                    }
                }
            }
            _ => {}
        }
        // Faint texture (low contrast, strong noise): where too few templates agree,
        // grow them to twice the side, from the shift found or the prediction, so each
        // averages more signal; the grown registration stands if it is not weak too.
        let short = |reg: &PairRegistration| weak(reg) || matches!(reg.skip, Some(SkipReason::TooFewVectors { .. }));
        if let Some((r, reg)) = outcome.as_ref().filter(|o| p.grow_templates && p.register.acceptance == Acceptance::Adaptive && short(&o.1)) {
            let r = *r;
            let start = reg.motion().or(attempts.iter().find(|a| a.0 == r).map(|a| a.1)).unwrap_or(Similarity::IDENTITY);
            let grown = RegisterParams { rsz: (2 * p.register.rsz + 1).min(255), ..p.register };
            let g = attempt_with(r, start, &grown)?;
            if g.shift.is_some() && (reg.shift.is_none() || !weak(&g)) {
                outcome = Some((r, g));
            }
        }
        // Texture too faint for templates (the fundus at low contrast or under strong noise):
        // where no registration stands on a clear majority of them, the whole overlap decides,
        // from the band-limited phase correlation's peak where it stands clear of the noise.
        // Against the keyframe first, then the other frames attempted (the last good frame):
        // a faint pair's peak sinks into the noise as the overlap shrinks (the fundus at
        // contrast 0.3, 30 px from its keyframe: significance 9, against 23 for the frame
        // before it).
        let on_overlap = self.refines_on_overlap();
        let mut correlation_peak = None;
        if let Some(o) = outcome.as_ref().filter(|o| on_overlap && (o.1.shift.is_none() || weak(&o.1))).cloned() {
            let mut bases: Vec<usize> = Vec::with_capacity(attempts.len() + 1);
            for b in core::iter::once(base_of(&o)).chain(attempts.iter().map(|a| a.0)) {
                if !bases.contains(&b) {
                    bases.push(b);
                }
            }
            for base in bases {
                let (b_spectrum, c_spectrum) = match spectra.take() {
                    Some((b, r, c)) if b == base => (r, c),
                    Some((_, _, c)) => (Spectrum::new(frame(base)?.view::<T>()?), c),
                    None => (Spectrum::new(frame(base)?.view::<T>()?), Spectrum::new(current.view::<T>()?)),
                };
                let found = coarse::weighted_candidates(&b_spectrum, &c_spectrum, 1, Some(coarse::FAINT_BAND)).unwrap_or_default();
                spectra = Some((base, b_spectrum, c_spectrum));
                let Some(peak) = found.first().filter(|k| k.significance >= coarse::SIGNIFICANT_PEAK) else { continue };
                let b_held = frame(base)?;
                let start = seeded(peak.shift, &predicted_turn(base, b_held.pos));
                // From the phase peak to where the overlap's correlation peaks on band-passed
                // frames ([`faint`]), then the overlap refinement from there: on faint texture
                // the refinement stops near its start (PAL at contrast 0.3 under noise 6: 0.46
                // px from the phase peak, 0.26 from the correlation's), while on clear texture
                // it converges to its own optimum, whose per-patch ramps take up a vignetting
                // fixed to the lens that pulls the correlation's peak (0.3 px on the fundus
                // under 40 % vignetting).
                let peaked = match start.is_translation() {
                    true => faint::overlap_peak(b_held.band::<T>(self.par)?.view(), current.band::<T>(self.par)?.view(), start.shift(), SEED_REACH, self.par)?,
                    false => None,
                };
                let start = peaked.map_or(start, Similarity::translation);
                let unknowns = overlap_unknowns(&p.register, &start);
                if let Some(m) = self.refine_on_overlap::<T>(b_held, current, start, unknowns, SEED_REACH)? {
                    let mut phased = PairRegistration { skip: None, phase_significance: Some(peak.significance), margin: peak.significance - coarse::SIGNIFICANT_PEAK, ..o.1.clone() };
                    (phased.shift, phased.angle, phased.scale) = (Some(m.shift()), m.angle, m.scale);
                    outcome = Some((base, phased));
                    correlation_peak = peaked;
                    break;
                }
            }
        }
        let Some((r, mut reg)) = outcome else { unreachable_attempts()? };
        // A weak consensus must be confirmed by the whole overlap: chance agreement of a
        // few templates between unrelated frames is rare but, over a long run with
        // several attempts per frame, not rare enough to report a position on it.
        // A whole-overlap match is always confirmed: with no template textured (a frame over an
        // empty patch of slide) none is weak, and its overlap may still correlate well on
        // the border of the empty patch, at any shift along it.
        // So must a consensus of templates that see one edge running one way (a fundus's
        // rim past an empty patch): each pins the shift across the edge and not along it,
        // and four such agreed on a place 13 px along the rim. A straight edge crosses at
        // most 2 npts - 1 of the npts x npts templates, a curved rim more (with a bound of
        // 2 npts the fundus sweep's frames moved up to 0.2 px); 3 npts or more agreeing
        // are not on one edge, and their gradients are not summed.
        let few = reg.vectors_used < 3 * p.register.npts;
        let along_an_edge = reg.phase_significance.is_none() && reg.shift.is_some() && few && aperture_bound(frame(r)?.view::<T>()?, &reg, p.register.rsz);
        if let (Some(m), true) = (reg.motion(), (weak(&reg) || along_an_edge || self.confirm_every_match || reg.phase_significance.is_some()) && p.register.acceptance == Acceptance::Adaptive) {
            let aligned = Aligned::new(current.view::<T>()?, &m, self.par)?;
            let reference = frame(r)?.view::<T>()?;
            let overlap = overlap_ncc(reference, aligned.view(), aligned.shift, self.par)?.unwrap_or(f64::NEG_INFINITY);
            // A phase-correlation match, already significant against its surface's noise,
            // stands under `min_coefficient` where its overlap beats what the pair correlates
            // where it cannot match (faint frames: the true match's NCC is bounded by their
            // signal-to-noise ratio; the fundus at contrast 0.3 went from 7 to 37 of 40
            // frames). Only where the overlap refinement fitted the pair's turn: under the
            // translation model a turned pair correlates near its centre of rotation alone,
            // faintly, and stood above the null too (gravel rolling 1.9 degrees a frame: 20
            // frames more than 2 px off). Template consensus keeps the fixed floor: a few
            // templates agreeing by chance have no such second test behind them.
            let null = match reg.phase_significance {
                Some(_) if overlap < p.register.min_coefficient && p.register.motion == Motion::Similarity => overlap_null_ncc(reference, aligned.view(), aligned.shift, self.par)?,
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
                    textured_overlap(frame(r)?.band::<T>(self.par)?.view(), current.band::<T>(self.par)?.view(), m.shift(), p.register.rsz, band, floor.min(p.register.min_variance), self.par)?
                }
                false => textured_overlap(reference, aligned.view(), aligned.shift, p.register.rsz, Noise::white(noise), p.register.min_variance, self.par)?,
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
        // Faint matches (few templates agree, or agree weakly) leave the motion uncertain by
        // up to a pixel: the whole overlap refines it.
        // Or every pair, when asked for.
        let faint = |reg: &PairRegistration| reg.phase_significance.is_none() && (2 * reg.vectors_used < reg.textured || reg.ncc < FAINT_NCC);
        let every = |reg: &PairRegistration| p.refine_every_pair && reg.phase_significance.is_none();
        if let Some(m) = reg.motion().filter(|_| (on_overlap && faint(&reg)) || every(&reg)) {
            let unknowns = overlap_unknowns(&p.register, &m);
            if let Some(refined) = self.refine_on_overlap::<T>(frame(r)?, current, m, unknowns, FAINT_REACH)? {
                (reg.shift, reg.angle, reg.scale) = (Some(refined.shift()), refined.angle, refined.scale);
            }
        }
        Ok((r, reg, evaluations))
    }

    /// Refines the registration of held frame `l` against its held reference on the whole
    /// overlap (`l` is about to become the keyframe): its pose, in `held` and in its record,
    /// moves where the refinement leads (unchanged where it finds nothing).
    fn refine_keyframe<T: GrayType>(&self, held: &mut [Held<'_>], records: &mut [FrameRecord], l: usize) -> Result<()> {
        let Some(r) = records[l].reference else { return Ok(()) };
        // A faint pair's link already stands where its overlap correlation peaks.
        if self.faint_phase(&records[l]) {
            return Ok(());
        }
        let (Some(l_held), Some(r_held)) = (held.iter().find(|f| f.index == l), held.iter().find(|f| f.index == r)) else { return Ok(()) };
        let motion = r_held.pos.inverse().then(&l_held.pos);
        let unknowns = overlap_unknowns(&self.p.register, &motion);
        let Some(refined) = self.refine_on_overlap::<T>(r_held, l_held, motion, unknowns, FAINT_REACH)? else { return Ok(()) };
        let pos = r_held.pos.then(&refined);
        let rec = &mut records[l];
        (rec.position, rec.angle, rec.scale) = (Some(pos.shift()), pos.angle, pos.scale);
        self.measure_quality::<T>(r_held, l_held, &refined, rec)?;
        if let Some(f) = held.iter_mut().find(|f| f.index == l) {
            f.pos = pos;
        }
        Ok(())
    }

    /// With `quality` on, the record `rec` of `moving`, registered against `reference` by
    /// pair motion `motion`, gets the NCC of their overlap and its grid.
    fn measure_quality<T: GrayType>(&self, reference: &Held<'_>, moving: &Held<'_>, motion: &Similarity, rec: &mut FrameRecord) -> Result<()> {
        (rec.quality, rec.quality_grid) = self.quality::<T>(reference, moving, motion)?;
        Ok(())
    }

    /// With `quality` on, the NCC of the overlap of `moving`, registered against `reference`
    /// by pair motion `motion`, and of its grid; `None`s with it off. A registrar may add their
    /// sums ([`PairRegistrar::quality_sums`]).
    pub(super) fn quality<T: GrayType>(&self, reference: &Held<'_>, moving: &Held<'_>, motion: &Similarity) -> Result<(Option<f64>, Option<f64>)> {
        if !self.p.quality {
            return Ok((None, None));
        }
        if self.registrar.is_some() && motion.is_translation() {
            if let Some(q) = self.registrar_quality::<T>(&[(reference, moving, *motion)])? {
                return Ok(q[0]);
            }
        }
        self.host_quality::<T>(reference, moving, motion)
    }

    /// The quality measures of `pairs` (reference, moving, pair motion: translations) from
    /// their sums added by the registrar in one call, or `None` where it adds none (no
    /// registrar, f32 frames).
    pub(super) fn registrar_quality<T: GrayType>(&self, pairs: &[(&Held<'_>, &Held<'_>, Similarity)]) -> Result<Option<Vec<(Option<f64>, Option<f64>)>>> {
        let Some(g) = self.registrar else { return Ok(None) };
        let mut requests = Vec::with_capacity(pairs.len());
        for &(reference, moving, motion) in pairs {
            let (a, b) = (reference.view::<T>()?, moving.view::<T>()?);
            let plan = QualityPlan::new(a.size(), motion.shift(), self.p.register.rsz)?;
            requests.push(QualityRequest { reference: (reference.index, T::gray(a)), moving: (moving.index, T::gray(b)), plan });
        }
        let Some(sums) = g.quality_sums(&requests) else { return Ok(None) };
        let sums = sums?;
        if sums.len() != requests.len() {
            return Err(Error::Backend(alloc::format!("quality sums of {} pairs for {}", sums.len(), requests.len())));
        }
        let mut measures = Vec::with_capacity(requests.len());
        for (request, sums) in requests.iter().zip(sums) {
            if sums.len() != request.plan.regions.len() {
                return Err(Error::Backend(alloc::format!("{} quality sums for {} regions", sums.len(), request.plan.regions.len())));
            }
            measures.push(request.plan.measures(&sums));
        }
        Ok(Some(measures))
    }

    /// The quality measures of one pair on the host.
    pub(super) fn host_quality<T: GrayType>(&self, reference: &Held<'_>, moving: &Held<'_>, motion: &Similarity) -> Result<(Option<f64>, Option<f64>)> {
        let aligned = Aligned::new(moving.view::<T>()?, motion, self.par)?;
        let (a, b) = (reference.view::<T>()?, aligned.view());
        Ok((overlap_ncc(a, b, aligned.shift, self.par)?, grid_ncc(a, b, aligned.shift, self.p.register.rsz)?))
    }

    /// Whether frame `rec` registered on a phase-correlation match too faint for a fixed
    /// level, confirmed against its null ([`faint::overlap_peak`] placed it).
    pub(super) fn faint_phase(&self, rec: &FrameRecord) -> bool {
        rec.phase_significance.is_some() && rec.ncc < self.p.register.min_coefficient && rec.angle == 0.0 && rec.scale == 1.0
    }

    /// Whether pairs are refined on the whole overlap (faint ones, and the keyframes' links).
    fn refines_on_overlap(&self) -> bool {
        self.p.whole_overlap && self.p.register.acceptance == Acceptance::Adaptive
    }

    /// The pair motion `start` refined on the whole overlap of `reference` and `moving`
    /// ([`super::refine::refine_overlap`]), on their kept smoothed copies.
    fn refine_on_overlap<T: GrayType>(&self, reference: &Held<'_>, moving: &Held<'_>, start: Similarity, unknowns: usize, reach: f64) -> Result<Option<Similarity>> {
        let (r, m) = (reference.smoothed::<T>(self.par)?, moving.smoothed::<T>(self.par)?);
        Ok(refine_overlap_smoothed(r.view(), m.view(), start, self.p.register.rsz, unknowns, reach)?.map(|(m, _)| m))
    }

    /// Registers `moving` against `reference` when the predicted pair motion `motion` turns
    /// (or scales) the frame visibly, as if the moving frame were first turned back by it
    /// about its centre ([`register_pair_turned`]: the templates are turned, not the frame),
    /// so that the templates meet their matches upright and the pair is nearly a
    /// translation; then the pair's motion is composed with the turn. Always on the CPU (a
    /// registrar searches upright templates).
    fn register_turned<T: GrayType>(&self, reference: ImageView<'_, T>, moving: &SearchFrame<'_, T>, rp: &RegisterParams, motion: &Similarity) -> Result<PairRegistration> {
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

    fn register<T: GrayType>(mut self, frames: &'a dyn FrameSource, progress: &mut dyn FnMut(usize) -> ControlFlow<()>) -> Result<(Vec<FrameRecord>, usize)> {
        let (w, h) = self.size;
        let p = self.p;
        let limit = (p.keyframe_shift * w as f64, p.keyframe_shift * h as f64);
        let mut records: Vec<FrameRecord> = Vec::with_capacity(frames.len());
        let (mut buffer, mut turn_buffer) = (Integral::default(), Integral::default());
        // The frames the run may register against, found by index: the keyframe, the last
        // good frame and, until the first pair registers, the latest readable frame that
        // did not register against the reference candidate `key` (a candidate too).
        let mut held: Vec<Held<'a>> = Vec::new();
        let (mut key, mut last, mut pending): (Option<usize>, Option<usize>, Option<usize>) = (None, None, None);
        let mut reference = None;
        let mut vel = Velocity::default();
        let mut loops = Loops::default();
        // The keyframes a lost frame is searched among (module `relocate`), the islands
        // (module `islands`) and the frame that may start the next one.
        let mut keyframes = Keyframes::default();
        let mut islands = Islands::default();
        let mut seed: Option<usize> = None;
        // The window of planned pairs (module `window`) and its frames, read ahead once each:
        // the run takes frame i from `ahead` when it gets there.
        let mut window: Option<Window> = None;
        let mut window_buffers: Vec<Buffers<T>> = Vec::new();
        let mut ahead: VecDeque<(usize, core::result::Result<Held<'a>, SkipReason>)> = VecDeque::new();
        // `len()` is read before each frame: a live source grows (FrameSource).
        for i in (0..).take_while(|&i| i < frames.len()) {
            let loaded = match ahead.pop_front() {
                Some((j, f)) if j == i => f,
                _ => self.load(frames, i),
            };
            let current = match loaded {
                Ok(f) => f,
                // The input ended while the run waited for this frame: there is none.
                Err(_) if i >= frames.len() => break,
                Err(reason) => {
                    records.push(FrameRecord::skipped(i, reason, 0));
                    window = None;
                    self.step(frames, progress, &records, &islands)?;
                    continue;
                }
            };
            let Some(k) = key else {
                records.push(FrameRecord::reference(i));
                held.push(current);
                key = Some(i);
                self.step(frames, progress, &records, &islands)?;
                continue;
            };
            // Once a pair has registered, each frame's first attempt comes from the window's
            // plan, made when the window opens at this frame.
            // Before any pair has registered, the next frame alone is planned against the
            // reference at rest: the first pair, too, registers in the parallel stage.
            let mut opened = false;
            if window.as_ref().and_then(|w| w.get(i)).is_none() {
                let at = |idx: usize| held.iter().find(|f| f.index == idx).map(|f| f.pos).ok_or(Error::Backend("internal: lost a reference frame".into()));
                let anchor = match (last, pending) {
                    (Some(l), _) => Some((l, WINDOW)),
                    (None, None) => Some((k, 1)),
                    (None, Some(_)) => None,
                };
                if let Some((l, frames)) = anchor {
                    window = Some(Window::plan(i, frames, (k, at(k)?), (l, at(l)?), vel, limit, self.size));
                    opened = true;
                }
            }
            // The window's frames, read ahead as far as the source has them.
            if let Some(end) = window.as_ref().and_then(|w| w.planned.last()).map(|p| p.moving) {
                while i + 1 + ahead.len() <= end && i + 1 + ahead.len() < frames.ready() {
                    let j = i + 1 + ahead.len();
                    ahead.push_back((j, self.load(frames, j)));
                }
            }
            if let (Some(g), Some(w), true) = (self.registrar, window.as_ref(), opened) {
                let find = |idx: usize| window_frame(&held, &current, &ahead, idx);
                g.speculate(&w.requests::<T>(&find, self.size)?, &self.p.register)?;
            }
            let planned = window.as_ref().and_then(|w| w.get(i)).map(|(j, p)| (j, *p));
            // The last good frame about to become the keyframe carries its registration's error
            // to every frame registered after it: that link is refined on the whole overlap.
            if let (Some(l), Some((_, pl)), true) = (last, planned, self.refines_on_overlap()) {
                if pl.reference == l && key != Some(l) && records[l].reference == key {
                    self.refine_keyframe::<T>(&mut held, &mut records, l)?;
                }
            }
            let find = |idx: usize| held.iter().find(|f| f.index == idx).ok_or(Error::Backend("internal: lost a reference frame".into()));
            // The planned pair, registered with the window's others; it stands where it stood
            // clear on its own (no other attempt would have been made).
            // Off the plan, a first attempt that did not stand clear need not register again.
            let (mut on_plan, mut first) = (None, FirstAttempt::Every);
            if let (Some((j, pl)), Some(w)) = (planned, window.as_mut()) {
                key = Some(pl.reference);
                let shared = |idx: usize| window_frame(&held, &current, &ahead, idx);
                let (settled, quality) = w.settled::<T>(j, &self, &shared, &mut window_buffers)?;
                if !stands_clear(&settled.1) {
                    first = FirstAttempt::Known(settled.1);
                } else if !self.zoom_found(&settled.1) {
                    on_plan = Some((settled, quality));
                }
            }
            let mut measured = None;
            let (mut r, mut reg, mut evaluations) = match on_plan {
                Some((settled, quality)) => {
                    measured = quality;
                    settled
                }
                None => {
                    // Off the plan: every attempt, and the window closes here.
                    window = None;
                    let attempts = self.attempts(&find, (k, &mut key), last, pending, planned.map(|(_, p)| p), vel, i, limit)?;
                    let moving = match self.registrar {
                        None => Some(SearchFrame::with_buffer(current.view::<T>()?, core::mem::take(&mut buffer))?),
                        Some(_) => None,
                    };
                    // The known first attempt's evaluations were made once, in the window.
                    let known = match &first {
                        FirstAttempt::Known(reg) => reg.evaluations,
                        _ => 0,
                    };
                    let settled = self.settle::<T>(&find, &current, moving.as_ref(), &attempts, &mut turn_buffer, first);
                    if let Some(m) = moving {
                        buffer = m.into_integral();
                    }
                    let (mut r, mut reg, mut evaluations) = settled?;
                    evaluations += known;
                    // A zoom the scale-free model cannot follow: the scale is fitted from this pair on.
                    if self.zoom_found(&reg) {
                        self.p.register.fit_scale = true;
                        let moving = match self.registrar {
                            None => Some(SearchFrame::new(current.view::<T>()?)?),
                            Some(_) => None,
                        };
                        let (zr, zreg, zevaluations) = self.settle::<T>(&find, &current, moving.as_ref(), &attempts, &mut turn_buffer, FirstAttempt::Every)?;
                        (r, reg, evaluations) = (zr, zreg, evaluations + zevaluations);
                    }
                    (r, reg, evaluations)
                }
            };
            // Lost: searched among the earlier keyframes, the chain continuing from the one
            // it registers against.
            let mut relocated = None;
            if reg.shift.is_none() && reference.is_some() && relocatable(reg.skip.as_ref()) && keyframes.len() > 0 {
                let tried: Vec<usize> = [Some(k), key, last].into_iter().flatten().collect();
                let (found, spent) = self.relocate::<T>(frames, &current, &mut keyframes, &|idx, _| tried.contains(&idx), RELOCATE_CANDIDATES, &mut buffer, &mut turn_buffer)?;
                evaluations += spent;
                if let Some(f) = found {
                    (r, reg) = (f.keyframe.index, f.registration);
                    relocated = Some(f.keyframe);
                }
            }
            // Found nowhere: a new island where it registers against the seed (module
            // `islands`), its match confirmed on texture as a lost frame's must be.
            let mut seeded = false;
            if let (None, Some(_), Some(s)) = (reg.shift, reference, seed.and_then(|s| held.iter().find(|f| f.index == s))) {
                let (registration, spent) = self.confirming_every_match().settle_against::<T>(s, &current, Similarity::IDENTITY, &mut buffer, &mut turn_buffer)?;
                evaluations += spent;
                if registration.shift.is_some() {
                    (r, reg, seeded) = (s.index, registration, true);
                }
            }
            match reg.shift {
                None => {
                    records.push(FrameRecord::skipped(i, reg.skip.unwrap_or(SkipReason::NoOverlap), evaluations));
                    if reference.is_none() {
                        pending = Some(i);
                        held.retain(|f| f.index == k);
                        held.push(current);
                    } else {
                        // The keyframe may have moved to the last good frame. A frame lost
                        // with texture enough to be searched for is the next island's seed.
                        if relocatable(records[i].skip.as_ref()) {
                            seed = Some(i);
                        }
                        held.retain(|f| Some(f.index) == key || Some(f.index) == last || Some(f.index) == seed);
                        if seed == Some(i) {
                            held.push(current);
                        }
                    }
                }
                Some(s) => {
                    if reference.is_none() {
                        if r != k {
                            // The pending frame is the reference: the candidate before it
                            // matched nothing.
                            records[k] = FrameRecord::skipped(k, SkipReason::NoSuccessor { reference: r }, records[k].evaluations);
                            records[r] = FrameRecord { evaluations: records[r].evaluations, ..FrameRecord::reference(r) };
                        }
                        reference = Some(r);
                        islands.start(r);
                        pending = None;
                    }
                    if seeded {
                        records[r] = FrameRecord { evaluations: records[r].evaluations, ..FrameRecord::reference(r) };
                        islands.start(r);
                        loops.restart_faint();
                    }
                    seed = None;
                    let r_held = match &relocated {
                        Some(keyframe) => keyframe,
                        None => find(r)?,
                    };
                    let r_pos = r_held.pos;
                    let island = records[r].island.ok_or(Error::Backend("internal: a reference on no island".into()))?;
                    let set = islands.set_of(island);
                    let newly_kept = keyframes.keep(r, r_pos, set, self.size);
                    let motion = Similarity { x: s.0, y: s.1, angle: reg.angle, scale: reg.scale };
                    let pos = r_pos.then(&motion);
                    let mut rec = FrameRecord::skipped(i, SkipReason::NoOverlap, evaluations);
                    rec = FrameRecord { position: Some(pos.shift()), angle: pos.angle, scale: pos.scale, reference: Some(r), island: Some(island), skip: None, ncc: reg.ncc, vectors_used: reg.vectors_used, confidence: reg.confidence, margin: reg.margin, phase_significance: reg.phase_significance, ..rec };
                    (rec.quality, rec.quality_grid) = match measured {
                        Some(q) => q,
                        None => self.quality::<T>(r_held, &current, &motion)?,
                    };
                    let (l, l_pos) = match last {
                        Some(l) => (l, find(l)?.pos),
                        None => (r, r_held.pos),
                    };
                    // Found again far from where the sweep was lost: its motion is unknown; a new
                    // island's is from its first frame.
                    vel = match (&relocated, seeded) {
                        (Some(_), _) => Velocity::default(),
                        (None, true) => Velocity::between(&r_pos, &pos, (i - r) as f64, self.size),
                        (None, false) => Velocity::between(&l_pos, &pos, (i - l) as f64, self.size),
                    };
                    key = Some(r);
                    last = Some(i);
                    held.retain(|f| f.index == r);
                    held.extend(relocated.take());
                    records.push(rec);
                    let current = Held { pos, ..current };
                    if p.close_loops {
                        // Another set's keyframes are in other coordinates.
                        let elsewhere: Vec<usize> = match islands.many() {
                            true => records.iter().filter(|x| islands.set_of_record(x).is_some_and(|s| s != set)).map(|x| x.index).collect(),
                            false => Vec::new(),
                        };
                        self.close_loop::<T>(frames, &current, (r, r_pos), &mut records, &mut loops, &|k| elsewhere.binary_search(&k).is_ok(), &mut buffer, &mut turn_buffer)?;
                        if self.faint_phase(&records[i]) {
                            self.link_faint::<T>(&current, r, &mut loops)?;
                        }
                    }
                    held.push(current);
                    // A new keyframe while islands stand apart: searched on the others.
                    if newly_kept && islands.many() {
                        let keyframe = held.iter().find(|f| f.index == r).ok_or(Error::Backend("internal: lost a reference frame".into()))?;
                        let (found, spent) = self.relocate::<T>(frames, keyframe, &mut keyframes, &|_, s| s == set, JOIN_CANDIDATES, &mut buffer, &mut turn_buffer)?;
                        records[i].evaluations += spent;
                        if let (Some(f), Some(m)) = (found.as_ref(), found.as_ref().and_then(|f| f.registration.motion())) {
                            // The pose that moves this set into the other's coordinates.
                            let t = f.keyframe.pos.then(&m).then(&r_pos.inverse());
                            let moved: Vec<bool> = records.iter().map(|x| islands.set_of_record(x) == Some(set)).collect();
                            loops.join(&|idx| moved[idx], &t);
                            islands.move_set(&mut records, set, &t);
                            keyframes.join(set, f.set, &t);
                            for h in held.iter_mut() {
                                h.pos = t.then(&h.pos);
                            }
                            records[r].joined = Some(f.keyframe.index);
                            islands.join(set, f.set);
                            // The window's plan and the velocity were in the old coordinates.
                            window = None;
                            if !t.is_translation() {
                                vel = Velocity::default();
                            }
                        }
                    }
                }
            }
            self.step(frames, progress, &records, &islands)?;
        }
        match (reference, key) {
            (Some(r), _) => {
                let anchor = if islands.many() { islands.panorama_set(&records).unwrap_or(r) } else { r };
                if p.close_loops {
                    solve_loops(&mut records, anchor, &loops, self.size)?;
                }
                islands.publish(&mut records);
                Ok((records, anchor))
            }
            (None, Some(k)) if frames.len() == 1 => Ok((records, k)),
            _ => Err(nothing_registered(&records)),
        }
    }

    /// Every attempt for frame `i` (reference index, predicted pair motion), in order: the planned
    /// pair `planned` where the window has one; then, once a pair has registered, the keyframe
    /// with the prediction from the last good frame's motion, the last good frame with it (if
    /// the keyframe is older), then the last good frame with the motion reversed, then with
    /// no motion; before that, the
    /// reference candidate, then the pending frame, unmoved. The keyframe `key` moves to the
    /// last good frame where the prediction leaves `limit` of it.
    #[allow(clippy::too_many_arguments)]
    fn attempts<'h>(
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

    /// Whether registration `reg` shows a zoom the scale-free model cannot follow, where the
    /// run is to fit the scale once it does.
    fn zoom_found(&self, reg: &PairRegistration) -> bool {
        self.p.detect_zoom && !self.p.register.fit_scale && self.p.register.motion == Motion::Similarity && evident_zoom(reg, &self.p.register).is_some()
    }

    /// After each frame: the source hears the records (as published, module `islands`),
    /// `progress` the count.
    fn step(&self, frames: &dyn FrameSource, progress: &mut dyn FnMut(usize) -> ControlFlow<()>, records: &[FrameRecord], islands: &Islands) -> Result<()> {
        if islands.many() {
            let mut published = records.to_vec();
            islands.publish(&mut published);
            frames.recorded(&published);
        } else {
            frames.recorded(records);
        }
        check_progress(progress, records.len())
    }
}

/// Frame `idx` among the frames a window's pairs may use: those held, the current one, and
/// those read ahead.
fn window_frame<'h, 'a>(held: &'h [Held<'a>], current: &'h Held<'a>, ahead: &'h VecDeque<(usize, core::result::Result<Held<'a>, SkipReason>)>, idx: usize) -> Option<&'h Held<'a>> {
    held.iter().chain([current]).chain(ahead.iter().filter_map(|(_, f)| f.as_ref().ok())).find(|f| f.index == idx)
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

/// How far (pixels, at the overlap's corners) the whole-overlap refinement may move a
/// phase-correlation seed (measured within 0.8 px on the fundus at contrast 0.3), and a
/// faint template registration.
const SEED_REACH: f64 = 3.0;
const FAINT_REACH: f64 = 2.0;
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

/// The unknowns of a whole-overlap refinement from `start` ([`refine_overlap`]): the
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
/// The keyframe changes when the predicted frame has turned more than this (radians) from
/// it: the overlap shrinks, and the frame turned back has more of its corners off the frame.
const KEYFRAME_TURN: f64 = 10.0 * core::f64::consts::PI / 180.0;

/// The centre of a frame of `size` (pixel coordinates).
pub(super) fn centre(size: (usize, usize)) -> (f64, f64) {
    ((size.0 as f64 - 1.0) / 2.0, (size.1 as f64 - 1.0) / 2.0)
}

/// How far the centre of a frame at pose `a` is from that of one at pose `b` (for
/// translations, the offset of their origins, to the bit).
pub(super) fn centre_offset(a: &Similarity, b: &Similarity, size: (usize, usize)) -> (f64, f64) {
    if a.is_translation() && b.is_translation() {
        return (a.x - b.x, a.y - b.y);
    }
    let c = centre(size);
    let (p, q) = (a.apply(c), b.apply(c));
    (p.0 - q.0, p.1 - q.1)
}

/// The shift a pair's search starts from for the predicted pair motion `motion`: where it
/// puts the frame's centre (its own shift for a translation).
pub(super) fn pair_prediction(motion: &Similarity, size: (usize, usize)) -> (f64, f64) {
    if motion.is_translation() {
        return motion.shift();
    }
    let c = centre(size);
    let m = motion.apply(c);
    (m.0 - c.0, m.1 - c.1)
}

/// Whether a frame predicted at `predicted` has left the keyframe at `key`: its centre moved
/// past `limit`, or it turned past [`KEYFRAME_TURN`].
pub(super) fn keyframe_left(predicted: &Similarity, key: &Similarity, limit: (f64, f64), size: (usize, usize)) -> bool {
    let d = centre_offset(predicted, key, size);
    libm::fabs(d.0) > limit.0 || libm::fabs(d.1) > limit.1 || libm::fabs(predicted.angle - key.angle) > KEYFRAME_TURN
}

/// The sequence's motion per frame at constant velocity: the move of a frame's centre, its
/// turn and its zoom.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Velocity {
    shift: (f64, f64),
    spin: f64,
    /// The log of the scale ratio per frame (0 without a fitted scale). The scale was once
    /// kept from the last frame: a probe advancing at 1 % per frame was then predicted a
    /// zoom behind at every pair (and after a gap of skipped frames several), and the
    /// zooming sweeps' worst scale errors were 2.5e-3 instead of 1.7e-3.
    zoom: f64,
}

impl Velocity {
    /// From pose `from` to pose `to`, `gap` frames later.
    fn between(from: &Similarity, to: &Similarity, gap: f64, size: (usize, usize)) -> Self {
        let d = centre_offset(to, from, size);
        // Exactly 0 for equal scales (ln 1 = 0), so an unscaled run predicts as before.
        let zoom = if to.scale == from.scale { 0.0 } else { libm::log(to.scale / from.scale) / gap };
        Velocity { shift: (d.0 / gap, d.1 / gap), spin: (to.angle - from.angle) / gap, zoom }
    }

    /// The same motion the other way.
    fn reversed(&self) -> Self {
        Velocity { shift: (-self.shift.0, -self.shift.1), spin: -self.spin, zoom: -self.zoom }
    }

    /// The pose `gap` frames after pose `from`, turning and zooming about the frame's centre.
    pub(super) fn predict(&self, from: &Similarity, gap: f64, size: (usize, usize)) -> Similarity {
        if self.spin == 0.0 && self.zoom == 0.0 && from.is_translation() {
            return Similarity::translation((from.x + self.shift.0 * gap, from.y + self.shift.1 * gap));
        }
        let c = centre(size);
        let at = from.apply(c);
        let scale = if self.zoom == 0.0 { from.scale } else { from.scale * libm::exp(self.zoom * gap) };
        let turned = Similarity { x: 0.0, y: 0.0, angle: from.angle + self.spin * gap, scale };
        let tc = turned.apply(c);
        Similarity { x: at.0 + self.shift.0 * gap - tc.0, y: at.1 + self.shift.1 * gap - tc.1, ..turned }
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
}

impl FrameRecord {
    /// The reference frame's record: position (0, 0).
    fn reference(index: usize) -> Self {
        FrameRecord { island: Some(index), ..FrameRecord::placed(index, (0.0, 0.0)) }
    }
    /// A frame registered at `at`, on no island yet.
    pub(super) fn placed(index: usize, at: (f64, f64)) -> Self {
        FrameRecord { index, position: Some(at), angle: 0.0, scale: 1.0, reference: None, skip: None, ncc: 1.0, vectors_used: 0, confidence: 1.0, margin: 0.0, evaluations: 0, quality: None, quality_grid: None, residual: None, loop_closure: None, phase_significance: None, island: None, joined: None, island_position: None }
    }
    fn skipped(index: usize, why: SkipReason, evaluations: u64) -> Self {
        FrameRecord { index, position: None, angle: 0.0, scale: 1.0, reference: None, skip: Some(why), ncc: 0.0, vectors_used: 0, confidence: 0.0, margin: 0.0, evaluations, quality: None, quality_grid: None, residual: None, loop_closure: None, phase_significance: None, island: None, joined: None, island_position: None }
    }
}

/// The error of a run in which no two frames registered, with the first reasons.
fn nothing_registered(records: &[FrameRecord]) -> Error {
    let mut why: Vec<String> = records.iter().filter_map(|r| r.skip.as_ref().map(|s| alloc::format!("frame {}: {}", r.index, s.describe()))).take(3).collect();
    if records.iter().filter(|r| r.skip.is_some()).count() > 3 {
        why.push("...".into());
    }
    Error::NothingRegistered { frames: records.len(), why: why.join("; ") }
}

/// Reports `done` frames; [`Error::Cancelled`] when the callback asks to stop.
fn check_progress(progress: &mut dyn FnMut(usize) -> ControlFlow<()>, done: usize) -> Result<()> {
    match progress(done) {
        ControlFlow::Continue(()) => Ok(()),
        ControlFlow::Break(()) => Err(Error::Cancelled),
    }
}

/// The attempt list is never empty; this keeps that invariant out of a panic.
fn unreachable_attempts<T>() -> Result<T> {
    Err(Error::Backend("internal: no registration attempt was made".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::{AnyImage, Image, Rgba8};
    use crate::stitch::{synth_sequence, SynthParams};
    use crate::stitch::texture;

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
        // All threads: the next frame's integral images are computed while a pair is
        // registered (the pipeline), and the templates of a pair are searched in parallel.
        let (mut frames, _) = sequence(24, 12);
        frames[7] = Image::filled(140, 110, 9).unwrap();
        let views = any(&frames);
        let p = StitchParams::default();
        let one = register_sequence(&views, &p, Parallelism::Sequential, &mut go_on).unwrap();
        let all = register_sequence(&views, &p, Parallelism::AllThreads, &mut go_on).unwrap();
        assert_eq!(one, all);
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
        // Each offer is a window: consecutive frames, at most WINDOW, stopping before the
        // unreadable frame; on this smooth footage every pair asked for was offered first,
        // to the bit, so a registrar that batches the window answers every request from it.
        for offer in offered.iter() {
            assert!(!offer.is_empty() && offer.len() <= WINDOW);
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
