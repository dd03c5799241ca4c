//! Panorama stitching of image sequences: registration of frame pairs by NCC template
//! matching with logarithmic search ([`register`]), chaining a sequence and the stitching
//! pipeline ([`sequence`]), compositing ([`composite`]), quality measures ([`quality`]),
//! and a synthetic sequence generator with ground truth ([`synth`]).
//!
//! Convention for positions and shifts throughout: frame i's pixel `(u, v)` shows what
//! frame 0 (or, for a pair's shift, the reference) shows at `(u + x, v + y)`.

pub mod composite;
pub mod quality;
pub mod register;
pub mod sequence;
pub mod synth;

pub use composite::{composite, Blend, Canvas, MAX_CANVAS};
pub use quality::{grid_ncc, overlap_ncc};
pub use register::{register_pair, register_pair_any, MotionVector, PairRegistration, RegisterParams, SearchMethod, SkipReason};
pub use sequence::{check_frames, register_sequence, stitch, FrameRecord, Panorama, StitchParams};
pub use synth::{synth_sequence, SplitMix64, SynthParams, SynthPixel, SynthSequence};
