//! Drives `kernels/stereo.cu`: semi-global matching ([`tessera_core::stereo::stereo_sgm`])
//! with every stage on the device; only the inputs go up and the disparity map and four
//! counters come back (and, for MI, the small intermediate maps its table is estimated from).
//! A pair already on the device is matched in place and its map written into a device
//! image (`CudaBackend::stereo_sgm_on_device`); MI then downloads the pair's lumas for its
//! host-side table.
//!
//! The pipeline is the core's: the same tiling plan ([`plan_tiles`], with the same budget
//! rule), per piece the cost volume (u8, `ew x eh x 32 K`), one aggregation launch of
//! every direction adding into the u16 summed volume, WTA (+ uniqueness, subpixel, right
//! map), the LR check (occlusion classes stitched into the whole image), the 3x3 median
//! stitched into the output; then hole filling over the whole map.
//!
//! Exactness: the disparity maps and [`StereoStats`] equal the CPU backend's bit for bit.
//! The path costs are the exact integer recursion (as the CPU's, whose parameter check
//! keeps them within u16); the parabola is `best + (a - c) / (2 den)` with IEEE f32
//! division and addition (no FMA can contract it), rounding for the LR check is
//! `floor(d + 0.5)` in f64, and median and filling only select values. `peak_bytes` is the
//! core's accounting of the working set for one thread (what `CpuBackend` with
//! `Parallelism::Sequential` reports), not the device's allocation, which per piece is
//! 3 bytes per volume element (u8 costs and u16 sums; the CPU holds the 2-byte sums).
//!
//! Limits: at most 256 disparities (K = 8 per lane); more is an `Error::Backend`. The MI
//! table is computed on the host (`cost_mi::mi_table`) from intermediate disparity maps
//! that are matched on the device and downloaded (the pyramid halving and upsampling are
//! host-side too); the MI cost volume and its aggregation run on the device.

use crate::device::{args, blocks, int, Arg, DevBuf, DevImage, DevicePtr, Gpu};
use crate::device_image::{AnySrc, Dst, Src, Staged};
use crate::kernels::{Kernel, Module};
use crate::tuning::{self, Design};
use tessera_core::choice::Choice;
use tessera_core::image::check_same_size;
use tessera_core::stereo::{budgeted_plan, hierarchical_table, tile_bytes, MiPass, plan_tiles, Cost, CensusWindow, MiTable, Rect, StereoParams, StereoStats, Tile};
use tessera_core::{Error, Image, ImageView, ImageViewMut, Result};

const fn kernel(name: &'static str) -> Kernel {
    Kernel::new(Module::Stereo, name)
}
const LUMA_RGBA8: Kernel = kernel("stereo_luma_rgba8");
const CENSUS: Kernel = kernel("stereo_census");
const COST_CENSUS: Kernel = kernel("stereo_cost_census");
const COST_AD_U8: Kernel = kernel("stereo_cost_ad_u8");
const COST_AD_RGBA8: Kernel = kernel("stereo_cost_ad_rgba8");
const COST_MI: Kernel = kernel("stereo_cost_mi");
const AGGREGATE: [Kernel; 4] =
    [kernel("stereo_aggregate_k1"), kernel("stereo_aggregate_k2"), kernel("stereo_aggregate_k4"), kernel("stereo_aggregate_k8")];
const WTA: [Kernel; 4] = [kernel("stereo_wta_k1"), kernel("stereo_wta_k2"), kernel("stereo_wta_k4"), kernel("stereo_wta_k8")];
const LR_CHECK: Kernel = kernel("stereo_lr_check");
const MEDIAN_STITCH: Kernel = kernel("stereo_median_stitch");
const FILL_BORDER: Kernel = kernel("stereo_fill_border");
const FILL_LINES: Kernel = kernel("stereo_fill_lines");
const COUNT_VALID: Kernel = kernel("stereo_count_valid");

