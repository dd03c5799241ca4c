//! The backend conformance suite: the twelve operations of `Backend`, each on every pixel
//! type it accepts, on every backend of `common::BACKENDS` that opens on this machine (a
//! new backend gets the whole suite by being listed there once). Each check compares with
//! a float64 reference where one exists (windowed sums and means, Gaussian convolution,
//! matrix sums and products, the two-pass local variance, the known shifts of synthetic
//! registrations); otherwise with the first listed backend, the CPU on one thread
//! (contrast and glare within rounding, stitching and stereo identical). The real data in
//! `../shared/data` (Middlebury cones) feeds the mean filter, the local variance, the
//! registration, the stitching and the stereo checks. A backend that is absent (no GPU)
//! is reported as `cuda: SKIPPED (no CUDA device): <reason>`, never silently passed.
//!
//! Each passed check prints `conformance <op> <types> <backend>: ok` (shown with
//! `--nocapture`): the table of what was covered.

mod common;

use common::backends;
use std::ops::ControlFlow;
use tessera::filter::{BoxParams, GaussianMethod, GaussianParams};
use tessera::stereo::{self, StereoParams, StereoStats};
use tessera::stitch::{synth_sequence, SynthParams};
use tessera::stitch::{InMemory, RegisterParams, SkipReason, StitchParams};
use tessera::variance::{local_variance_reference, VarianceKernel, VarianceMethod, VarianceParams};
use tessera::{AnyImage, AnyView, AnyViewMut, Backend, Border, ContrastParams, GlareParams, Image, Rgba8};

/// Records one passed check in the output (see the module docs).
fn pass(op: &str, types: &str, label: &str) {
    eprintln!("conformance {op:<16} {types:<12} {label}: ok");
}

/// The reference backend: the first listed, the CPU on one thread.
fn reference() -> &'static dyn Backend {
    backends()[0].1.as_ref()
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

/// One image of each input pixel type from the gray `g` and a colour version `rgba` of
/// it: u8; u16 (x 257, the full range); f32 (/ 7 - 3: negative and fractional values);
/// RGBA.
fn typed(g: &Image<u8>, rgba: Image<Rgba8>) -> [AnyImage; 4] {
    [
        AnyImage::U8(g.clone()),
        AnyImage::U16(g.map(|v| v as u16 * 257)),
        AnyImage::F32(g.map(|v| v as f32 / 7.0 - 3.0)),
        AnyImage::Rgba8(rgba),
    ]
}

/// [`typed`] on noise, the RGBA channels from three more seeds (alpha varying too).
fn typed_noise(w: usize, h: usize, seed: u64) -> [AnyImage; 4] {
    let g = noise(w, h, seed);
    let [r, b, a] = [1, 2, 3].map(|k| noise(w, h, seed * 31 + k));
    let rgba = Image::from_fn(w, h, |x, y| Rgba8::new(r.at(x, y), g.at(x, y), b.at(x, y), a.at(x, y))).unwrap();
    typed(&g, rgba)
}

fn view(img: &AnyImage) -> AnyView<'_> {
    img.view().expect("an input type")
}

fn type_name(img: &AnyImage) -> &'static str {
    view(img).type_name()
}

/// The channel planes of an image in float64: one for the gray types, four for RGBA.
fn planes(img: &AnyImage) -> Vec<Image<f64>> {
    let (w, h) = img.size();
    let plane = |f: &dyn Fn(usize, usize) -> f64| Image::from_fn(w, h, |x, y| f(x, y)).unwrap();
    match img {
        AnyImage::U8(i) => vec![plane(&|x, y| i.at(x, y) as f64)],
        AnyImage::U16(i) => vec![plane(&|x, y| i.at(x, y) as f64)],
        AnyImage::U32(i) => vec![plane(&|x, y| i.at(x, y) as f64)],
        AnyImage::F32(i) => vec![plane(&|x, y| i.at(x, y) as f64)],
        AnyImage::Rgba8(i) => (0..4).map(|c| plane(&|x, y| i.at(x, y).to_array()[c] as f64)).collect(),
    }
}

fn is_integer(img: &AnyImage) -> bool {
    !matches!(img, AnyImage::F32(_))
}

