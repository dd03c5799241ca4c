//! Runs the u8 mean filter on a 1024x1024 image a few times: a fixed workload for
//! `valgrind --tool=callgrind` (instruction counts per pixel).
use tessera_core::filter::{mean_filter, BoxParams};
use tessera_core::{Border, Image, Parallelism};

fn main() {
    let m: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(5);
    let ty = std::env::args().nth(2).unwrap_or_else(|| "u8".into());
    let src = Image::from_fn(1024, 1024, |x, y| ((x * 31 + y * 17) % 251) as u8).unwrap();
    let p = BoxParams::square(m, Border::Reflect101);
    for _ in 0..4 {
        if ty == "f32" {
            let s: Image<f32> = src.convert();
            let mut d = Image::<f32>::new(1024, 1024).unwrap();
            mean_filter(s.view(), d.view_mut(), &p, Parallelism::Sequential).unwrap();
        } else {
            let mut d = Image::<u8>::new(1024, 1024).unwrap();
            mean_filter(src.view(), d.view_mut(), &p, Parallelism::Sequential).unwrap();
        }
    }
}
