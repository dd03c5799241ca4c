use super::pairwise::merge2;
use super::threewise::{merge121, merge3, Stats};
use super::*;
use alloc::vec::Vec;
use proptest::prelude::*;

use crate::testing::Rng;

fn random_u8(w: usize, h: usize, seed: u64) -> Image<u8> {
    let mut r = Rng(seed | 1);
    Image::from_fn(w, h, |_, _| r.next() as u8).unwrap()
}

fn run<P: VariancePixel>(src: &Image<P>, p: &VarianceParams, par: Parallelism) -> Vec<f32> {
    let (w, h) = src.size();
    let mut out = Image::<f32>::new(w, h).unwrap();
    local_variance(src.view(), out.view_mut(), p, par).unwrap();
    out.into_vec()
}

/// Largest relative error against the reference, relative to `max(ref, floor)`.
fn max_rel(got: &[f32], want: &[f64], floor: f64) -> f64 {
    max_rel_beyond(got, want, floor, 0.0)
}

/// [`max_rel`] of each error's part beyond `slack`.
fn max_rel_beyond(got: &[f32], want: &[f64], floor: f64, slack: f64) -> f64 {
    got.iter().zip(want).map(|(&g, &w)| ((g as f64 - w).abs() - slack).max(0.0) / w.abs().max(floor)).fold(0.0, f64::max)
}

/// The rounding error that Koenig's `E[x^2] - E[x]^2` may make, in absolute terms, whatever
/// the window's variance: its f32 sums round each of `terms` terms by up to `eps (x - K)^2`
/// (`K` the image's shift, [`global_shift`]), which a window of nearly equal values far from
/// `K` does not shrink (14, 12, 12 against K = 117: 0.0012 off a variance of 0.89).
fn koenig_slack(img: &Image<u8>, terms: usize) -> f64 {
    let k = global_shift(img.view());
    let far = img.view().rows().flatten().map(|&v| (v as f64 - k).abs()).fold(0.0, f64::max);
    terms as f64 * f32::EPSILON as f64 * far * far
}

fn all_kernels() -> [VarianceKernel; 6] {
    [
        VarianceKernel::Tent { radius: 1 },
        VarianceKernel::Tent { radius: 3 },
        VarianceKernel::Tent { radius: 7 },
        VarianceKernel::Box { radius: 0 },
        VarianceKernel::Box { radius: 1 },
        VarianceKernel::Box { radius: 4 },
    ]
}

fn methods_for(k: VarianceKernel) -> Vec<VarianceMethod> {
    VarianceMethod::ALL
        .into_iter()
        .filter(|m| k.tent_steps().is_some() || !matches!(m, VarianceMethod::Pairwise | VarianceMethod::Threewise))
        .collect()
}

#[test]
fn tent_weights_are_the_cascade_of_two_boxes() {
    // w = box(R + 1) * box(R + 1), and the product of (z^-d + 2 + z^d), d = 1, 2, 4.
    let w = VarianceKernel::Tent { radius: 7 }.weights_1d();
    let mut conv = alloc::vec![0u32; 15];
    for a in 0..8 {
        for b in 0..8 {
            conv[a + b] += 1;
        }
    }
    assert_eq!(w, conv);
    let mut poly = alloc::vec![1u32];
    for d in [1usize, 2, 4] {
        let mut next = alloc::vec![0u32; poly.len() + 2 * d];
        for (i, &c) in poly.iter().enumerate() {
            next[i] += c;
            next[i + d] += 2 * c;
            next[i + 2 * d] += c;
        }
        poly = next;
    }
    assert_eq!(w, poly);
}

