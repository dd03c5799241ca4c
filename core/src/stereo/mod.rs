//! Semi-global matching stereo (H. Hirschmueller, "Stereo Processing by Semiglobal Matching
//! and Mutual Information", IEEE PAMI 30(2), 2008), laid out like libSGM: one file per
//! stage, each callable and testable on its own, and one driver, `sgm`, whose
//! [`stereo_sgm`] reads as the pipeline.
//!
//! | stage | file |
//! |---|---|
//! | the driver: cost -> aggregate -> WTA -> subpixel -> LR check -> median -> fill | `sgm` |
//! | the tiling plan (overlapping tiles / bands that bound the memory) and its stitching | `tiles` |
//! | matching cost: modified absolute difference | `cost_ad` |
//! | matching cost: census transform + Hamming distance | `cost_census` |
//! | matching cost: mutual information (iterative and hierarchical, Parzen-smoothed) | `cost_mi` |
//! | path aggregation (4 / 5 / 8 / 16 directions, P1 / P2, adaptive P2) | `aggregate`(mod@aggregate), its AVX-512BW kernel `aggregate_avx512` |
//! | winner-takes-all, uniqueness, subpixel, right map by diagonal search | `wta` |
//! | left-right consistency check | `consistency` |
//! | 3x3 median | `median` |
//! | hole filling along 8 scanlines (background for occlusions) | `fill` |
//!
//! Scoring against ground truth, the PFM format and the colour map are not algorithms of
//! the core: they live beside the command-line program (`tessera::stereo`).
//!
//! Conventions: disparity `d` of a left pixel `(x, y)` matches the right pixel `(x - d, y)`;
//! candidates are `0..max_disparity`. Costs are `u8` (census <= 62, AD and MI <= 255),
//! path costs and their sum `u16`, disparity fastest. The pipeline never stores a cost
//! volume: the aggregation sweeps compute each row's costs when they reach it, so the
//! working set is the `W x H x D` u16 summed volume plus line buffers (the per-stage
//! functions that return a [`CostVolume`] exist for testing and for callers that want one).
//! An invalid disparity is `f32::INFINITY` (the Middlebury PFM convention).

pub(crate) mod aggregate;
pub(crate) mod aggregate_avx512;
pub(crate) mod consistency;
pub(crate) mod cost_ad;
pub(crate) mod cost_census;
pub(crate) mod cost_mi;
pub(crate) mod fill;
pub(crate) mod median;
pub(crate) mod sgm;
pub(crate) mod tiles;
pub(crate) mod wta;

use crate::error::{require_range, Error, Result};
use crate::image::{check_same_size, AnyView, Image, ImageView, Rgba8};
#[cfg(test)]
use crate::parallel::Parallelism;
use alloc::format;
use alloc::vec::Vec;

pub use aggregate::{aggregate, Direction, Penalties, SummedVolume};
pub use cost_census::{CensusCodes, CensusWindow};
pub use cost_mi::{hierarchical_table, MiPass, MiTable};
pub use sgm::{budgeted_plan, stereo_sgm, stereo_sgm_with};
pub use tiles::{plan_tiles, tile_bytes, Rect, Tile, Tiling};

/// The marker of a pixel without a disparity.
pub const INVALID: f32 = f32::INFINITY;

/// The matching cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cost {
    /// Modified absolute difference of intensities (of the R, G, B channels, rounded mean,
    /// for colour input); a match `x - d < 0` is clamped to column 0 instead of being
    /// undefined, as in the original CUDA port.
    Ad,
    /// Mutual information (Hirschmueller 2008, eq. 5-9), re-estimated from the current
    /// disparity map: `iterations` times at the coarsest of `levels` halvings (starting
    /// from a zero disparity map), then once per finer level; `levels = 0` is the plain
    /// iterative scheme at full resolution.
    Mi { iterations: usize, levels: usize },
    /// Census transform in a `width x height` window (odd sides, at most 9 x 7) and the
    /// Hamming distance of the bit strings (Zabih and Woodfill 1994).
    Census { width: usize, height: usize },
}

impl Cost {
    /// The largest census window, 9 x 7 (62 bits in one u64), as libSGM.
    pub const CENSUS_9X7: Cost = Cost::Census { width: 9, height: 7 };
    /// The default census window, 7 x 5 (34 bits): on cones and teddy together it scored
    /// better than 9 x 7 and 5 x 5 with the default penalties.
    pub const CENSUS_7X5: Cost = Cost::Census { width: 7, height: 5 };
    /// Mutual information with the paper's three iterations, at full resolution.
    pub const MI: Cost = Cost::Mi { iterations: 3, levels: 0 };
    /// Hierarchical mutual information: three iterations at quarter resolution, then one
    /// at half and one at full resolution.
    pub const MI_HIERARCHICAL: Cost = Cost::Mi { iterations: 3, levels: 2 };

