//! Panorama stitching of image sequences: registration of frame pairs by NCC template
//! matching with logarithmic search, chaining into a sequence, compositing, quality
//! measures, and a synthetic sequence generator with ground truth.

pub mod synth;

pub use synth::{synth_sequence, SplitMix64, SynthParams, SynthPixel, SynthSequence};