#[test]
fn merge3_matches_direct_computation() {
    let mut r = Rng(7);
    for _ in 0..200 {
        let sizes = [1 + r.next() as usize % 9, 1 + r.next() as usize % 9, 1 + r.next() as usize % 9];
        let groups: Vec<(Vec<f64>, Vec<f64>)> = sizes
            .iter()
            .map(|&n| {
                let xs = (0..n).map(|_| 100.0 * r.unit() - 30.0).collect();
                let ws = (0..n).map(|_| 0.1 + 3.0 * r.unit()).collect();
                (xs, ws)
            })
            .collect();
        let st: Vec<Stats> = groups.iter().map(|(x, w)| Stats::of(x, w)).collect();
        let all_x: Vec<f64> = groups.iter().flat_map(|g| g.0.clone()).collect();
        let all_w: Vec<f64> = groups.iter().flat_map(|g| g.1.clone()).collect();
        let want = Stats::of(&all_x, &all_w);
        let got = merge3(st[0], st[1], st[2]);
        assert!((got.n - want.n).abs() < 1e-9 * want.n);
        assert!((got.mean - want.mean).abs() < 1e-9 * (1.0 + want.mean.abs()));
        assert!((got.m2 - want.m2).abs() < 1e-9 * (1.0 + want.m2), "{got:?} vs {want:?}");
        // And Chan's pairwise merge, applied twice, agrees.
        let two = merge2(merge2(st[0], st[1]), st[2]);
        assert!((two.m2 - want.m2).abs() < 1e-9 * (1.0 + want.m2));
        assert!((two.mean - want.mean).abs() < 1e-9 * (1.0 + want.mean.abs()));
    }
    assert_eq!(merge3(Stats::default(), Stats::default(), Stats::default()), Stats::default());
    assert_eq!(merge2(Stats::default(), Stats::default()), Stats::default());
}

#[test]
fn merge121_is_merge3_with_weights_1_2_1() {
    let mut r = Rng(99);
    for _ in 0..100 {
        let n0 = 1.0 + (r.next() % 50) as f64;
        let mk = |r: &mut Rng, n: f64| Stats { n, mean: 200.0 * r.unit(), m2: n * 50.0 * r.unit() };
        let (a, b, c) = (mk(&mut r, n0), mk(&mut r, 2.0 * n0), mk(&mut r, n0));
        let want = merge3(a, b, c);
        let (mut om, mut ov) = ([0.0f32], [0.0f32]);
        let f = |v: f64| [v as f32];
        merge121(&mut om, &mut ov, &f(a.mean), &f(b.mean), &f(c.mean), &f(a.m2 / a.n), &f(b.m2 / b.n), &f(c.m2 / c.n));
        assert!((om[0] as f64 - want.mean).abs() < 1e-4 * (1.0 + want.mean));
        let v = want.m2 / want.n;
        assert!((ov[0] as f64 - v).abs() < 1e-5 * (1.0 + v), "{} vs {v}", ov[0]);
    }
}

#[test]
fn every_method_matches_the_reference_on_random_u8() {
    let img = random_u8(23, 17, 11);
    for k in all_kernels() {
        for border in [Border::Reflect101, Border::Replicate, Border::Constant(40.0)] {
            let p0 = VarianceParams { method: VarianceMethod::Usual, kernel: k, border };
            let want = local_variance_reference(img.view(), &p0).unwrap();
            for m in methods_for(k) {
                let p = VarianceParams { method: m, ..p0 };
                let got = run(&img, &p, Parallelism::Sequential);
                let tol = if m == VarianceMethod::Koenig { 1e-3 } else { 1e-5 };
                let e = max_rel(&got, &want, 1.0);
                assert!(e < tol, "{m:?} {k:?} {border:?}: rel error {e}");
                assert!(got.iter().all(|&v| v >= 0.0));
            }
        }
    }
}

#[test]
fn every_method_matches_the_reference_at_every_level() {
    // Rows long enough for whole 16-lane vectors and a tail, u8 and f32 sources.
    let img = random_u8(83, 13, 5);
    let imgf = Image::from_fn(83, 13, |x, y| img.get(x, y).unwrap_or(0) as f32 * 0.37 - 20.0).unwrap();
    crate::testing::at_every_level(|level| {
        for k in all_kernels() {
            let p0 = VarianceParams { method: VarianceMethod::Usual, kernel: k, border: Border::Reflect101 };
            let want = local_variance_reference(img.view(), &p0).unwrap();
            let wantf = local_variance_reference(imgf.view(), &p0).unwrap();
            for m in methods_for(k) {
                let p = VarianceParams { method: m, ..p0 };
                let tol = if m == VarianceMethod::Koenig { 1e-3 } else { 1e-5 };
                let e = max_rel(&run(&img, &p, Parallelism::Sequential), &want, 1.0);
                assert!(e < tol, "{level:?} {m:?} {k:?} u8: rel error {e}");
                let e = max_rel(&run(&imgf, &p, Parallelism::Sequential), &wantf, 1.0);
                assert!(e < 10.0 * tol, "{level:?} {m:?} {k:?} f32: rel error {e}");
            }
        }
    });
}

