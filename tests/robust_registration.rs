//! Registration on hard footage with the default parameters: sequences cut from eight real
//! photographs of different character (`common::footage`) under low contrast, noise, blur,
//! gain drift, vignetting and large wandering jumps, with known positions. Judged as a user
//! would: how many frames register, how far the reported positions are from the truth, and
//! that no frame reported `ok` is wrong by more than 2 px. Frames that show nothing to
//! match (pure noise, uniform, another photograph) must be skipped with a reason.

mod common;

use common::footage::{closed_loop, jerky, photo, render, render_posed, rolling, room, wandering, zooming, Conditions, PHOTOS};
use std::ops::ControlFlow;
use tessera::stitch::{keyframes, register_sequence, FrameRecord, Motion, RegisterParams, Similarity, StitchParams};
use tessera::{AnyView, Image, Parallelism};

/// What a run got right and wrong.
#[derive(Debug)]
struct Score {
    frames: usize,
    registered: usize,
    mean_error: f64,
    max_error: f64,
    /// Registered frames (in the panorama, or on an island relative to its first frame) more
    /// than 2 px from the truth.
    wrong_ok: usize,
    /// Registered frames on islands the panorama does not hold.
    off_panorama: usize,
}

fn run(frames: &[Image<u8>], truth: &[(f64, f64)], p: &StitchParams) -> (Score, Vec<FrameRecord>) {
    let poses: Vec<Similarity> = truth.iter().map(|&t| Similarity::translation(t)).collect();
    run_posed(frames, &poses, p)
}

/// [`run`] against true poses (frame-0 coordinates); the error of a frame is that of its
/// centre.
fn run_posed(frames: &[Image<u8>], truth: &[Similarity], p: &StitchParams) -> (Score, Vec<FrameRecord>) {
    let views: Vec<AnyView<'_>> = frames.iter().map(|f| AnyView::U8(f.view())).collect();
    let (recs, reference) = match register_sequence(&views, p, Parallelism::AllThreads, &mut |_| ControlFlow::Continue(())) {
        Ok(r) => r,
        Err(tessera::Error::NothingRegistered { .. }) => {
            return (Score { frames: frames.len(), registered: 0, mean_error: 0.0, max_error: 0.0, wrong_ok: 0, off_panorama: 0 }, Vec::new());
        }
        Err(e) => panic!("{e}"),
    };
    let base = truth[reference].inverse();
    let (w, h) = frames[0].size();
    let c = ((w as f64 - 1.0) / 2.0, (h as f64 - 1.0) / 2.0);
    // A frame on an island the panorama does not hold is placed relative to its island's
    // first frame.
    let errors: Vec<f64> = recs
        .iter()
        .filter_map(|r| {
            let (got, base) = match (r.pose(), r.island_position, r.island) {
                (Some(pose), _, _) => (pose, base),
                (None, Some(q), Some(first)) => (Similarity { x: q.0, y: q.1, angle: r.angle, scale: r.scale }, truth[first].inverse()),
                _ => return None,
            };
            let (got, want) = (got.apply(c), base.then(&truth[r.index]).apply(c));
            Some((got.0 - want.0).hypot(got.1 - want.1))
        })
        .collect();
    let score = Score {
        frames: frames.len(),
        registered: errors.len(),
        mean_error: errors.iter().sum::<f64>() / errors.len().max(1) as f64,
        max_error: errors.iter().cloned().fold(0.0, f64::max),
        wrong_ok: errors.iter().filter(|&&e| e > 2.0).count(),
        off_panorama: recs.iter().filter(|r| r.island_position.is_some()).count(),
    };
    (score, recs)
}

/// The positions of a path of top-left corners, relative to the first.
fn positions(origins: &[(f64, f64)]) -> Vec<(f64, f64)> {
    origins.iter().map(|o| (o.0 - origins[0].0, o.1 - origins[0].1)).collect()
}

struct Case {
    name: &'static str,
    frame: (usize, usize),
    frames: usize,
    step: f64,
    turn: f64,
    conditions: Conditions,
}

const CASES: [Case; 5] = [
    Case { name: "clean", frame: (200, 160), frames: 40, step: 3.0, turn: 0.5, conditions: Conditions { contrast: 1.0, noise: 2.0, blur: 0.0, gain_drift: 0.0, vignetting: 0.0 } },
    Case { name: "low contrast", frame: (200, 160), frames: 40, step: 3.0, turn: 0.5, conditions: Conditions { contrast: 0.3, noise: 3.5, blur: 1.0, gain_drift: 0.0, vignetting: 0.0 } },
    Case { name: "noise 8", frame: (200, 160), frames: 40, step: 3.0, turn: 0.5, conditions: Conditions { contrast: 1.0, noise: 8.0, blur: 0.0, gain_drift: 0.0, vignetting: 0.0 } },
    Case { name: "blur, gain, lens", frame: (200, 160), frames: 40, step: 3.0, turn: 0.5, conditions: Conditions { contrast: 1.0, noise: 3.0, blur: 1.5, gain_drift: 0.2, vignetting: 0.4 } },
    Case { name: "jumps 28 px", frame: (200, 160), frames: 40, step: 28.0, turn: 2.0, conditions: Conditions { contrast: 1.0, noise: 2.0, blur: 0.0, gain_drift: 0.0, vignetting: 0.0 } },
];

