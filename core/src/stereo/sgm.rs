//! The driver: semi-global matching of a rectified pair, read top to bottom as the pipeline
//! (as libSGM's `sgm.cu` reads), each stage a call into its own file.
//!
//! 1. matching cost ([`cost_ad`], [`cost_census`], [`cost_mi`]): only the whole-image
//!    inputs are prepared here (census codes, the MI table); the costs themselves are
//!    computed a row at a time inside the aggregation, never stored as a volume;
//! 2. path aggregation ([`aggregate`], paper sec. 2.2);
//! 3. winner-takes-all with the uniqueness test and 4. the subpixel parabola ([`wta`],
//!    sec. 2.4);
//! 5. left-right consistency check ([`consistency`], sec. 2.4, with the right map from the
//!    same summed costs, eq. 16);
//! 6. 3x3 median ([`median`]);
//! 7. hole filling ([`fill`], sec. 2.5).
//!
//! Stages 2 to 6 run on each piece of the tiling plan ([`tiles`]), made up front, and the
//! pieces' cores are stitched into the output; stages 3 to 5 take each row of summed costs
//! as soon as the aggregation has finished it, while it is still in cache and on the
//! aggregation's threads. Hole filling runs last on the whole map: its scanlines cross the
//! pieces' borders.
//!
//! [`cost_ad`]: super::cost_ad
//! [`cost_census`]: super::cost_census
//! [`cost_mi`]: super::cost_mi
//! [`aggregate`]: mod@super::aggregate
//! [`wta`]: super::wta
//! [`consistency`]: super::consistency
//! [`median`]: super::median
//! [`fill`]: super::fill
//! [`tiles`]: super::tiles

use super::aggregate::{self, Kernel, Penalties};
use super::cost_ad::AdCost;
use super::cost_census::{self, CensusCost, CensusWindow};
use super::cost_mi::{self, MiCost};
use super::tiles::{plan_tiles, tile_bytes, Rect, Tile, Tiling};
use super::{consistency, fill, median, wta, Cost, Pair, RowCost, Side, StereoParams, StereoStats, INVALID};
use crate::error::{Error, Result};
use crate::image::{check_same_size, AnyView, Image, ImageView, ImageViewMut};
use crate::parallel::Parallelism;
use crate::workspace::Workspace;
use alloc::vec::Vec;

/// Semi-global matching of a rectified pair into the left disparity map `disp`
/// (`f32`, same size; invalid = `f32::INFINITY`). Left and right are both `u8` gray or
/// both `Rgba8` (census and MI use the Rec. 601 luma, AD the three colour channels).
///
/// Pipeline (module doc): cost -> aggregation along `p.paths` -> winner-takes-all (+
/// uniqueness) -> subpixel -> left-right check -> 3x3 median, per piece of `p.tiling`; then
/// hole filling over the whole map. With `Cost::Mi` the cost is re-estimated from earlier
/// matching passes first (`cost_mi::hierarchical_table`).
pub fn stereo_sgm(left: AnyView<'_>, right: AnyView<'_>, disp: ImageViewMut<'_, f32>, p: &StereoParams, par: Parallelism) -> Result<StereoStats> {
    stereo_sgm_with(left, right, disp, p, par, &mut Workspace::default())
}