/// Every value is the f32 nearest to the exact one or its neighbour (the numerator is an
/// exact integer; the final division and conversion round at most twice).
fn within_one_ulp(got: &[f32], exact: &[f64]) {
    for (i, (&g, &e)) in got.iter().zip(exact).enumerate() {
        let ulp = f32::from_bits((e as f32).to_bits() + 1) as f64 - e as f32 as f64;
        assert!((g as f64 - e).abs() <= ulp, "pixel {i}: {g} vs exact {e}");
        if e == 0.0 {
            assert_eq!(g, 0.0);
        }
    }
}

#[test]
fn recursive_is_exact_on_u8_and_u16() {
    // Exact rational from integer sums, formed independently with i128.
    fn exact<P: VariancePixel + Into<u32>>(img: &Image<P>, k: VarianceKernel, border: Border) -> Vec<f64> {
        let (w, h) = img.size();
        let r = k.radius() as isize;
        let wt = k.weights_1d();
        let mut out = Vec::new();
        for y in 0..h as isize {
            for x in 0..w as isize {
                let (mut sw, mut s1, mut s2) = (0i128, 0i128, 0i128);
                for j in -r..=r {
                    for i in -r..=r {
                        let kk = (wt[(j + r) as usize] * wt[(i + r) as usize]) as i128;
                        let v = match (border.source_index(x + i, w), border.source_index(y + j, h)) {
                            (Some(a), Some(b)) => img.at(a, b).into() as i128,
                            _ => border.outside_value() as i128,
                        };
                        sw += kk;
                        s1 += kk * v;
                        s2 += kk * v * v;
                    }
                }
                let num = sw * s2 - s1 * s1;
                assert!(num >= 0);
                out.push(num as f64 / (sw as f64 * sw as f64));
            }
        }
        out
    }
    let img8 = random_u8(19, 13, 5);
    let mut r = Rng(3);
    let img16 = Image::from_fn(13, 11, |_, _| r.next() as u16).unwrap();
    for k in all_kernels().into_iter().chain([VarianceKernel::Tent { radius: 15 }]) {
        for border in [Border::Reflect101, Border::Replicate, Border::Constant(200.0)] {
            let p = VarianceParams { method: VarianceMethod::Recursive, kernel: k, border };
            within_one_ulp(&run(&img8, &p, Parallelism::AllThreads), &exact(&img8, k, border));
            within_one_ulp(&run(&img16, &p, Parallelism::AllThreads), &exact(&img16, k, border));
        }
    }
    // u8 box beyond radius 127 takes the wide lanes.
    let tiny = random_u8(6, 5, 13);
    for border in [Border::Reflect101, Border::Constant(255.0)] {
        let k = VarianceKernel::Box { radius: 130 };
        let p = VarianceParams { method: VarianceMethod::Recursive, kernel: k, border };
        within_one_ulp(&run(&tiny, &p, Parallelism::Sequential), &exact(&tiny, k, border));
    }
    // u16 extremes at the largest tent radius: sums near the u64 limit stay exact.
    let big = Image::from_fn(9, 7, |x, y| if (x + y) % 2 == 0 { 65535u16 } else { 0 }).unwrap();
    let k = VarianceKernel::Tent { radius: 255 };
    let p = VarianceParams::new(VarianceMethod::Recursive, k);
    let got = run(&big, &p, Parallelism::Sequential);
    let want = local_variance_reference(big.view(), &p).unwrap();
    assert!(max_rel(&got, &want, 1.0) < 1e-6);
}