/// Every case on every photograph with the default parameters, the accuracy targets: at
/// least 95 % of the frames registered, mean error at most 0.25 px, and no frame reported
/// `ok` more than 2 px from the truth. (The fundus at contrast 0.3 was the last shortfall,
/// 37 of 40 frames at 0.44 px, until faint pairs were placed by their overlap's correlation
/// peak on band-passed frames: 40 at 0.22 px.)
#[test]
fn hard_footage_registers_with_the_defaults() {
    let p = StitchParams { quality: false, ..Default::default() };
    let mut failures = Vec::new();
    for case in &CASES {
        for name in PHOTOS {
            let (frames, truth) = footage(case, name);
            let (s, _) = run(&frames, &truth, &p);
            println!("{:18} {:10} {s:?}", case.name, name);
            let meets = 20 * s.registered >= 19 * s.frames && s.mean_error <= 0.25 && s.wrong_ok == 0;
            if !meets {
                failures.push(format!("{} {name}: {s:?}", case.name));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The sequence of `case` cut from photograph `name` (as the table cuts it), and its true
/// positions.
fn footage(case: &Case, name: &str) -> (Vec<Image<u8>>, Vec<(f64, f64)>) {
    let k = PHOTOS.iter().position(|&n| n == name).unwrap();
    let src = photo(name);
    let origins = wandering(case.frames, room(src.size(), case.frame), case.step, case.turn, 11 + k as u64);
    (render(&src, &origins, case.frame, &case.conditions, 5 + k as u64), positions(&origins))
}

/// A hand-held probe jerks: six times in 40 frames the path moves by up to 3 px each way
/// beyond where it was heading, so the window's predictions miss and the frames after each
/// jerk are settled off their plan. The hard footage's faint cases (low contrast, noise 8,
/// blur with gain drift and vignetting) on every photograph meet the same targets as
/// without jerks. (Low-contrast coffee was at 0.68 px mean, seven frames reported `ok` 2 to
/// 3.8 px off, while a keyframe taken up off the plan kept its templates' link, a faint
/// match 2 to 4 px off stood unrefined, and a turn the templates agreed on along the wood
/// grain stood unconfirmed: now 0.09 px.)
#[test]
fn jerky_footage_registers_with_the_defaults() {
    let p = StitchParams { quality: false, ..Default::default() };
    let mut failures = Vec::new();
    for case in &CASES[1..4] {
        for (k, name) in PHOTOS.iter().enumerate() {
            let src = photo(name);
            let space = room(src.size(), case.frame);
            let origins = jerky(&wandering(case.frames, space, case.step, case.turn, 11 + k as u64), space, 6, 3.0, 77 + k as u64);
            let frames = render(&src, &origins, case.frame, &case.conditions, 5 + k as u64);
            let (s, _) = run(&frames, &positions(&origins), &p);
            println!("{:18} {name:10} {s:?}", case.name);
            if !(20 * s.registered >= 19 * s.frames && s.mean_error <= 0.25 && s.wrong_ok == 0) {
                failures.push(format!("{} {name}: {s:?}", case.name));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A keyframe passes the error of its own registration on to every frame registered after
/// it, so where the last good frame is about to become the keyframe, its link is refined on
/// the whole overlap. On the coffee photograph at low contrast (the wood grain leaves the
/// templates' matches uncertain along it; three frames become keyframes in 40)
/// that brings the keyframes, and with them the run, within the targets; without the whole
/// overlap they drift.
#[test]
fn keyframe_links_are_refined_on_the_whole_overlap() {
    let (frames, truth) = footage(&CASES[1], "coffee");
    let keyframe_errors = |whole_overlap: bool| {
        let (s, recs) = run(&frames, &truth, &StitchParams { quality: false, whole_overlap, ..Default::default() });
        let keyframes: Vec<usize> = keyframes(&recs).into_iter().filter(|&r| r != 0).collect();
        let errors: Vec<f64> = keyframes.iter().filter_map(|&k| recs[k].position.map(|q| (q.0 - truth[k].0).hypot(q.1 - truth[k].1))).collect();
        println!("whole overlap {whole_overlap}: {s:?}, keyframes {keyframes:?} off by {errors:.3?}");
        (s, errors)
    };
    let (with, with_errors) = keyframe_errors(true);
    let (without, without_errors) = keyframe_errors(false);
    assert!(with_errors.len() >= 2, "{with_errors:?}");
    assert!(with.registered == with.frames && with.mean_error <= 0.25 && with.wrong_ok == 0, "{with:?}");
    assert!(with_errors.iter().all(|&e| e <= 0.2), "{with_errors:?}");
    assert!(without.mean_error > 0.25 && without_errors.iter().cloned().fold(0.0, f64::max) > 0.3, "{without:?} {without_errors:?}");
}

/// A keyframe's registration is refined after its record was written: the record's
/// quality (the NCC of its overlap with its reference) is measured again at the refined pose.
#[test]
fn a_refined_keyframe_reports_the_quality_of_its_refined_pose() {
    use tessera::stitch::{overlap_ncc, Motion, RegisterParams};
    let (frames, _) = footage(&CASES[1], "coffee");
    let views: Vec<AnyView<'_>> = frames.iter().map(|f| AnyView::U8(f.view())).collect();
    let p = StitchParams { register: RegisterParams { motion: Motion::Translation, ..Default::default() }, ..Default::default() };
    let (recs, _) = register_sequence(&views, &p, Parallelism::AllThreads, &mut |_| ControlFlow::Continue(())).unwrap();
    let keyframes: Vec<usize> = keyframes(&recs).into_iter().filter(|&r| r != 0).collect();
    assert!(keyframes.len() >= 2, "{keyframes:?}");
    for &k in &keyframes {
        let (r, at) = (recs[k].reference.unwrap(), recs[k].position.unwrap());
        let from = recs[r].position.unwrap();
        let want = overlap_ncc(frames[r].view(), frames[k].view(), (at.0 - from.0, at.1 - from.1), Parallelism::AllThreads).unwrap().unwrap();
        let got = recs[k].quality.unwrap();
        assert!((got - want).abs() < 1e-9, "keyframe {k}: quality {got}, at its pose {want}");
    }
}

/// Refining every pair on the whole overlap (`refine_every_pair`, not the default: about a
/// fifth of the speed on PAL frames) is more precise than the defaults, which refine only
/// faint pairs and keyframe links: on clean footage of four photographs and on the coffee
/// photograph at low contrast, never worse on a run and by at least a third over them.
#[test]
fn refining_every_pair_is_more_precise() {
    let (mut default_sum, mut every_sum) = (0.0, 0.0);
    for (case, name) in [(&CASES[0], "ihc"), (&CASES[0], "camera"), (&CASES[0], "gravel"), (&CASES[0], "astronaut"), (&CASES[1], "coffee")] {
        let (frames, truth) = footage(case, name);
        let (default, _) = run(&frames, &truth, &StitchParams { quality: false, ..Default::default() });
        let (every, _) = run(&frames, &truth, &StitchParams { quality: false, refine_every_pair: true, ..Default::default() });
        println!("{} {name}: default {:.3} px, every pair {:.3} px", case.name, default.mean_error, every.mean_error);
        assert!(every.registered == every.frames && every.wrong_ok == 0 && every.mean_error <= default.mean_error + 0.002, "{name}: {every:?} against {default:?}");
        (default_sum, every_sum) = (default_sum + default.mean_error, every_sum + every.mean_error);
    }
    assert!(every_sum <= 0.67 * default_sum, "{every_sum} against {default_sum}");
}

/// Sweeps that roll, as an endoscope turning on its axis, on six photographs with the
/// default parameters: 0.4 degrees per frame for 40 frames, and about 2 degrees per frame
/// for 24 frames (45 degrees in all). The accuracy targets with roll: at least 95 % of the
/// frames registered, mean frame-centre error at most 0.5 px, no frame reported `ok` more
/// than 2 px from the truth; and the reported angles within 0.15 degrees.
/// The rolling sweep of `frames` frames cut from photograph `name` (the `k`-th of its
/// table), turning `roll` degrees a frame, and its true poses relative to frame 0.
fn rolling_footage(name: &str, k: u64, frames: usize, roll: f64) -> (Vec<Image<u8>>, Vec<Similarity>) {
    let src = photo(name);
    let poses = rolling(frames, src.size(), (200, 160), 3.0, roll.to_radians(), 31 + k);
    let images = render_posed(&src, &poses, (200, 160), &Conditions::default(), 5 + k);
    (images, poses.iter().map(|q| poses[0].inverse().then(q)).collect())
}

#[test]
fn rolling_sweeps_register_with_the_defaults() {
    let p = StitchParams { quality: false, ..Default::default() };
    let mut failures = Vec::new();
    for (roll, frames) in [(0.4f64, 40), (1.9, 24)] {
        for (k, name) in ["ihc", "coffee", "camera", "gravel", "grass", "astronaut"].iter().enumerate() {
            let (images, truth) = rolling_footage(name, k as u64, frames, roll);
            let (s, recs) = run_posed(&images, &truth, &p);
            let angle_error = recs.iter().filter(|r| r.is_ok()).map(|r| (r.angle - truth[r.index].angle).abs().to_degrees()).fold(0.0, f64::max);
            println!("roll {roll:3} {name:10} {s:?} worst angle error {angle_error:.3} deg, total roll {:.1} deg", truth[frames - 1].angle.to_degrees());
            if !(20 * s.registered >= 19 * s.frames && s.mean_error <= 0.5 && s.wrong_ok == 0 && angle_error <= 0.15) {
                failures.push(format!("roll {roll} {name}: {s:?}, angle error {angle_error:.3} deg"));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Sweeps of an endoscope advancing and withdrawing (`footage::zooming`: 80 frames, the
/// scale changing by up to 1 % per frame, from about 0.85 to 1.17 of the first frame's and
/// back, the centre wandering 3 px per frame), on six photographs, without roll and rolling
/// 0.5 degrees per frame, with the scale fitted (`fit_scale`): at least 95 % of the frames
/// registered, mean frame-centre error at most 0.5 px, no frame reported `ok` more than
/// 2 px from the truth, and the reported scales within 4e-3 (relative) and angles within
/// 0.15 degrees of the truth. (Every photograph but coffee stays within 1.8e-3; coffee's
/// porcelain reaches 2.1e-3 without roll and 3.3e-3 rolling, the latter at frames whose
/// loop closes on frame 0 across a 17 % zoom and a 31 degree turn. Matched in a resampled
/// frame instead of with turned templates, it was 1.7e-3.) With the defaults (no
/// `fit_scale`), the zoom is detected (`detect_zoom`) and the scale fitted from the first
/// pair that shows it: the same targets, the scales within 1.2e-2 (frames registered before
/// the zoom showed keep scale 1). Without the detection every run drifted, 46 to 73 frames
/// reported `ok` more than 2 px off. `DETAIL="<photo> <roll> <mode>"` (e.g. `coffee 0 fit`;
/// modes `fit`, `detect`, `off`) prints every frame's record.
#[test]
fn zooming_sweeps_register_with_fit_scale_and_with_the_defaults() {
    use tessera::stitch::RegisterParams;
    let zoom = StitchParams { register: RegisterParams { fit_scale: true, ..Default::default() }, quality: false, ..Default::default() };
    let defaults = StitchParams { quality: false, ..Default::default() };
    let undetected = StitchParams { detect_zoom: false, ..defaults };
    let mut failures = Vec::new();
    let mut drifted = Vec::new();
    for (k, name) in ["ihc", "coffee", "camera", "gravel", "grass", "astronaut"].iter().enumerate() {
        let src = photo(name);
        for roll in [0.0f64, 0.5] {
            let poses = zooming(80, src.size(), (200, 160), 3.0, 0.01, roll.to_radians(), 51 + k as u64);
            let images = render_posed(&src, &poses, (200, 160), &Conditions::default(), 5 + k as u64);
            let truth: Vec<Similarity> = poses.iter().map(|q| poses[0].inverse().then(q)).collect();
            let (lo, hi) = truth.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), q| (lo.min(q.scale), hi.max(q.scale)));
            for (mode, p) in [("fit", &zoom), ("detect", &defaults), ("off", &undetected)] {
                let (s, recs) = run_posed(&images, &truth, p);
                let ok = || recs.iter().filter(|r| r.is_ok());
                let angle_error = ok().map(|r| (r.angle - truth[r.index].angle).abs().to_degrees()).fold(0.0, f64::max);
                let scale_error = ok().map(|r| (r.scale / truth[r.index].scale - 1.0).abs()).fold(0.0, f64::max);
                println!(
                    "zoom {lo:.3}..{hi:.3} roll {roll:3} {name:10} {mode:6} {s:?} worst scale error {scale_error:.1e}, angle error {angle_error:.3} deg"
                );
                if std::env::var("DETAIL").is_ok_and(|d| d == format!("{name} {roll} {mode}")) {
                    for r in &recs {
                        let t = &truth[r.index];
                        let e = r.pose().map(|q| (q.scale / t.scale - 1.0, (q.angle - t.angle).to_degrees()));
                        println!("  {:3} ref {:?} loop {:?} truth scale {:.4} angle {:.2} err {:?} residual {:?}", r.index, r.reference, r.loop_closure, t.scale, t.angle.to_degrees(), e, r.residual);
                    }
                }
                let scale_bound = if mode == "fit" { 4e-3 } else { 1.2e-2 };
                if mode != "off" && !(20 * s.registered >= 19 * s.frames && s.mean_error <= 0.5 && s.wrong_ok == 0 && scale_error <= scale_bound && angle_error <= 0.15) {
                    failures.push(format!("{mode} roll {roll} {name}: {s:?}, scale error {scale_error:.1e}, angle error {angle_error:.3} deg"));
                }
                if mode == "off" {
                    drifted.push(s.wrong_ok);
                }
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    assert!(drifted.iter().all(|&w| w > 0), "without zoom detection: {drifted:?} frames wrong");
}

/// Frames that show nothing to match, put into a sequence from each photograph: pure
/// noise, a uniform frame, and a frame from another photograph are skipped with a reason,
/// and the frames around them still register.
#[test]
fn frames_without_a_match_are_skipped_with_reasons() {
    let p = StitchParams { quality: false, ..Default::default() };
    for (k, name) in PHOTOS.iter().enumerate() {
        let src = photo(name);
        let other = photo(PHOTOS[(k + 3) % PHOTOS.len()]);
        let origins = wandering(16, room(src.size(), (200, 160)), 3.0, 0.5, 3 + k as u64);
        let mut frames = render(&src, &origins, (200, 160), &Conditions::default(), 9 + k as u64);
        let mut rng = tessera::stitch::SplitMix64::new(k as u64);
        frames[4] = Image::from_fn(200, 160, |_, _| (128.0 + 40.0 * rng.normal()).clamp(0.0, 255.0) as u8).unwrap();
        frames[8] = Image::filled(200, 160, 97).unwrap();
        frames[12] = render(&other, &[(30.0, 40.0)], (200, 160), &Conditions::default(), 1).pop().unwrap();
        let (s, recs) = run(&frames, &positions(&origins), &p);
        for i in [4, 8, 12] {
            let r = &recs[i];
            assert!(r.position.is_none() && r.skip.is_some(), "{name} frame {i}: {r:?}");
        }
        assert_eq!((s.registered, s.wrong_ok), (13, 0), "{name}: {s:?}");
    }
}

/// A 500-frame sweep that comes back to its start, on six photographs with noise: with the
/// defaults (loops closed, positions solved together) the last frame is within 0.5 px of the
/// truth, and the run meets the accuracy targets; per-frame residuals are reported.
#[test]
fn a_long_closed_loop_ends_where_it_began() {
    let p = StitchParams { quality: false, ..Default::default() };
    for (k, name) in ["ihc", "coffee", "camera", "gravel", "grass", "astronaut"].iter().enumerate() {
        let src = photo(name);
        let origins = closed_loop(500, room(src.size(), (160, 120)), 21 + k as u64);
        let frames = render(&src, &origins, (160, 120), &Conditions { noise: 4.0, ..Default::default() }, 7 + k as u64);
        let truth = positions(&origins);
        let (s, recs) = run(&frames, &truth, &p);
        let last = recs[499].position.map(|q| (q.0 - truth[499].0).hypot(q.1 - truth[499].1));
        println!("{name:10} {s:?} last frame {last:?} loops {}", recs.iter().filter(|r| r.loop_closure.is_some()).count());
        assert!(last.is_some_and(|e| e <= 0.5), "{name}: last frame {last:?}");
        assert!(20 * s.registered >= 19 * s.frames && s.mean_error <= 0.25 && s.wrong_ok == 0, "{name}: {s:?}");
        assert!(recs.iter().filter(|r| r.loop_closure.is_some()).count() >= 1, "{name}: no loop closed");
        assert!(recs.iter().all(|r| r.position.is_some() == r.residual.is_some()), "{name}: every registered frame has a residual");
    }
}

/// A 300-frame sweep that comes back to its start while the probe turns up to 20 degrees
/// either way and back (poses of the loop: angles solved with the positions): the last
/// frame within 0.5 px and 0.1 degrees of the truth, loops closed, the accuracy targets met.
#[test]
fn a_turning_closed_loop_ends_where_it_began() {
    let p = StitchParams { quality: false, ..Default::default() };
    for (k, name) in ["ihc", "gravel", "astronaut"].iter().enumerate() {
        let src = photo(name);
        let frame = (160, 120);
        let half = (159.0f64).hypot(119.0) / 2.0 + 3.0;
        let inner = (src.size().0 as f64 - 2.0 * half, src.size().1 as f64 - 2.0 * half);
        let centres = closed_loop(300, (inner.0 - 4.0, inner.1 - 4.0), 41 + k as u64);
        let c = (79.5, 59.5);
        let n = centres.len() as f64;
        let poses: Vec<Similarity> = centres
            .iter()
            .enumerate()
            .map(|(i, &(x, y))| Similarity::about(c, (half - 2.0 + x - c.0, half - 2.0 + y - c.1), 20f64.to_radians() * (std::f64::consts::TAU * i as f64 / (n - 1.0)).sin(), 1.0))
            .collect();
        let frames = render_posed(&src, &poses, frame, &Conditions { noise: 3.0, ..Default::default() }, 9 + k as u64);
        let truth: Vec<Similarity> = poses.iter().map(|q| poses[0].inverse().then(q)).collect();
        let (s, recs) = run_posed(&frames, &truth, &p);
        let last = recs[299].pose().map(|q| {
            let (a, b) = (q.apply(c), truth[299].apply(c));
            ((a.0 - b.0).hypot(a.1 - b.1), (q.angle - truth[299].angle).abs().to_degrees())
        });
        let loops = recs.iter().filter(|r| r.loop_closure.is_some()).count();
        println!("{name:10} {s:?} last frame {last:?} loops {loops}");
        assert!(last.is_some_and(|(e, a)| e <= 0.5 && a <= 0.1), "{name}: last frame {last:?}");
        assert!(20 * s.registered >= 19 * s.frames && s.mean_error <= 0.5 && s.wrong_ok == 0, "{name}: {s:?}");
        assert!(loops >= 1, "{name}: no loop closed");
    }
}

/// The closed loop with and without the global solve (`--ignored --nocapture`).
#[test]
#[ignore]
fn loop_table() {
    for (k, name) in ["ihc", "coffee", "camera", "gravel", "grass", "astronaut"].iter().enumerate() {
        let src = photo(name);
        let origins = closed_loop(500, room(src.size(), (160, 120)), 21 + k as u64);
        let frames = render(&src, &origins, (160, 120), &Conditions { noise: 4.0, ..Default::default() }, 7 + k as u64);
        let truth = positions(&origins);
        for close_loops in [false, true] {
            let p = StitchParams { quality: false, close_loops, ..Default::default() };
            let t = std::time::Instant::now();
            let (s, recs) = run(&frames, &truth, &p);
            let secs = t.elapsed().as_secs_f64();
            let last = recs[499].position.map(|q| (q.0 - truth[499].0).hypot(q.1 - truth[499].1)).unwrap_or(f64::NAN);
            let loops = recs.iter().filter(|r| r.loop_closure.is_some()).count();
            let worst = recs.iter().filter_map(|r| r.residual).fold(0.0, f64::max);
            if std::env::var("DETAIL").is_ok_and(|d| d == *name) {
                for r in recs.iter().filter(|r| r.loop_closure.is_some() || r.index > 480 || r.index < 5) {
                    let e = r.position.map(|q| (q.0 - truth[r.index].0, q.1 - truth[r.index].1));
                    println!("  {:3} ref {:?} loop {:?} err {:?} residual {:?}", r.index, r.reference, r.loop_closure, e, r.residual);
                }
            }
            println!("{name:10} loops {close_loops:5}: {:3}/{} registered, mean {:.3} px, max {:.2} px, last {last:.3} px, {loops} loops kept, worst residual {worst:.2} px, {secs:.2} s", s.registered, s.frames, s.mean_error, s.max_error);
        }
    }
}

/// The table behind the tests, per case and photograph (`--ignored --nocapture`; set
/// `DETAIL="<case> <photo>"` for every frame's record).
#[test]
#[ignore]
fn table() {
    let motions = [Motion::Translation, Motion::Similarity];
    let params = |motion| StitchParams { quality: false, register: RegisterParams { motion, ..Default::default() }, ..Default::default() };
    let line = |s: &Score| format!("{:3}/{:3} mean {:.3} max {:5.2} wrong {}", s.registered, s.frames, s.mean_error, s.max_error, s.wrong_ok);
    println!("{:18} {:10} {:38} | similarity", "case", "photo", "translation");
    for case in &CASES {
        for (k, name) in PHOTOS.iter().enumerate() {
            let src = photo(name);
            let origins = wandering(case.frames, room(src.size(), case.frame), case.step, case.turn, 11 + k as u64);
            let frames = render(&src, &origins, case.frame, &case.conditions, 5 + k as u64);
            let truth = positions(&origins);
            let runs: Vec<(Score, Vec<FrameRecord>)> = motions.iter().map(|&m| run(&frames, &truth, &params(m))).collect();
            println!("{:18} {:10} {:38} | {}", case.name, name, line(&runs[0].0), line(&runs[1].0));
            if std::env::var("DETAIL").is_ok_and(|d| d == format!("{} {name}", case.name)) {
                for r in &runs[1].1 {
                    let e = r.position.map(|(x, y)| (x - truth[r.index].0, y - truth[r.index].1));
                    println!("  {:3} ref {:?} err {e:.3?} ncc {:.3} vectors {} margin {:.3} skip {:?}", r.index, r.reference, r.ncc, r.vectors_used, r.margin, r.skip.as_ref().map(|s| s.describe()));
                }
            }
        }
    }
    for (roll, frames) in [(0.4f64, 40), (1.9, 24)] {
        for (k, name) in ["ihc", "coffee", "camera", "gravel", "grass", "astronaut"].iter().enumerate() {
            let (images, truth) = rolling_footage(name, k as u64, frames, roll);
            let scores: Vec<Score> = motions.iter().map(|&m| run_posed(&images, &truth, &params(m)).0).collect();
            println!("{:18} {:10} {:38} | {}", format!("roll {roll} deg/frame"), name, line(&scores[0]), line(&scores[1]));
        }
    }
    for (k, name) in ["ihc", "coffee", "camera", "gravel", "grass", "astronaut"].iter().enumerate() {
        let src = photo(name);
        let origins = closed_loop(500, room(src.size(), (160, 120)), 21 + k as u64);
        let frames = render(&src, &origins, (160, 120), &Conditions { noise: 4.0, ..Default::default() }, 7 + k as u64);
        let truth = positions(&origins);
        let scores: Vec<Score> = motions.iter().map(|&m| run(&frames, &truth, &params(m)).0).collect();
        println!("{:18} {:10} {:38} | {}", "closed loop 500", name, line(&scores[0]), line(&scores[1]));
    }
}

/// A turning sweep is registered on turned copies of its frames, warped in row bands on
/// every thread (the pipeline's look-ahead is then off): one thread and all must give the
/// same records to the bit, with and without a roll.
#[test]
fn a_turning_sweep_gives_the_same_records_on_one_thread_and_all() {
    let p = StitchParams { quality: false, ..Default::default() };
    for (k, name) in ["coffee", "gravel"].iter().enumerate() {
        let src = photo(name);
        for roll in [0.0f64, 1.9] {
            let poses = rolling(16, src.size(), (200, 160), 3.0, roll.to_radians(), 41 + k as u64);
            let images = render_posed(&src, &poses, (200, 160), &Conditions::default(), 9 + k as u64);
            let views: Vec<AnyView<'_>> = images.iter().map(|f| AnyView::U8(f.view())).collect();
            let one = register_sequence(&views, &p, Parallelism::Sequential, &mut |_| ControlFlow::Continue(())).unwrap();
            let all = register_sequence(&views, &p, Parallelism::AllThreads, &mut |_| ControlFlow::Continue(())).unwrap();
            assert_eq!(format!("{one:?}"), format!("{all:?}"), "{name}, roll {roll}");
            assert!(one.0.iter().filter(|r| r.is_ok()).count() >= 15, "{name}, roll {roll}");
        }
    }
}


/// The significance of a phase-correlation peak (its height over the surface's RMS), which
/// lets the whole overlap register a pair no template can: on every photograph under low
/// contrast, noise 8 and vignetting, the peaks of a frame against another photograph's,
/// and the second peaks of true pairs, stay under `SIGNIFICANT_PEAK`; the true peaks of
/// the fundus under noise 8 and vignetting (whose templates are faint) clear it and lie
/// within 1 px of the truth.
#[test]
fn phase_peaks_are_significant_only_for_matches() {
    use tessera::stitch::{weighted_candidates, Spectrum, FAINT_BAND, SIGNIFICANT_PEAK};
    let candidates = |a: &Spectrum, b: &Spectrum, n: usize| weighted_candidates(a, b, n, Some(FAINT_BAND));
    let spec = |f: &Image<u8>| Spectrum::new(f.view());
    let mut highest_null: f64 = 0.0;
    for case in &CASES[1..4] {
        for (k, name) in PHOTOS.iter().enumerate() {
            let src = photo(name);
            let origins = wandering(case.frames, room(src.size(), case.frame), case.step, case.turn, 11 + k as u64);
            let frames = render(&src, &origins, case.frame, &case.conditions, 5 + k as u64);
            let truth = positions(&origins);
            for (a, b) in [(0, 1), (0, 5), (0, 12), (10, 20)] {
                let c = candidates(&spec(&frames[a]), &spec(&frames[b]), 2).unwrap();
                highest_null = highest_null.max(c[1].significance);
                let t = (truth[b].0 - truth[a].0, truth[b].1 - truth[a].1);
                let error = (c[0].shift.0 - t.0).hypot(c[0].shift.1 - t.1);
                if *name == "retina" && case.name != "low contrast" {
                    assert!(c[0].significance > SIGNIFICANT_PEAK && error < 1.0, "{} {name} {a}-{b}: {:?}, error {error:.2}", case.name, c[0]);
                }
            }
            let other = photo(PHOTOS[(k + 1) % PHOTOS.len()]);
            let o = render(&other, &[(10.0, 10.0)], case.frame, &case.conditions, 99);
            let c = candidates(&spec(&frames[0]), &spec(&o[0]), 2).unwrap();
            highest_null = highest_null.max(c[0].significance);
        }
    }
    println!("highest null peak: {highest_null:.1}");
    assert!(highest_null < SIGNIFICANT_PEAK, "{highest_null}");
}

/// The fundus at contrast 0.3 (noise 3.5, blur 1): no template agrees, and the whole
/// overlaps of true pairs correlate only 0.16 to 0.40, under `min_coefficient`. A
/// phase-correlation match stands there when its overlap beats what the pair correlates a
/// quarter frame away (`overlap_null_ncc`; 7 of 40 frames with the fixed floor alone), is
/// sought against the last good frame where the keyframe's peak sank into the noise (3
/// frames), and is placed where the overlap's correlation peaks on band-passed frames
/// (`stitch::faint`; the overlap refinement left 0.44 px): every frame registers, within
/// the targets.
#[test]
fn faint_phase_matches_are_confirmed_against_their_null() {
    let (frames, truth) = footage(&CASES[1], "retina");
    let (s, recs) = run(&frames, &truth, &StitchParams { quality: false, ..Default::default() });
    println!("{s:?}");
    let below_floor = recs.iter().filter(|r| r.phase_significance.is_some() && r.is_ok() && r.ncc < 0.3).count();
    assert!(s.registered == s.frames && s.mean_error <= 0.25 && s.max_error <= 0.8 && s.wrong_ok == 0 && below_floor >= 20, "{s:?}, {below_floor} below the floor");
    let from_last = recs.iter().filter(|r| r.reference.is_some_and(|k| k + 1 == r.index) && r.phase_significance.is_some()).count();
    assert!(from_last >= 1, "no faint frame registered against the last good frame");
}

/// The translation model takes a faint phase match against its null too (its overlap
/// under the `min_coefficient` floor), where the whole overlap shows no turn: the faint
/// fundus, a pure translation, registers every frame as the similarity model does (9 of 40
/// when the translation model refused every faint match). Rolling 0.4 degrees a frame, a
/// turned pair correlates near its centre of rotation alone, faintly, and stands above the
/// null too: taken on the null alone, 11 of 24 frames stood on faint matches, one of them
/// 2.06 px off; with the turn refused, one (whose turn moves the frame's corners by under
/// a pixel), none off.
#[test]
fn the_translation_model_takes_faint_matches_only_where_the_overlap_does_not_turn() {
    let translation = StitchParams { quality: false, register: RegisterParams { motion: Motion::Translation, ..Default::default() }, ..Default::default() };
    let below_floor = |recs: &[FrameRecord]| -> Vec<usize> { recs.iter().filter(|r| r.phase_significance.is_some() && r.is_ok() && r.ncc < translation.register.min_coefficient).map(|r| r.index).collect() };
    let faint = &CASES[1];
    assert_eq!(faint.name, "low contrast");
    let (frames, truth) = footage(faint, "retina");
    let (s, recs) = run(&frames, &truth, &translation);
    let by_peak = below_floor(&recs);
    assert!(s.registered == s.frames && s.mean_error <= 0.25 && s.wrong_ok == 0 && by_peak.len() >= 20, "{s:?}, {} below the floor", by_peak.len());
    let src = photo("retina");
    let poses = rolling(24, src.size(), faint.frame, 3.0, 0.4f64.to_radians(), 31);
    let images = render_posed(&src, &poses, faint.frame, &faint.conditions, 5);
    let truth: Vec<Similarity> = poses.iter().map(|q| poses[0].inverse().then(q)).collect();
    let (s, recs) = run_posed(&images, &truth, &translation);
    let by_peak = below_floor(&recs);
    assert!(s.wrong_ok == 0 && by_peak.len() <= 2, "{s:?}, frames {by_peak:?} on a faint match");
}

/// The same faint fundus: each faint frame is also registered against the faint frames 1,
/// 2, 4, 8 and 16 before it, and the solve takes them all together (with `close_loops`, the
/// default): more precise than its tree alone (measured 0.167 against 0.217 px mean).
#[test]
fn faint_frames_are_linked_to_earlier_faint_frames_and_solved_together() {
    let (frames, truth) = footage(&CASES[1], "retina");
    let (linked, recs) = run(&frames, &truth, &StitchParams { quality: false, ..Default::default() });
    let (tree, _) = run(&frames, &truth, &StitchParams { quality: false, close_loops: false, ..Default::default() });
    println!("linked {linked:?}\ntree {tree:?}");
    assert!(linked.registered == tree.registered && linked.wrong_ok == 0, "{linked:?} against {tree:?}");
    assert!(linked.mean_error <= 0.2 && linked.mean_error < 0.85 * tree.mean_error, "{linked:?} against {tree:?}");
    // The solve's residuals: every registered frame has one, none near the loop rejection.
    assert!(recs.iter().filter(|r| r.position.is_some()).all(|r| r.residual.is_some_and(|x| x < 1.0)));
}

/// The fundus under noise 8, whose templates are too faint to agree on many pairs: with the
/// whole overlap (the default) every frame registers within the targets, several of them
/// on a phase-correlation peak alone, each peak above `SIGNIFICANT_PEAK`; without it,
/// frames are skipped and the rest drift (32 of 40 at 0.68 px when measured).
#[test]
fn faint_fundus_registers_on_the_whole_overlap() {
    use tessera::stitch::SIGNIFICANT_PEAK;
    let case = &CASES[2];
    assert_eq!(case.name, "noise 8");
    let src = photo("retina");
    let origins = wandering(case.frames, room(src.size(), case.frame), case.step, case.turn, 11);
    let frames = render(&src, &origins, case.frame, &case.conditions, 5);
    let truth = positions(&origins);
    let (s, recs) = run(&frames, &truth, &StitchParams { quality: false, ..Default::default() });
    assert!(20 * s.registered >= 19 * s.frames && s.mean_error <= 0.25 && s.wrong_ok == 0, "{s:?}");
    let by_peak: Vec<f64> = recs.iter().filter_map(|r| r.phase_significance).collect();
    assert!(by_peak.len() >= 3 && by_peak.iter().all(|&k| k >= SIGNIFICANT_PEAK), "{by_peak:?}");
    let (without, _) = run(&frames, &truth, &StitchParams { quality: false, whole_overlap: false, ..Default::default() });
    assert!(without.registered < s.registered && without.mean_error > 2.0 * s.mean_error, "{without:?} against {s:?}");
}

/// Back-and-forth sweeps (a microscope's serpentine rows, an endoscope pulled back): the
/// direction reverses every `leg` frames at steps of 20 to 30 % of the frame, so the
/// constant-velocity prediction after a turn points twice a step the wrong way. Every frame
/// registers, none reported `ok` off by more than 2 px (all seven photographs wide enough,
/// 15 runs, at most 0.095 px). The reversed prediction, tried before the unmoved one, cut
/// the evaluations spent on the frames after a turn by 20 to 30 %.
#[test]
fn sweeps_that_reverse_register_every_frame() {
    let p = StitchParams { quality: false, ..Default::default() };
    let frame = (200, 160);
    let mut failures = Vec::new();
    for name in PHOTOS {
        let src = photo(name);
        for (step, leg) in [(40.0, 6), (60.0, 4)] {
            let (rw, rh) = room(src.size(), frame);
            if step * leg as f64 + 2.0 > rw * 0.9 || rh < 30.0 {
                continue;
            }
            let mut at = (rw * 0.05, rh * 0.3);
            let mut dir = 1.0;
            let origins: Vec<(f64, f64)> = (0..30)
                .map(|i| {
                    if i > 0 && i % leg == 0 {
                        dir = -dir;
                    }
                    let o = at;
                    at.0 += dir * step + 0.3;
                    at.1 += 0.7;
                    o
                })
                .collect();
            let frames = render(&src, &origins, frame, &Conditions { contrast: 1.0, noise: 2.0, blur: 0.0, gain_drift: 0.0, vignetting: 0.0 }, 3);
            let (s, recs) = run(&frames, &positions(&origins), &p);
            let total: u64 = recs.iter().map(|r| r.evaluations).sum();
            let turning: u64 = recs.iter().filter(|r| r.index > 1 && (r.index - 1) % leg == 0).map(|r| r.evaluations).sum();
            println!("{name:10} step {step:3} leg {leg}: {s:?}; {total} NCC evaluations, {turning} on the frames after a turn");
            if s.registered != s.frames || s.wrong_ok > 0 || s.mean_error > 0.1 {
                failures.push(format!("{name} step {step} leg {leg}: {s:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A serpentine scan over a slide with an empty patch of glass (the middle of the
/// photograph `name`, enlarged 1.6x, made flat): rows of 200 x 160 frames at 28 px steps,
/// each row 96 px below the last (40 % overlap); the frames and their true positions.
fn glass_patch_sweep(name: &str) -> (Vec<Image<u8>>, Vec<(f64, f64)>) {
    use common::footage::enlarged;
    let frame = (200, 160);
    let mut src = enlarged(&photo(name), 1.6);
    let (w, h) = src.size();
    let mean = src.as_slice().iter().map(|&v| v as f64).sum::<f64>() / (w * h) as f64;
    for y in h / 3..2 * h / 3 {
        for x in w / 4..3 * w / 4 {
            src.set(x, y, mean as f32);
        }
    }
    let (rw, rh) = room(src.size(), frame);
    let mut origins = Vec::new();
    let (mut row, mut y) = (0, 2.0);
    while y <= rh {
        let xs: Vec<f64> = (0..).map(|k| 2.3 + 28.0 * k as f64).take_while(|&x| x <= rw).collect();
        let xs: Vec<f64> = if row % 2 == 0 { xs } else { xs.into_iter().rev().collect() };
        origins.extend(xs.into_iter().map(|x| (x, y + 0.4)));
        y += 96.0;
        row += 1;
    }
    let frames = render(&src, &origins, frame, &Conditions { contrast: 1.0, noise: 2.0, blur: 0.0, gain_drift: 0.0, vignetting: 0.0 }, 3);
    (frames, positions(&origins))
}

/// Glass-patch sweeps of the eight photographs: the frames over the patch are skipped, the
/// run finds its way back past it, and no frame is reported `ok` more than 2 px from the
/// truth (a phase peak on the
/// cameraman's coat placed a frame 420 px off; templates or a phase peak on the fundus's
/// rim, which the sweep's corners see alone, 13 and 99 px off; and the frames chained to
/// them).
#[test]
fn glass_patch_sweeps_report_no_frame_ok_off_its_place() {
    let p = StitchParams { quality: false, ..Default::default() };
    let mut failures = Vec::new();
    for name in PHOTOS {
        let (frames, truth) = glass_patch_sweep(name);
        let (s, _) = run(&frames, &truth, &p);
        println!("{name:10} {s:?}");
        // The rows past the patch are found again among the earlier keyframes, or start an
        // island that joins the rows before it (without either the run stopped at the
        // patch: 33 to 54 % of each sweep; with re-localization alone 59 % for the
        // cameraman, whose sky is featureless too, to 99 %; with islands 73 to 100 %, all
        // in the panorama).
        if s.wrong_ok > 0 || 2 * s.registered < s.frames || s.off_panorama > 0 {
            failures.push(format!("{name}: {s:?}"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A sweep that crosses a featureless band and never comes back: the frames past it start
/// an island of their own, placed within itself; the panorama holds the larger part, and
/// every registered frame of the other keeps its place relative to its island's first
/// frame. Four photographs of different character (enlarged 2x), 200 x 160 frames at 24 px
/// steps.
#[test]
fn a_sweep_that_leaves_for_good_gives_two_islands_each_placed_within_itself() {
    let frame = (200, 160);
    let p = StitchParams { quality: false, ..Default::default() };
    let mut failures = Vec::new();
    for name in ["ihc", "coffee", "gravel", "astronaut"] {
        let (frames, origins, band) = common::footage::flat_band_sweep(&common::footage::enlarged(&photo(name), 2.0), 3);
        let (s, recs) = run(&frames, &positions(&origins), &p);
        println!("{name:10} {s:?}");
        // Textured frames: those whose whole width lies off the band.
        let textured = origins.iter().filter(|o| o.0 + frame.0 as f64 <= band.0 as f64 || o.0 >= band.1 as f64).count();
        let islands: std::collections::BTreeSet<usize> = recs.iter().filter_map(|r| r.island).collect();
        let (placed, apart) = (recs.iter().filter(|r| r.is_ok()).count(), s.off_panorama);
        if s.wrong_ok > 0 || s.registered < textured || islands.len() != 2 || apart == 0 || placed < apart || recs.iter().any(|r| r.joined.is_some()) {
            failures.push(format!("{name}: {s:?}, {textured} textured, islands {islands:?}"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A sweep out and back over four photographs of different character whose lens goes out
/// of focus for 3 to 12 frames on the way out (blurred with sigma 16): the frames past the
/// blur start an island on ground not seen before, which joins the first part where the way
/// back passes over it. Every sharp frame is in the panorama, none more than 2 px off.
#[test]
fn a_sweep_that_loses_focus_on_the_way_out_is_joined_on_the_way_back() {
    let frame = (200, 160);
    let p = StitchParams { quality: false, ..Default::default() };
    let sharp = Conditions::default();
    let mut failures = Vec::new();
    for (name, stretch) in [("ihc", 3), ("coffee", 9), ("gravel", 10), ("astronaut", 12)] {
        let src = common::footage::enlarged(&photo(name), 1.6);
        let (rw, rh) = room(src.size(), frame);
        // Out along a row at 26 px a frame, then back 60 px lower (62 % overlap).
        let out: Vec<(f64, f64)> = (0..).map(|k| (2.3 + 26.0 * k as f64, 3.4 + 0.3 * k as f64)).take_while(|o| o.0 <= rw).collect();
        let back: Vec<(f64, f64)> = out.iter().rev().map(|o| (o.0 + 1.1, (o.1 + 60.0).min(rh))).collect();
        let origins: Vec<(f64, f64)> = out.iter().chain(&back).copied().collect();
        let mut frames = render(&src, &origins, frame, &sharp, 5);
        let blurred_from = 6;
        let blurred = render(&src, &origins[blurred_from..blurred_from + stretch], frame, &Conditions { blur: 16.0, ..sharp }, 6);
        frames.splice(blurred_from..blurred_from + stretch, blurred);
        let (s, recs) = run(&frames, &positions(&origins), &p);
        let islands: std::collections::BTreeSet<usize> = recs.iter().filter_map(|r| r.island).collect();
        let joins: Vec<(usize, usize)> = recs.iter().filter_map(|r| Some((r.joined?, r.index))).collect();
        println!("{name:10} {stretch:2} blurred: {s:?}, islands {islands:?}, joined by {joins:?}");
        // In the panorama: no frame more than 2 px off (the blurred frames chained among
        // themselves on an island of their own are up to 3.5 px off: their correlation
        // peaks are flat).
        let t = positions(&origins);
        let wrong_in_panorama = recs.iter().filter_map(|r| r.position.map(|q| (q.0 + t[0].0 - t[r.index].0).hypot(q.1 + t[0].1 - t[r.index].1))).filter(|&e| e > 2.0).count();
        // The blurred frames may match each other alone (an island of their own); every
        // sharp frame is in the panorama.
        let sharp_apart = recs.iter().filter(|r| !(blurred_from..blurred_from + stretch).contains(&r.index) && !r.is_ok()).count();
        if wrong_in_panorama > 0 || sharp_apart > 0 || joins.is_empty() {
            failures.push(format!("{name}, {stretch} blurred: {s:?}, {wrong_in_panorama} in the panorama more than 2 px off, {sharp_apart} sharp frames out of it"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The glass-patch sweeps of every photograph, printed by hand (`--ignored --nocapture`):
/// frames registered, errors, and frames reported `ok` more than 2 px off. The frames past
/// the patch are where a run that lost track must find its way back, and where a match
/// carried by a mostly featureless overlap must not be accepted.
#[test]
#[ignore]
fn glass_patch_table() {
    let p = StitchParams { quality: false, ..Default::default() };
    let only = std::env::var("GLASS_ONLY").ok();
    for name in PHOTOS.into_iter().filter(|n| only.as_deref().is_none_or(|o| o == *n)) {
        let (frames, truth) = glass_patch_sweep(name);
        let (s, recs) = run(&frames, &truth, &p);
        println!("{name:10} {s:?}");
        if std::env::var("GLASS_DEBUG").is_ok() {
            let r0 = recs.iter().find(|r| r.position == Some((0.0, 0.0)) && r.reference.is_none()).map(|r| r.index).unwrap_or(0);
            for r in recs.iter() {
                let e = r.position.map(|q| (q.0 + truth[r0].0 - truth[r.index].0).hypot(q.1 + truth[r0].1 - truth[r.index].1));
                println!("  {:4} ref {:?} isl {:?} joined {:?} err {:?} ncc {:.3} vec {} ph {:?} skip {:?}", r.index, r.reference, r.island, r.joined, e.map(|e| (e * 100.0).round() / 100.0), r.ncc, r.vectors_used, r.phase_significance, r.skip.as_ref().map(|s| s.describe()));
            }
        }
    }
}

