//! Quick timings of the Gaussian blur and the matrix kernels (not the shipped benchmark,
//! which is `tessera bench filters`): `cargo run --release --example gauss_timing`.

use std::time::Instant;
use tessera_core::filter::{gaussian_blur, GaussianMethod, GaussianParams};
use tessera_core::linalg::{mat_add, mat_mul};
use tessera_core::{Border, Image, Parallelism, Rgba8};

fn median_ms(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut t: Vec<f64> = (0..reps)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(|a, b| a.total_cmp(b));
    // Minimum and median: on a loaded machine the minimum is the steadier figure.
    eprint!("[min {:.3}] ", t[0]);
    t[reps / 2]
}

fn main() {
    let only: Vec<String> = std::env::args().skip(1).collect();
    let want = |s: &str| only.is_empty() || only.iter().any(|o| s.starts_with(o.as_str()));
    let par = if std::env::var("SEQ").is_ok() { Parallelism::Sequential } else { Parallelism::AllThreads };
    let (w, h) = (1920, 1080);
    let mut seed = 1u32;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        (seed >> 24) as u8
    };
    let gray = Image::<f32>::from_fn(w, h, |_, _| rnd() as f32).unwrap();
    let rgba = Image::<Rgba8>::from_fn(w, h, |_, _| Rgba8::new(rnd(), rnd(), rnd(), rnd())).unwrap();
    let mut out = Image::<f32>::new(w, h).unwrap();
    let mut out4 = Image::<Rgba8>::new(w, h).unwrap();
    let sigmas: Vec<f64> = match std::env::var("SIGMA") {
        Ok(s) => s.split(',').filter_map(|v| v.parse().ok()).collect(),
        Err(_) => vec![1.0, 2.0, 3.0, 5.0, 10.0, 20.0],
    };
    let methods = match std::env::var("METHOD").as_deref() {
        Ok("fir") => vec![GaussianMethod::Fir],
        Ok("iir") => vec![GaussianMethod::Iir],
        _ => vec![GaussianMethod::Fir, GaussianMethod::Iir],
    };
    for &sigma in &sigmas {
        for &method in &methods {
            let p = GaussianParams { sigma, radius: None, method, border: Border::Reflect101 };
            if want("gauss_f32") {
                let ms = median_ms(9, || gaussian_blur(gray.view(), out.view_mut(), &p, par).unwrap());
                println!("gauss_f32   sigma {sigma:>4} {method:?}: {ms:.3} ms");
            }
            if want("gauss_rgba8") {
                let ms = median_ms(5, || gaussian_blur(rgba.view(), out4.view_mut(), &p, par).unwrap());
                println!("gauss_rgba8 sigma {sigma:>4} {method:?}: {ms:.3} ms");
            }
        }
    }
    let n = 1024;
    let a = Image::<f32>::from_fn(n, n, |x, y| ((x * 7 + y * 13) % 17) as f32 * 0.1).unwrap();
    let b = Image::<f32>::from_fn(n, n, |x, y| ((x * 5 + y * 3) % 11) as f32 * 0.1).unwrap();
    let mut c = Image::<f32>::new(n, n).unwrap();
    if want("matmul") {
        let ms = median_ms(5, || mat_mul(a.view(), b.view(), c.view_mut(), par).unwrap());
        println!("matmul_f32 1024: {ms:.3} ms ({:.1} GFLOP/s)", 2.0 * (n as f64).powi(3) / ms / 1e6);
    }
    if want("matadd") {
        let ms = median_ms(15, || mat_add(a.view(), b.view(), c.view_mut(), par).unwrap());
        println!("matadd_f32 1024: {ms:.3} ms");
    }
}