#[test]
fn tent_near_the_border_uses_the_original_image() {
    // A radius far larger than the image: every kernel is mostly reflection.
    let img = random_u8(5, 4, 21);
    for border in [Border::Reflect101, Border::Replicate, Border::Constant(7.0)] {
        for k in [VarianceKernel::Tent { radius: 7 }, VarianceKernel::Tent { radius: 15 }, VarianceKernel::Box { radius: 6 }] {
            let p0 = VarianceParams { method: VarianceMethod::Recursive, kernel: k, border };
            let want = local_variance_reference(img.view(), &p0).unwrap();
            for m in methods_for(k) {
                let got = run(&img, &VarianceParams { method: m, ..p0 }, Parallelism::Sequential);
                let tol = if m == VarianceMethod::Koenig { 1e-3 } else { 1e-5 };
                assert!(max_rel(&got, &want, 1.0) < tol, "{m:?} {k:?} {border:?}");
            }
        }
    }
}

/// Largest relative error of each method against the reference on `img` (tent R = 7).
fn method_errors(img: &Image<f32>) -> Vec<(VarianceMethod, f64)> {
    let k = VarianceKernel::Tent { radius: 7 };
    let want = local_variance_reference(img.view(), &VarianceParams::new(VarianceMethod::Usual, k)).unwrap();
    VarianceMethod::ALL
        .into_iter()
        .map(|m| {
            let got = run(img, &VarianceParams::new(m, k), Parallelism::AllThreads);
            assert!(got.iter().all(|&v| v >= 0.0), "{m:?} negative");
            (m, max_rel(&got, &want, 0.0))
        })
        .collect()
}

#[test]
fn f32_methods_on_values_near_10000() {
    // The adversarial case of the paper: mean 10 000, spread about 0.9 (uniform on [0, 3)).
    let mut r = Rng(17);
    let img = Image::from_fn(40, 30, |_, _| 10000.0 + 3.0 * r.unit() as f32).unwrap();
    let errs = method_errors(&img);
    std::eprintln!("offset 10000: {errs:?}");
    for &(m, e) in &errs {
        assert!(e < 1e-4, "{m:?}: relative error {e}");
    }
}

#[test]
fn f32_errors_grow_with_the_local_offset_and_koenig_is_worst() {
    // Two halves, near 0 and near 20 000: no whole-number shift is exact for both, so
    // K = 0 and the right half has kappa = |m - K| / sigma ~ 2.3e4.
    let mut r = Rng(23);
    let img = Image::from_fn(64, 24, |x, _| if x < 32 { 0.0 } else { 20000.0 } + 3.0 * r.unit() as f32).unwrap();
    let errs = method_errors(&img);
    std::eprintln!("two levels: {errs:?}");
    let err = |m: VarianceMethod| errs.iter().find(|e| e.0 == m).unwrap().1;
    let (kappa, eps) = (2.3e4, f32::EPSILON as f64);
    assert!(err(VarianceMethod::Usual) < 1e-4, "corrected two-pass");
    assert!(err(VarianceMethod::Recursive) < 1e-5, "f64 sums");
    for m in [VarianceMethod::Welford, VarianceMethod::Pairwise, VarianceMethod::Threewise] {
        // Error of the order kappa * eps (an f32 mean), far below Koenig's kappa^2 * eps.
        assert!(err(m) < 20.0 * kappa * eps, "{m:?}: {}", err(m));
    }
    let koenig = err(VarianceMethod::Koenig);
    assert!(koenig > 0.05 * kappa * kappa * eps, "Koenig's error {koenig} is not of order kappa^2 eps");
    for &(m, e) in &errs {
        if m != VarianceMethod::Koenig {
            assert!(e * 100.0 < koenig, "{m:?}: {e} is not far below Koenig's {koenig}");
        }
    }
}