    /// Default penalties (P1, P2) for this cost, in its units, for use with the default
    /// adaptive P2. Chosen on cones and teddy together: a coarse grid (P1 6..30, P2
    /// 120..600, census 5x5 / 7x5 / 9x7, uniqueness 0 / 5) scored with the full default
    /// pipeline, keeping the setting with the best score on both images at once rather than
    /// the best on either one; larger penalties helped both images up to about 20 / 400
    /// for census. MI (1/16 nat per step, so larger numbers) was gridded the same way
    /// (P1 20..80, P2 400..2000) and AD over P1 10..30, P2 150..500.
    pub fn default_penalties(self) -> (u16, u16) {
        match self {
            Cost::Census { .. } => (20, 400),
            Cost::Ad => (20, 300),
            Cost::Mi { .. } => (80, 2000),
        }
    }

    /// Largest value this cost can take.
    pub fn max_value(self) -> u16 {
        match self {
            Cost::Census { width, height } => (width * height).saturating_sub(1) as u16,
            _ => 255,
        }
    }

    /// The kind of this cost, without its settings.
    pub fn kind(self) -> CostKind {
        match self {
            Cost::Census { .. } => CostKind::Census,
            Cost::Ad => CostKind::Ad,
            Cost::Mi { .. } => CostKind::Mi,
        }
    }
}

/// The kind of a matching cost, as a user names it (`census`, `ad`, `mi`: its
/// [`crate::Choice`] names); its settings (census window, MI schedule) are given apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CostKind {
    Census,
    Ad,
    Mi,
}

impl CostKind {
    /// The cost of this kind with its default settings: census in the 7 x 5 window
    /// ([`Cost::CENSUS_7X5`]), MI with the paper's three iterations at full resolution
    /// ([`Cost::MI`]).
    pub fn default_cost(self) -> Cost {
        match self {
            CostKind::Census => Cost::CENSUS_7X5,
            CostKind::Ad => Cost::Ad,
            CostKind::Mi => Cost::MI,
        }
    }
}

/// The set of aggregation directions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Paths {
    /// Left, right, up, down.
    Four,
    /// The five directions one top-to-bottom pass can follow: both horizontals, down and
    /// the two downward diagonals (the original CUDA port's 5-path mode, OpenCV's MODE_SGBM).
    Five,
    /// Horizontals, verticals and diagonals: Hirschmueller's recommended 8.
    Eight,
    /// The 8 plus the eight knight-move directions (+-1, +-2) and (+-2, +-1).
    Sixteen,
}

impl Paths {
    pub fn count(self) -> usize {
        self.directions().len()
    }
    /// The directions `r`; the path to `p` comes from `p - r`.
    pub fn directions(self) -> &'static [Direction] {
        use aggregate::{PATHS_16, PATHS_4, PATHS_5, PATHS_8};
        match self {
            Paths::Four => &PATHS_4,
            Paths::Five => &PATHS_5,
            Paths::Eight => &PATHS_8,
            Paths::Sixteen => &PATHS_16,
        }
    }
    /// From a count 4, 5, 8 or 16.
    pub fn from_count(n: usize) -> Result<Paths> {
        match n {
            4 => Ok(Paths::Four),
            5 => Ok(Paths::Five),
            8 => Ok(Paths::Eight),
            16 => Ok(Paths::Sixteen),
            _ => Err(Error::InvalidParameter { name: "paths", reason: format!("{n}: expected 4, 5, 8 or 16") }),
        }
    }
}

/// All the settings of one SGM run. `Default` is the dense, quality setting: census 7 x 5,
/// 64 disparities, 8 paths, P1 = 20, adaptive P2 = 400, subpixel, left-right check, median
/// and hole filling.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StereoParams {
    /// Number of disparity candidates D: disparities `0..max_disparity`. 1 ..= width - 1.
    pub max_disparity: usize,
    pub cost: Cost,
    pub paths: Paths,
    /// Small-change penalty P1; `None` takes [`Cost::default_penalties`].
    pub p1: Option<u16>,
    /// Large-change penalty P2 (>= P1); `None` takes [`Cost::default_penalties`].
    pub p2: Option<u16>,
    /// Intensity-adaptive P2: `max(P1, P2 / |I(p) - I(p - r)|)` where the left image
    /// changes along the path (Hirschmueller 2008, sec. 2.3), P2 where it does not.
    pub adaptive_p2: bool,
    /// Uniqueness ratio in percent (0 = off): a pixel is invalid when some candidate more
    /// than one disparity away from the best has `S * (100 - u) < S_best * 100`.
    pub uniqueness: u8,
    /// Parabola fit through the summed costs at best - 1, best, best + 1.
    pub subpixel: bool,
    /// Left-right consistency check against the right map from the same summed volume.
    pub lr_check: bool,
    /// Largest accepted |D_left(x) - D_right(x - D_left(x))| (integer disparities).
    pub lr_max_diff: u16,
    /// 3x3 median of the valid disparities.
    pub median: bool,
    /// Fill invalid pixels from the nearest valid ones on 8 scanlines: background (second
    /// lowest) for occlusions, median for mismatches (`fill`).
    pub fill: bool,
    /// Memory bound: automatic horizontal bands, or the original's overlapping tiles.
    pub tiling: Tiling,
}

