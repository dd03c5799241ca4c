//! The `stereo` suite: SGM on Middlebury cones (450x375, 64 disparities; every cost and
//! path set, with its bad 1.0 beside the time, as OpenCV's `stereo_sgbm_*` in
//! `../shared/bench/opencv_anchor.sh`), a synthetic 1024x440 pair at 128 disparities and
//! 4 paths (the size the fastest GPU library quotes), and the original CUDA port's table
//! (384x288 = tsukuba, 512x512, 1024x1024 at 100 disparities, AD, MI and hierarchical MI). Every run also
//! records its memory: the core's working-set account (`peak_bytes_core`), the process's
//! peak resident memory during the call (`peak_rss_bytes`: Linux `VmHWM`, reset before the
//! call; it includes everything the process holds, images and allocator caches too) and
//! that peak minus the resident memory just before the call (`peak_rss_delta_bytes`: the
//! new memory the call touched; near 0 when the allocator reuses pages a previous case
//! left resident, so only the first case of a size shows the full working set).

use super::memory::{current_rss, peak_rss, reset_peak};
use super::{Bench, Recorder};
use anyhow::{Context, Result};
use serde_json::json;
use std::path::{Path, PathBuf};
use tessera::stereo::{self, Cost, Paths, StereoParams};
use tessera::{AnyImage, AnyView, Image, Rgba8};

pub(super) fn data_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("TESSERA_DATA") {
        return PathBuf::from(d).join("stereo");
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let near = root.join("../shared/data/stereo");
    if near.exists() {
        near
    } else {
        root.join("../../shared/data/stereo")
    }
}

pub(super) fn rgba(path: &Path) -> Result<Image<Rgba8>> {
    match tessera::io::load(path)? {
        AnyImage::Rgba8(i) => Ok(i),
        AnyImage::U8(i) => Ok(i.convert()),
        _ => anyhow::bail!("{}: not an 8-bit image", path.display()),
    }
}

pub(super) fn ground_truth(path: &Path) -> Result<Image<f32>> {
    match tessera::io::load(path)? {
        AnyImage::U8(i) => Ok(stereo::eval::ground_truth_from_u8(i.view(), 4.0)?),
        AnyImage::Rgba8(i) => Ok(stereo::eval::ground_truth_from_u8(i.convert::<u8>().view(), 4.0)?),
        _ => anyhow::bail!("{}: ground truth must be 8-bit", path.display()),
    }
}

/// A smooth random texture (sum of a few sinusoids and noise) shifted by a disparity
/// that ramps from 10 % to 90 % of `max_disp` left to right: right(x) = left(x + d(x)).
pub(super) fn synthetic(w: usize, h: usize, max_disp: usize) -> Result<(Image<u8>, Image<u8>)> {
    let tex = |x: f64, y: f64| -> u8 {
        let n = ((x as i64).wrapping_mul(73856093) ^ (y as i64).wrapping_mul(19349663)) as u64;
        let noise = ((n.wrapping_mul(0x9E3779B97F4A7C15) >> 58) as f64) - 32.0;
        (128.0 + 50.0 * (x * 0.07).sin() * (y * 0.05).cos() + 30.0 * ((x + y) * 0.13).sin() + noise).clamp(0.0, 255.0) as u8
    };
    let d = |x: usize| max_disp as f64 * (0.1 + 0.8 * x as f64 / w as f64);
    let left = Image::from_fn(w, h, |x, y| tex(x as f64, y as f64))?;
    let right = Image::from_fn(w, h, |x, y| tex(x as f64 + d(x), y as f64))?;
    Ok((left, right))
}

struct Case<'a> {
    name: &'a str,
    left: AnyView<'a>,
    right: AnyView<'a>,
    gt: Option<&'a Image<f32>>,
    params: StereoParams,
    expected_ms: f64,
}

fn run_case(b: &Bench, r: &mut Recorder, c: &Case<'_>, both_thread_modes: bool) -> Result<()> {
    let wanted = r.wants(c.name) || (both_thread_modes && r.wants(&format!("{}_1thread", c.name)));
    if !wanted {
        return Ok(());
    }
    let (w, h) = c.left.size();
    let mut disp = Image::<f32>::new(w, h)?;
    // One untimed run for the scores and the memory figures.
    let before = current_rss();
    let reset = reset_peak();
    let stats = b.backend.stereo_sgm(c.left, c.right, disp.view_mut(), &c.params)?;
    let peak = if reset { peak_rss() } else { None };
    let measured = match (before, peak) {
        (Some(a), Some(p)) => Some(p.saturating_sub(a)),
        _ => None,
    };
    let mut params = json!({
        "w": w, "h": h, "max_disp": c.params.max_disparity, "cost": format!("{:?}", c.params.cost),
        "paths": c.params.paths.count(), "p1": stats.p1, "p2": stats.p2,
        "peak_bytes_core": stats.peak_bytes, "peak_rss_bytes": peak, "peak_rss_delta_bytes": measured, "tiles": stats.tiles,
    });
    if let Some(gt) = c.gt {
        let s = stereo::evaluate(disp.view(), gt.view())?;
        params["bad1_invalid_as_bad"] = json!((s.bad1_all * 100.0).round() / 100.0);
        params["bad1_on_valid"] = json!((s.bad1_valid * 100.0).round() / 100.0);
        params["density"] = json!((s.density * 10.0).round() / 10.0);
    }
    let reps = b.reps_for(c.expected_ms);
    let name = b.backend.name().to_string();
    r.time(c.name, params.clone(), &name, reps, || b.backend.stereo_sgm(c.left, c.right, disp.view_mut(), &c.params).map(|_| ()));
    if both_thread_modes {
        let single = format!("{}_1thread", c.name);
        r.time(&single, params, b.single.name(), reps.min(5), || {
            b.single.stereo_sgm(c.left, c.right, disp.view_mut(), &c.params).map(|_| ())
        });
    }
    Ok(())
}