/// Slots of the device counters.
const REJECTED_UNIQUENESS: usize = 0;
const REJECTED_LR: usize = 1;
const FILLED: usize = 2;
const VALID: usize = 3;

/// How the aggregation kernel adds a path's costs into the summed volume
/// (`STEREO_SUMS_*` in `kernels/stereo.cu`).
const SUMS_STORE: i32 = 0;
const SUMS_ADD: i32 = 1;
const SUMS_ATOMIC: i32 = 2;

/// The aggregation's designs (tuning family `sgm_aggregation`, `tuning.rs`), kept to measure
/// one against the other on each device. Both are exact.
const AGGREGATION: &str = "sgm_aggregation";

/// Which aggregation design runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aggregation {
    /// All directions in one launch, adding atomically (the built-in default).
    OneLaunch,
    /// A launch per direction.
    Sequential,
}

impl Choice for Aggregation {
    const WHAT: &'static str = "SGM aggregation design";
    const ALL: &'static [Self] = &[Aggregation::OneLaunch, Aggregation::Sequential];
    fn name(self) -> &'static str {
        match self {
            Aggregation::OneLaunch => "one-launch",
            Aggregation::Sequential => "sequential",
        }
    }
}

impl Design for Aggregation {
    const FAMILY: &'static str = AGGREGATION;
}
/// The environment variable that overrides the device's choice of `AGGREGATION`.
pub const AGGREGATION_ENV: &str = "TESSERA_SGM_AGGREGATION";

/// Warps per block of the aggregation (a warp per path) and of WTA (a warp per pixel).
const AGG_WARPS: u32 = 4;
const WTA_WARPS: u32 = 8;
/// Blocks of the grid-stride WTA: one resident wave on an H100, 132 SMs x 6 blocks of 256
/// at the kernel's 40 registers (`tests/occupancy.rs`). Blocks beyond a wave would wait for
/// the first ones to finish, then run their share of the pixels alone.
const WTA_MAX_BLOCKS: u32 = 792;

/// The largest disparity count the kernels hold in registers (8 per lane).
pub(crate) const MAX_DISPARITIES: usize = 256;

/// The matching cost's device inputs: its cost-volume kernel and the pointers it reads
/// before the volume (census codes, images, the MI table).
struct CostSource {
    kernel: Kernel,
    inputs: Vec<DevicePtr>,
}

