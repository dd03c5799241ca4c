//! tessera: an image-processing engine with a portable `no_std` core, drop-in GPU
//! acceleration and an ImageJ plugin. This crate is the facade (everything of
//! `tessera-core` re-exported), the `--backend` parser, image I/O, the stereo file formats
//! and scores ([`stereo`]), and the `tessera` CLI.

pub use tessera_core::*;

pub mod io;
pub mod ome_tiff;
pub mod stereo;

// The command line's modules are written against the `tessera` facade; this name lets them
// compile inside it.
extern crate self as tessera;

/// The `tessera` command line's subcommands (arguments, runs, the stitching report and frame
/// sources). In the library so that the other faces reuse them instead of a copy: the Python
/// package (`python/`) returns the stitching report of [`cli::stitch::report`], the CLI's
/// JSON contract, and reads frames through [`cli::stitch::frame_source`].
#[doc(hidden)]
#[path = "cli/mod.rs"]
pub mod cli;

pub use tessera_cuda::open_backend;

/// The `--backend` values (`cpu`, `cuda`, `auto`, as [`BackendChoice`] names them) for
/// clap, each with its help line.
pub fn backend_value_parser() -> impl clap::builder::TypedValueParser<Value = BackendChoice> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    let values = BackendChoice::ALL.map(|c| PossibleValue::new(c.name()).help(c.describe()));
    PossibleValuesParser::new(values).try_map(|name| name.parse::<BackendChoice>())
}
