//! `kernels/variance.cu` on the CPU shim against the CPU backend: the `Recursive` local
//! variance of every input type, tent and box kernels, every border it accepts, odd sizes,
//! 1xN and Nx1, kernels wider than the image, NaN inputs, bad parameters; the paper's five
//! f32 methods bit for bit; the contrast enhancement built on the tent moments.

use crate::common;

use common::rng;

use tessera_core::variance::{VarianceKernel, VarianceMethod, VarianceParams};
use tessera_core::{AnyImage, AnyView, Backend, Border, CpuBackend, Image, Parallelism, Rgba8};
use tessera_cuda::MomentsDesign;

fn typed(w: usize, h: usize, seed: u64) -> [AnyImage; 4] {
    let mut r = rng(seed);
    [
        AnyImage::U8(Image::from_fn(w, h, |_, _| r() as u8).unwrap()),
        AnyImage::U16(Image::from_fn(w, h, |_, _| r() as u16).unwrap()),
        // A large offset against a modest spread: the shift matters.
        AnyImage::F32(Image::from_fn(w, h, |_, _| 5000.0 + (r() % 20_000) as f32 / 100.0).unwrap()),
        AnyImage::Rgba8(Image::from_fn(w, h, |_, _| { let v = r(); Rgba8::new(v as u8, (v >> 8) as u8, (v >> 16) as u8, 255) }).unwrap()),
    ]
}

const KERNELS: [VarianceKernel; 7] = [
    VarianceKernel::Tent { radius: 1 },
    VarianceKernel::Tent { radius: 3 },
    VarianceKernel::Tent { radius: 15 },
    VarianceKernel::Box { radius: 0 },
    VarianceKernel::Box { radius: 1 },
    VarianceKernel::Box { radius: 4 },
    VarianceKernel::Box { radius: 25 },
];

fn cpu() -> CpuBackend {
    CpuBackend::new(Parallelism::Sequential)
}

fn variance(be: &dyn Backend, src: AnyView<'_>, p: &VarianceParams) -> Image<f32> {
    let (w, h) = src.size();
    let mut out = Image::<f32>::new(w, h).unwrap();
    be.local_variance(src, out.view_mut(), p).unwrap();
    out
}