#[test]
fn nan_reaches_exactly_the_kernels_that_contain_it() {
    let mut img = Image::from_fn(21, 16, |x, y| (x * 3 + y * 7 % 11) as f32).unwrap();
    img.set(4, 9, f32::NAN);
    for k in [VarianceKernel::Tent { radius: 3 }, VarianceKernel::Box { radius: 2 }] {
        let p0 = VarianceParams::new(VarianceMethod::Usual, k);
        let want = local_variance_reference(img.view(), &p0).unwrap();
        assert!(want.iter().any(|v| v.is_nan()) && want.iter().any(|v| !v.is_nan()));
        for m in methods_for(k) {
            let got = run(&img, &VarianceParams { method: m, ..p0 }, Parallelism::AllThreads);
            for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g.is_nan(), w.is_nan(), "{m:?} {k:?} pixel {i}");
                if !w.is_nan() && m != VarianceMethod::Koenig {
                    assert!((g as f64 - w).abs() <= 1e-4 * w.max(1.0), "{m:?} {k:?} pixel {i}: {g} vs {w}");
                }
            }
        }
    }
}

#[test]
fn recursive_f32_is_accurate_on_large_offsets() {
    let mut r = Rng(5);
    let img = Image::from_fn(30, 20, |x, _| (1.0e5 * (x / 10) as f64 + r.unit()) as f32).unwrap();
    for k in [VarianceKernel::Tent { radius: 3 }, VarianceKernel::Box { radius: 3 }] {
        let p = VarianceParams::new(VarianceMethod::Recursive, k);
        let want = local_variance_reference(img.view(), &p).unwrap();
        let got = run(&img, &p, Parallelism::Sequential);
        // Bound of the module docs: 2^-40 max (x - K)^2, plus f32 rounding of the result.
        let bound = 2f64.powi(-40) * 2.0e10;
        for (&g, &w) in got.iter().zip(&want) {
            assert!((g as f64 - w).abs() <= bound + 1e-7 * w, "{g} vs {w}");
        }
    }
    // A long row with regional offsets and the smallest kernels: the running sums along a
    // row stay at window scale (a whole-row prefix would lose about w^2 / B^2 more).
    let wide = Image::from_fn(4000, 3, |x, _| (1.0e5 * ((x / 700) % 3) as f64 + r.unit()) as f32).unwrap();
    for k in [VarianceKernel::Tent { radius: 1 }, VarianceKernel::Box { radius: 1 }] {
        let p = VarianceParams::new(VarianceMethod::Recursive, k);
        let want = local_variance_reference(wide.view(), &p).unwrap();
        let got = run(&wide, &p, Parallelism::Sequential);
        let bound = 2f64.powi(-40) * 4.0e10;
        for (&g, &w) in got.iter().zip(&want) {
            assert!((g as f64 - w).abs() <= bound + 1e-6 * w, "{k:?}: {g} vs {w}");
        }
    }
}

#[test]
fn constant_images_give_zero() {
    for v in [0.0f32, 1.5, 10000.3, 255.0] {
        let img = Image::filled(12, 9, v).unwrap();
        for m in VarianceMethod::ALL {
            let got = run(&img, &VarianceParams::new(m, VarianceKernel::Tent { radius: 3 }), Parallelism::Sequential);
            assert!(got.iter().all(|&g| (0.0..1e-2).contains(&g)), "{m:?} {v}: {:?}", &got[..3]);
            if m != VarianceMethod::Koenig {
                assert!(got.iter().all(|&g| g < 1e-6), "{m:?} {v}");
            }
        }
    }
}

#[test]
fn mean_variance_gives_the_weighted_mean() {
    let img = random_u8(17, 12, 8);
    let k = VarianceKernel::Tent { radius: 3 };
    let (mut m, mut v) = (Image::<f32>::new(17, 12).unwrap(), Image::<f32>::new(17, 12).unwrap());
    local_mean_variance(img.view(), m.view_mut(), v.view_mut(), k, Border::Reflect101, Parallelism::AllThreads).unwrap();
    let wt = k.weights_1d();
    let imgf = img.convert::<f32>();
    let (mut mf, mut vf) = (Image::<f32>::new(17, 12).unwrap(), Image::<f32>::new(17, 12).unwrap());
    local_mean_variance(imgf.view(), mf.view_mut(), vf.view_mut(), k, Border::Reflect101, Parallelism::Sequential).unwrap();
    for y in 0..12 {
        for x in 0..17 {
            let (mut s, mut sw) = (0.0, 0.0);
            for j in 0..7 {
                for i in 0..7 {
                    let xx = crate::border::reflect101(x as isize + i as isize - 3, 17);
                    let yy = crate::border::reflect101(y as isize + j as isize - 3, 12);
                    let kk = (wt[i] * wt[j]) as f64;
                    s += kk * img.at(xx, yy) as f64;
                    sw += kk;
                }
            }
            assert!((m.at(x, y) as f64 - s / sw).abs() < 1e-4);
            assert!((mf.at(x, y) as f64 - s / sw).abs() < 1e-3);
            assert!((vf.at(x, y) - v.at(x, y)).abs() <= 1e-3 * v.at(x, y).max(1.0));
        }
    }
}

