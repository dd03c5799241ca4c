use std::time::Instant;
use tessera_core::*;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let r: usize = args.get(1).map(|s| s.parse().unwrap()).unwrap_or(63);
    let methods: Vec<&str> = if args.len() > 2 { args[2..].iter().map(|s| s.as_str()).collect() } else { vec!["recursive", "threewise", "pairwise"] };
    let (w, h) = (1920, 1080);
    let mut s = 12345u64;
    let img = Image::from_fn(w, h, |x, y| { s ^= s << 13; s ^= s >> 7; s ^= s << 17; ((x + y) as u64 / 8 + (s % 32)) as u8 }).unwrap();
    let mut out = Image::<f32>::new(w, h).unwrap();
    for m in methods {
        let (name, kern) = if let Some(rest) = m.strip_prefix("box") { (rest, VarianceKernel::Box { radius: r }) } else { (m, VarianceKernel::Tent { radius: r }) };
        let p = VarianceParams::new(VarianceMethod::from_name(name).unwrap(), kern);
        let mut ts = vec![];
        for _ in 0..5 { let t = Instant::now(); local_variance(img.view(), out.view_mut(), &p, Parallelism::AllThreads).unwrap(); ts.push(t.elapsed().as_secs_f64() * 1e3); }
        ts.sort_by(|a, b| a.partial_cmp(b).unwrap());
        println!("{m} R={r}: median {:.2} ms (min {:.2})", ts[2], ts[0]);
    }
}
