use super::*;
use crate::error::Error;

use crate::testing::Rng;

/// A textured, coloured "painting" without highlights.
fn painting(w: usize, h: usize, seed: u64) -> Image<Rgba8> {
    let mut r = Rng(seed | 1);
    Image::from_fn(w, h, |x, y| {
        let base = 110.0 + 45.0 * libm::sinf(x as f32 / 7.0) * libm::cosf(y as f32 / 11.0) + 16.0 * r.unit_f32();
        let to8 = |v: f32| v.clamp(0.0, 255.0) as u8;
        Rgba8::new(to8(base * 1.1), to8(base * 0.85), to8(base * 0.6), 255)
    })
    .unwrap()
}

/// Adds soft, weakly coloured, near-saturated spots; returns the truth mask (alpha >= 0.25).
fn add_spots(img: &mut Image<Rgba8>, n: usize, seed: u64) -> Vec<bool> {
    let (w, h) = img.size();
    let mut r = Rng(seed | 1);
    let mut truth = vec![false; w * h];
    for _ in 0..n {
        let s = 1.5 + 3.0 * r.unit_f32();
        let cx = 10.0 + (w as f32 - 20.0) * r.unit_f32();
        let cy = 10.0 + (h as f32 - 20.0) * r.unit_f32();
        for y in 0..h {
            for x in 0..w {
                let d2 = (x as f32 - cx).powi(2) + (y as f32 - cy).powi(2);
                let a = libm::expf(-d2 / (s * s));
                if a < 0.02 {
                    continue;
                }
                let p = img.at(x, y);
                let mix = |c: u8, t: f32| ((1.0 - a) * c as f32 + a * t).round() as u8;
                img.set(x, y, Rgba8::new(mix(p.r, 252.0), mix(p.g, 250.0), mix(p.b, 240.0), 255));
                if a >= 0.25 {
                    truth[y * w + x] = true;
                }
            }
        }
    }
    truth
}

fn precision_recall(mask: &Image<u8>, truth: &[bool]) -> (f64, f64) {
    let (mut tp, mut fp, mut fneg) = (0usize, 0usize, 0usize);
    for (&m, &t) in mask.as_slice().iter().zip(truth) {
        match (m == 255, t) {
            (true, true) => tp += 1,
            (true, false) => fp += 1,
            (false, true) => fneg += 1,
            _ => {}
        }
    }
    (tp as f64 / (tp + fp).max(1) as f64, tp as f64 / (tp + fneg).max(1) as f64)
}

fn detect_mask<P: GlarePixel>(img: &Image<P>, p: &GlareParams) -> (Image<u8>, GlareReport) {
    let (w, h) = img.size();
    let mut mask = Image::<u8>::new(w, h).unwrap();
    let rep = detect(img.view(), mask.view_mut(), p, Parallelism::AllThreads).unwrap();
    (mask, rep)
}

#[test]
fn finds_added_highlights_with_high_precision_and_recall() {
    for mode in [GlareMode::Adaptive, GlareMode::Manual] {
        let mut img = painting(160, 120, 3);
        let truth = add_spots(&mut img, 12, 9);
        let p = GlareParams { mode, ..Default::default() };
        let (mask, rep) = detect_mask(&img, &p);
        let (prec, rec) = precision_recall(&mask, &truth);
        assert!(prec > 0.7 && rec > 0.8, "{mode:?}: precision {prec}, recall {rec}, {rep:?}");
        assert!(rep.spots >= 8 && rep.spots <= 14, "{rep:?}");
        assert_eq!(rep.pixels, mask.as_slice().iter().filter(|&&v| v == 255).count());
        assert!(mask.as_slice().iter().all(|&v| v == 0 || v == 255));
    }
}

#[test]
fn an_image_without_highlights_gives_no_mask() {
    for seed in [1, 2, 3] {
        let img = painting(160, 120, seed);
        let (mask, rep) = detect_mask(&img, &GlareParams::default());
        assert_eq!(rep.pixels, 0, "seed {seed}: {rep:?}");
        assert!(mask.as_slice().iter().all(|&v| v == 0));
    }
}

#[test]
fn large_bright_areas_and_coloured_spots_are_not_glare() {
    let mut img = painting(160, 120, 4);
    // A white 40 x 40 patch (area 1600 > max_area 500) and a bright saturated red spot.
    for y in 20..60 {
        for x in 20..60 {
            img.set(x, y, Rgba8::new(250, 250, 248, 255));
        }
    }
    for y in 90..96 {
        for x in 120..126 {
            img.set(x, y, Rgba8::new(255, 40, 30, 255));
        }
    }
    let p = GlareParams { max_area: 500, ..Default::default() };
    let (_, rep) = detect_mask(&img, &p);
    assert_eq!(rep.pixels, 0, "{rep:?}");
}

#[test]
fn gray_types_detect_the_same_spots() {
    let mut img = painting(120, 90, 5);
    let truth = add_spots(&mut img, 6, 21);
    let gray8 = img.convert::<u8>();
    let gray16 = gray8.map(|v| v as u16 * 257);
    let grayf = gray8.map(|v| v as f32 / 255.0);
    let p = GlareParams::default();
    let (m8, _) = detect_mask(&gray8, &p);
    let (m16, _) = detect_mask(&gray16, &p);
    let (mf, _) = detect_mask(&grayf, &p);
    for m in [&m8, &m16, &mf] {
        let (prec, rec) = precision_recall(m, &truth);
        assert!(prec > 0.6 && rec > 0.8, "precision {prec}, recall {rec}");
    }
}

