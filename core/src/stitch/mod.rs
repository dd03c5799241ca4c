//! Panorama stitching of image sequences and tile grids: registration of frame pairs by NCC
//! template matching with logarithmic search ([`register_pair`]), chaining a sequence and
//! the stitching pipeline ([`stitch_frames`]), tile grids ([`register_tiles`]), compositing
//! ([`composite`]), quality measures ([`overlap_ncc`]), and a synthetic sequence generator
//! with ground truth ([`synth_sequence`]). Each item has one path, `stitch::Name`; the
//! files behind it are private.
//!
//! Convention for positions and shifts throughout: frame i's pixel `(u, v)` shows what
//! frame 0 (or, for a pair's shift, the reference) shows at `(u + x, v + y)`.

pub(crate) mod accept;
pub(crate) mod chain;
pub mod coarse;
pub(crate) mod composite;
pub(crate) mod faint;
pub(crate) mod grid;
pub(crate) mod islands;
pub(crate) mod quality;
pub(crate) mod recycled;
pub(crate) mod loops;
pub(crate) mod measure;
pub(crate) mod prediction;
pub(crate) mod moments;
pub(crate) mod refine;
pub(crate) mod registrar;
pub(crate) mod solve;
pub(crate) mod register;
pub(crate) mod relocate;
pub(crate) mod sequence;
pub(crate) mod settle;
pub(crate) mod similarity;
pub(crate) mod source;
pub(crate) mod stage_times;
pub(crate) mod synth;
pub(crate) mod textured;
pub(crate) mod vote;
pub(crate) mod warp;
pub(crate) mod window;

pub use accept::{spaced_null_sites, Acceptance, NullPeak, NullSet, NULL_SAMPLES};
pub use coarse::{weighted_candidates, Peak, Spectrum, FAINT_BAND, SIGNIFICANT_PEAK};
pub use grid::{grid_positions, neighbours, majority_shape, register_tiles, seam_squares, seam_steps, SeamSquare, SEAM_BLOCK, tile_shape, Corner, GridParams, Mosaic, StageModel, TileOrder, TilePair, TileRecord, TileShape, Verification, DEFAULT_OVERLAP};
pub use composite::{composite, Blend, Canvas, Compositor, Pasting, Plan, MAX_CANVAS};
pub use moments::Moments;
pub use quality::{grid_ncc, overlap_ncc, overlap_null_ncc, QualityPlan, QualitySample, Region};
pub use solve::{solve, Constraint, Solution};
pub use refine::{ShiftRefinement, REFINED_TEMPLATES, REFINE_ITERATIONS};
pub use register::{pair_sites, plan_pair, PairSites, register_pair, register_pair_any, register_pair_turned, register_pair_with, gray, luma_storage, Gray, Motion, MotionVector, PairPlan, PairRegistration, RegisterParams, SearchMethod, SkipReason, TemplateSearch, Concluded, Counting, Unrefined};
pub use registrar::{PairRegistrar, PairRequest, QualityRequest};
pub use sequence::{check_frames, keyframes, register_frames, register_frames_timed, register_frames_with, register_sequence, stitch, stitch_frames, stitch_frames_into, stitch_frames_with, FrameRecord, NewCanvas, Panorama, StitchParams};
pub use source::{Frame, FrameSource, InMemory};
pub use similarity::{Bounds, ConsensusCount, Correspondence, Hypothesis, Similarity};
pub use stage_times::StageTimes;
pub use warp::warp_sized;
pub use window::{WINDOW, WINDOW_MAX};
pub use synth::{keys, synth_plan, synth_sequence, SplitMix64, SynthParams, SynthPixel, SynthPlan, SynthSequence};

/// Test textures: uniform noise smoothed by two passes of a 5 x 5 mean (a correlation
/// length of a few pixels, like natural images at frame scale), scaled to 0..=255.
#[cfg(test)]
pub(crate) fn texture(w: usize, h: usize, seed: u64) -> crate::image::Image<f32> {
    use crate::filter::{mean_filter, BoxParams};
    let mut rng = SplitMix64::new(seed);
    let mut a = crate::image::Image::from_fn(w, h, |_, _| rng.uniform() as f32 * 255.0).unwrap();
    for _ in 0..2 {
        let mut b = crate::image::Image::<f32>::new(w, h).unwrap();
        mean_filter(a.view(), b.view_mut(), &BoxParams::square(5, crate::Border::Reflect101), crate::Parallelism::Sequential).unwrap();
        a = b;
    }
    let (lo, hi) = a.as_slice().iter().fold((f32::MAX, f32::MIN), |(l, h), &v| (l.min(v), h.max(v)));
    a.map(|v| (v - lo) / (hi - lo) * 255.0)
}
