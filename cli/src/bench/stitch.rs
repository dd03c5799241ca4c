//! The `stitch` suite: frame pairs per second of sequence registration at PAL (720x576)
//! and half PAL (360x288), rsz 25 / 31, NPTS 6 / 8, one thread and all; NCC evaluations
//! per pair (log search against exhaustive); the curve of time against template size
//! (25..255); the cost of closing loops on a 300-frame sweep; the cost of the whole-overlap
//! stages on faint footage (`pal_faint_*`) and of refining every pair on the whole overlap
//! (`pal_refine_every_pair_*`); the quality measures of one pair (`pal_quality_measures`);
//! PAL frames registered from PNG files, decoding included (`pal_files_*`); registration
//! on pools of 1, 2, 4, ... threads up to the machine's cores, one thread against two (and
//! against all cores, where there are more) in interleaved rounds, and the engine's serial
//! fraction (`pal_scaling_*`, `pal_serial_fraction`); and one template searched
//! exhaustively over +-16 / +-32 pixels, the workload of OpenCV's `matchTemplate(TM_CCOEFF_NORMED)` in
//! `../shared/bench/opencv_anchor.sh` (`ncc_exhaustive_one_template`).

use super::{Bench, Recorder};
use crate::stitch::{default_sequence, default_sequence_sized};
use anyhow::Result;
use serde_json::{json, Value};
use std::ops::ControlFlow;
use tessera::filter::{mean_filter, BoxParams};
use tessera::ncc::{exhaustive_search, log_search, Integral, SearchCache, SearchFrame, SearchParams, Template};
use tessera::stitch::{grid_ncc, overlap_ncc, register_pair_any, warp_sized, Compositor};
use tessera::frames::{frame_source, read_ahead_depth};
use tessera::stitch::{register_frames, register_frames_timed, register_sequence, stitch_frames, InMemory, StageTimes, Motion, RegisterParams, SearchMethod, Similarity, StitchParams};
use tessera::{AnyImage, AnyView, Border, Image, Parallelism};

/// `frames` u8 luma frames of `w x h` cut from the bundled photograph along the demo path
/// (scaled so the motion per frame is about the same at both sizes).
fn luma_sequence(frames: usize, w: usize, h: usize) -> Result<Vec<Image<u8>>> {
    let seq = default_sequence(frames, 1)?;
    Ok(seq
        .frames
        .iter()
        .map(|f| {
            let l: Image<u8> = f.convert();
            if (w, h) == l.size() {
                l
            } else {
                // Half PAL: the top-left quarter of each frame (same motion in pixels).
                l.view().crop(0, 0, w, h).map(|c| c.to_image()).unwrap_or(l)
            }
        })
        .collect())
}

/// `frames` PAL u8 frames cut from the bundled photograph along a straight path (3 px and 1
/// px per frame), each turned `roll` degrees more than the last about its centre, and
/// their true poses relative to frame 0.
fn rolling_sequence(frames: usize, roll: f64) -> Result<(Vec<Image<u8>>, Vec<Similarity>)> {
    let photo = crate::stitch::demo_photograph()?.convert::<u8>();
    let c = (359.5, 287.5);
    let poses: Vec<Similarity> = (0..frames).map(|i| Similarity::about(c, (250.0 + 3.0 * i as f64, 420.0 + i as f64), (roll * i as f64).to_radians(), 1.0)).collect();
    let images = poses.iter().map(|q| warp_sized(photo.view(), q, (720, 576))).collect::<tessera::Result<Vec<_>>>()?;
    Ok((images, poses.iter().map(|q| poses[0].inverse().then(q)).collect()))
}

/// The rolling sequence's path with no roll, at contrast 0.3 around the photograph's mean and
/// with Gaussian noise of 6 grey levels: faint texture, on which too few templates agree,
/// and their true positions relative to frame 0.
fn faint_sequence(frames: usize) -> Result<(Vec<Image<u8>>, Vec<(f64, f64)>)> {
    let (clean, poses) = rolling_sequence(frames, 0.0)?;
    let mut rng = tessera::stitch::SplitMix64::new(17);
    let faint = clean
        .iter()
        .map(|f| {
            let mean = f.as_slice().iter().map(|&v| v as f64).sum::<f64>() / f.as_slice().len() as f64;
            f.map(|v| (mean + 0.3 * (v as f64 - mean) + 6.0 * rng.normal()).round().clamp(0.0, 255.0) as u8)
        })
        .collect();
    Ok((faint, poses.iter().map(|q| q.shift()).collect()))
}