#[test]
fn recursive_variance_is_the_cpus_exactly_on_integers_and_within_bound_on_floats() {
    let gpu = tessera_cuda::open_shim();
    for (i, &(w, h)) in [(1, 1), (1, 11), (11, 1), (23, 17), (40, 9)].iter().enumerate() {
        for img in typed(w, h, i as u64 + 3) {
            let src = img.view().unwrap();
            for kernel in KERNELS {
                for border in [Border::Reflect101, Border::Replicate, Border::Constant(9.0)] {
                    let p = VarianceParams { method: VarianceMethod::Recursive, kernel, border };
                    let want = variance(&cpu(), src, &p);
                    let got = variance(gpu.as_ref(), src, &p);
                    let what = format!("{} {w}x{h} {kernel:?} {border:?}", src.type_name());
                    match src {
                        AnyView::U8(_) | AnyView::U16(_) => {
                            let same = got.as_slice().iter().zip(want.as_slice()).all(|(a, b)| a.to_bits() == b.to_bits());
                            assert!(same, "{what}: differs from the CPU");
                        }
                        _ => {
                            // Shifted f64 sums: the core's bound, 2^-40 (x - K)^2 with
                            // |x - K| <= 300 (RGBA luma <= 255), plus f32 rounding.
                            for (k, (a, b)) in got.as_slice().iter().zip(want.as_slice()).enumerate() {
                                let tol = 300.0f32 * 300.0 * 2f32.powi(-40) + b.abs() * 2e-7;
                                assert!((a - b).abs() <= tol, "{what}: pixel {k}: {a} vs {b}");
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn lines_longer_than_a_segment_are_the_cpus() {
    // Lines split into segments of at least 256 (and twice the kernel's support) run a
    // thread per segment, each starting from the support's sums: 600 x 530 makes two or
    // three segments each way. Recursive variance and contrast (the variance module's
    // moment kernels).
    let gpu = tessera_cuda::open_shim();
    let (w, h) = (600, 530);
    for img in typed(w, h, 91) {
        let src = img.view().unwrap();
        for kernel in [VarianceKernel::Tent { radius: 3 }, VarianceKernel::Box { radius: 2 }, VarianceKernel::Tent { radius: 127 }] {
            let p = VarianceParams { method: VarianceMethod::Recursive, kernel, border: Border::Reflect101 };
            let (want, got) = (variance(&cpu(), src, &p), variance(gpu.as_ref(), src, &p));
            let what = format!("{} {kernel:?}", src.type_name());
            for (k, (a, b)) in got.as_slice().iter().zip(want.as_slice()).enumerate() {
                let tol = match src {
                    AnyView::U8(_) | AnyView::U16(_) => 0.0,
                    _ => 300.0f32 * 300.0 * 2f32.powi(-40) + b.abs() * 2e-7,
                };
                assert!((a - b).abs() <= tol, "{what}: pixel {k}: {a} vs {b}");
            }
        }
        let p = tessera_core::contrast::ContrastParams { radii: vec![1, 7], ..Default::default() };
        let mut want = AnyImage::like(&src).unwrap();
        let mut got = AnyImage::like(&src).unwrap();
        cpu().contrast_enhance(src, want.view_mut(), &p).unwrap();
        gpu.contrast_enhance(src, got.view_mut(), &p).unwrap();
        let levels = |a: &AnyImage| -> Vec<f64> {
            match a {
                AnyImage::U8(i) => i.as_slice().iter().map(|&v| v as f64).collect(),
                AnyImage::U16(i) => i.as_slice().iter().map(|&v| v as f64).collect(),
                AnyImage::F32(i) => i.as_slice().iter().map(|&v| v as f64).collect(),
                AnyImage::Rgba8(i) => i.as_slice().iter().flat_map(|v| [v.r as f64, v.g as f64, v.b as f64, v.a as f64]).collect(),
                _ => unreachable!(),
            }
        };
        // Within a level for integers, 1e-5 relative for f32 (as the small-image test).
        let f32 = matches!(src, AnyView::F32(_));
        for (k, (a, b)) in levels(&got).iter().zip(levels(&want)).enumerate() {
            let tol = if f32 { 1e-5 * b.abs().max(1.0) } else { 1.0 };
            assert!((a - b).abs() <= tol, "contrast {}: value {k}: {a} vs {b}", src.type_name());
        }
    }
}

#[test]
fn non_finite_inputs_make_nan_exactly_where_the_kernel_holds_them() {
    let gpu = tessera_cuda::open_shim();
    let mut img = Image::<f32>::from_fn(21, 15, |x, y| (x * 3 + y * 7) as f32).unwrap();
    img.view_mut().row_mut(7)[10] = f32::NAN;
    img.view_mut().row_mut(1)[2] = f32::INFINITY;
    for kernel in [VarianceKernel::Tent { radius: 3 }, VarianceKernel::Box { radius: 2 }] {
        let p = VarianceParams { method: VarianceMethod::Recursive, kernel, border: Border::Reflect101 };
        let want = variance(&cpu(), AnyView::F32(img.view()), &p);
        let got = variance(gpu.as_ref(), AnyView::F32(img.view()), &p);
        for (k, (a, b)) in got.as_slice().iter().zip(want.as_slice()).enumerate() {
            assert_eq!(a.is_nan(), b.is_nan(), "{kernel:?} pixel {k}: {a} vs {b}");
            if !b.is_nan() {
                assert!((a - b).abs() <= 1e-3 + b.abs() * 1e-6, "{kernel:?} pixel {k}: {a} vs {b}");
            }
        }
    }
}

#[test]
fn bad_parameters_are_the_cpus_errors() {
    let gpu = tessera_cuda::open_shim();
    let img = Image::<u8>::new(9, 9).unwrap();
    let mut out = Image::<f32>::new(9, 9).unwrap();
    let mut small = Image::<f32>::new(9, 8).unwrap();
    let bad = [
        VarianceParams { kernel: VarianceKernel::Tent { radius: 2 }, ..Default::default() },
        VarianceParams { kernel: VarianceKernel::Box { radius: 5000 }, ..Default::default() },
        VarianceParams { border: Border::Normalize, ..Default::default() },
        VarianceParams { border: Border::Constant(256.0), ..Default::default() },
    ];
    for p in bad {
        let want = cpu().local_variance(AnyView::U8(img.view()), out.view_mut(), &p);
        let got = gpu.local_variance(AnyView::U8(img.view()), out.view_mut(), &p);
        assert!(want.is_err(), "{p:?}");
        assert_eq!(got, want, "{p:?}");
    }
    let p = VarianceParams::default();
    assert_eq!(gpu.local_variance(AnyView::U8(img.view()), small.view_mut(), &p), cpu().local_variance(AnyView::U8(img.view()), small.view_mut(), &p));
}

#[test]
fn contrast_enhancement_of_every_type_is_the_cpus_within_a_level() {
    use tessera_core::contrast::ContrastParams;
    let gpu = tessera_cuda::open_shim();
    let sizes = [(1, 1), (1, 9), (9, 1), (37, 23)];
    let images: Vec<_> = sizes.iter().enumerate().map(|(i, &(w, h))| typed(w, h, 50 + i as u64)).collect();
    let settings = [(vec![1, 7], Border::Reflect101), (vec![3], Border::Replicate), (vec![1, 3, 15], Border::Constant(20.0))];
    // Size x type x settings: the pairwise subset by default, all 48 under `--full`.
    for case in common::cases(&[sizes.len(), images[0].len(), settings.len()]) {
        let (w, h) = sizes[case[0]];
        let src = images[case[0]][case[1]].view().unwrap();
        let (radii, border) = settings[case[2]].clone();
        let p = ContrastParams { radii, border, ..Default::default() };
        let mut want = AnyImage::like(&src).unwrap();
        let mut got = AnyImage::like(&src).unwrap();
        cpu().contrast_enhance(src, want.view_mut(), &p).unwrap();
        gpu.contrast_enhance(src, got.view_mut(), &p).unwrap();
        let what = format!("{} {w}x{h} {p:?}", src.type_name());
        match (&got, &want) {
            (AnyImage::U8(g), AnyImage::U8(c)) => assert!(g.as_slice().iter().zip(c.as_slice()).all(|(a, b)| a.abs_diff(*b) <= 1), "{what}"),
            (AnyImage::U16(g), AnyImage::U16(c)) => assert!(g.as_slice().iter().zip(c.as_slice()).all(|(a, b)| a.abs_diff(*b) <= 1), "{what}"),
            (AnyImage::F32(g), AnyImage::F32(c)) => {
                for (k, (a, b)) in g.as_slice().iter().zip(c.as_slice()).enumerate() {
                    assert!((a - b).abs() <= 1e-5 * b.abs().max(1.0), "{what}: pixel {k}: {a} vs {b}");
                }
            }
            (AnyImage::Rgba8(g), AnyImage::Rgba8(c)) => {
                let near = |a: u8, b: u8| a.abs_diff(b) <= 1;
                assert!(g.as_slice().iter().zip(c.as_slice()).all(|(a, b)| near(a.r, b.r) && near(a.g, b.g) && near(a.b, b.b) && a.a == b.a), "{what}");
            }
            _ => unreachable!(),
        }
    }
    // A constant image is returned unchanged; bad parameters are the CPU's errors.
    let flat = Image::<u8>::filled(12, 9, 77).unwrap();
    let mut out = Image::<u8>::new(12, 9).unwrap();
    gpu.contrast_enhance(AnyView::U8(flat.view()), tessera_core::AnyViewMut::U8(out.view_mut()), &ContrastParams::default()).unwrap();
    assert!(out == flat);
    for p in [ContrastParams { radii: vec![], ..Default::default() }, ContrastParams { radii: vec![4], ..Default::default() }, ContrastParams { gain_max: 0.5, ..Default::default() }, ContrastParams { border: Border::Constant(300.0), ..Default::default() }] {
        let want = cpu().contrast_enhance(AnyView::U8(flat.view()), tessera_core::AnyViewMut::U8(out.view_mut()), &p);
        assert!(want.is_err(), "{p:?}");
        assert_eq!(gpu.contrast_enhance(AnyView::U8(flat.view()), tessera_core::AnyViewMut::U8(out.view_mut()), &p), want);
    }
}

#[test]
fn the_papers_five_methods_are_the_cpus_bit_for_bit() {
    let gpu = tessera_cuda::open_shim();
    let methods = [VarianceMethod::Usual, VarianceMethod::Koenig, VarianceMethod::Welford, VarianceMethod::Pairwise, VarianceMethod::Threewise];
    let kernels = [VarianceKernel::Tent { radius: 1 }, VarianceKernel::Tent { radius: 7 }, VarianceKernel::Box { radius: 0 }, VarianceKernel::Box { radius: 2 }, VarianceKernel::Box { radius: 13 }];
    for (i, &(w, h)) in [(1, 1), (1, 6), (7, 1), (19, 13)].iter().enumerate() {
        for img in typed(w, h, 30 + i as u64) {
            let src = img.view().unwrap();
            for method in methods {
                for kernel in kernels {
                    for border in [Border::Reflect101, Border::Constant(3.0)] {
                        let p = VarianceParams { method, kernel, border };
                        let want = variance(&cpu(), src, &p);
                        let got = variance(gpu.as_ref(), src, &p);
                        let same = got.as_slice().iter().zip(want.as_slice()).all(|(a, b)| a.to_bits() == b.to_bits());
                        assert!(same, "{} {w}x{h} {method:?} {kernel:?} {border:?}: {:?} vs {:?}", src.type_name(), &got.as_slice()[..w.min(4)], &want.as_slice()[..w.min(4)]);
                    }
                }
            }
        }
    }
}

/// Local variance and contrast enhancement of `src` on `gpu`, for comparing designs.
fn variance_and_enhanced(gpu: &dyn Backend, src: AnyView<'_>, p: &VarianceParams, radii: &[usize]) -> (Image<f32>, AnyImage) {
    let var = variance(gpu, src, p);
    let c = tessera_core::contrast::ContrastParams { radii: radii.to_vec(), border: p.border, ..Default::default() };
    let mut enhanced = AnyImage::like(&src).unwrap();
    gpu.contrast_enhance(src, enhanced.view_mut(), &c).unwrap();
    (var, enhanced)
}

fn same_bits(a: &Image<f32>, b: &Image<f32>) -> bool {
    a.as_slice().iter().zip(b.as_slice()).all(|(x, y)| x.to_bits() == y.to_bits())
}

#[test]
fn fused_moments_are_the_two_passes_and_the_cpus_bit_for_bit() {
    // The single-pass kernel moments against the two passes and the CPU: sizes from one
    // pixel to several strips (700 columns: two strips of the 512-lane shape at small
    // radii) and several segments; tents and boxes up to radii that need the 1024-lane
    // shape (255) and a box too wide for any strip (600, run by the two passes); every
    // border. u8 and u16 run fused; f32 and RGBA take the two passes in both designs.
    let (fused, two_pass) = (tessera_cuda::open_shim_design::<MomentsDesign>("fused").unwrap(), tessera_cuda::open_shim_design::<MomentsDesign>("two-pass").unwrap());
    let sizes = [(1, 1), (1, 9), (9, 1), (37, 70), (700, 45)];
    let kernels = [
        VarianceKernel::Tent { radius: 1 },
        VarianceKernel::Tent { radius: 3 },
        VarianceKernel::Tent { radius: 15 },
        VarianceKernel::Tent { radius: 255 },
        VarianceKernel::Box { radius: 0 },
        VarianceKernel::Box { radius: 4 },
        VarianceKernel::Box { radius: 255 },
        VarianceKernel::Box { radius: 600 },
    ];
    let borders = [Border::Reflect101, Border::Replicate, Border::Constant(9.0)];
    let images: Vec<_> = sizes.iter().enumerate().map(|(i, &(w, h))| typed(w, h, 700 + i as u64)).collect();
    for case in common::cases(&[sizes.len(), 4, kernels.len(), borders.len()]) {
        let ((w, h), kernel, border) = (sizes[case[0]], kernels[case[2]], borders[case[3]]);
        let src = images[case[0]][case[1]].view().unwrap();
        let p = VarianceParams { method: VarianceMethod::Recursive, kernel, border };
        // The contrast's scales: the tent's radius, or 7 beside a box; and 1.
        let radii = match kernel {
            VarianceKernel::Tent { radius } => [radius, 1],
            VarianceKernel::Box { .. } => [7, 1],
        };
        let what = format!("{} {w}x{h} {kernel:?} {border:?}", src.type_name());
        let (var_f, enh_f) = variance_and_enhanced(fused.as_ref(), src, &p, &radii);
        let (var_t, enh_t) = variance_and_enhanced(two_pass.as_ref(), src, &p, &radii);
        assert!(same_bits(&var_f, &var_t), "{what}: variance differs between the designs");
        assert!(enh_f == enh_t, "{what}: contrast differs between the designs");
        if matches!(src, AnyView::U8(_) | AnyView::U16(_)) {
            assert!(same_bits(&var_f, &variance(&cpu(), src, &p)), "{what}: variance differs from the CPU");
        }
    }
    assert!(tessera_cuda::open_shim_design::<MomentsDesign>("three-pass").is_err());
}

#[test]
fn fused_moments_small_case_of_every_shape() {
    // Every fused variance and contrast kernel on a small image, u8 and u16, both shapes
    // (radius 255 needs the 1024-lane one); at the small radii, four segments of 32 rows
    // (both step buffers in turn): the ThreadSanitizer run's case (scripts/test).
    let fused = tessera_cuda::open_shim_design::<MomentsDesign>("fused").unwrap();
    let two_pass = tessera_cuda::open_shim_design::<MomentsDesign>("two-pass").unwrap();
    for img in &typed(37, 100, 800)[..2] {
        let src = img.view().unwrap();
        for kernel in [VarianceKernel::Tent { radius: 3 }, VarianceKernel::Box { radius: 2 }, VarianceKernel::Tent { radius: 255 }] {
            let p = VarianceParams { method: VarianceMethod::Recursive, kernel, border: Border::Reflect101 };
            let radii = [if kernel == (VarianceKernel::Box { radius: 2 }) { 7 } else { kernel.radius() }];
            let (var_f, enh_f) = variance_and_enhanced(fused.as_ref(), src, &p, &radii);
            let (var_t, enh_t) = variance_and_enhanced(two_pass.as_ref(), src, &p, &radii);
            assert!(same_bits(&var_f, &var_t) && enh_f == enh_t, "{} {kernel:?}", src.type_name());
        }
    }
}
