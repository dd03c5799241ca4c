//! The `tessera` command line end to end: files in, files out, errors as messages.

use crate::common;

use std::path::PathBuf;
use tessera::filter::{box_sum, mean_filter, BoxParams};
use tessera::{io, AnyImage, Border, Image, Parallelism};
use common::tessera;

fn temp_dir(name: &str) -> PathBuf {
    common::temp_dir("tessera-cli", name)
}

fn sample() -> Image<u8> {
    common::pattern(97, 61)
}

#[test]
fn mean_on_a_png_matches_the_library() {
    let d = temp_dir("mean");
    let input = d.join("in.png");
    io::save(&sample().into(), &input).unwrap();
    let out = d.join("out.png");
    let st = tessera().args(["mean", "-m", "7", "--backend", "cpu"]).arg(&input).arg("-o").arg(&out).status().unwrap();
    assert!(st.success());
    let AnyImage::U8(got) = io::load(&out).unwrap() else { panic!("expected 8-bit output") };
    let mut want = Image::<u8>::new(97, 61).unwrap();
    mean_filter(sample().view(), want.view_mut(), &BoxParams::square(7, Border::Reflect101), Parallelism::Sequential).unwrap();
    assert_eq!(got, want);
}

#[test]
fn box_writes_exact_32bit_sums_as_tiff() {
    let d = temp_dir("box");
    let input = d.join("in.pgm");
    io::save(&sample().into(), &input).unwrap();
    let out = d.join("sums.tif");
    let st = tessera().args(["box", "--width", "5", "--height", "3", "--border", "replicate"]).arg(&input).arg("-o").arg(&out).status().unwrap();
    assert!(st.success());
    let AnyImage::U32(got) = io::load(&out).unwrap() else { panic!("expected 32-bit integer output") };
    let mut want = Image::<u32>::new(97, 61).unwrap();
    let p = BoxParams { width: 5, height: 3, border: Border::Replicate };
    box_sum(sample().view(), want.view_mut(), &p, Parallelism::Sequential).unwrap();
    assert_eq!(got, want);
}

#[test]
fn several_inputs_go_to_a_directory() {
    let d = temp_dir("many");
    let inputs: Vec<PathBuf> = (0..3).map(|i| d.join(format!("f{i}.png"))).collect();
    for p in &inputs {
        io::save(&sample().into(), p).unwrap();
    }
    let out = d.join("out");
    let st = tessera().arg("mean").args(&inputs).arg("-o").arg(&out).status().unwrap();
    assert!(st.success());
    for i in 0..3 {
        assert!(out.join(format!("f{i}.png")).is_file());
    }
}

#[test]
fn errors_are_messages_not_panics() {
    let d = temp_dir("errors");
    let input = d.join("in.png");
    io::save(&sample().into(), &input).unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["mean", "-m", "0"], "window width"),
        (vec!["mean", "-m", "5000"], "window width"),
        (vec!["mean", "--border", "constant:3.5"], "border constant"),
        (vec!["mean", "--border", "sideways"], "unknown border"),
        (vec!["gauss", "--sigma=-1"], "sigma"),
        (vec!["gauss", "--sigma", "NaN"], "sigma"),
        (vec!["mean", "--backend", "cuda"], "no CUDA device"),
    ];
    for (args, needle) in cases {
        let out = tessera().args(&args).arg(&input).arg("-o").arg(d.join("x.png")).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    // A missing file and a file that is not an image.
    let not_image = d.join("notes.png");
    std::fs::write(&not_image, b"not an image").unwrap();
    for bad in [d.join("missing.png"), not_image] {
        let out = tessera().arg("mean").arg(&bad).arg("-o").arg(d.join("y.png")).output().unwrap();
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read image"));
    }
}

#[test]
fn auto_backend_falls_back_to_the_cpu_and_says_so() {
    let d = temp_dir("auto");
    let input = d.join("in.png");
    io::save(&sample().into(), &input).unwrap();
    let out = tessera().args(["mean", "--backend", "auto"]).arg(&input).arg("-o").arg(d.join("o.png")).output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("falling back to the CPU"));
}

#[test]
fn every_subcommand_has_help() {
    for sub in ["box", "mean", "gauss", "bench"] {
        let out = tessera().args([sub, "--help"]).output().unwrap();
        assert!(out.status.success(), "{sub} --help");
        assert!(String::from_utf8_lossy(&out.stdout).contains("Usage"));
    }
}

/// A case `--filter` leaves out is not run, and nothing is recorded for it: no count or
/// derived figure of a run that did not happen (a zero there would read as a measurement).
#[test]
fn bench_records_nothing_for_the_cases_its_filter_leaves_out() {
    for suite in ["filters", "variance", "stereo", "stitch", "gpu"] {
        let out = tessera().args(["bench", suite, "--quick", "--json", "--filter", "no_case_has_this_name"]).output().unwrap();
        assert!(out.status.success(), "{suite}: {}", String::from_utf8_lossy(&out.stderr));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(json["suite"], suite);
        assert_eq!(json["results"].as_array().map(Vec::len), Some(0), "{suite}: {}", json["results"]);
    }
}

#[test]
fn bench_records_the_box_series_interleaved_with_their_flatness() {
    let plots = std::env::temp_dir().join(format!("tessera-bench-plots-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&plots);
    let out = tessera()
        .args(["bench", "filters", "--quick", "--json", "--filter", "box_u8_recursive_1thread", "--plot"])
        .arg(&plots)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["suite"], "filters");
    let results = json["results"].as_array().unwrap();
    let times: Vec<f64> = results
        .iter()
        .filter(|r| r["name"] == "box_u8_recursive_1thread")
        .map(|r| r["median_ms"].as_f64().unwrap())
        .collect();
    assert_eq!(times.len(), 8, "one median per window size");
    assert!(times.iter().all(|&t| t > 0.0));
    let flat = results.iter().find(|r| r["name"] == "box_u8_recursive_1thread_flatness").unwrap();
    let (lo, hi) = times.iter().fold((f64::MAX, 0f64), |(l, h), &t| (l.min(t), h.max(t)));
    let ratio = flat["value"].as_f64().unwrap();
    assert!((ratio - hi / lo).abs() < 0.01 * ratio, "flatness {ratio} vs medians {times:?}");
    // The series drawn against the window size.
    let svg = std::fs::read_to_string(plots.join("time_vs_m.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("box_u8_recursive_1thread (cpu, w=1024 h=1024)"), "{svg}");
    // A file where the folder should be is refused before the suite runs.
    let file = plots.join("time_vs_m.svg");
    let out = tessera().args(["bench", "filters", "--quick", "--plot"]).arg(&file).output().unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("not a folder"));
    std::fs::remove_dir_all(&plots).unwrap();
}
