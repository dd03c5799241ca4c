//! tessera: an image-processing engine with a portable `no_std` core, drop-in GPU
//! acceleration and an ImageJ plugin. This crate is the facade (everything of
//! `tessera-core` re-exported), the `--backend` parser, image I/O, the stereo file formats
//! and scores ([`stereo`]), and the `tessera` CLI.

pub use tessera_core::*;

pub mod io;
pub mod ome_tiff;
pub mod stereo;

pub use tessera_cuda::open_backend;

/// The `--backend` values (`cpu`, `cuda`, `auto`, as [`BackendChoice`] names them) for
/// clap, each with its help line.
pub fn backend_value_parser() -> impl clap::builder::TypedValueParser<Value = BackendChoice> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    let values = BackendChoice::ALL.map(|c| PossibleValue::new(c.name()).help(c.describe()));
    PossibleValuesParser::new(values).try_map(|name| name.parse::<BackendChoice>())
}
