//! The `variance` suite: the variance paper's Figure 7 on this CPU (1920x1080 8-bit, tent
//! R = 63, six methods: median time, speedup over Usual, largest error against the exact
//! Recursive result), the O(1) and O(log N) methods against the radius (u8 and f32, tent
//! and box; RGBA's luma at one radius, to set beside OpenCV's `variance_tent_koenig_f32` / `variance_box_koenig_f32`),
//! contrast enhancement at three scales (1920x1080), and glare on an 18.7-megapixel image.

use super::{Bench, Recorder};
use anyhow::Result;
use serde_json::json;
use tessera::{
    AnyView, AnyViewMut, ContrastParams, GlareParams, Image, Rgba8, VarianceKernel, VarianceMethod, VarianceParams,
};

/// A deterministic "natural" 8-bit scene: smooth shading, edges, texture and noise.
pub fn scene_u8(w: usize, h: usize, seed: u64) -> Image<u8> {
    let mut s = seed | 1;
    Image::from_fn(w, h, |x, y| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let (xf, yf) = (x as f32, y as f32);
        let shade = 110.0 + 60.0 * (xf / 173.0).sin() * (yf / 131.0).cos();
        let edge = if (x / 240 + y / 180) % 2 == 0 { 35.0 } else { -35.0 };
        let texture = 12.0 * (xf / 3.1 + yf / 4.7).sin();
        (shade + edge + texture + (s % 17) as f32 - 8.0).clamp(0.0, 255.0) as u8
    })
    .expect("non-zero size")
}

/// Largest absolute and relative (to max(exact, 1)) difference.
fn max_errors(got: &Image<f32>, exact: &Image<f32>) -> (f64, f64) {
    got.as_slice().iter().zip(exact.as_slice()).fold((0.0, 0.0), |(a, r), (&g, &e)| {
        let d = (g as f64 - e as f64).abs();
        (f64::max(a, d), f64::max(r, d / (e as f64).max(1.0)))
    })
}

