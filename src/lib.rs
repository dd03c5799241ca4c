//! tessera: an image-processing engine with a portable `no_std` core, drop-in GPU
//! acceleration and an ImageJ plugin. This crate is the library every face stands on (the
//! `tessera` command line in `cli/`, the Python package, the JNI bridge): the facade
//! (everything of `tessera-core` re-exported, with the backend opener), image I/O
//! ([`io`]), frame sources ([`frames`]), the OME-TIFF and OME-Zarr writers ([`ome_tiff`],
//! [`ome_zarr`], over one tile [`pyramid`]), the
//! large-composite driver ([`large`]), tile-grid runs ([`grid`]), the stitching report ([`report`]), the faces'
//! options and their one conversion into parameters ([`options`]), and the stereo file
//! formats and scores ([`stereo`]), and DLPack, the ABI through which array libraries lend
//! memory ([`dlpack`]). No command-line crate here.

pub use tessera_core::*;
/// The CUDA backend's own API beyond [`Backend`]: images that stay on the device
/// ([`cuda::DeviceImage`]) and the operations on them.
#[cfg(feature = "cuda")]
pub use tessera_cuda as cuda;

pub mod dlpack;
pub mod flatfield;
pub mod frames;
pub mod grid;
pub mod io;
pub mod large;
pub mod ome_tiff;
pub mod ome_zarr;
pub mod options;
pub mod pyramid;
pub mod report;
pub mod tile_config;
pub mod tile_names;
pub mod write_behind;
pub mod stereo;

/// Opens the backend `choice` names: the CPU backend with `parallelism`, or the CUDA
/// backend ([`tessera_cuda::open`]). `auto` without a usable GPU gives the CPU backend and
/// the reason in [`Opened::fallback`]; `cuda` without one is
/// [`Error::BackendUnavailable`]. Every face opens its backend here; a new backend is a
/// [`BackendChoice`] and a line below. The CPU's worker threads are started here
/// ([`Parallelism::start`]), before any image takes the memory they need.
pub fn open_backend(choice: BackendChoice, parallelism: Parallelism) -> Result<Opened> {
    parallelism.start()?;
    choice.resolve(|| Box::new(CpuBackend::new(parallelism)), open_cuda)
}

#[cfg(feature = "cuda")]
use tessera_cuda::open as open_cuda;

#[cfg(not(feature = "cuda"))]
fn open_cuda() -> Result<Box<dyn Backend>> {
    Err(Error::BackendUnavailable("this build of tessera has no CUDA backend (its `cuda` feature is off)".into()))
}

/// Without the `cuda` feature (`cargo test -p tessera --no-default-features --lib`).
#[cfg(all(test, not(feature = "cuda")))]
mod without_cuda {
    use super::*;

    #[test]
    fn cuda_is_refused_with_its_reason_and_auto_falls_back_to_the_cpu() {
        let Err(Error::BackendUnavailable(why)) = open_backend(BackendChoice::Cuda, Parallelism::Sequential) else {
            panic!("a build without the CUDA backend opened one")
        };
        assert!(why.contains("`cuda` feature"), "{why}");
        let opened = open_backend(BackendChoice::Auto, Parallelism::Sequential).unwrap();
        assert!(opened.fallback.is_some_and(|f| f.contains("`cuda` feature")));
        assert_eq!(opened.backend.name(), CpuBackend::new(Parallelism::Sequential).name());
    }
}
