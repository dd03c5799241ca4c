//! The O(1) box / mean filter against a direct float64 reference, on random images of
//! every awkward shape, with non-trivial strides and every border mode.

use proptest::prelude::*;
use tessera_core::filter::{box_sum, box_sum_f32, mean_filter, mean_filter_naive, BoxParams};
use tessera_core::{Border, Image, ImageView, ImageViewMut, Parallelism, Rgba8};

/// Window sum and in-bounds count at (x, y) of channel `ch`, straight from the definition.
fn reference(get: &dyn Fn(usize, usize) -> f64, w: usize, h: usize, p: &BoxParams, x: usize, y: usize) -> (f64, usize) {
    let (up, left) = (p.height / 2, p.width / 2);
    let (mut s, mut n) = (0.0, 0);
    for dy in 0..p.height {
        for dx in 0..p.width {
            let yy = p.border.source_index(y as isize + dy as isize - up as isize, h);
            let xx = p.border.source_index(x as isize + dx as isize - left as isize, w);
            match (xx, yy) {
                (Some(xx), Some(yy)) => {
                    s += get(xx, yy);
                    n += 1;
                }
                _ => s += p.border.outside_value() as f64,
            }
        }
    }
    (s, n)
}

fn expected_mean(s: f64, n: usize, p: &BoxParams) -> f64 {
    s / if p.border == Border::Normalize { n } else { p.width * p.height } as f64
}

fn border_strategy(integer: bool) -> impl Strategy<Value = Border> {
    let constant = if integer { (0u8..=255).prop_map(|v| v as f32).boxed() } else { (-50.0f32..50.0).boxed() };
    prop_oneof![
        Just(Border::Reflect101),
        Just(Border::Replicate),
        Just(Border::Normalize),
        constant.prop_map(Border::Constant),
    ]
}

/// (width, height, extra stride, window w, window h): 1x1, 1xN, Nx1, odd sizes, windows
/// larger than the image.
fn shape() -> impl Strategy<Value = (usize, usize, usize, usize, usize)> {
    (1usize..24, 1usize..24, 0usize..5, 1usize..40, 1usize..40)
}

/// Long rows and wide windows (up to past both edges), few rows: the vector blocks of the
/// row prefix and of the mirrored edges, and their tails, at every length.
fn wide_shape() -> impl Strategy<Value = (usize, usize, usize, usize, usize)> {
    (1usize..300, 1usize..5, 0usize..5, 1usize..640, 1usize..8)
}

fn par(parallel: bool) -> Parallelism {
    if parallel {
        Parallelism::AllThreads
    } else {
        Parallelism::Sequential
    }
}

/// The u8 mean against round-half-up of the exact rational mean, and the u8 box sum
/// against the exact sum.
fn check_u8((w, h, pad, kw, kh): (usize, usize, usize, usize, usize), border: Border, seed: u64, parallel: bool) -> Result<(), TestCaseError> {
    let stride = w + pad;
    let data: Vec<u8> = (0..stride * h).map(|i| (seed.wrapping_mul(6364136223846793005).wrapping_add((i as u64).wrapping_mul(1442695040888963407)) >> 56) as u8).collect();
    let src = ImageView::new(&data, w, h, stride).unwrap();
    let mut out = vec![0u8; stride * h];
    let mut sums = vec![0u32; w * h];
    let p = BoxParams { width: kw, height: kh, border };
    mean_filter(src, ImageViewMut::new(&mut out, w, h, stride).unwrap(), &p, par(parallel)).unwrap();
    box_sum(src, ImageViewMut::from_slice(&mut sums, w, h).unwrap(), &p, par(parallel)).unwrap();
    for y in 0..h {
        for x in 0..w {
            let (s, n) = reference(&|x, y| data[y * stride + x] as f64, w, h, &p, x, y);
            let area = if border == Border::Normalize { n } else { kw * kh } as u64;
            // Round half up of the exact rational s / area.
            let want = (2 * s as u64 + area) / (2 * area);
            prop_assert_eq!(out[y * stride + x] as u64, want, "mean ({}, {})", x, y);
            prop_assert_eq!(sums[y * w + x] as f64, s, "sum ({}, {})", x, y);
        }
    }
    Ok(())
}