pub fn run(b: &Bench, r: &mut Recorder) -> Result<()> {
    let name = b.backend.name();
    let (w, h) = (1920, 1080);
    let img = scene_u8(w, h, 7);
    let imgf: Image<f32> = img.convert();
    let mut out = Image::<f32>::new(w, h)?;

    // Figure 7: six methods at R = 63 (R = 15 with --quick).
    let fig_r = if b.quick { 15 } else { 63 };
    let tent = VarianceKernel::Tent { radius: fig_r };
    let mut exact = Image::<f32>::new(w, h)?;
    b.backend.local_variance(AnyView::U8(img.view()), exact.view_mut(), &VarianceParams::new(VarianceMethod::Recursive, tent))?;
    let mut usual_ms = None;
    for m in VarianceMethod::ALL {
        let p = VarianceParams::new(m, tent);
        let slow = matches!(m, VarianceMethod::Usual | VarianceMethod::Koenig | VarianceMethod::Welford);
        let reps = if slow { 1 } else { b.reps_for(40.0) };
        let params = json!({"w": w, "h": h, "radius": fig_r, "kernel": "tent", "type": "u8"});
        let t = r.time(&format!("fig7_{}", m.name()), params.clone(), name, reps, || {
            b.backend.local_variance(AnyView::U8(img.view()), out.view_mut(), &p)
        });
        let Some(t) = t else { continue };
        if m == VarianceMethod::Usual {
            usual_ms = Some(t);
        }
        let (abs, rel) = max_errors(&out, &exact);
        r.record(
            &format!("fig7_{}_summary", m.name()),
            params,
            name,
            json!({"median_ms": t, "speedup_vs_usual": usual_ms.map(|u| u / t), "max_abs_error": abs, "max_rel_error": rel}),
        );
    }

    // O(1) and O(log N) against the radius.
    let radii = [3usize, 7, 15, 31, 63];
    for &rad in &radii {
        let params = json!({"w": w, "h": h, "radius": rad});
        for m in [VarianceMethod::Recursive, VarianceMethod::Threewise, VarianceMethod::Pairwise] {
            let p = VarianceParams::new(m, VarianceKernel::Tent { radius: rad });
            r.time(&format!("variance_tent_{}_u8", m.name()), params.clone(), name, b.reps_for(40.0), || {
                b.backend.local_variance(AnyView::U8(img.view()), out.view_mut(), &p)
            });
        }
        let p = VarianceParams::new(VarianceMethod::Recursive, VarianceKernel::Tent { radius: rad });
        r.time("variance_tent_recursive_f32", params.clone(), name, b.reps_for(60.0), || {
            b.backend.local_variance(AnyView::F32(imgf.view()), out.view_mut(), &p)
        });
    }
    let p63 = VarianceParams::new(VarianceMethod::Recursive, VarianceKernel::Tent { radius: 63 });
    r.time("variance_tent_recursive_u8_1thread", json!({"w": w, "h": h, "radius": 63}), b.single.name(), b.reps_for(80.0), || {
        b.single.local_variance(AnyView::U8(img.view()), out.view_mut(), &p63)
    });
    for rad in [3usize, 7, 15, 31, 63, 127, 255] {
        let params = json!({"w": w, "h": h, "radius": rad});
        let p = VarianceParams::new(VarianceMethod::Recursive, VarianceKernel::Box { radius: rad });
        r.time("variance_box_recursive_u8", params.clone(), name, b.reps_for(30.0), || {
            b.backend.local_variance(AnyView::U8(img.view()), out.view_mut(), &p)
        });
        r.time("variance_box_recursive_f32", params.clone(), name, b.reps_for(50.0), || {
            b.backend.local_variance(AnyView::F32(imgf.view()), out.view_mut(), &p)
        });
        // The O(log N) methods on the box kernel (blocks joined by the digits of the width).
        for (label, method) in [("variance_box_threewise_u8", VarianceMethod::Threewise), ("variance_box_pairwise_u8", VarianceMethod::Pairwise)] {
            let p = VarianceParams::new(method, VarianceKernel::Box { radius: rad });
            r.time(label, params.clone(), name, b.reps_for(60.0), || b.backend.local_variance(AnyView::U8(img.view()), out.view_mut(), &p));
        }
    }

    // Contrast enhancement, three scales, 1920x1080 gray and RGBA.
    let cp = ContrastParams::default();
    let mut out8 = Image::<u8>::new(w, h)?;
    let params = json!({"w": w, "h": h, "radii": cp.radii});
    r.time("contrast_u8", params.clone(), name, b.reps_for(80.0), || {
        b.backend.contrast_enhance(AnyView::U8(img.view()), AnyViewMut::U8(out8.view_mut()), &cp)
    });
    let rgba = Image::from_fn(w, h, |x, y| {
        let v = img.at(x, y);
        Rgba8::new(v, (v as u16 * 3 / 4) as u8, v / 2, 255)
    })?;
    let mut out_rgba = Image::<Rgba8>::new(w, h)?;
    r.time("contrast_rgba8", params, name, b.reps_for(100.0), || {
        b.backend.contrast_enhance(AnyView::Rgba8(rgba.view()), AnyViewMut::Rgba8(out_rgba.view_mut()), &cp)
    });

    // RGBA local variance: of the luma, read on the fly (O(1) and O(log N) methods).
    for m in [VarianceMethod::Recursive, VarianceMethod::Threewise] {
        let p = VarianceParams::new(m, VarianceKernel::Tent { radius: 7 });
        r.time(&format!("variance_tent_{}_rgba8", m.name()), json!({"w": w, "h": h, "radius": 7}), name, b.reps_for(60.0), || {
            b.backend.local_variance(AnyView::Rgba8(rgba.view()), out.view_mut(), &p)
        });
    }

    // Glare on 18.7 megapixels (5000 x 3740), a painting-like scene with 300 highlights.
    let (gw, gh) = if b.quick { (1000, 748) } else { (5000, 3740) };
    let painting = glare_scene(gw, gh, 300);
    let mut mask = Image::<u8>::new(gw, gh)?;
    let mut fixed = Image::<Rgba8>::new(gw, gh)?;
    let gp = GlareParams::default();
    let mut spots = 0;
    let timed = r.time("glare_rgba8", json!({"w": gw, "h": gh, "megapixels": (gw * gh) as f64 / 1e6}), name, b.reps_for(600.0).min(5), || {
        b.backend.glare(AnyView::Rgba8(painting.view()), mask.view_mut(), AnyViewMut::Rgba8(fixed.view_mut()), &gp).map(|rep| spots = rep.spots)
    });
    if timed.is_some() {
        r.record("glare_rgba8_spots_found", json!({"w": gw, "h": gh, "added": 300}), name, json!(spots));
    }
    Ok(())
}

/// A textured colour scene with `n` soft, weakly coloured, near-saturated highlights.
fn glare_scene(w: usize, h: usize, n: usize) -> Image<Rgba8> {
    let base = scene_u8(w, h, 11);
    let mut img = Image::from_fn(w, h, |x, y| {
        let v = base.at(x, y) as f32 * 0.8;
        Rgba8::new((v * 1.1).min(255.0) as u8, (v * 0.85) as u8, (v * 0.6) as u8, 255)
    })
    .expect("non-zero size");
    let mut s = 99u64;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    for _ in 0..n {
        let (cx, cy, sig) = (20.0 + next() * (w as f64 - 40.0), 20.0 + next() * (h as f64 - 40.0), 1.5 + 3.0 * next());
        let reach = (3.0 * sig) as isize;
        for dy in -reach..=reach {
            for dx in -reach..=reach {
                let (x, y) = ((cx as isize + dx) as usize, (cy as isize + dy) as usize);
                let d2 = (x as f64 - cx).powi(2) + (y as f64 - cy).powi(2);
                let a = (-d2 / (sig * sig)).exp() as f32;
                let p = img.at(x, y);
                let mix = |c: u8, t: f32| ((1.0 - a) * c as f32 + a * t).round() as u8;
                img.set(x, y, Rgba8::new(mix(p.r, 252.0), mix(p.g, 250.0), mix(p.b, 240.0), 255));
            }
        }
    }
    img
}
