//! Drives `kernels/glare.cu` (and variance.cu's exact box means and variances): highlight
//! detection and correction. On the device: the luminance, its histograms, the local
//! statistics at every radius, the seed tests, the excess, the dilation of the fill mask
//! and the fill of every region (a block each). On the host, between launches, the two
//! sequential, order-dependent steps: growing the spots from the seeds (the core's
//! [`finish_spots`]) and labelling the regions to fill (the core's [`spots`]), with the
//! thresholds of the adaptive mode read off the device's histograms. The mask, the report
//! and the corrected image are the CPU's, exactly.

use crate::device::{args, blocks, int, Arg, DevImage, Gpu, Pod};
use crate::device_image::{AnyDst, AnySrc, Dst, Src, Staged};
use crate::filter::border_mode;
use crate::kernels::{Kernel, Module};
use crate::variance::{kernel_moments, Finish, Window};
use tessera_core::glare::{finish_spots, quantile, spots, GlareMode, GlareParams, GlareReport, MARGIN, WEIGHTED_INIT_LIMIT};
use tessera_core::image::{check_same_size, Pixel};
use tessera_core::{Image, Result, Rgba8};

const BLOCK: u32 = 256;

fn k(name: &'static str) -> Kernel {
    Kernel::new(Module::Glare, name)
}

