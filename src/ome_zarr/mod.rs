//! A streaming writer of OME-Zarr (NGFF 0.5: Zarr v3, multiscale, chunked), the cloud-ready
//! sibling of the OME-TIFF writer, read by napari, `ome-zarr-py`, QuPath and Fiji's N5
//! tools. The image is one group whose `ome` attributes name the axes (`t`, `c`, `y`, `x`)
//! and the resolution levels; each level is an array `0`, `1`, ... of shape `(T, C, h, w)`
//! in chunks of `(1, 1, tile, tile)`, gzip-compressed, and chunks that hold only zeros
//! (the canvas outside every frame) are not stored.
//!
//! The image arrives as horizontal strips, plane after plane (channel by channel within each
//! time point), as the OME-TIFF writer takes them, and the same [`crate::pyramid::Pyramid`] halves each row
//! of chunks down the levels, so memory is about two chunk rows of the full width. The
//! chunks of a row are compressed and written on every core. 8-bit RGB (from `Rgba8`
//! strips, alpha dropped) becomes three channels, red, green and blue, as NGFF has no
//! interleaved colour.
//!
//! The store is written into a hidden folder beside its target and renamed into place by
//! [`OmeZarrWriter::finish`]: a run that fails leaves the previous store (or nothing).
//!
//! The writer needs the `ome-zarr` feature (on by default); without it (the fuzz targets'
//! build) a store is an error that says so.

use std::path::Path;

/// Whether `path` asks for an OME-Zarr store (a name ending `.zarr`, any case, as
/// `mosaic.ome.zarr`).
pub fn is_ome_zarr(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n.to_string_lossy().to_ascii_lowercase().ends_with(".zarr"))
}

/// What a finished store holds.
#[derive(Clone, Debug, PartialEq)]
pub struct OmeZarrSummary {
    /// Every level's size, full resolution first.
    pub levels: Vec<(usize, usize)>,
    /// Chunks stored (all-zero chunks are left out), over every level and plane.
    pub chunks: usize,
    /// Bytes of the stored chunks (compressed) and metadata.
    pub bytes: u64,
}

#[cfg(feature = "ome-zarr")]
mod store;
#[cfg(feature = "ome-zarr")]
pub use store::OmeZarrWriter;
#[cfg(not(feature = "ome-zarr"))]
pub use unavailable::OmeZarrWriter;

/// The writer of a build without the `ome-zarr` feature: it cannot be created.
#[cfg(not(feature = "ome-zarr"))]
mod unavailable {
    use super::OmeZarrSummary;
    use crate::ome_tiff::{OmeTiffOptions, PixelKind};
    use anyhow::{bail, Result};
    use std::path::Path;
    use tessera_core::AnyView;

    /// Never made: [`OmeZarrWriter::create`] is an error.
    pub enum OmeZarrWriter {}

    impl OmeZarrWriter {
        /// Errors: always (this build has no OME-Zarr writer).
        pub fn create(path: &Path, _size: (usize, usize), _kind: PixelKind, _opts: &OmeTiffOptions) -> Result<Self> {
            bail!("{}: this build of tessera has no OME-Zarr writer (the ome-zarr feature)", path.display())
        }
        pub fn write_strip(&mut self, _strip: &AnyView<'_>) -> Result<()> {
            match *self {}
        }
        pub fn finish(self) -> Result<OmeZarrSummary> {
            match self {}
        }
    }
}
