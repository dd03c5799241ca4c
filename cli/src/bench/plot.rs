//! `tessera bench <suite> --plot DIR`: the figures people compare, drawn from the run's
//! records as SVG (the `plotters` crate; text is left to the viewer's fonts):
//!
//! * `time_vs_<key>.svg`: every series timed over one parameter (`m`, the window; `radius`;
//!   `sigma`; `threads`), the median time against it, one line per case and backend, log
//!   scales where the figures span more than a decade;
//! * `pairs_per_s_vs_template_size.svg`: registration speed against the template side
//!   (`rsz`) for the cases that time a number of pairs, per backend;
//! * `backends.svg`: each case timed on more than one backend in the run (the GPU suite times
//!   the CPU beside the device), the medians side by side.
//!
//! The figures are made from the records alone, so a suite's new series is drawn without a
//! change here.

use anyhow::{bail, Context, Result};
use plotters::prelude::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The parameters a series may sweep, with the axis title each gets.
const SWEEPS: [(&str, &str); 5] = [("m", "window side m (px)"), ("radius", "radius (px)"), ("sigma", "sigma (px)"), ("threads", "threads"), ("rsz", "template side (px)")];

/// One line of a figure: its label and points `(x, y)`, sorted by x.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// A timed record's median (or, with `pairs` in its parameters, pairs per second).
fn timed(r: &Value) -> Option<f64> {
    r["median_ms"].as_f64().filter(|&ms| ms > 0.0)
}

/// The other parameters of `params` than `key` and the run's count of pairs, as a label
/// part (`kernel=fused`), in their order.
fn rest_of(params: &Value, key: &str) -> String {
    params.as_object().map_or_else(String::new, |o| o.iter().filter(|(k, _)| *k != key && *k != "pairs").map(|(k, v)| format!("{k}={}", v.as_str().map_or_else(|| v.to_string(), str::to_owned))).collect::<Vec<_>>().join(" "))
}

/// The lines of `results` that sweep `key`: records grouped by name, backend and their
/// other parameters, a line where a group holds at least two values of `key`; y is the
/// median in ms, or pairs per second where `pairs_per_s` (records with `pairs`).
pub fn sweep_lines(results: &[Value], key: &str, pairs_per_s: bool) -> Vec<Line> {
    let mut groups: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for r in results {
        let (Some(x), Some(ms)) = (r["params"][key].as_f64(), timed(r)) else { continue };
        let y = match (pairs_per_s, r["params"]["pairs"].as_f64()) {
            (true, Some(pairs)) => 1000.0 * pairs / ms,
            (true, None) => continue,
            (false, _) => ms,
        };
        let rest = rest_of(&r["params"], key);
        let label = format!("{} ({}{}{})", r["name"].as_str().unwrap_or("?"), r["backend"].as_str().unwrap_or("?"), if rest.is_empty() { "" } else { ", " }, rest);
        groups.entry(label).or_default().push((x, y));
    }
    groups
        .into_iter()
        .filter(|(_, p)| p.len() >= 2)
        .map(|(label, mut points)| {
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Line { label, points }
        })
        .collect()
}

/// The cases timed on more than one backend: `(case, [(backend, ms)])`, in the records'
/// order.
pub fn backend_pairs(results: &[Value]) -> Vec<(String, Vec<(String, f64)>)> {
    let mut cases: Vec<(String, Vec<(String, f64)>)> = Vec::new();
    for r in results {
        let Some(ms) = timed(r) else { continue };
        let case = format!("{} {}", r["name"].as_str().unwrap_or("?"), rest_of(&r["params"], ""));
        let backend = r["backend"].as_str().unwrap_or("?").to_owned();
        match cases.iter_mut().find(|(c, _)| *c == case) {
            Some((_, b)) if !b.iter().any(|(name, _)| *name == backend) => b.push((backend, ms)),
            Some(_) => {}
            None => cases.push((case, vec![(backend, ms)])),
        }
    }
    cases.retain(|(_, b)| b.len() >= 2);
    cases
}