/// Float64 sum, sum of magnitudes and pixel count of `src` over the window of `p` whose
/// anchor `(width / 2, height / 2)` sits on `(x, y)`; outside pixels from the border rule
/// (Normalize: left out of sum and count).
fn window_sum(src: &Image<f64>, p: &BoxParams, x: usize, y: usize) -> (f64, f64, usize) {
    let (w, h) = src.size();
    let (mut s, mut a, mut n) = (0.0, 0.0, 0usize);
    for dy in 0..p.height {
        let yy = p.border.source_index(y as isize + dy as isize - (p.height / 2) as isize, h);
        for dx in 0..p.width {
            let xx = p.border.source_index(x as isize + dx as isize - (p.width / 2) as isize, w);
            let v = match (xx, yy) {
                (Some(xx), Some(yy)) => {
                    n += 1;
                    src.at(xx, yy)
                }
                _ if p.border == Border::Normalize => continue,
                _ => {
                    n += 1;
                    p.border.outside_value() as f64
                }
            };
            s += v;
            a += v.abs();
        }
    }
    (s, a, n)
}

/// Checks every pixel of every plane: integer outputs equal to `want` rounded half up,
/// float outputs within `rel` of it (relative to `scale(x, y)`, at least 1).
fn check_planes(got: &AnyImage, want: &[Image<f64>], rel: f64, what: &str, scale: &dyn Fn(usize, usize, usize) -> f64) {
    for (c, (g, w)) in planes(got).iter().zip(want).enumerate() {
        let (width, height) = g.size();
        for y in 0..height {
            for x in 0..width {
                let (g, w) = (g.at(x, y), w.at(x, y));
                if is_integer(got) {
                    assert_eq!(g, (w + 0.5 + 1e-9).floor(), "{what}: channel {c} ({x},{y}), exact {w}");
                } else {
                    assert!((g - w).abs() <= rel * scale(c, x, y).max(1.0), "{what}: ({x},{y}) {g} vs {w}");
                }
            }
        }
    }
}

#[test]
fn mean_filter_every_type_against_float64() {
    let borders = [Border::Reflect101, Border::Replicate, Border::Constant(17.0), Border::Normalize];
    for src in typed_noise(67, 45, 7) {
        let sp = planes(&src);
        for border in borders {
            for (kw, kh) in [(1, 1), (5, 5), (8, 3), (31, 61)] {
                let p = BoxParams { width: kw, height: kh, border };
                let means: Vec<Image<f64>> = sp
                    .iter()
                    .map(|s| Image::from_fn(67, 45, |x, y| {
                        let (sum, _, n) = window_sum(s, &p, x, y);
                        sum / n as f64
                    }).unwrap())
                    .collect();
                for (label, be) in backends() {
                    let mut out = AnyImage::like(&view(&src)).unwrap();
                    be.mean_filter(view(&src), out.view_mut(), &p).unwrap();
                    check_planes(&out, &means, 1e-5, &format!("{label} {} {p:?}", type_name(&src)), &|c, x, y| means[c].at(x, y).abs());
                }
            }
        }
        for (label, _) in backends() {
            pass("mean_filter", type_name(&src), label);
        }
    }
}

#[test]
fn mean_filter_on_real_data() {
    let rgba = common::cones_left();
    let img = AnyImage::Rgba8(rgba);
    let p = BoxParams::square(9, Border::Reflect101);
    let means: Vec<Image<f64>> = planes(&img)
        .iter()
        .map(|s| Image::from_fn(s.width(), s.height(), |x, y| window_sum(s, &p, x, y).0 / 81.0).unwrap())
        .collect();
    for (label, be) in backends() {
        let mut out = AnyImage::like(&view(&img)).unwrap();
        be.mean_filter(view(&img), out.view_mut(), &p).unwrap();
        check_planes(&out, &means, 0.0, &format!("{label} cones"), &|_, _, _| 1.0);
        pass("mean_filter", "cones rgba8", label);
    }
}

