//! Stereo for the command line, the benchmarks and the tests: the core's semi-global
//! matching ([`tessera_core::stereo`], re-exported whole) and, beside it, what is not an
//! algorithm of the `no_std` core: Middlebury scoring against ground truth ([`eval`]),
//! the PFM file format ([`pfm`]) and the colour map for looking at a map ([`colormap`]).

pub use tessera_core::stereo::*;

pub mod colormap;
pub mod eval;
pub mod pfm;

pub use eval::{evaluate, StereoScores};
