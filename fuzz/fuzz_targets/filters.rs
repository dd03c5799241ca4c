//! The filter entry points of the Backend with random images and parameters: mean, box sum,
//! Gaussian, local variance (every method and kernel), contrast, glare. Errors are fine;
//! a panic or a crash is a bug.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tessera::filter::{BoxParams, GaussianMethod, GaussianParams};
use tessera::{AnyImage, Backend, ContrastParams, CpuBackend, GlareMode, GlareParams, Image, Parallelism};
use tessera::{VarianceKernel, VarianceMethod, VarianceParams};
use tessera_fuzz::Bytes;

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let be = CpuBackend::new(Parallelism::Sequential);
    let (op, kind) = (b.u8(), b.u8());
    let (w, h) = (b.range(1, 48), b.range(1, 48));
    let img = b.image(kind, w, h);
    let src = img.view().expect("an input type");
    let mut same = AnyImage::like(&src).expect("small");
    match op % 6 {
        0 => {
            let p = BoxParams { width: b.range(0, 5000), height: b.range(0, 5000), border: b.border() };
            let _ = be.mean_filter(src, same.view_mut(), &p);
        }
        1 => {
            let p = BoxParams { width: b.range(0, 200), height: b.range(0, 200), border: b.border() };
            let mut sums = if b.bool() { AnyImage::U32(Image::new(w, h).unwrap()) } else { AnyImage::F32(Image::new(w, h).unwrap()) };
            let _ = be.box_sum(src, sums.view_mut(), &p);
        }
        2 => {
            let method = [GaussianMethod::Auto, GaussianMethod::Fir, GaussianMethod::Iir][b.range(0, 2)];
            let radius = if b.bool() { Some(b.range(0, 5000)) } else { None };
            let p = GaussianParams { sigma: b.param(0.0, 40.0) as f64, radius, method, border: b.border() };
            let _ = be.gaussian_blur(src, same.view_mut(), &p);
        }
        3 => {
            let method = VarianceMethod::ALL[b.range(0, 5)];
            let r = b.range(0, 300);
            let kernel = if b.bool() { VarianceKernel::Tent { radius: r } } else { VarianceKernel::Box { radius: r } };
            let p = VarianceParams { method, kernel, border: b.border() };
            let mut var = Image::<f32>::new(w, h).unwrap();
            let _ = be.local_variance(src, var.view_mut(), &p);
        }
        4 => {
            let radii = (0..b.range(0, 4)).map(|_| [0, 1, 3, 7, 15, 31, 5][b.range(0, 6)]).collect();
            let p = ContrastParams {
                radii,
                alpha: b.param(0.0, 4.0),
                gain_max: b.param(0.0, 8.0),
                gain_min: b.param(0.0, 2.0),
                noise: b.param(0.0, 1.0),
                border: b.border(),
            };
            let _ = be.contrast_enhance(src, same.view_mut(), &p);
        }
        _ => {
            let mut mask = Image::<u8>::new(w, h).unwrap();
            let p = GlareParams {
                mode: if b.bool() { GlareMode::Adaptive } else { GlareMode::Manual },
                radii: (0..b.range(0, 3)).map(|_| b.range(0, 40)).collect(),
                k_sigma: b.param(0.0, 6.0),
                brightness: b.param(0.0, 1.0),
                min_contrast: b.param(0.0, 1.0),
                max_saturation: b.param(0.0, 1.0),
                min_area: b.range(0, 50),
                max_area: b.range(0, 5000),
                max_elongation: b.param(0.0, 10.0),
                grow: b.range(0, 20),
                fill_grow: b.range(0, 20),
                fill_iterations: b.range(0, 300),
                border: b.border(),
            };
            let _ = be.glare(src, mask.view_mut(), same.view_mut(), &p);
        }
    }
});