impl Default for StereoParams {
    fn default() -> Self {
        StereoParams {
            max_disparity: 64,
            cost: Cost::CENSUS_7X5,
            paths: Paths::Eight,
            p1: None,
            p2: None,
            adaptive_p2: true,
            uniqueness: 0,
            subpixel: true,
            lr_check: true,
            lr_max_diff: 1,
            median: true,
            fill: true,
            tiling: Tiling::default(),
        }
    }
}

impl StereoParams {
    /// (P1, P2) after defaults.
    pub fn penalties(&self) -> (u16, u16) {
        let (d1, d2) = self.cost.default_penalties();
        (self.p1.unwrap_or(d1), self.p2.unwrap_or(d2))
    }

    /// Checks every setting against an image `width` pixels wide.
    pub fn validate(&self, width: usize) -> Result<()> {
        if width < 2 {
            return Err(Error::InvalidParameter {
                name: "width",
                reason: format!("stereo needs an image at least 2 pixels wide, got {width}"),
            });
        }
        require_range("max_disparity", self.max_disparity, 1, width as i64 - 1)?;
        match self.cost {
            Cost::Census { width: cw, height: ch } => CensusWindow::new(cw, ch).map(|_| ())?,
            Cost::Mi { iterations, levels } => {
                require_range("MI iterations", iterations, 1, 10)?;
                // The coarsest level must still be a stereo pair (at least 2 pixels wide).
                let max_levels = (0..=6).take_while(|&k| width.div_ceil(1 << k) >= 2).last().unwrap_or(0);
                require_range("MI levels", levels, 0, max_levels as i64)?;
            }
            Cost::Ad => {}
        }
        let (p1, p2) = self.penalties();
        Penalties { p1, p2, adaptive_p2: self.adaptive_p2 }.validate(self.paths.count(), self.cost.max_value())?;
        require_range("uniqueness", self.uniqueness, 0, 99)?;
        if let Tiling::Tiles { width: tw, height: th, .. } = self.tiling {
            if tw.min(th) < tiles::MIN_TILE {
                let min = tiles::MIN_TILE;
                return Err(Error::InvalidParameter { name: "tile", reason: format!("{tw}x{th} is below the smallest tile, {min}x{min}") });
            }
        }
        self.tiling.validate()
    }
}

/// What one run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StereoStats {
    /// Pixels with a disparity in the output.
    pub valid: usize,
    /// Pixels invalidated by the uniqueness test (final iteration).
    pub rejected_uniqueness: usize,
    /// Pixels invalidated by the left-right check (final iteration).
    pub rejected_lr: usize,
    /// Pixels given a disparity by hole filling.
    pub filled: usize,
    /// Tiles (or bands) the image was processed in.
    pub tiles: usize,
    /// Bytes of the largest working set held at once, as accounted by the core: the summed
    /// volume, the path line buffers and cost rows and the per-tile maps of the largest
    /// tile, plus the whole-image buffers (gray copies, census codes, occlusion classes,
    /// the hole-filling copy). Allocator overhead and the caller's images are not counted.
    pub peak_bytes: usize,
    /// Penalties used.
    pub p1: u16,
    pub p2: u16,
}

/// A `W x H x D` volume of u8 matching costs, `data[(y * W + x) * D + d]`.
#[derive(Clone, Debug, PartialEq)]
pub struct CostVolume {
    pub width: usize,
    pub height: usize,
    pub disparities: usize,
    pub data: Vec<u8>,
}

impl CostVolume {
    /// Costs of pixel `(x, y)` for all disparities.
    #[inline]
    pub fn pixel(&self, x: usize, y: usize) -> &[u8] {
        let i = (y * self.width + x) * self.disparities;
        &self.data[i..i + self.disparities]
    }
    /// The row `y` (`W * D` costs).
    #[inline]
    pub fn row(&self, y: usize) -> &[u8] {
        let n = self.width * self.disparities;
        &self.data[y * n..(y + 1) * n]
    }
}

