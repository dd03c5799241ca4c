//! The backend conformance suite: every operation on every backend available here, against
//! one float64 reference (and the CPU backend), on random inputs and on the real data in
//! `../shared/data`. A backend that is not available (no GPU) is reported as SKIPPED with
//! its reason, never silently passed.

mod common;

use tessera::filter::{BoxParams, GaussianParams};
use tessera::{AnyView, AnyViewMut, Backend, Border, CpuBackend, Image, Parallelism};

/// The backends to check: the CPU on one thread and on all, and CUDA where it opens.
fn backends() -> Vec<Box<dyn Backend>> {
    let mut v: Vec<Box<dyn Backend>> = vec![
        Box::new(CpuBackend::new(Parallelism::Sequential)),
        Box::new(CpuBackend::new(Parallelism::AllThreads)),
    ];
    match tessera_cuda::open() {
        Ok(b) => v.push(b),
        Err(e) => eprintln!("cuda: SKIPPED (no CUDA device): {e}"),
    }
    v
}

fn noise(w: usize, h: usize, seed: u64) -> Image<u8> {
    let mut s = seed | 1;
    Image::from_fn(w, h, |_, _| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 32) as u8
    })
    .unwrap()
}

/// Float64 reference of a windowed mean.
fn mean_reference(src: &Image<u8>, p: &BoxParams) -> Image<f64> {
    let (w, h) = src.size();
    Image::from_fn(w, h, |x, y| {
        let (mut s, mut n) = (0.0, 0usize);
        for dy in 0..p.height {
            for dx in 0..p.width {
                let yy = p.border.source_index(y as isize + dy as isize - (p.height / 2) as isize, h);
                let xx = p.border.source_index(x as isize + dx as isize - (p.width / 2) as isize, w);
                match (xx, yy) {
                    (Some(xx), Some(yy)) => {
                        s += src.at(xx, yy) as f64;
                        n += 1;
                    }
                    _ => s += p.border.outside_value() as f64,
                }
            }
        }
        s / if p.border == Border::Normalize { n } else { p.width * p.height } as f64
    })
    .unwrap()
}

#[test]
fn mean_filter_on_every_backend() {
    let src = noise(67, 45, 7);
    let srcf: Image<f32> = src.convert();
    for be in backends() {
        for border in [Border::Reflect101, Border::Replicate, Border::Constant(17.0), Border::Normalize] {
            for (kw, kh) in [(1, 1), (5, 5), (8, 3), (31, 61)] {
                let p = BoxParams { width: kw, height: kh, border };
                let want = mean_reference(&src, &p);
                let mut out = Image::<u8>::new(67, 45).unwrap();
                be.mean_filter(AnyView::U8(src.view()), AnyViewMut::U8(out.view_mut()), &p).unwrap();
                let mut outf = Image::<f32>::new(67, 45).unwrap();
                be.mean_filter(AnyView::F32(srcf.view()), AnyViewMut::F32(outf.view_mut()), &p).unwrap();
                for y in 0..45 {
                    for x in 0..67 {
                        let m = want.at(x, y);
                        // Integers: exact round-half-up of the exact mean; f32: 1e-5 relative.
                        assert_eq!(out.at(x, y) as f64, (m + 0.5 + 1e-9).floor(), "{} {p:?} ({x},{y})", be.name());
                        assert!((outf.at(x, y) as f64 - m).abs() <= 1e-5 * m.abs().max(1.0), "{} f32 {p:?}", be.name());
                    }
                }
            }
        }
    }
}

#[test]
fn gaussian_on_every_backend_matches_float64_convolution() {
    let src: Image<f32> = noise(53, 41, 11).convert();
    for be in backends() {
        for sigma in [0.8, 2.0] {
            let p = GaussianParams { sigma, method: tessera::filter::GaussianMethod::Fir, ..Default::default() };
            let r = (3.0 * sigma).ceil() as isize;
            let weights: Vec<f64> = (-r..=r).map(|i| (-(i * i) as f64 / (2.0 * sigma * sigma)).exp()).collect();
            let norm: f64 = weights.iter().sum();
            let mut out = Image::<f32>::new(53, 41).unwrap();
            be.gaussian_blur(AnyView::F32(src.view()), AnyViewMut::F32(out.view_mut()), &p).unwrap();
            for y in 0..41 {
                for x in 0..53 {
                    let mut s = 0.0;
                    for (a, wy) in weights.iter().enumerate() {
                        let yy = Border::Reflect101.source_index(y as isize + a as isize - r, 41).unwrap();
                        for (b, wx) in weights.iter().enumerate() {
                            let xx = Border::Reflect101.source_index(x as isize + b as isize - r, 53).unwrap();
                            s += wy * wx * src.at(xx, yy) as f64;
                        }
                    }
                    let want = s / (norm * norm);
                    assert!((out.at(x, y) as f64 - want).abs() <= 1e-5 * want.abs().max(1.0), "{} sigma {sigma} ({x},{y})", be.name());
                }
            }
        }
    }
}

#[test]
fn matrix_ops_on_every_backend() {
    let a: Image<f32> = noise(37, 29, 3).map(|v| v as f32 / 16.0 - 8.0);
    let b: Image<f32> = noise(23, 37, 5).map(|v| v as f32 / 32.0 - 4.0);
    let c: Image<f32> = noise(37, 29, 9).map(|v| v as f32);
    for be in backends() {
        let mut prod = Image::<f32>::new(23, 29).unwrap();
        be.mat_mul(a.view(), b.view(), prod.view_mut()).unwrap();
        for i in 0..29 {
            for j in 0..23 {
                let (mut s, mut mag) = (0.0f64, 0.0f64);
                for k in 0..37 {
                    s += a.at(k, i) as f64 * b.at(j, k) as f64;
                    mag += (a.at(k, i) as f64 * b.at(j, k) as f64).abs();
                }
                assert!((prod.at(j, i) as f64 - s).abs() <= 1e-4 * mag.max(1.0), "{} ({i},{j})", be.name());
            }
        }
        let mut sum = Image::<f32>::new(37, 29).unwrap();
        be.mat_add(a.view(), c.view(), sum.view_mut()).unwrap();
        for i in 0..29 {
            for j in 0..37 {
                assert_eq!(sum.at(j, i), a.at(j, i) + c.at(j, i));
            }
        }
    }
}

