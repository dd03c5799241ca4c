//! `kernels/filter.cu` on the CPU shim against the CPU backend: box sums and means of every
//! pixel type, every border, odd sizes, 1xN and Nx1, windows larger than the image, even
//! windows, strided views in and out, bad parameters; and a crop of Middlebury cones. The
//! box / mean tests run both designs (the fused kernel with the shape each window picks,
//! and the two passes); `fused_box_shapes_match_the_cpu` runs every fused shape.

use crate::common;

use common::{cases, rng, shared_data};
use tessera_core::filter::BoxParams;
use tessera_core::{AnyImage, AnyView, Backend, Border, CpuBackend, Error, Image, Parallelism, Rgba8};
use tessera_cuda::{FirDesign, IirDesign};

/// One image of each pixel type, `w x h`, random over the type's range (f32: -1000..1000
/// with fractions), inside a wider buffer so the views are strided.
fn typed(w: usize, h: usize, seed: u64) -> [AnyImage; 4] {
    let mut r = rng(seed);
    [
        AnyImage::U8(Image::from_fn(w, h, |_, _| r() as u8).unwrap()),
        AnyImage::U16(Image::from_fn(w, h, |_, _| r() as u16).unwrap()),
        AnyImage::F32(Image::from_fn(w, h, |_, _| (r() % 2_000_000) as f32 / 1000.0 - 1000.0).unwrap()),
        AnyImage::Rgba8(Image::from_fn(w, h, |_, _| { let v = r(); Rgba8::new(v as u8, (v >> 8) as u8, (v >> 16) as u8, (v >> 24) as u8) }).unwrap()),
    ]
}

const BORDERS: [Border; 5] = [Border::Reflect101, Border::Replicate, Border::Constant(7.0), Border::Constant(0.0), Border::Normalize];

