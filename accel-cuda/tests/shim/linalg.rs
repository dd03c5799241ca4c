//! `kernels/linalg.cu` on the CPU shim against the CPU backend.

use tessera_core::{Backend, CpuBackend, Image, Parallelism};

fn random(w: usize, h: usize, seed: u64) -> Image<f32> {
    let mut s = seed;
    Image::from_fn(w, h, |_, _| {
        s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    })
    .unwrap()
}

#[test]
fn mat_add_is_the_cpus_bit_for_bit_on_odd_sizes_and_strided_views() {
    let gpu = tessera_cuda::open_shim();
    let cpu = CpuBackend::new(Parallelism::Sequential);
    for (w, h) in [(1, 1), (1, 37), (37, 1), (33, 9), (70, 17)] {
        let a = random(w + 3, h, 1);
        let b = random(w, h, 2);
        let a_view = a.view().crop(2, 0, w, h).unwrap();
        let mut want = Image::<f32>::new(w, h).unwrap();
        let mut got = Image::<f32>::new(w + 5, h).unwrap();
        cpu.mat_add(a_view, b.view(), want.view_mut()).unwrap();
        gpu.mat_add(a_view, b.view(), got.view_mut().crop_mut(4, 0, w, h).unwrap()).unwrap();
        for y in 0..h {
            assert_eq!(&got.view().row(y)[4..4 + w], want.view().row(y), "{w}x{h} row {y}");
        }
    }
}

#[test]
fn mat_mul_is_within_the_stated_bound_of_a_float64_product() {
    let gpu = tessera_cuda::open_shim();
    for (m, k, n) in [(1, 1, 1), (1, 37, 1), (29, 37, 23), (70, 17, 90), (65, 64, 1), (3, 100, 66)] {
        let a = random(k, m, (m * 31 + k) as u64);
        let b = random(n, k, (k * 17 + n) as u64);
        let mut out = Image::<f32>::new(n, m).unwrap();
        gpu.mat_mul(a.view(), b.view(), out.view_mut()).unwrap();
        for i in 0..m {
            for j in 0..n {
                let (mut s, mut mag) = (0.0f64, 0.0f64);
                for p in 0..k {
                    let t = a.at(p, i) as f64 * b.at(j, p) as f64;
                    s += t;
                    mag += t.abs();
                }
                let got = out.at(j, i) as f64;
                assert!((got - s).abs() <= 1e-4 * mag.max(1e-30), "{m}x{k} * {k}x{n} at ({i}, {j}): {got} vs {s}");
            }
        }
    }
}

#[test]
fn mat_mul_on_strided_views_and_its_errors_are_the_cpus() {
    let gpu = tessera_cuda::open_shim();
    let cpu = CpuBackend::new(Parallelism::Sequential);
    let big = random(40, 30, 9);
    let a = big.view().crop(3, 2, 20, 11).unwrap();
    let b = big.view().crop(1, 5, 13, 20).unwrap();
    let mut want = Image::<f32>::new(13, 11).unwrap();
    cpu.mat_mul(a, b, want.view_mut()).unwrap();
    let mut host = Image::<f32>::new(20, 11).unwrap();
    gpu.mat_mul(a, b, host.view_mut().crop_mut(2, 0, 13, 11).unwrap()).unwrap();
    for y in 0..11 {
        for x in 0..13 {
            assert!((host.at(x + 2, y) - want.at(x, y)).abs() <= 1e-4 * want.at(x, y).abs().max(1.0), "({x}, {y})");
        }
    }
    let mut wrong = Image::<f32>::new(12, 11).unwrap();
    assert_eq!(gpu.mat_mul(a, b, wrong.view_mut()), cpu.mat_mul(a, b, wrong.view_mut()));
    assert_eq!(gpu.mat_mul(a, a, want.view_mut()), cpu.mat_mul(a, a, want.view_mut()));
    assert!(gpu.mat_mul(a, a, want.view_mut()).is_err());
}
