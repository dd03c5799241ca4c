//! `kernels/stereo.cu` on the CPU shim against the CPU backend: every disparity bit for
//! bit (the subpixel values included: the GPU's parabola is the same IEEE f32 division and
//! addition) and the same `StereoStats`. Images are small: the shim runs 32 OS threads per
//! pixel of the WTA and per path of the aggregation.

use crate::common;

use tessera_core::stereo::tile_bytes;
use tessera_core::stereo::{Cost, Paths, StereoParams, StereoStats, Tiling};
use tessera_core::{AnyView, Backend, CpuBackend, Image, Parallelism, Rgba8};

fn lcg(s: &mut u64) -> u64 {
    *s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    *s >> 33
}

/// A textured left image and a right one seeing it shifted by 1 to 5 pixels by row band,
/// with a little noise (the core's test scene).
fn scene(w: usize, h: usize, seed: u64) -> (Image<u8>, Image<u8>) {
    let mut s = seed | 1;
    let left = Image::from_fn(w, h, |_, _| (lcg(&mut s) % 200) as u8).unwrap();
    let right = Image::from_fn(w, h, |x, y| {
        let d = 1 + (y / 4) % 5;
        left.view().row(y)[(x + d).min(w - 1)].saturating_add((lcg(&mut s) % 6) as u8)
    })
    .unwrap();
    (left, right)
}

/// Uncorrelated random images (many invalid pixels, holes, uniqueness failures).
fn noise(w: usize, h: usize, seed: u64) -> Image<u8> {
    let mut s = seed | 1;
    Image::from_fn(w, h, |_, _| (lcg(&mut s) % 256) as u8).unwrap()
}

/// A crop of a Middlebury image, as gray (Rec. 601 luma) and as RGBA.
fn middlebury(scene: &str, file: &str, x: u32, y: u32, w: u32, h: u32) -> (Image<u8>, Image<Rgba8>) {
    let path = common::shared_data().join("stereo").join(scene).join(file);
    let img = image::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).to_rgba8();
    let px = |i: usize, j: usize| Rgba8::from_array(img.get_pixel(x + i as u32, y + j as u32).0);
    let rgba = Image::from_fn(w as usize, h as usize, px).unwrap();
    let gray = Image::from_fn(w as usize, h as usize, |i, j| px(i, j).luma()).unwrap();
    (gray, rgba)
}

fn run(backend: &dyn Backend, l: AnyView<'_>, r: AnyView<'_>, p: &StereoParams) -> tessera_core::Result<(Image<f32>, StereoStats)> {
    let (w, h) = l.size();
    let mut d = Image::<f32>::new(w, h).unwrap();
    let s = backend.stereo_sgm(l, r, d.view_mut(), p)?;
    Ok((d, s))
}

/// The GPU's map and stats equal the CPU's (sequential) exactly; returns the stats.
fn assert_same(gpu: &dyn Backend, l: AnyView<'_>, r: AnyView<'_>, p: &StereoParams, what: &str) -> StereoStats {
    let cpu = CpuBackend::new(Parallelism::Sequential);
    let (want, ws) = run(&cpu, l, r, p).unwrap();
    let (got, gs) = run(gpu, l, r, p).unwrap_or_else(|e| panic!("{what}: {e}"));
    let (w, h) = want.size();
    for y in 0..h {
        for x in 0..w {
            let (a, b) = (want.view().row(y)[x], got.view().row(y)[x]);
            assert!(a.to_bits() == b.to_bits(), "{what}: ({x},{y}) cpu {a} gpu {b}");
        }
    }
    assert_eq!(gs, ws, "{what}: stats");
    gs
}

fn gray<'a>(l: &'a Image<u8>, r: &'a Image<u8>) -> (AnyView<'a>, AnyView<'a>) {
    (AnyView::U8(l.view()), AnyView::U8(r.view()))
}