/// A stored volume is a row source too (for [`aggregate`] on a volume).
impl RowCost for CostVolume {
    fn cost_row(&self, y: usize, x0: usize, n: usize, disparities: usize, stride: usize, out: &mut [u8]) {
        let row = &self.row(y)[x0 * disparities..(x0 + n) * disparities];
        for (o, c) in out.chunks_exact_mut(stride).zip(row.chunks_exact(disparities)) {
            o[..disparities].copy_from_slice(c);
        }
    }
}

/// A matching cost seen as rows: the costs of the left pixels `x0 .. x0 + n` of row `y`
/// against the whole right row.
pub(crate) trait RowCost: Sync {
    /// Writes `out[(x - x0) * stride + d]` for `x in x0..x0 + n`, `d in 0..D` (`stride >= D`;
    /// the lanes `D..stride` of each pixel are left as they are).
    fn cost_row(&self, y: usize, x0: usize, n: usize, disparities: usize, stride: usize, out: &mut [u8]);
}

/// Computes the cost volume of the region `r` (rows in parallel). Errors:
/// [`Error::OutOfMemory`].
#[cfg(test)]
pub(crate) fn cost_volume_of(c: &dyn RowCost, r: Rect, disparities: usize, par: Parallelism) -> Result<CostVolume> {
    use crate::image::ImageViewMut;
    use crate::parallel::for_each_band;
    let n = r.width * disparities;
    let mut data = crate::error::try_filled(n * r.height, 0u8)?;
    if let Ok(view) = ImageViewMut::from_slice(&mut data, n, r.height) {
        for_each_band(view, par, 4, |y0, mut band| {
            for j in 0..band.height() {
                c.cost_row(r.y + y0 + j, r.x, r.width, disparities, disparities, band.row_mut(j));
            }
        });
    }
    Ok(CostVolume { width: r.width, height: r.height, disparities, data })
}

/// `r[k]` for `k in 0..W + D - 1`: the right row reversed and clamped, so that the right
/// pixels `x - d` (clamped to 0) of left pixel `x`, for `d = 0, 1, ...`, are the
/// contiguous run `r[W - 1 - x ..]`. Shared by every cost so the clamp rule lives once.
#[inline]
pub(crate) fn reversed_clamped<T: Copy>(row: &[T], disparities: usize, out: &mut Vec<T>) {
    out.clear();
    out.extend(row.iter().rev().copied());
    let first = row[0];
    // repeat_n needs Rust 1.82; the workspace's rust-version is 1.80.
    #[allow(clippy::manual_repeat_n)]
    out.extend(core::iter::repeat(first).take(disparities.saturating_sub(1)));
}

/// Rejects a disparity map holding NaN (infinity is the invalid marker and allowed).
pub fn check_no_nan(name: &'static str, v: ImageView<'_, f32>) -> Result<()> {
    for y in 0..v.height() {
        if let Some(x) = v.row(y).iter().position(|d| d.is_nan()) {
            return Err(Error::InvalidParameter { name, reason: format!("NaN at ({x}, {y}); invalid pixels must be +inf") });
        }
    }
    Ok(())
}

/// The two images of a pair in the form the costs read.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Pair<'a> {
    Gray(ImageView<'a, u8>, ImageView<'a, u8>),
    Rgb(ImageView<'a, Rgba8>, ImageView<'a, Rgba8>),
}

impl<'a> Pair<'a> {
    /// The pair `left`, `right`: same size, both `u8` or both `Rgba8`.
    pub(crate) fn new(left: AnyView<'a>, right: AnyView<'a>) -> Result<Self> {
        check_same_size(left.size(), right.size())?;
        match (left, right) {
            (AnyView::U8(l), AnyView::U8(r)) => Ok(Pair::Gray(l, r)),
            (AnyView::Rgba8(l), AnyView::Rgba8(r)) => Ok(Pair::Rgb(l, r)),
            _ => Err(Error::UnsupportedType {
                op: "stereo",
                types: "other than two u8 or two rgba8 images (convert 16-bit or float input to 8 bits first)",
            }),
        }
    }

    /// One image of the pair as 8-bit gray: a copy of a gray image, the Rec. 601 luma of
    /// a colour one (what census, MI and the adaptive P2 read). Errors:
    /// [`Error::OutOfMemory`].
    pub(crate) fn luma(self, side: Side) -> Result<Image<u8>> {
        match self {
            Pair::Gray(l, r) => side.pick(l, r).try_to_image(),
            Pair::Rgb(l, r) => side.pick(l, r).try_convert(),
        }
    }
}

/// One image of a pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    Left,
    Right,
}

impl Side {
    fn pick<T>(self, left: T, right: T) -> T {
        match self {
            Side::Left => left,
            Side::Right => right,
        }
    }
}