/// [`stereo_sgm`] with its large scratch buffers (the half-volumes of summed costs, the
/// per-tile maps) taken from and given back to `ws`, so that repeated calls reuse them.
pub fn stereo_sgm_with(
    left: AnyView<'_>,
    right: AnyView<'_>,
    mut disp: ImageViewMut<'_, f32>,
    p: &StereoParams,
    par: Parallelism,
    ws: &mut Workspace,
) -> Result<StereoStats> {
    let pair = Pair::new(left, right)?;
    check_same_size(left.size(), disp.size())?;
    let (w, h) = left.size();
    p.validate(w)?;
    let (plan, whole_image) = budgeted_plan(w, h, p)?;
    // The left luma guides the adaptive P2 (and is census's and MI's left image).
    let luma_l = pair.luma(Side::Left)?;

    // 1. Matching cost: the whole-image inputs its rows are computed from. They are
    // declared here, set by one arm, so that the row source can borrow them for the run.
    let (luma_r, codes, table);
    let (ad, census, mi);
    let rows: &dyn RowCost = match p.cost {
        Cost::Ad => {
            ad = AdCost::new(pair);
            &ad
        }
        Cost::Census { width, height } => {
            luma_r = pair.luma(Side::Right)?;
            codes = cost_census::census_pair(luma_l.view(), luma_r.view(), CensusWindow::new(width, height)?, par)?;
            census = CensusCost::new(&codes.0, &codes.1)?;
            &census
        }
        Cost::Mi { .. } => {
            luma_r = pair.luma(Side::Right)?;
            // The table is estimated from earlier disparity maps, each the result of this
            // same pipeline (stages 2 to 6 on a plan of its own) with an earlier table.
            let mut pass = |pass: &cost_mi::MiPass<'_>, out: ImageViewMut<'_, f32>| {
                let (q, guide) = (pass.params, pass.left);
                let plan = plan_tiles(guide.width(), guide.height(), q.max_disparity, q.paths.count(), q.tiling)?;
                match_tiles(&pass.costs(), guide, &plan, q, out, None, par, ws).map(|_| ())
            };
            table = cost_mi::hierarchical_table(luma_l.view(), luma_r.view(), p, &mut pass)?;
            mi = MiCost::new(luma_l.view(), luma_r.view(), &table);
            &mi
        }
    };

    // 2 to 6 on every piece of the plan, stitched into `disp`; the LR check's occlusion
    // classes are kept for hole filling.
    let mut occ = if p.fill && p.lr_check { Some(Image::<u8>::new(w, h)?) } else { None };
    let mut stats = match_tiles(rows, luma_l.view(), &plan, p, disp.reborrow(), occ.as_mut().map(|o| o.view_mut()), par, ws)?;

    // 7. Hole filling, on the whole map.
    if p.fill {
        stats.filled = fill::fill_holes(disp.reborrow(), occ.as_ref().map(|o| o.view()), par)?;
    }
    stats.valid = (0..h).map(|y| disp.row(y).iter().filter(|v| v.is_finite()).count()).sum();
    stats.peak_bytes += whole_image;
    (stats.p1, stats.p2) = p.penalties();
    Ok(stats)
}