#[test]
fn every_cost_and_path_set_matches_the_cpu() {
    let gpu = tessera_cuda::open_shim();
    let (l, r) = scene(21, 10, 1);
    let (a, b) = gray(&l, &r);
    let costs = [Cost::CENSUS_7X5, Cost::CENSUS_9X7, Cost::Census { width: 3, height: 1 }, Cost::Census { width: 1, height: 3 }, Cost::Ad];
    let path_sets = [Paths::Four, Paths::Five, Paths::Eight, Paths::Sixteen];
    // The cost kernels and the aggregation meet only through the cost volume: by default
    // each cost and each path set once, all 20 pairs under `--full`.
    let coverage = if common::full() { common::Coverage::Full } else { common::Coverage::Each };
    for case in common::cases_at(&[costs.len(), path_sets.len()], coverage) {
        let (cost, paths) = (costs[case[0]], path_sets[case[1]]);
        let p = StereoParams { max_disparity: 6, cost, paths, uniqueness: 10, ..Default::default() };
        assert_same(&*gpu, a, b, &p, &format!("{cost:?} {paths:?}"));
    }
}

#[test]
fn every_stage_switch_matches_the_cpu() {
    let gpu = tessera_cuda::open_shim();
    let (l, r) = scene(17, 9, 2);
    let (a, b) = gray(&l, &r);
    // The 32 combinations take a minute on the shim: by default the pairwise subset
    // (every two switches in all four states), all of them under `--full`.
    for case in common::cases(&[2; 5]) {
        let on = |i: usize| case[i] == 1;
        let bits = case.iter().rev().fold(0, |acc, &b| acc << 1 | b);
        let p = StereoParams {
            max_disparity: 5,
            subpixel: on(0),
            lr_check: on(1),
            median: on(2),
            fill: on(3),
            adaptive_p2: on(4),
            uniqueness: if on(4) { 15 } else { 0 },
            lr_max_diff: if on(4) { 0 } else { 2 },
            paths: Paths::Four,
            ..Default::default()
        };
        assert_same(&*gpu, a, b, &p, &format!("switches {bits:05b}"));
    }
}

#[test]
fn random_pairs_and_penalties_match_the_cpu() {
    let gpu = tessera_cuda::open_shim();
    for (seed, (w, h, nd)) in [(19, 7, 5), (23, 9, 12), (40, 5, 33)].into_iter().enumerate() {
        let (l, r) = (noise(w, h, 3 + seed as u64), noise(w, h, 90 + seed as u64));
        let (a, b) = gray(&l, &r);
        let p = StereoParams { max_disparity: nd, p1: Some(7 + seed as u16), p2: Some(90 + 30 * seed as u16), uniqueness: 5, ..Default::default() };
        assert_same(&*gpu, a, b, &p, &format!("noise {w}x{h} D {nd}"));
        // The largest P2 the 16 paths allow with AD costs (sums up to the u16 bound).
        let p2 = Some((65535 / 16 - 255) as u16);
        let p = StereoParams { max_disparity: nd, cost: Cost::Ad, paths: Paths::Sixteen, p1: Some(3), p2, adaptive_p2: seed % 2 == 0, ..Default::default() };
        assert_same(&*gpu, a, b, &p, &format!("noise {w}x{h} D {nd} max P2"));
    }
}

#[test]
fn wide_disparity_ranges_match_the_cpu() {
    // Four and eight disparities per lane (the aggregation's packed 64-bit atomic adds),
    // with padding disparities (100 of 128, 200 of 256); the largest P2 of 16 paths puts
    // sums near the u16 bound, where a carry between packed fields would show.
    let gpu = tessera_cuda::open_shim();
    let (l, r) = (noise(205, 2, 5), noise(205, 2, 6));
    let (a, b) = gray(&l, &r);
    for nd in [100, 200] {
        let p = StereoParams { max_disparity: nd, paths: Paths::Eight, uniqueness: 5, ..Default::default() };
        assert_same(&*gpu, a, b, &p, &format!("noise D {nd}"));
        let p2 = Some((65535 / 16 - 255) as u16);
        let p = StereoParams { max_disparity: nd, cost: Cost::Ad, paths: Paths::Sixteen, p1: Some(3), p2, ..Default::default() };
        assert_same(&*gpu, a, b, &p, &format!("noise D {nd} max P2"));
    }
}

#[test]
fn sequential_aggregation_matches_the_cpu() {
    // The launch-per-direction aggregation kept for measuring against the one-launch one.
    // Other stereo tests may run while the switch is set (only they read it): both
    // designs are exact.
    let gpu = tessera_cuda::open_shim();
    std::env::set_var(tessera_cuda::SGM_AGGREGATION_ENV, "sequential");
    let (l, r) = scene(23, 9, 4);
    let (a, b) = gray(&l, &r);
    for (nd, paths) in [(6, Paths::Four), (12, Paths::Sixteen), (20, Paths::Eight)] {
        let p = StereoParams { max_disparity: nd, paths, adaptive_p2: true, ..Default::default() };
        assert_same(&*gpu, a, b, &p, &format!("sequential D {nd} {paths:?}"));
    }
    let (l, r) = (noise(140, 2, 8), noise(140, 2, 9));
    let p = StereoParams { max_disparity: 130, paths: Paths::Four, ..Default::default() };
    assert_same(&*gpu, AnyView::U8(l.view()), AnyView::U8(r.view()), &p, "sequential D 130");
    std::env::remove_var(tessera_cuda::SGM_AGGREGATION_ENV);
}