/// The shim with each box / mean design: the fused kernel (its default shapes), then the
/// two passes.
fn designs() -> [(&'static str, Box<dyn Backend>); 2] {
    [("fused", tessera_cuda::open_shim_box("fused", None).unwrap()), ("two-pass", tessera_cuda::open_shim_box("two-pass", None).unwrap())]
}

fn cpu() -> CpuBackend {
    CpuBackend::new(Parallelism::Sequential)
}

/// f32 planes agree within `rel` of the magnitude `scale`; integer planes exactly.
fn assert_same(got: &AnyImage, want: &AnyImage, f32_tol: f32, what: &str) {
    match (got, want) {
        (AnyImage::F32(g), AnyImage::F32(w)) => {
            for (k, (a, b)) in g.as_slice().iter().zip(w.as_slice()).enumerate() {
                assert!((a - b).abs() <= f32_tol, "{what}: pixel {k}: {a} vs {b}");
            }
        }
        _ => assert!(got == want, "{what}: differs from the CPU"),
    }
}

/// The box sums of an integer image (into u32) on `gpu` are the CPU's, exactly.
fn assert_integer_box_sums_exact(gpu: &dyn Backend, src: &AnyImage, p: &BoxParams, what: &str) {
    let (w, h) = src.size();
    let mut want = Image::<u32>::new(w, h).unwrap();
    let mut got = Image::<u32>::new(w, h).unwrap();
    cpu().box_sum(src.view().unwrap(), tessera_core::AnyViewMut::U32(want.view_mut()), p).unwrap();
    gpu.box_sum(src.view().unwrap(), tessera_core::AnyViewMut::U32(got.view_mut()), p).unwrap();
    assert!(got == want, "box {} {what}", src.view().unwrap().type_name());
}

#[test]
fn means_of_every_type_and_border_are_the_cpus() {
    for (design, gpu) in designs() {
        let sizes = [(1, 1), (1, 9), (9, 1), (17, 11), (40, 23)];
        let windows = [(1, 1), (3, 3), (4, 2), (5, 9), (31, 17), (61, 45)];
        for (i, &(w, h)) in sizes.iter().enumerate() {
            for img in typed(w, h, i as u64 + 1) {
                for &(mw, mh) in &windows {
                    for border in BORDERS {
                        let p = BoxParams { width: mw, height: mh, border };
                        let mut want = AnyImage::like(&img.view().unwrap()).unwrap();
                        cpu().mean_filter(img.view().unwrap(), want.view_mut(), &p).unwrap();
                        let mut got = AnyImage::like(&img.view().unwrap()).unwrap();
                        gpu.mean_filter(img.view().unwrap(), got.view_mut(), &p).unwrap();
                        // f32: the mean of values up to 1000 in f64, rounded once to f32: half
                        // an f32 step of 1000 either way.
                        assert_same(&got, &want, 1e-4, &format!("{design}: mean {} {w}x{h} window {mw}x{mh} {border:?}", img.view().unwrap().type_name()));
                    }
                }
            }
        }
    }
}

#[test]
fn box_sums_are_exact_for_integers_and_close_for_f32() {
    for (design, gpu) in designs() {
        for (i, &(w, h)) in [(1, 7), (7, 1), (23, 19), (37, 8)].iter().enumerate() {
            let [u8s, u16s, f32s, _] = typed(w, h, 40 + i as u64);
            for &(mw, mh) in &[(1, 1), (3, 5), (8, 8), (41, 29)] {
                for border in BORDERS {
                    let p = BoxParams { width: mw, height: mh, border };
                    for src in [&u8s, &u16s] {
                        assert_integer_box_sums_exact(gpu.as_ref(), src, &p, &format!("{design}: {w}x{h} {mw}x{mh} {border:?}"));
                    }
                    let mut want = AnyImage::like(&f32s.view().unwrap()).unwrap();
                    let mut got = AnyImage::like(&f32s.view().unwrap()).unwrap();
                    cpu().box_sum(f32s.view().unwrap(), want.view_mut(), &p).unwrap();
                    gpu.box_sum(f32s.view().unwrap(), got.view_mut(), &p).unwrap();
                    // Sums of up to 1189 values below 1000: one f32 rounding of 1.2e6 is 0.0625.
                    assert_same(&got, &want, 0.07, &format!("{design}: box f32 {w}x{h} {mw}x{mh} {border:?}"));
                }
            }
        }
    }
}

#[test]
fn lines_longer_than_a_segment_match_the_cpu() {
    // The two passes split lines into segments of at least 256 (and twice the window), one
    // thread per segment, each starting from the window's sum: 700 x 530 makes three
    // segments each way, windows of 3 and 129 (segments of 256 and 258). (The fused
    // kernel's segments of rows and strips of columns: `fused_box_shapes_match_the_cpu`.)
    for (design, gpu) in designs().into_iter().filter(|(design, _)| *design == "two-pass") {
        let (w, h) = (700, 530);
        let [u8s, u16s, f32s, rgba] = typed(w, h, 77);
        for &(mw, mh) in &[(3, 3), (129, 5), (5, 129)] {
            for border in BORDERS {
                let p = BoxParams { width: mw, height: mh, border };
                for img in [&u8s, &u16s, &f32s, &rgba] {
                    let mut want = AnyImage::like(&img.view().unwrap()).unwrap();
                    let mut got = AnyImage::like(&img.view().unwrap()).unwrap();
                    cpu().mean_filter(img.view().unwrap(), want.view_mut(), &p).unwrap();
                    gpu.mean_filter(img.view().unwrap(), got.view_mut(), &p).unwrap();
                    assert_same(&got, &want, 1e-4, &format!("{design}: mean {} {mw}x{mh} {border:?}", img.view().unwrap().type_name()));
                }
                for src in [&u8s, &u16s] {
                    assert_integer_box_sums_exact(gpu.as_ref(), src, &p, &format!("{design}: {mw}x{mh} {border:?}"));
                }
            }
        }
    }
}

#[test]
fn strided_views_in_and_out() {
    for (design, gpu) in designs() {
        let big: Image<u8> = Image::from_fn(50, 30, |x, y| (x * 7 + y * 13 + x * y) as u8).unwrap();
        let src = big.view().crop(5, 3, 33, 21).unwrap();
        let p = BoxParams::square(7, Border::Reflect101);
        let mut want = Image::<u8>::new(33, 21).unwrap();
        cpu().mean_filter(AnyView::U8(src), tessera_core::AnyViewMut::U8(want.view_mut()), &p).unwrap();
        let mut out = Image::<u8>::filled(40, 25, 99).unwrap();
        let mut outv = out.view_mut();
        gpu.mean_filter(AnyView::U8(src), tessera_core::AnyViewMut::U8(outv.crop_mut(4, 2, 33, 21).unwrap()), &p).unwrap();
        for y in 0..25 {
            for x in 0..40 {
                let inside = (4..37).contains(&x) && (2..23).contains(&y);
                let want = if inside { want.at(x - 4, y - 2) } else { 99 };
                assert_eq!(out.at(x, y), want, "{design}: ({x}, {y})");
            }
        }
    }
}

#[test]
fn bad_parameters_and_types_are_the_cpus_errors() {
    for (design, gpu) in designs() {
        let img = Image::<u8>::new(8, 8).unwrap();
        let mut out = Image::<u8>::new(8, 8).unwrap();
        let mut small = Image::<u8>::new(7, 8).unwrap();
        let mut sums = Image::<u32>::new(8, 8).unwrap();
        let cases: Vec<(BoxParams, bool)> = vec![
            (BoxParams { width: 0, height: 3, border: Border::Reflect101 }, false),
            (BoxParams { width: 3, height: 5000, border: Border::Reflect101 }, false),
            (BoxParams { width: 3, height: 3, border: Border::Constant(300.0) }, false),
            (BoxParams { width: 3, height: 3, border: Border::Constant(1.5) }, false),
            (BoxParams::square(3, Border::Reflect101), true),
        ];
        for (p, small_out) in cases {
            let (a, b) = if small_out {
                (cpu().mean_filter(AnyView::U8(img.view()), tessera_core::AnyViewMut::U8(small.view_mut()), &p), gpu.mean_filter(AnyView::U8(img.view()), tessera_core::AnyViewMut::U8(small.view_mut()), &p))
            } else {
                (cpu().mean_filter(AnyView::U8(img.view()), tessera_core::AnyViewMut::U8(out.view_mut()), &p), gpu.mean_filter(AnyView::U8(img.view()), tessera_core::AnyViewMut::U8(out.view_mut()), &p))
            };
            assert!(a.is_err());
            assert_eq!(a, b, "{design}: {p:?}");
        }
        // Types: RGBA box sums and mixed types are errors; a u16 window too large for u32 too.
        let rgba = Image::<Rgba8>::new(8, 8).unwrap();
        let p = BoxParams::square(3, Border::Reflect101);
        let e = gpu.box_sum(AnyView::Rgba8(rgba.view()), tessera_core::AnyViewMut::U32(sums.view_mut()), &p).unwrap_err();
        assert!(matches!(e, Error::UnsupportedType { .. }), "{e:?}");
        let e = gpu.mean_filter(AnyView::U8(img.view()), tessera_core::AnyViewMut::U32(sums.view_mut()), &p).unwrap_err();
        assert!(matches!(e, Error::UnsupportedType { .. }), "{e:?}");
        let wide = Image::<u16>::new(8, 8).unwrap();
        let big = BoxParams { width: 300, height: 300, border: Border::Reflect101 };
        let want = cpu().box_sum(AnyView::U16(wide.view()), tessera_core::AnyViewMut::U32(sums.view_mut()), &big).unwrap_err();
        let got = gpu.box_sum(AnyView::U16(wide.view()), tessera_core::AnyViewMut::U32(sums.view_mut()), &big).unwrap_err();
        assert_eq!(got, want);
    }
}

/// The shared real data: `$TESSERA_DATA`, else the first `shared/data` above this crate.

#[test]
fn a_crop_of_cones_in_every_type() {
    let path = shared_data().join("stereo/cones/im2.png");
    let rgb = image::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).to_rgba8();
    let (x0, y0, w, h) = (150, 120, 96, 64);
    let rgba = Image::from_fn(w, h, |x, y| {
        let p = rgb.get_pixel((x0 + x) as u32, (y0 + y) as u32).0;
        Rgba8::new(p[0], p[1], p[2], p[3])
    })
    .unwrap();
    let gray: Image<u8> = Image::from_fn(w, h, |x, y| rgba.at(x, y).luma()).unwrap();
    let imgs = [AnyImage::U8(gray.clone()), AnyImage::U16(gray.map(|v| v as u16 * 257)), AnyImage::F32(gray.map(|v| v as f32 / 3.0)), AnyImage::Rgba8(rgba)];
    for (design, gpu) in designs() {
        for img in &imgs {
            for p in [BoxParams::square(9, Border::Reflect101), BoxParams { width: 15, height: 5, border: Border::Normalize }] {
                let mut want = AnyImage::like(&img.view().unwrap()).unwrap();
                let mut got = AnyImage::like(&img.view().unwrap()).unwrap();
                cpu().mean_filter(img.view().unwrap(), want.view_mut(), &p).unwrap();
                gpu.mean_filter(img.view().unwrap(), got.view_mut(), &p).unwrap();
                assert_same(&got, &want, 1e-4, &format!("{design}: cones {}", img.view().unwrap().type_name()));
            }
        }
    }
}