/// The pieces a `w x h` pair is matched in, and the bytes of the buffers held for the whole
/// image whatever the plan (`whole_image_bytes`). The automatic bands get what the
/// whole-image buffers leave of the budget, so that `max_bytes` bounds the whole working
/// set (on every backend). A budget that leaves no room for bands at least twice as tall as
/// their overlaps (thinner ones would repeat most rows) is an error before anything is
/// allocated, saying how much would do.
pub fn budgeted_plan(w: usize, h: usize, p: &StereoParams) -> Result<(Vec<Tile>, usize)> {
    let whole_image = whole_image_bytes(w, h, p);
    let tiling = match p.tiling {
        Tiling::Auto { max_bytes, overlap } => {
            let band = tile_bytes(w, (4 * overlap).max(2).min(h), p.max_disparity, p.paths.count());
            let needed = whole_image.saturating_add(band);
            if max_bytes < needed {
                return Err(Error::InvalidParameter {
                    name: "max_bytes",
                    reason: alloc::format!(
                        "a {w}x{h} pair at {} disparities needs at least {:.1} MiB ({:.1} MiB of whole-image buffers and bands of {} rows); the budget is {:.1} MiB",
                        p.max_disparity,
                        mib(needed),
                        mib(whole_image),
                        (4 * overlap).max(2).min(h),
                        mib(max_bytes)
                    ),
                });
            }
            Tiling::Auto { max_bytes: max_bytes - whole_image, overlap }
        }
        tiles => tiles,
    };
    Ok((plan_tiles(w, h, p.max_disparity, p.paths.count(), tiling)?, whole_image))
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

/// Bytes of the buffers [`stereo_sgm_with`] holds for the whole image whatever the plan:
/// the left luma and the output map, the cost's inputs (census codes of both images and the
/// right luma; the right luma for MI), the occlusion classes and the fill's scratch.
fn whole_image_bytes(w: usize, h: usize, p: &StereoParams) -> usize {
    let per_pixel = 1 + 4
        + match p.cost {
            Cost::Census { .. } => 1 + 2 * 8,
            Cost::Mi { .. } => 2,
            Cost::Ad => 0,
        }
        + if p.fill { 5 } else { 0 }
        + if p.fill && p.lr_check { 1 } else { 0 };
    w.saturating_mul(h).saturating_mul(per_pixel)
}

/// Stages 2 to 6 on every piece of `plan`: aggregation, then per final row of summed costs
/// WTA, subpixel and LR check ([`RowStages`]), then the median; each piece's core is
/// stitched into `out` (and its occlusion classes into `occluded`, when given and the LR
/// check is on). `rows` computes the costs of the image `guide` covers; the caller
/// validated `p` and the sizes. The stats count the pieces' cores only.
#[allow(clippy::too_many_arguments)]
fn match_tiles(
    rows: &dyn RowCost,
    guide: ImageView<'_, u8>,
    plan: &[Tile],
    p: &StereoParams,
    mut out: ImageViewMut<'_, f32>,
    mut occluded: Option<ImageViewMut<'_, u8>>,
    par: Parallelism,
    ws: &mut Workspace,
) -> Result<StereoStats> {
    let (p1, p2) = p.penalties();
    let pen = Penalties { p1, p2, adaptive_p2: p.adaptive_p2 };
    let dirs = p.paths.directions();
    let nd = p.max_disparity;
    let mut stats = StereoStats { tiles: plan.len(), ..Default::default() };
    for t in plan {
        let e = t.ext;
        let (w, h) = (e.width, e.height);
        // The plan counts one thread's line buffers; each aggregation thread has its own.
        let bytes = tile_bytes(w, h, nd, dirs.len()) + aggregate::line_buffer_bytes(w, nd, dirs, par.threads())
            - aggregate::line_buffer_bytes(w, nd, dirs, 1);
        stats.peak_bytes = stats.peak_bytes.max(bytes);
        let mut left = ws.vec_filled(w * h, INVALID)?;
        let mut occ = ws.vec_filled(if p.lr_check { w * h } else { 0 }, 0u8)?;

        // 2. Aggregation; 3 to 5 on each row of S it finishes, one sink per half of the
        // piece (the halves may finish on two threads at once).
        let mid = aggregate::split_row(h);
        let (l_top, l_bottom) = left.split_at_mut(mid * w);
        let (o_top, o_bottom) = occ.split_at_mut(if p.lr_check { mid * w } else { 0 });
        let mut top = RowStages::new(l_top, o_top, 0, w, p, t.core_in_ext());
        let mut bottom = RowStages::new(l_bottom, o_bottom, mid, w, p, t.core_in_ext());
        let g = guide.crop(e.x, e.y, w, h)?;
        aggregate::aggregate_rows(Kernel::best(nd), rows, e, nd, p.cost.max_value(), dirs, &pen, Some(g), par, ws, &mut |y, s| top.row(y, s), &mut |y, s| {
            bottom.row(y, s)
        })?;
        stats.rejected_uniqueness += top.rejected_uniqueness + bottom.rejected_uniqueness;
        stats.rejected_lr += top.rejected_lr + bottom.rejected_lr;
        if let (true, Some(o)) = (p.lr_check, occluded.as_mut()) {
            t.stitch(ImageView::new(&occ, w, h, w)?, o);
        }
        ws.recycle(occ);

        // 6. Median of the piece, then its core into the output.
        let left = Image::from_vec(w, h, left)?;
        if p.median {
            let mut m = Image::from_vec(w, h, ws.vec_filled(w * h, INVALID)?)?;
            median::median3x3(left.view(), m.view_mut(), par)?;
            t.stitch(m.view(), &mut out);
            ws.recycle(m.into_vec());
        } else {
            t.stitch(left.view(), &mut out);
        }
        ws.recycle(left.into_vec());
    }
    Ok(stats)
}

/// Stages 3 to 5 on the final rows of `S` of one half of a piece (see
/// [`aggregate::split_row`]): the left map's row by WTA and subpixel, then, with the LR
/// check, the right map's row and the check, which also writes the occlusion classes.
struct RowStages<'a> {
    /// The half's rows of the left map and of the classes; `y0` is its first row.
    left: &'a mut [f32],
    occ: &'a mut [u8],
    y0: usize,
    width: usize,
    p: &'a StereoParams,
    right: Vec<f32>,
    scratch: wta::RightScratch,
    /// The piece's core, in piece coordinates: only its pixels are counted.
    core: Rect,
    rejected_uniqueness: usize,
    rejected_lr: usize,
}