#[test]
fn box_sum_u8_u16_into_u32_exactly_and_f32_against_float64() {
    let [g8, g16, gf, rgba] = typed_noise(53, 37, 5);
    let borders = [Border::Reflect101, Border::Replicate, Border::Constant(17.0)];
    for (src, types) in [(&g8, "u8->u32"), (&g16, "u16->u32"), (&gf, "f32->f32")] {
        let float = !is_integer(src);
        let sp = &planes(src)[0];
        for border in borders {
            for (kw, kh) in [(1, 1), (3, 7), (16, 16), (41, 75)] {
                let p = BoxParams { width: kw, height: kh, border };
                let sums = Image::from_fn(53, 37, |x, y| window_sum(sp, &p, x, y).0).unwrap();
                let mags = Image::from_fn(53, 37, |x, y| window_sum(sp, &p, x, y).1).unwrap();
                for (label, be) in backends() {
                    let mut out = if float { AnyImage::F32(Image::new(53, 37).unwrap()) } else { AnyImage::U32(Image::new(53, 37).unwrap()) };
                    be.box_sum(view(src), out.view_mut(), &p).unwrap();
                    let what = format!("{label} {} {p:?}", type_name(src));
                    check_planes(&out, std::slice::from_ref(&sums), 1e-6, &what, &|_, x, y| mags.at(x, y));
                }
            }
        }
        for (label, _) in backends() {
            pass("box_sum", types, label);
        }
    }
    // RGBA, and a gray input into an output of its own type, are not box sums.
    let p = BoxParams::square(3, Border::Reflect101);
    for (_, be) in backends() {
        assert!(be.box_sum(view(&rgba), AnyViewMut::U32(Image::new(53, 37).unwrap().view_mut()), &p).is_err());
        assert!(be.box_sum(view(&g8), AnyViewMut::U8(Image::new(53, 37).unwrap().view_mut()), &p).is_err());
    }
}

/// The separable float64 convolution with the normalized sampled Gaussian of radius
/// `ceil(3 sigma)`, Reflect101 border.
fn gaussian_reference(src: &Image<f64>, sigma: f64) -> Image<f64> {
    let r = (3.0 * sigma).ceil() as isize;
    let weights: Vec<f64> = (-r..=r).map(|i| (-(i * i) as f64 / (2.0 * sigma * sigma)).exp()).collect();
    let norm: f64 = weights.iter().sum();
    let (w, h) = src.size();
    Image::from_fn(w, h, |x, y| {
        let mut s = 0.0;
        for (a, wy) in weights.iter().enumerate() {
            let yy = Border::Reflect101.source_index(y as isize + a as isize - r, h).unwrap();
            for (b, wx) in weights.iter().enumerate() {
                let xx = Border::Reflect101.source_index(x as isize + b as isize - r, w).unwrap();
                s += wy * wx * src.at(xx, yy);
            }
        }
        s / (norm * norm)
    })
    .unwrap()
}

#[test]
fn gaussian_every_type_fir_against_float64_and_iir_against_the_cpu() {
    for src in typed_noise(53, 41, 11) {
        let sp = planes(&src);
        let max = if let AnyImage::U16(_) = src { 65535.0 } else { 255.0 };
        for sigma in [0.8, 2.0] {
            let p = GaussianParams { sigma, method: GaussianMethod::Fir, ..Default::default() };
            let want: Vec<Image<f64>> = sp.iter().map(|s| gaussian_reference(s, sigma)).collect();
            for (label, be) in backends() {
                let mut out = AnyImage::like(&view(&src)).unwrap();
                be.gaussian_blur(view(&src), out.view_mut(), &p).unwrap();
                let what = format!("{label} {} sigma {sigma}", type_name(&src));
                // Integers are filtered in f32 and rounded once: within half a level plus
                // the f32 error of the value range.
                for (c, (g, w)) in planes(&out).iter().zip(&want).enumerate() {
                    for (k, (&g, &w)) in g.as_slice().iter().zip(w.as_slice()).enumerate() {
                        let tol = if is_integer(&src) { 0.5 + 2e-5 * max } else { 1e-5 * w.abs().max(1.0) };
                        assert!((g - w).abs() <= tol, "{what}: channel {c} pixel {k}: {g} vs {w}");
                    }
                }
            }
        }
        let iir = GaussianParams { sigma: 4.0, method: GaussianMethod::Iir, ..Default::default() };
        let mut want = AnyImage::like(&view(&src)).unwrap();
        reference().gaussian_blur(view(&src), want.view_mut(), &iir).unwrap();
        for (label, be) in backends() {
            let mut out = AnyImage::like(&view(&src)).unwrap();
            be.gaussian_blur(view(&src), out.view_mut(), &iir).unwrap();
            assert_close(&out, &want, 1, 1e-4, &format!("{label} {} IIR", type_name(&src)));
            pass("gaussian_blur", type_name(&src), label);
        }
    }
}