/// See the module doc. The inputs may be host views or images on the device, the map a host
/// view or a device image.
pub(crate) fn stereo_sgm(gpu: &Gpu, left: AnySrc<'_>, right: AnySrc<'_>, disp: Dst<'_, f32>, p: &StereoParams) -> Result<StereoStats> {
    // Validation in the CPU's order, with its errors.
    check_same_size(left.size(), right.size())?;
    match (&left, &right) {
        (AnySrc::U8(_), AnySrc::U8(_)) | (AnySrc::Rgba8(_), AnySrc::Rgba8(_)) => {}
        _ => {
            return Err(Error::UnsupportedType {
                op: "stereo",
                types: "other than two u8 or two rgba8 images (convert 16-bit or float input to 8 bits first)",
            })
        }
    };
    check_same_size(left.size(), disp.size())?;
    let (w, h) = left.size();
    p.validate(w)?;
    let (plan, whole_image) = budgeted_plan(w, h, p)?;
    lanes_per_disparity(p.max_disparity)?;
    let (wi, hi) = (int(w, "width")?, int(h, "height")?);
    let n = int(w.checked_mul(h).ok_or(Error::OutOfMemory { bytes: usize::MAX })?, "pixels")?;

    // 1. The matching cost's whole-image inputs; the left luma guides the adaptive P2.
    let (luma_l, luma_r, colour) = match (&left, &right) {
        (AnySrc::U8(l), AnySrc::U8(r)) => (l.stage(gpu)?, r.stage(gpu)?, None),
        (AnySrc::Rgba8(l), AnySrc::Rgba8(r)) => {
            let (cl, cr) = (l.stage(gpu)?, r.stage(gpu)?);
            let (ll, lr) = (gpu.image::<u8>(w, h)?, gpu.image::<u8>(w, h)?);
            gpu.launch(LUMA_RGBA8, [blocks(w * h, 256), 1, 1], [256, 1, 1], 0, args![&cl, &ll, n])?;
            gpu.launch(LUMA_RGBA8, [blocks(w * h, 256), 1, 1], [256, 1, 1], 0, args![&cr, &lr, n])?;
            (Staged::Own(ll), Staged::Own(lr), Some((cl, cr)))
        }
        _ => unreachable_pair()?,
    };
    let mut codes = None;
    let mut table = None;
    let cost = match p.cost {
        Cost::Ad => match &colour {
            Some((cl, cr)) => CostSource { kernel: COST_AD_RGBA8, inputs: vec![cl.buf.ptr(), cr.buf.ptr()] },
            None => CostSource { kernel: COST_AD_U8, inputs: vec![luma_l.buf.ptr(), luma_r.buf.ptr()] },
        },
        Cost::Census { width, height } => {
            let win = CensusWindow::new(width, height)?;
            let (cl, cr) = (gpu.buffer::<u64>(w * h)?, gpu.buffer::<u64>(w * h)?);
            for (img, c) in [(&luma_l, &cl), (&luma_r, &cr)] {
                let (ww, wh) = (win.width() as i32, win.height() as i32);
                gpu.launch(CENSUS, [blocks(w, 32), blocks(h, 8), 1], [32, 8, 1], 0, args![img, c, wi, hi, ww, wh])?;
            }
            let c = codes.insert((cl, cr));
            CostSource { kernel: COST_CENSUS, inputs: vec![c.0.ptr(), c.1.ptr()] }
        }
        Cost::Mi { .. } => {
            // The hierarchy on host copies of the lumas (the table is host logic): the
            // caller's views, or downloaded from the device (its luma of RGBA is the core's).
            let host_luma = |src: &AnySrc<'_>, luma: &DevImage<'_, u8>| -> Result<Image<u8>> {
                match src {
                    AnySrc::U8(Src::Host(v)) => Ok(v.to_image()),
                    AnySrc::Rgba8(Src::Host(v)) => Ok(v.convert()),
                    _ => {
                        let mut img = Image::<u8>::new(w, h)?;
                        gpu.download_view(luma, img.view_mut())?;
                        Ok(img)
                    }
                }
            };
            let (hl, hr) = (host_luma(&left, &luma_l)?, host_luma(&right, &luma_r)?);
            let t = gpu.upload(&mi_hierarchical_table(gpu, hl.view(), hr.view(), p)?)?;
            let t = table.insert(t);
            CostSource { kernel: COST_MI, inputs: vec![luma_l.buf.ptr(), luma_r.buf.ptr(), t.ptr()] }
        }
    };

    // 2 to 6 on every piece, stitched into the whole map; the occlusion classes too.
    let with_occ = p.fill && p.lr_check;
    let occ = if with_occ { Some(gpu.zeroed::<u8>(w * h)?) } else { None };
    let out = disp.open(gpu)?;
    let map = &out.target.buf;
    let counters = gpu.zeroed::<u64>(4)?;
    let (p1, p2) = p.penalties();
    let mut stats = StereoStats { tiles: plan.len(), p1, p2, ..Default::default() };
    stats.peak_bytes = match_tiles(gpu, &cost, luma_l.buf.ptr(), (w, h), &plan, p, map, occ.as_ref().map(|o| o.ptr()), &counters)? + whole_image;

    // 7. Hole filling over the whole map (step 1 into a copy, step 2 back), counting the
    // valid pixels of the result.
    let block = [256, 1, 1];
    if p.fill {
        let copy = gpu.buffer::<f32>(w * h)?;
        gpu.launch(FILL_BORDER, [blocks(h, 4), 1, 1], [128, 1, 1], 0, args![map, &copy, wi, hi, &counters])?;
        let occ_arg = occ.as_ref().map_or(Arg::Ptr(0), Arg::from);
        gpu.launch(FILL_LINES, [blocks(w * h, 256), 1, 1], block, 0, &[Arg::from(&copy), Arg::from(map), occ_arg, wi.into(), hi.into(), Arg::from(&counters)])?;
    } else {
        gpu.launch(COUNT_VALID, [blocks(w * h, 256), 1, 1], block, 0, args![map, n, &counters])?;
    }
    let mut c = [0u64; 4];
    gpu.download(&counters, &mut c)?;
    out.finish(gpu)?;
    drop((codes, table, colour));
    stats.rejected_uniqueness = c[REJECTED_UNIQUENESS] as usize;
    stats.rejected_lr = c[REJECTED_LR] as usize;
    stats.filled = c[FILLED] as usize;
    stats.valid = c[VALID] as usize;
    Ok(stats)
}