impl<'a> RowStages<'a> {
    fn new(left: &'a mut [f32], occ: &'a mut [u8], y0: usize, width: usize, p: &'a StereoParams, core: Rect) -> Self {
        let right = if p.lr_check { alloc::vec![0f32; width] } else { Vec::new() };
        let scratch = wta::RightScratch::new(if p.lr_check { width } else { 0 }, aggregate::padded(p.max_disparity));
        RowStages { left, occ, y0, width, p, right, scratch, core, rejected_uniqueness: 0, rejected_lr: 0 }
    }

    /// Row `y` of the piece, its summed costs `s` (pixel `x` at `s[x * padded(D)..]`).
    fn row(&mut self, y: usize, s: &[u16]) {
        let (w, nd) = (self.width, self.p.max_disparity);
        let dp = aggregate::padded(nd);
        let j = y - self.y0;
        let left = &mut self.left[j * w..(j + 1) * w];
        // 3 and 4 in one pass: the parabola reads the three sums around the minimum the
        // search has just loaded.
        wta::wta_left_row(s, dp, nd, self.p.uniqueness, self.p.subpixel, left);
        let in_core = y >= self.core.y && y < self.core.y + self.core.height;
        let cols = self.core.x..self.core.x + self.core.width;
        let invalid = |l: &[f32]| if in_core { l[cols.clone()].iter().filter(|v| !v.is_finite()).count() } else { 0 };
        let after_wta = invalid(left);
        self.rejected_uniqueness += after_wta;
        // 5.
        if self.p.lr_check {
            wta::wta_right_row(s, dp, nd, &mut self.scratch, &mut self.right);
            let occ = &mut self.occ[j * w..(j + 1) * w];
            consistency::lr_check_row(left, &self.right, self.p.lr_max_diff, Some(occ));
            self.rejected_lr += invalid(left) - after_wta;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stereo::consistency::lr_check;
    use crate::stereo::cost_ad::ad_cost_volume_gray;
    use crate::stereo::cost_census::census_cost_volume;
    use crate::stereo::{wta::wta_left, wta::wta_right, CostVolume, Paths, Tiling};

    /// A textured left image and a right image that sees it shifted by 1 to 5 pixels
    /// depending on the row band, with a little noise.
    fn scene(w: usize, h: usize) -> (Image<u8>, Image<u8>) {
        let mut s = 0x9e3779b97f4a7c15u64;
        let mut next = move || {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (s >> 33) as u32
        };
        let left = Image::from_fn(w, h, |_, _| (next() % 200) as u8).unwrap();
        let right = Image::from_fn(w, h, |x, y| {
            let d = 1 + (y / 4) % 5;
            left.view().row(y)[(x + d).min(w - 1)].saturating_add((next() % 6) as u8)
        })
        .unwrap();
        (left, right)
    }

    /// The stages one after another on stored volumes and whole maps, through their
    /// public functions: what the driver's fused, tiled run must reproduce exactly.
    fn stage_by_stage(l: &Image<u8>, cost: &CostVolume, p: &StereoParams) -> (Image<f32>, StereoStats) {
        let (w, h) = l.size();
        let par = Parallelism::Sequential;
        let (p1, p2) = p.penalties();
        let pen = Penalties { p1, p2, adaptive_p2: p.adaptive_p2 };
        let sum = aggregate::aggregate(cost, p.paths.directions(), &pen, Some(l.view()), par).unwrap();
        let mut left = Image::<f32>::new(w, h).unwrap();
        let rejected_uniqueness = wta_left(&sum, p.uniqueness, p.subpixel, left.view_mut(), par).unwrap();
        let mut right = Image::<f32>::new(w, h).unwrap();
        wta_right(&sum, right.view_mut(), par).unwrap();
        let mut occ = Image::<u8>::new(w, h).unwrap();
        let rejected_lr = lr_check(left.view_mut(), right.view(), p.lr_max_diff, Some(occ.view_mut())).unwrap();
        let mut disp = Image::<f32>::new(w, h).unwrap();
        median::median3x3(left.view(), disp.view_mut(), par).unwrap();
        let filled = fill::fill_holes(disp.view_mut(), Some(occ.view()), par).unwrap();
        let valid = disp.as_slice().iter().filter(|v| v.is_finite()).count();
        (disp, StereoStats { valid, rejected_uniqueness, rejected_lr, filled, tiles: 1, p1, p2, ..Default::default() })
    }

    #[test]
    fn driver_matches_the_stages_run_one_by_one() {
        let (l, r) = scene(48, 28);
        let base = StereoParams { max_disparity: 8, uniqueness: 10, ..Default::default() };
        for (cost, paths) in [(Cost::CENSUS_7X5, Paths::Eight), (Cost::Ad, Paths::Four), (Cost::Census { width: 5, height: 3 }, Paths::Sixteen)] {
            let p = StereoParams { cost, paths, ..base };
            let volume = match cost {
                Cost::Census { width, height } => {
                    let (cl, cr) = cost_census::census_pair(l.view(), r.view(), CensusWindow::new(width, height).unwrap(), Parallelism::Sequential).unwrap();
                    census_cost_volume(&cl, &cr, 8, Parallelism::Sequential).unwrap()
                }
                _ => ad_cost_volume_gray(l.view(), r.view(), 8, Parallelism::Sequential).unwrap(),
            };
            let (want, want_stats) = stage_by_stage(&l, &volume, &p);
            for par in [Parallelism::Sequential, Parallelism::AllThreads] {
                let mut got = Image::<f32>::new(48, 28).unwrap();
                let stats = stereo_sgm(AnyView::U8(l.view()), AnyView::U8(r.view()), got.view_mut(), &p, par).unwrap();
                assert_eq!(got, want, "{cost:?} {par:?}");
                assert_eq!(StereoStats { peak_bytes: 0, ..stats }, want_stats, "{cost:?} {par:?}");
            }
        }
    }

    #[test]
    fn a_plan_of_one_covering_tile_is_the_untiled_run() {
        let (l, r) = scene(40, 24);
        let p = StereoParams { max_disparity: 6, ..Default::default() };
        let run = |tiling| {
            let mut d = Image::<f32>::new(40, 24).unwrap();
            let q = StereoParams { tiling, ..p };
            stereo_sgm(AnyView::U8(l.view()), AnyView::U8(r.view()), d.view_mut(), &q, Parallelism::AllThreads).unwrap();
            d
        };
        assert_eq!(run(Tiling::Tiles { width: 40, height: 24, overlap: 0 }), run(Tiling::default()));
    }

    #[test]
    fn a_one_row_pair_is_matched_not_a_panic() {
        // Found by the stereo fuzz target: the band-size check clamped with a minimum above
        // the image height.
        let (l, r) = scene(16, 1);
        let mut d = Image::<f32>::new(16, 1).unwrap();
        let p = StereoParams { max_disparity: 4, ..Default::default() };
        stereo_sgm(AnyView::U8(l.view()), AnyView::U8(r.view()), d.view_mut(), &p, Parallelism::Sequential).unwrap();
    }

    #[test]
    fn rejects_bad_input() {
        let (l, r) = scene(16, 8);
        let p = StereoParams { max_disparity: 4, ..Default::default() };
        let mut d = Image::<f32>::new(16, 8).unwrap();
        let small = Image::<u8>::new(15, 8).unwrap();
        let run = |a: AnyView<'_>, b: AnyView<'_>, d: ImageViewMut<'_, f32>, p: &StereoParams| stereo_sgm(a, b, d, p, Parallelism::Sequential);
        assert!(run(AnyView::U8(l.view()), AnyView::U8(small.view()), d.view_mut(), &p).is_err());
        let f = Image::<f32>::new(16, 8).unwrap();
        assert!(run(AnyView::F32(f.view()), AnyView::F32(f.view()), d.view_mut(), &p).is_err());
        let mut d_small = Image::<f32>::new(15, 8).unwrap();
        assert!(run(AnyView::U8(l.view()), AnyView::U8(r.view()), d_small.view_mut(), &p).is_err());
        let too_many = StereoParams { max_disparity: 16, ..p };
        assert!(run(AnyView::U8(l.view()), AnyView::U8(r.view()), d.view_mut(), &too_many).is_err());
        let mi_too_deep = StereoParams { cost: Cost::Mi { iterations: 1, levels: 6 }, ..p };
        assert!(run(AnyView::U8(l.view()), AnyView::U8(r.view()), d.view_mut(), &mi_too_deep).is_err());
    }
}