pub fn run(b: &Bench, r: &mut Recorder) -> Result<()> {
    let dir = data_dir();
    let cones_l = rgba(&dir.join("cones/im2.png")).context("cones (set TESSERA_DATA to the shared data folder)")?;
    let cones_r = rgba(&dir.join("cones/im6.png"))?;
    let cones_gt = ground_truth(&dir.join("cones/disp2.png"))?;
    let teddy_l = rgba(&dir.join("teddy/im2.png"))?;
    let teddy_r = rgba(&dir.join("teddy/im6.png"))?;
    let teddy_gt = ground_truth(&dir.join("teddy/disp2.pgm"))?;
    let base = StereoParams::default();

    // Cones and teddy, 64 disparities: the default (census, 8 paths, full refinement), then
    // the other path sets and costs.
    let scenes = [("cones", &cones_l, &cones_r, &cones_gt), ("teddy", &teddy_l, &teddy_r, &teddy_gt)];
    for (scene, l, rr, gt) in scenes {
        let mut variants = vec![
            ("census_8path", StereoParams { ..base }, 60.0, true),
            ("census_4path", StereoParams { paths: Paths::Four, ..base }, 40.0, false),
            ("census_5path", StereoParams { paths: Paths::Five, ..base }, 40.0, false),
            ("ad_8path", StereoParams { cost: Cost::Ad, ..base }, 60.0, false),
            ("mi_8path", StereoParams { cost: Cost::MI, ..base }, 180.0, false),
        ];
        if !b.quick {
            variants.push(("census_16path", StereoParams { paths: Paths::Sixteen, ..base }, 120.0, false));
        }
        for (tag, params, ms, both) in variants {
            let name = format!("stereo_{scene}_{tag}");
            let c = Case { name: &name, left: AnyView::Rgba8(l.view()), right: AnyView::Rgba8(rr.view()), gt: Some(gt), params, expected_ms: ms };
            run_case(b, r, &c, both && scene == "cones")?;
        }
    }

    // 1024x440, 128 disparities, 4 paths (census, no refinement beyond WTA + subpixel).
    let (sl, sr) = synthetic(1024, 440, 128)?;
    let p = StereoParams { max_disparity: 128, paths: Paths::Four, lr_check: false, median: false, fill: false, ..base };
    let c = Case { name: "stereo_synth1024x440_census_4path", left: AnyView::U8(sl.view()), right: AnyView::U8(sr.view()), gt: None, params: p, expected_ms: 150.0 };
    run_case(b, r, &c, true)?;

    // The original's table: 100 disparities, AD and MI (plain and hierarchical), 8 paths,
    // no refinement (it had none).
    let tsu_l = rgba(&dir.join("tsukuba/left.png"))?;
    let tsu_r = rgba(&dir.join("tsukuba/right.png"))?;
    let mut table: Vec<(String, Image<u8>, Image<u8>)> = vec![("384x288".into(), tsu_l.convert(), tsu_r.convert())];
    for s in [512usize, 1024] {
        if b.quick && s > 512 {
            continue;
        }
        let (l, rr) = synthetic(s, s, 100)?;
        table.push((format!("{s}x{s}"), l, rr));
    }
    for (size, l, rr) in &table {
        for (tag, cost, ms_per_px) in [("ad", Cost::Ad, 0.001), ("mi", Cost::MI, 0.003), ("mi_hierarchical", Cost::MI_HIERARCHICAL, 0.0015)] {
            let p = StereoParams { max_disparity: 100, cost, lr_check: false, median: false, fill: false, subpixel: false, ..base };
            let name = format!("stereo_original_{size}_{tag}_8path");
            let px = (l.width() * l.height()) as f64;
            let c = Case { name: &name, left: AnyView::U8(l.view()), right: AnyView::U8(rr.view()), gt: None, params: p, expected_ms: px * ms_per_px };
            run_case(b, r, &c, false)?;
        }
    }
    Ok(())
}
