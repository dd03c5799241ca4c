//! What a run asks of a pair registrar other than the CPU's (a GPU registering a window's
//! pairs in one launch, summing the quality measures of a batch in another).

use super::quality::QualityPlan;
use super::register::{Gray, PairRegistration, RegisterParams};
use crate::error::Result;
use alloc::vec::Vec;

/// Registers pairs of grey frames (of one type and size) for a stitching run: the seam
/// through which another backend (the GPU) runs the pairs of [`stitch_frames_with`](super::stitch_frames_with), the
/// sequence logic (attempts, keyframes, skips, reference) staying the core's. It must
/// answer as [`register_pair`](super::register_pair) would.
///
/// Frames come with their index in the [`FrameSource`](super::FrameSource): within one run an index always
/// names the same pixels, so a registrar may keep a copy of a frame (on its device) by
/// index, and answer a pair from work it did earlier ([`PairRegistrar::speculate`]).
pub trait PairRegistrar: Sync {
    fn register(&self, pair: &PairRequest<'_>, p: &RegisterParams) -> Result<PairRegistration>;
    /// The planned pairs of the run's next window (up to [`WINDOW_MAX`](super::WINDOW_MAX) of them, in frame
    /// order), called when the window opens: `pairs[0]` is the very next
    /// [`register`](PairRegistrar::register) call, `pairs[j]` the first attempt of the frame
    /// `j` further on if the frames before it register as planned. A registrar may register
    /// them all at once and answer a later `register` call from them when it is the same
    /// pair (same indices, parameters and prediction, all that [`register_pair`](super::register_pair) depends
    /// on); anything else it must register afresh. The default does nothing.
    fn speculate(&self, _pairs: &[PairRequest<'_>], _p: &RegisterParams) -> Result<()> {
        Ok(())
    }
    /// The quality measures of registered pairs (a window's at once): for each request, its
    /// plan's [`measures`](QualityPlan::measures) of the sums of its regions, the moving
    /// frame as it is (a pair that turns is measured on the host). `None`, the default and
    /// the answer for f32 frames: the run measures them on the host.
    fn quality_measures(&self, _requests: &[QualityRequest<'_>]) -> Option<Result<Vec<(Option<f64>, Option<f64>)>>> {
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
