//! The `filters` suite: the recursive sliding window's seed table (naive vs recursive,
//! one thread vs all, u8 and f32, m = 3..255 on 1024x1024), box / mean u8 and f32 against
//! OpenCV's `boxFilter`, Gaussian 1920x1080 f32 and RGBA against `GaussianBlur`, matrix
//! sum and product 1024x1024 against NumPy.

use super::{Bench, Recorder};
use anyhow::Result;
use serde_json::json;
use tessera::filter::{mean_filter_naive, BoxParams, GaussianMethod, GaussianParams};
use tessera::{AnyView, AnyViewMut, Border, Image, Rgba8};

/// Deterministic pseudo-random test image (xorshift), the same in every run.
pub fn noise_u8(w: usize, h: usize, seed: u64) -> Image<u8> {
    let mut s = seed | 1;
    Image::from_fn(w, h, |_, _| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 24) as u8
    })
    .expect("non-zero size")
}

pub fn run(b: &Bench, r: &mut Recorder) -> Result<()> {
    let name = b.backend.name();
    let img = noise_u8(1024, 1024, 1);
    let imgf: Image<f32> = img.convert();
    let mut out = Image::<u8>::new(1024, 1024)?;
    let mut outf = Image::<f32>::new(1024, 1024)?;

    // Seed table: naive O(m^2) vs recursive O(1), one thread vs all threads. The recursive
    // series time their windows interleaved (their flatness over m is the target).
    let windows = [3usize, 5, 9, 15, 31, 63, 127, 255];
    let boxes: Vec<BoxParams> = windows.iter().map(|&m| BoxParams::square(m, Border::Reflect101)).collect();
    let params: Vec<_> = windows.iter().map(|&m| json!({"w": 1024, "h": 1024, "m": m})).collect();
    for ((&m, p), params) in windows.iter().zip(&boxes).zip(&params) {
        if m <= 15 || (!b.quick && m <= 31) {
            let reps = b.reps_for((m * m) as f64 * 0.8).min(5);
            r.time("box_u8_naive_1thread", params.clone(), "cpu", reps, || mean_filter_naive(img.view(), out.view_mut(), p));
        }
    }
    for (series, be) in [("box_u8_recursive_1thread", &b.single), ("box_u8", &b.backend)] {
        r.time_interleaved(series, &params, be.name(), |i| {
            be.mean_filter(AnyView::U8(img.view()), AnyViewMut::U8(out.view_mut()), &boxes[i])
        });
    }
    for (series, be) in [("box_f32_recursive_1thread", &b.single), ("box_f32", &b.backend)] {
        r.time_interleaved(series, &params, be.name(), |i| {
            be.mean_filter(AnyView::F32(imgf.view()), AnyViewMut::F32(outf.view_mut()), &boxes[i])
        });
    }

    // Gaussian, 1920x1080, f32 and RGBA.
    let hd = noise_u8(1920, 1080, 2);
    let hdf: Image<f32> = hd.convert();
    let rgba = Image::from_fn(1920, 1080, |x, y| {
        let v = hd.at(x, y);
        Rgba8::new(v, v.wrapping_mul(3), v ^ 0x5a, 255)
    })?;
    let mut hd_out = Image::<f32>::new(1920, 1080)?;
    let mut rgba_out = Image::<Rgba8>::new(1920, 1080)?;
    for sigma in [1.0, 2.0, 5.0, 10.0, 20.0] {
        let p = GaussianParams { sigma, ..Default::default() };
        let params = json!({"w": 1920, "h": 1080, "sigma": sigma});
        r.time("gauss_f32", params.clone(), name, b.reps, || {
            b.backend.gaussian_blur(AnyView::F32(hdf.view()), AnyViewMut::F32(hd_out.view_mut()), &p)
        });
        // Both implementations at every sigma (where `Auto` switches is a measured choice).
        if !b.quick {
            for (method, label) in [(GaussianMethod::Fir, "fir"), (GaussianMethod::Iir, "iir")] {
                let pm = GaussianParams { sigma, method, ..Default::default() };
                let params = json!({"w": 1920, "h": 1080, "sigma": sigma, "method": label});
                r.time("gauss_f32_method", params, name, b.reps, || {
                    b.backend.gaussian_blur(AnyView::F32(hdf.view()), AnyViewMut::F32(hd_out.view_mut()), &pm)
                });
            }
        }
        r.time("gauss_rgba8", params, name, b.reps, || {
            b.backend
                .gaussian_blur(AnyView::Rgba8(rgba.view()), AnyViewMut::Rgba8(rgba_out.view_mut()), &p)
                
        });
    }

    // Matrix sum and product, 1024x1024 f32.
    let a: Image<f32> = noise_u8(1024, 1024, 3).map(|v| v as f32 / 255.0);
    let c: Image<f32> = noise_u8(1024, 1024, 4).map(|v| v as f32 / 255.0);
    let mut prod = Image::<f32>::new(1024, 1024)?;
    r.time("matadd_f32", json!({"n": 1024}), name, b.reps, || {
        b.backend.mat_add(a.view(), c.view(), prod.view_mut())
    });
    r.time("matmul_f32", json!({"n": 1024}), name, b.reps.min(7), || {
        b.backend.mat_mul(a.view(), c.view(), prod.view_mut())
    });
    r.time("matmul_f32_1thread", json!({"n": 1024}), b.single.name(), b.reps.min(5), || {
        b.single.mat_mul(a.view(), c.view(), prod.view_mut())
    });
    Ok(())
}
