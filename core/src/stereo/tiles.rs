//! The tiling plan, made before any matching: the pieces the driver ([`super::sgm`]) runs
//! the stages on, and the stitching of their results. It bounds the memory: the
//! `W x H x D` summed volume (u16) is the working set (the costs are computed a row at a
//! time inside the aggregation sweeps and never held as a volume), so large images are
//! processed in pieces.
//!
//! * [`Tiling::Auto`] (default): the whole image at once when its working set fits
//!   `max_bytes`, otherwise horizontal bands of full width whose working set fits, each
//!   extended by `overlap` rows above and below so that the vertical and diagonal paths
//!   have run in before the band's own rows; only the band's own rows are kept. With the
//!   default 1 GiB, 4000 x 3000 x 256 runs in 7 bands of about 440 rows instead of one
//!   6 GB working set.
//! * [`Tiling::Tiles`]: the original CUDA port's overlapping tiles of `width x height`,
//!   extended by `overlap` on every side and, on the left, by `D - 1` more columns so each
//!   left pixel of the tile has its right candidates inside the tile's computation.
//!
//! Costs are computed from the whole images (the clamp at `x - d < 0` is the image's, not
//! the tile's), so a tile that covers the image gives exactly the untiled result; inside
//! the image, a piece differs only in that its paths start at the piece's edges.

use super::aggregate;
use crate::error::{Error, Result};
use crate::image::{ImageView, ImageViewMut, Pixel};
use alloc::format;
use alloc::vec::Vec;

/// A rectangle of pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rect {
    pub x: usize,
    pub y: usize,
    pub width: usize,
    pub height: usize,
}

/// How the image is cut to bound the memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tiling {
    /// Whole image if its working set is at most `max_bytes`, else horizontal bands.
    Auto { max_bytes: usize, overlap: usize },
    /// Overlapping tiles of `width x height` pixels (the original's tile mode).
    Tiles { width: usize, height: usize, overlap: usize },
}

/// The smallest side of a tile of [`Tiling::Tiles`] that [`StereoParams`](super::StereoParams)
/// accept: every tile carries its overlap and D - 1 columns of context, so tiles much
/// smaller cost many times the image (1x1 tiles of a 450x375 pair: a minute instead of
/// milliseconds) for no gain.
pub const MIN_TILE: usize = 16;

impl Default for Tiling {
    fn default() -> Self {
        Tiling::Auto { max_bytes: 1 << 30, overlap: 32 }
    }
}

impl Tiling {
    pub fn validate(&self) -> Result<()> {
        match *self {
            Tiling::Auto { max_bytes, .. } => {
                if max_bytes == 0 {
                    return Err(Error::InvalidParameter { name: "max_bytes", reason: "must be > 0".into() });
                }
            }
            Tiling::Tiles { width, height, .. } => {
                if width == 0 || height == 0 {
                    return Err(Error::ZeroSize { width, height });
                }
            }
        }
        Ok(())
    }
}

/// One piece: the pixels it delivers (`core`) inside the pixels it computes (`ext`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tile {
    pub core: Rect,
    pub ext: Rect,
}

impl Tile {
    /// The core in the coordinates of the extended region (where a piece's results live).
    pub(crate) fn core_in_ext(&self) -> Rect {
        Rect { x: self.core.x - self.ext.x, y: self.core.y - self.ext.y, width: self.core.width, height: self.core.height }
    }

    /// Stitching: copies the core of `src`, a result computed over the extended region,
    /// into its place in the whole-image `out` (sizes as the plan made them).
    pub(crate) fn stitch<T: Pixel>(&self, src: ImageView<'_, T>, out: &mut ImageViewMut<'_, T>) {
        let c = self.core_in_ext();
        for j in 0..c.height {
            out.row_mut(self.core.y + j)[self.core.x..self.core.x + c.width].copy_from_slice(&src.row(c.y + j)[c.x..c.x + c.width]);
        }
    }
}

/// Bytes of the working set of one `width x height` piece: the summed volume (2 bytes per
/// element, disparities padded to the kernels' blocks; costs are computed row by row and
/// never stored as a volume), path line buffers and cost rows, and the per-piece maps (two
/// f32: left, median; one u8 class; the right map is made and used a row at a time).
pub fn tile_bytes(width: usize, height: usize, disparities: usize, paths: usize) -> usize {
    let dirs = &aggregate::PATHS_16[..paths.min(16)];
    let vol = width.saturating_mul(height).saturating_mul(aggregate::padded(disparities));
    vol.saturating_mul(2)
        .saturating_add(aggregate::line_buffer_bytes(width, disparities, dirs, 1))
        .saturating_add(width * height * 9)
}

