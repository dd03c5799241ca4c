//! One module per group of subcommands, plus the arguments they share.

pub mod common;
pub mod contrast;
pub mod filters;
pub mod follow;
pub mod frames;
pub mod glare;
pub mod grid;
pub mod large;
pub mod variance;
pub mod stitch;
pub mod stereo;