/// Integer images within `levels` of each other, float images within `rel` (relative,
/// at least 1).
fn assert_close(got: &AnyImage, want: &AnyImage, levels: u32, rel: f64, what: &str) {
    for (g, w) in planes(got).iter().zip(&planes(want)) {
        for (k, (&g, &w)) in g.as_slice().iter().zip(w.as_slice()).enumerate() {
            let tol = if is_integer(got) { levels as f64 } else { rel * w.abs().max(1.0) };
            assert!((g - w).abs() <= tol, "{what}: pixel {k}: {g} vs {w}");
        }
    }
}

#[test]
fn matrix_sum_and_product_against_float64() {
    let a: Image<f32> = noise(37, 29, 3).map(|v| v as f32 / 16.0 - 8.0);
    let b: Image<f32> = noise(23, 37, 5).map(|v| v as f32 / 32.0 - 4.0);
    let c: Image<f32> = noise(37, 29, 9).map(|v| v as f32);
    for (label, be) in backends() {
        let mut prod = Image::<f32>::new(23, 29).unwrap();
        be.mat_mul(a.view(), b.view(), prod.view_mut()).unwrap();
        for i in 0..29 {
            for j in 0..23 {
                let (mut s, mut mag) = (0.0f64, 0.0f64);
                for k in 0..37 {
                    s += a.at(k, i) as f64 * b.at(j, k) as f64;
                    mag += (a.at(k, i) as f64 * b.at(j, k) as f64).abs();
                }
                assert!((prod.at(j, i) as f64 - s).abs() <= 1e-4 * mag.max(1.0), "{label} ({i},{j})");
            }
        }
        pass("mat_mul", "f32", label);
        let mut sum = Image::<f32>::new(37, 29).unwrap();
        be.mat_add(a.view(), c.view(), sum.view_mut()).unwrap();
        for i in 0..29 {
            for j in 0..37 {
                assert_eq!(sum.at(j, i), a.at(j, i) + c.at(j, i), "{label}");
            }
        }
        pass("mat_add", "f32", label);
        // Shapes that do not multiply are an error.
        assert!(be.mat_mul(a.view(), a.view(), prod.view_mut()).is_err());
    }
}

/// The float64 two-pass local variance of any input view (RGBA: of its luma).
fn variance_reference(src: AnyView<'_>, p: &VarianceParams) -> Vec<f64> {
    match src {
        AnyView::U8(v) => local_variance_reference(v, p),
        AnyView::U16(v) => local_variance_reference(v, p),
        AnyView::F32(v) => local_variance_reference(v, p),
        AnyView::Rgba8(v) => local_variance_reference(v, p),
    }
    .unwrap()
}

/// Runs the local variance of `src` on every backend against the float64 reference.
fn check_variance(src: AnyView<'_>, p: &VarianceParams, tol: f64, what: &str) {
    let want = variance_reference(src, p);
    for (label, be) in backends() {
        let (w, h) = src.size();
        let mut out = Image::<f32>::new(w, h).unwrap();
        be.local_variance(src, out.view_mut(), p).unwrap();
        for (k, (&g, &w)) in out.as_slice().iter().zip(&want).enumerate() {
            assert!((g as f64 - w).abs() <= tol * w.max(1.0), "{label} {what} {p:?} pixel {k}: {g} vs {w}");
        }
    }
}

