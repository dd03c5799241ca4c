//! Criterion benches of the foundation's filters: the recursive O(1) box filter against the
//! naive O(m^2) one (one thread), and all threads; Gaussian FIR / IIR; matrix product; the
//! mean filter through each backend that opens here (CUDA reported as skipped without one).
//! `tessera bench filters --json` runs the full table side by side with the peers.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use tessera::filter::{gaussian_blur, mean_filter, mean_filter_naive, BoxParams, GaussianMethod, GaussianParams};
use tessera::{linalg, open_backend, AnyView, AnyViewMut, BackendChoice, Border, Image, Parallelism};

fn image(w: usize, h: usize) -> Image<u8> {
    Image::from_fn(w, h, |x, y| ((x * 7919 + y * 104729) % 251) as u8).expect("non-zero size")
}

fn box_filter(c: &mut Criterion) {
    let src = image(1024, 1024);
    let mut dst = Image::<u8>::new(1024, 1024).expect("non-zero size");
    let mut g = c.benchmark_group("box_u8_1024");
    g.sample_size(10);
    for m in [5usize, 15, 63, 255] {
        let p = BoxParams::square(m, Border::Reflect101);
        g.bench_with_input(BenchmarkId::new("recursive_1thread", m), &p, |b, p| {
            b.iter(|| mean_filter(src.view(), dst.view_mut(), p, Parallelism::Sequential))
        });
        g.bench_with_input(BenchmarkId::new("recursive_all_threads", m), &p, |b, p| {
            b.iter(|| mean_filter(src.view(), dst.view_mut(), p, Parallelism::AllThreads))
        });
        if m <= 15 {
            g.bench_with_input(BenchmarkId::new("naive_1thread", m), &p, |b, p| {
                b.iter(|| mean_filter_naive(src.view(), dst.view_mut(), p))
            });
        }
    }
    g.finish();
}

fn gaussian(c: &mut Criterion) {
    let src: Image<f32> = image(1920, 1080).convert();
    let mut dst = Image::<f32>::new(1920, 1080).expect("non-zero size");
    let mut g = c.benchmark_group("gauss_f32_1920x1080");
    g.sample_size(10);
    for sigma in [2.0, 10.0] {
        for method in [GaussianMethod::Fir, GaussianMethod::Iir] {
            let p = GaussianParams { sigma, method, ..Default::default() };
            g.bench_with_input(BenchmarkId::new(format!("{method:?}"), sigma), &p, |b, p| {
                b.iter(|| gaussian_blur(src.view(), dst.view_mut(), p, Parallelism::AllThreads))
            });
        }
    }
    g.finish();
}

fn matmul(c: &mut Criterion) {
    let a: Image<f32> = image(512, 512).map(|v| v as f32);
    let b: Image<f32> = image(512, 512).map(|v| v as f32 * 0.5);
    let mut out = Image::<f32>::new(512, 512).expect("non-zero size");
    let mut g = c.benchmark_group("matmul_f32");
    g.sample_size(10);
    g.bench_function("512", |bch| bch.iter(|| linalg::mat_mul(a.view(), b.view(), out.view_mut(), Parallelism::AllThreads)));
    g.finish();
}

/// The mean filter through `Box<dyn Backend>`, as the CLI and the JNI bridge call it: the
/// CPU backend and CUDA, each opened by the one chooser the other faces use.
fn backends(c: &mut Criterion) {
    let src = image(1024, 1024);
    let mut dst = Image::<u8>::new(1024, 1024).expect("non-zero size");
    let p = BoxParams::square(15, Border::Reflect101);
    let mut g = c.benchmark_group("mean_u8_1024_m15_backend");
    g.sample_size(10);
    for choice in [BackendChoice::Cpu, BackendChoice::Cuda] {
        let backend = match open_backend(choice, Parallelism::AllThreads) {
            Ok(opened) => opened.backend,
            Err(e) => {
                eprintln!("{choice}: SKIPPED: {e}");
                continue;
            }
        };
        g.bench_function(choice.name(), |b| {
            b.iter(|| backend.mean_filter(AnyView::U8(src.view()), AnyViewMut::U8(dst.view_mut()), &p))
        });
    }
    g.finish();
}

criterion_group!(benches, box_filter, gaussian, matmul, backends);
criterion_main!(benches);