/// Every mean (u8, u16, f32, RGBA) and box sum (u8, u16, f32) of `img`'s type set on `gpu`
/// against the CPU: integers identical, f32 means within 1e-4 and sums within 0.07 (one
/// f32 rounding of sums up to 1.2e6; the fused kernel's f64 prefix differences are the
/// core's but for the strip they start from).
fn assert_every_type(gpu: &dyn Backend, imgs: &[AnyImage; 4], p: &BoxParams, what: &str) {
    for img in imgs {
        let mut want = AnyImage::like(&img.view().unwrap()).unwrap();
        let mut got = AnyImage::like(&img.view().unwrap()).unwrap();
        cpu().mean_filter(img.view().unwrap(), want.view_mut(), p).unwrap();
        gpu.mean_filter(img.view().unwrap(), got.view_mut(), p).unwrap();
        assert_same(&got, &want, 1e-4, &format!("{what}: mean {}", img.view().unwrap().type_name()));
    }
    let [u8s, u16s, f32s, _] = imgs;
    for src in [u8s, u16s] {
        assert_integer_box_sums_exact(gpu, src, p, what);
    }
    let mut want = AnyImage::like(&f32s.view().unwrap()).unwrap();
    let mut got = AnyImage::like(&f32s.view().unwrap()).unwrap();
    cpu().box_sum(f32s.view().unwrap(), want.view_mut(), p).unwrap();
    gpu.box_sum(f32s.view().unwrap(), got.view_mut(), p).unwrap();
    assert_same(&got, &want, 0.07, &format!("{what}: box f32"));
}