#[test]
fn local_variance_every_type_and_method_against_float64() {
    let kernels = [VarianceKernel::Tent { radius: 3 }, VarianceKernel::Tent { radius: 7 }, VarianceKernel::Box { radius: 2 }];
    let borders = [Border::Reflect101, Border::Constant(40.0)];
    let sources = typed_noise(29, 21, 13);
    // Every combination takes two minutes on the emulated device: by default the pairwise
    // subset (common::cases), every combination under `--full`.
    for case in common::cases(&[sources.len(), kernels.len(), VarianceMethod::ALL.len(), borders.len()]) {
        let (src, method) = (&sources[case[0]], VarianceMethod::ALL[case[2]]);
        let p = VarianceParams { method, kernel: kernels[case[1]], border: borders[case[3]] };
        // Koenig's E[x^2] - E[x]^2 cancels; u16's large values make it visible.
        let tol = if method == VarianceMethod::Koenig { 1e-3 } else { 1e-5 };
        check_variance(view(src), &p, tol, type_name(src));
    }
    for src in &sources {
        for (label, _) in backends() {
            pass("local_variance", type_name(src), label);
        }
    }
}

#[test]
fn local_variance_on_real_data() {
    let cones = AnyImage::Rgba8(common::cones_left());
    // Threewise carries an f32 mean: its relative error grows with the local mean's
    // distance from the image's over the local spread (see `tessera::variance`).
    for (method, tol) in [(VarianceMethod::Recursive, 1e-5), (VarianceMethod::Threewise, 1e-4)] {
        check_variance(view(&cones), &VarianceParams::new(method, VarianceKernel::Tent { radius: 3 }), tol, "cones");
    }
    for (label, _) in backends() {
        pass("local_variance", "cones rgba8", label);
    }
}

/// A textured image with one small specular spot: gray noise tinted, the spot near white.
fn spot_image() -> [AnyImage; 4] {
    let gray = noise(64, 48, 17);
    let rgba = Image::from_fn(64, 48, |x, y| {
        let v = gray.at(x, y) / 2 + 60;
        let spot = (x as i32 - 30).pow(2) + (y as i32 - 20).pow(2) <= 4;
        if spot { Rgba8::new(252, 250, 245, 255) } else { Rgba8::new(v, v / 2 + 20, v / 3 + 10, 255) }
    })
    .unwrap();
    let luma: Image<u8> = rgba.convert();
    let [g8, g16, _, rgba] = typed(&luma, rgba);
    // f32 in the grey-level scale of the other types (glare thresholds are in levels).
    [g8, g16, AnyImage::F32(luma.convert()), rgba]
}

#[test]
fn contrast_every_type_against_the_cpu() {
    let cp = ContrastParams { radii: vec![3, 7], ..Default::default() };
    for src in spot_image() {
        let mut want = AnyImage::like(&view(&src)).unwrap();
        reference().contrast_enhance(view(&src), want.view_mut(), &cp).unwrap();
        for (label, be) in backends() {
            let mut out = AnyImage::like(&view(&src)).unwrap();
            be.contrast_enhance(view(&src), out.view_mut(), &cp).unwrap();
            assert_close(&out, &want, 1, 1e-5, &format!("{label} {} contrast", type_name(&src)));
            // A type pair the operation does not take is an error, not a panic.
            assert!(be.contrast_enhance(view(&src), AnyViewMut::U32(Image::new(64, 48).unwrap().view_mut()), &cp).is_err());
            pass("contrast_enhance", type_name(&src), label);
        }
    }
}

#[test]
fn glare_every_type_against_the_cpu() {
    let gp = GlareParams::default();
    for src in spot_image() {
        let (mut want_mask, mut want_fill) = (Image::<u8>::new(64, 48).unwrap(), AnyImage::like(&view(&src)).unwrap());
        let want = reference().glare(view(&src), want_mask.view_mut(), want_fill.view_mut(), &gp).unwrap();
        if let AnyImage::Rgba8(_) = src {
            assert_eq!(want.spots, 1, "{want:?}");
        }
        for (label, be) in backends() {
            let (mut mask, mut fill) = (Image::<u8>::new(64, 48).unwrap(), AnyImage::like(&view(&src)).unwrap());
            let report = be.glare(view(&src), mask.view_mut(), fill.view_mut(), &gp).unwrap();
            let what = format!("{label} {}", type_name(&src));
            assert_eq!(report, want, "{what} report");
            assert_eq!(mask, want_mask, "{what} mask");
            assert_eq!(fill, want_fill, "{what} fill");
            pass("glare", type_name(&src), label);
        }
    }
}