/// The summed path costs of one piece (`ew x eh`, volume `costs`) over the directions
/// `dirs`: all of them in one launch, their paths numbered one after another, adding
/// atomically into zeroed sums; or with [`AGGREGATION_ENV`]` = sequential` one launch per
/// direction. `guide` points at the piece's first pixel of the left luma (row stride `w`);
/// `params` are the disparity count, P1, P2 and the adaptive-P2 switch.
#[allow(clippy::too_many_arguments)]
fn aggregate<'g>(
    gpu: &'g Gpu,
    costs: &DevBuf<'_, u8>,
    guide: DevicePtr,
    w: i32,
    (ew, eh): (usize, usize),
    dirs: &[(i32, i32)],
    kind: usize,
    [nd, p1, p2, adaptive]: [i32; 4],
) -> Result<DevBuf<'g, u16>> {
    let paths_of = |(dx, dy): (i32, i32)| {
        let (adx, ady) = ((dx.unsigned_abs() as usize).min(ew), (dy.unsigned_abs() as usize).min(eh));
        ady * ew + adx * (eh - ady)
    };
    // The kernel's direction table: (dx, dy, first path) each, then (0, 0, paths in all).
    let table_of = |dirs: &[(i32, i32)]| -> Result<(Vec<i32>, usize)> {
        let mut t = Vec::with_capacity(3 * dirs.len() + 3);
        let mut total = 0;
        for &r in dirs {
            t.extend([r.0, r.1, int(total, "paths")?]);
            total += paths_of(r);
        }
        t.extend([0, 0, int(total, "paths")?]);
        Ok((t, total))
    };
    let (ewi, ehi) = (int(ew, "width")?, int(eh, "height")?);
    let launch = |sums: &DevBuf<'_, u16>, dirs: &[(i32, i32)], mode: i32| -> Result<()> {
        let (t, total) = table_of(dirs)?;
        let table = gpu.upload(&t)?;
        let n = dirs.len() as i32;
        let a = [Arg::from(costs), Arg::from(sums), Arg::Ptr(guide), w.into(), ewi.into(), ehi.into(), Arg::from(&table), n.into(), nd.into(), p1.into(), p2.into(), adaptive.into(), mode.into()];
        gpu.launch(AGGREGATE[kind], [blocks(total, AGG_WARPS), 1, 1], [32 * AGG_WARPS, 1, 1], 0, &a)
    };
    if tuning::chosen::<Aggregation>(gpu)? == Aggregation::Sequential {
        let sums = gpu.buffer::<u16>(costs.len())?;
        for (i, r) in dirs.iter().enumerate() {
            launch(&sums, std::slice::from_ref(r), if i == 0 { SUMS_STORE } else { SUMS_ADD })?;
        }
        Ok(sums)
    } else {
        let sums = gpu.zeroed::<u16>(costs.len())?;
        launch(&sums, dirs, SUMS_ATOMIC)?;
        Ok(sums)
    }
}

