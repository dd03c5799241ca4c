//! Criterion benches of stitching's coarse estimate (phase correlation on a 128 x 128 grid):
//! a frame's spectrum, and the candidate shifts of a pair from two spectra, whitened (seeds,
//! re-localization against every kept keyframe) and weighted towards low frequencies (faint
//! frames). Frames are cut from a photograph at two sizes: PAL and a small probe's.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::path::Path;
use tessera::stitch::{weighted_candidates, Spectrum, FAINT_BAND};
use tessera::{AnyImage, Image};

/// A `w x h` grey crop of a photograph at `(x, y)`.
fn crop(photo: &Image<u8>, (x, y): (usize, usize), (w, h): (usize, usize)) -> Image<u8> {
    Image::from_fn(w, h, |u, v| photo.row(y + v)[x + u]).expect("non-zero size")
}

fn coarse(c: &mut Criterion) {
    let photo = match tessera::io::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/retina.jpg")).expect("assets/retina.jpg") {
        AnyImage::U8(g) => g,
        AnyImage::Rgba8(rgba) => rgba.map(|p| p.luma()),
        _ => panic!("assets/retina.jpg decoded to neither grey nor RGBA"),
    };
    let mut g = c.benchmark_group("coarse");
    for size in [(720usize, 576usize), (200, 160)] {
        let (a, b) = (crop(&photo, (40, 30), size), crop(&photo, (40 + size.0 / 5, 30 + size.1 / 7), size));
        let id = format!("{}x{}", size.0, size.1);
        g.bench_with_input(BenchmarkId::new("spectrum", &id), &a, |bch, a| bch.iter(|| Spectrum::new(a.view())));
        let (sa, sb) = (Spectrum::new(a.view()), Spectrum::new(b.view()));
        g.bench_with_input(BenchmarkId::new("candidates_whitened", &id), &(), |bch, _| bch.iter(|| weighted_candidates(&sa, &sb, 3, None)));
        g.bench_with_input(BenchmarkId::new("candidates_faint_band", &id), &(), |bch, _| bch.iter(|| weighted_candidates(&sa, &sb, 1, Some(FAINT_BAND))));
    }
    g.finish();
}

criterion_group!(benches, coarse);
criterion_main!(benches);