#[test]
fn fused_box_shapes_match_the_cpu() {
    // Every fused shape over sizes (one pixel, 1xN, Nx1, widths not a multiple of 32,
    // heights crossing several segments of 32 rows, RGBA wider than a narrow strip of
    // 256 lanes), windows (1x1, even, odd, larger than the image, taller than a segment),
    // and borders: a pairwise subset by default (tests/common/cases.rs).
    let sizes = [(1, 1), (1, 9), (9, 1), (33, 70), (45, 131), (300, 41)];
    let windows = [(1, 1), (2, 4), (3, 3), (5, 9), (31, 17), (64, 33), (129, 5)];
    let shapes: Vec<&str> = tessera_cuda::BOX_SHAPES.iter().map(|s| s.name).collect();
    let gpus: Vec<Box<dyn Backend>> = shapes.iter().map(|s| tessera_cuda::open_shim_box("fused", Some(s)).unwrap()).collect();
    for case in cases(&[sizes.len(), windows.len(), BORDERS.len(), shapes.len()]) {
        let ((w, h), (mw, mh), border, shape) = (sizes[case[0]], windows[case[1]], BORDERS[case[2]], shapes[case[3]]);
        let imgs = typed(w, h, 200 + case[0] as u64);
        let p = BoxParams { width: mw, height: mh, border };
        assert_every_type(gpus[case[3]].as_ref(), &imgs, &p, &format!("fused {shape} {w}x{h} window {mw}x{mh} {border:?}"));
    }
}