fn tessera_core_image<'g>(buf: DevBuf<'g, f32>, width: usize, height: usize) -> crate::device::DevImage<'g, f32> {
    crate::device::DevImage { buf, width, height }
}

fn unreachable_pair<T>() -> Result<T> {
    Err(Error::Backend("stereo: the pair's types changed between checks".into()))
}

/// Disparities per lane of a warp: 1, 2, 4 or 8 (the kernels' instantiations).
fn lanes_per_disparity(nd: usize) -> Result<usize> {
    if nd > MAX_DISPARITIES {
        return Err(Error::Backend(format!("stereo_sgm: the CUDA kernels handle at most {MAX_DISPARITIES} disparities, got {nd}")));
    }
    Ok(nd.div_ceil(32).next_power_of_two())
}

/// Stages 2 to 6 on every piece of `plan` of the `size` image (`guide`: its left luma),
/// writing the median (or the map) of each core into `out` (w x h) and, when given, the
/// occlusion classes into `occ`; counts into `counters`. Returns the core's working-set
/// accounting of the largest piece (one thread).
#[allow(clippy::too_many_arguments)]
fn match_tiles(
    gpu: &Gpu,
    cost: &CostSource,
    guide: DevicePtr,
    size: (usize, usize),
    plan: &[Tile],
    p: &StereoParams,
    out: &DevBuf<'_, f32>,
    occ: Option<DevicePtr>,
    counters: &DevBuf<'_, u64>,
) -> Result<usize> {
    let (w, _) = size;
    let nd = p.max_disparity;
    let k = lanes_per_disparity(nd)?;
    let kind = k.trailing_zeros() as usize;
    let dp = 32 * k;
    let (p1, p2) = p.penalties();
    let dirs: Vec<(i32, i32)> = p.paths.directions().iter().map(|r| (r.dx as i32, r.dy as i32)).collect();
    let wi = int(w, "width")?;
    let mut peak = 0;
    for t in plan {
        let e = t.ext;
        // The core in the piece's coordinates.
        let c = Rect { x: t.core.x - e.x, y: t.core.y - e.y, width: t.core.width, height: t.core.height };
        let (ew, eh) = (e.width, e.height);
        peak = peak.max(tile_bytes(ew, eh, nd, dirs.len()));
        let pixels = ew * eh;
        let volume = pixels.checked_mul(dp).ok_or(Error::OutOfMemory { bytes: usize::MAX })?;
        let (ewi, ehi, ndi, dpi) = (int(ew, "width")?, int(eh, "height")?, int(nd, "max_disparity")?, dp as i32);
        int(pixels, "pixels")?;
        let (x0, y0) = (int(e.x, "x")?, int(e.y, "y")?);
        let (cx, cy, cw, ch) = (c.x as i32, c.y as i32, c.width as i32, c.height as i32);

        // 1. The piece's cost volume.
        let costs = gpu.buffer::<u8>(volume)?;
        let mut a: Vec<Arg> = cost.inputs.iter().map(|&q| Arg::Ptr(q)).collect();
        a.extend([Arg::from(&costs), wi.into(), x0.into(), y0.into(), ewi.into(), ehi.into(), ndi.into(), dpi.into()]);
        gpu.launch(cost.kernel, [blocks(volume / 4, 256), 1, 1], [256, 1, 1], 0, &a)?;

        // 2. The path aggregation into the summed volume.
        let sums = aggregate(gpu, &costs, guide + (e.y * w + e.x) as u64, wi, (ew, eh), &dirs, kind, [ndi, p1 as i32, p2 as i32, p.adaptive_p2 as i32])?;
        drop(costs);

        // 3 to 5.
        let left = gpu.buffer::<f32>(pixels)?;
        let right = if p.lr_check { Some(gpu.buffer::<f32>(pixels)?) } else { None };
        let right_arg = right.as_ref().map_or(Arg::Ptr(0), Arg::from);
        let wta_blocks = blocks(pixels, WTA_WARPS).min(WTA_MAX_BLOCKS);
        gpu.launch(
            WTA[kind],
            [wta_blocks, 1, 1],
            [32 * WTA_WARPS, 1, 1],
            0,
            &[Arg::from(&sums), Arg::from(&left), right_arg, ewi.into(), ehi.into(), ndi.into(), (p.uniqueness as i32).into(), (p.subpixel as i32).into(), cx.into(), cy.into(), cw.into(), ch.into(), Arg::from(counters)],
        )?;
        drop(sums);
        if let Some(right) = &right {
            let occ_arg = occ.map_or(Arg::Ptr(0), |o| Arg::Ptr(o + (t.core.y * w + t.core.x) as u64));
            let md = p.lr_max_diff as i32;
            gpu.launch(
                LR_CHECK,
                [blocks(pixels, 256), 1, 1],
                [256, 1, 1],
                0,
                &[Arg::from(&left), Arg::from(right), ewi.into(), ehi.into(), md.into(), cx.into(), cy.into(), cw.into(), ch.into(), occ_arg, wi.into(), Arg::from(counters)],
            )?;
        }

        // 6. Median (or the map) of the core into its place.
        let dst = Arg::Ptr(out.ptr() + 4 * (t.core.y * w + t.core.x) as u64);
        gpu.launch(
            MEDIAN_STITCH,
            [blocks(c.width, 32), blocks(c.height, 8), 1],
            [32, 8, 1],
            0,
            &[Arg::from(&left), ewi.into(), ehi.into(), cx.into(), cy.into(), cw.into(), ch.into(), dst, wi.into(), (p.median as i32).into()],
        )?;
    }
    Ok(peak)
}