#[test]
fn thin_images_match_the_cpu() {
    let gpu = tessera_cuda::open_shim();
    let shapes = [(16, 1, 4), (2, 9, 1), (3, 1, 2), (70, 2, 40), (5, 30, 3)];
    for case in common::cases(&[shapes.len(), 2]) {
        let ((w, h, nd), paths) = (shapes[case[0]], [Paths::Eight, Paths::Sixteen][case[1]]);
        let (l, r) = scene(w, h, 7);
        let (a, b) = gray(&l, &r);
        let p = StereoParams { max_disparity: nd, paths, cost: Cost::Census { width: 3, height: 3 }, ..Default::default() };
        assert_same(&*gpu, a, b, &p, &format!("{w}x{h} D {nd} {paths:?}"));
    }
}

#[test]
fn middlebury_crops_match_the_cpu() {
    let gpu = tessera_cuda::open_shim();
    // One scene by default, both under `--full` (a scene takes 20 s on the shim).
    let scenes = [("cones", 200, 150), ("teddy", 150, 180)];
    for &(name, x, y) in &scenes[..if common::full() { 2 } else { 1 }] {
        let (lg, _) = middlebury(name, "im2.png", x, y, 96, 64);
        let (rg, _) = middlebury(name, "im6.png", x, y, 96, 64);
        let p = StereoParams { max_disparity: 32, ..Default::default() };
        let s = assert_same(&*gpu, AnyView::U8(lg.view()), AnyView::U8(rg.view()), &p, &format!("{name} 96x64 census"));
        assert!(s.valid == 96 * 64 && s.filled > 0 && s.rejected_lr > 0, "{name}: {s:?}");
    }
    // 40 and 64 disparities: two per lane, padding lanes in the first case.
    let (lg, _) = middlebury("cones", "im2.png", 100, 100, 80, 10);
    let (rg, _) = middlebury("cones", "im6.png", 100, 100, 80, 10);
    for nd in [40, 64] {
        let p = StereoParams { max_disparity: nd, uniqueness: 5, paths: Paths::Four, ..Default::default() };
        assert_same(&*gpu, AnyView::U8(lg.view()), AnyView::U8(rg.view()), &p, &format!("cones D {nd}"));
    }
}

#[test]
fn colour_pairs_match_the_cpu() {
    let gpu = tessera_cuda::open_shim();
    let (_, lc) = middlebury("teddy", "im2.png", 300, 60, 30, 14);
    let (_, rc) = middlebury("teddy", "im6.png", 300, 60, 30, 14);
    let (a, b) = (AnyView::Rgba8(lc.view()), AnyView::Rgba8(rc.view()));
    for cost in [Cost::CENSUS_7X5, Cost::Ad, Cost::Mi { iterations: 1, levels: 0 }] {
        let p = StereoParams { max_disparity: 10, cost, paths: Paths::Five, ..Default::default() };
        assert_same(&*gpu, a, b, &p, &format!("rgba {cost:?}"));
    }
}

#[test]
fn mutual_information_matches_the_cpu() {
    let gpu = tessera_cuda::open_shim();
    let (l, _) = middlebury("cones", "im2.png", 150, 120, 32, 16);
    let (r, _) = middlebury("cones", "im6.png", 150, 120, 32, 16);
    let (a, b) = gray(&l, &r);
    for (iterations, levels) in [(2, 0), (2, 1), (1, 2)] {
        let p = StereoParams { max_disparity: 12, cost: Cost::Mi { iterations, levels }, paths: Paths::Four, ..Default::default() };
        assert_same(&*gpu, a, b, &p, &format!("MI {iterations} {levels}"));
    }
}