#[test]
fn pairs_interleave_mean_and_variance() {
    let img = random_u8(11, 9, 4);
    let k = VarianceKernel::Box { radius: 2 };
    let (mut m, mut v) = (Image::<f32>::new(11, 9).unwrap(), Image::<f32>::new(11, 9).unwrap());
    local_mean_variance(img.view(), m.view_mut(), v.view_mut(), k, Border::Replicate, Parallelism::Sequential).unwrap();
    let mut pairs = Image::<f32>::new(22, 9).unwrap();
    local_mean_variance_pairs(img.view(), pairs.view_mut(), k, Border::Replicate, Parallelism::AllThreads).unwrap();
    for y in 0..9 {
        for x in 0..11 {
            assert_eq!(pairs.at(2 * x, y), m.at(x, y));
            assert_eq!(pairs.at(2 * x + 1, y), v.at(x, y));
        }
    }
    let mut wrong = Image::<f32>::new(11, 9).unwrap();
    assert!(local_mean_variance_pairs(img.view(), wrong.view_mut(), k, Border::Replicate, Parallelism::Sequential).is_err());
}

#[test]
fn parallel_equals_sequential() {
    let img = random_u8(70, 45, 2);
    for m in VarianceMethod::ALL {
        let p = VarianceParams::new(m, VarianceKernel::Tent { radius: 3 });
        assert_eq!(run(&img, &p, Parallelism::Sequential), run(&img, &p, Parallelism::AllThreads), "{m:?}");
    }
}

#[test]
fn bad_tent_radius_names_the_allowed_values() {
    let img = random_u8(8, 8, 1);
    let mut out = Image::<f32>::new(8, 8).unwrap();
    for r in [0usize, 2, 5, 8, 100, 511] {
        let p = VarianceParams::new(VarianceMethod::Recursive, VarianceKernel::Tent { radius: r });
        let e = local_variance(img.view(), out.view_mut(), &p, Parallelism::Sequential).unwrap_err();
        let msg = alloc::format!("{e}");
        assert!(msg.contains("2^k - 1") && msg.contains("1, 3, 7, 15, 31, 63, 127"), "{msg}");
    }
}

#[test]
fn bad_box_radius_is_out_of_range() {
    let img = random_u8(8, 8, 1);
    let mut out = Image::<f32>::new(8, 8).unwrap();
    let p = VarianceParams::new(VarianceMethod::Usual, VarianceKernel::Box { radius: 2048 });
    let e = local_variance(img.view(), out.view_mut(), &p, Parallelism::Sequential).unwrap_err();
    assert!(matches!(e, Error::OutOfRange { name: "box radius", max: 2047, .. }), "{e:?}");
}

#[test]
fn normalize_border_is_refused() {
    let img = random_u8(8, 8, 1);
    let mut out = Image::<f32>::new(8, 8).unwrap();
    let p = VarianceParams { border: Border::Normalize, ..Default::default() };
    assert!(matches!(
        local_variance(img.view(), out.view_mut(), &p, Parallelism::Sequential),
        Err(Error::InvalidParameter { name: "border", .. })
    ));
}

#[test]
fn constant_border_must_fit_integer_pixels() {
    let img = random_u8(8, 8, 1);
    let mut out = Image::<f32>::new(8, 8).unwrap();
    for c in [3.5f32, -1.0, 256.0, f32::NAN] {
        let p = VarianceParams { border: Border::Constant(c), ..Default::default() };
        assert!(local_variance(img.view(), out.view_mut(), &p, Parallelism::Sequential).is_err(), "{c}");
    }
}