/// The MI table of [`Cost::Mi`] (the core's `cost_mi::hierarchical_table`: the pyramid and
/// the tables on the host), each intermediate matching pass (stages 2 to 6 with integer,
/// LR-checked disparities) on the device, every level's pair uploaded once. Returns the
/// 256 x 256 table as the kernel reads it.
fn mi_hierarchical_table(gpu: &Gpu, left: ImageView<'_, u8>, right: ImageView<'_, u8>, p: &StereoParams) -> Result<Vec<u8>> {
    let mut uploaded: Option<(usize, DevBuf<'_, u8>, DevBuf<'_, u8>)> = None;
    let mut pass = |pass: &MiPass<'_>, out: ImageViewMut<'_, f32>| -> Result<()> {
        let (q, (wk, hk)) = (pass.params, pass.left.size());
        let (_, dl, dr) = match uploaded.take() {
            Some(u) if u.0 == pass.level => uploaded.insert(u),
            _ => uploaded.insert((pass.level, gpu.upload_view(pass.left)?.buf, gpu.upload_view(pass.right)?.buf)),
        };
        let plan = plan_tiles(wk, hk, q.max_disparity, q.paths.count(), q.tiling)?;
        let t = gpu.upload(&table_bytes(pass.table))?;
        let cost = CostSource { kernel: COST_MI, inputs: vec![dl.ptr(), dr.ptr(), t.ptr()] };
        let map = gpu.buffer::<f32>(wk * hk)?;
        let counters = gpu.zeroed::<u64>(4)?;
        match_tiles(gpu, &cost, dl.ptr(), (wk, hk), &plan, q, &map, None, &counters)?;
        gpu.download_view(&tessera_core_image(map, wk, hk), out)
    };
    Ok(table_bytes(&hierarchical_table(left, right, p, &mut pass)?))
}

/// An MI table as the 65536 bytes the kernel reads (left intensity major).
fn table_bytes(t: &MiTable) -> Vec<u8> {
    (0..65536usize).map(|i| t.cost((i >> 8) as u8, i as u8)).collect()
}