#[test]
fn mean_filter_on_real_data() {
    let path = common::shared_data().join("stereo/cones/im2.png");
    let img = tessera::io::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let tessera::AnyImage::Rgba8(rgba) = img else { panic!("cones/im2.png should load as RGB") };
    let gray: Image<u8> = rgba.convert();
    let p = BoxParams::square(9, Border::Reflect101);
    let want = mean_reference(&gray, &p);
    for be in backends() {
        let mut out = Image::<u8>::new(gray.width(), gray.height()).unwrap();
        be.mean_filter(AnyView::U8(gray.view()), AnyViewMut::U8(out.view_mut()), &p).unwrap();
        for y in 0..gray.height() {
            for x in 0..gray.width() {
                assert_eq!(out.at(x, y) as f64, (want.at(x, y) + 0.5 + 1e-9).floor(), "{}", be.name());
            }
        }
    }
}

#[test]
fn local_variance_on_every_backend_matches_float64_reference() {
    use tessera::variance::{local_variance_reference, VarianceKernel, VarianceMethod, VarianceParams};
    let img = noise(29, 21, 13);
    let img16: Image<u16> = img.map(|v| v as u16 * 251);
    let imgf: Image<f32> = img.map(|v| v as f32 / 7.0 - 3.0);
    for be in backends() {
        for kernel in [VarianceKernel::Tent { radius: 3 }, VarianceKernel::Tent { radius: 7 }, VarianceKernel::Box { radius: 2 }] {
            for method in VarianceMethod::ALL {
                let p = VarianceParams::new(method, kernel);
                let tol = if method == VarianceMethod::Koenig { 1e-3 } else { 1e-5 };
                let check = |src: AnyView<'_>, want: Vec<f64>| {
                    let mut out = Image::<f32>::new(29, 21).unwrap();
                    be.local_variance(src, out.view_mut(), &p).unwrap();
                    for (k, (&g, &w)) in out.as_slice().iter().zip(&want).enumerate() {
                        assert!((g as f64 - w).abs() <= tol * w.max(1.0), "{} {method:?} {kernel:?} pixel {k}: {g} vs {w}", be.name());
                    }
                };
                check(AnyView::U8(img.view()), local_variance_reference(img.view(), &p).unwrap());
                check(AnyView::U16(img16.view()), local_variance_reference(img16.view(), &p).unwrap());
                check(AnyView::F32(imgf.view()), local_variance_reference(imgf.view(), &p).unwrap());
            }
        }
    }
}

#[test]
fn contrast_and_glare_on_every_backend_match_the_cpu() {
    use tessera::{ContrastParams, GlareParams, Rgba8};
    let gray = noise(64, 48, 17);
    let rgba = Image::from_fn(64, 48, |x, y| {
        let v = gray.at(x, y) / 2 + 60;
        let spot = (x as i32 - 30).pow(2) + (y as i32 - 20).pow(2) <= 4;
        if spot { Rgba8::new(252, 250, 245, 255) } else { Rgba8::new(v, v / 2 + 20, v / 3 + 10, 255) }
    })
    .unwrap();
    let cp = ContrastParams { radii: vec![3, 7], ..Default::default() };
    let gp = GlareParams::default();
    let cpu = CpuBackend::new(Parallelism::Sequential);
    let (mut want_c, mut want_m, mut want_f) =
        (Image::<Rgba8>::new(64, 48).unwrap(), Image::<u8>::new(64, 48).unwrap(), Image::<Rgba8>::new(64, 48).unwrap());
    cpu.contrast_enhance(AnyView::Rgba8(rgba.view()), AnyViewMut::Rgba8(want_c.view_mut()), &cp).unwrap();
    let rep = cpu.glare(AnyView::Rgba8(rgba.view()), want_m.view_mut(), AnyViewMut::Rgba8(want_f.view_mut()), &gp).unwrap();
    assert_eq!(rep.spots, 1, "{rep:?}");
    for be in backends() {
        let (mut c, mut m, mut f) =
            (Image::<Rgba8>::new(64, 48).unwrap(), Image::<u8>::new(64, 48).unwrap(), Image::<Rgba8>::new(64, 48).unwrap());
        be.contrast_enhance(AnyView::Rgba8(rgba.view()), AnyViewMut::Rgba8(c.view_mut()), &cp).unwrap();
        be.glare(AnyView::Rgba8(rgba.view()), m.view_mut(), AnyViewMut::Rgba8(f.view_mut()), &gp).unwrap();
        for (a, b) in c.as_slice().iter().zip(want_c.as_slice()) {
            for (u, v) in a.to_array().iter().zip(b.to_array()) {
                assert!((*u as i32 - v as i32).abs() <= 1, "{} contrast", be.name());
            }
        }
        assert_eq!(m, want_m, "{} glare mask", be.name());
        assert_eq!(f, want_f, "{} glare fill", be.name());
        // A type pair the operations do not take is an error, not a panic.
        assert!(be.contrast_enhance(AnyView::U8(gray.view()), AnyViewMut::F32(Image::<f32>::new(64, 48).unwrap().view_mut()), &cp).is_err());
    }
}