/// The f32 mean and box sum within 1e-5 of the window's magnitude.
fn check_f32((w, h, pad, kw, kh): (usize, usize, usize, usize, usize), border: Border, seed: u64, parallel: bool) -> Result<(), TestCaseError> {
    let stride = w + pad;
    let mut rng = seed | 1;
    let data: Vec<f32> = (0..stride * h).map(|_| { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; (rng >> 40) as f32 / 1024.0 - 4000.0 }).collect();
    let src = ImageView::new(&data, w, h, stride).unwrap();
    let p = BoxParams { width: kw, height: kh, border };
    let mut mean = vec![0f32; w * h];
    let mut sum = vec![0f32; w * h];
    mean_filter(src, ImageViewMut::from_slice(&mut mean, w, h).unwrap(), &p, par(parallel)).unwrap();
    box_sum_f32(src, ImageViewMut::from_slice(&mut sum, w, h).unwrap(), &p, par(parallel)).unwrap();
    for y in 0..h {
        for x in 0..w {
            let (s, n) = reference(&|x, y| data[y * stride + x] as f64, w, h, &p, x, y);
            // Relative to the window's magnitude: values are ~4000, so this is 1e-5 of the values summed.
            let (sa, _) = reference(&|x, y| (data[y * stride + x] as f64).abs(), w, h, &p, x, y);
            let scale = sa + (p.border.outside_value() as f64).abs() * (kw * kh) as f64 + 1e-30;
            prop_assert!((sum[y * w + x] as f64 - s).abs() <= 1e-5 * scale, "sum ({}, {}): {} vs {}", x, y, sum[y * w + x], s);
            let m = expected_mean(s, n, &p);
            let mscale = expected_mean(scale, n, &p);
            prop_assert!((mean[y * w + x] as f64 - m).abs() <= 1e-5 * mscale, "mean ({}, {}): {} vs {}", x, y, mean[y * w + x], m);
        }
    }
    Ok(())
}

/// A gray u8 mean filter: source, destination, parameters.
type GrayMean = dyn Fn(ImageView<'_, u8>, ImageViewMut<'_, u8>, &BoxParams);

/// The RGBA mean filter (all threads) against `single`, a gray filter run on each channel
/// plane of a random image.
fn check_rgba_per_channel(
    w: usize,
    h: usize,
    p: BoxParams,
    seed: u64,
    single: &GrayMean,
) -> Result<(), TestCaseError> {
    let mut rng = seed | 1;
    let mut next = move || { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; rng as u8 };
    let img = Image::from_fn(w, h, |_, _| Rgba8::new(next(), next(), next(), next())).unwrap();
    let mut out = Image::<Rgba8>::new(w, h).unwrap();
    mean_filter(img.view(), out.view_mut(), &p, Parallelism::AllThreads).unwrap();
    for (c, plane) in img.split_channels().iter().enumerate() {
        let mut want = Image::<u8>::new(w, h).unwrap();
        single(plane.view(), want.view_mut(), &p);
        for y in 0..h { for x in 0..w {
            prop_assert_eq!(out.at(x, y).to_array()[c], want.at(x, y));
        }}
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(160))]

    #[test]
    fn u8_mean_is_the_exactly_rounded_mean(
        shape in shape(), border in border_strategy(true), seed in any::<u64>(), parallel in any::<bool>()
    ) {
        check_u8(shape, border, seed, parallel)?;
    }

    #[test]
    fn u8_on_long_rows_and_wide_windows(
        shape in wide_shape(), border in border_strategy(true), seed in any::<u64>(), parallel in any::<bool>()
    ) {
        check_u8(shape, border, seed, parallel)?;
    }

    #[test]
    fn f32_on_long_rows_and_wide_windows(
        shape in wide_shape(), border in border_strategy(false), seed in any::<u64>(), parallel in any::<bool>()
    ) {
        check_f32(shape, border, seed, parallel)?;
    }

    #[test]
    fn u8_and_u16_box_sums_are_bit_exact(
        (w, h, pad, kw, kh) in shape(), border in border_strategy(true), seed in any::<u64>(), wide in any::<bool>()
    ) {
        let stride = w + pad;
        let mut rng = seed | 1;
        let mut next = move || { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; rng };
        let p = BoxParams { width: kw, height: kh, border };
        let mut out = vec![0u32; w * h];
        if wide {
            let data: Vec<u16> = (0..stride * h).map(|_| next() as u16).collect();
            box_sum(ImageView::new(&data, w, h, stride).unwrap(), ImageViewMut::from_slice(&mut out, w, h).unwrap(), &p, Parallelism::AllThreads).unwrap();
            for y in 0..h { for x in 0..w {
                let (s, _) = reference(&|x, y| data[y * stride + x] as f64, w, h, &p, x, y);
                prop_assert_eq!(out[y * w + x] as f64, s);
            }}
        } else {
            let data: Vec<u8> = (0..stride * h).map(|_| next() as u8).collect();
            box_sum(ImageView::new(&data, w, h, stride).unwrap(), ImageViewMut::from_slice(&mut out, w, h).unwrap(), &p, Parallelism::Sequential).unwrap();
            for y in 0..h { for x in 0..w {
                let (s, _) = reference(&|x, y| data[y * stride + x] as f64, w, h, &p, x, y);
                prop_assert_eq!(out[y * w + x] as f64, s);
            }}
        }
    }

    #[test]
    fn f32_mean_and_sum_within_1e5_relative(
        shape in shape(), border in border_strategy(false), seed in any::<u64>(), parallel in any::<bool>()
    ) {
        check_f32(shape, border, seed, parallel)?;
    }

    #[test]
    fn rgba_is_filtered_per_channel(
        (w, h, _pad, kw, kh) in shape(), border in border_strategy(true), seed in any::<u64>()
    ) {
        check_rgba_per_channel(w, h, BoxParams { width: kw, height: kh, border }, seed, &|plane, want, p| {
            mean_filter(plane, want, p, Parallelism::Sequential).unwrap()
        })?;
    }

    #[test]
    fn rgba_on_long_rows_and_wide_windows(
        (w, h, _pad, kw, kh) in wide_shape(), border in border_strategy(true), seed in any::<u64>()
    ) {
        check_rgba_per_channel(w, h, BoxParams { width: kw, height: kh, border }, seed, &|plane, want, p| {
            mean_filter_naive(plane, want, p).unwrap()
        })?;
    }

    #[test]
    fn naive_and_recursive_agree(
        (w, h, _pad, kw, kh) in shape(), border in border_strategy(true), seed in any::<u64>()
    ) {
        let img = Image::from_fn(w, h, |x, y| ((x as u64 * 31 + y as u64 * 17 + seed) % 256) as u8).unwrap();
        let p = BoxParams { width: kw, height: kh, border };
        let (mut a, mut b) = (Image::<u8>::new(w, h).unwrap(), Image::<u8>::new(w, h).unwrap());
        mean_filter(img.view(), a.view_mut(), &p, Parallelism::AllThreads).unwrap();
        mean_filter_naive(img.view(), b.view_mut(), &p).unwrap();
        prop_assert_eq!(a, b);
    }
}