/// Writes the figures of `results` (one suite's run on `machine`) into `dir`, made if
/// missing; returns the files written. Errors: `dir` is not a folder, a file cannot be
/// written.
pub fn write(dir: &Path, suite: &str, machine: &str, results: &[Value]) -> Result<Vec<PathBuf>> {
    if dir.exists() && !dir.is_dir() {
        bail!("--plot {}: not a folder", dir.display());
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot make the folder {}", dir.display()))?;
    let mut written = Vec::new();
    for (key, axis) in SWEEPS {
        if key == "rsz" {
            let lines = sweep_lines(results, key, true);
            if !lines.is_empty() {
                let path = dir.join("pairs_per_s_vs_template_size.svg");
                line_chart(&path, &format!("{suite}: registration speed against template size ({machine})"), axis, "pairs per second", &lines)?;
                written.push(path);
            }
            continue;
        }
        let lines = sweep_lines(results, key, false);
        if !lines.is_empty() {
            let path = dir.join(format!("time_vs_{key}.svg"));
            line_chart(&path, &format!("{suite}: time against {key} ({machine})"), axis, "median time (ms)", &lines)?;
            written.push(path);
        }
    }
    let pairs = backend_pairs(results);
    if !pairs.is_empty() {
        let path = dir.join("backends.svg");
        bar_chart(&path, &format!("{suite}: backends side by side ({machine})"), &pairs)?;
        written.push(path);
    }
    Ok(written)
}

/// The range of `values` padded for a chart, and whether it spans more than a decade
/// (drawn on a log scale then; all values positive).
fn span(values: impl Iterator<Item = f64> + Clone) -> (f64, f64, bool) {
    let (lo, hi) = values.fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let log = lo > 0.0 && hi / lo > 10.0;
    if log {
        (lo / 1.3, hi * 1.3, true)
    } else {
        let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.05).max(1e-9);
        ((lo - pad).max(if lo >= 0.0 { 0.0 } else { f64::MIN }), hi + pad, false)
    }
}

/// Draws into a temporary file renamed over `path` when complete: a run that stops midway
/// leaves no half-drawn figure.
fn line_chart(path: &Path, title: &str, x_title: &str, y_title: &str, lines: &[Line]) -> Result<()> {
    tessera::io::write_atomically(path, |part| draw_lines(part, title, x_title, y_title, lines)).with_context(|| format!("cannot write {}", path.display()))
}