#[test]
fn tiles_and_bands_match_the_cpu() {
    let gpu = tessera_cuda::open_shim();
    let (l, r) = scene(36, 34, 5);
    let (a, b) = gray(&l, &r);
    let base = StereoParams { max_disparity: 6, paths: Paths::Four, ..Default::default() };
    let s = assert_same(&*gpu, a, b, &StereoParams { tiling: Tiling::Tiles { width: 16, height: 16, overlap: 3 }, ..base }, "tiles");
    assert_eq!(s.tiles, 9);
    // A budget that leaves bands of a few rows: the whole-image buffers (census, fill, LR
    // check: 28 bytes a pixel) and bands of 2 x 3 + 6 rows.
    let budget = 36 * 34 * 28 + tile_bytes(36, 12, 6, 4);
    let s = assert_same(&*gpu, a, b, &StereoParams { tiling: Tiling::Auto { max_bytes: budget, overlap: 3 }, ..base }, "bands");
    assert!(s.tiles > 1, "{s:?}");
}

#[test]
fn strided_views_in_and_out() {
    let gpu = tessera_cuda::open_shim();
    let cpu = CpuBackend::new(Parallelism::Sequential);
    let (l, r) = scene(30, 16, 9);
    let (lv, rv) = (l.view().crop(3, 2, 21, 11).unwrap(), r.view().crop(3, 2, 21, 11).unwrap());
    let p = StereoParams { max_disparity: 6, ..Default::default() };
    let (want, ws) = run(&cpu, AnyView::U8(lv), AnyView::U8(rv), &p).unwrap();
    let mut out = Image::<f32>::new(26, 15).unwrap();
    let gs = gpu.stereo_sgm(AnyView::U8(lv), AnyView::U8(rv), out.view_mut().crop_mut(4, 3, 21, 11).unwrap(), &p).unwrap();
    assert_eq!(gs, ws);
    for y in 0..11 {
        let got = &out.view().row(y + 3)[4..25];
        assert!(got.iter().zip(want.view().row(y)).all(|(a, b)| a.to_bits() == b.to_bits()), "row {y}");
    }
}

#[test]
fn bad_input_gives_the_cpus_errors() {
    let gpu = tessera_cuda::open_shim();
    let cpu = CpuBackend::new(Parallelism::Sequential);
    let (l, r) = scene(16, 8, 1);
    let small = Image::<u8>::new(15, 8).unwrap();
    let f = Image::<f32>::new(16, 8).unwrap();
    let c = Image::<Rgba8>::new(16, 8).unwrap();
    let one = Image::<u8>::new(1, 8).unwrap();
    let p = StereoParams { max_disparity: 4, ..Default::default() };
    let bad = [
        StereoParams { max_disparity: 16, ..p },
        StereoParams { max_disparity: 0, ..p },
        StereoParams { cost: Cost::Census { width: 4, height: 3 }, ..p },
        StereoParams { cost: Cost::Census { width: 11, height: 7 }, ..p },
        StereoParams { cost: Cost::Mi { iterations: 1, levels: 6 }, ..p },
        StereoParams { cost: Cost::Mi { iterations: 0, levels: 0 }, ..p },
        StereoParams { p1: Some(50), p2: Some(10), ..p },
        StereoParams { p2: Some(9000), ..p },
        StereoParams { uniqueness: 100, ..p },
        StereoParams { tiling: Tiling::Tiles { width: 8, height: 30, overlap: 2 }, ..p },
        StereoParams { tiling: Tiling::Auto { max_bytes: 0, overlap: 2 }, ..p },
        StereoParams { tiling: Tiling::Auto { max_bytes: 3000, overlap: 2 }, ..p },
    ];
    let same = |a: AnyView<'_>, b: AnyView<'_>, w: usize, q: &StereoParams, what: &str| {
        let mut d1 = Image::<f32>::new(w, 8).unwrap();
        let mut d2 = Image::<f32>::new(w, 8).unwrap();
        let want = cpu.stereo_sgm(a, b, d1.view_mut(), q).expect_err(what);
        let got = gpu.stereo_sgm(a, b, d2.view_mut(), q).expect_err(what);
        assert_eq!(format!("{got:?}"), format!("{want:?}"), "{what}");
    };
    for (i, q) in bad.iter().enumerate() {
        same(AnyView::U8(l.view()), AnyView::U8(r.view()), 16, q, &format!("params {i}"));
    }
    same(AnyView::U8(l.view()), AnyView::U8(small.view()), 16, &p, "sizes");
    same(AnyView::U8(l.view()), AnyView::U8(r.view()), 15, &p, "output size");
    same(AnyView::F32(f.view()), AnyView::F32(f.view()), 16, &p, "f32");
    same(AnyView::U8(l.view()), AnyView::Rgba8(c.view()), 16, &p, "mixed");
    same(AnyView::U8(one.view()), AnyView::U8(one.view()), 1, &p, "one column");
}

