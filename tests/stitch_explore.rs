use tessera::stitch::*;
use tessera::{AnyView, Image, Parallelism};

fn load(path: &str) -> Image<u8> {
    let img = image::open(path).unwrap().to_luma8();
    let (w, h) = img.dimensions();
    Image::from_vec(w as usize, h as usize, img.into_raw()).unwrap()
}

#[test]
fn explore() {
    for name in ["cones/im2.png", "teddy/im2.png", "tsukuba/left.png"] {
        let src = load(&format!("/work/shared/data/stereo/{name}"));
        let sp = SynthParams { frame_width: 200, frame_height: 160, frames: 100, noise_sigma: 3.0, gain_drift: 0.05, blur_passes: 1, max_step: 2.5, ..Default::default() };
        let seq = synth_sequence(src.view(), &sp, Parallelism::AllThreads).unwrap();
        let views: Vec<AnyView> = seq.frames.iter().map(|f| AnyView::U8(f.view())).collect();
        for ks in [0.0, 0.25, 0.4] {
            let p = StitchParams { keyframe_shift: ks, quality: false, ..Default::default() };
            let t0 = std::time::Instant::now();
            let recs = register_sequence(&views, &p, Parallelism::Sequential, &mut |_| {}).unwrap();
            let dt = t0.elapsed();
            let errs: Vec<f64> = recs.iter().zip(&seq.positions).map(|(r, t)| { let q = r.position.unwrap(); ((q.0 - t.0).powi(2) + (q.1 - t.1).powi(2)).sqrt() }).collect();
            let mae = errs.iter().sum::<f64>() / errs.len() as f64;
            let evals: u64 = recs.iter().map(|r| r.evaluations).sum();
            println!("{name} ks {ks}: mean pos err {mae:.3} final {:.3} max {:.3} evals/pair {} time {:?}", errs.last().unwrap(), errs.iter().cloned().fold(0.0, f64::max), evals / 99, dt);
        }
    }
}
