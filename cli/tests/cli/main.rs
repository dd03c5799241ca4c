//! The `tessera` program's integration tests, one module per subject, in one test binary:
//! a binary per subject would compile and link the shared helpers (`tests/common`) and the
//! library's generic code once each.
//!
//! One subject: `cargo test --release -p tessera-cli --test cli -- stitch::`.

#[path = "../../../tests/common/mod.rs"]
mod common;
mod repo;

mod filters;
mod follow;
mod gauss;
mod grid;
mod doc_links;
mod limits;
mod ome_tiff;
mod readme_commands;
mod stereo;
mod stitch;
mod variance;
