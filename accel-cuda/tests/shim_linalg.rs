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