/// Detection and correction ([`tessera_core::glare::glare`]).
pub(crate) fn glare(gpu: &Gpu, src: AnySrc<'_>, mask: Dst<'_, u8>, corrected: AnyDst<'_>, p: &GlareParams) -> Result<GlareReport> {
    match (src, corrected) {
        (AnySrc::U8(s), AnyDst::U8(d)) => run::<u8>(gpu, s, mask, d, p, Lane::U8),
        (AnySrc::U16(s), AnyDst::U16(d)) => run::<u16>(gpu, s, mask, d, p, Lane::U16),
        (AnySrc::F32(s), AnyDst::F32(d)) => run::<f32>(gpu, s, mask, d, p, Lane::F32),
        (AnySrc::Rgba8(s), AnyDst::Rgba8(d)) => run::<Rgba8>(gpu, s, mask, d, p, Lane::Rgba),
        _ => Err(tessera_core::backend::type_mismatch("glare correction")),
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Lane {
    U8,
    U16,
    F32,
    Rgba,
}

fn run<T: Pod + Pixel>(gpu: &Gpu, src: Src<'_, T>, mask: Dst<'_, u8>, corrected: Dst<'_, T>, p: &GlareParams, lane: Lane) -> Result<GlareReport> {
    // The CPU's order of checks: sizes of the two images, the parameters, the mask's size.
    check_same_size(src.size(), corrected.size())?;
    p.validate()?;
    check_same_size(src.size(), mask.size())?;
    let (w, h) = src.size();
    let n = w * h;
    let ni = int(n, "pixel count")?;
    let dsrc = src.stage(gpu)?;
    let grid1 = [blocks(n, BLOCK), 1, 1];
    let blk = [BLOCK, 1, 1];

    // The luminance the statistics run on: u8 (scale 255) or u16 (65535).
    let luma8: Option<DevImage<'_, u8>>;
    let luma16: Option<DevImage<'_, u16>>;
    let mut full_scale = 255.0f32;
    match lane {
        Lane::U8 => (luma8, luma16) = (None, None),
        Lane::U16 => {
            (luma8, luma16) = (None, None);
            full_scale = 65535.0;
        }
        Lane::F32 => {
            let top = gpu.zeroed::<u32>(1)?;
            gpu.launch(k("glare_top_f32"), grid1, blk, 0, args![&dsrc, ni, &top])?;
            let mut bits = [0u32];
            gpu.download(&top, &mut bits)?;
            let t = f32::from_bits(bits[0]);
            full_scale = if t > 0.0 { t } else { 1.0 };
            let l = gpu.image::<u16>(w, h)?;
            gpu.launch(k("glare_quantize_f32"), grid1, blk, 0, args![&dsrc, &l, ni, 65535.0f32 / full_scale])?;
            (luma8, luma16) = (None, Some(l));
        }
        Lane::Rgba => {
            let l = gpu.image::<u8>(w, h)?;
            let unrounded = gpu.buffer::<f32>(n)?;
            gpu.launch(Kernel::new(Module::Contrast, "luma_rgba"), grid1, blk, 0, args![&dsrc, &l, &unrounded, ni])?;
            (luma8, luma16) = (Some(l), None);
        }
    }
    // The luminance as a kernel argument, and its type's kernels.
    let (luma, sixteen): (Arg, bool) = match (lane, &luma8, &luma16) {
        (Lane::U8, _, _) => (Arg::from(&dsrc), false),
        (Lane::U16, _, _) => (Arg::from(&dsrc), true),
        (_, Some(l), _) => (Arg::from(l), false),
        (_, _, Some(l)) => (Arg::from(l), true),
        _ => unreachable!("every lane sets its luminance"),
    };
    let q: u32 = if sixteen { 65535 } else { 255 };
    let pick = |eight: &'static str, wide: &'static str| k(if sixteen { wide } else { eight });
    let histogram = |kernel: Kernel, extra: &[Arg]| -> Result<Vec<usize>> {
        let bins = gpu.zeroed::<u32>(q as usize + 1)?;
        let mut list = vec![luma];
        list.extend_from_slice(extra);
        list.extend_from_slice(args![&bins]);
        gpu.launch(kernel, grid1, blk, 0, &list)?;
        let mut host = vec![0u32; q as usize + 1];
        gpu.download(&bins, &mut host)?;
        Ok(host.into_iter().map(|c| c as usize).collect())
    };

    let qf = q as f32;
    let bright = match p.mode {
        GlareMode::Manual => p.brightness,
        GlareMode::Adaptive => {
            let median = quantile(&histogram(pick("glare_hist_u8", "glare_hist_u16"), args![ni])?, 0.5) as f32 / qf;
            (median + 0.75 * (1.0 - median)).clamp(0.88, 0.95)
        }
    };
    let mut cmin = p.min_contrast;
    let mut radii = p.radii.clone();
    radii.sort_unstable();
    radii.dedup();
    let flags = gpu.zeroed::<u8>(n)?;
    let excess = gpu.buffer::<f32>(n)?;
    let (mean, var) = (gpu.buffer::<f32>(n)?, gpu.buffer::<f32>(n)?);
    let (mode, outside) = border_mode(p.border);
    let (wi, hi) = (int(w, "width")?, int(h, "height")?);
    let k2 = p.k_sigma * p.k_sigma;
    for (i, &r) in radii.iter().enumerate() {
        // Box means and exact variances of radius r of the luminance.
        let window = Window { r, tent: false, mode, outside };
        let finish = Finish::MeanVar { mean: Arg::from(&mean), var: Arg::from(&var), total: ((2 * r + 1) as u64).pow(2) };
        kernel_moments(gpu, luma, if sixteen { "u16" } else { "u8" }, (w, h), &window, 0.0, finish)?;
        if i == 0 && p.mode == GlareMode::Adaptive {
            let mad = quantile(&histogram(pick("glare_mad_hist_u8", "glare_mad_hist_u16"), args![&mean, ni, q as i32])?, 0.5) as f32 / qf;
            cmin = (4.0 * 1.4826 * mad).max(0.04);
        }
        let mut list = vec![luma];
        list.extend_from_slice(args![&mean, &var, ni, cmin * qf, k2, &flags]);
        gpu.launch(pick("glare_flags_u8", "glare_flags_u16"), grid1, blk, 0, &list)?;
        if i + 1 == radii.len() {
            let mut list = vec![luma];
            list.extend_from_slice(args![&mean, ni, &excess]);
            gpu.launch(pick("glare_excess_u8", "glare_excess_u16"), grid1, blk, 0, &list)?;
        }
    }
    let seeds = gpu.buffer::<u8>(n)?;
    let rgba = if lane == Lane::Rgba { Arg::from(&dsrc) } else { Arg::Ptr(0) };
    let mut list = vec![luma, rgba];
    list.extend_from_slice(args![&flags, ni, qf, bright, p.max_saturation, &seeds]);
    gpu.launch(pick("glare_seeds_u8", "glare_seeds_u16"), grid1, blk, 0, &list)?;

    // Growing the spots: sequential, on the host (module doc).
    let mut host_mask = Image::<u8>::new(w, h)?;
    let mut host_excess = Image::<f32>::new(w, h)?;
    gpu.download(&seeds, host_mask.as_mut_slice())?;
    gpu.download(&excess, host_excess.as_mut_slice())?;
    let report = finish_spots(host_mask.view_mut(), host_excess.view(), p, bright, cmin, full_scale)?;
    // The mask to the output (a host view, or a device image written in place) and to the
    // device for the fill.
    let dmask = match mask {
        Dst::Host(mut m) => {
            m.copy_from(host_mask.view())?;
            Staged::Own(DevImage { buf: gpu.upload(host_mask.as_slice())?, width: w, height: h })
        }
        Dst::Device(m) => {
            gpu.upload_view_into(m, host_mask.view())?;
            Staged::Caller(m)
        }
    };

    // The fill: the mask dilated on the device, its regions labelled here, each filled by
    // one block.
    let grown = gpu.buffer::<u8>(n)?;
    gpu.launch(k("glare_dilate"), [blocks(w, BLOCK), h as u32, 1], blk, 0, args![&dmask, &grown, wi, hi, p.fill_grow as i32])?;
    let mut host_grown = Image::<u8>::new(w, h)?;
    gpu.download(&grown, host_grown.as_mut_slice())?;
    let regions = spots(host_grown.view())?;
    // The corrected image starts as the input (copied on the device).
    let out = corrected.open(gpu)?;
    gpu.copy_image(&out.target, &dsrc)?;
    if !regions.is_empty() {
        let channels: i32 = if lane == Lane::Rgba { 3 } else { 1 };
        let mut labels = vec![-1i32; n];
        let mut table: Vec<i64> = Vec::with_capacity(6 * regions.len());
        let mut cells = 0i64;
        for (s, spot) in regions.iter().enumerate() {
            for &(x, y) in &spot.pixels {
                labels[y as usize * w + x as usize] = s as i32;
            }
            let (bx0, by0, bx1, by1) = spot.bbox;
            let (x0, y0) = (bx0.saturating_sub(MARGIN), by0.saturating_sub(MARGIN));
            let (x1, y1) = ((bx1 + MARGIN).min(w - 1), (by1 + MARGIN).min(h - 1));
            let (gw, gh) = ((x1 - x0 + 1) as i64, (y1 - y0 + 1) as i64);
            table.extend([x0 as i64, y0 as i64, gw, gh, s as i64, cells]);
            cells += gw * gh * channels as i64;
        }
        let (dlabels, dtable) = (gpu.upload(&labels)?, gpu.upload(&table)?);
        let grid = gpu.buffer::<f32>(cells as usize)?;
        let solve = match lane {
            Lane::U8 | Lane::Rgba => "glare_solve_u8",
            Lane::U16 => "glare_solve_u16",
            Lane::F32 => "glare_solve_f32",
        };
        let lanes: i32 = if lane == Lane::Rgba { 4 } else { 1 };
        let limit = WEIGHTED_INIT_LIMIT.min(i32::MAX as usize) as i32;
        gpu.launch(
            k(solve),
            [int(regions.len(), "regions")? as u32, 1, 1],
            [128, 1, 1],
            0,
            args![&dsrc, &out.target, &grown, &dlabels, &dtable, &grid, wi, channels, lanes, p.fill_iterations as i32, limit],
        )?;
    }
    out.finish(gpu)?;
    Ok(report)
}