#[test]
fn more_disparities_than_the_kernels_hold_is_an_error_not_a_panic() {
    let gpu = tessera_cuda::open_shim();
    let (l, r) = scene(300, 1, 1);
    let mut d = Image::<f32>::new(300, 1).unwrap();
    let p = StereoParams { max_disparity: 257, ..Default::default() };
    let e = gpu.stereo_sgm(AnyView::U8(l.view()), AnyView::U8(r.view()), d.view_mut(), &p).unwrap_err();
    assert!(format!("{e}").contains("256"), "{e}");
}

#[test]
fn pairs_on_device_images_give_the_host_calls_map() {
    // A gray and a colour pair uploaded once, matched with each cost (MI downloads the
    // lumas for its table), the map written into a device image: the host call's map and
    // stats. Then the errors: an image of another backend, a map over an input.
    let (gpu, other) = (tessera_cuda::open_shim_cuda(), tessera_cuda::open_shim_cuda());
    let (lg, lc) = middlebury("teddy", "im2.png", 300, 60, 30, 14);
    let (rg, rc) = middlebury("teddy", "im6.png", 300, 60, 30, 14);
    let (w, h) = lg.size();
    let mut map = gpu.device_image::<f32>(w, h).unwrap();
    let mut got = Image::<f32>::new(w, h).unwrap();
    let (ul, ur) = (gpu.upload(lg.view()).unwrap(), gpu.upload(rg.view()).unwrap());
    let (cl, cr) = (gpu.upload(lc.view()).unwrap(), gpu.upload(rc.view()).unwrap());
    for cost in [Cost::CENSUS_7X5, Cost::Ad, Cost::Mi { iterations: 1, levels: 1 }] {
        let p = StereoParams { max_disparity: 10, cost, paths: Paths::Four, ..Default::default() };
        let gray_stats = gpu.stereo_sgm_on_device(&ul, &ur, &mut map, &p).unwrap();
        gpu.download(&map, got.view_mut()).unwrap();
        let (want, want_stats) = run(&gpu, AnyView::U8(lg.view()), AnyView::U8(rg.view()), &p).unwrap();
        assert!(got.as_slice().iter().zip(want.as_slice()).all(|(a, b)| a.to_bits() == b.to_bits()), "gray {cost:?}: map");
        assert_eq!(gray_stats, want_stats, "gray {cost:?}");
        let colour_stats = gpu.stereo_sgm_on_device(&cl, &cr, &mut map, &p).unwrap();
        gpu.download(&map, got.view_mut()).unwrap();
        let (want, want_stats) = run(&gpu, AnyView::Rgba8(lc.view()), AnyView::Rgba8(rc.view()), &p).unwrap();
        assert!(got.as_slice().iter().zip(want.as_slice()).all(|(a, b)| a.to_bits() == b.to_bits()), "rgba {cost:?}: map");
        assert_eq!(colour_stats, want_stats, "rgba {cost:?}");
    }
    let p = StereoParams { max_disparity: 10, ..Default::default() };
    let theirs = other.upload(lg.view()).unwrap();
    assert!(gpu.stereo_sgm_on_device(&theirs, &ur, &mut map, &p).is_err());
    let mut their_map = other.device_image::<f32>(w, h).unwrap();
    assert!(gpu.stereo_sgm_on_device(&ul, &ur, &mut their_map, &p).is_err());
    // SAFETY: `cl` holds 30 x 14 RGBA (4 bytes each, as an f32) and outlives the alias.
    let mut over_input = unsafe { gpu.borrow_device_image::<f32>(cl.device_ptr(), w, h) }.unwrap();
    assert!(gpu.stereo_sgm_on_device(&cl, &cr, &mut over_input, &p).is_err());
    let mut small = gpu.device_image::<f32>(w, h - 1).unwrap();
    assert!(gpu.stereo_sgm_on_device(&ul, &ur, &mut small, &p).is_err());
    assert!(gpu.stereo_sgm_on_device(&ul, &cr, &mut map, &p).is_err(), "a gray and a colour image");
}
