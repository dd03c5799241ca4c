//! The frames a run reads and holds: where they come from ([`FrameSource`]), the grey view
//! registration runs on, and a frame held with the copies its pairs share.

use super::faint;
use super::quality::QualitySample;
use super::recycled::{Kept, Spares};
use super::refine::overlap_smoothed_into;
use super::register::{gray, luma_storage, Gray, SkipReason};
use super::sequence::{FrameRecord, Run};
use super::settle::RefinedLink;
use super::similarity::Similarity;
use super::synth::SynthPixel;
use crate::error::{Error, Result};
use crate::filter::{BoxPixel, GaussLane};
use crate::image::{AnyImage, AnyView, Image, ImageView};
use crate::ncc::NccSample;
use crate::parallel::Parallelism;
use alloc::string::String;
use alloc::sync::Arc;

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
    /// still change, and with [`StitchParams::close_loops`](super::StitchParams::close_loops) the positions are the chained
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

/// The grey type registration runs on, and its view of a frame's [`Gray`].
pub(super) trait GrayType: NccSample + QualitySample + SynthPixel + BoxPixel<Lane: GaussLane> {
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
    /// The frame as the whole-overlap refinement sees it ([`overlap_smoothed_into`]), made the
    /// first time a pair needs it and kept for the others the frame is in; its buffer is
    /// recycled when the frame departs ([`Held::recycle`]).
    smoothed: Kept<Image<f32>>,
    /// The frame band-passed for faint pairs ([`faint::band_passed_into`]), made and kept likewise.
    band: Kept<Image<f32>>,
    /// How a registered frame's pose was found: the frame it registered against and the
    /// pair motion.
    pub(super) link: Option<Link>,
}

/// A registered frame's link: the frame it registered against, the pair motion, and, where
/// its window's parallel stage refined the link ahead for the frame's turn as keyframe
/// (module `window`), that refinement.
#[derive(Clone, Copy, Debug)]
pub(super) struct Link {
    pub(super) reference: usize,
    pub(super) motion: Similarity,
    pub(super) refined: Option<RefinedLink>,
}

impl Held<'_> {
    /// The same frame at pose `pos`.
    pub(super) fn placed_at(self, pos: Similarity) -> Self {
        Held { pos, ..self }
    }

    /// The same frame, registered by `link`.
    pub(super) fn linked(self, link: Link) -> Self {
        Held { link: Some(link), ..self }
    }

    pub(super) fn view<T: GrayType>(&self) -> Result<ImageView<'_, T>> {
        let v = self.frame.view().map_err(|why| Error::InvalidParameter { name: "frames", reason: why })?;
        let g = gray(&v, &self.luma)?;
        T::typed(g).ok_or(Error::UnsupportedType { op: "stitch", types: "frames of differing pixel types" })
    }

    /// The frame smoothed for the whole-overlap refinement, into a buffer from `spares`
    /// where one fits.
    pub(super) fn smoothed<T: GrayType>(&self, par: Parallelism, spares: &Spares<Image<f32>>) -> Result<&Image<f32>> {
        self.smoothed.get_or_try_make(spares, || {
            let v = self.view::<T>()?;
            let mut s = spares.frame(v.size())?;
            overlap_smoothed_into(v, s.view_mut(), par)?;
            Ok(s)
        })
    }

    /// Whether the frame's smoothed copy is made already.
    pub(super) fn is_smoothed(&self) -> bool {
        self.smoothed.get().is_some()
    }

    /// The frame band-passed for faint pairs, into a buffer from `spares` where one fits
    /// (and with another as its scratch).
    pub(super) fn band<T: GrayType>(&self, par: Parallelism, spares: &Spares<Image<f32>>) -> Result<&Image<f32>> {
        self.band.get_or_try_make(spares, || {
            let v = self.view::<T>()?;
            let (mut b, mut wide) = (spares.frame(v.size())?, spares.frame(v.size())?);
            let passed = faint::band_passed_into(v, b.view_mut(), wide.view_mut(), par);
            spares.put(wide);
            passed.map(|()| b)
        })
    }

    /// Gives the frame's copies to `spares`: it departs.
    pub(super) fn recycle(&mut self, spares: &Spares<Image<f32>>) {
        for copy in [self.smoothed.take(), self.band.take()].into_iter().flatten() {
            spares.put(copy);
        }
    }
}

impl<'a> Run<'a> {
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
        Ok(Held { index: i, frame, luma, pos: Similarity::IDENTITY, smoothed: Kept::default(), band: Kept::default(), link: None })
    }
}