#[test]
fn log_methods_take_wide_boxes() {
    // Widths 81 = 3^4 and 243 = 3^5 (one ternary digit, several binary ones) and 255 (all
    // binary ones) on an image far smaller than the window.
    let img = random_u8(6, 5, 1);
    for radius in [40, 121, 127] {
        let p0 = VarianceParams::new(VarianceMethod::Recursive, VarianceKernel::Box { radius });
        let want = local_variance_reference(img.view(), &p0).unwrap();
        for m in [VarianceMethod::Pairwise, VarianceMethod::Threewise] {
            let got = run(&img, &VarianceParams { method: m, ..p0 }, Parallelism::AllThreads);
            assert!(max_rel(&got, &want, 1.0) < 1e-5, "{m:?} radius {radius}");
        }
    }
}

#[test]
fn size_mismatch_is_an_error() {
    let img = random_u8(8, 8, 1);
    let mut out = Image::<f32>::new(8, 7).unwrap();
    let e = local_variance(img.view(), out.view_mut(), &VarianceParams::default(), Parallelism::Sequential);
    assert!(matches!(e, Err(Error::SizeMismatch { .. })));
    let mut m = Image::<f32>::new(8, 8).unwrap();
    let e = local_mean_variance(img.view(), m.view_mut(), out.view_mut(), VarianceKernel::default(), Border::Reflect101, Parallelism::Sequential);
    assert!(matches!(e, Err(Error::SizeMismatch { .. })));
}

/// Koenig's error on a window of nearly equal values far from the image's shift is its
/// rounding, not a fault: within [`koenig_slack`], and beyond the relative tolerance alone.
#[test]
fn koenig_rounds_a_flat_window_far_from_the_shift_by_its_own_slack() {
    let img = Image::from_vec(13, 1, vec![103u8, 189, 120, 114, 170, 95, 179, 210, 75, 35, 207, 14, 12]).unwrap();
    let p0 = VarianceParams { method: VarianceMethod::Koenig, kernel: VarianceKernel::Box { radius: 1 }, border: Border::Replicate };
    let want = local_variance_reference(img.view(), &p0).unwrap();
    let got = run(&img, &p0, Parallelism::Sequential);
    assert!(max_rel(&got, &want, 1.0) > 1e-4, "{got:?}");
    assert!(max_rel_beyond(&got, &want, 1.0, koenig_slack(&img, 9)) < 1e-3, "{got:?}");
}