fn draw_lines(path: &Path, title: &str, x_title: &str, y_title: &str, lines: &[Line]) -> Result<()> {
    let xs = lines.iter().flat_map(|l| l.points.iter().map(|p| p.0));
    let ys = lines.iter().flat_map(|l| l.points.iter().map(|p| p.1));
    let (x, y) = (span(xs), span(ys));
    let root = SVGBackend::new(path, (1000, 640)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut builder = ChartBuilder::on(&root);
    builder.caption(title, ("sans-serif", 18)).margin(12).x_label_area_size(44).y_label_area_size(70);
    // The four scale combinations are four chart types.
    macro_rules! draw {
        ($xr:expr, $yr:expr) => {{
            let mut chart = builder.build_cartesian_2d($xr, $yr)?;
            chart.configure_mesh().x_desc(x_title).y_desc(y_title).max_light_lines(2).draw()?;
            for (i, l) in lines.iter().enumerate() {
                let colour = Palette99::pick(i).to_rgba();
                chart.draw_series(LineSeries::new(l.points.iter().copied(), colour.stroke_width(2)))?.label(l.label.as_str()).legend(move |(a, b)| PathElement::new(vec![(a, b), (a + 20, b)], colour.stroke_width(2)));
                chart.draw_series(l.points.iter().map(|&p| Circle::new(p, 3, colour.filled())))?;
            }
            chart.configure_series_labels().position(SeriesLabelPosition::UpperRight).background_style(WHITE.mix(0.85)).border_style(BLACK).draw()?;
        }};
    }
    match (x.2, y.2) {
        (true, true) => draw!((x.0..x.1).log_scale(), (y.0..y.1).log_scale()),
        (true, false) => draw!((x.0..x.1).log_scale(), y.0..y.1),
        (false, true) => draw!(x.0..x.1, (y.0..y.1).log_scale()),
        (false, false) => draw!(x.0..x.1, y.0..y.1),
    }
    root.present()?;
    Ok(())
}

/// [`line_chart`]'s bars: drawn into a temporary file renamed over `path`.
fn bar_chart(path: &Path, title: &str, cases: &[(String, Vec<(String, f64)>)]) -> Result<()> {
    tessera::io::write_atomically(path, |part| draw_bars(part, title, cases)).with_context(|| format!("cannot write {}", path.display()))
}

fn draw_bars(path: &Path, title: &str, cases: &[(String, Vec<(String, f64)>)]) -> Result<()> {
    let backends: Vec<String> = cases.iter().flat_map(|(_, b)| b.iter().map(|(n, _)| n.clone())).fold(Vec::new(), |mut v, n| {
        if !v.contains(&n) {
            v.push(n);
        }
        v
    });
    let (lo, hi, _) = span(cases.iter().flat_map(|(_, b)| b.iter().map(|(_, ms)| *ms)));
    let (lo, hi) = (lo.max(hi * 1e-6).min(hi / 10.0), hi * 3.0);
    let rows = cases.len() as f64;
    let root = SVGBackend::new(path, (1000, (120 + 46 * cases.len()) as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root).caption(title, ("sans-serif", 18)).margin(12).x_label_area_size(44).y_label_area_size(10).build_cartesian_2d((lo..hi).log_scale(), 0.0..rows)?;
    chart.configure_mesh().x_desc("median time (ms), log scale").disable_y_mesh().y_labels(0).draw()?;
    let bar = 0.7 / backends.len() as f64;
    for (k, backend) in backends.iter().enumerate() {
        let colour = Palette99::pick(k).to_rgba();
        let bars = cases.iter().enumerate().filter_map(|(i, (_, b))| {
            let ms = b.iter().find(|(n, _)| n == backend)?.1;
            let top = rows - i as f64 - 0.25 - k as f64 * bar;
            Some(Rectangle::new([(lo, top - bar), (ms, top)], colour.filled()))
        });
        chart.draw_series(bars)?.label(backend.as_str()).legend(move |(a, b)| Rectangle::new([(a, b - 5), (a + 16, b + 5)], colour.filled()));
    }
    chart.draw_series(cases.iter().enumerate().map(|(i, (case, b))| {
        let figures = b.iter().map(|(n, ms)| format!("{n} {ms:.3} ms")).collect::<Vec<_>>().join(", ");
        Text::new(format!("{case}: {figures}"), (lo, rows - i as f64 - 0.05), ("sans-serif", 12))
    }))?;
    chart.configure_series_labels().position(SeriesLabelPosition::LowerRight).background_style(WHITE.mix(0.85)).border_style(BLACK).draw()?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rec(name: &str, backend: &str, params: Value, ms: f64) -> Value {
        json!({"name": name, "params": params, "backend": backend, "median_ms": ms})
    }

    #[test]
    fn a_sweep_is_a_line_per_case_and_backend_and_pairs_become_pairs_per_second() {
        let results = vec![
            rec("box_u8", "cpu", json!({"w": 64, "h": 64, "m": 9}), 2.0),
            rec("box_u8", "cpu", json!({"w": 64, "h": 64, "m": 3}), 1.0),
            rec("box_u8", "cuda", json!({"w": 64, "h": 64, "m": 3}), 0.1),
            rec("box_u8", "cuda", json!({"w": 64, "h": 64, "m": 9}), 0.2),
            rec("gauss", "cpu", json!({"sigma": 2.0}), 1.0),
            json!({"name": "box_u8_flatness", "params": {"cases": 2}, "backend": "cpu", "value": 2.0}),
            rec("curve", "cpu", json!({"rsz": 25, "pairs": 10.0}), 100.0),
            rec("curve", "cpu", json!({"rsz": 31, "pairs": 10.0}), 200.0),
        ];
        let lines = sweep_lines(&results, "m", false);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0], Line { label: "box_u8 (cpu, w=64 h=64)".into(), points: vec![(3.0, 1.0), (9.0, 2.0)] });
        assert_eq!(lines[1].points, vec![(3.0, 0.1), (9.0, 0.2)]);
        assert!(sweep_lines(&results, "sigma", false).is_empty(), "one point is no line");
        assert_eq!(sweep_lines(&results, "rsz", true)[0].points, vec![(25.0, 100.0), (31.0, 50.0)]);
        let pairs = backend_pairs(&results);
        assert_eq!(pairs.len(), 2);
        assert_eq!(pairs[0].1, vec![("cpu".to_string(), 2.0), ("cuda".to_string(), 0.2)]);
    }

    #[test]
    fn the_figures_are_svg_files_and_a_file_in_place_of_the_folder_is_an_error() {
        let dir = std::env::temp_dir().join(format!("tessera-plot-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let results: Vec<Value> = [3.0, 9.0, 31.0, 255.0].iter().flat_map(|&m| [rec("box_f32", "cpu", json!({"m": m}), m * 0.01 + 0.5), rec("box_f32", "cuda", json!({"m": m}), 0.05)]).collect();
        let written = write(&dir, "filters", "test machine", &results).unwrap();
        assert_eq!(written, vec![dir.join("time_vs_m.svg"), dir.join("backends.svg")]);
        for f in &written {
            let svg = std::fs::read_to_string(f).unwrap();
            assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{}", f.display());
        }
        let lines = std::fs::read_to_string(dir.join("time_vs_m.svg")).unwrap();
        assert!(lines.contains("box_f32 (cpu)") && lines.contains("box_f32 (cuda)") && lines.contains("window side m"));
        assert!(std::fs::read_to_string(dir.join("backends.svg")).unwrap().contains("cuda 0.050 ms"));
        let file = dir.join("time_vs_m.svg");
        assert!(format!("{:#}", write(&file, "filters", "m", &results).unwrap_err()).contains("not a folder"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
