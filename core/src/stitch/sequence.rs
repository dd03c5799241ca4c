//! Registration of a whole sequence and the stitching pipeline.
//!
//! Each frame is registered against a reference frame, the search starting at the shift
//! predicted from the last measured motion (constant velocity), and its position in frame-0
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
//! good frame (if the keyframe is older) and with a zero prediction (if the motion model
//! was wrong): nothing is lost silently and one bad frame never aborts the run.

use super::composite::{composite, Blend, Canvas};
use super::quality::{grid_ncc, overlap_ncc};
use super::register::{gray, luma_storage, register_pair, Gray, RegisterParams, SkipReason};
use crate::error::{require_finite, Error, Result};
use crate::image::{AnyView, ImageView};
use crate::ncc::{Integral, NccSample, SearchFrame};
use crate::parallel::Parallelism;
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
}

impl Default for StitchParams {
    fn default() -> Self {
        StitchParams { register: RegisterParams::default(), blend: Blend::Overwrite, keyframe_shift: 0.25, quality: true }
    }
}

impl StitchParams {
    pub fn validate(&self) -> Result<()> {
        self.register.validate()?;
        require_finite("keyframe shift", self.keyframe_shift)?;
        if !(0.0..=0.75).contains(&self.keyframe_shift) {
            return Err(Error::InvalidFloat { name: "keyframe shift", value: self.keyframe_shift, expected: "within [0, 0.75]" });
        }
        Ok(())
    }
}

/// What happened to one frame.
#[derive(Clone, Debug, PartialEq)]
pub struct FrameRecord {
    pub index: usize,
    /// Position in frame-0 coordinates (frame i's pixel (u, v) shows what frame 0 shows at
    /// (u + x, v + y)); `None` for a skipped frame.
    pub position: Option<(f64, f64)>,
    /// The frame it was registered against (`None` for frame 0 and skipped frames).
    pub reference: Option<usize>,
    /// Why it was skipped (`None` when registered).
    pub skip: Option<SkipReason>,
    /// Mean coefficient of the vectors used (1 for frame 0).
    pub ncc: f64,
    pub vectors_used: usize,
    pub confidence: f64,
    /// NCC evaluations spent on this frame (all attempts).
    pub evaluations: u64,
    /// [`overlap_ncc`] with its reference, when computed.
    pub quality: Option<f64>,
    /// [`grid_ncc`] (5 x 5 templates of side rsz) with its reference, when computed.
    pub quality_grid: Option<f64>,
}

impl FrameRecord {
    pub fn is_ok(&self) -> bool {
        self.position.is_some()
    }
}

