//! `tessera stitch --follow` end to end: frames written into a directory while the run
//! follows it, ended by SIGINT or the stop file; names on standard input ended by EOF; a
//! file written in two halves; bad input. The final panorama and report must be those of
//! a batch run on the same frames. The latency benchmark is an ignored test.

use crate::common;

use common::tessera;
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tessera-follow-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("watch")).unwrap();
    d
}

fn report(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `frames` frames of `w x h` cut from `source` by `synth-seq` into `d/src`, their paths.
fn sequence(d: &Path, source: &Path, frames: usize, (w, h): (usize, usize)) -> Vec<PathBuf> {
    let src = d.join("src");
    let o = tessera()
        .arg("synth-seq")
        .arg(source)
        .arg("-o")
        .arg(&src)
        .args(["--frames", &frames.to_string(), "--width", &w.to_string(), "--height", &h.to_string(), "--noise", "3", "--blur", "1", "--max-step", "2.5"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (0..frames).map(|i| src.join(format!("frame_{i:04}.png"))).collect()
}

fn tsukuba_sequence(d: &Path, frames: usize) -> Vec<PathBuf> {
    sequence(d, &common::shared_data().join("stereo/tsukuba/left.png"), frames, (200, 160))
}

/// `tessera stitch --follow INPUT` writing `d/live.png` and `d/live.json`.
/// A live run over `watch` in a fresh directory `name`, with `frames` Tsukuba frames ready
/// to be written there: the directory, the frames, the watched directory, the run.
fn live(name: &str, frames: usize, extra: &[&str]) -> (PathBuf, Vec<PathBuf>, PathBuf, Child) {
    let d = temp_dir(name);
    let frames = tsukuba_sequence(&d, frames);
    let watch = d.join("watch");
    let child = follow(&d, &watch, extra, Stdio::null());
    (d, frames, watch, child)
}

fn follow(d: &Path, input: &Path, extra: &[&str], stdin: Stdio) -> Child {
    tessera()
        .args(["stitch", "--backend", "cpu", "--follow"])
        .arg(input)
        .arg("-o")
        .arg(d.join("live.png"))
        .arg("--report")
        .arg(d.join("live.json"))
        .args(extra)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn finished(child: Child) -> Output {
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    o
}

/// The batch run on `inputs`, writing `d/batch.png` and `d/batch.json`.
fn batch(d: &Path, inputs: &[PathBuf]) -> Value {
    let o = tessera().args(["stitch", "--backend", "cpu"]).args(inputs).arg("-o").arg(d.join("batch.png")).arg("--report").arg(d.join("batch.json")).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    report(&d.join("batch.json"))
}

/// The live run's final report is the batch run's but for `run`, and its panorama is the
/// batch one, byte for byte.
fn same_as_batch(d: &Path, live: &Value, batch: &Value) {
    for key in ["frames", "panorama", "quality", "params"] {
        assert_eq!(live[key], batch[key], "{key}");
    }
    assert_eq!(live["run"]["live"]["final"], true);
    assert!(std::fs::read(d.join("live.png")).unwrap() == std::fs::read(d.join("batch.png")).unwrap(), "the panoramas differ");
}

/// Copies `frames` into `dir` every `every`.
fn write_frames(frames: &[PathBuf], dir: &Path, every: Duration) {
    for f in frames {
        std::fs::copy(f, dir.join(f.file_name().unwrap())).unwrap();
        std::thread::sleep(every);
    }
}

/// Names `frames` on `child`'s standard input, one every `every`, then ends the input.
fn name_frames(child: &mut Child, frames: &[PathBuf], every: Duration) {
    let mut stdin = child.stdin.take().unwrap();
    for f in frames {
        writeln!(stdin, "{}", f.display()).unwrap();
        std::thread::sleep(every);
    }
}

fn signal(child: &Child, name: &str) {
    let ok = Command::new("kill").args([&format!("-{name}"), &child.id().to_string()]).status().unwrap().success();
    assert!(ok, "kill -{name} failed");
}

#[test]
fn sigint_ends_the_run_with_every_frame_written_and_the_batch_panorama() {
    let (d, frames, watch, child) = live("sigint", 14, &["--update-every", "4"]);
    write_frames(&frames[..10], &watch, Duration::from_millis(40));
    // An intermediate report, with chained positions, before the end.
    let t = Instant::now();
    while !d.join("live.json").exists() && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let early = report(&d.join("live.json"));
    assert_eq!((&early["run"]["live"]["final"], &early["run"]["live"]["positions"]), (&Value::Bool(false), &Value::from("chained")));
    assert!(early["frames"].as_array().unwrap().len() >= 4);
    // The signal right after the last frame: the last files are taken in as they settle.
    write_frames(&frames[10..], &watch, Duration::ZERO);
    signal(&child, "INT");
    let o = finished(child);
    assert!(String::from_utf8_lossy(&o.stderr).contains("input ended (signal)"));
    let live = report(&d.join("live.json"));
    assert_eq!(live["run"]["live"]["ended_by"], "signal");
    assert_eq!(live["quality"]["frames_ok"], 14);
    same_as_batch(&d, &live, &batch(&d, &[watch]));
}

#[test]
fn the_intermediate_panorama_is_the_composite_of_the_frames_so_far() {
    // Without the global solve the final positions are the chained ones, so once every
    // frame is in, the panorama pasted frame by frame (its canvas planned anew as the
    // sweep outgrows it) must be the final one, composited from scratch, byte for byte.
    let (d, frames, watch, child) = live("preview", 12, &["--update-every", "1", "--no-close-loops", "--blend", "feather"]);
    write_frames(&frames, &watch, Duration::from_millis(30));
    let t = Instant::now();
    let listed = |r: &Value| r["frames"].as_array().map_or(0, Vec::len);
    while std::fs::read_to_string(d.join("live.json")).ok().and_then(|s| serde_json::from_str::<Value>(&s).ok()).map_or(0, |r| listed(&r)) < 12 {
        assert!(t.elapsed() < Duration::from_secs(20), "the report never listed every frame");
        std::thread::sleep(Duration::from_millis(20));
    }
    let intermediate = std::fs::read(d.join("live.png")).unwrap();
    let early = report(&d.join("live.json"));
    signal(&child, "TERM");
    finished(child);
    let last = report(&d.join("live.json"));
    assert_eq!((&early["run"]["live"]["final"], &last["run"]["live"]["ended_by"]), (&Value::Bool(false), &Value::from("signal")));
    assert_eq!((&early["frames"], &early["panorama"]), (&last["frames"], &last["panorama"]));
    assert!(intermediate == std::fs::read(d.join("live.png")).unwrap(), "the intermediate panorama differs from the final one");
}

#[test]
fn names_on_standard_input_until_its_end_with_an_unreadable_file_skipped() {
    let d = temp_dir("stdin");
    let mut frames = tsukuba_sequence(&d, 10);
    let bad = d.join("src/broken.png");
    std::fs::write(&bad, b"not a PNG").unwrap();
    frames.insert(5, bad);
    let mut child = follow(&d, Path::new("-"), &["--update-seconds", "0.2"], Stdio::piped());
    name_frames(&mut child, &frames, Duration::from_millis(30));
    let o = finished(child);
    assert!(String::from_utf8_lossy(&o.stderr).contains("input ended (end of input)"));
    let live = report(&d.join("live.json"));
    let skipped = &live["frames"][5];
    assert_eq!(skipped["status"], "skipped");
    assert!(skipped["reason"].as_str().unwrap().contains("unreadable"), "{skipped}");
    same_as_batch(&d, &live, &batch(&d, &frames));
}

#[test]
fn the_stop_file_ends_the_run_and_a_file_written_in_two_halves_waits_for_its_second() {
    let d = temp_dir("stop");
    let frames = tsukuba_sequence(&d, 8);
    let watch = d.join("watch");
    // Listings 400 ms apart: the 50 ms pause between the halves is never seen as the end
    // (the margin is for a loaded machine that stretches the pause).
    let child = follow(&d, &watch, &["--poll-ms", "400", "--stop-file", "STOP"], Stdio::null());
    write_frames(&frames[..4], &watch, Duration::from_millis(20));
    let bytes = std::fs::read(&frames[4]).unwrap();
    let mut half = std::fs::File::create(watch.join("frame_0004.png")).unwrap();
    half.write_all(&bytes[..bytes.len() / 2]).unwrap();
    half.flush().unwrap();
    std::thread::sleep(Duration::from_millis(50));
    half.write_all(&bytes[bytes.len() / 2..]).unwrap();
    drop(half);
    write_frames(&frames[5..], &watch, Duration::from_millis(20));
    std::thread::sleep(Duration::from_millis(500));
    std::fs::write(watch.join("STOP"), b"").unwrap();
    let o = finished(child);
    assert!(String::from_utf8_lossy(&o.stderr).contains("input ended (stop file)"));
    let live = report(&d.join("live.json"));
    assert_eq!(live["quality"]["frames_ok"], 8, "{}", live["frames"]);
    same_as_batch(&d, &live, &batch(&d, std::slice::from_ref(&watch)));
    // A stop file left over would end the next run at once: that is an error.
    let o = tessera().args(["stitch", "--stop-file", "STOP", "--follow"]).arg(&watch).output().unwrap();
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("remove it first"));
}

#[test]
fn a_frame_stalled_half_written_or_growing_slowly_is_read_once_complete() {
    // Listings 50 ms apart (the default): both files look finished to the watcher before
    // they are, fail to decode, and are read again as they grow.
    let (d, frames, watch, child) = live("slow", 8, &["--stop-file", "STOP"]);
    write_frames(&frames[..3], &watch, Duration::from_millis(20));
    let write_in = |i: usize, parts: usize, pause: Duration| {
        let bytes = std::fs::read(&frames[i]).unwrap();
        let mut f = std::fs::File::create(watch.join(frames[i].file_name().unwrap())).unwrap();
        for k in 0..parts {
            f.write_all(&bytes[bytes.len() * k / parts..bytes.len() * (k + 1) / parts]).unwrap();
            f.flush().unwrap();
            if k + 1 < parts {
                std::thread::sleep(pause);
            }
        }
    };
    // Half of frame 3, a 0.4 s stall, the rest; frame 4 appended in ten parts over 2 s.
    write_in(3, 2, Duration::from_millis(400));
    write_in(4, 10, Duration::from_millis(220));
    write_frames(&frames[5..], &watch, Duration::from_millis(20));
    std::thread::sleep(Duration::from_millis(500));
    std::fs::write(watch.join("STOP"), b"").unwrap();
    finished(child);
    let live = report(&d.join("live.json"));
    assert_eq!(live["quality"]["frames_ok"], 8, "{}", live["frames"]);
    same_as_batch(&d, &live, &batch(&d, std::slice::from_ref(&watch)));
}

#[test]
fn a_frame_deleted_after_it_registered_is_left_out_of_the_panorama_and_named() {
    let d = temp_dir("deleted");
    let frames = tsukuba_sequence(&d, 6);
    // No frame cache: the final panorama reads every frame again.
    let mut child = follow(&d, Path::new("-"), &["--frame-cache", "0", "--update-every", "1"], Stdio::piped());
    let mut stdin = child.stdin.take().unwrap();
    for f in &frames {
        writeln!(stdin, "{}", f.display()).unwrap();
    }
    stdin.flush().unwrap();
    let t = Instant::now();
    let registered = |r: &Value| r["frames"].as_array().map_or(0, |f| f.iter().filter(|f| f["status"] == "ok").count());
    while std::fs::read_to_string(d.join("live.json")).ok().and_then(|s| serde_json::from_str::<Value>(&s).ok()).map_or(0, |r| registered(&r)) < 6 {
        assert!(t.elapsed() < Duration::from_secs(30), "the frames never registered");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::remove_file(&frames[2]).unwrap();
    drop(stdin);
    let o = finished(child);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("frame 2") && err.contains("frame_0002.png") && err.contains("missing from the panorama"), "{err}");
    let live = report(&d.join("live.json"));
    assert_eq!(live["quality"]["frames_ok"], 6);
    let lost = &live["run"]["written"]["lost_frames"];
    assert_eq!(lost.as_array().map(Vec::len), Some(1), "{lost}");
    assert_eq!(lost[0]["index"], 2, "{lost}");
    assert!(d.join("live.png").exists());
}

/// A live sweep across a featureless band that never comes back: the frames past it start
/// an island of their own, and the live run ends with the batch run's islands, report and
/// panorama (which holds the larger island only).
#[test]
fn a_live_sweep_past_a_featureless_band_reports_the_batch_runs_islands() {
    use common::footage::{enlarged, flat_band_sweep, photo, save_frames};
    let d = temp_dir("islands");
    let (frames, _, _) = flat_band_sweep(&enlarged(&photo("cones"), 2.0), 7);
    let paths = save_frames(&frames, &d.join("src"));
    let mut child = follow(&d, Path::new("-"), &["--update-seconds", "0.2"], Stdio::piped());
    name_frames(&mut child, &paths, Duration::from_millis(20));
    finished(child);
    let live = report(&d.join("live.json"));
    let islands = live["islands"].as_array().unwrap();
    assert_eq!(islands.len(), 2, "{islands:?}");
    assert_eq!(islands.iter().filter(|i| i["in_panorama"] == false).count(), 1);
    assert!(live["frames"].as_array().unwrap().iter().any(|f| f["status"] == "island"));
    let batch = batch(&d, &paths);
    assert_eq!(live["islands"], batch["islands"]);
    same_as_batch(&d, &live, &batch);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bad_live_input_is_a_clear_error() {
    let d = temp_dir("bad");
    let cases: [(&[&str], &str); 8] = [
        (&["--follow", "/no/such/dir"], "no such directory"),
        (&["--follow", "Cargo.toml"], "not a directory"),
        (&["--follow", "-", "--report", "/no/such/dir/r.json"], "no such directory"),
        (&["--follow", "-", "a.png"], "cannot be used with"),
        (&["--follow", "-", "--grid", "2x2"], "cannot be used with"),
        (&["--update-every", "3"], "--follow"),
        (&["--follow", "-", "--update-every", "0"], "at least 1"),
        (&["--follow", "-", "--backend", "cuda"], "runs on the CPU"),
    ];
    for (args, want) in cases {
        let o = tessera().arg("stitch").args(args).arg("-o").arg(d.join("x.png")).stdin(Stdio::null()).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    // An input that ends before any frame.
    let o = tessera().args(["stitch", "--follow", "-", "-o"]).arg(d.join("x.png")).stdin(Stdio::null()).output().unwrap();
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("no frame arrived"));
}

/// The delay from a frame's arrival (its file complete in the directory) to its first
/// appearance in the report, at 25 frames per second with the report rewritten after
/// every frame: prints JSON. `cargo test --release -p tessera-cli --test cli -- --ignored --nocapture follow::`
#[test]
#[ignore]
fn latency_at_25_frames_per_second() {
    let d = temp_dir("latency");
    let n = 150;
    let frames = sequence(&d, &Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/retina.jpg"), n, (360, 288));
    let watch = d.join("watch");
    let child = follow(&d, &watch, &["--update-every", "1"], Stdio::null());
    let rep = d.join("live.json");
    let arrived = std::sync::Mutex::new(vec![None; n]);
    let seen = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let t = Instant::now();
            for (i, f) in frames.iter().enumerate() {
                // Written aside and renamed in: the frame is complete when it appears.
                let part = watch.join(format!(".part-{i}"));
                std::fs::copy(f, &part).unwrap();
                std::fs::rename(&part, watch.join(f.file_name().unwrap())).unwrap();
                arrived.lock().unwrap()[i] = Some(Instant::now());
                std::thread::sleep((t + Duration::from_millis(40 * (i as u64 + 1))).saturating_duration_since(Instant::now()));
            }
        });
        let mut seen = vec![None; n];
        let mut last = None;
        let t = Instant::now();
        while seen.iter().any(Option::is_none) && t.elapsed() < Duration::from_secs(30) {
            let stamp = std::fs::metadata(&rep).and_then(|m| m.modified()).ok();
            if stamp.is_some() && stamp != last {
                last = stamp;
                let now = Instant::now();
                if let Ok(r) = serde_json::from_str::<Value>(&std::fs::read_to_string(&rep).unwrap_or_default()) {
                    for f in r["frames"].as_array().into_iter().flatten() {
                        seen[f["index"].as_u64().unwrap() as usize].get_or_insert(now);
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        writer.join().unwrap();
        seen
    });
    signal(&child, "INT");
    finished(child);
    let arrived = arrived.into_inner().unwrap();
    let missing = seen.iter().filter(|s| s.is_none()).count();
    assert_eq!(missing, 0, "frames never seen in an intermediate report");
    let mut ms: Vec<f64> = arrived.iter().zip(&seen).map(|(a, s)| (s.unwrap() - a.unwrap()).as_secs_f64() * 1e3).collect();
    ms.sort_by(f64::total_cmp);
    let ok = report(&rep)["quality"]["frames_ok"].clone();
    println!(
        "{}",
        serde_json::json!({"frames": n, "fps": 25, "frame_size": "360x288 RGB", "update_every": 1, "poll_ms": 50, "frames_ok": ok,
                           "latency_ms": {"median": (ms[n / 2] * 10.0).round() / 10.0, "p90": (ms[n * 9 / 10] * 10.0).round() / 10.0, "worst": (ms[n - 1] * 10.0).round() / 10.0}})
    );
}