/// The cones left image in the four input types: u8 and u16 (x 257) luma, f32 luma
/// (unrounded), RGBA.
fn cones_typed() -> [AnyImage; 4] {
    let rgba = common::cones_left();
    let (luma, f): (Image<u8>, Image<f32>) = (rgba.convert(), rgba.convert());
    let [g8, g16, _, rgba] = typed(&luma, rgba);
    [g8, g16, AnyImage::F32(f), rgba]
}

/// `(x, y, w, h)` of `img` as a view of the same type.
fn crop<'a>(img: &'a AnyImage, x: usize, y: usize, w: usize, h: usize) -> AnyView<'a> {
    match view(img) {
        AnyView::U8(v) => AnyView::U8(v.crop(x, y, w, h).unwrap()),
        AnyView::U16(v) => AnyView::U16(v.crop(x, y, w, h).unwrap()),
        AnyView::F32(v) => AnyView::F32(v.crop(x, y, w, h).unwrap()),
        AnyView::Rgba8(v) => AnyView::Rgba8(v.crop(x, y, w, h).unwrap()),
    }
}

#[test]
fn register_pair_every_type_finds_the_known_shift() {
    // Moving pixel (u, v) shows reference pixel (u + 9, v - 5): two crops of cones.
    let (x0, y0, w, h, shift) = (60, 80, 200, 160, (9.0, -5.0));
    let p = RegisterParams::default();
    for img in cones_typed() {
        let reference_frame = crop(&img, x0, y0, w, h);
        let moving = crop(&img, (x0 as f64 + shift.0) as usize, (y0 as f64 + shift.1) as usize, w, h);
        let want = reference().register_pair(reference_frame, moving, &p, (0.0, 0.0)).unwrap();
        for (label, be) in backends() {
            let what = format!("{label} {}", type_name(&img));
            let got = be.register_pair(reference_frame, moving, &p, (0.0, 0.0)).unwrap();
            let s = got.shift.unwrap_or_else(|| panic!("{what}: not registered: {:?}", got.skip));
            assert!((s.0 - shift.0).abs() <= 0.1 && (s.1 - shift.1).abs() <= 0.1, "{what}: shift {s:?}");
            assert_eq!(got.vectors_used, want.vectors_used, "{what}");
            // A flat pair is skipped with its reason, not an error; frames of two types are.
            let flat = AnyImage::like(&reference_frame).unwrap();
            let skipped = be.register_pair(view(&flat), view(&flat), &p, (0.0, 0.0)).unwrap();
            assert_eq!((skipped.shift, skipped.skip), (None, Some(SkipReason::NoTexture)), "{what}");
            let other = if let AnyView::U8(_) = moving { AnyImage::F32(Image::new(w, h).unwrap()) } else { AnyImage::U8(Image::new(w, h).unwrap()) };
            assert!(be.register_pair(reference_frame, view(&other), &p, (0.0, 0.0)).is_err(), "{what}");
            pass("register_pair", type_name(&img), label);
        }
    }
}