#[test]
fn fused_box_strips_across_a_wide_image() {
    // 2100 columns: several strips in every shape (up to 2048 or 1024 lanes, the window's
    // reach included), windows whose reach is most of a strip, and one too wide for the
    // narrow shapes' strips (run by the two passes instead).
    let imgs = typed(2100, 37, 300);
    for shape in tessera_cuda::BOX_SHAPES.iter().map(|s| s.name) {
        let gpu = tessera_cuda::open_shim_box("fused", Some(shape)).unwrap();
        for (mw, mh, border) in [(3, 3, Border::Reflect101), (301, 5, Border::Normalize), (1001, 3, Border::Constant(7.0)), (1801, 2, Border::Replicate)] {
            let p = BoxParams { width: mw, height: mh, border };
            assert_every_type(gpu.as_ref(), &imgs, &p, &format!("fused {shape} 2100x37 window {mw}x{mh} {border:?}"));
        }
    }
}

#[test]
fn fused_box_small_case_of_every_shape() {
    // Every fused kernel once on a small image of three segments (both step buffers in
    // turn): the ThreadSanitizer run's case (scripts/test).
    let imgs = typed(37, 70, 400);
    for shape in tessera_cuda::BOX_SHAPES.iter().map(|s| s.name) {
        let gpu = tessera_cuda::open_shim_box("fused", Some(shape)).unwrap();
        let p = BoxParams { width: 5, height: 3, border: Border::Reflect101 };
        assert_every_type(gpu.as_ref(), &imgs, &p, &format!("fused {shape} 37x70 window 5x3"));
    }
}

#[test]
fn box_design_from_bad_names_is_an_error() {
    assert!(tessera_cuda::open_shim_box("three-pass", None).is_err());
    assert!(tessera_cuda::open_shim_box("fused", Some("square")).is_err());
    assert!(tessera_cuda::open_shim_box("two-pass", None).is_ok());
}

/// Integer planes within `levels`, f32 within `tol` (absolute).
fn assert_close(got: &AnyImage, want: &AnyImage, levels: f64, tol: f64, what: &str) {
    let planes = |img: &AnyImage| -> Vec<f64> {
        match img {
            AnyImage::U8(i) => i.as_slice().iter().map(|&v| v as f64).collect(),
            AnyImage::U16(i) => i.as_slice().iter().map(|&v| v as f64).collect(),
            AnyImage::F32(i) => i.as_slice().iter().map(|&v| v as f64).collect(),
            AnyImage::Rgba8(i) => i.as_slice().iter().flat_map(|p| [p.r, p.g, p.b, p.a]).map(|v| v as f64).collect(),
            _ => unreachable!(),
        }
    };
    let integer = !matches!(got, AnyImage::F32(_));
    for (k, (g, w)) in planes(got).iter().zip(planes(want)).enumerate() {
        let tol = if integer { levels } else { tol };
        assert!((g - w).abs() <= tol, "{what}: lane {k}: {g} vs {w}");
    }
}

