//! `tessera stitch` and `tessera synth-seq` end to end: the default input, directories,
//! globs, multi-page TIFF stacks, the JSON report, and degenerate inputs.

use crate::common;
use crate::repo;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;
use tessera::{io, AnyImage, Image, Rgba8};
use common::tessera;

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tessera-stitch-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run(args: &[&str], paths: &[&Path]) -> Output {
    let mut c = tessera();
    c.args(args).args(paths).args(["--backend", "cpu"]);
    c.output().unwrap()
}

fn report(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A 15-frame sequence of 200 x 160 frames cut from tsukuba by `synth-seq`.
fn sequence(name: &str) -> PathBuf {
    let d = temp_dir(name).join("frames");
    let src = common::shared_data().join("stereo/tsukuba/left.png");
    let o = tessera()
        .arg("synth-seq")
        .arg(&src)
        .arg("-o")
        .arg(&d)
        .args(["--frames", "15", "--width", "200", "--height", "160", "--noise", "3", "--blur", "1", "--max-step", "2.5"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    d
}

fn check_against_truth(rep: &Value, truth: &Value, skipped: &[usize]) {
    let frames = rep["frames"].as_array().unwrap();
    let want = truth["frames"].as_array().unwrap();
    assert_eq!(frames.len(), want.len());
    for (f, t) in frames.iter().zip(want) {
        let i = f["index"].as_u64().unwrap() as usize;
        if skipped.contains(&i) {
            assert_eq!(f["status"], "skipped", "{f}");
            assert!(f["reason"].as_str().unwrap().len() > 5);
            assert!(f["x"].is_null());
            continue;
        }
        assert_eq!(f["status"], "ok", "{f}");
        let (dx, dy) = (f["x"].as_f64().unwrap() - t["x"].as_f64().unwrap(), f["y"].as_f64().unwrap() - t["y"].as_f64().unwrap());
        assert!(dx.hypot(dy) < 0.3, "frame {i}: {f} vs {t}");
        for key in ["ncc", "vectors_used", "quality", "file"] {
            assert!(f.get(key).is_some(), "{key} missing");
        }
    }
}

#[test]
fn default_input_recovers_the_known_path() {
    let d = temp_dir("default");
    let (out, rep) = (d.join("pano.png"), d.join("report.json"));
    let o = run(&["stitch", "--frames", "12", "-o"], &[&out]);
    assert!(!o.status.success() || out.exists());
    let o = tessera().args(["stitch", "--frames", "12", "--backend", "cpu", "-o"]).arg(&out).arg("--report").arg(&rep).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("true x") && stdout.contains("position error against the truth"), "{stdout}");
    let r = report(&rep);
    let frames = r["frames"].as_array().unwrap();
    assert_eq!(frames.len(), 12);
    for f in frames {
        assert_eq!(f["status"], "ok");
        let e = (f["x"].as_f64().unwrap() - f["true_x"].as_f64().unwrap()).hypot(f["y"].as_f64().unwrap() - f["true_y"].as_f64().unwrap());
        assert!(e < 0.25, "{f}");
    }
    assert!(r["run"]["truth"]["mean_error_px"].as_f64().unwrap() < 0.25);
    let pano = io::load(&out).unwrap();
    assert_eq!(pano.size().0 as u64, r["panorama"]["width"].as_u64().unwrap());
    assert_eq!(pano.size().1 as u64, r["panorama"]["height"].as_u64().unwrap());
    // Adaptive acceptance keeps faint true matches too, so the mean is below cthresh.
    assert!(r["quality"]["mean_ncc"].as_f64().unwrap() > 0.7);
    assert_eq!(r["params"]["rsz"], 25);
    // The global solve's fields: a short sweep closes no loop, so every residual is 0.
    assert_eq!(r["params"]["close_loops"], true);
    for f in frames {
        assert_eq!((f["residual"].as_f64(), &f["loop_closure"]), (Some(0.0), &Value::Null), "{f}");
    }
    let o = tessera().args(["stitch", "--frames", "12", "--backend", "cpu", "--no-close-loops", "-o"]).arg(&out).arg("--report").arg(&rep).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let chained = report(&rep);
    assert_eq!(chained["params"]["close_loops"], false);
    for (f, g) in frames.iter().zip(chained["frames"].as_array().unwrap()) {
        assert_eq!((&f["x"], &f["y"], &g["residual"]), (&g["x"], &g["y"], &Value::Null));
    }
    // The demo's templates agree: the whole overlap decides no pair (no phase match), and
    // switching it off moves a position by a few hundredths of a pixel at most (the
    // refinement of a pair that registered on fewer than half its templates: a window's
    // last frame, predicted four frames ahead).
    assert_eq!(r["params"]["whole_overlap"], true);
    // The demo does not zoom: no scale detected, none reported.
    assert_eq!(r["params"]["detect_zoom"], true);
    assert!(frames.iter().all(|f| f.get("scale").is_none()), "{frames:?}");
    assert_eq!(r["panorama"]["scale_fitted"], false);
    for f in frames.iter().skip(1) {
        assert_eq!((&f["accepted_by"], &f["phase_significance"]), (&Value::from("adaptive"), &Value::Null), "{f}");
    }
    let o = tessera().args(["stitch", "--frames", "12", "--backend", "cpu", "--no-whole-overlap", "-o"]).arg(&out).arg("--report").arg(&rep).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let templates_only = report(&rep);
    assert_eq!(templates_only["params"]["whole_overlap"], false);
    for (f, g) in frames.iter().zip(templates_only["frames"].as_array().unwrap()) {
        let moved = (f["x"].as_f64().unwrap() - g["x"].as_f64().unwrap()).hypot(f["y"].as_f64().unwrap() - g["y"].as_f64().unwrap());
        assert!(moved < 0.05 && g["status"] == "ok", "{f} {g}");
    }
    // Every pair refined on the whole overlap: positions move (by less than a tenth of a
    // pixel on the demo's clean frames) and stay as close to the truth.
    assert_eq!(r["params"]["refine_every_pair"], false);
    let o = tessera().args(["stitch", "--frames", "12", "--backend", "cpu", "--refine-every-pair", "-o"]).arg(&out).arg("--report").arg(&rep).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let refined = report(&rep);
    assert_eq!(refined["params"]["refine_every_pair"], true);
    let error = |f: &Value| (f["x"].as_f64().unwrap() - f["true_x"].as_f64().unwrap()).hypot(f["y"].as_f64().unwrap() - f["true_y"].as_f64().unwrap());
    let moved = frames.iter().zip(refined["frames"].as_array().unwrap()).filter(|(f, g)| (&f["x"], &f["y"]) != (&g["x"], &g["y"])).count();
    assert!(moved > 0);
    for (f, g) in frames.iter().zip(refined["frames"].as_array().unwrap()) {
        assert!((f["x"].as_f64().unwrap() - g["x"].as_f64().unwrap()).hypot(f["y"].as_f64().unwrap() - g["y"].as_f64().unwrap()) < 0.1, "{f} {g}");
        assert!(error(g) < 0.1, "{g}");
    }
}

#[test]
fn directory_glob_and_stack_give_the_same_positions() {
    let frames = sequence("inputs");
    let truth = report(&frames.join("truth.json"));
    let d = frames.parent().unwrap().to_path_buf();
    let rep = d.join("dir.json");
    let o = tessera().arg("stitch").arg(&frames).arg("-o").arg(d.join("a.png")).arg("--report").arg(&rep).args(["--blend", "feather"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let by_dir = report(&rep);
    check_against_truth(&by_dir, &truth, &[]);
    assert!(by_dir["frames"][3]["file"].as_str().unwrap().ends_with("frame_0003.png"));

    let rep = d.join("glob.json");
    let pattern = frames.join("frame_00*.png");
    let o = tessera().arg("stitch").arg(&pattern).arg("-o").arg(d.join("b.png")).arg("--report").arg(&rep).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let by_glob = report(&rep);
    for (f, g) in by_dir["frames"].as_array().unwrap().iter().zip(by_glob["frames"].as_array().unwrap()) {
        assert_eq!((&f["x"], &f["y"], &f["status"]), (&g["x"], &g["y"], &g["status"]));
    }

    let pages: Vec<AnyImage> = (0..15).map(|i| io::load(&frames.join(format!("frame_{i:04}.png"))).unwrap()).collect();
    let stack = d.join("stack.tif");
    io::write_tiff(&pages, &stack).unwrap();
    let rep = d.join("stack.json");
    let o = tessera().arg("stitch").arg(&stack).arg("-o").arg(d.join("c.tif")).arg("--report").arg(&rep).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    check_against_truth(&report(&rep), &truth, &[]);
}

#[test]
fn bad_frames_are_skipped_and_reported() {
    let frames = sequence("skips");
    let truth = report(&frames.join("truth.json"));
    let (w, h) = (200, 160);
    // A flat frame, a noise frame, a truncated file, a frame of another size and one of
    // another pixel type: each skipped with its reason, the run going on.
    io::save(&Image::filled(w, h, Rgba8::new(128, 128, 128, 255)).unwrap().into(), &frames.join("frame_0005.png")).unwrap();
    let whole = std::fs::read(frames.join("frame_0003.png")).unwrap();
    std::fs::write(frames.join("frame_0003.png"), &whole[..whole.len() / 3]).unwrap();
    io::save(&Image::filled(w + 1, h, Rgba8::new(9, 9, 9, 255)).unwrap().into(), &frames.join("frame_0011.png")).unwrap();
    io::save(&Image::<u16>::filled(w, h, 900).unwrap().into(), &frames.join("frame_0013.png")).unwrap();
    let mut s = 12345u64;
    let noise = Image::from_fn(w, h, |_, _| {
        s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let v = (s >> 56) as u8;
        Rgba8::new(v, v, v, 255)
    })
    .unwrap();
    io::save(&noise.into(), &frames.join("frame_0009.png")).unwrap();
    let d = frames.parent().unwrap();
    let rep = d.join("r.json");
    let o = tessera().arg("stitch").arg(&frames).arg("-o").arg(d.join("p.png")).arg("--report").arg(&rep).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    for (i, why) in [(3, "unreadable"), (5, "too few vectors"), (9, "too few vectors"), (11, "201x160"), (13, "u16")] {
        let line = stdout.lines().find(|l| l.starts_with(&format!("skipped frame {i} "))).unwrap_or_else(|| panic!("frame {i}: {stdout}"));
        assert!(line.contains(why), "{line}");
    }
    let r = report(&rep);
    check_against_truth(&r, &truth, &[3, 5, 9, 11, 13]);
    assert_eq!(r["quality"]["frames_skipped"], 5);
    assert_eq!(r["panorama"]["reference_frame"], 0);
}

#[test]
fn a_first_frame_that_matches_nothing_hands_the_reference_on() {
    let frames = sequence("first");
    let truth = report(&frames.join("truth.json"));
    let noise = |seed: u64| {
        let mut s = seed;
        let img = Image::from_fn(200, 160, |_, _| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let v = (s >> 56) as u8;
            Rgba8::new(v, v, v, 255)
        });
        AnyImage::Rgba8(img.unwrap())
    };
    io::save(&noise(99), &frames.join("frame_0000.png")).unwrap();
    let d = frames.parent().unwrap();
    let rep = d.join("r.json");
    let o = tessera().arg("stitch").arg(&frames).arg("-o").arg(d.join("p.png")).arg("--report").arg(&rep).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("reference frame: 1"), "{}", String::from_utf8_lossy(&o.stdout));
    let r = report(&rep);
    assert_eq!(r["panorama"]["reference_frame"], 1);
    let f = &r["frames"].as_array().unwrap()[0];
    assert!(f["status"] == "skipped" && f["reason"].as_str().unwrap().contains("frame 1"), "{f}");
    // Positions are relative to frame 1 now.
    let t = truth["frames"].as_array().unwrap();
    let t1 = (t[1]["x"].as_f64().unwrap(), t[1]["y"].as_f64().unwrap());
    for (f, t) in r["frames"].as_array().unwrap().iter().zip(t).skip(1) {
        let dx = f["x"].as_f64().unwrap() - (t["x"].as_f64().unwrap() - t1.0);
        let dy = f["y"].as_f64().unwrap() - (t["y"].as_f64().unwrap() - t1.1);
        assert!(dx.hypot(dy) < 0.5, "{f} vs {t}");
    }
    // Noise everywhere: nothing registers, which is an error, not a one-frame panorama.
    for i in 1..15 {
        io::save(&noise(100 + i), &frames.join(format!("frame_{i:04}.png"))).unwrap();
    }
    let o = tessera().arg("stitch").arg(&frames).arg("-o").arg(d.join("q.png")).output().unwrap();
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("no two of the 15 frames"), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn memory_does_not_grow_with_the_sequence() {
    // 60 frames against 6, no frame cache: the peak stays within a few frames' worth.
    let src = common::shared_data().join("stereo/cones/im2.png");
    let d = temp_dir("memory");
    let o = tessera().arg("synth-seq").arg(&src).arg("-o").arg(d.join("long")).args(["--frames", "60", "--width", "320", "--height", "256", "--max-step", "1"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::create_dir_all(d.join("short")).unwrap();
    for i in 0..6 {
        let name = format!("frame_{i:04}.png");
        std::fs::copy(d.join("long").join(&name), d.join("short").join(&name)).unwrap();
    }
    let peak = |dir: &str| {
        let rep = d.join(format!("{dir}.json"));
        let o = tessera().arg("stitch").arg(d.join(dir)).arg("-o").arg(d.join(format!("{dir}.png"))).args(["--frame-cache", "0", "--report"]).arg(&rep).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let r = report(&rep);
        assert_eq!(r["quality"]["frames_skipped"], 0, "{dir}");
        r["run"]["peak_memory_mib"].as_f64().unwrap()
    };
    let (short, long) = (peak("short"), peak("long"));
    // 54 more RGBA frames of 320 x 256 would add 17 MiB if they were held.
    assert!(long < short + 6.0, "peak {long:.1} MiB for 60 frames, {short:.1} MiB for 6");
}

#[test]
fn degenerate_inputs_are_clear_errors() {
    let d = temp_dir("errors");
    let out = d.join("p.png");
    // Empty directory.
    let empty = d.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let o = run(&["stitch", "-o"], &[&out, &empty]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no image files"), "{}", String::from_utf8_lossy(&o.stderr));
    // A non-image file.
    let bad = d.join("notes.png");
    std::fs::write(&bad, b"this is not an image").unwrap();
    let good = d.join("good.png");
    io::save(&Image::<u8>::filled(64, 48, 9).unwrap().into(), &good).unwrap();
    let o = run(&["stitch", "-o"], &[&out, &good, &bad]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("notes.png"), "{}", String::from_utf8_lossy(&o.stderr));
    // Two frames of differing size: the second is skipped, nothing registers, and the error
    // names the file.
    let other = d.join("other.png");
    io::save(&Image::<u8>::filled(65, 48, 9).unwrap().into(), &other).unwrap();
    let o = run(&["stitch", "-o"], &[&out, &good, &other]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("frame 1") && err.contains("other.png"), "{err}");
    // A pattern that matches nothing, a missing file.
    let o = run(&["stitch", "-o"], &[&out, &d.join("nothing_*.png")]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("matches no file"));
    let o = run(&["stitch", "-o"], &[&out, &d.join("missing.png")]);
    assert!(!o.status.success());
    // A single frame is a panorama of itself.
    let o = run(&["stitch", "-o"], &[&out, &good]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(io::load(&out).unwrap().size(), (64, 48));
    // Bad parameters.
    let o = run(&["stitch", "--npts", "0", "-o"], &[&out, &good]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("npts"));
}

#[test]
fn float_frames_in_unit_range_register_with_the_scaled_default_threshold() {
    let frames = sequence("float");
    let truth = report(&frames.join("truth.json"));
    // The same frames as 32-bit float gray in [0, 1], as a TIFF stack.
    let pages: Vec<AnyImage> = (0..15)
        .map(|i| match io::load(&frames.join(format!("frame_{i:04}.png"))).unwrap() {
            AnyImage::Rgba8(img) => AnyImage::F32(img.map(|p| (0.299 * p.r as f32 + 0.587 * p.g as f32 + 0.114 * p.b as f32) / 255.0)),
            other => panic!("{other:?}"),
        })
        .collect();
    let d = frames.parent().unwrap();
    let stack = d.join("float.tif");
    io::write_tiff(&pages, &stack).unwrap();
    let rep = d.join("float.json");
    let o = tessera().arg("stitch").arg(&stack).arg("-o").arg(d.join("f.tif")).arg("--report").arg(&rep).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = report(&rep);
    check_against_truth(&r, &truth, &[]);
    assert!(r["params"]["min_variance"].as_f64().unwrap() < 1e-3);
    assert!(matches!(io::load(&d.join("f.tif")).unwrap(), AnyImage::F32(_)));
}

/// A sweep that rolls 1 degree per frame, written as PNG files: the default (similarity)
/// reports each frame's angle and places its centre where it belongs, and the panorama shows
/// the last frame turned into place; `--motion translation` (the original) cannot follow it.
#[test]
fn a_rolling_sweep_reports_angles_and_composites_turned_frames() {
    use common::footage::{render_posed, rolling, Conditions};
    use repo::photo;
    use tessera::stitch::Similarity;
    let d = temp_dir("rolling");
    let frames_dir = d.join("frames");
    std::fs::create_dir_all(&frames_dir).unwrap();
    let src = photo("camera");
    let poses = rolling(20, src.size(), (200, 160), 3.0, 1f64.to_radians(), 8);
    let frames = render_posed(&src, &poses, (200, 160), &Conditions::default(), 3);
    for (i, f) in frames.iter().enumerate() {
        io::save(&AnyImage::U8(f.clone()), &frames_dir.join(format!("f{i:02}.png"))).unwrap();
    }
    let truth: Vec<Similarity> = poses.iter().map(|q| poses[0].inverse().then(q)).collect();
    let (pano, rep) = (d.join("pano.png"), d.join("r.json"));
    let o = run(&["stitch", "-o", pano.to_str().unwrap(), "--report", rep.to_str().unwrap()], &[&frames_dir]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = report(&rep);
    assert_eq!(r["params"]["motion"], "similarity");
    let c = (99.5, 79.5);
    for (i, f) in r["frames"].as_array().unwrap().iter().enumerate() {
        assert_eq!(f["status"], "ok", "frame {i}: {f}");
        let got = Similarity { x: f["x"].as_f64().unwrap(), y: f["y"].as_f64().unwrap(), angle: f["angle"].as_f64().unwrap().to_radians(), scale: 1.0 };
        assert!((got.angle - truth[i].angle).abs().to_degrees() < 0.1, "frame {i}: {f}");
        let (a, b) = (got.apply(c), truth[i].apply(c));
        assert!((a.0 - b.0).hypot(a.1 - b.1) < 0.5, "frame {i}: centre {a:?} vs {b:?}");
    }
    // The last frame is pasted last: the panorama around its centre shows its pixels.
    let AnyImage::U8(img) = io::load(&pano).unwrap() else { panic!("8-bit panorama") };
    let origin = (r["panorama"]["origin_x"].as_f64().unwrap(), r["panorama"]["origin_y"].as_f64().unwrap());
    let last = truth[19];
    let mut diff = Vec::new();
    for (u, v) in [(100, 80), (60, 50), (150, 120), (30, 130)] {
        let p = last.apply((u as f64, v as f64));
        let (x, y) = ((p.0 - origin.0).round() as usize, (p.1 - origin.1).round() as usize);
        // The canvas pixel's centre lies within half a pixel of (u, v) in the frame.
        let nearby = (-1i64..=1).flat_map(|j| (-1i64..=1).map(move |i| (i, j))).map(|(i, j)| frames[19].at((u as i64 + i) as usize, (v as i64 + j) as usize) as i32);
        let (lo, hi) = nearby.fold((255, 0), |(l, h), q| (l.min(q), h.max(q)));
        let got = img.at(x, y) as i32;
        diff.push((got, lo, hi));
        assert!(got >= lo - 2 && got <= hi + 2, "({u}, {v}): {got} outside {lo}..{hi}");
    }
    // The original's translation model: frames go missing or land wrong.
    let rep_t = d.join("t.json");
    let o = run(&["stitch", "--motion", "translation", "-o", d.join("t.png").to_str().unwrap(), "--report", rep_t.to_str().unwrap()], &[&frames_dir]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = report(&rep_t);
    let worst = t["frames"].as_array().unwrap().iter().enumerate().map(|(i, f)| match (f["x"].as_f64(), f["y"].as_f64()) {
        (Some(x), Some(y)) => {
            let (a, b) = (Similarity::translation((x, y)).apply(c), truth[i].apply(c));
            (a.0 - b.0).hypot(a.1 - b.1)
        }
        _ => f64::INFINITY,
    });
    assert!(worst.fold(0.0, f64::max) > 2.0, "{diff:?}");
    if std::env::var("KEEP").is_err() {
        let _ = std::fs::remove_dir_all(&d);
    }
}

/// A sweep across a featureless band that never comes back: the report lists two islands,
/// the frames the panorama does not hold say `island` with their place on their island,
/// and `--islands` writes that island as its own panorama.
#[test]
fn an_island_the_panorama_does_not_hold_is_reported_and_written() {
    use common::footage::{enlarged, flat_band_sweep, photo, save_frames};
    let d = temp_dir("islands");
    let (frames, origins, _) = flat_band_sweep(&enlarged(&photo("cones"), 2.0), 5);
    let dir = d.join("frames");
    save_frames(&frames, &dir);
    let (out, rep_path, apart) = (d.join("pano.png"), d.join("report.json"), d.join("apart"));
    let o = run(&["stitch", "-o", out.to_str().unwrap(), "--report", rep_path.to_str().unwrap(), "--islands", apart.to_str().unwrap()], &[&dir]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("on islands the panorama does not hold"), "{stdout}");
    let rep = report(&rep_path);
    let islands = rep["islands"].as_array().unwrap();
    assert_eq!(islands.len(), 2, "{islands:?}");
    let apart_island = islands.iter().find(|i| i["in_panorama"] == false).expect("an island off the panorama");
    let first = apart_island["first_frame"].as_u64().unwrap() as usize;
    assert!(islands.iter().all(|i| i["joined_by"].as_array().unwrap().is_empty()));
    // Each frame of that island sits where the truth puts it relative to the island's first.
    let on_island: Vec<&Value> = rep["frames"].as_array().unwrap().iter().filter(|f| f["status"] == "island").collect();
    assert_eq!(on_island.len() as u64, apart_island["frames"].as_u64().unwrap());
    assert_eq!(rep["quality"]["frames_on_islands"].as_u64().unwrap(), on_island.len() as u64);
    for f in &on_island {
        let i = f["index"].as_u64().unwrap() as usize;
        assert_eq!(f["island"].as_u64(), Some(first as u64));
        let want = (origins[i].0 - origins[first].0, origins[i].1 - origins[first].1);
        let got = (f["x"].as_f64().unwrap(), f["y"].as_f64().unwrap());
        assert!((got.0 - want.0).hypot(got.1 - want.1) < 1.0, "frame {i}: {got:?} against {want:?}");
    }
    let written = io::load(&apart.join(format!("island-{first}.png"))).unwrap();
    let span = origins[on_island.iter().map(|f| f["index"].as_u64().unwrap() as usize).max().unwrap()].0 - origins[first].0;
    // The sweep's rows wander up to 3 px.
    assert!((160..=164).contains(&written.size().1), "{:?}", written.size());
    assert!((written.size().0 as f64 - (200.0 + span)).abs() <= 2.0, "{:?}, span {span}", written.size());
    assert_eq!(rep["run"]["islands_written"].as_array().unwrap().len(), 1);
}