#[test]
fn stitch_every_type_matches_the_truth_and_the_cpu() {
    let g: Image<u8> = common::cones_left().convert();
    let sp = SynthParams { frame_width: 160, frame_height: 128, frames: 6, seed: 3, ..Default::default() };
    let seq = synth_sequence(g.view(), &sp, tessera::Parallelism::AllThreads).unwrap();
    // The sequence as type `ty`: u8, u16 (x 257), f32, RGBA (gray).
    let as_type = |ty: usize| -> Vec<AnyImage> {
        seq.frames
            .iter()
            .map(|f| match ty {
                0 => AnyImage::U8(f.clone()),
                1 => AnyImage::U16(f.map(|v| v as u16 * 257)),
                2 => AnyImage::F32(f.convert()),
                _ => AnyImage::Rgba8(f.convert()),
            })
            .collect()
    };
    let p = StitchParams::default();
    let go = |be: &dyn Backend, views: &[AnyView<'_>]| be.stitch(&InMemory(views), &p, &mut |_| ControlFlow::Continue(())).unwrap();
    for ty in 0..4 {
        let frames = as_type(ty);
        let views: Vec<AnyView<'_>> = frames.iter().map(view).collect();
        let want = go(reference(), &views);
        for (label, be) in backends() {
            let what = format!("{label} {}", views[0].type_name());
            // Half a minute a type on the emulated device: by default it stitches u8, every
            // type under `--full` (accel-cuda/tests/shim/ncc.rs stitches every type on it).
            if common::EMULATED.contains(label) && !common::full() && ty != 0 {
                eprintln!("conformance stitch {what}: left to the full run (emulated device)");
                continue;
            }
            let pano = go(be.as_ref(), &views);
            for (f, truth) in pano.frames.iter().zip(&seq.positions) {
                let pos = f.position.unwrap_or_else(|| panic!("{what}: frame {} skipped: {:?}", f.index, f.skip));
                assert!((pos.0 - truth.0).abs() <= 1.0 && (pos.1 - truth.1).abs() <= 1.0, "{what}: frame {} at {pos:?}, truth {truth:?}", f.index);
            }
            if ty == 2 && label.starts_with("cuda") {
                // f32 frames: the GPU sums the NCC terms in another order (coefficients
                // within 1e-6 of the CPU's), so positions agree to 1e-3 px and the
                // canvases, blended at those positions, to a fraction of a grey level.
                same_panorama_within(&pano, &want, &what);
            } else {
                assert_eq!(pano, want, "{what}");
            }
            // A frame of another type is skipped saying so, and the run goes on; a cancelled
            // run is an error.
            let other = as_type((ty + 1) % 4);
            let mixed = [views[0], view(&other[1]), views[2]];
            let pano = be.stitch(&InMemory(&mixed), &p, &mut |_| ControlFlow::Continue(())).unwrap();
            assert!(matches!(pano.frames[1].skip, Some(SkipReason::Mismatch(_))), "{what}: {:?}", pano.frames[1]);
            let (pos, truth) = (pano.frames[2].position.unwrap_or((f64::NAN, 0.0)), seq.positions[2]);
            assert!((pos.0 - truth.0).abs() <= 1.0 && (pos.1 - truth.1).abs() <= 1.0, "{what}: frame 2 at {pos:?}, truth {truth:?}");
            assert!(be.stitch(&InMemory(&views), &p, &mut |_| ControlFlow::Break(())).is_err(), "{what}");
            pass("stitch", views[0].type_name(), label);
        }
    }
}

/// Two f32 panoramas: the same frames registered against the same references, positions
/// within 1e-3 px, coefficients within 1e-5, canvases of one size and origin whose pixels
/// agree within 0.05 grey levels (f32 frames here are 0..255).
fn same_panorama_within(got: &tessera::stitch::Panorama, want: &tessera::stitch::Panorama, what: &str) {
    assert_eq!(got.reference, want.reference, "{what}");
    assert_eq!(got.frames.len(), want.frames.len(), "{what}");
    for (g, w) in got.frames.iter().zip(&want.frames) {
        assert_eq!((g.index, g.reference, &g.skip, g.vectors_used), (w.index, w.reference, &w.skip, w.vectors_used), "{what}");
        let (gp, wp) = (g.position.unwrap_or((f64::NAN, 0.0)), w.position.unwrap_or((f64::NAN, 0.0)));
        assert!(g.position.is_none() == w.position.is_none() && (w.position.is_none() || ((gp.0 - wp.0).abs() <= 1e-3 && (gp.1 - wp.1).abs() <= 1e-3)), "{what}: frame {} at {gp:?}, CPU {wp:?}", g.index);
        assert!((g.ncc - w.ncc).abs() <= 1e-5, "{what}: frame {} ncc {} vs {}", g.index, g.ncc, w.ncc);
    }
    assert_eq!(got.canvas.origin, want.canvas.origin, "{what}");
    let (AnyImage::F32(a), AnyImage::F32(b)) = (&got.canvas.image, &want.canvas.image) else { panic!("{what}: canvases of another type") };
    assert_eq!(a.size(), b.size(), "{what}");
    for (k, (x, y)) in a.as_slice().iter().zip(b.as_slice()).enumerate() {
        assert!((x - y).abs() <= 0.05 || (x.is_nan() && y.is_nan()), "{what}: canvas pixel {k}: {x} vs {y}");
    }
}

#[test]
fn stereo_gray_and_rgba_on_cones_match_the_cpu_and_the_ground_truth() {
    let left = common::cones_left();
    let right = common::cones_right();
    let gt = common::cones_ground_truth();
    let (w, h) = left.size();
    let (gl, gr): (Image<u8>, Image<u8>) = (left.convert(), right.convert());
    let pairs = [(AnyView::U8(gl.view()), AnyView::U8(gr.view())), (AnyView::Rgba8(left.view()), AnyView::Rgba8(right.view()))];
    let p = StereoParams::default();
    for (l, r) in pairs {
        let mut want = Image::<f32>::new(w, h).unwrap();
        let want_stats = reference().stereo_sgm(l, r, want.view_mut(), &p).unwrap();
        let score = stereo::evaluate(want.view(), gt.view()).unwrap();
        assert!(score.bad1_all <= 15.0, "{} bad 1.0 = {:.2} %", l.type_name(), score.bad1_all);
        for (label, be) in backends() {
            if common::EMULATED.contains(label) {
                eprintln!("conformance stereo_sgm       {label}: SKIPPED full size (emulated device; crops in accel-cuda/tests/shim/stereo.rs)");
                continue;
            }
            let mut disp = Image::<f32>::new(w, h).unwrap();
            let stats = be.stereo_sgm(l, r, disp.view_mut(), &p).unwrap();
            // The peak of scratch memory depends on the threads; every count must agree.
            assert_eq!(StereoStats { peak_bytes: 0, ..stats }, StereoStats { peak_bytes: 0, ..want_stats }, "{label} {}", l.type_name());
            let same = disp.as_slice().iter().zip(want.as_slice()).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{label} {}: disparities differ from the CPU on one thread", l.type_name());
            // Left and right of different types are an error.
            let mixed = if let AnyView::U8(_) = l { AnyView::Rgba8(right.view()) } else { AnyView::U8(gr.view()) };
            assert!(be.stereo_sgm(l, mixed, disp.view_mut(), &p).is_err(), "{label}");
            pass("stereo_sgm", l.type_name(), label);
        }
    }
}

/// The subsets of the costliest tests ([`common::cases`]).
mod test_cases {
    use super::common::cases::{cases_at, product, Coverage};

    fn covers_every_pair(dims: &[usize], chosen: &[Vec<usize>]) -> bool {
        (0..dims.len()).all(|a| {
            (a + 1..dims.len()).all(|b| (0..dims[a]).all(|va| (0..dims[b]).all(|vb| chosen.iter().any(|c| c[a] == va && c[b] == vb))))
        })
    }

    #[test]
    fn the_pairwise_subset_covers_every_pair_and_is_smaller() {
        for dims in [vec![4, 3, 6, 2], vec![2; 5], vec![4, 3, 2], vec![1, 5, 2]] {
            let chosen = cases_at(&dims, Coverage::Pairwise);
            let all = product(&dims);
            assert!(covers_every_pair(&dims, &chosen), "{dims:?}: {chosen:?}");
            assert!(chosen.len() < all.len() || dims.contains(&1), "{dims:?}: {}", chosen.len());
            assert!(chosen.iter().all(|c| all.contains(c)));
        }
        assert!(cases_at(&[4, 3, 6, 2], Coverage::Pairwise).len() <= 30);
    }

    #[test]
    fn each_value_runs_once_and_full_runs_all() {
        let dims = [4, 3, 6, 2];
        let each = cases_at(&dims, Coverage::Each);
        assert_eq!(each.len(), 6);
        for (d, &n) in dims.iter().enumerate() {
            assert!((0..n).all(|v| each.iter().any(|c| c[d] == v)));
        }
        assert_eq!(cases_at(&dims, Coverage::Full).len(), 144);
        assert_eq!(cases_at(&[3, 2], Coverage::Pairwise), product(&[3, 2]));
        assert_eq!(product(&[2, 2]), vec![vec![0, 0], vec![0, 1], vec![1, 0], vec![1, 1]]);
    }
}