#[test]
fn method_names_round_trip() {
    for m in VarianceMethod::ALL {
        assert_eq!(VarianceMethod::from_name(m.name()).unwrap(), m);
    }
    assert!(VarianceMethod::from_name("fast").is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn recursive_and_threewise_match_reference(
        w in 1usize..14, h in 1usize..11, k in 0u32..3, seed in any::<u64>(), border_kind in 0u8..3,
    ) {
        let img = random_u8(w, h, seed);
        let kernel = VarianceKernel::Tent { radius: (2usize << k) - 1 };
        let border = match border_kind { 0 => Border::Reflect101, 1 => Border::Replicate, _ => Border::Constant(128.0) };
        let p0 = VarianceParams { method: VarianceMethod::Recursive, kernel, border };
        let want = local_variance_reference(img.view(), &p0).unwrap();
        for m in [VarianceMethod::Recursive, VarianceMethod::Threewise, VarianceMethod::Pairwise, VarianceMethod::Welford] {
            let got = run(&img, &VarianceParams { method: m, ..p0 }, Parallelism::Sequential);
            prop_assert!(max_rel(&got, &want, 1.0) < 1e-5, "{:?}", m);
        }
    }

    #[test]
    fn every_method_computes_the_box_kernel(
        w in 1usize..14, h in 1usize..11, r in 0usize..9, seed in any::<u64>(), border_kind in 0u8..3,
    ) {
        let img = random_u8(w, h, seed);
        let border = match border_kind { 0 => Border::Reflect101, 1 => Border::Replicate, _ => Border::Constant(40.0) };
        let p0 = VarianceParams { method: VarianceMethod::Recursive, kernel: VarianceKernel::Box { radius: r }, border };
        let want = local_variance_reference(img.view(), &p0).unwrap();
        for m in VarianceMethod::ALL {
            let got = run(&img, &VarianceParams { method: m, ..p0 }, Parallelism::Sequential);
            let (tol, slack) = match m {
                VarianceMethod::Koenig => (1e-3, koenig_slack(&img, (2 * r + 1) * (2 * r + 1))),
                _ => (1e-5, 0.0),
            };
            prop_assert!(max_rel_beyond(&got, &want, 1.0, slack) < tol, "{:?} r {}", m, r);
        }
    }

    #[test]
    fn f32_box_matches_reference(w in 1usize..12, h in 1usize..10, r in 0usize..6, seed in any::<u64>()) {
        let mut rng = Rng(seed | 1);
        let img = Image::from_fn(w, h, |_, _| (rng.unit() * 1000.0 - 500.0) as f32).unwrap();
        let p0 = VarianceParams::new(VarianceMethod::Recursive, VarianceKernel::Box { radius: r });
        let want = local_variance_reference(img.view(), &p0).unwrap();
        for m in [VarianceMethod::Recursive, VarianceMethod::Usual, VarianceMethod::Welford] {
            let got = run(&img, &VarianceParams { method: m, ..p0 }, Parallelism::Sequential);
            prop_assert!(max_rel(&got, &want, 1.0) < 1e-5, "{:?}", m);
        }
    }
}

#[test]
fn recursive_tent_is_exact_at_the_u64_limit_and_across_bands() {
    // A 0/255 checkerboard has the largest u8 variance: at R = 63 the numerator W^2 var is
    // just below 2^64 (wrapping u64 path), at R = 127 above it (u128 path).
    let board = Image::from_fn(23, 17, |x, y| if (x + y) % 2 == 0 { 255u8 } else { 0 }).unwrap();
    for radius in [63, 127] {
        let p = VarianceParams::new(VarianceMethod::Recursive, VarianceKernel::Tent { radius });
        let got = run(&board, &p, Parallelism::AllThreads);
        let want = local_variance_reference(board.view(), &p).unwrap();
        assert!(max_rel(&got, &want, 1.0) < 1e-6, "radius {radius}");
    }
    // Many row bands give the same bits as one.
    let img = random_u8(57, 400, 21);
    for radius in [1, 7, 31] {
        let p = VarianceParams::new(VarianceMethod::Recursive, VarianceKernel::Tent { radius });
        assert_eq!(run(&img, &p, Parallelism::Sequential), run(&img, &p, Parallelism::AllThreads));
    }
}

#[test]
fn luma_on_the_fly_is_bit_identical_to_the_converted_image() {
    let mut r = Rng(29);
    let rgba = Image::from_fn(37, 23, |_, _| {
        let v = r.next();
        crate::image::Rgba8::new(v as u8, (v >> 8) as u8, (v >> 16) as u8, (v >> 24) as u8)
    })
    .unwrap();
    let luma: Image<f32> = rgba.convert();
    for kernel in all_kernels() {
        for method in methods_for(kernel) {
            for border in [Border::Reflect101, Border::Replicate, Border::Constant(40.5)] {
                let p = VarianceParams { method, kernel, border };
                for par in [Parallelism::Sequential, Parallelism::AllThreads] {
                    let mut out = Image::<f32>::new(37, 23).unwrap();
                    local_variance_luma(rgba.view(), out.view_mut(), &p, par).unwrap();
                    let want = run(&luma, &p, par);
                    let same = out.as_slice().iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "{p:?} {par:?}");
                }
            }
        }
    }
    let bad = VarianceParams { border: Border::Normalize, ..VarianceParams::default() };
    let mut out = Image::<f32>::new(37, 23).unwrap();
    assert!(local_variance_luma(rgba.view(), out.view_mut(), &bad, Parallelism::Sequential).is_err());
    let mut small = Image::<f32>::new(5, 5).unwrap();
    assert!(local_variance_luma(rgba.view(), small.view_mut(), &VarianceParams::default(), Parallelism::Sequential).is_err());
}
