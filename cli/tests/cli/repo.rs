//! The repository's own files for the program's tests, which run from `cli/` (their
//! `CARGO_MANIFEST_DIR`): the shared `tests/common::footage::photo` looks for the
//! photographs beside the package, this beside the repository's root.

use std::path::{Path, PathBuf};
use tessera::Image;

/// The repository's root, above this package.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("cli/ is in the repository")
}

/// A photograph of `assets/photos` (`camera`, `gravel`, ...) or `retina` (`assets/retina.jpg`)
/// as 8-bit grey, in f32, as `common::footage::photo` reads it.
pub fn photo(name: &str) -> Image<f32> {
    let path: PathBuf = match name {
        "retina" => root().join("assets/retina.jpg"),
        _ => root().join("assets/photos").join(format!("{name}.png")),
    };
    let img = image::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).to_luma8();
    let (w, h) = img.dimensions();
    Image::from_vec(w as usize, h as usize, img.into_raw().into_iter().map(f32::from).collect()).unwrap()
}