/// A stitched sequence: the canvas and every frame's record.
#[derive(Clone, Debug, PartialEq)]
pub struct Panorama {
    pub canvas: Canvas,
    pub frames: Vec<FrameRecord>,
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

/// Registers every frame (module doc); `progress(done)` is called after each frame with the
/// number of frames done (1 after frame 0, ..., `frames.len()` after the last), and the run
/// stops with [`Error::Cancelled`] as soon as it returns `ControlFlow::Break(())` (no frame
/// after `done` is registered). Errors: bad parameters, an empty list, frames of differing
/// size or type (naming the frame), cancellation; a frame that cannot be registered is not
/// an error.
pub fn register_sequence(
    frames: &[AnyView<'_>],
    p: &StitchParams,
    par: Parallelism,
    progress: &mut dyn FnMut(usize) -> ControlFlow<()>,
) -> Result<Vec<FrameRecord>> {
    p.validate()?;
    check_frames(frames)?;
    let storage: Vec<_> = frames.iter().map(luma_storage).collect();
    let grays = frames.iter().zip(&storage).map(|(f, s)| gray(f, s)).collect::<Result<Vec<_>>>()?;
    macro_rules! typed {
        ($var:ident) => {{
            let views: Vec<_> = grays.iter().filter_map(|g| if let Gray::$var(v) = g { Some(*v) } else { None }).collect();
            run(&views, p, par, progress)
        }};
    }
    match grays[0] {
        Gray::U8(_) => typed!(U8),
        Gray::U16(_) => typed!(U16),
        Gray::F32(_) => typed!(F32),
    }
}

fn run<T: NccSample + Into<f64>>(
    views: &[ImageView<'_, T>],
    p: &StitchParams,
    par: Parallelism,
    progress: &mut dyn FnMut(usize) -> ControlFlow<()>,
) -> Result<Vec<FrameRecord>> {
    let (w, h) = views[0].size();
    let mut records = Vec::with_capacity(views.len());
    records.push(FrameRecord {
        index: 0,
        position: Some((0.0, 0.0)),
        reference: None,
        skip: None,
        ncc: 1.0,
        vectors_used: 0,
        confidence: 1.0,
        evaluations: 0,
        quality: None,
        quality_grid: None,
    });
    check_progress(progress, 1)?;
    let limit = (p.keyframe_shift * w as f64, p.keyframe_shift * h as f64);
    let mut buffer = Integral::default();
    // Keyframe index and position; last good frame index and position; velocity per frame.
    let (mut key, mut key_pos) = (0usize, (0.0, 0.0));
    let (mut last, mut last_pos) = (0usize, (0.0f64, 0.0f64));
    let mut vel = (0.0, 0.0);
    for i in 1..views.len() {
        let moving = SearchFrame::with_buffer(views[i], buffer)?;
        let gap = (i - last) as f64;
        let predicted = (last_pos.0 + vel.0 * gap, last_pos.1 + vel.1 * gap);
        if libm::fabs(predicted.0 - key_pos.0) > limit.0 || libm::fabs(predicted.1 - key_pos.1) > limit.1 {
            (key, key_pos) = (last, last_pos);
        }
        // Attempts: keyframe with prediction, last good frame with prediction (if the
        // keyframe is older), then the last good frame with no motion.
        let mut attempts = Vec::with_capacity(3);
        attempts.push((key, key_pos, predicted));
        if key != last {
            attempts.push((last, last_pos, predicted));
        }
        if predicted != last_pos {
            attempts.push((last, last_pos, last_pos));
        }
        let mut evaluations = 0;
        let mut outcome = None;
        for &(r, r_pos, pred) in &attempts {
            let reg = register_pair(views[r], &moving, &p.register, (pred.0 - r_pos.0, pred.1 - r_pos.1), par)?;
            evaluations += reg.evaluations;
            let done = reg.shift.is_some();
            outcome = Some((r, r_pos, reg));
            if done {
                break;
            }
        }
        buffer = moving.into_integral();
        let Some((r, r_pos, reg)) = outcome else { unreachable_attempts()? };
        let mut rec = FrameRecord {
            index: i,
            position: None,
            reference: None,
            skip: reg.skip.clone(),
            ncc: reg.ncc,
            vectors_used: reg.vectors_used,
            confidence: reg.confidence,
            evaluations,
            quality: None,
            quality_grid: None,
        };
        if let Some(s) = reg.shift {
            let pos = (r_pos.0 + s.0, r_pos.1 + s.1);
            rec.position = Some(pos);
            rec.reference = Some(r);
            if p.quality {
                rec.quality = overlap_ncc(views[r], views[i], s, par)?;
                rec.quality_grid = grid_ncc(views[r], views[i], s, p.register.rsz)?;
            }
            let gap = (i - last) as f64;
            vel = ((pos.0 - last_pos.0) / gap, (pos.1 - last_pos.1) / gap);
            if r != key {
                (key, key_pos) = (r, r_pos);
            }
            (last, last_pos) = (i, pos);
        }
        records.push(rec);
        check_progress(progress, i + 1)?;
    }
    Ok(records)
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

/// The whole pipeline: [`register_sequence`], then [`composite`] of the registered
/// frames. Progress and cancellation as `register_sequence` (a run cancelled at any frame,
/// the last included, composites nothing). Errors as `register_sequence`; when no frame
/// but frame 0 registers, the panorama is frame 0 alone (the records say why).
pub fn stitch(
    frames: &[AnyView<'_>],
    p: &StitchParams,
    par: Parallelism,
    progress: &mut dyn FnMut(usize) -> ControlFlow<()>,
) -> Result<Panorama> {
    let records = register_sequence(frames, p, par, progress)?;
    let positions: Vec<_> = records.iter().map(|r| r.position).collect();
    let canvas = composite(frames, &positions, p.blend)?;
    Ok(Panorama { canvas, frames: records })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::{AnyImage, Image, Rgba8};
    use crate::stitch::synth::{synth_sequence, SynthParams};
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
    fn single_frame_and_flat_first_frame() {
        let (frames, _) = sequence(2, 1);
        let pano = stitch(&any(&frames[..1]), &StitchParams::default(), Parallelism::Sequential, &mut go_on).unwrap();
        assert_eq!(pano.frames.len(), 1);
        assert_eq!(pano.canvas.origin, (0, 0));
        assert_eq!(pano.canvas.image, AnyImage::U8(frames[0].clone()));
        // Nothing registers against a flat frame 0: the panorama is frame 0 alone.
        let flat = [Image::<u8>::filled(140, 110, 7).unwrap(), frames[1].clone()];
        let pano = stitch(&any(&flat), &StitchParams::default(), Parallelism::Sequential, &mut go_on).unwrap();
        assert_eq!(pano.frames[1].skip, Some(SkipReason::NoTexture));
        assert_eq!(pano.canvas.image, AnyImage::U8(flat[0].clone()));
        assert_eq!(pano.mean_ncc(), None);
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
        let other = Image::<u8>::filled(141, 110, 1).unwrap();
        let mixed = [AnyView::U8(frames[0].view()), AnyView::U8(frames[1].view()), AnyView::U8(other.view())];
        let e = stitch(&mixed, &StitchParams::default(), s, &mut go_on).unwrap_err();
        assert!(alloc::format!("{e}").contains("frame 2"), "{e}");
        let f = frames[1].map(|v| v as f32);
        let mixed = [AnyView::U8(frames[0].view()), AnyView::F32(f.view())];
        let e = stitch(&mixed, &StitchParams::default(), s, &mut go_on).unwrap_err();
        assert!(alloc::format!("{e}").contains("frame 1"), "{e}");
        for ks in [-0.1, 0.8, f64::NAN] {
            assert!(stitch(&any(&frames), &StitchParams { keyframe_shift: ks, ..Default::default() }, s, &mut go_on).is_err());
        }
        let p = StitchParams { register: RegisterParams { npts: 0, ..Default::default() }, ..Default::default() };
        assert!(stitch(&any(&frames), &p, s, &mut go_on).is_err());
    }
}