#[test]
fn u8_means_of_large_areas_are_exact() {
    // Areas past 2^14 (the mean's corrected f32 path) and past 2^16 (its f64 path), with
    // windows past both edges, on every border; all values 255 or 0 in patches.
    let (w, h) = (41, 23);
    let img = Image::from_fn(w, h, |x, y| if (x / 3 + y / 5) % 2 == 0 { 255 } else { (x * 7 + y * 13) as u8 }).unwrap();
    for (kw, kh) in [(129, 129), (255, 255), (40, 410), (257, 300)] {
        for border in [Border::Reflect101, Border::Replicate, Border::Constant(200.0), Border::Normalize] {
            let p = BoxParams { width: kw, height: kh, border };
            let (mut a, mut b) = (Image::<u8>::new(w, h).unwrap(), Image::<u8>::new(w, h).unwrap());
            mean_filter(img.view(), a.view_mut(), &p, Parallelism::AllThreads).unwrap();
            mean_filter_naive(img.view(), b.view_mut(), &p).unwrap();
            assert_eq!(a, b, "{kw} x {kh}, {border:?}");
        }
    }
}

#[test]
fn f32_does_not_drift_along_long_rows() {
    // 1 x 200000 row of large values with a small window: an f32 running sum would drift.
    let w = 200_000;
    let data: Vec<f32> = (0..w).map(|i| 10_000.0 + ((i * 7919) % 13) as f32 * 0.01).collect();
    let mut out = vec![0f32; w];
    let p = BoxParams { width: 5, height: 1, border: Border::Reflect101 };
    mean_filter(ImageView::from_slice(&data, w, 1).unwrap(), ImageViewMut::from_slice(&mut out, w, 1).unwrap(), &p, Parallelism::Sequential).unwrap();
    for x in 2..w - 2 {
        let want: f64 = data[x - 2..=x + 2].iter().map(|&v| v as f64).sum::<f64>() / 5.0;
        assert!((out[x] as f64 - want).abs() <= 1e-5 * want, "x = {x}");
    }
}