/// The pieces for an image (see the module doc). Errors: a budget too small for one row
/// of a band with its overlap, zero tile sides.
pub fn plan_tiles(width: usize, height: usize, disparities: usize, paths: usize, tiling: Tiling) -> Result<Vec<Tile>> {
    tiling.validate()?;
    if width == 0 || height == 0 {
        return Err(Error::ZeroSize { width, height });
    }
    let whole = Rect { x: 0, y: 0, width, height };
    let mut out = Vec::new();
    match tiling {
        Tiling::Auto { max_bytes, overlap } => {
            if tile_bytes(width, height, disparities, paths) <= max_bytes {
                out.push(Tile { core: whole, ext: whole });
                return Ok(out);
            }
            // Per-row bytes and the fixed line buffers of a band.
            let row = (tile_bytes(width, 2, disparities, paths) - tile_bytes(width, 1, disparities, paths)).max(1);
            let fixed = tile_bytes(width, 1, disparities, paths) - row;
            let rows = max_bytes.saturating_sub(fixed) / row;
            let core = rows.saturating_sub(2 * overlap);
            if core == 0 {
                return Err(Error::InvalidParameter {
                    name: "max_bytes",
                    reason: format!(
                        "{max_bytes} bytes hold {rows} rows of {width} x {disparities}; a band needs at least {} (1 + 2 x overlap {overlap})",
                        2 * overlap + 1
                    ),
                });
            }
            let mut y = 0;
            while y < height {
                let h = core.min(height - y);
                let y0 = y.saturating_sub(overlap);
                let y1 = (y + h + overlap).min(height);
                out.push(Tile {
                    core: Rect { x: 0, y, width, height: h },
                    ext: Rect { x: 0, y: y0, width, height: y1 - y0 },
                });
                y += h;
            }
        }
        Tiling::Tiles { width: tw, height: th, overlap } => {
            let mut y = 0;
            while y < height {
                let h = th.min(height - y);
                let mut x = 0;
                while x < width {
                    let w = tw.min(width - x);
                    let x0 = x.saturating_sub(overlap + disparities - 1);
                    let x1 = (x + w + overlap).min(width);
                    let y0 = y.saturating_sub(overlap);
                    let y1 = (y + h + overlap).min(height);
                    out.push(Tile {
                        core: Rect { x, y, width: w, height: h },
                        ext: Rect { x: x0, y: y0, width: x1 - x0, height: y1 - y0 },
                    });
                    x += w;
                }
                y += h;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_images_are_one_tile() {
        let t = plan_tiles(450, 375, 64, 8, Tiling::default()).unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].core, t[0].ext);
    }

    #[test]
    fn large_images_fit_the_budget_in_bands() {
        // 4000 x 3000 x 256: one working set would be ~6.1 GB; bands keep each under 1 GiB
        // and cover every row exactly once.
        let (w, h, d) = (4000, 3000, 256);
        assert!(tile_bytes(w, h, d, 8) > 6_000_000_000);
        let t = plan_tiles(w, h, d, 8, Tiling::default()).unwrap();
        assert!(t.len() >= 6, "{}", t.len());
        let mut next = 0;
        for tile in &t {
            assert!(tile_bytes(tile.ext.width, tile.ext.height, d, 8) <= 1 << 30);
            assert_eq!(tile.core.y, next);
            assert!(tile.ext.y + 32 <= tile.core.y.max(32) && tile.ext.y + tile.ext.height >= (tile.core.y + tile.core.height + 32).min(h));
            next += tile.core.height;
        }
        assert_eq!(next, h);
    }

    #[test]
    fn tiles_cover_the_image_once_with_left_margin() {
        let t = plan_tiles(100, 50, 16, 8, Tiling::Tiles { width: 30, height: 20, overlap: 4 }).unwrap();
        let mut cover = alloc::vec![0u8; 100 * 50];
        for tile in &t {
            for y in tile.core.y..tile.core.y + tile.core.height {
                for x in tile.core.x..tile.core.x + tile.core.width {
                    cover[y * 100 + x] += 1;
                }
            }
            assert_eq!(tile.ext.x, tile.core.x.saturating_sub(4 + 15));
            assert!(tile.ext.x + tile.ext.width == (tile.core.x + tile.core.width + 4).min(100));
        }
        assert!(cover.iter().all(|&c| c == 1));
    }

    #[test]
    fn rejects_bad_plans() {
        assert!(plan_tiles(100, 50, 16, 8, Tiling::Auto { max_bytes: 1000, overlap: 8 }).is_err());
        assert!(plan_tiles(100, 50, 16, 8, Tiling::Auto { max_bytes: 0, overlap: 8 }).is_err());
        assert!(plan_tiles(100, 50, 16, 8, Tiling::Tiles { width: 0, height: 5, overlap: 1 }).is_err());
    }

    #[test]
    fn stitching_puts_each_core_in_its_place() {
        let (w, h) = (23, 17);
        let src = crate::image::Image::from_fn(w, h, |x, y| (y * w + x) as u32).unwrap();
        let mut out = crate::image::Image::<u32>::new(w, h).unwrap();
        for t in plan_tiles(w, h, 4, 8, Tiling::Tiles { width: 7, height: 5, overlap: 2 }).unwrap() {
            let piece = src.view().crop(t.ext.x, t.ext.y, t.ext.width, t.ext.height).unwrap();
            let c = t.core_in_ext();
            assert_eq!((c.x + t.ext.x, c.y + t.ext.y, c.width, c.height), (t.core.x, t.core.y, t.core.width, t.core.height));
            t.stitch(piece, &mut out.view_mut());
        }
        assert_eq!(out, src);
    }
}