/// The windows a run of `views` under `p` planned (module `window` of the core): how many,
/// their frames in all, and their mean length.
fn planned_windows(views: &[AnyView<'_>], p: &StitchParams) -> Result<serde_json::Value> {
    let stages = StageTimes::default();
    register_frames_timed(&InMemory(views), p, Parallelism::AllThreads, &mut |_| ControlFlow::Continue(()), &stages)?;
    let (windows, planned) = stages.windows();
    Ok(json!({"windows": windows, "frames_planned": planned, "mean": stages.mean_window()}))
}

pub fn run(b: &Bench, r: &mut Recorder) -> Result<()> {
    let frames = if b.quick { 9 } else { 31 };
    let pairs = (frames - 1) as f64;
    for (label, w, h) in [("pal", 720usize, 576usize), ("half_pal", 360, 288)] {
        let seq = luma_sequence(frames, w, h)?;
        let views: Vec<AnyView<'_>> = seq.iter().map(|f| AnyView::U8(f.view())).collect();
        for (rsz, npts) in [(25usize, 6usize), (31, 6), (25, 8), (31, 8)] {
            let reg = RegisterParams { rsz, npts, ..Default::default() };
            let p = StitchParams { register: reg, quality: false, ..Default::default() };
            let params = json!({"w": w, "h": h, "rsz": rsz, "npts": npts, "search_radius": 32, "pairs": pairs});
            for (be, name) in [(b.backend.as_ref(), "stitch_sequence"), (b.single.as_ref(), "stitch_sequence_1thread")] {
                let mut evals = 0;
                let ms = r.time(&format!("{label}_{name}"), params.clone(), be.name(), b.reps_for(pairs * 2.0).min(9), || {
                    let pano = be.stitch(&InMemory(&views), &p, &mut |_| ControlFlow::Continue(()))?;
                    evals = pano.frames.iter().map(|f| f.evaluations).sum::<u64>();
                    Ok::<_, tessera::Error>(())
                });
                if let Some(ms) = ms {
                    // The timed call registers `pairs` pairs and composites the panorama.
                    r.record(&format!("{label}_{name}_pairs_per_s"), params.clone(), be.name(), json!((1000.0 * pairs / ms).round()));
                    if name == "stitch_sequence" {
                        r.record(&format!("{label}_ncc_evaluations_per_pair"), params.clone(), "cpu", json!((evals as f64 / pairs).round()));
                    }
                }
            }
        }
        // Registration alone (no compositing), the unit a GPU batches: one thread and all.
        let reg = RegisterParams::default();
        let p = StitchParams { register: reg, quality: false, ..Default::default() };
        for (par, be) in [(Parallelism::AllThreads, "cpu"), (Parallelism::Sequential, "cpu-1thread")] {
            let ms = r.time(&format!("{label}_registration_only_sequence"), json!({"w": w, "h": h, "rsz": 25, "npts": 6, "pairs": pairs}), be, b.reps_for(pairs).min(9), || {
                register_sequence(&views, &p, par, &mut |_| ControlFlow::Continue(())).map(|_| ())
            });
            if let Some(ms) = ms {
                r.record(&format!("{label}_registration_only_pairs_per_s"), json!({"w": w, "h": h, "rsz": 25, "npts": 6}), be, json!((1000.0 * pairs / ms).round()));
            }
        }
        // One pair alone, as a library caller registers it (from its own thread): on one
        // thread, and with its integral images and templates over every thread.
        if label == "pal" {
            let mut pair_ms = serde_json::Map::new();
            for (par, key) in [(Parallelism::Sequential, "1"), (Parallelism::AllThreads, "all")] {
                let ms = r.time(&format!("pal_single_pair_{key}_threads"), json!({"threads": key}), "cpu", 31, || {
                    register_pair_any(views[1], views[2], &reg, (0.0, 0.0), par).map(|_| ())
                });
                if let Some(ms) = ms {
                    pair_ms.insert(key.to_string(), json!((ms * 1e4).round() / 1e4));
                }
            }
            if !pair_ms.is_empty() {
                let threads = rayon::current_num_threads();
                r.record("pal_single_pair_ms", json!({"w": w, "h": h, "rsz": 25, "npts": 6, "all": threads}), "cpu", serde_json::Value::Object(pair_ms));
            }
        }
        // Scaling: registration alone on pools of 1, 2, 4, ... threads up to the machine's
        // cores (the window's pairs spread over the pool), each pool timed in a block of its
        // own, warm as a run keeps it (interleaving pools round by round measured the two-thread
        // pool 10 % slower, its threads woken from sleep each round). The serial fraction
        // is measured in the engine: the share of one thread's wall time outside the parallel
        // stage (`StageTimes`); Amdahl's law from one and two threads' times
        // (s = 2 T2 / T1 - 1), which also counts the stage's own imbalance, is kept beside it.
        if label == "pal" {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            let mut scaling = serde_json::Map::new();
            let (mut pair_ms, mut efficiency, mut integral_ms) = (serde_json::Map::new(), serde_json::Map::new(), serde_json::Map::new());
            let mut times = Vec::new();
            for threads in (0..).map(|k| 1usize << k).take_while(|&t| t <= cores.max(2)) {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().map_err(|e| anyhow::anyhow!("thread pool: {e}"))?;
                let ms = r.time(&format!("pal_scaling_{threads}_threads"), json!({"threads": threads, "pairs": pairs}), "cpu", b.reps_for(pairs).min(9), || {
                    pool.install(|| register_sequence(&views, &p, Parallelism::AllThreads, &mut |_| ControlFlow::Continue(())).map(|_| ()))
                });
                if let Some(ms) = ms {
                    scaling.insert(threads.to_string(), json!((1000.0 * pairs / ms).round()));
                    times.push(ms);
                }
                // A frame's integral images, the largest step of a pair that no template
                // search overlaps, on the same pool (a pair with threads to spare computes
                // them in row bands).
                let mut tables = Integral::<u8>::default();
                let ms = r.time(&format!("pal_integral_images_{threads}_threads"), json!({"threads": threads, "w": w, "h": h}), "cpu", 31, || {
                    pool.install(|| tables.compute_on(seq[1].view(), Parallelism::AllThreads))
                });
                if let Some(ms) = ms {
                    integral_ms.insert(threads.to_string(), json!((ms * 1e4).round() / 1e4));
                }
                // The same pool's runs with the engine's stage times: a pair's mean time and
                // the stage's efficiency (module `stage_times`), which the speed-up is made of.
                if r.wants("pal_scaling_breakdown") {
                    let stages = StageTimes::default();
                    for _ in 0..b.reps_for(pairs).clamp(3, 9) {
                        pool.install(|| register_frames_timed(&InMemory(&views), &p, Parallelism::AllThreads, &mut |_| ControlFlow::Continue(()), &stages))?;
                    }
                    if let (Some(ns), Some(e)) = (stages.mean_pair_ns(), stages.stage_efficiency(threads)) {
                        pair_ms.insert(threads.to_string(), json!((ns / 1e4).round() / 100.0));
                        efficiency.insert(threads.to_string(), json!((e * 1000.0).round() / 1000.0));
                    }
                }
            }
            if !scaling.is_empty() {
                r.record("pal_scaling_pairs_per_s", json!({"w": w, "h": h, "rsz": 25, "npts": 6, "pairs": pairs}), "cpu", serde_json::Value::Object(scaling));
            }
            if !integral_ms.is_empty() {
                r.record("pal_integral_images_ms", json!({"w": w, "h": h, "by": "threads"}), "cpu", serde_json::Value::Object(integral_ms));
            }
            if !pair_ms.is_empty() {
                let params = json!({"w": w, "h": h, "rsz": 25, "npts": 6, "pairs": pairs, "measured": "each planned pair's task and the window stage, by thread count"});
                r.record("pal_scaling_breakdown_pair_ms", params.clone(), "cpu", serde_json::Value::Object(pair_ms));
                r.record("pal_scaling_breakdown_stage_efficiency", params, "cpu", serde_json::Value::Object(efficiency));
            }
            if let [t1, t2, ..] = times[..] {
                r.record("pal_serial_fraction_amdahl", json!({"from": "1 and 2 threads"}), "cpu", json!(((2.0 * t2 / t1 - 1.0) * 1000.0).round() / 1000.0));
            }
            // The same speed-up from rounds that time one thread and two back to back (each
            // pool woken by an untimed call first): the ratio of each round, then their
            // median. A shared machine's speed drifts over the minutes between the blocks
            // above (one thread's figure moved 1.6x from one run to the next on the 2-core
            // VM); within a round it falls on both alike.
            //
            // Registration alone, and the defaults (with every pair's quality measures, the
            // NCC of its whole overlap and of its grid: more work a pair than its
            // registration, spread over the threads too).
            let defaults = StitchParams { register: reg, ..Default::default() };
            for (prefix, p) in [("pal_scaling", &p), ("pal_scaling_defaults", &defaults)] {
                if r.wants(&format!("{prefix}_interleaved")) && cores >= 2 {
                    let pools = [1, 2].map(|threads| rayon::ThreadPoolBuilder::new().num_threads(threads).build());
                    let [Ok(one), Ok(two)] = pools else { anyhow::bail!("thread pool: could not start one or two threads") };
                    let register = || register_sequence(&views, p, Parallelism::AllThreads, &mut |_| ControlFlow::Continue(())).map(|_| ());
                    let run = |pool: &rayon::ThreadPool| pool.install(register);
                    // A run timed after an untimed one that wakes its threads, `between` called
                    // between the two whatever the first gave (a barrier another thread waits at
                    // must be reached even after a failed run).
                    let timed_after = |go: &dyn Fn() -> tessera::Result<()>, between: &dyn Fn()| -> Result<f64> {
                        let warm = go();
                        between();
                        warm?;
                        let t = std::time::Instant::now();
                        go()?;
                        Ok(t.elapsed().as_secs_f64())
                    };
                    let timed = |pool: &rayon::ThreadPool| timed_after(&|| run(pool), &|| ());
                    // The machine's own ceiling in the same rounds: two independent one-thread
                    // runs at once (each on a pool of its own, started together), whose
                    // throughput against one run alone is what two cores give this work with
                    // no engine between them: shared caches, memory, or a second vCPU that is
                    // a hyperthread or a neighbour's.
                    let second = rayon::ThreadPoolBuilder::new().num_threads(1).build().map_err(|e| anyhow::anyhow!("thread pool: {e}"))?;
                    let side_by_side = || -> Result<f64> {
                        let start = std::sync::Barrier::new(2);
                        let both = |pool: &rayon::ThreadPool| timed_after(&|| run(pool), &|| {
                            start.wait();
                        });
                        let (a, b) = std::thread::scope(|s| {
                            let other = s.spawn(|| both(&second));
                            (both(&one), other.join())
                        });
                        let b = b.map_err(|_| anyhow::anyhow!("a side-by-side run panicked"))?;
                        Ok(a?.max(b?))
                    };
                    // As the command line and a library caller run it: on their own thread, outside
                    // the pool, with every thread of rayon's global pool.
                    let from_callers_thread = || timed_after(&register, &|| ());
                    // Where the machine has more cores than two, a pool of all of them as well.
                    let all = (cores > 2).then(|| rayon::ThreadPoolBuilder::new().num_threads(cores).build()).transpose().map_err(|e| anyhow::anyhow!("thread pool: {e}"))?;
                    // A round's runs take some milliseconds each, and the VM's hiccups as long:
                    // nine rounds' medians moved by 0.2 from one call to the next, 41 rounds' by
                    // 0.02 within a quiet spell.
                    let rounds = if b.quick { 1 } else { 25 };
                    let (mut ratios, mut ceilings, mut callers, mut all_over_1) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds), Vec::with_capacity(rounds), Vec::with_capacity(rounds));
                    let (mut one_s, mut two_s) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
                    for _ in 0..rounds {
                        let alone = timed(&one)?;
                        let both = timed(&two)?;
                        ratios.push(alone / both);
                        one_s.push(alone);
                        two_s.push(both);
                        ceilings.push(2.0 * alone / side_by_side()?);
                        callers.push(alone / from_callers_thread()?);
                        if let Some(all) = &all {
                            all_over_1.push(alone / timed(all)?);
                        }
                    }
                    // Each ratio's median over the rounds, with the lowest and highest round.
                    let round3 = |x: f64| (x * 1000.0).round() / 1000.0;
                    let mut record = |name: &str, rounds_of: &mut Vec<f64>, extra: Value| {
                        if rounds_of.is_empty() {
                            return;
                        }
                        let mid = super::median(rounds_of);
                        let mut params = json!({"rounds": rounds, "lowest": round3(rounds_of[0]), "highest": round3(rounds_of[rounds_of.len() - 1]), "pairs": pairs});
                        if let (Some(p), Value::Object(more)) = (params.as_object_mut(), extra) {
                            p.extend(more);
                        }
                        r.record(name, params, "cpu", json!(round3(mid)));
                    };
                    record(&format!("{prefix}_interleaved_2_over_1"), &mut ratios, json!({}));
                    record(&format!("{prefix}_two_runs_at_once_over_1"), &mut ceilings, json!({"measured": "two independent one-thread runs side by side, throughput against one alone"}));
                    let threads = rayon::current_num_threads();
                    record(&format!("{prefix}_callers_thread_all_over_1"), &mut callers, json!({"threads": threads, "measured": "the run on a thread outside the pool, on every thread of the global pool, against one thread"}));
                    // Empty where the machine has two cores or fewer.
                    record(&format!("{prefix}_interleaved_all_over_1"), &mut all_over_1, json!({"threads": cores}));
                    if prefix == "pal_scaling_defaults" && !one_s.is_empty() {
                        let per_s = |times: &mut Vec<f64>| json!((pairs / super::median(times)).round());
                        r.record(&format!("{prefix}_pairs_per_s"), json!({"w": w, "h": h, "rsz": 25, "npts": 6, "pairs": pairs, "rounds": rounds}), "cpu", json!({"1": per_s(&mut one_s), "2": per_s(&mut two_s)}));
                    }
                }
            }
            for (name, p) in [("pal_serial_fraction", &p), ("pal_serial_fraction_defaults", &defaults)] {
                if r.wants(name) {
                    let stages = StageTimes::default();
                    for _ in 0..b.reps_for(pairs).max(5) {
                        register_frames_timed(&InMemory(&views), p, Parallelism::Sequential, &mut |_| ControlFlow::Continue(()), &stages)?;
                    }
                    if let Some(s) = stages.serial_fraction() {
                        r.record(name, json!({"threads": 1, "measured": "outside the window stage"}), "cpu", json!((s * 1000.0).round() / 1000.0));
                        let bound = name.replace("serial_fraction", "amdahl_bound_16_threads");
                        r.record(&bound, json!({"from": name}), "cpu", json!((100.0 / (s + (1.0 - s) / 16.0)).round() / 100.0));
                    }
                }
            }
        }
        // From files: the same path's PAL frames as RGB PNG files, registered through the
        // file source (decoding included, no frame cache), on one thread, on all threads
        // with the frames decoded in order on the run's thread, and on all threads with the
        // next frames decoded on the pool (`frames::ReadAhead`).
        if label == "pal" && r.wants("pal_files_sequence") {
            let dir = std::env::temp_dir().join(format!("tessera-bench-pal-files-{}", std::process::id()));
            std::fs::create_dir_all(&dir)?;
            let mut files = Vec::new();
            for (i, f) in default_sequence(frames, 1)?.frames.into_iter().enumerate() {
                let path = dir.join(format!("frame_{i:04}.png"));
                tessera::io::save(&AnyImage::Rgba8(f), &path)?;
                files.push(path);
            }
            let all = read_ahead_depth(Parallelism::AllThreads);
            for (be, par, depth) in [("cpu-1thread", Parallelism::Sequential, 0), ("cpu-in-order", Parallelism::AllThreads, 0), ("cpu", Parallelism::AllThreads, all)] {
                let params = json!({"w": w, "h": h, "rsz": 25, "npts": 6, "pairs": pairs, "format": "png", "read_ahead": depth});
                let ms = r.time("pal_files_sequence", params.clone(), be, b.reps_for(pairs).min(9), || {
                    let (source, _) = frame_source(&files, 0, depth)?;
                    register_frames(source.as_ref(), &p, par, &mut |_| ControlFlow::Continue(())).map(|_| ()).map_err(anyhow::Error::from)
                });
                if let Some(ms) = ms {
                    r.record("pal_files_pairs_per_s", params, be, json!((1000.0 * pairs / ms).round()));
                }
            }
            std::fs::remove_dir_all(&dir)?;
        }
        // The quality measures of one pair (overlap and grid NCC, on by default in a run) at
        // a subpixel shift, one thread: u8 frames sum exactly in integers, the same frames
        // as f32 in f64.
        if label == "pal" {
            let (fa, fb) = (&seq[0], &seq[1]);
            let (af, bf) = (fa.map(|v| v as f32), fb.map(|v| v as f32));
            let shift = (2.6, -1.3);
            for (ty, ra, rb) in [("u8", AnyView::U8(fa.view()), AnyView::U8(fb.view())), ("f32", AnyView::F32(af.view()), AnyView::F32(bf.view()))] {
                r.time("pal_quality_measures", json!({"w": w, "h": h, "type": ty, "grid_side": 25}), "cpu-1thread", b.reps_for(1.0).min(21), || -> tessera::Result<()> {
                    match (ra, rb) {
                        (AnyView::U8(x), AnyView::U8(y)) => {
                            overlap_ncc(x, y, shift, Parallelism::Sequential)?;
                            grid_ncc(x, y, shift, 25)?;
                        }
                        (AnyView::F32(x), AnyView::F32(y)) => {
                            overlap_ncc(x, y, shift, Parallelism::Sequential)?;
                            grid_ncc(x, y, shift, 25)?;
                        }
                        _ => {}
                    }
                    Ok(())
                });
            }
        }
        // The same with every pair refined on the whole overlap (`refine_every_pair`).
        let every = StitchParams { refine_every_pair: true, ..p };
        for (par, be) in [(Parallelism::AllThreads, "cpu"), (Parallelism::Sequential, "cpu-1thread")].into_iter().filter(|_| label == "pal") {
            let ms = r.time("pal_refine_every_pair_sequence", json!({"w": w, "h": h, "rsz": 25, "npts": 6, "pairs": pairs}), be, b.reps_for(pairs).min(5), || {
                register_sequence(&views, &every, par, &mut |_| ControlFlow::Continue(())).map(|_| ())
            });
            if let Some(ms) = ms {
                r.record("pal_refine_every_pair_pairs_per_s", json!({"w": w, "h": h, "rsz": 25, "npts": 6}), be, json!((1000.0 * pairs / ms).round()));
            }
        }
        if label == "pal" {
            // Exhaustive registration of the same pairs: evaluations and time.
            let ex = StitchParams { register: RegisterParams { method: SearchMethod::Exhaustive, ..reg }, quality: false, ..Default::default() };
            let short = &views[..views.len().min(5)];
            let mut evals = 0;
            let ms = r.time("pal_exhaustive_registration_sequence", json!({"rsz": 25, "npts": 6, "search_radius": 32}), "cpu", 1, || {
                let (recs, _) = register_sequence(short, &ex, Parallelism::AllThreads, &mut |_| ControlFlow::Continue(()))?;
                evals = recs.iter().map(|f| f.evaluations).sum::<u64>();
                Ok::<_, tessera::Error>(())
            });
            let n = (short.len() - 1) as f64;
            if let Some(ms) = ms {
                r.record("pal_exhaustive_registration_ms_per_pair", json!({"rsz": 25, "npts": 6}), "cpu", json!(ms / n));
                r.record("pal_exhaustive_ncc_evaluations_per_pair", json!({"rsz": 25, "npts": 6, "search_radius": 32}), "cpu", json!((evals as f64 / n).round()));
            }
        }
    }

    // The cost of closing loops: a long sweep that comes back over itself (the demo path,
    // 300 PAL frames: 17 loops), registered with and without the global solve.
    let frames = if b.quick { 120 } else { 300 };
    let seq = default_sequence_sized(frames, (720, 576), 1)?;
    let luma: Vec<Image<u8>> = seq.frames.iter().map(|f| f.convert()).collect();
    let views: Vec<AnyView<'_>> = luma.iter().map(|f| AnyView::U8(f.view())).collect();
    // Interleaved, so the ratio (`_flatness`: with over without) is the solve's cost.
    let cases: Vec<StitchParams> = [false, true].map(|close_loops| StitchParams { quality: false, close_loops, ..Default::default() }).into();
    let params: Vec<_> = cases.iter().map(|p| json!({"w": 720, "h": 576, "frames": frames, "close_loops": p.close_loops})).collect();
    let mut loops = [0; 2];
    let medians = r.time_interleaved("pal_long_sweep_registration", &params, "cpu", |k| {
        let (recs, _) = register_sequence(&views, &cases[k], Parallelism::AllThreads, &mut |_| ControlFlow::Continue(()))?;
        loops[k] = recs.iter().filter(|f| f.loop_closure.is_some()).count();
        Ok::<_, tessera::Error>(())
    });
    for (k, p) in params.iter().enumerate() {
        if let Some(ms) = medians.as_ref().map(|m| m[k]) {
            r.record("pal_long_sweep_pairs_per_s", p.clone(), "cpu", json!((1000.0 * (frames - 1) as f64 / ms).round()));
            r.record("pal_long_sweep_loops_kept", p.clone(), "cpu", json!(loops[k]));
        }
    }
    // The windows the long sweep's run planned: this turning path keeps them short.
    if r.wants("pal_long_sweep_windows") {
        r.record("pal_long_sweep_windows", params[1].clone(), "cpu", planned_windows(&views, &cases[1])?);
    }
    // Scaling on a long run: the 31-frame run above is mostly its first windows (1, 4, 8 and
    // 16 frames, fewer pairs than many cores have), where a long run plans its windows as
    // the path allows. The GPU suite's stitch (1 000 PAL frames, NPTS 8, rsz 31, `gpu
    // gpu_stitch_pal`) on pools of 1, 2, 4, ... threads up to the cores: the registration
    // with the engine's stage times (a pair's mean time, the stage's efficiency, the share
    // of the wall time outside it, the windows' mean length, the share of keyframe links
    // refined in the stage), the whole stitch, and its composite alone.
    if r.wants("pal_stitch_scaling") {
        let frames = if b.quick { 40 } else { 1000 };
        let (luma, p) = super::gpu::pal_stitch_case(frames)?;
        let views: Vec<AnyView<'_>> = luma.iter().map(|f| AnyView::U8(f.view())).collect();
        let pairs = (frames - 1) as f64;
        let (records, _) = register_sequence(&views, &p, Parallelism::AllThreads, &mut |_| ControlFlow::Continue(()))?;
        let positions: Vec<_> = records.iter().map(|f| f.position).collect();
        let round = |v: f64, digits: i32| (v * 10f64.powi(digits)).round() / 10f64.powi(digits);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut by_threads = serde_json::Map::new();
        for threads in (0..).map(|k| 1usize << k).take_while(|&t| t <= cores.max(2)) {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().map_err(|e| anyhow::anyhow!("thread pool: {e}"))?;
            // The three in rounds, each round timing all: a shared machine's drift falls on all.
            let params: Vec<_> = ["registration", "stitch", "composite"].iter().map(|part| json!({"w": 720, "h": 576, "frames": frames, "rsz": 31, "npts": 8, "threads": threads, "part": part})).collect();
            let stages = StageTimes::default();
            let medians = r.time_interleaved_tagged("pal_stitch_scaling", &params, &json!({"threads": threads}), "cpu", |k| {
                let go = &mut |_| ControlFlow::Continue(());
                pool.install(|| match k {
                    0 => register_frames_timed(&InMemory(&views), &p, Parallelism::AllThreads, go, &stages).map(|_| ()),
                    1 => stitch_frames(&InMemory(&views), &p, Parallelism::AllThreads, go).map(|_| ()),
                    // The composite alone, as the stitch pastes: batches of frames on the pool.
                    _ => {
                        let mut canvas = Compositor::new(&views[0], &positions, p.blend)?.on(Parallelism::AllThreads);
                        let placed: Vec<(usize, AnyView<'_>)> = (0..views.len()).filter(|&i| positions[i].is_some()).map(|i| (i, views[i])).collect();
                        for batch in placed.chunks(canvas.batch().max(1)) {
                            canvas.paste_many(batch)?;
                        }
                        canvas.finish();
                        Ok(())
                    }
                })
            });
            let Some(&[reg_ms, stitch_ms, composite_ms]) = medians.as_deref() else { continue };
            let (Some(pair_ns), Some(efficiency), Some(outside)) = (stages.mean_pair_ns(), stages.stage_efficiency(threads), stages.serial_fraction()) else { continue };
            by_threads.insert(
                threads.to_string(),
                json!({
                    "stitch_pairs_per_s": round(1000.0 * pairs / stitch_ms, 0),
                    "registration_pairs_per_s": round(1000.0 * pairs / reg_ms, 0),
                    "composite_ms": round(composite_ms, 2),
                    "pair_ms": round(pair_ns / 1e6, 3),
                    "stage_efficiency": round(efficiency, 3),
                    "outside_stage": round(outside, 3),
                    "mean_window": stages.mean_window().map(|w| round(w, 1)),
                    // The share of the keyframes' link refinements made in the parallel
                    // stage rather than on the run's thread.
                    "keyframe_links_ahead": match stages.keyframe_links() {
                        (0, 0) => None,
                        (ahead, on_run) => Some(round(ahead as f64 / (ahead + on_run) as f64, 3)),
                    },
                }),
            );
        }
        if !by_threads.is_empty() {
            r.record("pal_stitch_scaling_breakdown", json!({"w": 720, "h": 576, "frames": frames, "rsz": 31, "npts": 8, "by": "threads"}), "cpu", serde_json::Value::Object(by_threads));
        }
    }

    // The cost of the similarity model: the demo's PAL sweep (no roll), registered with the
    // translation model and with the default similarity, interleaved; then a PAL sweep that
    // rolls half a degree per frame, which only the similarity model follows.
    let frames = if b.quick { 9 } else { 31 };
    let seq = luma_sequence(frames, 720, 576)?;
    let views: Vec<AnyView<'_>> = seq.iter().map(|f| AnyView::U8(f.view())).collect();
    let cases: Vec<StitchParams> = [Motion::Translation, Motion::Similarity].map(|motion| StitchParams { register: RegisterParams { motion, ..Default::default() }, quality: false, ..Default::default() }).into();
    let params: Vec<_> = cases.iter().map(|p| json!({"w": 720, "h": 576, "frames": frames, "motion": format!("{:?}", p.register.motion).to_lowercase(), "roll_deg_per_frame": 0})).collect();
    let medians = r.time_interleaved("pal_motion_registration", &params, "cpu", |k| register_sequence(&views, &cases[k], Parallelism::AllThreads, &mut |_| ControlFlow::Continue(())).map(|_| ()));
    for (k, p) in params.iter().enumerate() {
        if let Some(ms) = medians.as_ref().map(|m| m[k]) {
            r.record("pal_motion_pairs_per_s", p.clone(), "cpu", json!((1000.0 * (frames - 1) as f64 / ms).round()));
        }
    }
    let (rolled, truth) = if r.wants("pal_rolling_registration") { rolling_sequence(frames, 0.5)? } else { (Vec::new(), Vec::new()) };
    let views: Vec<AnyView<'_>> = rolled.iter().map(|f| AnyView::U8(f.view())).collect();
    let p = StitchParams { quality: false, ..Default::default() };
    for (par, be) in [(Parallelism::AllThreads, "cpu"), (Parallelism::Sequential, "cpu-1thread")].into_iter().filter(|_| !views.is_empty()) {
        let params = json!({"w": 720, "h": 576, "frames": frames, "motion": "similarity", "roll_deg_per_frame": 0.5});
        let mut error = (0.0, 0usize);
        let ms = r.time("pal_rolling_registration", params.clone(), be, b.reps_for(frames as f64).min(5), || {
            let (recs, _) = register_sequence(&views, &p, par, &mut |_| ControlFlow::Continue(()))?;
            let c = (359.5, 287.5);
            let centre_errors: Vec<f64> = recs.iter().filter_map(|f| f.pose().map(|q| (q.apply(c), truth[f.index].apply(c)))).map(|(a, b)| (a.0 - b.0).hypot(a.1 - b.1)).collect();
            error = (centre_errors.iter().sum::<f64>() / centre_errors.len().max(1) as f64, centre_errors.len());
            Ok::<_, tessera::Error>(())
        });
        if let Some(ms) = ms {
            r.record("pal_rolling_pairs_per_s", params.clone(), be, json!((1000.0 * (frames - 1) as f64 / ms).round()));
        }
        r.record("pal_rolling_mean_centre_error_px", params, be, json!({"mean": error.0, "registered": error.1}));
    }

    // A steady sweep (the rolling path without the roll: a stage's constant speed), on which
    // the predictions hold and the windows grow to their largest: pairs per second on one
    // thread and all, and the windows' mean length (module `window`).
    let steady_frames = if b.quick { 9 } else { 101 };
    let asked = ["pal_steady_sweep_registration", "pal_steady_sweep_windows"].iter().any(|name| r.wants(name));
    let (steady, _) = if asked { rolling_sequence(steady_frames, 0.0)? } else { (Vec::new(), Vec::new()) };
    let views: Vec<AnyView<'_>> = steady.iter().map(|f| AnyView::U8(f.view())).collect();
    let params = json!({"w": 720, "h": 576, "frames": steady_frames, "step_px": [3, 1]});
    for (par, be) in [(Parallelism::AllThreads, "cpu"), (Parallelism::Sequential, "cpu-1thread")].into_iter().filter(|_| !views.is_empty()) {
        let ms = r.time("pal_steady_sweep_registration", params.clone(), be, b.reps_for(steady_frames as f64).min(5), || {
            register_sequence(&views, &p, par, &mut |_| ControlFlow::Continue(())).map(|_| ())
        });
        if let Some(ms) = ms {
            r.record("pal_steady_sweep_pairs_per_s", params.clone(), be, json!((1000.0 * (steady_frames - 1) as f64 / ms).round()));
        }
    }
    if !views.is_empty() && r.wants("pal_steady_sweep_windows") {
        r.record("pal_steady_sweep_windows", params, "cpu", planned_windows(&views, &p)?);
    }

    // Faint footage (the rolling path without the roll, contrast 0.3 and noise 6): the cost
    // of the whole-overlap stages, against the same run without them.
    let (faint, truth) = if r.wants("pal_faint_registration") { faint_sequence(frames)? } else { (Vec::new(), Vec::new()) };
    let views: Vec<AnyView<'_>> = faint.iter().map(|f| AnyView::U8(f.view())).collect();
    for whole_overlap in [true, false].into_iter().filter(|_| !views.is_empty()) {
        let p = StitchParams { quality: false, whole_overlap, ..Default::default() };
        let params = json!({"w": 720, "h": 576, "frames": frames, "contrast": 0.3, "noise": 6.0, "whole_overlap": whole_overlap});
        let mut outcome = json!(null);
        let ms = r.time("pal_faint_registration", params.clone(), "cpu-1thread", b.reps_for(frames as f64).min(5), || {
            let (recs, _) = register_sequence(&views, &p, Parallelism::Sequential, &mut |_| ControlFlow::Continue(()))?;
            let errors: Vec<f64> = recs.iter().filter_map(|f| f.position.map(|q| (q.0 - truth[f.index].0).hypot(q.1 - truth[f.index].1))).collect();
            let phase = recs.iter().filter(|f| f.phase_significance.is_some()).count();
            outcome = json!({"mean_error_px": errors.iter().sum::<f64>() / errors.len().max(1) as f64, "max_error_px": errors.iter().cloned().fold(0.0, f64::max), "registered": errors.len(), "by_phase_peak": phase});
            Ok::<_, tessera::Error>(())
        });
        if let Some(ms) = ms {
            r.record("pal_faint_pairs_per_s", params.clone(), "cpu-1thread", json!((1000.0 * (frames - 1) as f64 / ms).round()));
        }
        r.record("pal_faint_outcome", params, "cpu-1thread", outcome);
    }

    // Time against template size, PAL, NPTS 6, radius 32.
    let seq = luma_sequence(if b.quick { 5 } else { 11 }, 720, 576)?;
    let views: Vec<AnyView<'_>> = seq.iter().map(|f| AnyView::U8(f.view())).collect();
    let n = (views.len() - 1) as f64;
    for rsz in [25usize, 31, 63, 95, 127, 191, 255] {
        let p = StitchParams { register: RegisterParams { rsz, ..Default::default() }, quality: false, ..Default::default() };
        let params = json!({"w": 720, "h": 576, "rsz": rsz, "npts": 6, "search_radius": 32, "pairs": n});
        let mut evals = 0;
        let ms = r.time("pal_template_size_curve_sequence", params.clone(), "cpu", b.reps_for(n * rsz as f64 / 10.0).min(5), || {
            let (recs, _) = register_sequence(&views, &p, Parallelism::AllThreads, &mut |_| ControlFlow::Continue(()))?;
            evals = recs.iter().map(|f| f.evaluations).sum::<u64>();
            Ok::<_, tessera::Error>(())
        });
        if let Some(ms) = ms {
            r.record("pal_template_size_curve_per_pair", params.clone(), "cpu", json!({"ms": ms / n, "evaluations": (evals as f64 / n).round()}));
        }
    }

    // One template, exhaustive over +-s, on blurred noise (as the OpenCV anchor: a PAL frame
    // of uniform noise blurred, the template at the centre, the search region cut around it).
    let pal = super::filters::noise_u8(720, 576, 7);
    let mut a = Image::<u8>::new(720, 576)?;
    let mut blurred = Image::<u8>::new(720, 576)?;
    mean_filter(pal.view(), a.view_mut(), &BoxParams::square(3, Border::Reflect101), Parallelism::Sequential)?;
    mean_filter(a.view(), blurred.view_mut(), &BoxParams::square(3, Border::Reflect101), Parallelism::Sequential)?;
    let mut cache = SearchCache::new();
    for t in [25usize, 31, 63, 95, 127, 255] {
        for s in [16usize, 32] {
            let (y0, x0) = ((288 - t / 2).saturating_sub(s), (360 - t / 2).saturating_sub(s));
            let region = blurred.view().crop(x0, y0, t + 2 * s, t + 2 * s)?;
            let tpl_view = blurred.view().crop(360 - t / 2, 288 - t / 2, t, t)?;
            let start = ((360 - t / 2 - x0) as isize, (288 - t / 2 - y0) as isize);
            let p = SearchParams { radius: s, subpixel: false, accept: None };
            let params = json!({"template": t, "search": s});
            // Everything per call, as matchTemplate does: template statistics, the region's
            // integral images, every position.
            r.time("ncc_exhaustive_one_template", params.clone(), "cpu-1thread", b.reps_for((t * t * s * s) as f64 * 4e-6), || {
                let tpl = Template::new(tpl_view)?;
                let frame = SearchFrame::new(region)?;
                exhaustive_search(&frame, &tpl, start, &p, &mut cache).map(|_| ())
            });
            let lp = SearchParams { accept: Some(0.85), ..p };
            r.time("ncc_log_one_template", params, "cpu-1thread", b.reps_for(0.05), || {
                let tpl = Template::new(tpl_view)?;
                let frame = SearchFrame::new(region)?;
                log_search(&frame, &tpl, start, &lp, &mut cache).map(|_| ())
            });
        }
    }
    Ok(())
}