#[test]
fn fill_restores_a_smooth_surface_without_seams() {
    // Smooth colour ramp with spots: the fill should land close to the ramp.
    let clean = Image::from_fn(100, 80, |x, y| Rgba8::new((60 + x) as u8, (40 + y) as u8, (30 + (x + y) / 2) as u8, 255)).unwrap();
    let mut img = clean.clone();
    let truth = add_spots(&mut img, 5, 33);
    let mut mask = Image::<u8>::new(100, 80).unwrap();
    // Mask = truth grown by the spots' faint rim (alpha >= 0.02 region).
    for y in 0..80 {
        for x in 0..100 {
            if img.at(x, y) != clean.at(x, y) {
                mask.set(x, y, 255);
            }
        }
    }
    assert!(truth.iter().any(|&t| t));
    let mut out = Image::<Rgba8>::new(100, 80).unwrap();
    fill(img.view(), mask.view(), out.view_mut(), &GlareParams::default(), Parallelism::AllThreads).unwrap();
    let mut worst = 0i32;
    for y in 0..80usize {
        for x in 0..100usize {
            let (a, b) = (out.at(x, y), clean.at(x, y));
            let g = GlareParams::default().fill_grow;
            let near = (y.saturating_sub(g)..(y + g + 1).min(80)).any(|yy| (x.saturating_sub(g)..(x + g + 1).min(100)).any(|xx| mask.at(xx, yy) != 0));
            if !near {
                assert_eq!(out.at(x, y), img.at(x, y));
            }
            for (u, v) in a.to_array().iter().zip(b.to_array()) {
                worst = worst.max((*u as i32 - v as i32).abs());
            }
        }
    }
    assert!(worst <= 3, "largest deviation from the clean ramp: {worst}");
}

#[test]
fn glare_writes_mask_and_corrected_image() {
    let mut img = painting(120, 90, 6);
    let _ = add_spots(&mut img, 5, 8);
    let (mut mask, mut out) = (Image::<u8>::new(120, 90).unwrap(), Image::<Rgba8>::new(120, 90).unwrap());
    let rep = glare(img.view(), mask.view_mut(), out.view_mut(), &GlareParams::default(), Parallelism::AllThreads).unwrap();
    assert!(rep.spots > 0);
    // Corrected spots are no longer near saturation; away from them nothing changed.
    for y in 0..90usize {
        for x in 0..120usize {
            let g = GlareParams::default().fill_grow;
            let near = (y.saturating_sub(g)..(y + g + 1).min(90)).any(|yy| (x.saturating_sub(g)..(x + g + 1).min(120)).any(|xx| mask.at(xx, yy) != 0));
            if !near {
                assert_eq!(out.at(x, y), img.at(x, y));
            }
        }
    }
    let (_, after) = detect_mask(&out, &GlareParams::default());
    assert_eq!(after.pixels, 0, "{after:?}");
}

#[test]
fn bad_parameters_are_errors() {
    let img = painting(20, 20, 1);
    let mut mask = Image::<u8>::new(20, 20).unwrap();
    let bad = [
        GlareParams { radii: vec![], ..Default::default() },
        GlareParams { radii: vec![5, 5000], ..Default::default() },
        GlareParams { k_sigma: 0.0, ..Default::default() },
        GlareParams { k_sigma: f32::NAN, ..Default::default() },
        GlareParams { brightness: 1.5, ..Default::default() },
        GlareParams { min_contrast: 0.0, ..Default::default() },
        GlareParams { max_saturation: -0.1, ..Default::default() },
        GlareParams { min_area: 0, ..Default::default() },
        GlareParams { max_elongation: 0.5, ..Default::default() },
        GlareParams { max_elongation: f32::INFINITY, ..Default::default() },
        GlareParams { min_area: 10, max_area: 5, ..Default::default() },
        GlareParams { grow: MAX_GROW + 1, ..Default::default() },
        GlareParams { fill_grow: MAX_GROW + 1, ..Default::default() },
        GlareParams { fill_iterations: MAX_FILL_ITERATIONS + 1, ..Default::default() },
        GlareParams { border: Border::Normalize, ..Default::default() },
        GlareParams { border: Border::Constant(0.5), ..Default::default() },
    ];
    for p in bad {
        assert!(detect(img.view(), mask.view_mut(), &p, Parallelism::Sequential).is_err(), "{p:?}");
    }
    let mut small = Image::<u8>::new(20, 19).unwrap();
    assert!(matches!(
        detect(img.view(), small.view_mut(), &GlareParams::default(), Parallelism::Sequential),
        Err(Error::SizeMismatch { .. })
    ));
    let mut out = Image::<Rgba8>::new(19, 20).unwrap();
    assert!(matches!(
        fill(img.view(), mask.view(), out.view_mut(), &GlareParams::default(), Parallelism::Sequential),
        Err(Error::SizeMismatch { .. })
    ));
    let mut out = Image::<Rgba8>::new(20, 20).unwrap();
    let mut m2 = Image::<u8>::new(20, 20).unwrap();
    assert!(matches!(
        glare(img.view(), m2.view_mut(), Image::<Rgba8>::new(20, 21).unwrap().view_mut(), &GlareParams::default(), Parallelism::Sequential),
        Err(Error::SizeMismatch { .. })
    ));
    // A fully masked image keeps its values (nothing to fill from).
    m2.as_mut_slice().fill(255);
    fill(img.view(), m2.view(), out.view_mut(), &GlareParams::default(), Parallelism::Sequential).unwrap();
    assert_eq!(out, img);
}