#[test]
fn fir_gaussians_of_every_type_and_border_match_the_cpu() {
    use tessera_core::filter::{GaussianMethod, GaussianParams};
    let gpu = tessera_cuda::open_shim();
    for (i, &(w, h)) in [(1, 1), (1, 13), (13, 1), (29, 17), (45, 31)].iter().enumerate() {
        for img in typed(w, h, 70 + i as u64) {
            for (sigma, radius) in [(0.8, None), (2.0, None), (3.5, Some(20))] {
                for border in BORDERS {
                    let p = GaussianParams { sigma, radius, method: GaussianMethod::Fir, border };
                    let mut want = AnyImage::like(&img.view().unwrap()).unwrap();
                    let mut got = AnyImage::like(&img.view().unwrap()).unwrap();
                    cpu().gaussian_blur(img.view().unwrap(), want.view_mut(), &p).unwrap();
                    gpu.gaussian_blur(img.view().unwrap(), got.view_mut(), &p).unwrap();
                    // The same f32 arithmetic but for the order of the horizontal taps
                    // (the core folds symmetric pairs): integers may round one level apart,
                    // f32 differ by rounding of the inputs' magnitude (up to 1000), which
                    // cancellation can leave in a small output.
                    assert_close(&got, &want, 1.0, 2e-6 * 1000.0, &format!("fir {} {w}x{h} sigma {sigma} {border:?}", img.view().unwrap().type_name()));
                }
            }
        }
    }
    // Bad parameters are the CPU's errors.
    let img = Image::<u8>::new(8, 8).unwrap();
    for p in [GaussianParams { sigma: -1.0, ..Default::default() }, GaussianParams { sigma: f64::NAN, ..Default::default() }, GaussianParams { radius: Some(0), ..Default::default() }] {
        let mut a = Image::<u8>::new(8, 8).unwrap();
        let want = cpu().gaussian_blur(AnyView::U8(img.view()), tessera_core::AnyViewMut::U8(a.view_mut()), &p);
        let got = gpu.gaussian_blur(AnyView::U8(img.view()), tessera_core::AnyViewMut::U8(a.view_mut()), &p);
        assert!(want.is_err());
        assert_eq!(format!("{got:?}"), format!("{want:?}"));
    }
}

/// The fused FIR kernel is the two passes, bit for bit: every type, over sizes of one tile
/// and of several (edge tiles narrower than the taps' reach included), kernels (one too
/// wide for an RGBA tile's shared memory, which runs two-pass) and borders: a pairwise
/// subset by default (tests/common/cases.rs).
#[test]
fn fused_fir_gaussians_are_the_two_passes_bit_for_bit() {
    use tessera_core::filter::{GaussianMethod, GaussianParams};
    let (fused, two_pass) = (tessera_cuda::open_shim_design::<FirDesign>("fused").unwrap(), tessera_cuda::open_shim_design::<FirDesign>("two-pass").unwrap());
    let sizes = [(1, 1), (3, 40), (40, 3), (150, 37), (261, 20)];
    let kernels = [(0.8, None), (2.0, None), (3.5, Some(20)), (30.0, Some(100))];
    for case in cases(&[sizes.len(), kernels.len(), BORDERS.len()]) {
        let ((w, h), (sigma, radius), border) = (sizes[case[0]], kernels[case[1]], BORDERS[case[2]]);
        for img in typed(w, h, 110 + case[0] as u64) {
            let p = GaussianParams { sigma, radius, method: GaussianMethod::Fir, border };
            let mut want = AnyImage::like(&img.view().unwrap()).unwrap();
            let mut got = AnyImage::like(&img.view().unwrap()).unwrap();
            two_pass.gaussian_blur(img.view().unwrap(), want.view_mut(), &p).unwrap();
            fused.gaussian_blur(img.view().unwrap(), got.view_mut(), &p).unwrap();
            let what = format!("{} {w}x{h} sigma {sigma} radius {radius:?} {border:?}", img.view().unwrap().type_name());
            assert!(got == want, "{what}: fused differs from two-pass");
        }
    }
    assert!(tessera_cuda::open_shim_design::<FirDesign>("three-pass").is_err());
}

/// The block-parallel recursive Gaussian follows the CPU's recursion within an f32
/// rounding (the states between blocks come through a matrix product, so an f32 output
/// may round the other way, and an integer one land a level off): every type and border,
/// lines of one block, of several and of a partial last block, each way.
#[test]
fn blocked_iir_gaussians_follow_the_cpu_within_a_rounding() {
    use tessera_core::filter::{GaussianMethod, GaussianParams};
    let blocked = tessera_cuda::open_shim_design::<IirDesign>("blocked").unwrap();
    let sizes = [(1, 1), (1, 9), (9, 1), (150, 41), (41, 150), (200, 3)];
    for case in cases(&[sizes.len(), 3, BORDERS.len()]) {
        let ((w, h), sigma, border) = (sizes[case[0]], [0.5, 4.0, 30.0][case[1]], BORDERS[case[2]]);
        for img in typed(w, h, 140 + case[0] as u64) {
            let p = GaussianParams { sigma, radius: None, method: GaussianMethod::Iir, border };
            let mut want = AnyImage::like(&img.view().unwrap()).unwrap();
            let mut got = AnyImage::like(&img.view().unwrap()).unwrap();
            cpu().gaussian_blur(img.view().unwrap(), want.view_mut(), &p).unwrap();
            blocked.gaussian_blur(img.view().unwrap(), got.view_mut(), &p).unwrap();
            // f32 inputs within +-1000: an f32 ulp there is 6e-5.
            assert_close(&got, &want, 1.0, 2e-4, &format!("blocked iir {} {w}x{h} sigma {sigma} {border:?}", img.view().unwrap().type_name()));
        }
    }
    assert!(tessera_cuda::open_shim_design::<IirDesign>("diagonal").is_err());
}

#[test]
fn iir_gaussians_of_every_type_and_border_match_the_cpu() {
    use tessera_core::filter::{GaussianMethod, GaussianParams};
    let gpu = tessera_cuda::open_shim();
    for (i, &(w, h)) in [(1, 1), (1, 9), (9, 1), (33, 21), (50, 12)].iter().enumerate() {
        for img in typed(w, h, 90 + i as u64) {
            for sigma in [0.5, 4.0, 30.0] {
                for border in BORDERS {
                    let p = GaussianParams { sigma, radius: None, method: GaussianMethod::Iir, border };
                    let mut want = AnyImage::like(&img.view().unwrap()).unwrap();
                    let mut got = AnyImage::like(&img.view().unwrap()).unwrap();
                    cpu().gaussian_blur(img.view().unwrap(), want.view_mut(), &p).unwrap();
                    gpu.gaussian_blur(img.view().unwrap(), got.view_mut(), &p).unwrap();
                    assert_close(&got, &want, 0.0, 0.0, &format!("iir {} {w}x{h} sigma {sigma} {border:?}", img.view().unwrap().type_name()));
                }
            }
        }
    }
    // Auto picks the IIR for a large sigma, as on the CPU.
    let img = &typed(40, 30, 5)[0];
    let p = GaussianParams { sigma: 12.0, ..Default::default() };
    let mut want = AnyImage::like(&img.view().unwrap()).unwrap();
    let mut got = AnyImage::like(&img.view().unwrap()).unwrap();
    cpu().gaussian_blur(img.view().unwrap(), want.view_mut(), &p).unwrap();
    gpu.gaussian_blur(img.view().unwrap(), got.view_mut(), &p).unwrap();
    assert_close(&got, &want, 1.0, 0.0, "auto sigma 12");
}
